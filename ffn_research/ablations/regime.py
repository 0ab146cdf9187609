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
import math
from typing import Any

import numpy as np
import pandas as pd

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


def finite(frame: pd.DataFrame, metric: str) -> pd.Series:
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
  ok = finite(frame, metric)
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


# --------------------------------------------------------------------------- one rate for several points

TUNED, COMMON = 'tuned', 'common'  # base.Claim.rate: each point at its own tuned rate, or all at one shared rate
COMMON_POINT = '(common rate)'  # the pseudo-point `pooled` builds


def _key(rate: float) -> float:
  return float(f'{rate:.9g}')


def pooled(frame: pd.DataFrame, state: Mapping[str, PointState], points: Sequence[str], metric: str):
  """The `points`' runs as one pseudo-point, COMMON_POINT, for a claim read at one rate shared by them: per budget,
  rate and seed, the mean of `metric` over the points, at the rates every point ran; a (budget, rate, seed) that
  failed or is missing at any point is a failed run of the pseudo-point. Also its PointState (the shared rates, T,
  the fewest extensions and doublings of any point). None when the points do not share one budget T."""
  if len({state[p].steps for p in points}) != 1:
    return None
  shared = set.intersection(*({_key(r) for r in state[p].rates} for p in points))
  rows = frame[frame['point'].isin(points)].assign(_rate=lambda f: f[LR].astype(float).map(_key))
  rows = rows[rows['_rate'].isin(shared)]
  ok = finite(rows, metric)
  out = []
  for (steps, rate, seed), g in rows.groupby([STEPS, '_rate', SEED], sort=True):
    good = len(g) == len(points) and bool(ok[g.index].all())
    value = float(pd.to_numeric(g[metric]).mean()) if good else math.nan
    out.append(
      {
        'point': COMMON_POINT,
        STEPS: steps,
        LR: rate,
        SEED: seed,
        metric: value,
        'status': 'completed' if good else 'failed',
      }
    )
  s = [state[p] for p in points]
  common = PointState(
    rates=sorted(shared),
    steps=s[0].steps,
    lower=min(x.lower for x in s),
    higher=min(x.higher for x in s),
    doublings=min(x.doublings for x in s),
    dropped=sorted({_key(r) for x in s for r in x.dropped}),
  )
  return pd.DataFrame(out, columns=['point', STEPS, LR, SEED, metric, 'status']), common


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


def dropped_beyond(s: PointState, side: str) -> float | None:
  """The dropped rate nearest the grid's edge on `side` ('lower' or 'higher'), if any."""
  if side == 'lower':
    below = [r for r in s.dropped if r < s.rates[0]]
    return max(below) if below else None
  above = [r for r in s.dropped if r > s.rates[-1]]
  return min(above) if above else None


def _widen(s: PointState, side: str, regime: Regime) -> str:
  """Add one rate beyond the grid's `side` edge: a rate a doubling dropped if there is one (free), else a new
  rate `factor` beyond (one extension); '' when the extensions are spent."""
  back = dropped_beyond(s, side)
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
  runs: Mapping[str, Sequence[tuple[float, int]]],
  seconds_per_step: Callable[[str], float],
  seeds: int | Callable[[str], int],
) -> float:
  """Run-seconds of `runs` (each over `seeds` seeds, or seeds(point)) at each point's measured seconds per step."""
  n = seeds if callable(seeds) else (lambda p: seeds)
  return float(sum(seconds_per_step(p) * steps * n(p) for p, rs in runs.items() for _, steps in rs))


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
  seeds_of: Callable[[str], int] | None = None,
) -> Extension:
  """The remedies of every fixable verdict (`fixable`, doublings widened by `shared_budgets`). When they would
  pass the cap, the part that fits, verdict by verdict, the cheapest first within each group, while the cap allows:
  the rate extensions of verdicts that can still pass (a doubling is read at the rate chosen at T, so a rate at its
  grid's edge is settled before it; one expensive verdict's edge does not hold back a cheap one's), then the
  doublings of the verdicts whose rates are settled, then the rate extensions of verdicts a remedy-less failure
  keeps invalid (only so that their checks are read inside the grid). None fits: the whole extension (the loop
  stops on it).
  `finished(point, rate, steps)`: every seed of that run is on disk already (it costs nothing). `cap_s`: the cap in
  run-seconds on this machine (default: regime.cap, i.e. a machine as fast as the reference). `seeds_of(point)`: the
  seeds its arm runs (default: the regime's)."""
  cap = regime.cap if cap_s is None else cap_s

  def build(checks: Sequence[stats.Check], partial: bool = False) -> Extension:
    new, actions = extend(state, shared_budgets(checks, verdicts), regime, chosen)
    runs = {p: left for p, rs in new_runs(state, new).items() if (left := [rb for rb in rs if not finished(p, *rb)])}
    seeds = seeds_of if seeds_of is not None else regime.seeds
    return Extension(new, actions, runs, estimate_cost(runs, seconds_per_step, seeds), partial)

  fits = lambda e: bool(e.actions) and spent + e.cost <= cap
  whole = build(fixable(verdicts))
  if spent + whole.cost <= cap:
    return whole
  fix = [v for v in verdicts if fixable([v])]
  can_pass = lambda v: all(c.remedy for c in v.failed_checks if c.demote == stats.INVALID)
  edges = [(can_pass(v), cs) for v in fix if (cs := [c for c in fixable([v]) if _is_rate(c)])]
  ready = [fixable([v]) for v in fix if not any(map(_is_rate, fixable([v])))]  # rates settled
  cheapest = lambda groups: sorted(groups, key=lambda cs: build(cs).cost)
  take: list[stats.Check] = []
  best = None
  # the edges of verdicts that can still pass, then doublings, then the edges of those that cannot (read inside
  # their grids, never bought before a doubling that can move a verdict)
  order = [*cheapest([cs for ok, cs in edges if ok]), *cheapest(ready), *cheapest([cs for ok, cs in edges if not ok])]
  for more in order:
    trial = build([*take, *more], partial=True)
    if fits(trial):
      take, best = [*take, *more], trial
  return best or whole
