"""MoE dispatch kernels: tokens gathered into expert buffers (a Plan from routers.plan_slots), every expert's
FFN run, outputs combined; three implementations of one function (`DISPATCH`), custom VJPs for the gathers
and the grouped matmuls. Conventions: models/moe.py's docstring."""

from collections.abc import Callable
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from ffn_research.models import ffn as ffn_lib
from ffn_research.models import routers as routers_lib

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


def _combine(y_SxO, plan_: routers_lib.Plan, dtype):
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


def _grouped_experts(x_SxD, plan_: routers_lib.Plan, w, spec):
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


def sort_dispatch(x_TxD, plan_: routers_lib.Plan, w, spec, num_experts, mesh=None, axis='expert'):
  """Gather tokens into per-expert windows (E, W, D) and the grouped blocks, per-expert matmuls
  on the windows, per-block matmuls on the used blocks, gather back and combine."""
  x_SxD = gather_rows(x_TxD, plan_.slot_token_S, plan_.slot_TxJ)
  num_windowed = num_experts * plan_.layout.window
  x_ExWxD = x_SxD[:num_windowed].reshape(num_experts, -1, x_TxD.shape[-1])
  y_SxO = _sharded_experts(x_ExWxD, w, spec, mesh, axis).reshape(num_windowed, -1)
  if x_SxD.shape[0] > num_windowed:
    y_SxO = jnp.concatenate([y_SxO, _grouped_experts(x_SxD[num_windowed:], plan_, w, spec)])
  return _combine(y_SxO, plan_, spec.dtype)


def einsum_dispatch(x_TxD, plan_: routers_lib.Plan, w, spec, num_experts, mesh=None, axis='expert'):
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


def ragged_dispatch(x_TxD, plan_: routers_lib.Plan, w, spec, num_experts, mesh=None, axis='expert'):
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
