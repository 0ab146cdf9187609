"""The regime policy (ablations/regime.py) on synthetic grids and sweeps, and its loop in the runner."""

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from experiments import publish as publish_lib
from ffn_research import models
from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research import tasks
from ffn_research.ablations import base
from ffn_research.ablations import cap as cap_lib
from ffn_research.ablations import checks
from ffn_research.ablations import judge
from ffn_research.ablations import regime
from ffn_research.ablations import report as report_lib
from ffn_research.ablations import runner
from ffn_research.config import default_config

RATES = (1e-3, 1e-2, 1e-1)
POLICY = regime.Regime(rates=RATES, steps=100, seeds=4, cap=1e9)


def frame(loss, points=('a',), steps=(50, 100), rates=RATES, seeds=4, status=None):
  """A synthetic sweep: loss(point, rate, steps, seed) -> float; status(point, rate, seed) -> str."""
  rows = []
  for p in points:
    for t in steps:
      for r in rates:
        for s in range(seeds):
          st = status(p, r, s) if status else 'completed'
          rows.append(
            {
              'point': p,
              regime.LR: r,
              regime.STEPS: t,
              regime.SEED: s,
              'status': st,
              'eval_loss': loss(p, r, t, s) if st == 'completed' else math.nan,
            }
          )
  return pd.DataFrame(rows)


def state(points=('a',), rates=RATES, steps=100):
  return {p: regime.PointState(list(rates), steps) for p in points}


def valley(best):
  return lambda p, r, t, s: (math.log10(r) - math.log10(best)) ** 2 + 0.01 * s


def test_interior_rate_passes_and_tune_picks_it():
  f = frame(valley(1e-2))
  c = checks.inside_grid('a', f, state()['a'], POLICY)
  assert c.passed and '0.01 chosen' in c.detail
  t = regime.tune(f, state(), POLICY)
  assert t.set_index('level').loc[regime.FULL, 'rate'] == 1e-2 and t.set_index('level').loc[regime.HALF, 'rate'] == 1e-2


def test_edge_rate_triggers_an_extension_for_that_point_only():
  f = frame(lambda p, r, t, s: valley(1.0 if p == 'a' else 1e-2)(p, r, t, s), points=('a', 'b'))
  st = state(('a', 'b'))
  ca, cb = (checks.inside_grid(p, f, st[p], POLICY) for p in ('a', 'b'))
  assert not ca.passed and ca.remedy == stats.HIGHER_RATE and ca.points == ('a',) and cb.passed
  new, actions = regime.extend(st, [ca], POLICY)
  assert new['a'].rates == pytest.approx([1e-3, 1e-2, 1e-1, 0.3]) and new['a'].higher == 1
  assert new['b'].rates == list(RATES) and len(actions) == 1
  added = regime.new_runs(st, new)
  assert added == {'a': [(pytest.approx(0.3), b) for b in (25, 50, 100)]}  # the new rate on the ladder only
  low = frame(valley(1e-5))
  c = checks.inside_grid('a', low, st['a'], POLICY)
  assert c.remedy == stats.LOWER_RATE and regime.extend(st, [c], POLICY)[0]['a'].rates[0] == pytest.approx(1e-3 / 3)

  settled = dataclasses.replace(_verdict(0.5, ('a', 'b')), settled={'a': 'a cannot be read'})
  ra, rb = (judge.rate_check(p, settled, f, st[p], POLICY) for p in ('a', 'b'))
  assert ra.passed and ra.detail == ca.detail + '; not needed: a cannot be read' and rb == cb
  assert not judge.rate_check('a', _verdict(0.5, ('a', 'b')), f, st['a'], POLICY).passed


def test_edge_next_to_a_diverged_rate_passes():
  best_high = valley(1.0)
  f = frame(best_high, rates=RATES + (0.3,), status=lambda p, r, s: 'diverged' if r == 0.3 and s < 3 else 'completed')
  c = checks.inside_grid('a', f, state(rates=RATES + (0.3,))['a'], POLICY)
  assert c.passed, c.detail
  # one seed of four diverged and the survivors are better: the edge is not shown to be stable
  f = frame(best_high, rates=RATES + (0.3,), status=lambda p, r, s: 'diverged' if r == 0.3 and s == 0 else 'completed')
  c = checks.inside_grid('a', f, state(rates=RATES + (0.3,))['a'], POLICY)
  assert not c.passed and c.remedy == '' and '1/4 seeds' in c.detail


def test_extensions_stop_at_the_regime_limit():
  st = {'a': regime.PointState([1e-2, 3e-2, 9e-2], 100, higher=2)}
  f = frame(valley(1.0), rates=(1e-2, 3e-2, 9e-2))
  c = checks.inside_grid('a', f, st['a'], POLICY)
  assert not c.passed and c.remedy == '' and '2 extensions already' in c.detail
  assert 'next step: rate 0.27 at every budget and seed (unpriced: no timed runs' in c.detail
  assert regime.extend(st, [c], POLICY) == (st, [])
  timed = f.assign(wall_time_s=2.0)  # the edge rate's runs: 2 budgets x 4 seeds x 2 s
  assert (
    '(~16 run-seconds on this machine, as its runs at 0.09 took)'
    in checks.inside_grid('a', timed, st['a'], POLICY).detail
  )


def test_an_edge_the_verdict_reads_the_same_at_every_rate_passes_reported():
  """A spent rate edge on a point that no rate moves (a control cell full at every rate) is not a failure; one
  whose reading moves with the rate, or a check on two points, still fails."""
  st = {'a': regime.PointState([1e-2, 3e-2, 9e-2], 100, higher=2)}
  f = frame(valley(1.0), rates=(1e-2, 3e-2, 9e-2))
  edge = checks.inside_grid('a', f, st['a'], POLICY)
  v = _verdict(0.5)
  (same,) = judge._immaterial_edges([edge], lambda p, r: v, v, st, f)
  assert same.passed and same.remedy == '' and 'reads the same at each of its 3 rates (0.5, reproduced' in same.detail
  moves = lambda p, r: _verdict(0.5 if r > 0.05 else 0.6)
  assert judge._immaterial_edges([edge], moves, v, st, f) == [edge]
  two = dataclasses.replace(edge, points=('a', 'b'))
  assert judge._immaterial_edges([two], lambda p, r: v, v, st, f) == [two]


def test_spent_doublings_and_rate_ties_name_their_next_step_priced():
  spent = {'a': regime.PointState([1e-2, 1e-1], 100, doublings=POLICY.max_doublings)}
  f = frame(valley(1e-2)).assign(wall_time_s=1.5)  # at T = 100: the kept rates 0.01 and 0.1 (not 0.001), 4 seeds
  ladder = checks.stability(stats.MAGNITUDE, _ladder(1.5, 1.0, 0.5), spent, POLICY)
  assert not ladder.passed and ladder.remedy == '' and 'no doubling left' in ladder.detail
  (priced,) = judge._spent([ladder], spent, POLICY, f)
  assert priced.detail.endswith(
    "next step: a doubling past the regime's 2 (~24 run-seconds on this machine: the runs at T, twice as long)"
  )
  assert judge._spent([ladder], spent, POLICY) == (ladder,)  # a verdict's gated checks: the text stays
  tie = stats.Check(checks.RATE_TIE, False, 'a at T at tied rate 0.03', demote=stats.INCONCLUSIVE)
  ties = [('a at T', 0.03, _verdict(1.5), _verdict(0.5))]
  assert (
    '; next step: twice the seeds at a (~18 run-seconds on this machine'
    in judge._priced_tie(tie, ties, spent, f).detail
  )
  assert judge._priced_tie(dataclasses.replace(tie, passed=True), ties, spent, f).detail == tie.detail
  failed = stats.gate(_verdict(0.5), [stats.premise_check('fills', 0.9, (0.9, 0.9), 0.95)])  # a tie's own premise
  named = checks.rate_tie([('a at T', 0.1, failed, _verdict(0.5))])
  assert (
    not named.passed and 'a at T at tied rate 0.1: 0.5 (invalid, failed: premise: fills; chosen rates' in named.detail
  )


def test_a_study_check_s_doubling_remedy_is_dropped_once_its_points_have_every_doubling():
  """A study check may name doubled steps as its remedy; once the regime's doublings are spent the loop can buy
  nothing for it, so the judge drops the remedy (and the verdict reads 'no extension remedies it')."""
  c = stats.Check('learned', False, 'not yet', remedy=stats.DOUBLE_STEPS, points=('a', 'b'))
  fresh = {'a': regime.PointState([0.01], 100), 'b': regime.PointState([0.01], 100)}
  spent = {p: dataclasses.replace(s, doublings=POLICY.max_doublings) for p, s in fresh.items()}
  assert judge._spent([c], fresh, POLICY) == (c,)
  (dropped,) = judge._spent([c], spent, POLICY)
  assert (
    dropped.remedy == '' and dropped.detail == c.detail and not regime.fixable([stats.gate(_verdict(0.5), [dropped])])
  )
  one_left = {**spent, 'b': fresh['b']}
  assert judge._spent([c], one_left, POLICY) == (c,)  # a point with a doubling left: the loop can still buy it
  assert judge._spent([dataclasses.replace(c, passed=True)], spent, POLICY)[0].remedy == stats.DOUBLE_STEPS


def test_a_doubling_keeps_the_chosen_rate_and_its_neighbours_and_an_edge_restores_a_dropped_rate():
  five = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
  st = {'a': regime.PointState(list(five), 100, higher=2)}  # no extension left above: only a dropped rate can
  flip = checks.stability(stats.MAGNITUDE, _ladder(1.5, 1.0, 0.5), st, POLICY)
  new, actions = regime.extend(st, [flip], POLICY, chosen={'a': 3e-3})
  assert new['a'].rates == pytest.approx([1e-3, 3e-3, 1e-2]) and new['a'].dropped == pytest.approx([3e-2, 1e-1])
  assert new['a'].steps == 200 and 'rates 0.001, 0.003, 0.01 kept' in actions[0]
  assert sorted(regime.new_runs(st, new)['a']) == sorted((r, 200) for r in (1e-3, 3e-3, 1e-2))  # 3 of 5 at 2T
  assert st['a'].rates == list(five) and st['a'].dropped == []  # the old state is not touched
  # at 2T the best moved to the kept grid's top: the dropped 0.03 comes back, no extension is spent
  f = frame(valley(3e-2), steps=(100, 200), rates=(1e-3, 3e-3, 1e-2))
  c = checks.inside_grid('a', f, new['a'], POLICY)
  assert not c.passed and c.remedy == stats.HIGHER_RATE, c.detail
  back, actions = regime.extend(new, [c], POLICY)
  assert back['a'].rates == pytest.approx([1e-3, 3e-3, 1e-2, 3e-2]) and back['a'].dropped == pytest.approx([1e-1])
  assert back['a'].higher == 2 and 'restored above' in actions[0]
  # its runs at 50 and 100 steps (now T/4, T/2) are on disk and reused (next_extension leaves them out of the cost)
  assert regime.new_runs(new, back) == {'a': [(pytest.approx(3e-2), b) for b in (50, 100, 200)]}
  assert regime.state_from_json(regime.state_to_json(back)) == back
  assert regime.state_from_json({'a': {'rates': [0.1], 'steps': 4}})['a'].dropped == []  # a state from before


def _verdict(stat, points=('a',)):
  v = rules_lib.threshold([stat - 0.01, stat, stat + 0.01], level=1.0, direction='below', claim='c')
  return dataclasses.replace(v, points=points)


def _ladder(*stats_, points=('a',)):
  """Threshold verdicts (below 1.0) with these statistics, ascending budgets."""
  return [_verdict(x, points) for x in stats_]


def _paired(mean, sd=0.1, n=8, points=('a',)):
  """A paired 'less' verdict on n differences with this mean and spread (sign claims)."""
  d = mean + sd * np.linspace(-1, 1, n)
  return dataclasses.replace(rules_lib.paired(d, np.zeros(n), expect='less', claim='c'), points=points)


def test_a_sign_claim_shrinking_toward_a_floor_is_stable_and_a_flip_is_not():
  st = state()
  shrink = checks.stability(stats.SIGN, [_paired(-0.9), _paired(-0.3), _paired(-0.1, sd=0.02)], st, POLICY)
  assert shrink.passed and 'the same decided outcome at every budget' in shrink.detail, shrink.detail
  # the magnitude rule would refuse the same ladder: the last change is not below half the distance to 0
  assert not checks.stability(
    stats.MAGNITUDE, [_paired(-0.9), _paired(-0.3), _paired(-0.1, sd=0.02)], st, POLICY
  ).passed
  flip = checks.stability(stats.SIGN, [_paired(0.3), _paired(-0.3), _paired(-0.3)], st, POLICY)
  assert not flip.passed and flip.remedy == stats.DOUBLE_STEPS and flip.demote == stats.INVALID
  undecided = checks.stability(stats.SIGN, [_paired(-0.3), _paired(-0.3), _paired(0.0)], st, POLICY)
  assert undecided.passed and 'undecided at T' in undecided.detail


def test_a_slope_that_moves_more_at_the_last_doubling_is_not_stable():
  st = state()

  def slope(x):
    v = rules_lib.threshold([x - 0.01, x, x + 0.01], level=-1.5, direction='above', claim='s')
    return dataclasses.replace(v, points=('a',))

  moving = checks.stability(stats.MAGNITUDE, [slope(-0.93), slope(-0.96), slope(-1.12)], st, POLICY)
  assert not moving.passed and 'for 2 more doublings it moves 5.4, >=' in moving.detail
  assert moving.remedy == stats.DOUBLE_STEPS
  settling = checks.stability(stats.MAGNITUDE, [slope(-0.8), slope(-0.93), slope(-0.96)], st, POLICY)
  assert settling.passed, settling.detail
  new, actions = regime.extend(st, [moving], POLICY)  # the T and T/2 runs become T/2 and T/4: only 2T is new
  assert new['a'].steps == 200 and sorted(regime.new_runs(st, new)['a']) == sorted((r, 200) for r in RATES)
  assert regime.estimate_cost(regime.new_runs(st, new), lambda p: 0.01, seeds=4) == pytest.approx(0.01 * 200 * 4 * 3)
  capped = checks.stability(
    stats.MAGNITUDE,
    [slope(-0.93), slope(-0.96), slope(-1.12)],
    {'a': regime.PointState(list(RATES), 400, doublings=2)},
    POLICY,
  )
  assert not capped.passed and capped.remedy == '' and 'no doubling left' in capped.detail


def test_an_existence_claim_with_a_rung_or_a_rate_past_the_boundary_is_not_refuted():
  """'can reach a mean below 1': not reproduced at T (1.3) with a settled ladder is refuted only at the largest budget
  the regime allows (every doubling spent) and only if no budget and no other rate crossed 1; before that the
  budget is the remedy and the verdict inconclusive."""
  st = {p: dataclasses.replace(s, doublings=POLICY.max_doublings) for p, s in state().items()}
  settled = _ladder(1.6, 1.35, 1.3)
  assert settled[-1].raw_outcome == stats.NOT_REPRODUCED
  ok = checks.stability(stats.EXISTENCE, settled, st, POLICY)
  assert ok.passed, ok.detail
  early = checks.stability(stats.EXISTENCE, settled, state(), POLICY)
  assert not early.passed and early.remedy == stats.DOUBLE_STEPS and early.demote == stats.INCONCLUSIVE
  assert f'0 of {POLICY.max_doublings} doublings spent' in early.detail
  assert stats.gate(settled[-1], [early]).outcome == stats.INCONCLUSIVE
  rung = checks.stability(stats.EXISTENCE, _ladder(0.9, 1.35, 1.3), state(), POLICY)
  assert not rung.passed and 'crossed the boundary (T/4)' in rung.detail and rung.remedy == stats.DOUBLE_STEPS
  rate = checks.stability(stats.EXISTENCE, settled, st, POLICY, others=[('a at rate 0.1', _verdict(0.8))])  # spent
  assert not rate.passed and 'a at rate 0.1' in rate.detail
  reached = checks.stability(stats.EXISTENCE, _ladder(1.6, 1.2, 0.5), st, POLICY)
  assert reached.passed and 'reached at T' in reached.detail


def test_a_statistic_in_its_noise_band_is_inconclusive_never_invalid():
  st = state()
  t = _paired(0.02, sd=1.0)  # CI across 0: inconclusive at T
  c = checks.stability(stats.MAGNITUDE, [_paired(0.9, sd=1.0), _paired(-0.5, sd=1.0), t], st, POLICY)
  assert not c.passed and c.demote == stats.INCONCLUSIVE
  v = stats.gate(t, [c])
  assert v.outcome == stats.INCONCLUSIVE and v.outcome != stats.INVALID


def test_a_failed_premise_gives_invalid_never_not_reproduced():
  v = rules_lib.threshold([1.5, 1.6, 1.55], level=1.0, direction='below', claim='c')
  assert v.outcome == stats.NOT_REPRODUCED
  control = stats.premise_check('routing matters', 0.01, (-0.02, 0.04), -math.inf, -0.1, what='learned - dense')
  gated = stats.gate(v, [control])
  assert control.role == stats.PREMISE and control.name.startswith('premise')
  assert (
    gated.outcome == stats.INVALID and gated.raw_outcome == stats.NOT_REPRODUCED and 'routing matters' in gated.detail
  )
  assert stats.as_premise(stats.Check('learned', True, 'x')).role == stats.PREMISE


def test_a_rate_tie_is_detected_and_read_at_both_rates():
  """Rates 1e-2 and 1e-1 give the same mean loss within the seeds' noise; the verdict's outcome differs between them."""
  f = frame(lambda p, r, t, s: 1.0 + (0.05 if s % 2 else -0.05) * (1 if r == 1e-1 else -1) + (r == 1e-3), steps=(100,))
  st = state()
  assert checks.tied_rates('a', f, st['a'], POLICY, steps=100) == [pytest.approx(1e-1)] or checks.tied_rates(
    'a', f, st['a'], POLICY
  ) == [pytest.approx(1e-2)]
  v = _verdict(0.5)
  c = checks.rate_tie([('a at T', 1e-1, _verdict(1.5), v)])
  assert not c.passed and c.demote == stats.INCONCLUSIVE and 'a at T at tied rate 0.1: 1.5' in c.detail
  assert 'chosen rates 0.5' in c.detail
  assert checks.rate_tie([('a at T/2', 1e-1, _verdict(0.6), v)]).passed
  assert checks.rate_tie([]).passed
  # an existence claim reached at T: one rate reaching it shows "can reach"; a tied rate that does not undoes nothing
  reached = checks.rate_tie([('a at T', 1e-1, _verdict(1.5), v)], reached=True)
  assert reached.passed and 'undoes nothing' in reached.detail and 'a at T at tied rate 0.1: 1.5' in reached.detail
  # a tie whose tied rate makes the ladder stable does not withhold the doubling the unsettled ladder needs (the
  # budget is its remedy; expansion_ratio's run stopped after one pass when it did); if no doubling is left, the
  # failure is inconclusive, not invalid
  st = state()
  moved = checks.stability(stats.MAGNITUDE, _ladder(0.5, 1.5, 0.5), st, POLICY, ties=[('T/2', _verdict(0.5))])
  assert (
    not moved.passed
    and moved.demote == stats.INCONCLUSIVE
    and moved.remedy == stats.DOUBLE_STEPS
    and 'a tied rate at T/2 makes the ladder stable' in moved.detail
  )
  spent = {p: dataclasses.replace(s, doublings=POLICY.max_doublings) for p, s in st.items()}
  last = checks.stability(stats.MAGNITUDE, _ladder(0.5, 1.5, 0.5), spent, POLICY, ties=[('T/2', _verdict(0.5))])
  assert last.remedy == '' and last.demote == stats.INCONCLUSIVE and 'no doubling left' in last.detail
  # a tie with which the ladder fails too: the budget has not settled, so T doubles (the tie is named)
  unsettled = checks.stability(stats.MAGNITUDE, _ladder(0.5, 1.5, 0.5), st, POLICY, ties=[('T/2', _verdict(1.4))])
  assert not unsettled.passed and unsettled.remedy == stats.DOUBLE_STEPS
  assert 'rate ties at T/2: none of them makes the ladder stable' in unsettled.detail
  assert unsettled.demote == stats.INVALID
  # a rate 1,000x worse with heavy tails (one seed blows up) is no tie: positive metrics are compared on their log
  blowup = frame(lambda p, r, t, s: (0.03 + 0.001 * s) if r == 1e-2 else (50.0 if s == 0 else 2.0), steps=(100,))
  assert checks.tied_rates('a', blowup, st['a'], POLICY, steps=100) == []
  far = frame(valley(1e-2), steps=(100,))  # a clear optimum: no tie
  assert checks.tied_rates('a', far, st['a'], POLICY) == []


def test_a_rate_worse_on_every_seed_is_no_tie_however_wide_its_interval():
  """expansion_ratio's 38k r = 8 at T: 0.06 against the chosen 0.02, worse on every seed by 0.04-1.4 bits, with two
  stuck seeds widening the paired CI of the log difference to [-0.10, +0.70]: not a tie. Mixed signs still are."""
  chosen, stuck = [1.465, 1.505, 1.466, 1.469], [1.775, 2.874, 1.99, 1.555]
  table = {1e-3: [3.0] * 4, 1e-2: chosen, 1e-1: stuck}
  f = frame(lambda p, r, t, s: table[r][s], steps=(100,))
  d = np.log(np.array(stuck) / np.array(chosen))
  _, lo, hi = stats.mean_ci(d)
  assert lo < 0 < hi and (d > 0).all()  # the old test alone called it tied
  assert checks.tied_rates('a', f, state()['a'], POLICY, steps=100) == []
  table[1e-1] = [1.40, 2.874, 1.99, 1.43]  # better on two seeds: within the noise, a tie
  f = frame(lambda p, r, t, s: table[r][s], steps=(100,))
  assert checks.tied_rates('a', f, state()['a'], POLICY, steps=100) == [pytest.approx(1e-1)]


def _rung(x, half, level=1.0, direction='below'):
  """A threshold verdict with statistic x and a 95% t CI of half-width `half` (3 values)."""
  spread = half / scipy_stats.t.ppf(0.975, 2) * math.sqrt(3)
  v = rules_lib.threshold([x - spread, x, x + spread], level=level, direction=direction, claim='s')
  return dataclasses.replace(v, points=('a',))


@pytest.mark.parametrize(
  'ladder, half, level, direction, stable',
  [
    ((-0.280, -0.266, -0.249), 0.0264, 0.25, 'above', True),  # moe_memorization_vs_reasoning's flat top-2 overall
    ((0.0, 0.04, 0.13), 0.12, 0.6, 'below', False),  # the change grows 2.25x: 2 more doublings cross; a wide CI
    ((0.0, 0.04, 0.13), 0.05, 0.6, 'below', False),  # is no excuse
    ((0.876, 0.886, 0.910), 0.03, 1.01, 'below', False),  # grows 2.4x, 0.1 from the boundary
    ((0.5, 0.549, 0.597), 0.02, 1.0, 'below', True),  # changes 0.049, 0.048 and 0.048, 0.049: the same answer
    ((0.5, 0.548, 0.597), 0.02, 1.0, 'below', True),
    ((0.0, 0.01, 0.03), 0.01, 1.0, 'below', True),  # doubling changes, but 0.12 of the 0.485 allowed
    ((-0.8, -0.93, -0.96), 0.01, -1.5, 'above', True),  # settling
    ((-0.93, -0.96, -1.12), 0.01, -1.5, 'above', False),  # the last change larger
  ],
)
def test_a_magnitude_ladder_is_stable_when_its_projected_drift_stays_under_half_the_distance(
  ladder, half, level, direction, stable
):
  """The last change c, kept up at its ratio r to the one before for two more doublings, c (r + r^2), must stay under
  half the distance to the boundary (the ladders of the cold review of 2026-11-30: a flat ladder far from its
  boundary settles; one whose change grows does not, whatever its CI; near-identical ladders agree)."""
  c = checks.stability(stats.MAGNITUDE, [_rung(x, half, level, direction) for x in ladder], state(), POLICY)
  assert c.passed == stable, c.detail


def test_a_tied_rung_never_lends_its_own_interval_as_the_noise_allowance():
  """A magnitude ladder 0.50, 0.52, 0.60 at the chosen rates: the changes grow (0.02, 0.08) beyond the noise of the
  chosen CI at T. A tie at T with the same value but a CI 2 wide would call 0.08 noise and settle it; the allowance
  comes from the chosen rates' CI, so it does not, and the failure stays invalid (the budget is its remedy)."""
  ladder = _ladder(0.5, 0.52, 0.6)
  wide = rules_lib.threshold([-0.4, 0.6, 1.6], level=1.0, direction='below', claim='c')
  assert wide.ci[1] - wide.ci[0] > 2 and wide.statistic == pytest.approx(0.6)
  c = checks.stability(stats.MAGNITUDE, ladder, state(), POLICY, ties=[('T', wide)])
  assert not c.passed and c.demote == stats.INVALID and 'none of them makes the ladder stable' in c.detail
  assert checks._settles(wide, [0.5, 0.52, 0.6])[0] and not checks._settles(wide, [0.5, 0.52, 0.6], ladder[-1].ci)[0]


def test_one_outlying_seed_makes_a_verdict_inconclusive():
  """Five seeds decide 'mean below 1'; a sixth, outlying seed widens the CI past 1. Read the other way: the verdict
  of the six is decided only if seed 5 is left out, so no single seed may decide it."""
  six = np.array([0.2, 0.1, 0.15, 0.12, 0.11, 2.0])
  rule = lambda x: rules_lib.threshold(x, level=1.0, direction='below', claim='c')
  drops = [(s, rule(np.delete(six, s))) for s in range(6)]
  assert rule(six).outcome == stats.INCONCLUSIVE and drops[5][1].outcome == stats.REPRODUCED
  assert checks.one_seed(rule(six), drops).passed  # undecided: nothing for one seed to decide
  five = rule(six[:5])
  flip = checks.one_seed(five, [(5, rule(six))])  # as if seed 5 were the one a decided verdict could lose
  assert not flip.passed and 'without seed 5' in flip.detail and flip.demote == stats.INCONCLUSIVE
  assert stats.gate(five, [flip]).outcome == stats.INCONCLUSIVE
  steady = np.array([0.2, 0.1, 0.15, 0.12, 0.11, 0.14])
  assert checks.one_seed(rule(steady), [(s, rule(np.delete(steady, s))) for s in range(6)]).passed


def _measured(x, half=0.1, points=('a',), settle=0.1, max_width=1.0):
  v = stats.measure('m', x, (x - half, x + half), 't', 5, settle=settle, max_width=max_width)
  return dataclasses.replace(v, points=points)


def test_a_measurement_is_measured_only_when_precise_settles_within_its_declared_margin_and_a_tie_demotes_it():
  """A measurement has no region: `measured` with a finite CI at most its declared width (else inconclusive); its
  ladder settles when the changes shrink and the last is under the margin declared before the run (0.1 here), however
  wide its CI; a tie that moves it outside its CI makes it inconclusive, a failed ladder invalid; Holm never touches
  it, and leaving one seed out of a mean cannot move it outside its t CI (n/a)."""
  assert _measured(1.0).outcome == stats.MEASURED and _measured(1.0).boundaries == ()
  for ci in ((math.nan, math.nan), (1.0, 1.0)):  # no CI, or a degenerate one (every seed pinned at one value)
    v = stats.measure('m', 1.0, ci, 't', 3, settle=0.1, max_width=1.0)
    assert v.outcome == stats.INCONCLUSIVE and 'non-degenerate' in v.detail
  wide = stats.measure('m', 2.0, (1.0, 3.0), 't', 3, settle=0.05, max_width=0.3, relative=True)
  assert wide.outcome == stats.INCONCLUSIVE and 'the CI is 1 of the value wide' in wide.detail
  assert wide.extra['settle'] == pytest.approx(0.1) and wide.extra['max_width'] == pytest.approx(0.6)
  st = state()
  ok = checks.stability(stats.MEASUREMENT, [_measured(1.0), _measured(1.5), _measured(1.55)], st, POLICY)
  assert ok.passed and 'the last < the settling margin (0.1)' in ok.detail and 'it moves 0.0055, <' in ok.detail
  late = checks.stability(stats.MEASUREMENT, [_measured(1.0), _measured(1.3), _measured(1.45)], st, POLICY)
  assert not late.passed and late.remedy == stats.DOUBLE_STEPS and late.demote == stats.INVALID, late.detail
  assert stats.gate(_measured(1.45), [late]).outcome == stats.INVALID
  noisy = [_measured(1.0, half=0.9), _measured(1.3, half=0.9), _measured(1.45, half=0.9)]  # a wide CI excuses nothing
  assert not checks.stability(stats.MEASUREMENT, noisy, st, POLICY).passed
  c = _measured(1.0)
  tie = checks.rate_tie(
    [('a at T', 1e-1, _measured(1.3), c)], kind=stats.MEASUREMENT, ladder=[_measured(1.0), _measured(1.0), c]
  )
  assert not tie.passed and stats.gate(c, [tie]).outcome == stats.INCONCLUSIVE, tie.detail
  near = checks.rate_tie(
    [('a at T', 1e-1, _measured(1.04), c)], kind=stats.MEASUREMENT, ladder=[_measured(1.0), _measured(1.0), c]
  )
  assert near.passed, near.detail
  seed = checks.one_seed(c, [(0, _measured(1.02)), (1, _measured(1.2))])
  assert seed.passed and not seed.applies
  assert stats.holm([c, _measured(2.0)])[0].outcome == stats.MEASURED


def test_coverage_and_one_budget_checks():
  v = _verdict(0.5, points=('a', 'b'))
  f = frame(valley(1e-2), points=('a', 'b'), status=lambda p, r, s: 'diverged' if p == 'b' and s == 0 else 'completed')
  sel = f[(f[regime.LR] == 1e-2) & (f[regime.STEPS] == 100)]
  c = checks.coverage(v, sel, seeds=4)
  assert not c.passed and c.detail == 'b: 3/4'
  assert checks.coverage(
    v, sel[sel['point'] == 'a'].assign(point='b').pipe(lambda b: pd.concat([sel[sel['point'] == 'a'], b])), seeds=4
  ).passed
  st = {'a': regime.PointState(list(RATES), 200), 'b': regime.PointState(list(RATES), 100)}
  c = checks.one_budget(v, st, {})
  assert not c.passed and c.remedy == stats.DOUBLE_STEPS and c.points == ('b',)
  assert checks.one_budget(v, st, {'a': 2}).passed  # an arm declared at 2 T is at one budget with T


def test_holm_family_is_every_verdict_invalid_at_p_one():
  vs = [
    rules_lib.threshold([0.1, 0.2, 0.15, 0.12], level=1.0, direction='below', claim='a'),
    stats.gate(
      rules_lib.threshold([0.1, 0.2, 0.15, 0.12], level=1.0, direction='below', claim='b'),
      [stats.Check('x', False, 'failed')],
    ),
  ]
  out = stats.holm(vs)
  assert all(v.p_holm is not None for v in out)
  assert out[1].p_holm == 1.0 and out[0].p_holm == pytest.approx(min(1.0, 2 * vs[0].p_value))
  assert out[1].raw_outcome == stats.REPRODUCED and out[1].outcome == stats.INVALID


def test_ratio_of_means_and_wide_and_zero_rules():
  a, b = np.array([2.0, 4.0, 6.0, 8.0]), np.array([1.0, 2.0, 2.0, 3.0])
  r, lo, hi = rules_lib.ratio_of_means(a, b)
  assert r == pytest.approx(a.mean() / b.mean()) and lo < r < hi
  zero = rules_lib.paired([0, 0, 0], [0, 0, 0], expect='less', claim='z')
  assert zero.outcome == stats.INVALID and 'tie of zeros' in zero.detail
  wide = rules_lib.slope(
    [1, 2, 4, 8, 1, 2, 4, 8], [1, 2.5, 3, 9, 1.3, 1.9, 4.5, 7], claimed=1.0, margin=0.5, claim='w', max_width=0.01
  )
  assert wide.outcome == stats.INCONCLUSIVE and 'too wide' in wide.detail


# --------------------------------------------------------------------------- the loop, through the runner


@pytest.fixture(autouse=True)
def _reference_machine(monkeypatch):
  """Caps in these tests are read as if this machine's reference step were the reference machine's (speed 1)."""
  monkeypatch.setattr(cap_lib, 'reference_step_s', lambda: regime.REFERENCE_STEP_S)


def _study(cap_s: float, level: float):
  """A tiny study: two d_ff points; tuning 'metric' is the rate itself (the smallest wins, so the low edge
  extends); the statistic is the mean step budget of the selection, so T/2 vs T flips around `level`."""
  config = default_config()
  config.model.d_ff = 8
  config.train.log_every = 5
  policy = regime.Regime(
    rates=(1e-3, 1e-2), steps=8, seeds=2, cap=cap_s, metric=regime.LR, mode='min', max_extensions=1, max_doublings=1
  )

  def arms(scale):
    del scale
    return [base.Arm('main', config, {'f4': {'model.d_ff': 4}, 'f8': {'model.d_ff': 8}})]

  def rules(sel, scale):
    del scale
    v = rules_lib.threshold(  # the rate moves the number a little, so a rate edge matters (judge._immaterial_edges)
      sel.groupby(regime.SEED)[regime.STEPS].mean() + sel.groupby(regime.SEED)[regime.LR].mean(),
      level=level,
      direction='below',
      claim='mean budget below level',
      min_seeds=2,
    )
    premise = stats.premise_check('runs exist', float(len(sel)), (len(sel), len(sel)), 1.0)
    return [dataclasses.replace(stats.gate(v, [premise]), points=('main: f4', 'main: f8'))]

  def present(result, ctx):
    del ctx
    return base.Presentation(headline=f'{len(result.frame)} runs', tables=[base.Table('tuning', result.tuning)])

  return base.Study(
    name='tiny',
    claim='A tiny claim.',
    citation='Nobody 2026',
    published='-',
    regimes={'smoke': policy},
    arms=arms,
    rules=rules,
    present=present,
    collect=lambda run_dir, row: {'collected_d_ff': int(row['model.d_ff'])},
    claims=(base.Claim(stats.MAGNITUDE, 'two tiny FFNs', 'the runs exist'),),
  )


def test_loop_extends_resumes_and_stops_at_the_cap(tmp_path, capsys, monkeypatch):
  study = _study(cap_s=1e9, level=12)  # stat 8 at T, 4 at T/2: same outcome, |4| >= (12 - 8) / 2: unstable
  report = runner.run_study(study, str(tmp_path), 'smoke', progress=False)
  reg = report['regime']
  # pass 0: low edge at both points and unstable -> one lower rate and one doubling; pass 1: the limits reached
  assert reg['iterations'][0]['actions'] and len(reg['iterations']) == 2
  pts = {p['point']: p for p in reg['points']}
  assert pts['main: f4']['rates'] == pytest.approx([1e-3 / 3, 1e-3, 1e-2]) and pts['main: f4']['steps'] == 16
  assert reg['stopped'].startswith('no extension remedies what failed')
  v = report['verdicts'][0]
  assert v['outcome'] == stats.INVALID and v['p_holm'] == 1.0
  assert {c['name'] for c in v['checks'] if not c['passed']} >= {'stable on the budget ladder (magnitude claim)'}
  # 2 points x 3 rates x 3 budgets (4, 8 and 16 steps planned now; the 2-step runs stay on disk) x 2 seeds
  assert report['status_counts'] == {'completed': 36}
  assert [r['steps'] for r in v['ladder']] == [4, 8, 16] and v['kind'] == stats.MAGNITUDE and v['scope']
  assert report['regime']['spent_s'] > 0 and report['total_wall_time_s'] >= report['wall_time_s']
  md = (tmp_path / 'tiny' / 'report.md').read_text()
  assert '## Regime' in md and '| main: f4 |' in md
  # collect is cached per run
  assert list((tmp_path / 'tiny' / 'main' / 'runs').glob('*/collect.json'))
  capsys.readouterr()
  again = runner.run_study(study, str(tmp_path), 'smoke', progress=False)  # resumes: nothing retrained
  err = capsys.readouterr().err
  assert '0 to run' in err and 'to run in 0 groups' in err
  assert len(again['regime']['iterations']) == 2 and again['verdicts'] == report['verdicts']
  assert 'judged again' not in (tmp_path / 'tiny' / 'report.md').read_text()  # the same commit
  monkeypatch.setattr(report_lib, 'git_commit', lambda *a: 'abc1234')  # a later commit judges the same runs
  runner.run_study(study, str(tmp_path), 'smoke', progress=False)
  assert '(its runs judged again at abc1234)' in (tmp_path / 'tiny' / 'report.md').read_text()


def test_a_changed_regime_keeps_the_wall_time_and_the_passes_so_far(tmp_path):
  """A record written under another regime starts the loop afresh, but its wall time and passes stay (marked)."""
  runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False)
  first = json.loads((tmp_path / 'tiny' / 'regime.json').read_text())
  # a cap the next pass surely fits (a cap of 1 run-second read the runs' timing: under load the extension was
  # priced above it, the loop stopped without a new pass, and the test failed)
  report = runner.run_study(_study(cap_s=1e9, level=12), str(tmp_path), 'smoke', progress=False)
  its = report['regime']['iterations']
  assert its[0].get('earlier') and not its[-1].get('earlier') and report['total_wall_time_s'] > first['wall_s']
  assert '(an earlier policy or regime)' in (tmp_path / 'tiny' / 'report.md').read_text()
  calls = report['regime'][runner.INVOCATIONS]  # each invocation's commit, start and wall, kept across regimes
  assert len(calls) == 2 and sum(c['wall_s'] for c in calls) == pytest.approx(report['total_wall_time_s'])
  assert '; 2 training invocation(s), started' in (tmp_path / 'tiny' / 'report.md').read_text()


def _old_collect(run_dir, row):
  return {'fit_loss': row['loss']}


def _new_collect(run_dir, row):
  return {'tuning_loss': row['val_loss']}


def test_a_changed_collect_never_reads_the_old_cache(tmp_path):
  """collect.json carries its collect's fingerprint: another collect (a renamed metric, here) or a cache
  written before the fingerprint recomputes; the same collect reads the cache."""
  row, calls = {'loss': 1.0, 'val_loss': 2.0}, []
  spy = lambda run_dir, row: calls.append(1) or _old_collect(run_dir, row)
  assert runner._collected(_old_collect, str(tmp_path), row) == {'fit_loss': 1.0}
  assert runner._collected(_new_collect, str(tmp_path), row) == {'tuning_loss': 2.0}
  assert runner._collected(_new_collect, str(tmp_path), {}) == {'tuning_loss': 2.0}  # cached: row unread
  (tmp_path / 'collect.json').write_text('{"fit_loss": 1.0}')  # before fingerprints: recomputed
  assert runner._collected(spy, str(tmp_path), row) == {'fit_loss': 1.0} and calls == [1]
  assert runner._collected(spy, str(tmp_path), row) == {'fit_loss': 1.0} and calls == [1]
  assert runner.collect_fingerprint(_old_collect) != runner.collect_fingerprint(_new_collect)


def test_judge_only_trains_nothing_and_buys_no_extension(tmp_path):
  """--judge_only: the runs on disk judged again and the report written, whatever the cap now allows; it refuses
  a workdir whose planned runs are not all finished."""
  with pytest.raises(base.ReproduceError, match='--judge_only: .* unfinished runs'):
    runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False, judge_only=True)
  first = runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False)  # stops at the cap
  on_disk = sorted(p.name for p in (tmp_path / 'tiny' / 'main' / 'runs').iterdir())
  again = runner.run_study(_study(cap_s=1e9, level=12), str(tmp_path), 'smoke', progress=False, judge_only=True)
  assert sorted(p.name for p in (tmp_path / 'tiny' / 'main' / 'runs').iterdir()) == on_disk  # nothing trained
  assert again['regime']['stopped'].startswith('judge only (--judge_only): the next extension')
  assert again['regime']['next']['why'] == 'judge only' and again['regime']['next']['runs'] > 0
  assert [v['statistic'] for v in again['verdicts']] == [v['statistic'] for v in first['verdicts']]
  assert len(again['regime'][runner.INVOCATIONS]) == 1  # the report names the invocations that trained ...
  recorded = json.loads((tmp_path / 'tiny' / runner.RECORD).read_text())[runner.INVOCATIONS]
  assert [bool(c.get('judge_only')) for c in recorded] == [True, False, True]  # ... regime.json every one (the refused
  # judge_only call first)
  # judged again under the cap that stopped it: the report says the cap stopped it (it did), not that it judged
  capped = runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False, judge_only=True)
  assert capped['regime']['stopped'].startswith('the cap: the next extension')
  assert capped['regime']['next']['why'] == 'over the cap' and capped['regime']['stopped'] == first['regime']['stopped']


def test_judge_only_states_the_cap_with_the_reference_step_the_runs_recorded(tmp_path):
  """A report judged again on a busy machine converts the cap with the step the running invocation timed (recorded
  in regime.json), and says so; a workdir that recorded none is timed when judged, and says that."""
  first = runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False)
  assert first['regime']['reference_step_from'] == 'timed by this invocation'
  path = tmp_path / 'tiny' / runner.RECORD
  rec = json.loads(path.read_text())
  assert rec[runner.STEP_KEY] == first['regime']['reference_step_s']
  path.write_text(json.dumps({**rec, runner.STEP_KEY: 5e-4}))  # as if the runs had been timed on a slower machine
  again = runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False, judge_only=True)
  reg = again['regime']
  assert reg['reference_step_s'] == 5e-4 and reg['speed'] == pytest.approx(5e-4 / regime.REFERENCE_STEP_S)
  assert json.loads(path.read_text())[runner.STEP_KEY] == 5e-4  # judging records nothing of its own
  assert 'reference step 0.500 ms timed by the last invocation that ran runs' in report_lib.regime_markdown(reg)[2]
  path.write_text(json.dumps({k: v for k, v in rec.items() if k != runner.STEP_KEY}))
  untimed = runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False, judge_only=True)
  assert untimed['regime']['reference_step_from'] == 'timed when judged (the runs recorded none)'


def test_loop_cap_gives_invalid_with_the_cost_of_the_next_step(tmp_path):
  report = runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False)
  reg = report['regime']
  assert len(reg['iterations']) == 1 and reg['stopped'].startswith('the cap')
  assert reg['next']['runs'] > 0 and reg['next']['cost_s'] > 0
  v = report['verdicts'][0]
  assert v['outcome'] == stats.INVALID and 'the next extension would have cost' in v['detail']
  assert json.loads((tmp_path / 'tiny' / 'regime.json').read_text())['scale'] == 'smoke'


def test_seed_offset_runs_fresh_seeds_in_its_own_folder_and_is_never_published(tmp_path):
  report = runner.run_study(_study(cap_s=0.0, level=12), str(tmp_path), 'smoke', progress=False, seed_offset=7)
  outdir = tmp_path / 'tiny.seed_offset7'
  assert not (tmp_path / 'tiny').exists() and report['regime']['seed_offset'] == 7
  frame = pd.read_csv(outdir / 'main' / 'results.csv')
  assert sorted(frame[regime.SEED].unique()) == [7, 8]  # seeds K ... K+n-1, paired across the points
  assert '2 seeds (7 ... 8: --seed_offset=7)' in (outdir / 'report.md').read_text()
  report = json.loads((outdir / 'report.json').read_text())
  (outdir / 'report.json').write_text(json.dumps({**report, 'scale': 'full'}))
  with pytest.raises(base.ReproduceError, match='ran on fresh seeds'):
    publish_lib.publish('tiny.seed_offset7', str(tmp_path), repo_root=str(tmp_path))
  with pytest.raises(base.ReproduceError, match='must be >= 0'):
    runner.outdir_name('tiny', -1)


def test_killed_loop_resumes_without_redoing_runs(tmp_path, monkeypatch):
  study = _study(cap_s=1e9, level=12)
  calls = []
  real = runner.sweep_lib.run_sweep

  def dying(*args, **kwargs):  # the second pass's sweep is killed after it trained its runs
    out = real(*args, **kwargs)
    calls.append(1)
    if len(calls) == 2:
      raise KeyboardInterrupt
    return out

  monkeypatch.setattr(runner.sweep_lib, 'run_sweep', dying)
  with pytest.raises(KeyboardInterrupt):
    runner.run_study(study, str(tmp_path), 'smoke', progress=False)
  runs = sorted((tmp_path / 'tiny' / 'main' / 'runs').glob('*/summary.json'))
  stamps = {p: p.stat().st_mtime_ns for p in runs}
  killed_wall = json.loads((tmp_path / 'tiny' / 'regime.json').read_text())['wall_s']
  assert killed_wall > 0  # the killed invocation's wall time is on disk
  monkeypatch.setattr(runner.sweep_lib, 'run_sweep', real)
  report = runner.run_study(study, str(tmp_path), 'smoke', progress=False)
  assert report['total_wall_time_s'] >= killed_wall + report['wall_time_s'] - 1e-6  # summed over both invocations
  assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # no finished run redone
  assert len(report['regime']['iterations']) == 2 and report['regime']['iterations'][1]['runs_run'] == 0


def test_a_doubling_reaches_every_point_that_shares_a_verdict():
  """Verdicts (a, b) and (b, c) share b: a doubling for (a, b) also doubles c, so (b, c) stays at one budget;
  d, read by a verdict of its own, is left alone."""
  st = state(('a', 'b', 'c', 'd'))
  verdicts = [_verdict(0.5, ('a', 'b')), _verdict(0.5, ('b', 'c')), _verdict(0.5, ('d',))]
  flip = checks.stability(stats.MAGNITUDE, _ladder(1.5, 1.0, 0.5, points=('a', 'b')), st, POLICY)
  widened = regime.shared_budgets([flip], verdicts)
  assert widened[0].points == ('a', 'b', 'c')
  new, _ = regime.extend(st, widened, POLICY)
  assert [new[p].steps for p in 'abcd'] == [200, 200, 200, 100]
  edge = stats.Check('edge', False, 'x', remedy=stats.HIGHER_RATE, points=('a',))
  assert regime.shared_budgets([edge], verdicts) == [edge]  # a rate extension stays with its point


def test_a_verdict_that_no_compute_can_fix_gets_no_extension():
  """(a) fails a check without a remedy (pinned at a floor) and its stability: nothing is spent on a; (b) fails
  only its rate edge: b is extended; a point shared with a fixable verdict is still extended for that one."""
  st = state(('a', 'b'))
  floor = stats.Check('a: off the floor', False, 'pinned', points=('a',))
  unstable = stats.Check('stable', False, 'x', remedy=stats.DOUBLE_STEPS, points=('a',))
  edge = stats.Check('b: edge', False, 'x', remedy=stats.HIGHER_RATE, points=('b',))
  pinned = stats.gate(_verdict(0.5, ('a',)), [floor, unstable])
  at_edge = stats.gate(_verdict(0.5, ('b',)), [edge])
  assert pinned.outcome == stats.INVALID and at_edge.outcome == stats.INVALID
  assert regime.fixable([pinned, at_edge]) == [edge]
  new, actions = regime.extend(st, regime.fixable([pinned, at_edge]), POLICY)
  assert new['a'] == st['a'] and new['b'].rates == [*RATES, RATES[-1] * POLICY.factor] and len(actions) == 1
  shared = stats.gate(_verdict(0.5, ('a', 'b')), [dataclasses.replace(unstable, points=('a', 'b'))])
  new, _ = regime.extend(st, regime.fixable([pinned, shared]), POLICY)
  assert new['a'].steps == new['b'].steps == 200


def test_over_the_cap_the_part_that_fits_runs_rates_first_then_the_cheapest_doublings():
  """Verdict 1 reads (a, b): a at its grid's top, (a, b) unstable; verdict 2 reads c, unstable. At 1 s per step and
  4 seeds: a's new rate costs 700 ((25 + 50 + 100) steps x 4), c's doubling 2,400 (3 rates x 200 x 4), verdict 1's
  doubling with the new rate 5,400 (a: 0.3 at 50 and 100 + 3 rates at 200; b: 3 rates at 200), 7,800 in all. Over
  the cap, the rate runs first, then c's doubling if it fits; verdict 1's doubling waits for its rate."""
  st = state(('a', 'b', 'c'))
  edge = stats.Check('a: edge', False, 'x', remedy=stats.HIGHER_RATE, points=('a',))
  unstable = stats.Check('stable', False, 'x', remedy=stats.DOUBLE_STEPS, points=('a', 'b'))
  v1 = stats.gate(_verdict(0.5, ('a', 'b')), [edge, unstable])
  v2 = stats.gate(_verdict(0.5, ('c',)), [dataclasses.replace(unstable, points=('c',))])
  chosen, per_step = {'a': 1e-1, 'b': 1e-2, 'c': 1e-2}, lambda p: 1.0

  def ext(cap, spent=0.0):
    return regime.next_extension(st, [v1, v2], dataclasses.replace(POLICY, cap=cap), chosen, per_step, spent)

  whole = ext(1e9)
  assert whole.cost == 7800 and not whole.partial and len(whole.actions) == 4
  assert [whole.state[p].steps for p in 'abc'] == [200, 200, 200]
  both = ext(3100)
  assert both.partial and both.cost == 3100 and [both.state[p].steps for p in 'abc'] == [100, 100, 200]
  assert both.state['a'].rates == [*RATES, RATES[-1] * 3] and len(both.actions) == 2
  rate = ext(3099)
  assert rate.partial and rate.cost == 700 and len(rate.actions) == 1 and 'added above' in rate.actions[0]
  assert ext(1000, spent=500) == whole  # 500 + 700 passes the cap, and c's doubling alone too: the loop stops


def test_over_the_cap_a_cheap_verdict_s_rate_edge_is_bought_without_an_expensive_one():
  """Two verdicts at their grids' top edge: a's new rate costs 700 (1 s per step), c's 70,000 (100 s per step).
  Under a cap of 1,000 a's runs alone; the edges are no longer bought all together or not at all."""
  st = state(('a', 'c'))
  v1, v2 = (
    stats.gate(_verdict(0.5, (p,)), [stats.Check(f'{p}: edge', False, 'x', remedy=stats.HIGHER_RATE, points=(p,))])
    for p in 'ac'
  )
  per_step = lambda p: 1.0 if p == 'a' else 100.0
  ext = regime.next_extension(st, [v2, v1], dataclasses.replace(POLICY, cap=1000), {'a': 0.1, 'c': 0.1}, per_step, 0)
  assert ext.partial and ext.cost == 700 and list(ext.runs) == ['a'] and ext.state['c'] == st['c']
  close = lambda p: 1.0 if p == 'a' else 1.1  # 700 and 770 do not fit together under 1,000: the cheaper runs
  ext = regime.next_extension(st, [v2, v1], dataclasses.replace(POLICY, cap=1000), {'a': 0.1, 'c': 0.1}, close, 0)
  assert list(ext.runs) == ['a'] and ext.cost == 700


def test_over_the_cap_an_edge_of_a_verdict_that_cannot_pass_comes_after_a_doubling_that_can_move_one():
  """a's edge (700) belongs to a verdict a remedy-less failure keeps invalid; d's doubling (2,400) can move its
  verdict. Under a cap of 3,000 d's doubling runs first, then a's edge only if it still fits (it does not)."""
  st = state(('a', 'd'))
  pinned = stats.Check('a: off the floor', False, 'pinned', points=('a',))
  edge = stats.Check('a: edge', False, 'x', remedy=stats.HIGHER_RATE, points=('a',))
  stuck = stats.gate(_verdict(0.5, ('a',)), [pinned, edge])
  unstable = stats.gate(
    _verdict(0.5, ('d',)), [stats.Check('stable', False, 'x', remedy=stats.DOUBLE_STEPS, points=('d',))]
  )
  cap = dataclasses.replace(POLICY, cap=3000)
  ext = regime.next_extension(st, [stuck, unstable], cap, {'a': 0.1, 'd': 1e-2}, lambda p: 1.0, 0)
  assert ext.partial and list(ext.runs) == ['d'] and ext.state['d'].steps == 200 and ext.state['a'] == st['a']


def test_loop_runs_the_part_that_fits_when_the_whole_step_passes_the_cap(tmp_path, monkeypatch):
  """At 1 run-second per step and nothing spent, pass 0's whole extension (a rate below each point's grid and T
  doubled: 240 run-seconds) passes a cap of 100, its rates alone (56: 2 points x (2 + 4 + 8) steps x 2 seeds) do
  not: they run, and report.md says so."""
  monkeypatch.setattr(runner, '_seconds_per_step', lambda frame: lambda p: 1.0)
  monkeypatch.setattr(runner, '_spent', lambda outdir: 0.0)
  report = runner.run_study(_study(cap_s=100, level=12), str(tmp_path), 'smoke', progress=False)
  first = report['regime']['iterations'][0]
  assert first['partial'] and first['next_cost_s'] == 56 and all('added below' in a for a in first['actions'])
  assert {p['point']: p['steps'] for p in report['regime']['points']} == {'main: f4': 8, 'main: f8': 8}
  assert 'the part that fits' in (tmp_path / 'tiny' / 'report.md').read_text()
  finished = runner._finished(str(tmp_path / 'tiny'), runner._points(_study(100, 12).arms('smoke')), 2, 0)
  assert finished('main: f4', 1e-3, 8) and finished('main: f8', 1e-3 / 3, 4) and not finished('main: f4', 1e-3, 16)
  assert not runner._finished(str(tmp_path / 'tiny'), runner._points(_study(100, 12).arms('smoke')), 3, 0)(
    'main: f4', 1e-3, 8
  )  # a third seed never ran


def test_an_extension_costs_nothing_for_runs_already_on_disk():
  """The doubling of verdict 2 (c to 200 steps, 3 rates x 200 x 4 seeds = 2,400) costs 800 when two of its
  rates' runs are finished on disk (a resumed loop, or a rate a doubling dropped and an edge restored)."""
  st = state(('c',))
  v = stats.gate(_verdict(0.5, ('c',)), [stats.Check('stable', False, 'x', remedy=stats.DOUBLE_STEPS, points=('c',))])
  done = lambda p, rate, steps: steps == 200 and rate < 0.05

  def ext(finished):
    return regime.next_extension(st, [v], POLICY, {'c': 1e-2}, lambda p: 1.0, 0.0, finished)

  assert ext(lambda *a: False).cost == 2400 and ext(done).cost == 800
  assert ext(done).runs == {'c': [(pytest.approx(0.1), 200)]} and ext(done).state['c'].steps == 200


def test_pooled_is_the_mean_over_points_at_the_rates_every_point_ran():
  rows = [
    {'point': p, regime.STEPS: 8, regime.LR: r, regime.SEED: s, 'm': m + s, 'status': 'completed'}
    for p, grid in (('a', {1e-3: 1.0, 1e-2: 1.1, 1e-1: 9.0}), ('b', {1e-3: 2.0, 1e-2: 1.5}))
    for r, m in grid.items()
    for s in (0, 1)
  ]
  rows[0] = {**rows[0], 'status': 'diverged'}  # a, 1e-3, seed 0: the pooled run fails
  st = {'a': regime.PointState([1e-3, 1e-2, 1e-1], 8, lower=1), 'b': regime.PointState([1e-3, 1e-2], 8)}
  pf, ps = regime.pooled(pd.DataFrame(rows), st, ('a', 'b'), 'm')
  assert ps.rates == [1e-3, 1e-2] and ps.steps == 8 and ps.lower == 0  # 1e-1 only at a: not shared
  got = {(r, s): (m, status) for r, s, m, status in pf[[regime.LR, regime.SEED, 'm', 'status']].itertuples(index=False)}
  assert got[(1e-2, 1)] == (pytest.approx((1.1 + 1) / 2 + (1.5 + 1) / 2), 'completed')
  assert got[(1e-3, 0)][1] == 'failed' and math.isnan(got[(1e-3, 0)][0])
  assert set(pf['point']) == {regime.COMMON_POINT}
  st['b'] = regime.PointState([1e-3, 1e-2], 16)
  assert regime.pooled(pd.DataFrame(rows), st, ('a', 'b'), 'm') is None  # no one budget: no shared rate


def _two_rate_policies_study(table=None):
  """Two points whose own best rates differ (f4: 1e-3, f8: 1e-2) and whose pooled best is 1e-2; each verdict's
  statistic is the mean rate its selection reads, below 7e-3: reproduced when tuned (5.5e-3), not when the points
  share one rate (1e-2). The metric is collected from the run's own config (no training result enters)."""
  config = default_config()
  config.model.d_ff = 8
  config.train.log_every = 2
  policy = regime.Regime(rates=(1e-3, 1e-2), steps=8, seeds=3, cap=1e9, metric='m', max_extensions=1, max_doublings=0)
  table = table or {(4, 1e-3): 1.0, (4, 1e-2): 1.1, (8, 1e-3): 2.0, (8, 1e-2): 1.5}

  def collect(run_dir, row):
    del run_dir
    lr = float(row[regime.LR])
    key = (int(row['model.d_ff']), min((1e-3, 1e-2), key=lambda r: abs(math.log(r / lr))))
    off_grid = not np.isclose(lr, key[1])
    return {'m': table[key] + (5.0 if off_grid else 0.0) + 0.01 * int(row[regime.SEED])}

  def rules(sel, scale):
    del scale
    out = []
    for claim in ('tuned', 'common'):
      v = rules_lib.threshold(
        sel.groupby(regime.SEED)[regime.LR].mean(), level=7e-3, direction='below', claim=claim, min_seeds=2
      )
      premise = stats.premise_check('runs exist', float(len(sel)), (len(sel), len(sel)), 1.0)
      out.append(dataclasses.replace(stats.gate(v, [premise]), points=('main: f4', 'main: f8')))
    return out

  return base.Study(
    name='two_rates',
    claim='A claim read two ways.',
    citation='Nobody 2026',
    published='-',
    regimes={'smoke': policy},
    arms=lambda scale: [base.Arm('main', config, {'f4': {'model.d_ff': 4}, 'f8': {'model.d_ff': 8}})],
    rules=rules,
    present=lambda result, ctx: base.Presentation(headline='-', tables=[]),
    collect=collect,
    claims=(
      base.Claim(stats.MAGNITUDE, 'two tiny FFNs, each at its rate', 'the runs exist'),
      base.Claim(stats.MAGNITUDE, 'two tiny FFNs, one shared rate', 'the runs exist', rate=regime.COMMON),
    ),
  )


def test_a_claim_read_at_one_shared_rate(tmp_path):
  report = runner.run_study(_two_rate_policies_study(), str(tmp_path), 'smoke', progress=False)
  tuned, common = report['verdicts']
  assert tuned['statistic'] == pytest.approx(5.5e-3) and tuned['outcome'] == stats.REPRODUCED
  # the shared rate gives not reproduced where each point at its own rate reproduces: the rate policy decides it
  assert common['statistic'] == pytest.approx(1e-2) and common['outcome'] == stats.INCONCLUSIVE
  assert common['extra']['common_rates'] == {lv: pytest.approx(1e-2) for lv in regime.LEVELS}
  assert 'read at one rate shared by its points (T/4 0.01, T/2 0.01, T 0.01)' in common['detail']
  names = {c['name']: c['passed'] for c in common['checks']}
  assert names['the shared learning rate inside the grid']  # 3e-2 was run beyond the shared edge, and is worse
  assert not names['the rate policy does not decide it (each point at its own tuned rate agrees)']
  assert 'main: f4: learning rate inside the grid' in {c['name'] for c in tuned['checks']}
  pts = {p['point']: p['rates'] for p in report['regime']['points']}
  assert pts['main: f4'] == pytest.approx([1e-3 / 3, 1e-3, 1e-2, 3e-2]) and pts['main: f8'] == pytest.approx(
    [1e-3, 1e-2, 3e-2]
  )


def test_a_tie_between_shared_rates_is_read_at_both(tmp_path):
  """Pooled, 1e-3 and 1e-2 tie (1.3 each): the shared rate chosen gives 1e-3 (reproduced), the tied one 1e-2."""
  tied = {(4, 1e-3): 0.9, (4, 1e-2): 1.1, (8, 1e-3): 1.7, (8, 1e-2): 1.5}
  report = runner.run_study(_two_rate_policies_study(tied), str(tmp_path), 'smoke', progress=False)
  common = report['verdicts'][1]
  tie = next(c for c in common['checks'] if c['name'] == 'no learning-rate tie decides it')
  assert not tie['passed'] and 'the shared rate at T at tied rate 0.01: 0.01' in tie['detail']
  assert common['outcome'] == stats.INCONCLUSIVE


def test_a_claim_declares_a_known_rate_policy():
  with pytest.raises(base.StudyError, match="verdict 1 has rate 'fixed'; allowed: tuned, common"):
    dataclasses.replace(_two_rate_policies_study(), claims=(base.Claim(stats.SIGN, 's', 'p', rate='fixed'),) * 2)


def test_a_killed_invocation_keeps_its_wall_time_up_to_its_last_group(tmp_path, monkeypatch):
  from ffn_research import sweep as sweep_lib

  real, calls = sweep_lib._train_sweep_group, []

  def die_on_second(*args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
      raise KeyboardInterrupt  # as a kill between groups
    return real(*args, **kwargs)

  monkeypatch.setattr(sweep_lib, '_train_sweep_group', die_on_second)
  with pytest.raises(KeyboardInterrupt):
    runner.run_study(_study(cap_s=1e9, level=12), str(tmp_path), 'smoke', progress=False)
  rec = json.loads((tmp_path / 'tiny' / runner.RECORD).read_text())
  assert rec['wall_s'] > 0  # the first group's time was saved before the kill


def test_a_tie_decides_a_verdict_only_through_its_outcome_at_t_or_the_ladder():
  """A magnitude claim is judged at T on the ladder's values: a tie that flips a lower rung's own outcome but leaves
  the ladder stable decides nothing; one that unsettles the ladder, or flips T, does. A sign claim's ladder is its
  rungs' outcomes, so there a lower rung's flip is the ladder's."""
  ladder = _ladder(0.6, 0.52, 0.5)  # below 1 at every rung, settling: stable (magnitude)
  assert checks.stability(stats.MAGNITUDE, ladder, state(), POLICY).passed
  flip_low = [('a at T/4', 3e-2, _verdict(0.995), ladder[0])]  # inside the noise band at T/4: another outcome
  assert flip_low[0][2].outcome != ladder[0].outcome
  kept = checks.rate_tie(flip_low, kind=stats.MAGNITUDE, ladder=ladder)
  assert kept.passed and 'leave the ladder as it is' in kept.detail
  assert not checks.rate_tie(flip_low).passed  # without the ladder: the rung's own outcome (the old reading)
  unsettle = [('a at T/2', 3e-2, _verdict(0.9), ladder[1])]  # same outcome at T/2, but the ladder no longer settles
  assert not checks.rate_tie(unsettle, kind=stats.MAGNITUDE, ladder=ladder).passed
  at_t = [('a at T', 3e-2, _verdict(1.5), ladder[2])]
  assert not checks.rate_tie(at_t, kind=stats.MAGNITUDE, ladder=ladder).passed
  signs = [_paired(-1.0), _paired(-1.0), _paired(-1.0)]
  flip_sign = [('a at T/4', 3e-2, _paired(0.0), signs[0])]
  assert not checks.rate_tie(flip_sign, kind=stats.SIGN, ladder=signs).passed


def test_a_tie_cannot_decide_a_verdict_invalid_at_t_at_every_tied_rate():
  """Superposition's FFN verdict, re-judged: invalid by its premise at every rung; a tied rate at T moves the rule's
  own outcome (inconclusive -> not reproduced) but the verdict stays invalid there, so the tie is n/a, not a failure
  the report would hide. A tie whose premise passes at T is judged as before."""
  premise = stats.Check('premise: p', False, 'fails', demote=stats.INVALID, role=stats.PREMISE)
  invalid = lambda v: stats.gate(v, [premise])
  ladder = [invalid(_paired(-0.01, sd=1.0)) for _ in range(3)]  # undecided by the rule, invalid by the premise
  moved = invalid(_paired(-1.0))  # the rule alone decides at the tied rate; the premise still fails
  assert moved.outcome == stats.INVALID and moved.raw_outcome != ladder[-1].raw_outcome
  c = checks.rate_tie([('a at T', 3e-2, moved, ladder[-1])], kind=stats.SIGN, ladder=ladder)
  assert c.passed and not c.applies and 'cannot change it' in c.detail
  rescued = _paired(-1.0)  # at the tied rate the premise passes and the rule decides: that tie decides it
  assert not checks.rate_tie([('a at T', 3e-2, rescued, ladder[-1])], kind=stats.SIGN, ladder=ladder).passed


def test_a_failed_check_the_gate_does_not_name_keeps_its_detail_in_the_report():
  premise = stats.Check('premise: p', False, 'fails here', demote=stats.INVALID, role=stats.PREMISE)
  tie = stats.Check(
    'no learning-rate tie decides it', False, 'a at T at tied rate 0.03: moved', demote=stats.INCONCLUSIVE
  )
  v = stats.gate(_paired(-1.0), [premise, tie])
  assert v.outcome == stats.INVALID and 'tied rate' not in v.detail  # the gate names the invalidating check only
  lines = report_lib._verdict_md(v)
  assert '    - **FAIL** premise: p' in lines  # said once, in the gate's line
  assert '    - **FAIL** no learning-rate tie decides it: a at T at tied rate 0.03: moved' in lines


def test_an_invalid_verdict_whose_failed_checks_each_name_a_priced_step_is_undecided_within_the_regime_not_forever():
  edge = stats.Check('a: learning rate inside the grid', False, 'at the edge; next step: rate 0.3 (~9 run-seconds)')
  v = stats.gate(_paired(-1.0), [edge])
  assert v.outcome == stats.INVALID
  said = next(line for line in report_lib._verdict_md(v) if line.startswith('  - **invalid'))
  assert "this setup within the regime's limits cannot decide the claim (each failed check names its next" in said
  bare = stats.gate(_paired(-1.0), [dataclasses.replace(edge, detail='at the edge')])
  said = next(line for line in report_lib._verdict_md(bare) if line.startswith('  - **invalid'))
  assert 'this setup cannot decide the claim (no extension remedies it)' in said


def test_checks_with_nothing_to_check_print_n_a():
  undecided = [_paired(-0.01, sd=1.0)] * 3  # a sign claim undecided at T: its ladder holds nothing
  c = checks.stability(stats.SIGN, undecided, state(), POLICY)
  assert c.passed and not c.applies and stats.Check.from_dict(c.to_dict()) == c
  assert checks.stability(stats.SIGN, [_paired(-1.0)] * 3, state(), POLICY).applies
  seed = checks.one_seed(undecided[-1], [])
  assert seed.passed and not seed.applies
  v = dataclasses.replace(undecided[-1], checks=(c, seed))
  lines = report_lib._verdict_md(v)
  assert any(line.startswith('    - n/a stable on the budget ladder (sign claim)') for line in lines)
  assert any(line.startswith('    - n/a no single seed decides it') for line in lines)


def test_the_pass_table_names_each_pass_commit_and_the_runs_no_recorded_pass_ran():
  r = {
    'policy': dataclasses.asdict(POLICY),
    'cap_s': 10.0,
    'spent_s': 1.0,
    'stopped': 'every check passed',
    'iterations': [
      {
        'iteration': 0,
        'commit': '53ce2d5',
        'runs_planned': 900,
        'runs_run': 475,
        'wall_s': 897.0,
        'failed': [],
        'actions': [],
      },
    ],
    'next': None,
    'points': [],
  }
  lines = report_lib.regime_markdown(r)
  assert '| 0 | 53ce2d5 | 900 | 475 | 897 | – | – |' in lines
  assert any(
    line.startswith('425 of the 900 runs pass 0 planned were finished on disk before it began') for line in lines
  )
  r['iterations'][0]['runs_run'] = 900
  assert not any('finished on disk before it began' in line for line in report_lib.regime_markdown(r))
  r['iterations'][0] |= {'failed': ['stable'], 'judged_again_at': 'fdcd67a'}  # a later rule judged its runs again
  assert any('| (its runs judged again at fdcd67a) stable |' in line for line in report_lib.regime_markdown(r))


def test_the_regime_table_names_the_rates_a_doubling_dropped():
  r = {
    'policy': dataclasses.asdict(POLICY),
    'cap_s': 10.0,
    'spent_s': 1.0,
    'stopped': 'every check passed',
    'iterations': [],
    'next': None,
    'points': [{'point': 'a', 'rates': [0.01, 0.03], 'steps': 16, 'dropped': [0.003], 'rate_T': 0.01}],
  }
  assert '| a | 0.01, 0.03 | 0.003 | 16 | 0.01 |' in report_lib.regime_markdown(r)


def test_a_cap_stopped_loop_names_the_next_cost_on_every_verdict_compute_could_fix_and_old_positives_say_so():
  """The cost of the extension the cap refused is in the detail of every invalid verdict and of every inconclusive
  one whose failed check has a remedy (memorization_capacity's E = 100 verdict read 'inconclusive' with no reason
  beside it); a change that once turned a verdict positive says it is not in effect when the verdict is not
  reproduced now."""
  v = _ladder(1.3, 1.2, 1.1)[-1]
  unsettled = stats.gate(v, [stats.Check('stable', False, 'd', remedy=stats.DOUBLE_STEPS, demote=stats.INCONCLUSIVE)])
  noise = stats.gate(v, [stats.Check('tie', False, 'd', demote=stats.INCONCLUSIVE)])
  bad = stats.gate(v, [stats.Check('premise', False, 'd', role=stats.PREMISE)])
  assert unsettled.outcome == noise.outcome == stats.INCONCLUSIVE and bad.outcome == stats.INVALID
  end = runner._LoopEnd(
    pd.DataFrame(), pd.DataFrame(), {}, [unsettled, noise, bad], {}, 'cap', {'x': 1}, 250.0, 1800.0, 850.0
  )
  cap = cap_lib.Cap(ref_s=1000.0, speed=2.0, step_s=regime.REFERENCE_STEP_S)
  out = runner._final_verdicts(end, cap)
  named = ['the next extension would have cost ~250 run-seconds (~125 reference-seconds' in x.detail for x in out]
  assert named == [True, False, True]
  # the spend as the Regime section counts it: reference-seconds, and the runs' own run-seconds (not the spend
  # converted at this invocation's step, which memorization_capacity's report printed beside a different figure)
  assert "spent 900 reference-seconds, 850 run-seconds on the runs' own clocks" in out[0].detail
  change = {'date': 'd', 'change': 'c', 'outcome': 'o', 'verdicts': [2], 'to_positive': [2]}
  assert '(null -> positive)**' in report_lib.change_line(change, 2)
  assert "not in effect: this report's verdict is inconclusive" in report_lib.change_line(change, 2, 'inconclusive')


def _with_arm(study, arm, claim, values=lambda p: p[regime.STEPS] + 0.0, level=1e9, direction='below'):
  """The tiny study with a second arm (one point 'f4') and a second verdict: a threshold on values(its runs)."""
  main = study.arms('smoke')[0]

  def rules(sel, scale):
    (v,) = study.rules(sel[sel['arm'] == 'main'], scale)
    p = sel[sel['arm'] == arm.name]
    w = rules_lib.threshold(values(p), level=level, direction=direction, claim=arm.name, min_seeds=2)
    return [v, dataclasses.replace(w, points=(f'{arm.name}: f4',))]

  return dataclasses.replace(study, arms=lambda scale: [main, arm], rules=rules, claims=(*study.claims, claim))


def test_an_arm_runs_its_own_seeds(tmp_path):
  """Arm.seeds and Arm.first_seed: a pilot arm runs 3 seeds from 50 (no other arm's), the main arm the regime's 2;
  coverage asks each point for its own arm's count and the report lists each arm's seeds."""
  study = _study(cap_s=1e9, level=1e9)
  main = study.arms('smoke')[0]
  pilot = dataclasses.replace(main, name='pilot', points={'f4': {'model.d_ff': 4}}, seeds=3, first_seed=50, tuned=False)
  assert list(pilot.seed_range(2)) == [50, 51, 52] and list(pilot.seed_range(2, seed_offset=100)) == [150, 151, 152]
  assert list(main.seed_range(2)) == [0, 1]

  two = _with_arm(study, pilot, base.Claim(stats.MAGNITUDE, 'a pilot', 'the runs exist'))
  report = runner.run_study(two, str(tmp_path), 'smoke', progress=False)
  runs = pd.read_csv(tmp_path / 'tiny' / 'pilot' / 'results.csv')
  assert sorted(set(runs[regime.SEED])) == [50, 51, 52]
  assert sorted(set(pd.read_csv(tmp_path / 'tiny' / 'main' / 'results.csv')[regime.SEED])) == [0, 1]
  assert {s['name']: s['seeds'] for s in report['sweeps']} == {'main': 2, 'pilot': 3}
  cover = [{c['name']: c for c in v['checks']}['every seed completed at the chosen rate'] for v in report['verdicts']]
  assert all(c['passed'] for c in cover) and '3 seeds at each of 1 point(s)' in cover[1]['detail']


def test_an_arm_reads_its_rate_from_the_runs_before_it(tmp_path):
  """Arm.rate_from: an untuned arm whose one rate a rule reads from the arms before it runs at that rate at every
  budget (its state saved with it); a rule that finds none (nan) leaves the arm unrun, and its verdict invalid."""
  study = _study(cap_s=1e9, level=1e9)
  main = study.arms('smoke')[0]
  seen = []

  def from_main(frame):
    seen.append(sorted(set(frame['arm'])))
    return 0.005 if (frame['status'] == 'completed').sum() >= 24 else math.nan

  after = base.Arm('after', main.base, {'f4': {'model.d_ff': 4}}, tuned=False, rate_from=from_main)
  claim = base.Claim(stats.MAGNITUDE, 'after', 'the runs exist')
  runner.run_study(_with_arm(study, after, claim), str(tmp_path / 'a'), 'smoke', progress=False)
  runs = pd.read_csv(tmp_path / 'a' / 'tiny' / 'after' / 'results.csv')
  assert set(runs[regime.LR]) == {0.005} and sorted(set(runs[regime.STEPS])) == [2, 4, 8] and seen[0] == ['main']
  state = json.loads((tmp_path / 'a' / 'tiny' / runner.RECORD).read_text())['state']
  assert state['after: f4']['rates'] == [0.005]
  never = dataclasses.replace(after, rate_from=lambda frame: math.nan)
  report = runner.run_study(_with_arm(study, never, claim), str(tmp_path / 'b'), 'smoke', progress=False)
  assert not (tmp_path / 'b' / 'tiny' / 'after').exists() and report['verdicts'][1]['outcome'] == stats.INVALID


def test_a_divergence_verdict_counts_diverged_runs_as_measured(tmp_path):
  """Claim.diverged_is_measured: a verdict whose outcome is divergence reads diverged runs, and the every-seed check
  counts them (judge.py); without it, a diverged seed is a missing one and the verdict is invalid."""
  study = _study(cap_s=1e9, level=1e9)
  main = study.arms('smoke')[0]
  blow = main.base.copy_and_resolve_references()
  blow.train.learning_rate, blow.train.grad_clip, blow.train.blowup_factor, blow.train.blowup_patience = 1e12, 0, 2, 1
  pilot = base.Arm('blow', blow, {'f4': {'model.d_ff': 4}}, tuned=False)
  diverged = lambda p: (p['status'] == 'diverged').astype(float).to_numpy()

  def judged(measured):
    claim = base.Claim(stats.SIGN, 'a pilot', 'the runs exist', diverged_is_measured=measured)
    two = _with_arm(study, pilot, claim, values=diverged, level=0.5, direction='above')
    return runner.run_study(two, str(tmp_path), 'smoke', progress=False)['verdicts'][1]

  runs = lambda: pd.read_csv(tmp_path / 'tiny' / 'blow' / 'results.csv')
  v = judged(True)
  assert 'diverged' in set(runs()[runs()[regime.STEPS] == runs()[regime.STEPS].max()]['status'])
  cover = {c['name']: c for c in v['checks']}['every seed completed/diverged at the chosen rate']
  assert cover['passed'] and '2 seeds at each of 1 point(s)' in cover['detail']
  v = judged(False)  # the same runs (resumed), judged with diverged runs as missing
  cover = {c['name']: c for c in v['checks']}['every seed completed at the chosen rate']
  assert not cover['passed'] and 'blow: f4: 0/2' in cover['detail'] and v['outcome'] == stats.INVALID


def test_a_shared_rate_reading_needs_each_points_own_rate_to_agree():
  """checks.rate_policy: a verdict read at one shared rate stands where each point at its own tuned rate gives the
  same decided outcome; else it is inconclusive (activation_sparsity's d_model slope: -0.248 shared, +0.151 own)."""
  rule = lambda xs: rules_lib.threshold(xs, level=-0.03, direction='below', claim='slope')
  shared = rule([-0.2, -0.25, -0.3, -0.24])
  assert shared.raw_outcome == stats.REPRODUCED
  assert checks.rate_policy(shared, rule([-0.1, -0.12, -0.15, -0.11])).passed
  flip = checks.rate_policy(shared, rule([0.1, 0.15, 0.2, 0.16]))
  assert not flip.passed and flip.demote == stats.INCONCLUSIVE and '(not reproduced)' in flip.detail
  assert stats.gate(shared, [flip]).outcome == stats.INCONCLUSIVE
  undecided = checks.rate_policy(rule([-0.05, 0.0, 0.05, -0.01]), rule([0.1, 0.15, 0.2, 0.16]))
  assert undecided.passed and not undecided.applies


def test_leave_one_seed_out_drops_only_the_seeds_a_verdict_reads():
  from ffn_research.ablations import judge

  full = pd.DataFrame({'point': ['a', 'a', 'b', 'c', 'c'], regime.SEED: [0, 1, 1, 100, 101]})
  assert judge._seeds_of(full, ('a', 'b')) == {0, 1}
  assert judge._seeds_of(full, ('c',)) == {100, 101} and judge._seeds_of(full, ()) == {0, 1, 100, 101}


def test_spent_time_is_priced_at_the_step_of_the_invocation_that_ran_it():
  ref = regime.REFERENCE_STEP_S
  assert cap_lib.priced_ref_s(None, 100.0, 2 * ref) == pytest.approx(50.0)  # no ledger: all at this step
  # 0-60 s ran at twice the reference step (legacy runs take the first entry's), 60-100 s at the reference step
  ledger = [[30.0, 2 * ref], [60.0, ref]]
  assert cap_lib.priced_ref_s(ledger, 100.0, 4 * ref) == pytest.approx(60 / 2 + 40)
  assert cap_lib.priced_ref_s(ledger, 50.0, ref) == pytest.approx(25.0)  # a record beyond what is on disk adds 0


def test_the_ledger_records_each_training_invocation_not_a_judging_one(tmp_path):
  first = runner.run_study(_study(cap_s=1e9, level=12), str(tmp_path), 'smoke', progress=False)
  path = tmp_path / 'tiny' / runner.RECORD
  rec = json.loads(path.read_text())
  assert rec[runner.LEDGER_KEY] == [[0.0, regime.REFERENCE_STEP_S]]
  reg = first['regime']
  assert reg['spent_ref_s'] == pytest.approx(reg['spent_s'])  # speed 1 throughout
  path.write_text(json.dumps({**rec, runner.LEDGER_KEY: [[0.0, 2 * regime.REFERENCE_STEP_S]]}))  # ran at half speed
  again = runner.run_study(_study(cap_s=1e9, level=12), str(tmp_path), 'smoke', progress=False, judge_only=True)
  assert again['regime']['spent_ref_s'] == pytest.approx(reg['spent_s'] / 2)
  assert json.loads(path.read_text())[runner.LEDGER_KEY] == [[0.0, 2 * regime.REFERENCE_STEP_S]]
  # a changed regime (here a third seed) starts the loop afresh but keeps the ledger: the runs on disk
  # are still priced at the step of the invocation that ran them
  study = _study(cap_s=1e9, level=12)
  study = dataclasses.replace(study, regimes={'smoke': dataclasses.replace(study.regimes['smoke'], seeds=3)})
  redesigned = runner.run_study(study, str(tmp_path), 'smoke', progress=False)
  assert json.loads(path.read_text())[runner.LEDGER_KEY][0] == [0.0, 2 * regime.REFERENCE_STEP_S]
  assert redesigned['regime']['spent_ref_s'] < redesigned['regime']['spent_s']


def test_train_flops_is_three_forward_passes_of_every_position_and_the_progress_line_gives_the_share_done():
  c = default_config()
  c.model.arch, c.model.d_model, c.model.d_ff, c.model.num_layers = 'ffn_stack', 8, 16, 1
  c.task.name, c.task.num_facts, c.task.num_relations, c.task.num_objects = 'memorization', 48, 4, 8
  c.train.batch_size, c.train.steps = 6, 10
  task = tasks.build_task(c)
  per_token = models.model_counts(c, task)['flops_per_token']
  assert runner.train_flops(c) == 3 * per_token * 6 * task.seq_len * 10
  line = runner._progress_line('s', done_flops=2e12, left_flops=6e12, seconds=60.0)
  assert line.startswith('s: 25.0% of the training FLOPs') and 'in 1.0 minutes; 6 TFLOP to go' in line
  assert runner._progress_line('s', 0.0, 6e12, 60.0) == '' == runner._progress_line('s', 2e12, 0.0, 60.0)
