"""Elhage et al. 2022's toy model of superposition (docs/references.md#elhage-et-al-2022):
``x -> ReLU(W^T W x + b)``, n input features squeezed through m hidden dimensions by one
matrix W (m, n) used twice (tied), with a ReLU on the output. Config: model.arch='tied_relu',
model.d_model = n, model.d_ff = m, model.use_bias = b. Its untied form with the repo's FFN,
``ReLU(ReLU(x W1 + b1) W2 + b2)``, is model.arch='ffn_relu_out' (`OutputReLU`).
"""

from flax import nnx
import jax
import jax.numpy as jnp

from ffn_research.models import ffn as ffn_lib
from ffn_research.models import inits


def tied_relu_param_count(n: int, m: int, use_bias: bool) -> int:
  """W (m x n) plus, with use_bias, b (n)."""
  return m * n + (n if use_bias else 0)


class TiedReLU(ffn_lib.Layer):
  """``ReLU(W^T W x + b)``; column i of W (``w_MxN[:, i]``) is feature i's direction in the m hidden
  dimensions. Hidden dimensions >= d_ff_true (padding of a sweep program) are exactly 0."""

  def __init__(
    self,
    n: int,
    m: int,
    *,
    use_bias: bool = True,
    init: str = 'xavier_uniform',
    d_ff_true: int | jax.Array | None = None,
    rngs: nnx.Rngs,
  ):
    true = m if d_ff_true is None else d_ff_true
    self.n, self.m, self.use_bias = n, m, use_bias
    self.width = ffn_lib.Width(jnp.asarray(true, jnp.int32))
    # Row j of W is hidden dimension j: fan-in n (features), fan-out the true m.
    self.w = nnx.Param(inits.per_unit(inits.get(init), rngs.params(), m, n, fan_in=n, fan_out=true, true_units=true))
    if use_bias:
      self.b = nnx.Param(jnp.zeros((n,), jnp.float32))

  def __call__(self, x_BxN: jax.Array, *, rng: jax.Array | None = None) -> jax.Array:
    del rng
    w_MxN = self.w[...]
    h_BxM = ffn_lib.real_units(x_BxN @ w_MxN.T, self.width[...])
    y_BxN = h_BxM @ w_MxN
    if self.use_bias:
      y_BxN = ffn_lib.add_bias(y_BxN, self.b[...])
    return jax.nn.relu(y_BxN)

  @property
  def num_params(self) -> int:
    return tied_relu_param_count(self.n, self.m, self.use_bias)


class OutputReLU(ffn_lib.Layer):
  """``ReLU(ffn(x))``: a bare FFN with a ReLU on its output (the filter of interference Elhage et al.'s mechanism
  needs); its parameters are the FFN's, under `ffn`."""

  def __init__(self, inner: ffn_lib.Layer):
    self.ffn = inner

  def __call__(self, x: jax.Array, *, rng: jax.Array | None = None) -> jax.Array:
    return jax.nn.relu(self.ffn(x, rng=rng))

  def apply(self, x: jax.Array, *, rng: jax.Array | None = None):
    y, aux = self.ffn.apply(x, rng=rng)
    return jax.nn.relu(y), aux

  def after_step(self, aux) -> None:
    self.ffn.after_step(aux)
