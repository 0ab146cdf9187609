"""load_balancing ablation: skewed (clustered Zipf) inputs, late-window metrics, verdict rules on
synthetic frames with known answers, and the CLI's one-line error for bad skew keys."""

import json
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest
from scipy.cluster.vq import kmeans2

from ffn_research import config as config_lib
from ffn_research import validation
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


def test_read_curves_and_late_summary(tmp_path):
  with open(tmp_path / 'metrics.jsonl', 'w') as f:
    for i, step in enumerate(range(100, 900, 100)):  # 8 chunks; the last quarter = 2 chunks
      load = [0.5, 0.5, 0, 0] if i < 6 else [0.1, 0.7, 0.1, 0.1]
      f.write(json.dumps({'step': step, 'loss': 1.0, 'aux/load': load, 'aux/max_load_ratio': 4 * max(load),
                          'aux/router_entropy': 0.1 * i, 'aux/dropped_fraction': 0.2,
                          'aux/router_z': 3.0}) + '\n')
    f.write(json.dumps({'step': 800, 'eval_loss': 0.3}) + '\n')  # an eval line without aux: skipped
  curves = lb.read_curves(str(tmp_path))
  assert len(curves) == 8
  late = lb.late_summary(curves)
  assert late["max_load_ratio"] == pytest.approx(2.8)
  assert late["first_max_load_ratio"] == pytest.approx(2.0)
  assert late['router_entropy'] == pytest.approx((0.6 + 0.7) / 2)
  np.testing.assert_allclose(late['sorted_load'], [0.7, 0.1, 0.1, 0.1])
  assert lb.read_curves(str(tmp_path / 'missing')).empty


def _runs(loads, mse_ratio=1.0, seeds=5):
  rng = np.random.default_rng(0)
  rows = []
  for v, level in loads.items():
    for s in range(seeds):
      mse = 0.1 * (1 + 0.01 * rng.standard_normal()) * (mse_ratio if v == 'switch_z' else 1.0)
      rows.append({'variant': v, 'train.seed': s, 'eval_loss': mse,
                   'max_load_ratio': level + 0.02 * rng.standard_normal()})
  return pd.DataFrame(rows)


def test_verdicts_known_answers():
  loads = {'none': 4.0, 'switch': 1.2, 'zloss': 4.0, 'switch_z': 1.2, 'bias': 1.1}
  v = lb.decide(_runs(loads))
  assert [x.outcome for x in v] == [verdict.REPRODUCED] * 4
  # no collapse, switch unbalanced, z-loss costs 50% quality, bias unbalanced
  loads = {'none': 1.2, 'switch': 3.0, 'zloss': 1.2, 'switch_z': 3.0, 'bias': 2.5}
  v = lb.decide(_runs(loads, mse_ratio=1.5))
  assert [x.outcome for x in v] == [verdict.NOT_REPRODUCED] * 4
  # two seeds: underpowered
  v = lb.decide(_runs(loads, seeds=2))
  assert [x.outcome for x in v] == [verdict.INCONCLUSIVE] * 4
  assert v[2].statistic == pytest.approx(0.0, abs=0.05)


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_sweeps_differ_only_in_the_balancing_coefficients(scale):
  specs = lb.sweeps(scale)
  assert [s.name for s in specs] == list(lb.VARIANTS)
  for s in specs:
    validation.validate(s.base)
    m = s.base.model.moe
    assert (m.load_balance_coef, m.z_loss_coef, m.bias_update_rate) == lb.VARIANTS[s.name]
    assert (m.num_experts, m.top_k, m.router, m.renormalize, m.capacity_factor) == (8, 1, 'softmax_topk', False, 1.0)
    assert len(s.overrides) == lb.SETTINGS[scale]['seeds'] >= 3
    assert s.base.train.steps == lb.SETTINGS[scale]['steps']
