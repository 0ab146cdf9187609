"""Seeds of one config: the quickstart model (configs/regression.py's default) trained N times.

  python -m experiments.sweep --config=configs/sweeps/seeds.py --workdir=runs/seeds       # 64 seeds
  python -m experiments.sweep --config=configs/sweeps/seeds.py:16 --workdir=runs/seeds16  # 16 seeds

Argument: the number of seeds (default 64), seeds 0..N-1. All runs share one shape, so they
train as one vmapped program (docs/sweeps.md); --config.KEY=VALUE changes the base of all runs
(e.g. --config.train.steps=500).
"""

import os

from ffn_research import configfile
from ffn_research import sweep

DEFAULT_SEEDS = 64  # runs when no argument is given (issue 20's 64-seed sweep throughput)


def _num_seeds(arg: str | None) -> int:
  """The argument as a positive number of seeds (DEFAULT_SEEDS when empty)."""
  if not arg:
    return DEFAULT_SEEDS
  if not arg.isdigit() or int(arg) < 1:
    raise ValueError(f'argument {arg!r} must be a positive number of seeds, e.g. configs/sweeps/seeds.py:16')
  return int(arg)


def get_config(arg: str | None = None):
  _num_seeds(arg)  # a bad argument fails here, before anything loads
  # The quickstart: configs/regression.py's default (x^2 on [-1, 1], ReLU FFN d_model 1, d_ff 64,
  # 2,000 Adam steps, checkpoints every 1,000 steps), loaded by path as every config file is.
  return configfile.get_config(os.path.join(os.path.dirname(__file__), '..', 'regression.py'))


def get_sweep(arg: str | None = None):
  # One axis: train.seed = 0..N-1; nothing else varies.
  return sweep.values('train.seed', range(_num_seeds(arg)))
