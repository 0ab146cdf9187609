"""Aggregate a sweep over seeds, fit power laws, plot and write a report.

  python -m experiments.analyze --workdir=runs/cap            # -> runs/cap/analysis/report.md

Rebuilds DIR/results.csv from every run summary first (merging all shards).
"""

import jax
from absl import app, flags

from ffn_research import analysis, sweep

flags.DEFINE_string('workdir', None, 'Sweep folder (holds sweep.json, runs/ and results.csv).')
flags.DEFINE_string('metric', 'eval_loss', 'Loss column to aggregate, plot and fit.')
flags.DEFINE_bool('merge', True, 'Rebuild results.csv from the run summaries first.')
flags.mark_flags_as_required(['workdir'])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if FLAGS.merge:
    sweep.write_results(FLAGS.workdir)
  print(f'wrote {analysis.analyze(FLAGS.workdir, FLAGS.metric)}')


if __name__ == '__main__':
  jax.config.config_with_absl()
  app.run(main)
