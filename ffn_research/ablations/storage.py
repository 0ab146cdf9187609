"""Bits stored at the peak over data sizes: the storage measurement memorization_capacity and capacity_atlas share.

Rows are runs of the `memorization` task with columns SIZE (the model's trainable parameters), N (facts),
'bits_stored', 'point' and the seed; a size's peak is the N with the most bits in the mean over seeds.
"""

import math

import pandas as pd

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations.regime import SEED

SIZE, N = 'num_trainable_params', 'facts'
PEAK_RISE = 0.05  # peak_inside_check: a peak at the largest N must rise less than this over the next N
SLOPE_MARGIN, SLOPE_MAX_WIDTH = 0.1, 0.3  # proportional_check: the slope's CI contains 1 or lies in 1 +- 0.1, narrowly


def bits_of_fit(cross_entropy_bits: float, facts: int, values: int) -> float:
  """Bits stored by a fit with this total cross-entropy (bits) on N facts over V values (floored at 0)."""
  return max(0.0, facts * math.log2(values) - cross_entropy_bits)


def peaks(mem: pd.DataFrame) -> pd.DataFrame:
  """Every seed at the peak N per size: the N with the most bits in the mean over seeds."""
  means = mem.groupby([SIZE, N], as_index=False)['bits_stored'].mean()
  top = means.loc[means.groupby(SIZE)['bits_stored'].idxmax(), [SIZE, N]]
  return mem.merge(top, on=[SIZE, N])


def settled(mem: pd.DataFrame, values: int) -> dict[str, str]:
  """{point: why}: per size, the N whose every fact stored (N log2 V bits) is below the size's peak bits at another
  N cannot be the peak at any rate (the peak can only rise with more rates: tuning maximises its mean bits)."""
  out = {}
  for size, g in mem.groupby(SIZE):
    m = g.groupby(N)['bits_stored'].mean()
    for n, pts in g.groupby(N)['point']:
      if n * math.log2(values) < m.max():
        why = f'N log2 V = {n * math.log2(values):.0f} bits < {m.max():.0f} at N = {m.idxmax()} ({size} params)'
        out.update(dict.fromkeys(pts.unique(), f'N = {n} cannot be the peak at any rate: {why}'))
  return out


def peak_inside_check(mem: pd.DataFrame, label: str, values: int) -> stats.Check:
  """Check (b): per size, the N with most bits (mean over seeds) is bracketed by the N grid (module docstring)."""
  bad, where = [], []
  for size, g in mem.groupby(SIZE):
    m = g.groupby(N)['bits_stored'].mean().sort_index()
    peak = m.idxmax()
    where.append(f'{size} params: peak at N = {peak}')
    if peak == m.index[-1] and len(m) > 1 and m.iloc[-1] >= (1 + PEAK_RISE) * m.iloc[-2]:
      bad.append(f'{size} params still rise {m.iloc[-1] / m.iloc[-2] - 1:.1%} at the largest N = {peak}')
    if peak == m.index[0] and m.iloc[0] <= peak / 2 * math.log2(values):
      bad.append(f'{size} params peak at the smallest N = {peak} with {m.iloc[0]:.0f} bits <= {peak // 2} log2 V')
  return stats.Check(
    f'{label}: peak inside the N grid',
    not bad and bool(where),
    '; '.join(bad or where) + f' (a peak at the largest N must rise < {PEAK_RISE:.0%} over the '
    'next; at the smallest N it must exceed what N/2 facts can hold)',
  )


def proportional_check(top: pd.DataFrame, label: str, points) -> tuple[stats.Check, stats.Verdict]:
  """Check (a): the per-seed log-log slope of peak bits on params contains 1 (or lies in 1 ± 0.1), narrowly."""
  slope = rules_lib.slope_per_seed(
    top, x=SIZE, y='bits_stored', seed=SEED, claimed=1.0, margin=SLOPE_MARGIN, claim='slope'
  )
  lo, hi = slope.ci
  ok = bool((lo <= 1 <= hi or (1 - SLOPE_MARGIN <= lo and hi <= 1 + SLOPE_MARGIN)) and hi - lo <= SLOPE_MAX_WIDTH)
  return stats.Check(
    f'{label}: bits proportional to params',
    ok,
    f'log-log slope of peak bits on params {slope.statistic:.3g} (95% CI [{lo:.3g}, {hi:.3g}], per '
    f'seed); the CI must contain 1 or lie inside 1 ± {SLOPE_MARGIN:g}, and be narrower than '
    f'{SLOPE_MAX_WIDTH:g}',
    remedy=stats.DOUBLE_STEPS,
    points=tuple(points),
  ), slope
