"""neurons ablation: dead-unit and key/value metrics against hand-computed NumPy, the probe path on a tiny
transformer, the arms, the rules and their gates on synthetic selections, and a smoke run through the real
entry point."""

import itertools
import json
import math
import os

import jax
import numpy as np
import pandas as pd
import pytest

from ffn_research import ablations
from ffn_research import checkpoints as checkpoints_lib
from ffn_research import loop
from ffn_research import probe
from ffn_research import stats
from ffn_research import sweep
from ffn_research import train
from ffn_research import validation
from ffn_research.ablations import base
from ffn_research.ablations import neurons

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_dead_mask_hand_computed():
  acts = np.array([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0], [-0.5, 0.0, 0.0]])
  np.testing.assert_array_equal(neurons.dead_mask(acts), [True, False, False])
  assert neurons.dead_mask(np.full((4, 5), -0.1)).all() and not neurons.dead_mask(np.eye(5)).any()
  assert neurons.dead_mask(np.array([[0.0, 1e-30]])).tolist() == [True, False]


def test_top_k_live_and_concentration_known_answers():
  labels = np.array([0, 0, 1, 1, 2, 2, 3, 3])
  acts = np.zeros((8, 3))
  acts[[2, 3], 0] = [5.0, 4.0]  # unit 0 fires only on label 1
  acts[:, 1] = np.arange(8)  # unit 1: top 2 = inputs 7, 6 (label 3); top 4 = 7, 6, 5, 4
  acts[[0, 4], 2] = [1.0, 1.0]  # unit 2: a tie, broken by the lower index
  np.testing.assert_array_equal(neurons.top_k_indices(acts, 2)[:, 1], [7, 6])
  np.testing.assert_array_equal(neurons.top_k_indices(acts, 2)[:, 2], [0, 4])
  np.testing.assert_allclose(neurons.concentration(acts, labels, 2), [1.0, 1.0, 0.5])
  np.testing.assert_allclose(neurons.concentration(acts[:, 1:2], labels, 4), [0.5])
  np.testing.assert_array_equal(neurons.live_units(acts, 2), [True, True, True])
  np.testing.assert_array_equal(neurons.live_units(acts, 3), [False, True, False])  # unit 1's 3rd largest is 5
  np.testing.assert_allclose(neurons.modal_fraction(np.array([[1, 1], [1, 2], [2, 3]])), [2 / 3, 1 / 3])


def test_chance_concentration_against_enumeration():
  for labels, k in ((np.array([0, 0, 1, 1]), 2), (np.arange(12) % 3, 4)):
    exact = np.mean(
      [
        np.unique(labels[list(c)], return_counts=True)[1].max() / k
        for c in itertools.combinations(range(len(labels)), k)
      ]
    )
    assert abs(neurons.chance_concentration(labels, k, draws=20000) - exact) < 0.01
  assert neurons.chance_concentration(np.zeros(10, int), 3) == 1.0


def test_value_agreement_shuffle_keys_and_ngram_labels():
  acts = np.array([[3.0, 0.0], [2.0, 0.0], [1.0, 5.0], [0.0, 4.0]])
  nxt = np.array([7, 7, 8, 9])
  np.testing.assert_allclose(neurons.value_agreement(acts, nxt, np.array([7, 9]), 2), [1.0, 0.5])
  np.testing.assert_allclose(neurons.value_agreement(acts, nxt, np.array([9, 7]), 2), [0.0, 0.0])
  w = np.arange(12.0).reshape(4, 3)
  s = neurons.shuffle_keys(w, seed=0)
  np.testing.assert_array_equal(np.sort(s, axis=0), np.sort(w, axis=0))  # each unit keeps its weights
  assert not np.array_equal(s, w)
  lab = neurons.ngram_labels(np.array([[1, 2, 3], [0, 3, 3]]), vocab=4)
  np.testing.assert_array_equal(lab['token'], [2, 3, 3, 3])
  np.testing.assert_array_equal(lab['ngram'], [1 * 4 + 2, 2 * 4 + 3, 0 * 4 + 3, 3 * 4 + 3])


@pytest.fixture(scope='module')
def tiny():
  """A smoke-shaped 2-layer transformer at its initial weights, with trained-like random final-norm scale."""
  config = neurons._base('smoke', 1e-2)
  config.train.seed = 3
  validation.validate(config)
  exp, init, _ = loop.restore_program(config)
  state = init(3)
  model = exp.merge(state['params'])
  rng = np.random.default_rng(1)
  model.final_norm.scale[...] = rng.uniform(0.5, 1.5, config.model.d_model).astype(np.float32)
  return config, model, state['data']


def test_key_value_matches_the_probe_and_brute_force(tiny):
  config, model, data = tiny
  tokens, nxt = np.asarray(data['eval']['inputs']), np.asarray(data['eval']['targets'])
  v = config.task.vocab_size
  for layer in (0, 1):
    h = probe.ffn_hidden(model, tokens, layer)[:, 1:].reshape(-1, config.model.d_ff)
    out = neurons.key_value(model, tokens, nxt, layer, seed=0)
    live = neurons.live_units(h, neurons.TOP_K)
    assert out['trained_live'] == live.sum() > 0
    lab = neurons.ngram_labels(tokens, v)
    assert math.isclose(
      out['trained_ngram'], neurons.concentration(h[:, live], lab['ngram'], neurons.TOP_K).mean(), rel_tol=1e-6
    )
    # promoted tokens by brute force over the vocabulary
    w2 = np.asarray(model.blocks[layer].ffn.w2[...])
    w_u, scale = np.asarray(model.unembed[...]), np.asarray(model.final_norm.scale[...])
    got = neurons.promoted_tokens(model, layer)
    for i in range(w2.shape[0]):
      assert got[i] == int(np.argmax([np.dot(w2[i] * scale, w_u[:, o]) for o in range(v)]))
    agree = neurons.value_agreement(h[:, live], nxt[:, 1:].reshape(-1), got[live], neurons.TOP_K).mean()
    assert math.isclose(out['value'], agree, rel_tol=1e-6)


def test_arms_set_the_rate_of_the_dead_grid_and_tune_the_reference():
  for scale, regime in neurons.REGIMES.items():
    arms = {a.name: a for a in neurons.arms(scale)}
    lrs = neurons.LRS[scale]
    assert set(arms) == {neurons.cell(lr) for lr in lrs} | {neurons.REF}
    for lr in lrs:
      a = arms[neurons.cell(lr)]
      assert not a.tuned and a.base.train.learning_rate == lr and a.steps_factor == 1
      assert [a.label(p) for p in a.points] == [neurons.cell(lr)] and a.points[''] == {}
    ref = arms[neurons.REF]
    assert ref.tuned and ref.steps_factor == 1 and ref.base.train.weight_decay == 0.0
    for a in arms.values():
      validation.validate(a.base)
      assert (a.base.model.arch, a.base.model.activation, a.base.model.use_bias) == ('transformer', 'relu', True)
      assert a.base.train.optimizer == 'adamw' and a.base.train.weight_decay == 0.0
    assert regime.seeds >= 3 and len(lrs) >= 3
  # full: 10 seeds, T = 3,200, every rate one the published bias-free run learned at (0.3 and 1 did not)
  assert neurons.REGIMES['full'].seeds >= 10 and neurons.REGIMES['full'].steps == 3200
  assert neurons.LRS['full'] == (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
  # the grid's rates are traced: one program per budget across the five rate arms
  steps = neurons.REGIMES['full'].steps
  configs = [
    sweep.apply_overrides(a.base, {**o, **a.budget(b), neurons.SEED: 0})
    for a in neurons.arms('full')
    if not a.tuned
    for o in a.points.values()
    for b in (steps // 4, steps // 2, steps)
  ]
  assert len({sweep.group_key(c) for c in configs}) == 3
  for c in configs:
    assert c.train.checkpoint_every * 2 == c.train.steps and c.train.eval_every * 2 == c.train.steps


def _harsh(lr, layer, seed):
  """More dead units at a higher rate and in layer 0 (plus seed noise)."""
  return 0.1 * math.log10(lr / 1e-4) * (1.5 if layer == 0 else 1.0) + 0.001 * seed


def selection(dead=_harsh, gap=0.05, bits=1.4, seeds=10, scale='full', grid_bits=1.4):
  """A runner selection at one budget (T = 3,200 for every cell)."""
  rows = []
  for lr, seed in itertools.product(neurons.LRS[scale], range(seeds)):
    d = [dead(lr, layer, seed) for layer in (0, 1)]
    rows.append(
      {
        'point': neurons.cell(lr),
        neurons.LR: lr,
        neurons.STEPS: 3200,
        neurons.SEED: seed,
        'dead': np.mean(d),
        'dead_l0': d[0],
        'dead_l1': d[1],
        'dead_init': 0.0,
        'eval_bits': grid_bits,
        'unigram_bits': 3.9,
      }
    )
  for seed in range(seeds):
    rows.append(
      {
        'point': neurons.REF,
        neurons.LR: 1e-2,
        neurons.STEPS: 3200,
        neurons.SEED: seed,
        'dead': 0.0,
        'dead_init': 0.0,
        'eval_bits': bits,
        'unigram_bits': 3.9,
        **{f'trained_live_l{x}': 100 for x in (0, 1)},
        **{f'trained_ngram_l{x}': 0.8 + 0.001 * seed for x in (0, 1)},
        **{f'shuffled_ngram_l{x}': 0.8 - gap for x in (0, 1)},
        'value_l1': 0.2 + 0.001 * seed,
        'value_permuted_l1': 0.2 - gap,
      }
    )
  return pd.DataFrame(rows)


def test_rules_reproduced_on_a_harsh_grid_and_name_their_points():
  v = neurons.rules(selection(), 'full')
  assert [x.outcome for x in v] == [stats.REPRODUCED] * 5, [x.detail for x in v]
  # verdict 1's per-seed slope: d dead / d log10 lr, mean of layers = 0.1 * 1.25
  assert math.isclose(v[0].statistic, 0.125, rel_tol=1e-9)
  # verdict 2: layer 0 - layer 1 = 0.05 * the mean over the rates of log10(lr / 1e-4)
  assert math.isclose(v[1].statistic, 0.05 * np.mean(np.log10(np.array(neurons.LRS['full']) / 1e-4)), rel_tol=1e-9)
  assert math.isclose(v[2].statistic, 0.05 + 0.0045, rel_tol=1e-9)  # 0.8 + 0.001 * seed - 0.75, mean over seeds
  grid = tuple(neurons.cell(lr) for lr in neurons.LRS['full'])
  assert v[0].points == grid == v[1].points
  assert all(x.points == (neurons.REF,) for x in v[2:]) and all(x.boundaries for x in v)


def test_rules_not_reproduced_when_the_directions_flip_but_the_layer_verdict_never_refutes():
  flipped = lambda lr, layer, seed: _harsh(1e-3 / lr * 1e-2, 1 - layer, seed) + 0.5
  v = neurons.rules(selection(flipped, gap=-0.05), 'full')
  assert [x.raw_outcome for x in v] == [stats.NOT_REPRODUCED] * 5, [x.detail for x in v]
  assert [x.outcome for x in v] == [stats.NOT_REPRODUCED, stats.INVALID] + [stats.NOT_REPRODUCED] * 3
  (control,) = v[1].failed_checks
  assert control.role == stats.PREMISE and 'no positive control' in control.detail
  # a rise smaller than DEAD_MARGIN per decade is not "more"
  small = lambda lr, layer, seed: 0.02 + 0.001 * math.log10(lr / 1e-4) + 0.0001 * seed
  assert neurons.rules(selection(small), 'full')[0].outcome == stats.NOT_REPRODUCED


def _failed(v):
  return [c.name.removeprefix('premise: ').split(':')[0] for c in v.failed_checks]


def test_gates_make_verdicts_invalid():
  v = neurons.rules(selection(lambda *a: 0.0), 'full')  # nothing dies anywhere: the premise of 1-2 fails
  assert [x.outcome for x in v[:2]] == [stats.INVALID] * 2 and all('kills' in _failed(x) for x in v[:2])
  (k,) = [c for c in v[0].failed_checks if 'kills' in c.name]
  assert k.remedy == stats.DOUBLE_STEPS and k.points == tuple(neurons.cell(lr) for lr in neurons.LRS['full'])
  assert v[2].outcome == stats.REPRODUCED
  f = selection(lambda *a: 0.05)  # dead at initialisation only: not deaths by training
  f['dead_init'] = 0.05
  assert all(x.outcome == stats.INVALID for x in neurons.rules(f, 'full')[:2])
  v = neurons.rules(selection(bits=3.9), 'full')  # the reference learned nothing: keys and values invalid
  assert [x.outcome for x in v] == [stats.REPRODUCED] * 2 + [stats.INVALID] * 3
  learned = [c for c in v[2].failed_checks if c.name.startswith('premise: learned')]
  assert learned and learned[0].remedy == stats.DOUBLE_STEPS and learned[0].points == (neurons.REF,)
  assert learned[0].role == stats.PREMISE and 'failing: reference 0' in learned[0].detail
  # 1 bit below the unigram entropy is the line: 2.95 bits (0.95 below) is not learned, 2.85 is
  assert neurons.rules(selection(bits=2.95), 'full')[2].outcome == stats.INVALID
  assert neurons.rules(selection(bits=2.85), 'full')[2].outcome == stats.REPRODUCED
  f = selection()
  f.loc[f['point'] == neurons.REF, 'shuffled_ngram_l0'] = 1.0  # no room above the shuffled baseline
  f.loc[f['point'] == neurons.REF, 'trained_live_l1'] = 3  # too few live units
  v = neurons.rules(f, 'full')
  assert _failed(v[2]) == ['room'] and _failed(v[3]) == ['live'] and _failed(v[4]) == ['live']


def test_dead_unit_verdicts_rest_on_cells_that_learned_and_double_the_whole_grid():
  f = selection()
  harsh = f[neurons.LR] >= 0.1
  f.loc[harsh, 'eval_bits'] = f.loc[harsh, 'unigram_bits'] - 0.25
  v = neurons.rules(f, 'full')
  assert [x.outcome for x in v] == [stats.INVALID] * 2 + [stats.REPRODUCED] * 3
  assert [x.raw_outcome for x in v[:2]] == [stats.REPRODUCED] * 2
  grid = tuple(neurons.cell(lr) for lr in neurons.LRS['full'])
  for x in v[:2]:
    (failed,) = [c for c in x.failed_checks if c.role == stats.PREMISE]
    assert failed.name.startswith('premise: learned') and failed.remedy == stats.DOUBLE_STEPS
    assert failed.points == grid  # every cell doubles together: the comparison keeps one budget
    assert 'failing: lr_0.1 0.25' in failed.detail and 'the other 4 cell(s)' in failed.detail


def test_shuffled_keys_keep_each_units_bias(tiny):
  config, model, data = tiny
  ffn = model.blocks[0].ffn
  assert ffn.use_bias
  ffn.b1[...] = np.full(ffn.b1.shape, -1e3, np.float32)  # every unit dead, trained and shuffled alike
  tokens, nxt = np.asarray(data['eval']['inputs']), np.asarray(data['eval']['targets'])
  out = neurons.key_value(model, tokens, nxt, 0, seed=0)
  assert out['trained_live'] == 0 == out['shuffled_live'] and math.isnan(out['value'])


def test_claims_declare_kind_scope_and_premise_per_verdict():
  v = neurons.rules(selection(), 'full')
  claims = neurons.ABLATION.claims
  assert len(claims) == len(v) == 5 and all(c.kind == stats.SIGN for c in claims)
  assert all(c.scope and c.premise for c in claims) and 'no positive control' in claims[1].scope
  assert [[c.name.split(':')[1].strip() for c in x.premises] for x in v] == [['learned', 'kills']] + [
    ['learned', 'kills', 'a layer effect can appear in this setup (a positive control for a refutation)']
  ] + [['learned']] * 3
  assert [c.verdicts for c in neurons.ABLATION.changes if c.to_positive] == [(1,)]
  assert all(set(c.verdicts) <= set(range(1, 6)) for c in neurons.ABLATION.changes)


def test_registered():
  assert isinstance(ablations.get('neurons'), base.Study)


@pytest.mark.slow  # 54 runs over three budgets
def test_smoke_through_entry_point(study_smoke):
  returncode, _, stderr, out = study_smoke('neurons')  # the run the every-ablation smoke test reads too
  assert returncode == 0, stderr
  report = json.loads((out / 'report.json').read_text())
  assert report['scale'] == 'smoke' and len(report['verdicts']) == 5 and report['regime']['iterations']
  assert all(v['p_holm'] is not None and v['points'] for v in report['verdicts'])
  assert len(report['tables'][0]['rows']) == len(neurons.LRS['smoke']) + 1
  assert (out / 'neurons.png').exists()
  # the init program shared across rates and budgets restores what a run's own program restores
  runs = pd.read_csv(out / 'lr_0.1' / 'results.csv')
  for name in (runs['name'].iloc[0], runs['name'].iloc[-1]):
    run_dir = str(out / 'lr_0.1' / 'runs' / name)
    config, models, _ = base.models_over_training(run_dir)
    exp = train.Experiment(config)
    init = jax.jit(exp.init)
    ckpt = checkpoints_lib.Checkpointer(os.path.join(run_dir, 'checkpoints'))
    step = max(ckpt.steps())
    own = exp.merge(ckpt.restore(step, jax.eval_shape(init, config.train.seed))[0]['params'])
    ckpt.close()
    for a, b in ((own, models[step]), (exp.merge(init(config.train.seed)['params']), models[0])):
      np.testing.assert_array_equal(a.blocks[1].ffn.w1[...], b.blocks[1].ffn.w1[...])
      np.testing.assert_array_equal(a.embed[...], b.embed[...])
