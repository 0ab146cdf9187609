"""Synthetic sequence tasks for the transformer and the FFN stack.

A batch is {'inputs': int (B, T), 'targets': int (B, T), 'weights': float (B, T)};
loss and accuracy count only positions with weight 1 (the answer positions).
Every task sets `vocab_size` (= `output_dim`, the logits' size) and `seq_len`.
All data derive from the run's seed in `init_data`; batches are drawn inside
the compiled step.

- memorization: N random facts (subject, relation) -> object, trained and tested
  on the same facts (parametric memory; Zoology fact_retrieval, Allen-Zhu & Li
  2024 bioS). Reports bits stored (see `bits_stored`); the run summary adds bits
  per parameter (`metrics.per_param`).
- associative_recall: multi-query associative recall (MQAR, Zoology): key-value
  pairs in context, then queried keys; in-context recall, attention's job.
- modular_arithmetic: a + b mod p with a held-out share of the pairs.
- multi_hop: follow num_hops labelled edges of a random graph (composition of
  stored functions), with held-out compositions (Jelassi et al. 2024's
  memorization-versus-reasoning contrast).
"""

import math

import jax
import jax.numpy as jnp
import ml_collections

from ffn_research import config as config_lib

Batch = dict[str, jax.Array]


def bits_stored(cross_entropy_nats_N: jax.Array, num_values: int) -> jax.Array:
  """Information the model holds about N uniformly random answers from num_values, in bits.

  N log2(num_values) (the answers' entropy) minus the model's total
  cross-entropy on them in bits, floored at 0: a model that guesses uniformly
  among the values stores 0 bits, a perfectly confident correct one stores
  N log2(num_values). (The total, not each fact, is floored.)
  """
  n = cross_entropy_nats_N.shape[0]
  ce_bits = jnp.sum(cross_entropy_nats_N.astype(jnp.float32)) / jnp.log(2.0)
  return jnp.maximum(0.0, n * math.log2(num_values) - ce_bits)


def token_scores(logits_BxTxV: jax.Array, targets_BxT: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Per-position cross-entropy (nats) and argmax correctness (float).

  The target's logit is picked with a one-hot mask and the argmax (first maximum) is taken
  with two plain reductions: the values of take_along_axis and jnp.argmax, whose scatter
  gradient and variadic reduction XLA:CPU runs several times slower (docs/sequence.md).
  """
  logits_BxTxV = logits_BxTxV.astype(jnp.float32)
  vocab_BxTxV = jax.lax.broadcasted_iota(targets_BxT.dtype, logits_BxTxV.shape, logits_BxTxV.ndim - 1)
  target_logit_BxT = jnp.sum(jnp.where(vocab_BxTxV == targets_BxT[..., None], logits_BxTxV, 0.0), axis=-1)
  ce_BxT = jax.nn.logsumexp(logits_BxTxV, axis=-1) - target_logit_BxT
  is_max_BxTxV = logits_BxTxV == jnp.max(logits_BxTxV, axis=-1, keepdims=True)
  first_max_BxT = jnp.min(jnp.where(is_max_BxTxV, vocab_BxTxV, logits_BxTxV.shape[-1]), axis=-1)
  return ce_BxT, (first_max_BxT == targets_BxT).astype(jnp.float32)


def weighted_mean(x_BxT: jax.Array, weights_BxT: jax.Array) -> jax.Array:
  return jnp.sum(x_BxT * weights_BxT) / jnp.maximum(jnp.sum(weights_BxT), 1.0)


def scores_in_chunks(
  apply_fn, inputs_NxT: jax.Array, targets_NxT: jax.Array, chunk: int = 1024
) -> tuple[jax.Array, jax.Array]:
  """`token_scores` of apply_fn over N sequences, `chunk` sequences at a time (bounds memory)."""
  score = lambda xy: token_scores(apply_fn(xy[0]), xy[1])
  n = inputs_NxT.shape[0]
  if n <= chunk:
    return score((inputs_NxT, targets_NxT))
  pad = -n % chunk
  xs, ys = (jnp.pad(a, ((0, pad), (0, 0))).reshape(-1, chunk, a.shape[1]) for a in (inputs_NxT, targets_NxT))
  ce, correct = jax.lax.map(score, (xs, ys))
  return ce.reshape(-1, ce.shape[-1])[:n], correct.reshape(-1, correct.shape[-1])[:n]


def answer_at(positions: list[int], n: int, seq_len: int) -> jax.Array:
  """Weights (n, seq_len): 1 at the given positions, 0 elsewhere."""
  row_T = jnp.zeros((seq_len,), jnp.float32).at[jnp.array(positions)].set(1.0)
  return jnp.broadcast_to(row_T, (n, seq_len))


class _SequenceTask:
  """Shared pieces: weighted cross-entropy on answer positions, batches drawn from a fixed set."""

  vocab_size: int
  seq_len: int
  # Positions whose weight can be non-zero (a contiguous range); the train step computes
  # logits only there (SequenceModel.apply's `positions`).
  scored: slice

  def __init__(self, config: ml_collections.ConfigDict):
    self.config = config
    self.batch_size = config.train.batch_size

  @property
  def output_dim(self) -> int:
    return self.vocab_size

  @property
  def scored_vocab(self) -> int:
    """The leading tokens an answer can be scored as: the model computes logits for these only."""
    return self.vocab_size

  def loss(self, logits_BxPxV, batch):
    """Weighted cross-entropy and accuracy, from logits at every position or at `scored` only."""
    targets_BxP, weights_BxP = batch['targets'], batch['weights']
    if logits_BxPxV.shape[1] != targets_BxP.shape[1]:
      targets_BxP, weights_BxP = targets_BxP[:, self.scored], weights_BxP[:, self.scored]
    ce_BxP, correct_BxP = token_scores(logits_BxPxV, targets_BxP)
    return weighted_mean(ce_BxP, weights_BxP), {'accuracy': weighted_mean(correct_BxP, weights_BxP)}

  def sample_rows(self, rows: Batch, rng) -> Batch:
    """batch_size rows drawn uniformly with replacement."""
    idx = jax.random.randint(rng, (self.batch_size,), 0, rows['inputs'].shape[0])
    return jax.tree.map(lambda a: a[idx], rows)


class MemorizationTask(_SequenceTask):
  """Recall the object of N random facts (subject, relation) -> object; train set = test set.

  Tokens: objects [0, V), subjects [V, V + S), relations [V + S, V + S + R) with
  S = N / R subjects, every (subject, relation) one fact, objects uniform over V
  = task.num_objects. A sequence is [subject, relation]; the answer is predicted
  at the relation position. With task.object_softmax the answer's softmax runs over
  the V objects only (the other tokens' logits masked in training and evaluation):
  a model then spends nothing on keeping mass off the S + R tokens, whose number
  grows with N.
  """

  seq_len = 2
  scored = slice(1, 2)

  @staticmethod
  def validate(config):
    t = config.task
    for key in ('num_facts', 'num_relations', 'num_objects'):
      config_lib.positive_int(f'task.{key}', t[key])
    config_lib.check(t.num_objects >= 2, f'task.num_objects={t.num_objects} must be >= 2')
    config_lib.check(
      t.num_facts % t.num_relations == 0,
      f'task.num_facts={t.num_facts} must be divisible by task.num_relations={t.num_relations}',
    )
    config_lib.check(
      isinstance(t.object_softmax, bool), f'task.object_softmax={t.object_softmax!r} must be True or False'
    )

  def __init__(self, config):
    super().__init__(config)
    t = config.task
    self.num_subjects = t.num_facts // t.num_relations
    self.vocab_size = t.num_objects + self.num_subjects + t.num_relations

  def init_data(self, rng):
    t = self.config.task
    fact_N = jnp.arange(t.num_facts)
    subject_N = t.num_objects + fact_N // t.num_relations
    relation_N = t.num_objects + self.num_subjects + fact_N % t.num_relations
    object_N = jax.random.randint(jax.random.fold_in(rng, 4), (t.num_facts,), 0, t.num_objects)
    return {
      'inputs': jnp.stack([subject_N, relation_N], axis=1),
      'targets': jnp.stack([jnp.zeros_like(object_N), object_N], axis=1),
      'weights': answer_at([1], t.num_facts, self.seq_len),
    }

  def sample_batch(self, data, rng):
    return self.sample_rows(data, rng)

  @property
  def scored_vocab(self) -> int:
    """With task.object_softmax the objects [0, V) only: logits for the S + R other tokens are not computed."""
    return self.config.task.num_objects if self.config.task.object_softmax else self.vocab_size

  def _objects_only(self, logits_BxPxV: jax.Array) -> jax.Array:
    """The logits with every non-object token masked when task.object_softmax (else unchanged; logits of the
    objects alone, as the model gives them here, pass through)."""
    if not self.config.task.object_softmax or logits_BxPxV.shape[-1] == self.config.task.num_objects:
      return logits_BxPxV
    is_object_V = jnp.arange(logits_BxPxV.shape[-1]) < self.config.task.num_objects
    return jnp.where(is_object_V, logits_BxPxV, -jnp.inf)

  def loss(self, logits_BxPxV, batch):
    return super().loss(self._objects_only(logits_BxPxV), batch)

  def evaluate(self, apply_fn, data):
    t, tr = self.config.task, self.config.train
    ce_NxT, correct_NxT = scores_in_chunks(lambda x: self._objects_only(apply_fn(x)), data['inputs'], data['targets'])
    accuracy = jnp.mean(correct_NxT[:, 1])
    return {
      'eval_loss': jnp.mean(ce_NxT[:, 1]),
      'accuracy': accuracy,
      'eval_accuracy': accuracy,  # the test set is the training set
      # The run summary divides it by the parameter counts (bits_per_param, bits_per_ffn_param).
      'bits_stored': bits_stored(ce_NxT[:, 1], t.num_objects),
      'exposures_per_fact': jnp.float32(tr.steps * tr.batch_size / t.num_facts),
    }


class AssociativeRecallTask(_SequenceTask):
  """MQAR: [k1 v1 ... kP vP q1 ... qQ]; at each query position predict the value paired with it.

  Tokens: keys [0, K), values [K, 2K), K = task.num_keys. Keys in a sequence
  are distinct, values uniform; the Q queries are distinct keys of the context.
  Fresh sequences every step; `data` is a fixed evaluation set of task.num_eval.
  """

  @staticmethod
  def validate(config):
    t = config.task
    for key in ('num_pairs', 'num_queries', 'num_keys', 'num_eval'):
      config_lib.positive_int(f'task.{key}', t[key])
    config_lib.check(
      t.num_queries <= t.num_pairs, f'task.num_queries={t.num_queries} must be <= task.num_pairs={t.num_pairs}'
    )
    config_lib.check(
      t.num_keys >= t.num_pairs,
      f'task.num_keys={t.num_keys} must be >= task.num_pairs={t.num_pairs} (distinct keys)',
    )

  def __init__(self, config):
    super().__init__(config)
    t = config.task
    self.vocab_size = 2 * t.num_keys
    self.seq_len = 2 * t.num_pairs + t.num_queries
    self.scored = slice(2 * t.num_pairs, self.seq_len)

  def generate(self, rng, n: int) -> Batch:
    t = self.config.task
    k_keys, k_values, k_queries = jax.random.split(rng, 3)
    # Distinct keys per row: the first P of a random permutation (argsort of uniforms).
    keys_NxP = jnp.argsort(jax.random.uniform(k_keys, (n, t.num_keys)), axis=1)[:, : t.num_pairs]
    values_NxP = t.num_keys + jax.random.randint(k_values, (n, t.num_pairs), 0, t.num_keys)
    pick_NxQ = jnp.argsort(jax.random.uniform(k_queries, (n, t.num_pairs)), axis=1)[:, : t.num_queries]
    queries_NxQ = jnp.take_along_axis(keys_NxP, pick_NxQ, axis=1)
    answers_NxQ = jnp.take_along_axis(values_NxP, pick_NxQ, axis=1)
    context_Nx2P = jnp.stack([keys_NxP, values_NxP], axis=2).reshape(n, 2 * t.num_pairs)
    no_answer_Nx2P = jnp.zeros_like(context_Nx2P)
    return {
      'inputs': jnp.concatenate([context_Nx2P, queries_NxQ], axis=1),
      'targets': jnp.concatenate([no_answer_Nx2P, answers_NxQ], axis=1),
      'weights': answer_at(list(range(2 * t.num_pairs, self.seq_len)), n, self.seq_len),
    }

  def init_data(self, rng):
    return self.generate(jax.random.fold_in(rng, 5), self.config.task.num_eval)

  def sample_batch(self, data, rng):
    del data
    return self.generate(rng, self.batch_size)

  def evaluate(self, apply_fn, data):
    ce_NxT, correct_NxT = scores_in_chunks(apply_fn, data['inputs'], data['targets'])
    accuracy = weighted_mean(correct_NxT, data['weights'])
    return {
      'eval_loss': weighted_mean(ce_NxT, data['weights']),
      'accuracy': accuracy,  # fresh sequences: the training distribution is the test one
      'eval_accuracy': accuracy,
    }


class ModularArithmeticTask(_SequenceTask):
  """[a, b, =] -> (a + b) mod p at the '=' position; train on a random share of the p^2 pairs.

  Tokens: numbers [0, p), '=' is p. `accuracy` is on the training pairs,
  `eval_accuracy` and `eval_loss` on the held-out pairs.
  """

  seq_len = 3
  scored = slice(2, 3)

  @staticmethod
  def validate(config):
    t = config.task
    config_lib.positive_int('task.modulus', t.modulus)
    config_lib.check(t.modulus >= 2, f'task.modulus={t.modulus} must be >= 2')
    config_lib.fraction('task.train_fraction', t.train_fraction)

  def __init__(self, config):
    super().__init__(config)
    p = config.task.modulus
    self.vocab_size = p + 1
    self.num_train = min(max(round(config.task.train_fraction * p * p), 1), p * p - 1)

  def init_data(self, rng):
    p = self.config.task.modulus
    pair_M = jax.random.permutation(jax.random.fold_in(rng, 6), p * p)
    a_M, b_M = pair_M // p, pair_M % p
    inputs_Mx3 = jnp.stack([a_M, b_M, jnp.full_like(a_M, p)], axis=1)
    targets_Mx3 = jnp.stack([jnp.zeros_like(a_M), jnp.zeros_like(a_M), (a_M + b_M) % p], axis=1)
    rows = {'inputs': inputs_Mx3, 'targets': targets_Mx3, 'weights': answer_at([2], p * p, 3)}
    return {
      'train': jax.tree.map(lambda a: a[: self.num_train], rows),
      'eval': jax.tree.map(lambda a: a[self.num_train :], rows),
    }

  def sample_batch(self, data, rng):
    return self.sample_rows(data['train'], rng)

  def evaluate(self, apply_fn, data):
    train_ce, train_correct = scores_in_chunks(apply_fn, data['train']['inputs'], data['train']['targets'])
    eval_ce, eval_correct = scores_in_chunks(apply_fn, data['eval']['inputs'], data['eval']['targets'])
    return {
      'train_loss': jnp.mean(train_ce[:, 2]),
      'accuracy': jnp.mean(train_correct[:, 2]),
      'eval_loss': jnp.mean(eval_ce[:, 2]),
      'eval_accuracy': jnp.mean(eval_correct[:, 2]),
    }


class MultiHopTask(_SequenceTask):
  """[x, r1, ..., rh] -> the node reached from x along edges r1..rh of a random graph.

  Every node has task.num_relations out-edges (random functions f_r on the
  nodes). The answer at relation position j is the node after j hops. A share
  task.train_fraction of the n R^h compositions is trained on; for the rest
  only the first hop (an atomic fact) is supervised, so every atomic fact is
  learned and held-out compositions test whether the model composes them.
  A share task.validation_fraction of the compositions (held out like the
  test ones) is a validation set to choose settings on, so that the test
  compositions choose nothing.
  `accuracy` / `eval_accuracy` / `eval_loss`: the final hop of trained /
  held-out test compositions; `val_accuracy` / `val_loss` (validation_fraction
  > 0 only): of the validation compositions; `first_hop_accuracy`: atomic
  facts over all. Tokens: nodes [0, n), relations [n, n + R).
  """

  MAX_COMPOSITIONS = 1 << 20

  @staticmethod
  def validate(config):
    t = config.task
    for key in ('num_nodes', 'num_relations', 'num_hops'):
      config_lib.positive_int(f'task.{key}', t[key])
    config_lib.check(t.num_nodes >= 2, f'task.num_nodes={t.num_nodes} must be >= 2')
    config_lib.check(t.num_hops >= 2, f'task.num_hops={t.num_hops} must be >= 2 (composition)')
    config_lib.fraction('task.train_fraction', t.train_fraction)
    config_lib.non_negative('task.validation_fraction', t.validation_fraction)
    config_lib.check(
      t.train_fraction + t.validation_fraction < 1,
      f'task.train_fraction + task.validation_fraction = {t.train_fraction} + {t.validation_fraction} '
      'must be < 1 (test compositions must remain)',
    )
    num = t.num_nodes * t.num_relations**t.num_hops
    config_lib.check(
      num <= MultiHopTask.MAX_COMPOSITIONS,
      f'task.num_nodes * task.num_relations ** task.num_hops = {num} exceeds '
      f'{MultiHopTask.MAX_COMPOSITIONS} compositions',
    )
    num_train = min(max(round(t.train_fraction * num), 1), num - 1)
    config_lib.check(
      not t.validation_fraction or num - num_train >= 2,
      f'task.validation_fraction={t.validation_fraction}: {num} compositions, {num_train} trained, leave '
      f'{num - num_train}; a validation split needs 2 (one validation, one test)',
    )

  def __init__(self, config):
    super().__init__(config)
    t = config.task
    self.vocab_size = t.num_nodes + t.num_relations
    self.seq_len = 1 + t.num_hops
    self.scored = slice(1, self.seq_len)
    self.num_compositions = t.num_nodes * t.num_relations**t.num_hops
    self.num_train = min(max(round(t.train_fraction * self.num_compositions), 1), self.num_compositions - 1)
    val = round(t.validation_fraction * self.num_compositions)
    self.num_val = min(max(val, 1), self.num_compositions - self.num_train - 1) if t.validation_fraction else 0

  def init_data(self, rng):
    t = self.config.task
    k_edges, k_split = jax.random.split(jax.random.fold_in(rng, 7))
    edges_NxR = jax.random.randint(k_edges, (t.num_nodes, t.num_relations), 0, t.num_nodes)
    id_C = jax.random.permutation(k_split, self.num_compositions)  # first num_train: trained
    start_C = id_C // t.num_relations**t.num_hops
    relations_CxH = jnp.stack(
      [(id_C // t.num_relations ** (t.num_hops - 1 - j)) % t.num_relations for j in range(t.num_hops)], axis=1
    )
    node_C, hops = start_C, []
    for j in range(t.num_hops):
      node_C = edges_NxR[node_C, relations_CxH[:, j]]
      hops.append(node_C)
    c = self.num_compositions
    return {
      'edges': edges_NxR,
      'inputs': jnp.concatenate([start_C[:, None], t.num_nodes + relations_CxH], axis=1),
      'targets': jnp.stack([jnp.zeros_like(start_C), *hops], axis=1),
      'is_train': jnp.arange(c) < self.num_train,
      'is_val': (jnp.arange(c) >= self.num_train) & (jnp.arange(c) < self.num_train + self.num_val),
    }

  def sample_batch(self, data, rng):
    batch = self.sample_rows({k: data[k] for k in ('inputs', 'targets', 'is_train')}, rng)
    n, hops = self.batch_size, list(range(1, self.seq_len))
    weights = jnp.where(
      batch.pop('is_train')[:, None], answer_at(hops, n, self.seq_len), answer_at([1], n, self.seq_len)
    )
    return {**batch, 'weights': weights}

  def evaluate(self, apply_fn, data):
    ce_CxT, correct_CxT = scores_in_chunks(apply_fn, data['inputs'], data['targets'])
    train_C, val_C = (data[k].astype(jnp.float32)[:, None] for k in ('is_train', 'is_val'))
    test_C = 1.0 - train_C - val_C
    last = lambda x_CxT, w_C: weighted_mean(x_CxT[:, -1:], w_C)
    val = {'val_loss': last(ce_CxT, val_C), 'val_accuracy': last(correct_CxT, val_C)} if self.num_val else {}
    return {
      'train_loss': last(ce_CxT, train_C),
      'accuracy': last(correct_CxT, train_C),
      'eval_loss': last(ce_CxT, test_C),
      'eval_accuracy': last(correct_CxT, test_C),
      **val,
      'first_hop_accuracy': jnp.mean(correct_CxT[:, 1]),
    }


TASKS = {
  'memorization': MemorizationTask,
  'associative_recall': AssociativeRecallTask,
  'modular_arithmetic': ModularArithmeticTask,
  'multi_hop': MultiHopTask,
}
