"""Bits stored at the peak over data sizes: the storage measurement memorization_capacity and capacity_atlas share.

Rows are runs of the `memorization` task with columns SIZE (the model's trainable parameters), N (facts),
'bits_stored', 'point' and the seed; a size's peak is the N with the most bits in the mean over seeds.
"""

import math

import numpy as np
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


def grid_edges(mem: pd.DataFrame, values: int) -> dict[int, tuple[str, int, str]]:
  """{size: (side, peak N, why)} of the sizes whose peak N (most bits, mean over seeds) is not bracketed by the N
  grid: side 'largest' where it still rises >= PEAK_RISE at the largest N, 'smallest' where the smallest N holds no
  more than N/2 facts can."""
  out = {}
  for size, g in mem.groupby(SIZE):
    m = g.groupby(N)['bits_stored'].mean().sort_index()
    peak = m.idxmax()
    if peak == m.index[-1] and len(m) > 1 and m.iloc[-1] >= (1 + PEAK_RISE) * m.iloc[-2]:
      out[size] = (
        'largest',
        peak,
        f'{size} params still rise {m.iloc[-1] / m.iloc[-2] - 1:.1%} at the largest N = {peak}',
      )
    elif peak == m.index[0] and m.iloc[0] <= peak / 2 * math.log2(values):
      why = f'{size} params peak at the smallest N = {peak} with {m.iloc[0]:.0f} bits <= {peak // 2} log2 V'
      out[size] = ('smallest', peak, why)
  return out


def peak_inside_check(mem: pd.DataFrame, label: str, values: int) -> stats.Check:
  """Check (b): per size, the N with most bits (mean over seeds) is bracketed by the N grid (`grid_edges`)."""
  bad = [why for _, _, why in grid_edges(mem, values).values()]
  where = [f'{size} params: peak at N = {g.groupby(N)["bits_stored"].mean().idxmax()}' for size, g in mem.groupby(SIZE)]
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


def moe_pairs(moe_top: pd.DataFrame, dense_top: pd.DataFrame) -> pd.DataFrame:
  """Per (seed, MoE size): MoE peak bits per total and per active parameter and the same seed's dense figure at its
  total and at its active size, interpolated log-log between the dense sizes (clamped to the nearest one outside
  their range: below it, bits proportional to size, which the dense slope premise checks)."""
  rows = []
  for seed, g in moe_top.groupby(SEED):
    d = dense_top[dense_top[SEED] == seed].sort_values(SIZE)
    if d.empty:
      continue
    with np.errstate(divide='ignore'):  # no bits stored: log 0 = -inf, interpolated as such
      x, y = np.log(d[SIZE].to_numpy(float)), np.log((d['bits_stored'] / d[SIZE]).to_numpy(float))
    for _, r in g.iterrows():
      at_total, at_active = (math.exp(np.interp(math.log(r[k]), x, y)) for k in (SIZE, 'active'))
      rows.append(
        {
          SEED: seed,
          SIZE: int(r[SIZE]),
          'active': int(r['active']),
          'moe_bpp': r['bits_stored'] / r[SIZE],
          'moe_bpa': r['bits_stored'] / r['active'],
          'dense_bpp': at_total,
          'dense_bpa': at_active,
        }
      )
  return pd.DataFrame(rows, columns=[SEED, SIZE, 'active', 'moe_bpp', 'moe_bpa', 'dense_bpp', 'dense_bpa'])


ROUTING_MARGIN = 0.1  # routing_check: ln(MoE bits / the dense bits of its active size) above this at every size


def routing_check(pairs: pd.DataFrame, label: str, needed: bool) -> stats.Check:
  """The routing premise of an MoE refutation (a positive control): at every MoE size the MoE stores more than a
  dense FFN of its active size would, MoE bits / (dense bits per parameter x active parameters) with its CI lower
  end above exp(ROUTING_MARGIN): the router spreads facts over the experts, so a shortfall per total parameter is
  not a router that routes nothing. Shown always; needed only for a `not reproduced`."""
  parts, ok = [], bool(len(pairs))
  for size, g in pairs.groupby(SIZE):
    r, lo, hi = rules_lib.ratio_of_means(g['moe_bpa'], g['dense_bpa'])
    passed = bool(math.isfinite(lo) and lo > math.exp(ROUTING_MARGIN))
    ok &= passed
    parts.append(
      f'{"" if passed else "FAILS: "}{size:,} total / {int(g["active"].iloc[0]):,} active parameters: '
      f'{r:.3g}x [{lo:.3g}, {hi:.3g}] ({len(g)} seeds)'
    )
  detail = (
    ('; '.join(parts) or 'no MoE and dense pairs')
    + ' (MoE peak bits over the dense bits at its active size; CI lower end > '
    + f'e^{ROUTING_MARGIN:g} = {math.exp(ROUTING_MARGIN):.3g}; at an active size below the smallest dense size the '
    "dense bits per parameter are that size's, clamped: an extrapolation that understates the margin where bits per "
    'parameter fall below it, as memorization_capacity measured at d_ff 16 in 2026-11-24)'
  )
  detail += '' if needed else '; needed only for a not reproduced'
  name = f'premise: routing matters ({label}: the MoE stores more than dense of its active size, at every size)'
  return stats.as_premise(stats.Check(name, ok or not needed, detail))
