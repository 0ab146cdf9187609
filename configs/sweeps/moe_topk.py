"""MoE capacity: num_experts x top_k x seeds on teacher-student regression.

  python -m experiments.sweep --config=configs/sweeps/moe_topk.py:quick --workdir=runs/moe_quick
  python -m experiments.sweep --config=configs/sweeps/moe_topk.py --workdir=runs/moe
  python -m experiments.analyze --workdir=runs/moe     # loss vs total and vs active params per top_k

Each expert is a zoo FFN of width model.d_ff; num_experts = 1, top_k = 1 is the dense
baseline. Runs with top_k > num_experts are left out.

Arguments: default (1..32 experts x top_k 1, 2, 4 x 3 seeds, 3000 steps),
quick (1, 4, 8 experts x top_k 1, 2 x 2 seeds, 400 steps: a few minutes on 2 CPU cores).
"""

from ffn_research import sweep
from ffn_research.config import default_config


def get_config(arg: str = ''):
  config = default_config()
  config.task.name = 'teacher_student'
  config.task.teacher_d_ff = 256  # a wide teacher: capacity, not optimisation, limits the student
  config.task.num_train = 4096
  config.model.d_model = 16
  config.model.d_ff = 16  # width of each expert
  config.train.steps = 3000
  config.train.learning_rate = 3e-3
  config.train.checkpoint_every = 0
  if arg == 'quick':
    config.train.steps = 400
  elif arg:
    raise ValueError(f'unknown argument {arg!r}; allowed: quick (or none)')
  return config


def get_sweep(arg: str = ''):
  experts, top_ks, seeds = [1, 2, 4, 8, 16, 32], [1, 2, 4], range(3)
  if arg == 'quick':
    experts, top_ks, seeds = [1, 4, 8], [1, 2], range(2)
  grid = sweep.product(
    sweep.values('model.moe.num_experts', experts),
    sweep.values('model.moe.top_k', top_ks),
    sweep.values('train.seed', seeds),
  )
  return [o for o in grid if o['model.moe.top_k'] <= o['model.moe.num_experts']]
