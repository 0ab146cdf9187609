"""neurons ablation: dead-unit and key-value metrics on hand-built weights with known answers, the
FFN-input reconstruction against the model's own forward, and the verdict rules on synthetic frames."""

import itertools
import math

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from flax import nnx

from ffn_research import validation
from ffn_research.ablations import neurons
from ffn_research.ablations import verdict
from ffn_research.models import ffn as ffn_lib


def _hand_ffn(activation: str) -> ffn_lib.FFN:
  """d_model 2, d_ff 3: unit 0 has negative weights and bias (dead on x >= 0), units 1 and 2 fire."""
  f = ffn_lib.FFN(2, 3, activation, rngs=nnx.Rngs(0))
  f.w1[...] = jnp.array([[-1.0, 1.0, 0.5], [-2.0, 0.0, -1.0]])
  f.b1[...] = jnp.array([-0.5, 0.0, 0.0])
  return f


def test_dead_fraction_of_hand_built_units():
  x = jnp.asarray(np.random.default_rng(0).uniform(0.0, 1.0, (50, 2)), jnp.float32)  # x >= 0
  relu = np.asarray(_hand_ffn('relu').hidden(x))
  assert np.all(relu[:, 0] == 0) and relu[:, 1].max() > 0 and relu[:, 2].max() > 0
  assert neurons.dead_fraction(relu, 0.0) == 1 / 3
  # GELU of a pre-activation <= -0.5 is negative, never above tau: dead under the tau rule only.
  gelu = np.asarray(_hand_ffn('gelu').hidden(x))
  assert gelu[:, 0].max() < 0 and neurons.dead_fraction(gelu, neurons.DEAD_TAU) == 1 / 3
  assert neurons.dead_fraction(np.full((4, 5), -0.1), 0.0) == 1.0
  assert neurons.dead_fraction(np.eye(5), 0.0) == 0.0
  # A unit with max exactly tau is dead, one just above is not.
  assert neurons.dead_fraction(np.array([[0.01, 0.0100001]]), 0.01) == 0.5


def test_concentration_known_answers():
  num_facts, num_rel = 16, 4
  fact = np.arange(num_facts)
  subject, relation = fact // num_rel, fact % num_rel
  acts = np.zeros((num_facts, 3))
  acts[subject == 2, 0] = [1.0, 2.0, 3.0, 4.0]  # unit 0 fires only on subject 2's facts
  acts[:, 1] = fact                             # unit 1: top 4 = facts 15, 14, 13, 12 (subject 3)
  acts[relation == 1, 2] = fact[relation == 1]  # unit 2 fires only on relation 1
  np.testing.assert_array_equal(neurons.top_k_indices(acts, 4)[:, 1], [15, 14, 13, 12])
  np.testing.assert_allclose(neurons.concentration(acts, subject, 4), [1.0, 1.0, 0.25])
  np.testing.assert_allclose(neurons.concentration(acts, relation, 4), [0.25, 0.25, 1.0])
  # top 2 of [3, 3, 1]-like columns: modal fractions
  np.testing.assert_allclose(neurons.modal_fraction(np.array([[1, 1], [1, 2], [2, 3]])), [2 / 3, 1 / 3])
  # live: k-th largest above tau
  np.testing.assert_array_equal(neurons.live_units(acts, 4, 0.0), [True, True, True])
  np.testing.assert_array_equal(neurons.live_units(acts, 5, 0.0), [False, True, False])


def test_ties_broken_by_lower_index():
  acts = np.array([[1.0], [2.0], [2.0], [0.0]])
  np.testing.assert_array_equal(neurons.top_k_indices(acts, 3)[:, 0], [1, 2, 0])


def _exact_chance(labels, k):
  """Mean modal fraction over every k-subset (brute force)."""
  fr = [np.unique(np.asarray(labels)[list(c)], return_counts=True)[1].max() / k
        for c in itertools.combinations(range(len(labels)), k)]
  return float(np.mean(fr))


def test_chance_concentration_against_enumeration():
  labels = np.array([0, 0, 1, 1])
  assert abs(_exact_chance(labels, 2) - 2 / 3) < 1e-12  # P(same) = 2/6: 1/3 * 1 + 2/3 * 1/2
  assert abs(neurons.chance_concentration(labels, 2) - 2 / 3) < 0.01
  labels = np.arange(12) % 3
  exact = _exact_chance(labels, 4)
  assert abs(neurons.chance_concentration(labels, 4) - exact) < 0.01
  # the max of two labelings is at least either one
  fact = np.arange(12)
  both = neurons.chance_concentration(fact // 3, 3, labels2_N=fact % 3)
  exact_both = float(np.mean([max(np.unique((fact // 3)[list(c)], return_counts=True)[1].max(),
                                  np.unique((fact % 3)[list(c)], return_counts=True)[1].max()) / 3
                              for c in itertools.combinations(range(12), 3)]))
  assert abs(both - exact_both) < 0.01


def test_value_agreement_and_shuffled_keys():
  acts = np.array([[3.0, 0.0], [2.0, 0.0], [1.0, 5.0], [0.0, 4.0]])
  answers = np.array([7, 7, 8, 9])
  np.testing.assert_allclose(neurons.value_agreement(acts, answers, np.array([7, 9]), 2), [1.0, 0.5])
  np.testing.assert_allclose(neurons.value_agreement(acts, answers, np.array([9, 7]), 2), [0.0, 0.0])
  w = np.arange(12.0).reshape(4, 3)
  s = neurons.shuffle_keys(w, seed=0)
  np.testing.assert_array_equal(np.sort(s, axis=0), np.sort(w, axis=0))  # each unit keeps its weights
  assert not np.array_equal(s, w)


def _tiny_model(activation='relu', seed=0):
  config = neurons._base(activation, (10,))
  config.task.num_facts, config.task.vocab_size = 32, 16
  config.model.d_model, config.model.d_ff = 8, 12
  config.train.seed = seed
  validation.validate(config)
  model, data = neurons.initial_model(config)
  return config, model, data


@pytest.fixture(scope='module')
def gelu_model():
  return _tiny_model('gelu')


def test_hidden_acts_reproduce_the_forward_pass(gelu_model):
  """Residual + FFN(hidden) through the final norm and unembedding equals the model's own logits."""
  config, model, data = gelu_model
  # Perturb the final-norm scale and biases so the test is not passed by ones and zeros.
  rng = np.random.default_rng(1)
  model.final_norm.scale[...] = jnp.asarray(rng.uniform(0.5, 1.5, config.model.d_model), jnp.float32)
  ffn = model.blocks[0].ffn
  ffn.b1[...] = jnp.asarray(rng.normal(0, 0.3, ffn.b1.shape), jnp.float32)
  tokens = data['inputs']
  logits, _ = model.apply(tokens)
  h = neurons.hidden_acts(model, tokens, position=1)
  resid = model.mix(model.embed_tokens(tokens))[:, 1]
  resid, h = np.asarray(resid), np.asarray(h)
  out = resid + h @ np.asarray(ffn.w2[...]) + np.asarray(ffn.b2[...])
  rms = np.sqrt(np.mean(out ** 2, axis=-1, keepdims=True) + 1e-6)
  ref = (out / rms * np.asarray(model.final_norm.scale[...])) @ np.asarray(model.unembed[...])
  np.testing.assert_allclose(np.asarray(logits[:, 1]), np.asarray(ref), rtol=1e-4, atol=1e-4)
  # Keys passed explicitly: the model's own w1 gives the same activations.
  np.testing.assert_allclose(neurons.hidden_acts(model, tokens, 1, w1_DxF=ffn.w1[...]), h, rtol=1e-5, atol=1e-6)


def test_promoted_objects_brute_force(gelu_model):
  config, model, _ = gelu_model
  got = neurons.promoted_objects(model, config.task.vocab_size)
  w2 = np.asarray(model.blocks[0].ffn.w2[...])
  scale = np.asarray(model.final_norm.scale[...])
  w_u = np.asarray(model.unembed[...])
  for i in range(w2.shape[0]):
    scores = [float(np.dot(w2[i] * scale, w_u[:, o])) for o in range(config.task.vocab_size)]
    assert got[i] == int(np.argmax(scores))


@pytest.mark.slow  # two more model inits; the step-0 rows of every report show the same too
def test_same_seed_same_initial_weights_across_activations():
  """The paired dead-unit comparison starts every activation from the same weights."""
  _, relu, _ = _tiny_model('relu', seed=3)
  _, silu, _ = _tiny_model('silu', seed=3)
  np.testing.assert_array_equal(relu.blocks[0].ffn.w1[...], silu.blocks[0].ffn.w1[...])


def test_sweeps_validate_and_pair_seeds():
  for scale in ('smoke', 'quick', 'full'):
    specs = neurons.sweeps(scale)
    assert [s.name for s in specs] == list(neurons.ACTIVATIONS)
    seeds = neurons.SETTINGS[scale]['seeds']
    assert seeds >= 3 and (scale != 'full' or seeds >= 5)
    for s in specs:
      validation.validate(s.base)
      assert s.base.train.schedule == 'constant' and s.base.model.num_layers == 1
      assert all(st % s.base.train.log_every == 0 for st in neurons.SETTINGS[scale]['steps'])
      assert len(s.overrides) == seeds * len(neurons.SETTINGS[scale]['steps'])


def _frame(dead_relu, dead_gelu, conc_gap, agree_gap, seeds=5):
  rows = []
  for s in range(seeds):
    for act, dead in (('relu', dead_relu), ('gelu', dead_gelu), ('silu', dead_gelu)):
      rows.append({'activation': act, 'train.seed': s, 'step': 100, 'dead_strict': dead + 0.001 * s,
                   'dead_tau': dead + 0.001 * s, 'trained_conc': 0.8 + 0.001 * s,
                   'shuffled_conc': 0.8 - conc_gap, 'chance_conc': 0.5,
                   'value_agreement': 0.1 + 0.001 * s, 'value_agreement_permuted': 0.1 - agree_gap})
  return pd.DataFrame(rows)


def test_verdicts_on_synthetic_frames():
  v = neurons.decide(_frame(0.10, 0.0, 0.1, 0.05))
  assert [x.outcome for x in v] == [verdict.REPRODUCED] * 6
  v = neurons.decide(_frame(0.0, 0.0, -0.1, -0.05))
  assert v[0].outcome == verdict.NOT_REPRODUCED and v[3].outcome == verdict.NOT_REPRODUCED
  assert v[5].outcome == verdict.NOT_REPRODUCED
  assert v[4].outcome == verdict.REPRODUCED  # 0.8 vs chance 0.5
  assert math.isclose(v[0].statistic, 0.002)
