"""Weight initialisers by name (config key `model.init`); biases always start at zero."""

from typing import Callable

import jax
from flax import nnx

from ffn_research import config as config_lib

Initializer = Callable[..., jax.Array]

INITS: dict[str, Initializer] = {
    # Glorot & Bengio 2010; the original Transformer's choice.
    'xavier_uniform': nnx.initializers.xavier_uniform(),
    'lecun_normal': nnx.initializers.lecun_normal(),
    'he_normal': nnx.initializers.he_normal(),
    # Scaled small init: std = 0.1 / sqrt(fan_in), a tenth of lecun_normal.
    'small': nnx.initializers.variance_scaling(0.01, 'fan_in', 'truncated_normal'),
}


def get(name: str) -> Initializer:
  if name not in INITS:
    raise ValueError(f'model.init={name!r} is unknown; allowed: {", ".join(INITS)}')
  return INITS[name]


def validate(key: str, name: str) -> None:
  config_lib.one_of(key, name, INITS)
