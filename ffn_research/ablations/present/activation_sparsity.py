"""Tables, figures and headline of ablations/activation_sparsity.py."""

from collections.abc import Sequence
import math

import matplotlib.ticker
import numpy as np
import pandas as pd

from ffn_research import stats
from ffn_research.ablations import activation_sparsity as study
from ffn_research.ablations import base
from ffn_research.ablations import regime as regime_lib


def density_table(full: pd.DataFrame) -> pd.DataFrame:
  """Per point at T (its chosen rate): density at init / half / end (end: mean and 95% CI over seeds, per layer)."""
  rows = []
  for p, g in full.groupby('point', sort=False):
    m, lo, hi = stats.mean_ci(g['density'], bounds=study.FRACTION)
    rows.append(
      {
        'point': p,
        'rate': float(g[study.LR].iloc[0]),
        'steps': int(g[study.STEPS].iloc[0]),
        'seeds': len(g),
        'init': g['density_init'].mean(),
        'half': g['density_half'].mean(),
        'end': m,
        'CI (end)': f'[{lo:.3g}, {hi:.3g}]',
        'layer 0': g['density_l0'].mean(),
        'layer 1': g['density_l1'].mean(),
        f'|a| > {study.TAU:g}': g['density_tau'].mean(),
        'pre-act > 0': g['positive'].mean(),
        'dead units': g['dead'].mean(),
        'excess bits': (g['eval_bits'] - g['floor_bits']).mean(),
      }
    )
  return pd.DataFrame(rows)


def grid_table(frame: pd.DataFrame, tuning: pd.DataFrame) -> pd.DataFrame:
  """Per ReLU (point, rate, budget): finished seeds, mean held-out bits and density, and the rate chosen there."""
  chosen = {(t['point'], t['steps']): t['rate'] for _, t in tuning.iterrows()}
  relu = frame[(frame['arm'] == 'relu') & (frame['status'] == 'completed')]
  return pd.DataFrame(
    [
      {
        'point': p,
        'rate': r,
        'steps': s,
        'seeds': len(g),
        'eval bits': g['eval_bits'].mean(),
        'density': g['density'].mean(),
        'chosen': bool(np.isclose(chosen.get((p, s), math.nan), r)),
      }
      for (p, r, s), g in relu.groupby(['point', study.LR, study.STEPS], sort=True)
    ]
  )


def fixed_rate_slopes(frame: pd.DataFrame, scale: str, read: dict[str, dict[int, float]] | None = None) -> pd.DataFrame:
  """Per size axis, rate run at every point of the axis and budget: the verdicts' statistic (mean per-seed slope of
  log density on log size, t CI) with every point read at that one rate (the verdicts read the shared rate chosen
  on held-out bits, and the rates tied with it; the others are descriptive)."""
  done = frame[(frame['arm'] == 'relu') & (frame['status'] == 'completed')]
  rows = []
  for x, points in study.axis_points(scale).items():
    sub = done[done['point'].isin(points)]
    for (r, t), g in sub.groupby([study.LR, study.STEPS], sort=True):
      if g['point'].nunique() < len(points):
        continue
      slopes = study.per_seed_slopes(g, f'model.{x}')
      m, lo, hi = stats.mean_ci(slopes)
      rows.append(
        {
          'axis': x,
          'rate': float(r),
          'steps': int(t),
          'seeds': len(slopes),
          'slope': m,
          'CI': f'[{lo:+.3f}, {hi:+.3f}]',
          'held-out bits (mean over points)': g['eval_bits'].mean(),
          'worst point (its bits)': '{} ({:.3g})'.format(
            *max(g.groupby('point')['eval_bits'].mean().items(), key=lambda kv: kv[1])
          ),
          'the verdict reads it': bool(read and np.isclose((read.get(x) or {}).get(int(t), math.nan), float(r))),
        }
      )
  return pd.DataFrame(rows)


def gated_vs_relu(act: str, a: pd.DataFrame, relu_ref: pd.DataFrame) -> str:
  """One note: `act` (its runs at T, `a`) against ReLU at the reference shape and the same rate (`relu_ref`: every
  completed run there), paired by seed at the same budget; where ReLU has no run of that budget (its T grew with
  the doublings, the descriptive arms' did not), ReLU at its nearest budget, named and not paired."""
  head = f'descriptive (not a verdict; rate {study.DESCRIPTIVE_LR:g}, not tuned): {act.upper()}'
  if not len(a):
    return f'{head}: no run at T in this report'
  steps = int(a[study.STEPS].max())
  head += (
    f' at the end of {steps} steps, |a| > {study.TAU:g}: {a["density_tau"].mean():.3f}; positive pre-activations '
    f'{a["positive"].mean():.3f}'
  )
  r = relu_ref[relu_ref[study.STEPS] == steps]
  if not len(r):
    if not len(relu_ref):
      return f'{head}; ReLU at the same shape never ran at rate {study.DESCRIPTIVE_LR:g}, so no comparison'
    near = int(min(relu_ref[study.STEPS].unique(), key=lambda s: (abs(math.log(s / steps)), s)))
    n = relu_ref[relu_ref[study.STEPS] == near]
    return (
      f'{head}; ReLU at the same shape and rate has no {steps}-step run: at {near} steps (another budget, not '
      f'paired) |a| > {study.TAU:g} {n["density_tau"].mean():.3f}, non-zero {n["density"].mean():.3f}, positive '
      f'pre-activations {n["positive"].mean():.3f}'
    )
  pair = (a.set_index(study.SEED)['density_tau'] - r.set_index(study.SEED)['density_tau']).dropna()
  m, lo, hi = stats.mean_ci(pair)
  ci = f' [{lo:.3f}, {hi:.3f}]' if math.isfinite(lo) and math.isfinite(hi) else ''
  return (
    f'{head} (|a| > {study.TAU:g} counts the negative branch too; ReLU at the same shape, rate and budget: '
    f'|a| > {study.TAU:g} {r["density_tau"].mean():.3f}, non-zero '
    f'{r["density"].mean():.3f}, positive pre-activations {r["positive"].mean():.3f}); paired {act} - relu '
    f'{m:+.3f}{ci} (n = {len(pair)} seeds)'
  )


def control_budget(result: base.Result) -> list[str]:
  """Verdict 1's budget and its ladder's fall per doubling of T, extrapolated to the level (descriptive: its positive
  control declares no remedy, so the loop buys no steps for it)."""
  if not result.verdicts or len(result.verdicts[0].ladder) < 2:
    return []
  values = [float(r['statistic']) for r in result.verdicts[0].ladder]
  falls = [b / a for a, b in zip(values, values[1:], strict=False) if 0 < b < a]
  if len(falls) < len(values) - 1 or not falls:
    return []
  need = ', '.join(f'{math.log(study.LEVEL / values[-1]) / math.log(f):.1f}' for f in falls)
  steps = ', '.join(f'{int(r["steps"]):,}' for r in result.verdicts[0].ladder)
  return [
    f'verdict 1 on its ladder ({steps} steps): density {", ".join(f"{v:.3g}" for v in values)}, a fall of '
    f'{", ".join(f"{1 - f:.0%}" for f in falls)} per doubling; extrapolating each of those paces, {study.LEVEL:.0%} '
    f'would take about {need} more doublings of T at the reference shape. Its positive control (a shape below '
    f'{study.LEVEL:.0%}) declares no remedy, so the loop bought no steps for it: invalid as run, not evidence either '
    'way'
  ]


def own_rate_slopes(result: base.Result) -> list[str]:
  """Each axis's slope with every size at its own tuned rate (the design before issue 47's, descriptive): where it
  differs in sign from the verdict's shared-rate reading, the rate policy decides the sign."""
  out = []
  relu = result.full[result.full['arm'] == 'relu']
  axes = study.axis_points(result.scale)
  shared = dict(zip(axes, [v.statistic for v in result.verdicts[1:3]], strict=False))  # none in a bare Result
  for x, points in axes.items():
    g = relu[relu['point'].isin(points)]
    if g['point'].nunique() < len(points):
      continue
    m, lo, hi = stats.mean_ci(study.per_seed_slopes(g, f'model.{x}'))
    rates = ', '.join(f'{float(r):g}' for r in g.groupby(f'model.{x}')[study.LR].first())
    at = shared.get(x, math.nan)
    flips = math.isfinite(at) and (m > 0) != (at > 0)
    out.append(
      f"{x} slope with each size at its own tuned rate ({rates}; descriptive, the reading before issue 47's "
      f"redesign): {m:+.3f} [{lo:+.3f}, {hi:+.3f}] against the verdict's {at:+.3f} at one shared rate"
      + (
        ': the sign depends on the rate policy (a wider model prefers a smaller rate in the standard '
        'parametrisation), so the verdict is a statement about models trained at one step size, not about models '
        'each trained at its best rate'
        if flips
        else ''
      )
    )
  return out


def notes(result: base.Result) -> list[str]:
  """GELU/SiLU against ReLU at the reference, the same rate and budget (paired by seed); dead units."""
  out, f = [], result.frame[result.frame['status'] == 'completed']
  ref = f'relu: {study.shape(*study.SETTINGS[result.scale]["ref"])}'
  relu_ref = f[(f['point'] == ref) & np.isclose(f[study.LR].astype(float), study.DESCRIPTIVE_LR)]
  for act in ('gelu', 'silu'):
    out.append(gated_vs_relu(act, result.full[result.full['arm'] == act], relu_ref))
  relu = result.full[result.full['arm'] == 'relu']
  init, end = relu.groupby(study.SEED)['density_init'].mean(), relu.groupby(study.SEED)['density'].mean()
  out.append(
    'emergence (descriptive, not a verdict): ReLU density at initialisation '
    f'{relu["density_init"].mean():.3f} -> {relu["density"].mean():.3f} at the end of T (mean over shapes and '
    f'seeds); lower at the end in {int((end < init).sum())} of {len(init)} seeds'
  )
  excess = relu.groupby('point').apply(lambda g: (g['eval_bits'] - g['floor_bits']).mean(), include_groups=False)
  if len(excess):
    out.append(
      'every chosen ReLU point ends within '
      f'{excess.min():.3f}-{excess.max():.3f} bits of the entropy floor, so held-out bits barely tell rates '
      'apart: a tie on them can move a slope (the fixed-rate slope table reads each axis at one rate)'
    )
  out += own_rate_slopes(result) + control_budget(result)
  out.append(
    'ReLU dead units (never non-zero on the probe set) at the chosen rates, end of T: '
    f'{relu["dead"].mean():.3f} '
    f'of the units on average over shapes and seeds (max {relu["dead"].max():.3f}); density among live units '
    'is density / (1 - dead)'
  )
  return out


def _size_panel(
  ax, relu: pd.DataFrame, x: str, points: Sequence[str], s: study.Settings, scale: str, shared: pd.DataFrame
) -> None:
  """Density at the end of T against one size axis: each size at its own tuned rate (written beside it), and every
  size at the axis's one shared rate (`shared`: those runs), the reading of the axis's slope verdict."""
  sub = relu[relu['point'].isin(points)]
  if len(shared):
    t = stats.summarize(shared, [f'model.{x}'], ['density'])
    base.errorbar_ci(
      ax,
      t[f'model.{x}'] * 1.04,
      t['density_mean'],
      t['density_ci_lo'],
      t['density_ci_hi'],
      color='C1',
      label=f'ReLU at the shared rate {float(shared[study.LR].iloc[0]):g} (the slope verdict reads these)',
    )
  t = stats.summarize(sub, [f'model.{x}'], ['density'])
  if len(t):
    base.errorbar_ci(
      ax,
      t[f'model.{x}'],
      t['density_mean'],
      t['density_ci_lo'],
      t['density_ci_hi'],
      label='ReLU, each size at its own tuned rate (mean, 95% CI)',
    )
    ax.scatter(sub[f'model.{x}'], sub['density'], s=8, alpha=0.4)
    for size, g in sub.groupby(f'model.{x}'):
      ax.annotate(
        f'lr {float(g[study.LR].iloc[0]):g}',
        (size, g['density'].mean()),
        textcoords='offset points',
        xytext=(4, 6),
        fontsize=7,
      )
  ax.axhline(study.PAPER_VIT, color='C2', ls=':', label=f'ViT-B/16 {study.PAPER_VIT:.1%} (Li et al.)')
  ax.axhline(study.PAPER_T5, color='C3', ls=':', label=f'T5-Base {study.PAPER_T5:.1%} (Li et al.)')
  ax.axhline(study.LEVEL, color='k', ls='--', label=f'rule 1 level {study.LEVEL:.0%}')
  fixed = f'd_model {s["ref"][0]}' if x == 'd_ff' else 'd_ff = 4 d_model'
  base.style_axes(
    ax,
    xlabel=x,
    ylabel='fraction of non-zero activations',
    title=f'{fixed} ({scale})',
    xscale='log',
    xbase=2,
    yscale='log',
  )
  sizes = sorted(int(v) for v in sub[f'model.{x}'].unique())
  ax.set_xticks(sizes, [str(v) for v in sizes])  # every size labelled (48 is no power of 2)
  ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def _shared_runs(frame: pd.DataFrame, relu: pd.DataFrame, v, points: Sequence[str]) -> pd.DataFrame:
  """The runs of `points` at T (their steps in `relu`) and at the verdict's shared rate at T (empty if none)."""
  rate = (v.extra.get('common_rates') or {}).get(regime_lib.FULL)
  steps = relu.loc[relu['point'].isin(points), study.STEPS]
  if rate is None or not len(steps):
    return frame.iloc[:0]
  at = frame[frame['point'].isin(points) & (frame[study.STEPS] == int(steps.max())) & (frame['status'] == 'completed')]
  return at[np.isclose(at[study.LR].astype(float), float(rate))]


def plot(result: base.Result, ctx: base.Context) -> base.Figure:
  s = study.SETTINGS[ctx.scale]
  fig, axes = base.figure(1, 3)
  relu = result.full[result.full['arm'] == 'relu']
  for ax, v, (x, points) in zip(
    axes[0, :2], result.verdicts[1:3], study.axis_points(ctx.scale).items(), strict=True
  ):  # axes[0, 2]: over training
    _size_panel(ax, relu, x, points, s, ctx.scale, _shared_runs(result.frame, relu, v, points))
  ref = f'relu: {study.shape(*s["ref"])}'
  for i, p in enumerate((ref, 'gelu', 'silu')):
    g = result.full[result.full['point'] == p]
    if not len(g):
      continue
    steps = np.array([0, g[study.STEPS].iloc[0] / 2, g[study.STEPS].iloc[0]])
    for layer in (0, 1):
      axes[0, 2].plot(
        steps,
        [g[f'density_l{layer}{k}'].mean() for k in study.PHASES],
        'o-' if layer == 0 else 's--',
        color=f'C{i}',
        label=f'{p.split(":")[0]} layer {layer}, lr {float(g[study.LR].iloc[0]):g}, {int(g[study.STEPS].iloc[0])} steps'
        + (', > 0' if i == 0 else f', |a| > {study.TAU:g}'),
      )
  base.style_axes(
    axes[0, 2],
    xlabel='training step',
    ylabel='density (mean over seeds)',
    title=f'over training at {study.shape(*s["ref"])}',
    yscale='log',
  )
  return base.save_figure(
    fig,
    ctx.outdir,
    'density_vs_size.png',
    'left, middle: fraction of non-zero ReLU activations on held-out sequences of the synthetic language at the '
    'end of T (mean over layers; mean and 95% CI over seeds, dots: seeds) vs d_ff and vs d_model, each shape at '
    'its own tuned learning rate (written beside it; rule 1 reads the reference shape so) and every size at the '
    "axis's one shared rate (orange: what the slope verdicts read), with Li et al.'s T5-Base and ViT-B/16 figures "
    'and the rule-1 '
    'level; right: density per layer at initialisation, half and end of each run, each line with its own rate, '
    f'budget and threshold (ReLU: > 0; GELU/SiLU: |a| > {study.TAU:g})',
  )


def _read_rates(result: base.Result) -> dict[str, dict[int, float]]:
  """Per axis, {steps: the shared rate its verdict read at that rung}."""
  out: dict[str, dict[int, float]] = {}
  for v, x in zip(result.verdicts[1:3], study.axis_points(result.scale), strict=False):
    common = v.extra.get('common_rates')
    rates: dict[str, float] = common if isinstance(common, dict) else {}
    steps = {r['level']: int(r['steps']) for r in v.ladder}
    out[x] = {steps[lv]: float(rate) for lv, rate in rates.items() if lv in steps}
  return out


def _shared(v) -> str:
  rate = (v.extra.get('common_rates') or {}).get(regime_lib.FULL)
  return f'{rate:g}' if rate is not None else 'none'


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  v = result.verdicts
  rates = ', '.join(
    f'{t["point"].removeprefix("relu: ")}: {t["rate"]:g}'
    for _, t in result.tuning.iterrows()
    if t['level'] == 'T' and t['point'].startswith('relu')
  )
  headline = (
    f'trained ReLU density {v[0].statistic:.3f} (95% CI [{v[0].ci[0]:.3f}, {v[0].ci[1]:.3f}]) '
    f'vs {study.LEVEL:.0%} ({v[0].outcome}); '
    f'slope vs d_ff {v[1].statistic:+.3f} [{v[1].ci[0]:+.3f}, {v[1].ci[1]:+.3f}] ({v[1].outcome}); vs d_model '
    f'{v[2].statistic:+.3f} [{v[2].ci[0]:+.3f}, {v[2].ci[1]:+.3f}] ({v[2].outcome}; one Adam rate is a larger step '
    f'for a wider model); the slopes at one shared rate per axis (at T: d_ff {_shared(v[1])}, d_model '
    f"{_shared(v[2])}); each shape's own tuned rate at T (verdict 1 and the tables): {rates}"
  )
  tables = [
    base.Table(
      'FFN activation density per point at its own T (steps column: ReLU at the budget the loop reached, '
      f'GELU/SiLU at their fixed one), at its chosen rate (GELU/SiLU: the descriptive rate, |a| > {study.TAU:g}): '
      'mean over layers, mean over seeds at initialisation, half and end, 95% CI at '
      'the end, per-layer means at the end',
      density_table(result.full),
    ),
    base.Table(
      'ReLU learning-rate x budget grid: held-out bits and density at the end of each run (mean over '
      'seeds; chosen: the rate with the lowest mean held-out bits at that budget)',
      grid_table(result.frame, result.tuning),
    ),
    base.Table(
      'The slopes of verdicts 2 and 3 with every point of the axis at one rate, per rate run at every point and '
      'budget (the verdicts read the shared rate with the lowest mean held-out bits over the axis, marked, and the '
      'rates tied with it; the others are descriptive, and where the worst point sits near the bigram level, about '
      '2.5 bits, that size has not learned the order-2 chain at that rate): mean per-seed slope of log density on '
      'log size, Student-t 95% CI',
      fixed_rate_slopes(result.frame, result.scale, _read_rates(result)),
    ),
  ]
  return base.Presentation(headline=headline, tables=tables, figures=[plot(result, ctx)], notes=notes(result))
