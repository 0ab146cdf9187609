"""Train one config.

  python -m experiments.train --config=configs/regression.py --workdir=runs/quickstart
  python -m experiments.train --config=configs/regression.py:sin --config.model.d_ff=512

Rerunning the same command resumes from the newest intact checkpoint (or does nothing when
the run is finished). Bad input exits with one line on stderr: 2 for a config, workdir or
memory problem, 1 for a run that failed or diverged.
"""

import sys

from absl import app
from absl import flags
from absl import logging

# Imports inside functions on purpose: a bad flag or config fails at once, before jax loads; jax
# registers its own flags just before app.run.


flags.DEFINE_string('workdir', None, 'Output folder; rerunning on it resumes.')
flags.DEFINE_string(
  'compilation_cache_dir',
  '~/.cache/ffn_research/jax_compilation_cache',
  'Persistent XLA compilation cache ("" disables it).',
)
flags.mark_flags_as_required(['workdir'])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # Orbax logs every save at INFO
  from ffn_research import config as config_lib
  from ffn_research import io as io_lib
  from ffn_research import loop
  from ffn_research import parallel
  from ffn_research import sweep

  if FLAGS.compilation_cache_dir:
    sweep.enable_compilation_cache(FLAGS.compilation_cache_dir)
  try:
    parallel.initialize_distributed(FLAGS.config.parallel)  # before anything starts JAX's backend
    summary = loop.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  except (config_lib.ConfigError, io_lib.WorkdirError, parallel.NotEnoughMemory) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  sys.exit(0 if summary['status'] == 'completed' else 1)


if __name__ == '__main__':
  from ffn_research import configfile
  from ffn_research.config import unknown_override_error

  if error := unknown_override_error(sys.argv):
    sys.exit(f'error: {error}')
  configfile.define_config_flag(sys.argv)
  import jax

  jax.config.config_with_absl()  # --jax_debug_nans, --jax_platforms, ...
  app.run(main)
