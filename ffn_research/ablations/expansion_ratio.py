"""expansion_ratio: at a fixed non-embedding parameter count, does a language model's loss change by
only a few percent over d_ff / d_model from about 1 to 10?

Claim (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", Fig. 5, middle panel;
docs/references.md): at fixed non-embedding parameters N, the loss of a transformer language model
depends only weakly on its shape; over the feed-forward ratio d_ff / d_model from about 1 to 10 it
changes by a few percent relative to the best shape.

Setup: the `language` task (tasks/language.py: an order-2 sparse Markov chain whose entropy floor is
computed exactly; seed s draws the same language, and the same held-out tokens, for every shape) and
a pre-norm transformer with causal attention (`model.arch = 'transformer'`, NUM_LAYERS layer, ReLU
FFN with biases, learned positions, untied unembedding). Non-embedding parameters = attention + FFN
(with biases) + norms (Kaplan et al.'s N; `non_embedding_params`, held against the model's own
counts in the tests). One arm per size N; its points are the nominal ratios r: `shape_for` picks the
d_model (a multiple of NUM_HEADS, >= the scale's min_d_model) and d_ff = round((N - rest) / (2 d + 1))
whose d_ff / d_model is closest to r in log. Adam with a cosine schedule (warm-up 5% of the steps);
the runner tunes the learning rate per shape on the mean total loss over seeds (Regime.metric).

Measurement, per run (results.csv): the total loss `eval_bits`, held-out bits per token (Kaplan's
loss, the entropy floor included), and `excess_bits`, the part above the exact floor.

Statistic (Kaplan's), per size: over the shapes with r in FLAT_RATIOS, the best and the worst shape
by mean total loss over seeds; spread = 100 (mean L_worst / mean L_best - 1), the % change of the
total loss relative to the best shape: a ratio of means with a BCa bootstrap CI, seeds resampled
together (stats.ratio_of_means). r = 0.5 and 16 are measured and shown, not in the spread.

Rule (fixed before the run), per size: reproduced if the 95% CI of the spread lies below FLAT_LEVEL
percentage points, not reproduced if it lies above, else inconclusive. Its p-value (Holm) is the
paired t-test of L_worst - (1 + FLAT_LEVEL / 100) L_best against 0 (Fieller's test of a ratio of
means against the level), so a decisive outcome needs both the bootstrap CI and the t-test.
Gates (stats.gate; the runner adds every seed at its chosen rate): not pinned: each flat shape's
mean excess bits lies more than RANGE_MARGIN bits above the floor (0) and below the bigram excess (a
model that ignores the order-2 context; there, more steps may fix it); parameter matching: each
achieved N within MAX_DEVIATION of the target. The runner adds its own: each shape's rate inside its
grid, the spread stable from T/2 to T.
"""

import dataclasses
import math
from typing import Any, TypedDict

import numpy as np
import pandas as pd
from scipy import stats as sps

from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.config import default_config

RATIOS = (0.5, 1, 2, 4, 8, 16)  # nominal d_ff / d_model per size (full)
FLAT_RATIOS = (1, 2, 4, 8)  # the spread is read over these: Kaplan's "about 1 to 10"
FLAT_LEVEL = 5.0  # rule: "a few percent" = spread below 5 percentage points
RANGE_MARGIN = 0.02  # not pinned: mean excess bits more than this from the floor and ceiling
MAX_DEVIATION = 0.02  # achieved N within 2% of the target (L ~ N^-0.076: < 0.2% of the loss)
NUM_HEADS = 2  # attention heads (d_model a multiple of it)
NUM_LAYERS = 1  # transformer layers, every shape
LOSS, EXCESS = 'eval_bits', 'excess_bits'
SEED = 'train.seed'

# Per scale: target non-embedding parameter counts, ratios, batch (sequences per step), the smallest
# d_model, and the language's task keys. Rates, T, seeds and the cap: REGIMES.
LANGUAGE = dict(vocab_size=64, num_candidates=16, branching=4, concentration=0.5, seq_len=16, num_eval=2048)


class Settings(TypedDict):
  sizes: tuple[int, ...]  # target non-embedding parameter counts
  ratios: tuple[float, ...]  # nominal d_ff / d_model
  batch: int
  min_d_model: int
  language: dict[str, float]  # task keys


SETTINGS: dict[str, Settings] = {
  'smoke': dict(
    sizes=(600, 2400),
    ratios=(1, 4),
    batch=16,
    min_d_model=8,
    language=dict(vocab_size=8, num_candidates=4, branching=2, concentration=0.5, seq_len=8, num_eval=64),
  ),
  'quick': dict(sizes=(38_000, 76_000), ratios=(1, 2, 8), batch=32, min_d_model=32, language=LANGUAGE),
  'full': dict(sizes=(38_000, 76_000), ratios=RATIOS, batch=32, min_d_model=32, language=LANGUAGE),
}
REGIMES = {
  'smoke': base.Regime(rates=(2e-3, 6e-3, 2e-2), steps=20, seeds=3, cap=60, metric=LOSS),
  'quick': base.Regime(rates=(2e-3, 6e-3, 2e-2), steps=200, seeds=3, cap=600, metric=LOSS),
  # Up to 4 doublings (T = 12,800): the cap, not a doubling count, ends the loop (decided 2026-11-26, after the
  # 2026-11-26 run stopped at 2 doublings with the spread still falling, 7.0% at T/2 -> 3.9% at T = 3,200).
  'full': base.Regime(
    rates=(6e-4, 2e-3, 6e-3, 2e-2, 6e-2), steps=800, seeds=5, cap=7200, metric=LOSS, max_doublings=4
  ),
}


# --------------------------------------------------------------------------- shapes


def non_embedding_params(d_model: int, d_ff: int, num_layers: int = NUM_LAYERS) -> int:
  """Attention 4 d^2, FFN 2 d d_ff + d_ff + d and two RMSNorms 2 d per layer, plus the final norm d."""
  d = d_model
  return num_layers * (4 * d * d + 2 * d * d_ff + d_ff + d + 2 * d) + d


def shape_for(
  ratio: float, target: int, min_d_model: int, num_layers: int = NUM_LAYERS, step: int = NUM_HEADS
) -> tuple[int, int]:
  """(d_model, d_ff): d_model a multiple of `step`, >= min_d_model; d_ff the integer that brings the
  non-embedding count closest to target; the pair whose d_ff / d_model is closest to ratio in log."""
  best = None
  d = -(-min_d_model // step) * step
  while True:
    rest = non_embedding_params(d, 0, num_layers)
    d_ff = round((target - rest) / (num_layers * (2 * d + 1)))
    if d_ff < 1:
      break
    err = abs(math.log(d_ff / d / ratio))
    if best is None or err < best[0]:
      best = (err, d, d_ff)
    d += step
  if best is None:
    raise ValueError(f'no shape with d_model >= {min_d_model} fits {target} non-embedding parameters')
  return best[1], best[2]


def shapes(scale: str) -> list[dict[str, Any]]:
  """Per (size, nominal ratio): its point label, d_model, d_ff, the achieved non-embedding count and deviation."""
  s = SETTINGS[scale]
  out = []
  for n in s['sizes']:
    for r in s['ratios']:
      d, d_ff = shape_for(r, n, s['min_d_model'])
      achieved = non_embedding_params(d, d_ff)
      out.append(
        dict(
          size=n,
          ratio=r,
          point=point_label(n, r),
          d_model=d,
          d_ff=d_ff,
          actual_ratio=d_ff / d,
          non_embedding_params=achieved,
          deviation=(achieved - n) / n,
        )
      )
  return out


def arm_name(size: int) -> str:
  return f'n{size}'


def point_label(size: int, ratio: float) -> str:
  return f'{arm_name(size)}: r={ratio:g}'


def language_config(scale: str):
  """The language task and the transformer (shape set per point) at `scale`."""
  s = SETTINGS[scale]
  c = default_config()
  m, t = c.model, c.task
  m.arch, m.num_layers, m.num_heads = 'transformer', NUM_LAYERS, NUM_HEADS
  t.name, t.markov_order = 'language', 2
  for k, v in s['language'].items():
    t[k] = v
  c.train.batch_size = s['batch']
  return c


def budget(steps: int) -> dict[str, Any]:
  """A budget's own schedule: cosine over `steps`, warm-up 5% of them, held-out evaluation at the end."""
  return {**base.budget(steps), 'train.warmup_steps': max(1, steps // 20)}


def arms(scale: str) -> list[base.Arm]:
  """One arm per size; its points are the shapes (one compiled program each)."""
  config = language_config(scale)
  return [
    base.Arm(
      arm_name(n),
      config,
      {
        f'r={p["ratio"]:g}': {'model.d_model': p['d_model'], 'model.d_ff': p['d_ff']}
        for p in shapes(scale)
        if p['size'] == n
      },
      budget=budget,
    )
    for n in SETTINGS[scale]['sizes']
  ]


# --------------------------------------------------------------------------- the rule (pure)


def spread_verdict(loss: pd.DataFrame, *, level: float, claim: str, min_seeds: int = 3) -> stats.Verdict:
  """The spread of one size: `loss` has one row per seed and one column per shape (total loss)."""
  test = (
    'ratio of the mean total losses of the worst and the best shape (by mean over seeds), BCa bootstrap '
    '95% CI with seeds resampled together (stats.ratio_of_means); p: paired t-test of L_worst - '
    f'{1 + level / 100:g} L_best against 0 (Fieller)'
  )
  rule = (
    f'reproduced if the 95% CI of the spread 100 (L_worst / L_best - 1) lies below {level:g} points; not '
    f'reproduced if it lies above; otherwise, or with < {min_seeds} seeds or < 2 shapes, inconclusive'
  )
  loss = loss.dropna()
  n = len(loss)
  if n < min_seeds or loss.shape[1] < 2:
    return stats.Verdict(
      claim,
      stats.INCONCLUSIVE,
      math.nan,
      (math.nan, math.nan),
      test,
      rule,
      n,
      f'underpowered: {n} seeds with every shape, {loss.shape[1]} shapes',
      boundaries=(level,),
    )
  means = loss.mean()
  worst, best = means.idxmax(), means.idxmin()
  r, lo, hi = stats.ratio_of_means(loss[worst], loss[best])
  ci = (100 * (lo - 1), 100 * (hi - 1))
  d = (loss[worst] - (1 + level / 100) * loss[best]).to_numpy(float)
  se = float(sps.sem(d)) if np.ptp(d) > 0 else 0.0
  p = stats.decision_p(float(d.mean()), se, n - 1, -math.inf, 0.0)
  detail = (
    f'worst {worst}, best {best}; mean total loss per shape: '
    + ', '.join(f'{k} {v:.4g}' for k, v in means.items())
    + f' bits; Fieller t-test p = {p:.3g}'
  )
  return stats.Verdict(
    claim, stats.decide(ci, -math.inf, level), 100 * (r - 1), ci, test, rule, n, detail, p_value=p, boundaries=(level,)
  )


def rules(sel: pd.DataFrame, scale: str) -> list[stats.Verdict]:
  """One verdict per size, on its flat shapes at their chosen rates (see the module docstring)."""
  out = []
  for n in SETTINGS[scale]['sizes']:
    flat = [p for p in shapes(scale) if p['size'] == n and p['ratio'] in FLAT_RATIOS]
    labels = tuple(p['point'] for p in flat)
    g = sel[sel['point'].isin(labels)]
    loss = g.pivot_table(index=SEED, columns='point', values=LOSS).reindex(columns=list(labels))
    v = spread_verdict(
      loss.dropna(axis=1, how='all'),
      level=FLAT_LEVEL,
      claim=f'at N = {n:,} non-embedding parameters the total loss changes by less than '
      f'{FLAT_LEVEL:g}% (worst vs best shape) over d_ff/d_model in {list(FLAT_RATIOS)}',
    )
    ranges, near_ceiling = [], False
    for label in labels:
      h = g[g['point'] == label]
      ceiling = float((h['bigram_bits'] - h['floor_bits']).mean()) if len(h) else math.nan
      ranges.append(
        stats.range_check(label, h[EXCESS] if len(h) else [], floor=0.0, ceiling=ceiling, margin=RANGE_MARGIN)
      )
      near_ceiling |= bool(len(h) and h[EXCESS].mean() >= ceiling - RANGE_MARGIN)
    pinned = stats.all_of(f'not pinned at N={n:,} (excess bits between the floor 0 and the bigram excess)', ranges)
    if not pinned.passed and near_ceiling:  # not yet past a bigram model: more steps may fix it
      pinned = dataclasses.replace(pinned, remedy=stats.DOUBLE_STEPS, points=labels)
    worst = max(flat, key=lambda p: abs(p['deviation']))
    matched = stats.Check(
      f'parameters matched at N={n:,}',
      abs(worst['deviation']) <= MAX_DEVIATION,
      f'largest deviation of the achieved N from {n:,}: {100 * worst["deviation"]:+.2f}% '
      f'({worst["point"]}, N = {worst["non_embedding_params"]:,}); '
      f'allowed {100 * MAX_DEVIATION:g}%',
    )
    out.append(dataclasses.replace(stats.gate(v, [pinned, matched]), points=labels))
  return out


# --------------------------------------------------------------------------- report


def relative_loss(full: pd.DataFrame, scale: str) -> pd.DataFrame:
  """Per shape: total and excess bits (mean, t CI) and the % change of the total loss relative to the best
  shape of its size (ratio of means, bootstrap CI), from the runs at each shape's chosen rate."""
  rows = []
  for n in SETTINGS[scale]['sizes']:
    pts = [p for p in shapes(scale) if p['size'] == n]
    loss = full[full['point'].isin([p['point'] for p in pts])].pivot_table(index=SEED, columns='point', values=LOSS)
    best = loss.mean().idxmin() if loss.size else None
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
      row['total bits'] = float(g[LOSS].mean()) if len(g) else math.nan
      if p['point'] == best:
        r = lo = hi = 1.0
      elif best is not None and p['point'] in loss:
        r, lo, hi = stats.ratio_of_means(*loss[[p['point'], best]].dropna().to_numpy().T)
      else:
        r = lo = hi = math.nan
      row['% vs best'], row['% vs best lo'], row['% vs best hi'] = 100 * (r - 1), 100 * (lo - 1), 100 * (hi - 1)
      row['excess bits'], row['excess lo'], row['excess hi'] = stats.mean_ci(g[EXCESS]) if len(g) else (math.nan,) * 3
      rows.append(row)
  return pd.DataFrame(rows)


def figure(table: pd.DataFrame, ctx: base.Context) -> base.Figure:
  fig, axes = base.figure(1, 2, size=(6.0, 4.6))
  ax1, ax2 = axes[0]
  for i, (n, t) in enumerate(table.groupby('N target')):
    base.errorbar_ci(
      ax1,
      t['d_ff/d_model'],
      t['% vs best'],
      t['% vs best lo'],
      t['% vs best hi'],
      color=f'C{i}',
      label=f'N = {n:,} (mean ratio, 95% bootstrap CI)',
    )
    base.errorbar_ci(
      ax2,
      t['d_ff/d_model'],
      t['excess bits'],
      t['excess lo'],
      t['excess hi'],
      color=f'C{i}',
      label=f'N = {n:,} (mean, 95% CI over seeds)',
    )
  ax1.axvspan(
    min(FLAT_RATIOS), max(FLAT_RATIOS), color='0.9', zorder=0, label=f'ratios of the spread {list(FLAT_RATIOS)}'
  )
  ax1.axhline(FLAT_LEVEL, color='k', ls='--', lw=0.8, label=f'{FLAT_LEVEL:g}% (the rule)')
  base.style_axes(
    ax1,
    xlabel='d_ff / d_model',
    ylabel='% change of the total loss vs the best shape',
    xscale='log',
    xbase=2,
    title=f'Kaplan et al. Fig. 5 statistic ({ctx.scale})',
  )
  base.style_axes(
    ax2,
    xlabel='d_ff / d_model',
    ylabel='excess bits per token over the entropy floor',
    xscale='log',
    xbase=2,
    yscale='log' if (table['excess bits'] > 0).any() else None,
    title='the same runs: loss above the exact floor',
  )
  return base.save_figure(
    fig,
    ctx.outdir,
    'loss_vs_ratio.png',
    "left: % change of each shape's total loss (bits per token, at its tuned rate) relative to "
    'the best shape of its size, vs d_ff/d_model, with the 5% rule; right: excess bits over the '
    'exact entropy floor, the part of the loss shapes can change',
  )


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  table = relative_loss(result.full, ctx.scale)
  shown = [r for r in SETTINGS[ctx.scale]['ratios'] if r not in FLAT_RATIOS]
  heads = [
    f'N={n:,}: spread {v.statistic:.3g}% (95% CI [{v.ci[0]:.3g}, {v.ci[1]:.3g}])'
    for n, v in zip(SETTINGS[ctx.scale]['sizes'], result.verdicts, strict=True)
  ]
  return base.Presentation(
    headline='; '.join(heads) + f' of the total loss over d_ff/d_model {list(FLAT_RATIOS)}',
    tables=[base.Table("Shapes, achieved non-embedding parameters, and loss at each shape's T and tuned rate", table)],
    figures=[figure(table, ctx)],
    notes=[f'ratios {shown} are shown, not in the spread; their rates are tuned but not checked'] if shown else [],
  )


ABLATION = base.Study(
  name='expansion_ratio',
  claim=(
    "At a fixed non-embedding parameter count a transformer language model's loss changes by only a few "
    'percent over d_ff/d_model from about 1 to 10 (Kaplan et al. 2020, Fig. 5).'
  ),
  citation='Kaplan et al. 2020, Scaling Laws for Neural Language Models, Fig. 5 (docs/references.md)',
  published='loss within a few percent of the best shape for d_ff/d_model from about 1 to 10 at fixed '
  'non-embedding parameters',
  setup=(
    'The `language` task (order-2 sparse Markov chain, V 64, 16 candidates, 4 next tokens, Dirichlet 0.5; '
    'exact entropy floor) on a 1-layer pre-norm transformer with attention (2 heads, ReLU FFN with biases, '
    'learned positions). Two sizes of non-embedding parameters (attention + FFN + norms); per size shapes '
    'd_ff/d_model ~ 0.5 ... 16 (d_model >= 32). Adam, cosine schedule; the learning rate tuned per shape on '
    'the mean total loss over seeds. Statistic: % change of the total loss (bits per token) of the worst '
    'shape in 1 ... 8 relative to the best (Kaplan et al.).'
  ),
  regimes=REGIMES,
  arms=arms,
  rules=rules,
  present=present,
)
