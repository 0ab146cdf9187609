"""Verdict rules: pure functions from measurements to `reproduced` / `not reproduced` / `inconclusive`.

Every rule is an interval test on a 95% confidence interval (scipy.stats), decided in three ways:

  reproduced      the CI lies entirely inside the region the claim allows,
  not reproduced  the CI lies entirely outside it,
  inconclusive    the CI straddles its edge, or the input is underpowered (fewer than
                  `min_seeds` seeds, or fewer than `min_points` distinct x values).

So a wide CI can never give `reproduced`, and a tight CI that misses the claim gives
`not reproduced`. The rule is written in the ablation's code before it runs and is printed
in the report (`Verdict.rule`).
"""

import dataclasses
import math
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats

REPRODUCED = 'reproduced'
NOT_REPRODUCED = 'not reproduced'
INCONCLUSIVE = 'inconclusive'
OUTCOMES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class Verdict:
  """One claim's verdict, with the statistic and the rule it follows from."""
  claim: str                    # the claim tested, one sentence
  outcome: str                  # one of OUTCOMES
  statistic: float              # the measured quantity (slope, mean difference, mean, crossing x)
  ci: tuple[float, float]       # its 95% confidence interval
  test: str                     # the statistical test / estimator used
  rule: str                     # the decision rule in words
  n: int                        # points (or seeds) the statistic is computed from
  detail: str = ''              # why inconclusive, fit details, ...
  p_value: float | None = None  # of the test, where it has one
  extra: dict[str, float] = dataclasses.field(default_factory=dict)  # other fitted numbers (e.g. intercept)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  def line(self) -> str:
    lo, hi = self.ci
    return (f'**{self.outcome}** — {self.statistic:.4g} (95% CI [{lo:.4g}, {hi:.4g}], n={self.n}; '
            f'{self.test})')


def decide(ci: tuple[float, float], lo: float, hi: float) -> str:
  """`reproduced` if ci is inside [lo, hi], `not reproduced` if disjoint from it, else inconclusive."""
  c_lo, c_hi = ci
  if not (math.isfinite(c_lo) and math.isfinite(c_hi)):
    return INCONCLUSIVE
  if lo <= c_lo and c_hi <= hi:
    return REPRODUCED
  if c_hi < lo or c_lo > hi:
    return NOT_REPRODUCED
  return INCONCLUSIVE


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
  """(mean, ci_lo, ci_hi) with a Student-t interval; the CI is (nan, nan) for fewer than 2 values."""
  x = np.asarray(values, float)
  x = x[np.isfinite(x)]
  if len(x) == 0:
    return math.nan, math.nan, math.nan
  m = float(x.mean())
  if len(x) < 2:
    return m, math.nan, math.nan
  half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1) * stats.sem(x))
  return m, m - half, m + half


def summarize(df: pd.DataFrame, by: Sequence[str], metrics: Sequence[str],
              confidence: float = CONFIDENCE) -> pd.DataFrame:
  """Per setting of `by`: n and mean, ci_lo, ci_hi of each metric over the rows (seeds)."""
  rows = []
  for keys, g in df.groupby(list(by), sort=True):
    keys = keys if isinstance(keys, tuple) else (keys,)
    row = dict(zip(by, keys))
    row['n'] = len(g)
    for m in metrics:
      row[f'{m}_mean'], row[f'{m}_ci_lo'], row[f'{m}_ci_hi'] = mean_ci(g[m], confidence)
    rows.append(row)
  return pd.DataFrame(rows)


def _underpowered(claim, test, rule, n, why, statistic=math.nan, ci=(math.nan, math.nan)) -> Verdict:
  return Verdict(claim, INCONCLUSIVE, float(statistic), (float(ci[0]), float(ci[1])), test, rule, int(n),
                 f'underpowered: {why}')


def slope(x: Sequence[float], y: Sequence[float], *, claimed: float, margin: float, claim: str,
          seeds: Sequence[Any] | None = None, min_seeds: int = 3, min_points: int = 3,
          log: bool = True, confidence: float = CONFIDENCE) -> Verdict:
  """Fitted slope of log y on log x (every seed a point) against `claimed` ± `margin`.

  Reproduced if the slope's CI lies inside [claimed - margin, claimed + margin]; not reproduced
  if it lies entirely outside; inconclusive otherwise or with < min_points distinct x values or
  < min_seeds seeds.
  """
  x = np.asarray(x, float)
  y = np.asarray(y, float)
  kind = 'log-log' if log else 'linear'
  test = f'least-squares slope of {kind} fit (scipy.stats.linregress), Student-t {confidence:.0%} CI'
  rule = (f'reproduced if the {confidence:.0%} CI of the slope lies inside [{claimed - margin:g}, '
          f'{claimed + margin:g}] (claimed {claimed:g} ± {margin:g}); not reproduced if it lies '
          f'entirely outside; otherwise, or with < {min_points} distinct x or < {min_seeds} seeds, inconclusive')
  ok = np.isfinite(x) & np.isfinite(y)
  if log:
    ok &= (x > 0) & (y > 0)
  x, y = x[ok], y[ok]
  n = len(x)
  n_seeds = len(set(np.asarray(seeds)[ok].tolist())) if seeds is not None else None
  if len(np.unique(x)) < min_points:
    return _underpowered(claim, test, rule, n, f'{len(np.unique(x))} distinct x < {min_points}')
  if n_seeds is not None and n_seeds < min_seeds:
    return _underpowered(claim, test, rule, n, f'{n_seeds} seeds < {min_seeds}')
  lx, ly = (np.log(x), np.log(y)) if log else (x, y)
  fit = stats.linregress(lx, ly)
  half = float(stats.t.ppf(0.5 + confidence / 2, n - 2) * fit.stderr) if n > 2 else math.inf
  ci = (fit.slope - half, fit.slope + half)
  outcome = decide(ci, claimed - margin, claimed + margin)
  return Verdict(claim, outcome, float(fit.slope), (float(ci[0]), float(ci[1])), test, rule, n,
                 f'intercept {fit.intercept:.4g}, r^2 {fit.rvalue ** 2:.4f}',
                 extra={'intercept': float(fit.intercept), 'r2': float(fit.rvalue ** 2)})


def paired(a: Sequence[float], b: Sequence[float], *, expect: str, claim: str, margin: float = 0.0,
           min_seeds: int = 3, confidence: float = CONFIDENCE) -> Verdict:
  """Paired comparison of a and b (same seeds, same order) on d = a - b.

  expect='less':    claim d < -margin. Reproduced if the CI of mean d is below -margin; not
                    reproduced if it is above -margin (any advantage is smaller than margin).
  expect='greater': claim d > margin, mirrored.
  expect='equal':   claim |d| <= margin. Reproduced if the CI is inside [-margin, margin]; not
                    reproduced if it is disjoint from it.
  Fewer than min_seeds pairs: inconclusive.
  """
  if expect not in ('less', 'greater', 'equal'):
    raise ValueError(f"expect={expect!r}; allowed: less, greater, equal")
  a = np.asarray(a, float)
  b = np.asarray(b, float)
  if a.shape != b.shape:
    raise ValueError(f'paired needs equally many values, got {a.shape} and {b.shape}')
  d = a - b
  d = d[np.isfinite(d)]
  n = len(d)
  test = f'paired t-test on a - b (scipy.stats.ttest_rel), Student-t {confidence:.0%} CI of the mean difference'
  region = {'less': (-math.inf, -margin), 'greater': (margin, math.inf), 'equal': (-margin, margin)}[expect]
  words = {'less': f'below {-margin:g}', 'greater': f'above {margin:g}',
           'equal': f'inside [{-margin:g}, {margin:g}]'}[expect]
  rule = (f'reproduced if the {confidence:.0%} CI of mean(a - b) lies {words}; not reproduced if it lies '
          f'entirely outside that region; otherwise, or with < {min_seeds} pairs, inconclusive')
  if n < min_seeds:
    return _underpowered(claim, test, rule, n, f'{n} paired seeds < {min_seeds}',
                         statistic=d.mean() if n else math.nan)
  m, lo, hi = mean_ci(d, confidence)
  if np.all(d == d[0]):  # zero variance: the CI is the point itself (ttest_rel returns nan)
    lo = hi = m
    p = 0.0 if m != 0 else 1.0
  else:
    p = float(stats.ttest_rel(a[np.isfinite(a - b)], b[np.isfinite(a - b)]).pvalue)
  outcome = decide((lo, hi), *region)
  return Verdict(claim, outcome, m, (lo, hi), test, rule, n, f'two-sided p = {p:.3g}', p_value=p)


def threshold(values: Sequence[float], *, level: float, direction: str, claim: str, min_seeds: int = 3,
              confidence: float = CONFIDENCE) -> Verdict:
  """Is the mean of `values` (one per seed) below / above `level`? Decided on its t CI."""
  if direction not in ('below', 'above'):
    raise ValueError(f"direction={direction!r}; allowed: below, above")
  x = np.asarray(values, float)
  x = x[np.isfinite(x)]
  test = f'mean over seeds, Student-t {confidence:.0%} CI'
  rule = (f'reproduced if the {confidence:.0%} CI of the mean lies {direction} {level:g}; not reproduced if '
          f'it lies entirely on the other side; otherwise, or with < {min_seeds} seeds, inconclusive')
  if len(x) < min_seeds:
    return _underpowered(claim, test, rule, len(x), f'{len(x)} seeds < {min_seeds}',
                         statistic=x.mean() if len(x) else math.nan)
  m, lo, hi = mean_ci(x, confidence)
  if np.all(x == x[0]):
    lo = hi = m
  region = (-math.inf, level) if direction == 'below' else (level, math.inf)
  return Verdict(claim, decide((lo, hi), *region), m, (lo, hi), test, rule, len(x))


def crossing_point(x: Sequence[float], y: Sequence[float], level: float, log_x: bool = True) -> float:
  """First x where the curve y(x) (sorted by x) crosses `level`, linearly interpolated (in log x)."""
  order = np.argsort(np.asarray(x, float))
  x = np.asarray(x, float)[order]
  y = np.asarray(y, float)[order]
  above = y >= level
  for i in range(len(x) - 1):
    if above[i] != above[i + 1]:
      u0, u1 = (np.log(x[i]), np.log(x[i + 1])) if log_x else (x[i], x[i + 1])
      t = (level - y[i]) / (y[i + 1] - y[i])
      u = u0 + t * (u1 - u0)
      return float(np.exp(u) if log_x else u)
  return math.nan


def crossing(df: pd.DataFrame, *, x: str, y: str, seed: str, level: float, claimed: float, factor: float,
             claim: str, min_seeds: int = 3, min_points: int = 3, confidence: float = CONFIDENCE) -> Verdict:
  """Where y(x) crosses `level`, per seed; geometric mean and CI over seeds against claimed x.

  Reproduced if the CI of the crossing lies inside [claimed / factor, claimed * factor]; not
  reproduced if it is disjoint from it; inconclusive otherwise, when a seed's curve never
  crosses the level, or with < min_seeds seeds or < min_points x values per seed.
  """
  test = f'per-seed crossing of y = {level:g} (log-x interpolation); t {confidence:.0%} CI of mean log x'
  rule = (f'reproduced if the {confidence:.0%} CI of the crossing lies inside [{claimed / factor:.4g}, '
          f'{claimed * factor:.4g}] (claimed {claimed:g}, within a factor {factor:g}); not reproduced if '
          f'disjoint; otherwise inconclusive (also when some seed never crosses, or < {min_seeds} seeds)')
  points = []
  for _, g in df.groupby(seed):
    if g[x].nunique() < min_points:
      continue
    points.append(crossing_point(g[x], g[y], level))
  n = len(points)
  if n < min_seeds:
    return _underpowered(claim, test, rule, n, f'{n} seeds with >= {min_points} points < {min_seeds}')
  if not np.all(np.isfinite(points)):
    return _underpowered(claim, test, rule, n, f'{int(np.sum(~np.isfinite(points)))} seed(s) never cross {level:g}')
  m, lo, hi = mean_ci(np.log(points), confidence)
  if np.all(np.asarray(points) == points[0]):
    lo = hi = m
  ci = (math.exp(lo), math.exp(hi))
  return Verdict(claim, decide(ci, claimed / factor, claimed * factor), math.exp(m), ci, test, rule, n,
                 'crossings: ' + ', '.join(f'{p:.4g}' for p in points))
