"""Activation registry: one name per FFN variant, plain or gated.

A plain FFN computes ``act(x W1) W2``; a gated FFN (Shazeer 2020, "GLU Variants
Improve Transformer") computes ``(gate(x W) * (x V)) W2``. Both families are
chosen by the same config key ``model.activation`` so that one sweep axis
crosses them.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ffn_research import config as config_lib

Activation = Callable[[jax.Array], jax.Array]


def relu2(x: jax.Array) -> jax.Array:
  """Squared ReLU (So et al. 2021, Primer)."""
  return jnp.square(jax.nn.relu(x))


def identity(x: jax.Array) -> jax.Array:
  return x


# Plain activations: act(x W1 + b1) W2 + b2.
PLAIN: dict[str, Activation] = {
  'relu': jax.nn.relu,
  'gelu': lambda x: jax.nn.gelu(x, approximate=False),  # exact x * Phi(x)
  'gelu_tanh': lambda x: jax.nn.gelu(x, approximate=True),
  'silu': jax.nn.silu,
  'relu2': relu2,
  'identity': identity,  # a linear control
  'tanh': jnp.tanh,  # saturating; a teacher none of the zoo's candidates represents exactly
}

# Gated activations: name -> gate function applied to x W before the product.
GATED: dict[str, Activation] = {
  'glu': jax.nn.sigmoid,
  'reglu': jax.nn.relu,
  'geglu': lambda x: jax.nn.gelu(x, approximate=False),
  'swiglu': jax.nn.silu,
  'bilinear': identity,
}

ALL_NAMES: tuple[str, ...] = tuple(PLAIN) + tuple(GATED)


def is_gated(name: str) -> bool:
  return name in GATED


def get(name: str) -> Activation:
  """The elementwise function of a plain activation or the gate of a gated one."""
  if name in PLAIN:
    return PLAIN[name]
  if name in GATED:
    return GATED[name]
  raise ValueError(f'model.activation={name!r} is unknown; allowed: {", ".join(ALL_NAMES)}')


def validate(key: str, name: str) -> None:
  config_lib.one_of(key, name, ALL_NAMES)
