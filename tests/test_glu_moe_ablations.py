"""glu_variants and moe_topk: sweep specs and verdict rules on synthetic results with known answers.

(Their pipelines through `python -m experiments.reproduce` at smoke scale are covered by
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
from ffn_research.ablations import glu_variants, moe_topk, verdict
from ffn_research.models import moe as moe_lib

R, NR, INC = verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.INCONCLUSIVE


def fake_results(task, means, seeds=5, noise=1e-4, seed=0):
  """A results frame: per variant, metric = mean + a shared per-seed offset + small noise."""
  rng = np.random.default_rng(seed)
  offset = rng.normal(0, 0.05, seeds)  # seeds differ a lot; pairing removes it
  column = glu_variants.METRICS[task][0]
  rows = []
  for name, m in means.items():
    for s in range(seeds):
      value = m + offset[s] + rng.normal(0, noise)
      if task == 'teacher_student':
        value = float(np.exp(value))  # the score is ln(eval_relative_mse)
      rows.append({'model.activation': name, 'train.seed': s, column: value, 'status': 'completed',
                   'num_params': 100, 'eval_bits': value, 'accuracy': 0.5, 'eval_loss': value})
  return pd.DataFrame(rows)


@pytest.mark.parametrize('task', ['language', 'teacher_student'])
def test_glu_verdicts_on_the_papers_own_numbers(task):
  """Results ordered exactly as the paper (its 65k numbers) reproduce every claim."""
  wide = glu_variants.score_table(fake_results(task, glu_variants.PAPER_65K), task)
  verdicts, pairs = glu_variants.task_verdicts(wide, task)
  assert [v.outcome for v in verdicts] == [R] * 5
  assert len(pairs) == len(glu_variants.GATED)
  geglu = verdicts[0]
  assert 'geglu' in geglu.claim and geglu.statistic == pytest.approx(1.942 - 1.997, abs=2e-3)
  assert verdicts[-1].statistic == pytest.approx(1.0)  # Spearman of the paper with itself


def test_glu_verdicts_reversed_and_null():
  reversed_means = {k: -v for k, v in glu_variants.PAPER_65K.items()}
  wide = glu_variants.score_table(fake_results('language', reversed_means), 'language')
  verdicts, _ = glu_variants.task_verdicts(wide, 'language')
  assert [v.outcome for v in verdicts] == [NR] * 5
  assert verdicts[-1].statistic == pytest.approx(-1.0)
  # No real differences and large per-seed noise: nothing is decided.
  null = fake_results('language', {k: 0.0 for k in glu_variants.PAPER_65K}, noise=0.05, seed=3)
  verdicts, _ = glu_variants.task_verdicts(glu_variants.score_table(null, 'language'), 'language')
  assert INC in [v.outcome for v in verdicts[:4]]
  # Two seeds: underpowered.
  two = fake_results('language', glu_variants.PAPER_65K, seeds=2)
  verdicts, _ = glu_variants.task_verdicts(glu_variants.score_table(two, 'language'), 'language')
  assert {v.outcome for v in verdicts} == {INC}


def test_glu_rank_bootstrap_is_deterministic_and_brackets_rho():
  df = fake_results('language', glu_variants.PAPER_65K, noise=0.02)
  wide = glu_variants.score_table(df, 'language')
  a, b = glu_variants.rank_verdict(wide, 'language'), glu_variants.rank_verdict(wide, 'language')
  assert a == b and a.ci[0] <= a.statistic <= a.ci[1] + 1e-12


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_glu_sweeps(scale):
  specs = glu_variants.sweeps(scale)
  s = glu_variants.SETTINGS[scale]
  assert [spec.name for spec in specs] == ['language', 'teacher_student']
  for spec in specs:
    assert spec.base.model.match_params is True
    runs = sweep.expand(spec.base, spec.overrides)
    assert len(runs) == len(s['activations']) * s['seeds']
    for run in runs:
      validation.validate(run.config)
  ts = specs[1].base.task
  assert ts.teacher_activation not in glu_variants.PAPER_65K  # no candidate favoured by construction
  if scale == 'full':
    assert s['seeds'] >= 5 and set(s['activations']) == set(glu_variants.PAPER_65K)


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_moe_sweeps_avoid_the_k1_trap(scale):
  specs = {spec.name: spec for spec in moe_topk.sweeps(scale)}
  assert set(specs) == {'fixed_total', 'granularity', 'router_k1', 'dense'}
  for name, spec in specs.items():
    for run in sweep.expand(spec.base, spec.overrides):
      validation.validate(run.config)
      e = run.config.model.moe
      if e.num_experts and name != 'router_k1':  # every MoE point outside the trap demo learns at k = 1
        assert e.router == 'softmax_topk' and e.renormalize is False
      if name == 'router_k1':
        assert e.router == 'topk_softmax' and e.top_k == 1
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
