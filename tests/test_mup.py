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
from ffn_research import configfile
from ffn_research import io as io_lib
from ffn_research import loop
from ffn_research import programs
from ffn_research import train
from ffn_research.models import mup as mup_lib
from ffn_research.models import transformer
from ffn_research.validation import validate

RECALL = os.path.join(os.path.dirname(__file__), '..', 'configs', 'recall.py')
REGRESSION = os.path.join(os.path.dirname(__file__), '..', 'configs', 'regression.py')


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


# The first Adam steps of the coordinate checks: constant rate 1e-3, no warm-up or clipping.
FIRST_STEPS = {
  'task.num_train': 256,
  'task.num_eval': 256,
  'train.batch_size': 64,
  'train.warmup_steps': 0,
  'train.schedule': 'constant',
  'train.grad_clip': 0.0,
  'train.learning_rate': 1e-3,
}


def coordinates(parametrization, d_ff, activation):
  """RMS over held-out inputs of the hidden activations h after 4 Adam steps, and of what the
  steps changed: delta h and delta y (the output). Constant rate 1e-3, no clipping: the
  first steps are in the linear regime, where the width dependence is the parametrization's."""
  config = small_config(
    parametrization,
    d_ff,
    activation,
    base=64,
    **{'model.d_model': 16, **FIRST_STEPS},
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


# ---------------------------------------------------------------- the sequence models


def seq_config(parametrization='standard', d_model=32, d_ff=128, base=(32, 128), arch='transformer', **overrides):
  """configs/recall.py (MQAR, 12 tokens a sequence) at the given widths; mup's bases (d_model, d_ff)."""
  c = configfile.get_config(RECALL if arch == 'transformer' else f'{RECALL}:{arch}')
  m = c.model
  m.d_model, m.d_ff, m.parametrization = d_model, d_ff, parametrization
  m.mup_base_d_model, m.mup_base_d_ff = base
  c.task.num_eval = 64
  c.train.batch_size, c.train.warmup_steps, c.train.steps = 16, 2, 20
  for key, value in overrides.items():
    config_lib.set_path(c, key, value)
  validate(c)
  return c


def init_params(config):
  return jax.jit(train.Experiment(config).init)(0)['params']


@pytest.mark.parametrize(
  'arch, activation, loss', [('transformer', 'relu', 4.190655708312988), ('ffn_stack', 'swiglu', 4.228764533996582)]
)
def test_sequence_mup_at_its_base_widths_trains_as_standard(arch, activation, loss):
  """d_model and d_ff at their bases: the same init bit for bit (each factor is exactly 1), and 20
  steps equal to float32 rounding (the optimizer's tree layout and mup's x 1 factors). Standard's
  loss was recorded at commit 1566c92, before the sequence models' mup (jax 0.10.2, CPU; the same
  bits and weight hash at XLA optimisation levels 0 and default), held to float32 rounding."""
  runs = {}
  for p in ('standard', 'mup'):
    e = train.Experiment(seq_config(p, arch=arch, **{'model.activation': activation}))
    s0 = jax.jit(e.init)(0)
    runs[p] = (s0, *jax.jit(e.train_chunk, static_argnums=1)(s0, 20))
  (i_std, s_std, m_std), (i_mup, s_mup, m_mup) = runs['standard'], runs['mup']
  assert float(m_std['loss']) == pytest.approx(loss, rel=2e-6)
  for a, b in zip(jax.tree.leaves(weights(i_mup)), jax.tree.leaves(weights(i_std)), strict=True):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_allclose(m_mup['loss'], m_std['loss'], rtol=1e-6)
  for a, b in zip(jax.tree.leaves(weights(s_mup)), jax.tree.leaves(weights(s_std)), strict=True):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_sequence_mup_init_is_the_rule_at_the_base_widths_times_the_gain():
  """d_model 64 = 2 x base, d_ff 512 = 4 x base: each mup matrix is the standard one of its shape (the
  same draws) times rule std(base fans) x gain / rule std(true fans); xavier_uniform (fan_avg):
  embeddings (input) sqrt(2), hidden weights (both fans x 2, gain 1/sqrt(m)) 1, w1 (fans x 2, x 4;
  gain 1/sqrt(2)) and w2 (gain 1/2), the unembedding (output, gain 1/2)."""
  std, mup = (init_params(seq_config(p, 64, 512)) for p in ('standard', 'mup'))
  xavier = lambda fan_in, fan_out: np.sqrt(2 / (fan_in + fan_out))
  vocab = mup['unembed'][...].shape[1]
  w1 = xavier(32, 128) / xavier(64, 512) / np.sqrt(2)
  expected = {
    'embed': np.sqrt(2),
    'pos_embed': np.sqrt(2),
    'w_qkv': 1.0,
    'w_out': 1.0,
    'w1': w1,
    'w2': w1 / np.sqrt(2),  # the transposed fans, gain 1/sqrt(4)
    'unembed': xavier(32, vocab) / xavier(64, vocab) / 2,
  }
  seen = set()
  for (path, a), b in zip(
    jax.tree_util.tree_leaves_with_path(weights({'params': mup})),
    jax.tree.leaves(weights({'params': std})),
    strict=True,
  ):
    name = next(p.key for p in reversed(path) if isinstance(p, jax.tree_util.DictKey))
    factor = expected.get(name, 1.0)  # norms' scales: unchanged
    np.testing.assert_allclose(a, b * factor, rtol=2e-6, atol=1e-9, err_msg=name)
    seen.add(name)
  assert set(expected) <= seen


def test_sequence_mup_adam_updates_scale_by_their_fan_ins_width():
  """One Adam step on the same gradients at d_model = 2 x base, d_ff = 4 x base: the update of a
  weight with fan-in d_model (attention, w1, unembedding) is exactly 1/2 of standard's, w2's (fan-in
  d_ff) 1/4, the embeddings' and the norms' equal. No warmup: its first rate is 0."""
  updates = {}
  for p in ('standard', 'mup'):
    e = train.Experiment(seq_config(p, 64, 512, **{'train.grad_clip': 0.0, 'train.warmup_steps': 0}))
    w = weights({'params': init_params(e.config)})
    grads = jax.tree.map(lambda x: jnp.cos(jnp.arange(x.size, dtype=jnp.float32).reshape(x.shape)), w)
    updates[p] = e.optimizer.update(grads, e.optimizer.init(w), w)[0]
  factors = {'w_qkv': 0.5, 'w_out': 0.5, 'w1': 0.5, 'unembed': 0.5, 'w2': 0.25}
  for (path, a), b in zip(
    jax.tree_util.tree_leaves_with_path(updates['mup']), jax.tree.leaves(updates['standard']), strict=True
  ):
    name = next(p.key for p in reversed(path) if isinstance(p, jax.tree_util.DictKey))
    assert np.all(b != 0), name
    np.testing.assert_array_equal(a, factors.get(name, 1.0) * b, err_msg=name)


def test_mup_attention_logits_are_scaled_by_base_head_over_head_squared():
  """mup's attention at head size 16, base 4, is the standard one with q scaled by sqrt(4) / 16 x
  sqrt(16) = 1/2: logits q.k sqrt(base d_head) / d_head instead of q.k / sqrt(d_head)."""
  rngs = lambda: nnx.Rngs(params=jax.random.PRNGKey(0))
  kwargs = {'rope': False, 'init': 'xavier_uniform', 'dtype': 'float32'}
  std = transformer.CausalSelfAttention(64, 4, rngs=rngs(), **kwargs)
  mup = transformer.CausalSelfAttention(64, 4, rngs=rngs(), mup_base_d_model=16, **kwargs)
  assert mup.mup_logit_factor == 0.5
  mup.w_qkv[...], mup.w_out[...] = std.w_qkv[...], std.w_out[...]
  std.w_qkv[...] = std.w_qkv[...].at[:, :64].multiply(0.5)  # q
  x = jax.random.normal(jax.random.PRNGKey(1), (2, 5, 64))
  np.testing.assert_allclose(mup(x), std(x), rtol=1e-5, atol=1e-6)


def test_mup_label_tree_refuses_an_unknown_matrix():
  with pytest.raises(ValueError, match=r"no learning-rate rule for the weight \['w_new'\]"):
    mup_lib.lr_labels(seq_config().model)({'w_new': jnp.zeros((2, 2)), 'embed': jnp.zeros((2, 2))})


# The coordinate check of the sequence models: d_model 32..256 (base 32, 4 heads: d_head 4..64), d_ff 4 d_model.
SEQ_WIDTHS = (32, 64, 128, 256)
SEQ_SEEDS = 3


def block_coordinates(model, tokens_BxT):
  """{name: array} of the transformer's forward pass: each block's attention output ('attn_i') and
  FFN hidden activations ('ffn_h_i'), and the logits."""
  x = model.mix(model.embed_tokens(tokens_BxT))
  out = {}
  for i, block in enumerate(model.blocks):
    out[f'attn_{i}'] = block.attn(block.attn_norm(x))
    x = x + out[f'attn_{i}']
    out[f'ffn_h_{i}'] = block.ffn.hidden(block.ffn_norm(x))
    x = x + block.ffn(block.ffn_norm(x))
  out['logits'] = model.forward(model.embed_tokens(tokens_BxT))[0]
  return out


def seq_coordinates(parametrization, d_model):
  """RMS over the held-out sequences, after 4 Adam steps (rate 1e-2, constant, no clipping) and mean
  over SEQ_SEEDS seeds, of every block_coordinates entry and of what the steps changed ('d_' + name)."""
  config = seq_config(
    parametrization,
    d_model,
    4 * d_model,
    base=(SEQ_WIDTHS[0], 4 * SEQ_WIDTHS[0]),
    **{'train.warmup_steps': 0, 'train.schedule': 'constant', 'train.grad_clip': 0.0, 'train.learning_rate': 1e-2},
  )
  e = train.Experiment(config)
  rms = lambda a: jnp.sqrt(jnp.mean(jnp.square(a)))

  @jax.jit
  def run(seed):
    s0 = e.init(seed)
    s1, _ = e.train_chunk(s0, 4)
    tokens = s0['data']['inputs']
    c0, c1 = (block_coordinates(e.merge(s['params']), tokens) for s in (s0, s1))
    return {**{k: rms(v) for k, v in c1.items()}, **{f'd_{k}': rms(c1[k] - c0[k]) for k in c1}}

  rows = [run(seed) for seed in range(SEQ_SEEDS)]
  return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def seq_width_slopes(parametrization):
  rows = [seq_coordinates(parametrization, w) for w in SEQ_WIDTHS]
  return {k: float(np.polyfit(np.log(SEQ_WIDTHS), np.log([r[k] for r in rows]), 1)[0]) for k in rows[0]}


@pytest.mark.slow  # 26-46 s: the bare-FFN coordinate checks stay in the default suite
def test_transformer_coordinate_check_flat_under_mup_drifting_under_standard():
  """Slopes of log RMS against log d_model, measured (CPU, jax 0.10.2, 2026-11-26; docs/mup.md):

  | coordinate | attn_0 | attn_1 | ffn_h_0 | ffn_h_1 | logits | d_attn_0 | d_attn_1 | d_ffn_h_0 | d_ffn_h_1 | d_logits |
  | standard   | +0.94  | +0.73  | +0.56   | +0.36   | +0.51  | +1.13    | +0.77    | +0.71     | +0.40     | +0.46    |
  | mup        | -0.04  | +0.00  | -0.01   | -0.02   | -0.08  | -0.03    | +0.02    | -0.02     | -0.01     | -0.15    |

  Under mup every block coordinate is within 0.1; the change of the logits falls by 0.15 (1.1x per
  doubling, slowing): the base model's logits at init, Table 3's output init (the rule at the base
  width times 1/m, so of size 1/sqrt(m)), move the first steps' softmax; they vanish in the wide
  limit. With the unembedding initialised to zero (the paper's optional readout zero-init; measured
  in development, not built) every slope is within 0.05, d_logits +0.01. Standard drifts: xavier's
  fan_avg init and one Adam rate for every width let the updates add up over d_model units."""
  mup, standard = seq_width_slopes('mup'), seq_width_slopes('standard')
  assert all(abs(s) < 0.1 for k, s in mup.items() if k != 'd_logits'), mup
  assert abs(mup['d_logits']) < 0.2, mup
  assert min(standard[k] for k in ('attn_0', 'd_attn_0', 'ffn_h_0', 'd_logits')) > 0.3, standard


# ---------------------------------------------------------------- MoE FFNs


def moe_config(parametrization='standard', d_ff=64, base=64, **overrides):
  """configs/regression.py:teacher_student_moe (bare FFN, d_model 16, top-2 of 8 experts of width d_ff)."""
  c = configfile.get_config(f'{REGRESSION}:teacher_student_moe')
  c.model.parametrization, c.model.d_ff, c.model.mup_base_d_ff = parametrization, d_ff, base
  c.task.num_train = c.task.num_eval = 128
  c.train.batch_size, c.train.warmup_steps, c.train.steps = 32, 2, 20
  for key, value in overrides.items():
    config_lib.set_path(c, key, value)
  validate(c)
  return c


def seq_moe_config(parametrization='standard', d_model=32, d_ff=128, **overrides):
  """seq_config's transformer with a top-2 of 4 experts MoE in every block (bases 32, 128)."""
  return seq_config(parametrization, d_model, d_ff, **{'model.moe.num_experts': 4, **overrides})


def weight_name(path):
  return next(p.key for p in reversed(path) if isinstance(p, jax.tree_util.DictKey))


MOE_VARIANTS = {
  'relu': {},
  'swiglu_shared_granular': {
    'model.activation': 'swiglu',
    'model.moe.num_shared_experts': 1,
    'model.moe.granularity': 2,
  },
  'soft': {'model.moe.router': 'soft', 'model.moe.slots_per_expert': 2},
}


@pytest.mark.parametrize('variant', MOE_VARIANTS)
def test_moe_mup_at_its_base_width_trains_as_standard(variant):
  """d_ff = base: every init factor is exactly 1 (the same init bit for bit) and 20 steps give the
  same loss and weights (measured: bit for bit; held to float32 rounding)."""
  runs = {}
  for p in ('standard', 'mup'):
    e = train.Experiment(moe_config(p, **MOE_VARIANTS[variant]))
    s0 = jax.jit(e.init)(0)
    runs[p] = (s0, *jax.jit(e.train_chunk, static_argnums=1)(s0, 20))
  (i_std, s_std, m_std), (i_mup, s_mup, m_mup) = runs['standard'], runs['mup']
  for a, b in zip(jax.tree.leaves(weights(i_mup)), jax.tree.leaves(weights(i_std)), strict=True):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_allclose(m_mup['loss'], m_std['loss'], rtol=1e-6)
  for a, b in zip(jax.tree.leaves(weights(s_mup)), jax.tree.leaves(weights(s_std)), strict=True):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-7)


def test_moe_transformer_mup_at_its_base_widths_trains_as_standard():
  """d_model and d_ff at their bases, an MoE in every block: the same init bit for bit, 20 steps equal
  to float32 rounding."""
  runs = {}
  for p in ('standard', 'mup'):
    e = train.Experiment(seq_moe_config(p))
    s0 = jax.jit(e.init)(0)
    runs[p] = (s0, *jax.jit(e.train_chunk, static_argnums=1)(s0, 20))
  (i_std, s_std, m_std), (i_mup, s_mup, m_mup) = runs['standard'], runs['mup']
  for a, b in zip(jax.tree.leaves(weights(i_mup)), jax.tree.leaves(weights(i_std)), strict=True):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_allclose(m_mup['loss'], m_std['loss'], rtol=1e-6)
  for a, b in zip(jax.tree.leaves(weights(s_mup)), jax.tree.leaves(weights(s_std)), strict=True):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def xavier(fan_in, fan_out):
  return np.sqrt(2 / (fan_in + fan_out))


def assert_init_factors(std, mup, expected):
  """Each mup weight is the standard one (the same draws) times expected[its name] (default 1)."""
  seen = set()
  for (path, a), b in zip(
    jax.tree_util.tree_leaves_with_path(weights({'params': mup})),
    jax.tree.leaves(weights({'params': std})),
    strict=True,
  ):
    name = weight_name(path)
    np.testing.assert_allclose(a, b * expected.get(name, 1.0), rtol=2e-6, atol=1e-9, err_msg=jax.tree_util.keystr(path))
    seen.add(name)
  assert set(expected) <= seen, seen


def test_moe_mup_init_bare_ffn():
  """d_ff 128 = 4 x base 32, granularity 2 (8 x 2 experts of width 64, base 16), one shared expert
  (fused width 64, base 16), swiglu: each expert's and the shared FFN's w1, w_gate are the rule
  (xavier) at the base width (input weights: fan-in d_model 16, no width), their w2 the rule at the
  base width / 4 (output weights, m = 4); the router (d_model 16 -> 16 experts, no width) unchanged."""
  overrides = {'model.activation': 'swiglu', 'model.moe.num_shared_experts': 1, 'model.moe.granularity': 2}
  std, mup = (init_params(moe_config(p, 128, 32, **overrides)) for p in ('standard', 'mup'))
  out = mup['w2'][...].shape[-1]
  w1 = xavier(16, 16) / xavier(16, 64)
  assert_init_factors(std, mup, {'w1': w1, 'w_gate': w1, 'w2': xavier(16, out) / xavier(64, out) / 4, 'router_w': 1.0})
  assert mup['w1'][...].shape == (16, 16, 64) and mup['shared']['w1'][...].shape == (16, 64)


@pytest.mark.parametrize('router', ['topk_softmax', 'soft'])
def test_moe_mup_init_sequence_model(router):
  """d_model 64 = 2 x base, d_ff 512 = 4 x base: the experts' w1 (hidden, gain 1/sqrt(2)) and w2
  (hidden, gain 1/2) as the dense FFN's; the router or Soft MoE's slot parameters (d_model -> E or
  E p, an output weight) the rule at the base d_model times 1/2."""
  overrides = {'model.moe.router': router}
  if router == 'soft':
    overrides.update({'model.moe.slots_per_expert': 2, 'model.moe.allow_noncausal': True})
  std, mup = (init_params(seq_moe_config(p, 64, 512, **overrides)) for p in ('standard', 'mup'))
  columns = mup['blocks'][0]['ffn']['router_w'][...].shape[-1]
  w1 = xavier(32, 128) / xavier(64, 512) / np.sqrt(2)
  expected = {'w1': w1, 'w2': w1 / np.sqrt(2), 'router_w': xavier(32, columns) / xavier(64, columns) / 2}
  vocab = mup['unembed'][...].shape[1]
  others = {'embed': np.sqrt(2), 'pos_embed': np.sqrt(2), 'unembed': xavier(32, vocab) / xavier(64, vocab) / 2}
  assert_init_factors(std, mup, {**expected, **others})


def adam_updates(config_fn, *args, **overrides):
  """{parametrization: one Adam step's updates on the same gradients}; no warmup, no clipping."""
  updates = {}
  for p in ('standard', 'mup'):
    e = train.Experiment(config_fn(p, *args, **{'train.grad_clip': 0.0, 'train.warmup_steps': 0, **overrides}))
    w = weights({'params': init_params(e.config)})
    grads = jax.tree.map(lambda x: jnp.cos(jnp.arange(x.size, dtype=jnp.float32).reshape(x.shape)), w)
    updates[p] = e.optimizer.update(grads, e.optimizer.init(w), w)[0]
  return updates


def assert_update_factors(updates, factors):
  for (path, a), b in zip(
    jax.tree_util.tree_leaves_with_path(updates['mup']), jax.tree.leaves(updates['standard']), strict=True
  ):
    assert np.all(b != 0), jax.tree_util.keystr(path)
    np.testing.assert_array_equal(a, factors.get(weight_name(path), 1.0) * b, err_msg=jax.tree_util.keystr(path))


def test_moe_mup_adam_updates_bare_ffn():
  """d_ff 4 x base, one shared expert: every w2 (experts' and shared, fan-in d_ff') 1/4 of standard's;
  w1, the router (fan-in d_model: no width) and the biases equal."""
  updates = adam_updates(moe_config, 128, 32, **{'model.moe.num_shared_experts': 1})
  assert_update_factors(updates, {'w2': 0.25})


@pytest.mark.parametrize('router', ['topk_softmax', 'soft'])
def test_moe_mup_adam_updates_sequence_model(router):
  """d_model 2 x base, d_ff 4 x base: experts' w1 and the router / slot parameters (fan-in d_model)
  1/2, experts' w2 (fan-in d_ff') 1/4, Soft MoE's scale, expert biases and norms equal."""
  overrides = {'model.moe.router': router}
  if router == 'soft':
    overrides.update({'model.moe.slots_per_expert': 2, 'model.moe.allow_noncausal': True})
  updates = adam_updates(seq_moe_config, 64, 512, **overrides)
  assert_update_factors(updates, {'w_qkv': 0.5, 'w_out': 0.5, 'w1': 0.5, 'router_w': 0.5, 'unembed': 0.5, 'w2': 0.25})


def test_moe_mup_frozen_router():
  """model.moe.freeze_router: the router is no nnx.Param (no label, no optimizer state); under mup
  it keeps its init, the output rule's in a sequence model (x 1/2 at d_model 2 x base), and trains."""
  std, mup = (init_params(seq_moe_config(p, 64, 512, **{'model.moe.freeze_router': True})) for p in ('standard', 'mup'))
  e = std['blocks'][0]['ffn']['router_w'][...].shape[-1]
  np.testing.assert_allclose(
    mup['blocks'][0]['ffn']['router_w'][...],
    std['blocks'][0]['ffn']['router_w'][...] * xavier(32, e) / xavier(64, e) / 2,
    rtol=2e-6,
  )
  _, metrics = train_20(seq_moe_config('mup', 64, 512, **{'model.moe.freeze_router': True}))
  assert np.isfinite(float(metrics['loss']))


# The coordinate check of the bare MoE FFN: expert width 32..256 (base 32), top-2 of 8 experts.
MOE_WIDTHS = (32, 64, 128, 256)
MOE_SEEDS = 3


def expert_hidden(model, x_NxD):
  """Every expert's hidden activations on every input (E, N, F), routed there or not."""
  w = model.expert_weights()
  h = jnp.einsum('nd,edf->enf', x_NxD, w['w1']) + w['b1'][:, None]
  return model.spec.act(h)


def moe_coordinates(parametrization, d_ff):
  """RMS over held-out inputs, after 4 Adam steps (rate 1e-3, constant, no clipping), mean over
  MOE_SEEDS seeds: every expert's hidden activations h and their change delta_h, the router logits'
  change delta_logits, the output's change delta_y, split into what the experts' new weights
  changed under the initial router (delta_y_experts) and what the router's change added
  (delta_y_routing = delta_y's rest)."""
  config = moe_config(
    parametrization,
    d_ff,
    MOE_WIDTHS[0],
    **FIRST_STEPS,
  )
  e = train.Experiment(config)
  rms = lambda a: jnp.sqrt(jnp.mean(jnp.square(a)))

  @jax.jit
  def run(seed):
    s0 = e.init(seed)
    s1, _ = e.train_chunk(s0, 4)
    x = s0['data']['x_eval']
    m0, m1 = e.merge(s0['params']), e.merge(s1['params'])
    h0, h1, y0, y1 = expert_hidden(m0, x), expert_hidden(m1, x), m0(x), m1(x)
    logits0, logits1 = x @ m0.router_w[...], x @ m1.router_w[...]
    m1.router_w[...] = m0.router_w[...]  # the new experts under the initial router
    y_experts = m1(x)
    return {
      'h': rms(h1),
      'delta_h': rms(h1 - h0),
      'delta_logits': rms(logits1 - logits0),
      'delta_y': rms(y1 - y0),
      'delta_y_experts': rms(y_experts - y0),
      'delta_y_routing': rms(y1 - y_experts),
    }

  rows = [run(seed) for seed in range(MOE_SEEDS)]
  return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def moe_width_slopes(parametrization):
  rows = [moe_coordinates(parametrization, w) for w in MOE_WIDTHS]
  return {k: float(np.polyfit(np.log(MOE_WIDTHS), np.log([r[k] for r in rows]), 1)[0]) for k in rows[0]}


@pytest.mark.slow  # 38-82 s: the bare-FFN coordinate checks stay in the default suite
def test_moe_coordinate_check_flat_under_mup_drifting_under_standard():
  """Slopes of log RMS against log expert width, measured (CPU, jax 0.10.2, 2026-11-26; docs/mup.md):

  | coordinate | h     | delta_h | delta_logits | delta_y | delta_y_experts | delta_y_routing |
  | standard   | -0.42 | -0.00   | -0.01        | +0.32   | +0.53           | -0.39           |
  | mup        | +0.00 | +0.00   | -0.01        | -0.19   | -0.02           | -0.55           |

  Under mup every expert coordinate and the experts' part of delta y are within 0.1; the router
  logits move the same at every width (the bare FFN's router is an input weight: d_model is the
  task's). delta y falls by 0.19: the router's change reweights expert outputs that start of size
  1/sqrt(m) (Table 3's output init), a part that vanishes in the wide limit (delta_y_routing falls
  as about 1/sqrt(m)); single seeds' delta_y slopes scatter from -0.14 to -0.24, hence 3 seeds.
  The paper's optional zero init of the readout (here every expert's w2; measured in development,
  not built) makes delta y flat (-0.03). Standard drifts: xavier's std ~ (d_model + d_ff)^-1/2
  shrinks h, one Adam rate for every width lets w2's updates add up over d_ff units."""
  mup, standard = moe_width_slopes('mup'), moe_width_slopes('standard')
  assert all(abs(mup[k]) < 0.1 for k in ('h', 'delta_h', 'delta_logits', 'delta_y_experts')), mup
  assert abs(mup['delta_y']) < 0.3, mup
  assert mup['delta_y_routing'] < -0.1, mup
  assert standard['h'] < -0.3 and standard['delta_y_experts'] > 0.3, standard


# ---------------------------------------------------------------- config, programs, checkpoints


@pytest.mark.parametrize(
  'overrides, message',
  [
    ({'model.parametrization': 'mu'}, "model.parametrization='mu' is unknown; allowed: standard, mup"),
    ({'model.mup_base_d_ff': 0}, 'model.mup_base_d_ff=0 must be a positive integer'),
    ({'model.mup_base_d_model': 0}, 'model.mup_base_d_model=0 must be a positive integer'),
    (
      {'model.parametrization': 'mup', 'model.moe.num_experts': 4, 'model.moe.granularity': 3, 'model.d_ff': 48},
      'model.moe.granularity=3 must divide the effective base d_ff 32 (mup: model.mup_base_d_ff; the base expert '
      'width is its 1/granularity)',
    ),
    (
      {'model.parametrization': 'mup', 'train.optimizer': 'sgd'},
      "train.optimizer='sgd' has no mup rules (model.parametrization=mup is Adam's); allowed: adam, adamw",
    ),
    (
      {'model.parametrization': 'mup', 'train.optimizer': 'lion'},
      "train.optimizer='lion' has no mup rules (model.parametrization=mup is Adam's); allowed: adam, adamw",
    ),
    (
      {'model.parametrization': 'mup', 'model.arch': 'tied_relu', 'task.name': 'sparse_features'},
      "model.parametrization=mup is not built for model.arch='tied_relu' (one matrix is its input and output weight)",
    ),
  ],
)
def test_validation_is_one_line(overrides, message):
  with pytest.raises(config_lib.ConfigError) as e:
    validate(small_config(**overrides))
  assert str(e.value) == message


@pytest.mark.parametrize(
  'overrides, message',
  [
    (
      {'model.tie_embeddings': True},
      'model.parametrization=mup needs model.tie_embeddings=False (the embedding is an input weight, the '
      'unembedding an output weight: their init and learning rate differ)',
    ),
    (
      {'model.mup_base_d_model': 30},
      'model.mup_base_d_model=30 must be divisible by model.num_heads=4 (mup: the base model has the same heads)',
    ),
    (
      {'train.optimizer': 'sgd'},
      "train.optimizer='sgd' has no mup rules (model.parametrization=mup is Adam's); allowed: adam, adamw",
    ),
  ],
)
def test_sequence_model_validation_is_one_line(overrides, message):
  c = config_lib.tiny_transformer_config('language', None)
  c.model.parametrization = 'mup'
  for key, value in overrides.items():
    config_lib.set_path(c, key, value)
  with pytest.raises(config_lib.ConfigError) as e:
    validate(c)
  assert str(e.value) == message


def test_standard_accepts_any_optimizer_and_mup_adamw():
  for p, optimizer in (('standard', 'sgd'), ('standard', 'lion'), ('mup', 'adamw')):
    validate(small_config(p, **{'train.optimizer': optimizer}))


def test_mup_widths_are_not_padded_into_one_program():
  """mup's learning-rate factors are compiled in: each width its own program (standard: one)."""
  for p, expected in (('standard', [[0, 1, 2]]), ('mup', [[0], [1], [2]])):
    assert programs.plan_programs([small_config(p, d_ff=w) for w in (16, 32, 64)]) == expected


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
  for arg, n in (('', 9 * 4 * 2 * 3), ('quick', 2 * 4 * 2)):
    base, grid = configfile.load_sweep_file(f'{path}:{arg}' if arg else path)
    runs = sweep.expand(base, grid)
    assert len(runs) == n
    for r in runs:
      validate(r.config)
    assert {r.config.model.d_ff for r in runs} == {64, 256, 1024, 4096}
    assert {r.config.model.parametrization for r in runs} == {'standard', 'mup'}
