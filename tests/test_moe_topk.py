"""moe_topk: the per-cluster-teacher task option (the router tests: tests/test_moe.py)."""

import math

import jax
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import validation
from ffn_research.tasks import regression


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
