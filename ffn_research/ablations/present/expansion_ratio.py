"""Tables, figures and headline of ablations/expansion_ratio.py."""

import math

import numpy as np
import pandas as pd

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import expansion_ratio as study


def _at_steps(full: pd.DataFrame, ladder, points, steps: int) -> pd.DataFrame:
  """Seeds x points of the total loss of `points` at `steps`, each at its chosen rate for that budget (a rung of the
  ladder, or T), so that a shape is compared with the spread's best at its own budget."""
  frames = [full, *(ladder or {}).values()]
  at = pd.concat([f[f['point'].isin(points) & (f['train.steps'] == steps)] for f in frames if len(f)])
  if at.empty:
    return pd.DataFrame(columns=list(points))
  at = at.drop_duplicates(['point', study.SEED])
  return at.pivot_table(index=study.SEED, columns='point', values=study.LOSS)


def relative_loss(full: pd.DataFrame, scale: str, ladder=None) -> pd.DataFrame:
  """Per shape: total and excess bits (mean, t CI) and the % change of the total loss relative to the best
  shape of the spread (r in FLAT_RATIOS, by mean total loss) at the same budget (ratio of means and its CI): at T
  for the spread's shapes (the verdict's reference), at their own steps for r = 0.5 and 16 (the spread's shapes
  read at that rung of their ladder, `ladder`)."""
  rows = []
  for n in study.SETTINGS[scale]['sizes']:
    pts = [p for p in study.shapes(scale) if p['size'] == n]
    flat = [p['point'] for p in pts if p['ratio'] in study.FLAT_RATIOS]
    for p in pts:
      g = full[full['point'] == p['point']]
      row = {
        'N target': n,
        'r': p['ratio'],
        'd_model': p['d_model'],
        'd_ff': p['d_ff'],
        'd_ff/d_model': p['actual_ratio'],
        'N achieved': p['non_embedding_params'],
        'deviation %': 100 * p['deviation'],
        'seeds': len(g),
        'steps': int(g['train.steps'].iloc[0]) if len(g) else math.nan,
        'rate': float(g['train.learning_rate'].iloc[0]) if len(g) else math.nan,
      }
      row['total bits'] = float(g[study.LOSS].mean()) if len(g) else math.nan
      loss = _at_steps(full, ladder, [*flat, p['point']], row['steps']) if len(g) else pd.DataFrame()
      ref = [q for q in flat if q in loss and loss[q].notna().any()]
      best = loss[ref].mean().idxmin() if ref else None
      if p['point'] == best:
        r = lo = hi = 1.0
      elif best is not None and p['point'] in loss:
        r, lo, hi = rules_lib.ratio_of_means(*loss[[p['point'], best]].dropna().to_numpy().T)
      else:
        r = lo = hi = math.nan
      row['best at the same steps'] = best or '–'
      row['% vs best'], row['% vs best lo'], row['% vs best hi'] = 100 * (r - 1), 100 * (lo - 1), 100 * (hi - 1)
      row['excess bits'], row['excess lo'], row['excess hi'] = (
        stats.mean_ci(g[study.EXCESS]) if len(g) else (math.nan,) * 3
      )
      rows.append(row)
  return pd.DataFrame(rows)


def figure(table: pd.DataFrame, ctx: base.Context) -> base.Figure:
  """Per size: the shapes of the spread (r in FLAT_RATIOS, one budget) joined by a line; the other ratios as
  open, unjoined markers (not in the spread; the caption says whether they ran at the spread's T)."""
  fig, axes = base.figure(1, 2, size=(6.0, 4.6))
  ax1, ax2 = axes[0]
  _panel_change(ax1, table, ctx.scale)
  _panel_excess(ax2, table)
  return base.save_figure(
    fig,
    ctx.outdir,
    'loss_vs_ratio.png',
    "left: % change of each shape's total loss (bits per token, at its tuned rate) relative to the best shape "
    f'of the spread (r in {list(study.FLAT_RATIOS)}) of its size at the same number of steps, vs d_ff/d_model, '
    'with the 5% rule; right: excess bits over the exact entropy floor, the part of the loss shapes can change. '
    'Joined: the shapes of the spread, at one budget; open and not joined: the other ratios, not in the spread '
    f'({others_budget(table)})',
  )


def _sizes(ax, table: pd.DataFrame, col: str, lo: str, hi: str, what: str) -> None:
  """`col` with its CI [lo, hi] vs d_ff/d_model, colour Ci for size i: the shapes of the spread joined, the other
  ratios open and unjoined."""
  for i, (n, t) in enumerate(table.groupby('N target')):
    flat, other = t[t['r'].isin(study.FLAT_RATIOS)], t[~t['r'].isin(study.FLAT_RATIOS)]
    steps = sorted({int(s) for s in flat['steps'] if np.isfinite(s)})
    at = f'T = {", ".join(map(str, steps))}' if steps else 'T'
    other_steps = sorted({int(s) for s in other['steps'] if np.isfinite(s)})
    other_at = f'T = {", ".join(map(str, other_steps))}' if other_steps else 'their T'
    base.errorbar_ci(
      ax, flat['d_ff/d_model'], flat[col], flat[lo], flat[hi], color=f'C{i}', label=f'N = {n:,}, {at} ({what})'
    )
    if len(other):
      base.errorbar_ci(
        ax,
        other['d_ff/d_model'],
        other[col],
        other[lo],
        other[hi],
        fmt='o',
        mfc='none',
        color=f'C{i}',
        label=f'N = {n:,}, r = {", ".join(f"{r:g}" for r in other["r"])} at {other_at} (not in the spread)',
      )


def _panel_change(ax, table: pd.DataFrame, scale: str) -> None:
  """Left: % change vs the best shape of the spread, the spread's achieved ratios shaded, the rule's level."""
  _sizes(ax, table, '% vs best', '% vs best lo', '% vs best hi', 'mean ratio, 95% CI')
  spread = table[table['r'].isin(study.FLAT_RATIOS)]['d_ff/d_model']
  if len(spread):  # the achieved ratios (a matched shape's r is near, not at, its nominal value)
    ax.axvspan(
      0.97 * spread.min(),
      1.03 * spread.max(),
      color='0.9',
      zorder=0,
      label=f'shapes of the spread, r ~ {list(study.FLAT_RATIOS)}',
    )
  ax.axhline(study.FLAT_LEVEL, color='k', ls='--', lw=0.8, label=f'{study.FLAT_LEVEL:g}% (the rule)')
  base.style_axes(
    ax,
    xlabel='d_ff / d_model',
    ylabel='% change of the total loss vs the best shape of the spread',
    xscale='log',
    xbase=2,
    title=f'Kaplan et al. Fig. 5 statistic ({scale})',
  )


def _panel_excess(ax, table: pd.DataFrame) -> None:
  """Right: excess bits per token over the entropy floor."""
  _sizes(ax, table, 'excess bits', 'excess lo', 'excess hi', 'mean, 95% CI over seeds')
  base.style_axes(
    ax,
    xlabel='d_ff / d_model',
    ylabel='excess bits per token over the entropy floor',
    xscale='log',
    xbase=2,
    yscale='log' if (table['excess bits'] > 0).any() else None,
    title='the same runs: loss above the exact floor',
  )


def others_budget(table: pd.DataFrame) -> str:
  """Where the ratios outside the spread ran, in words: at the spread's T, or at their own."""
  flat = table['r'].isin(study.FLAT_RATIOS)
  mine, theirs = (sorted({int(x) for x in table[m]['steps'] if np.isfinite(x)}) for m in (flat, ~flat))
  if not theirs:
    return 'none measured'
  if theirs == mine:
    return f'run at the same T = {", ".join(map(str, theirs))} steps'
  return f'run at their own T = {", ".join(map(str, theirs))} steps (the spread: {", ".join(map(str, mine))})'


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  table = relative_loss(result.full, ctx.scale, result.ladder)
  shown = [r for r in study.SETTINGS[ctx.scale]['ratios'] if r not in study.FLAT_RATIOS]
  heads = [
    f'N={n:,}: spread of the total loss {v.statistic:.3g}% (95% CI [{v.ci[0]:.3g}, {v.ci[1]:.3g}]) over d_ff/d_model '
    f'{list(study.FLAT_RATIOS)}: {v.outcome}'
    for n, v in zip(study.SETTINGS[ctx.scale]['sizes'], result.verdicts, strict=True)
  ]
  return base.Presentation(
    headline='; '.join(heads),
    tables=[
      base.Table(
        "Shapes, achieved non-embedding parameters, and loss at each shape's T and tuned rate; % against the "
        "spread's best shape at the same number of steps",
        table,
      )
    ],
    figures=[figure(table, ctx)],
    notes=(
      [f'ratios {shown} are shown, not in the spread ({others_budget(table)}); their rates are tuned but not checked']
      if shown
      else []
    )
    + [
      'The spread is of the total loss, which includes the entropy floor no shape can change; its premise asks '
      f"that the best shape's reducible share (excess / total bits) be at least {study.MIN_REDUCIBLE_SHARE:g}."
    ],
  )
