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

import functools
import math

from flax import nnx
import jax
import jax.numpy as jnp

from ffn_research.models import activations
from ffn_research.models import dispatch as dispatch_lib
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import inits
from ffn_research.models import mup
from ffn_research.models import routers as routers_lib


class RoutingBias(nnx.Variable):
  """Per-expert selection bias (DeepSeek-V3 aux-loss-free balancing); not an nnx.Param, so no gradient."""


class FrozenWeight(nnx.Variable):
  """A weight kept at its initialisation (model.moe.freeze_router): not an nnx.Param, so no gradient
  and no optimizer state; counted in num_params like any weight of the model."""


ROUTER_DTYPES = {'float32': jnp.float32, 'bfloat16': jnp.bfloat16}  # model.moe.router_dtype


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
    router_dtype: str = 'float32',
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
    self.router_dtype = ROUTER_DTYPES[router_dtype]
    self.drop_priority, self.capacity_scope = drop_priority, capacity_scope
    self.dispatch = 'sort' if mesh is not None and dispatch == 'auto' else dispatch_lib.resolve_dispatch(dispatch)
    self._init_hypers(load_balance_coef, z_loss_coef, bias_update_rate, jitter, dropout_rate)
    self.use_bias = use_bias
    self.mesh, self.expert_axis = mesh, expert_axis
    self.spec = dispatch_lib.ExpertSpec(
      activations.get(activation), activations.is_gated(activation), use_bias, ffn_lib.DTYPES[dtype]
    )
    self._init_weights(init, router, slots_per_expert, freeze_router, dropout_rate, dtype, mup_dims, rngs)

  def _init_hypers(self, load_balance_coef, z_loss_coef, bias_update_rate, jitter, dropout_rate) -> None:
    """The traced per-run scalars (ffn.Hyper); only dropout and jitter compile a path in, when > 0."""
    hyper = lambda v, key: ffn_lib.Hyper(jnp.float32(v), key=key)
    self.load_balance_coef = hyper(load_balance_coef, 'model.moe.load_balance_coef')
    self.z_loss_coef = hyper(z_loss_coef, 'model.moe.z_loss_coef')
    self.bias_update_rate = hyper(bias_update_rate, 'model.moe.bias_update_rate')
    self.jitter = hyper(jitter, 'model.moe.jitter')
    self.dropout_rate = hyper(dropout_rate, 'model.dropout_rate')
    self.use_jitter, self.use_dropout = jitter > 0, dropout_rate > 0

  def _init_weights(self, init, router, slots_per_expert, freeze_router, dropout_rate, dtype, mup_dims, rngs) -> None:
    """The router, the stacked experts' weights and biases, the fused shared experts."""
    d_model, d_out, activation, use_bias = self.d_model, self.d_out, self.activation, self.use_bias
    num_shared_experts = self.num_shared
    w_init = inits.get(init)
    e, f = self.num_experts, self.d_expert
    # Soft MoE: router_w is the slot parameters Phi, one column per slot (slot s of expert s // p),
    # and router_scale the learned scale of the normalised logits (1 at init, as in vmoe).
    self.slots_per_expert = slots_per_expert if router in routers_lib.SLOT_ROUTERS else 0
    num_columns = e * slots_per_expert if router in routers_lib.SLOT_ROUTERS else e
    fans, shared_fans = _init_fans(mup_dims, num_columns, num_shared_experts)

    def stacked(shape, fans_):  # each expert initialised as its own (fan_in, fan_out) matrix
      return jnp.stack([w_init(key, shape, jnp.float32, fans_) for key in jax.random.split(rngs.params(), e)])

    router_kind = FrozenWeight if freeze_router else nnx.Param
    self.router_w = router_kind(w_init(rngs.params(), (d_model, num_columns), jnp.float32, fans['router']))
    if router in routers_lib.SLOT_ROUTERS:
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
    return routers_lib.capacity(num_tokens // groups, self.num_experts, self.top_k, cf)

  def layout(self, num_tokens: int, capacity_: int | None = None) -> routers_lib.Layout:
    """'ragged': packed; 'sort': windows of the mean load ceil(T k / E), the rest (dropless or
    capacity_factor > 1) in blocks; capacity buffers for 'einsum', expert choice (every expert
    fills exactly C) and expert parallelism (the blocks' experts are dynamic: not shardable).
    `capacity_`: of the whole batch (default: one group of num_tokens)."""
    c = self.capacity(num_tokens) if capacity_ is None else capacity_
    if self.dispatch == 'ragged':
      return routers_lib.Layout(0, 1)
    if self.dispatch == 'sort' and self.mesh is None and self.router != 'expert_choice':
      return routers_lib.Layout(min(c, math.ceil(num_tokens * self.top_k / self.num_experts)), dispatch_lib.SORT_BLOCK)
    return routers_lib.Layout(c, 1)

  def route(
    self,
    x_TxD: jax.Array,
    rng: jax.Array | None = None,
    groups: int = 1,
    capacity_: int | None = None,
    route_hash_T: jax.Array | None = None,
  ):
    """Router logits (jittered only in training) and the Routing, each of `groups`
    consecutive groups of tokens routed on its own (expert choice picks within its group).
    The logits, softmax and top-k are computed in router_dtype; the logits and the Routing's weights and
    probabilities are returned in float32 (their bf16-rounded values where router_dtype is bfloat16).
    With stop_combine_grad the combine weights carry no gradient (forward unchanged). `route_hash_T`: the
    token routers' input (routers_lib.prefix_hash of the ids each token sees), which a sequence model passes."""
    if self.router in routers_lib.SLOT_ROUTERS:
      raise ValueError(f'router={self.router} assigns no tokens to experts (no Routing); see MoE.soft_route')
    if (self.router in routers_lib.TOKEN_ROUTERS) != (route_hash_T is not None):
      raise ValueError(f'route_hash is given to, and only to, a token router (router={self.router})')
    x_TxD = x_in_TxD = x_TxD.astype(jnp.float32)
    if rng is not None and self.use_jitter:  # Switch: multiplicative input jitter (jitter 0: x * 1)
      jitter = self.jitter[...]
      x_TxD = x_TxD * jax.random.uniform(rng, x_TxD.shape, jnp.float32, 1.0 - jitter, 1.0 + jitter)
    rdt = self.router_dtype
    logits_TxE = x_TxD.astype(rdt) @ self.router_w[...].astype(rdt)
    c = self.capacity(x_TxD.shape[0], groups) if capacity_ is None else capacity_
    router = functools.partial(
      routers_lib.ROUTERS[self.router],
      bias_E=self.routing_bias[...],
      k=self.top_k,
      capacity=c,
      renormalize=self.renormalize,
    )
    if route_hash_T is not None:
      x_in_TxD = route_hash_T.reshape(-1, 1)
    if groups == 1:
      routing = router(logits_TxE, x_in_TxD)
    else:
      split = lambda a: a.reshape(groups, -1, a.shape[-1])
      routing = jax.vmap(router)(split(logits_TxE), split(x_in_TxD))
      routing = jax.tree.map(lambda a: a.reshape(-1, a.shape[-1]), routing)
    assert isinstance(routing, routers_lib.Routing)  # slot routers were refused above
    if rdt != jnp.float32:
      f32 = lambda a: a.astype(jnp.float32)
      routing = routing._replace(weight_TxJ=f32(routing.weight_TxJ), probs_TxE=f32(routing.probs_TxE))
      logits_TxE = f32(logits_TxE)
    if self.stop_combine_grad:
      routing = routing._replace(weight_TxJ=jax.lax.stop_gradient(routing.weight_TxJ))
    return logits_TxE, routing

  def admit(self, routing: routers_lib.Routing, groups: int, capacity_: int) -> routers_lib.Routing:
    """Routing with only the assignments within each group's capacity valid (drop priority
    within the group); `routing` itself when one group (plan_slots drops) or dropless."""
    num_tokens = routing.expert_TxJ.shape[0]
    if groups == 1 or capacity_ >= num_tokens // groups:
      return routing
    kept_GxTxJ = jax.vmap(
      lambda r: routers_lib.plan_slots(r, self.num_experts, capacity_, self.drop_priority).kept_TxJ
    )(jax.tree.map(lambda a: a.reshape(groups, -1, a.shape[-1]), routing))
    kept_TxJ = kept_GxTxJ.reshape(num_tokens, -1)
    return routing._replace(valid_TxJ=kept_TxJ, weight_TxJ=jnp.where(kept_TxJ, routing.weight_TxJ, 0.0))

  def apply(self, x: jax.Array, *, rng: jax.Array | None = None, route_hash: jax.Array | None = None):
    """`route_hash` (x's leading shape, uint32): a token router's input (see `route`)."""
    if self.router in routers_lib.SLOT_ROUTERS:
      return self.apply_slots(x, rng=rng)
    lead, x_TxD = x.shape[:-1], x.reshape(-1, x.shape[-1])
    num_tokens, groups = x_TxD.shape[0], self.num_groups(x)
    rngs = [None] * 3 if rng is None else list(jax.random.split(rng, 3))
    c_group = self.capacity(num_tokens, groups, self.capacity_factor_for(rng is not None))
    route_hash_T = None if route_hash is None else route_hash.reshape(-1)
    logits_TxE, routing = self.route(x_TxD, rngs[0], groups, c_group, route_hash_T)
    plan_ = routers_lib.plan_slots(
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
    y_TxO = dispatch_lib.DISPATCH[self.dispatch](x_TxD, plan_, w, spec, self.num_experts, self.mesh, self.expert_axis)
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
    logits_GxMxS = routers_lib.soft_logits(
      x_TxD.reshape(groups, -1, x_TxD.shape[-1]), self.router_w[...], self.router_scale[...]
    )
    return logits_GxMxS, routers_lib.ROUTERS[self.router](logits_GxMxS)

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
    y_ExNxO = dispatch_lib._sharded_experts(x_ExNxD, self.expert_weights(), spec, self.mesh, self.expert_axis)
    y_GxSxO = y_ExNxO.reshape(e, groups, p, -1).transpose(1, 0, 2, 3).reshape(groups, e * p, -1)
    y_TxO = jnp.einsum('gms,gso->gmo', routing.combine_GxMxS.astype(dtype), y_GxSxO).reshape(-1, self.d_out)
    if self.shared is not None:
      y_TxO = y_TxO + self.shared(x_TxD, rng=rngs[2])
    return y_TxO.reshape(*lead, self.d_out), self._soft_aux(logits_GxMxS, routing)

  def _soft_aux(self, logits_GxMxS, routing: routers_lib.SoftRouting):
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
      'router_z': routers_lib.router_z(logits_GxMxS.reshape(g * m, s)),
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

  def _aux(self, logits_TxE, routing: routers_lib.Routing, plan_: routers_lib.Plan):
    e = self.num_experts
    valid = routing.valid_TxJ
    load_E = routers_lib.load_fraction(routing, e)
    balance = routers_lib.load_balance(load_E, routing.probs_TxE)
    z = routers_lib.router_z(logits_TxE)
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
