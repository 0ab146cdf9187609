"""Train one config.

  python -m experiments.train --config=configs/regression.py --workdir=runs/quickstart
  python -m experiments.train --config=configs/regression.py:sin --config.model.d_ff=512
"""

import sys

from absl import app, flags, logging
from ml_collections import config_flags

config_flags.DEFINE_config_file('config', None, 'Config file (path[:arg]).', lock_config=True)
flags.DEFINE_string('workdir', None, 'Output folder; rerunning on it resumes.')
flags.mark_flags_as_required(['config', 'workdir'])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # Orbax logs every save at INFO
  from ffn_research import config as config_lib  # pylint: disable=g-import-not-at-top
  from ffn_research import io as io_lib  # pylint: disable=g-import-not-at-top
  from ffn_research import train  # pylint: disable=g-import-not-at-top
  try:
    summary = train.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  except (config_lib.ConfigError, io_lib.WorkdirConfigMismatch) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  sys.exit(0 if summary['status'] == 'completed' else 1)


if __name__ == '__main__':
  from ffn_research.config import unknown_override_error  # pylint: disable=g-import-not-at-top
  if error := unknown_override_error(sys.argv):
    sys.exit(f'error: {error}')
  app.run(main)
