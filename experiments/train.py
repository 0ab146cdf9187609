"""Train one config.

  python -m experiments.train --config=configs/regression.py --workdir=runs/quickstart
  python -m experiments.train --config=configs/regression.py:sin --config.model.d_ff=512

JAX's own flags work too (e.g. --jax_debug_nans, --jax_platforms=cpu).
"""

import sys

import jax
from absl import app, flags, logging
from ml_collections import config_flags

from ffn_research import config as config_lib
from ffn_research import io as io_lib
from ffn_research import sweep, train

config_flags.DEFINE_config_file('config', None, 'Config file (path[:arg]).', lock_config=True)
flags.DEFINE_string('workdir', None, 'Output folder; rerunning on it resumes.')
flags.DEFINE_string('compilation_cache_dir', '~/.cache/ffn_research/jax_compilation_cache',
                    'Persistent XLA compilation cache ("" disables it).')
flags.mark_flags_as_required(['config', 'workdir'])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # Orbax logs every save at INFO
  if FLAGS.compilation_cache_dir:
    sweep.enable_compilation_cache(FLAGS.compilation_cache_dir)
  try:
    summary = train.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  except (config_lib.ConfigError, io_lib.WorkdirConfigMismatch) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  sys.exit(0 if summary['status'] == 'completed' else 1)


if __name__ == '__main__':
  if error := config_lib.unknown_override_error(sys.argv):
    sys.exit(f'error: {error}')
  jax.config.config_with_absl()
  app.run(main)
