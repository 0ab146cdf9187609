"""expansion_ratio: is d_ff = 4 d_model at a knee, and does loss barely depend on the ratio at fixed size?

Claims: the 4x rule (Vaswani et al. 2017; the seeds' convention, d_ff = 4 d_model), and Kaplan et
al. 2020 (Scaling Laws for Neural Language Models, Fig. 5): at a fixed non-embedding parameter
count, loss depends only weakly on d_ff / d_model (a few percent over roughly 1 to 10+).

Sweeps, for r = d_ff / d_model in RATIOS, on two tasks where the FFN does the work:
  * `memorization`: model A of memorization_capacity (ffn_stack, 2 blocks, trainable tied
    embeddings, excluded from the count as in Kaplan et al.), N facts at 100 exposures, more facts
    than the model can hold; loss = mean cross-entropy over the facts (nats). (Model B, frozen
    embeddings, stored nothing at d_model 8 in 200 steps: the first full run, docs/reproduce.md.)
  * `modular`: (a + b) mod 31 on the ffn_stack (trainable embeddings, excluded from the count as
    in Kaplan et al.), 80% of the pairs trained, AdamW with weight decay 1.0 (configs/modular.py);
    loss = cross-entropy on the held-out pairs.
  (a) fixed d_model, d_ff = r d_model (FFN parameters grow with r);
  (b) fixed non-embedding (FFN) parameter count: per r, the integer d_model whose
      d_ff = round(r d_model) gives the count closest to that of r = 4 at the (a) d_model.

Verdict rules (written before any full run):
  1. (a) knee, per task: per seed, the share of the sweep's loss improvement reached at ratio r,
     f(r) = (L(r_min) - L(r)) / (L(r_min) - min_r L(r)); the knee is where f first reaches
     KNEE_LEVEL (log-r interpolation). Claim "4x is at the knee": the knee's geometric mean over
     seeds has a 95% CI inside [4 / KNEE_FACTOR, 4 * KNEE_FACTOR] (verdict.crossing).
  2. (b) flatness, per task: per seed, the relative spread (max - min) / min of the loss over the
     ratios in FLAT_RATIOS; claim "flat within a few percent": the 95% CI of its mean lies below
     FLAT_LEVEL (verdict.threshold); above it: not reproduced.
"""

import math
from typing import Any

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import pandas as pd  # pylint: disable=wrong-import-position

from ffn_research import sweep  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import memorization_capacity as memcap  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

RATIOS = (0.5, 1, 2, 4, 8, 16)
KNEE_LEVEL, KNEE_CLAIM, KNEE_FACTOR = 0.9, 4.0, 2.0   # rule 1
FLAT_RATIOS = (1, 2, 4, 8, 16)                         # rule 2: Kaplan's "roughly 1 to 10+"
FLAT_LEVEL = 0.05                                      # rule 2: "a few percent"
NUM_LAYERS = 2

# Per scale and task: the (a) d_model, steps, seeds, ratios; memorization facts.
SETTINGS = {
    'smoke': dict(ratios=(1, 4), seeds=3, mem=dict(facts=256, relations=16, values=16, batch=128,
                                                   exposures=10, d_model=4),
                  mod=dict(modulus=7, steps=20, d_model=8)),
    'quick': dict(ratios=RATIOS, seeds=3, mem=dict(facts=512, relations=16, values=256, batch=512,
                                                   exposures=100, d_model=4),
                  mod=dict(modulus=31, steps=500, d_model=8)),
    'full': dict(ratios=RATIOS, seeds=3, mem=dict(facts=1024, relations=32, values=256, batch=512,
                                                  exposures=100, d_model=8),
                 mod=dict(modulus=31, steps=1000, d_model=16)),
}


def ffn_params(d_model: int, d_ff: int, num_layers: int = NUM_LAYERS) -> int:
  """Dense FFN parameters with biases over the blocks: L (2 d d_ff + d_ff + d)."""
  return num_layers * (2 * d_model * d_ff + d_ff + d_model)


def shape_for(ratio: float, target: int) -> tuple[int, int]:
  """(d_model, d_ff = round(ratio d_model)) with FFN parameters closest to target (ties: smaller d)."""
  best = None
  for d in range(1, 4 * int(math.sqrt(target)) + 2):
    d_ff = max(1, round(ratio * d))
    err = abs(ffn_params(d, d_ff) - target)
    if best is None or err < best[0]:
      best = (err, d, d_ff)
  return best[1], best[2]


def shapes(d_model: int, ratios) -> dict[str, list[tuple[float, int, int]]]:
  """{'fixed_d_model': [(r, d, d_ff)], 'fixed_params': [(r, d, d_ff)]}."""
  target = ffn_params(d_model, 4 * d_model)
  return {'fixed_d_model': [(r, d_model, max(1, round(r * d_model))) for r in ratios],
          'fixed_params': [(r, *shape_for(r, target)) for r in ratios]}


def _mem_base(m: dict[str, Any]):
  s = dict(m, exposures=(m['exposures'],), batches=(m['batch'],))
  return memcap._memorization_base(s, m['exposures'], frozen=False)  # pylint: disable=protected-access


def _mod_base(m: dict[str, Any]):
  c = default_config()
  c.model.arch, c.model.num_layers = 'ffn_stack', NUM_LAYERS
  c.task.name, c.task.modulus, c.task.train_fraction = 'modular_arithmetic', m['modulus'], 0.8
  tr = c.train
  tr.batch_size, tr.learning_rate = 256, 3e-3
  base.set_steps(tr, m['steps'])
  tr.optimizer, tr.weight_decay = 'adamw', 1.0   # configs/modular.py: decay drives generalisation
  return c


def sweeps(scale: str) -> list[base.SweepSpec]:
  s = SETTINGS[scale]
  seeds = sweep.values('train.seed', range(s['seeds']))
  out = []
  for task, base_fn in (('memorization', _mem_base), ('modular', _mod_base)):
    for kind, shape_list in shapes(s[task[:3]]['d_model'], s['ratios']).items():
      runs = [{'model.d_model': d, 'model.d_ff': d_ff} for _, d, d_ff in shape_list]
      out.append(base.SweepSpec(f'{task}_{kind}', base_fn(s[task[:3]]), sweep.product(runs, seeds)))
  return out


# --------------------------------------------------------------------------- analysis

def improvement_share(frame: pd.DataFrame) -> pd.Series:
  """f(r) per row of one seed's frame (columns ratio, eval_loss): share of the improvement reached."""
  first = frame.loc[frame['ratio'].idxmin(), 'eval_loss']
  best = frame['eval_loss'].min()
  return (first - frame['eval_loss']) / (first - best) if first > best else frame['eval_loss'] * 0 + 1.0


def relative_spread(frame: pd.DataFrame) -> float:
  """(max - min) / min of eval_loss over FLAT_RATIOS in one seed's frame."""
  g = frame[frame['ratio'].isin(FLAT_RATIOS)]['eval_loss']
  return float((g.max() - g.min()) / g.min()) if len(g) else math.nan


def _with_ratio(df: pd.DataFrame) -> pd.DataFrame:
  df = base.completed(df).copy()
  # The nominal ratio: the sweep's value nearest (in log) to d_ff / d_model.
  nominal = np.asarray(RATIOS, float)
  actual = (df['model.d_ff'] / df['model.d_model']).to_numpy(float)
  df['ratio'] = nominal[np.argmin(np.abs(np.log(actual[:, None] / nominal[None, :])), axis=1)] if len(df) else []
  return df


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  s = SETTINGS[ctx.scale]
  verdicts, tables, notes = [], [], []
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  if any(failed.values()):
    notes.append(f'runs not completed (excluded): {failed}')
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
  heads = []
  for ax, task, title in zip(axes, ('memorization', 'modular'),
                             ('memorization, fact loss', 'a + b mod p, held-out loss')):
    a, b = _with_ratio(results[f'{task}_fixed_d_model']), _with_ratio(results[f'{task}_fixed_params'])
    shares = pd.concat([improvement_share(g) for _, g in a.groupby('train.seed')]) if len(a) else pd.Series(dtype=float)
    a = a.assign(share=shares)
    v_knee = verdict.crossing(a, x='ratio', y='share', seed='train.seed', level=KNEE_LEVEL, claimed=KNEE_CLAIM,
                              factor=KNEE_FACTOR,
                              claim=f'{task}, fixed d_model {s[task[:3]]["d_model"]}: d_ff = 4 d_model is at the knee '
                                    f'(where {KNEE_LEVEL:.0%} of the improvement over the sweep is reached)')
    spreads = [relative_spread(g) for _, g in b.groupby('train.seed')]
    v_flat = verdict.threshold(spreads, level=FLAT_LEVEL, direction='below',
                               claim=f'{task}, fixed FFN parameters: the loss varies by less than {FLAT_LEVEL:.0%} '
                                     f'over d_ff/d_model in {list(FLAT_RATIOS)} (relative spread, per seed)')
    verdicts += [v_knee, v_flat]
    heads.append(f'{task}: knee at {v_knee.statistic:.3g}x, spread {v_flat.statistic:.1%} at fixed params')
    for frame, label, color in ((a, '(a) fixed d_model', 'C0'), (b, '(b) fixed FFN params', 'C1')):
      t = verdict.summarize(frame, ['ratio', 'model.d_model', 'model.d_ff', 'num_ffn_params'], ['eval_loss'])
      tables.append(base.Table(f'{task}, {label}: loss (mean over seeds, 95% CI)', t))
      if len(t):
        yerr = np.array([t['eval_loss_mean'] - t['eval_loss_ci_lo'], t['eval_loss_ci_hi'] - t['eval_loss_mean']])
        ax.errorbar(t['ratio'], t['eval_loss_mean'], yerr=np.nan_to_num(np.clip(yerr, 0, None)), fmt='o-',
                    color=color, capsize=3, label=f'{label} (mean, 95% CI)')
        ax.scatter(frame['ratio'], frame['eval_loss'], s=8, color=color, alpha=0.4)
    if len(b):
      lo = b[b['ratio'].isin(FLAT_RATIOS)]['eval_loss'].min()
      ax.axhspan(lo, lo * (1 + FLAT_LEVEL), color='C1', alpha=0.15,
                 label=f'Kaplan et al.: flat within {FLAT_LEVEL:.0%} (band above the best)')
    ax.axvline(KNEE_CLAIM, color='k', ls='--', label='4x rule')
    if math.isfinite(v_knee.statistic):
      ax.axvline(v_knee.statistic, color='C0', ls=':', label=f'measured knee {v_knee.statistic:.3g}x')
    ax.set_xscale('log', base=2)
    ax.set_xlabel('d_ff / d_model')
    ax.set_ylabel('loss (nats)')
    ax.set_title(f'{title} ({ctx.scale})')
    ax.legend(fontsize=7)
    ax.grid(True, which='both', alpha=0.3)
  figure = base.save_figure(fig, ctx.outdir, 'loss_vs_ratio.png',
                            'loss vs d_ff/d_model at fixed d_model (a) and fixed FFN '
                            f'parameters (b), with the 4x line and the {FLAT_LEVEL:.0%} flatness band')
  return base.Analysis(verdicts=verdicts, headline='; '.join(heads), tables=tables, notes=notes,
                       figures=[figure])


ABLATION = base.Ablation(
    name='expansion_ratio',
    claim=('d_ff = 4 d_model is a convention (Vaswani et al. 2017); at a fixed non-embedding parameter count '
           'the loss depends only weakly on d_ff/d_model, changing by a few percent over roughly 1 to 10+ '
           '(Kaplan et al. 2020, Fig. 5).'),
    citation='Kaplan et al. 2020, Scaling Laws for Neural Language Models, Fig. 5; Vaswani et al. 2017',
    published='loss within a few percent for d_ff/d_model from about 1 to 10+ at fixed non-embedding parameters',
    sweeps=sweeps, analyze=analyze,
    setup=('Two tasks on `ffn_stack` (2 residual FFN blocks, ReLU): fact memorization with trainable tied '
           'embeddings at 100 exposures (Adam 3e-2, as memorization_capacity model A) and (a + b) mod 31 with '
           '80% of the pairs trained (AdamW 3e-3, weight decay 1.0, trainable embeddings excluded from the '
           'count). (a) fixed d_model, d_ff = r d_model; (b) FFN parameters fixed at those of r = 4.'))
