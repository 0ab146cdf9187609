"""model.arch='kinks': the 1-d ReLU FFN parametrised by its kink positions, against NumPy, its count, its padding,
the equal-piece interpolant of x^2 it can express and its config errors."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import train
from ffn_research import validation
from ffn_research.config import ConfigError
from ffn_research.config import default_config
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import toy


def _config(**model):
  c = default_config()
  c.task.name = 'function'
  c.model.arch, c.model.d_model, c.model.d_ff = 'kinks', 1, 8
  for k, v in model.items():
    c.model[k] = v
  return c


def test_forward_matches_numpy_and_counts_match_the_tree():
  m = toy.Kinks(6, rngs=nnx.Rngs(params=3))
  m.c[...] = jnp.array([0.25], jnp.float32)
  x = np.linspace(-1.5, 1.5, 31, dtype=np.float32)[:, None]
  t, v, s = np.asarray(m.t[...]), np.asarray(m.v[...])[:, 0], np.asarray(m.slope[...])
  want = sum(v[j] * np.maximum(s[j] * (x[:, 0] - t[j]), 0.0) for j in range(6)) + 0.25
  np.testing.assert_allclose(np.asarray(m(jnp.asarray(x)))[:, 0], want, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(s, [1, -1, 1, -1, 1, -1])
  assert ffn_lib.param_tree_size(m) == m.num_params == toy.kinks_param_count(6) == 13  # the slopes are not trained
  assert np.all(np.abs(t) <= 1.0) and len(set(t.tolist())) == 6  # kinks start inside the input's range
  # each unit's kink is where its pre-activation crosses 0
  h = np.asarray(m.hidden(jnp.asarray(t[:, None])))
  np.testing.assert_allclose(np.diag(h), 0.0, atol=1e-7)


def test_padding_leaves_the_function_and_the_draws_unchanged():
  x = jnp.linspace(-1, 1, 17)[:, None]
  small, padded = toy.Kinks(5, rngs=nnx.Rngs(params=0)), toy.Kinks(12, d_ff_true=5, rngs=nnx.Rngs(params=0))
  np.testing.assert_array_equal(np.asarray(padded.t[...])[:5], np.asarray(small.t[...]))
  np.testing.assert_array_equal(np.asarray(padded.t[...])[5:], 0.0)
  np.testing.assert_allclose(np.asarray(small(x)), np.asarray(padded(x)), rtol=0, atol=1e-6)


@pytest.mark.parametrize('n', [2, 8, 64])
def test_represents_the_equal_piece_interpolant_of_x_squared(n):
  # Kinks at t_j = -1 + j h (h = 2 / (n + 1)), every v_j = 2 h (the slope of x^2's interpolant rises by 2 h at each
  # node), the n / 2 units of slope -1 supplying the leftmost slope -2 + h, c putting f(-1) = 1: the interpolant,
  # whose sup error on [-1, 1] is h^2 / 4 = 1 / (n + 1)^2 (so the arch can express an error falling as n^-2).
  m = toy.Kinks(n, rngs=nnx.Rngs(params=0))
  h = 2.0 / (n + 1)
  t = -1.0 + h * np.arange(1, n + 1)
  s = np.asarray(m.slope[...])
  m.t[...] = jnp.asarray(t, jnp.float32)
  m.v[...] = jnp.full((n, 1), 2 * h, jnp.float32)
  m.c[...] = jnp.asarray([1.0 - 2 * h * np.sum((t + 1.0)[s < 0])], jnp.float32)
  x = np.linspace(-1, 1, 8193)
  err = np.abs(np.asarray(m(jnp.asarray(x[:, None], jnp.float32)))[:, 0] - x**2)
  assert err.max() == pytest.approx(1.0 / (n + 1) ** 2, rel=1e-3)
  at_nodes = np.asarray(m(jnp.asarray(t[:, None], jnp.float32)))[:, 0]
  np.testing.assert_allclose(at_nodes, t**2, atol=1e-5)  # exact at the nodes


def test_trains_through_the_real_experiment():
  c = _config()
  validation.validate(c)
  exp = train.Experiment(c)
  state = jax.jit(exp.init)(0)
  model = exp.merge(state['params'])
  assert isinstance(model, toy.Kinks) and set(nnx.state(model, nnx.Param)) == {'t', 'v', 'c'}
  trained = exp.merge(jax.jit(exp.train_chunk, static_argnums=1)(state, 5)[0]['params'])
  np.testing.assert_array_equal(np.asarray(trained.slope[...]), np.asarray(model.slope[...]))  # no gradient
  assert not np.array_equal(np.asarray(trained.t[...]), np.asarray(model.t[...]))  # the kinks move


@pytest.mark.parametrize(
  'override, msg',
  [
    ({'d_model': 2}, 'model.arch=kinks is a 1-d ReLU FFN'),
    ({'activation': 'gelu'}, 'model.arch=kinks is a 1-d ReLU FFN'),
    ({'d_ff': 1}, 'model.arch=kinks is a 1-d ReLU FFN'),
    ({'dropout_rate': 0.1}, 'model.arch=kinks needs model.dropout_rate=0'),
  ],
)
def test_config_errors_are_one_line(override, msg):
  with pytest.raises(ConfigError, match=msg) as e:
    validation.validate(_config(**override))
  assert '\n' not in str(e.value)
