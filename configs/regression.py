"""Toy regression with the bare FFN.

  python -m experiments.train --config=configs/regression.py --workdir=runs/quickstart
  python -m experiments.train --config=configs/regression.py:sin --workdir=runs/sin

Arguments (after the colon): x_squared (default), sin, abs, step,
teacher_student, random_labels.
"""

from ffn_research.config import default_config


def get_config(arg: str = 'x_squared'):
  config = default_config()
  arg = arg or 'x_squared'
  if arg in ('x_squared', 'sin', 'abs', 'step'):
    config.task.name = 'function'
    config.task.function = arg
  elif arg == 'teacher_student':
    config.task.name = 'teacher_student'
    config.model.d_model = 16
    config.model.d_ff = 64
    config.task.teacher_d_ff = 32
  elif arg == 'random_labels':
    config.task.name = 'random_labels'
    config.model.d_model = 16
    config.model.d_ff = 64
    config.task.num_points = 256  # h*d/4 = 256 at d_ff 64, d_model 16
    config.train.batch_size = 256
    config.train.steps = 4000
    config.train.learning_rate = 1e-2
  else:
    raise ValueError(f'unknown config argument {arg!r}; allowed: x_squared, sin, abs, step, '
                     'teacher_student, random_labels')
  return config
