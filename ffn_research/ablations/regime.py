"""The regime policy: how much compute a claim needs, and whether the setup reached it.

One policy for every study (docs/reproduce.md#the-regime-policy). A study declares per scale a
`Regime`: its learning-rate grid, its step budget T, its seeds and a compute cap. Every point (an
arm's shape or variant) is run at every rate of its grid, at T and at T/2 (separate runs, each with
its own schedule), over all seeds. Then, pure functions of the runs' frame:

- `tune`: per point and budget, the rate with the best mean metric over seeds; a rate with a seed
  that diverged or failed is not eligible (a mean over the survivors would flatter it). Every seed
  of the point is read at that one rate, so seeds stay paired. A point that is not tuned (one rate)
  is read at its rate whatever its seeds did (a study may measure divergence itself).
- `inside_grid`: the rate chosen at T is not at an edge of the rates run, unless the rate beyond
  that edge was run and diverged or failed for the majority of its seeds (the edge is then the
  largest stable rate), or its surviving seeds are worse on the mean. Remedy: one rate `factor`
  beyond the edge, at most `max_extensions` per direction.
- `stability`: the verdict's own statistic, computed from the T runs and from the T/2 runs (each at
  its own tuned rates), gives the same outcome, and |stat(T) - stat(T/2)| is less than half the
  distance from stat(T) to the rule's nearest boundary (both inconclusive: half the CI's half-width at
  T, since that distance is then inside the noise). Remedy: double T for the verdict's points
  (the T runs become the half budget, so a doubling costs 2x, not 3x), at most `max_doublings`;
  `shared_budgets` widens a doubling to every point that shares a verdict with a doubled one. The
  doubled point keeps only the rate chosen at T and its neighbour on each side (`dropped` records the
  others: an edge at 2T restores the dropped rate beyond it before any new rate is added).
- `extend`: a new state from the remedies of the failed checks of the verdicts that more compute can
  still make valid (`fixable`: every failed check of the verdict has a remedy); `plan` the runs of a state.
  `next_extension`: the whole extension, or the part that fits the cap (rates first, then the cheapest doublings).

The runner (ablations/runner.py) loops: run the plan, tune, judge, extend, until every check passes,
no invalid verdict has every failed check remediable, or the next extension would pass the cap; it records every
iteration (`regime.json` in the ablation's folder; a killed loop resumes from it).
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd

from ffn_research import stats

LR = 'train.learning_rate'
STEPS = 'train.steps'
SEED = 'train.seed'
FULL, HALF = 'T', 'T/2'  # the two budget levels a verdict is computed at


@dataclasses.dataclass(frozen=True)
class Regime:
  """What a study declares per scale; the runner owns the rest."""

  rates: tuple[float, ...]  # the starting learning-rate grid of every tuned point
  steps: int  # the starting step budget T (the T/2 runs are separate)
  seeds: int  # seeds 0 .. seeds-1, paired across points
  cap_s: float  # compute cap: run-seconds (sum of the runs' wall times) the loop may spend
  metric: str = 'eval_loss'  # tuning metric: a results.csv (or collected) column
  mode: str = 'min'  # 'min' or 'max' of `metric`
  factor: float = 3.0  # a grid step beyond an edge
  max_extensions: int = 2  # rate extensions per direction per point
  max_doublings: int = 2  # budget doublings per point (T grows to at most 4 T by default)

  def __post_init__(self):
    if self.mode not in ('min', 'max'):
      raise ValueError(f'Regime.mode={self.mode!r}; allowed: min, max')
    if not self.rates or self.steps < 2 or self.seeds < 1:
      raise ValueError(f'Regime needs rates, steps >= 2 and seeds >= 1; got {self}')


@dataclasses.dataclass
class PointState:
  """Where the loop stands at one point: its rates and its budget T."""

  rates: list[float]
  steps: int
  lower: int = 0  # rate extensions below the starting grid
  higher: int = 0  # rate extensions above it
  doublings: int = 0
  dropped: list[float] = dataclasses.field(default_factory=list)  # rates a doubling left out (run at T/2 only)

  def budgets(self) -> tuple[int, int]:
    return self.steps // 2, self.steps


def initial_state(rates: Mapping[str, Sequence[float]], steps: Mapping[str, int]) -> dict[str, PointState]:
  """{point: PointState} from each point's starting rates (one rate: a point that is not tuned) and T."""
  return {p: PointState(sorted(float(x) for x in r), int(steps[p])) for p, r in rates.items()}


def state_to_json(state: Mapping[str, PointState]) -> dict[str, Any]:
  return {p: dataclasses.asdict(s) for p, s in state.items()}


def state_from_json(d: Mapping[str, Any]) -> dict[str, PointState]:
  return {p: PointState(**s) for p, s in d.items()}


def plan(state: Mapping[str, PointState]) -> dict[str, list[tuple[float, int]]]:
  """{point: [(rate, steps), ...]}: every rate of the point at T/2 and at T."""
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
    for level, steps in zip((HALF, FULL), s.budgets(), strict=True):
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


def stability(
  v_full: stats.Verdict, v_half: stats.Verdict, state: Mapping[str, PointState], regime: Regime
) -> stats.Check:
  """The verdict's statistic from the T runs and from the T/2 runs: same rule outcome, and a change of
  less than half the distance from stat(T) to the rule's nearest boundary; when both are inconclusive
  (a CI across a boundary, so that distance is within the noise), less than half the CI's half-width
  at T: the drift is small against what the seeds can resolve."""
  steps = sorted({state[p].steps for p in v_full.points if p in state})
  name = 'statistic stable when the steps double'
  s_t, s_h = v_full.statistic, v_half.statistic
  at = f'{s_t:.4g} at T ({"/".join(map(str, steps)) or "?"} steps) vs {s_h:.4g} at T/2'
  if not (math.isfinite(s_t) and math.isfinite(s_h)):
    passed, how = False, f'{at}: not computable at both budgets'
  else:
    dist, change = _boundary_distance(v_full), abs(s_t - s_h)
    width = (v_full.ci[1] - v_full.ci[0]) / 2 if all(math.isfinite(x) for x in v_full.ci) else math.nan
    if v_full.raw_outcome == v_half.raw_outcome == stats.INCONCLUSIVE and math.isfinite(width):
      tol, against = width / 2, 'half the CI half-width at T'
    else:
      tol, against = dist / 2, 'half the distance to the nearest boundary'
    passed = v_full.raw_outcome == v_half.raw_outcome and change < tol
    how = f'{at}; outcome {v_full.raw_outcome} vs {v_half.raw_outcome}; change {change:.3g} ' + (
      f'{"<" if change < tol else ">="} {against} ({tol:.3g})' if math.isfinite(tol) else '(the rule has no boundary)'
    )
  if passed:
    return stats.Check(name, True, how)
  left = all(state[p].doublings < regime.max_doublings for p in v_full.points if p in state) and v_full.points
  return stats.Check(
    name,
    False,
    how + ('' if left else '; no doubling left (the most the regime allows)'),
    remedy=stats.DOUBLE_STEPS if left else '',
    points=tuple(v_full.points),
  )


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
  """The failed checks of the verdicts whose every failed check has a remedy. A failed check without one
  (a score pinned at its floor, parameters not matched, a limit reached) keeps its verdict invalid whatever
  the loop runs, so the loop spends nothing on that verdict's remedies; a point it shares with a verdict
  that can still pass is extended for that one."""
  return [c for v in verdicts if all(c.remedy for c in v.failed_checks) for c in v.failed_checks]


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
) -> Extension:
  """The remedies of every fixable verdict (`fixable`, doublings widened by `shared_budgets`). When they would
  pass the cap, the part that fits: every rate extension first (a doubling is read at the rate chosen at T, so a
  rate at its grid's edge is settled before it), then the doublings of the verdicts whose rates are settled, the
  cheapest verdict first, while the cap allows. None fits: the whole extension (the loop stops on it).
  `finished(point, rate, steps)`: every seed of that run is on disk already (it costs nothing)."""

  def build(checks: Sequence[stats.Check], partial: bool = False) -> Extension:
    new, actions = extend(state, shared_budgets(checks, verdicts), regime, chosen)
    runs = {p: left for p, rs in new_runs(state, new).items() if (left := [rb for rb in rs if not finished(p, *rb)])}
    return Extension(new, actions, runs, estimate_cost(runs, seconds_per_step, regime.seeds), partial)

  fits = lambda e: bool(e.actions) and spent + e.cost <= regime.cap_s
  whole = build(fixable(verdicts))
  if spent + whole.cost <= regime.cap_s:
    return whole
  fix = [v for v in verdicts if v.failed_checks and all(c.remedy for c in v.failed_checks)]
  take = [c for v in fix for c in v.failed_checks if _is_rate(c)]
  ready = [v.failed_checks for v in fix if not any(map(_is_rate, v.failed_checks))]  # rates settled
  best = build(take, partial=True) if take else None
  if best is None or not fits(best):
    take, best = [], None
  for more in sorted(ready, key=lambda cs: build(cs).cost):
    trial = build([*take, *more], partial=True)
    if fits(trial):
      take, best = [*take, *more], trial
  return best or whole
