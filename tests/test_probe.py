"""ffn_research.probe (FFN inputs, hidden activations, router load) and Experiment.task_data."""

from types import SimpleNamespace

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import models
from ffn_research import probe
from ffn_research import train
from ffn_research.models import ffn as ffn_lib

VOCAB, SEQ_LEN, BATCH = 11, 5, 3
TASK = SimpleNamespace(output_dim=VOCAB, vocab_size=VOCAB, seq_len=SEQ_LEN)


def build(arch='transformer', num_layers=2, seed=0, **moe):
  """A small model with every parameter moved off its init (non-zero biases and norm scales, so a
  reference that ignored them would disagree); built in one compiled program (eager is slow)."""
  c = config_lib.default_config()
  c.model.arch, c.model.d_model, c.model.d_ff, c.model.num_heads = arch, 8, 12, 2
  c.model.num_layers = num_layers
  for key, value in moe.items():
    c.model.moe[key] = value

  def make():
    model = models.build_model(c, TASK, nnx.Rngs(params=jax.random.PRNGKey(seed)))
    leaves, treedef = jax.tree.flatten(nnx.state(model, nnx.Param))
    noise = [0.1 * jax.random.normal(jax.random.PRNGKey(100 + i), x.shape) for i, x in enumerate(leaves)]
    nnx.update(model, jax.tree.unflatten(treedef, [x + n for x, n in zip(leaves, noise, strict=True)]))
    return nnx.split(model)[1]

  graphdef = nnx.split(nnx.eval_shape(lambda: models.build_model(c, TASK, nnx.Rngs(params=0))))[0]
  return nnx.merge(graphdef, jax.jit(make)())


def tokens(seed=1):
  return jax.random.randint(jax.random.PRNGKey(seed), (BATCH, SEQ_LEN), 0, VOCAB)


def test_ffn_stack_hidden_matches_numpy_reference():
  model = build('ffn_stack', num_layers=1)
  toks = np.asarray(tokens())
  emb = np.asarray(model.embed[...])[toks] + np.asarray(model.pos_embed[...])[None, :SEQ_LEN]
  mixed = np.cumsum(emb, axis=1) / np.arange(1, SEQ_LEN + 1)[None, :, None]  # causal mean
  ffn, norm = model.blocks[0].ffn, model.blocks[0].ffn_norm
  normed = mixed / np.sqrt(np.mean(mixed**2, -1, keepdims=True) + 1e-6) * np.asarray(norm.scale[...])
  want = np.maximum(normed @ np.asarray(ffn.w1[...]) + np.asarray(ffn.b1[...]), 0.0)
  got = probe.ffn_hidden(model, toks, layer=0)
  assert got.shape == (BATCH, SEQ_LEN, 12)
  np.testing.assert_allclose(np.asarray(probe.ffn_input(model, toks)), normed, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  assert (got == 0).any() and (got > 0).any()  # the ReLU is on both branches


def test_ffn_input_is_what_the_forward_pass_feeds_the_ffn(monkeypatch):
  model = build('transformer', num_layers=2)
  seen = []
  original = ffn_lib.FFN.apply

  def recording(self, x, *, rng=None):
    seen.append(x)
    return original(self, x, rng=rng)

  monkeypatch.setattr(ffn_lib.FFN, 'apply', recording)
  graphdef, state = nnx.split(model)
  toks = tokens()

  def ffn_inputs(state):
    seen.clear()
    nnx.merge(graphdef, state).apply(toks)
    return list(seen)

  fed = jax.jit(ffn_inputs)(state)
  monkeypatch.undo()
  assert len(fed) == 2
  for layer in (0, 1):
    np.testing.assert_allclose(probe.ffn_input(model, toks, layer), fed[layer], rtol=1e-5, atol=1e-6)
    want = np.asarray(model.blocks[layer].ffn.hidden(fed[layer].reshape(-1, 8))).reshape(BATCH, SEQ_LEN, 12)
    np.testing.assert_allclose(probe.ffn_hidden(model, toks, layer), want, rtol=1e-5, atol=1e-6)


def test_expert_load_equals_the_logged_load_over_all_tokens():
  model = build('transformer', num_layers=1, num_experts=4, top_k=2, capacity_factor=0.0)
  toks = tokens()
  graphdef, state = nnx.split(model)
  aux = jax.jit(lambda s, x: nnx.merge(graphdef, s).apply(x)[1])(state, toks)  # eager MoE is slow
  load = probe.expert_load(model, toks)
  np.testing.assert_array_equal(load, np.asarray(aux['layer_0']['load']))
  assert load.shape == (4,) and np.isclose(load.sum(), 1.0) and (load > 0).sum() >= 2


def test_token_hash_expert_load_in_the_second_layer_equals_the_logged_load():
  """The probe hashes the token ids as the forward pass does, in the layer probed and every earlier one."""
  model = build('ffn_stack', num_layers=2, num_experts=4, top_k=1, capacity_factor=0.0, router='token_hash')
  toks = tokens()
  graphdef, state = nnx.split(model)
  aux = jax.jit(lambda s, x: nnx.merge(graphdef, s).apply(x)[1])(state, toks)
  load = probe.expert_load(model, toks, layer=1)
  np.testing.assert_array_equal(load, np.asarray(aux['layer_1']['load']))
  assert (load > 0).sum() >= 2
  assert probe.ffn_input(model, toks, 1).shape == (BATCH, SEQ_LEN, 8)


def test_expert_load_known_answer_per_position():
  model = build('transformer', num_layers=1, num_experts=4, top_k=1, capacity_factor=0.0)
  moe = model.blocks[0].ffn
  moe.router_w[...] = jnp.zeros_like(moe.router_w[...])  # every logit 0 ...
  moe.routing_bias[...] = jnp.array([0.0, 0.0, 5.0, 0.0])  # ... so the bias picks expert 2
  np.testing.assert_array_equal(probe.expert_load(model, tokens(), positions=0), [0, 0, 1, 0])
  moe.routing_bias[...] = jnp.array([0.0, 5.0, 0.0, 0.0])
  np.testing.assert_array_equal(probe.expert_load(model, tokens(), positions=slice(1, 3)), [0, 1, 0, 0])


def test_wrong_model_kinds_are_one_line_errors():
  # Checked on the model's structure before anything runs: abstract models (no weights) suffice.
  dense, moe = (nnx.eval_shape(lambda moe=moe: build(**moe)) for moe in ({}, {'num_experts': 4, 'top_k': 1}))
  with pytest.raises(ValueError, match='is an MoE'):
    probe.ffn_hidden(moe, tokens())
  with pytest.raises(ValueError, match='not an MoE'):
    probe.expert_load(dense, tokens())
  with pytest.raises(ValueError, match='out of range: the model has 2 blocks'):
    probe.ffn_input(dense, tokens(), layer=2)
  bare = nnx.eval_shape(lambda: ffn_lib.FFN(1, 4, rngs=nnx.Rngs(params=0)))
  with pytest.raises(ValueError, match='needs a sequence model'):
    probe.ffn_hidden(bare, jnp.zeros((2, 1)))


@pytest.mark.parametrize('task', ['memorization', 'teacher_student'])
def test_task_data_equals_the_data_init_makes(task):
  c = config_lib.default_config()
  c.task.name = task
  if task == 'memorization':
    c.model.arch, c.model.d_model, c.model.d_ff, c.model.num_heads = 'transformer', 8, 12, 2
    c.task.num_facts, c.task.num_objects = 32, 8
  else:
    c.model.d_model, c.task.noise_std = 4, 0.5  # teacher_student takes its label noise traced
  exp = train.Experiment(c)
  want = jax.jit(exp.init)(3)['data']  # as training makes them
  got = exp.task_data(3)
  assert jax.tree.structure(got) == jax.tree.structure(want)
  tol = 0 if jax.default_backend() == 'cpu' else 1e-6  # a GPU's fusions of the jitted init round differently
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)
  other = exp.task_data(4)
  assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(other), jax.tree.leaves(want), strict=True))
