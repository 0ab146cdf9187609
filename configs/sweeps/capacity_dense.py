"""Dense FFN capacity: d_ff x activation x seeds.

  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py:quick --workdir=runs/cap_quick
  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py --workdir=runs/cap
  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py:memorization --workdir=runs/cap_mem
  python -m experiments.analyze --workdir=runs/cap

Arguments (VARIANTS): regression (default: fit x^2 on [-1, 1]; d_ff 4..1024, 6 activations, 3 seeds),
quick (4 widths x 2 activations x 2 seeds, 500 steps: under a minute on 2 CPU cores),
memorization (fact memorization with configs/memorization.py's transformer),
memorization_quick.
"""

import os

from ffn_research import configfile
from ffn_research import sweep
from ffn_research.config import default_config
from ffn_research.config import variant

ACTIVATIONS = ('relu', 'gelu', 'silu', 'swiglu', 'geglu', 'bilinear')


def _regression_config(steps):
  config = default_config()
  config.task.name = 'function'
  config.task.function = 'x_squared'
  config.train.steps = steps
  config.train.checkpoint_every = 0
  return config


def _memorization_config(max_steps=None):
  """configs/memorization.py's default (config files are loaded by path, not imported)."""
  config = configfile.get_config(os.path.join(os.path.dirname(__file__), '..', 'memorization.py'))
  if max_steps is not None:
    config.train.steps = min(config.train.steps, max_steps)
  return config


def _grid(widths, activations, seeds):
  return sweep.product(
    sweep.values('model.d_ff', widths),
    sweep.values('model.activation', activations),
    sweep.values('train.seed', range(seeds)),
  )


# name -> (get_config, get_sweep)
VARIANTS = {
  'regression': (
    lambda: _regression_config(2000),
    lambda: _grid([4, 8, 16, 32, 64, 128, 256, 512, 1024], ACTIVATIONS, 3),
  ),
  'quick': (lambda: _regression_config(500), lambda: _grid([4, 16, 64, 256], ['relu', 'swiglu'], 2)),
  'memorization': (_memorization_config, lambda: _grid([16, 32, 64, 128, 256, 512], ACTIVATIONS, 3)),
  'memorization_quick': (lambda: _memorization_config(500), lambda: _grid([16, 64], ['relu', 'swiglu'], 2)),
}


def get_config(arg: str = 'regression'):
  return variant(VARIANTS, arg or 'regression')[0]()


def get_sweep(arg: str = 'regression'):
  return variant(VARIANTS, arg or 'regression')[1]()
