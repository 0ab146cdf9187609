"""Run an ablation's sweeps, analyse them, write report.md / report.json; publish to docs/.

Layout of DIR (the --workdir):

  DIR/NAME/<sweep>/            one sweep.run_sweep workdir per arm (results.csv, runs/...)
  DIR/NAME/regime.json         the regime loop's state and record (a killed loop resumes from it)
  DIR/NAME/report.md           claim, setup, results tables, plots, verdicts
  DIR/NAME/report.json         the same, machine-readable
  DIR/NAME/*.png               plots with the reference drawn on them
  DIR/index.md                 --ablation=all: one line per ablation
"""

import ast
import collections
from collections.abc import Callable, Mapping, Sequence
import dataclasses
import datetime
import functools
import glob
import hashlib
import inspect
import json
import math
import os
import platform
import posixpath
import re
import shutil
import subprocess
import sys
import time
from typing import Any

import jax
import numpy as np
import optax
import pandas as pd

from ffn_research import ablations
from ffn_research import analysis as analysis_lib
from ffn_research import config as config_lib
from ffn_research import io as io_lib
from ffn_research import stats as verdict_lib
from ffn_research import sweep as sweep_lib
from ffn_research.ablations import base
from ffn_research.ablations import regime as regime_lib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README_BEGIN = '<!-- results:begin -->'
README_END = '<!-- results:end -->'
RESULTS_PAGE = 'docs/results/README.md'  # the full Results section; README.md carries its headline table
HISTORY = 'history.md'  # docs/results/NAME/history.md: earlier runs, hand-written; publishing keeps it
REJUDGED = 'docs/results/rejudged-2026-11-27.md'  # what the reports published before issue 45 support under its rules


class ReproduceError(ValueError):
  """A bad request (unknown scale, unpublishable report, ...): one line for the user."""


def log(msg: str) -> None:
  print(f'[reproduce] {msg}', file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- environment


def git_commit(repo_root: str = REPO_ROOT) -> str:
  """Short commit hash of repo_root, '+dirty' if it has uncommitted changes; 'unknown' without git."""
  try:
    head = subprocess.run(
      ['git', '-C', repo_root, 'rev-parse', '--short=12', 'HEAD'],
      capture_output=True,
      text=True,
      timeout=30,
      check=True,
    ).stdout.strip()
    dirty = subprocess.run(
      ['git', '-C', repo_root, 'status', '--porcelain', '--untracked-files=no'],
      capture_output=True,
      text=True,
      timeout=30,
      check=True,
    ).stdout.strip()
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
    'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
  }


# --------------------------------------------------------------------------- markdown

_fmt = analysis_lib.format_value


def failed_checks(v: dict[str, Any]) -> list[dict[str, Any]]:
  """A report.json verdict's failed regime checks (none in reports written before checks existed)."""
  return [c for c in v.get('checks') or () if not c['passed']]


def outcome_text(v: dict[str, Any]) -> str:
  """A report.json verdict's outcome in one phrase: `invalid` names its failed checks."""
  failed = failed_checks(v)
  if v['outcome'] == verdict_lib.INVALID and failed:
    return f'{v["outcome"]} (failed: {", ".join(c["name"] for c in failed)})'
  return v['outcome']


def _p_text(v) -> str:
  """'p = x (Holm-adjusted y)' where the verdict has a p-value; '' otherwise."""
  if v.p_value is None or not math.isfinite(v.p_value):
    return ''
  if v.outcome == verdict_lib.INVALID:  # its p decides nothing: it enters Holm at 1 so the family stays fixed
    return f'p = {_fmt(v.p_value)} of the rule alone (not a decision: an invalid verdict enters Holm at p = 1)'
  holm = f', Holm-adjusted {_fmt(v.p_holm)}' if v.p_holm is not None else ''
  return f'p = {_fmt(v.p_value)}{holm}'


def changed_by(changes: Sequence[Mapping[str, Any]], i: int) -> list[Mapping[str, Any]]:
  """The design changes made after results that moved verdict `i` (1-based)."""
  return [c for c in changes if i in (c.get('verdicts') or ())]


def _positive(c: Mapping[str, Any], i: int | None = None) -> bool:
  """The change turned verdict i (any verdict: None) from a null into reproduced."""
  to = c.get('to_positive') or ()
  return bool(to) if i is None else i in to


def _change_line(c: Mapping[str, Any], i: int) -> str:
  flag = ' **(null -> positive)**' if _positive(c, i) else ''
  return f'**changed after results** ({c["date"]}{flag}): {c["change"]} ({c["outcome"]})'


def ladder_text(v: verdict_lib.Verdict) -> str:
  return '; '.join(
    f'{r["level"]} ({r["steps"]} steps): {_fmt(r["statistic"])} [{_fmt(r["ci"][0])}, {_fmt(r["ci"][1])}] {r["outcome"]}'
    for r in v.ladder
  )


def _verdict_md(v: verdict_lib.Verdict, changes: Sequence[Mapping[str, Any]] = (), i: int = 0) -> list[str]:
  lo, hi = v.ci
  p = _p_text(v)
  out = [f'- **{v.outcome}** — {v.claim}']
  flagged = [c for c in changes if _positive(c, i)]
  out += [f'  - {_change_line(c, i)}' for c in flagged]
  if len(changes) > len(flagged):
    out.append(f'  - {len(changes) - len(flagged)} other design change(s) after results moved it: see below')
  if v.scope:
    out.append(f'  - scope: {v.scope}')
  out += [
    f'  - statistic: {_fmt(v.statistic)}, 95% CI [{_fmt(lo)}, {_fmt(hi)}], n = {v.n}' + (f'; {p}' if p else ''),
    f'  - claim kind: {v.kind or "not declared"}; premise (positive control): {v.premise or "not declared"}',
  ]
  if v.ladder:
    out.append(f'  - budget ladder: {ladder_text(v)}')
  out += [
    f'  - test: {v.test}',
    f'  - rule (fixed before the run): {v.rule}',
  ]
  gated = v.outcome != v.raw_outcome and v.failed_checks and v.detail.startswith(f'{v.outcome}: ')
  if gated:  # gate's detail names each failed check with its numbers: said once, here
    why = (
      '**invalid: a check the verdict rests on failed, so this setup, as run, cannot decide the claim**'
      if v.outcome == verdict_lib.INVALID
      else f'**{v.outcome}** (the rule alone gave {v.raw_outcome})'
    )
    out.append(f'  - {why}; failed: ' + v.detail.removeprefix(f'{v.outcome}: '))
  elif v.detail:
    out.append(f'  - {v.detail}')
  if v.checks:
    out.append('  - regime checks:')
    out += [
      f'    - PASS {c.name}: {c.detail}'
      if c.passed
      else f'    - **FAIL** {c.name}' + ('' if gated else f': {c.detail}')
      for c in v.checks
    ]
  return out


def _holm_md(verdicts: Sequence[verdict_lib.Verdict]) -> list[str]:
  m = sum(v.p_holm is not None for v in verdicts)
  if not m:
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


def regime_markdown(r: dict[str, Any]) -> list[str]:
  """report.json's "regime" as a short section: the loop's iterations, where each point ended, the cost."""
  pol = r['policy']
  cap = (
    f'cap {r["cap_ref_s"]:.0f} reference-seconds = {r["cap_s"]:.0f} run-seconds on this machine (reference step '
    f'{r["reference_step_s"] * 1e3:.3f} ms, {r["speed"]:.2f} x the reference machine). Spent {r["spent_s"]:.0f} '
    f'run-seconds ({r["spent_ref_s"]:.0f} reference-seconds)'
    + (' — over the cap: the last pass cost more than its estimate' if r['spent_s'] > r['cap_s'] else '')
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
    '| pass | runs planned | runs run | wall (s) | failed checks | then |',
    '|---|---|---|---|---|---|',
  ]
  for it in r['iterations']:
    failed = '; '.join(it['failed']) or '–'
    if it.get('earlier'):
      failed = f'(an earlier policy or regime) {failed}'
    part = it.get('partial') or it.get('rates_only')  # rates_only: the key's name until 2026-11-26 22:40
    then = ('(the part that fits: the whole extension passed the cap) ' if part else '') + (
      '; '.join(it['actions']) or '–'
    )
    lines.append(
      f'| {it["iteration"]} | {it["runs_planned"]} | {it["runs_run"]} | {it["wall_s"]:.0f} | '
      f'{failed.replace("|", "/")} | {then.replace("|", "/")} |'
    )
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
    '| point | rates run | T | ' + ' | '.join(f'rate at {lv}' for lv in levels) + ' |',
    '|---|---|---|' + '---|' * len(levels),
  ]
  for p in r['points']:
    rates = ' | '.join(_fmt(p.get(f'rate_{lv}')) for lv in levels)
    lines.append(f'| {p["point"]} | {", ".join(f"{x:g}" for x in p["rates"])} | {p["steps"]} | {rates} |')
  return lines + ['']


def changes_markdown(changes: Sequence[dict[str, Any]]) -> list[str]:
  """report.json's "design_changes": every change made after a result of the study was seen."""
  lines = ['## Design changes after results', '']
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
    flag = f' **(null -> positive: {", ".join(map(str, c["to_positive"]))})**' if _positive(c) else ''
    cells = (c['date'], c['commit'] or '–', c['change'], c['outcome'] + flag, which)
    lines.append('| ' + ' | '.join(str(x).replace('|', '/') for x in cells) + ' |')
  return lines + ['']


def report_markdown(report: dict[str, Any]) -> str:
  env = report['environment']
  lines = [
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
  verdicts = report.get('verdicts_obj') or [verdict_lib.Verdict.from_dict(v) for v in report['verdicts']]
  changes = report.get('design_changes') or []
  for i, v in enumerate(verdicts, 1):
    lines += _verdict_md(v, changed_by(changes, i), i)
  lines += [''] + _holm_md(verdicts) + [f'**Main figure.** {report["headline"]}', '']
  if 'design_changes' in report:
    lines += changes_markdown(changes)
  if report['checks']:
    lines += ['## Checks of the measurement', '']
    for c in report['checks']:
      lines.append(f'- {"PASS" if c["passed"] else "**FAIL**"} {c["name"]}: {c["detail"]}')
    lines.append('')
  if report.get('regime'):
    lines += regime_markdown(report['regime'])
  lines += ['## Setup', '']
  if report['setup']:
    lines += [report['setup'], '']
  for s in report['sweeps']:
    fixed = ', '.join(f'{k}={v}' for k, v in s['fixed'].items())
    swept = '; '.join(f'{k} ∈ {{{", ".join(map(str, v))}}}' for k, v in s['swept'].items())
    lines.append(f'- sweep `{s["name"]}`: {s["runs"]} runs ({s["seeds"]} seeds); {fixed}; swept {swept}')
  st = report['status_counts']
  lines += [
    '',
    '- runs: '
    + ', '.join(f'{n} {k}' for k, n in sorted(st.items()))
    + (
      f" (the last pass's plan; {report['runs_on_disk']:,} runs on disk in all: every rate and budget the loop ran)"
      if report.get('runs_on_disk')
      else ''
    ),
    f'- machine: {env["machine"]} ({env["processor"]}), load average at start {env["load_average_at_start"]}; '
    f'{env["device"]}, jax {env["jax"]} ({env["backend"]}), python {env["python"]}',
    f'- commit {env["commit"]}, {env["date"]}',
    f'- wall time: {report["total_wall_time_s"]:.0f} s summed over the invocations that built this '
    f'report ({report["wall_time_s"]:.0f} s in the last; a rerun redoes no finished run); '
    f"{report['compute_time_s']:.0f} s summed over the runs' own wall times",
    '',
    '## Results',
    '',
  ]
  for t in report.get('tables_obj') or [
    base.Table(t['title'], pd.DataFrame(t['rows'], columns=t['columns'])) for t in report.get('tables', [])
  ]:
    lines += [f'### {t.title}', '', analysis_lib.markdown_table(list(t.frame.columns), t.frame.itertuples(index=False))]
  for f in report['figures']:
    lines += [f'![{f["caption"]}]({f["file"]})', '', f'*{f["caption"]}*', '']
  if report['notes']:
    lines += ['## Notes', ''] + [f'- {n}' for n in report['notes']] + ['']
  lines += [
    '---',
    f'Produced by `python -m experiments.reproduce --ablation={report["name"]} --scale={report["scale"]}`.',
    '',
  ]
  return '\n'.join(lines)


# --------------------------------------------------------------------------- running


def run(name: str, workdir: str, scale: str = 'full', *, progress: bool = True, seed_offset: int = 0) -> dict[str, Any]:
  """Run (or resume) ablation `name` at `scale` into workdir/name; write its report; return report.json."""
  return run_study(ablations.get(name), workdir, scale, progress=progress, seed_offset=seed_offset)


def outdir_name(name: str, seed_offset: int = 0) -> str:
  """An ablation's folder in the workdir: NAME, or NAME.seed_offsetK for a run on fresh seeds K, K+1, ..."""
  if seed_offset < 0:
    raise ReproduceError(f'--seed_offset must be >= 0 (got {seed_offset})')
  return name if seed_offset == 0 else f'{name}.seed_offset{seed_offset}'


# --------------------------------------------------------------------------- the regime loop

RECORD = 'regime.json'


def _check_scale(study: base.Study, scale: str) -> None:
  if scale not in ablations.SCALES:
    raise ReproduceError(f'--scale={scale!r} is unknown; allowed: {", ".join(ablations.SCALES)}')
  if scale not in study.regimes:
    raise ReproduceError(f'ablation {study.name} has no {scale!r} scale; it has: {", ".join(study.scales)}')


def _points(arms: Sequence[base.Arm]) -> dict[str, tuple[base.Arm, dict[str, Any]]]:
  out = {}
  for arm in arms:
    for p, o in arm.points.items():
      label = arm.label(p)
      if label in out:
        raise ValueError(f'two points are both labelled {label!r}')
      out[label] = (arm, dict(o))
  return out


def _load_record(outdir: str, study: base.Study, scale: str, points) -> dict[str, Any]:
  """The loop's record (state per point, iterations, wall time); a fresh one if the scale or regime changed."""
  regime = study.regimes[scale]
  policy = io_lib.json_safe(json.loads(json.dumps(dataclasses.asdict(regime))))
  policy['arms'] = sorted(
    {(arm.name, tuple(arm.rates or ()), arm.steps_factor, arm.tuned) for arm, _ in points.values()}
  )
  policy = json.loads(json.dumps(policy))
  rec = io_lib.read_json(os.path.join(outdir, RECORD))
  fresh = {'scale': scale, 'policy': policy, 'state': {}, 'iterations': [], 'wall_s': 0.0}
  if rec is None or rec.get('scale') != scale or rec.get('policy') != policy:
    if rec is not None:
      log(
        f'{study.name}: {RECORD} was written for another scale or regime: the loop starts afresh '
        '(finished runs are still reused; the wall time and passes so far are kept, marked as earlier)'
      )
      earlier = [{**it, 'earlier': True} for it in rec.get('iterations', [])]
      fresh = {**fresh, 'iterations': earlier, 'wall_s': float(rec.get('wall_s') or 0.0)}
    rec = fresh
  state = regime_lib.state_from_json(rec['state'])
  start = regime_lib.initial_state(
    {
      p: (arm.rates or regime.rates) if arm.tuned else [float(arm.base.train.learning_rate)]
      for p, (arm, _) in points.items()
    },
    {p: regime.steps * arm.steps_factor for p, (arm, _) in points.items()},
  )
  rec['state'] = {p: state.get(p, start[p]) for p in points}  # points added to the study start afresh
  return rec


def _save_record(outdir: str, rec: dict[str, Any]) -> None:
  io_lib.write_json(os.path.join(outdir, RECORD), {**rec, 'state': regime_lib.state_to_json(rec['state'])})


def _overrides(arm: base.Arm, point: dict[str, Any], rate: float, steps: int, seed: int) -> dict[str, Any]:
  o = {**point, **(arm.budget or base.budget)(steps), regime_lib.SEED: seed}
  if o.get(regime_lib.STEPS) != steps:
    raise ValueError(f'arm {arm.name!r}: its budget({steps}) must set {regime_lib.STEPS} = {steps}')
  if arm.tuned:
    o[regime_lib.LR] = float(rate)
  return o


def collect_fingerprint(collect: Callable[..., Any]) -> str:
  """What a collect.json was computed by: a hash of the `collect` function's source (its name if none)."""
  try:
    source = inspect.getsource(collect)
  except (OSError, TypeError):
    source = getattr(collect, '__qualname__', repr(collect))
  return hashlib.sha1(source.encode()).hexdigest()[:12]


def _collected(
  collect: Callable[[str, Mapping[str, Any]], dict[str, Any]], run_dir: str, row: dict[str, Any]
) -> dict[str, Any]:
  """A study's `collect` of a finished run, cached in the run's folder (collect.json) with the function's
  fingerprint: a cache written by another version of `collect` (or by one before the fingerprint) is
  computed again, so that a changed collect never reads old values. A change only in a helper that
  collect calls is not seen: edit collect too (or delete the collect.json files)."""
  path = os.path.join(run_dir, 'collect.json')
  key = collect_fingerprint(collect)
  cached = io_lib.read_json(path)
  if isinstance(cached, dict) and cached.get('collect') == key and isinstance(cached.get('values'), dict):
    return cached['values']
  values = io_lib.json_safe(collect(run_dir, row))
  io_lib.write_json(path, {'collect': key, 'values': values})
  return values


def _run_pass(
  study: base.Study, outdir: str, points, rec, regime: base.Regime, progress: bool, tick, seed_offset: int
) -> tuple[pd.DataFrame, int]:
  """Run (resume) every planned run, arm by arm; (the frame of every planned run, runs that were not finished)."""
  planned = regime_lib.plan(rec['state'])
  by_arm: dict[str, list[tuple[str, dict[str, Any]]]] = {}
  for p, runs in planned.items():
    arm, o = points[p]
    for rate, steps in runs:
      for seed in range(seed_offset, seed_offset + regime.seeds):
        by_arm.setdefault(arm.name, []).append((p, _overrides(arm, o, rate, steps, seed)))
  arms = {arm.name: arm for arm, _ in points.values()}
  frames, todo = [], 0
  for i, (name, arm_runs) in enumerate(by_arm.items()):
    arm, sweep_dir = arms[name], os.path.join(outdir, name)
    label = {sweep_lib.run_name(o): p for p, o in arm_runs}
    done = sum(bool(io_lib.RunDir(os.path.join(sweep_dir, 'runs', n)).finished()) for n in label)
    todo += len(label) - done
    log(f'{study.name}: arm {i + 1}/{len(by_arm)} {name!r}: {len(arm_runs)} runs, {done} already finished')
    sweep_lib.run_sweep(
      arm.base, [o for _, o in arm_runs], sweep_dir, pad_flops_factor=arm.pad_flops_factor, progress=progress
    )
    tick()
    f = analysis_lib.load_results(sweep_dir)
    f['arm'], f['point'] = name, f['name'].map(label)
    if regime_lib.LR not in f:
      f[regime_lib.LR] = float(arm.base.train.learning_rate)
    if study.collect is not None:
      extra = [
        _collected(study.collect, os.path.join(sweep_dir, 'runs', r['name']), r) if r['status'] == 'completed' else {}
        for r in f.to_dict(orient='records')
      ]
      f = pd.concat([f, pd.DataFrame(extra, index=f.index)], axis=1)
    frames.append(f)
  return pd.concat(frames, ignore_index=True), todo


def _spent(outdir: str) -> float:
  """Run-seconds of every run ever run in the ablation's folder (the cap counts runs no longer planned too)."""
  total = 0.0
  for path in glob.glob(os.path.join(outdir, '*', 'runs', '*', 'summary.json')):
    s = io_lib.read_json(path) or {}
    total += float(s.get('wall_time_s') or 0.0)
  return total


def _finished(outdir: str, points, seeds: int, seed_offset: int) -> Callable[[str, float, int], bool]:
  """(point, rate, steps) -> every seed of that run is finished on disk (an extension reuses it at no cost); cached,
  since next_extension prices several candidate extensions that share runs."""

  @functools.cache
  def finished(p: str, rate: float, steps: int) -> bool:
    arm, o = points[p]
    runs = os.path.join(outdir, arm.name, 'runs')
    return all(
      io_lib.RunDir(os.path.join(runs, sweep_lib.run_name(_overrides(arm, o, rate, steps, s)))).finished()
      for s in range(seed_offset, seed_offset + seeds)
    )

  return finished


def _seconds_per_step(frame: pd.DataFrame):
  """point -> measured run-seconds per step (the point's arm, else every run)."""
  ok = (
    frame[(frame['status'] == 'completed') & frame['wall_time_s'].notna()] if 'wall_time_s' in frame else frame.iloc[:0]
  )
  rate = (ok['wall_time_s'] / ok[regime_lib.STEPS]) if len(ok) else pd.Series(dtype=float)
  overall = float(rate.mean()) if len(rate) else 0.0
  per_arm = rate.groupby(ok['arm']).mean().to_dict() if len(ok) else {}
  arm_of = dict(zip(frame['point'], frame['arm'], strict=True))
  return lambda p: float(per_arm.get(arm_of.get(p), overall))


def _rate_check(point: str, v: verdict_lib.Verdict, frame: pd.DataFrame, s, regime) -> verdict_lib.Check:
  """regime.inside_grid, passed with its reason where the verdict says no rate at `point` can move its statistic."""
  c = regime_lib.inside_grid(point, frame, s, regime)
  if c.passed or point not in v.settled:
    return c
  return verdict_lib.Check(c.name, True, f'{c.detail}; not needed: {v.settled[point]}')


def _rules(study: base.Study, sel: pd.DataFrame, scale: str) -> list[verdict_lib.Verdict]:
  """The study's verdicts on `sel`, each with its declared claim (kind, scope, premise) attached."""
  verdicts = study.rules(sel, scale)
  if len(verdicts) != len(study.claims):
    raise ValueError(
      f'{study.name}.rules gave {len(verdicts)} verdicts and the study declares {len(study.claims)} claims: '
      'a study declares a fixed family of verdicts, one Claim each'
    )
  return [
    dataclasses.replace(v, kind=c.kind, scope=c.scope, premise=c.premise)
    for v, c in zip(verdicts, study.claims, strict=True)
  ]


def _with_point_at(
  sel: pd.DataFrame, frame: pd.DataFrame, point: str, steps: int, rate: float, level: str
) -> pd.DataFrame:
  """`sel` (one budget's selection) with `point`'s rows replaced by its runs at `rate` and `steps` from `frame`."""
  at = (frame['point'] == point) & (frame[regime_lib.STEPS] == steps) & np.isclose(frame[regime_lib.LR], rate)
  alt = frame[at].assign(level=level)
  return pd.concat([sel[sel['point'] != point], alt], ignore_index=True)


def _ladder(vs: Sequence[verdict_lib.Verdict], state, v: verdict_lib.Verdict) -> tuple[dict[str, Any], ...]:
  t = max((state[p].steps for p in v.points if p in state), default=0)
  return tuple(
    {
      'level': lv,
      'steps': t // 2 ** (len(vs) - 1 - i),
      'statistic': r.statistic,
      'ci': list(r.ci),
      'outcome': r.raw_outcome,  # the rule's own outcome at that budget (its premise may fail there)
    }
    for i, (lv, r) in enumerate(zip(regime_lib.LEVELS, vs, strict=True))
  )


def _judge(study: base.Study, frame: pd.DataFrame, tuning: pd.DataFrame, state, regime, scale: str, points):
  """The study's verdicts at T, each gated on its premise, its points' rate checks, its stability on the budget
  ladder by its claim's kind, no rate tie and no single seed deciding it."""
  sels = {lv: regime_lib.select(frame, tuning, lv) for lv in regime_lib.LEVELS}
  rungs = {lv: _rules(study, sels[lv], scale) for lv in regime_lib.LEVELS}
  full = sels[regime_lib.FULL]
  at_t = rungs[regime_lib.FULL]
  _check_points(study, at_t, state)

  @functools.cache
  def moved(level: str, point: str, rate: float) -> tuple[verdict_lib.Verdict, ...]:  # every verdict, point at rate
    steps = state[point].budgets()[regime_lib.LEVELS.index(level)]
    return tuple(_rules(study, _with_point_at(sels[level], frame, point, steps, rate, level), scale))

  drops = []
  if any(v.outcome in verdict_lib.DECISIVE for v in at_t):
    drops = [
      (s, _rules(study, full[full[regime_lib.SEED] != s], scale)) for s in sorted(full[regime_lib.SEED].unique())
    ]
  out = []
  for i, v in enumerate(at_t):
    tuned = [p for p in v.points if points[p][0].tuned]
    ties = [
      (f'{p} at {lv}', r, moved(lv, p, r)[i], rungs[lv][i])
      for k, lv in enumerate(regime_lib.LEVELS)
      for p in tuned
      for r in regime_lib.tied_rates(p, frame, state[p], regime, state[p].budgets()[k])
    ]
    tie_levels = sorted({w.rsplit(' at ', 1)[1] for w, _, a, c in ties if a.outcome != c.outcome})
    others = []
    if v.kind == verdict_lib.EXISTENCE:
      others = [
        (f'{p} at rate {r:g}', moved(regime_lib.FULL, p, r)[i])
        for p in tuned
        for r in state[p].rates
        if r != _rate_at_t(tuning, p)
      ]
    checks = [_rate_check(p, v, frame, state[p], regime) for p in tuned] + _missing_premise(v)
    factor = {p: points[p][0].steps_factor for p in v.points}
    ladder = [rungs[lv][i] for lv in regime_lib.LEVELS]
    checks += [
      regime_lib.coverage(v, full, regime.seeds),
      regime_lib.one_budget(v, state, factor),
      regime_lib.stability(v.kind, ladder, state, regime, others, ties=tie_levels),
      regime_lib.rate_tie(ties),
      regime_lib.one_seed(v, [(s, d[i]) for s, d in drops]),
    ]
    v = dataclasses.replace(
      v, extra={**v.extra, 'statistic_half': float(ladder[1].statistic)}, ladder=_ladder(ladder, state, v)
    )
    out.append(verdict_lib.gate(v, checks))
  return out, sels


def _check_points(study: base.Study, verdicts: Sequence[verdict_lib.Verdict], state) -> None:
  for v in verdicts:
    unknown = [p for p in v.points if p not in state]
    if unknown or not v.points:
      raise ValueError(
        f'{study.name}: verdict {v.claim!r} names unknown points {unknown or "(none)"}; points are: {", ".join(state)}'
      )


def _missing_premise(v: verdict_lib.Verdict) -> list[verdict_lib.Check]:
  """A failed premise check when the rule computed none: no verdict is decided without a positive control."""
  if v.premises:
    return []
  why = 'no positive control was computed from these runs'
  return [verdict_lib.Check(f'premise: {v.premise}', False, why, role=verdict_lib.PREMISE)]


def _rate_at_t(tuning: pd.DataFrame, point: str) -> float:
  t = tuning[(tuning['point'] == point) & (tuning['level'] == regime_lib.FULL)]['rate']
  return float(t.iloc[0]) if len(t) else math.nan


def _stop_reason(failed, actions, added, spent: float, cost: float, cap: '_Cap', seeds: int):
  """('' to go on, or why the loop stops; the next extension's record when the cap stopped it)."""
  if not failed:
    return 'every check of every verdict passed', None
  if not actions:
    return 'more compute cannot help: every verdict with a failed check has one with no remedy left', None
  if spent + cost > cap.run_s:
    return (
      f'the cap: the next extension (~{cost:.0f} run-seconds) would pass {cap.text()}',
      {
        'why': 'over the cap',
        'actions': actions,
        'runs': sum(map(len, added.values())) * seeds,
        'cost_s': cost,
        'cost_ref_s': cost / cap.speed,
      },
    )
  return '', None


@dataclasses.dataclass(frozen=True)
class _Cap:
  """A regime's cap on this machine: `ref_s` reference-seconds, `speed` = this machine's reference step over
  regime.REFERENCE_STEP_S (2.0: half as fast), so `run_s` = ref_s * speed run-seconds here."""

  ref_s: float
  speed: float
  step_s: float  # this invocation's reference step, seconds

  @property
  def run_s(self) -> float:
    return self.ref_s * self.speed

  def text(self) -> str:
    return f'{self.ref_s:.0f} reference-seconds = {self.run_s:.0f} run-seconds here'


@functools.cache
def reference_step_s() -> float:
  """Seconds per step of a fixed program, timed once per process (the unit of the caps: regime.REFERENCE_STEP_S):
  one Adam step of a ReLU MLP 64 -> 256 -> 64 on a batch of 128, 200 steps in one lax.scan, the fastest of 7 calls
  after compiling."""
  k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
  x_BD, y_BD = jax.random.normal(k1, (128, 64)), jax.random.normal(k2, (128, 64))
  params = (jax.random.normal(k3, (64, 256)) * 0.1, jax.random.normal(k3, (256, 64)) * 0.1)
  opt = optax.adam(1e-3)

  def loss(p):
    return jax.numpy.mean((jax.nn.relu(x_BD @ p[0]) @ p[1] - y_BD) ** 2)

  def step(carry, _):
    p, st = carry
    u, st = opt.update(jax.grad(loss)(p), st)
    return (optax.apply_updates(p, u), st), None

  run = jax.jit(lambda c: jax.lax.scan(step, c, None, length=200)[0])
  carry = (params, opt.init(params))
  jax.block_until_ready(run(carry))
  times = []
  for _ in range(7):
    t0 = time.perf_counter()
    jax.block_until_ready(run(carry))
    times.append(time.perf_counter() - t0)
  return min(times) / 200  # the least disturbed call: another process on the cores only slows a call down


def _cap(regime) -> _Cap:
  step = reference_step_s()
  return _Cap(float(regime.cap), step / regime_lib.REFERENCE_STEP_S, step)


def _regime_record(regime, cap: _Cap, spent: float, stopped: str, iterations, nxt, state, tuning) -> dict[str, Any]:
  """report.json's "regime": the policy, the cost, the loop's iterations and where each point ended."""
  rates = {(t['point'], t['level']): t['rate'] for _, t in tuning.iterrows()}
  return {
    'policy': dataclasses.asdict(regime),
    'cap_ref_s': cap.ref_s,
    'cap_s': cap.run_s,
    'reference_step_s': cap.step_s,
    'speed': cap.speed,
    'spent_ref_s': spent / cap.speed,
    'spent_s': spent,
    'stopped': stopped,
    'iterations': iterations,
    'next': nxt,
    'points': [
      {
        'point': p,
        'rates': s.rates,
        'steps': s.steps,
        'lower': s.lower,
        'higher': s.higher,
        'doublings': s.doublings,
        'dropped': s.dropped,
        **{f'rate_{lv}': rates.get((p, lv)) for lv in regime_lib.LEVELS},
      }
      for p, s in state.items()
    ],
  }


@dataclasses.dataclass
class _LoopEnd:
  """Where the regime loop stopped: the last pass's frame, tuning and gated verdicts, and why it stopped."""

  frame: pd.DataFrame
  tuning: pd.DataFrame
  ladder: dict[str, pd.DataFrame]  # level -> the runs at each point's chosen rate at that budget
  verdicts: list[verdict_lib.Verdict]
  state: dict[str, Any]
  stopped: str
  nxt: dict[str, Any] | None  # the next extension's record when the cap stopped the loop
  cost: float
  spent: float


def _regime_loop(
  study: base.Study, outdir: str, points, rec, regime, scale: str, progress: bool, tick, seed_offset: int, cap: _Cap
):
  """Run, tune, judge, extend until every check passes, nothing is left to extend, or the cap; each pass is an
  iteration of `rec` (saved by `tick`, so a killed loop resumes where it stopped)."""
  while True:
    it_start = time.time()
    log(f'{study.name} ({scale}): pass {len(rec["iterations"])}')
    frame, ran = _run_pass(study, outdir, points, rec, regime, progress, tick, seed_offset)
    state = rec['state']
    tuning = regime_lib.tune(frame, state, regime)
    verdicts, ladder = _judge(study, frame, tuning, state, regime, scale, points)
    failed = [c for v in verdicts for c in v.failed_checks]
    chosen = {t['point']: t['rate'] for _, t in tuning[tuning['level'] == regime_lib.FULL].iterrows()}
    spent = _spent(outdir)
    done = _finished(outdir, points, regime.seeds, seed_offset)
    ext = regime_lib.next_extension(state, verdicts, regime, chosen, _seconds_per_step(frame), spent, done, cap.run_s)
    entry = {
      'iteration': len(rec['iterations']),
      'runs_planned': int(len(frame)),
      'runs_run': int(ran),
      'wall_s': time.time() - it_start,
      'spent_s': spent,
      'failed': sorted({f'{c.name}' for c in failed}),
      'actions': [],
      'next_cost_s': ext.cost,
    }
    stopped, nxt = _stop_reason(failed, ext.actions, ext.runs, spent, ext.cost, cap, regime.seeds)
    if not stopped:
      entry['actions'] = ext.actions
      entry['partial'] = ext.partial
    if entry['runs_run'] or not rec['iterations'] or rec['iterations'][-1].get('actions') or stopped == '':
      rec['iterations'].append(entry)
    else:  # a resumed pass with nothing to run is not a new iteration: the last one, judged again, fails what fails now
      rec['iterations'][-1]['failed'] = entry['failed']
    if stopped:
      return _LoopEnd(frame, tuning, ladder, verdicts, state, stopped, nxt, ext.cost, spent)
    why = ' (the whole extension passes the cap: the part that fits)' if ext.partial else ''
    cost = f' (~{ext.cost:.0f} run-seconds; spent {spent:.0f})'
    log(f'{study.name}: extending{why}: ' + '; '.join(ext.actions) + cost)
    rec['state'] = ext.state
    tick()


def _final_verdicts(end: _LoopEnd, cap: _Cap) -> list[verdict_lib.Verdict]:
  """Holm over the family; an invalid verdict of a loop the cap stopped names the next extension's cost."""
  verdicts = verdict_lib.holm(end.verdicts)
  if not end.nxt:
    return verdicts
  cost = (
    f' — the next extension would have cost ~{end.cost:.0f} run-seconds (~{end.cost / cap.speed:.0f} '
    f'reference-seconds; cap {cap.text()}, spent {end.spent:.0f} run-seconds)'
  )
  return [v if v.outcome != verdict_lib.INVALID else dataclasses.replace(v, detail=v.detail + cost) for v in verdicts]


def run_study(
  study: base.Study, workdir: str, scale: str = 'full', *, progress: bool = True, seed_offset: int = 0
) -> dict[str, Any]:
  """The regime loop (ablations/regime.py, `_regime_loop`); then Holm, the study's figure and tables, report.md /
  report.json. seed_offset K runs seeds K ... K+n-1 instead of 0 ... n-1, in workdir/NAME.seed_offsetK
  (outdir_name)."""
  _check_scale(study, scale)
  regime = study.regimes[scale]
  outdir = os.path.join(workdir, outdir_name(study.name, seed_offset))
  os.makedirs(outdir, exist_ok=True)
  env, start = environment(), time.time()
  cap = _cap(regime)
  env['reference_step_ms'] = round(cap.step_s * 1e3, 4)
  log(
    f'{study.name}: reference step {cap.step_s * 1e3:.3f} ms here ({cap.speed:.2f} x the reference machine): cap '
    + cap.text()
  )
  points = _points(study.arms(scale))
  rec = _load_record(outdir, study, scale, points)
  clock = [start]

  def tick():  # wall time summed over every invocation, saved as it goes (a killed invocation counts too)
    now = time.time()
    rec['wall_s'] += now - clock[0]
    clock[0] = now
    _save_record(outdir, rec)

  _save_record(outdir, rec)
  end = _regime_loop(study, outdir, points, rec, regime, scale, progress, tick, seed_offset, cap)
  tick()
  verdicts = _final_verdicts(end, cap)
  frame = end.frame
  lad = end.ladder
  result = base.Result(frame, end.tuning, lad[regime_lib.FULL], lad[regime_lib.HALF], verdicts, scale, lad)
  shown = study.present(result, base.Context(outdir=outdir, scale=scale))
  regime_rec = {
    **_regime_record(regime, cap, end.spent, end.stopped, rec['iterations'], end.nxt, end.state, end.tuning),
    'seed_offset': seed_offset,
  }
  arms = {arm.name: arm for arm, _ in points.values()}
  sweeps = [
    {
      'name': a.name,
      'runs': int((frame['arm'] == a.name).sum()),
      'seeds': regime.seeds,
      'fixed': _fixed(a.base, [k for o in a.points.values() for k in o]),
      'swept': _swept(frame[frame['arm'] == a.name], a),
    }
    for a in arms.values()
  ]
  on_disk = len(glob.glob(os.path.join(outdir, '*', 'runs', '*', 'summary.json')))
  report = _report(
    study, scale, env, clock[0] - start, rec['wall_s'], frame, shown, verdicts, sweeps, regime_rec, on_disk
  )
  _write_report(outdir, report, verdicts, shown.tables)
  return io_lib.read_json(os.path.join(outdir, 'report.json'))


def _fixed(config, swept: Sequence[str] = ()) -> dict[str, Any]:
  """The arm's settings a reader needs, as the runs used them: no key the points override (`swept` shows those) and
  no task key the arm's task does not read (task.function belongs to the `function` task only)."""
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
  ):
    if key in swept or (key == 'task.function' and config.task.name != 'function'):
      continue
    try:
      out[key] = config_lib.get_path(config, key)
    except (KeyError, AttributeError):
      pass
  return out


def _swept(frame: pd.DataFrame, arm: base.Arm) -> dict[str, list[Any]]:
  keys = list(dict.fromkeys(k for o in arm.points.values() for k in o)) + [regime_lib.LR, regime_lib.STEPS]
  return {k: sorted({v for v in frame[k].dropna().tolist()}, key=str) for k in keys if k in frame}


def _report(
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
    'checks': [c.to_dict() for c in shown.checks],
    'regime': regime_rec,
    'tables': [
      {'title': t.title, 'columns': list(t.frame.columns), 'rows': io_lib.json_safe(t.frame.to_dict(orient='records'))}
      for t in shown.tables
    ],
    'figures': [{'file': f.file, 'caption': f.caption} for f in shown.figures],
    'notes': list(shown.notes),
  }


def _write_report(outdir: str, report: dict[str, Any], verdicts, tables) -> None:
  io_lib.write_json(os.path.join(outdir, 'report.json'), report)
  on_disk = io_lib.read_json(os.path.join(outdir, 'report.json'))  # NaN -> null, as a reader sees it
  io_lib.write_text(
    os.path.join(outdir, 'report.md'), report_markdown({**on_disk, 'verdicts_obj': verdicts, 'tables_obj': tables})
  )
  name = report['name']
  # A check shared by several verdicts is printed once, with the verdicts it invalidates.
  failed: dict[tuple[str, str], list[str]] = {}  # (check name, detail) -> verdict numbers
  for i, v in enumerate(verdicts, 1):
    log(f'{name}: verdict {i}: {v.outcome}: {v.claim}')
    for c in v.failed_checks:
      failed.setdefault((c.name, c.detail), []).append(str(i))
  for (check, detail), which in failed.items():
    log(f'{name}: failed check (verdict {", ".join(which)}): {check}: {detail}')
  for c in report['checks']:
    if not c['passed']:
      log(f'{name}: CHECK FAILED: {c["name"]}: {c["detail"]}')
  log(
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


def run_all(
  workdir: str,
  scale: str = 'full',
  *,
  progress: bool = True,
  names: Sequence[str] | None = None,
  seed_offset: int = 0,
) -> tuple[list[dict[str, Any]], list[str]]:
  """Every ablation (that has `scale`) in turn; DIR/index.md; returns (reports, failed names)."""
  lines, reports, failed = [f'# Ablations ({scale} scale)', ''], [], []
  for name in names if names is not None else ablations.names():
    if scale not in ablations.get(name).scales:
      lines.append(f'- **{name}**: no {scale!r} scale')
      continue
    try:
      report = run(name, workdir, scale, progress=progress, seed_offset=seed_offset)
      reports.append(report)
      lines.append(index_line(name, report))
    except Exception as e:  # one ablation's failure must not stop the rest
      msg = f'{type(e).__name__}: {e}'.splitlines()[0]
      log(f'{name}: FAILED: {msg}')
      failed.append(name)
      lines.append(index_line(name, None, msg))
  os.makedirs(workdir, exist_ok=True)
  io_lib.write_text(os.path.join(workdir, 'index.md'), '\n'.join(lines) + '\n')
  log(f'wrote {workdir}/index.md')
  return reports, failed


# --------------------------------------------------------------------------- publishing


def publish(name: str, workdir: str, repo_root: str = REPO_ROOT) -> str:
  """Copy DIR/name's report and PNGs to docs/results/name/ and regenerate the Results sections."""
  src = os.path.join(workdir, name)
  report = io_lib.read_json(os.path.join(src, 'report.json'))
  if report is None:
    raise ReproduceError(f'{src}/report.json not found: run the ablation first')
  if report['scale'] != 'full':
    raise ReproduceError(
      f'refusing to publish {name}: its report is at scale {report["scale"]!r}; '
      'only full-scale reports may be published'
    )
  if report.get('regime', {}).get('seed_offset', 0):
    raise ReproduceError(
      f'refusing to publish {name}: its report ran on fresh seeds (--seed_offset); it checks the published one'
    )
  commit = str(report.get('environment', {}).get('commit', ''))
  if commit.endswith('+dirty') or commit == 'unknown':
    raise ReproduceError(
      f'refusing to publish {name}: its report was produced from commit {commit!r}, not a '
      'committed tree; commit, then rerun (finished runs are reused) and publish'
    )
  dst = os.path.join(repo_root, 'docs', 'results', name)
  os.makedirs(dst, exist_ok=True)
  for old in os.listdir(dst):  # the previous report goes, its history stays
    if old != HISTORY:
      os.remove(os.path.join(dst, old))
  for path in [
    os.path.join(src, 'report.md'),
    os.path.join(src, 'report.json'),
    *sorted(glob.glob(os.path.join(src, '*.png'))),
  ]:
    shutil.copy2(path, dst)
  update_readme(repo_root)
  log(f'published {name} to {dst} and updated README.md and {RESULTS_PAGE}')
  return dst


def results_section(repo_root: str = REPO_ROOT) -> str:
  """The full Results section (docs/results/README.md), from every docs/results/*/report.json; links from the root."""
  lines = [
    'Generated by `python -m experiments.reproduce --ablation=NAME --publish` from '
    '`docs/results/*/report.json` (full scale); do not edit by hand. How to run and read these: '
    '[docs/reproduce.md](docs/reproduce.md).',
    '',
  ]
  paths = sorted(glob.glob(os.path.join(repo_root, 'docs', 'results', '*', 'report.json')))
  if not paths:
    lines.append('No full-scale results published yet.')
  for path in paths:
    r = io_lib.read_json(path)
    name, env = r['name'], r['environment']
    rel = f'docs/results/{name}'
    lines += [f'### {name}', '', f'**Claim.** {r["claim"]}', '']
    changes = r.get('design_changes') or []
    if predates_premises(r):
      lines += [
        f'**Published before premises and the budget ladder** (no positive control, no scope, a T/2-vs-T check): '
        f'read these verdicts with [the re-judgement of the published data]({REJUDGED}).',
        '',
      ]
    for i, v in enumerate(r['verdicts'], 1):
      lo, hi = v['ci']
      holm = f', Holm-adjusted p = {_fmt(v["p_holm"])}' if v.get('p_holm') is not None else ''
      lines.append(
        f'- **{v["outcome"]}**: {v["claim"]} ({_fmt(v["statistic"])}, 95% CI '
        f'[{_fmt(lo)}, {_fmt(hi)}], n = {v["n"]}{holm})'
      )
      if v.get('scope'):
        lines.append(f'  - scope: {v["scope"]}')
      lines += [f'  - {_change_line(c, i)}' for c in changed_by(changes, i) if _positive(c, i)]
      if v['outcome'] != v.get('rule_outcome', v['outcome']) or v['outcome'] == verdict_lib.INVALID:
        lines += [f'  - failed check: {c["name"]}: {c["detail"]}' for c in failed_checks(v)]
    lines += ['', f'**Main figure.** {r["headline"]}', '']
    failed = [c for c in r.get('checks', []) if not c['passed']]
    if failed:  # a failed check of the measurement is read next to the verdicts it qualifies
      lines += [f'**Check failed.** {c["name"]}: {c["detail"]}' for c in failed] + ['']
    if r['figures']:
      f = r['figures'][0]
      lines += [f'![{f["caption"]}]({rel}/{f["file"]})', '']
    load = env.get('load_average_at_start')
    load = f' (load average {load[0]} at start)' if load else ''
    cpu = env.get('processor', '')
    cpu = f', {cpu}' if cpu and cpu not in env['machine'] else ''  # reports before io.cpu_name held the architecture
    total = r.get('total_wall_time_s', r['wall_time_s'])
    lines += [
      f'{env["machine"]}{cpu}{load}, {env["device"]}, jax {env["jax"]}; {env["date"]}; wall time '
      f'{total:.0f} s ({r["compute_time_s"]:.0f} s summed over runs); commit {env["commit"]}. '
      f'Full report: [{rel}/report.md]({rel}/report.md).',
      '',
    ]
  return '\n'.join(lines).rstrip() + '\n'


def predates_premises(report: Mapping[str, Any]) -> bool:
  """A published report written before every verdict had a kind, a premise and a budget ladder (issue 45)."""
  return any(not v.get('kind') or not v.get('ladder') for v in report['verdicts'])


def question(name: str) -> str:
  """What ablation `name` asks, in a few words: its module docstring's first paragraph, after 'name: '."""
  try:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f'{name}.py'), encoding='utf-8') as f:
      doc = ast.get_docstring(ast.parse(f.read())) or ''
  except OSError:
    return ''
  return ' '.join(doc.split('\n\n')[0].split()).removeprefix(f'{name}: ')


def headline_section(repo_root: str = REPO_ROOT) -> str:
  """README.md's Results headline: one row per published ablation (its question, its verdicts, its report)."""
  lines = [
    'Generated by `python -m experiments.reproduce --ablation=NAME --publish` from '
    '`docs/results/*/report.json` (full scale); do not edit by hand. Every verdict with its statistic, '
    f'main figure and machine: [{RESULTS_PAGE}]({RESULTS_PAGE}).',
    '',
    '| ablation | question | verdicts |',
    '|---|---|---|',
  ]
  for path in sorted(glob.glob(os.path.join(repo_root, 'docs', 'results', '*', 'report.json'))):
    r = io_lib.read_json(path)
    counts = collections.Counter(v['outcome'] for v in r['verdicts'])
    verdicts = ', '.join(f'{counts[o]} {o}' for o in verdict_lib.OUTCOMES if counts[o])
    if predates_premises(r):
      verdicts += f' (published before premises and the budget ladder: [re-judged]({REJUDGED}))'
    asks = (question(r['name']) or r['claim']).replace('|', '\\|')
    lines.append(f'| [{r["name"]}](docs/results/{r["name"]}/report.md) | {asks} | {verdicts} |')
  return '\n'.join(lines) + '\n'


def relink(markdown: str, folder: str) -> str:
  """`markdown`'s relative links (written from the repo root) rewritten relative to `folder`."""
  return re.sub(r'\]\((?![a-z]+:|#|/)([^)\s]+)\)', lambda m: f']({posixpath.relpath(m[1], folder)})', markdown)


def _write_block(path: str, section: str, heading: str) -> None:
  """Replace `path`'s text between the results markers (appending `heading` and the block if absent)."""
  text = ''
  if os.path.exists(path):
    with open(path, encoding='utf-8') as f:
      text = f.read()
  block = f'{README_BEGIN}\n{section}{README_END}'
  if README_BEGIN in text and README_END in text:
    text = re.sub(re.escape(README_BEGIN) + '.*?' + re.escape(README_END), lambda _: block, text, flags=re.S)
  else:
    text = (text.rstrip() + '\n\n' if text.strip() else '') + f'{heading}\n\n{block}\n'
  io_lib.write_text(path, text)


def update_readme(repo_root: str = REPO_ROOT) -> None:
  """README.md gets the Results headline, docs/results/README.md the full section (between the results markers)."""
  _write_block(os.path.join(repo_root, 'README.md'), headline_section(repo_root), '## Results')
  _write_block(os.path.join(repo_root, RESULTS_PAGE), relink(results_section(repo_root), 'docs/results'), '# Results')
