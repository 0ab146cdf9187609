"""glu_variants: at equal parameters, do gated FFNs (GEGLU, SwiGLU, Bilinear, ...) beat ReLU?

Claim (Shazeer 2020, "GLU Variants Improve Transformer", arXiv 2002.05202, Table 1;
docs/references.md#shazeer-2020): bias-free FFNs in T5-base, gated d_ff scaled by 2/3 so that
parameters match; held-out log-perplexity on C4 at 65,536 steps (mean of 4 runs) GEGLU 1.942,
SwiGLU 1.944 against ReLU 1.997, Bilinear 1.960; at 524,288 steps (one run) 1.633, 1.636, 1.648
against 1.677.

Two tasks, every variant parameter-matched (`model.match_params=True`: gated d_ff =
round(2/3 d_ff)), the language model's FFNs bias-free (`model.use_bias=False`, as in the paper),
every variant on the same seeds (paired: a seed fixes the language or teacher, the data order and
the initialisation), and every variant trained at each learning rate of a small grid in the same
vmapped program; each seed's best rate is read per variant and budget (`verdict.best_per_point`):

- `language`: next-token prediction on the synthetic Markov language (tasks/language.py) with a
  2-layer transformer (attention), constant learning rate after warmup, so the evaluation at an
  early step is exactly what a run of that many steps gives. Two budgets, read from the same runs'
  metrics log: `early` (the first evaluation; the paper's 65k column) and `plateau` (the last; the
  524k column). Score `excess_bits`: model bits/token minus the true chain's on the same held-out
  tokens (the part a better FFN can remove; 0 is the entropy floor).
- `teacher_student`: regression of a random tanh teacher FFN (tanh is none of the candidates, so
  none is favoured by construction) by a bare FFN with biases (see teacher_student_config), one
  budget (`plateau`); score ln(held-out 1 - R^2).

Verdict rules (fixed before any full run), per task and budget, on each seed's score at its best
learning rate:
  1.-3. GEGLU, SwiGLU, Bilinear vs ReLU: paired t CI of mean(variant - relu); reproduced if the CI
        lies below 0, not reproduced if above 0, else inconclusive (`verdict.paired`, less).
  4.    gated family vs plain: per seed, mean over {glu, bilinear, reglu, geglu, swiglu} minus mean
        over {relu, gelu, silu}; the same paired rule.
  5.    ordering: Spearman rho between the paper's column for the budget and our per-variant means,
        decided by a permutation test (`verdict.rank_agreement`).
The runner applies Holm over all of them (one family per ablation). Each verdict is gated
(`verdict.gate`) on the regime checks of the variants it compares: the best learning rate inside
the grid for every seed (`edge_check`), the score off its floor and ceiling (`range_check`:
language excess above 0 and below the unigram model's, teacher-student 1 - R^2 above 0 and below
1), and, for the plateau budget, the score at the last evaluation within PLATEAU_TOL of the one at
half the steps (`plateau_check`); a failed check makes the verdict `invalid`.
"""

import dataclasses
import math
import os

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

# Shazeer 2020 Table 1 (docs/references.md): held-out log-perplexity (nats) at 65,536 steps (mean
# of 4 runs; their standard deviation in PAPER_65K_SD) and at 524,288 steps (one run). Our names.
PAPER_65K = {'relu': 1.997, 'gelu': 1.983, 'silu': 1.994, 'glu': 1.982, 'bilinear': 1.960,
             'geglu': 1.942, 'swiglu': 1.944, 'reglu': 1.953}
PAPER_65K_SD = {'relu': 0.005, 'gelu': 0.005, 'silu': 0.003, 'glu': 0.006, 'bilinear': 0.005,
                'geglu': 0.004, 'swiglu': 0.010, 'reglu': 0.003}
PAPER_524K = {'relu': 1.677, 'gelu': 1.679, 'silu': 1.683, 'glu': 1.663, 'bilinear': 1.648,
              'geglu': 1.633, 'swiglu': 1.636, 'reglu': 1.645}
PAPER = {'early': PAPER_65K, 'plateau': PAPER_524K}   # the paper's column each budget is read against
PAPER_STEPS = {'early': '65,536', 'plateau': '524,288'}
PLAIN = ('relu', 'gelu', 'silu')
GATED = ('glu', 'bilinear', 'reglu', 'geglu', 'swiglu')
HEAD_TO_HEAD = ('geglu', 'swiglu', 'bilinear')   # the claims tested one by one against relu
REFERENCE = 'relu'
KEYS = HEAD_TO_HEAD + ('gated_family', 'rank')   # verdict keys per (task, budget), in report order
BUDGETS = {'language': ('early', 'plateau'), 'teacher_student': ('plateau',)}
LR = 'train.learning_rate'
SEED = 'train.seed'
ACT = 'model.activation'

PLATEAU_TOL = 0.10         # plateau: |score(last) / score(half the steps) - 1| of the variant's seed mean
FLOOR_MARGIN = {'language': 0.02,          # excess bits/token the mean must keep from 0 and from the unigram model
                'teacher_student': 0.01}   # 1 - R^2 the mean must keep from 0 and from 1 (predicting the mean)
PARAM_TOL = 0.02           # parameter counts within 2% of ReLU's (match_params; teacher-student's biases differ by 1.8%)

SETTINGS = {
    # activations; seeds; learning-rate grid per task (every variant trains the whole grid in one
    # program); language steps and its early evaluation step (= the evaluation interval, so the
    # evaluations fall at early, 2 early, ..., steps); teacher-student steps (evaluated at half and at the end).
    'smoke': dict(activations=('relu', 'geglu'), seeds=3, lang_lrs=(1e-3, 3e-3, 1e-2), ts_lrs=(1e-3, 3e-3, 1e-2),
                  lang_steps=16, lang_early=4, ts_steps=40),
    'quick': dict(activations=tuple(PAPER_65K), seeds=3, lang_lrs=(2e-3, 1e-2, 5e-2), ts_lrs=(1e-3, 5e-3, 2.5e-2),
                  lang_steps=400, lang_early=100, ts_steps=600),
    'full': dict(activations=tuple(PAPER_65K), seeds=10, lang_lrs=(2e-3, 1e-2, 5e-2), ts_lrs=(1e-3, 5e-3, 2.5e-2),
                 lang_steps=1000, lang_early=250, ts_steps=1500),
}
# Per task: (metric logged as eval/<name>, transform to the per-seed score, label; lower is better).
METRICS = {
    'language': ('excess_bits', lambda x: x, 'excess bits/token over the true chain'),
    'teacher_student': ('relative_mse', np.log, 'ln(held-out 1 - R^2)'),
}


SHORT = {'language': 'excess bits/token', 'teacher_student': 'ln(1 - R^2)'}  # plot axis labels


def language_config(scale: str):
  """The language task and a 2-layer, bias-free tiny transformer (smaller still at smoke scale)."""
  s = SETTINGS[scale]
  config = default_config()
  m, t, tr = config.model, config.task, config.train
  m.arch, m.d_model, m.d_ff, m.num_layers, m.num_heads = 'transformer', 32, 128, 2, 2
  m.use_bias, m.match_params = False, True
  t.name = 'language'
  t.vocab_size, t.markov_order, t.num_candidates, t.branching, t.concentration = 16, 2, 8, 4, 0.5
  t.seq_len, t.num_eval = 32, 512
  tr.batch_size, tr.schedule, tr.warmup_steps = 16, 'constant', 100
  tr.steps, tr.log_every, tr.eval_every, tr.checkpoint_every = s['lang_steps'], s['lang_early'], s['lang_early'], 0
  if scale == 'smoke':
    m.d_model, m.d_ff, m.num_layers = 16, 32, 1
    t.vocab_size, t.num_candidates, t.branching, t.seq_len, t.num_eval = 8, 4, 2, 8, 64
    tr.warmup_steps = 4
  return config


def teacher_student_config(scale: str):
  """A width-256 tanh teacher on 16-d Gaussian inputs; the student FFN has d_ff 64 (gated: 43) and keeps
  its biases: without them Bilinear is a pure quadratic form and ReGLU (GEGLU, SwiGLU nearly) is
  homogeneous of degree 2, unable to represent the teacher's near-linear part, which in a
  transformer the residual stream carries."""
  s = SETTINGS[scale]
  config = default_config()
  m, t, tr = config.model, config.task, config.train
  m.d_model, m.d_ff, m.use_bias, m.match_params = 16, 64, True, True
  t.name, t.teacher_activation, t.teacher_d_ff, t.num_train, t.num_eval = 'teacher_student', 'tanh', 256, 4096, 4096
  tr.batch_size, tr.schedule = 256, 'constant'
  tr.steps, tr.log_every, tr.eval_every, tr.checkpoint_every = s['ts_steps'], s['ts_steps'] // 2, s['ts_steps'] // 2, 0
  return config


def sweeps(scale: str) -> list[base.SweepSpec]:
  s = SETTINGS[scale]
  grid = lambda lrs: sweep.product(sweep.values(ACT, s['activations']), sweep.values(LR, lrs),
                                   sweep.values(SEED, range(s['seeds'])))
  return [base.SweepSpec('language', language_config(scale), grid(s['lang_lrs'])),
          base.SweepSpec('teacher_student', teacher_student_config(scale), grid(s['ts_lrs']))]


# --------------------------------------------------------------------------- reading the runs

def evaluations(df: pd.DataFrame, sweep_dir: str) -> pd.DataFrame:
  """One row per completed run and logged evaluation: the run's swept values, `step` and every
  `eval/<name>` of its metrics.jsonl as column <name>."""
  rows = []
  for _, run in base.completed(df).iterrows():
    records, _ = io_lib.read_metrics(os.path.join(sweep_dir, 'runs', run['name'], 'metrics.jsonl'))
    for r in records:
      evals = {k.removeprefix('eval/'): v for k, v in r.items() if k.startswith('eval/')}
      if evals:
        rows.append({'name': run['name'], ACT: run[ACT], LR: float(run[LR]), SEED: int(run[SEED]),
                     'num_params': run.get('num_params'), 'step': int(r['step']), **evals})
  return pd.DataFrame(rows)


def budget_steps(evals: pd.DataFrame, task: str) -> dict[str, tuple[int, int | None]]:
  """{budget: (step read, step the plateau check compares with)}: early = the first evaluation,
  plateau = the last, compared with the evaluation at half its steps."""
  steps = sorted(set(evals['step']))
  last = steps[-1]
  half = last // 2 if last // 2 in steps else None
  out = {'plateau': (last, half)}
  if 'early' in BUDGETS[task]:
    out = {'early': (steps[0], None), **out}
  return out


def score(frame: pd.DataFrame, task: str) -> pd.Series:
  column, transform, _ = METRICS[task]
  return transform(frame[column].astype(float))


# --------------------------------------------------------------------------- one budget

@dataclasses.dataclass
class Budget:
  """One (task, budget): each seed's best-rate row per variant, the seeds x variants score table,
  the regime checks per variant, and the verdicts keyed by KEYS."""
  task: str
  budget: str
  step: int
  winners: pd.DataFrame
  wide: pd.DataFrame
  checks: dict[str, list[verdict.Check]]
  verdicts: dict[str, verdict.Verdict]


def variant_checks(task: str, budget: str, winners: pd.DataFrame, previous: pd.DataFrame | None,
                   grid) -> dict[str, list[verdict.Check]]:
  """Per variant: learning rate inside the grid, score off floor and ceiling, and (plateau budget
  with an evaluation at half the steps) the plateau check on the same runs."""
  column = METRICS[task][0]
  out = {}
  for name, g in winners.groupby(ACT, sort=False):
    tag = f'{task} {budget}: {name}'
    checks = [verdict.edge_check(f'{tag}: best learning rate inside the grid', {name: g[f'best_{LR}']}, grid)]
    if task == 'language':
      ceiling = float((g['unigram_bits'] - g['floor_bits']).mean())  # a model that knows only token frequencies
      checks.append(verdict.range_check(f'{tag}: excess bits off the entropy floor (0) and the unigram ceiling',
                                        g[column], floor=0.0, ceiling=ceiling, margin=FLOOR_MARGIN[task]))
    else:
      checks.append(verdict.range_check(f'{tag}: 1 - R^2 off 0 (exact fit) and 1 (the mean predictor)',
                                        g[column], floor=0.0, ceiling=1.0, margin=FLOOR_MARGIN[task]))
    if budget == 'plateau':
      if previous is None:
        checks.append(verdict.Check(f'{tag}: plateau', False, 'no evaluation at half the steps was logged'))
      else:
        before = previous.set_index('name').loc[g['name'], column]
        checks.append(verdict.plateau_check(f'{tag}: plateau ({column} at the last evaluation vs half the steps)',
                                            g[column].to_numpy(), before.to_numpy(), PLATEAU_TOL))
    out[name] = checks
  return out


def _short(detail: str) -> str:
  """The one figure of a passing check's detail: 'mean 0.1234' (range) or 'relative change 0.0123' (plateau)."""
  if 'relative change' in detail:
    return 'relative change ' + detail.split('relative change ')[1].split(' ')[0]
  return detail.split(' over ')[0]


def merged_checks(checks: dict[str, list[verdict.Check]], winners: pd.DataFrame, grid) -> list[verdict.Check]:
  """The regime checks of every variant as one check per kind (for the verdicts that read them all):
  the learning-rate edge over all variants, then each other kind passed if every variant passes, its
  detail naming the failed variants with their numbers, or each variant's figure."""
  first = next(iter(checks.values()), [])
  if not first:
    return []
  tag = first[0].name.split(': ')[0] + ': every variant'
  sel = winners[winners[ACT].isin(list(checks))]
  out = [verdict.edge_check(f'{tag}: best learning rate inside the grid', sel.set_index(ACT)[f'best_{LR}'], grid)]
  for i in range(1, len(first)):
    each = {name: cs[i] for name, cs in checks.items()}
    failed = {n: c for n, c in each.items() if not c.passed}
    detail = ('; '.join(f'{n}: {c.detail}' for n, c in failed.items()) if failed else
              'all pass: ' + ', '.join(f'{n} {_short(c.detail)}' for n, c in each.items()))
    out.append(verdict.Check(f'{tag}: ' + first[i].name.split(': ', 2)[-1], not failed, detail))
  return out


def budget_verdicts(wide: pd.DataFrame, task: str, budget: str, checks: dict[str, list[verdict.Check]],
                    winners: pd.DataFrame, grid) -> dict[str, verdict.Verdict]:
  """Rules 1.-5. on the seeds x variants table, each gated on the checks of the variants it reads."""
  label, out = METRICS[task][2], {}
  where = f'{task}, {budget} budget'
  if REFERENCE not in wide.columns:
    return out
  for name in [a for a in HEAD_TO_HEAD if a in wide.columns]:
    v = verdict.paired(wide[name], wide[REFERENCE], expect='less',
                       claim=f'{where}: {name} beats {REFERENCE} at equal parameters ({label}, lower is better)')
    out[name] = verdict.gate(v, checks.get(name, []) + checks.get(REFERENCE, []))
  every = merged_checks({name: checks[name] for name in wide.columns if name in checks}, winners, grid)
  gated = [a for a in GATED if a in wide.columns]
  plain = [a for a in PLAIN if a in wide.columns]
  if gated and plain:
    v = verdict.paired(wide[gated].mean(axis=1), wide[plain].mean(axis=1), expect='less',
                       claim=(f'{where}: the gated family ({", ".join(gated)}) beats the plain one '
                              f'({", ".join(plain)}) (per-seed means of {label})'))
    out['gated_family'] = verdict.gate(v, every)
  names = [a for a in PAPER[budget] if a in wide.columns]
  v = verdict.rank_agreement([PAPER[budget][a] for a in names], wide[names].mean(axis=0).to_numpy(),
                             claim=(f'{where}: variants order as in Shazeer 2020 Table 1 at '
                                    f'{PAPER_STEPS[budget]} steps (Spearman rho of the means)'))
  out['rank'] = verdict.gate(v, every)
  return out


def analyze_budget(evals: pd.DataFrame, task: str, budget: str, step: int, half: int | None,
                   grid) -> Budget:
  at = evals[evals['step'] == step].assign(score=lambda f: score(f, task))
  winners = verdict.best_per_point(at, by=ACT, metric='score')
  previous = evals[evals['step'] == half] if half is not None else None
  checks = variant_checks(task, budget, winners, previous, grid)
  wide = winners.pivot_table(index=SEED, columns=ACT, values='score').dropna()
  wide = wide[[a for a in PAPER_65K if a in wide.columns]]
  return Budget(task, budget, step, winners, wide, checks, budget_verdicts(wide, task, budget, checks, winners, grid))


# --------------------------------------------------------------------------- tables and plot

def paired_table(b: Budget) -> pd.DataFrame:
  """Every variant against relu, paired by seed, next to the paper's difference for the budget."""
  rows = []
  for name in [a for a in b.wide.columns if a != REFERENCE]:
    d = (b.wide[name] - b.wide[REFERENCE]).to_numpy()
    m, lo, hi = verdict.mean_ci(d)
    rows.append({'variant': name, 'paired diff vs relu': m, 'CI lo': lo, 'CI hi': hi, 'seeds': len(d),
                 f'paper diff at {PAPER_STEPS[b.budget]} steps (nats)': PAPER[b.budget][name] - PAPER[b.budget][REFERENCE]})
  return pd.DataFrame(rows)


def table1(budgets: list[Budget], params: dict[str, int]) -> pd.DataFrame:
  """Shazeer's Table 1 next to what the toy measured (mean and 95% CI half-width over seeds at each
  seed's best rate) per task and budget, with the rate that won most often."""
  rows = []
  for name in PAPER_65K:
    if not any(name in b.wide.columns for b in budgets):
      continue
    row = {'FFN': name, 'paper 65k (sd of 4 runs)': f'{PAPER_65K[name]:.3f} ({PAPER_65K_SD[name]:.3f})',
           'paper 524k': PAPER_524K[name], 'language params': params.get(name)}
    for b in budgets:
      if name not in b.wide.columns:
        continue
      m, lo, hi = verdict.mean_ci(b.wide[name])
      rates = b.winners[b.winners[ACT] == name][f'best_{LR}'].value_counts()
      row[f'{b.task} {b.budget} (step {b.step})'] = f'{m:.4g} ± {(hi - lo) / 2:.2g}'
      row[f'{b.task} {b.budget} best lr'] = ', '.join(f'{r:g}: {c}' for r, c in rates.sort_index().items())
    rows.append(row)
  return pd.DataFrame(rows)


def _plot(budgets: list[Budget], outdir: str, scale: str) -> base.Figure:
  fig, axes = plt.subplots(1, len(budgets), figsize=(5.2 * len(budgets), 4.4), squeeze=False)
  for ax, b in zip(axes[0], budgets):
    t = paired_table(b)
    x = np.arange(len(t))
    colors = ['C1' if v in GATED else 'C0' for v in t['variant']]
    for i, row in t.iterrows():
      ax.errorbar([x[i]], [row['paired diff vs relu']], fmt='o', color=colors[i], capsize=3,
                  yerr=[[row['paired diff vs relu'] - row['CI lo']], [row['CI hi'] - row['paired diff vs relu']]])
    ax.axhline(0.0, color='k', lw=0.8)
    ax.set_xticks(x, t['variant'], rotation=30)
    ax.set_ylabel(f'{SHORT[b.task]}: variant - relu\n(paired by seed; mean, 95% CI)')
    ax.set_title(f'{b.task}, {b.budget} (step {b.step}, {scale})', fontsize=10)
    ax.grid(True, alpha=0.3)
    paper = ax.twinx()
    paper.plot(x, t[t.columns[-1]], 'x', color='C3')
    paper.axhline(0.0, color='C3', lw=0.5, ls=':')
    lo, hi = ax.get_ylim()      # both axes symmetric about 0, so their zeros line up and nothing is clipped
    ax.set_ylim(-max(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
    span = max(abs(t[t.columns[-1]]).max(), 1e-9) * 1.2
    paper.set_ylim(-span, span)
    paper.set_ylabel(f'paper, {PAPER_STEPS[b.budget]} steps: variant - relu (nats)', color='C3')
  return base.save_figure(fig, outdir, 'glu_variants.png',
                          'each variant minus ReLU, paired by seed (mean and 95% CI over seeds, each seed at its '
                          'best learning rate; orange: gated, blue: plain; below 0 = better than ReLU), per task '
                          "and budget; red x (right axis): Shazeer 2020 Table 1's difference from ReLU at the "
                          "budget's step count (65k for early, 524k for plateau)")


# --------------------------------------------------------------------------- analysis

def param_check(df: pd.DataFrame, task: str) -> verdict.Check:
  """match_params: every variant's parameter count within PARAM_TOL of ReLU's."""
  counts = df.groupby(ACT)['num_params'].first().astype(int)
  name = f'{task}: parameters matched across variants (match_params)'
  if REFERENCE not in counts:
    return verdict.Check(name, False, 'no relu runs')
  worst = float((counts / counts[REFERENCE] - 1).abs().max())
  return verdict.Check(name, worst <= PARAM_TOL,
                       ', '.join(f'{k} {v}' for k, v in counts.items())
                       + f'; largest relative difference from relu {worst:.2%} (allowed {PARAM_TOL:.0%})')


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  grids = {'language': SETTINGS[ctx.scale]['lang_lrs'], 'teacher_student': SETTINGS[ctx.scale]['ts_lrs']}
  budgets, checks, tables, params = [], [], [], {}
  for task in BUDGETS:
    evals = evaluations(results[task], os.path.join(ctx.outdir, task))
    checks.append(param_check(base.completed(results[task]), task))
    if task == 'language':
      params = base.completed(results[task]).groupby(ACT)['num_params'].first().astype(int).to_dict()
    for budget, (step, half) in budget_steps(evals, task).items():
      budgets.append(analyze_budget(evals, task, budget, step, half, grids[task]))
  verdicts = [v for b in budgets for v in b.verdicts.values()]
  tables.append(base.Table('Shazeer 2020 Table 1 (log-perplexity, nats) and what this toy measured: per task and '
                           'budget the score (mean ± 95% CI half-width over seeds, each at its best learning rate; '
                           'lower is better) and how many seeds each learning rate won', table1(budgets, params)))
  for b in budgets:
    tables.append(base.Table(f'{b.task}, {b.budget} budget (step {b.step}): every variant minus relu, paired by seed '
                             f'({METRICS[b.task][2]}; negative = better than relu)', paired_table(b)))
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  notes = [f'runs not completed (excluded): {failed}'] if any(failed.values()) else []
  figure = _plot(budgets, ctx.outdir, ctx.scale)
  return base.Analysis(verdicts=verdicts, headline=headline(budgets), tables=tables, figures=[figure],
                       checks=checks, notes=notes + NOTES)


NOTES = [
    'Paired by seed: at one seed every variant sees the same language or teacher, the same batches and the '
    'same initial weights of its first hidden units. match_params gives the gated variants d_ff round(2/3 d_ff); '
    "the language model's FFNs have no biases (Shazeer 2020); the bare teacher-student FFN keeps them.",
    "Each seed's learning rate is picked per variant and budget on the same held-out score the verdicts read "
    '(3 rates); the selection is the same for every variant, so it biases each variant down by about as much.',
    'Holm is applied by the runner over every verdict of this ablation that carries a p-value (both tasks, '
    'both budgets); invalid verdicts are outside the family.',
]


def headline(budgets: list[Budget]) -> str:
  parts = []
  for b in budgets:
    if b.task != 'language':
      continue
    for key in ('geglu', 'swiglu'):
      v = b.verdicts.get(key)
      if v is not None:
        parts.append(f'{b.budget} {key} - relu {v.statistic:+.3g} bits [{v.ci[0]:+.3g}, {v.ci[1]:+.3g}]')
    if 'rank' in b.verdicts:
      parts.append(f'{b.budget} rank rho {b.verdicts["rank"].statistic:.2f}')
  return 'language: ' + '; '.join(parts) if parts else 'no language results'


ABLATION = base.Ablation(
    name='glu_variants',
    claim=('At equal parameters, bias-free gated FFNs beat ReLU: GEGLU 1.942 and SwiGLU 1.944 vs ReLU 1.997 held-out '
           'log-perplexity at 65k steps (1.633, 1.636 vs 1.677 at 524k), the gated family beats the plain one, '
           'Bilinear beats ReLU (Shazeer 2020, Table 1).'),
    citation='Shazeer 2020, "GLU Variants Improve Transformer", arXiv 2002.05202, Table 1 (T5-base on C4); '
             'docs/references.md',
    published='log-perplexity at 65,536 / 524,288 steps: ReLU 1.997 / 1.677, GELU 1.983 / 1.679, Swish 1.994 / 1.683, '
              'GLU 1.982 / 1.663, Bilinear 1.960 / 1.648, GEGLU 1.942 / 1.633, SwiGLU 1.944 / 1.636, '
              'ReGLU 1.953 / 1.645',
    sweeps=sweeps, analyze=analyze,
    setup=('language: order-2 sparse Markov language (V 16, 8 candidates per last token, 4 next tokens per '
           'context, Dirichlet 0.5; sequences of 32), 2-layer transformer d_model 32, 2 heads, bias-free FFN d_ff 128 '
           '(gated 85), batch 16 sequences, Adam at a constant rate after 100 warmup steps, rate grid per variant; '
           'budgets: the first evaluation (early) and the last (plateau); teacher_student: 16-d Gaussian inputs, '
           'tanh teacher of width 256, 4,096 training points, student FFN with biases d_ff 64 (gated 43), batch 256, '
           'Adam at a constant rate, rate grid per variant. Every variant with match_params=True, same seeds.'))
