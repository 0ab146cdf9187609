"""shortest_path: in-context shortest-path distance on a fresh random graph per example, for the bare FFN.

Every example is its own random directed graph on n = task.num_nodes nodes, each node with d = task.out_degree
distinct successors other than itself (uniform), and a query (x, y), y != x, all given in the input vector:

  inputs = [A (n * n, row-major: A[i, j] = 1 for an edge i -> j), one_hot(x) (n), one_hot(y) (n)]

so model.d_model = n^2 + 2n. The label is the shortest-path distance x -> y as a class: k - 1 for a shortest
path of k <= D = task.max_distance edges, D when y is farther or unreachable (D + 1 classes, the model's outputs).
y is drawn so that each class occurring for x is equally likely (chance about 1 / (D + 1); `evaluate` reports
the majority class's share of the test set, the accuracy of always answering it, as `chance_accuracy`).
Graphs are fresh every training step, so nothing can be memorised: the answer is computed from the input, not
stored in the weights. `data` holds two fixed held-out sets of task.num_eval fresh graphs: `test` (eval_*) and
`val` (val_*, to choose settings on). Loss: cross-entropy over the D + 1 classes; metric: accuracy.

A storage control, task.num_graphs = P > 0: a pool of P examples (each its own graph with its one query) is drawn
once per seed and is `test`; the training batches draw from it uniformly with replacement, so every training
example repeats exactly and eval_* scores the pool itself (what was stored); `val` stays fresh graphs (how far the
pool generalises; it chooses nothing there). P = 0, the default, is the task above, unchanged draw for draw.

(The graph draw and the class-balanced query follow the sequence task graph_distance of branch mvr-redesign,
commit 6d3cf2a, here with distinct successors and the graph as an adjacency matrix.)
"""

import jax
import jax.numpy as jnp
import ml_collections

from ffn_research import config as config_lib
from ffn_research.tasks import sequence

Batch = dict[str, jax.Array]


def input_dim(num_nodes: int) -> int:
  """Features of one example: the flattened adjacency and the two one-hot query nodes."""
  return num_nodes * num_nodes + 2 * num_nodes


def random_graphs(rng, num: int, num_nodes: int, out_degree: int) -> jax.Array:
  """(num, n, n) float32 adjacency: each node i has `out_degree` distinct successors j != i, uniform."""
  keys_BxNxN = jax.random.uniform(rng, (num, num_nodes, num_nodes))
  keys_BxNxN = jnp.where(jnp.eye(num_nodes, dtype=bool), 2.0, keys_BxNxN)  # never its own successor
  kth_BxNx1 = -jax.lax.top_k(-keys_BxNxN, out_degree)[0][..., -1:]  # the out_degree-th smallest key per row
  return (keys_BxNxN <= kth_BxNx1).astype(jnp.float32)


def distances(adjacency_BxNxN: jax.Array, x_B: jax.Array, max_distance: int) -> jax.Array:
  """(B, n) int32 shortest-path lengths from x, max_distance + 1 where farther or unreachable (at x itself: its
  shortest cycle, or max_distance + 1). walk_k holds the nodes a walk of exactly k edges reaches; the first k
  that reaches a node is its distance."""
  n, far = adjacency_BxNxN.shape[-1], max_distance + 1
  walk_BxN = jax.nn.one_hot(x_B, n, dtype=jnp.float32)
  dist_BxN = jnp.full(walk_BxN.shape, far, jnp.int32)
  for k in range(1, far):
    walk_BxN = (jnp.einsum('bi,bij->bj', walk_BxN, adjacency_BxNxN) > 0).astype(jnp.float32)
    dist_BxN = jnp.where((walk_BxN > 0) & (dist_BxN == far), k, dist_BxN)
  return dist_BxN


def balanced_queries(rng, dist_BxN: jax.Array, x_B: jax.Array) -> jax.Array:
  """(B,) y != x, drawn so that each distance class occurring among the other nodes is equally likely, and
  uniformly within its class."""
  n = dist_BxN.shape[-1]
  candidate_BxN = jnp.arange(n)[None, :] != x_B[:, None]
  same_BxNxN = (dist_BxN[:, :, None] == dist_BxN[:, None, :]) & candidate_BxN[:, None, :]
  count_BxN = jnp.sum(same_BxNxN, axis=2)  # candidates sharing each node's class
  logits_BxN = jnp.where(candidate_BxN, -jnp.log(jnp.maximum(count_BxN, 1).astype(jnp.float32)), -jnp.inf)
  return jax.random.categorical(rng, logits_BxN)


def generate(rng, num: int, num_nodes: int, out_degree: int, max_distance: int) -> Batch:
  """`num` examples: {'inputs': (num, n^2 + 2n) float32, 'targets': (num,) int32 class in [0, max_distance]}."""
  k_graph, k_x, k_y = jax.random.split(rng, 3)
  adjacency_BxNxN = random_graphs(k_graph, num, num_nodes, out_degree)
  x_B = jax.random.randint(k_x, (num,), 0, num_nodes)
  dist_BxN = distances(adjacency_BxNxN, x_B, max_distance)
  y_B = balanced_queries(k_y, dist_BxN, x_B)
  label_B = jnp.take_along_axis(dist_BxN, y_B[:, None], axis=1)[:, 0] - 1
  inputs_BxF = jnp.concatenate(
    [
      adjacency_BxNxN.reshape(num, num_nodes * num_nodes),
      jax.nn.one_hot(x_B, num_nodes, dtype=jnp.float32),
      jax.nn.one_hot(y_B, num_nodes, dtype=jnp.float32),
    ],
    axis=1,
  )
  return {'inputs': inputs_BxF, 'targets': label_B.astype(jnp.int32)}


def class_scores(logits_BxC: jax.Array, label_B: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Per-example cross-entropy (nats) and argmax correctness (float)."""
  ce_Bx1, correct_Bx1 = sequence.token_scores(logits_BxC[:, None, :], label_B[:, None])
  return ce_Bx1[:, 0], correct_Bx1[:, 0]


class ShortestPathTask:
  """The module docstring's task (task.name = 'shortest_path', model.arch = 'ffn')."""

  @staticmethod
  def validate(config: ml_collections.ConfigDict) -> None:
    t = config.task
    for key in ('num_nodes', 'out_degree', 'max_distance', 'num_eval'):
      config_lib.positive_int(f'task.{key}', t[key])
    config_lib.non_negative_int('task.num_graphs', t.num_graphs)
    config_lib.check(t.num_nodes >= 3, f'task.num_nodes={t.num_nodes} must be >= 3 for task.name=shortest_path')
    config_lib.check(
      t.out_degree < t.num_nodes,
      f'task.out_degree={t.out_degree} must be < task.num_nodes={t.num_nodes} (distinct successors, no self-loop)',
    )
    want = input_dim(t.num_nodes)
    config_lib.check(
      config.model.d_model == want,
      f'model.d_model={config.model.d_model} must be {want} for task.name=shortest_path '
      f'(n^2 + 2n input features at task.num_nodes={t.num_nodes})',
    )

  def __init__(self, config: ml_collections.ConfigDict):
    self.config = config
    self.batch_size = config.train.batch_size
    self.output_dim = config.task.max_distance + 1  # classes: distance 1 .. D, and farther or unreachable

  def _generate(self, rng, num: int) -> Batch:
    t = self.config.task
    return generate(rng, num, t.num_nodes, t.out_degree, t.max_distance)

  def init_data(self, rng):
    """Fixed sets: test (scored; with task.num_graphs = P > 0 the pool of P examples, else task.num_eval fresh
    graphs) and val (task.num_eval fresh graphs; chooses settings)."""
    t = self.config.task
    return {
      'test': self._generate(jax.random.fold_in(rng, 8), t.num_graphs or t.num_eval),
      'val': self._generate(jax.random.fold_in(rng, 9), t.num_eval),
    }

  def sample_batch(self, data, rng):
    """Fresh graphs (task.num_graphs = 0), or batch_size examples of the pool, uniform with replacement."""
    pool = self.config.task.num_graphs
    if not pool:
      return self._generate(rng, self.batch_size)
    index_B = jax.random.randint(rng, (self.batch_size,), 0, pool)
    return {k: v[index_B] for k, v in data['test'].items()}

  def loss(self, logits_BxC, batch):
    ce_B, correct_B = class_scores(logits_BxC, batch['targets'])
    return jnp.mean(ce_B), {'accuracy': jnp.mean(correct_B)}

  def evaluate(self, apply_fn, data):
    out = {}
    for split, prefix in (('test', 'eval_'), ('val', 'val_')):
      ce_N, correct_N = class_scores(apply_fn(data[split]['inputs']), data[split]['targets'])
      out[f'{prefix}loss'], out[f'{prefix}accuracy'] = jnp.mean(ce_N), jnp.mean(correct_N)
    share_C = jnp.bincount(data['test']['targets'], length=self.output_dim) / data['test']['targets'].shape[0]
    return {**out, 'chance_accuracy': jnp.max(share_C)}  # always answering the test set's majority class


TASKS = {'shortest_path': ShortestPathTask}
