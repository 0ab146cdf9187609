"""Elhage et al. 2022's toy model of superposition (docs/references.md#elhage-et-al-2022):
``x -> ReLU(W^T W x + b)``, n input features squeezed through m hidden dimensions by one
matrix W (m, n) used twice (tied), with a ReLU on the output. Config: model.arch='tied_relu',
model.d_model = n, model.d_ff = m, model.use_bias = b. Its untied form with the repo's FFN,
``ReLU(ReLU(x W1 + b1) W2 + b2)``, is model.arch='ffn_relu_out' (`OutputReLU`).

Also the bare ReLU FFN on a 1-d input parametrised by its kinks, model.arch='kinks' (`Kinks`): the same functions
as a width-d_ff ReLU FFN, with each unit's kink position a parameter of its own.
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


class KinkSlope(nnx.Variable):
  """A kink unit's fixed input slope (+1 or -1): not an nnx.Param, so no gradient and no optimizer state."""


KINK_POSITION_INIT = inits.Init(1.0 / 3.0, 'fan_in', 'uniform')  # at fan-in 1: U(-1, 1), the input's range


def kinks_param_count(d_ff: int) -> int:
  """Kink positions t and output weights v (d_ff each) and the output bias c; the fixed slopes are not trained."""
  return 2 * d_ff + 1


class Kinks(ffn_lib.Layer):
  """``y = sum_j v_j ReLU(s_j (x - t_j)) + c`` on a 1-d input: a width-d_ff ReLU FFN whose unit j has input weight
  s_j (+1 for even j, -1 for odd j, fixed) and bias -s_j t_j, so its kink position t_j is a parameter (trained
  directly, not as the ratio -b1/w1 of two). Any unit v ReLU(w x + b) with w != 0 is |w| v ReLU(sign(w) (x + b/w)),
  so these are the functions of a width-d_ff ReLU FFN whose units face alternately right and left (a plain FFN also
  chooses each unit's facing); at even d_ff they include the equal-piece interpolant of x^2 (tests/test_kinks.py).
  t_j starts uniform on [-1, 1] (one per unit, independent of the allocated width), v like w2 of the FFN
  (model.init at the true width), c = 0. Units >= d_ff_true (padding of a sweep program) are exactly 0."""

  def __init__(
    self, d_ff: int, *, init: str = 'xavier_uniform', d_ff_true: int | jax.Array | None = None, rngs: nnx.Rngs
  ):
    true = d_ff if d_ff_true is None else d_ff_true
    self.d_ff = d_ff
    self.width = ffn_lib.Width(jnp.asarray(true, jnp.int32))
    self.slope = KinkSlope(jnp.where(jnp.arange(d_ff) % 2 == 0, 1.0, -1.0).astype(jnp.float32))
    self.t = nnx.Param(
      inits.per_unit(KINK_POSITION_INIT, rngs.params(), d_ff, 1, fan_in=1, fan_out=1, true_units=true)[:, 0]
    )
    self.v = nnx.Param(inits.per_unit(inits.get(init), rngs.params(), d_ff, 1, fan_in=true, fan_out=1, true_units=true))
    self.c = nnx.Param(jnp.zeros((1,), jnp.float32))

  def hidden(self, x_Bx1: jax.Array) -> jax.Array:
    """(B, d_ff): ReLU(s_j (x - t_j)); padding units 0."""
    x_BxF = jnp.broadcast_to(x_Bx1, (x_Bx1.shape[0], self.d_ff))
    t_BxF = jnp.broadcast_to(self.t[...], x_BxF.shape)
    s_BxF = jnp.broadcast_to(self.slope[...], x_BxF.shape)
    return ffn_lib.real_units(jax.nn.relu(s_BxF * (x_BxF - t_BxF)), self.width[...])

  def __call__(self, x_Bx1: jax.Array, *, rng: jax.Array | None = None) -> jax.Array:
    del rng
    return ffn_lib.add_bias(self.hidden(x_Bx1) @ self.v[...], self.c[...])

  @property
  def num_params(self) -> int:
    return kinks_param_count(self.d_ff)


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
