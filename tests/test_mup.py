"""model.parametrization: 'standard' unchanged bit for bit, 'mup' (models/mup.py) equal to it at the
base width, its init and learning-rate factors exact, the coordinate check, validation, checkpoints."""

import json
import os

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import io as io_lib
from ffn_research import loop
from ffn_research import programs
from ffn_research import train
from ffn_research.validation import validate


def small_config(parametrization='standard', d_ff=32, activation='relu', base=32, **overrides):
  c = config_lib.default_config()
  c.task.name = 'teacher_student'
  c.model.d_model, c.model.d_ff, c.model.activation = 8, d_ff, activation
  c.model.parametrization, c.model.mup_base_d_ff = parametrization, base
  c.task.num_train = c.task.num_eval = 128
  c.train.batch_size, c.train.warmup_steps, c.train.steps = 32, 2, 20
  for key, value in overrides.items():
    config_lib.set_path(c, key, value)
  return c


def weights(state):
  return nnx.split_state(state['params'], nnx.Param, ...)[0]


def train_20(config):
  e = train.Experiment(config)
  state, metrics = jax.jit(e.train_chunk, static_argnums=1)(jax.jit(e.init)(0), 20)
  return state, metrics


@pytest.mark.parametrize('activation, loss', [('relu', 0.41947492957115173), ('swiglu', 0.32511886954307556)])
def test_standard_is_unchanged(activation, loss):
  """Loss after 20 steps, recorded at commit 72dd244 (before model.parametrization existed; jax 0.10.2,
  CPU, the optimised backend, where the default 'standard' gave the same bits, loss and a hash of every
  weight). Held here to float32 rounding: the default suite compiles at XLA optimisation level 0
  (tests/conftest.py) and CI's CPU may differ, either of which moves the last bits."""
  _, metrics = train_20(small_config(activation=activation))
  assert float(metrics['loss']) == pytest.approx(loss, rel=2e-6)


@pytest.mark.parametrize('activation', ['relu', 'swiglu'])
def test_mup_at_its_base_width_trains_as_standard(activation):
  """m = 1: same init and factors 1; only the optimizer's layout differs (a tree, not one flat
  vector), so the global-norm clipping sums in another order: equal to float32 rounding."""
  (s_std, m_std), (s_mup, m_mup) = (train_20(small_config(p, activation=activation)) for p in ('standard', 'mup'))
  np.testing.assert_allclose(m_mup['loss'], m_std['loss'], rtol=1e-6)
  for a, b in zip(jax.tree.leaves(weights(s_mup)), jax.tree.leaves(weights(s_std)), strict=True):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-7)


@pytest.mark.parametrize('activation', ['relu', 'swiglu'])
def test_mup_init_is_the_base_rule_and_w2_over_m(activation):
  """At d_ff = 4 x base, unit u's input weights are exactly the base model's (the init rule at the
  base width; inits.per_unit draws unit by unit) and its output weights exactly those / 4."""
  base = train.Experiment(small_config('standard', d_ff=32, activation=activation)).init(0)['params']
  wide = train.Experiment(small_config('mup', d_ff=128, activation=activation)).init(0)['params']
  np.testing.assert_array_equal(wide['w1'][...][:, :32], base['w1'][...])
  np.testing.assert_array_equal(wide['w2'][...][:32], base['w2'][...] / 4)
  if activation == 'swiglu':
    np.testing.assert_array_equal(wide['w_gate'][...][:, :32], base['w_gate'][...])


def test_mup_adam_update_of_w2_is_over_m_and_the_rest_unscaled():
  """One Adam step on the same gradients: mup's w2 update is exactly 1/4 of standard's at m = 4
  (a power of two scales exactly), every other update equal. No warmup: its first rate is 0."""
  updates = {}
  for p in ('standard', 'mup'):
    e = train.Experiment(small_config(p, d_ff=128, **{'train.grad_clip': 0.0, 'train.warmup_steps': 0}))
    w = weights(e.init(0))
    grads = jax.tree.map(lambda x: jnp.cos(jnp.arange(x.size, dtype=jnp.float32).reshape(x.shape)), w)
    updates[p] = e.optimizer.update(grads, e.optimizer.init(w), w)[0]
  for name in updates['mup']:
    factor = 0.25 if name == 'w2' else 1.0
    assert np.all(updates['standard'][name][...] != 0), name
    np.testing.assert_array_equal(updates['mup'][name][...], factor * updates['standard'][name][...])


# ---------------------------------------------------------------- the coordinate check (Yang et al. 2021, D.1)

WIDTHS = (64, 128, 256, 512)  # base 64: m = 1, 2, 4, 8


def coordinates(parametrization, d_ff, activation):
  """RMS over held-out inputs of the hidden activations h after 4 Adam steps, and of what the
  steps changed: delta h and delta y (the output). Constant rate 1e-3, no clipping: the
  first steps are in the linear regime, where the width dependence is the parametrization's."""
  config = small_config(
    parametrization,
    d_ff,
    activation,
    base=64,
    **{
      'model.d_model': 16,
      'task.num_train': 256,
      'task.num_eval': 256,
      'train.batch_size': 64,
      'train.warmup_steps': 0,
      'train.schedule': 'constant',
      'train.grad_clip': 0.0,
      'train.learning_rate': 1e-3,
    },
  )
  e = train.Experiment(config)
  s0 = e.init(0)
  s1, _ = e.train_chunk(s0, 4)
  x = s0['data']['x_eval']
  m0, m1 = e.merge(s0['params']), e.merge(s1['params'])
  rms = lambda a: float(jnp.sqrt(jnp.mean(jnp.square(a))))
  return {'h': rms(m1.hidden(x)), 'delta_h': rms(m1.hidden(x) - m0.hidden(x)), 'delta_y': rms(m1(x) - m0(x))}


def width_slopes(parametrization, activation):
  """{coordinate: slope of log RMS against log width}, fitted over WIDTHS."""
  rows = [coordinates(parametrization, w, activation) for w in WIDTHS]
  return {k: float(np.polyfit(np.log(WIDTHS), np.log([r[k] for r in rows]), 1)[0]) for k in rows[0]}


@pytest.mark.parametrize('activation', ['relu', 'swiglu'])
def test_coordinate_check_flat_under_mup_drifting_under_standard(activation):
  """Thresholds: a slope of 0.1 is a 1.23x change over the 8x of widths. Measured in development
  (CPU, widths 64..1024; these 64..512 behave alike): mup |slope| <= 0.05 for every coordinate;
  standard: h -0.45 (relu) / -0.94 (swiglu),
  as xavier's std ~ (d_model + d_ff)^-1/2 predicts, delta y +0.49 (relu: ~ d_ff x rms h, Adam's
  update of w2 adds up over d_ff units), delta h -0.50 (swiglu: the product of two shrinking factors).
  (y itself is left out: under mup its init part shrinks as 1/sqrt(m) by design, Table 3's
  output variance 1/fan_in^2, and after 4 steps at this rate it still dominates.)"""
  mup, standard = width_slopes('mup', activation), width_slopes('standard', activation)
  assert all(abs(s) < 0.1 for s in mup.values()), mup
  assert max(abs(s) for s in standard.values()) > 0.4, standard
  assert standard['h'] < -0.4, standard


# ---------------------------------------------------------------- config, programs, checkpoints


@pytest.mark.parametrize(
  'overrides, message',
  [
    ({'model.parametrization': 'mu'}, "model.parametrization='mu' is unknown; allowed: standard, mup"),
    ({'model.mup_base_d_ff': 0}, 'model.mup_base_d_ff=0 must be a positive integer'),
    (
      {'model.parametrization': 'mup', 'model.moe.num_experts': 4},
      'model.parametrization=mup supports dense and gated FFNs only; MoE experts (model.moe.num_experts > 0) '
      'are not built yet',
    ),
  ],
)
def test_validation_is_one_line(overrides, message):
  with pytest.raises(config_lib.ConfigError) as e:
    validate(small_config(**overrides))
  assert str(e.value) == message


def test_mup_refuses_sequence_models_in_one_line():
  c = config_lib.tiny_transformer_config('language', None)
  c.model.parametrization = 'mup'
  with pytest.raises(
    config_lib.ConfigError,
    match=r'^model.parametrization=mup supports model.arch=ffn only; '
    r"'transformer' is not built yet \(embeddings, unembedding, attention 1/d scaling\)$",
  ):
    validate(c)


def test_mup_widths_are_not_padded_into_one_program():
  """mup's learning-rate factors are compiled in: each width its own program (standard: one)."""
  for p, expected in (('standard', [[0, 1, 2]]), ('mup', [[0], [1], [2]])):
    assert programs.plan([small_config(p, d_ff=w) for w in (16, 32, 64)]) == expected


def test_checkpoints_record_the_parametrization_and_resume_refuses_another(tmp_path, monkeypatch):
  config = small_config('mup', d_ff=64, **{'train.steps': 40, 'train.log_every': 10, 'train.checkpoint_every': 20})
  original = io_lib.MetricsLog.write

  def write_then_die(self, step, metrics):
    original(self, step, metrics)
    if step == 30:
      raise KeyboardInterrupt

  monkeypatch.setattr(io_lib.MetricsLog, 'write', write_then_die)
  with pytest.raises(KeyboardInterrupt):
    loop.train_and_evaluate(config, str(tmp_path))
  monkeypatch.setattr(io_lib.MetricsLog, 'write', original)
  meta = json.load(open(tmp_path / 'checkpoints' / '20' / 'meta' / 'metadata'))
  assert meta['parametrization'] == 'mup'
  standard = small_config(
    'standard', d_ff=64, **{'train.steps': 40, 'train.log_every': 10, 'train.checkpoint_every': 20}
  )
  with pytest.raises(io_lib.WorkdirError, match='differs in: model.parametrization'):
    loop.train_and_evaluate(standard, str(tmp_path))  # config.json
  # A config.json that agrees (e.g. edited by hand) still meets the checkpoint's own record:
  recorded = json.load(open(tmp_path / 'config.json'))
  recorded['model']['parametrization'] = 'standard'
  io_lib.write_json(str(tmp_path / 'config.json'), recorded)
  with pytest.raises(io_lib.WorkdirError) as e:
    loop.train_and_evaluate(standard, str(tmp_path))
  assert str(e.value) == (
    f'{tmp_path}/checkpoints/20 was saved with model.parametrization=mup, this run has '
    'standard; use a new --workdir or delete it'
  )
  assert os.path.exists(tmp_path / 'checkpoints' / '20')  # refused, not set aside as damaged


def test_mup_width_sweep_config():
  """configs/sweeps/mup_width.py: rates x 4 widths x both parametrizations x 3 seeds, every run valid;
  its quick argument is the smoke grid."""
  from ffn_research import configfile
  from ffn_research import sweep

  path = os.path.join(os.path.dirname(__file__), '..', 'configs', 'sweeps', 'mup_width.py')
  for arg, n in (('', 7 * 4 * 2 * 3), ('quick', 2 * 4 * 2)):
    base, grid = configfile.load_sweep_file(f'{path}:{arg}' if arg else path)
    runs = sweep.expand(base, grid)
    assert len(runs) == n
    for r in runs:
      validate(r.config)
    assert {r.config.model.d_ff for r in runs} == {64, 256, 1024, 4096}
    assert {r.config.model.parametrization for r in runs} == {'standard', 'mup'}
