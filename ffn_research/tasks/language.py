"""A synthetic language with an exactly known entropy floor: a sparse random Markov chain of order k.

The language (drawn from the run's seed in `init_data`):

- tokens [0, V), V = task.vocab_size; a context is the last k = task.markov_order
  tokens, C = V^k contexts, indexed base V with the oldest token first;
- every token b has m = task.num_candidates candidate successors (distinct, random);
- every context c = (..., b) has s = task.branching possible next tokens, drawn
  without replacement from b's candidates, with probabilities ~ Dirichlet(alpha)
  (alpha = task.concentration).

So there is structure at three levels: unigram (the stationary marginal), bigram
(the last token fixes m candidates, about log2 m bits) and the full order-k
context (s weighted choices, the floor). Sequences start from the stationary
distribution pi over contexts, so every scored position has the same expected
conditional entropy, and the best achievable next-token loss given the whole
past is exactly the entropy rate

    H = sum_c pi(c) * H(next | c)   (bits per token),

with pi computed exactly by sparse linear solves on the chain's closed classes (tests hold
it against dense NumPy references, including chains too peaked for power iteration to
converge, and against the empirical -log2 p of sampled text).
Loss is scored at positions that see a full context (t >= k - 1).
`excess_bits` = model cross-entropy minus the true chain's cross-entropy on the
same held-out tokens: the KL the model still has to remove, with the sampling
noise of the held-out set paired away.
"""

import collections
import hashlib
import math

import jax
import jax.extend.random
import jax.numpy as jnp
import numpy as np
from scipy import sparse
from scipy.sparse import csgraph
from scipy.sparse import linalg as splinalg

from ffn_research import config as config_lib
from ffn_research.tasks import sequence

MAX_CONTEXTS = 1 << 18  # V^k: the chain is a (V^k, s) table; its stationary vector is a sparse solve
STATIONARY_TOL = 1e-5  # ||pi P - pi||_1 of the exact pi in float32 stays below this (tests)
START_DRAWS = ('gumbel', 'inverse_cdf')  # task.start_draw: how a sequence's start context is drawn (sample_text)
LOG2 = math.log(2.0)


def _entropy_bits(p: jax.Array, axis=-1) -> jax.Array:
  return -jnp.sum(jax.scipy.special.xlogy(p, p), axis=axis) / LOG2


def make_chain(
  rng: jax.Array, vocab_size: int, order: int, branching: int, num_candidates: int, concentration: float
) -> dict[str, jax.Array]:
  """The random chain: next_CxS (next tokens of each context) and prob_CxS (their probabilities)."""
  v, c = vocab_size, vocab_size**order
  k_cand, k_pick, k_prob = jax.random.split(rng, 3)
  candidates_VxM = jnp.argsort(jax.random.uniform(k_cand, (v, v)), axis=1)[:, :num_candidates]
  pick_CxS = jnp.argsort(jax.random.uniform(k_pick, (c, num_candidates)), axis=1)[:, :branching]
  next_CxS = jnp.take_along_axis(candidates_VxM[jnp.arange(c) % v], pick_CxS, axis=1)
  prob_CxS = jax.random.dirichlet(k_prob, jnp.full((branching,), float(concentration)), (c,))
  prob_CxS = jnp.maximum(prob_CxS, 1e-12)  # tiny alpha can underflow to exact zeros
  return {'next_CxS': next_CxS, 'prob_CxS': prob_CxS / jnp.sum(prob_CxS, axis=1, keepdims=True)}


def next_context(context_C: jax.Array, token_C: jax.Array, vocab_size: int, order: int) -> jax.Array:
  """Drop the oldest token of each context, append `token`."""
  return (context_C * vocab_size) % vocab_size**order + token_C


def _on_host(fn, shapes, *args):
  """fn(*numpy args) -> float32 arrays of `shapes`, run on the host: traceable, vmappable, and a
  scatter-add there is deterministic (on a GPU, XLA's scatter-add sums in a varying order)."""

  def host(*arrays):
    return tuple(np.asarray(x, np.float32) for x in fn(*(np.asarray(a) for a in arrays)))

  out = tuple(jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes)
  return jax.pure_callback(host, out, *args, vmap_method='sequential')


def chain_step_numpy(pi_C: np.ndarray, next_CxS: np.ndarray, prob_CxS: np.ndarray, vocab_size: int, order: int):
  """pi P in float64: the context distribution one token later."""
  to_CxS = (np.arange(pi_C.shape[0])[:, None] * vocab_size) % vocab_size**order + next_CxS
  weights = pi_C[:, None].astype(np.float64) * prob_CxS
  return np.bincount(to_CxS.ravel(), weights=weights.ravel(), minlength=pi_C.shape[0])


def stationary_numpy(next_CxS: np.ndarray, prob_CxS: np.ndarray, vocab_size: int, order: int) -> np.ndarray:
  """The exact limit of the lazy chain (pi + pi P) / 2 started from uniform, in float64.

  Each closed class K (a strongly connected component no transition leaves) has one
  stationary distribution pi_K: a linear solve on K. Uniform mass on transient contexts
  drains into the closed classes; the mass that ends in K is u(K) + y R 1_K, where y solves
  y (I - Q) = u restricted to the transient contexts (Q among them, R into K). Then
  pi = sum_K mass_K pi_K: the unique answer also when the chain is reducible or periodic,
  where power iteration converges slowly or not at all.
  """
  c = vocab_size**order
  to_CxS = (np.arange(c)[:, None] * vocab_size) % c + next_CxS
  p = sparse.csr_matrix(
    (prob_CxS.ravel(), (np.repeat(np.arange(c), next_CxS.shape[1]), to_CxS.ravel())), shape=(c, c)
  )  # duplicates summed
  _, label_C = csgraph.connected_components(p, directed=True, connection='strong')
  leaves_C = label_C[to_CxS] != label_C[:, None]
  leaving = np.bincount(label_C, weights=(leaves_C & (prob_CxS > 0)).any(axis=1), minlength=label_C.max() + 1)
  closed_C = leaving[label_C] == 0
  uniform = np.full(c, 1.0 / c)
  transient = np.flatnonzero(~closed_C)
  reach_C = uniform.copy()  # mass that ends in each context's class, added up per class below
  if len(transient):
    q = p[transient][:, transient]
    y = splinalg.spsolve((sparse.identity(len(transient)) - q).T.tocsc(), uniform[transient])
    into_closed = np.asarray(p[transient].T @ y).ravel()  # y R, per destination context
    reach_C = reach_C + np.where(closed_C, into_closed, 0.0)
  pi = np.zeros(c)
  for label in np.unique(label_C[closed_C]):
    members = np.flatnonzero(label_C == label)
    a = (p[members][:, members].T - sparse.identity(len(members))).tolil()
    a[0, :] = 1.0  # replace one balance equation by sum(pi_K) = 1
    rhs = np.zeros(len(members))
    rhs[0] = 1.0
    pi_k = splinalg.spsolve(a.tocsc(), rhs) if len(members) > 1 else np.ones(1)
    pi[members] = np.clip(pi_k, 0.0, None) * reach_C[members].sum()
  return pi / pi.sum()


_STATIONARY_CACHE: collections.OrderedDict[tuple, tuple[np.ndarray, np.ndarray]] = collections.OrderedDict()
STATIONARY_CACHE_SIZE = 64  # chains kept (a V = 128 chain's pi is 64 KB)


def stationary_host(next_CxS: np.ndarray, prob_CxS: np.ndarray, vocab_size: int, order: int):
  """(pi float32, its L1 residual ||pi P - pi||_1) on the host, cached per chain in this process: every run of a
  seed draws the same chain, and the exact solve takes ~20 s at V = 128 (16,384 contexts), ~0.03 s at V = 64."""
  digest = hashlib.sha256(next_CxS.tobytes() + prob_CxS.tobytes()).digest()
  key = (vocab_size, order, next_CxS.shape, next_CxS.dtype.str, prob_CxS.dtype.str, digest)
  if key not in _STATIONARY_CACHE:
    pi = stationary_numpy(next_CxS, prob_CxS.astype(np.float64), vocab_size, order).astype(np.float32)
    residual = np.abs(chain_step_numpy(pi, next_CxS, prob_CxS, vocab_size, order) - pi).sum()
    _STATIONARY_CACHE[key] = (pi, np.float32(residual))
    while len(_STATIONARY_CACHE) > STATIONARY_CACHE_SIZE:
      _STATIONARY_CACHE.popitem(last=False)
  _STATIONARY_CACHE.move_to_end(key)
  return _STATIONARY_CACHE[key]


def stationary(chain: dict[str, jax.Array], vocab_size: int, order: int) -> tuple[jax.Array, jax.Array]:
  """The chain's stationary distribution over contexts (`stationary_numpy`) and the L1 residual
  ||pi P - pi||_1 of its float32 value (float rounding), both computed on the host (`stationary_host`)."""

  def host(next_CxS, prob_CxS):
    return stationary_host(next_CxS, prob_CxS, vocab_size, order)

  shapes = [(vocab_size**order,), ()]
  return tuple(_on_host(host, shapes, chain['next_CxS'], chain['prob_CxS']))


def entropy_stats(chain: dict[str, jax.Array], pi_C: jax.Array, vocab_size: int) -> dict[str, jax.Array]:
  """Exact per-token figures of the stationary chain, in bits (accuracy ceiling as a fraction).

  floor_bits: entropy rate H(x_t | previous k); bigram_bits: H(x_t | x_{t-1});
  unigram_bits: H(x_t); accuracy_ceiling: sum_c pi(c) max_y p(y | c), the
  accuracy of always predicting the most likely next token.
  """
  v, prob_CxS, next_CxS = vocab_size, chain['prob_CxS'], chain['next_CxS']
  unigram_V = jnp.sum(pi_C.reshape(-1, v), axis=0)  # the stationary marginal of a token (context c ends in c % v)

  def joint(pi_C, next_CxS, prob_CxS):  # (last token, next token) pairs: a scatter-add, on the host
    pair_CxS = (np.arange(pi_C.shape[0]) % v)[:, None] * v + next_CxS
    weights = pi_C[:, None].astype(np.float64) * prob_CxS
    return (np.bincount(pair_CxS.ravel(), weights=weights.ravel(), minlength=v * v),)

  (joint_VV,) = _on_host(joint, [(v * v,)], pi_C, next_CxS, prob_CxS)
  h_unigram = _entropy_bits(unigram_V)
  return {
    'floor_bits': jnp.sum(pi_C * _entropy_bits(prob_CxS)),
    'bigram_bits': _entropy_bits(joint_VV) - h_unigram,
    'unigram_bits': h_unigram,
    'accuracy_ceiling': jnp.sum(pi_C * jnp.max(prob_CxS, axis=1)),
  }


def first_argmax(x_NxK: jax.Array) -> jax.Array:
  """jnp.argmax over the last axis (the first maximum; a NaN counts as the maximum) with two plain
  reductions: XLA:CPU runs argmax's variadic reduction several times slower (docs/sequence.md)."""
  iota_NxK = jax.lax.broadcasted_iota(jnp.int32, x_NxK.shape, x_NxK.ndim - 1)
  max_N = jnp.max(x_NxK, axis=-1, keepdims=True)
  is_max_NxK = (x_NxK == max_N) | jnp.isnan(x_NxK)
  return jnp.min(jnp.where(is_max_NxK, iota_NxK, x_NxK.shape[-1]), axis=-1)


def categorical(key: jax.Array, logits_NxK: jax.Array) -> jax.Array:
  """jax.random.categorical(key, logits_NxK), the same draws: argmax of Gumbel noise plus logits."""
  return first_argmax(jax.random.gumbel(key, logits_NxK.shape, logits_NxK.dtype) + logits_NxK)


def gumbel_at(key: jax.Array, shape: tuple[int, ...], flat_index: jax.Array) -> jax.Array:
  """jax.random.gumbel(key, shape) (float32) at the given flat positions, computing only those.

  With JAX's default threefry layout (jax_threefry_partitionable) the random bits at flat position
  i are the xor of the two words of threefry2x32(key, (i >> 32, i mod 2^32)); then come
  jax.random.uniform's mantissa trick on [tiny, 1) and -log(-log u), as jax.random.gumbel does
  (tests hold the values equal bit for bit). Other layouts: the whole array, then the positions.
  """
  partitionable = jax.config.jax_threefry_partitionable  # type: ignore[attr-defined]  # flags are dynamic attributes
  if not partitionable or math.prod(shape) >= 2**32:
    return jax.random.gumbel(key, shape, jnp.float32).reshape(-1)[flat_index]
  k1, k2 = jax.random.key_data(key)
  lo = flat_index.astype(jnp.uint32)
  b1, b2 = jax.extend.random.threefry2x32_p.bind(k1, k2, jnp.zeros_like(lo), lo)
  mantissa = jax.lax.shift_right_logical(b1 ^ b2, jnp.uint32(32 - 23)) | jnp.uint32(0x3F800000)
  tiny = jnp.float32(np.finfo(np.float32).tiny)
  u = jax.lax.bitcast_convert_type(mantissa, jnp.float32) - jnp.float32(1.0)
  u = jnp.maximum(tiny, u * (jnp.float32(1.0) - tiny) + tiny)
  return -jnp.log(-jnp.log(u))


def inverse_cdf(key: jax.Array, pi_C: jax.Array, n: int) -> jax.Array:
  """n draws from pi_C: the first context whose running sum of pi exceeds u * sum(pi), u ~ U[0, 1) from `key`.

  O(log C) per draw after one cumulative sum, where Gumbel-max costs O(C). Never a context with pi = 0 (its
  running sum equals the one before it), and always one of the C: u <= 1 - 2^-23 keeps u * sum(pi) at least one
  float32 step below the sum. Tests hold it against NumPy.
  """
  cdf_C = jnp.cumsum(pi_C)
  u_N = jax.random.uniform(key, (n,), cdf_C.dtype) * cdf_C[-1]
  return jnp.searchsorted(cdf_C, u_N, side='right')


def reachable_contexts(vocab_size: int, order: int, num_candidates: int) -> int:
  """An upper bound on the contexts a chain of make_chain can visit, so on those with pi > 0 (a
  context with pi > 0 has a transition into it: its last token is a candidate of the one before)."""
  return vocab_size if order == 1 else min(vocab_size**order, vocab_size ** (order - 1) * num_candidates)


def sample_text(
  chain: dict[str, jax.Array],
  pi_C: jax.Array,
  rng: jax.Array,
  n: int,
  length: int,
  vocab_size: int,
  order: int,
  support: int | None = None,
  start_draw: str = 'gumbel',
) -> tuple[jax.Array, jax.Array]:
  """n stationary sequences of `length` tokens and the true -log p (nats) of tokens k.. (n, length - k).

  The draws are jax.random.categorical's (tests): the start context from k_start, token i from the
  i-th key of split(k_steps). The Gumbel noise of every position is drawn up front in one
  vectorized call, so the sequential scan only gathers, adds and takes maxima. `support`: at
  least the number of contexts with pi > 0 (`reachable_contexts`); the start's noise is then drawn
  only at those (contexts with pi = 0 have logit -inf and are never drawn); None: at every context.
  start_draw 'inverse_cdf': the start context by `inverse_cdf` from k_start instead (the tokens after it as above).
  """
  k_start, k_steps = jax.random.split(rng)
  c = pi_C.shape[0]
  if start_draw == 'inverse_cdf':
    context_N = inverse_cdf(k_start, pi_C, n)
  elif support is None or support >= c:
    context_N = categorical(k_start, jnp.broadcast_to(jnp.log(pi_C), (n, c)))
  else:  # the contexts with pi > 0 in increasing order, then padding at logit -inf
    support_M = jnp.nonzero(pi_C > 0, size=support, fill_value=0)[0]
    real_M = jnp.arange(support) < jnp.sum(pi_C > 0)
    log_pi_M = jnp.where(real_M, jnp.log(pi_C)[support_M], -jnp.inf)
    noise_NxM = gumbel_at(k_start, (n, c), jnp.arange(n)[:, None] * c + support_M[None, :])
    context_N = support_M[first_argmax(noise_NxM + log_pi_M[None, :])]
  first_NxK = jnp.stack([(context_N // vocab_size ** (order - 1 - i)) % vocab_size for i in range(order)], axis=1)
  log_prob_CxS = jnp.log(chain['prob_CxS'])
  s = log_prob_CxS.shape[1]
  keys_L = jax.random.split(k_steps, length - order)
  noise_LxNxS = jax.vmap(lambda k: jax.random.gumbel(k, (n, s), log_prob_CxS.dtype))(keys_L)

  def body(context_N, noise_NxS):
    log_p_NxS = log_prob_CxS[context_N]
    j_N = first_argmax(noise_NxS + log_p_NxS)
    token_N = chain['next_CxS'][context_N, j_N]
    nll_N = -log_prob_CxS[context_N, j_N]
    return next_context(context_N, token_N, vocab_size, order), (token_N, nll_N)

  _, (tokens_LxN, nll_LxN) = jax.lax.scan(body, context_N, noise_LxNxS)
  return jnp.concatenate([first_NxK, tokens_LxN.T], axis=1), nll_LxN.T


class LanguageTask(sequence._SequenceTask):
  """Next-token prediction on the chain above; fresh text every step, a fixed held-out set.

  Inputs x_0..x_{T-1}, targets x_1..x_T (T = task.seq_len); positions t >= k - 1
  are scored. `data` holds the chain, its stationary distribution, the held-out
  text and the exact entropy figures.
  """

  @staticmethod
  def validate(config):
    t = config.task
    for key in ('vocab_size', 'markov_order', 'branching', 'num_candidates', 'seq_len', 'num_eval'):
      config_lib.positive_int(f'task.{key}', t[key])
    config_lib.check(t.vocab_size >= 2, f'task.vocab_size={t.vocab_size} must be >= 2')
    config_lib.check(
      t.num_candidates <= t.vocab_size,
      f'task.num_candidates={t.num_candidates} must be <= task.vocab_size={t.vocab_size}',
    )
    config_lib.check(
      t.branching <= t.num_candidates, f'task.branching={t.branching} must be <= task.num_candidates={t.num_candidates}'
    )
    config_lib.check(
      t.vocab_size**t.markov_order <= MAX_CONTEXTS,
      f'task.vocab_size ** task.markov_order = {t.vocab_size**t.markov_order} contexts exceeds {MAX_CONTEXTS}',
    )
    config_lib.check(
      t.seq_len >= t.markov_order,
      f'task.seq_len={t.seq_len} must be >= task.markov_order={t.markov_order} '
      '(at least one position with a full context)',
    )
    config_lib.positive_float('task.concentration', t.concentration)
    config_lib.one_of('task.start_draw', t.start_draw, START_DRAWS)

  def __init__(self, config):
    super().__init__(config)
    t = config.task
    self.vocab_size, self.seq_len, self.order = t.vocab_size, t.seq_len, t.markov_order
    self.scored = slice(self.order - 1, self.seq_len)

  def sample(self, data, rng, n: int) -> sequence.Batch:
    """n sequences as a batch, plus 'nll': the true chain's -log p (nats) at each position (0 where unscored)."""
    support = reachable_contexts(self.vocab_size, self.order, self.config.task.num_candidates)
    t = self.config.task
    tokens, nll = sample_text(
      data['chain'], data['pi'], rng, n, self.seq_len + 1, self.vocab_size, self.order, support, t.start_draw
    )
    scored = self.seq_len - self.order + 1
    return {
      'inputs': tokens[:, :-1],
      'targets': tokens[:, 1:],
      'weights': sequence.answer_at(list(range(self.order - 1, self.seq_len)), n, self.seq_len),
      'nll': jnp.pad(nll, ((0, 0), (self.seq_len - scored, 0))),
    }

  def init_data(self, rng):
    t = self.config.task
    k_chain, k_eval = jax.random.split(jax.random.fold_in(rng, 8))
    chain = make_chain(k_chain, t.vocab_size, t.markov_order, t.branching, t.num_candidates, t.concentration)
    pi, residual = stationary(chain, t.vocab_size, t.markov_order)
    data = {'chain': chain, 'pi': pi, 'stationary_residual': residual, 'stats': entropy_stats(chain, pi, t.vocab_size)}
    data['eval'] = self.sample(data, k_eval, t.num_eval)
    return data

  def sample_batch(self, data, rng):
    batch = self.sample(data, rng, self.batch_size)
    del batch['nll']
    return batch

  def evaluate(self, apply_fn, data):
    ev = data['eval']
    ce_NxT, correct_NxT = sequence.scores_in_chunks(apply_fn, ev['inputs'], ev['targets'])
    eval_loss = sequence.weighted_mean(ce_NxT, ev['weights'])
    oracle_bits = sequence.weighted_mean(ev['nll'], ev['weights']) / LOG2
    accuracy = sequence.weighted_mean(correct_NxT, ev['weights'])
    return {
      'eval_loss': eval_loss,  # nats per scored token
      'eval_bits': eval_loss / LOG2,  # bits per scored token
      'excess_bits': eval_loss / LOG2 - oracle_bits,  # over the true chain on the same tokens
      'eval_oracle_bits': oracle_bits,  # the true chain's bits on the held-out tokens (~ floor)
      'accuracy': accuracy,  # fresh text: training distribution = test distribution
      'eval_accuracy': accuracy,
      **data['stats'],
      'stationary_residual': data['stationary_residual'],
    }


TASKS = {'language': LanguageTask}
