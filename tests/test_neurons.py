"""neurons ablation: dead-unit and key/value metrics against hand-computed NumPy, the probe path on a tiny
transformer, the sweep grid, the verdict rules and gates on synthetic frames, and a smoke run through
the real entry point."""

import itertools
import json
import math
import os
import subprocess
import sys

import jax

import numpy as np
import pandas as pd
import pytest

from ffn_research import io as io_lib
from ffn_research import probe
from ffn_research import sweep
from ffn_research import train
from ffn_research import validation
from ffn_research.ablations import base
from ffn_research.ablations import neurons
from ffn_research.ablations import verdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_dead_mask_hand_computed():
  acts = np.array([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0], [-0.5, 0.0, 0.0]])
  np.testing.assert_array_equal(neurons.dead_mask(acts), [True, False, False])
  assert neurons.dead_mask(np.full((4, 5), -0.1)).all() and not neurons.dead_mask(np.eye(5)).any()
  assert neurons.dead_mask(np.array([[0.0, 1e-30]])).tolist() == [True, False]


def test_top_k_live_and_concentration_known_answers():
  labels = np.array([0, 0, 1, 1, 2, 2, 3, 3])
  acts = np.zeros((8, 3))
  acts[[2, 3], 0] = [5.0, 4.0]            # unit 0 fires only on label 1
  acts[:, 1] = np.arange(8)               # unit 1: top 2 = inputs 7, 6 (label 3); top 4 = 7, 6, 5, 4
  acts[[0, 4], 2] = [1.0, 1.0]            # unit 2: a tie, broken by the lower index
  np.testing.assert_array_equal(neurons.top_k_indices(acts, 2)[:, 1], [7, 6])
  np.testing.assert_array_equal(neurons.top_k_indices(acts, 2)[:, 2], [0, 4])
  np.testing.assert_allclose(neurons.concentration(acts, labels, 2), [1.0, 1.0, 0.5])
  np.testing.assert_allclose(neurons.concentration(acts[:, 1:2], labels, 4), [0.5])
  np.testing.assert_array_equal(neurons.live_units(acts, 2), [True, True, True])
  np.testing.assert_array_equal(neurons.live_units(acts, 3), [False, True, False])  # unit 1's 3rd largest is 5
  np.testing.assert_allclose(neurons.modal_fraction(np.array([[1, 1], [1, 2], [2, 3]])), [2 / 3, 1 / 3])


def test_chance_concentration_against_enumeration():
  for labels, k in ((np.array([0, 0, 1, 1]), 2), (np.arange(12) % 3, 4)):
    exact = np.mean([np.unique(labels[list(c)], return_counts=True)[1].max() / k
                     for c in itertools.combinations(range(len(labels)), k)])
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
  config = neurons._base('smoke')
  config.train.seed = 3
  validation.validate(config)
  _, init, _ = base._program(config)
  exp = base._program(config)[0]
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
    assert math.isclose(out['trained_ngram'], neurons.concentration(h[:, live], lab['ngram'], neurons.TOP_K).mean(),
                        rel_tol=1e-6)
    # promoted tokens by brute force over the vocabulary
    w2 = np.asarray(model.blocks[layer].ffn.w2[...])
    w_u, scale = np.asarray(model.unembed[...]), np.asarray(model.final_norm.scale[...])
    got = neurons.promoted_tokens(model, layer)
    for i in range(w2.shape[0]):
      assert got[i] == int(np.argmax([np.dot(w2[i] * scale, w_u[:, o]) for o in range(v)]))
    agree = neurons.value_agreement(h[:, live], nxt[:, 1:].reshape(-1), got[live], neurons.TOP_K).mean()
    assert math.isclose(out['value'], agree, rel_tol=1e-6)


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_sweeps_one_program_per_budget(scale):
  s = neurons.SETTINGS[scale]
  (spec,) = neurons.sweeps(scale)
  validation.validate(spec.base)
  m = spec.base.model
  assert (m.arch, m.num_layers, m.activation, m.use_bias) == ('transformer', 2, 'relu', False)
  assert spec.base.train.optimizer == 'adamw' and spec.base.task.name == 'language'
  assert len(spec.overrides) == len(s['budgets']) * len(s['lrs']) * len(s['wds']) * s['seeds']
  assert s['seeds'] >= 3 and (scale != 'full' or s['seeds'] >= 5) and len(s['lrs']) >= 3
  configs = [sweep.apply_overrides(spec.base, o) for o in spec.overrides]
  assert len({sweep.group_key(c) for c in configs}) == len(s['budgets'])   # rate, decay, seed traced
  for o in spec.overrides:
    assert o['train.checkpoint_every'] % o['train.log_every'] == 0 and o[neurons.STEPS] % o['train.log_every'] == 0


def _frame(dead, seeds=5, lrs=(1e-3, 1e-2, 3e-2, 1e-1), wds=(0.0, 0.1), budgets=(500, 2000), bits=1.0, gap=0.05):
  """A synthetic collect frame: dead(lr, wd, steps, layer, seed) given; keys/values with a `gap` over baselines."""
  rows = []
  for lr, wd, st, seed, layer in itertools.product(lrs, wds, budgets, range(seeds), (0, 1)):
    run = {'lr': lr, 'wd': wd, 'steps': st, neurons.SEED: seed, 'layer': layer, 'loss_last': 1.0,
           'loss_previous': 1.01, 'eval_bits': bits, 'unigram_bits': 3.0, 'floor_bits': 0.9}
    rows.append({**run, 'point': 'init', 'dead': 0.0})
    rows.append({**run, 'point': 'half', 'dead': dead(lr, wd, st, layer, seed) / 2})
    rows.append({**run, 'point': 'end', 'dead': dead(lr, wd, st, layer, seed), 'trained_live': 100,
                 'trained_ngram': 0.8 + 0.001 * seed, 'shuffled_ngram': 0.8 - gap, 'chance_ngram': 0.1,
                 'trained_token': 0.9, 'shuffled_token': 0.85, 'chance_token': 0.2, 'shuffled_live': 100,
                 'value': 0.2 + 0.001 * seed, 'value_permuted': 0.2 - gap})
  return pd.DataFrame(rows)


def _harsh(lr, wd, st, layer, seed):
  """More dead units at higher rate, with decay, with steps, in layer 0 (plus seed noise)."""
  return 0.1 * math.log10(lr / 1e-4) * (1 + wd) * (st / 2000) * (1.5 if layer == 0 else 1.0) + 0.001 * seed


def test_verdicts_reproduced_on_a_harsh_synthetic_grid():
  v = neurons.decide(_frame(_harsh), 'full')
  assert [x.outcome for x in v] == [verdict.REPRODUCED] * 7, [x.detail for x in v]
  # verdict 1's per-seed slope: d dead / d log10 lr at wd 0, 2000 steps, mean of layers = 0.1 * 1.25
  assert math.isclose(v[0].statistic, 0.125, rel_tol=1e-9)
  assert math.isclose(v[4].statistic, 0.05 + 0.002, rel_tol=1e-9)   # 0.8 + 0.001 * seed - 0.75, mean over seeds


def test_verdicts_not_reproduced_when_the_directions_flip():
  flipped = lambda lr, wd, st, layer, seed: _harsh(1e-3 * 1e-1 / lr, 0.1 - wd, 2500 - st, 1 - layer, seed)
  v = neurons.decide(_frame(flipped, gap=-0.05), 'full')
  assert [x.outcome for x in v] == [verdict.NOT_REPRODUCED] * 7, [x.detail for x in v]


def test_gates_make_verdicts_invalid():
  # nothing dies anywhere: the kills premise fails for 1-4, keys and values are untouched
  v = neurons.decide(_frame(lambda *a: 0.0), 'full')
  assert [x.outcome for x in v[:4]] == [verdict.INVALID] * 4
  assert all('kills' in x.detail for x in v[:4]) and v[4].outcome == verdict.REPRODUCED
  # units dead at initialisation only: not deaths caused by training
  f = _frame(lambda *a: 0.05)
  f.loc[f['point'] == 'init', 'dead'] = 0.05
  assert all(x.outcome == verdict.INVALID for x in neurons.decide(f, 'full')[:4])
  # a model that learned nothing (held-out bits at the unigram entropy): every verdict invalid
  v = neurons.decide(_frame(_harsh, bits=3.0), 'full')
  assert all(x.outcome == verdict.INVALID and 'learned' in x.detail for x in v)
  # shuffled keys pinned at 1: no room above the baseline
  f = _frame(_harsh)
  f.loc[f['point'] == 'end', 'shuffled_ngram'] = 1.0
  assert [x.outcome for x in neurons.decide(f, 'full')[4:6]] == [verdict.INVALID] * 2


def test_per_run_averages_layers():
  f = _frame(_harsh)
  pr = neurons.per_run(f)
  row = pr[(pr['lr'] == 1e-2) & (pr['wd'] == 0.0) & (pr['steps'] == 2000) & (pr[neurons.SEED] == 0)]
  assert math.isclose(float(row['dead'].iloc[0]), (_harsh(1e-2, 0, 2000, 0, 0) + _harsh(1e-2, 0, 2000, 1, 0)) / 2)


@pytest.mark.slow  # ~1-2 min: 48 runs in two compiled programs, then the analysis reads 144 models
def test_smoke_through_entry_point(tmp_path):
  proc = subprocess.run([sys.executable, '-m', 'experiments.reproduce', '--ablation=neurons', f'--workdir={tmp_path}',
                         '--scale=smoke'], cwd=REPO, capture_output=True, text=True,
                        env={**os.environ, 'PYTHONPATH': REPO}, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  report = json.loads((tmp_path / 'neurons' / 'report.json').read_text())
  s = neurons.SETTINGS['smoke']
  assert report['scale'] == 'smoke' and len(report['verdicts']) == 7
  assert len(report['tables'][0]['rows']) == len(s['budgets']) * len(s['wds']) * len(s['lrs'])
  assert (tmp_path / 'neurons' / 'neurons.png').exists()
  # the init program shared across rates and budgets restores what a run's own program restores
  runs = pd.read_csv(tmp_path / 'neurons' / 'relu' / 'results.csv')
  for name in (runs['name'].iloc[0], runs['name'].iloc[-1]):
    run_dir = str(tmp_path / 'neurons' / 'relu' / 'runs' / name)
    config, models, _ = base.models_over_training(run_dir)
    exp = train.Experiment(config)
    init = jax.jit(exp.init)
    ckpt = io_lib.Checkpointer(os.path.join(run_dir, 'checkpoints'))
    step = max(ckpt.steps())
    own = exp.merge(ckpt.restore(step, jax.eval_shape(init, config.train.seed))[0]['params'])
    ckpt.close()
    for a, b in ((own, models[step]), (exp.merge(init(config.train.seed)['params']), models[0])):
      np.testing.assert_array_equal(a.blocks[1].ffn.w1[...], b.blocks[1].ffn.w1[...])
      np.testing.assert_array_equal(a.embed[...], b.embed[...])
