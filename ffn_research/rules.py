"""Verdict rules: each statistic over seeds with its 95% CI, decided against the claim's region by
`stats.decide` (slopes, paired differences, thresholds, crossings, per-seed slopes, rank agreement, ratios of
means). What the outcomes, checks and Holm mean: stats.py's docstring."""

from collections.abc import Sequence
import dataclasses
import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ffn_research import stats as verdict_lib


def _rule(confidence: float, of: str, where: str, outside: str, few: str) -> str:
  """A CI rule in words: reproduced if the CI of `of` lies `where`, not reproduced if it lies `outside`."""
  return (
    f'reproduced if the {confidence:.0%} CI of {of} lies {where}; not reproduced if it lies {outside}; '
    f'otherwise, or with {few}, inconclusive'
  )


def _inside(claimed: float, margin: float) -> str:
  """The region claimed ± margin of a slope rule, in words."""
  return f'inside [{claimed - margin:g}, {claimed + margin:g}] (claimed {claimed:g} ± {margin:g})'


def _narrow(v: verdict_lib.Verdict, max_width: float) -> verdict_lib.Verdict:
  """v under the width rule: a `reproduced` whose CI is wider than max_width is inconclusive (a wide interval
  shows nothing); a finite max_width is said in the rule."""
  width = v.ci[1] - v.ci[0]
  rule = v.rule if max_width == math.inf else f'{v.rule}; reproduced also needs the CI narrower than {max_width:g}'
  if v.outcome == verdict_lib.REPRODUCED and not width <= max_width:
    why = f'; CI width {width:.3g} > {max_width:g}: too wide to show the claim'
    return dataclasses.replace(v, outcome=verdict_lib.INCONCLUSIVE, rule=rule, detail=v.detail + why)
  return dataclasses.replace(v, rule=rule)


def _pair(a: verdict_lib.Values, b: verdict_lib.Values, rule: str) -> tuple[np.ndarray, np.ndarray]:
  """a and b as float arrays; ValueError unless equally many (a rule on pairs)."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  if a.shape != b.shape:
    raise ValueError(f'{rule} needs equally many values, got {a.shape} and {b.shape}')
  return a, b


def _mean_test(
  x: np.ndarray,
  region: tuple[float, float],
  confidence: float,
  bounds: tuple[float, float] | None = None,
  atol: float = 0.0,
) -> tuple[float, tuple[float, float], float]:
  """(mean of x, its Student-t CI, decision_p's two-sided p against `region`). Values all within atol of each
  other have zero variance: the CI is the mean itself (the t interval is nan there) and the p's standard error 0."""
  m, lo, hi = verdict_lib.mean_ci(x, confidence, bounds)
  same = bool(np.allclose(x, x[0], rtol=0, atol=atol))
  if same:
    lo = hi = m
  return m, (lo, hi), verdict_lib.decision_p(m, 0.0 if same else float(stats.sem(x)), len(x) - 1, *region)


def slope(
  x: verdict_lib.Values,
  y: verdict_lib.Values,
  *,
  claimed: float,
  margin: float,
  claim: str,
  seeds: Sequence[Any] | None = None,
  min_seeds: int = 3,
  min_points: int = 3,
  log: bool = True,
  max_width: float = math.inf,
  confidence: float = verdict_lib.CONFIDENCE,
) -> verdict_lib.Verdict:
  """Fitted slope of log y on log x (every seed a point) against `claimed` ± `margin`.

  Reproduced if the slope's CI lies inside [claimed - margin, claimed + margin]; not reproduced
  if it lies entirely outside; inconclusive otherwise or with < min_points distinct x values or
  < min_seeds seeds.
  """
  x = np.asarray(x, float)
  y = np.asarray(y, float)
  kind = 'log-log' if log else 'linear'
  test = f'least-squares slope of {kind} fit (scipy.stats.linregress), Student-t {confidence:.0%} CI'
  few = f'< {min_points} distinct x or < {min_seeds} seeds'
  rule = _rule(confidence, 'the slope', _inside(claimed, margin), 'entirely outside', few)
  ok = np.isfinite(x) & np.isfinite(y)
  if log:
    ok &= (x > 0) & (y > 0)
  x, y = x[ok], y[ok]
  n = len(x)
  n_seeds = len(set(np.asarray(seeds)[ok].tolist())) if seeds is not None else None
  if len(np.unique(x)) < min_points:
    return verdict_lib.underpowered(claim, test, rule, n, f'{len(np.unique(x))} distinct x < {min_points}')
  if n_seeds is not None and n_seeds < min_seeds:
    return verdict_lib.underpowered(claim, test, rule, n, f'{n_seeds} seeds < {min_seeds}')
  lx, ly = (np.log(x), np.log(y)) if log else (x, y)
  fit = stats.linregress(lx, ly)
  half = float(stats.t.ppf(0.5 + confidence / 2, n - 2) * fit.stderr) if n > 2 else math.inf
  ci = (fit.slope - half, fit.slope + half)
  region = (claimed - margin, claimed + margin)
  p = verdict_lib.decision_p(float(fit.slope), float(fit.stderr), n - 2, *region) if n > 2 else math.nan
  v = verdict_lib.Verdict(
    claim,
    verdict_lib.decide(ci, *region),
    float(fit.slope),
    (float(ci[0]), float(ci[1])),
    test,
    rule,
    n,
    f'intercept {fit.intercept:.4g}, r^2 {fit.rvalue**2:.4f}',
    p_value=None if math.isnan(p) else p,
    extra={'intercept': float(fit.intercept), 'r2': float(fit.rvalue**2)},
    boundaries=region,
  )
  return _narrow(v, max_width)


def paired(
  a: verdict_lib.Values,
  b: verdict_lib.Values,
  *,
  expect: str,
  claim: str,
  margin: float = 0.0,
  min_seeds: int = 3,
  max_width: float = math.inf,
  confidence: float = verdict_lib.CONFIDENCE,
) -> verdict_lib.Verdict:
  """Paired comparison of a and b (same seeds, same order) on d = a - b.

  expect='less':    claim d < -margin. Reproduced if the CI of mean d is below -margin; not
                    reproduced if it is above -margin (any advantage is smaller than margin).
  expect='greater': claim d > margin, mirrored.
  expect='equal':   claim |d| <= margin. Reproduced if the CI is inside [-margin, margin]; not
                    reproduced if it is disjoint from it.
  Fewer than min_seeds pairs: inconclusive. Both arms exactly zero at every seed: `invalid` (a tie of
  two arms that measured nothing decides nothing; a failed premise check says so).
  """
  if expect not in ('less', 'greater', 'equal'):
    raise ValueError(f'expect={expect!r}; allowed: less, greater, equal')
  a, b = _pair(a, b, 'paired')
  both_zero = bool(a.size) and bool(np.all(a == 0) and np.all(b == 0))
  d = a - b
  d = d[np.isfinite(d)]
  n = len(d)
  test = f'paired t-test on a - b (scipy.stats.ttest_rel), Student-t {confidence:.0%} CI of the mean difference'
  region, words = _paired_region(expect, margin)
  rule = _rule(confidence, 'mean(a - b)', words, 'entirely outside that region', f'< {min_seeds} pairs')
  if n < min_seeds:
    return verdict_lib.underpowered(
      claim, test, rule, n, f'{n} paired seeds < {min_seeds}', statistic=d.mean() if n else math.nan
    )
  m, (lo, hi), p = _mean_test(d, region, confidence)
  outcome = verdict_lib.decide((lo, hi), *region)
  if expect != 'equal' and lo == hi == (-margin if expect == 'less' else margin):
    outcome = verdict_lib.NOT_REPRODUCED  # every pair exactly on the edge: strictly below / above it is not shown
  against = '' if margin == 0 else ' (t-test of mean(a - b) against the edge of the region the decision rests on)'
  v = verdict_lib.Verdict(
    claim,
    outcome,
    m,
    (lo, hi),
    test,
    rule,
    n,
    f'two-sided p = {p:.3g}{against}',
    p_value=p,
    boundaries=tuple(e for e in region if math.isfinite(e)),
  )
  return _zeros_decide_nothing(_narrow(v, max_width), both_zero)


def paired_binary(
  a: verdict_lib.Values,
  b: verdict_lib.Values,
  *,
  expect: str,
  claim: str,
  min_seeds: int = 3,
  confidence: float = verdict_lib.CONFIDENCE,
) -> verdict_lib.Verdict:
  """Paired 0/1 outcomes (same seeds, same order) on d = a - b, the exact conditional (McNemar) test: of the n
  discordant pairs, k have a = 1 and b = 0; theta = k / n has its Clopper-Pearson CI, and mean(d) = n / N (2 theta
  - 1) over the N pairs its CI at theta's ends. expect 'less' / 'greater' as `paired` with margin 0 (the CI below /
  above 0: reproduced; on the other side: not reproduced; every pair equal: not reproduced; both arms 0 everywhere:
  invalid). p: the central two-sided binomial p of k against n / 2 (below 1 - confidence exactly when the CI
  excludes 0). Exact where a t interval on 0/1 differences is not: 5 of 64 discordant pairs all one way give a t CI
  clear of 0 and a binomial p of 0.0625."""
  if expect not in ('less', 'greater'):
    raise ValueError(f'expect={expect!r}; allowed: less, greater')
  a, b = _pair(a, b, 'paired_binary')
  if not np.all(np.isin(a, (0.0, 1.0)) & np.isin(b, (0.0, 1.0))):
    raise ValueError('paired_binary needs 0/1 values')
  big, n = len(a), int(np.sum(a != b))
  k = int(np.sum((a == 1) & (b == 0)))
  test = (
    f'exact conditional McNemar test on the discordant pairs ({k} of {n} with a = 1, b = 0; N = {big} pairs): '
    f'Clopper-Pearson {confidence:.0%} CI of k / n, mapped to mean(a - b) = n / N (2 k / n - 1)'
  )
  region, words = _paired_region(expect, 0.0)
  rule = _rule(confidence, 'mean(a - b)', words, 'entirely outside that region', f'< {min_seeds} pairs')
  d = (2 * k - n) / big if big else math.nan
  if big < min_seeds:
    return verdict_lib.underpowered(claim, test, rule, big, f'{big} paired seeds < {min_seeds}', statistic=d)
  if n:
    ci = stats.binomtest(k, n).proportion_ci(confidence, method='exact')
    lo, hi = (n / big * (2 * t - 1) for t in (ci.low, ci.high))
    p = min(1.0, 2 * min(stats.binom.cdf(k, n, 0.5), stats.binom.sf(k - 1, n, 0.5)))
  else:
    lo = hi = 0.0
    p = 1.0
  outcome = verdict_lib.NOT_REPRODUCED if n == 0 else verdict_lib.decide((lo, hi), *region)
  v = verdict_lib.Verdict(
    claim,
    outcome,
    d,
    (lo, hi),
    test,
    rule,
    big,
    f'two-sided p = {p:.3g} (central binomial, {k} of {n} discordant pairs)',
    p_value=p,
    boundaries=(0.0,),
  )
  return _zeros_decide_nothing(v, bool(big) and bool(np.all(a == 0) and np.all(b == 0)))


def _zeros_decide_nothing(v: verdict_lib.Verdict, both_zero: bool) -> verdict_lib.Verdict:
  """v, `invalid` where both arms of a paired rule are exactly 0 at every seed (a tie of zeros decides nothing)."""
  if not both_zero:
    return v
  why = f'both arms are exactly 0 at all {v.n} seeds: a tie of zeros decides nothing'
  return verdict_lib.gate(v, [verdict_lib.as_premise(verdict_lib.Check('the arms measured something', False, why))])


def _paired_region(expect: str, margin: float) -> tuple[tuple[float, float], str]:
  """The region `paired`'s claim allows for mean(a - b), and it in words."""
  if expect == 'less':
    return (-math.inf, -margin), f'below {-margin + 0.0:g}'  # + 0.0: a margin of 0 reads 0, not -0
  if expect == 'greater':
    return (margin, math.inf), f'above {margin:g}'
  return (-margin, margin), f'inside [{-margin + 0.0:g}, {margin:g}]'


def threshold(
  values: verdict_lib.Values,
  *,
  level: float,
  direction: str,
  claim: str,
  min_seeds: int = 3,
  confidence: float = verdict_lib.CONFIDENCE,
  bounds: tuple[float, float] | None = None,
) -> verdict_lib.Verdict:
  """Is the mean of `values` (one per seed) below / above `level`? Decided on its t CI (intersected with the
  quantity's `bounds` where it has them: mean_ci)."""
  if direction not in ('below', 'above'):
    raise ValueError(f'direction={direction!r}; allowed: below, above')
  x = np.asarray(values, float)
  x = x[np.isfinite(x)]
  scale = '' if bounds is None else f' intersected with the range [{bounds[0]:g}, {bounds[1]:g}]'
  test = f'mean over seeds, Student-t {confidence:.0%} CI{scale}'
  rule = _rule(confidence, 'the mean', f'{direction} {level:g}', 'entirely on the other side', f'< {min_seeds} seeds')
  if len(x) < min_seeds:
    return verdict_lib.underpowered(
      claim, test, rule, len(x), f'{len(x)} seeds < {min_seeds}', statistic=x.mean() if len(x) else math.nan
    )
  region = (-math.inf, level) if direction == 'below' else (level, math.inf)
  m, (lo, hi), p = _mean_test(x, region, confidence, bounds)
  outcome = verdict_lib.decide((lo, hi), *region)
  if lo == hi == level:  # every seed exactly at the level: strictly below / above it is not shown
    outcome = verdict_lib.NOT_REPRODUCED
  return verdict_lib.Verdict(
    claim,
    outcome,
    m,
    (lo, hi),
    test,
    rule,
    len(x),
    f'two-sided p = {p:.3g} (t-test of the mean against {level:g})',
    p_value=p,
    boundaries=(level,),
  )


def crossing_point(x: verdict_lib.Values, y: verdict_lib.Values, level: float, log_x: bool = True) -> float:
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


def crossing(
  df: pd.DataFrame,
  *,
  x: str,
  y: str,
  seed: str,
  level: float,
  claimed: float,
  factor: float,
  claim: str,
  min_seeds: int = 3,
  min_points: int = 3,
  confidence: float = verdict_lib.CONFIDENCE,
) -> verdict_lib.Verdict:
  """Where y(x) crosses `level`, per seed; geometric mean and CI over seeds against claimed x.

  Reproduced if the CI of the crossing lies inside [claimed / factor, claimed * factor]; not
  reproduced if it is disjoint from it; inconclusive otherwise, when a seed's curve never
  crosses the level, or with < min_seeds seeds or < min_points x values per seed.
  """
  test = f'per-seed crossing of y = {level:g} (log-x interpolation); t {confidence:.0%} CI of mean log x'
  rule = (
    f'reproduced if the {confidence:.0%} CI of the crossing lies inside [{claimed / factor:.4g}, '
    f'{claimed * factor:.4g}] (claimed {claimed:g}, within a factor {factor:g}); not reproduced if '
    f'disjoint; otherwise inconclusive (also when some seed never crosses, or < {min_seeds} seeds)'
  )
  points = []
  for _, g in df.groupby(seed):
    if g[x].nunique() < min_points:
      continue
    points.append(crossing_point(g[x], g[y], level))
  n = len(points)
  if n < min_seeds:
    return verdict_lib.underpowered(claim, test, rule, n, f'{n} seeds with >= {min_points} points < {min_seeds}')
  if not np.all(np.isfinite(points)):
    return verdict_lib.underpowered(
      claim, test, rule, n, f'{int(np.sum(~np.isfinite(points)))} seed(s) never cross {level:g}'
    )
  m, lo, hi = verdict_lib.mean_ci(np.log(points), confidence)
  same = np.all(np.asarray(points) == points[0])
  if same:
    lo = hi = m
  ci = (math.exp(lo), math.exp(hi))
  p = verdict_lib.decision_p(
    m, 0.0 if same else float(stats.sem(np.log(points))), n - 1, math.log(claimed / factor), math.log(claimed * factor)
  )
  return verdict_lib.Verdict(
    claim,
    verdict_lib.decide(ci, claimed / factor, claimed * factor),
    math.exp(m),
    ci,
    test,
    rule,
    n,
    'crossings: ' + ', '.join(f'{x:.4g}' for x in points) + f'; two-sided p = {p:.3g} (log scale)',
    p_value=p,
    boundaries=(claimed / factor, claimed * factor),
  )


# --------------------------------------------------------------------------- slopes over seeds


def per_seed_fits(x: np.ndarray, y: np.ndarray, seeds: np.ndarray, min_points: int = 3) -> pd.DataFrame:
  """One row per seed with >= min_points distinct x: least-squares slope, intercept, residual RMS of the
  line, and the quadratic coefficient of a parabola in centred x (nan with < 3 distinct x)."""
  rows = []
  for s in pd.unique(seeds):
    sel = seeds == s
    xs, ys = x[sel], y[sel]
    if len(np.unique(xs)) < min_points:
      continue
    slope_, intercept = np.polyfit(xs, ys, 1)
    resid = ys - (slope_ * xs + intercept)
    curv = np.polyfit(xs - xs.mean(), ys, 2)[0] if len(np.unique(xs)) >= 3 else math.nan
    rows.append(
      {
        'seed': s,
        'slope': slope_,
        'intercept': intercept,
        'residual_rms': float(np.sqrt(np.mean(resid**2))),
        'curvature': curv,
        'points': len(xs),
      }
    )
  return pd.DataFrame(rows, columns=['seed', 'slope', 'intercept', 'residual_rms', 'curvature', 'points'])


def _finite_xy(df: pd.DataFrame, x: str, y: str, seed: str, log: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(x, y, seed) arrays of the rows with finite x and y (and both > 0, then logged, when `log`)."""
  xv, yv, sv = (df[c].to_numpy() for c in (x, y, seed))
  xv, yv = xv.astype(float), yv.astype(float)
  ok = np.isfinite(xv) & np.isfinite(yv)
  if log:
    ok &= (xv > 0) & (yv > 0)
  xv, yv, sv = xv[ok], yv[ok], sv[ok]
  return (np.log(xv), np.log(yv), sv) if log else (xv, yv, sv)


def _lack_of_fit(fits: pd.DataFrame, confidence: float, log: bool) -> tuple[dict[str, float], str]:
  """The per-seed lines' summary (`extra`) and its sentence: intercept, residual RMS, mean curvature + CI."""
  c_m, c_lo, c_hi = verdict_lib.mean_ci(fits['curvature'], confidence)
  rms = float(np.sqrt(np.mean(fits['residual_rms'] ** 2)))
  extra = {
    'intercept': float(fits['intercept'].mean()),
    'slope_sd': float(np.std(fits['slope'].to_numpy(), ddof=1)),
    'residual_rms': rms,
    'curvature': c_m,
    'curvature_ci_lo': c_lo,
    'curvature_ci_hi': c_hi,
    'seeds': float(len(fits)),
  }
  sentence = (
    f'; mean intercept {extra["intercept"]:.4g}; lack of fit: residual RMS {rms:.3g}'
    f'{" (log units)" if log else ""}, curvature {c_m:.3g} (95% CI [{c_lo:.3g}, {c_hi:.3g}])'
  )
  return extra, sentence


def slope_per_seed(
  df: pd.DataFrame,
  *,
  x: str,
  y: str,
  seed: str,
  claimed: float,
  margin: float,
  claim: str,
  log: bool = True,
  min_seeds: int = 3,
  min_points: int = 3,
  max_width: float = math.inf,
  confidence: float = verdict_lib.CONFIDENCE,
) -> verdict_lib.Verdict:
  """Slope of (log) y on (log) x fitted per seed; mean and Student-t CI over the per-seed slopes (the
  seeds, not the (x, seed) points, are the independent units) against claimed ± margin.

  Reproduced if the CI lies inside [claimed - margin, claimed + margin]; not reproduced if it lies
  entirely outside; inconclusive otherwise, or with < min_seeds seeds having >= min_points distinct x.
  Lack of fit in `extra`/`detail`: RMS residual of the per-seed lines (in the fitted units) and the mean
  quadratic coefficient with its CI over seeds (a CI excluding 0 means the curve bends).
  """
  kind = 'log-log' if log else 'linear'
  test = (
    f'least-squares slope of a {kind} fit per seed (numpy.polyfit); mean over seeds with a Student-t '
    f'{confidence:.0%} CI'
  )
  few = f'< {min_seeds} seeds of >= {min_points} distinct x'
  rule = _rule(confidence, 'the mean per-seed slope', _inside(claimed, margin), 'entirely outside', few)
  xv, yv, sv = _finite_xy(df, x, y, seed, log)
  fits = per_seed_fits(xv, yv, sv, min_points)
  n = len(fits)
  if n < min_seeds:
    return verdict_lib.underpowered(
      claim,
      test,
      rule,
      n,
      f'{n} seeds with >= {min_points} distinct x < {min_seeds}',
      statistic=fits['slope'].mean() if n else math.nan,
    )
  slopes = fits['slope'].to_numpy()
  region = (claimed - margin, claimed + margin)
  m, ci, p = _mean_test(slopes, region, confidence, atol=1e-12)
  extra, lack_of_fit = _lack_of_fit(fits, confidence, log)
  detail = f'two-sided p = {p:.3g}; per-seed slopes ' + ', '.join(f'{s:.3g}' for s in slopes) + lack_of_fit
  v = verdict_lib.Verdict(
    claim, verdict_lib.decide(ci, *region), m, ci, test, rule, n, detail, p_value=p, extra=extra, boundaries=region
  )
  return _narrow(v, max_width)


# --------------------------------------------------------------------------- rank agreement


def _permuted_rhos(ra: np.ndarray, rb: np.ndarray, n_perm: int, seed: int) -> tuple[np.ndarray, bool]:
  """Pearson correlations of ranks ra with permutations of rb: every permutation when n! <= n_perm
  (exact), else n_perm random ones; returns (rhos, exact)."""
  n = len(ra)
  exact = math.factorial(n) <= n_perm
  if exact:
    perms = np.array(list(itertools.permutations(range(n))))
  else:
    rng = np.random.default_rng(seed)
    perms = np.argsort(rng.random((n_perm, n)), axis=1)
  a = ra - ra.mean()
  b = rb[perms] - rb.mean()
  return (b @ a) / (np.linalg.norm(a) * np.linalg.norm(b, axis=1)), exact


def _permutation_p(rho: float, rhos: np.ndarray, exact: bool) -> tuple[float, float]:
  """One-sided p of rho among the permuted rhos, (at least as large, at least as small): the share of
  all orderings when exact, else the (1 + count) / (1 + draws) estimate."""
  tol = 1e-12
  hi, lo = np.sum(rhos >= rho - tol), np.sum(rhos <= rho + tol)
  if exact:
    return float(hi / len(rhos)), float(lo / len(rhos))
  return float((1 + hi) / (1 + len(rhos))), float((1 + lo) / (1 + len(rhos)))


def _spearman_ci(rho: float, n: int, confidence: float) -> tuple[float, float]:
  """Fisher-z CI of Spearman's rho with the Bonett-Wright variance (1 + rho^2 / 2) / (n - 3); nan for n <= 3."""
  if n <= 3:
    return math.nan, math.nan
  z, se = np.arctanh(np.clip(rho, -1 + 1e-15, 1 - 1e-15)), math.sqrt((1 + rho**2 / 2) / (n - 3))
  q = stats.norm.ppf(0.5 + confidence / 2)
  return float(np.tanh(z - q * se)), float(np.tanh(z + q * se))


def _rank_outcome(
  rho: float, low: float, p_pos: float, p_neg: float, threshold: float, alpha: float
) -> tuple[str, float, str]:
  """rank_agreement's outcome, the p it rests on, and the note for a significant rho not shown >= the threshold.
  `low`: the CI's lower end."""
  if low >= threshold and p_pos < alpha:
    return verdict_lib.REPRODUCED, p_pos, ''
  if rho < 0 and p_neg < alpha:
    return verdict_lib.NOT_REPRODUCED, p_neg, ''
  note = (
    ''
    if rho < 0 or p_pos >= alpha
    else f'; rho > 0 is significant, but rho >= {threshold:g} is not shown (the CI reaches down to {low:.3g})'
  )
  return verdict_lib.INCONCLUSIVE, (p_pos if rho >= 0 else p_neg), note


def _orderings(draws: int, exact: bool, seed: int, p: float) -> str:
  """The orderings a permutation p was found over, in words (sampled: with p's Monte Carlo standard error)."""
  if exact:
    return f'exact over all {draws} orderings'
  return f'{draws} random orderings (seed {seed}; Monte Carlo standard error of p {math.sqrt(p * (1 - p) / draws):.2g})'


def rank_agreement(
  a: verdict_lib.Values,
  b: verdict_lib.Values,
  *,
  claim: str,
  n_perm: int = 10**6,
  seed: int = 0,
  threshold: float = 0.5,
  alpha: float = verdict_lib.ALPHA,
  min_n: int = 4,
  confidence: float = verdict_lib.CONFIDENCE,
) -> verdict_lib.Verdict:
  """Spearman rho between a and b (e.g. our per-variant means and the paper's), decided by a
  permutation test (exact over all orderings when n! <= n_perm; no bootstrap).

  A magnitude claim, rho >= threshold: reproduced if the CI lies above the threshold and the one-sided
  permutation p (rho at least as large under random orderings) < alpha; not reproduced if the ordering is
  significantly reversed (one-sided p for rho at least as negative < alpha); otherwise, or with < min_n items,
  inconclusive. The CI is Fisher's z with the Bonett-Wright (2000) variance (1 + rho^2 / 2) / (n - 3).
  """
  a, b = _pair(a, b, 'rank_agreement')
  ok = np.isfinite(a) & np.isfinite(b)
  a, b = a[ok], b[ok]
  n = len(a)
  test = f'Spearman rho with a permutation test (up to {n_perm} orderings; exact when n! <= {n_perm})'
  rule = (
    f'reproduced if the {confidence:.0%} CI of rho lies at or above {threshold:g} and the one-sided permutation p < '
    f'{alpha:g}; not reproduced if '
    f'rho < 0 with one-sided p < {alpha:g} (ordering reversed); otherwise, or with < {min_n} items, '
    'inconclusive'
  )
  if n < min_n:
    return verdict_lib.underpowered(claim, test, rule, n, f'{n} items < {min_n}')
  ra, rb = stats.rankdata(a), stats.rankdata(b)
  if np.all(ra == ra[0]) or np.all(rb == rb[0]):
    return verdict_lib.underpowered(claim, test, rule, n, 'all values tied: no ordering to compare')
  rho = float(np.corrcoef(ra, rb)[0, 1])
  rhos, exact = _permuted_rhos(ra, rb, n_perm, seed)
  p_pos, p_neg = _permutation_p(rho, rhos, exact)
  ci = _spearman_ci(rho, n, confidence)
  outcome, p, note = _rank_outcome(rho, ci[0], p_pos, p_neg, threshold, alpha)
  how = _orderings(len(rhos), exact, seed, p)
  detail = f'{n} items; permutation p (rho >= observed) = {p_pos:.3g}, p (rho <= observed) = {p_neg:.3g}, {how}{note}'
  return verdict_lib.Verdict(
    claim,
    outcome,
    rho,
    ci,
    test,
    rule,
    n,
    detail,
    p_value=p,
    extra={'p_positive': p_pos, 'p_negative': p_neg},
    boundaries=(0.0, threshold),
  )


# --------------------------------------------------------------------------- ratios


def ratio_of_means(
  a: verdict_lib.Values,
  b: verdict_lib.Values,
  *,
  paired_seeds: bool = True,
  resamples: int = 9999,
  seed: int = 0,
  confidence: float = verdict_lib.CONFIDENCE,
) -> tuple[float, float, float]:
  """(mean(a) / mean(b), ci_lo, ci_hi): a ratio of means, never a mean of per-seed ratios (whose denominators may
  be near 0). From BCA_MIN_SEEDS values on, a BCa bootstrap CI (scipy.stats.bootstrap; seeds resampled together
  when paired); below that, where BCa's acceleration and bias estimates are noise, a Student-t CI of the log ratio
  (delta method, with the covariance of paired seeds), mapped back, or Fieller's interval where a mean is not
  positive (a share of a gap may be <= 0: the log ratio is undefined there). The CI is (nan, nan) with fewer than 3
  finite values or a zero mean of b."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  ok = np.isfinite(a) & np.isfinite(b) if paired_seeds else None
  if paired_seeds:
    a, b = a[ok], b[ok]
  else:
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
  if len(a) == 0 or len(b) == 0 or b.mean() == 0:
    return math.nan, math.nan, math.nan
  r = float(a.mean() / b.mean())
  if min(len(a), len(b)) < 3 or (np.all(a == a[0]) and np.all(b == b[0])):
    return (r, r, r) if min(len(a), len(b)) >= 3 else (r, math.nan, math.nan)
  if min(len(a), len(b)) < verdict_lib.BCA_MIN_SEEDS:
    log_ci = verdict_lib.log_ratio_ci(a, b, paired_seeds, confidence)
    return (r, *(log_ci if not math.isnan(log_ci[0]) else verdict_lib.fieller_ci(a, b, paired_seeds, confidence)))
  res = stats.bootstrap(
    (a, b),
    lambda x, y, axis=-1: np.mean(x, axis=axis) / np.mean(y, axis=axis),
    paired=paired_seeds,
    vectorized=True,
    n_resamples=resamples,
    confidence_level=confidence,
    method='BCa',
    random_state=np.random.default_rng(seed),
  )
  return r, float(res.confidence_interval.low), float(res.confidence_interval.high)
