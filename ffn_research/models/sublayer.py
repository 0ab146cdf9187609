"""The FFN sublayer a config selects (dense or gated FFN of the zoo, or an MoE of them) and
its formula-based counts; used by the bare-FFN arch and by every sequence-model block.
"""

from collections.abc import Callable
import dataclasses
from typing import Any

from flax import nnx
import jax
import ml_collections

from ffn_research.models import ffn as ffn_lib
from ffn_research.models import moe as moe_lib
from ffn_research.models import moe_config
from ffn_research.models import mup
from ffn_research.models import routers as routers_lib


def hidden_width(model_cfg: ml_collections.ConfigDict) -> int:
  """The FFN's true hidden width (after match_params; one expert's width times granularity for MoE)."""
  return ffn_lib.effective_d_ff(model_cfg.d_ff, model_cfg.activation, model_cfg.match_params)


def build_ffn(
  model_cfg: ml_collections.ConfigDict,
  d_in: int,
  d_out: int | None,
  rngs: nnx.Rngs,
  mesh: jax.sharding.Mesh | None = None,
  d_ff_true: jax.Array | None = None,
) -> ffn_lib.Layer:
  """The FFN sublayer a config selects: the zoo's dense or gated FFN, or an MoE of them
  (its experts split over `mesh`'s 'expert' axis when given).

  `d_ff_true`: the run's true hidden width when the config's width is a padded program's
  (dense FFNs only; d_ff padding: ffn_research.programs); None: the config's own.
  """
  d_ff = ffn_lib.effective_d_ff(model_cfg.d_ff, model_cfg.activation, model_cfg.match_params)
  # μP: d_in's and d_out's Dims (widths in the sequence models, the task's sizes in the bare FFN)
  dims = mup.d_model_dim(model_cfg, d_in), mup.d_model_dim(model_cfg, d_in if d_out is None else d_out)
  return ffn_kind(model_cfg).build(model_cfg, d_in, d_ff, d_out, rngs, mesh, d_ff_true, dims)


def _build_dense(model_cfg, d_in: int, d_ff: int, d_out: int | None, rngs, mesh, d_ff_true, dims) -> ffn_lib.FFN:
  """build_ffn's dense or gated FFN of the zoo."""
  del mesh
  fans = None
  if mup.is_mup(model_cfg):
    hidden = mup.d_ff_dim(model_cfg, d_ff_true)
    fans = (mup.init_fans(dims[0], hidden), mup.init_fans(hidden, dims[1]))
  return ffn_lib.FFN(d_in, d_ff, d_out=d_out, d_ff_true=d_ff_true, mup_fans=fans, rngs=rngs, **_zoo(model_cfg))


def _zoo(model_cfg) -> dict[str, Any]:
  """The settings every FFN of the zoo takes from the model section (an MoE's experts too)."""
  m = model_cfg
  return {
    'activation': m.activation,
    'use_bias': m.use_bias,
    'dropout_rate': m.dropout_rate,
    'init': m.init,
    'dtype': m.dtype,
  }


def _build_moe(model_cfg, d_in: int, d_ff: int, d_out: int | None, rngs, mesh, d_ff_true, dims) -> moe_lib.MoE:
  """build_ffn's MoE: every model.moe setting passed through (μP `dims`: d_in's and d_out's)."""
  del d_ff_true  # experts are never padded
  e = model_cfg.moe
  scope, priority = moe_config.routing_settings(model_cfg)
  return moe_lib.MoE(
    d_in,
    d_ff,
    **_zoo(model_cfg),
    num_experts=e.num_experts,
    top_k=e.top_k,
    capacity_factor=e.capacity_factor,
    router=e.router,
    renormalize=e.renormalize,
    freeze_router=e.freeze_router,
    stop_combine_grad=e.stop_combine_grad,
    drop_priority=priority,
    capacity_scope=scope,
    dispatch=e.dispatch,
    num_shared_experts=e.num_shared_experts,
    granularity=e.granularity,
    load_balance_coef=e.load_balance_coef,
    z_loss_coef=e.z_loss_coef,
    bias_update_rate=e.bias_update_rate,
    jitter=e.jitter,
    slots_per_expert=e.slots_per_expert,
    router_dtype=e.router_dtype,
    d_out=d_out,
    mesh=mesh,
    mup_dims=(dims[0], mup.expert_dim(model_cfg), dims[1]) if mup.is_mup(model_cfg) else None,
    rngs=rngs,
  )


def ffn_counts(
  model_cfg: ml_collections.ConfigDict, d_in: int, d_out: int | None, group_tokens: int | None = None
) -> dict[str, int]:
  """Parameters (total and active per token) and forward FLOPs per token of one FFN sublayer.

  For an MoE, 'd_ff_effective' is one expert's width and 'd_ff_active' the hidden
  width a token uses (k G-experts plus shared); router FLOPs are included.
  Soft MoE (`group_tokens`: tokens per routing group in training, which its FLOPs depend on):
  every parameter enters every token's output, so all are active and 'd_ff_active' is every
  expert's width; 'flops_per_token' is `moe.soft_flops_per_token` (a float).
  """
  d_ff = ffn_lib.effective_d_ff(model_cfg.d_ff, model_cfg.activation, model_cfg.match_params)
  return ffn_kind(model_cfg).counts(model_cfg, d_in, d_ff, d_out, group_tokens)


def _soft_moe_counts(model_cfg, d_in: int, d_ff: int, d_out: int | None, group_tokens: int | None):
  e = model_cfg.moe
  if group_tokens is None:
    raise ValueError(f'router={e.router}: ffn_counts needs group_tokens (its FLOPs depend on the group size)')
  g, act, bias = e.granularity, model_cfg.activation, model_cfg.use_bias
  num_e, d_e, p = g * e.num_experts, d_ff // g, e.slots_per_expert
  total = moe_lib.moe_param_count(d_in, d_e, act, bias, num_e, e.num_shared_experts, d_out, p)
  flops = moe_lib.soft_flops_per_token(d_in, d_e, act, num_e, p, group_tokens, e.num_shared_experts, d_out)
  return {
    'num_params': total,
    'num_active_params': total,
    'd_ff_effective': d_e,
    'd_ff_active': (num_e + e.num_shared_experts) * d_e,
    'flops_per_token': flops,
  }


def _moe_counts(model_cfg, d_in: int, d_ff: int, d_out: int | None, group_tokens: int | None):
  del group_tokens
  e = model_cfg.moe
  g, act, bias = e.granularity, model_cfg.activation, model_cfg.use_bias
  num_e, k, d_e = g * e.num_experts, g * e.top_k, d_ff // g
  total = moe_lib.moe_param_count(d_in, d_e, act, bias, num_e, e.num_shared_experts, d_out)
  active = moe_lib.moe_param_count(d_in, d_e, act, bias, k, e.num_shared_experts, d_out)
  active += d_in * (num_e - k)  # the whole router is active
  d_active = (k + e.num_shared_experts) * d_e
  flops = 2 * d_in * num_e + k * ffn_lib.ffn_flops_per_token(d_in, d_e, act, d_out)
  if e.num_shared_experts:
    flops += ffn_lib.ffn_flops_per_token(d_in, e.num_shared_experts * d_e, act, d_out)
  return {
    'num_params': total,
    'num_active_params': active,
    'd_ff_effective': d_e,
    'd_ff_active': d_active,
    'flops_per_token': flops,
  }


def _dense_counts(model_cfg, d_in: int, d_ff: int, d_out: int | None, group_tokens: int | None):
  del group_tokens
  n = ffn_lib.ffn_param_count(d_in, d_ff, model_cfg.activation, model_cfg.use_bias, d_out)
  return {
    'num_params': n,
    'num_active_params': n,
    'd_ff_effective': d_ff,
    'd_ff_active': d_ff,
    'flops_per_token': ffn_lib.ffn_flops_per_token(d_in, d_ff, model_cfg.activation, d_out),
  }


# --------------------------------------------------------------------------- the FFN kinds


@dataclasses.dataclass(frozen=True)
class FFNKind:
  """One kind of FFN sublayer: how it builds and counts itself, and what the programs may assume of it. The
  one place that asks which kind a config selects is `ffn_kind`; programs, identity and train ask the kind."""

  name: str
  build: Callable[..., ffn_lib.Layer]  # (model_cfg, d_in, d_ff, d_out, rngs, mesh, d_ff_true, mup dims)
  counts: Callable[..., dict[str, Any]]  # (model_cfg, d_in, d_ff, d_out, group_tokens) -> ffn_counts
  pads: bool  # runs of different d_ff may share one program allocated at the widest (programs.pads_d_ff)
  flat_optimizer: bool  # its weights may be one flat vector for the optimizer (train.Experiment._flat)
  unread: tuple[str, ...] = ()  # config prefixes it reads none of: a resumed run may change them
  experts: Callable[[ml_collections.ConfigDict], int] = lambda model_cfg: 0  # experts a mesh may split (0: none)
  validate: Callable[[ml_collections.ConfigDict], None] = lambda model_cfg: None  # ConfigError for what it reads
  # of the model section beyond the zoo's keys (its μP rules included); models.validate calls it


def _routed_experts(model_cfg: ml_collections.ConfigDict) -> int:
  return model_cfg.moe.num_experts * model_cfg.moe.granularity


KINDS: dict[str, FFNKind] = {
  'dense': FFNKind('dense', _build_dense, _dense_counts, pads=True, flat_optimizer=True, unread=('model.moe.',)),
  'moe': FFNKind(
    'moe',
    _build_moe,
    _moe_counts,
    pads=False,
    flat_optimizer=False,
    experts=_routed_experts,
    validate=moe_config.validate_routed,
  ),
  'soft_moe': FFNKind(
    'soft_moe',
    _build_moe,
    _soft_moe_counts,
    pads=False,
    flat_optimizer=False,
    experts=_routed_experts,
    validate=moe_config.validate_routed,
  ),
}


def ffn_kind(model_cfg: ml_collections.ConfigDict) -> FFNKind:
  """The kind of FFN sublayer a config selects: dense (plain or gated), a routed MoE of them, or a Soft MoE."""
  e = model_cfg.moe
  if e.num_experts == 0:
    return KINDS['dense']
  return KINDS['soft_moe' if e.router in routers_lib.SLOT_ROUTERS else 'moe']
