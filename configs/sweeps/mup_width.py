"""Learning rate x width under both parametrizations: does the best rate stay put under μP?

  python -m experiments.sweep --config=configs/sweeps/mup_width.py --workdir=runs/mup_width --pad_flops_factor=1

The bare FFN (ReLU, d_model 16) on the teacher-student task of configs/regression.py (teacher
d_ff 32), 500 Adam steps; d_ff 64..4096 (base width 64: there 'mup' equals 'standard') x 9 peak
learning rates (half-decades 10^-3.5..10^0.5) x 'standard' / 'mup' x 3 seeds = 216 runs, about
6 minutes on 2 shared CPU cores with --pad_flops_factor=1 (padding the standard runs to d_ff 4096
costs 3x). docs/mup.md has the measured optimum per width.
Argument: quick (2 rates x 4 widths x both x 1 seed, 50 steps; a smoke run).
"""

from ffn_research import sweep
from ffn_research.config import default_config

WIDTHS = (64, 256, 1024, 4096)  # model.d_ff; the first is the base width
RATES = tuple(round(10 ** (e / 2), 6) for e in range(-7, 2))  # 3.2e-4 .. 3.2, half-decades
SEEDS = 3


def get_config(arg: str | None = None):
  if arg not in (None, '', 'quick'):
    raise ValueError(f'unknown argument {arg!r}; allowed: quick')
  config = default_config()
  config.task.name = 'teacher_student'  # y = teacher(x), x ~ N(0, I_16), a random ReLU FFN of width 32
  config.task.teacher_d_ff = 32
  config.model.d_model = 16  # input and output features
  config.model.mup_base_d_ff = WIDTHS[0]  # mup equals standard at d_ff 64
  config.train.steps = 50 if arg == 'quick' else 500
  config.train.warmup_steps = 5 if arg == 'quick' else 50  # then cosine decay to 0
  config.train.log_every = 50
  config.train.checkpoint_every = 0  # final checkpoint only
  return config


def get_sweep(arg: str | None = None):
  rates, seeds = (RATES[1::4], 1) if arg == 'quick' else (RATES, SEEDS)
  return sweep.product(
    sweep.values('model.parametrization', ['standard', 'mup']),
    sweep.values('model.d_ff', WIDTHS),
    sweep.values('train.learning_rate', rates),
    sweep.values('train.seed', range(seeds)),
  )
