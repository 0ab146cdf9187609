"""A study's report: the environment it ran in, report.json assembled, report.md rendered and written.

Everything here reads a finished regime loop's results (runner.py) or a report.json; nothing runs.
"""

import collections
from collections.abc import Mapping, Sequence
import datetime
import math
import os
import platform
import subprocess
from typing import Any

import jax
import pandas as pd

from ffn_research import analysis as analysis_lib
from ffn_research import config as config_lib
from ffn_research import io as io_lib
from ffn_research import stats as verdict_lib
from ffn_research.ablations import base
from ffn_research.ablations import regime as regime_lib

CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # whose commit a report names


# --------------------------------------------------------------------------- environment


def git_commit(repo_root: str = CHECKOUT) -> str:
  """Short commit hash of repo_root, '+dirty' if it has uncommitted changes; 'unknown' without git."""

  def git(*args: str) -> str:
    return subprocess.run(
      ['git', '-C', repo_root, *args], capture_output=True, text=True, timeout=30, check=True
    ).stdout.strip()

  try:
    head, dirty = git('rev-parse', '--short=12', 'HEAD'), git('status', '--porcelain', '--untracked-files=no')
  except (OSError, subprocess.SubprocessError):
    return 'unknown'
  return head + ('+dirty' if dirty else '')


def environment() -> dict[str, Any]:
  """Machine, load, jax version and device, commit, date (UTC)."""
  device = jax.devices()[0]
  try:
    load = [round(x, 2) for x in os.getloadavg()]
  except OSError:
    load = None
  return {
    'machine': f'{platform.machine()} {platform.system()}, {os.cpu_count()} CPU cores',
    'processor': io_lib.cpu_name(),
    'load_average_at_start': load,
    'python': platform.python_version(),
    'jax': jax.__version__,
    'backend': jax.default_backend(),
    'device': f'{len(jax.devices())} x {device.device_kind}',
    'commit': git_commit(),
    'date': utc_now(),
  }


def utc_now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')


# --------------------------------------------------------------------------- markdown

fmt = analysis_lib.format_value


def failed_checks(v: dict[str, Any]) -> list[dict[str, Any]]:
  """A report.json verdict's failed regime checks (none in reports written before checks existed)."""
  return [c for c in v.get('checks') or () if not c['passed']]


def outcome_text(v: dict[str, Any]) -> str:
  """A report.json verdict's outcome in one phrase: `invalid` names its failed checks."""
  failed = failed_checks(v)
  if v['outcome'] == verdict_lib.INVALID and failed:
    return f'{v["outcome"]} (failed: {", ".join(c["name"] for c in failed)})'
  return v['outcome']


def _value(x) -> str:
  """A swept value as written: floats to 12 significant digits (0.1 x 3 prints 0.3, not 0.30000000000000004)."""
  return f'{x:.12g}' if isinstance(x, float) else str(x)


def _p_text(v) -> str:
  """'p = x (Holm-adjusted y)' where the verdict has a p-value; '' otherwise."""
  if v.p_value is None or not math.isfinite(v.p_value):
    return ''
  if v.outcome == verdict_lib.INVALID:  # its p decides nothing: it enters Holm at 1 so the family stays fixed
    return f'p = {fmt(v.p_value)} of the rule alone (not a decision: an invalid verdict enters Holm at p = 1)'
  withheld = any(not c.passed for c in v.checks)  # a failed check (not Holm) made a decided rule inconclusive
  if v.outcome == verdict_lib.INCONCLUSIVE and v.raw_outcome in verdict_lib.DECISIVE and withheld:
    holm = f'; Holm-adjusted {fmt(v.p_holm)}' if v.p_holm is not None else ''
    return f'p = {fmt(v.p_value)} of the rule alone{holm} (not a decision: a failed check made it inconclusive)'
  holm = f', Holm-adjusted {fmt(v.p_holm)}' if v.p_holm is not None else ''
  return f'p = {fmt(v.p_value)}{holm}'


def changed_by(changes: Sequence[Mapping[str, Any]], i: int) -> list[Mapping[str, Any]]:
  """The design changes made after results that moved verdict `i` (1-based)."""
  return [c for c in changes if i in (c.get('verdicts') or ())]


POSITIVE = (verdict_lib.REPRODUCED, verdict_lib.MEASURED)  # what a change can turn a null into


def positive(c: Mapping[str, Any], i: int | None = None) -> bool:
  """The change turned verdict i (any verdict: None) from a null into reproduced (a measurement: measured)."""
  to = c.get('to_positive') or ()
  return bool(to) if i is None else i in to


def change_line(c: Mapping[str, Any], i: int, outcome: str = verdict_lib.REPRODUCED) -> str:
  """The change's line under verdict i; `outcome`: the verdict's outcome now (a change that once turned it positive
  says so, and that the positive is not this report's when the verdict is no longer reproduced)."""
  flag = ''
  if positive(c, i):
    now = '' if outcome in POSITIVE else f"; not in effect: this report's verdict is {outcome}"
    flag = f' **(null -> positive when made{now})**' if now else ' **(null -> positive)**'
  return f'**changed after results** ({c["date"]}{flag}): {c["change"]} ({c["outcome"]})'


def ladder_text(v: verdict_lib.Verdict) -> str:
  return '; '.join(
    f'{r["level"]} ({r["steps"]} steps): {fmt(r["statistic"])} [{fmt(r["ci"][0])}, {fmt(r["ci"][1])}] '
    + (f'premise fails (the rule alone: {r["outcome"]})' if r.get('premise') is False else r['outcome'])
    for r in v.ladder
  )


def _verdict_md(v: verdict_lib.Verdict, changes: Sequence[Mapping[str, Any]] = (), i: int = 0) -> list[str]:
  lo, hi = v.ci
  p = _p_text(v)
  out = [f'- **{v.outcome}** — {v.claim}']
  flagged = [c for c in changes if positive(c, i)]
  out += [f'  - {change_line(c, i, v.outcome)}' for c in flagged]
  if len(changes) > len(flagged):
    out.append(f'  - {len(changes) - len(flagged)} other design change(s) after results moved it: see below')
  if v.scope:
    out.append(f'  - scope: {v.scope}')
  out += [
    f'  - statistic: {fmt(v.statistic)}, 95% CI [{fmt(lo)}, {fmt(hi)}], n = {v.n}' + (f'; {p}' if p else ''),
    f'  - claim kind: {v.kind or "not declared"}; premise (positive control): {v.premise or "not declared"}',
  ]
  if v.ladder:
    out.append(f'  - budget ladder: {ladder_text(v)}')
  out += [
    f'  - test: {v.test}',
    f'  - rule (fixed before the run): {v.rule}',
  ]
  gated = v.outcome != v.raw_outcome and v.failed_checks and v.detail.startswith(f'{v.outcome}: ')
  if gated:  # gate's detail names each failed check that set the outcome, with its numbers: said once, here
    invalidating = [c for c in v.failed_checks if c.demote == verdict_lib.INVALID]
    fixable = all(c.remedy for c in invalidating)  # one check no extension remedies leaves it undecidable ...
    priced = all('next step: ' in c.detail for c in invalidating)  # ... unless each names a step past the regime
    as_run, never = (
      (', as run,', '')
      if fixable
      else (" within the regime's limits", ' (each failed check names its next step, priced)')
      if priced
      else ('', ' (no extension remedies it)')
    )
    why = (
      f'**invalid: a check the verdict rests on failed, so this setup{as_run} cannot decide the claim{never}**'
      if v.outcome == verdict_lib.INVALID
      else f'**{v.outcome}** (the rule alone gave {v.raw_outcome})'
    )
    out.append(f'  - {why}; failed: ' + v.detail.removeprefix(f'{v.outcome}: '))
  elif v.detail:
    out.append(f'  - {v.detail}')
  if v.checks:
    out.append('  - regime checks:')
    out += [
      f'    - {"PASS" if c.applies else "n/a"} {c.name}: {c.detail}'
      if c.passed
      else f'    - **FAIL** {c.name}' + ('' if gated and f'{c.name}: {c.detail}' in v.detail else f': {c.detail}')
      for c in v.checks
    ]
  return out


def _holm_md(verdicts: Sequence[verdict_lib.Verdict]) -> list[str]:
  m = sum(v.p_holm is not None for v in verdicts)
  if not m or all(v.kind == verdict_lib.MEASUREMENT for v in verdicts):  # measurements decide nothing to correct
    return []
  return [
    f'Multiple comparisons: Holm correction over the {m} verdict(s) above (the ablation is one family, '
    f'fixed in its code; an `invalid` verdict enters with p = 1); a reproduced / not reproduced outcome '
    f'stands only if its Holm-adjusted p is < {verdict_lib.ALPHA:g}. '
    'See docs/reproduce.md#outcomes-and-regime-checks.',
    '',
  ]


def _seeds_text(n: int, offset: int) -> str:
  return f'{n} seeds' if not offset else f'{n} seeds ({offset} ... {offset + n - 1}: --seed_offset={offset})'


def _step_source(r: dict[str, Any]) -> str:
  """Where a report's reference step came from, when it is not the invocation that wrote the report."""
  source = r.get('reference_step_from', 'timed by this invocation')
  return '' if source == 'timed by this invocation' else f' {source}'


def _pass_table(r: dict[str, Any]) -> list[str]:
  """The regime's passes, one row each (its commit, runs, wall time, failed checks, what it extended), and the runs
  finished on disk before the first recorded pass."""
  lines = [
    '| pass | commit | runs planned | runs run | wall (s) | failed checks | then |',
    '|---|---|---|---|---|---|---|',
  ]
  for it in r['iterations']:
    failed = '; '.join(it['failed']) or '–'
    if it.get('judged_again_at'):
      failed = f'(its runs judged again at {it["judged_again_at"]}) {failed}'
    if it.get('earlier'):
      failed = f'(an earlier policy or regime) {failed}'
    part = it.get('partial') or it.get('rates_only')  # rates_only: the key's earlier name (older records)
    then = ('(the part that fits: the whole extension passed the cap) ' if part else '') + (
      '; '.join(it['actions']) or '–'
    )
    lines.append(
      f'| {it["iteration"]} | {it.get("commit") or "–"} | {it["runs_planned"]} | {it["runs_run"]} | '
      f'{it["wall_s"]:.0f} | {failed.replace("|", "/")} | {then.replace("|", "/")} |'
    )
  first = next((it for it in r['iterations'] if not it.get('earlier')), None)
  if first and first['runs_run'] < first['runs_planned']:
    lines += [
      '',
      f'{first["runs_planned"] - first["runs_run"]} of the {first["runs_planned"]} runs pass {first["iteration"]} '
      'planned were finished on disk before it began (an invocation stopped before its pass ended, or an earlier '
      'run of the same configs); the wall time of every invocation is in the total.',
    ]
  return lines


def regime_markdown(r: dict[str, Any]) -> list[str]:
  """report.json's "regime" as a short section: the loop's iterations, where each point ended, the cost."""
  pol = r['policy']
  cap = (
    f'cap {r["cap_ref_s"]:.0f} reference-seconds = {r["cap_s"]:.0f} run-seconds on this machine (reference step '
    f'{r["reference_step_s"] * 1e3:.3f} ms{_step_source(r)}, {r["speed"]:.2f} x the reference machine). Spent '
    f'{r["spent_s"]:.0f} '
    f'run-seconds ({r["spent_ref_s"]:.0f} reference-seconds, each stretch at the step of the invocation that ran '
    'it where the record has one)'
    + (' — over the cap: the last pass cost more than its estimate' if r['spent_ref_s'] > r['cap_ref_s'] else '')
    if 'cap_ref_s' in r
    else f'cap {r["cap_s"]:.0f} run-seconds. Spent {r["spent_s"]:.0f} run-seconds'
  )
  lines = [
    '## Regime',
    '',
    f'Policy (docs/reproduce.md#the-regime-policy): rates {{{", ".join(f"{x:g}" for x in pol["rates"])}}} '
    f"to start (an arm may declare its own grid and a multiple of T: the table below has each point's), "
    f'T = {pol["steps"]} steps (and the ladder below it), {_seeds_text(pol["seeds"], r.get("seed_offset", 0))}; '
    f'up to {pol["max_extensions"]} '
    f'rate extensions (x{pol["factor"]:g}) per direction and {pol["max_doublings"]} doublings of T per point; '
    f'{cap}. Stopped: {r["stopped"]}.',
    '',
  ]
  lines += _pass_table(r)
  if r.get('next'):
    n = r['next']
    lines += [
      '',
      f'Next extension, not run ({n["why"]}): {n["runs"]} runs, about {n["cost_s"]:.0f} run-seconds: '
      + '; '.join(n['actions']),
    ]
  levels = [lv for lv in reversed(regime_lib.LEVELS) if any(f'rate_{lv}' in p for p in r['points'])]
  lines += [
    '',
    'Per point: the rates of its grid at its ladder (T, T/2, T/4), the rates a doubling dropped (run at the '
    'earlier, shorter budgets only), T, and the rate chosen at each budget.',
    '',
    '| point | rates run | dropped by a doubling | T | ' + ' | '.join(f'rate at {lv}' for lv in levels) + ' |',
    '|---|---|---|---|' + '---|' * len(levels),
  ]
  for p in r['points']:
    rates = ' | '.join(fmt(p.get(f'rate_{lv}')) for lv in levels)
    dropped = ', '.join(f'{x:g}' for x in p.get('dropped') or ()) or '–'
    lines.append(f'| {p["point"]} | {", ".join(f"{x:g}" for x in p["rates"])} | {dropped} | {p["steps"]} | {rates} |')
  return lines + ['']


def changes_markdown(changes: Sequence[dict[str, Any]], key: str = '') -> list[str]:
  """report.json's "design_changes": every change made after a result of the study was seen (`key`: the verdict
  renumbering a dropped claim made, said above the table)."""
  lines = ['## Design changes after results', ''] + ([key, ''] if key else [])
  if not changes:
    return lines + ['None: no change to the design, statistic or rule was made after a result of it was seen.', '']
  lines += [
    "Every change to this study's design, statistic or rule made after one of its results was seen (the full "
    'account: history.md beside this report).',
    '',
    '| date | commit | change | outcome before -> after | verdicts |',
    '|---|---|---|---|---|',
  ]
  for c in changes:
    which = ', '.join(map(str, c.get('verdicts') or ())) or '–'
    flag = f' **(null -> positive: {", ".join(map(str, c["to_positive"]))})**' if positive(c) else ''
    cells = (c['date'], c['commit'] or '–', c['change'], c['outcome'] + flag, which)
    lines.append('| ' + ' | '.join(str(x).replace('|', '/') for x in cells) + ' |')
  return lines + ['']


def report_markdown(report: dict[str, Any]) -> str:
  """report.md from report.json: claim and source, verdicts, design changes, checks, regime, setup, results."""
  lines = _head_md(report) + _verdicts_md(report) + dropped_markdown(report.get('dropped') or [])
  if 'design_changes' in report:
    lines += changes_markdown(report.get('design_changes') or [], renumbering(report.get('dropped') or []))
  if report['checks']:
    lines += ['## Checks of the measurement', '']
    lines += [f'- {"PASS" if c["passed"] else "**FAIL**"} {c["name"]}: {c["detail"]}' for c in report['checks']]
    lines.append('')
  if report.get('regime'):
    lines += regime_markdown(report['regime'])
  lines += _setup_md(report) + _results_md(report)
  return '\n'.join(lines)


def dropped_markdown(dropped: Sequence[Mapping[str, Any]]) -> list[str]:
  """The claims the study no longer judges (`base.Dropped`), each with why: a section after the verdicts."""
  if not dropped:
    return []
  lines = ['## Claims not tested here', '']
  for d in dropped:
    when = f'{d["date"]}, {d["commit"]}' if d.get('commit') else d['date']
    lines.append(f'- **dropped** ({when}; {d["before"]} before): {d["claim"]} — {d["reason"]}')
  key = renumbering(dropped)
  return lines + ([key, ''] if key else [''])


def renumbering(dropped: Sequence[Mapping[str, Any]]) -> str:
  """The key to the verdict numbers that a drop moved ('' if none did)."""
  keys = [f'{d["renumbered"]} (dropped {d["date"]})' for d in dropped if d.get('renumbered')]
  return 'Verdict numbers in the text of earlier change rows are those of their day: ' + '; '.join(keys) if keys else ''


def _head_md(report: dict[str, Any]) -> list[str]:
  return [
    f'# {report["name"]}',
    '',
    f'**Claim.** {report["claim"]}',
    '',
    f'**Source.** {report["citation"]} (full references: docs/references.md in the repository). '
    f'**Published / theoretical number.** {report["published"]}',
    '',
    f'**Scale: {report["scale"]}** — {report["scale_note"]}.',
    '',
    '## Verdicts',
    '',
  ]


def _verdicts_md(report: dict[str, Any]) -> list[str]:
  verdicts = report.get('verdicts_obj') or [verdict_lib.Verdict.from_dict(v) for v in report['verdicts']]
  changes = report.get('design_changes') or []
  lines = []
  for i, v in enumerate(verdicts, 1):
    lines += _verdict_md(v, changed_by(changes, i), i)
  return lines + [''] + _holm_md(verdicts) + [f'**Main figure.** {report["headline"]}', '']


def _setup_md(report: dict[str, Any]) -> list[str]:
  env = report['environment']
  lines = ['## Setup', '']
  if report['setup']:
    lines += [report['setup'], '']
  for s in report['sweeps']:
    fixed = ', '.join(f'{k}={v}' for k, v in s['fixed'].items())
    swept = '; '.join(f'{k} ∈ {{{", ".join(map(_value, v))}}}' for k, v in s['swept'].items())
    lines.append(f'- sweep `{s["name"]}`: {s["runs"]} runs ({s["seeds"]} seeds); {fixed}; swept {swept}')
  st = report['status_counts']
  on_disk = (
    f" (the last pass's plan; {report['runs_on_disk']:,} runs on disk in all: every rate and budget the loop ran)"
    if report.get('runs_on_disk')
    else ''
  )
  return lines + [
    '',
    '- runs: ' + ', '.join(f'{n} {k}' for k, n in sorted(st.items())) + on_disk,
    f'- machine: {env["machine"]} ({env["processor"]}), load average {env["load_average_at_start"]} at the start '
    'of the invocation that wrote this report; '
    f'{env["device"]}, jax {env["jax"]} ({env["backend"]}), python {env["python"]}',
    _commit_line(report),
    f'- wall time: {report["total_wall_time_s"]:.0f} s summed over the invocations that built this report, '
    f'judging-only ones too ({report["wall_time_s"]:.0f} s in the last; a rerun redoes no finished run); '
    f"{report['compute_time_s']:.0f} s summed over the runs' own wall times",
    '',
  ]


def _commit_line(report: dict[str, Any]) -> str:
  """The commit that wrote the report and, where they differ (a --judge_only over older runs), the passes' commits;
  with the invocations' record, when the runs were made, at which commits, and the machine's load and speed then."""
  env, regime = report['environment'], report.get('regime') or {}
  calls = [c for c in regime.get('invocations', []) if not c.get('judge_only')]
  if calls:
    commits = ', '.join(dict.fromkeys(str(c['commit'])[:7] for c in calls))
    read = collections.Counter(c['source'] for c in calls if c.get('source'))
    where = ''.join(f' ({n} of them as read from {src})' for src, n in read.items())
    ended = f'; the last ended {calls[-1]["end"]}' if calls[-1].get('end') else ''
    return (
      f'- judged at commit {env["commit"]}, {env["date"]}; {len(calls)} training '
      f'invocation(s){where}, '
      f'started {calls[0]["start"]} to {calls[-1]["start"]}{ended}, at commits {commits}; {_load_text(calls, regime)}'
    )
  passes = dict.fromkeys(it.get('commit') for it in regime.get('iterations', []))
  older = [str(c)[:12] for c in passes if c and str(c)[:7] != str(env['commit'])[:7]]
  if not older:
    return f'- commit {env["commit"]}, {env["date"]}'
  return f'- judged at commit {env["commit"]}, {env["date"]}; the runs at {", ".join(older)} (the regime table)'


def _load_text(calls: Sequence[Mapping[str, Any]], regime: Mapping[str, Any]) -> str:
  """The machine's load at the training invocations' starts and its speed (the reference step each timed): the
  run-seconds, and the prices made of them, come from a machine this loaded."""
  loads = [c['load'] for c in calls if c.get('load') is not None]
  said = (
    f'load average at their starts {min(loads):.2f}-{max(loads):.2f}'
    if len(loads) == len(calls)
    else f'load average at their starts {min(loads):.2f}-{max(loads):.2f} where recorded ({len(loads)} of them)'
    if loads
    else 'their load not recorded'
  )
  steps = [float(s) * 1e3 for _, s in regime.get('ledger', []) if s]
  if steps:
    said += (
      f'; the reference step timed {min(steps):.3g}-{max(steps):.3g} ms by the {len(steps)} training invocations '
      'that timed one'
    )
  return said + ' (the run-seconds, and the prices made of them, come from the machine as it was then)'


def _results_md(report: dict[str, Any]) -> list[str]:
  lines = ['## Results', '']
  for t in report.get('tables_obj') or [
    base.Table(t['title'], pd.DataFrame(t['rows'], columns=t['columns'])) for t in report.get('tables', [])
  ]:
    lines += [f'### {t.title}', '', analysis_lib.markdown_table(list(t.frame.columns), t.frame.itertuples(index=False))]
  for f in report['figures']:
    lines += [f'![{f["caption"]}]({f["file"]})', '', f'*{f["caption"]}*', '']
  if report['notes']:
    lines += ['## Notes', ''] + [f'- {n}' for n in report['notes']] + ['']
  return lines + [
    '---',
    f'Produced by `python -m experiments.reproduce --ablation={report["name"]} --scale={report["scale"]}`.',
    '',
  ]


def fixed_settings(config, swept: Sequence[str] = ()) -> dict[str, Any]:
  """The arm's settings a reader needs, as the runs used them: no key the points override (`swept` shows those), no
  task key the arm's task does not read (task.function belongs to the `function` task only), MoE keys for MoE only."""
  out = {}
  for key in (
    'task.name',
    'task.function',
    'model.arch',
    'model.activation',
    'model.d_model',
    'model.d_ff',
    'train.batch_size',
    'train.optimizer',
    'model.moe.num_experts',
    'model.moe.top_k',
  ):
    if key.startswith('model.moe.') and not config.model.moe.num_experts:  # a dense FFN reads none of them
      continue
    if key in swept or (key == 'task.function' and config.task.name != 'function'):
      continue
    try:
      out[key] = config_lib.get_path(config, key)
    except (KeyError, AttributeError):
      pass
  return out


def varied_keys(arm: base.Arm) -> list[str]:
  """The config keys the arm's points or its budgets set (a budget may set more than the steps: a batch size)."""
  budget = arm.budget(4) if arm.budget else base.budget(4)
  return list(dict.fromkeys([k for o in arm.points.values() for k in o] + [k for k in budget if k in _BUDGET_SHOWN]))


_BUDGET_SHOWN = ('train.batch_size', 'train.warmup_steps')  # budget keys a reader needs (not logging, checkpoints)


def swept_values(frame: pd.DataFrame, arm: base.Arm) -> dict[str, list[Any]]:
  keys = varied_keys(arm) + [regime_lib.LR, regime_lib.STEPS]
  return {k: _values(frame[k]) for k in keys if k in frame}


def _values(column: pd.Series) -> list[Any]:
  """A column's distinct values, sorted: numbers numerically (whole floats as ints: a column with NaN is float),
  anything else as text."""
  values = set(column.dropna().tolist())
  if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
    return sorted(int(v) if float(v).is_integer() else v for v in values)
  return sorted(values, key=str)


def assemble(
  study, scale, env, wall, total_wall, frame, shown, verdicts, sweeps, regime_rec, runs_on_disk: int = 0
) -> dict[str, Any]:
  status = frame['status'].value_counts().to_dict()
  return {
    'name': study.name,
    'claim': study.claim,
    'citation': study.citation,
    'published': study.published,
    'scale': scale,
    'scale_note': base.SCALE_NOTES[scale],
    'setup': study.setup,
    'sweeps': sweeps,
    'environment': env,
    'wall_time_s': wall,
    'total_wall_time_s': total_wall,
    'compute_time_s': regime_rec['spent_s'],
    'status_counts': {str(k): int(v) for k, v in status.items()},
    'runs_on_disk': runs_on_disk,
    'headline': shown.headline,
    'verdicts': [v.to_dict() for v in verdicts],
    'design_changes': [c.to_dict() for c in study.changes],
    'dropped': [d.to_dict() for d in study.dropped],
    'checks': [c.to_dict() for c in shown.checks],
    'regime': regime_rec,
    'tables': [
      {'title': t.title, 'columns': list(t.frame.columns), 'rows': io_lib.json_safe(t.frame.to_dict(orient='records'))}
      for t in shown.tables
    ],
    'figures': [{'file': f.file, 'caption': f.caption} for f in shown.figures],
    'notes': list(shown.notes),
  }


def write(outdir: str, report: dict[str, Any], verdicts, tables) -> None:
  io_lib.write_json(os.path.join(outdir, 'report.json'), report)
  on_disk = io_lib.read_json(os.path.join(outdir, 'report.json'))  # NaN -> null, as a reader sees it
  io_lib.write_text(
    os.path.join(outdir, 'report.md'), report_markdown({**on_disk, 'verdicts_obj': verdicts, 'tables_obj': tables})
  )
  name = report['name']
  # A check shared by several verdicts is printed once, with the verdicts it invalidates.
  failed: dict[tuple[str, str], list[str]] = {}  # (check name, detail) -> verdict numbers
  for i, v in enumerate(verdicts, 1):
    base.log(f'{name}: verdict {i}: {v.outcome}: {v.claim}')
    for c in v.failed_checks:
      failed.setdefault((c.name, c.detail), []).append(str(i))
  for (check, detail), which in failed.items():
    base.log(f'{name}: failed check (verdict {", ".join(which)}): {check}: {detail}')
  for c in report['checks']:
    if not c['passed']:
      base.log(f'{name}: CHECK FAILED: {c["name"]}: {c["detail"]}')
  base.log(
    f'{name}: wrote {outdir}/report.md ({report["wall_time_s"]:.0f} s; {report["total_wall_time_s"]:.0f} s '
    'over every invocation)'
  )


def index_line(name: str, report: dict[str, Any] | None, error: str | None = None) -> str:
  if report is None:
    return f'- **{name}**: error: {error}'
  verdicts = '; '.join(outcome_text(v) for v in report['verdicts'])
  fig = f' — [plot]({name}/{report["figures"][0]["file"]})' if report['figures'] else ''
  return (
    f'- **{name}** ({report["scale"]}): {report["claim"]} — **{verdicts}** — {report["headline"]}'
    f'{fig} — [report]({name}/report.md)'
  )
