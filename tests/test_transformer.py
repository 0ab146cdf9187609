"""Tiny transformer and FFN stack: causality, shapes, exact parameter counts, aux plumbing."""

import itertools
import json
import math
import subprocess
import sys
from types import SimpleNamespace

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import models
from ffn_research import train
from ffn_research import validation
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import moe_config
from ffn_research.models import sublayer
from ffn_research.models import transformer
from ffn_research.tasks import sequence
from tests.conftest import REPO_ROOT

VOCAB, SEQ_LEN, BATCH = 11, 5, 2
TASK = SimpleNamespace(output_dim=VOCAB, vocab_size=VOCAB, seq_len=SEQ_LEN)


def model_config(**overrides):
  c = config_lib.default_config()
  c.model.arch = 'transformer'
  c.model.d_model = 8
  c.model.d_ff = 12
  c.model.num_heads = 2
  c.task.name = 'memorization'
  for key, value in overrides.items():
    c.model[key] = value
  return c


def build(config, seed=0):
  return models.build_model(config, TASK, nnx.Rngs(params=jax.random.PRNGKey(seed)))


def tokens(seed=1):
  return jax.random.randint(jax.random.PRNGKey(seed), (BATCH, SEQ_LEN), 0, VOCAB)


def subtree_size(modules) -> int:
  return sum(ffn_lib.param_tree_size(m) for m in modules if m is not None)


@pytest.mark.parametrize(
  'arch,positions',
  [('transformer', 'learned'), ('transformer', 'rotary'), ('transformer', 'none'), ('ffn_stack', 'learned')],
)
def test_causal_through_gradients(arch, positions):
  model = build(model_config(arch=arch, positions=positions))
  x_BxTxD = model.embed_tokens(tokens())
  # jac[b, t, v, b', s, d] = d logits[b, t, v] / d x[b', s, d]
  jac = jax.jit(jax.jacrev(lambda x: model.forward(x)[0]))(x_BxTxD)
  influence_TxS = np.asarray(jnp.abs(jac[0, :, :, 0]).sum(axis=(1, 3)))
  later = np.triu(np.ones((SEQ_LEN, SEQ_LEN), bool), k=1)
  np.testing.assert_array_equal(influence_TxS[later], 0.0)
  assert np.all(influence_TxS[~later] > 0), influence_TxS  # every earlier position matters
  np.testing.assert_array_equal(np.asarray(jnp.abs(jac[0, :, :, 1])), 0.0)  # batch rows independent


# Gradients see only the dense path: a discrete routing choice (which assignment capacity drops)
# has zero derivative, so MoE causality is tested below by changing tokens (finite differences).
MOE_BATCH, MOE_SEQ = 4, 8


def moe_model_config(**moe):
  c = model_config(d_model=8, d_ff=8, num_layers=2)
  c.model.moe.num_experts, c.model.moe.top_k = 4, 2
  for key, value in moe.items():
    c.model.moe[key] = value
  return c


def token_leak(config, train: bool, seed=0):
  """Max |logit change| at positions <= t of sequence 0, and anywhere in the other sequences,
  when sequence 0's tokens after t change (several t and draws); and the smallest dropped
  fraction seen (training), which must be > 0 for a finite capacity to be under test."""
  task = SimpleNamespace(output_dim=VOCAB, vocab_size=VOCAB, seq_len=MOE_SEQ)
  model = models.build_model(config, task, nnx.Rngs(params=jax.random.PRNGKey(seed)))
  rng = jax.random.PRNGKey(5) if train else None

  @jax.jit
  def run(x_BxT):
    logits, aux = model.apply(x_BxT, rng=rng)
    return logits, aux['layer_0']['dropped_fraction']

  draws = np.random.default_rng(seed)
  earlier = other = 0.0
  dropped = 1.0
  for t in (0, 3, 6):
    x = draws.integers(0, VOCAB, (MOE_BATCH, MOE_SEQ))
    y = x.copy()
    y[0, t + 1 :] = (x[0, t + 1 :] + draws.integers(1, VOCAB, MOE_SEQ - t - 1)) % VOCAB
    (a, da), (b, _) = run(jnp.asarray(x)), run(jnp.asarray(y))
    a, b = np.asarray(a), np.asarray(b)
    earlier = max(earlier, float(np.abs(a[0, : t + 1] - b[0, : t + 1]).max()))
    other = max(other, float(np.abs(a[1:] - b[1:]).max()))
    dropped = min(dropped, float(da))
  return earlier, other, dropped


CAUSAL_ROUTINGS = [
  ('topk_softmax', 2, 0.5),
  ('softmax_topk', 2, 0.5),
  ('sigmoid', 2, 0.5),
  ('topk_softmax', 1, 0.5),
  ('topk_softmax', 2, 1.25),
  ('softmax_topk', 2, 0.0),
]
# Every router x capacity with the CPU default dispatch in the default run; the other dispatches
# (they share the capacity plan) on two routings there, and on all of them in the slow run.
CAUSAL_CASES = [
  pytest.param(d, *r, marks=() if d == 'sort' or r in CAUSAL_ROUTINGS[::5] else pytest.mark.slow)
  for d in ('sort', 'einsum', 'ragged')
  for r in CAUSAL_ROUTINGS
]


@pytest.mark.parametrize('dispatch,router,k,cf', CAUSAL_CASES)
def test_moe_transformer_is_causal_and_per_sequence(dispatch, router, k, cf):
  """Default (auto) capacity scope and priority: nothing at positions <= t and nothing in other
  sequences moves when later tokens change, in training and in evaluation (float rounding only)."""
  config = moe_model_config(router=router, top_k=k, capacity_factor=cf, dispatch=dispatch)
  validation.validate(config)
  for training in (True, False):
    earlier, other, dropped = token_leak(config, training)
    assert earlier <= 1e-5 and other <= 1e-5, (training, earlier, other)
    if training and cf == 0.5:
      assert dropped > 0  # the capacity limit is really exercised


def test_causal_archs_are_the_sequence_models():
  assert set(moe_config.CAUSAL_SEQUENCE_ARCHS) == set(models.SEQUENCE_ARCHS)


def test_moe_evaluation_does_not_depend_on_chunking():
  """Held-out scores of 10 sequences in chunks of 3 (the last padded with token-0 rows) and all at once."""
  config = moe_model_config(capacity_factor=0.5)
  task = SimpleNamespace(output_dim=VOCAB, vocab_size=VOCAB, seq_len=MOE_SEQ)
  model = models.build_model(config, task, nnx.Rngs(params=jax.random.PRNGKey(0)))
  apply_fn = jax.jit(lambda x: model.apply(x)[0])
  draws = np.random.default_rng(3)
  x, y = (jnp.asarray(draws.integers(0, VOCAB, (10, MOE_SEQ))) for _ in range(2))
  ce_whole, correct_whole = sequence.scores_in_chunks(apply_fn, x, y)
  ce_chunked, correct_chunked = sequence.scores_in_chunks(apply_fn, x, y, chunk=3)
  np.testing.assert_allclose(ce_chunked, ce_whole, rtol=1e-6, atol=1e-6)
  np.testing.assert_array_equal(correct_chunked, correct_whole)


@pytest.mark.parametrize(
  'moe,where',
  [
    (dict(router='expert_choice', top_k=1, capacity_factor=1.0), 'earlier'),
    (dict(router='soft', slots_per_expert=2), 'earlier'),  # every slot averages its whole sequence
    (dict(capacity_factor=0.5, capacity_scope='batch'), 'other'),
    (dict(capacity_factor=0.5, drop_priority='score', router='softmax_topk'), 'earlier'),
  ],
)
def test_noncausal_moe_is_refused_and_the_probe_sees_its_leak(moe, where):
  """The settings that leak are refused in one line; accepted with allow_noncausal, the probe above
  detects their leak (so it can fail), and the run summary names it (models.run_notes)."""
  config = moe_model_config(**moe)
  with pytest.raises(config_lib.ConfigError, match='allow_noncausal') as e:
    validation.validate(config)
  assert '\n' not in str(e.value)
  config.model.moe.allow_noncausal = True
  validation.validate(config)
  earlier, other, _ = token_leak(config, train=True)
  assert {'earlier': earlier, 'other': other}[where] > 1e-3
  assert models.run_notes(config)['moe_noncausal'].startswith('model.moe.')
  assert models.run_notes(moe_model_config()) == {}


@pytest.mark.parametrize('arch', ['transformer', 'ffn_stack'])
def test_output_shapes(arch):
  model = build(model_config(arch=arch))
  logits, aux = nnx.jit(lambda m, x: m.apply(x))(model, tokens())
  assert logits.shape == (BATCH, SEQ_LEN, VOCAB) and logits.dtype == jnp.float32
  assert set(aux) == {'layer_0', 'layer_1'}


@pytest.mark.parametrize('arch', ['transformer', 'ffn_stack'])
def test_positions_give_those_logits_and_the_same_aux(arch):
  """apply(positions=...) (the train step's logits at scored positions) = the full logits there."""
  model = build(model_config(arch=arch, **{'dropout_rate': 0.0}))
  full, aux = nnx.jit(lambda m, x: m.apply(x))(model, tokens())
  some, some_aux = nnx.jit(lambda m, x: m.apply(x, positions=slice(2, SEQ_LEN)))(model, tokens())
  assert some.shape == (BATCH, SEQ_LEN - 2, VOCAB)
  np.testing.assert_allclose(some, full[:, 2:], rtol=1e-6, atol=1e-6)
  assert jax.tree.structure(aux) == jax.tree.structure(some_aux)
  for a, b in zip(jax.tree.leaves(aux), jax.tree.leaves(some_aux), strict=True):
    np.testing.assert_array_equal(a, b)


COUNT_CASES = [
  dict(arch=arch, norm=norm, positions=positions, tie_embeddings=tie, use_ffn=use_ffn, activation=act, use_bias=bias)
  for arch, norm, positions, tie, use_ffn, act, bias in itertools.product(
    ['transformer', 'ffn_stack'],
    ['rmsnorm', 'layernorm'],
    ['learned', 'rotary', 'none'],
    [False, True],
    [True, False],
    ['relu', 'swiglu'],
    [True, False],
  )
  if not (arch == 'ffn_stack' and (positions == 'rotary' or not use_ffn))
]


@pytest.mark.parametrize(
  'overrides', COUNT_CASES[::4] + COUNT_CASES[1::9], ids=lambda o: '-'.join(str(v) for v in o.values())
)
def test_param_counts_exact(overrides):
  config = model_config(num_layers=3, **overrides)
  transformer.validate(config.model)
  model = nnx.eval_shape(lambda: build(config))
  counts = models.model_counts(config, TASK)
  blocks = list(model.blocks)
  assert ffn_lib.param_tree_size(model) == counts['num_params'] == counts['num_active_params']
  assert subtree_size([b.attn for b in blocks]) == counts['num_attention_params']
  assert subtree_size([b.ffn for b in blocks]) == counts['num_ffn_params']
  norms = [model.final_norm] + [b.attn_norm for b in blocks] + [b.ffn_norm for b in blocks]
  assert subtree_size(norms) == counts['num_norm_params']
  embedding = math.prod(model.embed.shape) + (0 if model.pos_embed is None else math.prod(model.pos_embed.shape))
  assert embedding == counts['num_embedding_params']
  assert (0 if model.unembed is None else math.prod(model.unembed.shape)) == counts['num_unembedding_params']


def test_param_count_by_hand():
  # d=8, V=11, T=5, 2 layers, d_ff=12 relu with biases, rmsnorm, learned positions, untied.
  c = models.model_counts(model_config(), TASK)
  ffn = 2 * 8 * 12 + 12 + 8
  assert c['num_params'] == 11 * 8 + 5 * 8 + 8 * 11 + 2 * (4 * 64 + ffn) + (2 * 2 + 1) * 8
  attention_flops = 2 * 4 * 8 * 8 + 2 * 2 * 5 * 8  # projections; scores and mixing over T=5
  assert c['flops_per_token'] == 2 * (attention_flops + 2 * 2 * 8 * 12) + 2 * 8 * 11


def test_tied_unembedding_is_embedding_transpose():
  model = build(model_config(tie_embeddings=True, num_layers=1))
  x_BxTxD = model.embed_tokens(tokens())
  h = model.final_norm(model.blocks[0](x_BxTxD, None)[0])
  np.testing.assert_allclose(model.apply(tokens())[0], h @ model.embed[...].T, rtol=1e-6)


def test_rotary_preserves_norms_and_depends_on_offsets_only():
  q_1xTx1xK = jax.random.normal(jax.random.PRNGKey(0), (1, 1, 1, 6)) * jnp.ones((1, 7, 1, 1))
  k_1xTx1xK = jax.random.normal(jax.random.PRNGKey(1), (1, 1, 1, 6)) * jnp.ones((1, 7, 1, 1))
  rq, rk = (jax.jit(transformer.rotary)(x)[0, :, 0] for x in (q_1xTx1xK, k_1xTx1xK))
  np.testing.assert_allclose(jnp.linalg.norm(rq, axis=-1), jnp.linalg.norm(q_1xTx1xK[0, :, 0], axis=-1), rtol=1e-5)
  dots_TxT = rq @ rk.T  # the same vectors at every position: dots depend on t - s only
  for offset in range(-6, 7):
    diag = jnp.diagonal(dots_TxT, offset)
    np.testing.assert_allclose(diag, diag[0], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(rq[0], q_1xTx1xK[0, 0, 0], rtol=1e-6)  # position 0 is unrotated


class StubFFN(ffn_lib.Layer):
  """An FFN-like sublayer with an aux loss and after_step state, like an MoE."""

  def __init__(self, d, layer_id, rngs):
    self.w = nnx.Param(jax.random.normal(rngs.params(), (d, d)))
    self.layer_id = layer_id
    self.seen = nnx.Variable(jnp.zeros(()))

  def apply(self, x, *, rng=None):
    return x @ self.w[...], {'balance_loss': jnp.float32(self.layer_id + 1), 'load': jnp.ones(3)}

  def after_step(self, aux):
    self.seen[...] = self.seen[...] + aux['balance_loss']


def test_ffn_aux_collected_per_layer_and_forwarded_to_after_step(monkeypatch):
  made = []

  def fake_build_ffn(model_cfg, d_in, d_out, rngs, mesh=None, d_ff_true=None):
    assert d_in == d_out == model_cfg.d_model and mesh is None and d_ff_true is None
    made.append(StubFFN(d_in, len(made), rngs))
    return made[-1]

  monkeypatch.setattr(sublayer, 'build_ffn', fake_build_ffn)
  model = build(model_config(num_layers=3))
  logits, aux = model.apply(tokens())
  assert sorted(aux) == ['layer_0', 'layer_1', 'layer_2']
  assert [float(aux[f'layer_{i}']['balance_loss']) for i in range(3)] == [1.0, 2.0, 3.0]
  model.after_step(aux)
  model.after_step(aux)
  assert [float(f.seen[...]) for f in made] == [2.0, 4.0, 6.0]


def test_without_ffn_there_is_no_ffn_and_no_aux():
  model = build(model_config(use_ffn=False))
  assert all(b.ffn is None and b.ffn_norm is None for b in model.blocks)
  assert model.apply(tokens())[1] == {}
  model.after_step({})


@pytest.mark.parametrize(
  'overrides,key',
  [
    (dict(arch='ffn_stack', positions='rotary'), 'model.positions'),
    (dict(arch='ffn_stack', use_ffn=False), 'model.use_ffn'),
    (dict(num_heads=3), 'model.d_model'),
    (dict(d_model=6, num_heads=2, positions='rotary'), 'model.positions'),
    (dict(norm='batchnorm'), 'model.norm'),
    (dict(num_layers=0), 'model.num_layers'),
  ],
)
def test_invalid_model_configs_name_the_key(overrides, key):
  with pytest.raises(config_lib.ConfigError, match=key):
    validation.validate(model_config(**overrides))


def test_arch_must_match_task_kind():
  config = model_config()
  config.task.name = 'teacher_student'
  with pytest.raises(config_lib.ConfigError, match='model.arch'):
    validation.validate(config)
  config = model_config(arch='ffn')
  with pytest.raises(config_lib.ConfigError, match='model.arch'):
    validation.validate(config)


@pytest.mark.parametrize('arch,tie', [pytest.param('ffn_stack', False, marks=pytest.mark.slow), ('transformer', True)])
def test_frozen_embeddings_stay_fixed_and_the_rest_trains(arch, tie):
  config = model_config(arch=arch, tie_embeddings=tie, freeze_embeddings=True)
  config.task.num_facts, config.task.num_relations, config.task.num_objects = 8, 2, 5
  config.train.steps, config.train.batch_size = 3, 4
  validation.validate(config)
  exp = train.Experiment(config)
  state = exp.init(0)
  after, _ = exp.train_chunk(state, 3)
  frozen = {'embed', 'pos_embed', 'unembed'}
  changed = {}
  for (path, before), (_, now) in zip(
    nnx.to_flat_state(state['params']), nnx.to_flat_state(after['params']), strict=True
  ):
    changed['/'.join(map(str, path))] = (
      int(np.asarray(before[...]).size) if not np.array_equal(np.asarray(before[...]), np.asarray(now[...])) else 0
    )
    if path[0] in frozen:
      np.testing.assert_array_equal(np.asarray(before[...]), np.asarray(now[...]))
  # Every trainable parameter moved; their count is num_trainable_params.
  assert sum(changed.values()) == exp.counts['num_trainable_params']
  c = exp.counts
  assert c['num_trainable_params'] == (c['num_params'] - c['num_embedding_params'] - c['num_unembedding_params'])
  # Without freezing the embeddings move too and everything is trainable.
  config.model.freeze_embeddings = False
  exp = train.Experiment(config)
  after, _ = exp.train_chunk(state, 3)
  embed_before = np.asarray(state['params']['embed'][...])
  assert not np.array_equal(embed_before, np.asarray(after['params']['embed'][...]))
  assert exp.counts['num_trainable_params'] == exp.counts['num_params']


def test_freeze_embeddings_needs_a_sequence_model():
  config = config_lib.default_config()
  config.model.freeze_embeddings = True
  with pytest.raises(config_lib.ConfigError, match='model.freeze_embeddings'):
    validation.validate(config)


@pytest.mark.slow
def test_profile_step_entry_point(tmp_path):
  """python -m benchmarks.profile_step runs and writes one row per batch size with positive figures."""
  out = tmp_path / 'profile.json'
  proc = subprocess.run(
    [sys.executable, '-m', 'benchmarks.profile_step', '--batch_sizes=8', '--repeats=1', f'--json={out}'],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  rows = json.loads(out.read_text())['rows']
  assert [r['name'] for r in rows] == ['batch 8'] and rows[0]['num_params'] == 91_488
  assert all(rows[0][k] > 0 for k in ('compile_s', 'steps_per_s', 'train_step_ms', 'grad_ms'))
  assert 'batch 8' in proc.stdout


@pytest.mark.slow
def test_profile_step_group_variants(tmp_path):
  """--group --variants times each variant and counts its FLOPs: without attention, fewer FLOPs."""
  out = tmp_path / 'group.json'
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'benchmarks.profile_step',
      '--group=2',
      '--d_models=8',
      '--chunks=1',
      '--variants=default,no_attention',
      f'--json={out}',
    ],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  rows = {r['variant']: r for r in json.loads(out.read_text())['rows']}
  assert sorted(rows) == ['default', 'no_attention']
  for r in rows.values():
    assert r['d_model'] == 8 and r['group'] == 2 and len(r['chunk_s']) == 1
    assert r['steps_per_s_per_run'] > 0 and r['ms_per_step'] > 0 and r['gflop_per_step'] > 0
    assert r['gflops'] == pytest.approx(r['gflop_per_step'] / r['ms_per_step'] * 1e3)
  assert rows['no_attention']['gflop_per_step'] < rows['default']['gflop_per_step']
  assert proc.stdout.count('# language, group of 2 seeds, d_model 8, ') == 2
  bad = subprocess.run(
    [sys.executable, '-m', 'benchmarks.profile_step', '--group=2', '--variants=nope'],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert bad.returncode != 0 and 'unknown --variants nope' in bad.stderr
