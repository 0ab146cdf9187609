"""The `language` task: the chain, its exact entropy floor (vs NumPy and vs sampled text), metrics, runs."""

import importlib.util
import json
import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import tasks
from ffn_research import validation
from ffn_research.tasks import language

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lang_config(**task_overrides):
  c = config_lib.default_config()
  c.model.arch, c.model.d_model, c.model.d_ff, c.model.num_layers, c.model.num_heads = 'transformer', 16, 32, 1, 2
  c.task.name = 'language'
  c.task.vocab_size, c.task.markov_order, c.task.num_candidates, c.task.branching = 6, 2, 4, 3
  c.task.seq_len, c.task.num_eval = 12, 64
  c.train.batch_size = 8
  for key, value in task_overrides.items():
    c.task[key] = value
  validation.validate(c)
  return c


@pytest.fixture(scope='module')
def small():
  """The default test language for seeds 0 and 1 (one compile of init_data)."""
  task = tasks.build_task(lang_config())
  init = jax.jit(task.init_data)
  return task, init(jax.random.PRNGKey(0)), init(jax.random.PRNGKey(0)), init(jax.random.PRNGKey(1))


def numpy_stats(next_CxS, prob_CxS, v, k):
  """Independent reference: dense transition matrix over contexts, stationary vector by eigen-solve."""
  c = v**k
  p = np.zeros((c, c))
  for ctx in range(c):
    for y, q in zip(next_CxS[ctx], prob_CxS[ctx], strict=True):
      p[ctx, (ctx * v) % c + y] += q
  w, vecs = np.linalg.eig(p.T.astype(np.float64))
  pi = np.real(vecs[:, np.argmin(np.abs(w - 1.0))])
  pi = pi / pi.sum()
  h_ctx = -np.sum(prob_CxS * np.log2(prob_CxS), axis=1)
  # Next-token distribution given only the last token b, and the marginal of b.
  last = np.arange(c) % v
  joint = np.zeros((v, v))
  for ctx in range(c):
    for y, q in zip(next_CxS[ctx], prob_CxS[ctx], strict=True):
      joint[last[ctx], y] += pi[ctx] * q
  marg = joint.sum(1)
  ent = lambda x: -np.sum(x[x > 0] * np.log2(x[x > 0]))
  return {
    'floor_bits': pi @ h_ctx,
    'unigram_bits': ent(marg),
    'bigram_bits': ent(joint.ravel()) - ent(marg),
    'accuracy_ceiling': pi @ prob_CxS.max(1),
  }, pi


def lazy_limit_numpy(next_CxS, prob_CxS, v, k):
  """Independent reference: uniform times L^(2^64), L = (I + P) / 2 (dense, float64, repeated squaring),
  the limit power iteration approaches however slowly the chain mixes."""
  c = v**k
  p = np.zeros((c, c))
  for ctx in range(c):
    for y, q in zip(next_CxS[ctx], prob_CxS[ctx], strict=True):
      p[ctx, (ctx * v) % c + y] += q
  m = 0.5 * (np.eye(c) + p)
  for _ in range(64):
    m = m @ m
    m /= m.sum(axis=1, keepdims=True)
  return np.full(c, 1.0 / c) @ m


def test_stationary_is_solved_once_per_chain_in_a_process(monkeypatch):
  """Every run of a seed draws the same chain: the host solve is cached on the chain's arrays, and a vmapped init
  over runs of two seeds solves twice, with the same pi as an uncached solve."""
  calls = []
  solve = language.stationary_numpy
  monkeypatch.setattr(language, 'stationary_numpy', lambda *a: calls.append(1) or solve(*a))
  monkeypatch.setattr(language, '_STATIONARY_CACHE', type(language._STATIONARY_CACHE)())
  v, k, m, s = 8, 2, 4, 2
  keys = jnp.stack([jax.random.PRNGKey(seed) for seed in (0, 1, 0, 1, 0)])
  chains = jax.vmap(lambda key: language.make_chain(key, v, k, s, m, 0.5))(keys)
  pi_RxC, residual_R = jax.jit(jax.vmap(lambda c: language.stationary(c, v, k)))(chains)
  assert len(calls) == 2 and pi_RxC.shape == (5, v**k) and residual_R.shape == (5,)
  for r in range(5):
    exact = solve(np.asarray(chains['next_CxS'][r]), np.asarray(chains['prob_CxS'][r], np.float64), v, k)
    np.testing.assert_array_equal(np.asarray(pi_RxC[r]), exact.astype(np.float32))
  np.testing.assert_array_equal(pi_RxC[0], pi_RxC[2])
  assert not np.array_equal(pi_RxC[0], pi_RxC[1])


@pytest.mark.parametrize('alpha', [0.05, 0.1])
def test_stationary_is_exact_for_peaked_chains(alpha):
  """At small Dirichlet alpha the chain is nearly deterministic: lazy power iteration from uniform
  had not converged after 5,000 steps for some of these seeds (residual up to 2.5e-4); the sparse
  solve gives the limit, and with it the floor, to about 1e-6."""
  v, k, m, s = 8, 2, 4, 2
  for seed in range(4):
    chain = language.make_chain(jax.random.PRNGKey(seed), v, k, s, m, alpha)
    next_CxS, prob_CxS = np.asarray(chain['next_CxS']), np.asarray(chain['prob_CxS'], np.float64)
    pi = language.stationary_numpy(next_CxS, prob_CxS, v, k)
    ref = lazy_limit_numpy(next_CxS, prob_CxS, v, k)
    np.testing.assert_allclose(pi, ref, atol=2e-6)
    h_C = -np.sum(prob_CxS * np.log2(prob_CxS), axis=1)
    np.testing.assert_allclose(pi @ h_C, ref @ h_C, atol=1e-6)


def test_stationary_of_a_reducible_chain_weights_its_closed_classes():
  """Two absorbing contexts reached from one transient context with probabilities 0.3 / 0.7."""
  v, k = 3, 1  # contexts = tokens 0, 1, 2; 0 -> {1: 0.3, 2: 0.7}; 1 -> 1; 2 -> 2
  next_CxS = np.array([[1, 2], [1, 1], [2, 2]])
  prob_CxS = np.array([[0.3, 0.7], [0.5, 0.5], [0.5, 0.5]])
  pi = language.stationary_numpy(next_CxS, prob_CxS, v, k)
  np.testing.assert_allclose(pi, [0.0, 1 / 3 + 0.3 / 3, 1 / 3 + 0.7 / 3], atol=1e-12)


@pytest.mark.parametrize(
  'v,k,m,s,alpha',
  [
    (6, 2, 4, 3, 1.0),  # one shape by default: each compiles (~10 s)
    pytest.param(4, 3, 3, 2, 0.3, marks=pytest.mark.slow),
    pytest.param(7, 1, 5, 3, 2.0, marks=pytest.mark.slow),
  ],
)
def test_floor_matches_numpy_eigen_solve(v, k, m, s, alpha):
  chain = language.make_chain(jax.random.PRNGKey(3), v, k, s, m, alpha)
  pi, residual = jax.jit(lambda ch: language.stationary(ch, v, k))(chain)
  stats = language.entropy_stats(chain, pi, v)
  want, pi_np = numpy_stats(np.asarray(chain['next_CxS']), np.asarray(chain['prob_CxS'], np.float64), v, k)
  assert float(residual) <= language.STATIONARY_TOL
  np.testing.assert_allclose(pi, pi_np, atol=1e-5)
  for key, value in want.items():
    np.testing.assert_allclose(stats[key], value, rtol=1e-4, atol=1e-5, err_msg=key)
  # Order-ordered levels of structure: more context never raises entropy.
  assert want['floor_bits'] <= want['bigram_bits'] + 1e-9 <= want['unigram_bits'] + 2e-9
  if k == 1:  # the bigram is then the whole context
    np.testing.assert_allclose(stats['bigram_bits'], stats['floor_bits'], rtol=1e-5)


def test_chain_structure():
  v, k, m, s = 9, 2, 4, 3
  chain = language.make_chain(jax.random.PRNGKey(0), v, k, s, m, 1.0)
  nxt, prob = np.asarray(chain['next_CxS']), np.asarray(chain['prob_CxS'])
  assert nxt.shape == prob.shape == (v**k, s)
  np.testing.assert_allclose(prob.sum(1), 1.0, rtol=1e-6)
  assert all(len(set(row)) == s for row in nxt)  # distinct next tokens per context
  # Contexts sharing a last token draw from the same m candidates.
  for b in range(v):
    assert len(set(nxt[np.arange(v**k) % v == b].ravel())) <= m


@pytest.mark.parametrize('start_draw', language.START_DRAWS)
def test_sampled_text_follows_chain_and_its_entropy_is_the_floor(small, start_draw):
  """Brute force: the mean true -log2 p of long sampled text equals the exact floor within 4 SE."""
  _, data, _, _ = small
  v, n, length = 6, 256, 400
  tokens, nll = jax.jit(
    lambda d, r: language.sample_text(d['chain'], d['pi'], r, n, length, v, 2, start_draw=start_draw)
  )(data, jax.random.PRNGKey(11))
  tokens, nll = np.asarray(tokens), np.asarray(nll, np.float64) / math.log(2)
  nxt, prob = np.asarray(data['chain']['next_CxS']), np.asarray(data['chain']['prob_CxS'])
  assert tokens.shape == (n, length) and nll.shape == (n, length - 2)
  for row, row_nll in zip(tokens[:20], nll[:20], strict=True):  # every step is a transition of the chain
    for t in range(2, length):
      ctx = row[t - 2] * v + row[t - 1]
      j = list(nxt[ctx]).index(row[t])
      np.testing.assert_allclose(row_nll[t - 2], -np.log2(prob[ctx, j]), rtol=1e-5)
  per_seq = nll.mean(axis=1)  # sequences are independent: the SE comes from their spread
  se = per_seq.std(ddof=1) / math.sqrt(n)
  floor = float(data['stats']['floor_bits'])
  assert abs(per_seq.mean() - floor) < 4 * se, (per_seq.mean(), floor, se)
  assert se < 0.02  # the check has teeth: tighter than the gaps between the levels below
  assert float(data['stats']['bigram_bits']) - floor > 0.1
  # Sequences start stationary: the first token's frequencies match the unigram marginal.
  marg = np.zeros(v)
  np.add.at(marg, np.arange(v * v) % v, np.asarray(data['pi']))
  freq = np.bincount(tokens[:, 1], minlength=v) / n
  assert np.max(np.abs(freq - marg)) < 4 * math.sqrt(0.25 / n)


def _sample_text_reference(chain, pi_C, rng, n, length, vocab_size, order):
  """sample_text as first written: jax.random.categorical per position inside the scan."""
  k_start, k_steps = jax.random.split(rng)
  context_N = jax.random.categorical(k_start, jnp.log(pi_C), shape=(n,))
  first_NxK = jnp.stack([(context_N // vocab_size ** (order - 1 - i)) % vocab_size for i in range(order)], axis=1)
  log_prob_CxS = jnp.log(chain['prob_CxS'])

  def body(context_N, key):
    j_N = jax.random.categorical(key, log_prob_CxS[context_N])
    token_N = chain['next_CxS'][context_N, j_N]
    return language.next_context(context_N, token_N, vocab_size, order), (token_N, -log_prob_CxS[context_N, j_N])

  _, (tokens_LxN, nll_LxN) = jax.lax.scan(body, context_N, jax.random.split(k_steps, length - order))
  return jnp.concatenate([first_NxK, tokens_LxN.T], axis=1), nll_LxN.T


@pytest.mark.parametrize('v,k,m,s', [(64, 2, 16, 4), (7, 1, 4, 3), (5, 3, 3, 2), (6, 2, 6, 6)])
def test_sample_text_draws_what_jax_random_categorical_draws(v, k, m, s):
  """The vectorized noise, the start drawn on reachable contexts only and the two-reduction argmax
  give the reference's tokens and -log p bit for bit, alone and vmapped over runs."""
  chain = language.make_chain(jax.random.PRNGKey(v), v, k, s, m, 0.5)
  pi, _ = language.stationary(chain, v, k)
  support = language.reachable_contexts(v, k, m)
  assert int(jnp.sum(pi > 0)) <= support <= v**k
  n, length = 16, 20
  keys = jax.random.split(jax.random.PRNGKey(3), 3)
  ref = jax.jit(jax.vmap(lambda r: _sample_text_reference(chain, pi, r, n, length, v, k)))(keys)
  for sup in (None, support):
    new = jax.jit(jax.vmap(lambda r, sup=sup: language.sample_text(chain, pi, r, n, length, v, k, sup)))(keys)
    jax.tree.map(np.testing.assert_array_equal, new, ref)
    one = jax.jit(lambda r, sup=sup: language.sample_text(chain, pi, r, n, length, v, k, sup))(keys[1])
    jax.tree.map(np.testing.assert_array_equal, one, jax.tree.map(lambda x: x[1], ref))


def test_inverse_cdf_is_numpy_searchsorted_and_never_draws_pi_zero():
  """The draws equal NumPy's first index whose running sum exceeds u * total (u: the same uniforms), land only on
  contexts with pi > 0, follow pi within 4 SE, and the start of sample_text('inverse_cdf') is these draws."""
  pi_C = jnp.array([0.0, 0.3, 0.0, 0.0, 0.6, 0.1, 0.0, 0.0], jnp.float32)
  n, key = 4096, jax.random.PRNGKey(5)
  got = np.asarray(jax.jit(lambda k: language.inverse_cdf(k, pi_C, n))(key))
  u = np.asarray(jax.random.uniform(key, (n,)), np.float32)
  cdf = np.cumsum(np.asarray(pi_C, np.float32), dtype=np.float32)
  np.testing.assert_array_equal(got, np.searchsorted(cdf, u * cdf[-1], side='right'))
  freq = np.bincount(got, minlength=8) / n
  assert set(np.flatnonzero(freq)) == {1, 4, 5}
  np.testing.assert_allclose(freq, pi_C, atol=4 * math.sqrt(0.25 / n))
  v, k = 6, 2
  chain = language.make_chain(jax.random.PRNGKey(1), v, k, 2, 3, 0.5)
  pi, _ = language.stationary(chain, v, k)
  tokens, _ = language.sample_text(chain, pi, key, 16, 10, v, k, start_draw='inverse_cdf')
  start = np.asarray(language.inverse_cdf(jax.random.split(key)[0], pi, 16))
  np.testing.assert_array_equal(np.asarray(tokens[:, 0]) * v + np.asarray(tokens[:, 1]), start)


def test_gumbel_at_is_jax_random_gumbel_bit_for_bit():
  shape = (64, 4096)
  for seed in range(3):
    key = jax.random.PRNGKey(seed)
    full = np.asarray(jax.jit(lambda k: jax.random.gumbel(k, shape))(key)).reshape(-1)
    idx = jnp.concatenate([jnp.arange(0, full.size, 7), jnp.array([1, full.size - 1])])
    at = jax.jit(lambda k, idx=idx: language.gumbel_at(k, shape, idx))(key)
    np.testing.assert_array_equal(at, full[np.asarray(idx)])


def test_first_argmax_is_jnp_argmax():
  nan, inf = float('nan'), float('inf')
  x = jnp.array([[1.0, 3.0, 3.0, 0.0], [nan, 1.0, nan, 2.0], [-inf] * 4, [0.0, 2.0, nan, 2.0], [-inf, -1.0, inf, inf]])
  np.testing.assert_array_equal(language.first_argmax(x), jnp.argmax(x, axis=-1))
  y = jax.random.normal(jax.random.PRNGKey(0), (3, 50, 7)).round(1)  # many ties
  np.testing.assert_array_equal(language.first_argmax(y), jnp.argmax(y, axis=-1))


def test_batch_layout_and_determinism(small):
  task, data, again, other = small
  sample = jax.jit(task.sample_batch)
  batch = sample(data, jax.random.PRNGKey(1))
  jax.tree.map(np.testing.assert_array_equal, batch, sample(data, jax.random.PRNGKey(1)))
  assert not np.array_equal(batch['inputs'], sample(data, jax.random.PRNGKey(2))['inputs'])
  np.testing.assert_array_equal(batch['inputs'][:, 1:], batch['targets'][:, :-1])  # shifted by one
  assert batch['inputs'].shape == (8, 12) and task.vocab_size == task.output_dim == 6
  np.testing.assert_array_equal(batch['weights'], np.tile([0.0] + [1.0] * 11, (8, 1)))  # t >= k - 1
  jax.tree.map(np.testing.assert_array_equal, data, again)
  assert not np.array_equal(data['chain']['next_CxS'], other['chain']['next_CxS'])


def test_evaluate_on_the_true_chain_and_on_uniform(small):
  task, data, _, _ = small
  v = 6
  log_prob = jnp.log(data['chain']['prob_CxS'])

  def oracle(inputs_NxT):  # the true next-token log-probabilities (only at scored positions)
    ctx_NxT = jnp.pad(inputs_NxT[:, :-1], ((0, 0), (1, 0))) * v + inputs_NxT
    out = jnp.full(ctx_NxT.shape + (v,), -1e9)
    idx = data['chain']['next_CxS'][ctx_NxT]
    return jax.vmap(jax.vmap(lambda o, i, line: o.at[i].set(line)))(out, idx, log_prob[ctx_NxT])

  m = jax.jit(lambda d: task.evaluate(oracle, d))(data)
  np.testing.assert_allclose(m['excess_bits'], 0.0, atol=1e-5)
  np.testing.assert_allclose(m['eval_bits'], m['eval_oracle_bits'], rtol=1e-5)
  assert m['accuracy'] <= 1.0
  uniform = jax.jit(lambda d: task.evaluate(lambda x: jnp.zeros(x.shape + (v,)), d))(data)
  np.testing.assert_allclose(uniform['eval_bits'], math.log2(v), rtol=1e-5)
  np.testing.assert_allclose(uniform['excess_bits'], math.log2(v) - m['eval_oracle_bits'], rtol=1e-5)
  for key in ('floor_bits', 'bigram_bits', 'unigram_bits', 'accuracy_ceiling'):
    np.testing.assert_allclose(m[key], data['stats'][key])


@pytest.mark.parametrize(
  'overrides,key',
  [
    (dict(num_candidates=7), 'task.num_candidates'),
    (dict(branching=5), 'task.branching'),
    (dict(vocab_size=64, markov_order=4), 'task.markov_order'),
    (dict(seq_len=1), 'task.seq_len'),
    (dict(concentration=0.0), 'task.concentration'),
    (dict(start_draw='uniform'), 'task.start_draw'),
  ],
)
def test_invalid_configs_name_the_key(overrides, key):
  with pytest.raises(config_lib.ConfigError, match=key):
    lang_config(**overrides)


def test_bare_ffn_rejected():
  c = lang_config()
  c.model.arch = 'ffn'
  with pytest.raises(config_lib.ConfigError, match='model.arch'):
    validation.validate(c)


@pytest.mark.parametrize('arg', ['default', 'ffn_stack', 'no_ffn', 'smoke'])
def test_shipped_config_validates(arg):
  spec = importlib.util.spec_from_file_location('configs_language', os.path.join(REPO, 'configs', 'language.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  validation.validate(module.get_config(arg))


@pytest.mark.slow  # compiles a train chunk in a fresh process: 69 s measured under heavy load
def test_smoke_run_through_the_cli(tmp_path):
  """The real entry point: a seconds-long run learns something below uniform and reports the floor."""
  workdir = tmp_path / 'run'
  proc = subprocess.run(
    [sys.executable, '-m', 'experiments.train', '--config=configs/language.py:smoke', f'--workdir={workdir}'],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  summary = json.loads((workdir / 'summary.json').read_text())
  assert summary['status'] == 'completed'
  assert summary['eval_bits'] < math.log2(8) - 0.5  # uniform over the 8 tokens is 3 bits
  np.testing.assert_allclose(summary['excess_bits'], summary['eval_bits'] - summary['eval_oracle_bits'], rtol=1e-5)
  assert summary['floor_bits'] < summary['bigram_bits'] < summary['unigram_bits']


def test_cli_bad_key_is_one_line(tmp_path):
  bad = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=configs/language.py:smoke',
      f'--workdir={tmp_path / "bad"}',
      '--config.task.branching=9',
    ],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert bad.returncode == 2 and 'Traceback' not in bad.stderr
  assert bad.stderr.strip().splitlines()[-1].startswith('error: task.branching=9')
