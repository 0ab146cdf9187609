"""The checks the runner puts on every verdict, pure functions of the runs' frame and the regime's state
(docs/reproduce.md#the-regime-policy; the module docstring of ablations/regime.py says how the loop uses them):

- `inside_grid`: the rate chosen at T is not at an edge of the rates run (remedy: a rate beyond it);
- `stability`: the verdict's statistic on the budget ladder, judged by the claim's kind (remedy: double T);
- `rate_tie` (`tied_rates`) and `one_seed`: no rate within the tuning noise of the chosen one and no single seed
  left out changes the outcome (a failure demotes to inconclusive);
- `coverage` and `one_budget`: every seed measured at every point, the compared points at one budget.
"""

from collections.abc import Mapping, Sequence
import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sp_stats

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations.regime import LEVELS
from ffn_research.ablations.regime import LR
from ffn_research.ablations.regime import SEED
from ffn_research.ablations.regime import STEPS
from ffn_research.ablations.regime import PointState
from ffn_research.ablations.regime import Regime
from ffn_research.ablations.regime import choose
from ffn_research.ablations.regime import dropped_beyond
from ffn_research.ablations.regime import finite
from ffn_research.ablations.regime import rate_stats

INSIDE_GRID = 'learning rate inside the grid'  # the rate check's name, after its point's
RATE_TIE = 'no learning-rate tie decides it'
STABILITY = 'stable on the budget ladder'  # before its claim's kind


def inside_grid(point: str, frame: pd.DataFrame, s: PointState, regime: Regime) -> stats.Check:
  """The rate chosen at T for `point` is inside the rates run there (see the module docstring)."""
  name = f'{point}: {INSIDE_GRID}'
  at = frame[(frame['point'] == point) & (frame[STEPS] == s.steps)]
  rs = rate_stats(at, regime.metric)
  best = choose(rs, regime.mode)
  grid = ', '.join(f'{r.rate:g}' for r in rs)
  if best is None:
    return stats.Check(name, False, f'no rate of {{{grid}}} trained every seed at {s.steps} steps')
  i = [r.rate for r in rs].index(best.rate)
  worse = (lambda a, b: a > b) if regime.mode == 'min' else (lambda a, b: a < b)
  fails = []
  for side, nb, remedy, used in (
    ('smallest', rs[i - 1] if i > 0 else None, stats.LOWER_RATE, s.lower),
    ('largest', rs[i + 1] if i + 1 < len(rs) else None, stats.HIGHER_RATE, s.higher),
  ):
    if nb is None:
      left = used < regime.max_extensions or dropped_beyond(s, 'lower' if side == 'smallest' else 'higher') is not None
      beyond = best.rate / regime.factor if side == 'smallest' else best.rate * regime.factor
      spent = f' ({used} extensions already, the most the regime allows; {_rate_step(beyond, point, best.rate, frame)})'
      fails.append(
        (
          f'{best.rate:g} is the {side} rate run' + ('' if left else spent),
          remedy if left else '',
        )
      )
    elif nb.mostly_bad or worse(nb.mean, best.mean) or nb.mean == best.mean:
      continue
    else:
      fails.append(
        (
          f'{nb.rate:g} beyond it diverged for {nb.bad}/{nb.seeds} seeds only and its survivors are '
          f'better ({nb.mean:.4g} vs {best.mean:.4g})',
          '',
        )
      )
  if not fails:
    return stats.Check(
      name,
      True,
      f'{best.rate:g} chosen inside {{{grid}}} at {s.steps} steps '
      f'({regime.metric} {best.mean:.4g}, mean of {best.seeds} seeds)',
    )
  remedies = [r for _, r in fails if r]
  return stats.Check(
    name,
    False,
    f'grid {{{grid}}} at {s.steps} steps: ' + '; '.join(w for w, _ in fails),
    remedy=remedies[0] if remedies else '',
    points=(point,),
  )


def run_seconds(runs: pd.DataFrame) -> float:
  """Run-seconds on this machine of the timed `runs`; nan if none is timed."""
  return float(runs['wall_time_s'].astype(float).sum()) if 'wall_time_s' in runs and len(runs) else math.nan


def price_text(secs: float) -> str:
  return f'~{secs:,.0f} run-seconds on this machine' if math.isfinite(secs) else 'unpriced: no timed runs'


def price(runs: pd.DataFrame, factor: float = 1.0) -> str:
  """'~S run-seconds on this machine': `factor` x the timed `runs` (a next step priced by the runs it repeats)."""
  return price_text(factor * run_seconds(runs))


def _rate_step(rate: float, point: str, edge: float, frame: pd.DataFrame) -> str:
  """'next step: rate R (...)': a rate past the spent extensions, priced as `point`'s runs at its `edge` rate on
  every budget and seed (what one more rate costs)."""
  runs = frame[(frame['point'] == point) & np.isclose(frame[LR].astype(float), edge)]
  return f'next step: rate {rate:.3g} at every budget and seed ({price(runs)}, as its runs at {edge:g} took)'


def _boundary_distance(v: stats.Verdict) -> float:
  b = [x for x in v.boundaries if math.isfinite(x)]
  return min(abs(v.statistic - x) for x in b) if b else math.inf


def _crossed(reference: float, value: float, boundaries: Sequence[float]) -> bool:
  """`value` lies on the other side of some finite boundary from `reference`."""
  return any(math.isfinite(b) and (value - b) * (reference - b) < 0 for b in boundaries)


def _rung_text(levels: Sequence[str], rungs: Sequence[stats.Verdict], steps: Sequence[int]) -> str:
  return ', '.join(
    f'{v.statistic:.4g} ({v.raw_outcome}) at {lv}{f" = {s} steps" if s else ""}'
    for lv, v, s in zip(levels, rungs, steps, strict=True)
  )


def _projected(changes: Sequence[float], floor: float) -> tuple[float, float]:
  """(drift, r): the drift c (r + r^2 + ... + r^k) of the last change c kept up for k = len(changes) more doublings
  at its ratio r to the change before (that one floored at `floor`; r = 1 with one change)."""
  c, k = changes[-1], len(changes)
  before = max(changes[-2], floor) if k > 1 else c
  if c == 0:
    return 0.0, 0.0
  if before <= 0:  # it moved after a step that did not: no ratio bounds it
    return math.inf, math.inf
  r = c / before
  try:
    return c * sum(r**j for j in range(1, k + 1)), r
  except OverflowError:
    return math.inf, r


def _saturation(v: stats.Verdict, values: Sequence[float]) -> str:
  """A measurement at its named budget: whether its ladder says it has saturated there (reported, never a gate,
  never bought: a doubling would change the budget the number names)."""
  margin = float(v.extra.get('saturate', math.nan))
  changes = [abs(b - a) for a, b in itertools.pairwise(values)]
  scale = abs(values[-1]) or 1.0
  drift = _projected(changes, 0.0)[0] / scale
  if not math.isfinite(margin):
    return f'; the last doubling moved it {changes[-1] / scale:.1%}'
  return (
    f'; the ladder (reported, not a gate, no claim of saturation): the last doubling moved it '
    f'{changes[-1] / scale:.1%}; kept up at its '
    f'ratio to the change before, {len(changes)} more doublings would move it {drift:.1%}, '
    + (f'under {margin:.0%}' if drift < margin else f'not under {margin:.0%}: still growing at T')
    + ' (more steps are not bought: they would change the budget the number names)'
  )


def _settles(
  v: stats.Verdict, values: Sequence[float], ci: tuple[float, float] | None = None, kind: str = ''
) -> tuple[bool, str]:
  """The magnitude rule on a ladder's statistics (`ci`: the chosen rates' CI at T where a tied rung stands in,
  never the tied rung's own; its quarter width is the noise); (passed, its words). With a boundary: the last change
  is under half the distance d/2 from the statistic at T to the nearest boundary, and either it is within the noise
  or the drift projected for as many doublings again as the ladder has, the last change c growing (or shrinking) by
  its ratio r to the one before (floored at the noise), c (r + r^2 + ... + r^k), stays under d/2. For a measurement
  (no boundary): the last change and that drift are under its settling margin (`stats.measure`'s `settle`, fixed before
  the run: a noisier number does not settle more easily)."""
  changes = [abs(b - a) for a, b in itertools.pairwise(values)]
  lo, hi = v.ci if ci is None else ci
  noise = (hi - lo) / 4 if math.isfinite(lo) and math.isfinite(hi) else 0.0
  said = f'; changes {", ".join(f"{c:.3g}" for c in changes)}'
  shrink = all(b < a or b <= noise for a, b in itertools.pairwise(changes))
  if kind == stats.MEASUREMENT:  # a fixed margin declared before the run (stats.measure), never the noise
    tol = float(v.extra.get('settle', math.nan))
    (drift, _), c = _projected(changes, noise), changes[-1]
    if c >= tol:
      return False, said + f'; the last >= the settling margin ({tol:.3g})'
    return drift < tol, said + (
      f'; the last < the settling margin ({tol:.3g}); kept up at its ratio to the change before for {len(changes)} '
      f'more doublings it moves {drift:.3g}, {"<" if drift < tol else ">="} the margin'
    )
  tol = _boundary_distance(v) / 2
  if not math.isfinite(tol):
    return shrink, said + (' shrink' if shrink else ' do not shrink') + '; the rule has no boundary'
  c, k = changes[-1], len(changes)
  if c >= tol:
    return False, said + f'; the last >= half the distance to the nearest boundary ({tol:.3g})'
  if c <= noise:
    return True, said + f'; the last within the noise ({noise:.3g}) and < half the distance ({tol:.3g})'
  drift, r = _projected(changes, noise)
  return drift < tol, said + (
    f'; the last beyond the noise ({noise:.3g}): kept up at its ratio {r:.3g} to the one before for {k} more '
    f'doublings it moves {drift:.3g}, {"<" if drift < tol else ">="} half the distance to the nearest boundary '
    f'({tol:.3g})'
  )


def stability(
  kind: str,
  rungs: Sequence[stats.Verdict],
  state: Mapping[str, PointState],
  regime: Regime,
  others: Sequence[tuple[str, stats.Verdict]] = (),
  levels: Sequence[str] = LEVELS,
  ties: Sequence[tuple[str, stats.Verdict]] = (),
) -> stats.Check:
  """The verdict's statistic on the budget ladder (`rungs`: the rule at each budget of `levels`, ascending, each
  at its own tuned rates), judged by the claim's kind (docs/reproduce.md#the-budget-ladder):

  - sign ("A beats B after T steps"): the same decided outcome (the CI off the boundary, on one side) at every
    budget; an effect that shrinks toward a floor but keeps its sign is stable. Undecided at T: nothing to hold
    (the claim is answered at its budget: inconclusive).
  - magnitude ("a slope of -2", "a ratio >= 0.77"): the last change is less than half the distance from the
    statistic at T to the rule's nearest boundary, and within the noise or, projected for as many doublings again
    at its ratio to the change before, still under that half distance (`_settles`).
  - existence ("can reach"): reached at T is stable; otherwise the magnitude rule and, for `not reproduced`, no
    budget of the ladder and no other rate at T (`others`: (label, verdict) pairs) on the claimed side of a
    boundary: a best effort that crossed it means the ladder goes on; and a `not reproduced` ("cannot reach") only
    at the largest budget the regime allows (every doubling spent): before it, the remedy is the budget and the
    verdict inconclusive, since a ladder that looks settled at T has moved on at 4T (universal_approximation).
  - measurement (`stats.measure`): the last change and its projected drift under the declared settling margin; a
    number at the budget its claim names (`settle` None) holds at T, its saturation reported (`_saturation`).

  A failure when the rule is inconclusive at T (the statistic inside its noise band) demotes to `inconclusive`,
  never to `invalid`; so does one where a tie could settle it: `ties` ((level, verdict) pairs: the rule at that
  budget with a point read at a rate tied with its chosen one) of which one, put in its rung, makes it stable.
  Either way the remedy is the budget: double T for the verdict's points (the T and T/2 runs become T/2 and T/4)
  while doublings are left; ties themselves are judged by `rate_tie`, never bought with steps."""
  v = rungs[-1]
  raw = v.raw_outcome
  passed, how = _by_kind(kind, rungs, levels, others, _rung_text(levels, rungs, _budgets(rungs, state)))
  how += _unfit_text(levels, rungs)
  name = f'{STABILITY} ({kind or "no kind"} claim)'
  demote = stats.INCONCLUSIVE if raw == stats.INCONCLUSIVE else stats.INVALID
  left = all(state[p].doublings < regime.max_doublings for p in v.points if p in state) and v.points
  if passed and kind == stats.EXISTENCE and raw == stats.NOT_REPRODUCED and left:
    return _unspent_refutation(name, how, v, state, regime)
  if passed:
    sign_undecided, at_budget = kind == stats.SIGN and raw not in stats.DECISIVE, v.extra.get('at_budget')
    held = not sign_undecided and not (kind == stats.MEASUREMENT and at_budget)  # they hold nothing: n/a
    return stats.Check(name, True, how, demote=demote, applies=held)
  settling = sorted(
    {lv for lv, alt in ties if _by_kind(kind, _put(rungs, levels, lv, alt), levels, others, '', v.ci)[0]}
  )
  if settling:  # the budget is still the remedy; if none is left, the tie makes the failure noise, not a refutation
    how += f'; a tied rate at {", ".join(settling)} makes the ladder stable: without a settled ladder, inconclusive'
    demote = stats.INCONCLUSIVE
  elif ties:
    how += f'; rate ties at {", ".join(sorted({lv for lv, _ in ties}))}: none of them makes the ladder stable'
  return stats.Check(
    name,
    False,
    how + ('' if left else '; no doubling left (the most the regime allows)'),
    remedy=stats.DOUBLE_STEPS if left else '',
    points=tuple(v.points),
    demote=demote,
  )


def _budgets(rungs: Sequence[stats.Verdict], state: Mapping[str, PointState]) -> list[int]:
  """The steps of each rung: T of the verdict's points halved per rung below it."""
  steps = sorted({state[p].steps for p in rungs[-1].points if p in state})
  return [steps[-1] // 2 ** (len(rungs) - 1 - i) if steps else 0 for i in range(len(rungs))]


def _unfit_text(levels: Sequence[str], rungs: Sequence[stats.Verdict]) -> str:
  """The rungs whose premise fails: their rule's outcomes are read, not believed."""
  unfit = [lv for lv, r in zip(levels, rungs, strict=True) if r.premises and not all(c.passed for c in r.premises)]
  return f"; the premise fails at {', '.join(unfit)}: these are the rule's outcomes, not a refutation" if unfit else ''


def _unspent_refutation(name: str, how: str, v: stats.Verdict, state, regime: Regime) -> stats.Check:
  """A "cannot reach" read inside the magnitude rule before every doubling is spent: the next doubling, inconclusive."""
  spent = min(state[p].doublings for p in v.points if p in state)
  how += (
    f'; within the magnitude rule, which is not evidence of convergence: "cannot reach" stands only on the '
    f'largest budget the regime allows ({spent} of {regime.max_doublings} doublings spent): not yet a refutation, '
    'inconclusive'
  )
  return stats.Check(name, False, how, remedy=stats.DOUBLE_STEPS, points=tuple(v.points), demote=stats.INCONCLUSIVE)


def _put(rungs: Sequence[stats.Verdict], levels: Sequence[str], level: str, v: stats.Verdict) -> list[stats.Verdict]:
  return [v if lv == level else r for lv, r in zip(levels, rungs, strict=True)]


def _by_kind(
  kind: str, rungs: Sequence[stats.Verdict], levels: Sequence[str], others, how: str, ci=None
) -> tuple[bool, str]:
  """(stable, how) of `stability`'s rule for the claim's kind, before ties and remedies (`ci`: as for `_settles`)."""
  v = rungs[-1]
  raw, values = v.raw_outcome, [r.statistic for r in rungs]
  if not all(map(math.isfinite, values)):
    return False, f'{how}: not computable at every budget'
  if kind == stats.SIGN:
    if raw not in stats.DECISIVE:
      return True, f'{how}: undecided at T, where the claim is answered; nothing to hold'
    passed = all(r.raw_outcome == raw for r in rungs)
    return passed, how + '; ' + (
      'the same decided outcome at every budget' if passed else f'the rule does not give {raw} at every budget'
    )
  if kind == stats.EXISTENCE and raw == stats.REPRODUCED:
    return True, f'{how}: reached at T'
  if kind == stats.MEASUREMENT and v.extra.get('at_budget'):
    return True, f'{how}: a number at the budget its claim names (T)' + _saturation(v, values)
  passed, why = _settles(v, values, ci, kind)
  how += why
  if kind == stats.EXISTENCE and raw == stats.NOT_REPRODUCED:
    seen = [*zip(levels, rungs, strict=True), *others]
    crossed = [label for label, alt in seen if _crossed(v.statistic, alt.statistic, v.boundaries)]
    if crossed:
      return False, how + f'; a best effort crossed the boundary ({", ".join(crossed)}): the ladder goes on'
  return passed, how


def tied_rates(point: str, frame: pd.DataFrame, s: PointState, regime: Regime, steps: int | None = None) -> list[float]:
  """The rates of `point` at `steps` (default T) within the tuning noise of the chosen one: every seed finite, the
  Student-t 95% CI of the mean paired (by seed) difference of `regime.metric` (of its log where it is positive at
  every rate: raw MSEs are heavy-tailed) from the chosen rate's contains 0, and the rate is not worse on every seed
  (a rate with a few stuck seeds has a wide CI however much worse it is everywhere)."""
  at = frame[(frame['point'] == point) & (frame[STEPS] == (s.steps if steps is None else steps))]
  best = choose(rate_stats(at, regime.metric), regime.mode)
  if best is None:
    return []
  ok = at[finite(at, regime.metric)]
  per_rate = {float(r): g.set_index(SEED)[regime.metric].astype(float) for r, g in ok.groupby(LR)}
  if all((x > 0).all() for x in per_rate.values()):  # a positive metric (an MSE, bits) compared on its log: a rate
    per_rate = {r: np.log(x) for r, x in per_rate.items()}  # 1,000x worse with heavy tails is not a tie
  chosen = per_rate.get(best.rate)
  out = []
  for r in rate_stats(at, regime.metric):
    if np.isclose(r.rate, best.rate) or not r.eligible or chosen is None:
      continue
    d = (per_rate[r.rate] - chosen).dropna()
    if len(d) < 2:
      continue
    _, lo, hi = stats.mean_ci(d)
    worse_everywhere = bool((d > 0).all() if regime.mode == 'min' else (d < 0).all())
    if np.allclose(d, 0) or (lo <= 0 <= hi and not worse_everywhere):
      out.append(r.rate)
  return out


def _why(a: stats.Verdict, chosen: stats.Verdict) -> str:
  """', failed: CHECKS' (or ', imprecise'): what makes a tied reading's outcome differ from the chosen rates'."""
  if a.outcome == chosen.outcome:
    return ''
  names = [c.name for c in a.failed_checks if c.applies and c.demote]
  return f', failed: {", ".join(names)}' if names else (', imprecise' if a.detail.startswith('imprecise') else '')


def rate_tie(
  alternatives: Sequence[tuple[str, float, stats.Verdict, stats.Verdict]],
  reached: bool = False,
  kind: str = '',
  ladder: Sequence[stats.Verdict] = (),
  others: Sequence[tuple[str, stats.Verdict]] = (),
) -> stats.Check:
  """No learning-rate tie decides the verdict (`alternatives`: (where 'POINT at LEVEL', rate, the rule with that
  point there, the rule at the chosen rates of that budget)). With the verdict's `ladder` (and `kind`, `others`, as
  for `stability`), a tie decides it when it changes the outcome at T, or, read in its rung, whether the ladder is
  stable; a lower rung's own outcome is not the verdict (a magnitude claim is judged at T on the ladder's values).
  Without a ladder: when it changes its budget's outcome. With the verdict invalid at T at the chosen and at every
  tied rate there (a premise or a rate check failed), no tie can change it: n/a. A tie is noise in the tuning, not a
  budget: a failure demotes to inconclusive and names the statistic at every tied rate. `reached`: an existence
  claim reproduced at T, which one rate reaching shows; a tied rate that does not reach it undoes nothing (the
  statistics are named)."""
  name = RATE_TIE
  if not alternatives:
    return stats.Check(name, True, 'no rate within the tuning noise of the chosen one', demote=stats.INCONCLUSIVE)
  read = '; '.join(
    f'{w} at tied rate {r:g}: {a.statistic:.4g} ({a.outcome}{_why(a, c)}; chosen rates {c.statistic:.4g}, {c.outcome})'
    for w, r, a, c in alternatives
  )
  at_t = [a for w, _, a, _ in alternatives if w.rsplit(' at ', 1)[1] == LEVELS[-1]]
  if ladder and ladder[-1].outcome == stats.INVALID and all(a.outcome == stats.INVALID for a in at_t):
    why = 'invalid at T at the chosen rates and at every tied rate there: a tie, which demotes to inconclusive, cannot'
    return stats.Check(name, True, f'{why} change it; {read}', demote=stats.INCONCLUSIVE, applies=False)
  if ladder:
    steady = _by_kind(kind, ladder, LEVELS, others, '')[0]

    def decides(where: str, a: stats.Verdict, c: stats.Verdict) -> bool:
      level = where.rsplit(' at ', 1)[1]
      if level == LEVELS[-1] and a.outcome != c.outcome:
        return True
      if level == LEVELS[-1] and kind == stats.MEASUREMENT and not c.ci[0] <= a.statistic <= c.ci[1]:
        return True  # the tied rate's number lies outside the measurement's CI: the rate choice moves it
      return _by_kind(kind, _put(ladder, LEVELS, level, a), LEVELS, others, '', ladder[-1].ci)[0] != steady

    differ = [w for w, _, a, c in alternatives if decides(w, a, c)]
    if not differ and any(a.outcome != c.outcome for _, _, a, c in alternatives):
      read += '; the other outcomes are at lower rungs and leave the ladder as it is'
  else:
    differ = [w for w, _, a, c in alternatives if a.outcome != c.outcome]
  if differ and reached:
    why = 'an existence claim reached at T at the chosen rates: a tied rate that does not reach it undoes nothing'
    return stats.Check(name, True, f'{why}; {read}', demote=stats.INCONCLUSIVE)
  return stats.Check(name, not differ, read, demote=stats.INCONCLUSIVE)


def rate_policy(v: stats.Verdict, own: stats.Verdict) -> stats.Check:
  """A verdict read with its points at one shared rate (`v`, the rule's own outcome at T) stands only where each point
  at its own tuned rate (`own`, the same rule at T) gives the same decided outcome: else the rate policy, not the
  comparison, decides it. A failure demotes a decided verdict to inconclusive and names both readings."""
  name = 'the rate policy does not decide it (each point at its own tuned rate agrees)'
  read = (
    f'one shared rate: {v.statistic:.4g} ({v.raw_outcome}); each point at its own tuned rate: {own.statistic:.4g} '
    f'[{own.ci[0]:.4g}, {own.ci[1]:.4g}] ({own.raw_outcome})'
  )
  if v.raw_outcome not in stats.DECISIVE:
    return stats.Check(name, True, f'{read}: nothing decided', demote=stats.INCONCLUSIVE, applies=False)
  return stats.Check(name, own.raw_outcome == v.raw_outcome, read, demote=stats.INCONCLUSIVE)


def one_seed(v: stats.Verdict, drops: Sequence[tuple[Any, stats.Verdict]]) -> stats.Check:
  """No single seed decides the verdict: leaving out any one seed (`drops`: (seed, the rule without it)), the
  statistic's interval, read at the full sample's width (its half-widths scaled by t(n - 1) / t(n - 2), so that
  losing a degree of freedom alone does not undecide it), still lies on the side of every boundary it lay on, and
  the rule does not give the opposite decided outcome (a measurement: n/a, see below). A failure demotes a decided
  verdict to inconclusive and names the seed."""
  name = 'no single seed decides it'
  if v.outcome == stats.MEASURED:  # a mean over seeds moves by at most s/sqrt(n) without one: inside its t CI
    why = 'a measurement is a mean over seeds: leaving one out cannot move it outside its CI; the precision bar of '
    return stats.Check(name, True, why + 'stats.measure stands in', demote=stats.INCONCLUSIVE, applies=False)
  if v.outcome not in stats.DECISIVE:
    return stats.Check(
      name, True, f'{v.outcome}: nothing decided for one seed to decide', demote=stats.INCONCLUSIVE, applies=False
    )
  flips = [(s, a, lo, hi) for s, a in drops for lo, hi in [_at_full_width(a, v.n)] if _decides(v, a, lo, hi)]
  if not flips:
    return stats.Check(
      name, True, f'{v.outcome} with any one of {len(drops)} seeds left out', demote=stats.INCONCLUSIVE
    )
  how = '; '.join(
    f"without seed {s}: {a.statistic:.4g} (CI at the full sample's width [{lo:.4g}, {hi:.4g}]), {a.outcome}"
    for s, a, lo, hi in flips
  )
  return stats.Check(name, False, how, demote=stats.INCONCLUSIVE)


def _at_full_width(a: stats.Verdict, n: int) -> tuple[float, float]:
  """`a`'s CI with its half-widths scaled from n - 1 seeds' t quantile to n seeds' (nan where it has none)."""
  lo, hi = a.ci
  if not (math.isfinite(lo) and math.isfinite(hi)) or n < 3:
    return lo, hi
  k = float(sp_stats.t.ppf(0.975, n - 1) / sp_stats.t.ppf(0.975, n - 2))
  return a.statistic - k * (a.statistic - lo), a.statistic + k * (hi - a.statistic)


def _decides(v: stats.Verdict, a: stats.Verdict, lo: float, hi: float) -> bool:
  """Leaving the seed out moves the decision: the opposite decided outcome, or an interval that reaches a boundary
  v's interval kept to one side of (a rule without a finite interval: any other outcome)."""
  if a.outcome in stats.DECISIVE and a.outcome != v.outcome:
    return True
  if not (math.isfinite(lo) and math.isfinite(hi) and all(map(math.isfinite, v.ci))):
    return a.outcome != v.outcome
  return any(math.isfinite(b) and (v.ci[0] > b or v.ci[1] < b) and lo <= b <= hi for b in v.boundaries)


def coverage(
  v: stats.Verdict, sel: pd.DataFrame, seeds: int | Mapping[str, int], finished: Sequence[str] = ('completed',)
) -> stats.Check:
  """Every point the verdict reads has all its seeds (`seeds`, or seeds[point]: its arm's) finished at its chosen
  rate, a run's status one of `finished` (a verdict over fewer seeds at one point than at another would compare
  different samples; a verdict whose outcome is divergence counts a diverged run as measured)."""
  short, want = [], {p: seeds[p] if isinstance(seeds, Mapping) else seeds for p in v.points}
  for p in v.points:
    g = sel[sel['point'] == p]
    n = g.loc[g['status'].isin(finished), SEED].nunique() if 'status' in g else g[SEED].nunique()
    if n < want[p]:
      short.append(f'{p}: {n}/{want[p]}')
  counts = sorted(set(want.values()))
  shown = counts[0] if len(counts) == 1 else '/'.join(map(str, counts))
  return stats.Check(
    f'every seed {"/".join(finished)} at the chosen rate',
    not short,
    '; '.join(short) or f'{shown} seeds at each of {len(v.points)} point(s)',
  )


def one_budget(v: stats.Verdict, state: Mapping[str, PointState], factor: Mapping[str, int]) -> stats.Check:
  """The points the verdict compares trained for one budget (T over the arm's steps_factor); remedy: double the
  lagging points."""
  t = {p: state[p].steps // factor.get(p, 1) for p in v.points if p in state}
  lagging = tuple(p for p, x in t.items() if x < max(t.values(), default=0))
  detail = ', '.join(f'{p}: {state[p].steps}' for p in t) + ' steps'
  return stats.Check(
    'the points compared trained for one budget',
    not lagging,
    detail,
    remedy=stats.DOUBLE_STEPS if lagging else '',
    points=lagging,
  )


def refutation_guard(v: stats.Verdict, name: str, why: str, refuted: str) -> stats.Check:
  """A premise for a design with no positive control for a refutation (a fixed statement, not a measured check):
  it fails for a `not reproduced` of the rule, which is then `invalid`, and passes, not needed, for any other outcome.
  `why`: what the design lacks; `refuted`: what the rule alone refuting would say, and the next step."""
  needed = v.raw_outcome == stats.NOT_REPRODUCED
  detail = f'{why}; ' + (refuted if needed else 'not needed for this outcome')
  return stats.as_premise(stats.Check(name, not needed, detail))


def ratio_control(claim: str, num, den, floor: float) -> stats.Verdict:
  """A refutation's measured control as a verdict: mean(num) / mean(den) over seeds (rules_lib.ratio_of_means),
  reproduced if its 95% CI lies above `floor`, not reproduced if below, else inconclusive (nan with no seeds)."""
  r, lo, hi = rules_lib.ratio_of_means(num, den) if len(num) else (math.nan,) * 3
  return stats.Verdict(
    claim,
    stats.decide((lo, hi), floor, math.inf),
    r,
    (lo, hi),
    'ratio of means over seeds, 95% CI by rules_lib.ratio_of_means',
    f'reproduced if the 95% CI lies above {floor:.3g}',
    len(num),
  )


def refutation_control(
  v: stats.Verdict, name: str, what: str, control: stats.Verdict, points: tuple[str, ...] = ()
) -> stats.Check:
  """A refutation's measured positive control: `control` (a rule on a setting whose answer is known, `what` names
  it) must be reproduced where `v`'s rule alone refutes; other outcomes do not need it. Its numbers are shown
  whatever it gates."""
  needed = v.raw_outcome == stats.NOT_REPRODUCED
  shown = f'{what}: {control.statistic:+.4g} [{control.ci[0]:+.4g}, {control.ci[1]:+.4g}], {control.outcome}'
  ok = control.outcome == stats.REPRODUCED or not needed
  why = '; needed for a not reproduced' if needed else '; needed only for a refutation, not for this outcome'
  return stats.as_premise(stats.Check(name, ok, shown + ('' if needed and ok else why), points=points))
