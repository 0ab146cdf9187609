"""Mixture-of-experts: routing, capacity, dispatch equivalence, losses, balancing, counts."""

import math
import os
import subprocess
import sys
import textwrap

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import models
from ffn_research import tasks
from ffn_research import train
from ffn_research import validation
from ffn_research.config import default_config
from ffn_research.models import activations
from ffn_research.models import dispatch as dispatch_lib
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import moe as moe_lib
from ffn_research.models import routers as routers_lib

T, D, F = 24, 6, 8  # tokens, d_model, expert width
DISPATCHES = tuple(dispatch_lib.DISPATCH)


def make_moe(num_experts=4, top_k=2, activation='relu', *, seed=0, randomize=True, **kw):
  """An MoE whose parameters (biases included) are all random, so every term is exercised."""
  kw.setdefault('load_balance_coef', 0.0)
  kw.setdefault('z_loss_coef', 0.0)
  m = moe_lib.MoE(D, F, activation, num_experts=num_experts, top_k=top_k, rngs=nnx.Rngs(seed), **kw)
  if randomize:
    leaves, treedef = jax.tree.flatten(nnx.state(m, nnx.Param))
    rng = np.random.default_rng(seed + 100)  # NumPy: no PRNG compile per shape
    new = [jnp.asarray(0.5 * rng.standard_normal(x.shape), x.dtype) for x in leaves]
    nnx.update(m, jax.tree.unflatten(treedef, new))
  return m


def inputs(seed=1, n=T):
  return jnp.asarray(np.random.default_rng(seed).standard_normal((n, D)), jnp.float32)


# Tiny shapes run eagerly: op-by-op dispatch is far cheaper than compiling each variant.


TRAIN_RNG = jax.random.key(0)  # training mode: the configured capacity (evaluation, rng None, is
# dropless with batch-wide capacity); no jitter or dropout is set


def apply(m, x):
  return m.apply(x, rng=TRAIN_RNG)


def grads(m, x):
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)
  r = jnp.asarray(np.random.default_rng(7).standard_normal((x.shape[0], m.d_out)), jnp.float32)

  def loss(params):
    y, aux = nnx.merge(graphdef, params, rest).apply(x, rng=TRAIN_RNG)
    return jnp.sum(y * r) + aux['load_balance_loss'] + aux['z_loss']

  return jax.grad(loss)(params)


# --------------------------------------------------------------------------- NumPy reference


def _softmax(z):
  z = np.exp(z - z.max(-1, keepdims=True))
  return z / z.sum(-1, keepdims=True)


def numpy_moe(m: moe_lib.MoE, x):
  """Independent reference: route each token, walk assignments in priority order, loop over experts."""
  x = np.asarray(x, np.float64)
  w = {k: np.asarray(v, np.float64) for k, v in m.expert_weights().items()}
  logits = x @ np.asarray(m.router_w[...], np.float64)
  e_num, k, (t_num, _) = m.num_experts, m.top_k, x.shape
  cap = math.ceil(m.capacity_factor * t_num * k / e_num) if m.capacity_factor > 0 else t_num
  cap = max(1, min(cap, t_num))
  assignments = []  # (priority key, token, expert, weight)
  if m.router == 'expert_choice':
    p = _softmax(logits)
    for e in range(e_num):
      for t in np.argsort(-p[:, e], kind='stable')[:cap]:
        assignments.append((0, t, e, p[t, e]))
  else:
    for t in range(t_num):
      if m.router == 'sigmoid':
        s = 1 / (1 + np.exp(-logits[t]))
        top = np.argsort(-s, kind='stable')[:k]
        wt = s[top] / s[top].sum()
      elif m.router == 'topk_softmax':
        top = np.argsort(-logits[t], kind='stable')[:k]
        wt = _softmax(logits[t, top])
      else:
        p = _softmax(logits[t])
        top = np.argsort(-p, kind='stable')[:k]
        wt = p[top] / (p[top].sum() if m.renormalize else 1.0)
      for j in range(k):
        key = {'token': (j, t), 'position': (t, j), 'score': (-wt[j], t * k + j)}[m.drop_priority]
        assignments.append((key, t, top[j], wt[j]))
    assignments.sort(key=lambda a: a[0])
  load = np.zeros(e_num, int)
  kept = []
  for _, t, e, wt in assignments:
    if load[e] < cap:
      load[e] += 1
      kept.append((t, e, wt))
  act = activations.get(m.activation)
  y = np.zeros((t_num, m.d_out))
  for e in range(e_num):
    mine = [(t, wt) for t, ee, wt in kept if ee == e]
    if not mine:
      continue
    toks = np.array([t for t, _ in mine])
    h = x[toks] @ w['w1'][e] + (w['b1'][e] if 'b1' in w else 0)
    if 'w_gate' in w:
      g = x[toks] @ w['w_gate'][e] + (w['b_gate'][e] if 'b_gate' in w else 0)
      h = np.asarray(act(jnp.asarray(g))) * h
    else:
      h = np.asarray(act(jnp.asarray(h)))
    out = h @ w['w2'][e] + (w['b2'][e] if 'b2' in w else 0)
    for (t, wt), o in zip(mine, out, strict=True):
      y[t] += wt * o
  return y, len(kept) / max(len(assignments), 1)


CASES = [  # (router, capacity_factor, drop_priority, activation, renormalize)
  ('topk_softmax', 0.0, 'token', 'relu', False),  # dropless
  ('softmax_topk', 0.5, 'score', 'swiglu', False),  # drops, score priority, gated
  ('sigmoid', 0.5, 'token', 'gelu', False),  # drops, token priority
  ('expert_choice', 1.0, 'token', 'relu', False),
]


@pytest.mark.parametrize('dispatch', DISPATCHES)
@pytest.mark.parametrize('router,cf,priority,activation,renormalize', CASES)
def test_matches_numpy_loop_over_experts(dispatch, router, cf, priority, activation, renormalize):
  m = make_moe(
    activation=activation,
    router=router,
    capacity_factor=cf,
    drop_priority=priority,
    renormalize=renormalize,
    dispatch=dispatch,
  )
  x = inputs()
  y, aux = apply(m, x)
  y_ref, kept_frac = numpy_moe(m, x)
  np.testing.assert_allclose(y, y_ref, rtol=2e-5, atol=2e-5)
  np.testing.assert_allclose(aux['dropped_fraction'], 1 - kept_frac, atol=1e-6)
  if cf == 0.5:
    assert kept_frac < 1  # the capacity case really drops


@pytest.mark.parametrize('cf,activation', [(0.0, 'relu'), (0.5, 'swiglu')])
def test_dispatches_agree_in_gradients(cf, activation):
  x = inputs()
  ref = grads(
    make_moe(activation=activation, capacity_factor=cf, dispatch='einsum', load_balance_coef=1e-2, z_loss_coef=1e-3), x
  )
  for dispatch in ('sort', 'ragged'):
    g = grads(
      make_moe(activation=activation, capacity_factor=cf, dispatch=dispatch, load_balance_coef=1e-2, z_loss_coef=1e-3),
      x,
    )
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), g, ref)


def test_sort_window_overflow_blocks_match_numpy_and_einsum(monkeypatch):
  """Assignments past an expert's window (capacity_factor > 1, or dropless) go through blocks;
  here several blocks per expert, and drops past capacity (the dropless case is in CASES)."""
  block = 3
  monkeypatch.setattr(dispatch_lib, 'SORT_BLOCK', block)
  kw = dict(activation='swiglu', capacity_factor=1.5, load_balance_coef=1e-2, z_loss_coef=1e-3)
  m, m_ref = make_moe(dispatch='sort', **kw), make_moe(dispatch='einsum', **kw)
  for model in (m, m_ref):  # skew: expert 0 is popular
    model.router_w[...] = model.router_w[...] + jnp.array([[1.0, 0, 0, 0]])
  x = inputs() + 0.5
  window, _ = m.layout(T)
  _, routing = m.route(x)
  sizes = routers_lib.plan_slots(routing, 4, m.capacity(T), 'token').group_sizes_E
  assert window == T * 2 // 4 and int(jnp.max(sizes)) >= window + 2 * block  # >= 2 blocks used
  assert int(jnp.max(sizes)) == m.capacity(T)  # and drops
  # jitted: eager op-by-op compiles of the block path would take longer here
  np.testing.assert_allclose(nnx.jit(apply)(m, x)[0], numpy_moe(m, x)[0], rtol=2e-5, atol=2e-5)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), nnx.jit(grads)(m, x), grads(m_ref, x)
  )


def test_sort_blocks_with_dropout(monkeypatch):
  """Dropout in the experts (the unfused block path): off without an RNG, on with one, and
  gradients through the blocks stay finite; the fused path's results are unchanged by the flag."""
  monkeypatch.setattr(dispatch_lib, 'SORT_BLOCK', 3)
  m = make_moe(dispatch='sort', capacity_factor=0.0, dropout_rate=0.5)
  x = inputs()
  np.testing.assert_array_equal(m.apply(x)[0], make_moe(dispatch='sort', capacity_factor=0.0).apply(x)[0])
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)

  def loss(params, rng):
    return jnp.sum(jnp.square(nnx.merge(graphdef, params, rest).apply(x, rng=rng)[0]))

  value, g = jax.jit(jax.value_and_grad(loss))(params, jax.random.PRNGKey(0))
  assert not np.isclose(float(value), float(jnp.sum(jnp.square(m.apply(x)[0]))))
  assert all(np.all(np.isfinite(a)) for a in jax.tree.leaves(g))


def test_block_matmul_skips_unused_blocks_and_gradient_is_the_transpose():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.standard_normal((4, 2, 3)), jnp.float32)
  w = jnp.asarray(rng.standard_normal((3, 3, 5)), jnp.float32)
  expert, used = jnp.array([0, 2, 2, 1]), 3  # block 3 unused
  g = jnp.asarray(rng.standard_normal((4, 2, 5)), jnp.float32)
  ref = lambda x, w: jnp.einsum('nbi,nim->nbm', x, w[expert]) * (jnp.arange(4) < used)[:, None, None]
  y, vjp = jax.vjp(lambda x, w: dispatch_lib.block_matmul(x, w, expert, used), x, w)
  y_ref, vjp_ref = jax.vjp(ref, x, w)
  np.testing.assert_allclose(y, y_ref, rtol=1e-6)
  assert np.all(np.asarray(y)[3] == 0)
  for a, b in zip(vjp(g), vjp_ref(g), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('activation,bias', [('swiglu', True), ('relu', False)])
def test_grouped_ffn_skips_unused_blocks_and_matches_autodiff(activation, bias):
  """The fused per-block expert FFN and its hand-written VJP against plain autodiff of the
  same function on all blocks, masked to the used ones."""
  rng = np.random.default_rng(0)
  f = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float32)
  spec = dispatch_lib.ExpertSpec(activations.get(activation), activations.is_gated(activation), bias, jnp.float32)
  h = 2 * 5 if spec.gated else 5
  x, w_in, w2, g = f(4, 2, 3), f(3, 3, h), f(3, 5, 3), f(4, 2, 3)
  b_in, b2 = (f(3, h), f(3, 3)) if bias else (None, None)
  expert, used = jnp.array([0, 2, 2, 1]), 3  # block 3 unused

  def ref(x, w_in, b_in, w2, b2):
    hid = jnp.einsum('nbk,nkm->nbm', x, w_in[expert]) + (0 if b_in is None else b_in[expert][:, None])
    y = jnp.einsum('nbk,nkm->nbm', dispatch_lib._hidden(hid, spec), w2[expert])
    y = y + (0 if b2 is None else b2[expert][:, None])
    return y * (jnp.arange(4) < used)[:, None, None]

  args = (x, w_in, b_in, w2, b2)
  y, vjp = jax.vjp(lambda *a: dispatch_lib.grouped_ffn(spec)(*a, expert, used), *args)
  y_ref, vjp_ref = jax.vjp(ref, *args)
  np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-6)
  assert np.all(np.asarray(y)[3] == 0)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), vjp(g), vjp_ref(g))


def test_gather_rows_gradient_is_the_transpose():
  src = jnp.asarray(np.random.default_rng(0).standard_normal((3, 2)), jnp.float32)
  idx = jnp.array([2, 3, 0, 2])  # row 3 = empty slot
  inv = jnp.array([[2, 4], [4, 4], [0, 3]])  # M = 4 = none
  f = lambda s: jnp.sum(dispatch_lib.gather_rows(s, idx, inv) * jnp.arange(8.0).reshape(4, 2))
  g_ref = jax.grad(
    lambda s: jnp.sum(jnp.take(s, idx, axis=0, mode='fill', fill_value=0) * jnp.arange(8.0).reshape(4, 2))
  )(src)
  np.testing.assert_array_equal(jax.grad(f)(src), g_ref)


# --------------------------------------------------------------------------- exact special cases


@pytest.mark.parametrize('dispatch,activation', [('sort', 'relu'), ('ragged', 'swiglu'), ('einsum', 'swiglu')])
def test_one_expert_top1_dropless_is_the_dense_ffn(dispatch, activation):
  m = make_moe(1, 1, activation, capacity_factor=0.0, dispatch=dispatch)
  dense = ffn_lib.FFN(D, F, activation, rngs=nnx.Rngs(0))
  for name, v in m.expert_weights().items():
    getattr(dense, name)[...] = v[0]
  x = inputs()
  np.testing.assert_allclose(apply(m, x)[0], dense(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('router,renormalize', [('topk_softmax', False), ('sigmoid', False), ('softmax_topk', True)])
def test_all_identical_experts_equal_one_expert(router, renormalize):
  m = make_moe(4, 4, 'geglu', router=router, renormalize=renormalize, capacity_factor=0.0)
  for name, v in m.expert_weights().items():
    getattr(m, name)[...] = jnp.broadcast_to(v[:1], v.shape)
  one = make_moe(1, 1, 'geglu', capacity_factor=0.0)
  for name, v in m.expert_weights().items():
    getattr(one, name)[...] = v[:1]
  x = inputs()
  np.testing.assert_allclose(apply(m, x)[0], apply(one, x)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('router,renormalize', [('topk_softmax', False), ('sigmoid', False), ('softmax_topk', True)])
def test_normalised_combine_weights_sum_to_one(router, renormalize):
  m = make_moe(router=router, renormalize=renormalize)
  _, routing = m.route(inputs())
  np.testing.assert_allclose(jnp.sum(routing.weight_TxJ, axis=-1), 1.0, rtol=1e-6)


def test_unnormalised_softmax_topk_weights_are_the_probabilities():
  m = make_moe(router='softmax_topk')
  _, routing = m.route(inputs())
  probs = jnp.take_along_axis(routing.probs_TxE, routing.expert_TxJ, axis=-1)
  np.testing.assert_array_equal(routing.weight_TxJ, probs)
  assert np.all(np.sum(routing.weight_TxJ, -1) < 1)


def test_topk_softmax_equals_renormalised_softmax_topk():
  x = inputs()
  a = apply(make_moe(router='topk_softmax', capacity_factor=0.0), x)[0]
  b = apply(make_moe(router='softmax_topk', renormalize=True, capacity_factor=0.0), x)[0]
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def check_layout(p, layout, num_experts, cap):
  """Slot maps invert each other, windows hold positions < W, each grouped block has one expert."""
  window, block = layout
  slots, tokens = np.asarray(p.slot_TxJ), np.asarray(p.slot_token_S)
  kept, experts = np.asarray(p.kept_TxJ), np.asarray(p.expert_S)
  num_windowed = num_experts * window
  assert len(tokens) == num_windowed + routers_lib.overflow_slots(slots.size, num_experts, cap, layout)
  assert len(set(slots[kept].tolist())) == kept.sum()  # distinct slots
  assert np.all(slots[~kept] == len(tokens))
  for t, j in zip(*np.nonzero(kept), strict=True):
    assert tokens[slots[t, j]] == t and np.asarray(p.slot_assign_S)[slots[t, j]] == t * kept.shape[1] + j
  np.testing.assert_array_equal(experts[:num_windowed], np.repeat(np.arange(num_experts), window))
  grouped = experts[num_windowed:].reshape(-1, block)
  assert np.all(grouped == grouped[:, :1])
  assert np.all(np.diff(experts[num_windowed:]) >= 0)  # groups in expert order
  sizes = np.asarray(p.group_sizes_E)
  used = sum(-(-max(n - window, 0) // block) for n in sizes) * block
  assert np.all(tokens[num_windowed + used :] == len(kept))  # past the last group: empty


LAYOUTS = [None, routers_lib.Layout(0, 1), routers_lib.Layout(5, 4)]  # buffers, packed, windows + blocks


@pytest.mark.parametrize('layout', LAYOUTS)
def test_dropless_sends_every_token_to_exactly_k_distinct_experts(layout):
  e, k = 4, 3
  m = make_moe(e, k, capacity_factor=0.0)
  _, routing = m.route(inputs())
  cap = routers_lib.capacity(T, e, k, 0.0)
  p = routers_lib.plan_slots(routing, e, cap, 'token', layout)
  assert bool(jnp.all(p.kept_TxJ))
  experts = np.asarray(routing.expert_TxJ)
  assert all(len(set(row)) == k for row in experts)
  tokens = np.asarray(p.slot_token_S)
  assert sorted(tokens[tokens < T].tolist()) == sorted(list(range(T)) * k)
  check_layout(p, layout or routers_lib.Layout(cap, 1), e, cap)


def test_grouped_slots_hold_the_worst_case():
  e, k = 4, 2
  m = make_moe(e, k, capacity_factor=0.0)
  m.router_w[...] = jnp.zeros_like(m.router_w[...]).at[:, :2].set(100.0)  # all to experts 0, 1
  x = jnp.abs(inputs())
  _, routing = m.route(x)
  assert set(np.asarray(routing.expert_TxJ).ravel().tolist()) == {0, 1}
  plan_slots = jax.jit(routers_lib.plan_slots, static_argnums=(1, 2, 3, 4))  # one compile per layout
  for layout in (routers_lib.Layout(12, 5), routers_lib.Layout(0, 7)):
    p = plan_slots(routing, e, T, 'token', layout)
    assert bool(jnp.all(p.kept_TxJ))
    check_layout(p, layout, e, T)


@pytest.mark.parametrize('priority', routers_lib.DROP_PRIORITIES)
@pytest.mark.parametrize('layout', LAYOUTS)
def test_no_expert_exceeds_capacity_and_priority_order_holds(priority, layout):
  e, k, cf = 4, 2, 0.5
  m = make_moe(e, k, drop_priority=priority)
  m.router_w[...] = m.router_w[...] + jnp.array([[3.0, 0, 0, 0]])  # skew: expert 0 is popular
  _, routing = m.route(inputs())
  cap = routers_lib.capacity(T, e, k, cf)
  p = routers_lib.plan_slots(routing, e, cap, priority, layout)
  check_layout(p, layout or routers_lib.Layout(cap, 1), e, cap)
  kept = np.asarray(p.kept_TxJ)
  experts = np.asarray(routing.expert_TxJ)
  per_expert = np.bincount(experts[kept], minlength=e)
  assert per_expert.max() == cap and np.all(per_expert <= cap)
  np.testing.assert_array_equal(p.group_sizes_E, per_expert)
  assert not kept.all()
  weights = np.asarray(routing.weight_TxJ)
  for ex in range(e):  # every kept assignment outranks every dropped one of the same expert
    mine_kept, mine_drop = kept & (experts == ex), ~kept & (experts == ex)
    if not mine_drop.any():
      continue
    if priority == 'score':
      assert weights[mine_kept].min() >= weights[mine_drop].max()
    else:
      major = (lambda t, j: j * T + t) if priority == 'token' else (lambda t, j: t * k + j)
      rank = lambda mask, major=major: [major(t, j) for t, j in zip(*np.nonzero(mask), strict=True)]
      assert max(rank(mine_kept)) < min(rank(mine_drop))


@pytest.mark.parametrize('dispatch', DISPATCHES)
def test_fully_dropped_tokens_output_exactly_zero(dispatch):
  m = make_moe(4, 1, capacity_factor=0.25, dispatch=dispatch)  # C = 2 of 24 tokens per expert
  x = inputs()
  y, _ = apply(m, x)
  _, routing = m.route(x)
  p = routers_lib.plan_slots(routing, 4, m.capacity(T), 'token')
  dropped = ~np.asarray(p.kept_TxJ)[:, 0]
  assert dropped.sum() >= T - 8
  assert np.all(np.asarray(y)[dropped] == 0.0)
  assert np.all(np.abs(np.asarray(y)[~dropped]).sum(-1) > 0)


def test_shared_experts_add_a_dense_ffn():
  m = make_moe(4, 2, 'swiglu', num_shared_experts=2, capacity_factor=0.0)
  routed = make_moe(4, 2, 'swiglu', capacity_factor=0.0, randomize=False)
  for name, v in {**m.expert_weights(), 'router_w': m.router_w[...]}.items():
    getattr(routed, name)[...] = v
  x = inputs()
  np.testing.assert_allclose(apply(m, x)[0], apply(routed, x)[0] + m.shared(x), rtol=1e-5, atol=1e-5)
  assert m.shared.d_ff == 2 * F


def test_leading_dimensions_and_d_out():
  m = moe_lib.MoE(D, F, 'relu', num_experts=4, top_k=2, d_out=3, rngs=nnx.Rngs(0))
  x = inputs().reshape(4, 6, D)
  y, _ = m.apply(x)
  assert y.shape == (4, 6, 3)
  np.testing.assert_allclose(y.reshape(-1, 3), m.apply(x.reshape(-1, D))[0], rtol=1e-6)


SEQUENCE_CASES = [  # (router, top_k, capacity_factor): every one drops at these shapes
  ('topk_softmax', 2, 0.5),
  ('sigmoid', 1, 0.5),
  ('expert_choice', 1, 1.0),
]


@pytest.mark.parametrize('dispatch', DISPATCHES)
@pytest.mark.parametrize('router,k,cf', SEQUENCE_CASES)
def test_sequence_capacity_matches_numpy_run_per_sequence(dispatch, router, k, cf):
  """capacity_scope='sequence' on (B, T, D) is exactly the batch-wide MoE run on each sequence alone."""
  m = make_moe(
    4, k, router=router, capacity_factor=cf, drop_priority='position', capacity_scope='sequence', dispatch=dispatch
  )
  x_BxTxD = inputs(n=3 * 8).reshape(3, 8, D)
  y, aux = apply(m, x_BxTxD)
  refs = [numpy_moe(m, x_BxTxD[b]) for b in range(3)]
  np.testing.assert_allclose(y, np.stack([r[0] for r in refs]), rtol=2e-5, atol=2e-5)
  if router != 'expert_choice':  # (expert choice: every expert takes exactly its C of each sequence)
    assert min(r[1] for r in refs) < 1  # capacity binds in some sequence
    np.testing.assert_allclose(aux['dropped_fraction'], 1 - np.mean([r[1] for r in refs]), atol=1e-6)


def test_evaluation_with_batch_capacity_is_dropless_and_chunk_independent():
  m = make_moe(4, 2, capacity_factor=0.5)
  dropless = make_moe(4, 2, capacity_factor=0.0)
  x = inputs()
  y_eval, aux = m.apply(x)
  assert float(apply(m, x)[1]['dropped_fraction']) > 0  # training drops
  assert float(aux['dropped_fraction']) == 0.0
  np.testing.assert_array_equal(y_eval, dropless.apply(x)[0])
  np.testing.assert_allclose(m.apply(x[:7])[0], y_eval[:7], rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- router details


def test_router_logits_are_float32_under_bfloat16():
  m = make_moe(dtype='bfloat16')
  logits, routing = m.route(inputs().astype(jnp.bfloat16))
  assert logits.dtype == jnp.float32 and routing.weight_TxJ.dtype == jnp.float32
  y, _ = m.apply(inputs())
  assert y.dtype == jnp.bfloat16


def test_jitter_only_in_training():
  m = make_moe(jitter=0.2)
  x, rng = inputs(), jax.random.PRNGKey(3)
  np.testing.assert_array_equal(m.route(x)[0], make_moe(jitter=0.0).route(x)[0])
  assert not np.allclose(m.route(x, rng)[0], m.route(x)[0])
  np.testing.assert_array_equal(make_moe(jitter=0.0).route(x, rng)[0], m.route(x)[0])


def test_expert_choice_gives_each_expert_exactly_capacity_tokens():
  m = make_moe(4, 2, router='expert_choice', capacity_factor=1.0)
  _, routing = m.route(inputs())
  np.testing.assert_array_equal(jnp.sum(routing.valid_TxJ, axis=0), [m.capacity(T)] * 4)


@pytest.mark.parametrize('router', [r for r in routers_lib.ROUTERS if r not in routers_lib.INPUT_ROUTERS])
def test_router_receives_gradients(router):
  m = make_moe(router=router)  # aux coefficients 0: the gradient comes through the combine weights
  g = grads(m, inputs())['router_w'][...]
  assert np.all(np.isfinite(g)) and np.abs(g).min() > 0


def numpy_input_hash(x):
  """Reference of routers_lib.input_hash in plain Python integers: FNV-1a over the float32 words, then fmix32."""
  out = []
  for row in np.asarray(x, np.float32):
    h = 2166136261
    for word in row.view(np.uint32):
      h = ((h ^ int(word)) * 16777619) % 2**32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) % 2**32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) % 2**32
    out.append(h ^ (h >> 16))
  return np.array(out, np.uint64)


def test_input_hash_matches_python_reference():
  x = inputs(n=40).at[0].set(0.0).at[1, 2].set(-0.0)
  np.testing.assert_array_equal(np.asarray(routers_lib.input_hash(x)).astype(np.uint64), numpy_input_hash(x))


def test_hash_routing_is_deterministic_fixed_and_balanced():
  e, n = 8, 8000
  x = jnp.asarray(np.random.default_rng(3).standard_normal((n, D)), jnp.float32)
  m = make_moe(e, 2, router='hash', capacity_factor=0.0)
  _, r = m.route(x)
  first = numpy_input_hash(x) % e
  np.testing.assert_array_equal(r.expert_TxJ, np.stack([first, (first + 1) % e], 1))  # slot j: (h + j) mod E
  np.testing.assert_array_equal(r.weight_TxJ, 0.5)
  m.router_w[...] = 10.0 * m.router_w[...]  # the router weights play no part
  np.testing.assert_array_equal(m.route(x)[1].expert_TxJ, r.expert_TxJ)
  np.testing.assert_array_equal(m.route(x[::-1])[1].expert_TxJ, r.expert_TxJ[::-1])  # per input, no batch effect
  share = np.bincount(first, minlength=e) / n  # 1/8 = 0.125; binomial sd 0.0037
  assert np.all(np.abs(share - 1 / e) < 0.02), share
  grouped = m.route(x[: T * 4], groups=4)[1].expert_TxJ  # per-group routing (sequence capacity) agrees
  np.testing.assert_array_equal(grouped, r.expert_TxJ[: T * 4])


def numpy_prefix_hash(tokens_BxT):
  """Reference of routers_lib.prefix_hash: FNV-1a over the ids at positions 0..t, fmix32 at each t."""
  out = np.zeros(tokens_BxT.shape, np.uint64)
  for b, row in enumerate(tokens_BxT):
    h = 2166136261
    for t, token in enumerate(row):
      h = ((h ^ int(token)) * 16777619) % 2**32
      f = h ^ (h >> 16)
      f = (f * 0x85EBCA6B) % 2**32
      f ^= f >> 13
      f = (f * 0xC2B2AE35) % 2**32
      out[b, t] = f ^ (f >> 16)
  return out


def recorded(route, out):
  """`route`, appending each call's expert_TxJ to `out`."""

  def wrapped(*args):
    logits_TxE, routing = route(*args)
    out.append(np.asarray(routing.expert_TxJ))
    return logits_TxE, routing

  return wrapped


def token_hash_model(seed=0, num_layers=2):
  c = default_config()
  m, e = c.model, c.model.moe
  m.arch, m.num_layers, m.d_model, m.d_ff, m.tie_embeddings = 'ffn_stack', num_layers, 8, 16, True
  e.num_experts, e.top_k, e.router, e.capacity_factor = 4, 1, 'token_hash', 0.0
  c.task.name, c.task.num_facts, c.task.num_relations, c.task.num_objects = 'memorization', 48, 4, 8
  validation.validate(c)
  task = tasks.build_task(c)
  return models.build_model(c, task, nnx.Rngs(params=jax.random.PRNGKey(seed))), task


def test_token_hash_routes_each_position_by_the_ids_it_sees():
  tokens_BxT = np.random.default_rng(0).integers(0, 60, (7, 2))
  h_BxT = numpy_prefix_hash(tokens_BxT)
  np.testing.assert_array_equal(np.asarray(routers_lib.prefix_hash(jnp.asarray(tokens_BxT))), h_BxT)
  seen = []
  for seed in (0, 1):  # other embeddings, norms and router weights: the same route
    model, _ = token_hash_model(seed)
    routes = []
    for block in model.blocks:  # every MoE layer gets the model's hash of the tokens
      block.ffn.route = recorded(block.ffn.route, routes)
    model.apply(jnp.asarray(tokens_BxT))
    assert len(routes) == 2
    seen.append(routes)
    for r in routes:
      np.testing.assert_array_equal(np.asarray(r)[:, 0], (h_BxT % 4).reshape(-1))
  np.testing.assert_array_equal(seen[0], seen[1])
  with pytest.raises(ValueError, match='route_hash'):  # an MoE layer called without the token ids
    token_hash_model()[0].blocks[0].ffn.apply(jnp.ones((2, 8)))


def test_token_hash_router_weights_get_no_task_gradient():
  model, task = token_hash_model(num_layers=1)
  data = task.init_data(jax.random.PRNGKey(0))

  def loss(m):  # the task's loss alone (the z-loss, added in training, does reach the router weights)
    logits, _ = m.apply(data['inputs'])
    return task.loss(logits, data)[0]

  g = nnx.grad(loss)(model)
  assert np.all(np.asarray(g.blocks[0].ffn.router_w[...]) == 0.0)
  assert np.abs(np.asarray(g.blocks[0].ffn.w1[...])).max() > 0


def test_stop_combine_grad_same_forward_no_router_gradient_through_the_weight():
  x = inputs()
  kw = dict(router='softmax_topk', capacity_factor=0.0, dispatch='einsum')  # einsum: the cheapest to compile
  learned, stopped = make_moe(4, 1, **kw), make_moe(4, 1, stop_combine_grad=True, **kw)
  np.testing.assert_array_equal(apply(stopped, x)[0], apply(learned, x)[0])  # same weights, same output
  g_learned, g_stopped = grads(learned, x), grads(stopped, x)
  assert np.abs(g_learned['router_w'][...]).max() > 1e-3
  np.testing.assert_array_equal(g_stopped['router_w'][...], 0.0)  # aux coefficients 0
  np.testing.assert_allclose(g_stopped['w1'][...], g_learned['w1'][...], rtol=1e-6)  # experts train alike
  # With the aux losses on, the stopped router's gradient is exactly the aux losses' own.
  kw.update(load_balance_coef=0.1, z_loss_coef=0.01)
  stopped, aux_only = make_moe(4, 1, stop_combine_grad=True, **kw), make_moe(4, 1, **kw)
  graphdef, params, rest = nnx.split(aux_only, nnx.Param, ...)

  def aux_loss(params):
    _, aux = nnx.merge(graphdef, params, rest).apply(x, rng=TRAIN_RNG)
    return aux['load_balance_loss'] + aux['z_loss']

  np.testing.assert_allclose(
    grads(stopped, x)['router_w'][...], jax.grad(aux_loss)(params)['router_w'][...], rtol=1e-5, atol=1e-8
  )


def test_frozen_router_is_not_a_param():
  frozen = make_moe(freeze_router=True)
  assert 'router_w' not in nnx.state(frozen, nnx.Param) and 'router_w' in nnx.state(frozen)
  assert frozen.num_params == make_moe().num_params  # the frozen weights are still weights of the model
  np.testing.assert_array_equal(frozen.router_w[...], make_moe(randomize=False).router_w[...])  # same init


@pytest.mark.slow  # compiles a train chunk
def test_frozen_router_weights_do_not_move_in_training():
  """Train steps with AdamW (weight decay on) move every nnx.Param but not the frozen router."""
  config = moe_config(freeze_router=True, router='softmax_topk', top_k=1)
  config.train.optimizer, config.train.weight_decay = 'adamw', 0.1
  validation.validate(config)
  exp = train.Experiment(config)
  state = exp.init(0)
  after, _ = jax.jit(lambda s: exp.train_chunk(s, 3))(state)
  np.testing.assert_array_equal(after['params']['router_w'][...], state['params']['router_w'][...])
  assert not np.allclose(after['params']['w1'][...], state['params']['w1'][...])


# --------------------------------------------------------------------------- losses and balancing


@pytest.mark.parametrize('k', [1, 2, 4])
def test_load_balance_loss_is_alpha_under_uniform_routing(k):
  e = 8
  expert = (jnp.arange(T)[:, None] + jnp.arange(k)[None, :]) % e  # every expert gets T k / E
  probs = jnp.full((T, e), 1.0 / e)
  routing = routers_lib.Routing(expert, jnp.ones((T, k)) / k, jnp.ones((T, k), bool), probs)
  load = routers_lib.load_fraction(routing, e)
  np.testing.assert_allclose(load, 1.0 / e, rtol=1e-6)  # f counts assignments / (T k)
  np.testing.assert_allclose(routers_lib.load_balance(load, probs), 1.0, rtol=1e-6)


def test_load_fraction_counts_each_assignment_divided_by_k():
  m = make_moe(4, 3)
  _, routing = m.route(inputs())
  counts = np.bincount(np.asarray(routing.expert_TxJ).ravel(), minlength=4)
  np.testing.assert_allclose(routers_lib.load_fraction(routing, 4), counts / (T * 3), rtol=1e-6)


def test_aux_losses_scaled_and_z_loss_formula():
  m = make_moe(load_balance_coef=0.01, z_loss_coef=1e-3)
  x = inputs()
  logits, _ = m.route(x)
  _, aux = apply(m, x)
  z = np.mean(np.log(np.sum(np.exp(np.asarray(logits, np.float64)), -1)) ** 2)
  np.testing.assert_allclose(aux['router_z'], z, rtol=1e-5)
  np.testing.assert_allclose(aux['z_loss'], 1e-3 * z, rtol=1e-5)
  np.testing.assert_allclose(aux['load_balance_loss'], 0.01 * aux['load_balance'], rtol=1e-6)
  np.testing.assert_allclose(aux['max_load_ratio'], 4 * np.max(aux['load']), rtol=1e-6)
  np.testing.assert_allclose(np.sum(aux['load']), 1.0, rtol=1e-6)


def test_bias_update_moves_load_toward_uniform():
  m = make_moe(4, 1, bias_update_rate=0.05, capacity_factor=0.0)
  m.router_w[...] = m.router_w[...] + jnp.array([[1.0, 0, 0, 0]])  # skewed onto expert 0
  x = inputs(n=96) + 0.3  # so logit 0 is about 1.8 higher on average
  step = jax.jit(lambda state: _apply_and_update(nnx.split(m)[0], state, x))
  state = nnx.state(m)
  ratios = []
  for _ in range(60):
    state, ratio = step(state)
    ratios.append(float(ratio))
  assert ratios[0] > 2.0 and max(ratios[-10:]) < 1.2, ratios
  nnx.update(m, state)
  assert m.routing_bias[...][0] < 0  # the overloaded expert was pushed down


def _apply_and_update(graphdef, state, x):
  model = nnx.merge(graphdef, state)
  _, aux = model.apply(x)
  model.after_step(aux)
  return nnx.state(model), aux['max_load_ratio']


def moe_config(**moe_kw):
  config = config_lib.default_config()
  config.task.name = 'teacher_student'
  config.model.d_model, config.model.d_ff, config.task.teacher_d_ff = D, 16, 8
  config.task.num_train, config.task.num_eval = 64, 64
  config.train.batch_size = 32
  config.model.moe.num_experts, config.model.moe.top_k = 4, 2
  for k, v in moe_kw.items():
    config.model.moe[k] = v
  return config


@pytest.mark.slow  # compiles a full vmapped train chunk
def test_bias_update_inside_jitted_train_chunk_vmapped_over_seeds():
  config = moe_config(bias_update_rate=0.01)
  validation.validate(config)
  exp = train.Experiment(config)
  states = jax.vmap(exp.init)(jnp.arange(2))
  states, metrics = jax.jit(jax.vmap(lambda s: exp.train_chunk(s, 5)))(states)
  bias = states['params']['routing_bias'][...]
  assert bias.shape == (2, 4)
  assert np.abs(bias).max() > 0 and not np.allclose(bias[0], bias[1])
  # each step moves each bias by exactly +-rate (or 0), so after 5 steps |b| <= 5 rate on a grid
  np.testing.assert_allclose(np.round(bias / 0.01), bias / 0.01, atol=1e-3)
  assert metrics['aux']['load'].shape == (2, 4)
  for key in ('load_balance_loss', 'z_loss', 'dropped_fraction', 'router_entropy', 'max_load_ratio'):
    assert np.all(np.isfinite(metrics['aux'][key]))
  # the aux losses are in the objective
  np.testing.assert_allclose(
    metrics['total_loss'] - metrics['loss'],
    metrics['aux']['load_balance_loss'] + metrics['aux']['z_loss'],
    rtol=1e-4,
    atol=1e-7,
  )


# --------------------------------------------------------------------------- config, counts


@pytest.mark.parametrize(
  'activation,use_bias,granularity,shared,top_k',
  [('relu', True, 1, 0, 2), ('swiglu', False, 2, 1, 1), ('geglu', True, 4, 2, 2)],
)
def test_param_counts_match_the_tree(activation, use_bias, granularity, shared, top_k):
  config = moe_config(granularity=granularity, num_shared_experts=shared, top_k=top_k)
  config.model.activation, config.model.use_bias = activation, use_bias
  validation.validate(config)
  m = models.build_ffn(config.model, D, 3, nnx.Rngs(0))
  counts = models.ffn_counts(config.model, D, 3)
  assert counts['num_params'] == ffn_lib.param_tree_size(m) == m.num_params
  e, k = 4 * granularity, top_k * granularity
  assert m.num_experts == e and m.top_k == k and m.d_expert == 16 // granularity
  one_expert = ffn_lib.param_tree_size(m) - ffn_lib.param_tree_size(m.shared) if shared else ffn_lib.param_tree_size(m)
  one_expert = (one_expert - D * e) // e
  shared_size = ffn_lib.param_tree_size(m.shared) if shared else 0
  assert counts['num_active_params'] == D * e + k * one_expert + shared_size
  assert counts['d_ff_active'] == (k + shared) * m.d_expert
  per_expert = ffn_lib.ffn_flops_per_token(D, m.d_expert, activation, 3)
  shared_flops = ffn_lib.ffn_flops_per_token(D, shared * m.d_expert, activation, 3) if shared else 0
  assert counts['flops_per_token'] == 2 * D * e + k * per_expert + shared_flops


def test_dense_when_num_experts_is_zero():
  config = moe_config(num_experts=0)
  assert isinstance(models.build_ffn(config.model, D, None, nnx.Rngs(0)), ffn_lib.FFN)


def test_auto_dispatch_is_ragged_on_tpu_only(monkeypatch):
  for backend, want in (('cpu', 'sort'), ('gpu', 'sort'), ('tpu', 'ragged')):
    monkeypatch.setattr(jax, 'default_backend', lambda b=backend: b)
    assert dispatch_lib.resolve_dispatch('auto') == want
  assert dispatch_lib.resolve_dispatch('einsum') == 'einsum'


@pytest.mark.parametrize(
  'overrides,key',
  [
    ({'top_k': 5}, 'model.moe.top_k'),
    ({'router': 'nope'}, 'model.moe.router'),
    ({'dispatch': 'loop'}, 'model.moe.dispatch'),
    ({'granularity': 3}, 'model.moe.granularity'),
    ({'router': 'expert_choice', 'capacity_factor': 0.0}, 'model.moe.capacity_factor'),
    ({'jitter': 1.5}, 'model.moe.jitter'),
    ({'load_balance_coef': -1.0}, 'model.moe.load_balance_coef'),
    ({'drop_priority': 'random'}, 'model.moe.drop_priority'),
    ({'capacity_scope': 'sequence'}, 'model.moe.capacity_scope'),  # the bare FFN has no sequences
    ({'capacity_scope': 'rows'}, 'model.moe.capacity_scope'),
    ({'router': 'hash', 'bias_update_rate': 1e-3}, 'model.moe.bias_update_rate'),
    ({'router': 'token_hash'}, 'model.moe.router'),  # the bare FFN has no token ids
  ],
)
def test_config_errors_name_the_key(overrides, key):
  with pytest.raises(config_lib.ConfigError, match=key.replace('.', r'\.')) as e:
    validation.validate(moe_config(**overrides))
  assert '\n' not in str(e.value)


# --------------------------------------------------------------------------- expert parallelism

_EP_SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    from flax import nnx
    from ffn_research.models import moe
    from ffn_research.models import dispatch as dispatch_lib
    from ffn_research.models import routers as routers_lib
    assert jax.device_count() == 4
    x = jax.random.normal(jax.random.PRNGKey(1), (32, 6))
    r = jax.random.normal(jax.random.PRNGKey(2), (32, 6))
    for dispatch, axis_type in (('sort', 'Explicit'), ('einsum', 'Auto')):
      mesh = jax.make_mesh((4,), ('expert',), axis_types=(getattr(jax.sharding.AxisType, axis_type),))
      out = []
      for m in (None, mesh):
        model = moe.MoE(6, 8, 'swiglu', num_experts=8, top_k=2, capacity_factor=1.0,
                        dispatch=dispatch, mesh=m, rngs=nnx.Rngs(0))
        g, p, rest = nnx.split(model, nnx.Param, ...)
        if m is not None:  # expert weights live on their devices
          p = jax.tree.map(lambda a: jax.device_put(a, jax.sharding.NamedSharding(
              mesh, jax.sharding.PartitionSpec('expert' if a.shape[0] == 8 and a.ndim > 1 else None))), p)
        loss = lambda p: jnp.sum(nnx.merge(g, p, rest).apply(x)[0] * r)
        y = jax.jit(lambda p: nnx.merge(g, p, rest).apply(x)[0])(p)
        out.append((y, jax.jit(jax.grad(loss))(p)))
      np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5, atol=1e-6)
      jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), out[0][1], out[1][1])
      w1 = out[1][1]['w1'][...]
      assert len(w1.sharding.device_set) == 4, w1.sharding
    print('EP_OK')
""")


@pytest.mark.slow  # a fresh process with 4 host devices
def test_expert_parallel_matches_single_device():
  env = {**os.environ, 'XLA_FLAGS': '--xla_force_host_platform_device_count=4', 'JAX_PLATFORMS': 'cpu'}
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = subprocess.run(
    [sys.executable, '-c', _EP_SCRIPT], env=env, cwd=root, capture_output=True, text=True, timeout=300
  )
  assert 'EP_OK' in out.stdout, out.stderr[-3000:]


def test_a_bfloat16_router_routes_on_rounded_logits_and_probabilities():
  """model.moe.router_dtype='bfloat16': logits, softmax and top-k in bf16 (returned in float32, bf16-exact); the
  float32 router is the default and untouched by the key."""
  x = inputs()
  f32 = make_moe(router='softmax_topk')
  b16 = make_moe(router='softmax_topk', router_dtype='bfloat16')
  logits32, r32 = f32.route(x)
  logits16, r16 = b16.route(x)
  assert logits16.dtype == r16.probs_TxE.dtype == r16.weight_TxJ.dtype == jnp.float32
  want = (x.astype(jnp.bfloat16) @ b16.router_w[...].astype(jnp.bfloat16)).astype(jnp.float32)
  np.testing.assert_array_equal(np.asarray(logits16), np.asarray(want))
  for a in (logits16, r16.probs_TxE, r16.weight_TxJ):  # every value representable in bf16
    np.testing.assert_array_equal(np.asarray(a), np.asarray(a.astype(jnp.bfloat16).astype(jnp.float32)))
  assert not np.array_equal(np.asarray(r16.probs_TxE), np.asarray(r32.probs_TxE))  # rounding changed them
  np.testing.assert_allclose(np.asarray(r16.probs_TxE), np.asarray(r32.probs_TxE), atol=2e-2)
  y, aux = b16.apply(x, rng=TRAIN_RNG)
  assert y.dtype == jnp.float32 and np.isfinite(np.asarray(aux['router_z']))


def test_router_dtype_is_validated_in_one_line():
  c = config_lib.default_config()
  c.model.moe.num_experts, c.model.moe.top_k = 4, 1
  c.model.moe.router_dtype = 'float16'
  with pytest.raises(config_lib.ConfigError, match="model.moe.router_dtype='float16'"):
    validation.validate(c)
  c.model.moe.router_dtype, c.model.moe.router = 'bfloat16', 'soft'
  with pytest.raises(config_lib.ConfigError, match='token-choice routers only'):
    validation.validate(c)
