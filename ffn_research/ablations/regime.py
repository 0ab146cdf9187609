"""The regime policy: how much compute a claim needs, and whether the setup reached it.

One policy for every study (docs/reproduce.md#the-regime-policy). A study declares per scale a
`Regime`: its learning-rate grid, its step budget T, its seeds and a compute cap (in reference-seconds,
scaled to the machine by a reference step timed at every invocation). Every point (an arm's shape or
variant) is run at every rate of its grid on a ladder of three budgets, T/4, T/2 and T (separate runs,
each with its own schedule), over all seeds. Then, pure functions of the runs' frame:

- `tune`: per point and budget, the rate with the best mean metric over seeds; a rate with a seed
  that diverged or failed is not eligible (a mean over the survivors would flatter it). Every seed
  of the point is read at that one rate, so seeds stay paired. A point that is not tuned (one rate)
  is read at its rate whatever its seeds did (a study may measure divergence itself).
- `inside_grid`: the rate chosen at T is not at an edge of the rates run, unless the rate beyond
  that edge was run and diverged or failed for the majority of its seeds (the edge is then the
  largest stable rate), or its surviving seeds are worse on the mean. Remedy: one rate `factor`
  beyond the edge, at most `max_extensions` per direction.
- `stability`: the verdict's own statistic on the ladder, each budget at its own tuned rates, judged by
  the claim's kind (sign, magnitude, existence; see the function). Remedy: double T for the verdict's
  points (the T and T/2 runs become T/2 and T/4, so a doubling costs one new budget), at most
  `max_doublings`; `shared_budgets` widens a doubling to every point that shares a verdict with a
  doubled one. The doubled point keeps only the rate chosen at T and its neighbour on each side
  (`dropped` records the others: an edge at 2T restores the dropped rate beyond it before any new rate).
- `rate_tie` and `one_seed`: no rate within the tuning noise of the chosen one (`tied_rates`) and no
  single seed left out changes the outcome; these are noise, not the budget: a failure demotes a
  decided verdict to inconclusive, with the statistic at each tied rate or without the seed.
- `extend`: a new state from the remedies of the failed checks of the verdicts that more compute can
  still make valid (`fixable`: every failed check of the verdict has a remedy); `plan` the runs of a state.
  `next_extension`: the whole extension, or the part that fits the cap (rates first, then the cheapest doublings).

The runner (ablations/runner.py) loops: run the plan, tune, judge, extend, until every check passes,
no invalid verdict has every failed check remediable, or the next extension would pass the cap; it records every
iteration (`regime.json` in the ablation's folder; a killed loop resumes from it).
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sp_stats

from ffn_research import stats

LR = 'train.learning_rate'
STEPS = 'train.steps'
SEED = 'train.seed'
FULL, HALF, QUARTER = 'T', 'T/2', 'T/4'
LEVELS = (QUARTER, HALF, FULL)  # the budget ladder every verdict is computed on, ascending
REFERENCE_STEP_S = 1.38e-4  # seconds per reference step (cap.reference_step_s) on the machine the caps are written for:
# the 2-core AMD EPYC development machine, jax 0.10.2 (docs/reproduce.md#caps-in-reference-seconds)


@dataclasses.dataclass(frozen=True)
class Regime:
  """What a study declares per scale; the runner owns the rest."""

  rates: tuple[float, ...]  # the starting learning-rate grid of every tuned point
  steps: int  # the starting step budget T (the T/2 runs are separate)
  seeds: int  # seeds 0 .. seeds-1, paired across points
  cap: float  # compute cap in reference-seconds: run-seconds on a machine whose reference step takes
  # REFERENCE_STEP_S (the runner times it at every invocation and scales the cap to the machine it runs on)
  metric: str = 'eval_loss'  # tuning metric: a results.csv (or collected) column
  mode: str = 'min'  # 'min' or 'max' of `metric`
  factor: float = 3.0  # a grid step beyond an edge
  max_extensions: int = 2  # rate extensions per direction per point
  max_doublings: int = 2  # budget doublings per point (T grows to at most 4 T by default)

  def __post_init__(self):
    if self.mode not in ('min', 'max'):
      raise ValueError(f'Regime.mode={self.mode!r}; allowed: min, max')
    if not self.rates or self.steps < 4 or self.seeds < 1:
      raise ValueError(f'Regime needs rates, steps >= 4 (the ladder runs T/4) and seeds >= 1; got {self}')


@dataclasses.dataclass
class PointState:
  """Where the loop stands at one point: its rates and its budget T."""

  rates: list[float]
  steps: int
  lower: int = 0  # rate extensions below the starting grid
  higher: int = 0  # rate extensions above it
  doublings: int = 0
  dropped: list[float] = dataclasses.field(default_factory=list)  # rates a doubling left out (run at T/2 only)

  def budgets(self) -> tuple[int, ...]:
    """The ladder's step budgets, ascending (LEVELS): T/4, T/2, T."""
    return self.steps // 4, self.steps // 2, self.steps


def initial_state(rates: Mapping[str, Sequence[float]], steps: Mapping[str, int]) -> dict[str, PointState]:
  """{point: PointState} from each point's starting rates (one rate: a point that is not tuned) and T."""
  return {p: PointState(sorted(float(x) for x in r), int(steps[p])) for p, r in rates.items()}


def state_to_json(state: Mapping[str, PointState]) -> dict[str, Any]:
  return {p: dataclasses.asdict(s) for p, s in state.items()}


def state_from_json(d: Mapping[str, Any]) -> dict[str, PointState]:
  return {p: PointState(**s) for p, s in d.items()}


def plan(state: Mapping[str, PointState]) -> dict[str, list[tuple[float, int]]]:
  """{point: [(rate, steps), ...]}: every rate of the point at every budget of the ladder."""
  return {p: [(r, b) for b in s.budgets() for r in s.rates] for p, s in state.items()}


# --------------------------------------------------------------------------- tuning


def _finite(frame: pd.DataFrame, metric: str) -> pd.Series:
  ok = np.isfinite(pd.to_numeric(frame[metric], errors='coerce').astype(float))
  return ok & (frame['status'] == 'completed') if 'status' in frame else ok


@dataclasses.dataclass(frozen=True)
class RateStats:
  """One (point, budget, rate): mean metric over its finite seeds, how many seeds ran and how many failed."""

  rate: float
  mean: float
  seeds: int
  bad: int  # seeds diverged, failed or with a non-finite metric

  @property
  def eligible(self) -> bool:
    return self.seeds > 0 and self.bad == 0

  @property
  def mostly_bad(self) -> bool:
    return self.bad * 2 > self.seeds


def rate_stats(frame: pd.DataFrame, metric: str) -> list[RateStats]:
  """Per rate (ascending) of one point and budget's rows."""
  ok = _finite(frame, metric)
  out = []
  for rate, g in frame.groupby(LR, sort=True):
    good = pd.to_numeric(g[metric], errors='coerce')[ok[g.index]]
    out.append(RateStats(float(rate), float(good.mean()) if len(good) else math.nan, len(g), int(len(g) - len(good))))
  return out


def choose(rs: Sequence[RateStats], mode: str) -> RateStats | None:
  """The eligible rate with the best mean (None if no rate is eligible)."""
  sign = 1.0 if mode == 'min' else -1.0
  ok = [r for r in rs if r.eligible]
  return min(ok, key=lambda r: sign * r.mean) if ok else None


def tune(frame: pd.DataFrame, state: Mapping[str, PointState], regime: Regime) -> pd.DataFrame:
  """One row per (point, level): the budget, the chosen rate (nan if none eligible), its mean metric, seeds."""
  rows = []
  for p, s in state.items():
    for level, steps in zip(LEVELS, s.budgets(), strict=True):
      at = frame[(frame['point'] == p) & (frame[STEPS] == steps)]
      rs = rate_stats(at, regime.metric)
      best = choose(rs, regime.mode)
      if best is None and len(s.rates) == 1 and rs:  # not tuned: its one rate, whatever its seeds did
        best = rs[0]
      rows.append(
        {
          'point': p,
          'level': level,
          'steps': steps,
          'rate': best.rate if best else math.nan,
          regime.metric: best.mean if best else math.nan,
          'seeds': best.seeds if best else 0,
          'rates_run': len(set(at[LR])) if len(at) else 0,
        }
      )
  return pd.DataFrame(rows, columns=['point', 'level', 'steps', 'rate', regime.metric, 'seeds', 'rates_run'])


def select(frame: pd.DataFrame, tuning: pd.DataFrame, level: str) -> pd.DataFrame:
  """The rows of every point at its chosen rate and budget of `level` (all seeds), with a `level` column."""
  parts = []
  for _, t in tuning[tuning['level'] == level].iterrows():
    sel = (frame['point'] == t['point']) & (frame[STEPS] == t['steps']) & np.isclose(frame[LR].astype(float), t['rate'])
    parts.append(frame[sel])
  out = pd.concat(parts) if parts else frame.iloc[:0]
  return out.assign(level=level).reset_index(drop=True)


# --------------------------------------------------------------------------- checks


def inside_grid(point: str, frame: pd.DataFrame, s: PointState, regime: Regime) -> stats.Check:
  """The rate chosen at T for `point` is inside the rates run there (see the module docstring)."""
  name = f'{point}: learning rate inside the grid'
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
      left = used < regime.max_extensions or _dropped_beyond(s, 'lower' if side == 'smallest' else 'higher') is not None
      fails.append(
        (
          f'{best.rate:g} is the {side} rate run'
          + ('' if left else f' ({used} extensions already, the most the regime allows)'),
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


def _settles(v: stats.Verdict, values: Sequence[float]) -> tuple[bool, str]:
  """The magnitude rule on a ladder's statistics: the changes shrink (one within half the CI half-width at T counts
  as settled) and the last is under half the distance to the nearest boundary; (passed, its words)."""
  changes = [abs(b - a) for a, b in itertools.pairwise(values)]
  noise = (v.ci[1] - v.ci[0]) / 4 if all(map(math.isfinite, v.ci)) else 0.0
  shrink = all(b < a or b <= noise for a, b in itertools.pairwise(changes))
  tol = _boundary_distance(v) / 2
  last = (
    f'; the last {"<" if changes[-1] < tol else ">="} half the distance to the nearest boundary ({tol:.3g})'
    if math.isfinite(tol)
    else '; the rule has no boundary'
  )
  why = f'; changes {", ".join(f"{c:.3g}" for c in changes)} ' + ('shrink' if shrink else 'do not shrink') + last
  return shrink and changes[-1] < tol, why


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
  - magnitude ("a slope of -2", "a ratio >= 0.77"): the changes between consecutive budgets shrink, and the last
    is less than half the distance from the statistic at T to the rule's nearest boundary.
  - existence ("can reach"): reached at T is stable; otherwise the magnitude rule and, for `not reproduced`, no
    budget of the ladder and no other rate at T (`others`: (label, verdict) pairs) on the claimed side of a
    boundary: a best effort that crossed it means the ladder goes on.

  A change within half the CI's half-width at T counts as settled. A failure when the rule is inconclusive at T (the
  statistic inside its noise band) demotes to `inconclusive`, never to `invalid`; so does one that a tie moved:
  `ties` ((level, verdict) pairs: the rule at that budget with a point read at a rate tied with its chosen one, where
  it gives another outcome) of which one, put in its rung, makes the ladder stable (a tie is read at its rates, never
  bought with steps: no remedy). A tie with which the ladder fails as well does not stop it: the budget, not the tie,
  is what has not settled. Otherwise the remedy: double T for the verdict's points (the T and T/2 runs become T/2
  and T/4)."""
  v = rungs[-1]
  raw = v.raw_outcome
  steps = sorted({state[p].steps for p in v.points if p in state})
  budgets = [steps[-1] // 2 ** (len(rungs) - 1 - i) if steps else 0 for i in range(len(rungs))]
  passed, how = _by_kind(kind, rungs, levels, others, _rung_text(levels, rungs, budgets))
  unfit = [lv for lv, r in zip(levels, rungs, strict=True) if r.premises and not all(c.passed for c in r.premises)]
  if unfit:  # the rule's outcomes are read, not believed: the premise check says why
    how += f"; the premise fails at {', '.join(unfit)}: these are the rule's outcomes, not a refutation"
  name = f'stable on the budget ladder ({kind or "no kind"} claim)'
  demote = stats.INCONCLUSIVE if raw == stats.INCONCLUSIVE else stats.INVALID
  if passed:
    return stats.Check(name, True, how, demote=demote)
  settling = sorted({lv for lv, alt in ties if _by_kind(kind, _put(rungs, levels, lv, alt), levels, others, '')[0]})
  if settling:  # a tied rate settles the ladder: the tie, not the budget, moved it; more steps never buy it
    return stats.Check(
      name,
      False,
      how + f'; a tied rate at {", ".join(settling)} makes the ladder stable: a tie moved it, not the budget',
      demote=stats.INCONCLUSIVE,
    )
  if ties:
    how += f'; rate ties at {", ".join(sorted({lv for lv, _ in ties}))} give other outcomes, none a stable ladder'
  left = all(state[p].doublings < regime.max_doublings for p in v.points if p in state) and v.points
  return stats.Check(
    name,
    False,
    how + ('' if left else '; no doubling left (the most the regime allows)'),
    remedy=stats.DOUBLE_STEPS if left else '',
    points=tuple(v.points),
    demote=demote,
  )


def _put(rungs: Sequence[stats.Verdict], levels: Sequence[str], level: str, v: stats.Verdict) -> list[stats.Verdict]:
  return [v if lv == level else r for lv, r in zip(levels, rungs, strict=True)]


def _by_kind(kind: str, rungs: Sequence[stats.Verdict], levels: Sequence[str], others, how: str) -> tuple[bool, str]:
  """(stable, how) of `stability`'s rule for the claim's kind, before ties and remedies."""
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
  passed, why = _settles(v, values)
  how += why
  if kind == stats.EXISTENCE and raw == stats.NOT_REPRODUCED:
    seen = [*zip(levels, rungs, strict=True), *others]
    crossed = [label for label, alt in seen if _crossed(v.statistic, alt.statistic, v.boundaries)]
    if crossed:
      return False, how + f'; a best effort crossed the boundary ({", ".join(crossed)}): the ladder goes on'
  return passed, how


def tied_rates(point: str, frame: pd.DataFrame, s: PointState, regime: Regime, steps: int | None = None) -> list[float]:
  """The rates of `point` at `steps` (default T) within the tuning noise of the chosen one: every seed finite, and the
  Student-t 95% CI of the mean paired (by seed) difference of `regime.metric` (of its log where it is positive at
  every rate: raw MSEs are heavy-tailed) from the chosen rate's contains 0."""
  at = frame[(frame['point'] == point) & (frame[STEPS] == (s.steps if steps is None else steps))]
  best = choose(rate_stats(at, regime.metric), regime.mode)
  if best is None:
    return []
  ok = at[_finite(at, regime.metric)]
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
    if np.allclose(d, 0) or lo <= 0 <= hi:
      out.append(r.rate)
  return out


def rate_tie(
  alternatives: Sequence[tuple[str, float, stats.Verdict, stats.Verdict]], reached: bool = False
) -> stats.Check:
  """No learning-rate tie decides the verdict: at every budget, with any point read at a rate tied with its chosen one
  (`alternatives`: (where, rate, the rule with that point there, the rule at the chosen rates of that budget)), the
  rule gives the same outcome. A tie is noise in the tuning, not a budget: a failure demotes to inconclusive and
  names the statistic at every tied rate. `reached`: an existence claim reproduced at T, which one rate reaching
  shows; a tied rate that does not reach it undoes nothing (the statistics are still named)."""
  name = 'no learning-rate tie decides it'
  if not alternatives:
    return stats.Check(name, True, 'no rate within the tuning noise of the chosen one', demote=stats.INCONCLUSIVE)
  read = '; '.join(
    f'{w} at tied rate {r:g}: {a.statistic:.4g} ({a.outcome}; chosen rates {c.statistic:.4g}, {c.outcome})'
    for w, r, a, c in alternatives
  )
  differ = [a for _, _, a, c in alternatives if a.outcome != c.outcome]
  if differ and reached:
    why = 'an existence claim reached at T at the chosen rates: a tied rate that does not reach it undoes nothing'
    return stats.Check(name, True, f'{why}; {read}', demote=stats.INCONCLUSIVE)
  return stats.Check(name, not differ, read, demote=stats.INCONCLUSIVE)


def one_seed(v: stats.Verdict, drops: Sequence[tuple[Any, stats.Verdict]]) -> stats.Check:
  """No single seed decides the verdict: leaving out any one seed (`drops`: (seed, the rule without it)), the
  statistic's interval, read at the full sample's width (its half-widths scaled by t(n - 1) / t(n - 2), so that
  losing a degree of freedom alone does not undecide it), still lies on the side of every boundary it lay on, and
  the rule does not give the opposite decided outcome. A failure demotes a decided verdict to inconclusive and names
  the seed."""
  name = 'no single seed decides it'
  if v.outcome not in stats.DECISIVE:
    return stats.Check(name, True, f'{v.outcome}: nothing decided for one seed to decide', demote=stats.INCONCLUSIVE)
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


def coverage(v: stats.Verdict, sel: pd.DataFrame, seeds: int) -> stats.Check:
  """Every point the verdict reads has all `seeds` seeds completed at its chosen rate (a verdict over fewer
  seeds at one point than at another would compare different samples)."""
  short = []
  for p in v.points:
    g = sel[sel['point'] == p]
    n = g.loc[g['status'] == 'completed', SEED].nunique() if 'status' in g else g[SEED].nunique()
    if n < seeds:
      short.append(f'{p}: {n}/{seeds}')
  return stats.Check(
    'every seed completed at the chosen rate',
    not short,
    '; '.join(short) or f'{seeds} seeds at each of {len(v.points)} point(s)',
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


# --------------------------------------------------------------------------- extending


def fixable(verdicts: Sequence[stats.Verdict]) -> list[stats.Check]:
  """The failed checks with a remedy of the verdicts whose every failed check that invalidates (`demote` INVALID)
  has one. A failed check without one (a score pinned at its floor, parameters not matched, a limit reached) keeps
  its verdict invalid whatever the loop runs, so the loop spends nothing on that verdict's remedies; a point it
  shares with a verdict that can still pass is extended for that one. A failed check that only demotes (a rate tie,
  one seed deciding it) does not stop the remedies of the others; and a rate at its grid's edge is extended whatever
  else failed, so that every check (a premise too) is read at a rate inside its grid."""
  out = []
  for v in verdicts:
    failed = v.failed_checks
    if all(c.remedy for c in failed if c.demote == stats.INVALID):
      out += [c for c in failed if c.remedy]
    else:  # the rates are still settled: a premise or pin is judged at a rate inside its grid, never at an edge
      out += [c for c in failed if c.remedy in (stats.LOWER_RATE, stats.HIGHER_RATE)]
  return out


def shared_budgets(failed: Sequence[stats.Check], verdicts: Sequence[stats.Verdict]) -> list[stats.Check]:
  """`failed` with each doubling widened to every point that shares a verdict with a doubled point (transitively),
  so the points a verdict compares stay at one budget when another verdict that reads one of them doubles T."""
  groups: list[set[str]] = []
  for v in verdicts:
    joined = set(v.points)
    groups, touching = [g for g in groups if not g & joined], [g for g in groups if g & joined]
    groups.append(joined.union(*touching))
  out = []
  for c in failed:
    if c.remedy == stats.DOUBLE_STEPS:
      more = sorted(set().union(*(g for g in groups if g & set(c.points))) - set(c.points))
      c = dataclasses.replace(c, points=tuple(c.points) + tuple(more))
    out.append(c)
  return out


def _dropped_beyond(s: PointState, side: str) -> float | None:
  """The dropped rate nearest the grid's edge on `side` ('lower' or 'higher'), if any."""
  if side == 'lower':
    below = [r for r in s.dropped if r < s.rates[0]]
    return max(below) if below else None
  above = [r for r in s.dropped if r > s.rates[-1]]
  return min(above) if above else None


def _widen(s: PointState, side: str, regime: Regime) -> str:
  """Add one rate beyond the grid's `side` edge: a rate a doubling dropped if there is one (free), else a new
  rate `factor` beyond (one extension); '' when the extensions are spent."""
  back = _dropped_beyond(s, side)
  if back is not None:
    s.dropped.remove(back)
    s.rates = sorted([*s.rates, back])
    return f'rate {back:.3g} restored {"below" if side == "lower" else "above"} the grid'
  if getattr(s, side) >= regime.max_extensions:
    return ''
  setattr(s, side, getattr(s, side) + 1)
  if side == 'lower':
    s.rates.insert(0, s.rates[0] / regime.factor)
    return f'rate {s.rates[0]:.3g} added below the grid'
  s.rates.append(s.rates[-1] * regime.factor)
  return f'rate {s.rates[-1]:.3g} added above the grid'


def _keep_around(s: PointState, chosen: float | None) -> None:
  """Keep the rate chosen at T and one neighbour on each side of it; the rest go to `dropped`."""
  if chosen is None or not np.isfinite(chosen) or not np.any(np.isclose(s.rates, chosen)):
    return
  i = int(np.argmin(np.abs(np.log(s.rates) - math.log(chosen))))
  keep = s.rates[max(i - 1, 0) : i + 2]
  s.dropped = sorted([*s.dropped, *(r for r in s.rates if r not in keep)])
  s.rates = list(keep)


def extend(
  state: Mapping[str, PointState],
  failed: Sequence[stats.Check],
  regime: Regime,
  chosen: Mapping[str, float] | None = None,
) -> tuple[dict[str, PointState], list[str]]:
  """(new state, what was extended and why) from the remedies of `failed` checks; the state is unchanged
  (and the list empty) when no failed check has a remedy left. `chosen`: {point: the rate chosen at T},
  around which a doubled point's grid is cut (none given: a doubling keeps every rate)."""
  new = {p: dataclasses.replace(s, rates=list(s.rates), dropped=list(s.dropped)) for p, s in state.items()}
  actions, widened, doubled = [], set(), set()
  for c in failed:
    for p in c.points:
      s = new.get(p)
      if s is None or not c.remedy:
        continue
      side = {stats.LOWER_RATE: 'lower', stats.HIGHER_RATE: 'higher'}.get(c.remedy)
      if side and (p, side) not in widened:
        widened.add((p, side))
        did = _widen(s, side, regime)
        if did:
          actions.append(f'{p}: {did} ({c.name})')
      elif c.remedy == stats.DOUBLE_STEPS and s.doublings < regime.max_doublings and p not in doubled:
        doubled.add(p)
        s.steps *= 2
        s.doublings += 1
        _keep_around(s, (chosen or {}).get(p))
        kept = f'; rates {", ".join(f"{r:g}" for r in s.rates)} kept' if s.dropped else ''
        actions.append(f'{p}: steps doubled to {s.steps}{kept} ({c.name})')
  return new, actions


def new_runs(old: Mapping[str, PointState], new: Mapping[str, PointState]) -> dict[str, list[tuple[float, int]]]:
  """{point: [(rate, steps)]} that `new` plans and `old` did not (a restored rate's T/2 run among them although an
  earlier pass ran it: `next_extension` leaves out the runs finished on disk)."""
  before, after = plan(old), plan(new)
  out = {p: [rb for rb in runs if rb not in set(before.get(p, ()))] for p, runs in after.items()}
  return {p: runs for p, runs in out.items() if runs}


def estimate_cost(
  runs: Mapping[str, Sequence[tuple[float, int]]], seconds_per_step: Callable[[str], float], seeds: int
) -> float:
  """Run-seconds of `runs` (each over `seeds` seeds) at each point's measured seconds per step."""
  return float(sum(seconds_per_step(p) * steps * seeds for p, rs in runs.items() for _, steps in rs))


@dataclasses.dataclass(frozen=True)
class Extension:
  """The next pass's state, what it adds and why, its new runs and their estimated run-seconds."""

  state: dict[str, PointState]
  actions: list[str]
  runs: dict[str, list[tuple[float, int]]]
  cost: float
  partial: bool = False  # the whole extension passed the cap: this is the part of it that fits


def _is_rate(c: stats.Check) -> bool:
  return c.remedy in (stats.LOWER_RATE, stats.HIGHER_RATE)


def next_extension(
  state: Mapping[str, PointState],
  verdicts: Sequence[stats.Verdict],
  regime: Regime,
  chosen: Mapping[str, float],
  seconds_per_step: Callable[[str], float],
  spent: float,
  finished: Callable[[str, float, int], bool] = lambda p, rate, steps: False,
  cap_s: float | None = None,
) -> Extension:
  """The remedies of every fixable verdict (`fixable`, doublings widened by `shared_budgets`). When they would
  pass the cap, the part that fits: every rate extension first (a doubling is read at the rate chosen at T, so a
  rate at its grid's edge is settled before it), then the doublings of the verdicts whose rates are settled, the
  cheapest verdict first, while the cap allows. None fits: the whole extension (the loop stops on it).
  `finished(point, rate, steps)`: every seed of that run is on disk already (it costs nothing). `cap_s`: the cap in
  run-seconds on this machine (default: regime.cap, i.e. a machine as fast as the reference)."""
  cap = regime.cap if cap_s is None else cap_s

  def build(checks: Sequence[stats.Check], partial: bool = False) -> Extension:
    new, actions = extend(state, shared_budgets(checks, verdicts), regime, chosen)
    runs = {p: left for p, rs in new_runs(state, new).items() if (left := [rb for rb in rs if not finished(p, *rb)])}
    return Extension(new, actions, runs, estimate_cost(runs, seconds_per_step, regime.seeds), partial)

  fits = lambda e: bool(e.actions) and spent + e.cost <= cap
  whole = build(fixable(verdicts))
  if spent + whole.cost <= cap:
    return whole
  fix = [v for v in verdicts if fixable([v])]
  take = [c for v in fix for c in fixable([v]) if _is_rate(c)]
  ready = [fixable([v]) for v in fix if not any(map(_is_rate, fixable([v])))]  # rates settled
  best = build(take, partial=True) if take else None
  if best is None or not fits(best):
    take, best = [], None
  for more in sorted(ready, key=lambda cs: build(cs).cost):
    trial = build([*take, *more], partial=True)
    if fits(trial):
      take, best = [*take, *more], trial
  return best or whole
