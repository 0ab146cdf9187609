"""The regime loop: run an ablation's sweeps, tune, judge its verdicts on the budget ladder, extend until they
stand or the cap; then the report (report.py). Publishing to docs/ is experiments/publish.py's.

Layout of DIR (the --workdir):

  DIR/NAME/<sweep>/            one sweep.run_sweep workdir per arm (results.csv, runs/...)
  DIR/NAME/regime.json         the regime loop's state and record (a killed loop resumes from it)
  DIR/NAME/report.md           claim, setup, results tables, plots, verdicts
  DIR/NAME/report.json         the same, machine-readable
  DIR/NAME/*.png               plots with the reference drawn on them
  DIR/index.md                 --ablation=all: one line per ablation
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
import functools
import glob
import hashlib
import inspect
import json
import os
import time
from typing import Any

import pandas as pd

from ffn_research import ablations
from ffn_research import analysis as analysis_lib
from ffn_research import io as io_lib
from ffn_research import models as models_lib
from ffn_research import stats as verdict_lib
from ffn_research import sweep as sweep_lib
from ffn_research import tasks as tasks_lib
from ffn_research.ablations import base
from ffn_research.ablations import cap as cap_lib
from ffn_research.ablations import judge as judge_lib
from ffn_research.ablations import regime as regime_lib
from ffn_research.ablations import report as report_lib

# --------------------------------------------------------------------------- running


def run(
  name: str, workdir: str, scale: str = 'full', *, progress: bool = True, seed_offset: int = 0, judge_only: bool = False
) -> dict[str, Any]:
  """Run (or resume) ablation `name` at `scale` into workdir/name; write its report; return report.json."""
  return run_study(
    ablations.get(name), workdir, scale, progress=progress, seed_offset=seed_offset, judge_only=judge_only
  )


def outdir_name(name: str, seed_offset: int = 0) -> str:
  """An ablation's folder in the workdir: NAME, or NAME.seed_offsetK for a run on fresh seeds K, K+1, ..."""
  if seed_offset < 0:
    raise base.ReproduceError(f'--seed_offset must be >= 0 (got {seed_offset})')
  return name if seed_offset == 0 else f'{name}.seed_offset{seed_offset}'


# --------------------------------------------------------------------------- the regime loop

RECORD = 'regime.json'
STEP_KEY = 'reference_step_s'  # in RECORD: the reference step the last invocation that ran the loop timed (a judging
# invocation converts the cap with it, not with its own)
LEDGER_KEY = 'ledger'  # in RECORD: per invocation that trains, [run-seconds on disk when it began, its reference step]
INVOCATIONS = 'invocations'  # in RECORD: per invocation, its commit, start (UTC), wall seconds, load, judge_only


def _check_scale(study: base.Study, scale: str) -> None:
  if scale not in ablations.SCALES:
    raise base.ReproduceError(f'--scale={scale!r} is unknown; allowed: {", ".join(ablations.SCALES)}')
  if scale not in study.regimes:
    raise base.ReproduceError(f'ablation {study.name} has no {scale!r} scale; it has: {", ".join(study.scales)}')


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
  """The loop's record (state per point, iterations, wall time, ledger); a fresh one if the scale or regime changed
  (the passes so far marked earlier, the wall time and the ledger kept)."""
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
      base.log(
        f'{study.name}: {RECORD} was written for another scale or regime: the loop starts afresh '
        '(finished runs are still reused; the wall time and passes so far are kept, marked as earlier)'
      )
      earlier = [{**it, 'earlier': True} for it in rec.get('iterations', [])]
      fresh = {**fresh, 'iterations': earlier, 'wall_s': float(rec.get('wall_s') or 0.0)}
      fresh[INVOCATIONS] = rec.get(INVOCATIONS, [])
      if LEDGER_KEY in rec:  # the runs on disk keep the steps that priced them
        fresh[LEDGER_KEY] = rec[LEDGER_KEY]
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
  if arm.tuned or arm.rate_from is not None:
    o[regime_lib.LR] = float(rate)
  return o


def _rate_from(arm: base.Arm, points, rec, frames: list[pd.DataFrame], seeds: int, seed_offset: int) -> list:
  """An arm whose one rate its rule reads from the runs of the arms before it: each of its points' state set to
  that rate, and its runs [(point, overrides)]; none where the rule finds no rate (nan)."""
  assert arm.rate_from is not None
  rate = float(arm.rate_from(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()))
  if rate != rate:  # nan
    return []
  runs = []
  for p, (a, o) in points.items():
    if a.name == arm.name:
      rec['state'][p] = s = dataclasses.replace(rec['state'][p], rates=[rate])
      runs += [
        (p, _overrides(arm, o, rate, b, seed)) for b in s.budgets() for seed in arm.seed_range(seeds, seed_offset)
      ]
  return runs


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


def train_flops(config) -> float:
  """A run's training FLOPs by formula: forward and backward (3x the forward's), every position of every step."""
  task = tasks_lib.build_task(config)
  tokens = config.train.batch_size * getattr(task, 'seq_len', 1)
  return 3.0 * float(models_lib.model_counts(config, task)['flops_per_token']) * tokens * config.train.steps


def _flops_left(arm: base.Arm, sweep_dir: str, arm_runs) -> float:
  """The training FLOPs of the arm's runs not yet finished (rates and seeds share a point's count)."""
  total, cache = 0.0, {}
  for p, o in arm_runs:
    if io_lib.RunDir(os.path.join(sweep_dir, 'runs', sweep_lib.run_name(o))).finished():
      continue
    key = (p, o.get(regime_lib.STEPS), o.get('train.batch_size'))
    if key not in cache:
      cache[key] = train_flops(sweep_lib.apply_overrides(arm.base, o))
    total += cache[key]
  return total


def _progress_line(name: str, done_flops: float, left_flops: float, seconds: float) -> str:
  """How much of the pass's training (by FLOP count) this invocation has done, and in how long: not a time price,
  since compiles and small cells cost far more per FLOP than the large cells."""
  if done_flops <= 0 or left_flops <= 0:
    return ''
  share = done_flops / (done_flops + left_flops)
  return (
    f'{name}: {share:.1%} of the training FLOPs this invocation found left in the pass done (by formula), in '
    f'{seconds / 60:,.1f} minutes; {left_flops / 1e12:,.3g} TFLOP to go'
  )


def _run_pass(
  study: base.Study, outdir: str, points, rec, regime: base.Regime, progress: bool, tick, seed_offset: int
) -> tuple[pd.DataFrame, int]:
  """Run (resume) every planned run, arm by arm, logging after each the share of the training FLOPs done; (the frame
  of every planned run, runs that were not finished)."""
  planned = regime_lib.plan(rec['state'])
  by_arm: dict[str, list[tuple[str, dict[str, Any]]]] = {}
  for p, runs in planned.items():
    arm, o = points[p]
    for rate, steps in runs:
      for seed in arm.seed_range(regime.seeds, seed_offset):
        by_arm.setdefault(arm.name, []).append((p, _overrides(arm, o, rate, steps, seed)))
  arms = {arm.name: arm for arm, _ in points.values()}
  left = {n: _flops_left(arms[n], os.path.join(outdir, n), r) for n, r in by_arm.items() if arms[n].rate_from is None}
  done_flops, seconds = 0.0, 0.0
  frames: list[pd.DataFrame] = []
  todo = 0
  for i, (name, arm_runs) in enumerate(by_arm.items()):
    arm, sweep_dir = arms[name], os.path.join(outdir, name)
    if arm.rate_from is not None:
      arm_runs = _rate_from(arm, points, rec, frames, regime.seeds, seed_offset)
      if not arm_runs:
        base.log(f'{study.name}: arm {i + 1}/{len(by_arm)} {name!r}: not run: its rate rule found no rate')
        continue
    label = {sweep_lib.run_name(o): p for p, o in arm_runs}
    done = sum(bool(io_lib.RunDir(os.path.join(sweep_dir, 'runs', n)).finished()) for n in label)
    todo += len(label) - done
    base.log(f'{study.name}: arm {i + 1}/{len(by_arm)} {name!r}: {len(arm_runs)} runs, {done} already finished')
    start = time.time()
    sweep_lib.run_sweep(
      arm.base,
      [o for _, o in arm_runs],
      sweep_dir,
      pad_flops_factor=arm.pad_flops_factor,
      progress=progress,
      after_group=tick,  # a killed invocation's wall time is on disk up to its last finished group
    )
    tick()
    if name in left:
      done_flops, seconds = done_flops + left.pop(name), seconds + time.time() - start
      line = _progress_line(study.name, done_flops, sum(left.values()), seconds)
      if line:
        base.log(line)
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
      for s in arm.seed_range(seeds, seed_offset)
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


def _stop_reason(
  failed, actions, added, spent: float, cost: float, cap: cap_lib.Cap, seeds: Callable[[str], int], judge_only=False
):
  """('' to go on, or why the loop stops; the next extension's record when the cap (or judge_only) stopped it)."""
  if not failed:
    return 'every check of every verdict passed', None
  if not actions:
    return (
      'no extension remedies what failed: every verdict with a failed check has one that more steps or rates cannot '
      'fix (a premise more steps do not change, or no doubling or rate extension left)',
      None,
    )
  over = spent + cost > cap.run_s
  if over or judge_only:
    why = (  # the cap's reason wins: a judging invocation of a loop the cap stopped says so, not that it judged
      f'the cap: the next extension (~{cost:.0f} run-seconds) would pass {cap.text()}'
      if over
      else f'judge only (--judge_only): the next extension (~{cost:.0f} run-seconds) was not run'
    )
    return (
      why,
      {
        'why': 'over the cap' if over else 'judge only',
        'actions': actions,
        'runs': sum(len(rs) * seeds(p) for p, rs in added.items()),
        'cost_s': cost,
        'cost_ref_s': cost / cap.speed,
      },
    )
  return '', None


def _regime_record(regime, cap: cap_lib.Cap, end: '_LoopEnd', iterations) -> dict[str, Any]:
  """report.json's "regime": the policy, the cost, the loop's iterations and where each point ended."""
  stopped, nxt, state = end.stopped, end.nxt, end.state
  rates = {(t['point'], t['level']): t['rate'] for _, t in end.tuning.iterrows()}
  return {
    'policy': dataclasses.asdict(regime),
    'cap_ref_s': cap.ref_s,
    'cap_s': cap.run_s,
    'reference_step_s': cap.step_s,
    'reference_step_from': cap.source,
    'speed': cap.speed,
    'spent_ref_s': end.spent / cap.speed,
    'spent_s': end.raw,
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
  spent: float  # run-seconds at this invocation's step, each stretch priced at the step of the one that ran it
  raw: float  # run-seconds as the runs recorded them


def _priced_spent(outdir: str, rec, cap: cap_lib.Cap) -> tuple[float, float]:
  """(run-seconds at this invocation's step, each stretch priced at the step of the invocation that ran it; the
  run-seconds as the runs recorded them)."""
  raw = _spent(outdir)
  return cap_lib.priced_ref_s(rec.get(LEDGER_KEY), raw, cap.step_s) * cap.speed, raw


def _record_pass(rec: dict[str, Any], entry: dict[str, Any], stopped: str) -> None:
  """A pass that ran something (or the first, or one after an extension) is a new iteration; a resumed pass with
  nothing to run is not: the last one, judged again, fails what fails now, and names the commit that judged it."""
  if entry['runs_run'] or not rec['iterations'] or rec['iterations'][-1].get('actions') or stopped == '':
    rec['iterations'].append(entry)
    return
  last = rec['iterations'][-1]
  if entry['commit'] != last.get('commit'):
    last['judged_again_at'] = entry['commit']  # the report says the failures are a later commit's judgement
  last['failed'] = entry['failed']


def _regime_loop(
  study: base.Study,
  outdir: str,
  points,
  rec,
  regime,
  scale: str,
  progress: bool,
  tick,
  seed_offset: int,
  cap: cap_lib.Cap,
  judge_only: bool = False,
):
  """Run, tune, judge, extend until every check passes, nothing is left to extend, or the cap; each pass is an
  iteration of `rec` (saved by `tick`, so a killed loop resumes where it stopped)."""
  while True:
    it_start = time.time()
    base.log(f'{study.name} ({scale}): pass {len(rec["iterations"])}')
    frame, ran = _run_pass(study, outdir, points, rec, regime, progress, tick, seed_offset)
    state = rec['state']
    tuning = regime_lib.tune(frame, state, regime)
    verdicts, ladder = judge_lib.judge(study, frame, tuning, state, regime, scale, points)
    failed = [c for v in verdicts for c in v.failed_checks]
    chosen = {t['point']: t['rate'] for _, t in tuning[tuning['level'] == regime_lib.FULL].iterrows()}
    for v in verdicts:  # a claim read at one shared rate keeps the rates around that one when T doubles
      chosen.update(
        dict.fromkeys(v.points, v.extra['common_rates'][regime_lib.FULL]) if 'common_rates' in v.extra else {}
      )
    spent, raw = _priced_spent(outdir, rec, cap)
    done = _finished(outdir, points, regime.seeds, seed_offset)
    seeds = _seeds_of(points, regime)
    ext = regime_lib.next_extension(
      state, verdicts, regime, chosen, _seconds_per_step(frame), spent, done, cap.run_s, seeds_of=seeds
    )
    entry = {
      'iteration': len(rec['iterations']),
      'commit': report_lib.git_commit(),
      'runs_planned': int(len(frame)),
      'runs_run': int(ran),
      'wall_s': time.time() - it_start,
      'spent_s': raw,
      'failed': sorted({f'{c.name}' for c in failed}),
      'actions': [],
      'next_cost_s': ext.cost,
    }
    stopped, nxt = _stop_reason(failed, ext.actions, ext.runs, spent, ext.cost, cap, seeds, judge_only)
    if not stopped:
      entry['actions'] = ext.actions
      entry['partial'] = ext.partial
    _record_pass(rec, entry, stopped)
    if stopped:
      return _LoopEnd(frame, tuning, ladder, verdicts, state, stopped, nxt, ext.cost, spent, raw)
    why = ' (the whole extension passes the cap: the part that fits)' if ext.partial else ''
    cost = f' (~{ext.cost:.0f} run-seconds; spent {spent:.0f})'
    base.log(f'{study.name}: extending{why}: ' + '; '.join(ext.actions) + cost)
    rec['state'] = ext.state
    tick()


def _final_verdicts(end: _LoopEnd, cap: cap_lib.Cap) -> list[verdict_lib.Verdict]:
  """Holm over the family; an invalid verdict of a loop the cap stopped, or an inconclusive one with a failed check
  more compute could fix, names the next extension's cost."""
  verdicts = verdict_lib.holm(end.verdicts)
  if not end.nxt:
    return verdicts
  cost = (
    f' — the next extension would have cost ~{end.cost:.0f} run-seconds (~{end.cost / cap.speed:.0f} '
    f'reference-seconds; cap {cap.text()}; spent {end.spent / cap.speed:.0f} reference-seconds, '
    f"{end.raw:.0f} run-seconds on the runs' own clocks, as the Regime section counts them)"
  )
  stopped = lambda v: (
    v.outcome == verdict_lib.INVALID
    or (v.outcome == verdict_lib.INCONCLUSIVE and any(c.remedy for c in v.failed_checks))
  )
  return [
    dataclasses.replace(v, detail=(v.detail + cost) if v.detail else cost[3:]) if stopped(v) else v for v in verdicts
  ]


def _check_all_finished(study: base.Study, outdir: str, points, rec, seeds: int, seed_offset: int) -> None:
  """ReproduceError (one line) unless every run the loop's state plans is finished on disk."""
  done = _finished(outdir, points, seeds, seed_offset)
  missing = sum(not done(p, r, t) for p, runs in regime_lib.plan(rec['state']).items() for r, t in runs)
  if missing:
    raise base.ReproduceError(
      f'--judge_only: {missing} planned (point, rate, budget) cells of {study.name} have unfinished runs in '
      f'{outdir}; run without --judge_only first'
    )


def _presentation(study: base.Study):
  """The study's `present`, or one line saying it has none (before anything trains)."""
  if study.present is None:
    raise base.ReproduceError(
      f'study {study.name} has no presentation: ablations.get attaches ablations/present/{study.name}.py; a Study '
      'built by hand passes present='
    )
  return study.present


def _invocation_cap(name: str, regime, rec, outdir: str, judge_only: bool) -> cap_lib.Cap:
  """This invocation's cap: judging, at the step the runs recorded; training, at a step timed now, recorded in
  `rec` with the run-seconds already on disk (the ledger that prices each invocation's runs at its own step)."""
  cap = cap_lib.machine_cap(regime, rec.get(STEP_KEY) if judge_only else None)
  if judge_only and not rec.get(STEP_KEY):
    cap = dataclasses.replace(cap, source='timed when judged (the runs recorded none)')
  if not judge_only:
    rec[STEP_KEY] = cap.step_s
    rec.setdefault(LEDGER_KEY, []).append([_spent(outdir), cap.step_s])
  base.log(
    f'{name}: reference step {cap.step_s * 1e3:.3f} ms, {cap.source} ({cap.speed:.2f} x the reference machine): '
    'cap ' + cap.text()
  )
  return cap


def _invocation(env: dict[str, Any], judge_only: bool) -> dict[str, Any]:
  """This invocation's entry in RECORD's INVOCATIONS: commit, start, wall seconds (tick adds), load, judge_only."""
  load = env['load_average_at_start']
  entry = {'commit': env['commit'], 'start': env['date'], 'wall_s': 0.0, 'load': load[0] if load else None}
  return entry | ({'judge_only': True} if judge_only else {})


def run_study(
  study: base.Study,
  workdir: str,
  scale: str = 'full',
  *,
  progress: bool = True,
  seed_offset: int = 0,
  judge_only: bool = False,
) -> dict[str, Any]:
  """The regime loop (ablations/regime.py, `_regime_loop`); then Holm, the study's figure and tables, report.md /
  report.json. seed_offset K runs seeds K ... K+n-1 instead of 0 ... n-1, in workdir/NAME.seed_offsetK
  (outdir_name). judge_only: judge the runs on disk and write the report, training nothing (every planned run
  must be finished) and buying no extension (a wording fix lands without new runs, whatever the cap reads)."""
  _check_scale(study, scale)
  present = _presentation(study)
  regime = study.regimes[scale]
  outdir = os.path.join(workdir, outdir_name(study.name, seed_offset))
  os.makedirs(outdir, exist_ok=True)
  env, start = report_lib.environment(), time.time()
  points = _points(study.arms(scale))
  rec = _load_record(outdir, study, scale, points)
  cap = _invocation_cap(study.name, regime, rec, outdir, judge_only)
  env['reference_step_ms'] = round(cap.step_s * 1e3, 4)
  clock = [start]
  rec.setdefault(INVOCATIONS, []).append(_invocation(env, judge_only))

  def tick():  # wall time summed over every invocation, saved as it goes (a killed invocation counts too)
    now = time.time()
    rec['wall_s'] += now - clock[0]
    rec[INVOCATIONS][-1]['wall_s'] += now - clock[0]
    rec[INVOCATIONS][-1]['end'] = report_lib.utc_now()
    clock[0] = now
    _save_record(outdir, rec)

  _save_record(outdir, rec)
  if judge_only:
    _check_all_finished(study, outdir, points, rec, regime.seeds, seed_offset)
  end = _regime_loop(study, outdir, points, rec, regime, scale, progress, tick, seed_offset, cap, judge_only)
  tick()
  verdicts = _final_verdicts(end, cap)
  frame = end.frame
  lad = end.ladder
  result = base.Result(frame, end.tuning, lad[regime_lib.FULL], lad[regime_lib.HALF], verdicts, scale, lad)
  shown = present(result, base.Context(outdir=outdir, scale=scale))
  regime_rec = {
    **_regime_record(regime, cap, end, rec['iterations']),
    'seed_offset': seed_offset,
    INVOCATIONS: [c for c in rec[INVOCATIONS] if not c.get('judge_only')],  # the runs' provenance (regime.json has all)
    LEDGER_KEY: rec.get(LEDGER_KEY, []),
  }
  sweeps = _sweeps(points, frame, regime.seeds)
  on_disk = len(glob.glob(os.path.join(outdir, '*', 'runs', '*', 'summary.json')))
  report = report_lib.assemble(
    study, scale, env, clock[0] - start, rec['wall_s'], frame, shown, verdicts, sweeps, regime_rec, on_disk
  )
  report_lib.write(outdir, report, verdicts, shown.tables)
  return io_lib.read_json(os.path.join(outdir, 'report.json'))


def _seeds_of(points, regime: base.Regime) -> Callable[[str], int]:
  """point -> the number of seeds its arm runs."""
  return lambda p: len(points[p][0].seed_range(regime.seeds))


def _sweeps(points, frame: pd.DataFrame, seeds: int) -> list[dict[str, Any]]:
  """report.json's "sweeps": per arm its runs, seeds, fixed settings and swept values."""
  arms = {arm.name: arm for arm, _ in points.values()}
  return [
    {
      'name': a.name,
      'runs': int((frame['arm'] == a.name).sum()),
      'seeds': len(a.seed_range(seeds)),
      'fixed': report_lib.fixed_settings(a.base, report_lib.varied_keys(a)),
      'swept': report_lib.swept_values(frame[frame['arm'] == a.name], a),
    }
    for a in arms.values()
  ]


def run_all(
  workdir: str,
  scale: str = 'full',
  *,
  progress: bool = True,
  names: Sequence[str] | None = None,
  seed_offset: int = 0,
  judge_only: bool = False,
) -> tuple[list[dict[str, Any]], list[str]]:
  """Every ablation (that has `scale`) in turn; DIR/index.md; returns (reports, failed names)."""
  lines, reports, failed = [f'# Ablations ({scale} scale)', ''], [], []
  for name in names if names is not None else ablations.names():
    if scale not in ablations.get(name).scales:
      lines.append(f'- **{name}**: no {scale!r} scale')
      continue
    try:
      report = run(name, workdir, scale, progress=progress, seed_offset=seed_offset, judge_only=judge_only)
      reports.append(report)
      lines.append(report_lib.index_line(name, report))
    except Exception as e:  # one ablation's failure must not stop the rest
      msg = f'{type(e).__name__}: {e}'.splitlines()[0]
      base.log(f'{name}: FAILED: {msg}')
      failed.append(name)
      lines.append(report_lib.index_line(name, None, msg))
  os.makedirs(workdir, exist_ok=True)
  io_lib.write_text(os.path.join(workdir, 'index.md'), '\n'.join(lines) + '\n')
  base.log(f'wrote {workdir}/index.md')
  return reports, failed
