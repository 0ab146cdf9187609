"""Tables, figures and headline of ablations/neurons.py."""

import math

import numpy as np
import pandas as pd

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import activation_sparsity as sparsity
from ffn_research.ablations import base
from ffn_research.ablations import neurons as study


def dead_table(full: pd.DataFrame) -> pd.DataFrame:
  """Per point at T: the dead fraction (end: mean and 95% CI over seeds; per layer at init / half / end) and bits."""
  rows = []
  for p, g in full.groupby('point', sort=False):
    m, lo, hi = stats.mean_ci(g['dead'], bounds=(0.0, 1.0))
    row = {
      'point': p,
      'lr': float(g[study.LR].iloc[0]),
      'steps': int(g[study.STEPS].iloc[0]),
      'seeds': len(g),
      'dead': m,
      'CI': f'[{lo:.3g}, {hi:.3g}]',
    }
    row.update(
      {
        f'L{layer} {name}': g[f'dead_l{layer}{suffix}'].mean()
        for suffix, name in sparsity.PHASES.items()
        for layer in (0, 1)
      }
    )
    row.update({'eval bits': g['eval_bits'].mean(), 'unigram - eval bits': (g['unigram_bits'] - g['eval_bits']).mean()})
    rows.append(row)
  return pd.DataFrame(rows)


def kv_table(full: pd.DataFrame) -> pd.DataFrame:
  """Per point at T and layer: key/value figures, means over seeds."""
  return pd.DataFrame(
    [
      {'point': p, 'layer': layer, **{k: g.get(f'{k}_l{layer}', g.get(k)).mean() for k in study.KV_COLS}}
      for p, g in full.groupby('point', sort=False)
      for layer in (0, 1)
    ]
  ).round(4)


def plot(result: base.Result, ctx: base.Context) -> base.Figure:
  fig, axes = base.figure(1, 3, size=(5.3, 4.4))
  grid = result.full[result.full['point'] != study.REF]
  for layer in (0, 1):
    for i, (steps, g) in enumerate(grid.groupby(study.STEPS, sort=True)):
      t = stats.summarize(g, [study.LR], [f'dead_l{layer}'])
      base.errorbar_ci(
        axes[0, layer],
        t[study.LR] * (1 + 0.04 * (i - 0.5)),
        *(t[f'dead_l{layer}_{k}'] for k in ('mean', 'ci_lo', 'ci_hi')),
        color=f'C{i}',
        fmt='o-',
        label=f'{int(steps)} steps',
      )
    base.style_axes(
      axes[0, layer],
      xlabel='learning rate (peak)',
      ylabel='dead fraction of the FFN units',
      title=f'layer {layer} ({ctx.scale})',
      xscale='log',
    )
    axes[0, layer].set_ylim(bottom=0.0)  # a fraction: its CI never below 0
  r = result.full[result.full['point'] == study.REF]
  series = [
    ('trained_ngram', 'keys: trained'),
    ('shuffled_ngram', 'keys: shuffled'),
    ('chance_ngram', 'keys: chance'),
    ('value', 'values: own'),
    ('value_permuted', 'values: permuted'),
  ]
  for j, (col, label) in enumerate(series):
    vals = [r.get(f'{col}_l{layer}', r.get(col)) for layer in (0, 1)]
    axes[0, 2].bar(
      np.arange(2) + (j - 2) * 0.16,
      [v.mean() for v in vals],
      0.16,
      yerr=[v.std() for v in vals],
      capsize=2,
      label=label,
      color=f'C{j}',
    )
  axes[0, 2].set_xticks(np.arange(2), ['layer 0', 'layer 1'])
  rate = r[study.LR].iloc[0] if len(r) else math.nan
  base.style_axes(
    axes[0, 2],
    xlabel='',
    ylabel=f"share of a live unit's top-{study.TOP_K} positions",
    title=f'{study.REF} (lr {rate:g}): keys and values',
  )
  return base.save_figure(
    fig,
    ctx.outdir,
    'neurons.png',
    'left, middle: fraction of the FFN units never non-zero on the held-out sequences at the '
    'end of training at T, per layer, vs the peak learning rate (AdamW, no decay); mean and 95% CI '
    'over seeds. Right, the reference (tuned rate): '
    f"share of a live unit's top-{study.TOP_K} positions sharing their modal bigram (trained keys, "
    'keys with shuffled input weights, random positions) and whose next token is the token the '
    "unit's value row promotes (own vs permuted value rows); mean ± sd over seeds",
  )


def _values(result: base.Result) -> str:
  r = result.full[result.full['point'] == study.REF]
  if 'value_l1' not in r or not len(r):
    return 'no reference runs'
  return f'own {r["value_l1"].mean():.3f} vs permuted {r["value_permuted_l1"].mean():.3f}'


def where_units_die(f: pd.DataFrame) -> list[str]:
  """The dead-unit grid at T in words: per rate and layer, and verdict 1's slope without the largest rate."""
  if not len(f) or 'dead_l0' not in f:
    return []
  per = f.groupby(study.LR)[['dead_l0', 'dead_l1']].mean()
  rows = ', '.join(f'{lr:g}: {a:.4f} / {b:.4f}' for lr, (a, b) in per.iterrows())
  out = [
    f'dead fraction at T per rate, layer 0 / layer 1 (mean over seeds): {rows}; layer-0 units dead in '
    f'{int((f["dead_l0"] > 0).sum())} of {len(f)} runs'
  ]
  if f[study.LR].nunique() > 2:
    top = f[study.LR].max()
    g = f[f[study.LR] < top]
    fits = rules_lib.per_seed_fits(
      np.log10(g[study.LR].to_numpy(float)), g['dead'].to_numpy(float), g[study.SEED].to_numpy()
    )
    m, lo, hi = stats.mean_ci(fits['slope'])
    out.append(
      f'verdict 1 without its largest rate {top:g}: {m:+.4f} [{lo:+.4f}, {hi:+.4f}] per decade: the deaths are a '
      'threshold at the top of the grid rather than a slope over it (descriptive)'
    )
  return out


def notes(result: base.Result) -> list[str]:
  """Where the dead units are, whether training made them, and which rates trained at all."""
  f = result.full[result.full['point'] != study.REF]
  bits = f.groupby(study.LR)['eval_bits'].mean()
  return where_units_die(f) + [
    f'dead fraction at T (mean over layers, rates and seeds): initialisation {f["dead_init"].mean():.4f}, half '
    f'{f["dead_half"].mean():.4f}, end {f["dead"].mean():.4f}; largest single run {f["dead"].max():.4f}',
    'held-out bits at T per learning rate (mean over seeds; unigram entropy '
    f'{f["unigram_bits"].mean():.3f}): ' + ', '.join(f'{lr:g}: {b:.3f}' for lr, b in bits.items()),
    'units also revive: the dead fraction fell from half to end in '
    f'{int((f["dead"] < f["dead_half"]).sum())} of {len(f)} runs at T (and rose in '
    f'{int((f["dead"] > f["dead_half"]).sum())})',
    'toy scope: 2 layers, d_ff 128, a 16-token order-2 Markov language: "early vs late" is layer 0 vs layer 1; '
    'Voita et al. measured OPT (125m-66b) on a large corpus, so no level is tested; dead means never non-zero '
    '(bias included) on the held-out probe set (256 sequences x 32 positions)',
    'the shuffled-key baseline is the comparison for the key verdicts: the FFN input carries the current token '
    'and, through attention, the previous one, so any key, also a random one, concentrates on bigrams above '
    'chance; the verdicts ask whether trained keys do so more',
  ]


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  v = result.verdicts
  o = [x.outcome for x in v]
  headline = (
    f'dead-fraction slope per decade of lr {v[0].statistic:+.3f} [{v[0].ci[0]:+.3f}, {v[0].ci[1]:+.3f}] ({o[0]}); '
    f'layer 0 - 1 {v[1].statistic:+.3f} ({o[1]}); n-gram keys minus shuffled L0 {v[2].statistic:+.3f} ({o[2]}), '
    f'L1 {v[3].statistic:+.3f} ({o[3]}); values minus permuted L1 {v[4].statistic:+.3f} ({o[4]}; {_values(result)})'
  )
  tables = [
    base.Table(
      'dead fraction per point at T (end: mean over layers, mean and 95% CI over seeds; per layer '
      'L0/L1 at initialisation, half and end) and held-out bits',
      dead_table(result.full),
    ),
    base.Table(
      f'keys and values at the end of T per point and layer (means over seeds; live units: the '
      f'{study.TOP_K}th activation > 0; concentration = share of the top-{study.TOP_K} positions with the modal '
      'bigram / token)',
      kv_table(result.full),
    ),
  ]
  return base.Presentation(headline=headline, tables=tables, figures=[plot(result, ctx)], notes=notes(result))
