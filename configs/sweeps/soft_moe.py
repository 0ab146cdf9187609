"""Soft MoE vs top-2 token choice at matched parameters and FLOPs on teacher-student regression.

  python -m experiments.sweep --config=configs/sweeps/soft_moe.py --workdir=runs/soft_moe
  python -m experiments.analyze --workdir=runs/soft_moe

The task and training are configs/regression.py:teacher_student_moe's (d_model 16, teacher width 32,
1,024 training points, batch 256, 2,000 steps, cosine schedule). Arms (ARMS; counts from
models.model_counts, Soft MoE's FLOPs at its training group, the 256-row batch):

  topk_softmax   top-2 of 8 experts of width 64 (teacher_student_moe)     17,152 params, 8,448 FLOPs/token
  soft_matched   Soft MoE, 4 experts of width 121, 17 slots each           17,125 (-0.2%), 8,585 (+1.6%)
  soft_same      Soft MoE, the same 8 experts of width 64, 9 slots each    18,177 (+6.0%), 8,064 (-4.5%)
  soft_p1        Soft MoE, 8 experts of width 64, 1 slot each (the issue's --config.model.moe.router=soft)
                                                                           17,153, 896 (FLOPs / 9.4)
  dense_flops    dense FFN of width 132 (a reference)                       4,372, 8,448 (FLOPs matched)

Every arm at learning rates 3e-3 ... 1e-1 (traced: one program per arm) x seeds. docs/moe.md
reports each arm at the rate with the lowest mean held-out loss (1e-3 was worse for every arm
in a first run with 1e-3, 3e-3, 1e-2, where 1e-2 won for every arm: the grid moved up). Arguments: default (5 seeds),
quick (2 seeds, 300 steps: a smoke run).
"""

from ffn_research import sweep
from ffn_research.config import default_config

# arm -> overrides of the base config (all other keys as in get_config).
ARMS = {
  'topk_softmax': {
    'model.moe.router': 'topk_softmax',
    'model.moe.num_experts': 8,
    'model.d_ff': 64,
    'model.moe.slots_per_expert': 1,
  },
  'soft_matched': {
    'model.moe.router': 'soft',
    'model.moe.num_experts': 4,
    'model.d_ff': 121,
    'model.moe.slots_per_expert': 17,
  },
  'soft_same': {
    'model.moe.router': 'soft',
    'model.moe.num_experts': 8,
    'model.d_ff': 64,
    'model.moe.slots_per_expert': 9,
  },
  'soft_p1': {
    'model.moe.router': 'soft',
    'model.moe.num_experts': 8,
    'model.d_ff': 64,
    'model.moe.slots_per_expert': 1,
  },
  'dense_flops': {
    'model.moe.router': 'topk_softmax',
    'model.moe.num_experts': 0,
    'model.d_ff': 132,
    'model.moe.slots_per_expert': 1,
  },
}
LEARNING_RATES = (3e-3, 1e-2, 3e-2, 1e-1)


def get_config(arg: str = ''):
  config = default_config()
  config.task.name = 'teacher_student'
  config.task.teacher_d_ff = 32
  config.model.d_model = 16
  config.model.d_ff = 64
  config.model.moe.num_experts = 8
  config.model.moe.top_k = 2
  config.train.checkpoint_every = 0  # final checkpoint only
  if arg == 'quick':
    config.train.steps = 300
  elif arg:
    raise ValueError(f'unknown argument {arg!r}; allowed: quick (or none)')
  return config


def get_sweep(arg: str = ''):
  seeds = range(2) if arg == 'quick' else range(5)
  return sweep.product(
    [dict(a) for a in ARMS.values()],
    sweep.values('train.learning_rate', LEARNING_RATES),
    sweep.values('train.seed', seeds),
  )
