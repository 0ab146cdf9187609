"""Mixture-of-Experts FFN: routers, capacity, dispatch implementations, balancing.

An `MoE` is a drop-in FFN (`ffn.Layer`): `num_experts` experts, each an FFN of
the zoo (plain or gated, same activation), of which each token uses `top_k`.

Pipeline of `MoE.apply` (T tokens, E experts, J = slots per token):

  router logits (float32) -> ROUTERS[name] -> Routing (expert_TxJ, weight_TxJ, valid_TxJ, probs_TxE)
  -> plan_slots(): one stable sort by expert, capacity C, drop order, MoE.layout() -> Plan (slot maps)
  -> DISPATCH[name](x, plan, experts) -> y_TxO  (+ shared experts)

Conventions, documented once here:

* Token choice gives J = k slots per token; expert choice (Zhou et al. 2022)
  gives J = E (slot j is "expert j took this token").
* Capacity C = ceil(capacity_factor * T * k / E) (at most T) per group of T tokens;
  capacity_factor <= 0 is dropless. A group is the whole batch (capacity_scope
  'batch') or one sequence ('sequence', GShard's groups): with 'sequence' a token
  competes for capacity only with tokens of its own sequence. Over capacity,
  assignments are dropped in priority order: 'position': all k choices of token t
  before any of token t + 1; 'token': all first choices in token order, then all
  second choices, ... (GShard); 'score': by combine weight, highest first
  (Batch Prioritized Routing, Riquelme et al. 2021). A dropped assignment
  contributes exactly zero (the residual stream carries the token).
* Causality (docs/moe.md#causality): in a causal sequence model a token's output
  may depend only on tokens at positions <= its own in its own sequence. Token
  choice with capacity_scope 'sequence' and priority 'position' is causal (whether
  token t's choice is admitted depends only on the routing of tokens 0..t); dropless
  routing is causal whatever the priority; batch-wide capacity, 'token' priority
  with k > 1, 'score' priority and expert choice are not. Sequence models default
  to the causal setting and refuse the others unless model.moe.allow_noncausal.
* Evaluation (rng None) with batch-wide capacity is dropless, so held-out figures
  do not depend on how the evaluation set is chunked or padded; per-sequence
  capacity is chunk-independent as it stands, so it evaluates as it trains.
* Load fraction f_i = (assignments routed to expert i, before drops) / (all
  assignments) = count_i / (T k): sums to 1 whatever k, so a token counts once
  in each of its k experts, divided by k. The Switch loss alpha E sum_i f_i P_i
  (Fedus et al. 2021) is then alpha under uniform routing for every k; MaxText
  and flaxformer do not divide by k, so theirs is k times ours.
* P_i = mean router probability of expert i: softmax over all experts, or for
  the sigmoid router the sigmoid scores normalised over experts (DeepSeek-V3).
* Soft MoE (router 'soft', Puigcerver et al. 2023) takes another path, `MoE.apply_slots`:
  each of the E experts holds p slots; every slot is a softmax-weighted average of all tokens
  of its group (the same groups as capacity: the batch, or each sequence), every expert runs
  its FFN on its p slots, and every token's output is a softmax-weighted average of all E p
  slot outputs. No token is dropped and nothing needs balancing (its balancing and z losses
  are 0); a token's output depends on every token of its group, so it is never causal.
"""

from collections.abc import Callable
import functools
import math
from typing import NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from ffn_research import config as config_lib
from ffn_research.models import activations
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import inits
from ffn_research.models import mup


class RoutingBias(nnx.Variable):
  """Per-expert selection bias (DeepSeek-V3 aux-loss-free balancing); not an nnx.Param, so no gradient."""


class FrozenWeight(nnx.Variable):
  """A weight kept at its initialisation (model.moe.freeze_router): not an nnx.Param, so no gradient
  and no optimizer state; counted in num_params like any weight of the model."""


# --------------------------------------------------------------------------- routers


class Routing(NamedTuple):
  expert_TxJ: jax.Array  # int32 expert of each slot
  weight_TxJ: jax.Array  # float32 combine weight (0 where not valid)
  valid_TxJ: jax.Array  # bool: the slot holds an assignment
  probs_TxE: jax.Array  # float32 router probabilities (P_i, entropy)


def _token_choice(scores_TxE, bias_E, k):
  """Top-k experts by score + bias (the bias only selects, DeepSeek-V3)."""
  _, expert_TxK = jax.lax.top_k(scores_TxE + bias_E[None, :], k)
  return expert_TxK, jnp.take_along_axis(scores_TxE, expert_TxK, axis=-1)


def softmax_topk(logits_TxE, x_TxD, bias_E, k, capacity, renormalize):
  """Softmax over all experts, then top-k (vmoe, flaxformer); optionally renormalised over the k."""
  del x_TxD, capacity
  probs_TxE = jax.nn.softmax(logits_TxE, axis=-1)
  expert_TxK, weight_TxK = _token_choice(probs_TxE, bias_E, k)
  if renormalize:
    weight_TxK = weight_TxK / jnp.sum(weight_TxK, axis=-1, keepdims=True)
  return Routing(expert_TxK, weight_TxK, jnp.ones(expert_TxK.shape, bool), probs_TxE)


def topk_softmax(logits_TxE, x_TxD, bias_E, k, capacity, renormalize):
  """Top-k on logits, then softmax over those k (Mixtral, MaxText's default)."""
  del x_TxD, capacity, renormalize
  expert_TxK, top_TxK = _token_choice(logits_TxE, bias_E, k)
  probs_TxE = jax.nn.softmax(logits_TxE, axis=-1)
  return Routing(expert_TxK, jax.nn.softmax(top_TxK, axis=-1), jnp.ones(expert_TxK.shape, bool), probs_TxE)


def sigmoid_topk(logits_TxE, x_TxD, bias_E, k, capacity, renormalize):
  """Sigmoid scores, top-k, weights normalised over the chosen k (DeepSeek-V3)."""
  del x_TxD, capacity, renormalize
  scores_TxE = jax.nn.sigmoid(logits_TxE)
  expert_TxK, weight_TxK = _token_choice(scores_TxE, bias_E, k)
  weight_TxK = weight_TxK / jnp.sum(weight_TxK, axis=-1, keepdims=True)
  probs_TxE = scores_TxE / jnp.sum(scores_TxE, axis=-1, keepdims=True)
  return Routing(expert_TxK, weight_TxK, jnp.ones(expert_TxK.shape, bool), probs_TxE)


def expert_choice(logits_TxE, x_TxD, bias_E, k, capacity, renormalize):
  """Each expert takes its top-C tokens by softmax probability (Zhou et al. 2022); slot j = expert j."""
  del x_TxD, bias_E, k, renormalize
  num_tokens, num_experts = logits_TxE.shape
  probs_TxE = jax.nn.softmax(logits_TxE, axis=-1)
  _, token_ExC = jax.lax.top_k(probs_TxE.T, capacity)
  chosen_ExT = jnp.zeros((num_experts, num_tokens), bool).at[jnp.arange(num_experts)[:, None], token_ExC].set(True)
  valid_TxE = chosen_ExT.T
  expert_TxE = jnp.broadcast_to(jnp.arange(num_experts, dtype=jnp.int32), valid_TxE.shape)
  return Routing(expert_TxE, jnp.where(valid_TxE, probs_TxE, 0.0), valid_TxE, probs_TxE)


# FNV-1a (32-bit) offset basis and prime, and murmur3's fmix32 multipliers: `input_hash`.
FNV_OFFSET, FNV_PRIME = 2166136261, 16777619
FMIX_1, FMIX_2 = 0x85EBCA6B, 0xC2B2AE35


def input_hash(x_TxD: jax.Array) -> jax.Array:
  """uint32 hash of each row: FNV-1a over the float32 bit patterns of its coordinates (one 32-bit
  word per coordinate, in order), then murmur3's fmix32 finaliser. Depends on the exact input only."""
  bits_DxT = jax.lax.bitcast_convert_type(x_TxD.astype(jnp.float32), jnp.uint32).T
  h_T = jnp.full(x_TxD.shape[:1], FNV_OFFSET, jnp.uint32)
  h_T, _ = jax.lax.scan(lambda h, b: ((h ^ b) * jnp.uint32(FNV_PRIME), None), h_T, bits_DxT)
  h_T = (h_T ^ (h_T >> 16)) * jnp.uint32(FMIX_1)
  h_T = (h_T ^ (h_T >> 13)) * jnp.uint32(FMIX_2)
  return h_T ^ (h_T >> 16)


def hash_route(logits_TxE, x_TxD, bias_E, k, capacity, renormalize):
  """Fixed hash of the input (hash layers, Roller et al. 2021, on the input's bits rather than a token
  id): slot j < k gets expert (input_hash(x) + j) mod E, weight 1/k; the router weights are unused."""
  del bias_E, capacity, renormalize
  num_experts = logits_TxE.shape[-1]
  first_T = (input_hash(x_TxD) % jnp.uint32(num_experts)).astype(jnp.int32)
  expert_TxK = (first_T[:, None] + jnp.arange(k, dtype=jnp.int32)[None, :]) % num_experts
  probs_TxE = jnp.mean(jax.nn.one_hot(expert_TxK, num_experts, dtype=jnp.float32), axis=1)
  return Routing(
    expert_TxK, jnp.full(expert_TxK.shape, 1.0 / k, jnp.float32), jnp.ones(expert_TxK.shape, bool), probs_TxE
  )


class SoftRouting(NamedTuple):
  """Soft MoE weights of G groups of M tokens over S = E p slots (slot s belongs to expert s // p)."""

  dispatch_GxMxS: jax.Array  # float32: slot s's weight on token m (softmax over the group's tokens)
  combine_GxMxS: jax.Array  # float32: token m's weight on slot s (softmax over the slots)


# Added to the squared norm in `l2_normalize`, so a zero vector (a padding row) stays exactly zero.
L2_EPS = 1e-6


def l2_normalize(x: jax.Array, axis: int) -> jax.Array:
  """x / sqrt(sum(x^2) + L2_EPS) along `axis`: unit L2 norm (up to the eps)."""
  return x * jax.lax.rsqrt(jnp.sum(jnp.square(x), axis=axis, keepdims=True) + L2_EPS)


def soft_logits(x_GxMxD: jax.Array, phi_DxS: jax.Array, scale: jax.Array) -> jax.Array:
  """Soft MoE logits with the paper's normalisation (Puigcerver et al. 2023, section 2.3): every
  token and every slot parameter column scaled to unit L2 norm, times one learned scalar `scale`,
  so a logit is `scale` times a cosine similarity whatever d_model."""
  return jnp.einsum('gmd,ds->gms', l2_normalize(x_GxMxD, -1), scale * l2_normalize(phi_DxS, 0))


def soft(logits_GxMxS: jax.Array) -> SoftRouting:
  """Soft MoE (Puigcerver et al. 2023): dispatch weights are a softmax over the tokens of each
  group (each slot takes a weighted average of its group's tokens), combine weights a softmax
  over the slots (each token takes a weighted average of the slot outputs)."""
  return SoftRouting(jax.nn.softmax(logits_GxMxS, axis=1), jax.nn.softmax(logits_GxMxS, axis=2))


# model.moe.router names. Token routers: fn(logits_TxE, x_TxD, bias_E, k, capacity, renormalize) ->
# Routing; x_TxD: the router's input (float32, before jitter); only `hash` reads it, the others
# route on logits. Slot routers (SLOT_ROUTERS): fn(logits_GxMxS) -> SoftRouting (MoE.apply_slots).
ROUTERS: dict[str, Callable[..., Routing | SoftRouting]] = {
  'softmax_topk': softmax_topk,
  'topk_softmax': topk_softmax,
  'sigmoid': sigmoid_topk,
  'expert_choice': expert_choice,
  'hash': hash_route,
  'soft': soft,
}
# Routers whose choice ignores the logits (no router gradient from any loss).
INPUT_ROUTERS = ('hash',)
# Routers that mix every token of a group into every slot (Soft MoE): no token-to-expert
# assignment, so no capacity, drops, top_k or dispatch implementation; never causal.
SLOT_ROUTERS = ('soft',)

DROP_PRIORITIES = ('position', 'token', 'score')
CAPACITY_SCOPES = ('sequence', 'batch')


def capacity(num_tokens: int, num_experts: int, k: int, capacity_factor: float) -> int:
  """C = ceil(cf * T * k / E), clipped to [1, T]; T (every token fits) when cf <= 0 (dropless)."""
  if capacity_factor <= 0:
    return num_tokens
  return max(1, min(num_tokens, math.ceil(capacity_factor * num_tokens * k / num_experts)))


# --------------------------------------------------------------------------- plan_slots


class Layout(NamedTuple):
  """Buffer layout: each expert's first `window` assignments in a window of its own (expert e
  owns slots [e W, (e+1) W)), the rest after all windows, grouped by expert, each group padded
  with empty slots to a multiple of `block_size`, so every such block belongs to one expert."""

  window: int  # W; W = C: per-expert capacity buffers, nothing grouped
  block_size: int  # b of the grouped part; 1 = back to back (ragged_dot)


def overflow_slots(num_assign: int, num_experts: int, capacity_: int, layout: Layout) -> int:
  """Static slot count of the grouped part (a whole number of blocks).

  Expert e has n_e <= C kept assignments, n_e - W of them grouped (when positive). If any
  expert exceeds its window, that window is full, so sum_e max(n_e - W, 0) <= kept - W with
  kept = min(T J, E C) in all; padding each group to a multiple of b adds at most b - 1 rows
  per expert: at most floor((over + E (b - 1)) / b) blocks for over = min(kept - W, E (C - W)).
  """
  w, b = layout
  over = min(min(num_assign, num_experts * capacity_) - w, num_experts * (capacity_ - w))
  if over <= 0:
    return 0
  return (over + num_experts * (b - 1)) // b * b


class Plan(NamedTuple):
  """Where every assignment goes: E W window slots, then the grouped slots (see `Layout`)."""

  slot_TxJ: jax.Array  # int32 buffer slot of each assignment; S when dropped or invalid
  slot_token_S: jax.Array  # int32 token in each slot; T when empty
  slot_assign_S: jax.Array  # int32 flat assignment index t * J + j in each slot; T * J when empty
  weight_TxJ: jax.Array  # float32 combine weight, 0 for dropped assignments
  expert_S: jax.Array  # int32 expert owning each slot (E - 1 past the last group)
  group_sizes_E: jax.Array  # int32 kept assignments per expert (windows and groups together)
  kept_TxJ: jax.Array  # bool: assigned and within capacity
  layout: Layout  # static


def plan_slots(
  routing: Routing, num_experts: int, capacity_: int, drop_priority: str, layout: Layout | None = None
) -> Plan:
  """Slots of all assignments via one stable sort by expert; drops beyond capacity.

  `layout` defaults to capacity buffers, Layout(C, 1); Layout(0, 1) packs the kept
  assignments back to back by expert (for ragged_dot).
  """
  window, block = layout or Layout(capacity_, 1)
  expert_TxJ, weight_TxJ, valid_TxJ, _ = routing
  num_tokens, j = expert_TxJ.shape
  a = num_tokens * j
  if drop_priority == 'position':  # token major: all k choices of token t before token t + 1
    prio_A = jnp.arange(a, dtype=jnp.int32)
  elif drop_priority == 'token':  # choice rank major, then token: a column-major walk
    prio_A = jnp.arange(a, dtype=jnp.int32).reshape(num_tokens, j).T.reshape(-1)
  else:  # 'score': highest combine weight first
    prio_A = jnp.argsort(-weight_TxJ.reshape(-1), stable=True).astype(jnp.int32)
  key_A = jnp.where(valid_TxJ, expert_TxJ, num_experts).reshape(-1)  # invalid slots sort last
  order_A = prio_A[jnp.argsort(key_A[prio_A], stable=True)]  # by expert, priority within
  counts_E = jnp.bincount(key_A, length=num_experts + 1)[:num_experts].astype(jnp.int32)
  start_E = jnp.cumsum(counts_E) - counts_E
  rank_A = jnp.zeros(a, jnp.int32).at[order_A].set(jnp.arange(a, dtype=jnp.int32))
  start_pad = jnp.concatenate([start_E, jnp.array([a], jnp.int32)])
  pos_A = rank_A - start_pad[key_A]  # position within its expert, in priority order
  kept_A = (key_A < num_experts) & (pos_A < capacity_)
  sizes_E = jnp.minimum(counts_E, capacity_)
  # Grouped part: the positions >= W of each expert, padded per expert to a multiple of b.
  num_windowed = num_experts * window
  num_slots = num_windowed + overflow_slots(a, num_experts, capacity_, Layout(window, block))
  padded_E = (jnp.maximum(sizes_E - window, 0) + block - 1) // block * block
  end_E = jnp.cumsum(padded_E)
  group_start_E = num_windowed + end_E - padded_E
  e_A = jnp.minimum(key_A, num_experts - 1)
  slot_A = jnp.where(pos_A < window, e_A * window + pos_A, group_start_E[e_A] + pos_A - window)
  s_S = jnp.arange(num_slots, dtype=jnp.int32)
  grouped_e_S = jnp.searchsorted(end_E, s_S - num_windowed, side='right')
  expert_S = jnp.where(s_S < num_windowed, s_S // max(window, 1), jnp.minimum(grouped_e_S, num_experts - 1)).astype(
    jnp.int32
  )
  p_S = jnp.where(
    s_S < num_windowed, s_S - expert_S * window, window + s_S - group_start_E[expert_S]
  )  # position within its expert
  filled_S = p_S < sizes_E[expert_S]  # padding, and past the last group: empty
  slot_A = jnp.where(kept_A, slot_A, num_slots)
  src_S = start_E[expert_S] + p_S  # slot s holds the p-th sorted entry of its expert
  slot_assign_S = jnp.where(filled_S, order_A[jnp.clip(src_S, 0, a - 1)], a)
  slot_token_S = jnp.where(filled_S, slot_assign_S // j, num_tokens)
  kept_TxJ = kept_A.reshape(num_tokens, j)
  return Plan(
    slot_A.reshape(num_tokens, j),
    slot_token_S,
    slot_assign_S,
    jnp.where(kept_TxJ, weight_TxJ, 0.0),
    expert_S,
    sizes_E,
    kept_TxJ,
    Layout(window, block),
  )


# --------------------------------------------------------------------------- gathers


@jax.custom_vjp
def gather_rows(src_NxD, idx_M, inv_NxJ):
  """out[m] = src[idx[m]] (0 where idx[m] = N); inv[n] lists every m with idx[m] = n (M = none).

  The backward pass is a gather through `inv` summed over J, not a scatter-add:
  deterministic, and fast on CPU.
  """
  return jnp.take(src_NxD, idx_M, axis=0, mode='fill', fill_value=0)


def _gather_rows_fwd(src_NxD, idx_M, inv_NxJ):
  return gather_rows(src_NxD, idx_M, inv_NxJ), (idx_M, inv_NxJ)


def _gather_rows_bwd(res, g_MxD):
  idx_M, inv_NxJ = res
  g_NxJxD = jnp.take(g_MxD, inv_NxJ, axis=0, mode='fill', fill_value=0)
  return jnp.sum(g_NxJxD, axis=1), None, None


gather_rows.defvjp(_gather_rows_fwd, _gather_rows_bwd)


@jax.jit  # jitted loops: compiled once per shape also when called eagerly (tests)
def _block_matmul_loop(x_NxBxI, w_ExIxM, expert_N, num_used):
  def body(n, y_NxBxM):
    return jax.lax.dynamic_update_index_in_dim(y_NxBxM, x_NxBxI[n] @ w_ExIxM[expert_N[n]], n, 0)

  y_NxBxM = jnp.zeros((*x_NxBxI.shape[:2], w_ExIxM.shape[-1]), x_NxBxI.dtype)
  return jax.lax.fori_loop(0, num_used, body, y_NxBxM)


@jax.jit
def _block_matmul_transpose_loop(x_NxBxI, w_ExIxM, expert_N, num_used, g_NxBxM):
  def body(n, grads):
    g_x, g_w = grads
    e = expert_N[n]
    g_x = jax.lax.dynamic_update_index_in_dim(g_x, g_NxBxM[n] @ w_ExIxM[e].T, n, 0)
    g_we = jax.lax.dynamic_index_in_dim(g_w, e, 0, keepdims=False) + x_NxBxI[n].T @ g_NxBxM[n]
    return g_x, jax.lax.dynamic_update_index_in_dim(g_w, g_we, e, 0)

  return jax.lax.fori_loop(0, num_used, body, (jnp.zeros_like(x_NxBxI), jnp.zeros_like(w_ExIxM)))


@jax.custom_vjp
def block_matmul(x_NxBxI, w_ExIxM, expert_N, num_used):
  """y[n] = x[n] @ w[expert[n]] for the first `num_used` blocks, 0 for the rest (I: the features
  summed over, M: the output features).

  A while loop of one small matmul per used block. The backward pass is one
  loop too, adding each block's weight gradient in place into its expert's
  slice: differentiating a scan instead adds a zero-padded (E, I, M) cotangent
  per block, and a static loop over all N blocks computes the unused ones.
  """
  return _block_matmul_loop(x_NxBxI, w_ExIxM, expert_N, num_used)


def _block_matmul_fwd(x_NxBxI, w_ExIxM, expert_N, num_used):
  res = (x_NxBxI, w_ExIxM, expert_N, num_used)
  return block_matmul(*res), res


def _block_matmul_bwd(res, g_NxBxM):
  return (*_block_matmul_transpose_loop(*res, g_NxBxM), None, None)


block_matmul.defvjp(_block_matmul_fwd, _block_matmul_bwd)


# --------------------------------------------------------------------------- experts


class ExpertSpec(NamedTuple):
  act: Callable[[jax.Array], jax.Array]
  gated: bool
  use_bias: bool
  dtype: jnp.dtype
  dropout: bool = False  # act applies dropout (closes over an RNG): no fused grouped FFN


def _in_weights(w, dtype):
  """The input projection, the gate fused after w1 along the hidden axis: (E, D, n_in * F)."""
  w_in = w['w1'] if 'w_gate' not in w else jnp.concatenate([w['w1'], w['w_gate']], axis=-1)
  b_in = None
  if 'b1' in w:
    b_in = w['b1'] if 'b_gate' not in w else jnp.concatenate([w['b1'], w['b_gate']], axis=-1)
    b_in = b_in.astype(dtype)
  return w_in.astype(dtype), b_in


def _hidden(h, spec):
  if not spec.gated:
    return spec.act(h)
  lin, gate = jnp.split(h, 2, axis=-1)
  return spec.act(gate) * lin


def run_experts(x_ExCxD, w, spec: ExpertSpec):
  """Every expert's FFN on its own buffer (E, C, D) -> (E, C, O).

  A static loop of per-expert matmuls: on XLA:CPU these run faster than one
  batched dot_general (about 7% of a whole train step at the benchmark shape).
  """
  w_in, b_in = _in_weights(w, spec.dtype)
  w2 = w['w2'].astype(spec.dtype)
  b2 = w['b2'].astype(spec.dtype) if 'b2' in w else None
  outs = []
  for e in range(x_ExCxD.shape[0]):
    h_CxH = x_ExCxD[e].astype(spec.dtype) @ w_in[e]
    if b_in is not None:
      h_CxH = ffn_lib.add_bias(h_CxH, b_in[e])
    y_CxO = _hidden(h_CxH, spec) @ w2[e]
    if b2 is not None:
      y_CxO = ffn_lib.add_bias(y_CxO, b2[e])
    outs.append(y_CxO)
  return jnp.stack(outs)


def _reshard(x, mesh, axis, spec):
  """Lay x out as `spec` on the mesh (jax.reshard on an Explicit axis, a constraint on Auto)."""
  sharding = jax.sharding.NamedSharding(mesh, spec)
  if mesh.axis_types[mesh.axis_names.index(axis)] == jax.sharding.AxisType.Explicit:
    return jax.reshard(x, sharding)
  return jax.lax.with_sharding_constraint(x, sharding)


def _sharded_experts(x_ExCxD, w, spec, mesh, axis):
  """Expert parallelism: buffers and expert weights split over mesh axis `axis` (shard_map), so
  each device runs only its own experts; XLA moves tokens to and from the buffers."""
  if mesh is None:
    return run_experts(x_ExCxD, w, spec)
  x_ExCxD, w = jax.tree.map(lambda a: _reshard(a, mesh, axis, P(axis)), (x_ExCxD, w))
  fn = jax.shard_map(
    functools.partial(run_experts, spec=spec),
    mesh=mesh,
    in_specs=(P(axis), jax.tree.map(lambda _: P(axis), w)),
    out_specs=P(axis),
  )
  return _reshard(fn(x_ExCxD, w), mesh, axis, P())  # replicated again for the combine


def _combine(y_SxO, plan_: Plan, dtype):
  """y[t] = sum_j weight[t, j] * expert output in slot[t, j]; dropped slots read zero."""
  num_tokens, j = plan_.slot_TxJ.shape
  y_AxO = gather_rows(y_SxO, plan_.slot_TxJ.reshape(-1), plan_.slot_assign_S[:, None])
  y_TxJxO = y_AxO.reshape(num_tokens, j, -1)
  return jnp.sum(plan_.weight_TxJ.astype(dtype)[:, :, None] * y_TxJxO, axis=1)  # not a batched dot


def _maybe_bias(x_BxF, b_ExF, e):
  return x_BxF if b_ExF is None else ffn_lib.add_bias(x_BxF, b_ExF[e])


def _grouped_ffn_loop(x_NxBxD, w_in, b_in, w2, b2, expert_N, num_used, spec):
  """y[n] = FFN of expert[n] on block n for the first `num_used` blocks, 0 for the rest."""

  def body(n, y_NxBxO):
    e = expert_N[n]
    h_BxH = _maybe_bias(x_NxBxD[n] @ w_in[e], b_in, e)
    y_BxO = _maybe_bias(_hidden(h_BxH, spec) @ w2[e], b2, e)
    return jax.lax.dynamic_update_index_in_dim(y_NxBxO, y_BxO, n, 0)

  y_NxBxO = jnp.zeros((*x_NxBxD.shape[:2], w2.shape[-1]), x_NxBxD.dtype)
  return jax.lax.fori_loop(0, num_used, body, y_NxBxO)


def _grouped_ffn_transpose_loop(res, g_NxBxO, spec):
  """Gradients of `_grouped_ffn_loop`: one loop over the used blocks that recomputes each
  block's hidden activations and adds its weight gradients in place into its expert."""
  x_NxBxD, w_in, b_in, w2, b2, expert_N, num_used = res

  def add(g_E, e, g):  # g_E[e] += g, in place
    return jax.lax.dynamic_update_index_in_dim(g_E, g_E[e] + g, e, 0)

  def body(n, grads):
    g_x, g_w_in, g_b_in, g_w2, g_b2 = grads
    e, x_BxD, g_BxO = expert_N[n], x_NxBxD[n], g_NxBxO[n]
    h_BxH = _maybe_bias(x_BxD @ w_in[e], b_in, e)
    a_BxF, act_vjp = jax.vjp(lambda h: _hidden(h, spec), h_BxH)
    (g_h_BxH,) = act_vjp(g_BxO @ w2[e].T)
    g_x = jax.lax.dynamic_update_index_in_dim(g_x, g_h_BxH @ w_in[e].T, n, 0)
    g_w_in, g_w2 = add(g_w_in, e, x_BxD.T @ g_h_BxH), add(g_w2, e, a_BxF.T @ g_BxO)
    if b_in is not None:
      g_b_in = add(g_b_in, e, jnp.sum(g_h_BxH, axis=0))
    if b2 is not None:
      g_b2 = add(g_b2, e, jnp.sum(g_BxO, axis=0))
    return g_x, g_w_in, g_b_in, g_w2, g_b2

  zeros = lambda a: None if a is None else jnp.zeros_like(a)
  init = (jnp.zeros_like(x_NxBxD), *map(zeros, (w_in, b_in, w2, b2)))
  return jax.lax.fori_loop(0, num_used, body, init)


@functools.cache
def grouped_ffn(spec: ExpertSpec):
  """fn(x_NxBxD, w_in, b_in, w2, b2, expert_N, num_used): the whole expert FFN per used block.

  Hidden activations exist one block at a time (the forward keeps none; the backward
  recomputes them), so the static grouped area costs only its (rows, d) input and output
  buffers, whatever d_ff. Biases may be None. Jitted: compiled once per shape when eager.
  """

  @jax.custom_vjp
  def fn(x_NxBxD, w_in, b_in, w2, b2, expert_N, num_used):
    return _grouped_ffn_loop(x_NxBxD, w_in, b_in, w2, b2, expert_N, num_used, spec)

  def fwd(*res):
    return fn(*res), res

  def bwd(res, g_NxBxO):
    return (*_grouped_ffn_transpose_loop(res, g_NxBxO, spec), None, None)

  fn.defvjp(fwd, bwd)
  return jax.jit(fn)


def _grouped_experts(x_SxD, plan_: Plan, w, spec):
  """Every expert's FFN on the grouped part of the buffer, block by block (used blocks only)."""
  window, b = plan_.layout
  start = plan_.expert_S.shape[0] - x_SxD.shape[0]  # E W window slots come first
  expert_N = plan_.expert_S[start::b]
  num_used = jnp.sum((jnp.maximum(plan_.group_sizes_E - window, 0) + b - 1) // b)
  x_NxBxD = x_SxD.reshape(-1, b, x_SxD.shape[-1]).astype(spec.dtype)
  w_in, b_in = _in_weights(w, spec.dtype)
  if spec.dropout:  # two block matmuls, the activation (with its dropout) on the whole area
    h_NxBxH = block_matmul(x_NxBxD, w_in, expert_N, num_used)
    if b_in is not None:  # unused blocks: never read back, zero gradient
      h_NxBxH = h_NxBxH + b_in[expert_N][:, None, :]
    y_NxBxO = block_matmul(_hidden(h_NxBxH, spec), w['w2'].astype(spec.dtype), expert_N, num_used)
    if 'b2' in w:
      y_NxBxO = y_NxBxO + w['b2'].astype(spec.dtype)[expert_N][:, None, :]
    return y_NxBxO.reshape(-1, y_NxBxO.shape[-1])
  b2 = w['b2'].astype(spec.dtype) if 'b2' in w else None
  y_NxBxO = grouped_ffn(spec)(x_NxBxD, w_in, b_in, w['w2'].astype(spec.dtype), b2, expert_N, num_used)
  return y_NxBxO.reshape(-1, y_NxBxO.shape[-1])


def sort_dispatch(x_TxD, plan_: Plan, w, spec, num_experts, mesh=None, axis='expert'):
  """Gather tokens into per-expert windows (E, W, D) and the grouped blocks, per-expert matmuls
  on the windows, per-block matmuls on the used blocks, gather back and combine."""
  x_SxD = gather_rows(x_TxD, plan_.slot_token_S, plan_.slot_TxJ)
  num_windowed = num_experts * plan_.layout.window
  x_ExWxD = x_SxD[:num_windowed].reshape(num_experts, -1, x_TxD.shape[-1])
  y_SxO = _sharded_experts(x_ExWxD, w, spec, mesh, axis).reshape(num_windowed, -1)
  if x_SxD.shape[0] > num_windowed:
    y_SxO = jnp.concatenate([y_SxO, _grouped_experts(x_SxD[num_windowed:], plan_, w, spec)])
  return _combine(y_SxO, plan_, spec.dtype)


def einsum_dispatch(x_TxD, plan_: Plan, w, spec, num_experts, mesh=None, axis='expert'):
  """GShard-style one-hot dispatch and combine tensors (T, E, C): the readable reference."""
  num_slots = plan_.slot_token_S.shape[0]
  onehot_TxJxS = jax.nn.one_hot(plan_.slot_TxJ, num_slots, dtype=spec.dtype)  # dropped: all zero
  dispatch_TxExC = jnp.sum(onehot_TxJxS, axis=1).reshape(-1, num_experts, num_slots // num_experts)
  combine_TxExC = jnp.einsum('tj,tjs->ts', plan_.weight_TxJ.astype(spec.dtype), onehot_TxJxS).reshape(
    dispatch_TxExC.shape
  )
  x_ExCxD = jnp.einsum('tec,td->ecd', dispatch_TxExC, x_TxD.astype(spec.dtype))
  y_ExCxO = _sharded_experts(x_ExCxD, w, spec, mesh, axis)
  return jnp.einsum('tec,eco->to', combine_TxExC, y_ExCxO)


def ragged_dispatch(x_TxD, plan_: Plan, w, spec, num_experts, mesh=None, axis='expert'):
  """Kept assignments packed by expert, grouped matmuls with jax.lax.ragged_dot (GPU/TPU)."""
  del num_experts, mesh, axis
  x_SxD = gather_rows(x_TxD, plan_.slot_token_S, plan_.slot_TxJ).astype(spec.dtype)
  w_in, b_in = _in_weights(w, spec.dtype)
  h_SxH = jax.lax.ragged_dot(x_SxD, w_in, plan_.group_sizes_E)
  if b_in is not None:
    h_SxH = h_SxH + b_in[plan_.expert_S]  # dropped rows past the groups: never read back
  y_SxO = jax.lax.ragged_dot(_hidden(h_SxH, spec), w['w2'].astype(spec.dtype), plan_.group_sizes_E)
  if 'b2' in w:
    y_SxO = y_SxO + w['b2'].astype(spec.dtype)[plan_.expert_S]
  return _combine(y_SxO, plan_, spec.dtype)


# Rows per block of the grouped part of the 'sort' layout (assignments beyond an expert's
# window): one matmul each, so smaller blocks pad less but cost more loop steps (measured on
# CPU, docs/moe.md).
SORT_BLOCK = 128

# model.moe.dispatch names -> fn(x_TxD, plan, weights, spec, num_experts, mesh, axis) -> y_TxO.
# All compute the same function (tested); 'auto' picks by backend (see `resolve_dispatch`).
DISPATCH: dict[str, Callable[..., jax.Array]] = {
  'sort': sort_dispatch,  # CPU and GPU default: per-expert capacity buffers + per-expert matmuls
  'ragged': ragged_dispatch,  # TPU default; XLA's CPU and GPU ragged_dot compute a dense masked product
  'einsum': einsum_dispatch,  # GShard one-hot reference; O(T * E * C) memory
}


def resolve_dispatch(name: str) -> str:
  """'auto': 'ragged' on TPU, 'sort' elsewhere (on an H100 with jax 0.11.2, 'ragged' ran 77x slower than
  'sort', docs/performance.md); any other name as given."""
  if name == 'auto':
    return 'ragged' if jax.default_backend() == 'tpu' else 'sort'
  return name


def validate(model_cfg) -> None:
  """ConfigError for the model.moe section (routers, dispatches, balancing, granularity)."""
  check = config_lib.check
  e = model_cfg.moe
  config_lib.non_negative_int('model.moe.num_experts', e.num_experts)
  config_lib.positive_int('model.moe.top_k', e.top_k)
  check(
    isinstance(e.capacity_factor, (int, float)) and math.isfinite(e.capacity_factor),
    f'model.moe.capacity_factor={e.capacity_factor!r} must be a number (<= 0: dropless)',
  )
  config_lib.one_of('model.moe.router', e.router, ROUTERS)
  config_lib.one_of('model.moe.drop_priority', e.drop_priority, ('auto', *DROP_PRIORITIES))
  config_lib.one_of('model.moe.capacity_scope', e.capacity_scope, ('auto', *CAPACITY_SCOPES))
  check(isinstance(e.allow_noncausal, bool), f'model.moe.allow_noncausal={e.allow_noncausal!r} must be True or False')
  config_lib.one_of('model.moe.dispatch', e.dispatch, ('auto', *DISPATCH))
  config_lib.non_negative_int('model.moe.num_shared_experts', e.num_shared_experts)
  config_lib.positive_int('model.moe.granularity', e.granularity)
  for key in ('load_balance_coef', 'z_loss_coef', 'bias_update_rate'):
    config_lib.non_negative(f'model.moe.{key}', e[key])
  check(isinstance(e.jitter, (int, float)) and 0 <= e.jitter < 1, f'model.moe.jitter={e.jitter!r} must be in [0, 1)')
  config_lib.positive_int('model.moe.slots_per_expert', e.slots_per_expert)
  check(
    e.slots_per_expert == 1 or e.router in SLOT_ROUTERS,
    f'model.moe.slots_per_expert={e.slots_per_expert} applies only to router=soft '
    f'(model.moe.router={e.router!r}); leave it at 1',
  )
  if e.num_experts == 0:
    return
  check(
    e.top_k <= e.num_experts or e.router in SLOT_ROUTERS,
    f'model.moe.top_k={e.top_k} must be <= model.moe.num_experts={e.num_experts}',
  )
  d_ff = ffn_lib.effective_d_ff(model_cfg.d_ff, model_cfg.activation, model_cfg.match_params)
  check(d_ff % e.granularity == 0, f'model.moe.granularity={e.granularity} must divide the effective d_ff {d_ff}')
  check(
    e.capacity_scope != 'sequence' or is_sequence_model(model_cfg),
    f'model.moe.capacity_scope=sequence needs a sequence model (transformer, ffn_stack); '
    f'model.arch={model_cfg.arch!r} has no sequences',
  )
  reason = noncausal_reason(model_cfg)
  check(
    reason is None or e.allow_noncausal,
    f'model.moe.{reason}: not causal in a sequence model (docs/moe.md#causality); use the defaults '
    f"(capacity_scope and drop_priority 'auto'), a dropless capacity_factor <= 0, or set "
    f'model.moe.allow_noncausal=True to accept the leak',
  )
  for key in ('freeze_router', 'stop_combine_grad'):
    check(isinstance(e[key], bool), f'model.moe.{key}={e[key]!r} must be True or False')
  if e.router in INPUT_ROUTERS:
    check(
      e.bias_update_rate == 0,
      f'model.moe.bias_update_rate must be 0 with router={e.router} (the route is a fixed function of the input)',
    )
  if e.router in SLOT_ROUTERS:
    check(
      e.bias_update_rate == 0,
      f'model.moe.bias_update_rate must be 0 with router={e.router} (no expert is selected, nothing to bias)',
    )
    check(
      not e.stop_combine_grad,
      f'model.moe.stop_combine_grad must be False with router={e.router} (its router also learns through '
      'the dispatch weights)',
    )
  if e.router == 'expert_choice':
    check(
      e.capacity_factor > 0,
      'model.moe.capacity_factor must be > 0 with router=expert_choice (it sets tokens per expert)',
    )
    check(
      e.bias_update_rate == 0,
      'model.moe.bias_update_rate must be 0 with router=expert_choice (load is balanced by construction)',
    )


# model.arch values of the causal sequence models (models.SEQUENCE_ARCHS; named here, as models
# imports this module): their MoE capacity defaults to per sequence and must be causal.
CAUSAL_SEQUENCE_ARCHS = ('transformer', 'ffn_stack')


def is_sequence_model(model_cfg) -> bool:
  return model_cfg.arch in CAUSAL_SEQUENCE_ARCHS


def routing_settings(model_cfg) -> tuple[str, str]:
  """(capacity_scope, drop_priority) with 'auto' resolved: ('sequence', 'position') in sequence
  models (causal), ('batch', 'token') for the bare FFN."""
  e, seq = model_cfg.moe, is_sequence_model(model_cfg)
  scope = e.capacity_scope if e.capacity_scope != 'auto' else ('sequence' if seq else 'batch')
  priority = e.drop_priority if e.drop_priority != 'auto' else ('position' if seq else 'token')
  return scope, priority


def noncausal_reason(model_cfg) -> str | None:
  """Why this MoE leaks later tokens or other sequences into a token's output in a sequence model
  (a 'key=value: why' line), or None when it is causal (or not a sequence model, or dense)."""
  e = model_cfg.moe
  if e.num_experts == 0 or not is_sequence_model(model_cfg):
    return None
  scope, priority = routing_settings(model_cfg)
  if e.router == 'expert_choice':
    return (
      'router=expert_choice: an expert takes the top-scored tokens of its group, so whether a '
      'token is taken depends on later tokens' + (' and other sequences' if scope == 'batch' else '')
    )
  if e.router in SLOT_ROUTERS:
    return (
      f'router={e.router}: every slot averages all tokens of its group, so every output depends on '
      'later tokens' + (' and other sequences' if scope == 'batch' else '')
    )
  if e.capacity_factor <= 0:
    return None
  if scope == 'batch':
    return (
      'capacity_scope=batch: tokens compete for capacity across the batch, so a token can be '
      'dropped because of other sequences'
    )
  if priority == 'score':
    return 'drop_priority=score: a later token with a higher combine weight can push an earlier one out'
  if priority == 'token' and e.top_k * e.granularity > 1:
    return "drop_priority=token with k > 1: a later token's first choice outranks an earlier token's second"
  return None


# --------------------------------------------------------------------------- module


def load_fraction(routing: Routing, num_experts: int) -> jax.Array:
  """f_i = assignments to expert i (before drops) / all assignments: sums to 1 (module docstring)."""
  counts_E = (
    jnp.zeros((num_experts,), jnp.float32)
    .at[routing.expert_TxJ.reshape(-1)]
    .add(routing.valid_TxJ.reshape(-1).astype(jnp.float32))
  )
  return counts_E / jnp.maximum(jnp.sum(counts_E), 1.0)


def load_balance(load_E: jax.Array, probs_TxE: jax.Array) -> jax.Array:
  """Switch balance term E sum_i f_i P_i (1 under uniform routing); gradient flows through P only."""
  num_experts = load_E.shape[0]
  return num_experts * jnp.sum(jax.lax.stop_gradient(load_E) * jnp.mean(probs_TxE, axis=0))


def router_z(logits_TxE: jax.Array) -> jax.Array:
  """ST-MoE z term: mean over tokens of logsumexp(logits)^2."""
  return jnp.mean(jnp.square(jax.nn.logsumexp(logits_TxE, axis=-1)))


def moe_param_count(
  d_model: int,
  d_expert: int,
  activation: str,
  use_bias: bool,
  num_experts: int,
  num_shared: int,
  d_out: int | None = None,
  slots_per_expert: int = 0,
) -> int:
  """Router (no bias) + experts + the shared experts (one fused FFN of width num_shared * d_expert).

  slots_per_expert p > 0: Soft MoE, whose router is the slot parameters (d_model x E p) and a scale."""
  d_out = d_model if d_out is None else d_out
  router = d_model * num_experts * slots_per_expert + 1 if slots_per_expert else d_model * num_experts
  n = router + num_experts * ffn_lib.ffn_param_count(d_model, d_expert, activation, use_bias, d_out)
  if num_shared:
    n += ffn_lib.ffn_param_count(d_model, num_shared * d_expert, activation, use_bias, d_out)
  return n


def soft_flops_per_token(
  d_model: int,
  d_expert: int,
  activation: str,
  num_experts: int,
  slots_per_expert: int,
  group_tokens: int,
  num_shared: int = 0,
  d_out: int | None = None,
) -> float:
  """Forward matmul FLOPs per token of Soft MoE with S = E p slots and M = group_tokens tokens per
  group: logits 2 D S, slot inputs 2 D S (S M D multiply-adds per group), combine 2 S O, the experts'
  S FFN evaluations per group shared by its M tokens, and the shared experts. The expert term is
  S / M of one expert's per-token FLOPs, so the count depends on the group size (exact float)."""
  d_out = d_model if d_out is None else d_out
  s = num_experts * slots_per_expert
  per_group = group_tokens * 2 * s * (2 * d_model + d_out) + s * ffn_lib.ffn_flops_per_token(
    d_model, d_expert, activation, d_out
  )
  shared = ffn_lib.ffn_flops_per_token(d_model, num_shared * d_expert, activation, d_out) if num_shared else 0
  return per_group / group_tokens + shared


def _init_fans(
  mup_dims: tuple[mup.Dim, mup.Dim, mup.Dim] | None, num_columns: int, num_shared: int
) -> tuple[dict[str, inits.Fans | None], tuple[inits.Fans, inits.Fans] | None]:
  """The init fans of the experts' 'in' and 'out' weights and the router, and the fused shared FFN's (in, out):
  None under the standard parametrization (every rule at the true fans), mup.init_fans under μP."""
  if mup_dims is None:
    return dict.fromkeys(('in', 'out', 'router')), None
  d_in, d_e, d_o = mup_dims
  fans: dict[str, inits.Fans | None] = {
    'in': mup.init_fans(d_in, d_e),
    'out': mup.init_fans(d_e, d_o),
    'router': mup.init_fans(d_in, mup.Dim(num_columns)),  # fan-out E (E p): not a width
  }
  if not num_shared:
    return fans, None
  d_shared = mup.Dim(num_shared * d_e.size, None if d_e.base is None else num_shared * d_e.base)  # one fused FFN
  return fans, (mup.init_fans(d_in, d_shared), mup.init_fans(d_shared, d_o))


class MoE(ffn_lib.Layer):
  """Mixture-of-experts FFN; see the module docstring for routing, capacity and loss conventions.

  `num_experts`, `top_k` and `d_ff` are before granularity G: the layer has G E
  experts of width d_ff / G and routes each token to G k of them (DeepSeekMoE).
  """

  def __init__(
    self,
    d_model: int,
    d_ff: int,
    activation: str = 'relu',
    *,
    num_experts: int,
    top_k: int,
    capacity_factor: float = 1.25,
    router: str = 'topk_softmax',
    renormalize: bool = False,
    freeze_router: bool = False,
    stop_combine_grad: bool = False,
    drop_priority: str = 'token',
    capacity_scope: str = 'batch',
    dispatch: str = 'auto',
    num_shared_experts: int = 0,
    granularity: int = 1,
    load_balance_coef: float = 1e-2,
    z_loss_coef: float = 1e-3,
    bias_update_rate: float = 0.0,
    jitter: float = 0.0,
    slots_per_expert: int = 1,
    use_bias: bool = True,
    dropout_rate: float = 0.0,
    init: str = 'xavier_uniform',
    dtype: str = 'float32',
    d_out: int | None = None,
    mesh: jax.sharding.Mesh | None = None,
    expert_axis: str = 'expert',
    mup_dims: tuple[mup.Dim, mup.Dim, mup.Dim] | None = None,
    rngs: nnx.Rngs,
  ):
    """`mup_dims`: None for the standard parametrization; for μP (models/mup.py) the Dims (size and
    base, or not a width) of d_model, one expert's width (after granularity) and d_out: each weight's
    init fans and gain are mup.init_fans of its sides (experts and shared experts as dense FFNs, the
    router and Soft MoE's slot parameters from d_model to a side that is no width)."""
    if d_ff % granularity:
      raise ValueError(f'd_ff={d_ff} is not divisible by granularity={granularity}')
    d_out = d_model if d_out is None else d_out
    self.d_model, self.d_out, self.activation = d_model, d_out, activation
    self.num_experts, self.top_k = num_experts * granularity, top_k * granularity
    self.d_expert = d_ff // granularity
    self.num_shared = num_shared_experts
    self.capacity_factor, self.router, self.renormalize = capacity_factor, router, renormalize
    self.stop_combine_grad = stop_combine_grad
    self.drop_priority, self.capacity_scope = drop_priority, capacity_scope
    self.dispatch = 'sort' if mesh is not None and dispatch == 'auto' else resolve_dispatch(dispatch)
    # Traced per-run scalars (ffn.Hyper); only dropout and jitter compile a path in, when > 0.
    hyper = lambda v: ffn_lib.Hyper(jnp.float32(v))
    self.load_balance_coef, self.z_loss_coef = hyper(load_balance_coef), hyper(z_loss_coef)
    self.bias_update_rate, self.jitter = hyper(bias_update_rate), hyper(jitter)
    self.dropout_rate = hyper(dropout_rate)
    self.use_jitter, self.use_dropout = jitter > 0, dropout_rate > 0
    self.use_bias = use_bias
    self.mesh, self.expert_axis = mesh, expert_axis
    self.spec = ExpertSpec(
      activations.get(activation), activations.is_gated(activation), use_bias, ffn_lib.DTYPES[dtype]
    )
    w_init = inits.get(init)
    e, f = self.num_experts, self.d_expert
    # Soft MoE: router_w is the slot parameters Phi, one column per slot (slot s of expert s // p),
    # and router_scale the learned scale of the normalised logits (1 at init, as in vmoe).
    self.slots_per_expert = slots_per_expert if router in SLOT_ROUTERS else 0
    num_columns = e * slots_per_expert if router in SLOT_ROUTERS else e
    fans, shared_fans = _init_fans(mup_dims, num_columns, num_shared_experts)

    def stacked(shape, fans_):  # each expert initialised as its own (fan_in, fan_out) matrix
      return jnp.stack([w_init(key, shape, jnp.float32, fans_) for key in jax.random.split(rngs.params(), e)])

    router_kind = FrozenWeight if freeze_router else nnx.Param
    self.router_w = router_kind(w_init(rngs.params(), (d_model, num_columns), jnp.float32, fans['router']))
    if router in SLOT_ROUTERS:
      self.router_scale = router_kind(jnp.ones((), jnp.float32))
    self.routing_bias = RoutingBias(jnp.zeros((e,), jnp.float32))
    self.w1 = nnx.Param(stacked((d_model, f), fans['in']))
    if self.spec.gated:
      self.w_gate = nnx.Param(stacked((d_model, f), fans['in']))
    self.w2 = nnx.Param(stacked((f, d_out), fans['out']))
    if use_bias:
      self.b1 = nnx.Param(jnp.zeros((e, f), jnp.float32))
      if self.spec.gated:
        self.b_gate = nnx.Param(jnp.zeros((e, f), jnp.float32))
      self.b2 = nnx.Param(jnp.zeros((e, d_out), jnp.float32))
    # The shared experts, fused into one always-active FFN (one output bias).
    self.shared = (
      ffn_lib.FFN(
        d_model,
        num_shared_experts * f,
        activation,
        use_bias=use_bias,
        dropout_rate=dropout_rate,
        init=init,
        dtype=dtype,
        d_out=d_out,
        mup_fans=shared_fans,
        rngs=rngs,
      )
      if num_shared_experts
      else None
    )

  def expert_weights(self) -> dict[str, jax.Array]:
    names = ('w1', 'w_gate', 'w2', 'b1', 'b_gate', 'b2')
    return {n: getattr(self, n)[...] for n in names if hasattr(self, n)}

  def num_groups(self, x: jax.Array) -> int:
    """Groups that share capacity (Soft MoE: whose tokens a slot averages): the sequences of
    x (B, T, D) with scope 'sequence', else 1 (the whole batch)."""
    return x.shape[0] if self.capacity_scope == 'sequence' and x.ndim == 3 else 1

  def capacity_factor_for(self, training: bool) -> float:
    """Evaluation with batch-wide capacity is dropless (module docstring); else the configured cf."""
    if training or self.capacity_scope == 'sequence' or self.router == 'expert_choice':
      return self.capacity_factor
    return 0.0

  def capacity(self, num_tokens: int, groups: int = 1, capacity_factor: float | None = None) -> int:
    """Capacity per group of num_tokens / groups tokens."""
    cf = self.capacity_factor if capacity_factor is None else capacity_factor
    return capacity(num_tokens // groups, self.num_experts, self.top_k, cf)

  def layout(self, num_tokens: int, capacity_: int | None = None) -> Layout:
    """'ragged': packed; 'sort': windows of the mean load ceil(T k / E), the rest (dropless or
    capacity_factor > 1) in blocks; capacity buffers for 'einsum', expert choice (every expert
    fills exactly C) and expert parallelism (the blocks' experts are dynamic: not shardable).
    `capacity_`: of the whole batch (default: one group of num_tokens)."""
    c = self.capacity(num_tokens) if capacity_ is None else capacity_
    if self.dispatch == 'ragged':
      return Layout(0, 1)
    if self.dispatch == 'sort' and self.mesh is None and self.router != 'expert_choice':
      return Layout(min(c, math.ceil(num_tokens * self.top_k / self.num_experts)), SORT_BLOCK)
    return Layout(c, 1)

  def route(self, x_TxD: jax.Array, rng: jax.Array | None = None, groups: int = 1, capacity_: int | None = None):
    """Router logits (float32, jittered only in training) and the Routing, each of `groups`
    consecutive groups of tokens routed on its own (expert choice picks within its group).
    With stop_combine_grad the combine weights carry no gradient (forward unchanged)."""
    if self.router in SLOT_ROUTERS:
      raise ValueError(f'router={self.router} assigns no tokens to experts (no Routing); see MoE.soft_route')
    x_TxD = x_in_TxD = x_TxD.astype(jnp.float32)
    if rng is not None and self.use_jitter:  # Switch: multiplicative input jitter (jitter 0: x * 1)
      jitter = self.jitter[...]
      x_TxD = x_TxD * jax.random.uniform(rng, x_TxD.shape, jnp.float32, 1.0 - jitter, 1.0 + jitter)
    logits_TxE = x_TxD @ self.router_w[...]
    c = self.capacity(x_TxD.shape[0], groups) if capacity_ is None else capacity_
    router = functools.partial(
      ROUTERS[self.router], bias_E=self.routing_bias[...], k=self.top_k, capacity=c, renormalize=self.renormalize
    )
    if groups == 1:
      routing = router(logits_TxE, x_in_TxD)
    else:
      split = lambda a: a.reshape(groups, -1, a.shape[-1])
      routing = jax.vmap(router)(split(logits_TxE), split(x_in_TxD))
      routing = jax.tree.map(lambda a: a.reshape(-1, a.shape[-1]), routing)
    assert isinstance(routing, Routing)  # slot routers were refused above
    if self.stop_combine_grad:
      routing = routing._replace(weight_TxJ=jax.lax.stop_gradient(routing.weight_TxJ))
    return logits_TxE, routing

  def admit(self, routing: Routing, groups: int, capacity_: int) -> Routing:
    """Routing with only the assignments within each group's capacity valid (drop priority
    within the group); `routing` itself when one group (plan_slots drops) or dropless."""
    num_tokens = routing.expert_TxJ.shape[0]
    if groups == 1 or capacity_ >= num_tokens // groups:
      return routing
    kept_GxTxJ = jax.vmap(lambda r: plan_slots(r, self.num_experts, capacity_, self.drop_priority).kept_TxJ)(
      jax.tree.map(lambda a: a.reshape(groups, -1, a.shape[-1]), routing)
    )
    kept_TxJ = kept_GxTxJ.reshape(num_tokens, -1)
    return routing._replace(valid_TxJ=kept_TxJ, weight_TxJ=jnp.where(kept_TxJ, routing.weight_TxJ, 0.0))

  def apply(self, x: jax.Array, *, rng: jax.Array | None = None):
    if self.router in SLOT_ROUTERS:
      return self.apply_slots(x, rng=rng)
    lead, x_TxD = x.shape[:-1], x.reshape(-1, x.shape[-1])
    num_tokens, groups = x_TxD.shape[0], self.num_groups(x)
    rngs = [None] * 3 if rng is None else list(jax.random.split(rng, 3))
    c_group = self.capacity(num_tokens, groups, self.capacity_factor_for(rng is not None))
    logits_TxE, routing = self.route(x_TxD, rngs[0], groups, c_group)
    plan_ = plan_slots(
      self.admit(routing, groups, c_group),
      self.num_experts,
      groups * c_group,
      self.drop_priority,
      self.layout(num_tokens, groups * c_group),
    )
    w = self.expert_weights()
    if rngs[1] is not None and self.use_dropout:
      spec = self.spec._replace(act=self._dropped_act(rngs[1]), dropout=True)
    else:
      spec = self.spec
    y_TxO = DISPATCH[self.dispatch](x_TxD, plan_, w, spec, self.num_experts, self.mesh, self.expert_axis)
    if self.shared is not None:
      y_TxO = y_TxO + self.shared(x_TxD, rng=rngs[2])
    return y_TxO.reshape(*lead, self.d_out), self._aux(logits_TxE, routing, plan_)

  def soft_route(self, x_TxD: jax.Array, rng: jax.Array | None = None, groups: int = 1):
    """Soft MoE logits (G, M, S) (float32, the router input jittered only in training) and the
    SoftRouting of `groups` consecutive groups of M tokens."""
    x_TxD = x_TxD.astype(jnp.float32)
    if rng is not None and self.use_jitter:  # the same multiplicative input jitter as token routers
      jitter = self.jitter[...]
      x_TxD = x_TxD * jax.random.uniform(rng, x_TxD.shape, jnp.float32, 1.0 - jitter, 1.0 + jitter)
    logits_GxMxS = soft_logits(x_TxD.reshape(groups, -1, x_TxD.shape[-1]), self.router_w[...], self.router_scale[...])
    return logits_GxMxS, ROUTERS[self.router](logits_GxMxS)

  def apply_slots(self, x: jax.Array, *, rng: jax.Array | None = None):
    """Soft MoE: slots = dispatch-weighted averages of each group's tokens, expert e's FFN on its
    p slots (of every group: one (G p, D) buffer per expert), outputs = combine-weighted averages
    of the slot outputs (module docstring). The groups are `num_groups(x)`."""
    lead, x_TxD = x.shape[:-1], x.reshape(-1, x.shape[-1])
    groups, e, p = self.num_groups(x), self.num_experts, self.slots_per_expert
    rngs = [None] * 3 if rng is None else list(jax.random.split(rng, 3))
    logits_GxMxS, routing = self.soft_route(x_TxD, rngs[0], groups)
    dtype = self.spec.dtype
    x_GxMxD = x_TxD.reshape(groups, -1, self.d_model).astype(dtype)
    slots_GxSxD = jnp.einsum('gms,gmd->gsd', routing.dispatch_GxMxS.astype(dtype), x_GxMxD)
    x_ExNxD = slots_GxSxD.reshape(groups, e, p, -1).transpose(1, 0, 2, 3).reshape(e, groups * p, -1)
    spec = self.spec
    if rngs[1] is not None and self.use_dropout:
      spec = spec._replace(act=self._dropped_act(rngs[1]), dropout=True)
    y_ExNxO = _sharded_experts(x_ExNxD, self.expert_weights(), spec, self.mesh, self.expert_axis)
    y_GxSxO = y_ExNxO.reshape(e, groups, p, -1).transpose(1, 0, 2, 3).reshape(groups, e * p, -1)
    y_TxO = jnp.einsum('gms,gso->gmo', routing.combine_GxMxS.astype(dtype), y_GxSxO).reshape(-1, self.d_out)
    if self.shared is not None:
      y_TxO = y_TxO + self.shared(x_TxD, rng=rngs[2])
    return y_TxO.reshape(*lead, self.d_out), self._soft_aux(logits_GxMxS, routing)

  def _soft_aux(self, logits_GxMxS, routing: SoftRouting):
    """The token routers' aux keys, made sane for Soft MoE: nothing is dropped or balanced (both
    losses 0); 'load' is each expert's share of the combine weights (mean over tokens), 'router_z'
    and 'router_entropy' are over the E p slots; plus how peaked the weights are."""
    e, (g, m, s) = self.num_experts, logits_GxMxS.shape
    combine, dispatch = routing.combine_GxMxS, routing.dispatch_GxMxS
    load_E = jnp.mean(combine.reshape(g * m, e, s // e).sum(-1), axis=0)
    entropy = -jnp.mean(jnp.sum(jnp.where(combine > 0, combine * jnp.log(combine), 0.0), axis=-1))
    zero = jnp.zeros((), jnp.float32)
    return {
      'load_balance_loss': zero,
      'z_loss': zero,  # no balancing loss: not in the objective
      'load_balance': e * jnp.sum(jnp.square(load_E)),  # E sum_i f_i^2 (1 when uniform), logged only
      'router_z': router_z(logits_GxMxS.reshape(g * m, s)),
      'load': load_E,
      'max_load_ratio': e * jnp.max(load_E),
      'dropped_fraction': zero,
      'router_entropy': entropy,  # of the combine weights over the slots, mean over tokens, nats
      'dispatch_weight_max': jnp.mean(jnp.max(dispatch, axis=1)),  # 1/M: a plain mean, 1: one token
      'combine_weight_max': jnp.mean(jnp.max(combine, axis=2)),  # 1/S: uniform, 1: one slot
      'router_scale': self.router_scale[...],
    }

  def _dropped_act(self, rng):
    act, rate = self.spec.act, self.dropout_rate[...]
    return lambda h: ffn_lib.dropout(act(h), rate, rng)

  def __call__(self, x, *, rng=None):
    return self.apply(x, rng=rng)[0]

  def _aux(self, logits_TxE, routing: Routing, plan_: Plan):
    e = self.num_experts
    valid = routing.valid_TxJ
    load_E = load_fraction(routing, e)
    balance = load_balance(load_E, routing.probs_TxE)
    z = router_z(logits_TxE)
    p = routing.probs_TxE
    entropy = -jnp.mean(jnp.sum(jnp.where(p > 0, p * jnp.log(p), 0.0), axis=-1))
    return {
      'load_balance_loss': self.load_balance_coef[...] * balance,  # added to the objective
      'z_loss': self.z_loss_coef[...] * z,  # added to the objective
      'load_balance': balance,  # unscaled E sum f_i P_i (1 when uniform)
      'router_z': z,  # unscaled mean logsumexp^2 (ST-MoE)
      'load': load_E,  # f_i per expert, before capacity drops
      'max_load_ratio': e * jnp.max(load_E),  # max / mean load
      'dropped_fraction': 1.0 - jnp.sum(plan_.kept_TxJ) / jnp.maximum(jnp.sum(valid), 1),
      'router_entropy': entropy,  # mean over tokens, nats
    }

  def after_step(self, aux) -> None:
    """DeepSeek-V3 aux-loss-free balancing: bias -= rate * sign(load_i - 1/E), once per step
    (always run: at rate 0 the bias stays exactly 0)."""
    error_E = aux['load'] - 1.0 / self.num_experts
    self.routing_bias[...] = self.routing_bias[...] - self.bias_update_rate[...] * jnp.sign(error_E)

  @property
  def num_params(self) -> int:
    return moe_param_count(
      self.d_model,
      self.d_expert,
      self.activation,
      self.use_bias,
      self.num_experts,
      self.num_shared,
      self.d_out,
      self.slots_per_expert,
    )
