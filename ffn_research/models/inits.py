"""Weight initialisers by name (config key `model.init`); biases always start at zero.

Every name is a variance-scaling rule (jax.nn.initializers.variance_scaling semantics):
std = sqrt(scale / n) with n the fan-in, fan-out or their mean. `Init.__call__` draws a
whole matrix like the jax initialiser (attention, embeddings, MoE experts); `per_unit`
draws an FFN's weights unit-major, scaled by the true fan-in/fan-out, so a hidden unit's
weights do not depend on how wide the matrix is allocated (d_ff padding: ffn_research.programs).
Both can evaluate the rule at other fans, times a gain (μP: models/mup.py `init_fans`).
"""

from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp

from ffn_research import config as config_lib

# Standard deviation of a standard normal truncated to (-2, 2) (as jax's variance_scaling).
TRUNCATED_NORMAL_STD = 0.87962566103423978


class Fans(NamedTuple):
  """Where a rule is evaluated: std = rule.std(fan_in, fan_out) * gain (None: 1). μP's are the base
  model's fans and a width-dependent gain (models/mup.py `init_fans`); fans and gain may be traced."""

  fan_in: Any
  fan_out: Any
  gain: Any = None


class Init(NamedTuple):
  """variance_scaling(scale, mode, distribution)."""

  scale: float
  mode: Literal['fan_in', 'fan_out', 'fan_avg']
  distribution: Literal['truncated_normal', 'normal', 'uniform']

  def __call__(self, key: jax.Array, shape, dtype=jnp.float32, fans: Fans | None = None) -> jax.Array:
    """A whole (fan_in, fan_out) matrix, as jax.nn.initializers.variance_scaling draws it; with `fans`,
    the same draws times fans' std over the shape's (one float32 factor: exactly 1 where they agree)."""
    w = jax.nn.initializers.variance_scaling(self.scale, self.mode, self.distribution)(key, shape, dtype)
    if fans is None:
      return w
    factor = self.std(fans.fan_in, fans.fan_out) / self.std(shape[-2], shape[-1])
    if fans.gain is not None:
      factor = factor * jnp.float32(fans.gain)
    return w * factor.astype(dtype)

  def std(self, fan_in, fan_out) -> jax.Array:
    """sqrt(scale / n) in float32; fans may be traced."""
    fan_in, fan_out = jnp.float32(fan_in), jnp.float32(fan_out)
    n = {'fan_in': fan_in, 'fan_out': fan_out, 'fan_avg': (fan_in + fan_out) / 2}[self.mode]
    return jnp.sqrt(jnp.float32(self.scale) / n)

  def raw_sample(self, key: jax.Array, shape) -> jax.Array:
    """Zero-mean draws of the rule's distribution with standard deviation SAMPLE_STD[distribution]."""
    if self.distribution == 'truncated_normal':
      return jax.random.truncated_normal(key, -2, 2, shape, jnp.float32)
    if self.distribution == 'normal':
      return jax.random.normal(key, shape, jnp.float32)
    return jax.random.uniform(key, shape, jnp.float32, -1)


# Standard deviation of Init.raw_sample: a normal truncated to (-2, 2), N(0, 1), U(-1, 1).
SAMPLE_STD = {'truncated_normal': TRUNCATED_NORMAL_STD, 'normal': 1.0, 'uniform': 3**-0.5}


INITS: dict[str, Init] = {
  # Glorot & Bengio 2010; the original Transformer's choice.
  'xavier_uniform': Init(1.0, 'fan_avg', 'uniform'),
  'lecun_normal': Init(1.0, 'fan_in', 'truncated_normal'),
  'he_normal': Init(2.0, 'fan_in', 'truncated_normal'),
  # Scaled small init: std = 0.1 / sqrt(fan_in), a tenth of lecun_normal.
  'small': Init(0.01, 'fan_in', 'truncated_normal'),
}


def get(name: str) -> Init:
  if name not in INITS:
    raise ValueError(f'model.init={name!r} is unknown; allowed: {", ".join(INITS)}')
  return INITS[name]


def per_unit(
  init: Init,
  key: jax.Array,
  num_units: int,
  unit_size: int,
  fan_in,
  fan_out,
  gain: float | jax.Array | None = None,
  *,
  true_units,
) -> jax.Array:
  """(num_units, unit_size) times init.std(fan_in, fan_out) (times `gain` when given: μP's hidden
  and output weights, models/mup.py), row u the same whatever num_units; rows u >= true_units (padding) are
  exactly 0. fan_in, fan_out and true_units may be traced.

  With partitionable threefry (jax's default) entry (u, s) of one draw of shape (U, S) comes
  from counter u * S + s alone, so rows do not depend on U: one draw, cheap to compile.
  Otherwise row u is drawn from fold_in(key, u).
  """
  units_U = jnp.arange(num_units)
  if jax.config.jax_threefry_partitionable:  # type: ignore[attr-defined]  # jax.config's flags are dynamic attributes
    z_UxS = init.raw_sample(key, (num_units, unit_size))
  else:
    z_UxS = jax.vmap(lambda u: init.raw_sample(jax.random.fold_in(key, u), (unit_size,)))(units_U)
  # One scalar multiplier, so a traced and a constant width give the same weights.
  std = init.std(fan_in, fan_out) if gain is None else init.std(fan_in, fan_out) * jnp.float32(gain)
  w_UxS = z_UxS * (std / jnp.float32(SAMPLE_STD[init.distribution]))
  real_UxS = jnp.broadcast_to((units_U < true_units)[:, None], w_UxS.shape)
  return jnp.where(real_UxS, w_UxS, jnp.zeros_like(w_UxS))


def validate(key: str, name: str) -> None:
  config_lib.one_of(key, name, INITS)
