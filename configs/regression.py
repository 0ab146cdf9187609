"""Toy regression with the bare FFN.

  python -m experiments.train --config=configs/regression.py --workdir=runs/quickstart
  python -m experiments.train --config=configs/regression.py:sin --workdir=runs/sin
  python -m experiments.train --config=configs/regression.py:teacher_student_moe --workdir=runs/moe

Arguments (after the colon): the names of VARIANTS, x_squared by default.
"""

from ffn_research.config import default_config
from ffn_research.config import set_paths
from ffn_research.config import variant

TEACHER_STUDENT = {'task.name': 'teacher_student', 'model.d_model': 16, 'model.d_ff': 64, 'task.teacher_d_ff': 32}

# name -> overrides of default_config()
VARIANTS = {
  'x_squared': {'task.name': 'function', 'task.function': 'x_squared'},
  'sin': {'task.name': 'function', 'task.function': 'sin'},
  'abs': {'task.name': 'function', 'task.function': 'abs'},
  'step': {'task.name': 'function', 'task.function': 'step'},
  'teacher_student': TEACHER_STUDENT,
  # top-2 of 8 experts of width 64 (docs/moe.md)
  'teacher_student_moe': {**TEACHER_STUDENT, 'model.moe.num_experts': 8, 'model.moe.top_k': 2},
  'random_labels': {
    'task.name': 'random_labels',
    'model.d_model': 16,
    'model.d_ff': 64,
    'task.num_points': 256,  # h*d/4 = 256 at d_ff 64, d_model 16
    'train.batch_size': 256,
    'train.steps': 4000,
    'train.learning_rate': 1e-2,
  },
}


def get_config(arg: str = 'x_squared'):
  return set_paths(default_config(), variant(VARIANTS, arg or 'x_squared'))
