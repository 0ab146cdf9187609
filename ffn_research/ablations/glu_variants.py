"""glu_variants: at equal parameters, do gated FFNs (GEGLU, SwiGLU, Bilinear, ...) beat ReLU?

Claim (Shazeer 2020, "GLU Variants Improve Transformer", Table 1; REFERENCES.md): with d_ff
scaled by 2/3 so parameters match, GEGLU and SwiGLU reach 1.942 / 1.944 held-out
log-perplexity against ReLU's 1.997 at 65,536 steps (T5-base on C4), the gated family beats the
plain one, and Bilinear (no nonlinearity in the gate) beats ReLU (1.960).

Two tasks, every variant with `model.match_params=True`, the same seeds (paired):
- `language`: next-token prediction on the synthetic Markov language (tasks/language.py), a
  1-layer tiny transformer; metric `excess_bits` (model bits/token minus the true chain's on
  the same held-out tokens: the part a better FFN can remove);
- `teacher_student`: regression of a random tanh teacher FFN (tanh is none of the candidates, so
  none is favoured by construction); metric ln(eval_relative_mse) (held-out 1 - R^2).

Verdict rules (fixed before any full run), per task, on the per-seed metric:
  1.-3. GEGLU, SwiGLU, Bilinear vs ReLU: paired t CI of mean(variant - relu); reproduced if the
        CI lies below 0, not reproduced if above 0, else inconclusive (`verdict.paired`, less).
  4.    gated family vs plain: per seed, mean over {glu, bilinear, reglu, geglu, swiglu} minus
        mean over {relu, gelu, silu}; the same paired rule.
  5.    ordering: Spearman rho between the paper's 65k-step values and our per-variant means;
        95% CI from a seed bootstrap (2,000 resamples of seeds, paired across variants);
        reproduced if the CI lies above 0, not reproduced if it lies at or below 0, else
        inconclusive (also with < 3 seeds or < 4 variants).
"""

import math

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import pandas as pd  # pylint: disable=wrong-import-position
from scipy import stats  # pylint: disable=wrong-import-position

from ffn_research import sweep  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

# Shazeer 2020 Table 1: held-out log-perplexity at 65,536 and 524,288 steps (our names).
PAPER_65K = {'relu': 1.997, 'gelu': 1.983, 'silu': 1.994, 'glu': 1.982, 'bilinear': 1.960,
             'geglu': 1.942, 'swiglu': 1.944, 'reglu': 1.953}
PAPER_524K = {'relu': 1.677, 'gelu': 1.679, 'silu': 1.683, 'glu': 1.663, 'bilinear': 1.648,
              'geglu': 1.633, 'swiglu': 1.636, 'reglu': 1.645}
PLAIN = ('relu', 'gelu', 'silu')
GATED = ('glu', 'bilinear', 'reglu', 'geglu', 'swiglu')
HEAD_TO_HEAD = ('geglu', 'swiglu', 'bilinear')   # the claims tested one by one against relu
BOOTSTRAP = 2000

SETTINGS = {
    'smoke': dict(activations=('relu', 'geglu'), seeds=3, lang_steps=20, ts_steps=60),
    'quick': dict(activations=tuple(PAPER_65K), seeds=3, lang_steps=300, ts_steps=1000),
    'full': dict(activations=tuple(PAPER_65K), seeds=5, lang_steps=800, ts_steps=3000),
}
# Per task: (results column, transform to the per-seed score, label of the score; lower is better).
METRICS = {
    'language': ('excess_bits', lambda x: x, 'excess bits/token over the true chain'),
    'teacher_student': ('eval_relative_mse', np.log, 'ln(held-out 1 - R^2)'),
}


def language_config(scale: str):
  """The language task and a 1-layer tiny transformer (smaller still at smoke scale)."""
  config = default_config()
  m, t, tr = config.model, config.task, config.train
  m.arch, m.d_model, m.d_ff, m.num_layers, m.num_heads, m.match_params = 'transformer', 32, 128, 1, 2, True
  t.name = 'language'
  t.vocab_size, t.markov_order, t.num_candidates, t.branching, t.concentration = 32, 2, 8, 4, 0.5
  t.seq_len, t.num_eval = 32, 512
  tr.batch_size, tr.learning_rate = 32, 3e-3
  base.set_steps(tr, SETTINGS[scale]['lang_steps'])
  if scale == 'smoke':
    m.d_model, m.d_ff = 16, 32
    t.vocab_size, t.num_candidates, t.branching, t.seq_len, t.num_eval = 8, 4, 2, 8, 64
    tr.batch_size, tr.warmup_steps = 16, 10
  return config


def teacher_student_config(scale: str):
  """A width-256 tanh teacher on 16-d Gaussian inputs; the student FFN has d_ff 64 (gated: 43)."""
  config = default_config()
  m, t, tr = config.model, config.task, config.train
  m.d_model, m.d_ff, m.match_params = 16, 64, True
  t.name, t.teacher_activation, t.teacher_d_ff, t.num_train, t.num_eval = 'teacher_student', 'tanh', 256, 4096, 4096
  tr.batch_size, tr.learning_rate = 256, 3e-3
  base.set_steps(tr, SETTINGS[scale]['ts_steps'])
  return config


def sweeps(scale: str) -> list[base.SweepSpec]:
  s = SETTINGS[scale]
  grid = sweep.product(sweep.values('model.activation', s['activations']),
                       sweep.values('train.seed', range(s['seeds'])))
  return [base.SweepSpec('language', language_config(scale), grid),
          base.SweepSpec('teacher_student', teacher_student_config(scale), grid)]


def score_table(df: pd.DataFrame, task: str) -> pd.DataFrame:
  """Seeds x variants of the per-seed score (lower is better); only seeds every variant finished."""
  column, transform, _ = METRICS[task]
  wide = df.assign(score=transform(df[column].astype(float))).pivot_table(
      index='train.seed', columns='model.activation', values='score')
  return wide.dropna()


def rank_verdict(wide: pd.DataFrame, task: str, seed: int = 0) -> verdict.Verdict:
  """Spearman rho of our means against the paper's 65k ordering, seed-bootstrap CI."""
  names = [a for a in PAPER_65K if a in wide.columns]
  claim = f'{task}: variants order as in Shazeer 2020 Table 1 (Spearman rho with the 65k-step column > 0)'
  test = (f'Spearman rank correlation (scipy.stats.spearmanr) of per-variant means with the paper; '
          f'95% CI from {BOOTSTRAP} seed-bootstrap resamples (paired across variants)')
  rule = ('reproduced if the 95% CI of rho lies above 0; not reproduced if it lies at or below 0; '
          'otherwise, or with < 3 seeds or < 4 variants, inconclusive')
  n_seeds = len(wide)
  if n_seeds < 3 or len(names) < 4:
    return verdict.Verdict(claim, verdict.INCONCLUSIVE, math.nan, (math.nan, math.nan), test, rule, n_seeds,
                           f'underpowered: {n_seeds} seeds, {len(names)} variants')
  paper = np.array([PAPER_65K[a] for a in names])
  values = wide[names].to_numpy()
  res = stats.spearmanr(paper, values.mean(axis=0))
  rng = np.random.default_rng(seed)
  boot = []
  for _ in range(BOOTSTRAP):
    sample = values[rng.integers(0, n_seeds, n_seeds)].mean(axis=0)
    rho = stats.spearmanr(paper, sample).statistic
    boot.append(0.0 if not np.isfinite(rho) else rho)
  lo, hi = (float(q) for q in np.quantile(boot, [0.025, 0.975]))
  outcome = (verdict.REPRODUCED if lo > 0 else verdict.NOT_REPRODUCED if hi <= 0 else verdict.INCONCLUSIVE)
  return verdict.Verdict(claim, outcome, float(res.statistic), (lo, hi), test, rule, n_seeds,
                         f'{len(names)} variants; spearmanr p = {res.pvalue:.3g} (null: orderings independent, '
                         "the paper's values taken as exact; the bootstrap CI covers only our seed noise)",
                         p_value=float(res.pvalue))


def task_verdicts(wide: pd.DataFrame, task: str) -> tuple[list[verdict.Verdict], pd.DataFrame]:
  """Rules 1.-5. for one task, and the table of every gated variant against relu."""
  out, rows = [], []
  label = METRICS[task][2]
  if 'relu' not in wide.columns:
    return out, pd.DataFrame()
  for name in [a for a in GATED if a in wide.columns]:
    v = verdict.paired(wide[name], wide['relu'], expect='less',
                       claim=f'{task}: {name} beats relu at equal parameters ({label}, lower is better)')
    rows.append({'variant': name, 'mean diff vs relu': v.statistic, 'CI lo': v.ci[0], 'CI hi': v.ci[1],
                 'p (ttest_rel)': v.p_value, 'n seeds': v.n, 'outcome': v.outcome})
    if name in HEAD_TO_HEAD:
      out.append(v)
  out.sort(key=lambda v: HEAD_TO_HEAD.index(v.claim.split(': ')[1].split(' ')[0]))
  gated = [a for a in GATED if a in wide.columns]
  plain = [a for a in PLAIN if a in wide.columns]
  if gated and plain:
    out.append(verdict.paired(wide[gated].mean(axis=1), wide[plain].mean(axis=1), expect='less',
                              claim=(f'{task}: the gated family ({", ".join(gated)}) beats the plain one '
                                     f'({", ".join(plain)}) (per-seed means of {label})')))
  out.append(rank_verdict(wide, task))
  return out, pd.DataFrame(rows)


def table1(df: pd.DataFrame, task: str) -> pd.DataFrame:
  """Table-1 style: every variant's metrics (mean and 95% CI over seeds) next to the paper's."""
  column = METRICS[task][0]
  extra = ['eval_bits', 'accuracy'] if task == 'language' else ['eval_loss']
  rows = []
  for name in [a for a in PAPER_65K if a in set(df['model.activation'])]:
    g = df[df['model.activation'] == name]
    row = {'FFN': name, 'paper 65k': PAPER_65K[name], 'paper 524k': PAPER_524K[name], 'seeds': len(g),
           'params': int(g['num_params'].iloc[0]) if 'num_params' in g else None}
    for col in [column] + extra:
      m, lo, hi = verdict.mean_ci(g[col].astype(float))
      row[f'{col} mean'], row[f'{col} ± (95% CI half-width)'] = m, (hi - lo) / 2 if math.isfinite(hi) else math.nan
    rows.append(row)
  return pd.DataFrame(rows)


def _plot(frames: dict[str, pd.DataFrame], outdir: str, scale: str) -> base.Figure:
  fig, axes = plt.subplots(1, len(frames), figsize=(6.0 * len(frames), 4.6), squeeze=False)
  for ax, (task, df) in zip(axes[0], frames.items()):
    column, transform, label = METRICS[task]
    for name in [a for a in PAPER_65K if a in set(df['model.activation'])]:
      y = transform(df[df['model.activation'] == name][column].astype(float))
      m, lo, hi = verdict.mean_ci(y)
      color = 'C1' if name in GATED else 'C0'
      ax.errorbar([PAPER_65K[name]], [m], yerr=[[max(m - lo, 0) if math.isfinite(lo) else 0],
                                               [max(hi - m, 0) if math.isfinite(hi) else 0]],
                  fmt='o', color=color, capsize=3)
      ax.annotate(name, (PAPER_65K[name], m), textcoords='offset points', xytext=(4, 4), fontsize=8)
    ax.set_xlabel('Shazeer 2020 Table 1: log-perplexity at 65k steps (reference; lower = better)')
    ax.set_ylabel(f'{label} (mean, 95% CI)')
    ax.set_title(f'{task} ({scale}); orange: gated, blue: plain')
    ax.grid(True, alpha=0.3)
  return base.save_figure(fig, outdir, 'glu_variants.png',
                          "each variant's score (mean, 95% CI over seeds) against the paper's 65k-step "
                          "log-perplexity on the x axis: the paper's ordering is the reference (points rising "
                          'to the right = same ordering)')


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  frames = {task: base.completed(results[task]) for task in METRICS}
  verdicts, tables, notes = [], [], []
  for task, df in frames.items():
    wide = score_table(df, task)
    v, pairs = task_verdicts(wide, task)
    verdicts += v
    tables.append(base.Table(f'{task}: Table-1 style, mean and 95% CI over seeds (paper: T5-base log-perplexity)',
                             table1(df, task)))
    tables.append(base.Table(f'{task}: each gated variant against relu, paired by seed '
                             f'({METRICS[task][2]}; negative = better than relu)', pairs))
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  if any(failed.values()):
    notes.append(f'runs not completed (excluded): {failed}')
  figure = _plot(frames, ctx.outdir, ctx.scale)
  lang = {v.claim.split(': ')[1].split(' ')[0]: v for v in verdicts if v.claim.startswith('language')}
  headline = '; '.join(f'{name} - relu on language: {v.statistic:+.3g} bits [{v.ci[0]:+.3g}, {v.ci[1]:+.3g}]'
                       for name, v in lang.items() if name in ('geglu', 'swiglu'))
  rank = [v for v in verdicts if v.claim.startswith('language') and 'Spearman' in v.claim]
  if rank:
    headline += f'; rank correlation with the paper {rank[0].statistic:.2f}'
  return base.Analysis(
      verdicts=verdicts, headline=headline or 'no language results', tables=tables,
      figures=[figure],
      notes=notes + ['Paired by seed: every variant of a seed sees the same data (language, teacher) and '
                     'initialisation seed. match_params=True gives the gated variants d_ff round(2/3 d_ff).'])


ABLATION = base.Ablation(
    name='glu_variants',
    claim=('At equal parameters, gated FFNs beat ReLU: GEGLU 1.942 and SwiGLU 1.944 vs ReLU 1.997 held-out '
           'log-perplexity at 65k steps, the gated family beats the plain one, Bilinear beats ReLU '
           '(Shazeer 2020, Table 1).'),
    citation='Shazeer 2020, "GLU Variants Improve Transformer", arXiv 2002.05202, Table 1 (T5-base on C4)',
    published='log-perplexity at 65,536 steps: ReLU 1.997, GELU 1.983, Swish 1.994, GLU 1.982, '
              'Bilinear 1.960, GEGLU 1.942, SwiGLU 1.944, ReGLU 1.953',
    sweeps=sweeps, analyze=analyze,
    setup=('language: order-2 sparse Markov language (V 32, 8 candidates per last token, 4 next tokens per '
           'context, Dirichlet 0.5; sequences of 32), 1-layer transformer d_model 32, 2 heads, d_ff 128 '
           '(gated 85), batch 32 sequences, Adam 3e-3, cosine; teacher_student: 16-d Gaussian inputs, '
           'tanh teacher of width 256, 4,096 training points, student FFN d_ff 64 (gated 43), batch 256, '
           'Adam 3e-3. Every variant with match_params=True, same seeds.'))
