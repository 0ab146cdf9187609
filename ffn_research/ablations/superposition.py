"""superposition: does a ReLU model with m hidden dimensions represent more than m sparse features?

Elhage et al. 2022 (docs/references.md#elhage-et-al-2022): the toy model x -> ReLU(W^T W x + b),
n = 20 features, m = 5 hidden dimensions, each feature 0 with probability S else U[0, 1], loss
sum_i I_i (y_i - x_i)^2 with I_i = 0.7^i. Dense inputs (S = 0): the m most important features get
orthogonal directions, the rest none. Sparse inputs: more than m features get a direction
(superposition), and the count changes sharply with sparsity. Feature i is *represented* when
||W_i|| > 0.5 (W_i the column of W for feature i); dimensions per feature = m / ||W||_F^2.

Sweeps (density 1 - S x seeds, one vmapped program each): `tied` (the toy, I_i = 0.7^i), `tied_uniform`
(the toy, I_i = 1; descriptive), `ffn` (the repo's FFN, models.build_ffn: ReLU(x W1 + b1) W2 + b2 with
biases, d_ff = m, same task). For the FFN, feature i has an input row W1[i, :] and an output column
W2[:, i] (both m-dimensional); it counts as represented when sqrt(||W1[i, :]|| ||W2[:, i]||) > 0.5.
That is ||W_i|| when W1 = W^T and W2 = W (the tied toy), and it is unchanged by the rescaling
W1 -> c W1, W2 -> W2 / c that leaves a ReLU FFN's function unchanged. As a cross-check the report
also counts features whose isolated gain (output i at x = e_i minus output i at x = 0) exceeds 0.5.

Verdict rules (fixed before any full run; see `analyze_stats`):
  1. toy (I = 0.7^i): per seed, the mean over densities <= 0.03 of the number of represented
     features; claim: above m (threshold, t CI over seeds).
  2. FFN hidden layer: the same rule with the FFN's criterion.
Each is gated on: plateau (the training loss, mean over the logged chunk, at the last two logs within
PLATEAU_TOL relative, every density, mean over seeds) and the dense premise (at density 1 the CI of
the represented count lies inside [m - 1, m]: no superposition without sparsity).
"""

import math
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import pandas as pd  # pylint: disable=wrong-import-position

from ffn_research import io as io_lib  # pylint: disable=wrong-import-position
from ffn_research import loop  # pylint: disable=wrong-import-position
from ffn_research import sweep  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

N_FEATURES, M_HIDDEN = 20, 5          # the paper's first figure
IMPORTANCE_DECAY = 0.7                # I_i = 0.7^i (the paper's)
NORM_LEVEL = 0.5                      # represented: ||W_i|| > 0.5 (the paper's)
SPARSE_MAX_DENSITY = 0.03             # the verdicts read densities 1 - S <= this
PLATEAU_TOL = 0.1                     # relative change of the loss between the last two logs
DENSITY = 'density'                   # 1 - task.feature_sparsity
SEED = 'train.seed'
DENSITIES = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003)
# Per scale: densities 1 - S, seeds, optimizer steps, batch size.
SETTINGS = {
    'smoke': dict(densities=(1.0, 0.1, 0.01), seeds=3, steps=200, batch=256),
    'quick': dict(densities=DENSITIES, seeds=5, steps=3000, batch=1024),
    'full': dict(densities=DENSITIES, seeds=6, steps=5000, batch=1024),
}
# Sweep name -> (model.arch, importance decay r, label).
ARMS = {
    'tied': ('tied_relu', IMPORTANCE_DECAY, f'toy ReLU(W^T W x + b), I = {IMPORTANCE_DECAY}^i'),
    'tied_uniform': ('tied_relu', 1.0, 'toy ReLU(W^T W x + b), uniform I'),
    'ffn': ('ffn', IMPORTANCE_DECAY, f'FFN ReLU(x W1 + b1) W2 + b2, d_ff = m, I = {IMPORTANCE_DECAY}^i'),
}


# --------------------------------------------------------------------------- measurements (pure)

def tied_stats(w_MxN: np.ndarray, level: float = NORM_LEVEL) -> dict[str, float]:
  """Represented features (||W_i|| > level) and dimensions per feature m / ||W||_F^2 of the toy's W."""
  norms_N = np.linalg.norm(w_MxN, axis=0)
  return {'represented': int(np.sum(norms_N > level)),
          'dims_per_feature': w_MxN.shape[0] / float(np.sum(np.square(w_MxN)))}


def ffn_strength(w1_NxM: np.ndarray, w2_MxN: np.ndarray) -> np.ndarray:
  """Per feature sqrt(||W1[i, :]|| ||W2[:, i]||): the toy's ||W_i|| when W1 = W^T, W2 = W."""
  return np.sqrt(np.linalg.norm(w1_NxM, axis=1) * np.linalg.norm(w2_MxN, axis=0))


def ffn_gain(w1_NxM: np.ndarray, b1_M: np.ndarray, w2_MxN: np.ndarray) -> np.ndarray:
  """Per feature i: output i at x = e_i minus output i at x = 0 (b2 cancels)."""
  h_NxM = np.maximum(w1_NxM + b1_M, 0.0) - np.maximum(b1_M, 0.0)
  return np.einsum('im,mi->i', h_NxM, w2_MxN)


def ffn_stats(w1_NxM: np.ndarray, b1_M: np.ndarray, w2_MxN: np.ndarray,
              level: float = NORM_LEVEL) -> dict[str, float]:
  """The FFN counterpart of tied_stats, plus the gain-based count (cross-check)."""
  strength_N = ffn_strength(w1_NxM, w2_MxN)
  return {'represented': int(np.sum(strength_N > level)),
          'dims_per_feature': w1_NxM.shape[1] / float(np.sum(np.square(strength_N))),
          'represented_gain': int(np.sum(ffn_gain(w1_NxM, b1_M, w2_MxN) > level))}


# --------------------------------------------------------------------------- sweeps

def _base(arch: str, decay: float, steps: int, batch: int):
  config = default_config()
  config.task.name = 'sparse_features'
  config.task.importance_decay = decay
  m = config.model
  m.arch, m.d_model, m.d_ff, m.activation, m.use_bias = arch, N_FEATURES, M_HIDDEN, 'relu', True
  config.train.batch_size = batch
  config.train.learning_rate = 1e-3   # Adam 1e-3, as the paper's code; cosine decay (the repo's default)
  base.set_steps(config.train, steps, num_logs=10)
  return config


def sweeps(scale: str) -> list[base.SweepSpec]:
  s = SETTINGS[scale]
  grid = sweep.product(sweep.values('task.feature_sparsity', [round(1.0 - d, 6) for d in s['densities']]),
                       sweep.values(SEED, range(s['seeds'])))
  return [base.SweepSpec(name, _base(arch, decay, s['steps'], s['batch']), grid)
          for name, (arch, decay, _) in ARMS.items()]


# --------------------------------------------------------------------------- analysis

def run_stats(run_dir: str) -> dict[str, float]:
  """A finished run's measurements from its trained weights and its metrics.jsonl."""
  run = loop.load_run(run_dir)
  p = run.model
  if run.config.model.arch == 'tied_relu':
    out = tied_stats(np.asarray(p.w[...]))
  else:
    out = ffn_stats(np.asarray(p.w1[...]), np.asarray(p.b1[...]), np.asarray(p.w2[...]))
  losses = [r['loss'] for r in io_lib.read_metrics(os.path.join(run_dir, 'metrics.jsonl'))[0] if 'loss' in r]
  out['loss_last'] = float(losses[-1]) if losses else math.nan
  out['loss_previous'] = float(losses[-2]) if len(losses) > 1 else math.nan
  return out


def collect(results: dict[str, pd.DataFrame], outdir: str) -> pd.DataFrame:
  """One row per finished run: arm, density, seed and run_stats."""
  rows = []
  for arm in ARMS:
    if arm not in results:
      continue
    for _, r in base.completed(results[arm]).iterrows():
      rows.append({'arm': arm, DENSITY: round(1.0 - float(r['task.feature_sparsity']), 6), SEED: int(r[SEED]),
                   **run_stats(os.path.join(outdir, arm, 'runs', r['name']))})
  return pd.DataFrame(rows)


def _ci(values) -> tuple[float, float, float]:
  """Mean and t CI; a zero-spread sample's CI is the point itself."""
  x = np.asarray(values, float)
  if len(x) and np.all(x == x[0]):
    return float(x[0]), float(x[0]), float(x[0])
  return verdict.mean_ci(x)


def arm_verdict(stats: pd.DataFrame, arm: str, claim: str) -> verdict.Verdict:
  """The rule of the module docstring for one arm, gated on plateau and the dense premise."""
  g = stats[stats['arm'] == arm]
  sparse = g[g[DENSITY] <= SPARSE_MAX_DENSITY + 1e-12]
  per_seed = sparse.groupby(SEED)['represented'].mean()
  v = verdict.threshold(per_seed.values, level=M_HIDDEN, direction='above', claim=claim)
  checks = []
  for d, gd in g.groupby(DENSITY):
    checks.append(verdict.plateau_check(f'{arm}: plateau at 1 - S = {d:g} (training loss at the last two logs)',
                                        gd['loss_last'].to_numpy(), gd['loss_previous'].to_numpy(), PLATEAU_TOL))
  dense = g[g[DENSITY] >= 1.0]['represented']
  m, lo, hi = _ci(dense) if len(dense) else (math.nan,) * 3
  checks.append(verdict.premise_check(f'{arm}: dense premise (no superposition without sparsity)', m, (lo, hi),
                                      M_HIDDEN - 1, M_HIDDEN, what=f'represented features at 1 - S = 1 (m = {M_HIDDEN})'))
  return verdict.gate(v, checks)


def density_table(stats: pd.DataFrame) -> pd.DataFrame:
  rows = []
  for (arm, d), g in stats.groupby(['arm', DENSITY], sort=False):
    m, lo, hi = _ci(g['represented'])
    row = {'arm': arm, '1 - S': d, 'seeds': len(g), 'represented mean': m, 'CI lo': lo, 'CI hi': hi,
           'min': int(g['represented'].min()), 'max': int(g['represented'].max()),
           'dims/feature': float(g['dims_per_feature'].mean()), 'loss (last log)': float(g['loss_last'].mean())}
    if 'represented_gain' in g and g['represented_gain'].notna().any():
      row['represented (gain > 0.5)'] = float(g['represented_gain'].mean())
    rows.append(row)
  return pd.DataFrame(rows).sort_values(['arm', '1 - S'], ascending=[True, False]).reset_index(drop=True)


def sharpest_step(table: pd.DataFrame, arm: str) -> str:
  """Where the mean represented count jumps most between neighbouring densities."""
  t = table[table['arm'] == arm].sort_values('1 - S', ascending=False)
  if len(t) < 2:
    return f'{arm}: fewer than 2 densities'
  jumps = np.diff(t['represented mean'].to_numpy())
  i = int(np.argmax(np.abs(jumps)))
  d = t['1 - S'].to_numpy()
  return (f'{arm}: the largest change of the mean represented count between neighbouring densities is '
          f'{jumps[i]:+.2f} features, from 1 - S = {d[i]:g} to {d[i + 1]:g} (all steps: '
          + ', '.join(f'{x:+.2f}' for x in jumps) + ')')


def dense_vs_sparse(stats: pd.DataFrame, arm: str) -> str:
  """Descriptive (not a verdict; added after the first full run): per seed the dense count and the
  paired difference (mean over densities <= SPARSE_MAX_DENSITY) - (density 1)."""
  g = stats[stats['arm'] == arm]
  dense = g[g[DENSITY] >= 1.0].set_index(SEED)['represented']
  sparse = g[g[DENSITY] <= SPARSE_MAX_DENSITY + 1e-12].groupby(SEED)['represented'].mean()
  diff = (sparse - dense).dropna()
  if diff.empty:
    return f'{arm}: no seed has both a dense and a sparse run'
  m, lo, hi = _ci(diff)
  return (f'{arm}, descriptive (not a verdict): represented at 1 - S = 1 per seed: '
          + ', '.join(f'seed {int(s)}: {int(c)}' for s, c in dense.items())
          + f'; per seed, sparse (1 - S <= {SPARSE_MAX_DENSITY:g}) minus dense: {m:+.2f} (95% CI [{lo:.2f}, {hi:.2f}], '
          f'n = {len(diff)})')


def analyze_stats(stats: pd.DataFrame, ctx: base.Context, failed: dict[str, int] | None = None) -> base.Analysis:
  """The verdicts, tables and figures from collect's frame (pure in the frame; tests feed a synthetic one)."""
  verdicts = [
      arm_verdict(stats, 'tied', f'the toy ReLU(W^T W x + b) (n = {N_FEATURES}, m = {M_HIDDEN}, I = '
                  f'{IMPORTANCE_DECAY}^i) represents more than m features (||W_i|| > {NORM_LEVEL}) at '
                  f'1 - S <= {SPARSE_MAX_DENSITY:g} (per seed, mean over those densities)'),
      arm_verdict(stats, 'ffn', f'an FFN hidden layer (ReLU, d_ff = m = {M_HIDDEN}, biases) trained on the same '
                  f'task represents more than m features (sqrt(||W1[i,:]|| ||W2[:,i]||) > {NORM_LEVEL}) at '
                  f'1 - S <= {SPARSE_MAX_DENSITY:g}'),
  ]
  table = density_table(stats)
  notes = [sharpest_step(table, arm) for arm in ARMS if arm in set(stats['arm'])]
  notes += [dense_vs_sparse(stats, arm) for arm in ARMS if arm in set(stats['arm'])]
  notes.append('dims/feature = m / ||W||_F^2 (toy); for the FFN m / sum_i ||W1[i,:]|| ||W2[:,i]||')
  if failed and any(failed.values()):
    notes.append(f'runs not completed (excluded): {failed}')

  fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
  for i, (arm, (_, _, label)) in enumerate(ARMS.items()):
    t = table[table['arm'] == arm]
    if t.empty:
      continue
    base.errorbar_ci(axes[0], t['1 - S'], t['represented mean'], t['CI lo'], t['CI hi'], color=f'C{i}', label=label)
    g = stats[stats['arm'] == arm]
    axes[0].scatter(g[DENSITY] * (1 + 0.04 * (i - 1)), g['represented'], s=8, color=f'C{i}', alpha=0.3)
    axes[1].plot(t['1 - S'], t['dims/feature'], 'o-', color=f'C{i}', label=label)
  axes[0].axhline(M_HIDDEN, color='k', ls='--', label=f'm = {M_HIDDEN} (no superposition)')
  axes[0].axvline(SPARSE_MAX_DENSITY, color='gray', ls=':', label=f'verdicts read 1 - S <= {SPARSE_MAX_DENSITY:g}')
  axes[1].axhline(1.0, color='k', ls='--', label='1 (one dimension per feature)')
  for ax, ylabel, title in ((axes[0], f'features represented (norm > {NORM_LEVEL})',
                             f'n = {N_FEATURES} features, m = {M_HIDDEN} dims ({ctx.scale})'),
                            (axes[1], 'dimensions per feature', 'dimensions per feature (mean over seeds)')):
    base.style_axes(ax, xlabel='feature density 1 - S (sparser to the right)', ylabel=ylabel, title=title,
                    xscale='log', title_size=10)
    ax.invert_xaxis()
  figures = [base.save_figure(fig, ctx.outdir, 'features_vs_sparsity.png',
                              'left: features represented vs density 1 - S (mean over seeds, 95% CI; dots: seeds) '
                              'with m; right: dimensions per feature')]

  head = table[(table['arm'] == 'tied')]
  v = verdicts[0]
  headline = (f'toy: {v.statistic:.2f} features represented at 1 - S <= {SPARSE_MAX_DENSITY:g} '
              f'(95% CI [{v.ci[0]:.2f}, {v.ci[1]:.2f}]) vs m = {M_HIDDEN}; FFN: {verdicts[1].statistic:.2f} '
              f'[{verdicts[1].ci[0]:.2f}, {verdicts[1].ci[1]:.2f}]')
  if not head.empty:
    headline += f'; toy at 1 - S = 1: {head.iloc[0]["represented mean"]:.2f}'
  return base.Analysis(verdicts=verdicts, headline=headline,
                       tables=[base.Table('Features represented and dimensions per feature, per arm and density '
                                          '(mean over seeds, 95% CI)', table)],
                       figures=figures, notes=notes)


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  return analyze_stats(collect(results, ctx.outdir), ctx, failed)


ABLATION = base.Ablation(
    name='superposition',
    claim=(f'A ReLU(W^T W x + b) model with n = {N_FEATURES} sparse features and m = {M_HIDDEN} hidden dimensions '
           'represents more than m features once features are sparse enough, with a sharp change as sparsity '
           'grows (Elhage et al. 2022); asked also of an FFN hidden layer of width m.'),
    citation='Elhage et al. 2022, Toy Models of Superposition (docs/references.md#elhage-et-al-2022)',
    published=(f'dense: {M_HIDDEN} of {N_FEATURES} features represented; sparse (1 - S <= ~0.03 in the paper\'s '
               'figure): more than m, approaching n'),
    sweeps=sweeps, analyze=analyze,
    setup=(f'Task `sparse_features` (n = {N_FEATURES}; each feature 0 with probability S else U[0, 1], fresh '
           f'batches; loss sum_i I_i (y_i - x_i)^2). Models: `tied_relu` (W: {M_HIDDEN} x {N_FEATURES}, bias b) and '
           f'the FFN (d_ff = {M_HIDDEN}, ReLU, biases b1 and b2). Adam 1e-3, warmup 100, cosine decay, batch 1,024 '
           '(256 at smoke), xavier_uniform init; the paper used 10k steps at batch 1,024.'))
