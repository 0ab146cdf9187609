"""moe_topk: sweep specs and the k = 1 router trap (glu_variants: tests/test_glu_variants.py).

(Its pipeline through `python -m experiments.reproduce` at smoke scale is covered by
tests/test_reproduce.py, which runs every registered ablation.)
"""

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from flax import nnx

from ffn_research import validation
from ffn_research import sweep
from ffn_research.ablations import moe_topk, verdict
from ffn_research.models import moe as moe_lib

R, NR, INC = verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.INCONCLUSIVE


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_moe_sweeps_avoid_the_k1_trap(scale):
  specs = {spec.name: spec for spec in moe_topk.sweeps(scale)}
  assert set(specs) == set(moe_topk.POINT)
  for name, spec in specs.items():
    for run in sweep.expand(spec.base, spec.overrides):
      validation.validate(run.config)
      e = run.config.model.moe
      if e.num_experts and name != 'routers':  # every MoE point outside the router arms learns at k = 1
        assert e.router == 'softmax_topk' and e.renormalize is False and not e.stop_combine_grad
        assert not e.freeze_router
      if name == 'routers':
        assert e.top_k == 1
  # Granularity keeps total and active expert parameters fixed.
  gran = [r.config.model for r in sweep.expand(specs['granularity'].base, specs['granularity'].overrides)]
  widths = {(m.moe.num_experts * m.moe.granularity, m.d_ff // m.moe.granularity, m.moe.top_k * m.moe.granularity)
            for m in gran}
  assert {e * w for e, w, _ in widths} == {moe_topk.GRAN_EXPERTS * moe_topk.GRAN_WIDTH}
  assert {k * w for _, w, k in widths} == {moe_topk.GRAN_WIDTH}


@pytest.mark.parametrize('router,learns', [('softmax_topk', True), ('topk_softmax', False)])
def test_k1_router_gradient_from_the_task_loss(router, learns):
  """The trap in the issue: at top_k = 1, weight-1 routers get exactly zero task-loss gradient."""
  layer = moe_lib.MoE(4, 8, 'relu', num_experts=4, top_k=1, capacity_factor=0.0, router=router,
                      load_balance_coef=0.0, z_loss_coef=0.0, dispatch='einsum',  # the cheapest to run
                      rngs=nnx.Rngs(params=0))
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


def test_granularity_rule_known_answers():
  seeds = np.arange(5)
  rng = np.random.default_rng(0)
  base = rng.normal(0, 0.1, 5)

  def wide(deltas):
    return pd.DataFrame({g: base + d + rng.normal(0, 1e-3, 5) for g, d in deltas.items()}, index=seeds)

  v, each = moe_topk.granularity_verdict(wide({1: 0.0, 2: 0.05, 4: -0.1, 8: 0.02}), claim='c')
  assert v.outcome == R and len(each) == 3 and v.statistic == pytest.approx(-0.1, abs=3e-3)
  v, _ = moe_topk.granularity_verdict(wide({1: 0.0, 2: 0.05, 4: 0.1, 8: 0.02}), claim='c')
  assert v.outcome == NR
  v, _ = moe_topk.granularity_verdict(wide({1: 0.0, 2: 0.05, 4: 0.0, 8: 0.02}), claim='c')
  assert v.outcome == INC
