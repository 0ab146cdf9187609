"""Config checks of the MoE FFN (model.moe): the section's types and ranges for every FFN kind, what a routed or
Soft MoE reads, and causality in sequence models with the capacity scope and drop priority 'auto' resolves to.
The layer and its conventions: models/moe.py."""

import math

from ffn_research import config as config_lib
from ffn_research.models import dispatch as dispatch_lib
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import moe as moe_lib
from ffn_research.models import mup
from ffn_research.models import routers as routers_lib


def validate_section(model_cfg) -> None:
  """ConfigError for a malformed model.moe section, whatever FFN kind the config selects (the keys' types and
  ranges; `sublayer.ffn_kind` reads num_experts and router)."""
  check = config_lib.check
  e = model_cfg.moe
  config_lib.non_negative_int('model.moe.num_experts', e.num_experts)
  config_lib.positive_int('model.moe.top_k', e.top_k)
  check(
    isinstance(e.capacity_factor, (int, float)) and math.isfinite(e.capacity_factor),
    f'model.moe.capacity_factor={e.capacity_factor!r} must be a number (<= 0: dropless)',
  )
  config_lib.one_of('model.moe.router', e.router, routers_lib.ROUTERS)
  config_lib.one_of('model.moe.drop_priority', e.drop_priority, ('auto', *routers_lib.DROP_PRIORITIES))
  config_lib.one_of('model.moe.capacity_scope', e.capacity_scope, ('auto', *routers_lib.CAPACITY_SCOPES))
  check(isinstance(e.allow_noncausal, bool), f'model.moe.allow_noncausal={e.allow_noncausal!r} must be True or False')
  config_lib.one_of('model.moe.dispatch', e.dispatch, ('auto', *dispatch_lib.DISPATCH))
  config_lib.non_negative_int('model.moe.num_shared_experts', e.num_shared_experts)
  config_lib.positive_int('model.moe.granularity', e.granularity)
  for key in ('load_balance_coef', 'z_loss_coef', 'bias_update_rate'):
    config_lib.non_negative(f'model.moe.{key}', e[key])
  check(isinstance(e.jitter, (int, float)) and 0 <= e.jitter < 1, f'model.moe.jitter={e.jitter!r} must be in [0, 1)')
  config_lib.positive_int('model.moe.slots_per_expert', e.slots_per_expert)
  config_lib.one_of('model.moe.router_dtype', e.router_dtype, moe_lib.ROUTER_DTYPES)
  check(
    e.router_dtype == 'float32' or e.router not in routers_lib.SLOT_ROUTERS,
    f'model.moe.router_dtype={e.router_dtype!r} applies to token-choice routers only (model.moe.router={e.router!r})',
  )
  check(
    e.slots_per_expert == 1 or e.router in routers_lib.SLOT_ROUTERS,
    f'model.moe.slots_per_expert={e.slots_per_expert} applies only to router=soft '
    f'(model.moe.router={e.router!r}); leave it at 1',
  )


def validate_routed(model_cfg) -> None:
  """ConfigError for what an MoE (routed or Soft) reads of the model section: top-k, granularity, causality, its
  router's settings, and under mup that the base expert width divides by the granularity."""
  check = config_lib.check
  e = model_cfg.moe
  check(
    e.top_k <= e.num_experts or e.router in routers_lib.SLOT_ROUTERS,
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
  _validate_router(model_cfg)
  if mup.is_mup(model_cfg):
    check(
      mup.base_width(model_cfg) % e.granularity == 0,
      f'model.moe.granularity={e.granularity} must divide the effective base d_ff {mup.base_width(model_cfg)} '
      '(mup: model.mup_base_d_ff; the base expert width is its 1/granularity)',
    )


def _validate_router(model_cfg) -> None:
  """ConfigError for settings the chosen router (model.moe.router) cannot use."""
  check, e = config_lib.check, model_cfg.moe
  if e.router in routers_lib.INPUT_ROUTERS:
    check(
      e.bias_update_rate == 0,
      f'model.moe.bias_update_rate must be 0 with router={e.router} (the route is a fixed function of the input)',
    )
  if e.router in routers_lib.TOKEN_ROUTERS:
    check(
      is_sequence_model(model_cfg),
      f'model.moe.router={e.router} routes by token ids and needs a sequence model (transformer, ffn_stack); '
      f'model.arch={model_cfg.arch!r} has none (router=hash hashes the input instead)',
    )
  if e.router in routers_lib.SLOT_ROUTERS:
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
  if e.router in routers_lib.SLOT_ROUTERS:
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
