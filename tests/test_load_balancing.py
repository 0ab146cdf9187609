"""load_balancing ablation: the max/mean load of known assignments, the frozen-router knob, the verdict
rules on synthetic frames (including `invalid` when a premise fails, a tuned rate sits at the edge of the grid, or T/2 and T differ by more than the tolerances), the task's skewed-input option
and the CLI's one-line error for bad skew keys; a smoke run through the real entry point (slow)."""

import json
import math
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest
from scipy.cluster.vq import kmeans2

from ffn_research import config as config_lib
from ffn_research import sweep
from ffn_research import train as train_lib
from ffn_research import validation
from ffn_research.ablations import base
from ffn_research.ablations import load_balancing as lb
from ffn_research.ablations import verdict
from ffn_research.tasks import regression
from tests.conftest import REPO_ROOT


def test_cluster_probs_are_zipf():
  p = np.asarray(regression.cluster_probs(16, 1.0))
  ref = 1.0 / np.arange(1, 17)
  np.testing.assert_allclose(p, ref / ref.sum(), rtol=1e-6)
  assert abs(p[0] - 1 / sum(1 / c for c in range(1, 17))) < 1e-6  # 0.2958: the top cluster's share
  np.testing.assert_allclose(np.asarray(regression.cluster_probs(5, 0.0)), np.full(5, 0.2), rtol=1e-6)


def test_clustered_inputs_frequencies_and_spread():
  centers = jax.random.normal(jax.random.PRNGKey(0), (4, 3)) * 10.0
  probs = regression.cluster_probs(4, 1.0)
  n = 40000
  x, c = regression.clustered_inputs(jax.random.PRNGKey(1), centers, probs, n)
  x, c = np.asarray(x), np.asarray(c)
  freq = np.bincount(c, minlength=4) / n
  # binomial sd is at most 0.0025 at n = 40000: 4 sd
  np.testing.assert_allclose(freq, np.asarray(probs), atol=0.01)
  resid = x - np.asarray(centers)[c]
  assert abs(resid.std() - regression.CLUSTER_STD) < 0.01
  assert abs(resid.mean()) < 0.01


def _ts_config(num_clusters):
  config = config_lib.default_config()
  config.task.name = 'teacher_student'
  config.model.d_model = 4
  config.task.num_train, config.task.num_eval = 2000, 100
  config.task.num_clusters = num_clusters
  validation.validate(config)
  return config


def test_teacher_student_inputs_cluster_only_when_asked():
  plain = regression.TeacherStudentTask(_ts_config(0)).init_data(jax.random.PRNGKey(0))
  x = np.asarray(plain['x_train'])
  assert abs(x.std() - 1.0) < 0.05  # N(0, I)
  skew = regression.TeacherStudentTask(_ts_config(3)).init_data(jax.random.PRNGKey(0))
  x = np.asarray(skew['x_train'])
  # every point lies near one of at most 3 centres: 3 distinct rounded cluster means
  centres, labels = kmeans2(x, 3, seed=0, minit='++')
  spread = np.linalg.norm(x - centres[labels], axis=1)
  assert np.median(spread) < 4 * regression.CLUSTER_STD
  np.testing.assert_array_equal(np.asarray(plain['x_eval']).shape, np.asarray(skew['x_eval']).shape)


@pytest.mark.parametrize('key,value', [('num_clusters', -1), ('cluster_zipf', -0.5)])
def test_bad_skew_keys_raise_one_line(key, value):
  config = _ts_config(0)
  config.task[key] = value
  with pytest.raises(config_lib.ConfigError) as e:
    validation.validate(config)
  assert f'task.{key}' in str(e.value) and '\n' not in str(e.value)


def test_cli_bad_skew_key_exits_with_one_line(tmp_path):
  proc = subprocess.run(
      [sys.executable, '-m', 'experiments.train', '--config=configs/regression.py:teacher_student',
       f'--workdir={tmp_path}/run', '--config.task.num_clusters=-3'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
  assert proc.returncode != 0 and 'Traceback' not in proc.stderr
  lines = [l for l in proc.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and 'task.num_clusters' in lines[0], proc.stderr


def test_max_mean_load_of_known_assignments():
  load = lb.assignment_load(np.array([0, 0, 0, 1]), 4)
  np.testing.assert_array_equal(load, [0.75, 0.25, 0, 0])
  assert lb.max_mean_load(load) == 3.0
  assert lb.max_mean_load(lb.assignment_load(np.arange(8), 8)) == 1.0  # uniform
  assert lb.max_mean_load(lb.assignment_load(np.full(10, 5), 8)) == 8.0  # every token on one expert


def _moe_config(freeze):
  config = lb._base(steps=5, freeze=freeze)
  config.task.num_train, config.task.num_eval, config.train.batch_size = 64, 64, 32
  validation.validate(config)
  return config


def test_router_load_matches_numpy_argmax():
  exp = train_lib.Experiment(_moe_config(False))
  state = exp.init(0)
  model, x = exp.merge(state['params']), np.asarray(state['data']['x_eval'])
  expert_T = np.argmax(x @ np.asarray(model.router_w[...]), axis=1)  # top-1 of softmax = top-1 of logits
  np.testing.assert_allclose(lb.router_load(model, x), lb.assignment_load(expert_T, lb.NUM_EXPERTS), atol=1e-7)


@pytest.mark.parametrize('freeze', [True, False])
def test_frozen_router_weights_do_not_move(freeze):
  exp = train_lib.Experiment(_moe_config(freeze))
  state = exp.init(0)
  after, _ = jax.jit(exp.train_chunk, static_argnums=1)(state, 5)
  before_m, after_m = exp.merge(state['params']), exp.merge(after['params'])
  router_same = np.array_equal(np.asarray(before_m.router_w[...]), np.asarray(after_m.router_w[...]))
  assert router_same == freeze
  assert not np.array_equal(np.asarray(before_m.w1[...]), np.asarray(after_m.w1[...]))  # experts train either way


def test_unstable_rule():
  assert not lb.unstable(False, [4.0, 100.0])                 # RMS logsumexp 10 < 16
  assert lb.unstable(False, [4.0, 16.5 ** 2])
  assert lb.unstable(True, [])                                 # diverged
  assert not lb.unstable(False, [])


def _loss(arm, lr, steps, best=3e-3, loss_drift=0.0):
  """Held-out MSE of a synthetic run: lowest at `best`; at T/2 (50 steps) higher by loss_drift (relative)."""
  return (0.1 + 0.02 * abs(math.log10(lr / best))) * (1 + loss_drift * (steps == 50))


def _frame(change, seeds=6, unstable_none=(1.0, 0.0), unstable_z=0.0, load_drift=0.0, loss_drift=0.0, best=None):
  """A synthetic collect() frame: collapse arms over lb.RATES x (T = 100, T/2 = 50), their load change at T
  (at T/2 the final load moved by load_drift, relative); the z-loss arms' unstable flags per rate (lowest first)."""
  rng = np.random.default_rng(0)
  rows = []
  for s in range(seeds):
    for arm, c in change.items():
      for lr in lb.RATES:
        for steps in (50, 100):
          final = (1.4 + c + 0.01 * rng.standard_normal() * (arm != 'frozen')) * (1 + load_drift * (steps == 50))
          rows.append({'arm': arm, 'train.seed': s, 'status': 'completed', 'lr': lr, 'steps': steps,
                       'eval_loss': _loss(arm, lr, steps, (best or {}).get(arm, 3e-3), loss_drift),
                       'load_start': 1.4, 'load_final': final, 'load_change': final - 1.4})
    for lr, frac in zip(lb.UNSTABLE_LRS, unstable_none):
      rows.append({'arm': 'z_none', 'train.seed': s, 'status': 'completed', 'lr': lr, 'steps': math.nan,
                   'unstable': float(s < round(frac * seeds)), 'max_lse': 3.0})
      rows.append({'arm': 'z_loss', 'train.seed': s, 'status': 'completed', 'lr': lr, 'steps': math.nan,
                   'unstable': float(s < round(unstable_z * seeds)), 'max_lse': 2.0})
  return pd.DataFrame(rows)


COLLAPSE = {'none': 0.4, 'switch': -0.1, 'bias': -0.2, 'frozen': 0.0}


def test_verdicts_known_answers():
  v = lb.decide(_frame(COLLAPSE))
  assert [x.outcome for x in v] == [verdict.REPRODUCED] * 4
  assert v[0].statistic == pytest.approx(0.4, abs=0.02)
  assert all(c.passed for x in v for c in x.checks)
  # every collapse verdict carries, per arm it reads, the edge, loss-plateau and load-plateau checks
  assert len(v[0].checks) == 2 * 3 and len(v[1].checks) == 2 * 3 + 1
  assert lb.test_lr(_frame(COLLAPSE, unstable_none=(0.0, 0.5, 1.0))) == lb.UNSTABLE_LRS[1]
  # the fixes make it worse; the z-loss run is as unstable as without it
  worse = {'none': 0.4, 'switch': 0.8, 'bias': 0.9, 'frozen': 0.0}
  v = lb.decide(_frame(worse, unstable_z=1.0))
  assert [x.outcome for x in v] == [verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.NOT_REPRODUCED,
                                    verdict.NOT_REPRODUCED]
  # training spreads the load: verdict 1 not reproduced, and 2 and 4 have nothing to reduce
  v = lb.decide(_frame({'none': -0.3, 'switch': -0.4, 'bias': -0.4, 'frozen': 0.0}))
  assert [x.outcome for x in v] == [verdict.NOT_REPRODUCED, verdict.INVALID, verdict.REPRODUCED, verdict.INVALID]
  assert 'premise' in v[1].detail


def test_tuning_picks_the_rate_per_arm_and_pairs_at_it():
  t = lb.tune(_frame(COLLAPSE, best={'none': 1e-2 * 0.9, 'switch': 1e-3 * 1.1}))
  assert dict(zip(t.table['arm'], t.table['learning_rate'])) == {'bias': 3e-3, 'frozen': 3e-3, 'none': 1e-2,
                                                                  'switch': 1e-3}
  assert set(t.rows['steps']) == {100} and len(t.rows) == 4 * 6   # T only, every seed, one rate per arm
  # at the edge: the arms read by a verdict make it invalid (none: verdicts 1, 2, 4; switch: 2)
  v = lb.decide(_frame(COLLAPSE, best={'none': 1e-2 * 0.9}))
  assert [x.outcome for x in v] == [verdict.INVALID, verdict.INVALID, verdict.REPRODUCED, verdict.INVALID]
  assert 'none: learning rate inside the grid' in v[0].detail
  v = lb.decide(_frame(COLLAPSE, best={'switch': 1e-3}))
  assert [x.outcome for x in v] == [verdict.REPRODUCED, verdict.INVALID, verdict.REPRODUCED, verdict.REPRODUCED]


def test_zloss_invalid_without_instability():
  v = lb.decide(_frame(COLLAPSE, unstable_none=(0.0, 0.1, 0.0)))  # never >= 25% unstable without the z-loss
  assert v[2].outcome == verdict.INVALID and 'premise' in v[2].detail
  assert math.isnan(lb.test_lr(_frame(COLLAPSE, unstable_none=(0.0, 0.0))))


@pytest.mark.parametrize('drift,check', [({'load_drift': 0.2}, 'load_final at the chosen rate'),
                                         ({'loss_drift': 0.2}, 'step-budget plateau (eval_loss')])
def test_no_budget_plateau_is_invalid(drift, check):
  """T/2 differs from T by 20% (> the 10% tolerances): every collapse verdict invalid, the z-loss one stands."""
  v = lb.decide(_frame(COLLAPSE, **drift))
  assert [x.outcome for x in v] == [verdict.INVALID, verdict.INVALID, verdict.REPRODUCED, verdict.INVALID]
  assert check in v[0].detail
  ok = lb.decide(_frame(COLLAPSE, **{k: 0.05 for k in drift}))   # within tolerance
  assert [x.outcome for x in ok] == [verdict.REPRODUCED] * 4


def test_load_plateau_needs_both_budgets():
  stats = _frame(COLLAPSE)
  stats = stats[~((stats['arm'] == 'bias') & (stats['steps'] == 50))]
  c = lb.load_plateau(stats, lb.tune(stats), 'bias')
  assert not c.passed and 'no plateau shown' in c.detail
  assert not lb.load_plateau(stats, lb.tune(stats), 'missing').passed


def test_analysis_of_a_synthetic_frame(tmp_path):
  stats = _frame(COLLAPSE)
  logs = pd.DataFrame([{'step': st, 'max_load_ratio': 1.5, 'arm': a, 'seed': 0, 'lr': lr, 'steps': 100}
                       for a in COLLAPSE for st in (1, 2) for lr in lb.RATES])
  out = lb.analyze_stats(stats, logs, base.Context(str(tmp_path), 'smoke'))
  assert [c.passed for c in out.checks] == [True, True]
  assert list(dict.fromkeys(out.tables[0].frame['arm'])) == list(lb.ARMS)
  assert len(out.tables[0].frame) == 4 + 2 * 2  # the collapse arms at their chosen rate, the z-loss arms per rate
  tuning = out.tables[1].frame
  assert len(tuning) == 4 * 3 * 2 and tuning['chosen'].sum() == 4 * 2 and set(tuning['n']) == {6}
  assert (tmp_path / out.figures[0].file).stat().st_size > 1000


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_sweeps_one_program_per_step_budget(scale):
  specs = lb.sweeps(scale)
  assert [s.name for s in specs] == ['trained', 'frozen', 'unstable']
  s = lb.SETTINGS[scale]
  grid = len(lb.RATES) * 2   # every rate at T and T/2
  assert [len(x.overrides) for x in specs] == [3 * grid * s['seeds'], grid * s['seeds'],
                                               2 * len(lb.UNSTABLE_LRS) * s['z_seeds']]
  for spec in specs:
    validation.validate(spec.base)
    m = spec.base.model.moe
    assert (m.num_experts, m.top_k, m.router, m.renormalize, m.capacity_factor) == (8, 1, 'softmax_topk', False, 1.0)
    assert spec.base.task.num_clusters == 0 and m.freeze_router == (spec.name == 'frozen')
    runs = sweep.expand(spec.base, spec.overrides)
    groups = sweep.group_runs(runs)   # one program per step budget (the rate and coefficients are traced)
    assert len(groups) == (1 if spec.name == 'unstable' else 2)
    if spec.name != 'unstable':
      assert sorted({r.config.train.steps for r in runs}) == [s['steps'] // 2, s['steps']]
      assert all(len({r.config.train.steps for r in g}) == 1 for g in groups)
      assert {r.config.train.learning_rate for r in runs} == set(lb.RATES)
  assert specs[2].base.train.grad_clip == 0 and specs[2].base.model.moe.load_balance_coef == lb.SWITCH_ALPHA


@pytest.mark.slow  # the real entry point at smoke scale (~1 minute)
def test_smoke_through_entry_point(tmp_path):
  proc = subprocess.run([sys.executable, '-m', 'experiments.reproduce', '--ablation=load_balancing',
                         f'--workdir={tmp_path}', '--scale=smoke'], cwd=REPO_ROOT, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads((tmp_path / 'load_balancing' / 'report.json').read_text())
  assert len(report['verdicts']) == 4 and all(v['outcome'] in verdict.OUTCOMES for v in report['verdicts'])
  assert [c['passed'] for c in report['checks']] == [True, True]  # the frozen router's load does not move


def test_paired_all_pairs_on_the_edge_is_not_reproduced():
  """0/1 outcomes often tie: equal arms must not count as 'less' (verdict.paired's zero-spread case)."""
  assert verdict.paired([1, 1, 1], [1, 1, 1], expect='less', claim='').outcome == verdict.NOT_REPRODUCED
  assert verdict.paired([0, 0, 0], [1, 1, 1], expect='less', claim='').outcome == verdict.REPRODUCED
  assert verdict.paired([1, 1, 1], [1, 1, 1], expect='equal', claim='').outcome == verdict.REPRODUCED
