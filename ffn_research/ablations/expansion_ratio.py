"""expansion_ratio: at a fixed non-embedding parameter count, does a language model's loss change by
only a few percent over d_ff / d_model from about 1 to 10?

Claim (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", Fig. 5, middle panel;
docs/references.md): at fixed non-embedding parameters N, the loss of a transformer language model
depends only weakly on its shape; over the feed-forward ratio d_ff / d_model from about 1 to 10 it
changes by a few percent. Kaplan et al. plot each shape's loss as a percent excess over the fit L(N)
across model sizes, which absorbs the small differences in N between shapes.

Setup: the `language` task (tasks/language.py: an order-2 sparse Markov chain whose entropy floor is
computed exactly) and a pre-norm transformer with causal attention (`model.arch = 'transformer'`,
NUM_LAYERS layers, ReLU FFN with biases, learned positions, untied unembedding). Non-embedding
parameters = attention + FFN (with biases) + norms, i.e. everything but the token and position
embeddings and the unembedding (Kaplan et al.'s N; `non_embedding_params`, held against the model's
own counts in the tests). Per size N in SIZES and nominal ratio r in RATIOS, `shape_for` picks the
d_model (a multiple of NUM_HEADS, >= the scale's min_d_model) and d_ff = round((N - rest) / (2 d + 1))
whose actual d_ff / d_model is closest to r in log; the achieved N and its deviation from the target
are reported per shape. Loss = `excess_bits`: the model's held-out bits per token minus the true
chain's on the same tokens (the part of the loss above the exact entropy floor).

Learning rate tuned per point: every shape trains LR_GRID x seeds in one compiled program (the
learning rate is a traced scalar, sweep.VMAPPED_KEYS); each seed's best rate per shape is read
(`verdict.best_per_point`, lowest final excess bits). Seeds are paired across shapes (seed s draws the
same language for every shape).

Statistic (Kaplan's), per seed: fit log L = a - alpha log N by least squares over that seed's best
points (every shape of every size); each shape's % excess = 100 (L / L_fit(N) - 1). Per seed and size,
the spread = max - min of the % excess over the shapes with r in FLAT_RATIOS (Kaplan's "about 1 to
10"). r = 0.5 and 16 are measured and shown but not in the spread.

Verdict rule, per size (written before the full run): "the loss changes by only a few percent over
d_ff / d_model in FLAT_RATIOS" is reproduced if the 95% t CI of the mean spread over seeds lies below
FLAT_LEVEL percentage points, not reproduced if it lies above, else inconclusive (`verdict.threshold`).
The knee rule of the previous design is dropped: no paper claims 4x is a knee.

Regime checks (`verdict.gate`; any failure makes the verdict `invalid` with the numbers):
  - plateau: the headline statistic (the mean spread, computed the same way from each winner's
    previous evaluation, at PLATEAU_AT of the steps) moves by less than PLATEAU_TOL points between the
    last two evaluations;
  - dynamic range: every shape's mean excess bits is more than RANGE_MARGIN bits above 0 (the floor)
    and below the bigram excess (bigram entropy - floor: a model that ignores the order-2 context);
  - learning rate: no shape's per-seed best rate sits at the edge of the grid (`verdict.edge_check`);
  - coverage: every shape of the size has a completed run for every seed (a partial sweep decides nothing).
The L(N) exponent alpha (per seed, t CI over seeds) is reported with the headline, not gated on: the
statistic is defined whether or not the two sizes differ in loss.
"""

import math
import os
from typing import Any

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import pandas as pd  # pylint: disable=wrong-import-position

from ffn_research import io as io_lib  # pylint: disable=wrong-import-position
from ffn_research import sweep  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

RATIOS = (0.5, 1, 2, 4, 8, 16)       # nominal d_ff / d_model per size
FLAT_RATIOS = (1, 2, 4, 8)           # the spread is read over these: Kaplan's "about 1 to 10"
FLAT_LEVEL = 5.0                     # rule: "a few percent" = spread below 5 percentage points
PLATEAU_AT = 0.75                    # the previous evaluation, as a fraction of the steps (eval_every = steps / 4)
PLATEAU_TOL = 2.0                    # plateau: the mean spread moves by less than this many points between them
RANGE_MARGIN = 0.02                  # range: mean excess bits more than this from the floor and ceiling
NUM_HEADS = 2                        # attention heads (d_model a multiple of it)
NUM_LAYERS = 1                       # transformer layers, every shape
LR = 'train.learning_rate'
SEED = 'train.seed'

# Per scale: target non-embedding parameter counts, ratios, seeds, learning-rate grid, steps,
# batch (sequences per step), the smallest d_model, and the language's task keys.
LANGUAGE = dict(vocab_size=64, num_candidates=16, branching=4, concentration=0.5, seq_len=16, num_eval=2048)
LRS = (2e-3, 6e-3, 2e-2)            # learning-rate grid per shape (Adam, cosine schedule)
SETTINGS = {
    'smoke': dict(sizes=(600, 2400), ratios=(1, 4), seeds=3, lrs=LRS, steps=20, batch=16, min_d_model=8,
                  language=dict(vocab_size=8, num_candidates=4, branching=2, concentration=0.5, seq_len=8,
                                num_eval=64)),
    'quick': dict(sizes=(38_000, 76_000), ratios=(1, 2, 8), seeds=3, lrs=LRS, steps=200, batch=32,
                  min_d_model=32, language=LANGUAGE),
    'full': dict(sizes=(38_000, 76_000), ratios=RATIOS, seeds=5, lrs=LRS, steps=800, batch=32,
                 min_d_model=32, language=LANGUAGE),
}


# --------------------------------------------------------------------------- shapes

def non_embedding_params(d_model: int, d_ff: int, num_layers: int = NUM_LAYERS) -> int:
  """Attention 4 d^2, FFN 2 d d_ff + d_ff + d and two RMSNorms 2 d per layer, plus the final norm d."""
  d = d_model
  return num_layers * (4 * d * d + 2 * d * d_ff + d_ff + d + 2 * d) + d


def shape_for(ratio: float, target: int, min_d_model: int, num_layers: int = NUM_LAYERS,
              step: int = NUM_HEADS) -> tuple[int, int]:
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
  """Per (size, nominal ratio): d_model, d_ff, the achieved non-embedding count and its deviation."""
  s = SETTINGS[scale]
  out = []
  for n in s['sizes']:
    for r in s['ratios']:
      d, d_ff = shape_for(r, n, s['min_d_model'])
      achieved = non_embedding_params(d, d_ff)
      out.append(dict(size=n, ratio=r, d_model=d, d_ff=d_ff, num_layers=NUM_LAYERS, actual_ratio=d_ff / d,
                      non_embedding_params=achieved, deviation=(achieved - n) / n))
  return out


def language_config(scale: str):
  """The language task and the transformer (shape set per run) at `scale`."""
  s = SETTINGS[scale]
  c = default_config()
  m, t, tr = c.model, c.task, c.train
  m.arch, m.num_layers, m.num_heads = 'transformer', NUM_LAYERS, NUM_HEADS
  t.name, t.markov_order = 'language', 2
  for k, v in s['language'].items():
    t[k] = v
  tr.batch_size = s['batch']
  base.set_steps(tr, s['steps'], num_logs=20)            # steps: a multiple of 20
  tr.eval_every = s['steps'] // 4                        # evaluations at 1/4 ... 3/4 (PLATEAU_AT), 1 of the steps
  tr.warmup_steps = max(1, s['steps'] // 20)
  return c


def sweep_name(size: int) -> str:
  return f'n{size}'


def sweeps(scale: str) -> list[base.SweepSpec]:
  """One sweep per size: its shapes x learning rates x seeds (each shape one program)."""
  s = SETTINGS[scale]
  grid = sweep.product(sweep.values(LR, s['lrs']), sweep.values(SEED, range(s['seeds'])))
  out = []
  for n in s['sizes']:
    runs = [{'model.d_model': p['d_model'], 'model.d_ff': p['d_ff']} for p in shapes(scale) if p['size'] == n]
    out.append(base.SweepSpec(sweep_name(n), language_config(scale), sweep.product(runs, grid)))
  return out


# --------------------------------------------------------------------------- analysis (pure)

def excess_over_fit(frame: pd.DataFrame, *, n: str = 'non_embedding_params', y: str = 'excess_bits',
                    seed: str = SEED) -> pd.DataFrame:
  """Per seed: least-squares fit log y = a - alpha log n over the seed's rows; adds `fit` (L_fit(n)),
  `excess_pct` = 100 (y / fit - 1) and `alpha` (the seed's fitted exponent) to a copy of frame."""
  out = []
  for _, g in frame.groupby(seed, sort=True):
    lx, ly = np.log(g[n].to_numpy(float)), np.log(g[y].to_numpy(float))
    slope, intercept = np.polyfit(lx, ly, 1) if np.ptp(lx) > 0 else (0.0, float(ly.mean()))
    fit = np.exp(intercept + slope * lx)
    out.append(g.assign(fit=fit, excess_pct=100 * (g[y].to_numpy(float) / fit - 1), alpha=-slope))
  return pd.concat(out) if out else frame.assign(fit=[], excess_pct=[], alpha=[])


def spread(frame: pd.DataFrame, ratios=FLAT_RATIOS) -> float:
  """max - min of one seed's excess_pct over the rows whose nominal ratio is in `ratios`."""
  g = frame[frame['ratio'].isin(ratios)]['excess_pct']
  return float(g.max() - g.min()) if len(g) else math.nan


def _label(size: int, ratio: float) -> str:
  return f'N={size:,} r={ratio:g}'


def _worst(name: str, checks: list[verdict.Check]) -> verdict.Check:
  """One check from per-shape checks: passes if all pass; detail names the failing shapes (or all)."""
  failed = [c for c in checks if not c.passed]
  shown = failed or checks
  return verdict.Check(name, not failed, '; '.join(f'{c.name}: {c.detail}' for c in shown))


def _previous_eval(run_dir: str, key: str = 'eval/excess_bits') -> float:
  """The second-to-last logged value of `key` in a run's metrics.jsonl (NaN if absent)."""
  records, _ = io_lib.read_metrics(os.path.join(run_dir, 'metrics.jsonl'))
  vals = [float(r[key]) for r in records if key in r]
  return vals[-2] if len(vals) >= 2 else math.nan


def with_points(results: dict[str, pd.DataFrame], scale: str, outdir: str | None = None) -> pd.DataFrame:
  """Completed rows of every size, with size, ratio, non_embedding_params and (read from each run's
  metrics.jsonl under outdir when the column is absent) excess_bits_prev, the previous evaluation."""
  table = {(p['d_model'], p['d_ff']): p for p in shapes(scale)}
  frames = []
  for n in SETTINGS[scale]['sizes']:
    df = base.completed(results.get(sweep_name(n), pd.DataFrame(columns=['status']))).copy()
    if df.empty:
      continue
    pts = [table[(int(d), int(f))] for d, f in zip(df['model.d_model'], df['model.d_ff'])]
    df['size'] = [p['size'] for p in pts]
    df['ratio'] = [p['ratio'] for p in pts]
    df['non_embedding_params'] = [non_embedding_params(int(d), int(f))
                                  for d, f in zip(df['model.d_model'], df['model.d_ff'])]
    if 'excess_bits_prev' not in df and outdir is not None:
      df['excess_bits_prev'] = [_previous_eval(os.path.join(outdir, sweep_name(n), 'runs', name))
                                for name in df['name']]
    frames.append(df)
  return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  s = SETTINGS[ctx.scale]
  notes = []
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  if any(failed.values()):
    notes.append(f'runs not completed (excluded; a diverged rate never wins): {failed}')
  df = with_points(results, ctx.scale, ctx.outdir)
  winners = verdict.best_per_point(df, by=['size', 'ratio'], metric='excess_bits')
  winners = excess_over_fit(winners)
  alphas = winners.groupby(SEED)['alpha'].first()
  a_mean, a_lo, a_hi = verdict.mean_ci(alphas)
  previous = excess_over_fit(winners.drop(columns=['fit', 'excess_pct', 'alpha']), y='excess_bits_prev')
  verdicts, heads = [], []
  for n in s['sizes']:
    w, w_prev = winners[winners['size'] == n], previous[previous['size'] == n]
    ranges = []
    for r, g in w.groupby('ratio', sort=True):
      ceiling = float((g['bigram_bits'] - g['floor_bits']).mean())
      ranges.append(verdict.range_check(_label(n, r), g['excess_bits'], floor=0.0, ceiling=ceiling,
                                        margin=RANGE_MARGIN))
    spreads = [spread(g) for _, g in w.groupby(SEED, sort=True)]
    spreads_prev = [spread(g) for _, g in w_prev.groupby(SEED, sort=True)]
    counts = w.groupby('ratio')[SEED].nunique().reindex(s['ratios'], fill_value=0)
    coverage = verdict.Check(f'every shape measured at N={n:,}', bool((counts == s['seeds']).all()),
                             'seeds with a completed run per ratio: '
                             + ', '.join(f'{r:g}: {c}/{s["seeds"]}' for r, c in counts.items()))
    edge = verdict.edge_check(f'learning rate inside the grid at N={n:,}',
                              w.set_index(['size', 'ratio'])[f'best_{LR}'], s['lrs'])
    checks = [coverage, verdict.plateau_check(f'plateau at N={n:,} (mean spread, points, at {PLATEAU_AT:g} of the steps '
                                    'and at the end)', spreads, spreads_prev, PLATEAU_TOL, relative=False),
              _worst(f'dynamic range at N={n:,} (excess bits between 0 and the bigram excess)', ranges),
              edge]
    v = verdict.threshold(spreads, level=FLAT_LEVEL, direction='below',
                          claim=f'at N = {n:,} non-embedding parameters the loss (excess bits over the entropy '
                                f'floor) changes by less than {FLAT_LEVEL:g}% over d_ff/d_model in '
                                f'{list(FLAT_RATIOS)} (per-seed spread of the % excess over the L(N) fit)')
    verdicts.append(verdict.gate(v, checks))
    heads.append(f'N={n:,}: spread {v.statistic:.3g} points (95% CI [{v.ci[0]:.3g}, {v.ci[1]:.3g}])')
  table = shape_table(df, winners, ctx.scale)
  figure = plot(winners, table, ctx)
  total = _total_loss_note(df)
  if total:
    notes.append(total)
  notes.append(f'learning rate fitted per shape over {{{", ".join(f"{x:g}" for x in s["lrs"])}}} '
               f'(each seed its own best; counts per rate in the table)')
  return base.Analysis(verdicts=verdicts,
                       headline='; '.join(heads) + f'; L(N) exponent alpha {a_mean:.3g} [{a_lo:.3g}, {a_hi:.3g}]',
                       tables=[base.Table('Shapes, achieved non-embedding parameters and loss at each seed\'s '
                                          'best learning rate (mean and 95% CI over seeds)', table)],
                       figures=[figure], notes=notes)


def shape_table(df: pd.DataFrame, winners: pd.DataFrame, scale: str) -> pd.DataFrame:
  """One row per shape: its dimensions and achieved N, the winners' loss and % excess, the winning rates."""
  rows = []
  for p in shapes(scale):
    w = winners[(winners['size'] == p['size']) & (winners['ratio'] == p['ratio'])]
    row = {'N target': p['size'], 'r': p['ratio'], 'd_model': p['d_model'], 'd_ff': p['d_ff'],
           'd_ff/d_model': p['actual_ratio'], 'N achieved': p['non_embedding_params'],
           'deviation %': 100 * p['deviation'], 'seeds': len(w)}
    for col, name in (('excess_bits', 'excess bits'), ('excess_pct', '% over L(N)')):
      m, lo, hi = verdict.mean_ci(w[col]) if len(w) else (math.nan,) * 3
      row[f'{name}'], row[f'{name} CI'] = m, f'[{lo:.3g}, {hi:.3g}]'
    counts = w[f'best_{LR}'].value_counts().sort_index()
    row['best rate (seeds)'] = ', '.join(f'{k:g}: {v}' for k, v in counts.items())
    prev = w['excess_bits_prev'].mean() if len(w) else math.nan
    row['loss change since previous eval %'] = 100 * (w['excess_bits'].mean() - prev) / prev if len(w) else math.nan
    rows.append(row)
  return pd.DataFrame(rows)


def _total_loss_note(df: pd.DataFrame) -> str:
  """The same statistic on total bits per token (Kaplan's literal loss, floor included), for context."""
  if df.empty or 'eval_bits' not in df:
    return ''
  w = excess_over_fit(verdict.best_per_point(df, by=['size', 'ratio'], metric='eval_bits'), y='eval_bits')
  parts = []
  for n, g in w.groupby('size'):
    m, lo, hi = verdict.mean_ci([spread(h) for _, h in g.groupby(SEED)])
    parts.append(f'N={n:,}: {m:.3g} [{lo:.3g}, {hi:.3g}]')
  return ('the same spread on total bits per token (entropy floor included, as Kaplan et al.\'s loss; not a '
          'verdict, the floor dilutes every difference): ' + '; '.join(parts) + ' percentage points')


def plot(winners: pd.DataFrame, table: pd.DataFrame, ctx: base.Context) -> base.Figure:
  fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
  for i, (n, g) in enumerate(winners.groupby('size')):
    t = verdict.summarize(g, ['ratio'], ['excess_pct'])
    base.errorbar_ci(ax1, t['ratio'], t['excess_pct_mean'], t['excess_pct_ci_lo'], t['excess_pct_ci_hi'],
                     color=f'C{i}', label=f'N = {n:,} (mean, 95% CI over seeds)')
    ax1.scatter(g['ratio'], g['excess_pct'], s=8, color=f'C{i}', alpha=0.4)
    ax2.scatter(g['non_embedding_params'], g['excess_bits'], s=10, color=f'C{i}', alpha=0.5,
                label=f'N = {n:,}: each seed\'s best rate, every shape')
  ax1.axvspan(min(FLAT_RATIOS), max(FLAT_RATIOS), color='0.9', zorder=0,
              label=f'ratios of the spread {list(FLAT_RATIOS)}')
  ax1.axhline(0, color='k', lw=0.8)
  base.style_axes(ax1, xlabel='d_ff / d_model (nominal)', ylabel='% excess over the L(N) fit', xscale='log', xbase=2,
                  title=f'Kaplan et al. Fig. 5 statistic ({ctx.scale}); claim: spread < {FLAT_LEVEL:g} points')
  if len(winners):
    x = np.geomspace(winners['non_embedding_params'].min() * 0.8, winners['non_embedding_params'].max() * 1.25)
    b = winners.groupby(SEED).apply(lambda g: np.polyfit(np.log(g['non_embedding_params']),
                                                         np.log(g['excess_bits']), 1), include_groups=False)
    slope, intercept = np.mean(np.stack(b.to_numpy()), axis=0)
    ax2.plot(x, np.exp(intercept + slope * np.log(x)), 'k--', label=f'L(N) fit (mean over seeds), alpha {-slope:.3g}')
  base.style_axes(ax2, xlabel='non-embedding parameters N', ylabel='excess bits per token over the entropy floor',
                  title='loss vs N, every shape', xscale='log', yscale='log')
  return base.save_figure(fig, ctx.outdir, 'loss_vs_ratio.png',
                          'left: % excess of each shape\'s loss (excess bits, each seed\'s best learning rate) over '
                          'the per-seed L(N) fit, vs d_ff/d_model, per size; right: the losses vs N with the fit')


ABLATION = base.Ablation(
    name='expansion_ratio',
    claim=('At a fixed non-embedding parameter count a transformer language model\'s loss changes by only a few '
           'percent over d_ff/d_model from about 1 to 10 (Kaplan et al. 2020, Fig. 5).'),
    citation='Kaplan et al. 2020, Scaling Laws for Neural Language Models, Fig. 5 (docs/references.md)',
    published=('loss within a few percent of the L(N) fit for d_ff/d_model from about 1 to 10 at fixed '
               'non-embedding parameters'),
    sweeps=sweeps, analyze=analyze,
    setup=('The `language` task (order-2 sparse Markov chain, V 64, 16 candidates, 4 next tokens, Dirichlet 0.5; '
           'exact entropy floor) on a 1-layer pre-norm transformer with attention (2 heads, ReLU FFN with biases, '
           'learned positions). Two sizes of non-embedding parameters (attention + FFN + norms); per size six shapes '
           'd_ff/d_model ~ 0.5 ... 16 (d_model >= 32) at the size\'s budget. Adam, cosine schedule; three learning '
           'rates x seeds per shape in one compiled program, each seed\'s best rate read. Loss = excess bits per '
           'token over the exact floor; statistic = % excess over the per-seed L(N) fit (Kaplan et al.).'))
