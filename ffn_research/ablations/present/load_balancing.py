"""Tables, figures and headline of ablations/load_balancing.py."""

import pandas as pd

from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import load_balancing as study
from ffn_research.ablations import zloss


def summarize(df: pd.DataFrame, by: list[str], metrics: list[str]) -> pd.DataFrame:
  """stats.summarize with each metric's CI inside its range (BOUNDS): n, and mean, ci_lo, ci_hi per metric."""
  rows = []
  for keys, g in df.groupby(by, sort=True):
    row = {**dict(zip(by, keys, strict=True)), 'n': len(g)}
    for m in metrics:
      row[f'{m}_mean'], row[f'{m}_ci_lo'], row[f'{m}_ci_hi'] = stats.mean_ci(g[m], bounds=study.BOUNDS.get(m))
    rows.append(row)
  return pd.DataFrame(rows)


def load_table(sel: pd.DataFrame) -> pd.DataFrame:
  """Per load point at its chosen rate: load at step 0 and at the end, the change, held-out MSE."""
  rows = sel[~sel['arm'].astype(str).str.startswith((zloss.UNSTABLE, zloss.PILOT, study.DENSE))]
  keys = [k for k in ('load_start', 'load_final', 'load_change', 'eval_loss') if k in rows]
  return summarize(rows, ['point', study.LR, study.STEPS], keys) if len(rows) else pd.DataFrame()


def unstable_table(frame: pd.DataFrame) -> pd.DataFrame:
  """Per z-loss arm (the pilot's seeds, or the test's), rate, point (none, z_loss, frozen, float32) and budget: the
  failed fraction (zloss.with_unstable), and the test arm's router z where collected."""
  parts = []
  for prefix, seeds in ((zloss.PILOT, 'pilot'), (zloss.UNSTABLE, 'test')):
    z = zloss.with_unstable(frame.dropna(subset=['point']), prefix)
    if len(z):
      parts.append(z.assign(seeds=seeds, arm_point=z['point'].str.rsplit(': ', n=1).str[-1]))
  if not parts:
    return pd.DataFrame()
  z = pd.concat(parts)
  metrics = ['unstable', 'failed_at_1', 'diverged']
  metrics += ['router_z'] if 'router_z' in z and z['router_z'].notna().any() else []
  t = summarize(z, ['seeds', study.LR, 'arm_point', study.STEPS], metrics)
  return t.rename(columns={'arm_point': 'point'})


def routing_table(full: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
  """The routing premise per routing-task condition and MoE point (study.routing_margins)."""
  return pd.DataFrame(study.routing_margins(full, frame)) if 'eval_loss' in full else pd.DataFrame()


def figure(result: base.Result, ctx: base.Context) -> base.Figure:
  fig, axes = base.figure(1, 3)
  _panel_load_change(axes[0, 0], result.full)
  _panel_tuning(axes[0, 1], result.frame)
  _panel_unstable(axes[0, 2], result.frame)
  return base.save_figure(
    fig,
    ctx.outdir,
    'load_change.png',
    'left: max/mean load change from step 0 to the end on the held-out inputs, each point at its '
    f'chosen rate and T (mean, 95% CI; red: the collapse level +{study.COLLAPSE_RISE:g}); middle: '
    'held-out MSE per learning rate of the trained points at each budget (solid: the longest), log scale, the '
    f'tuning; right: failed fraction (diverged, or held-out relative MSE >= {zloss.FAILED_MSE:g}) per learning rate '
    'at T of '
    'the z-loss arms: the pilot (no z-loss, its own seeds) and the test points without the z-loss, with it, with '
    'the router frozen and with a float32 router (the test-rate band dotted); '
    'one colour per balancing (none, switch, bias, frozen) in the left and middle panels, the input condition in '
    'each label',
  )


def _panel_load_change(ax, full: pd.DataFrame) -> None:
  """Left: each load point's max/mean load change at its chosen rate and T (mean, 95% CI), the collapse level."""
  t = load_table(full)
  for i, (_, r) in enumerate(t.iterrows()):
    base.errorbar_ci(
      ax,
      [i],
      [r['load_change_mean']],
      [r['load_change_ci_lo']],
      [r['load_change_ci_hi']],
      color=study.COLORS[_balancing(r['point'])],
      label=f'{r["point"]} (lr {r[study.LR]:g})',
    )
  ax.set_xticks(range(len(t)), list(t['point']) if len(t) else [], fontsize=6)
  ax.axhline(0, color='k', ls='--', lw=1)
  ax.axhline(study.COLLAPSE_RISE, color='r', ls=':', lw=1, label=f'collapse: +{study.COLLAPSE_RISE:g} (rule 1)')
  base.style_axes(ax, xlabel='', ylabel='max/mean load: end - step 0', title='load change (mean, 95% CI)', fontsize=6)


def _panel_tuning(ax, frame: pd.DataFrame) -> None:
  """Middle: held-out MSE per learning rate of the trained points at each budget (solid: the longest)."""
  runs = frame[frame['arm'].isin(list(study.CONDITIONS))].dropna(subset=['point', 'eval_loss'])
  tuned = summarize(runs, ['point', study.STEPS, study.LR], ['eval_loss']) if len(runs) else pd.DataFrame()
  for p, g in tuned.groupby('point', sort=False) if len(tuned) else ():
    for steps, h in g.groupby(study.STEPS):
      ax.plot(
        h[study.LR],
        h['eval_loss_mean'],
        'o-' if steps == g[study.STEPS].max() else 'o--',
        color=study.COLORS[_balancing(p)],
        ms=3,
        label=f'{p}, {steps} steps',
      )
  base.style_axes(
    ax,
    xlabel='learning rate',
    ylabel='held-out MSE (mean over seeds, log scale)',
    xscale='log',
    yscale='log',
    title='tuning of the trained points',
    fontsize=5,
  )


def _panel_unstable(ax, frame: pd.DataFrame) -> None:
  """Right: the failed fraction per learning rate at T of the pilot and of each test point, the test-rate level."""
  u = unstable_table(frame)
  u = u[u[study.STEPS] == u[study.STEPS].max()] if len(u) else u
  for j, ((seeds, p), h) in enumerate(u.groupby(['seeds', 'point']) if len(u) else ()):
    ax.plot(h[study.LR], h['unstable_mean'], 'o-', color=f'C{j + 4}', label=f'{seeds} seeds, {p}')
  for edge in zloss.MARGINAL:
    ax.axhline(edge, color='gray', ls=':', lw=1, label='test-rate band' if edge == zloss.MARGINAL[0] else None)
  base.style_axes(
    ax,
    xlabel='learning rate (no clipping)',
    ylabel='failed fraction of seeds',
    xscale='log',
    title='induced instability (bf16 router)',
    fontsize=5,
  )


def _balancing(label: str) -> str:
  """'none', 'switch', 'bias' or 'frozen' of a load point's label."""
  return 'frozen' if label.startswith('frozen_') else label.rsplit(': ', 1)[-1]


def _headline(result: base.Result, routing: pd.DataFrame) -> str:
  """Each verdict's statistic and outcome, the control's collapse, the chosen rates and the routing premise."""
  v = result.verdicts
  rates = ', '.join(
    f'{p} {r:g}'
    for p, r in result.tuning[result.tuning['level'] == 'T'][['point', 'rate']].values
    if str(p).split(':')[0] in study.CONDITIONS
  )
  control = study.collapse_rule(result.full, study.CONTROL)
  headline = (
    f'max/mean load change from step 0, no balancing minus frozen router: {study.OFFSET} {v[0].statistic:+.3f} '
    f'[{v[0].ci[0]:+.3f}, {v[0].ci[1]:+.3f}] ({v[0].outcome}), {study.CENTRED} {v[4].statistic:+.3f} '
    f'({v[4].outcome}), {study.CONTROL} {control.statistic:+.3f} (collapse: > +{study.COLLAPSE_RISE:g}); Switch '
    f'minus none {v[1].statistic:+.3f} ({v[1].outcome}), bias minus none {v[3].statistic:+.3f} ({v[3].outcome}) '
    f'(rates at T: {rates}); failed fraction z-loss minus none {v[2].statistic:+.2f} ({v[2].outcome}) at the '
    f'test rate {zloss.pilot_rate(result.frame):g}'
  )
  switch = routing[routing['MoE point'] == 'switch'] if len(routing) else routing
  return headline + ''.join(
    f'; routing premise ({r["condition"]}): top-1 with the Switch loss minus dense d_ff {study.EXPERT_WIDTH}, ln MSE '
    f'{r["ln MSE, MoE - dense"]:+.2f} [{r["ci_lo"]:+.2f}, {r["ci_hi"]:+.2f}] ({r["reading"]})'
    for r in switch.to_dict('records')
  )


def present(result: base.Result, ctx: base.Context) -> base.Presentation:
  routing = routing_table(result.full, result.frame)
  headline = _headline(result, routing)
  frame = result.frame.dropna(subset=['point'])
  failed = frame[frame['status'] != 'completed'].groupby('point').size().to_dict()
  notes = (
    [f'runs not completed: {failed} (the z-loss arms count them as failed; elsewhere a rate with one is not eligible)']
    if failed
    else []
  )
  return base.Presentation(
    headline=headline,
    checks=study.measurement(frame),
    tables=[
      base.Table(
        'load points at their chosen rate and T, per input condition: max/mean load on the held-out inputs at step '
        '0 and at the end, its change, held-out MSE (mean and 95% CI over seeds); each point at its own T (a '
        'doubling moves only the points a verdict reads: the switch and bias rows of offset and centred, judged by '
        'no verdict, may sit at a shorter T than their none row)',
        load_table(result.full),
      ),
      base.Table(
        'the routing premise, reported (no verdict here compares routing choices): on each routing-task condition, '
        f'each trained top-1 point minus the dense FFN of its expert width (d_ff {study.EXPERT_WIDTH}, the same '
        'inputs, its '
        'own tuned '
        'rate), ln held-out MSE paired by seed, each at its chosen rate and T; switch is the premise, none and bias '
        f'diagnostics. Reading (fixed before its runs): passes where the CI lies at or below -{study.ROUTING_MARGIN:g} '
        "(moe_topk's margin: routing matters, so a collapse costs fit), fails where it lies above with both rates "
        "inside their grids, undecided where it straddles, n/a at unequal T or a dense rate at its grid's edge. The "
        'MoE trains at capacity factor 1.0 (tokens beyond it dropped); held-out MSE is dropless',
        routing,
      ),
      base.Table(
        'z-loss arms: the failed fraction per seeds (the pilot, which fixes the test rate, or the test), rate, point '
        "(none, z_loss, frozen router, float32 router) and budget, and the test points' router z (the mean squared "
        'logsumexp of the router logits over the second half of training, completed runs) (mean and 95% CI over '
        f'seeds); bfloat16 router unless float32, no clipping, one log every {zloss.Z_LOG_EVERY["full"]} steps at '
        'full; the test rate '
        f'is the smallest pilot rate whose failed fraction lies in [{zloss.MARGINAL[0]:g}, {zloss.MARGINAL[1]:g}] at '
        f'every budget. Failed: diverged or held-out relative MSE >= {zloss.FAILED_MSE:g}; reported beside it, gating '
        'nothing: failed at relative MSE >= 1 (failed_at_1) and diverged only',
        unstable_table(frame),
      ),
    ],
    figures=[figure(result, ctx)],
    notes=notes,
  )
