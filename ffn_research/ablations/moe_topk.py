"""moe_topk: loss against top_k at fixed total parameters, against granularity at fixed total and
active parameters, and the k = 1 router trap.

Claims tested (docs/references.md#mixture-of-experts):
- more active experts per token help at fixed total parameters: top-2 beats top-1 (the GShard /
  Shazeer et al. 2017 choice of k >= 2 against Switch's k = 1);
- fine-grained experts (Krajewski et al. 2024): granularity G = d_ff / d_expert = 1 is rarely
  optimal; at fixed total and active parameters (G x E experts of width d_ff / G, top G x k),
  some G > 1 beats G = 1;
- the k = 1 router trap: with top-1 routing, routers whose combine weight is exactly 1
  (`topk_softmax`, i.e. top-k then softmax over the chosen one) give the router no gradient from
  the task loss; Switch-style `softmax_topk` without renormalisation scales the expert output by
  its softmax probability and learns. Every k = 1 point of the other sweeps uses `softmax_topk`
  without renormalisation, so the trap does not bias them; this sweep shows its effect.

Task: teacher-student regression (16-d Gaussian inputs, ReLU teacher of width 256, 4,096
training points), bare MoE FFN of ReLU experts, dropless (capacity_factor 0, so no token is
dropped and k is the only difference), Switch load-balancing loss 1e-2 and z-loss 1e-3 (the
defaults). Score: ln(held-out 1 - R^2), lower is better, paired by seed.

Verdict rules (fixed before any full run):
  1. fixed total (E = 8 experts of width 32): paired t CI of mean(score(k=2) - score(k=1)):
     reproduced if below 0, not reproduced if above 0, else inconclusive.
  2. granularity (E = 4, k = 1, d_ff 64; G in 2, 4, 8 against G = 1): each G > 1 against G = 1 with
     a Bonferroni-corrected paired CI (confidence 1 - 0.05/3); reproduced if some G's CI lies
     below 0; not reproduced if every G's CI lies above 0; else inconclusive.
  3. router trap (E = 8, width 32, k = 1): paired mean(score(softmax_topk) - score(topk_softmax)):
     reproduced if the CI lies below 0, not reproduced if above 0, else inconclusive.
"""

import math

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import pandas as pd  # pylint: disable=wrong-import-position

from ffn_research import sweep  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

TOTAL_EXPERTS, TOTAL_WIDTH = 8, 32       # fixed-total sweep: 8 experts of width 32
GRAN_EXPERTS, GRAN_WIDTH = 4, 64         # granularity sweep at G = 1: 4 experts of width 64, top-1
SETTINGS = {
    'smoke': dict(seeds=3, steps=40, top_ks=(1, 2), granularities=(1, 2), dense=(TOTAL_WIDTH,)),
    'quick': dict(seeds=3, steps=1000, top_ks=(1, 2, 4, 8), granularities=(1, 2, 4, 8),
                  dense=(TOTAL_WIDTH, TOTAL_EXPERTS * TOTAL_WIDTH)),
    'full': dict(seeds=5, steps=3000, top_ks=(1, 2, 4, 8), granularities=(1, 2, 4, 8),
                 dense=(TOTAL_WIDTH, TOTAL_EXPERTS * TOTAL_WIDTH)),
}
LEARNING_ROUTER, TRAP_ROUTER = 'softmax_topk', 'topk_softmax'


def base_config(steps: int):
  config = default_config()
  m, t, tr = config.model, config.task, config.train
  t.name, t.teacher_d_ff, t.num_train = 'teacher_student', 256, 4096
  m.d_model, m.d_ff, m.activation = 16, TOTAL_WIDTH, 'relu'
  e = m.moe
  e.num_experts, e.top_k, e.router, e.renormalize = TOTAL_EXPERTS, 1, LEARNING_ROUTER, False
  e.capacity_factor = 0.0  # dropless: every assignment is computed
  tr.batch_size, tr.learning_rate = 256, 3e-3
  base.set_steps(tr, steps)
  return config


def sweeps(scale: str) -> list[base.SweepSpec]:
  s = SETTINGS[scale]
  seeds = sweep.values('train.seed', range(s['seeds']))
  config = base_config(s['steps'])
  gran = base_config(s['steps'])
  gran.model.moe.num_experts, gran.model.d_ff = GRAN_EXPERTS, GRAN_WIDTH
  return [
      base.SweepSpec('fixed_total', config, sweep.product(sweep.values('model.moe.top_k', s['top_ks']), seeds)),
      base.SweepSpec('granularity', gran, sweep.product(
          sweep.values('model.moe.granularity', s['granularities']), seeds)),
      base.SweepSpec('router_k1', config, sweep.product(sweep.values('model.moe.router', [TRAP_ROUTER]), seeds)),
      base.SweepSpec('dense', config, sweep.product(
          sweep.values('model.moe.num_experts', [0]),
          sweep.values('model.d_ff', s['dense']), seeds)),
  ]


def scores(df: pd.DataFrame, key: str) -> pd.DataFrame:
  """Seeds x values of `key`: ln(eval_relative_mse) (lower is better)."""
  df = df.assign(score=np.log(df['eval_relative_mse'].astype(float)))
  return df.pivot_table(index='train.seed', columns=key, values='score')


def granularity_verdict(wide: pd.DataFrame, claim: str) -> tuple[verdict.Verdict, list[verdict.Verdict]]:
  """Rule 2: some G > 1 beats G = 1 under a Bonferroni-corrected paired CI."""
  others = [g for g in wide.columns if g != 1]
  conf = 1 - 0.05 / max(len(others), 1)
  each = [verdict.paired(wide[g], wide[1], expect='less', confidence=conf,
                         claim=f'G = {g} beats G = 1') for g in others] if 1 in wide.columns else []
  test = (f'paired t-test per G > 1 against G = 1, Bonferroni-corrected {conf:.4g} CIs '
          f'({len(others)} comparisons)')
  rule = ('reproduced if some G > 1 has its CI of mean(score(G) - score(1)) below 0; not reproduced if '
          'every G > 1 has it above 0; otherwise (or < 3 seeds) inconclusive')
  if not each:
    return verdict.Verdict(claim, verdict.INCONCLUSIVE, math.nan, (math.nan, math.nan), test, rule, 0,
                           'underpowered: no G = 1 or no G > 1'), each
  best = min(each, key=lambda v: v.statistic if math.isfinite(v.statistic) else math.inf)
  if any(v.outcome == verdict.REPRODUCED for v in each):
    outcome = verdict.REPRODUCED
  elif all(v.outcome == verdict.NOT_REPRODUCED for v in each):
    outcome = verdict.NOT_REPRODUCED
  else:
    outcome = verdict.INCONCLUSIVE
  detail = '; '.join(f'{v.claim}: {v.statistic:+.3g} [{v.ci[0]:+.3g}, {v.ci[1]:+.3g}] {v.outcome}' for v in each)
  return verdict.Verdict(claim, outcome, best.statistic, best.ci, test, rule, best.n,
                         f'best: {best.claim}; ' + detail, p_value=best.p_value), each


def _summary(df: pd.DataFrame, key: str) -> pd.DataFrame:
  out = verdict.summarize(df, [key], ['eval_relative_mse', 'num_params', 'num_active_params'])
  keep = [key, 'n', 'eval_relative_mse_mean', 'eval_relative_mse_ci_lo', 'eval_relative_mse_ci_hi',
          'num_params_mean', 'num_active_params_mean']
  return out[keep].rename(columns={'num_params_mean': 'params', 'num_active_params_mean': 'active params'})


def _errorbar(ax, table, key, color, label):
  m = table['eval_relative_mse_mean']
  yerr = np.array([m - table['eval_relative_mse_ci_lo'], table['eval_relative_mse_ci_hi'] - m])
  ax.errorbar(table[key], m, yerr=np.nan_to_num(np.clip(yerr, 0, None)), fmt='o-', color=color, capsize=3,
              label=label)


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  total = base.completed(results['fixed_total'])
  gran = base.completed(results['granularity'])
  trap = base.completed(results['router_k1'])
  dense = base.completed(results['dense'])
  verdicts, notes = [], []

  by_k = scores(total, 'model.moe.top_k')
  if {1, 2} <= set(by_k.columns):
    v1 = verdict.paired(by_k[2], by_k[1], expect='less',
                        claim=(f'at fixed total parameters ({TOTAL_EXPERTS} experts of width {TOTAL_WIDTH}), '
                               'top-2 beats top-1 (ln held-out 1 - R^2)'))
  else:
    v1 = verdict.paired([], [], expect='less', claim='top-2 beats top-1 at fixed total parameters')
  verdicts.append(v1)

  by_g = scores(gran, 'model.moe.granularity')
  v2, each = granularity_verdict(by_g, claim=(
      f'fine-grained experts (Krajewski et al. 2024): at fixed total and active parameters '
      f'({GRAN_EXPERTS} experts of width {GRAN_WIDTH}, top-1, split G ways), some G > 1 beats G = 1'))
  verdicts.append(v2)

  k1 = total[total['model.moe.top_k'] == 1].assign(**{'model.moe.router': LEARNING_ROUTER})
  by_router = scores(pd.concat([k1, trap]), 'model.moe.router')
  if {LEARNING_ROUTER, TRAP_ROUTER} <= set(by_router.columns):
    v3 = verdict.paired(by_router[LEARNING_ROUTER], by_router[TRAP_ROUTER], expect='less', claim=(
        f'k = 1 router trap: Switch-style {LEARNING_ROUTER} (no renormalisation; the router learns) beats '
        f'{TRAP_ROUTER} (combine weight exactly 1, no task gradient to the router)'))
  else:
    v3 = verdict.paired([], [], expect='less', claim='k = 1 router trap')
  verdicts.append(v3)

  t_total, t_gran = _summary(total, 'model.moe.top_k'), _summary(gran, 'model.moe.granularity')
  t_trap = _summary(pd.concat([k1, trap]), 'model.moe.router')
  t_dense = _summary(dense, 'model.d_ff')
  t_each = pd.DataFrame([{'comparison': v.claim, 'mean diff': v.statistic, 'CI lo': v.ci[0], 'CI hi': v.ci[1],
                          'p': v.p_value, 'outcome': v.outcome} for v in each])

  fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.4))
  ax = axes[0]
  if len(t_total):
    _errorbar(ax, t_total, 'model.moe.top_k', 'C0', f'MoE {TOTAL_EXPERTS}x{TOTAL_WIDTH}, {LEARNING_ROUTER}')
  if len(t_trap):
    row = t_trap[t_trap['model.moe.router'] == TRAP_ROUTER]
    if len(row):
      ax.errorbar([1], row['eval_relative_mse_mean'], fmt='x', color='C3', markersize=9,
                  label=f'k = 1, {TRAP_ROUTER} (router gets no task gradient)')
  for _, row in t_dense.iterrows():
    ax.axhline(row['eval_relative_mse_mean'], ls='--', color='gray' if row['model.d_ff'] == TOTAL_WIDTH else 'k',
               label=f'dense d_ff {int(row["model.d_ff"])} (reference)')
  ax.set_xscale('log', base=2)
  ax.set_yscale('log')
  ax.set_xlabel('top_k (experts per token), total parameters fixed')
  ax.set_ylabel('held-out 1 - R^2 (mean, 95% CI)')
  ax.set_title(f'loss vs top_k ({ctx.scale})')
  ax.legend(fontsize=7)
  ax.grid(True, which='both', alpha=0.3)
  ax = axes[1]
  if len(t_gran):
    _errorbar(ax, t_gran, 'model.moe.granularity', 'C2', f'{GRAN_EXPERTS}G experts of width {GRAN_WIDTH}/G, top G')
    g1 = t_gran[t_gran['model.moe.granularity'] == 1]['eval_relative_mse_mean']
    if len(g1):
      ax.axhline(float(g1.iloc[0]), color='k', ls=':', label='G = 1 (reference; claim: some G > 1 is lower)')
  ax.set_xscale('log', base=2)
  ax.set_yscale('log')
  ax.set_xlabel('granularity G (total and active parameters fixed)')
  ax.set_ylabel('held-out 1 - R^2 (mean, 95% CI)')
  ax.set_title('loss vs granularity (Krajewski et al. 2024)')
  ax.legend(fontsize=7)
  ax.grid(True, which='both', alpha=0.3)
  figure = base.save_figure(fig, ctx.outdir, 'moe_topk.png',
                            'left: held-out 1 - R^2 vs top_k at fixed total parameters, with the k = 1 trap '
                            'router and dense references; right: vs granularity with the G = 1 reference line')

  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  if any(failed.values()):
    notes.append(f'runs not completed (excluded): {failed}')
  notes.append('Score for the verdicts: ln(held-out 1 - R^2), paired by seed; tables show 1 - R^2 itself.')
  if 2 in by_k.columns and TRAP_ROUTER in by_router.columns:
    # Descriptive, not a verdict: rule 1 with the other k = 1 router.
    alt = verdict.paired(by_k[2], by_router[TRAP_ROUTER], expect='less', claim='k=2 vs k=1 (trap router)')
    notes.append(f'Rule 1 with {TRAP_ROUTER} as the k = 1 point instead (descriptive, not a verdict): '
                 f'mean(score(k=2) - score(k=1)) = {alt.statistic:+.3g} [{alt.ci[0]:+.3g}, {alt.ci[1]:+.3g}], '
                 f'{alt.outcome} under the same rule.')
  notes.append(f'The k = 1 point of fixed_total is reused as the {LEARNING_ROUTER} arm of the router comparison '
               '(same seeds and config).')
  headline = (f'top-2 - top-1 at fixed total: {v1.statistic:+.3g} [{v1.ci[0]:+.3g}, {v1.ci[1]:+.3g}] ({v1.outcome}); '
              f'best G > 1 - G = 1: {v2.statistic:+.3g} ({v2.outcome}); router trap: {v3.statistic:+.3g} '
              f'({v3.outcome})')
  return base.Analysis(
      verdicts=verdicts, headline=headline,
      tables=[base.Table('fixed total parameters: held-out 1 - R^2 per top_k', t_total),
              base.Table('granularity at fixed total and active parameters', t_gran),
              base.Table('granularity: each G > 1 against G = 1 (ln 1 - R^2, Bonferroni CIs)', t_each),
              base.Table('k = 1 routers', t_trap),
              base.Table('dense references', t_dense)],
      figures=[figure],
      notes=notes)


ABLATION = base.Ablation(
    name='moe_topk',
    claim=('More experts per token help at fixed total parameters (top-2 beats top-1), granularity G = 1 is '
           'rarely optimal (Krajewski et al. 2024), and top-1 routers with a combine weight of exactly 1 get '
           'no task gradient (Switch Transformer scales by the un-renormalised probability).'),
    citation=('Krajewski et al. 2024, "Scaling Laws for Fine-Grained Mixture of Experts" (arXiv 2402.07871); '
              'Fedus et al. 2021 (Switch Transformer, top-1 with softmax-probability scaling); Lepikhin et al. '
              '2020 (GShard, top-2)'),
    published='qualitative: G = 1 not optimal at almost any compute budget; k = 2 is the GShard default',
    sweeps=sweeps, analyze=analyze,
    setup=('teacher_student: 16-d Gaussian inputs, ReLU teacher of width 256, 4,096 training points; bare MoE '
           'FFN of ReLU experts, dropless, softmax_topk router without renormalisation (unless stated), Switch '
           'loss 1e-2, z-loss 1e-3, batch 256, Adam 3e-3 with cosine decay.'))
