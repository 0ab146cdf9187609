"""moe_topk: the per-cluster-teacher task option, router-cluster mutual information, and the verdict
rules on synthetic frames (the router gradient tests: tests/test_moe.py, tests/test_glu_moe_ablations.py)."""

import inspect
import json
import math
import os
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest

from ffn_research import config as config_lib
from ffn_research import sweep
from ffn_research import validation
from ffn_research.ablations import base, moe_topk, verdict
from ffn_research.tasks import regression

R, NR, INC, INV = verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.INCONCLUSIVE, verdict.INVALID


def _cluster_config(cluster_teachers, num_clusters=3):
  config = config_lib.default_config()
  config.task.name = 'teacher_student'
  config.model.d_model = 4
  config.task.num_train, config.task.num_eval, config.task.teacher_d_ff = 600, 100, 16
  config.task.num_clusters, config.task.cluster_teachers = num_clusters, cluster_teachers
  validation.validate(config)
  return config


def test_cluster_teachers_each_cluster_has_its_own_teacher():
  rng = jax.random.PRNGKey(0)
  data = regression.TeacherStudentTask(_cluster_config(True)).init_data(rng)
  plain = regression.TeacherStudentTask(_cluster_config(False)).init_data(rng)
  k_teacher, k_bias = jax.random.split(jax.random.fold_in(rng, 2), 5)[:2]
  fold = lambda k, c: jax.random.fold_in(jax.random.fold_in(k, regression.CLUSTER_TEACHER_TAG), c)
  x, cluster, y = (np.asarray(data[k]) for k in ('x_train', 'cluster_train', 'y_train'))
  np.testing.assert_array_equal(x, plain['x_train'])  # the inputs do not change
  assert set(plain) == {'x_train', 'y_train', 'x_eval', 'y_eval'}  # nor the data of runs without the option
  centers = np.asarray(jax.random.normal(jax.random.fold_in(k_teacher, 7), (3, 4)))
  assert abs(np.std(x - centers[cluster]) - regression.CLUSTER_STD) < 0.02  # ids are the drawn clusters
  teachers = [regression.teacher_ffn(4, 16, 'relu', fold(k_teacher, c), fold(k_bias, c)) for c in range(3)]
  for c in range(3):
    rows = cluster == c
    assert rows.sum() > 50
    np.testing.assert_allclose(y[rows], teachers[c](x[rows]), rtol=1e-5, atol=1e-6)
    other = teachers[(c + 1) % 3](x[rows])
    assert np.mean(np.square(other - y[rows])) > 0.1 * np.var(y[rows])  # the teachers differ
  shared = regression.teacher_ffn(4, 16, 'relu', k_teacher, k_bias)
  np.testing.assert_allclose(plain['y_train'], shared(x), rtol=1e-5, atol=1e-6)  # one teacher without it
  ev = np.asarray(data['cluster_eval'])
  np.testing.assert_allclose(data['y_eval'], regression.per_cluster_targets(teachers, data['x_eval'], ev),
                             rtol=1e-6)


def test_cluster_teachers_needs_clusters():
  config = _cluster_config(False, num_clusters=0)
  config.task.cluster_teachers = True
  with pytest.raises(config_lib.ConfigError, match=r'task\.cluster_teachers') as e:
    validation.validate(config)
  assert '\n' not in str(e.value)


# --------------------------------------------------------------------------- mutual information

def test_mutual_information_known_tables():
  assert moe_topk.mutual_information(np.eye(4) * 25) == pytest.approx(math.log(4), rel=1e-12)  # one expert per cluster
  assert moe_topk.mutual_information(np.outer([1, 2, 3], [4, 1])) == pytest.approx(0.0, abs=1e-12)  # independent
  # p = [[1/2, 0], [1/4, 1/4]]: rows 1/2, 1/2; columns 3/4, 1/4
  want = 0.5 * math.log(4 / 3) + 0.25 * math.log(2 / 3) + 0.25 * math.log(2)
  assert moe_topk.mutual_information(np.array([[2, 0], [1, 1]])) == pytest.approx(want, rel=1e-12)
  table = moe_topk.contingency(np.array([0, 0, 1, 1]), np.array([0, 0, 0, 1]), 2, 3)
  np.testing.assert_array_equal(table, [[2, 0, 0], [1, 1, 0]])
  assert moe_topk.mutual_information(table) == pytest.approx(want, rel=1e-12)  # an empty expert changes nothing
  assert moe_topk.entropy(np.array([1, 1, 2, 0])) == pytest.approx(1.5 * math.log(2), rel=1e-12)


# --------------------------------------------------------------------------- verdict rules on synthetic frames

SEEDS = range(5)
T = 2000


def synthetic_stats(shift=None, budget_gain=0.0, seeds=SEEDS, best_rate=1e-2, rate_of=None):
  """A collect()-shaped frame over RATES x (T, T/2): score = base + shift[(sweep, point)] + a rate penalty
  (0 at the point's best rate, 0.3 per factor of ~3 away) + budget_gain at T/2 + small per-seed noise."""
  shift, rate_of = shift or {}, rate_of or {}
  points = {'fixed_total': [1, 2, 4], 'matched_active': [2, 4], 'granularity': [1, 2, 4, 8], 'dense': [32, 256],
            'routers': list(moe_topk.ARMS), 'cluster_dense': [32, 256]}
  rng = np.random.default_rng(0)
  rows = []
  for s, pts in points.items():
    for p in pts:
      best = rate_of.get((s, p), best_rate)
      for lr in moe_topk.RATES:
        for steps in (T // 2, T):
          for seed in seeds:
            score = (-2.0 + 0.1 * seed + shift.get((s, p), 0.0) + 0.3 * abs(math.log(lr / best) / math.log(3))
                     + (budget_gain if steps < T else 0.0) + rng.normal(0, 0.005))
            rows.append({'sweep': s, 'point': p, moe_topk.SEED: seed, 'lr': lr, 'steps': steps,
                         'rel_mse': math.exp(score), 'score': score, 'params': 100, 'active': 10,
                         'key': moe_topk.point_key(s, p),
                         **({'mi': 1.0, 'h_cluster': 1.8, 'max_load': 2.0} if s == 'routers' else {})})
  stats = pd.DataFrame(rows)
  k1 = stats[stats['key'] == 'fixed_total 1'].assign(sweep='matched_active', key='matched_active 1')  # as collect()
  return pd.concat([stats, k1], ignore_index=True)


ROUTING_MATTERS = {('cluster_dense', 32): 1.0, ('routers', 'frozen'): 0.5, ('routers', 'hash'): 1.0}


def outcomes(stats):
  return [v.outcome for v in moe_topk.verdicts_of(stats)[0]]


def test_verdicts_come_out_as_the_rules_say():
  shift = {('fixed_total', 2): -0.3, ('matched_active', 2): 0.2, ('granularity', 4): -0.1,
           ('routers', 'stop_grad'): 0.3, ('routers', 'weight_1'): 0.0, **ROUTING_MATTERS}
  assert outcomes(synthetic_stats(shift)) == [R, NR, R, R, INC]
  shift[('routers', 'weight_1')] = -0.2  # the weight-1 router wins
  assert outcomes(synthetic_stats(shift))[4] == NR


def test_each_point_is_read_at_its_own_chosen_rate():
  # top-2 is better only at its own best rate (3e-3); read at top-1's rate (1e-2) it would lose.
  shift = {('fixed_total', 2): -0.2, **ROUTING_MATTERS}
  stats = synthetic_stats(shift, rate_of={('fixed_total', 2): 3e-3, ('fixed_total', 1): 1e-2})
  tuned = moe_topk.tune(stats)
  chosen = dict(zip(tuned.table['key'], tuned.table['learning_rate']))
  assert chosen['fixed_total 2'] == 3e-3 and chosen['fixed_total 1'] == 1e-2
  assert set(tuned.rows['steps']) == {T}
  v = moe_topk.verdicts_of(stats, tuned)[0][0]
  assert v.statistic == pytest.approx(-0.2, abs=0.01)
  assert v.outcome == INV and 'the rule alone gave reproduced' in v.detail  # 3e-3 is the grid's lower edge
  at_one_rate = stats[(stats['lr'] == 1e-2) & (stats['steps'] == T)]
  w = moe_topk.wide(at_one_rate, 'fixed_total')
  assert (w[2] - w[1]).mean() > 0  # the untuned reading would have said the opposite


def test_premise_routing_matters_else_invalid():
  shift = {('routers', 'stop_grad'): 0.3, ('routers', 'weight_1'): 0.3}  # dense and frozen as good as learned
  got = moe_topk.verdicts_of(synthetic_stats(shift))[0]
  assert [v.outcome for v in got[3:]] == [INV, INV] and 'routing matters' in got[3].detail
  assert [v.outcome for v in got[:3]] != [INV] * 3  # the iid verdicts do not rest on that premise
  shift[('routers', 'frozen')] = 0.5  # learned beats the frozen router: enough
  assert outcomes(synthetic_stats(shift))[3:] == [R, R]
  del shift[('routers', 'frozen')]
  shift[('cluster_dense', 32)] = 0.5  # or it beats the dense FFN of its expert width
  assert outcomes(synthetic_stats(shift))[3:] == [R, R]


def test_rate_at_edge_or_no_budget_plateau_is_invalid_and_too_few_seeds_inconclusive():
  shift = {('fixed_total', 2): -0.3, **ROUTING_MATTERS}
  assert outcomes(synthetic_stats(shift))[0] == R
  # T/2 worse by 0.3 in ln(1 - R^2): T still helps a lot, no plateau
  got = moe_topk.verdicts_of(synthetic_stats(shift, budget_gain=0.3))[0]
  assert {v.outcome for v in got} == {INV} and 'step-budget plateau' in got[0].detail
  assert outcomes(synthetic_stats(shift, budget_gain=0.05))[0] == R  # within BUDGET_TOL
  got = moe_topk.verdicts_of(synthetic_stats(shift, rate_of={('fixed_total', 1): 3e-2}))[0]  # best at the top edge
  assert got[0].outcome == INV and 'inside the grid' in got[0].detail and got[1].outcome == INV  # k = 1 shared
  assert got[2].outcome != INV
  assert outcomes(synthetic_stats(shift, seeds=range(2)))[0] == INC


def test_a_diverged_seed_makes_its_rate_ineligible():
  shift = {('fixed_total', 2): -0.3, **ROUTING_MATTERS}
  stats = synthetic_stats(shift)
  gone = (stats['key'] == 'fixed_total 2') & (stats['lr'] == 1e-2) & (stats[moe_topk.SEED] == 0)
  tuned = moe_topk.tune(stats[~gone])
  assert dict(zip(tuned.table['key'], tuned.table['learning_rate']))['fixed_total 2'] != 1e-2


def test_analyze_stats_tables_figure_and_line_budget(tmp_path):
  stats = synthetic_stats({('fixed_total', 2): -0.3, **ROUTING_MATTERS})
  out = moe_topk.analyze_stats(stats, base.Context(str(tmp_path), 'smoke'))
  assert len(out.verdicts) == 5 and (tmp_path / 'moe_topk.png').exists()
  table = out.tables[0].frame
  routers = table[table['sweep'] == 'routers']
  assert list(routers['point']) == list(moe_topk.ARMS) and np.allclose(routers['I(expert; cluster) nats'], 1.0)
  assert np.allclose(table['learning rate'], 1e-2) and set(table['n']) == {len(SEEDS)}
  tuning = out.tables[2].frame
  assert len(tuning) == stats.groupby(['key', 'lr', 'steps']).ngroups
  assert tuning.groupby('key')['chosen'].sum().eq(2).all()  # the chosen rate, at T and at T/2
  for fn in (moe_topk.analyze, moe_topk.analyze_stats):
    assert len(inspect.getsource(fn).splitlines()) <= 60


@pytest.mark.parametrize('scale', ['smoke', 'full'])
def test_sweeps_isolate_what_they_claim(scale):
  specs = {spec.name: spec for spec in moe_topk.sweeps(scale)}
  assert set(specs) == set(moe_topk.POINT)
  runs = {name: [r.config for r in sweep.expand(spec.base, spec.overrides)] for name, spec in specs.items()}
  for configs in runs.values():
    for c in configs:
      validation.validate(c)
      assert c.model.moe.capacity_factor == 0.0 and c.model.moe.renormalize is False
  for c in runs['matched_active']:  # k experts of width 32 / k: the active expert width is fixed
    assert c.model.moe.top_k * c.model.d_ff == moe_topk.TOTAL_WIDTH and c.model.moe.num_experts == moe_topk.TOTAL_EXPERTS
  for c in runs['fixed_total'] + runs['matched_active'] + runs['granularity']:
    assert c.model.moe.router == 'softmax_topk' and not c.task.num_clusters
  arms = {moe_topk.arm_of({k: c.model.moe[k.split('.')[-1]] for k in moe_topk.ARM_KEYS}) for c in runs['routers']}
  assert arms == set(moe_topk.ARMS)
  for c in runs['routers'] + runs['cluster_dense']:  # E = K, a teacher per cluster
    assert c.task.cluster_teachers and c.task.num_clusters == moe_topk.CLUSTERS
  for c in runs['routers']:
    assert c.model.moe.top_k == 1 and c.model.moe.num_experts == moe_topk.CLUSTERS
  steps = moe_topk.SETTINGS[scale]['steps']
  for name, configs in runs.items():  # every point at every rate of the grid, at T and T/2
    grid = {(c.train.learning_rate, c.train.steps) for c in configs}
    assert grid == {(r, b) for r in moe_topk.RATES for b in (steps // 2, steps)}, name
    assert len(configs) % (2 * len(moe_topk.RATES) * moe_topk.SETTINGS[scale]['seeds']) == 0


@pytest.mark.slow  # the real entry point at smoke scale: 6 sweeps, ~20 compiled groups (~2-3 min idle)
def test_smoke_through_entry_point(tmp_path):
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  proc = subprocess.run([sys.executable, '-m', 'experiments.reproduce', '--ablation=moe_topk', '--scale=smoke',
                         f'--workdir={tmp_path}', '--noprogress'], cwd=repo, capture_output=True, text=True,
                        timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads((tmp_path / 'moe_topk' / 'report.json').read_text())
  assert len(report['verdicts']) == 5 and all(v['outcome'] in verdict.OUTCOMES for v in report['verdicts'])
  rows = report['tables'][0]['rows']
  mi = {r['point']: r['I(expert; cluster) nats'] for r in rows if r['sweep'] == 'routers'}
  assert set(mi) == set(moe_topk.ARMS)
  assert mi['hash'] < 0.05 < mi['frozen']  # the hash ignores the clusters; a random linear router does not
