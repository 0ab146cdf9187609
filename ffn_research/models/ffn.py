"""Position-wise feed-forward networks: plain ``act(x W1 + b1) W2 + b2`` and gated
``(gate(x W_gate + b_gate) * (x W1 + b1)) W2 + b2`` (Shazeer 2020).

Shapes: ``x_NxD`` means any number of leading dimensions ``...`` then d_model.
"""

import math

from flax import nnx
import jax
import jax.numpy as jnp

from ffn_research import config as config_lib
from ffn_research.models import activations
from ffn_research.models import inits

DTYPES = {'float32': jnp.float32, 'bfloat16': jnp.bfloat16}


def validate(model_cfg) -> None:
  """ConfigError for the dense FFN's keys of the model section (width, activation, init, ...)."""
  m = model_cfg
  config_lib.positive_int('model.d_model', m.d_model)
  config_lib.positive_int('model.d_ff', m.d_ff)
  activations.validate('model.activation', m.activation)
  inits.validate('model.init', m.init)
  config_lib.one_of('model.dtype', m.dtype, DTYPES)
  config_lib.check(
    isinstance(m.dropout_rate, (int, float)) and 0.0 <= m.dropout_rate < 1.0,
    f'model.dropout_rate={m.dropout_rate!r} must be in [0, 1)',
  )


def effective_d_ff(d_ff: int, activation: str, match_params: bool) -> int:
  """Hidden width actually built.

  With ``match_params`` a gated FFN (three matrices) gets ``round(2 * d_ff / 3)``
  (Python's round, half to even; at least 1) so that its weight count matches
  the two-matrix dense FFN of width d_ff: exact when 3 divides d_ff
  (768/3072 -> 2048), within d_model weights otherwise. Bias counts differ
  (gated: 2 d_ff' + d_model, dense: d_ff + d_model).
  """
  if match_params and activations.is_gated(activation):
    return max(1, round(2 * d_ff / 3))
  return d_ff


def num_input_projections(activation: str) -> int:
  return 2 if activations.is_gated(activation) else 1


def ffn_param_count(d_model: int, d_ff: int, activation: str, use_bias: bool, d_out: int | None = None) -> int:
  """Exact parameter count of one FFN of hidden width d_ff (already effective)."""
  d_out = d_model if d_out is None else d_out
  n_in = num_input_projections(activation)
  weights = n_in * d_model * d_ff + d_ff * d_out
  biases = n_in * d_ff + d_out if use_bias else 0
  return weights + biases


def ffn_flops_per_token(d_model: int, d_ff: int, activation: str, d_out: int | None = None) -> int:
  """Forward matmul FLOPs per token (2 per multiply-add); a train step is about 3x."""
  d_out = d_model if d_out is None else d_out
  return 2 * (num_input_projections(activation) * d_model + d_out) * d_ff


def add_bias(x_NxF: jax.Array, b_F: jax.Array) -> jax.Array:
  """x + b over the last axis, with the broadcast explicit (rank promotion may be 'raise')."""
  return x_NxF + jnp.broadcast_to(b_F.astype(x_NxF.dtype), x_NxF.shape)


def dropout(x: jax.Array, rate: float | jax.Array, rng: jax.Array) -> jax.Array:
  """Inverted dropout at `rate` in [0, 1), a float or a traced scalar; rate 0 returns x exactly
  (every unit kept: uniform draws in [0, 1) are all < 1, and x / 1 = x)."""
  keep = jax.random.bernoulli(rng, 1.0 - rate, x.shape)
  return jnp.where(keep, x / jnp.asarray(1.0 - rate, x.dtype), jnp.zeros_like(x))


class Hyper(nnx.Variable):
  """A config scalar the module reads at run time: `Hyper(value, key='model.dropout_rate')` holds the value of
  the traced config key it names (one of models.TRACED_KEYS). Not an nnx.Param (no gradient); the run state
  leaves it out and `Experiment` sets it per run (`models.hyper_state`), so runs that differ in it share one
  program."""


class Layer(nnx.Module):
  """The protocol every model and FFN-like sublayer follows.

  `apply(x, rng=None) -> (y, aux)`: rng given means training (dropout, router
  noise). `aux` is a (nested) dict of arrays; entries whose key ends in
  '_loss' are added to the training objective (already scaled by their
  coefficient), all are logged. `after_step(aux)` updates non-gradient state
  (e.g. MoE routing biases) once per optimizer step, from that step's aux.
  """

  def apply(self, x: jax.Array, *, rng: jax.Array | None = None):
    return self(x, rng=rng), {}

  def after_step(self, aux) -> None:
    del aux


class Width(nnx.Variable):
  """An FFN's true hidden width (int32, may differ per run of a padded sweep program)."""


def real_units(x_NxF: jax.Array, width: jax.Array) -> jax.Array:
  """x with hidden units >= width (padding) set to exactly 0, so they get exactly zero gradient."""
  mask_F = jnp.arange(x_NxF.shape[-1]) < width
  return jnp.where(jnp.broadcast_to(mask_F, x_NxF.shape), x_NxF, jnp.zeros_like(x_NxF))


class FFN(Layer):
  """Dense position-wise FFN d_model -> d_ff -> d_out (default d_model), plain or gated.

  `d_ff` units are allocated; the first `d_ff_true` (default d_ff; may be a traced per-run
  value: d_ff padding, ffn_research.programs) are real, the rest are zero and masked to zero. Each
  unit's weights do not depend on the allocated width (inits.per_unit, true fan-in/fan-out),
  so a run's initialisation and training do not depend on how far it is padded.
  """

  def __init__(
    self,
    d_model: int,
    d_ff: int,
    activation: str = 'relu',
    *,
    use_bias: bool = True,
    dropout_rate: float = 0.0,
    init: str = 'xavier_uniform',
    dtype: str = 'float32',
    d_out: int | None = None,
    d_ff_true: int | jax.Array | None = None,
    mup_fans: tuple[inits.Fans, inits.Fans] | None = None,
    rngs: nnx.Rngs,
  ):
    """`mup_fans`: None for the standard parametrization (each rule at the true fans); for μP
    (models/mup.py `init_fans`) the fans and gain of the input projections' rule and of w2's."""
    d_out = d_model if d_out is None else d_out
    true = d_ff if d_ff_true is None else d_ff_true
    self.d_model, self.d_ff, self.d_out, self.activation = d_model, d_ff, d_out, activation
    self.use_bias = use_bias
    self.dropout_rate = Hyper(jnp.float32(dropout_rate), key='model.dropout_rate')
    self.use_dropout = dropout_rate > 0  # static: the dropout path is compiled in (any rate then works)
    self.dtype = DTYPES[dtype]
    self.gated = activations.is_gated(activation)
    self.act = activations.get(activation)
    self.width = Width(jnp.asarray(true, jnp.int32))
    w_init = inits.get(init)
    # Standard: every rule at the true fans; μP: at the base widths, times a gain.
    fans_in, fans_out = (inits.Fans(d_model, true), inits.Fans(true, d_out)) if mup_fans is None else mup_fans
    # Unit u is column u of w1 and w_gate, row u of w2.
    self.w1 = nnx.Param(inits.per_unit(w_init, rngs.params(), d_ff, d_model, *fans_in, true_units=true).T)
    self.w2 = nnx.Param(inits.per_unit(w_init, rngs.params(), d_ff, d_out, *fans_out, true_units=true))
    if self.gated:
      self.w_gate = nnx.Param(inits.per_unit(w_init, rngs.params(), d_ff, d_model, *fans_in, true_units=true).T)
    if use_bias:
      self.b1 = nnx.Param(jnp.zeros((d_ff,), jnp.float32))
      self.b2 = nnx.Param(jnp.zeros((d_out,), jnp.float32))
      if self.gated:
        self.b_gate = nnx.Param(jnp.zeros((d_ff,), jnp.float32))

  def hidden(self, x_NxD: jax.Array) -> jax.Array:
    """The d_ff hidden activations (after the nonlinearity or the gate product); padding is 0."""
    x_NxD = x_NxD.astype(self.dtype)
    h_NxF = x_NxD @ self.w1[...].astype(self.dtype)
    if self.use_bias:
      h_NxF = add_bias(h_NxF, self.b1[...])
    if not self.gated:
      return real_units(self.act(h_NxF), self.width[...])
    g_NxF = x_NxD @ self.w_gate[...].astype(self.dtype)
    if self.use_bias:
      g_NxF = add_bias(g_NxF, self.b_gate[...])
    return real_units(self.act(g_NxF) * h_NxF, self.width[...])

  def __call__(self, x_NxD: jax.Array, *, rng: jax.Array | None = None) -> jax.Array:
    h_NxF = self.hidden(x_NxD)
    if rng is not None and self.use_dropout:
      h_NxF = dropout(h_NxF, self.dropout_rate[...], rng)
    y_NxO = h_NxF @ self.w2[...].astype(self.dtype)
    if self.use_bias:
      y_NxO = add_bias(y_NxO, self.b2[...])
    return y_NxO

  @property
  def num_params(self) -> int:
    return ffn_param_count(self.d_model, self.d_ff, self.activation, self.use_bias, self.d_out)


def param_tree_size(module: nnx.Module) -> int:
  """Number of scalars in a module's nnx.Param leaves (the ground truth for tests)."""
  return sum(math.prod(x.shape) for x in jax.tree.leaves(nnx.state(module, nnx.Param)))
