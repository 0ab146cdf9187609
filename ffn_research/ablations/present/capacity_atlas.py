"""Tables, figures and headline of ablations/capacity_atlas.py."""

import numpy as np
import pandas as pd

from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import capacity_atlas as study
from ffn_research.ablations import storage

COLORS = {'relu': 'C0', 'gelu': 'C1', 'swiglu': 'C2', 'moe_top1': 'C3', 'moe_top2': 'C4'}


def atlas_table(verdicts) -> pd.DataFrame:
  """One row per measurement: what, the number, its CI, its outcome; for MoE the number on active parameters (bits
  per active P at P* with its CI; the exponent on active P), for storage the log-log slope of peak bits on P."""
  rows = []
  for v in verdicts:
    what, _, quantity = v.claim.partition(': ')
    rows.append(
      {
        'cell': what,
        'measured': quantity,
        'value': v.statistic,
        'CI lo': v.ci[0],
        'CI hi': v.ci[1],
        'outcome': v.outcome,
        'seeds': v.n,
        'on active P': v.extra.get('per_active', v.extra.get('exponent_per_active', float('nan'))),
        'active CI lo': v.extra.get('per_active_lo', float('nan')),
        'active CI hi': v.extra.get('per_active_hi', float('nan')),
        'bits-P slope': v.extra.get('slope', float('nan')),
      }
    )
  return pd.DataFrame(rows)


def _mean_ci(values: pd.Series, name: str) -> dict[str, float]:
  """{name: the mean over seeds, 'CI lo', 'CI hi': its 95% t interval}."""
  m, lo, hi = stats.mean_ci(values)
  return {name: m, 'CI lo': lo, 'CI hi': hi}


def storage_table(full: pd.DataFrame) -> pd.DataFrame:
  """Per kind and width at the peak N: trainable and active parameters, peak bits (mean, CI) and bits / P."""
  rows = study.storage_rows(full)
  out = []
  for (kind, w), cell in rows.groupby(['kind', 'width'], sort=False):
    top = storage.peaks(cell)
    bits = _mean_ci(top['bits_stored'], 'bits')
    p, active = int(top[study.SIZE].iloc[0]), int(top['active'].iloc[0])
    out.append(
      {
        'kind': kind,
        'width': w,
        'P': p,
        'active P': active,
        'peak N': int(top[study.N].iloc[0]),
        'steps': int(top[study.STEPS].iloc[0]),
        **bits,
        'bits / P': bits['bits'] / p,
        'bits / active P': bits['bits'] / active,
      }
    )
  return pd.DataFrame(out)


def error_table(full: pd.DataFrame) -> pd.DataFrame:
  """Per target, kind and width: parameters, the error (mean, CI over seeds) and the held-out MSE / variance."""
  out = []
  for target in study.TARGETS:
    rows = study.approx_rows(full, target)
    for (kind, w), g in rows.groupby(['kind', 'width'], sort=False):
      out.append(
        {
          'target': target,
          'kind': kind,
          'width': w,
          'P': int(g[study.SIZE].iloc[0]),
          'steps': int(g[study.STEPS].iloc[0]),
          **_mean_ci(g['error'], 'error'),
          'MSE / variance': float(g['relative_mse'].mean()),
        }
      )
  return pd.DataFrame(out)


def figure(store: pd.DataFrame, errors: pd.DataFrame, ctx: base.Context) -> base.Figure:
  fig, axes = base.figure(1, 3, size=(4.6, 3.6))
  ax = axes[0, 0]
  for kind, g in store.groupby('kind', sort=False):
    for col, style in (('P', '-o'), ('active P', ':x')):
      if col == 'active P' and kind not in study.MOE_KINDS:
        continue
      ax.errorbar(
        g[col],
        g['bits'],
        yerr=[g['bits'] - g['CI lo'], g['CI hi'] - g['bits']],
        fmt=style,
        color=COLORS[kind],
        label=f'{kind}{" (active)" if col == "active P" else ""}',
        ms=4,
      )
  if len(store):
    p = np.geomspace(store['P'].min(), store['P'].max(), 20)
    ax.plot(p, 2 * p, 'k--', lw=0.8, label='2 bits / parameter')
  base.style_axes(
    ax, xlabel='parameters', ylabel='peak bits stored', title='storage', xscale='log', yscale='log', fontsize=6
  )
  for ax, target in zip(axes[0, 1:], study.TARGETS, strict=True):
    e = errors[errors['target'] == target]
    for kind, g in e.groupby('kind', sort=False):
      ax.errorbar(
        g['P'],
        g['error'],
        yerr=[g['error'] - g['CI lo'], g['CI hi'] - g['error']],
        fmt='-o',
        color=COLORS[kind],
        label=kind,
        ms=4,
      )
    relu = e[e['kind'] == 'relu']
    if target == 'sin' and len(relu):
      ax.plot(relu['P'], relu['width'].map(study.equal_piece), 'k--', lw=0.8, label='ReLU: equal pieces')
      ax.plot(relu['P'], relu['width'].map(study.free_knot), 'k:', lw=0.8, label='ReLU: free-knot optimum')
    what = 'sup error, sin(pi x)' if target == 'sin' else 'held-out RMSE, 4-d tanh teacher'
    base.style_axes(
      ax, xlabel='parameters', ylabel=what, title=f'approximation: {target}', xscale='log', yscale='log', fontsize=6
    )
  return base.save_figure(
    fig,
    ctx.outdir,
    'capacity_atlas.png',
    'Left: peak bits stored vs trainable parameters per FFN kind (MoE also vs active parameters, dotted), mean over '
    'seeds with 95% CIs, at the ladder T; dashed: 2 bits per parameter. Middle and right: error vs trainable '
    'parameters per kind (sin: sup error, with two references for ReLU width N: equal pieces, pi^2 / (4 (N + 1)^2), '
    'dashed, and the known optimum of N + 1 free pieces, 1.436 / (N + 1)^2 asymptotically, dotted, 1.72x lower; both '
    'lower bounds a width-N FFN can at best approach; '
    'teacher: held-out RMSE), log-log.',
  )


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  table = atlas_table(result.verdicts)
  store, errors = storage_table(result.full), error_table(result.full)
  shown = [
    f'{r.cell} {r.value:.3g} [{r["CI lo"]:.3g}, {r["CI hi"]:.3g}]'
    for _, r in table.iterrows()
    if 'per trainable' in r.measured
  ]
  headline = 'bits per trainable parameter at 1,000 exposures: ' + '; '.join(shown)
  return base.Presentation(
    headline=headline,
    tables=[
      base.Table('The atlas: every measurement with its 95% CI (outcome: measured, or why not)', table),
      base.Table('Storage per kind and width, at the peak N, the point at its tuned rate at T', store),
      base.Table('Approximation error per target, kind and width, at its tuned rate at T', errors),
    ],
    figures=[figure(store, errors, ctx)],
    notes=[
      'MoE, reported beside each judged number (not judged): bits per active parameter at P* (the per-seed number '
      "times P* / active there, interpolated over the widths: the router's share falls with width) with its CI; the "
      "teacher exponent on active P (judged on total P); in each MoE storage verdict's detail, its bits / P over "
      "ReLU's at the same total P inside the dense range only, and top-2's peak bits over top-1's at the same width "
      '(the same experts and router), each a marginal 95% CI over paired seeds.'
    ],
  )
