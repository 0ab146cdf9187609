"""MoE routing: routers (logits -> Routing, or slot weights for Soft MoE), capacity, and `plan_slots`, the one
sort that turns a Routing into slot maps for the dispatch kernels. Conventions: models/moe.py's docstring."""

from collections.abc import Callable
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

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


def _fnv_step(h_T: jax.Array, word_T: jax.Array) -> jax.Array:
  """One FNV-1a step: h xor word, times the FNV prime (uint32 arithmetic)."""
  return (h_T ^ word_T) * jnp.uint32(FNV_PRIME)


def _fmix32(h: jax.Array) -> jax.Array:
  """murmur3's finaliser: every input bit moves every output bit."""
  h = (h ^ (h >> 16)) * jnp.uint32(FMIX_1)
  h = (h ^ (h >> 13)) * jnp.uint32(FMIX_2)
  return h ^ (h >> 16)


def input_hash(x_TxD: jax.Array) -> jax.Array:
  """uint32 hash of each row: FNV-1a over the float32 bit patterns of its coordinates (one 32-bit
  word per coordinate, in order), then murmur3's fmix32 finaliser. Depends on the exact input only."""
  bits_DxT = jax.lax.bitcast_convert_type(x_TxD.astype(jnp.float32), jnp.uint32).T
  h_T, _ = jax.lax.scan(
    lambda h, b: (_fnv_step(h, b), None), jnp.full(x_TxD.shape[:1], FNV_OFFSET, jnp.uint32), bits_DxT
  )
  return _fmix32(h_T)


def prefix_hash(tokens_BxT: jax.Array) -> jax.Array:
  """uint32 hash at each position of the token ids at positions 0..t (FNV-1a over the ids, fmix32 per
  position): the `token_hash` router's input, fixed by the tokens a position sees (causal)."""
  words_TxB = tokens_BxT.astype(jnp.uint32).T
  _, h_TxB = jax.lax.scan(
    lambda h, w: (_fnv_step(h, w),) * 2, jnp.full(tokens_BxT.shape[:1], FNV_OFFSET, jnp.uint32), words_TxB
  )
  return _fmix32(h_TxB.T)


def _hashed(h_T: jax.Array, num_experts: int, k: int) -> Routing:
  """Slot j < k gets expert (h mod E + j) mod E, weight 1/k."""
  first_T = (h_T % jnp.uint32(num_experts)).astype(jnp.int32)
  expert_TxK = (first_T[:, None] + jnp.arange(k, dtype=jnp.int32)[None, :]) % num_experts
  probs_TxE = jnp.mean(jax.nn.one_hot(expert_TxK, num_experts, dtype=jnp.float32), axis=1)
  return Routing(
    expert_TxK, jnp.full(expert_TxK.shape, 1.0 / k, jnp.float32), jnp.ones(expert_TxK.shape, bool), probs_TxE
  )


def hash_route(logits_TxE, x_TxD, bias_E, k, capacity, renormalize):
  """Fixed hash of the input (hash layers, Roller et al. 2021, on the input's bits rather than a token
  id): slot j < k gets expert (input_hash(x) + j) mod E, weight 1/k; the router weights are unused."""
  del bias_E, capacity, renormalize
  return _hashed(input_hash(x_TxD), logits_TxE.shape[-1], k)


def token_hash_route(logits_TxE, hash_Tx1, bias_E, k, capacity, renormalize):
  """Hash layers on the token ids (Roller et al. 2021): `hash_Tx1` is `prefix_hash` of the ids a
  position sees (MoE.apply's route_hash), fixed through training whatever the embeddings do; as
  `hash_route` otherwise."""
  del bias_E, capacity, renormalize
  return _hashed(hash_Tx1[:, 0].astype(jnp.uint32), logits_TxE.shape[-1], k)


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
# Routing; x_TxD: the router's input (float32, before jitter), which only `hash` reads (`token_hash` gets
# MoE.apply's route_hash in its place); the others route on logits. Slot routers (SLOT_ROUTERS):
# fn(logits_GxMxS) -> SoftRouting (MoE.apply_slots).
ROUTERS: dict[str, Callable[..., Routing | SoftRouting]] = {
  'softmax_topk': softmax_topk,
  'topk_softmax': topk_softmax,
  'sigmoid': sigmoid_topk,
  'expert_choice': expert_choice,
  'hash': hash_route,
  'token_hash': token_hash_route,
  'soft': soft,
}
# Routers whose choice ignores the logits (no router gradient from any loss).
INPUT_ROUTERS = ('hash', 'token_hash')
# Routers that read the token ids (MoE.apply's route_hash, from a sequence model), not the input.
TOKEN_ROUTERS = ('token_hash',)
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


def load_fraction(routing: Routing, num_experts: int) -> jax.Array:
  """f_i = assignments to expert i (before drops) / all assignments: sums to 1 (models/moe.py's docstring)."""
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
