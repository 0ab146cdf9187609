"""shortest_path (tasks/graphs.py): labels equal a NumPy breadth-first search, shapes, fixed out-degree, balanced
classes and the chance level, fresh graphs per step, held-out metrics against NumPy, one-line config errors; the pool
(task.num_graphs): its examples repeat exactly, and the default draws what it drew before the pool existed."""

import collections
import hashlib

import jax
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import tasks
from ffn_research import validation
from ffn_research.tasks import graphs


def sp_config(n=8, d=2, far=2, num_eval=512, batch=64, num_graphs=0, **model):
  c = config_lib.default_config()
  c.model.arch, c.model.d_model = 'ffn', n * n + 2 * n
  c.task.name, c.task.num_nodes, c.task.out_degree, c.task.max_distance = 'shortest_path', n, d, far
  c.task.num_eval, c.train.batch_size, c.task.num_graphs = num_eval, batch, num_graphs
  for k, v in model.items():
    c.model[k] = v
  validation.validate(c)
  return c


def bfs_distance(adjacency_NxN: np.ndarray, x: int, y: int) -> float:
  """Shortest-path length x -> y over the edges i -> j with A[i, j] = 1 (breadth-first search); inf if none."""
  dist, queue = {x: 0}, collections.deque([x])
  while queue:
    i = queue.popleft()
    for j in np.flatnonzero(adjacency_NxN[i]):
      if int(j) not in dist:
        dist[int(j)] = dist[i] + 1
        queue.append(int(j))
  return float(dist.get(y, np.inf))


def decode(row_F: np.ndarray, n: int) -> tuple[np.ndarray, int, int]:
  """(adjacency, x, y) of one input row; asserts the one-hot blocks are one-hot."""
  onehot_x, onehot_y = row_F[n * n : n * n + n], row_F[n * n + n :]
  assert onehot_x.sum() == 1 and onehot_y.sum() == 1 and set(np.unique(row_F)) <= {0.0, 1.0}
  return row_F[: n * n].reshape(n, n), int(onehot_x.argmax()), int(onehot_y.argmax())


def expected_label(adjacency_NxN, x, y, far):
  return int(min(bfs_distance(adjacency_NxN, x, y), far + 1)) - 1


@pytest.mark.parametrize('n,d,far', [(8, 2, 2), (6, 2, 3), (7, 3, 1)])
def test_labels_equal_a_breadth_first_search_and_graphs_have_the_fixed_out_degree(n, d, far):
  task = tasks.build_task(sp_config(n, d, far, num_eval=300, batch=64))
  data = jax.jit(task.init_data)(jax.random.PRNGKey(0))
  batch = jax.jit(task.sample_batch)(data, jax.random.PRNGKey(5))
  for rows in (data['test'], data['val'], batch):
    inputs, targets = np.asarray(rows['inputs']), np.asarray(rows['targets'])
    assert inputs.dtype == np.float32 and targets.dtype == np.int32
    assert inputs.shape == (len(targets), n * n + 2 * n) == (len(targets), graphs.input_dim(n))
    for row, label in zip(inputs, targets, strict=True):
      adjacency, x, y = decode(row, n)
      assert x != y and np.all(adjacency.sum(1) == d) and np.all(np.diag(adjacency) == 0)
      assert label == expected_label(adjacency, x, y, far)
  assert task.output_dim == far + 1 and np.asarray(batch['targets']).shape == (64,)


def test_classes_are_balanced_and_chance_is_the_majority_share():
  n, d, far = 8, 2, 2
  batch = graphs.generate(jax.random.PRNGKey(3), 8192, n, d, far)
  share = np.bincount(np.asarray(batch['targets']), minlength=far + 1) / 8192
  assert np.all(share > 0.28) and share.max() < 0.38  # 3 classes, none dominating
  task = tasks.build_task(sp_config(n, d, far, num_eval=2048))
  data = jax.jit(task.init_data)(jax.random.PRNGKey(1))
  metrics = task.evaluate(lambda x: np.zeros((x.shape[0], far + 1), np.float32), data)
  majority = np.bincount(np.asarray(data['test']['targets'])).max() / 2048
  assert float(metrics['chance_accuracy']) == pytest.approx(majority)
  assert float(metrics['eval_accuracy']) == pytest.approx(np.mean(np.asarray(data['test']['targets']) == 0))
  np.testing.assert_allclose(float(metrics['eval_loss']), np.log(far + 1), rtol=1e-6)  # uniform logits


def test_graphs_are_fresh_every_step_and_held_out_sets_fixed_by_the_seed():
  task = tasks.build_task(sp_config(num_eval=64))
  init, sample = jax.jit(task.init_data), jax.jit(task.sample_batch)
  data, again, other = init(jax.random.PRNGKey(0)), init(jax.random.PRNGKey(0)), init(jax.random.PRNGKey(1))
  jax.tree.map(np.testing.assert_array_equal, data, again)
  assert not np.array_equal(data['test']['inputs'], data['val']['inputs'])
  assert not np.array_equal(data['test']['inputs'], other['test']['inputs'])
  b1, b2 = sample(data, jax.random.PRNGKey(1)), sample(data, jax.random.PRNGKey(2))
  np.testing.assert_array_equal(b1['inputs'], sample(data, jax.random.PRNGKey(1))['inputs'])
  differ = np.any(np.asarray(b1['inputs']) != np.asarray(b2['inputs']), axis=1)
  assert differ.all()  # every example of the next step is another graph or query


def test_evaluate_and_loss_match_numpy_on_random_logits():
  far = 2
  task = tasks.build_task(sp_config(far=far, num_eval=128))
  data = jax.jit(task.init_data)(jax.random.PRNGKey(0))
  logits = {
    s: np.asarray(jax.random.normal(jax.random.PRNGKey(i), (128, far + 1))) for i, s in enumerate(('test', 'val'))
  }
  m = task.evaluate(lambda x: logits['test'] if np.array_equal(x, data['test']['inputs']) else logits['val'], data)
  for split, prefix in (('test', 'eval_'), ('val', 'val_')):
    z, label = logits[split], np.asarray(data[split]['targets'])
    ce = -(z - np.log(np.exp(z).sum(1, keepdims=True)))[np.arange(128), label]
    np.testing.assert_allclose(float(m[f'{prefix}loss']), ce.mean(), rtol=1e-5)
    assert float(m[f'{prefix}accuracy']) == pytest.approx(np.mean(z.argmax(1) == label))
  loss, metrics = task.loss(logits['test'], data['test'])
  np.testing.assert_allclose(float(loss), float(m['eval_loss']), rtol=1e-6)
  assert float(metrics['accuracy']) == pytest.approx(float(m['eval_accuracy']))


@pytest.mark.parametrize(
  'overrides,key',
  [
    (dict(n=8, model_d_model=64), 'model.d_model'),
    (dict(n=6, d=6), 'task.out_degree'),
    (dict(far=0), 'task.max_distance'),
    (dict(n=2, d=1), 'task.num_nodes'),
    (dict(num_eval=0), 'task.num_eval'),
    (dict(num_graphs=-1), 'task.num_graphs'),
    (dict(model_arch='transformer'), 'model.arch'),
  ],
)
def test_bad_configs_give_one_line_naming_the_key(overrides, key):
  model = {k.removeprefix('model_'): overrides.pop(k) for k in list(overrides) if k.startswith('model_')}
  with pytest.raises(config_lib.ConfigError, match=key) as err:
    sp_config(**overrides, **model)
  assert '\n' not in str(err.value)


def _digest(*parts) -> str:
  h = hashlib.sha1()
  for part in parts:
    for k in ('inputs', 'targets'):
      h.update(np.asarray(part[k]).tobytes())
  return h.hexdigest()


def test_the_default_draws_what_it_drew_before_the_pool_existed():
  """task.num_graphs = 0: the held-out sets and a training batch hash as they did at bbd401f (before the pool), and
  equal graphs.generate on the same keys: fresh graphs, draw for draw."""
  task = tasks.build_task(sp_config(num_eval=64, batch=32))
  data = jax.jit(task.init_data)(jax.random.PRNGKey(0))
  batch = jax.jit(task.sample_batch)(data, jax.random.PRNGKey(1))
  assert _digest(data['test'], data['val'], batch) == '134b76654fba695301e495f1a2d8b048be879fa7'
  fresh = graphs.generate(jax.random.PRNGKey(1), 32, 8, 2, 2)
  jax.tree.map(np.testing.assert_array_equal, batch, fresh)


def test_the_pool_repeats_exactly_and_is_what_eval_scores():
  """task.num_graphs = P: every training example is one of the pool's P rows, bit for bit; the pool is the test set
  (eval_* score it), fixed by the seed; val stays fresh graphs; over many batches every row is drawn."""
  pool_size = 24
  task = tasks.build_task(sp_config(num_eval=64, batch=32, num_graphs=pool_size))
  init, sample = jax.jit(task.init_data), jax.jit(task.sample_batch)
  data = init(jax.random.PRNGKey(0))
  pool = {k: np.asarray(v) for k, v in data['test'].items()}
  assert pool['inputs'].shape == (pool_size, 80) and pool['targets'].shape == (pool_size,)
  assert len({r.tobytes() for r in pool['inputs']}) == pool_size  # P distinct examples
  jax.tree.map(np.testing.assert_array_equal, data, init(jax.random.PRNGKey(0)))
  plain = jax.jit(tasks.build_task(sp_config(num_eval=64, batch=32)).init_data)(jax.random.PRNGKey(0))
  jax.tree.map(np.testing.assert_array_equal, data['val'], plain['val'])  # the same fresh validation graphs
  rows = {r.tobytes(): i for i, r in enumerate(pool['inputs'])}
  seen = set()
  for step in range(20):
    b = {k: np.asarray(v) for k, v in sample(data, jax.random.PRNGKey(step)).items()}
    assert b['inputs'].shape == (32, 80)
    index = [rows[r.tobytes()] for r in b['inputs']]  # KeyError: an example not in the pool
    np.testing.assert_array_equal(b['targets'], pool['targets'][index])
    seen |= set(index)
  assert seen == set(range(pool_size))
  for row, label in zip(pool['inputs'], pool['targets'], strict=True):
    adjacency, x, y = decode(row, 8)
    assert label == expected_label(adjacency, x, y, 2)
  m = task.evaluate(lambda x: np.zeros((x.shape[0], 3), np.float32), data)
  assert float(m['eval_accuracy']) == pytest.approx(np.mean(pool['targets'] == 0))  # scored on the pool
