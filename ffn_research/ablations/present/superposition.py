"""Tables, figures and headline of ablations/superposition.py."""

import numpy as np
import pandas as pd

from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import superposition as study

SHOWN = {
  'represented': f'norm count (> {study.NORM_LEVEL})',
  'represented_readout': f'readout count (error < {study.READ_ERROR:g})',
  'represented_gain': 'gain count (> 0.5)',
}


def density_table(full: pd.DataFrame) -> pd.DataFrame:
  """Per arm and density, the arm's verdict count (MEASURE) with its CI, and the other counts' means (shown)."""
  rows = []
  for (arm, d), g in study.with_density(full).groupby(['arm', study.DENSITY], sort=False):
    count = study.MEASURE[arm]
    m, lo, hi = stats.mean_ci(g[count])
    row = {
      'arm': arm,
      '1 - S': d,
      'seeds': len(g),
      'steps': int(g['train.steps'].iloc[0]),
      'rate': float(g['train.learning_rate'].iloc[0]),
      'represented mean': m,
      'CI lo': lo,
      'CI hi': hi,
      'min': int(g[count].min()),
      'max': int(g[count].max()),
      'dims/feature': float(g['dims_per_feature'].mean()),
      'eval loss': float(g['eval_loss'].mean()),
    }
    for col, label in SHOWN.items():  # the counts an arm is not judged on
      if col != count and col in g and g[col].notna().any():
        row[label] = float(g[col].mean())
    for col, label in (('dead_hidden', 'dead hidden'), ('dead_outputs', 'dead outputs')):  # active on no sample
      if col in g and g[col].notna().any():
        row[label] = float(g[col].mean())
    rows.append(row)
  if not rows:
    return pd.DataFrame(columns=['arm', '1 - S'])
  frame = pd.DataFrame(rows)
  extra = [c for c in (*SHOWN.values(), 'dead hidden', 'dead outputs') if c in frame]  # one order for every arm
  frame = frame[[c for c in frame if c not in extra] + extra]
  return frame.sort_values(['arm', '1 - S'], ascending=[True, False]).reset_index(drop=True)


def sharpest_step(table: pd.DataFrame, arm: str) -> str:
  """Where the mean represented count jumps most between neighbouring densities."""
  t = table[table['arm'] == arm].sort_values('1 - S', ascending=False)
  if len(t) < 2:
    return f'{arm}: fewer than 2 densities'
  jumps = np.diff(t['represented mean'].to_numpy())
  i = int(np.argmax(np.abs(jumps)))
  d = t['1 - S'].to_numpy()
  return (
    f'{arm}: the largest change of the mean represented count between neighbouring densities is '
    f'{jumps[i]:+.2f} features, from 1 - S = {d[i]:g} to {d[i + 1]:g} (all steps: '
    + ', '.join(f'{x:+.2f}' for x in jumps)
    + ')'
  )


def figure(full: pd.DataFrame, table: pd.DataFrame, ctx: base.Context) -> base.Figure:
  fig, axes = base.figure(1, 2, size=(5.5, 4.2))
  ax0, ax1 = axes[0]
  full = study.with_density(full)
  for i, (arm, (_, label)) in enumerate(study.ARMS.items()):
    t = table[table['arm'] == arm]
    if t.empty:
      continue
    base.errorbar_ci(ax0, t['1 - S'], t['represented mean'], t['CI lo'], t['CI hi'], color=f'C{i}', label=label)
    g = full[full['arm'] == arm]
    ax0.scatter(g[study.DENSITY] * (1 + 0.04 * (i - 0.5)), g[study.MEASURE[arm]], s=8, color=f'C{i}', alpha=0.3)
    ax1.plot(t['1 - S'], t['dims/feature'], 'o-', color=f'C{i}', label=label)
  ax0.axhline(study.M_HIDDEN, color='k', ls='--', label=f'm = {study.M_HIDDEN} (no superposition)')
  ax0.axvline(
    study.SPARSE_MAX_DENSITY, color='gray', ls=':', label=f'verdicts read 1 - S <= {study.SPARSE_MAX_DENSITY:g}'
  )
  ax1.axhline(1.0, color='k', ls='--', label='1 (one dimension per feature)')
  for ax, ylabel, title in (
    (
      ax0,
      f'features represented (toy: norm > {study.NORM_LEVEL}; FFN: read out, error < {study.READ_ERROR:g})',
      f'n = {study.N_FEATURES} features, m = {study.M_HIDDEN} dims ({ctx.scale})',
    ),
    (ax1, 'dimensions per feature', 'dimensions per feature (mean over seeds)'),
  ):
    base.style_axes(
      ax, xlabel='feature density 1 - S (sparser to the right)', ylabel=ylabel, title=title, xscale='log', title_size=10
    )
    ax.invert_xaxis()
  return base.save_figure(
    fig,
    ctx.outdir,
    'features_vs_sparsity.png',
    "left: features represented vs density 1 - S at each point's tuned rate (mean over seeds, "
    '95% CI; dots: seeds) with m; right: dimensions per feature',
  )


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  table = density_table(result.full)
  arms_run = [a for a in study.ARMS if a in set(table['arm'])]
  notes = [sharpest_step(table, a) for a in arms_run]
  notes.append(
    'dims/feature = m / ||W||_F^2 (toy); for the FFN m / sum_i ||W1[i,:]|| ||W2[:,i]||. Counts not judged, '
    "shown: the toy's readout count, the FFN's weight-norm count (sqrt(||W1[i,:]|| ||W2[:,i]||) > 0.5) and gain "
    'count (output i at e_i minus at 0 above 0.5). Dead hidden / dead outputs (mean over seeds): units active on '
    "none of the inputs drawn at the run's own density, max(4,096, 1,000 / (1 - S)) of them (each feature on about "
    '1,000 times; a unit active less often than that is counted dead). A dead output is always an unrepresented '
    "feature here; at dense inputs it costs loss, at sparse ones it may be the optimum's own choice (the toy's "
    'least important features at 1 - S = 0.01)'
  )
  v_toy, v_ffn = result.verdicts
  dense = table[table['1 - S'] >= 1.0].set_index('arm')['represented mean'] if len(table) else pd.Series(dtype=float)
  headline = (
    f'sparse - dense features represented, per seed: toy {v_toy.statistic:+.2f} [{v_toy.ci[0]:.2f}, '
    f'{v_toy.ci[1]:.2f}] ({v_toy.outcome}), FFN {v_ffn.statistic:+.2f} [{v_ffn.ci[0]:.2f}, {v_ffn.ci[1]:.2f}] '
    f'({v_ffn.outcome}{": not evidence either way" if v_ffn.outcome == stats.INVALID else ""}) (rule: > '
    f'{study.MARGIN:g}); at 1 - S = 1: '
    + ', '.join(f'{a} {c:.2f}' for a, c in dense.items())
    + f' (m = {study.M_HIDDEN})'
  )
  return base.Presentation(
    headline=headline,
    tables=[
      base.Table(
        "Features represented and dimensions per feature, per arm and density, at each point's T "
        'and tuned rate (mean over seeds, 95% CI)',
        table,
      )
    ],
    figures=[figure(result.full, table, ctx)],
    notes=notes,
  )
