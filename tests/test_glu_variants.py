"""glu_variants: sweep specs, parameter matching by formula, and the verdict pipeline on synthetic
metrics logs with known answers (its smoke run through the entry point: tests/test_reproduce.py)."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from ffn_research import models, sweep, tasks, validation
from ffn_research.ablations import base, glu_variants as gv, verdict

R, NR, INC, INV = verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.INCONCLUSIVE, verdict.INVALID
GRIDS = {'language': gv.SETTINGS['full']['lang_lrs'], 'teacher_student': gv.SETTINGS['full']['ts_lrs']}
GRID = GRIDS['language']


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_sweeps(scale):
  s = gv.SETTINGS[scale]
  specs = gv.sweeps(scale)
  assert [spec.name for spec in specs] == ['language', 'teacher_student']
  for spec in specs:
    m = spec.base.model
    assert m.match_params is True
    assert m.use_bias is (spec.name == 'teacher_student')  # language: bias-free as in Shazeer 2020
    runs = sweep.expand(spec.base, spec.overrides)
    lrs = s['lang_lrs'] if spec.name == 'language' else s['ts_lrs']
    assert len(runs) == len(s['activations']) * len(lrs) * s['seeds']
    for run in runs:
      validation.validate(run.config)
    # Each variant's whole learning-rate grid and all seeds share one compiled program.
    assert len(sweep.group_runs(runs)) == len(s['activations'])
  lang = specs[0].base
  assert lang.task.name == 'language' and lang.model.arch == 'transformer' and lang.model.use_ffn
  assert lang.train.schedule == 'constant'  # the early evaluation is what a run of that length gives
  assert lang.train.eval_every == s['lang_early'] and s['lang_steps'] % (2 * s['lang_early']) == 0
  assert specs[1].base.task.teacher_activation not in gv.PAPER_65K  # no candidate favoured by construction
  if scale == 'full':
    assert s['seeds'] >= 10 and set(s['activations']) == set(gv.PAPER_65K)
    assert len(s['lang_lrs']) >= 3 and len(s['ts_lrs']) >= 3
    assert lang.model.d_model >= 32 and lang.model.num_layers == 2


@pytest.mark.parametrize('scale', ['smoke', 'full'])
def test_parameters_matched_by_formula(scale):
  """Weights: dense FFN 2 d d_ff, gated 3 d round(2/3 d_ff); biases (teacher-student only): d_ff + d and
  2 round(2/3 d_ff) + d; the rest of the model is identical."""
  for spec in gv.sweeps(scale):
    m = spec.base.model
    counts = {}
    for act in gv.PAPER_65K:
      cfg = sweep.apply_overrides(spec.base, {gv.ACT: act})
      c = models.model_counts(cfg, tasks.build_task(cfg))
      gated = act in gv.GATED
      width = round(2 * m.d_ff / 3) if gated else m.d_ff
      layers = m.num_layers if m.arch == 'transformer' else 1
      if m.arch == 'ffn':  # a square FFN (d_model -> d_model), so the 2/3 rule matches its weights
        assert tasks.build_task(cfg).output_dim == m.d_model
      biases = ((2 if gated else 1) * width + m.d_model) if m.use_bias else 0
      assert c['num_ffn_params'] == layers * ((3 if gated else 2) * m.d_model * width + biases)
      counts[act] = c['num_params']
    others = {c - counts['relu'] for a, c in counts.items() if a not in gv.GATED}
    assert others == {0}
    worst = max(abs(c / counts['relu'] - 1) for c in counts.values())
    assert worst <= gv.PARAM_TOL


# --------------------------------------------------------------------------- synthetic sweeps

def fake_sweep(root, task, means, *, seeds=10, steps=(250, 500, 1000), lr_cost=None, drift=0.0,
               noise=0.0, unigram=4.0, floor=1.0, seed=0):
  """A sweep dir with results rows and metrics.jsonl files: the metric of (variant, lr, seed, step) is
  means[variant] + a shared per-seed offset + lr_cost[lr] + drift * (last step / step - 1) + noise."""
  rng = np.random.default_rng(seed)
  grid = GRIDS[task]
  lr_cost = lr_cost or {grid[0]: 0.02, grid[1]: 0.0, grid[2]: 0.03}
  offset = rng.normal(0, 0.05, seeds) if task == 'language' else rng.normal(0, 0.3, seeds)
  rows = []
  for name, m in means.items():
    for lr, cost in lr_cost.items():
      for s in range(seeds):
        run = f'activation={name},learning_rate={lr:g},seed={s}'
        os.makedirs(os.path.join(root, task, 'runs', run))
        with open(os.path.join(root, task, 'runs', run, 'metrics.jsonl'), 'w') as f:
          for step in steps:
            value = m + offset[s] + cost + drift * (steps[-1] / step - 1) + rng.normal(0, noise)
            if task == 'language':
              ev = {'eval/excess_bits': value, 'eval/unigram_bits': unigram, 'eval/floor_bits': floor}
            else:
              ev = {'eval/relative_mse': float(np.exp(value))}
            f.write(json.dumps({'step': step, 'loss': 1.0, **ev}) + '\n')
        rows.append({'name': run, 'status': 'completed', gv.ACT: name, gv.LR: lr, gv.SEED: s,
                     'num_params': 1000 if name in gv.PLAIN else 999})
  return pd.DataFrame(rows)


def paper_like(column, scale=1.0, shift=0.0):
  """Per-variant means that order like the paper's column (differences scaled)."""
  return {k: shift + scale * (v - column['relu']) for k, v in column.items()}


def run_budget(tmp_path, task='language', budget='plateau', **kw):
  means = kw.pop('means', paper_like(gv.PAPER[budget], shift=0.3 if task == 'language' else -3.0))
  df = fake_sweep(str(tmp_path), task, means, **kw)
  evals = gv.evaluations(df, os.path.join(str(tmp_path), task))
  step, half = gv.budget_steps(evals, task)[budget]
  return gv.analyze_budget(evals, task, budget, step, half, GRIDS[task])


@pytest.mark.parametrize('task,budget', [('language', 'early'), ('language', 'plateau'),
                                         ('teacher_student', 'plateau')])
def test_paper_ordering_reproduces_every_claim(tmp_path, task, budget):
  b = run_budget(tmp_path, task, budget)
  assert list(b.verdicts) == list(gv.KEYS)
  assert {k: v.outcome for k, v in b.verdicts.items()} == {k: R for k in gv.KEYS}
  col = gv.PAPER[budget]
  # Noise-free per-seed differences: the paired statistic is the known difference exactly.
  assert b.verdicts['geglu'].statistic == pytest.approx(col['geglu'] - col['relu'], abs=1e-9)
  gated = np.mean([col[a] for a in gv.GATED]) - np.mean([col[a] for a in gv.PLAIN])
  assert b.verdicts['gated_family'].statistic == pytest.approx(gated, abs=1e-9)
  assert b.verdicts['rank'].statistic == pytest.approx(1.0)
  assert b.verdicts['rank'].p_value < 1e-3  # permutation test over 8 variants
  assert set(b.winners[f'best_{gv.LR}']) == {GRIDS[task][1]}  # the middle rate wins for every seed
  every = b.verdicts['rank'].checks
  assert all(c.passed for c in every)
  assert len(every) == (3 if budget == 'plateau' else 2)  # edge, range (, plateau) over every variant
  assert len(b.verdicts['geglu'].checks) == 2 * len(every)  # the same, for geglu and relu each


def test_reversed_ordering_is_not_reproduced(tmp_path):
  means = {k: 0.3 - (v - gv.PAPER_524K['relu']) for k, v in gv.PAPER_524K.items()}
  b = run_budget(tmp_path, means=means)
  assert {k: v.outcome for k, v in b.verdicts.items()} == {k: NR for k in gv.KEYS}
  assert b.verdicts['rank'].statistic == pytest.approx(-1.0)


def test_paired_statistic_on_noisy_synthetic_data(tmp_path):
  """Seed offsets are large (sd 0.05) and shared, per-run noise small (sd 0.002): pairing removes the
  offsets, so the CI is the paired t interval of the differences, centred near the known -0.044."""
  b = run_budget(tmp_path, noise=0.002, seeds=10)
  d = (b.wide['geglu'] - b.wide['relu']).to_numpy()
  m, lo, hi = verdict.mean_ci(d)
  v = b.verdicts['geglu']
  assert (v.statistic, *v.ci) == pytest.approx((m, lo, hi))
  assert v.outcome == R and hi - lo < 0.01 and abs(m - (1.633 - 1.677)) < 0.005


def test_edge_learning_rate_makes_the_verdicts_invalid(tmp_path):
  b = run_budget(tmp_path, lr_cost={GRID[0]: 0.04, GRID[1]: 0.02, GRID[2]: 0.0})  # the largest rate wins
  assert {v.outcome for v in b.verdicts.values()} == {INV}
  assert 'best learning rate inside the grid' in b.verdicts['geglu'].detail
  assert b.verdicts['geglu'].statistic == pytest.approx(1.633 - 1.677, abs=1e-9)  # still reported


def test_not_at_plateau_invalidates_only_the_plateau_budget(tmp_path):
  kw = dict(drift=0.1)  # the score still falls by 0.1 between half the steps and the end
  early = run_budget(tmp_path / 'a', budget='early', **kw)
  plateau = run_budget(tmp_path / 'b', budget='plateau', **kw)
  assert {v.outcome for v in early.verdicts.values()} == {R}
  assert {v.outcome for v in plateau.verdicts.values()} == {INV}
  assert 'plateau' in plateau.verdicts['swiglu'].detail


def test_floor_and_ceiling(tmp_path):
  at_floor = run_budget(tmp_path / 'a', means=paper_like(gv.PAPER_524K, scale=0.01, shift=0.01))
  assert {v.outcome for v in at_floor.verdicts.values()} == {INV}
  assert 'entropy floor' in at_floor.verdicts['geglu'].detail
  at_ceiling = run_budget(tmp_path / 'b', unigram=1.3, floor=1.0)  # excess 0.3 = the unigram model's
  assert {v.outcome for v in at_ceiling.verdicts.values()} == {INV}


def test_budget_steps():
  evals = pd.DataFrame({'step': [250, 500, 750, 1000]})
  assert gv.budget_steps(evals, 'language') == {'early': (250, None), 'plateau': (1000, 500)}
  assert gv.budget_steps(evals, 'teacher_student') == {'plateau': (1000, 500)}
  assert gv.budget_steps(pd.DataFrame({'step': [300, 1000]}), 'teacher_student') == {'plateau': (1000, None)}


def test_analyze_end_to_end(tmp_path):
  """Both tasks and budgets: verdicts keyed per (task, budget) in order, tables, the paired plot."""
  results = {'language': fake_sweep(str(tmp_path), 'language', paper_like(gv.PAPER_524K, shift=0.3),
                                    noise=0.001),
             'teacher_student': fake_sweep(str(tmp_path), 'teacher_student', paper_like(gv.PAPER_524K, shift=-3.0),
                                           noise=0.001)}
  a = gv.analyze(results, base.Context(outdir=str(tmp_path), scale='full'))
  assert len(a.verdicts) == 3 * len(gv.KEYS)
  assert [v.claim.split(':')[0] for v in a.verdicts[::len(gv.KEYS)]] == [
      'language, early budget', 'language, plateau budget', 'teacher_student, plateau budget']
  assert all(v.outcome == R for v in a.verdicts)
  assert all(c.passed for c in a.checks) and 'relu 1000' in a.checks[0].detail
  assert os.path.exists(tmp_path / 'glu_variants.png')
  t1 = a.tables[0].frame
  assert list(t1['FFN']) == list(gv.PAPER_65K) and 'paper 524k' in t1
  assert 'language early (step 250)' in t1 and 'language plateau best lr' in t1
  assert 'geglu' in a.headline and 'rank rho' in a.headline
