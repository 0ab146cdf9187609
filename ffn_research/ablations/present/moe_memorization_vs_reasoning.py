"""Tables, figures and headline of ablations/moe_memorization_vs_reasoning.py."""

import math

from matplotlib import ticker
import numpy as np
import pandas as pd

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import moe_memorization_vs_reasoning as study
from ffn_research.ablations import regime as regime_lib


def _of_task(sel: pd.DataFrame, task: str) -> pd.DataFrame:
  """The rows of `task`'s arms (shortest_path's exclude its pool's)."""
  return sel[sel['arm'].astype(str).map(study.arm_task) == task] if len(sel) else sel


def point_table(sel: pd.DataFrame, task: str, metrics: list[str]) -> pd.DataFrame:
  """Per point of `task` at its chosen rate: parameters, rate, steps and each metric's mean and 95% CI."""
  g = _of_task(sel, task)
  return stats.summarize(g, ['point', 'num_params', 'num_active_params', 'train.learning_rate', study.STEPS], metrics)


def _matched_g(sel: pd.DataFrame, scale: str, task: str, r: str) -> str:
  """Reasoning's G with its floor at the active-matched dense, '' for the other tasks."""
  if task != 'shortest_path':
    return ''
  t = study.gaps(sel, scale, task, r, floor=f'matched_{r}')
  g, lo, hi = rules_lib.ratio_of_means(t['num'], t['den'])
  return f'{g:.3g} [{lo:.3g}, {hi:.3g}] (d_ff {study.matched_width(scale, r)})'


def gap_table(result: base.Result) -> pd.DataFrame:
  rows = []
  cells = [(r, task) for r in study.ROUTERS for task in (*study.TASKS, study.POOL)]
  cells += [(c, 'memorization') for c in study.CONTROLS]
  quarter = result.ladder.get(regime_lib.QUARTER)
  levels = [('T', result.full), ('T/2', result.half)] + ([('T/4', quarter)] if quarter is not None else [])
  for level, sel in levels:
    for r, task in cells:
      t = study.gaps(sel, result.scale, task, r)
      g, lo, hi = rules_lib.ratio_of_means(t['num'], t['den'])
      rows.append(
        {
          'budget': level,
          'router': r,
          'task': task,
          'seeds': len(t),
          'G': g,
          'CI': f'[{lo:.3g}, {hi:.3g}]',
          'ci_lo': lo,
          'ci_hi': hi,
          'mean MoE - active': t['num'].mean(),
          'mean total - active': t['den'].mean(),
          'G, floor at the active-matched dense': _matched_g(sel, result.scale, task, r),
        }
      )
  return pd.DataFrame(rows)


def figure(result: base.Result, gap: pd.DataFrame, ctx: base.Context) -> base.Figure:
  s = study.SETTINGS[result.scale]
  fig, axes = base.figure(1, 3)
  _panel_task(axes[0, 0], result.full, 'memorization', 'bits stored', s['experts'])
  _panel_task(axes[0, 1], result.full, 'shortest_path', 'held-out shortest-path accuracy', s['experts'])
  _panel_gap(axes[0, 2], gap, s['experts'])
  return base.save_figure(
    fig,
    ctx.outdir,
    'memorization_vs_reasoning.png',
    'left: bits stored vs total parameters (ticks at the dense sizes) for dense FFNs (d_ff swept) and the two MoEs '
    'at E = '
    f'{s["experts"]} experts (one point each, same active width), each at its tuned rate and T; '
    'middle: held-out shortest-path accuracy (bare FFN, graph in the input), the same arms and the dense widths '
    "matched to each MoE's active parameters, with the test graphs' majority-class share (chance; reasoning "
    f'trains {study.SP_STEPS_FACTOR}x the steps); right: the share G of the dense-active -> dense-total gap the MoE '
    'closes, per router and task (shortest_path_pool: the storage control, scored on its pool), at T, T/2 and T/4 '
    '(0: no better than dense-active, 1: as good as dense-total)',
  )


COLORS = {
  'dense': 'C0',
  'top1': 'C1',
  'top2': 'C2',
  'matched': 'C3',
  study.HASH: 'C4',
}  # one colour per arm, every panel


def _panel_task(ax, sel: pd.DataFrame, task: str, ylabel: str, experts: int) -> None:
  """`task`'s score vs total parameters at T: the dense sweep, each router's MoE and, for reasoning, the dense widths
  matched to each MoE's active parameters (mean, 95% CI)."""
  extra = ('matched',) if task == 'shortest_path' else tuple(study.CONTROLS) if task == 'memorization' else ()
  for arm in ('dense', *study.ROUTERS, *extra):
    g = sel[sel['arm'] == (study.MATCHED if arm == 'matched' else f'{task}_{arm}')]
    if not len(g):
      continue
    t = stats.summarize(g, ['num_params'], [study.SCORE[task]])
    label = {
      'dense': 'dense (d_ff swept)',
      'matched': "dense at each MoE's active parameters",
      study.HASH: f'top-1 routed by a token-id hash, E = {experts} (control)',
    }.get(arm, f'MoE {arm}, E = {experts} (one point)')
    base.errorbar_ci(
      ax,
      t['num_params'],
      t[f'{study.SCORE[task]}_mean'],
      t[f'{study.SCORE[task]}_ci_lo'],
      t[f'{study.SCORE[task]}_ci_hi'],
      fmt=('s--' if arm == 'dense' else 'D' if arm == 'matched' else 'o'),
      color=COLORS[arm],
      label=label,
    )
  if task == 'shortest_path' and 'chance_accuracy' in sel:
    chance = float(_of_task(sel, task)['chance_accuracy'].mean())
    ax.axhline(chance, color='k', ls=':', lw=1, label=f'chance (majority class, {chance:.2f})')
  base.style_axes(
    ax,
    xlabel='total parameters',
    ylabel=ylabel,
    xscale='log',
    fontsize=6,
    title=f'{task}: active width {study.WIDTH[task]}, at T (mean, 95% CI)',
    title_size=9,
  )
  dense = sel[sel['arm'] == f'{task}_dense']['num_params'].dropna().unique()
  if len(dense):  # a narrow log range has no decade tick: label the dense sizes (the MoEs sit beside dense-total)
    ax.xaxis.set_major_locator(ticker.FixedLocator(sorted(float(x) for x in dense)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f'{x:,.0f}'))
  ax.xaxis.set_minor_formatter(ticker.NullFormatter())  # minor labels would overlap


def _panel_gap(ax, gap: pd.DataFrame, experts: int) -> None:
  """G per router and task at T, T/2 and T/4 (95% CI), with 0, 1 and the HALF level."""
  for j, level in enumerate(lv for lv in ('T', 'T/2', 'T/4') if lv in set(gap['budget'])):
    g = gap[gap['budget'] == level].reset_index(drop=True)
    base.errorbar_ci(
      ax,
      np.arange(len(g)) + 0.15 * j,
      g['G'],
      g['ci_lo'],
      g['ci_hi'],
      fmt='o',
      mfc=None if j == 0 else 'none',
      color=('C1', 'gray', 'silver')[j],
      label=f'at {level}',
    )
  ticks = gap[gap['budget'] == 'T']
  short = {'memorization': 'memo-\nrization', 'shortest_path': 'reasoning', study.POOL: 'pool\n(control)'}
  control = '\n(control)'
  ax.set_xticks(
    range(len(ticks)),
    [f'{r}\n{short[t]}' + control * (r in study.CONTROLS) for r, t in zip(ticks['router'], ticks['task'], strict=True)],
    fontsize=7,
  )
  for y, ls in ((0, '-'), (1, ':'), (study.HALF, '--')):
    ax.axhline(y, color='k' if y != study.HALF else 'gray', lw=0.8, ls=ls)
  base.style_axes(
    ax,
    xlabel='',
    ylabel=f'G: share of the gap the MoE of E = {experts} closes',
    fontsize=6,
    title='ratio of means, 95% CI (BCa at 10 seeds, t on the log ratio at 5)',
    title_size=9,
  )


def _control(router: str) -> str:
  """A gap-table row that is no verdict's: the token-hash control of memorization, or reasoning's storage control."""
  return 'token-hash control' if router in study.CONTROLS else 'storage control'


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  s = study.SETTINGS[result.scale]
  gap = gap_table(result)
  at_t = gap[gap['budget'] == 'T']
  cells = [
    (r, t) for r in study.ROUTERS for t in study.TASKS
  ]  # rules' per-task verdicts follow the overall ones, in this order
  outcome = {c: v.outcome for c, v in zip(cells, result.verdicts[len(study.ROUTERS) :], strict=False)}
  headline = '; '.join(
    f'{r.router} {r.task}: G {r.G:.2f} {r.CI} ({outcome.get((r.router, r.task), _control(r.router))})'
    for r in at_t.itertuples()
  )
  entropy = s['mem_facts'] * math.log2(study.MEM_VALUES)
  mem = point_table(
    result.full.assign(share_of_entropy=result.full['bits_stored'] / entropy),
    'memorization',
    ['bits_stored', 'share_of_entropy'],
  )
  hop = point_table(result.full, 'shortest_path', ['eval_accuracy', 'val_accuracy', 'chance_accuracy', 'eval_loss'])
  pool = point_table(result.full, study.POOL, ['eval_accuracy', 'eval_loss', 'val_accuracy'])
  frame = result.frame.dropna(subset=['point'])
  failed = frame[frame['status'] != 'completed'].groupby('point').size().to_dict()
  return base.Presentation(
    headline=headline,
    tables=[
      base.Table(
        'G, the share of the dense-active -> dense-total gap the MoE closes (ratio of means; 95% CI: BCa bootstrap '
        'at 10 seeds, t on the log ratio at the 5-seed rows), at T, T/2 and T/4',
        gap.drop(columns=['ci_lo', 'ci_hi']),
      ),
      base.Table(f'memorization at T ({s["mem_facts"]:,} facts, {entropy:,.0f} bits)', mem),
      base.Table(
        'shortest_path at T (eval_: held-out test graphs; val_: validation graphs, which chose the rate; chance: the '
        "test graphs' majority-class share)",
        hop,
      ),
      base.Table(
        f'the storage control at T: shortest_path over a fixed pool of {s["sp_pool"]:,} examples per seed (eval_: '
        'the pool itself, what was stored; val_: fresh graphs, reported, not read; the rate tuned on the pool loss)',
        pool,
      ),
    ],
    figures=[figure(result, gap, ctx)],
    notes=([f'runs not completed (a rate with one is not eligible): {failed}'] if failed else [])
    + [
      'Active parameters count the whole router as active (ffn_counts); the expert weights a token uses (width '
      f'{study.MEM_WIDTH} / {study.SP_WIDTH} in total: one expert, or two of half the width) are the same in '
      "every arm. In reasoning the router is most of the MoE's active parameters: G with its floor at the dense "
      "width matched to the MoE's active parameters (the table's last column, and the reasoning verdicts' detail) "
      "shows how much of G the router's parameters explain.",
      "The toy can say whether, on these tasks at this budget, added experts close the dense total width's gain "
      'in stored bits and in held-out shortest-path accuracy of a bare FFN that reads the graph from its input; '
      'it says nothing about attention or scale (Jelassi et al. train billion-parameter transformers on phone-book '
      'and graph/math tasks).',
    ],
  )
