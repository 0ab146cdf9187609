"""Judging one pass of the regime loop: the study's verdicts on the budget ladder (each rung at its tuned rates, or
at one rate shared by the verdict's points: `base.Claim.rate`), each gated on its premise, its rate checks, its
stability by the claim's kind, no rate tie and no single seed deciding it (ablations/checks.py). Pure functions of
the runs' frame, the tuning and the loop's state."""

from collections.abc import Sequence
import dataclasses
import functools
import math
from typing import Any

import numpy as np
import pandas as pd

from ffn_research import stats as verdict_lib
from ffn_research.ablations import base
from ffn_research.ablations import checks as checks_lib
from ffn_research.ablations import regime as regime_lib


def rate_check(point: str, v: verdict_lib.Verdict, frame: pd.DataFrame, s, regime) -> verdict_lib.Check:
  """checks.inside_grid, passed with its reason where the verdict says no rate at `point` can move its statistic."""
  c = checks_lib.inside_grid(point, frame, s, regime)
  if c.passed or point not in v.settled:
    return c
  return verdict_lib.Check(c.name, True, f'{c.detail}; not needed: {v.settled[point]}')


def _rules(study: base.Study, sel: pd.DataFrame, scale: str) -> list[verdict_lib.Verdict]:
  """The study's verdicts on `sel`, each with its declared claim (kind, scope, premise) attached."""
  verdicts = study.rules(sel, scale)
  if len(verdicts) != len(study.claims):
    raise ValueError(
      f'{study.name}.rules gave {len(verdicts)} verdicts and the study declares {len(study.claims)} claims: '
      'a study declares a fixed family of verdicts, one Claim each'
    )
  return [
    dataclasses.replace(v, kind=c.kind, scope=c.scope, premise=c.premise)
    for v, c in zip(verdicts, study.claims, strict=True)
  ]


def _with_point_at(
  sel: pd.DataFrame, frame: pd.DataFrame, point: str, steps: int, rate: float, level: str
) -> pd.DataFrame:
  """`sel` (one budget's selection) with `point`'s rows replaced by its runs at `rate` and `steps` from `frame`."""
  at = (frame['point'] == point) & (frame[regime_lib.STEPS] == steps) & np.isclose(frame[regime_lib.LR], rate)
  alt = frame[at].assign(level=level)
  return pd.concat([sel[sel['point'] != point], alt], ignore_index=True)


def _ladder(vs: Sequence[verdict_lib.Verdict], state, v: verdict_lib.Verdict) -> tuple[dict[str, Any], ...]:
  t = max((state[p].steps for p in v.points if p in state), default=0)
  return tuple(
    {
      'level': lv,
      'steps': t // 2 ** (len(vs) - 1 - i),
      'statistic': r.statistic,
      'ci': list(r.ci),
      'outcome': r.raw_outcome,  # the rule's own outcome at that budget
      'premise': all(c.passed for c in r.premises) if r.premises else None,  # its premise at that budget
    }
    for i, (lv, r) in enumerate(zip(regime_lib.LEVELS, vs, strict=True))
  )


def judge(study: base.Study, frame: pd.DataFrame, tuning: pd.DataFrame, state, regime, scale: str, points):
  """The study's verdicts at T, each gated on its premise, its points' rate checks, its stability on the budget
  ladder by its claim's kind, no rate tie and no single seed deciding it."""
  sels = {lv: regime_lib.select(frame, tuning, lv) for lv in regime_lib.LEVELS}
  rungs = {lv: _rules(study, sels[lv], scale) for lv in regime_lib.LEVELS}
  full = sels[regime_lib.FULL]
  at_t = rungs[regime_lib.FULL]
  _check_points(study, at_t, state)

  @functools.cache
  def moved(level: str, point: str, rate: float) -> tuple[verdict_lib.Verdict, ...]:  # every verdict, point at rate
    steps = state[point].budgets()[regime_lib.LEVELS.index(level)]
    return tuple(_rules(study, _with_point_at(sels[level], frame, point, steps, rate, level), scale))

  drops = []
  if any(v.outcome in verdict_lib.ANSWERED for v in at_t):
    drops = [
      (s, _rules(study, full[full[regime_lib.SEED] != s], scale)) for s in sorted(full[regime_lib.SEED].unique())
    ]
  out = []
  for i, v in enumerate(at_t):
    if study.claims[i].rate == regime_lib.COMMON:
      r = _common_reading(study, i, v, frame, sels, state, regime, scale)
    else:
      r = _tuned_reading(i, v, frame, tuning, rungs, moved, drops, state, regime, points, full)
    v, ladder = r.ladder[-1], r.ladder
    moving = [(w.rsplit(' at ', 1)[1], a) for w, _, a, _ in r.ties]  # stability: does one of them settle it?
    factor = {p: points[p][0].steps_factor for p in v.points}
    checks = [
      *r.checks,
      *_missing_premise(v),
      checks_lib.coverage(
        v,
        r.full,
        {p: len(points[p][0].seed_range(regime.seeds)) for p in v.points},
        ('completed', 'diverged') if study.claims[i].diverged_is_measured else ('completed',),
      ),
      checks_lib.one_budget(v, state, factor),
      checks_lib.stability(v.kind, ladder, state, regime, r.others, ties=moving),
      checks_lib.rate_tie(
        r.ties,
        reached=v.kind == verdict_lib.EXISTENCE and v.raw_outcome == verdict_lib.REPRODUCED,
        kind=v.kind,
        ladder=ladder,
        others=r.others,
      ),
      checks_lib.one_seed(v, r.drops),
    ]
    checks = [_priced_tie(c, r.ties, state, frame) for c in checks]
    checks = _immaterial_edges(checks, lambda p, rate, i=i: moved(regime_lib.FULL, p, rate)[i], v, state, frame)
    extra = {**v.extra, 'statistic_half': float(ladder[1].statistic), **r.extra}
    v = dataclasses.replace(v, extra=extra, ladder=_ladder(ladder, state, v), checks=_spent(v.checks, state, regime))
    out.append(verdict_lib.gate(v, _spent(checks, state, regime, frame)))
  return out, sels


def _at_t(frame: pd.DataFrame, point: str, state) -> pd.DataFrame:
  """The runs of `point` at its budget T, every rate and seed."""
  return frame[(frame['point'] == point) & (frame[regime_lib.STEPS] == state[point].steps)]


def _priced_tie(c, ties, state, frame: pd.DataFrame):
  """A failed rate-tie check with its next step, priced: twice the seeds at the points whose rates tie (their runs at
  T, every rate kept there, once more), from their timings on this machine."""
  if c.passed or c.name != checks_lib.RATE_TIE or not ties:
    return c
  pts = sorted({w.rsplit(' at ', 1)[0] for w, _, _, _ in ties})
  runs = pd.concat([_at_t(frame, p, state) for p in pts if p in state] or [frame.iloc[:0]])  # ('the shared rate')
  twice = f'twice the seeds at {", ".join(pts)}'
  step = (
    f'; next step: {twice} ({checks_lib.price(runs)}: their runs at T, every rate, again; not bought by the loop; '
    'more seeds narrow a tie but need not settle it)'
  )
  return dataclasses.replace(c, detail=c.detail + step)


def _reading(v: verdict_lib.Verdict) -> tuple:
  """What a verdict says: its outcome, its statistic, and which of its own checks pass."""
  return v.outcome, round(float(v.statistic), 12), tuple((c.name, c.passed) for c in v.checks if c.applies)


def _immaterial_edges(checks, at_rate, v: verdict_lib.Verdict, state, frame: pd.DataFrame) -> list:
  """A failed rate-edge check (`inside_grid`) passes, reported, where the verdict reads the same at every rate its
  point ran at T (`at_rate(point, rate)`: the verdict's rule with that point there): no rate beyond the edge can
  move what the point never moves (e.g. a control cell filled at every rate, whose loss keeps falling with it)."""
  out = []
  for c in checks:
    if not c.passed and c.name.endswith(checks_lib.INSIDE_GRID) and len(c.points) == 1:
      p = c.points[0]
      rates = sorted(_at_t(frame, p, state)[regime_lib.LR].astype(float).unique())
      if len(rates) > 1 and all(_reading(at_rate(p, r)) == _reading(v) for r in rates):
        why = (
          f'; reported, not a failure: the verdict reads the same at each of its {len(rates)} rates '
          f'({v.statistic:.4g}, {v.outcome}, its own checks alike), so no rate beyond the edge can move it'
        )
        c = dataclasses.replace(c, passed=True, remedy='', detail=c.detail + why)
    out.append(c)
  return out


def _spent(checks, state, regime, frame: pd.DataFrame | None = None) -> tuple[verdict_lib.Check, ...]:
  """The checks, a failed one's doubling remedy dropped once its points have every doubling the regime allows: the
  loop can buy nothing for it. With `frame` (the regime's own checks), its detail names the next step, priced;
  without (a verdict's checks already gated), only the remedy changes: `gate` finds its prefix by the text."""
  out = []
  for c in checks:
    pts = [p for p in c.points if p in state]
    spent = bool(pts) and all(state[p].doublings >= regime.max_doublings for p in pts)
    ladder = c.name.startswith(checks_lib.STABILITY) and not c.remedy  # it names no remedy once they are spent
    if not c.passed and spent and (c.remedy == verdict_lib.DOUBLE_STEPS or ladder):
      step = '' if frame is None else _doubling_step(pts, state, regime, frame)
      c = dataclasses.replace(c, remedy='', detail=c.detail + step)
    out.append(c)
  return tuple(out)


def _doubling_step(pts: Sequence[str], state, regime, frame: pd.DataFrame) -> str:
  """'; next step: ...': a doubling past the regime's, priced as its points' runs at T (every seed, the rates kept
  there) at twice the steps, from their timings on this machine."""

  def kept(rows: pd.DataFrame, p: str) -> pd.DataFrame:
    return rows[np.isclose(rows[regime_lib.LR].to_numpy(float)[:, None], np.asarray(state[p].rates)[None, :]).any(1)]

  runs = pd.concat([kept(_at_t(frame, p, state), p) for p in pts])
  past = f"a doubling past the regime's {regime.max_doublings}"
  return f'; next step: {past} ({checks_lib.price(runs, 2.0)}: the runs at T, twice as long)'


@dataclasses.dataclass(frozen=True)
class _Reading:
  """One verdict read on the ladder: its rule at each budget, the tie alternatives, the other rates at T (existence
  claims), its rate checks, the leave-one-seed-out verdicts, the selection at T and what the report adds."""

  ladder: list[verdict_lib.Verdict]
  ties: list[tuple[str, float, verdict_lib.Verdict, verdict_lib.Verdict]]
  others: list[tuple[str, verdict_lib.Verdict]]
  checks: list[verdict_lib.Check]
  drops: list[tuple[Any, verdict_lib.Verdict]]
  full: pd.DataFrame
  extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def _seeds_of(full: pd.DataFrame, points) -> set:
  """The seeds a verdict reads: those of its points' runs (every seed where it names no points)."""
  rows = full[full['point'].isin(points)] if points else full
  return set(rows[regime_lib.SEED].unique())


def _tuned_reading(i, v, frame, tuning, rungs, moved, drops, state, regime, points, full) -> _Reading:
  """Each point at its own tuned rate at each budget; a tie is one point read at a rate tied with its chosen one."""
  tuned = [p for p in v.points if points[p][0].tuned]
  read = _seeds_of(full, v.points)
  ties = [
    (f'{p} at {lv}', r, moved(lv, p, r)[i], rungs[lv][i])
    for k, lv in enumerate(regime_lib.LEVELS)
    for p in tuned
    for r in checks_lib.tied_rates(p, frame, state[p], regime, state[p].budgets()[k])
  ]
  others = []
  if v.kind == verdict_lib.EXISTENCE:
    others = [
      (f'{p} at rate {r:g}', moved(regime_lib.FULL, p, r)[i])
      for p in tuned
      for r in state[p].rates
      if r != rate_at_t(tuning, p)
    ]
  return _Reading(
    ladder=[rungs[lv][i] for lv in regime_lib.LEVELS],
    ties=ties,
    others=others,
    checks=[rate_check(p, v, frame, state[p], regime) for p in tuned],
    drops=[(s, d[i]) for s, d in drops if s in read],
    full=full,
  )


def _common_reading(study, i, v, frame, sels, state, regime, scale) -> _Reading:
  """Every point of the verdict at one shared rate at each budget, the best mean metric over them (regime.pooled);
  a tie is every point read at a shared rate tied with that one; at T the reading must agree with each point at its
  own tuned rate (checks.rate_policy). Points without one budget T, or a budget where no
  shared rate trained every seed at every point, fail a check of their own (no remedy) and are read as tuned."""
  pts, name = tuple(v.points), 'one learning rate shared by the points'
  got = regime_lib.pooled(frame, state, pts, regime.metric)
  if got is None:
    return _Reading(
      [v] * 3,
      [],
      [],
      [verdict_lib.Check(name, False, 'the points have different budgets T')],
      [],
      sels[regime_lib.FULL],
    )
  pf, ps = got

  def at(k: int, rate: float) -> pd.DataFrame:
    lv, sel = regime_lib.LEVELS[k], sels[regime_lib.LEVELS[k]]
    for p in pts:
      sel = _with_point_at(sel, frame, p, state[p].budgets()[k], rate, lv)
    return sel

  rates, ladder, ties = {}, [], []
  for k, lv in enumerate(regime_lib.LEVELS):
    steps = ps.budgets()[k]
    best = regime_lib.choose(regime_lib.rate_stats(pf[pf[regime_lib.STEPS] == steps], regime.metric), regime.mode)
    if best is None:
      fail = f'no shared rate trained every seed at every point at {lv} = {steps} steps'
      return _Reading([v] * 3, [], [], [verdict_lib.Check(name, False, fail)], [], sels[regime_lib.FULL])
    rates[lv] = best.rate
    rung = _rules(study, at(k, best.rate), scale)[i]
    ladder.append(rung)
    for r in checks_lib.tied_rates(regime_lib.COMMON_POINT, pf, ps, regime, steps):
      ties.append((f'the shared rate at {lv}', r, _rules(study, at(k, r), scale)[i], rung))
  full = at(2, rates[regime_lib.FULL])
  others = []
  if v.kind == verdict_lib.EXISTENCE:
    others = [
      (f'the shared rate {r:g}', _rules(study, at(2, r), scale)[i]) for r in ps.rates if r != rates[regime_lib.FULL]
    ]
  drops = []
  if ladder[-1].outcome in verdict_lib.ANSWERED:
    drops = [(s, _rules(study, full[full[regime_lib.SEED] != s], scale)[i]) for s in sorted(_seeds_of(full, pts))]
  grid = checks_lib.inside_grid(regime_lib.COMMON_POINT, pf, ps, regime)
  grid = dataclasses.replace(grid, name='the shared learning rate inside the grid', points=pts if grid.remedy else ())
  policy = checks_lib.rate_policy(ladder[-1], _rules(study, sels[regime_lib.FULL], scale)[i])
  said = ', '.join(f'{lv} {r:g}' for lv, r in rates.items())
  ladder = [
    dataclasses.replace(r, detail=f'{r.detail}; read at one rate shared by its points ({said})') for r in ladder
  ]
  return _Reading(ladder, ties, others, [grid, policy], drops, full, extra={'common_rates': rates})


def _check_points(study: base.Study, verdicts: Sequence[verdict_lib.Verdict], state) -> None:
  for v in verdicts:
    unknown = [p for p in v.points if p not in state]
    if unknown or not v.points:
      raise ValueError(
        f'{study.name}: verdict {v.claim!r} names unknown points {unknown or "(none)"}; points are: {", ".join(state)}'
      )


def _missing_premise(v: verdict_lib.Verdict) -> list[verdict_lib.Check]:
  """A failed premise check when the rule computed none: no verdict is decided without a positive control."""
  if v.premises:
    return []
  why = 'no positive control was computed from these runs'
  return [verdict_lib.Check(f'premise: {v.premise}', False, why, role=verdict_lib.PREMISE)]


def rate_at_t(tuning: pd.DataFrame, point: str) -> float:
  t = tuning[(tuning['point'] == point) & (tuning['level'] == regime_lib.FULL)]['rate']
  return float(t.iloc[0]) if len(t) else math.nan
