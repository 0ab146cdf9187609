"""superposition: the sparse-features task, the tied ReLU toy model, the feature counts and the verdicts."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from flax import nnx

from ffn_research import models, tasks, validation
from ffn_research.ablations import base, verdict
from ffn_research.ablations import superposition as sp
from ffn_research.config import ConfigError, default_config
from ffn_research.models import ffn as ffn_lib
from ffn_research.tasks import regression


def _config(arch='tied_relu', use_bias=True, sparsity=0.9, decay=0.7):
  c = default_config()
  c.task.name = 'sparse_features'
  c.task.feature_sparsity, c.task.importance_decay = sparsity, decay
  c.model.arch, c.model.d_model, c.model.d_ff, c.model.use_bias = arch, 20, 5, use_bias
  c.train.batch_size = 64
  return c


def test_sampler_statistics_on_a_fixed_seed():
  rng = jax.random.PRNGKey(0)
  x = np.asarray(regression.sparse_features(rng, (20000, 20), 0.1))
  k_on, k_value = jax.random.split(rng)  # the same draws, by hand
  on = np.asarray(jax.random.uniform(k_on, (20000, 20))) < 0.1
  np.testing.assert_array_equal(x, np.where(on, np.asarray(jax.random.uniform(k_value, (20000, 20))), 0.0))
  assert (x[~on] == 0).all() and (x[on] > 0).all() and (x <= 1).all()
  frac = (x > 0).mean()
  assert abs(frac - 0.1) < 4 * math.sqrt(0.1 * 0.9 / x.size), frac  # 4 binomial sigmas
  assert abs(x[on].mean() - 0.5) < 4 * math.sqrt(1 / 12 / on.sum())
  assert (np.asarray(regression.sparse_features(rng, (100, 20), 1.0)) > 0).all()  # density 1: dense


def test_importance_weights_and_loss():
  np.testing.assert_allclose(regression.importance(4, 0.5), [1, 0.5, 0.25, 0.125])
  np.testing.assert_array_equal(regression.importance(3, 1.0), [1, 1, 1])
  pred = jnp.array([[1.0, 2.0], [0.0, 0.0]])
  target = jnp.array([[0.0, 0.0], [1.0, 1.0]])
  # examples: 1*1 + 0.5*4 = 3 and 1*1 + 0.5*1 = 1.5; mean 2.25
  assert float(regression.weighted_mse(pred, target, jnp.array([1.0, 0.5]))) == pytest.approx(2.25)


def test_task_batches_follow_the_traced_sparsity():
  c = _config(sparsity=0.0)
  task = tasks.build_task(c)
  data = task.init_data(jax.random.PRNGKey(1), feature_sparsity=jnp.float32(0.75))
  assert float(data['density']) == pytest.approx(0.25)
  batch = task.sample_batch(data, jax.random.PRNGKey(2))
  assert batch['inputs'].shape == (64, 20) and (batch['inputs'] == batch['targets']).all()
  np.testing.assert_allclose(task.importance_N, 0.7 ** np.arange(20), rtol=1e-6)


def test_validation_errors_are_one_line():
  for key, value, msg in [('task.feature_sparsity', 1.0, 'feature_sparsity'),
                          ('task.importance_decay', 0.0, 'importance_decay'),
                          ('model.activation', 'gelu', 'tied_relu')]:
    c = _config()
    c[key.split('.')[0]][key.split('.')[1]] = value
    with pytest.raises(ConfigError, match=msg) as e:
      validation.validate(c)
    assert '\n' not in str(e.value)
  validation.validate(_config())
  validation.validate(_config(arch='ffn'))


@pytest.mark.parametrize('use_bias', [True, False])
def test_tied_relu_param_count_and_forward(use_bias):
  c = _config(use_bias=use_bias)
  task = tasks.build_task(c)
  model = models.build_model(c, task, nnx.Rngs(params=jax.random.PRNGKey(0)))
  counts = models.model_counts(c, task)
  assert counts['num_params'] == 5 * 20 + (20 if use_bias else 0) == ffn_lib.param_tree_size(model)
  w = np.asarray(model.w[...])
  b = np.asarray(model.b[...]) + 0.1 if use_bias else 0.0
  if use_bias:
    model.b[...] = jnp.asarray(b)
  x = np.asarray(jax.random.uniform(jax.random.PRNGKey(3), (7, 20)))
  np.testing.assert_allclose(np.asarray(model.apply(jnp.asarray(x))[0]), np.maximum(x @ w.T @ w + b, 0),
                             rtol=1e-5, atol=1e-6)


def test_feature_counts_on_hand_made_weights():
  w = np.array([[1.0, 0.0, 0.3, 0.4],
                [0.0, 0.6, 0.0, 0.3]])  # column norms 1, 0.6, 0.3, 0.5 (0.5 is not > 0.5)
  s = sp.tied_stats(w)
  assert s['represented'] == 2
  assert s['dims_per_feature'] == pytest.approx(2 / (1 + 0.36 + 0.09 + 0.25))
  # FFN with W1 = W^T, W2 = W gives the same strengths; scaling W1 by 4 and W2 by 1/4 changes nothing.
  np.testing.assert_allclose(sp.ffn_strength(w.T, w), [1, 0.6, 0.3, 0.5])
  np.testing.assert_allclose(sp.ffn_strength(4 * w.T, w / 4), [1, 0.6, 0.3, 0.5])
  b1 = np.array([0.0, -0.5])
  # gain_i = relu(W1[i] + b1) . W2[:, i] - relu(b1) . W2[:, i]
  np.testing.assert_allclose(sp.ffn_gain(w.T, b1, w), [1.0, 0.1 * 0.6, 0.09, 0.16])
  f = sp.ffn_stats(w.T, b1, w)
  assert f['represented'] == 2 and f['represented_gain'] == 1
  assert f['dims_per_feature'] == pytest.approx(2 / (1 + 0.36 + 0.09 + 0.25))


def _stats(tied_sparse, ffn_sparse, dense=5, seeds=5, plateau_jump=0.0):
  rows = []
  for arm, sparse in [('tied', tied_sparse), ('ffn', ffn_sparse), ('tied_uniform', tied_sparse)]:
    for d in sp.DENSITIES:
      for s in range(seeds):
        count = dense if d == 1.0 else (sparse + s % 2 if d <= sp.SPARSE_MAX_DENSITY else 6)
        rows.append({'arm': arm, sp.DENSITY: d, sp.SEED: s, 'represented': count, 'dims_per_feature': 5 / count,
                     'represented_gain': count, 'loss_last': 0.1 * (1 + plateau_jump), 'loss_previous': 0.1})
  return pd.DataFrame(rows)


def test_analyze_on_synthetic_stats(tmp_path):
  ctx = base.Context(outdir=str(tmp_path), scale='quick')
  a = sp.analyze_stats(_stats(tied_sparse=10, ffn_sparse=3), ctx)
  assert [v.outcome for v in a.verdicts] == [verdict.REPRODUCED, verdict.NOT_REPRODUCED]
  assert a.verdicts[0].statistic == pytest.approx(10.4)  # seeds 0..4 give 10, 11, 10, 11, 10
  assert (tmp_path / 'features_vs_sparsity.png').stat().st_size > 1000
  assert any('from 1 - S = 0.1 to 0.03' in n for n in a.notes)  # the largest step: 6 -> ~10.4
  assert any(n.startswith('tied, descriptive') and 'seed 4: 5' in n and 'minus dense: +5.40' in n for n in a.notes)
  # No plateau: invalid. Superposition already at density 1: the dense premise fails, invalid.
  assert all(v.outcome == verdict.INVALID for v in sp.analyze_stats(_stats(10, 3, plateau_jump=0.5), ctx).verdicts)
  assert sp.analyze_stats(_stats(10, 3, dense=8), ctx).verdicts[0].outcome == verdict.INVALID


def test_sweeps_validate():
  for scale in ('smoke', 'quick', 'full'):
    specs = sp.sweeps(scale)
    assert [s.name for s in specs] == list(sp.ARMS)
    assert len(specs[0].overrides) == len(sp.SETTINGS[scale]['densities']) * sp.SETTINGS[scale]['seeds']
    assert sp.SETTINGS[scale]['seeds'] >= 3
  for spec in sp.sweeps('full'):
    c = spec.base.copy_and_resolve_references()
    for k, v in spec.overrides[-1].items():
      c[k.split('.')[0]][k.split('.')[1]] = v
    validation.validate(c)
