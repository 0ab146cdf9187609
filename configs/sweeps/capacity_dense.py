"""Dense FFN capacity: d_ff x activation x seeds.

  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py:quick --workdir=runs/cap_quick
  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py --workdir=runs/cap
  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py:memorization --workdir=runs/cap_mem
  python -m experiments.analyze --workdir=runs/cap

Arguments: regression (default: fit x^2 on [-1, 1]; d_ff 4..1024, 6 activations, 3 seeds),
quick (4 widths x 2 activations x 2 seeds, 500 steps: under a minute on 2 CPU cores),
memorization (fact memorization with configs/memorization.py's transformer),
memorization_quick.
"""

import os

from ffn_research import configfile
from ffn_research import sweep
from ffn_research.config import default_config

ACTIVATIONS = ('relu', 'gelu', 'silu', 'swiglu', 'geglu', 'bilinear')


def _memorization_config():
  """configs/memorization.py's default (config files are loaded by path, not imported)."""
  return configfile.get_config(os.path.join(os.path.dirname(__file__), '..', 'memorization.py'))


def get_config(arg: str = 'regression'):
  arg = arg or 'regression'
  if arg.startswith('memorization'):
    config = _memorization_config()
    if arg == 'memorization_quick':
      config.train.steps = min(config.train.steps, 500)
    return config
  config = default_config()
  config.task.name = 'function'
  config.task.function = 'x_squared'
  config.train.steps = 2000
  config.train.checkpoint_every = 0
  if arg == 'quick':
    config.train.steps = 500
  elif arg != 'regression':
    raise ValueError(f'unknown argument {arg!r}; allowed: regression, quick, memorization, memorization_quick')
  return config


def get_sweep(arg: str = 'regression'):
  arg = arg or 'regression'
  if arg == 'quick':
    return sweep.product(
      sweep.values('model.d_ff', [4, 16, 64, 256]),
      sweep.values('model.activation', ['relu', 'swiglu']),
      sweep.values('train.seed', range(2)),
    )
  if arg == 'memorization_quick':
    return sweep.product(
      sweep.values('model.d_ff', [16, 64]),
      sweep.values('model.activation', ['relu', 'swiglu']),
      sweep.values('train.seed', range(2)),
    )
  widths = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
  if arg == 'memorization':
    widths = [16, 32, 64, 128, 256, 512]
  return sweep.product(
    sweep.values('model.d_ff', widths),
    sweep.values('model.activation', ACTIVATIONS),
    sweep.values('train.seed', range(3)),
  )
