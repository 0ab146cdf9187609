"""memorization_capacity: the bits of a known fit, peak reading, the rules on synthetic selections (outcomes,
points, and `invalid` where a study check fails), the MoE ratio's bootstrap p, and its arms (valid configs,
one program per dense arm, E exposures at T and T/2)."""

import math

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from ffn_research import ablations
from ffn_research import models
from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research import sweep
from ffn_research import tasks
from ffn_research.ablations import base
from ffn_research.ablations import memorization_capacity as mc
from ffn_research.ablations import report as report_lib
from ffn_research.tasks import sequence

R, NR, INV, INC = stats.REPRODUCED, stats.NOT_REPRODUCED, stats.INVALID, stats.INCONCLUSIVE
S = mc.SETTINGS['full']
D = S['d_model']


def dense_size(d_ff: int) -> int:
  return 2 * (2 * D * d_ff + d_ff + D) + 3 * D


def moe_size(experts: int, d_e: int) -> int:
  return 2 * (D * experts + experts * (2 * D * d_e + d_e + D)) + 3 * D


def test_bits_of_a_known_fit():
  # Every one of 1,000 facts over V = 256 objects predicted with p = 1/2 on the right object: 7 bits each.
  ce_nats = np.full(1000, math.log(2.0))
  assert mc.bits_of_fit(float(ce_nats.sum() / math.log(2)), 1000, 256) == pytest.approx(7000.0)
  assert float(sequence.bits_stored(jnp.asarray(ce_nats), 256)) == pytest.approx(7000.0, rel=1e-6)
  assert mc.bits_of_fit(1000 * 8.0, 1000, 256) == 0.0 and mc.bits_of_fit(1e9, 1000, 256) == 0.0  # uniform, floor
  assert float(sequence.bits_stored(jnp.full(10, math.log(256.0)), 256)) == pytest.approx(0.0, abs=1e-3)


def _row(arm, point, size, seed, bits, d_ff, active=None, experts=0):
  return {
    mc.EXPERTS: experts,
    'arm': arm,
    'point': f'{arm}: {point}',
    mc.SEED: seed,
    mc.SIZE: float(size),
    'num_ffn_params': size - 3 * D,
    'num_active_ffn_params': (size - 3 * D) if active is None else active,
    'num_params': size + 5000,
    'model.d_ff': d_ff,
    'train.learning_rate': 0.03,
    'bits_stored': bits,
    'accuracy': 0.5,
  }


def moe_active(experts: int, d_e: int, top_k: int) -> int:
  return 2 * (D * experts + top_k * (2 * D * d_e + d_e + D))


# Overrides of the redesigned arm's true shape (experts 8 wide, the router 2 D E of 2,416 and 7,152 total
# non-embedding parameters, 5%), to fail premise (d) one condition at a time.
EXPRESSIBLE: dict = {}


def _moe_shape(k, experts, expressible):
  """(width, total non-embedding size, active FFN parameters, experts) of the MoE rows: the arm before issue 46
  (16 experts 1 wide, 2,128 parameters, the router 512), or the redesigned arm's with EXPRESSIBLE's overrides."""
  if not expressible:
    return 1, moe_size(16, 1), moe_active(16, 1, k), 16
  w = EXPRESSIBLE.get('width', S['moe_width'])
  size, router = EXPRESSIBLE.get('size', moe_size(experts, w)), EXPRESSIBLE.get('router', 2 * D * experts)
  return w, size, router + k * (size - 3 * D - router) // experts, experts


def _sel(
  bpp=None,
  power=1.0,
  peak=lambda ns: ns[(len(ns) - 1) // 2],
  moe=(0.9, 0.9),
  seeds=5,
  noise=0.01,
  rl=(1.0, 0.3),
  expressible=True,
  control=0.9,
):
  """A selection like the runner's (one rate per point) at the full scale: bits = bpp[E] size0 (size/size0)^power,
  times 1 - 0.1 |log2(N / peak)| with the peak at peak(N grid) of the size (its middle or first N), times
  (1 + noise z) per seed; MoE: its ratio moe[k] times the dense figure at its size, peaking at its grid's middle N,
  with the shape `_moe_shape` gives (expressible: passes premise (d); else the published arm's, which fails it); the
  MoE verdicts' control (every expert active) at its ratio `control`."""
  bpp, rng, rows = bpp or {1000: 2.0, 100: 1.0}, np.random.default_rng(0), []
  size0 = dense_size(16)
  dense_bpp = lambda e, size: bpp[e] * (size / size0) ** (power - 1)
  shape = lambda n, ns: 1 - 0.1 * abs(math.log2(n / peak(ns)))
  for e in S['exposures']:
    for f, ns in S['d_ffs'].items():
      for n in ns:
        rows += [
          _row(
            mc.arm_name(e, n),
            f'd_ff={f}',
            dense_size(f),
            s,
            dense_bpp(e, dense_size(f)) * dense_size(f) * shape(n, ns) * (1 + noise * rng.normal()),
            f,
          )
          for s in range(seeds)
        ]
  families = [(k, False, S['moe_facts'], moe[k - 1]) for k in mc.MOE_TOP_KS]
  for k, c, facts, ratio in [*families, (mc.control_k(S), True, S['control_facts'], control)]:
    for x, ns in facts.items():
      w, size, active, experts = _moe_shape(k, x, expressible)
      for n in ns:
        rows += [
          _row(
            mc.arm_name(S['moe_e'], n, k, control=c),
            mc.moe_label(x),
            size,
            s,
            ratio
            * dense_bpp(S['moe_e'], size)
            * size
            * (1 - 0.1 * abs(math.log2(n / ns[1])))
            * (1 + noise * rng.normal()),
            w,
            active=active,
            experts=experts,
          )
          for s in range(seeds)
        ]
  rows += [
    {
      'arm': 'random_labels',
      'point': f'random_labels: N={n}',
      mc.SEED: s,
      'task.num_points': n,
      'fraction_fitted': {mc.RL_QUARTER: rl[0], max(S['rl_points']): rl[1]}.get(n, 1.0) - 0.01 * s,
      'eval_loss': 0.0,
    }
    for n in S['rl_points']
    for s in range(seeds)
  ]
  return pd.DataFrame(rows)


def test_rules_known_answers_and_points():
  vs = mc.rules(_sel(), 'full')
  assert [v.outcome for v in vs] == [R] * 5
  assert vs[0].statistic == pytest.approx(2.0, rel=0.02) and vs[1].statistic == pytest.approx(1.0, rel=0.02)
  assert vs[3].statistic == pytest.approx(0.9, rel=0.02) and vs[3].ci[0] > 1 / mc.MOE_FACTOR and vs[3].n == 5
  assert vs[0].boundaries == (1.6, 2.5) and vs[3].boundaries == (1 / mc.MOE_FACTOR,)
  assert vs[0].extra['slope'] == pytest.approx(1.0, abs=0.02)
  labels = {a.label(p) for a in mc.arms('full') for p in a.points}
  dense_1000 = {p for p in labels if p.startswith('e1000_')}
  assert set(vs[0].points) == dense_1000 and set(vs[1].points) == {p for p in labels if p.startswith('e100_')}
  assert vs[2].points == ('random_labels: N=256', 'random_labels: N=2048')
  assert set(vs[3].points) == {p for p in labels if p.startswith('moe_k1_')} | dense_1000
  assert all(set(v.points) <= labels for v in vs)
  assert [c.name for c in vs[0].checks] == [
    'premise: 1000 exposures: bits proportional to params',
    '1000 exposures: peak inside the N grid',
  ]
  assert [[c.role for c in v.checks].count(stats.PREMISE) for v in vs] == [1, 1, 1, 3, 3]  # MoE: + routing, control
  assert vs[0].checks[0].remedy == stats.DOUBLE_STEPS and set(vs[0].checks[0].points) == dense_1000
  # a refutation of the MoE verdicts stands on its control (test_an_moe_refutation_stands_only_on_its_control)
  vs = mc.rules(_sel(bpp={1000: 1.0, 100: 1.0}, moe=(0.5, 0.9)), 'full')
  assert [v.outcome for v in vs] == [NR, R, R, NR, R]
  vs = mc.rules(_sel(bpp={1000: 1.0, 100: 1.0}, moe=(0.5, 0.9), control=0.5), 'full')
  assert [v.outcome for v in vs] == [NR, R, R, INV, R] and vs[3].raw_outcome == NR


def test_peaks_read_every_seed_at_the_mean_peak():
  # seed 0 stores most at N = 512, seeds 1 and 2 (and the mean) at N = 1024: every seed is read at 1024
  bits = {(512, 0): 500.0, (1024, 0): 300.0, (1024, 1): 400.0, (1024, 2): 400.0}
  mem = pd.DataFrame(
    [{mc.SIZE: 100, mc.N: n, mc.SEED: s, 'bits_stored': bits.get((n, s), 100.0)} for n in (512, 1024) for s in range(3)]
  )
  top = mc.peaks(mem)
  assert sorted(top['bits_stored']) == [300.0, 400.0, 400.0] and set(top[mc.N]) == {1024}


def test_an_n_whose_every_fact_is_below_the_peak_is_settled():
  # V = 256: N facts hold at most 8 N bits. Size 100 peaks at N = 1,024 (3,500 bits): N = 128 (1,024 bits at
  # most) cannot be the peak at any rate, N = 512 (4,096) could; size 200 peaks at N = 128: nothing settled.
  bits = {(100, 128): 1000.0, (100, 512): 3000.0, (100, 1024): 3500.0, (200, 128): 1020.0, (200, 512): 900.0}
  mem = pd.DataFrame(
    [
      {mc.SIZE: size, mc.N: n, mc.SEED: s, 'point': f'e_n{n}: {size}', 'bits_stored': b + s}
      for (size, n), b in bits.items()
      for s in range(3)
    ]
  )
  got = mc.settled(mem, 256)
  assert list(got) == ['e_n128: 100'] and got['e_n128: 100'].startswith('N = 128 cannot be the peak at any rate')
  assert '1024 bits < 3501 at N = 1024' in got['e_n128: 100']


def test_capacity_checks_make_the_verdict_invalid():
  steep = mc.rules(_sel(power=1.4), 'full')[0]  # bits not proportional to params
  assert steep.outcome == INV and 'bits proportional to params' in steep.detail
  assert steep.extra['slope'] == pytest.approx(1.4, abs=0.03)
  wide = mc.rules(_sel(noise=0.4), 'full')[0]  # a slope CI containing 1 but wider than 0.3 shows nothing
  assert wide.outcome == INV and 'narrower than 0.3' in wide.detail
  assert wide.extra['slope_ci_lo'] < 1 < wide.extra['slope_ci_hi']
  rising = mc.rules(_sel(peak=lambda ns: 2 * ns[-1]), 'full')  # still rising at the largest N
  assert rising[0].outcome == INV and 'still rise' in rising[0].detail
  assert rising[3].outcome == INV and 'dense at 1000 exposures: peak inside the N grid' in rising[3].detail
  low = mc.rules(_sel(bpp={1000: 0.05, 100: 1.0}, peak=lambda ns: ns[0] / 2), 'full')[0]  # peak below the grid
  assert low.outcome == INV and 'smallest N' in low.detail
  few = mc.rules(_sel(seeds=2), 'full')
  assert few[0].outcome in (INC, INV) and few[3].outcome == INC
  assert mc.rules(_sel(seeds=2, expressible=False), 'full')[3].outcome == INV  # a failed premise wins


def test_capacity_verdict_carries_its_decision_p():
  for k in (1.5, 2.0, 3.0):
    v = mc.rules(_sel(bpp={1000: k, 100: 1.0}), 'full')[0]
    assert v.p_value is not None and (v.raw_outcome != INC) == (v.p_value < 0.05)


def test_random_labels_verdict_can_fail_and_is_invalid_when_it_cannot():
  assert mc.rules(_sel(), 'full')[2].outcome == R
  assert mc.rules(_sel(rl=(0.5, 0.3)), 'full')[2].outcome == NR
  cannot = mc.rules(_sel(rl=(1.0, 1.0)), 'full')[2]  # fits even N > parameters: the check cannot fail
  assert cannot.outcome == INV and 'can fail' in cannot.detail


def test_moe_premise_fails_on_the_published_arm_and_passes_an_expressible_one():
  vs = mc.rules(_sel(moe=(0.3, 0.6), expressible=False), 'full')  # the published shape and ratios
  for k, v in zip(mc.MOE_TOP_KS, vs[3:], strict=True):
    assert v.outcome == INV and v.raw_outcome == NR
    premise = v.premises[0]
    assert not premise.passed and premise.name.startswith(f'premise: MoE top-{k} can express the comparison')
    active = {1: 658, 2: 756}[k]  # active non-embedding parameters: 48 norm scales + the active FFN
    assert 'FAILS: experts 1 wide' in premise.detail and f'router 512 of 2128 total (24%) and of {active} active' in (
      premise.detail
    )
    assert 'FAILS: MoE sizes 2128 against the dense range [2192, 8528] (2128 outside' in premise.detail
    assert 'issue 46' in premise.detail
  assert [658, 756] == [3 * D + moe_active(16, 1, k) for k in mc.MOE_TOP_KS]
  ok = mc.rules(_sel(moe=(0.5, 0.7)), 'full')[3:]  # the redesigned arm: 4 and 12 experts 8 wide
  assert [v.raw_outcome for v in ok] == [NR, NR] and all(v.premises[0].passed for v in ok)
  assert 'router 128 of 2416 total (5%)' in ok[0].premises[0].detail
  assert '384 of 7152 total (5%)' in ok[0].premises[0].detail
  assert 'MoE sizes 2416, 7152 against the dense range [2192, 8528]' in ok[0].premises[0].detail
  # each condition alone fails it: too narrow, a router too large, a size outside the dense range
  for change in ({'width': 4}, {'router': 1024}, {'size': 9000}):
    EXPRESSIBLE.update(change)
    try:
      assert mc.rules(_sel(), 'full')[3].outcome == INV, change
    finally:
      EXPRESSIBLE.clear()


def test_an_moe_refutation_needs_routing_to_matter_at_every_size():
  """storage.routing_check: MoE peak bits over the dense bits of its active size (the dense figure clamped below
  its range), CI lower end > e^0.1 at every MoE size; failed, a not reproduced is invalid with the numbers; a
  reproduced does not need it. At 0.3 of dense per total parameter the 4-expert top-1 (736 of 2,416 active) stores
  0.98x what dense of its active size would: no evidence the router spreads the facts."""
  v = mc.rules(_sel(moe=(0.3, 0.9)), 'full')
  assert v[3].outcome == INV and v[3].raw_outcome == NR and v[4].outcome == R
  (c,) = [c for c in v[3].premises if c.name.startswith('premise: routing matters')]
  assert not c.passed and 'FAILS: 2,416 total / 736 active parameters: 0.979x [' in c.detail
  assert '7,152 total / 992 active parameters: 2.17x' in c.detail and 'needed only' not in c.detail
  (control,) = [c for c in v[3].premises if c.name.startswith('premise: a positive control for a refutation')]
  assert control.passed and 'with all of them active' in control.detail  # the every-expert MoE keeps 0.9
  assert '2,416 parameters: 0.298' in control.detail and '7,152 parameters: 0.301' in control.detail  # per MoE size
  ok = mc.rules(_sel(moe=(0.5, 0.9)), 'full')[3]  # routing matters and the control passes: the refutation stands
  assert ok.outcome == NR and all(c.passed for c in ok.premises)
  assert ok.points[-4:] == tuple(f'moe_k4a_e1000_n{n}: experts=4' for n in (256, 512, 1024, 2048))
  (c2,) = [c for c in v[4].premises if c.name.startswith('premise: routing matters')]
  assert c2.passed and 'needed only for a not reproduced' in c2.detail
  mem = mc.memorization_rows(_sel(moe=(0.3, 0.9)))
  pairs = mc.moe_pairs(mc.peaks(mc.family(mem, 1, 1000)), mc.peaks(mc.family(mem, 0, 1000)))
  small = pairs[pairs[mc.SIZE] == 2416]
  want = rules_lib.ratio_of_means(small['moe_bpa'], small['dense_bpa'])[0]
  dense = mc.peaks(mc.family(mem, 0, 1000))
  smallest = dense[dense[mc.SIZE] == dense[mc.SIZE].min()].set_index(mc.SEED)
  clamped = (smallest['bits_stored'] / smallest[mc.SIZE]).loc[small[mc.SEED]].to_numpy()
  assert want == pytest.approx(0.979, abs=0.001) and np.allclose(small['dense_bpa'], clamped)  # below the range


def test_an_moe_refutation_stands_only_on_its_control():
  """Rule 3's not reproduced needs the same experts with every one active (top-4 of 4) to keep >= 1/1.3 of dense
  per total parameter (rule 3 on them); where they do not, it is invalid with both numbers; a reproduced does not
  read them. One control serves top-1 and top-2."""
  name = 'premise: a positive control for a refutation (the same experts, all active, keep >= 1/1.3)'
  mem = mc.memorization_rows(_sel(moe=(0.5, 0.9), control=0.5))
  every = mc.family(mem, mc.control_k(mc.SETTINGS['full']), 1000, control=True)
  control = mc.all_experts_control(every, mc.family(mem, 0, 1000), mc.SETTINGS['full'])
  assert control.outcome == NR and control.statistic == pytest.approx(0.5, abs=0.02) and control.n == 5
  assert mc.control_k(mc.SETTINGS['full']) == 4 and 'all active (top-4)' in control.claim
  v = mc.rules(_sel(moe=(0.5, 0.9), control=0.5), 'full')
  assert v[3].outcome == INV and v[3].raw_outcome == NR and [c.name for c in v[3].failed_checks] == [name]
  assert f'{control.statistic:+.4g}' in v[3].detail and 'needed for a not reproduced' in v[3].detail
  assert v[4].outcome == R  # top-2 reproduced: the control (0.5) shown, not needed
  (c,) = [c for c in v[4].premises if c.name == name]
  assert c.passed and 'needed only for a refutation' in c.detail and not c.points
  assert mc.family(mem, 4, 1000).empty and set(every[mc.SIZE]) == {2416}  # the control at the smaller size only
  assert mc.rules(_sel(moe=(0.5, 0.9), control=0.9), 'full')[3].outcome == NR  # the every-expert MoE keeps 0.9


def test_claims_declare_kind_scope_and_premise_per_verdict():
  claims, vs = mc.ABLATION.claims, mc.rules(_sel(), 'full')
  assert len(claims) == len(vs) == 5
  assert [c.kind for c in claims] == [stats.MAGNITUDE, stats.MAGNITUDE, stats.EXISTENCE] + [stats.MAGNITUDE] * 2
  assert all(c.scope and c.premise for c in claims) and all(v.premises for v in vs)
  assert 'batch N/8' in claims[0].scope and '8 units wide' in claims[3].scope
  for scale in ('smoke', 'quick'):  # every scale gives every declared verdict
    assert set(mc.SETTINGS[scale]['exposures']) == set(mc.CLAIMS)
  # verdict 2's three null -> positive changes (the over-cap partial extension; the tie rule read through the
  # ladder; the cap raised with the MoE control, which bought its doublings)
  assert [c.to_positive for c in mc.ABLATION.changes if c.to_positive] == [(2,), (2,), (2,)]
  assert all(set(c.verdicts) <= set(range(1, 6)) and c.date and c.change and c.outcome for c in mc.ABLATION.changes)


def test_moe_pairs_interpolate_the_dense_arm_per_seed():
  dense_top = pd.DataFrame({mc.SEED: 0, mc.SIZE: [1000, 4000], 'bits_stored': [1000.0, 16000.0]})  # 1 and 4 bits/param
  moe_top = pd.DataFrame(
    {mc.SEED: 0, mc.SIZE: [500, 2000, 8000], 'active': [250, 500, 1000], 'bits_stored': [500.0, 2000.0, 8000.0]}
  )
  r = mc.moe_pairs(moe_top, dense_top)
  np.testing.assert_allclose(r['dense_bpp'], [1.0, 2.0, 4.0])  # clamped, log-log midpoint, clamped
  np.testing.assert_allclose(r['moe_bpp'], [1.0, 1.0, 1.0])
  np.testing.assert_allclose(r['moe_bpa'], [2.0, 4.0, 8.0])  # per active parameter (shown, not judged)
  assert mc.moe_pairs(moe_top.assign(**{mc.SEED: 1}), dense_top).empty  # no dense run of that seed: no pair


def test_moe_verdict_is_a_ratio_of_means_with_its_bootstrap_p():
  sel = _sel(moe=(0.78, 0.65), noise=0.05)
  vs = mc.rules(sel, 'full')
  mem = mc.memorization_rows(sel)
  pairs = mc.moe_pairs(mc.peaks(mc.family(mem, 1, 1000)), mc.peaks(mc.family(mem, 0, 1000))).groupby(mc.SEED).mean()
  r, lo, hi = rules_lib.ratio_of_means(pairs['moe_bpp'], pairs['dense_bpp'])
  assert (vs[3].statistic, *vs[3].ci) == pytest.approx((r, lo, hi))
  assert vs[4].raw_outcome == NR and vs[4].p_value < 0.05  # (its routing premise sits on its bar: not asserted)
  for v in vs[3:]:  # p < 0.05 exactly when the 95% CI decides
    assert (v.raw_outcome != INC) == (v.p_value < 0.05)


def test_ratio_p_inverts_the_bootstrap_ci():
  rng = np.random.default_rng(1)
  for shift in (0.7, 0.76, 0.8, 0.9):
    a, b = shift * (1 + 0.05 * rng.normal(size=6)), 1 + 0.05 * rng.normal(size=6)
    _, lo, hi = rules_lib.ratio_of_means(a, b)
    assert (mc.ratio_p(a, b, 0.77) < 0.05) == (not lo <= 0.77 <= hi)


def test_present_on_a_synthetic_result(tmp_path):
  sel = _sel()
  vs = stats.holm(mc.rules(sel, 'full'))
  shown = ablations.get('memorization_capacity').present(
    base.Result(sel, pd.DataFrame(), sel, sel, vs, 'full'), base.Context(str(tmp_path), 'full')
  )
  assert all((tmp_path / f.file).stat().st_size > 1000 for f in shown.figures) and len(shown.figures) == 2
  peaks = shown.tables[0].frame
  assert len(peaks) == 2 * len(S['d_ffs']) + len(mc.MOE_TOP_KS) * len(S['moe_facts']) + len(S['control_facts'])
  assert (peaks['router'] == 'every expert active (control)').sum() == len(S['control_facts'])
  dense = peaks[(peaks[mc.K] == 0) & (peaks[mc.E] == 1000)].set_index('d_ff')
  assert list(dense['peak N']) == [1024, 1024, 2048] and set(dense['seeds']) == {5}
  np.testing.assert_allclose(dense['bits/non-emb param'], 2.0, rtol=0.02)
  moe = shown.tables[2].frame  # per top-k and MoE size
  assert list(moe[mc.K]) == [1, 1, 2, 2, 4] and list(moe['total non-emb params']) == [2416, 7152] * 2 + [2416]
  assert list(moe['router']) == ['learned'] * 4 + ['every expert active (control)']
  np.testing.assert_allclose(moe['MoE / dense'], [0.9] * 5, rtol=0.03)
  assert 'MoE top-2' in shown.headline


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_arms_validate_share_one_program_per_arm_and_keep_the_exposures(scale):
  s, policy = mc.SETTINGS[scale], mc.ABLATION.regimes[scale]
  arms = mc.arms(scale)
  for arm in arms:
    steps = policy.steps * arm.steps_factor
    for t in (steps // 2, steps):
      runs = sweep.expand(
        arm.base, [{**o, **(arm.budget or base.budget)(t), 'train.seed': 0} for o in arm.points.values()]
      )
      c = runs[0].config
      if arm.name == 'random_labels':
        assert not arm.tuned and c.train.learning_rate == 1e-2 and t in (s['rl_steps'], s['rl_steps'] // 2)
        continue
      k_, h, e_, n_ = mc._ARM.match(arm.name).groups()
      top_k, e, n, control = int(k_ or 0), int(e_), int(n_), h == 'a'
      assert c.model.moe.router == ('softmax_topk' if top_k else c.model.moe.router)
      assert not control or {o.get(mc.EXPERTS) for o in arm.points.values()} == {top_k} == set(s['control_facts'])
      assert c.model.freeze_embeddings and c.task.num_facts == n and c.train.steps * c.train.batch_size == e * n
      assert steps == s['exposures'][e] and len(sweep.group_runs(runs)) == (len(runs) if top_k else 1)
      experts = {o.get(mc.EXPERTS) for o in arm.points.values()}
      assert experts <= set(s['moe_facts']) if top_k else experts == {None}
      assert (c.model.moe.num_experts in s['moe_facts']) if top_k else c.model.moe.num_experts == 0
      assert not top_k or (c.model.moe.top_k == top_k and c.model.d_ff == s['moe_width'])
      moe_rates = mc.MOE_RATES_CONTROL if control else mc.MOE_RATES if top_k == 1 else mc.MOE_RATES_UP
      assert arm.rates == (moe_rates[scale] if top_k else mc.E_RATES.get(scale, {}).get(e))
  assert max(s['rl_points']) > mc.RL_PARAMS and mc.RL_QUARTER in s['rl_points']  # the random-label arm can fail
  rl = sweep.expand(arms[-1].base, [arms[-1].points[f'N={mc.RL_QUARTER}']])[0].config
  assert models.model_counts(rl, tasks.build_task(rl))['num_params'] == mc.RL_PARAMS


def test_parameter_counts_match_the_formulas():
  for arm in mc.arms('full')[:-1]:
    for run in sweep.expand(arm.base, list(arm.points.values())):
      c = models.model_counts(run.config, tasks.build_task(run.config))
      m = run.config.model
      w, x, top_k = m.d_ff, m.moe.num_experts, m.moe.top_k if m.moe.num_experts else 0
      assert c['num_trainable_params'] == (moe_size(x, w) if top_k else dense_size(w))
      if top_k:
        assert c['num_active_ffn_params'] == moe_active(x, w, top_k)
  assert [moe_size(x, S['moe_width']) for x in S['moe_facts']] == [2416, 7152]  # inside the dense range:
  assert [dense_size(f) for f in S['d_ffs']] == [2192, 4304, 8528]
  assert moe_size(16, 1) == 2128  # the arm before issue 46: 3% below it


@pytest.mark.slow
def test_smoke_through_the_entry_point(study_smoke):
  returncode, _, stderr, out = study_smoke('memorization_capacity')  # the run the every-ablation smoke test reads too
  assert returncode == 0, stderr
  report = (out / 'report.md').read_text()
  assert 'peak bits per non-embedding parameter' in report and '## Regime' in report
  assert (out / 'bits_vs_params.png').exists() and (out / 'moe_and_random_labels.png').exists()


def test_the_report_lists_the_batch_size_its_budgets_set_as_swept_not_fixed():
  """An exposure arm's budget sets the batch (E N / steps): the Setup shows the values the runs used, not the base
  config's batch (a review found `train.batch_size=256` printed for runs at 64-1,024)."""
  arm = next(a for a in mc.arms('full') if a.name == 'e1000_n1024')
  assert 'train.batch_size' in report_lib.varied_keys(arm)
  assert 'train.batch_size' not in report_lib.fixed_settings(arm.base, report_lib.varied_keys(arm))
  frame = pd.DataFrame({'train.batch_size': [512, 256, 128], 'train.learning_rate': 0.1, 'train.steps': [1, 2, 4]})
  assert report_lib.swept_values(frame, arm)['train.batch_size'] == [128, 256, 512]
