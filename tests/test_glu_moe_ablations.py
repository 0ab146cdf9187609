"""moe_topk: its arms and the k = 1 router trap (rules: tests/test_moe_topk.py; glu_variants:
tests/test_glu_variants.py)."""

from flax import nnx
import jax
import jax.numpy as jnp
import pytest

from ffn_research import sweep
from ffn_research import validation
from ffn_research.ablations import base
from ffn_research.ablations import moe_topk
from ffn_research.models import moe as moe_lib


def configs(arm, scale):
  """Every config the runner plans for an arm's first pass (seed 0): points x rates x {T/2, T}."""
  regime = moe_topk.REGIMES[scale]
  steps = regime.steps * arm.steps_factor
  budget = arm.budget or base.budget
  overrides = [
    {**o, **budget(t), 'train.learning_rate': r, moe_topk.SEED: 0}
    for o in arm.points.values()
    for r in (arm.rates or regime.rates)
    for t in (steps // 2, steps)
  ]
  return [r.config for r in sweep.expand(arm.base, overrides)]


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_arms_avoid_the_k1_trap_and_isolate_what_they_claim(scale):
  arms = {arm.name: arm for arm in moe_topk.arms(scale)}
  assert list(arms) == ['fixed_total', 'matched_active', 'granularity', 'routers', 'cluster_dense', 'sizes']
  runs = {name: configs(arm, scale) for name, arm in arms.items()}
  for name, cs in runs.items():  # every arm on the clustered task, on its own grid (not at smoke), tuned per point
    assert arms[name].tuned and arms[name].rates == (moe_topk.CLUSTER_RATES if scale != 'smoke' else None)
    assert all(c.task.cluster_std == moe_topk.CLUSTER_STD and c.task.cluster_teachers for c in cs)
    assert all(c.task.num_clusters == moe_topk.CLUSTERS for c in cs)
    for c in cs:
      validation.validate(c)
      e = c.model.moe
      assert e.capacity_factor == 0.0 and e.renormalize is False
      if e.num_experts and name != 'routers':  # every MoE point outside the router arms learns (softmax_topk)
        assert e.router == 'softmax_topk' and not e.stop_combine_grad and not e.freeze_router
  for c in runs['matched_active']:  # k experts of width 32 / k: the active expert width is fixed
    assert c.model.moe.top_k * c.model.d_ff == moe_topk.TOTAL_WIDTH and c.model.moe.top_k > 1
  for c in runs['fixed_total']:  # k > 1 only: k = 1 is the learned router arm (the same config)
    assert c.model.moe.top_k > 1 and c.model.d_ff == moe_topk.TOTAL_WIDTH
  # Granularity keeps total and active expert parameters fixed (G = 1 is the learned router arm: 8 x 32, top-1).
  widths = {
    (m.moe.num_experts * m.moe.granularity, m.d_ff // m.moe.granularity, m.moe.top_k * m.moe.granularity)
    for m in (c.model for c in runs['granularity'])
  }
  assert {e * w for e, w, _ in widths} == {moe_topk.TOTAL_EXPERTS * moe_topk.TOTAL_WIDTH}
  assert {k * w for _, w, k in widths} == {moe_topk.TOTAL_WIDTH}
  got = {tuple(c.model.moe[k.split('.')[-1]] for k in moe_topk.ARM_KEYS) for c in runs['routers']}
  assert got == set(moe_topk.ARMS.values())
  for c in runs['routers']:
    assert c.model.moe.top_k == 1 and c.model.moe.num_experts == moe_topk.CLUSTERS
  # the routing premise's other shapes: top-1 at each (experts, width) a verdict reads besides 8 x 32
  shapes = {(c.model.moe.num_experts, c.model.d_ff) for c in runs['sizes']}
  assert shapes == set(moe_topk.premise_shapes(scale)) - {(moe_topk.TOTAL_EXPERTS, moe_topk.TOTAL_WIDTH)}
  assert all(c.model.moe.top_k == 1 for c in runs['sizes'])
  learned = next(
    c
    for c in runs['routers']
    if c.model.moe.router == 'softmax_topk' and not c.model.moe.freeze_router and not c.model.moe.stop_combine_grad
  )
  assert (learned.model.d_ff, learned.model.moe.num_experts) == (moe_topk.TOTAL_WIDTH, moe_topk.TOTAL_EXPERTS)
  if scale == 'full':
    assert moe_topk.REGIMES[scale].rates == (1e-2, 3e-2, 0.1, 0.3) and moe_topk.REGIMES[scale].seeds >= 10


@pytest.mark.parametrize('router,learns', [('softmax_topk', True), ('topk_softmax', False)])
def test_k1_router_gradient_from_the_task_loss(router, learns):
  """The trap in the issue: at top_k = 1, weight-1 routers get exactly zero task-loss gradient."""
  layer = moe_lib.MoE(
    4,
    8,
    'relu',
    num_experts=4,
    top_k=1,
    capacity_factor=0.0,
    router=router,
    load_balance_coef=0.0,
    z_loss_coef=0.0,
    dispatch='einsum',  # the cheapest to run
    rngs=nnx.Rngs(params=0),
  )
  graphdef, params = nnx.split(layer)
  x = jax.random.normal(jax.random.PRNGKey(1), (32, 4))

  def task_loss(params):
    y, _ = nnx.merge(graphdef, params).apply(x)
    return jnp.mean(jnp.square(y - 1.0))

  g = jax.grad(task_loss)(params)
  router_grad = float(jnp.max(jnp.abs(g['router_w'][...])))
  w1_grad = float(jnp.max(jnp.abs(g['w1'][...])))
  assert w1_grad > 1e-3  # the experts learn either way
  # Weight-1 routing: zero up to float rounding (sigmoid's s / s would be ~1e-8, not exactly 0).
  assert (router_grad > 1e-3 * w1_grad) if learns else (router_grad < 1e-6 * w1_grad)
