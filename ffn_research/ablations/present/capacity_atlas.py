"""Tables, figures and headline of ablations/capacity_atlas.py."""

import math
import re
from typing import Any

from matplotlib import ticker
import numpy as np
import pandas as pd

from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import capacity_atlas as study
from ffn_research.ablations import storage

COLORS = {'relu': 'C0', 'gelu': 'C1', 'swiglu': 'C2', 'moe_top1': 'C3', 'moe_top2': 'C4'}


def _transient(errors: pd.DataFrame) -> dict[tuple[str, str], float]:
  """{(target, kind): the median over its widths of the T/2-over-T error ratio}: above study.TRANSIENT the typical
  width still fell that much in the last doubling of steps (the median since 2026-11-30, a change after results:
  the least ratio let one width that got worse hide the rest)."""
  if errors.empty:
    return {}
  return {(t, k): float(g['T/2 over T'].median()) for (t, k), g in errors.groupby(['target', 'kind'])}


SHORT = {  # a failed check's name -> the words the atlas table uses
  'learning rate inside the grid': 'rate at its grid edge',
  'stable on the budget ladder (measurement claim)': 'not stable on the ladder',
  'no learning-rate tie decides it': 'a rate tie decides it',
  'one power law over the widths': 'not one power law',
}
_STEP = re.compile(r'next step: (.*?) \(~([\d,]+) run-seconds')


def _step(detail: str) -> tuple[str, float]:
  """(the next step's words, its price in run-seconds) from a check's detail; ('', nan) if it names none."""
  found = _STEP.findall(detail)
  if not found:
    return '', math.nan
  what, secs = found[-1]
  head, _, rest = what.partition(' at ')
  return (head if ': ' in rest else what), float(secs.replace(',', ''))


def _purchase(what: str) -> str:
  """The runs a next step buys: every step that doubles T ('a doubling past ...', 'the arm at twice the steps') buys
  the same runs."""
  return 'T doubled' if 'doubling' in what or 'twice the steps' in what else what


def why_not(v: stats.Verdict) -> str:
  """'' where measured; else each failed check (a rate edge's points merged) with its next step and price, and the
  price of all of them."""
  if v.outcome == stats.MEASURED:
    return ''
  merged: dict[str, tuple[list[str], str, float]] = {}
  for c in v.failed_checks:
    if not c.applies:
      continue
    point, _, name = c.name.rpartition(': ')
    what, secs = _step(c.detail)
    label = SHORT.get(name, name)
    points, _, total = merged.get(label, ([], what, 0.0))
    merged[label] = ([*points, point.rpartition(': ')[2]] if point else points, what, total + secs)
  if not merged:
    return 'imprecise: the CI is wider than its bar (next step: more seeds, unpriced)'
  parts = [
    f'{label}{" (" + ", ".join(sorted(points, key=_natural)) + ")" if points else ""}: '
    + (f'next {what}, ~{secs:,.0f} run-s' if what else 'no priced step')
    for label, (points, what, secs) in merged.items()
  ]
  bought: dict[str, float] = {}
  for _, what, secs in merged.values():  # one purchase named by two checks is priced once (the dearer figure)
    bought[_purchase(what)] = max(secs, bought.get(_purchase(what), 0.0))
  total = sum(bought.values())
  return '; '.join(parts) + (f' (all: ~{total:,.0f} run-s)' if len(parts) > 1 and math.isfinite(total) else '')


def _ladder(v: stats.Verdict) -> tuple[float, str]:
  """(T in steps, the statistic on each rung of its ladder, T/4 / T/2 / T, and for storage how much the last doubling
  moved it in % of its value at T, checks.stability's convention; an exponent settles on an absolute margin)."""
  if not v.ladder:
    return math.nan, ''
  values = [r['statistic'] for r in v.ladder]
  said = ' / '.join(f'{x:.3g}' for x in values)
  if 'slope' in v.extra and len(values) > 1:  # storage: a number at its budget that still grows
    said += f' ({100 * (values[-1] - values[-2]) / abs(values[-1]):+.1f}% in the last doubling)'
  return float(v.ladder[-1]['steps']), said


def _natural(label: str) -> list:
  return [int(t) if t.isdigit() else t for t in re.split(r'(\d+)', label)]


def atlas_table(verdicts, errors: pd.DataFrame | None = None) -> pd.DataFrame:
  """One row per measurement: what, the number, its CI, its outcome and, where not measured, why not (each failed
  check, its next step and price); its budget T and how much the last doubling of T moved it (a number at its
  budget, not a saturated one); for MoE the number on active parameters (bits per active P at P* with its CI; the
  exponent on active P), for storage the log-log slope of peak bits on P."""
  rows, falling = [], _transient(errors if errors is not None else pd.DataFrame())
  for v in verdicts:
    what, _, quantity = v.claim.partition(': ')
    target, _, kind = what.rpartition(', ')
    typical = falling.get((target, kind), math.nan)
    t, moved = _ladder(v)
    rows.append(
      {
        'cell': what,
        'measured': quantity,
        'value': v.statistic,
        'CI lo': v.ci[0],
        'CI hi': v.ci[1],
        'outcome': v.outcome,
        'why not (failed check: next step, price on this machine)': why_not(v),
        'seeds': v.n,
        'T (steps)': t,
        'ladder: T/4 / T/2 / T': moved,
        'on active P': v.extra.get('per_active', v.extra.get('exponent_per_active', float('nan'))),
        'active CI lo': v.extra.get('per_active_lo', float('nan')),
        'active CI hi': v.extra.get('per_active_hi', float('nan')),
        'bits-P slope': v.extra.get('slope', float('nan')),
        'slope CI lo': v.extra.get('slope_lo', float('nan')),
        'slope CI hi': v.extra.get('slope_hi', float('nan')),
        'widths still falling (median T/2 over T)': (
          f"yes ({typical:.3g}x): the optimiser's transient" if typical > study.TRANSIENT else f'no ({typical:.3g}x)'
        )
        if math.isfinite(typical)
        else '',
        'frozen design': (stats.INVALID if v.extra.get('frozen_invalid') else v.outcome)
        if 'frozen_invalid' in v.extra
        else '',
      }
    )
  return pd.DataFrame(rows)


def _mean_ci(values: pd.Series, name: str) -> dict[str, float]:
  """{name: the mean over seeds, 'CI lo', 'CI hi': its 95% t interval}."""
  m, lo, hi = stats.mean_ci(values)
  return {name: m, 'CI lo': lo, 'CI hi': hi}


def _geo_ci(values: pd.Series, name: str) -> dict[str, float]:
  """{name: the geometric mean over seeds, 'CI lo', 'CI hi': exp of the 95% t interval of the mean log}: positive,
  as the log-log axes and the per-seed log fits need."""
  m, lo, hi = stats.geo_mean_ci(values)
  return {name: m, 'CI lo': lo, 'CI hi': hi}


def storage_table(full: pd.DataFrame) -> pd.DataFrame:
  """Per kind and width at the best N of the grid: trainable and active parameters, its bits (mean, CI), bits / P."""
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


def error_table(full: pd.DataFrame, half: pd.DataFrame) -> pd.DataFrame:
  """Per target, kind and width: parameters, the error (geometric mean over seeds, its CI on the log), the held-out
  MSE / variance, and the geometric-mean error at T/2 over that at T (each at its own tuned rate): how much the last
  doubling of steps still moved it (reported since 2026-11-30, a change after results: a floor every width shares is
  the optimiser's, not width's)."""
  out = []
  for target in study.TARGETS:
    rows, before = study.approx_rows(full, target), study.approx_rows(half, target) if len(half) else None
    for (kind, w), g in rows.groupby(['kind', 'width'], sort=False):
      h = before[(before['kind'] == kind) & (before['width'] == w)] if before is not None else g.iloc[:0]
      out.append(
        {
          'target': target,
          'kind': kind,
          'width': w,
          'P': int(g[study.SIZE].iloc[0]),
          'steps': int(g[study.STEPS].iloc[0]),
          **_geo_ci(g['error'], 'error'),
          'MSE / variance': float(g['relative_mse'].mean()),
          'T/2 over T': _geo_ci(h['error'], 'e')['e'] / _geo_ci(g['error'], 'e')['e'] if len(h) else math.nan,
        }
      )
  return pd.DataFrame(out)


def _by_kind(verdicts, target: str = '') -> dict[str, stats.Verdict]:
  """{kind: its verdict} of the storage verdicts ('KIND: ...') or of one target's ('TARGET, KIND: ...')."""
  out = {}
  for v in verdicts:
    head = v.claim.split(': ')[0]
    t, _, kind = head.rpartition(', ')
    if t == target:
      out[kind] = v
  return out


def _errorbars(ax, x, g: pd.DataFrame, y: str, **kw) -> None:
  ax.errorbar(x, g[y], yerr=[g[y] - g['CI lo'], g['CI hi'] - g[y]], ms=4, **kw)


def _look(kind: str, v: stats.Verdict | None) -> tuple[dict[str, Any], str]:
  """(marker keywords with its legend label, the fit's line style): filled and solid where measured; hollow,
  dashed and the outcome in the legend where not (its number is a reading, not a measurement)."""
  if v is not None and v.outcome == stats.MEASURED:
    moved = ' (frozen design: invalid)' if v.extra.get('frozen_invalid') else ''  # measured by a change after results
    return {'color': COLORS[kind], 'label': kind + moved}, '-'
  said = v.outcome if v is not None else 'not judged'
  return {'color': COLORS[kind], 'mfc': 'none', 'label': f'{kind} ({said})'}, '--'


def _quiet_minor_ticks(ax) -> None:
  """Labels at 1, 2 and 5 per decade, none on the minor ticks (left alone, a log axis spanning about a decade labels
  them and they overlap)."""
  ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
  ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f'{x:,.0f}'))
  ax.xaxis.set_minor_formatter(ticker.NullFormatter())


def storage_figure(store: pd.DataFrame, verdicts, ctx: base.Context) -> base.Figure:
  fig, ax = base.figure(1, 1, size=(6.0, 4.4))
  fits = _by_kind(verdicts)
  p_star = next((v.extra['p_star'] for v in fits.values() if 'p_star' in v.extra), math.nan)
  for kind, g in store.groupby('kind', sort=False):
    v = fits.get(kind)
    marker, line = _look(kind, v)
    _errorbars(ax, g['P'], g, 'bits', fmt='o', **marker)
    if kind in study.MOE_KINDS:
      said = f'{kind} on active P (not a capacity)'
      _errorbars(ax, g['active P'], g, 'bits', fmt='x', color=COLORS[kind], label=said)
    if v is not None and math.isfinite(v.statistic) and math.isfinite(v.extra.get('slope', math.nan)):
      p = np.geomspace(g['P'].min(), g['P'].max(), 20)  # the fitted line: bits / P at P*, with its slope
      ax.plot(p, v.statistic * p_star * (p / p_star) ** v.extra['slope'], line, color=COLORS[kind], lw=1)
  if len(store):
    p = np.geomspace(store['active P'].min(), store['P'].max(), 20)
    ax.plot(p, 2 * p, 'k:', lw=0.8, label='2 bits / parameter (reference only)')
    ax.axvline(p_star, color='0.6', lw=0.6, ls=':', label=f'P* = {p_star:,.0f}')
  base.style_axes(
    ax, xlabel='parameters', ylabel='bits stored at the best N', title='storage', xscale='log', yscale='log'
  )
  return base.save_figure(
    fig,
    ctx.outdir,
    'capacity_atlas.png',
    'Bits stored at the best N of the grid (facts of up to 8 P bits; a lower bound on the most over N) vs trainable '
    'parameters per FFN kind at 1,000 exposures (the ladder T), mean over seeds with 95% CIs; filled markers and '
    "solid lines: measured ('frozen design: invalid': measured only under a change made after results, the report's "
    'design changes); hollow and dashed: not measured (the outcome in the legend; the atlas table says why). '
    "Lines: each kind's fit, its bits / P read at P* (grey dotted) on the per-seed log-log line over its widths; MoE "
    'also against its active parameters (x, not fitted: the experts a fact does not use hold the other facts, so '
    'this is not a capacity of the active parameters); dotted black: 2 bits per parameter, a reference only (other '
    'setups, not this one).',
  )


def error_figure(errors: pd.DataFrame, verdicts, ctx: base.Context) -> base.Figure:
  fig, axes = base.figure(1, 2, size=(5.0, 4.0))
  for ax, target in zip(axes[0], study.TARGETS, strict=True):
    e, fits = errors[errors['target'] == target], _by_kind(verdicts, target)
    for kind, g in e.groupby('kind', sort=False):
      v = fits.get(kind)
      marker, line = _look(kind, v)
      _errorbars(ax, g['P'], g, 'error', fmt='o', **marker)
      if v is not None and math.isfinite(v.statistic) and 'intercept' in v.extra:
        p = np.geomspace(g['P'].min(), g['P'].max(), 20)  # the fit: mean per-seed intercept and slope
        ax.plot(p, np.exp(v.extra['intercept']) * p**v.statistic, line, color=COLORS[kind], lw=1)
    relu = e[e['kind'] == 'relu']
    if target == 'sin' and len(relu):
      ax.plot(relu['P'], relu['width'].map(study.equal_piece), '-.', color='0.45', lw=0.8, label='ReLU: equal pieces')
      ax.plot(relu['P'], relu['width'].map(study.free_knot), ':', color='0.45', lw=0.8, label='ReLU: free-knot optimum')
    what = 'sup error, sin(pi x)' if target == 'sin' else 'held-out RMSE, 4-d tanh teacher'
    base.style_axes(
      ax, xlabel='parameters', ylabel=what, title=f'approximation: {target}', xscale='log', yscale='log', fontsize=7
    )
    _quiet_minor_ticks(ax)
  return base.save_figure(
    fig,
    ctx.outdir,
    'capacity_atlas_error.png',
    'Trained error vs parameters per FFN kind at its budget T (the atlas table gives each T), geometric mean over '
    'seeds with 95% CIs on the log; filled markers and solid lines: measured; hollow and dashed: not measured (the '
    "outcome in the legend; the atlas table says why); lines: each kind's fit (the exponent is its slope). "
    'Left, sin(pi x), sup error, with two references for ReLU width N: N + 1 equal '
    'pieces, pi^2 / (4 (N + 1)^2), grey dash-dot, and the known optimum of N + 1 free pieces, 1.436 / (N + 1)^2 '
    'asymptotically, grey dotted, 1.72x lower; the first an upper bound on the best N + 1 pieces, the second that best '
    'as N grows; a trained width-N FFN has at most N + 1 pieces. Right, the tanh teacher, held-out RMSE. Log-log.',
  )


def _moe_ratio_notes(verdicts) -> list[str]:
  """A line where a ratio reads an MoE top-1 number that is not measured (top-2 over top-1; top-1 over ReLU)."""
  top1 = _by_kind(verdicts).get(study.MOE_KINDS[0])
  if top1 is None or top1.outcome == stats.MEASURED:
    return []
  return [
    f'{study.MOE_KINDS[0]} storage is {top1.outcome}, not measured: the ratios in the verdicts that read it '
    f'({study.MOE_KINDS[1]} over {study.MOE_KINDS[0]}; {study.MOE_KINDS[0]} over ReLU) compare against a reading, '
    'not a measurement, and are not atlas results.'
  ]


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  store, errors = storage_table(result.full), error_table(result.full, result.half)
  table = atlas_table(result.verdicts, errors)
  shown = [
    f'{r.cell} {r.value:.3g} [{r["CI lo"]:.3g}, {r["CI hi"]:.3g}]'
    if r.outcome == stats.MEASURED
    else f'{r.cell} {r.outcome}'
    for _, r in table.iterrows()
    if 'per trainable' in r.measured
  ]  # a number only where it is measured: an edge reading (an MoE rate at its grid's edge) is not one
  headline = (
    "bits stored per trainable parameter at P* and 1,000 exposures, a lower bound on the most over N (the grid's "
    'best N, facts of up to 8 P bits): ' + '; '.join(shown)
  )
  return base.Presentation(
    headline=headline,
    tables=[
      base.Table('The atlas: every measurement with its 95% CI (outcome: measured, or why not)', table),
      base.Table(
        'Storage per kind and width, at the best N of the grid (a lower bound on the most over N where it is the '
        'largest), the point at its tuned rate at T',
        store,
      ),
      base.Table('Approximation error per target, kind and width, at its tuned rate at T', errors),
    ],
    figures=[storage_figure(store, result.verdicts, ctx), error_figure(errors, result.verdicts, ctx)],
    notes=[
      *_moe_ratio_notes(result.verdicts),
      'MoE, reported beside each judged number (not judged): bits per active parameter at P* (the per-seed number '
      "times P* / active there, interpolated over the widths: the router's share falls with width) with its CI; the "
      "teacher exponent on active P (judged on total P); in each MoE storage verdict's detail, its bits / P over "
      "ReLU's at the same total P inside the dense range only, and top-2's peak bits over top-1's at the same width "
      '(the same experts and router), each a marginal 95% CI over paired seeds.',
    ],
  )
