"""Reproduce a published or theoretical claim: run an ablation's sweeps, analyse, write a verdict.

  python -m experiments.reproduce --list
  python -m experiments.reproduce --ablation=universal_approximation --workdir=runs/repro --quick
  python -m experiments.reproduce --ablation=all --workdir=runs/repro_quick --quick
  python -m experiments.reproduce --ablation=universal_approximation --workdir=runs/repro --publish
  python -m experiments.reproduce --ablation=moe_topk --workdir=runs/repro --seed_offset=100   # fresh seeds
  python -m experiments.reproduce --update_readme     # Results sections from docs/results/*/report.json

Writes DIR/NAME/report.md, report.json and PNGs (DIR/index.md for --ablation=all). Rerunning
resumes: finished runs are not redone. See docs/reproduce.md.
"""

import sys

from absl import app
from absl import flags
from absl import logging

# Imports inside functions on purpose: listing and checking --ablation/--scale answers at once; jax
# and the ablations load only for a valid request.


flags.DEFINE_string('ablation', None, 'Ablation name, or "all" (see --list).')
flags.DEFINE_string('workdir', None, 'Output folder; rerunning on it resumes.')
flags.DEFINE_string('scale', 'full', 'smoke (seconds, tests), quick (<= 10 min on 2 cores), full, large.')
flags.DEFINE_bool('quick', False, 'Shorthand for --scale=quick.')
flags.DEFINE_bool('list', False, 'List the ablations with their claims and exit.')
flags.DEFINE_bool(
  'publish',
  False,
  'After running, copy the (full-scale) report to docs/results/NAME/ '
  'and regenerate the Results sections (README.md, docs/results/README.md).',
)
flags.DEFINE_bool(
  'update_readme',
  False,
  'Only regenerate the Results sections (README.md, '
  'docs/results/README.md) from every docs/results/*/report.json (e.g. after a merge) and exit.',
)
flags.DEFINE_string(
  'compilation_cache_dir',
  '~/.cache/ffn_research/jax_compilation_cache',
  'Persistent XLA compilation cache ("" disables it).',
)
flags.DEFINE_integer(
  'seed_offset',
  0,
  'Run seeds K ... K+n-1 instead of 0 ... n-1 (into DIR/NAME.seed_offsetK), to check that a verdict is not a '
  'property of the published seeds. Such a report is never published.',
)
flags.DEFINE_bool(
  'judge_only',
  False,
  'Judge the runs on disk and write the report without training anything or buying an extension (every planned '
  "run must be finished): a change to a study's wording or presentation lands without new runs.",
)
flags.DEFINE_bool('progress', True, 'Show progress bars.')
FLAGS = flags.FLAGS


def fail(msg: str) -> None:
  print(f'error: {msg}', file=sys.stderr)
  sys.exit(2)


def check_request(ablations, scale: str) -> None:
  """One line and exit 1 for a request that cannot run (flags that contradict, an unknown study or scale)."""
  if not FLAGS.ablation or not FLAGS.workdir:
    fail('--ablation and --workdir are required (or --list)')
  if FLAGS.quick and FLAGS['scale'].present and FLAGS.scale != 'quick':
    fail(f'--quick contradicts --scale={FLAGS.scale}')
  if scale not in ablations.SCALES:
    fail(f'--scale={scale!r} is unknown; allowed: {", ".join(ablations.SCALES)}')
  if FLAGS.ablation != 'all':
    try:
      ablations.check(FLAGS.ablation)
    except ablations.UnknownAblation as e:
      fail(str(e))
  if FLAGS.publish and scale != 'full':
    fail(f'--publish needs --scale=full (got {scale}); only full-scale reports may be published')
  if FLAGS.seed_offset < 0:
    fail(f'--seed_offset must be >= 0 (got {FLAGS.seed_offset})')
  if FLAGS.publish and FLAGS.seed_offset:
    fail('--publish runs on the published seeds: drop --seed_offset (a run on fresh seeds checks that report)')


def main(argv):
  if len(argv) > 1:
    fail(f'unexpected arguments {argv[1:]}')
  logging.set_verbosity(logging.WARNING)
  from ffn_research import ablations  # light: no jax yet

  scale = 'quick' if FLAGS.quick else FLAGS.scale
  if FLAGS.update_readme:
    from experiments import publish

    publish.update_readme()
    print(f'updated {publish.REPO_ROOT}/README.md and {publish.RESULTS_PAGE} from docs/results/*/report.json')
    return
  if not FLAGS.list:  # bad requests fail here, before jax and the ablations are imported
    check_request(ablations, scale)
  from experiments import publish
  from ffn_research import config as config_lib
  from ffn_research import io as io_lib
  from ffn_research import sweep
  from ffn_research.ablations import base
  from ffn_research.ablations import report
  from ffn_research.ablations import runner

  if FLAGS.list:
    for name in ablations.names():
      a = ablations.get(name)
      print(f'{name} [{", ".join(a.scales)}]: {a.claim}')
    return
  if FLAGS.compilation_cache_dir:
    sweep.enable_compilation_cache(FLAGS.compilation_cache_dir)
  try:
    if FLAGS.ablation != 'all':
      reports = [
        runner.run(
          FLAGS.ablation,
          FLAGS.workdir,
          scale,
          progress=FLAGS.progress,
          seed_offset=FLAGS.seed_offset,
          judge_only=FLAGS.judge_only,
        )
      ]
      failed = []
    else:
      reports, failed = runner.run_all(
        FLAGS.workdir, scale, progress=FLAGS.progress, seed_offset=FLAGS.seed_offset, judge_only=FLAGS.judge_only
      )
    if FLAGS.publish:
      for r in reports:
        publish.publish(r['name'], FLAGS.workdir)
  except (ablations.UnknownAblation, base.ReproduceError, config_lib.ConfigError, io_lib.WorkdirConfigMismatch) as e:
    fail(str(e))
  for r in reports:
    print(f'{r["name"]}: ' + '; '.join(report.outcome_text(v) for v in r['verdicts']) + f' — {r["headline"]}')
  if failed:
    fail(f'{len(failed)} ablation(s) failed: {", ".join(failed)} (see {FLAGS.workdir}/index.md)')


if __name__ == '__main__':
  app.run(main)
