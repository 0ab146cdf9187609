"""Aggregate a sweep over seeds, fit power laws, plot and write a report.

  python -m experiments.analyze --workdir=runs/cap            # -> runs/cap/analysis/report.md

Rebuilds DIR/results.csv from every run summary first (merging all shards).
"""

import sys

from absl import app
from absl import flags

# Imports inside functions on purpose: a bad flag fails at once, before jax and pandas load; jax
# registers its own flags just before app.run.


flags.DEFINE_string('workdir', None, 'Sweep folder (holds sweep.json, runs/ and results.csv).')
flags.DEFINE_string('metric', 'eval_loss', 'Loss column to aggregate, plot and fit.')
flags.DEFINE_bool('merge', True, 'Rebuild results.csv from the run summaries first.')
flags.mark_flags_as_required(['workdir'])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  from ffn_research import analysis
  from ffn_research import io
  from ffn_research import sweep

  try:
    if FLAGS.merge:  # every run summary on disk, whichever shard wrote it (under the results lock)
      sweep.write_results(FLAGS.workdir)
    print(f'wrote {analysis.analyze(FLAGS.workdir, FLAGS.metric)}')
  except (FileNotFoundError, io.WorkdirError) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)


if __name__ == '__main__':
  import jax

  jax.config.config_with_absl()  # --jax_debug_nans, --jax_platforms, ...
  app.run(main)
