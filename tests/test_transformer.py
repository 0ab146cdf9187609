"""Tiny transformer and FFN stack: causality, shapes, exact parameter counts, aux plumbing."""

import itertools
import json
import math
import subprocess
import sys
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from ffn_research import config as config_lib
from ffn_research import validation
from ffn_research import models
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import sublayer, transformer
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


@pytest.mark.parametrize('arch,positions', [('transformer', 'learned'), ('transformer', 'rotary'),
                                            ('transformer', 'none'), ('ffn_stack', 'learned')])
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
  for a, b in zip(jax.tree.leaves(aux), jax.tree.leaves(some_aux)):
    np.testing.assert_array_equal(a, b)


COUNT_CASES = [
    dict(arch=arch, norm=norm, positions=positions, tie_embeddings=tie, use_ffn=use_ffn,
         activation=act, use_bias=bias)
    for arch, norm, positions, tie, use_ffn, act, bias in itertools.product(
        ['transformer', 'ffn_stack'], ['rmsnorm', 'layernorm'], ['learned', 'rotary', 'none'],
        [False, True], [True, False], ['relu', 'swiglu'], [True, False])
    if not (arch == 'ffn_stack' and (positions == 'rotary' or not use_ffn))
]


@pytest.mark.parametrize('overrides', COUNT_CASES[::4] + COUNT_CASES[1::9],
                         ids=lambda o: '-'.join(str(v) for v in o.values()))
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
  np.testing.assert_allclose(jnp.linalg.norm(rq, axis=-1), jnp.linalg.norm(q_1xTx1xK[0, :, 0], axis=-1),
                             rtol=1e-5)
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


@pytest.mark.parametrize('overrides,key', [
    (dict(arch='ffn_stack', positions='rotary'), 'model.positions'),
    (dict(arch='ffn_stack', use_ffn=False), 'model.use_ffn'),
    (dict(num_heads=3), 'model.d_model'),
    (dict(d_model=6, num_heads=2, positions='rotary'), 'model.positions'),
    (dict(norm='batchnorm'), 'model.norm'),
    (dict(num_layers=0), 'model.num_layers'),
])
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
  from ffn_research import train  # pylint: disable=g-import-not-at-top
  config = model_config(arch=arch, tie_embeddings=tie, freeze_embeddings=True)
  config.task.num_facts, config.task.num_relations, config.task.vocab_size = 8, 2, 5
  config.train.steps, config.train.batch_size = 3, 4
  validation.validate(config)
  exp = train.Experiment(config)
  state = exp.init(0)
  after, _ = exp.train_chunk(state, 3)
  frozen = {'embed', 'pos_embed', 'unembed'}
  changed = {}
  for (path, before), (_, now) in zip(nnx.to_flat_state(state['params']), nnx.to_flat_state(after['params'])):
    changed['/'.join(map(str, path))] = int(np.asarray(before[...]).size) if not np.array_equal(
        np.asarray(before[...]), np.asarray(now[...])) else 0
    if path[0] in frozen:
      np.testing.assert_array_equal(np.asarray(before[...]), np.asarray(now[...]))
  # Every trainable parameter moved; their count is num_trainable_params.
  assert sum(changed.values()) == exp.counts['num_trainable_params']
  c = exp.counts
  assert c['num_trainable_params'] == (c['num_params'] - c['num_embedding_params']
                                       - c['num_unembedding_params'])
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
  """python -m experiments.profile_step runs and writes one row per batch size with positive figures."""
  out = tmp_path / 'profile.json'
  proc = subprocess.run([sys.executable, '-m', 'experiments.profile_step', '--batch_sizes=8',
                         '--repeats=1', f'--json={out}'], cwd=REPO_ROOT, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr[-2000:]
  rows = json.loads(out.read_text())['rows']
  assert [r['name'] for r in rows] == ['batch 8'] and rows[0]['num_params'] == 91_488
  assert all(rows[0][k] > 0 for k in ('compile_s', 'steps_per_s', 'train_step_ms', 'grad_ms'))
  assert 'batch 8' in proc.stdout
