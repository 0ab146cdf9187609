"""The FFN zoo: shapes, exact parameter counts, a NumPy reference, position-wise behaviour, gradients."""

import math

from absl.testing import parameterized
import chex
from flax import nnx
import jax
from jax import test_util as jtu
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research.models import activations
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import inits

ALL = activations.ALL_NAMES


def np_activation(name, x):
  """Independent NumPy versions of every activation (gate for gated ones)."""
  erf = np.vectorize(math.erf)
  sigmoid = lambda v: 1.0 / (1.0 + np.exp(-v))
  gelu = lambda v: 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)))
  table = {
    'relu': lambda v: np.maximum(v, 0.0),
    'gelu': gelu,
    'gelu_tanh': lambda v: 0.5 * v * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
    'silu': lambda v: v * sigmoid(v),
    'relu2': lambda v: np.maximum(v, 0.0) ** 2,
    'identity': lambda v: v,
    'tanh': np.tanh,
    'glu': sigmoid,
    'reglu': lambda v: np.maximum(v, 0.0),
    'geglu': gelu,
    'swiglu': lambda v: v * sigmoid(v),
    'bilinear': lambda v: v,
  }
  return table[name](x)


def np_ffn(module: ffn_lib.FFN, x):
  p = {k: np.asarray(v, np.float64) for k, v in nnx.state(module, nnx.Param).to_pure_dict().items()}
  x = np.asarray(x, np.float64)
  h = x @ p['w1'] + p.get('b1', 0.0)
  if activations.is_gated(module.activation):
    h = np_activation(module.activation, x @ p['w_gate'] + p.get('b_gate', 0.0)) * h
  else:
    h = np_activation(module.activation, h)
  return h @ p['w2'] + p.get('b2', 0.0)


def make(activation='relu', d_model=6, d_ff=10, seed=0, **kw):
  return ffn_lib.FFN(d_model, d_ff, activation, rngs=nnx.Rngs(seed), **kw)


class ShapeTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.product(lead=[(), (3,), (2, 5), (2, 3, 4)], activation=['relu', 'swiglu'])
  def test_shapes_over_leading_dims(self, lead, activation):
    module = make(activation)
    y = self.variant(lambda x: module(x))(jnp.ones(lead + (6,)))
    chex.assert_shape(y, lead + (6,))


@pytest.mark.parametrize('d_model,d_ff,expected', [(512, 2048, 2_099_712), (768, 3072, 4_722_432)])
def test_reference_param_counts(d_model, d_ff, expected):
  assert ffn_lib.ffn_param_count(d_model, d_ff, 'relu', use_bias=True) == expected
  assert ffn_lib.param_tree_size(make('relu', d_model, d_ff)) == expected


@pytest.mark.parametrize('activation', ALL)
@pytest.mark.parametrize('use_bias', [True, False])
@pytest.mark.parametrize('match_params', [True, False])
def test_param_count_formula_matches_tree(activation, use_bias, match_params):
  d_ff = ffn_lib.effective_d_ff(12, activation, match_params)
  module = make(activation, d_model=5, d_ff=d_ff, use_bias=use_bias)
  assert ffn_lib.param_tree_size(module) == ffn_lib.ffn_param_count(5, d_ff, activation, use_bias)
  assert module.num_params == ffn_lib.param_tree_size(module)


def test_match_params_gives_equal_weight_counts():
  # BERT-base width: gated d_ff 3072 -> 2048 and the weight counts agree exactly.
  assert ffn_lib.effective_d_ff(3072, 'swiglu', True) == 2048
  assert ffn_lib.effective_d_ff(3072, 'relu', True) == 3072
  assert ffn_lib.effective_d_ff(3072, 'swiglu', False) == 3072
  assert ffn_lib.ffn_param_count(768, 2048, 'swiglu', False) == ffn_lib.ffn_param_count(768, 3072, 'relu', False)
  assert ffn_lib.effective_d_ff(2048, 'geglu', True) == 1365  # round(1365.33)
  assert ffn_lib.effective_d_ff(1, 'glu', True) == 1


def test_d_out_and_flops():
  module = make('geglu', d_model=4, d_ff=8, d_out=1)
  assert module(jnp.ones((3, 4))).shape == (3, 1)
  assert ffn_lib.param_tree_size(module) == ffn_lib.ffn_param_count(4, 8, 'geglu', True, d_out=1)
  assert ffn_lib.ffn_flops_per_token(512, 2048, 'relu') == 2 * 2 * 512 * 2048
  assert ffn_lib.ffn_flops_per_token(512, 2048, 'swiglu') == 2 * 3 * 512 * 2048


@pytest.mark.parametrize('activation', ALL)
@pytest.mark.parametrize('use_bias', [True, False])
def test_numpy_reference(activation, use_bias):
  module = make(activation, use_bias=use_bias, init='lecun_normal')
  if use_bias:  # non-zero biases so they are exercised
    for name in ('b1', 'b2', 'b_gate'):
      if hasattr(module, name):
        var = getattr(module, name)
        var[...] = jax.random.normal(jax.random.PRNGKey(len(name)), var.shape)
  x = jax.random.normal(jax.random.PRNGKey(1), (4, 3, 6))
  np.testing.assert_allclose(module(x), np_ffn(module, x), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize('activation', ['relu', 'gelu', 'swiglu', 'bilinear'])
def test_position_wise(activation):
  module = make(activation)
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 7, 6))
  x2 = x.at[1, 3].set(100.0)
  y, y2 = module(x), module(x2)
  changed = np.any(np.asarray(y != y2), axis=-1)
  expected = np.zeros((2, 7), bool)
  expected[1, 3] = True
  np.testing.assert_array_equal(changed, expected)


@pytest.mark.parametrize('activation', ALL)
def test_gradients_numerically(activation):
  module = make(activation, d_model=3, d_ff=4, init='lecun_normal')
  graphdef, params, rest = nnx.split(module, nnx.Param, ...)  # rest: the int width
  x = jax.random.normal(jax.random.PRNGKey(19), (5, 3))
  # Finite differences (eps 1e-2) must not cross a ReLU kink: the nonlinearity's inputs away from 0.
  pre = x @ module.w_gate[...] + module.b_gate[...][None] if module.gated else x @ module.w1[...] + module.b1[...][None]
  assert float(jnp.min(jnp.abs(pre))) > 0.04

  def f(params, x):
    return jnp.sum(jnp.sin(nnx.merge(graphdef, params, rest)(x)))

  jtu.check_grads(f, (params, x), order=1, modes=['rev'], atol=5e-2, rtol=5e-2, eps=1e-2)


def test_unknown_names_are_errors():
  with pytest.raises(ValueError, match='model.activation'):
    activations.get('tanhh')
  with pytest.raises(ValueError, match='model.init'):
    inits.get('orthogonal!')


@pytest.mark.parametrize('init', list(inits.INITS))
def test_inits_have_expected_scale(init):
  w = np.asarray(make('relu', d_model=256, d_ff=256, init=init).w1[...])
  expected_std = {
    'xavier_uniform': math.sqrt(2 / 512),
    'lecun_normal': math.sqrt(1 / 256),
    'he_normal': math.sqrt(2 / 256),
    'small': 0.1 * math.sqrt(1 / 256),
  }[init]
  assert abs(w.std() / expected_std - 1) < 0.05


def test_dropout_train_only():
  module = make('relu', dropout_rate=0.5)
  x = jnp.ones((64, 6))
  assert np.array_equal(module(x), module(x))  # no rng: deterministic evaluation
  h = module.hidden(x)
  dropped = ffn_lib.dropout(h, 0.5, jax.random.PRNGKey(0))
  kept = np.asarray(dropped != 0)
  np.testing.assert_allclose(np.asarray(dropped)[kept], 2 * np.asarray(h)[kept], rtol=1e-6)
  assert 0.4 < kept[np.asarray(h) != 0].mean() < 0.6
  assert not np.array_equal(module(x, rng=jax.random.PRNGKey(1)), module(x))
