"""Toy regression with the bare FFN.

  python -m experiments.train --config=configs/regression.py --workdir=runs/quickstart
  python -m experiments.train --config=configs/regression.py:sin --workdir=runs/sin
  python -m experiments.train --config=configs/regression.py:teacher_student_moe --workdir=runs/moe

Arguments (after the colon): x_squared (default), sin, abs, step,
teacher_student, teacher_student_moe, random_labels.
"""

from ffn_research.config import default_config


def get_config(arg: str = 'x_squared'):
  config = default_config()
  arg = arg or 'x_squared'
  if arg in ('x_squared', 'sin', 'abs', 'step'):
    config.task.name = 'function'
    config.task.function = arg
  elif arg in ('teacher_student', 'teacher_student_moe'):
    config.task.name = 'teacher_student'
    config.model.d_model = 16
    config.model.d_ff = 64
    config.task.teacher_d_ff = 32
    if arg == 'teacher_student_moe':  # top-2 of 8 experts of width 64 (docs/moe.md)
      config.model.moe.num_experts = 8
      config.model.moe.top_k = 2
  elif arg == 'random_labels':
    config.task.name = 'random_labels'
    config.model.d_model = 16
    config.model.d_ff = 64
    config.task.num_points = 256  # h*d/4 = 256 at d_ff 64, d_model 16
    config.train.batch_size = 256
    config.train.steps = 4000
    config.train.learning_rate = 1e-2
  else:
    raise ValueError(
      f'unknown config argument {arg!r}; allowed: x_squared, sin, abs, step, '
      'teacher_student, teacher_student_moe, random_labels'
    )
  return config
