"""moe_memorization_vs_reasoning: the arms keep the active width fixed (exact counts against the
formula), the facts exceed 2x the dense-total capacity by construction, the bootstrap verdict's p agrees
with its CI, and the rules on synthetic selections: known gap shares come back, and a failed premise,
dynamic range or budget check gives `invalid` (the reasoning premise with its remedy); every `not reproduced` is
`invalid` with its reason (no control for a refutation); a small reasoning G stands only on the storage control (the
pool); the active-matched dense widths and G with its floor there; the scopes' numbers against the counts."""

import dataclasses
import functools
import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from ffn_research import ablations
from ffn_research import models
from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research import sweep
from ffn_research import tasks
from ffn_research import validation
from ffn_research.ablations import base
from ffn_research.ablations import moe_memorization_vs_reasoning as mr


def _ffn(d: int, w: int, d_out: int | None = None) -> int:
  """Independent count: ReLU FFN d -> w -> d_out (default d) with biases."""
  d_out = d if d_out is None else d_out
  return d * w + w + w * d_out + d_out


@functools.cache
def _counts(scale: str, name: str) -> tuple:
  """(point overrides, counts) of every point of arm `name` (at its first rate, T, seed 0)."""
  (arm,) = [a for a in mr.arms(scale) if a.name == name]
  out = []
  for o in arm.points.values():
    rate = (arm.rates or mr.REGIMES[scale].rates)[0]
    (run,) = sweep.expand(arm.base, [{**o, **base.budget(100), 'train.learning_rate': rate, 'train.seed': 0}])
    validation.validate(run.config)
    out.append((dict(o), models.model_counts(run.config, tasks.build_task(run.config))))
  return tuple(out)


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_active_width_fixed_and_total_grows_with_experts(scale):
  s = mr.SETTINGS[scale]
  arms = mr.arms(scale)
  names = [f'{t}_{a}' for t in (*mr.TASKS, mr.POOL) for a in ('dense', 'top1', 'top2')]
  assert [a.name for a in arms] == names[:3] + [f'memorization_{mr.HASH}'] + names[3:6] + [mr.MATCHED] + names[6:]
  n = mr.REGIMES[scale].seeds
  assert {a.name: len(a.seed_range(n)) for a in arms} == {
    a.name: min(5, n) if a.name.startswith(mr.POOL) or a.name == mr.MATCHED else n for a in arms
  }  # the storage control and the matched widths: 5 seeds (fewer at smoke and quick)
  matched = _counts(scale, mr.MATCHED)
  assert [o['model.d_ff'] for o, _ in matched] == sorted({mr.matched_width(scale, r) for r in mr.ROUTERS})
  for o, c in matched:  # plain dense FFNs of the reasoning task
    assert c['num_params'] == c['num_active_params'] == _ffn(mr.SP_D_MODEL, o['model.d_ff'], mr.SP_MAX_DISTANCE + 1)
  for task, d, d_out, w, layers in (
    ('memorization', mr.MEM_D_MODEL, mr.MEM_D_MODEL, mr.MEM_WIDTH, 1),
    ('shortest_path', mr.SP_D_MODEL, mr.SP_MAX_DISTANCE + 1, mr.SP_WIDTH, 1),  # bare FFN: input -> classes
    (mr.POOL, mr.SP_D_MODEL, mr.SP_MAX_DISTANCE + 1, mr.SP_WIDTH, 1),  # the same FFNs on the pool
  ):
    counts = {a: _counts(scale, f'{task}_{a}') for a in ('dense', 'top1', 'top2')}
    rest = {c['num_params'] - c['num_ffn_params'] for cs in counts.values() for _, c in cs}
    assert len(rest) == 1  # embeddings, attention, norms: the same for every run of a task
    assert {o['model.d_ff'] for o, _ in counts['dense']} == {f * w for f in s['dense'][task]}
    for o, c in counts['dense']:
      assert c['num_ffn_params'] == c['num_active_ffn_params'] == layers * _ffn(d, o['model.d_ff'], d_out)
    total = {}
    for arm, k, width in (('top1', 1, w), ('top2', 2, w // 2)):
      ((_, c),) = counts[arm]
      n = k * s['experts']
      assert c['num_ffn_params'] == layers * (n * _ffn(d, width, d_out) + d * n)  # experts + router
      assert c['num_active_ffn_params'] == layers * (k * _ffn(d, width, d_out) + d * n)  # k experts + whole router
      assert c['d_ff_active'] == k * width == w  # active width fixed
      total[arm] = c['num_ffn_params'] - layers * d * n  # expert weights
    assert total['top2'] - total['top1'] == layers * s['experts'] * d_out  # top-2's extra output biases only
    assert total['top1'] == layers * s['experts'] * _ffn(d, w, d_out)
    assert max(s['dense'][task]) == s['experts']  # dense-total = E w


@pytest.mark.parametrize('scale', ['quick', 'full'])
def test_facts_exceed_twice_the_dense_total_capacity(scale):
  s = mr.SETTINGS[scale]
  dense_total = max(c['num_params'] for _, c in _counts(scale, 'memorization_dense'))
  largest = max(c['num_params'] for a in ('dense', 'top1', 'top2') for _, c in _counts(scale, f'memorization_{a}'))
  entropy = s['mem_facts'] * math.log2(mr.MEM_VALUES)
  assert entropy == s['mem_facts'] * 6 and entropy >= 2 * mr.BITS_PER_PARAM * dense_total
  assert 2 * largest < mr.SATURATED * entropy  # even 2 bits/param cannot saturate


def test_arms_budgets_rates_and_programs():
  arms = {a.name: a for a in mr.arms('full')}
  assert all(a.tuned for a in arms.values()) and mr.REGIMES['full'].seeds >= 10
  factor = {n: 4 if n.startswith(mr.POOL) else 8 if n.startswith('shortest_path') else 1 for n in arms}
  assert {n: a.steps_factor for n, a in arms.items()} == factor  # the pool at 4T: dense-total stored it in 2T
  assert mr.SP_STEPS_FACTOR * mr.REGIMES['full'].steps == 8000  # reasoning's rungs 2,000 / 4,000 / 8,000 steps
  assert arms['memorization_dense'].rates == (0.03, 0.1, 0.3)
  assert arms['shortest_path_top2'].rates == mr.RATES['shortest_path'] == (3e-3, 1e-2, 3e-2)
  assert arms['shortest_path_pool_top1'].rates == arms['shortest_path_pool_dense'].rates == (1e-2, 3e-2, 0.1)
  assert {n: a.base.task.num_graphs for n, a in arms.items() if n.startswith('shortest_path')} == {
    n: 8192 if n.startswith(mr.POOL) else 0 for n in arms if n.startswith('shortest_path')
  }
  assert arms['memorization_top1'].rates is None and mr.REGIMES['full'].rates == (0.01, 0.03, 0.1)
  for a in arms.values():
    assert not any(k.startswith('train.') for o in a.points.values() for k in o)  # the runner adds them
    runs = sweep.expand(
      a.base,
      [
        {**o, **base.budget(100), 'train.learning_rate': r, 'train.seed': s}
        for o in a.points.values()
        for r in a.rates or mr.REGIMES['full'].rates
        for s in range(3)
      ],
    )
    if not a.name.endswith('dense'):
      assert len(sweep.group_runs(runs)) == 1  # rates and seeds of a budget share one compiled program
  assert mr.task_points('full', 'memorization', 'top2') == (
    'memorization_dense: d_ff=8',
    'memorization_dense: d_ff=32',
    'memorization_dense: d_ff=128',
    'memorization_top2: E=16',
  )
  assert mr.labels('full', 'shortest_path')['total'] == 'shortest_path_dense: d_ff=128'
  assert mr.collect('', {'arm': 'memorization_top1', 'eval_loss': 2.0, 'train_loss': 9.0}) == {'tuning_loss': 2.0}
  row = {'arm': 'shortest_path_dense', 'eval_accuracy': 0.9, 'train_loss': 0.5, 'val_loss': 1.5, 'val_accuracy': 0.75}
  assert mr.collect('', row) == {'tuning_loss': 0.25}  # validation error; never the test graphs
  assert mr.collect('', {**row, 'arm': 'shortest_path_pool_top2', 'eval_loss': 0.125}) == {'tuning_loss': 0.125}
  assert mr.task_points('full', 'shortest_path', 'top2') == (
    'shortest_path_dense: d_ff=8',
    'shortest_path_dense: d_ff=128',
    'shortest_path_matched: d_ff=39',
    'shortest_path_top2: E=16',
  )


def test_bootstrap_verdict_p_agrees_with_the_ci():
  rng = np.random.default_rng(0)
  den, noise = rng.normal(10, 1, 10), rng.normal(0, 1, 10)
  for g, want in ((0.62, stats.REPRODUCED), (0.49, stats.NOT_REPRODUCED)):  # G ~ g - 0.05, CI half-width ~0.05
    num = g * den + noise
    v = stats.bootstrap_verdict(
      lambda c, num=num: rules_lib.ratio_of_means(num, den, confidence=c),
      lo=0.5,
      hi=math.inf,
      claim='c',
      test='t',
      rule='r',
      n=10,
    )
    assert v.outcome == want and 1e-3 < v.p_value < 0.05 and v.statistic == pytest.approx(num.mean() / den.mean())
    assert v.ci == rules_lib.ratio_of_means(num, den)[1:]
    # at the confidence 1 - p the CI touches the edge: just inside it does not decide, just outside it does
    assert stats.decide(rules_lib.ratio_of_means(num, den, confidence=1 - v.p_value * 0.9)[1:], 0.5, math.inf) != want
    assert stats.decide(rules_lib.ratio_of_means(num, den, confidence=1 - v.p_value * 1.1)[1:], 0.5, math.inf) == want
  num = 0.9 * den + rng.normal(0, 0.3, 10)  # far above: p at the bootstrap's resolution
  v = stats.bootstrap_verdict(
    lambda c: rules_lib.ratio_of_means(num, den, confidence=c), lo=0.5, hi=math.inf, claim='c', test='t', rule='r', n=10
  )
  assert v.outcome == stats.REPRODUCED and v.p_value == 1 / (mr.RESAMPLES + 1) and 'resolution' in v.detail
  num = 0.5 * den + rng.normal(0, 0.5, 10)
  v = stats.bootstrap_verdict(
    lambda c: rules_lib.ratio_of_means(num, den, confidence=c), lo=0.5, hi=math.inf, claim='c', test='t', rule='r', n=10
  )
  assert v.outcome == stats.INCONCLUSIVE and v.p_value > 0.05
  few = stats.bootstrap_verdict(
    lambda c: rules_lib.ratio_of_means([1, 2], [2, 3], confidence=c),
    lo=0.5,
    hi=math.inf,
    claim='c',
    test='t',
    rule='r',
    n=2,
  )
  assert few.outcome == stats.INCONCLUSIVE and 'underpowered' in few.detail


SCALE = 'quick'


def _sel(
  g_mem=0.9, g_hop=0.1, g_pool=0.9, dense_slope=1.0, chance=0.34, pool_gap=True, seeds=10, steps=None, g_hash=0.9
):
  """A synthetic selection at the real points' counts with known gap shares G (ratio of means ~ g):
  memorization dense bits = 0.5 x^dense_slope, MoE = active + g (total - active) (1 + 2% noise per seed);
  shortest_path held-out 0.3 (active) and 0.8 (total), log-linear in dense parameters between (the matched widths
  too); the pool 0.5 (active) and 1.0 (total; 0.5, no gap, with pool_gap=False); the test graphs' majority share
  `chance`; every seed scales a task's scores by its own factor; each arm has its own seeds (the pool's and the
  matched widths' 5); the token-hash control closes g_hash of the memorization gap."""
  rng = np.random.default_rng(1)
  rows = []
  shape = {'memorization': (g_mem, 0, 0), 'shortest_path': (g_hop, 0.3, 0.8), mr.POOL: (g_pool, 0.5, 1.0)}
  if not pool_gap:
    shape[mr.POOL] = (g_pool, 0.5, 0.5)
  for a in mr.arms(SCALE):
    task = mr.arm_task(a.name)
    g, lo, hi = shape[task]
    g = g_hash if a.name == f'memorization_{mr.HASH}' else g
    dense = {o['model.d_ff']: c['num_params'] for o, c in _counts(SCALE, f'{task}_dense')}
    x_a, x_t = dense[mr.WIDTH[task]], dense[mr.WIDTH[task] * mr.SETTINGS[SCALE]['experts']]
    if task == 'memorization':
      y = lambda xx: 0.5 * xx**dense_slope
    else:
      y = lambda xx, x_a=x_a, x_t=x_t, lo=lo, hi=hi: lo + (hi - lo) * math.log(xx / x_a) / math.log(x_t / x_a)
    moe = not a.name.endswith(('_dense', mr.MATCHED))
    for (o, c), point in zip(_counts(SCALE, a.name), a.points, strict=True):
      for s in range(min(seeds, len(a.seed_range(10)))):
        f = 1 + 0.02 * s
        score = y(x_a) + g * (y(x_t) - y(x_a)) * (1 + 0.02 * rng.standard_normal()) if moe else y(c['num_params'])
        rows.append(
          {
            'point': a.label(point),
            'arm': a.name,
            mr.SEED: s,
            mr.STEPS: (steps or {}).get(a.label(point), 100),
            'train.learning_rate': 0.01,
            'status': 'completed',
            **o,
            **c,
            mr.SCORE[task]: score * f,
            'chance_accuracy': chance,
            'val_accuracy': score * f,
            'eval_loss': 2.0,
          }
        )
  return pd.DataFrame(rows)


def test_rules_recover_known_gap_shares_and_name_their_points():
  v = mr.rules(_sel(), SCALE)
  assert len(v) == 6 and [x.outcome for x in v] == [stats.REPRODUCED] * 6, [x.detail for x in v]
  assert [x.claim.split(',')[0] for x in v] == [
    'overall',
    'overall',
    'memorization',
    "reasoning saturates (this project's toy reading of Jelassi et al.)",
    'memorization',
    "reasoning saturates (this project's toy reading of Jelassi et al.)",
  ]
  assert all('at E = 16' in x.claim for x in v)  # one E: every verdict says so
  assert v[2].statistic == pytest.approx(0.9, abs=0.02) and v[3].statistic == pytest.approx(0.1, abs=0.02)
  assert v[0].statistic == pytest.approx(v[2].statistic - v[3].statistic)
  assert all(c.passed for x in v for c in x.checks) and all(x.p_value < 0.05 for x in v)
  mem, hop = mr.task_points(SCALE, 'memorization', 'top1'), mr.task_points(SCALE, 'shortest_path', 'top1')
  pool = mr.task_points(SCALE, mr.POOL, 'top1')
  assert hop == ('shortest_path_dense: d_ff=8', 'shortest_path_dense: d_ff=128', 'shortest_path_matched: d_ff=23') + (
    'shortest_path_top1: E=16',
  )
  # a reproduced reasoning / overall verdict reads the storage control's points too (the control gates it)
  assert v[0].points == mem + (hop[0], hop[1], hop[3]) + pool and v[2].points == mem and v[3].points == hop + pool
  assert v[4].points == mr.task_points(SCALE, 'memorization', 'top2')


def test_every_uncontrolled_refutation_is_invalid_with_its_number_and_reason():
  """Where the design has no control for a refutation (every verdict but memorization top-1's, which has the
  token-hash arm), the rule's `not reproduced` becomes `invalid`, the statistic, CI and the rule's own outcome kept,
  the reason in the detail."""
  v = mr.rules(_sel(g_mem=0.2, g_hop=0.9), SCALE)
  assert [x.raw_outcome for x in v] == [stats.NOT_REPRODUCED] * 6
  assert [x.outcome for x in v] == [stats.INVALID] * 2 + [stats.NOT_REPRODUCED] + [stats.INVALID] * 3
  tasks = ('overall', 'overall', 'memorization', 'reasoning', 'memorization', 'reasoning')
  for i, (x, task) in enumerate(zip(v, tasks, strict=True)):
    bound = {'overall': x.ci[1] < mr.MUCH, 'memorization': x.ci[1] < mr.HALF, 'reasoning': x.ci[0] > mr.HALF}
    assert math.isfinite(x.statistic) and bound[task]  # the number and its CI kept
    if i == 2:  # memorization top-1: controlled (test_the_token_hash_control_decides_memorization_top1)
      continue
    (guard,) = x.failed_checks
    assert guard.name == f'premise ({task}): a positive control for a refutation' and guard.role == stats.PREMISE
    assert (
      x.detail.startswith(f'invalid: {guard.name}: this design has none')
      and 'rule alone gave not reproduced' in x.detail
    )
    assert 'next step: ' in x.detail and 'run-seconds' in x.detail.split('next step: ')[1]  # priced (issue 46)
  assert 'route by the query' in v[3].detail and '65% top-1, 79% top-2' in v[3].detail
  assert 'top-2 arm routed by a hash of the token ids' in v[4].detail and 'route by the query' in v[0].detail
  assert 'its memorization half has the token-hash control' in v[0].detail
  assert v[3].statistic == pytest.approx(0.9, abs=0.02) and v[2].statistic == pytest.approx(0.2, abs=0.02)
  # the guard only speaks to a refutation: with the same gates a reproduced passes it ('not needed')
  ok = mr.rules(_sel(), SCALE)
  assert all(
    c.passed and 'not needed for this outcome' in c.detail
    for x in ok
    for c in x.checks
    if c.name.endswith('a positive control for a refutation')
  )


def test_the_token_hash_control_decides_memorization_top1():
  """Memorization top-1's refutation stands where its experts routed by a token-id hash close more than half the gap
  (the control's point joins the verdict's); where they do not, it is invalid with both numbers; a reproduced does
  not read it."""
  name = 'premise (memorization): a positive control for a refutation (the same experts, routing given)'
  hash_point = mr.labels(SCALE, 'memorization')[mr.HASH]
  assert hash_point == 'memorization_hash1: E=16'
  good = mr.rules(_sel(g_mem=0.2, g_hash=0.9), SCALE)[2]
  control = mr.hash_control(_sel(g_mem=0.2, g_hash=0.9), SCALE)
  assert control.outcome == stats.REPRODUCED and control.statistic == pytest.approx(0.9, abs=0.02)
  assert good.outcome == stats.NOT_REPRODUCED and good.points == mr.task_points(SCALE, 'memorization', 'top1') + (
    hash_point,
  )
  (c,) = [c for c in good.checks if c.name == name]
  assert c.passed and c.role == stats.PREMISE and f'{control.statistic:+.3g}' in c.detail and 'reproduced' in c.detail
  assert not [c for c in good.checks if c.name == 'premise (memorization): a positive control for a refutation']
  bad = mr.rules(_sel(g_mem=0.2, g_hash=0.3), SCALE)
  assert bad[2].outcome == stats.INVALID and bad[2].raw_outcome == stats.NOT_REPRODUCED
  assert [c.name for c in bad[2].failed_checks] == [name]
  assert mr.hash_control(_sel(g_mem=0.2, g_hash=0.3), SCALE).statistic == pytest.approx(0.3, abs=0.02)
  assert bad[0].outcome == stats.INVALID and name in [c.name for c in bad[0].failed_checks]  # overall: both fail
  fine = mr.rules(_sel(g_hash=0.3), SCALE)[2]  # reproduced: the control is shown, not needed, its point not read
  (c,) = [c for c in fine.checks if c.name == name]
  assert fine.outcome == stats.REPRODUCED and c.passed and 'needed only for a refutation' in c.detail
  assert hash_point not in fine.points


def test_the_token_hash_arm_is_top1_with_the_routing_given():
  (arm,) = [a for a in mr.arms('full') if a.name == f'memorization_{mr.HASH}']
  (top1,) = [a for a in mr.arms('full') if a.name == 'memorization_top1']
  e = arm.base.model.moe
  assert (e.router, e.num_experts, e.top_k, arm.base.model.d_ff) == ('token_hash', 16, 1, mr.MEM_WIDTH)
  assert arm.rates == top1.rates and arm.seeds == top1.seeds and arm.steps_factor == top1.steps_factor
  assert _counts('full', arm.name)[0][1] == _counts('full', 'memorization_top1')[0][1]  # the same parameters


def test_a_small_reasoning_g_stands_only_on_the_storage_control():
  """The storage control (the pool): reproduced at G_pool ~ 0.9, so a small reasoning G stands; at G_pool ~ 0.2, or
  with no gap on the pool to close, the reasoning and overall reproduced are `invalid` with the numbers."""
  name = 'premise (reasoning): for a small G, the MoE closes >= 0.5 of the gap where examples repeat (storage control)'
  passed = mr.rules(_sel(g_pool=0.9), SCALE)
  (c,) = [c for c in passed[3].checks if c.name == name]
  good = mr.pool_control(_sel(g_pool=0.9), SCALE, 'top1')
  assert good.outcome == stats.REPRODUCED and good.statistic == pytest.approx(0.9, abs=0.02) and good.ci[0] >= 0.5
  want = f'G on the pool {good.statistic:.3g} [{good.ci[0]:.3g}, {good.ci[1]:.3g}], reproduced'
  assert c.passed and c.role == stats.PREMISE and c.detail == want
  assert c.points == mr.task_points(SCALE, mr.POOL, 'top1') and not c.remedy
  low = mr.rules(_sel(g_pool=0.2), SCALE)
  (failed,) = [c for c in low[3].checks if c.name == name]  # its remedy: the pool's arms train twice as long
  assert failed.remedy == stats.DOUBLE_STEPS and failed.points == mr.task_points(SCALE, mr.POOL, 'top1')
  assert [x.outcome for x in low] == [stats.INVALID] * 2 + [stats.REPRODUCED, stats.INVALID] * 2
  control = mr.pool_control(_sel(g_pool=0.2), SCALE, 'top1')
  assert control.outcome == stats.NOT_REPRODUCED and control.ci[1] < 0.5
  assert control.statistic == pytest.approx(0.2, abs=0.02)
  for x in (low[0], low[3]):
    assert x.raw_outcome == stats.REPRODUCED and f'invalid: {name}: G on the pool {control.statistic:.3g} [' in x.detail
    assert 'closes no gap on this input' in x.detail
  flat = mr.rules(_sel(pool_gap=False), SCALE)  # dense-total stores no more of the pool than dense-active
  assert flat[3].outcome == stats.INVALID and 'dense-total beats dense-active on the pool of 8,192 examples' in (
    flat[3].detail
  )
  # not needed where the rule does not reproduce: shown, passed, its points not read
  high = mr.rules(_sel(g_hop=0.9, g_pool=0.2), SCALE)
  (c,) = [c for c in high[3].checks if c.name == name]
  assert c.passed and 'needed only for a reproduced' in c.detail and not c.points
  assert not set(high[3].points) & set(mr.task_points(SCALE, mr.POOL, 'top1'))


def test_g_with_its_floor_at_the_active_matched_dense():
  """Reasoning's detail and extra give G with its floor at the dense width matched to the MoE's active count: on the
  synthetic log-linear dense curve that G is known exactly from the counts."""
  sel = _sel(g_hop=0.6, seeds=10)
  v = mr.rules(sel, SCALE)
  for x, r in ((v[3], 'top1'), (v[5], 'top2')):
    w = mr.matched_width(SCALE, r)
    t = mr.gaps(sel, SCALE, 'shortest_path', r, floor=f'matched_{r}')
    want = (t['moe'] - t['active']).mean() / (t['total'] - t['active']).mean()
    assert x.extra['G_matched'] == pytest.approx(want) and x.extra['G_matched_lo'] < want < x.extra['G_matched_hi']
    assert f'floor at the active-matched dense (d_ff {w}, {mr.sp_params(SCALE, "dense", w)[0]:,} parameters' in x.detail
    # the floor moves up from dense-active, so the share left to the experts shrinks: G' = (G - s) / (1 - s) on
    # the matched arm's seeds, s the matched width's share of the dense-active -> dense-total curve
    dense = {
      o['model.d_ff']: c['num_params'] for a in ('shortest_path_dense', mr.MATCHED) for o, c in _counts(SCALE, a)
    }
    share = math.log(dense[w] / dense[8]) / math.log(dense[128] / dense[8])
    plain = mr.gaps(sel, SCALE, 'shortest_path', r).loc[t.index]
    assert len(t) == 3 and want == pytest.approx((plain['num'].mean() / plain['den'].mean() - share) / (1 - share))


def test_the_matched_widths_are_nearest_the_moes_active_counts():
  """d_ff 23 (1,935) for top-1's 1,955 active and 39 (3,279) for top-2's 3,238 (38 gives 3,195, farther), every
  count from models.model_counts; sp_params is the formula the study's words use."""
  active = {r: _counts('full', f'shortest_path_{r}')[0][1]['num_active_params'] for r in mr.ROUTERS}
  assert active == {'top1': 1955, 'top2': 3238} and {r: mr.sp_params('full', r)[1] for r in mr.ROUTERS} == active
  dense = {o['model.d_ff']: c['num_params'] for a in ('shortest_path_dense', mr.MATCHED) for o, c in _counts('full', a)}
  assert dense == {8: 675, 23: 1935, 39: 3279, 128: 10755}
  assert {w: mr.sp_params('full', 'dense', w)[0] for w in dense} == dense
  assert (mr.matched_width('full', 'top1'), mr.matched_width('full', 'top2')) == (23, 39)
  for r, w in (('top1', 23), ('top2', 39)):
    near = min(range(1, 200), key=lambda x: abs(mr.sp_params('full', 'dense', x)[0] - active[r]))
    assert near == w and mr.sp_params('full', 'dense', 38)[0] == 3195
  assert mr.matched_width('smoke', 'top1') == 10 and mr.matched_width('smoke', 'top2') == 12


def test_the_scopes_say_what_a_reviewer_would_sign():
  """Decision 1 of the review: each reasoning and overall scope names the toy, what is matched and what is not,
  and the router's share of the MoE's active parameters, computed from the counts."""
  claims = mr.ABLATION.claims
  counts = {r: _counts('full', f'shortest_path_{r}')[0][1] for r in mr.ROUTERS}
  for i, r in ((0, 'top1'), (1, 'top2'), (3, 'top1'), (5, 'top2')):
    scope, c = claims[i].scope, counts[r]
    k, _, _, div = mr.ROUTERS[r]
    router = c['num_active_params'] - k * _ffn(mr.SP_D_MODEL, mr.SP_WIDTH // div, 3)  # active minus its experts
    for words in (
      "this project's toy reading",
      'one-hidden-layer ReLU network',
      'no attention, no sequence',
      '8-node, out-degree-2 directed graph and a query as 80 binary features',
      '3 distance classes',
      'a fresh graph per example',
      'matched, the active expert width (8) and the total expert width (128)',
      'the hidden dimension tokens communicate through',
      'the input width, 80, is fixed',
      f"{router:,} = {router / c['num_active_params']:.0%} of the MoE's {c['num_active_params']:,} active parameters",
      'at E = 16',
    ):
      assert words in scope, (i, words)
  assert '1,280 = 65%' in claims[3].scope and '2,560 = 79%' in claims[5].scope
  assert '+12% over' in claims[3].scope and '+25% over' in claims[5].scope
  mem = {r: _counts('full', f'memorization_{r}')[0][1]['num_params'] for r in mr.ROUTERS}
  total = max(c['num_params'] for _, c in _counts('full', 'memorization_dense'))
  assert {r: round(mem[r] / total - 1, 2) for r in mr.ROUTERS} == mr.MEM_TOTAL_EXCESS
  active = {r: _counts('full', f'memorization_{r}')[0][1]['num_active_params'] for r in mr.ROUTERS}
  least = min(c['num_params'] for _, c in _counts('full', 'memorization_dense'))
  assert {r: round(active[r] / least - 1, 2) for r in mr.ROUTERS} == mr.MEM_ACTIVE_EXCESS
  assert 'k and the expert width are the only' not in mr.__doc__ and 'E (16 vs 32)' in mr.__doc__
  assert "more than MEM_GAP of dense-total's bits" in mr.__doc__  # as the code tests it: (total - active) / total


def test_every_verdict_declares_its_kind_and_computes_a_premise():
  claims = mr.ABLATION.claims
  assert [c.kind for c in claims] == [stats.MAGNITUDE] * 6 and all(c.scope and c.premise for c in claims)
  assert all('not renormalised' in c.scope for c in claims) and 'route alike' in claims[0].scope
  assert (
    'bare FFN' in claims[3].scope
    and 'no attention' in claims[3].scope
    and "not matched: the paper's" in (claims[3].scope)
  )
  assert any(bool(c.to_positive) for c in mr.ABLATION.changes) and all(
    c.date and c.outcome for c in mr.ABLATION.changes
  )
  for sel in (_sel(), _sel(dense_slope=0.3, chance=0.85), _sel().iloc[:0]):
    v = mr.rules(sel, SCALE)
    assert len(v) == len(claims) and all(x.premises for x in v)
  v = mr.rules(_sel(), SCALE)
  task = lambda x: {c.name.split(')')[0].removeprefix('premise (') for c in x.premises}
  assert [task(x) for x in v] == [{'memorization', 'reasoning', 'overall'}] * 2 + [
    {'memorization'},
    {'reasoning'},
  ] * 2
  assert all(len(x.premises) >= 3 for x in v)  # each task: its learning control, its gap, its refutation guard


def test_gap_premises_need_dense_total_above_dense_active():
  sel = _sel()
  lab = mr.labels(SCALE, 'shortest_path')
  at_total = sel['point'] == lab['total']
  sel.loc[at_total, 'eval_accuracy'] = sel.loc[sel['point'] == lab['active'], 'eval_accuracy'].to_numpy() + 0.02
  v = mr.rules(sel, SCALE)
  assert [x.outcome for x in v][3::2] == [stats.INVALID] * 2 and v[0].outcome == stats.INVALID
  assert 'premise (reasoning): dense-total beats dense-active on held-out graphs' in v[3].detail


def test_failed_memorization_premise_invalidates_memorization_and_overall():
  v = mr.rules(_sel(dense_slope=0.3), SCALE)
  for x in v:
    if x.claim.startswith(('overall', 'memorization')):
      assert x.outcome == stats.INVALID and 'premise (memorization): dense bits grow' in x.detail
      assert math.isfinite(x.statistic) and x.raw_outcome == stats.REPRODUCED  # the statistic and rule are kept
    else:
      assert x.outcome == stats.REPRODUCED  # reasoning rests on its own checks


def test_reasoning_premise_doubles_every_reasoning_point():
  v = mr.rules(_sel(chance=0.85), SCALE)
  assert [x.outcome for x in v] == [
    stats.INVALID,
    stats.INVALID,
    stats.REPRODUCED,
    stats.INVALID,
    stats.REPRODUCED,
    stats.INVALID,
  ]
  (c,) = [c for c in v[3].failed_checks]
  every = tuple(dict.fromkeys(mr.labels(SCALE, 'shortest_path').values()))
  assert c.name.startswith('premise (reasoning)') and c.remedy == stats.DOUBLE_STEPS and c.points == every
  assert c.role == stats.PREMISE
  assert sorted(every) == sorted(
    [f'shortest_path_dense: d_ff={w}' for w in (8, 128)]
    + [f'{mr.MATCHED}: d_ff={w}' for w in (23, 39)]
    + [f'shortest_path_{r}: E=16' for r in mr.ROUTERS]
  )


def test_present_on_a_synthetic_result(tmp_path):
  sel = _sel()
  tuning = pd.DataFrame([{'point': p, 'level': lv, 'rate': 0.01} for p in sel['point'].unique() for lv in ('T', 'T/2')])
  result = base.Result(sel, tuning, sel, sel, mr.rules(sel, SCALE), SCALE)
  out = ablations.get('moe_memorization_vs_reasoning').present(result, base.Context(str(tmp_path), SCALE))
  assert out.headline.startswith('top1 memorization: G 0.9') and len(out.tables[0].frame) == 14
  assert 'top1 shortest_path_pool: G 0.' in out.headline and '(storage control)' in out.headline
  matched = out.tables[0].frame['G, floor at the active-matched dense']
  assert (matched != '').sum() == 4 and matched.str.endswith(('(d_ff 23)', '(d_ff 39)')).sum() == 4
  assert len(out.tables[1].frame) == 6 and len(out.tables[2].frame) == 6 and len(out.tables[3].frame) == 4
  assert (tmp_path / out.figures[0].file).stat().st_size > 1000
  with_quarter = dataclasses.replace(result, ladder={'T/4': sel})  # the ladder's T/4 runs: G there too
  gap = ablations.get('moe_memorization_vs_reasoning').present(with_quarter, base.Context(str(tmp_path), SCALE))
  assert list(gap.tables[0].frame['budget'].value_counts().sort_index()) == [7, 7, 7]  # T, T/2, T/4


def test_the_reasoning_gap_premise_reads_the_ci_lower_end_not_the_mean():
  one_seed_lifts = pd.Series([0.06, 0.08, 0.1, 0.1, 0.11, 0.12, 0.08, 0.09, 0.06, 0.59])  # mean 0.139
  c = mr._reasoning_gap(one_seed_lifts)
  assert not c.passed and c.role == stats.PREMISE and 'width does not buy' in c.detail
  assert mr._reasoning_gap(pd.Series([0.2, 0.21, 0.19, 0.2, 0.22])).passed


def test_top1_and_top2_share_one_router_normalisation():
  """Issue 46: the same router for top-1 and top-2 in both tasks, softmax_topk with the top-k weights as they are."""
  for a in mr.arms('full'):
    if not a.name.endswith(('dense', mr.MATCHED, mr.HASH)):  # the hash control: test_the_token_hash_arm_...
      e = a.base.model.moe
      assert (e.router, e.renormalize, e.capacity_factor) == ('softmax_topk', False, 0.0)
      assert e.top_k == (1 if a.name.endswith('top1') else 2)


def test_reasoning_arms_are_bare_ffns_with_the_stated_parameter_counts():
  """Full scale: input 8^2 + 2 x 8 = 80 features, 3 classes; dense 8, 23, 39 and 128; 16 x 8 top-1, 32 x 4 top-2."""
  got = {
    a: [
      (o.get('model.d_ff'), c['num_params'], c['num_active_params']) for o, c in _counts('full', f'shortest_path_{a}')
    ]
    for a in ('dense', 'top1', 'top2')
  }
  assert got['dense'] == [(8, 675, 675), (128, 10755, 10755)]  # 84w + 3
  assert [(o['model.d_ff'], c['num_params']) for o, c in _counts('full', mr.MATCHED)] == [(23, 1935), (39, 3279)]
  assert got['top1'] == [(None, 16 * 675 + 80 * 16, 675 + 80 * 16)]  # 12,080 total; the router 1,280
  assert got['top2'] == [(None, 32 * 339 + 80 * 32, 2 * 339 + 80 * 32)]  # 13,408 total; the router 2,560
  (arm,) = [a for a in mr.arms('full') if a.name == 'shortest_path_top1']
  m, t = arm.base.model, arm.base.task
  assert (m.arch, m.d_model, t.name, t.num_nodes, t.out_degree, t.max_distance) == ('ffn', 80, 'shortest_path', 8, 2, 2)


def test_the_reasoning_learning_premise_reads_accuracy_above_the_majority_share():
  total = pd.DataFrame({'eval_accuracy': [0.8, 0.82, 0.78], 'chance_accuracy': [0.34, 0.35, 0.33]})
  c = mr._reasoning_learned(total)
  assert c.passed and c.role == stats.PREMISE and c.name.startswith('premise (reasoning)')
  assert '0.34' in c.detail and '3 seeds' in c.detail
  near = total.assign(eval_accuracy=[0.45, 0.40, 0.50])  # margins 0.11, 0.05, 0.17: mean 0.11, CI below 0.1
  assert not mr._reasoning_learned(near).passed
  assert not mr._reasoning_learned(total.iloc[:0]).passed


def test_routing_margin_is_the_moe_over_dense_active_per_seed():
  """Issue 46's routing premise, reported in each verdict's detail (not gated: these verdicts compare the MoE with
  dense, not routing choices): per task the per-seed MoE - dense-active score, its t CI over seeds (scipy)."""
  sel = _sel(g_mem=0.6, g_hop=0.3, seeds=10)
  v = mr.rules(sel, SCALE)
  read = (
    (v[0], 'top1', mr.TASKS),
    (v[2], 'top1', mr.TASKS[:1]),
    (v[3], 'top1', mr.TASKS[1:]),
    (v[5], 'top2', mr.TASKS[1:]),
  )
  for x, r, tasks_read in read:
    for task in tasks_read:
      d = mr.gaps(sel, SCALE, task, r).eval('moe - active').to_numpy(float)
      lo, hi = scipy.stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=scipy.stats.sem(d))
      want = f'routing margin ({task}; reported, not gated): the MoE beats dense-active by {d.mean():.4g} [{lo:.4g}, '
      assert want + f'{hi:.4g}]' in x.detail, x.detail
  nothing = pd.DataFrame({'active': [0.0, 0.0], 'total': [3.0, 4.0], 'moe': [1.0, 2.0]}).eval('num = moe - active')
  assert mr.routing_margin(nothing, 'memorization').endswith('by 1.5 [-4.853, 7.853] bits per seed (2 seeds)')
