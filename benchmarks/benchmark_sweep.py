"""Benchmark (not a test) of sweep grouping, side by side in one process, compile time included.

  python -m benchmarks.benchmark_sweep                           # d_ff padding: quick and full capacity_dense
  python -m benchmarks.benchmark_sweep --sweeps=quick            # only capacity_dense.py:quick
  python -m benchmarks.benchmark_sweep --sweeps=quick --pad_flops_factors=2,4
  python -m benchmarks.benchmark_sweep --mode=seeds              # 16 seeds: one vmapped program vs 16 runs
  python -m benchmarks.benchmark_sweep --mode=seeds --num_runs=64
  python -m benchmarks.benchmark_sweep --mode=frameworks --workload=seeds64           # vs PyTorch, runs/hour
  python -m benchmarks.benchmark_sweep --mode=frameworks --workload=capacity_dense --rounds=1
  python -m benchmarks.benchmark_sweep --mode=scaling --ulimit_n=256     # 64 -> 10,000 seeds, 200 and 2,000 steps
  python -m benchmarks.benchmark_sweep --mode=scaling --scale_runs=64,256 --scale_steps=200 --out=scaling.json

--mode=padding: each sweep with today's grouping (sweep.group_runs with pad_flops_factor 1:
a program per d_ff), then with d_ff padding (each of --pad_flops_factors, default
programs.PAD_FLOPS_FACTOR); prints wall times, the ratios and the largest eval_loss difference
of a run between the padded sweep and the same run unpadded.
--mode=seeds: N seeds of a config as one vmapped sweep group vs N separate
`train_and_evaluate` runs. The persistent compilation cache is off and in-process caches
are cleared before each side, so every side compiles everything it runs.
--mode=frameworks: a sweep through this project's CLI (`python -m experiments.sweep`) against the
same runs in PyTorch (benchmarks/bench_torch_sweep.py): an eager loop of separate runs and
torch.func ensembles (one per shape). Each side runs in its own process, timed end to end from
process start to results written; per round every side once, the order reversed every other
round; medians over rounds. Ours with the persistent compilation cache off (cold: compiling
counted) and, with --warm, also with a cache filled by an untimed run before the rounds. Prints
runs per hour per side, the ratios, each side's median held-out MSE, and writes --out (JSON).
This process never imports PyTorch.
--mode=scaling: `python -m experiments.sweep --config=configs/sweeps/seeds.py:N --config.train.steps=S`
(one process per row, cold: no compilation cache; under --ulimit_n when > 0) for each N of --scale_runs
and S of --scale_steps, its /proc sampled every 20 ms; a table of wall time, training-step share
(the groups' training time over wall), per-run overhead ((wall - compiling - training) / runs: start-up,
logs, checkpoints, summaries), peak RSS, peak threads, peak open files and runs per hour; --out (JSON).
"""

import ast
import contextlib
import csv
import datetime
import io
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from absl import app
from absl import flags
from absl import logging

# Imports inside functions on purpose: a bad flag fails at once; jax and the heavy optional imports
# load inside the timed modes, outside the timings.


flags.DEFINE_enum(
  'mode', 'padding', ['padding', 'seeds', 'frameworks', 'scaling'], 'What to compare (see the docstring).'
)
flags.DEFINE_list(
  'sweeps',
  ['quick', 'regression'],
  'padding: capacity_dense.py arguments to run (quick: 16 runs, 500 steps; regression: the full 162 runs, 2000 steps).',
)
flags.DEFINE_list('pad_flops_factors', [], 'padding: factors of the padded sides (default: programs.PAD_FLOPS_FACTOR).')
flags.DEFINE_integer(
  'num_runs', None, 'seeds: seeds to train (default 16); frameworks: seeds of --workload=seeds64 (default 64).'
)
flags.DEFINE_string('config', 'configs/regression.py', 'seeds: config file (get_config() default arg).')
# --mode=frameworks workloads: the sweep file each times.
WORKLOADS = {
  'seeds64': 'configs/sweeps/seeds.py:{num_runs}',  # the quickstart model, --num_runs seeds (default 64)
  'capacity_dense': 'configs/sweeps/capacity_dense.py',  # 9 widths x 6 activations x 3 seeds, 2000 steps
  'capacity_dense_quick': 'configs/sweeps/capacity_dense.py:quick',  # 16 runs, 500 steps
}
flags.DEFINE_enum(
  'workload',
  'seeds64',
  list(WORKLOADS),
  'frameworks: the sweep timed (seeds64: '
  'configs/sweeps/seeds.py; capacity_dense[_quick]: configs/sweeps/capacity_dense.py[:quick]).',
)
flags.DEFINE_list(
  'sides',
  ['ours', 'loop', 'func'],
  "frameworks: sides to time (ours: the project's sweep CLI; "
  'loop: PyTorch eager, one run after another; func: torch.func ensembles, one per shape).',
)
flags.DEFINE_integer('rounds', 3, 'frameworks: rounds; every side runs once per round.')
flags.DEFINE_bool('warm', True, 'frameworks: also time ours with a warm persistent compilation cache.')
flags.DEFINE_list(
  'overrides', [], 'frameworks: KEY=VALUE changes of the base config of every side (e.g. train.steps=20).'
)
flags.DEFINE_bool(
  'ours_without_torch',
  True,
  'frameworks: run our sweep CLI with torch unimportable, as in the '
  'default install (torch is only in the [bench] extra). Since 2026-11-25 a run hides torch from '
  'tensorboardX itself (io.summary_writer_class), so this only guards other imports of it.',
)
flags.DEFINE_integer(
  'torch_threads',
  1,
  "frameworks: torch.set_num_threads of the PyTorch sides (0: PyTorch's default; see benchmarks/bench_torch_sweep.py).",
)
flags.DEFINE_string('out', 'benchmark_sweep.json', 'frameworks, scaling: JSON output file ("" for none).')
flags.DEFINE_list('scale_runs', ['64', '256', '1024', '2048', '4096', '10000'], 'scaling: numbers of seeds.')
flags.DEFINE_list('scale_steps', ['200', '2000'], 'scaling: train.steps of each row.')
flags.DEFINE_integer('ulimit_n', 0, 'scaling: the open-file limit of each sweep process (0: as inherited).')
FLAGS = flags.FLAGS

SWEEP_FILE = 'configs/sweeps/capacity_dense.py'


def machine() -> str:
  import jax

  devices = jax.local_devices()
  return (
    f'machine: {platform.machine()} {platform.processor() or ""}, {os.cpu_count()} CPUs, '
    f'{len(devices)} x {devices[0].device_kind} ({jax.default_backend()}), '
    f'jax {jax.__version__}, python {platform.python_version()}'
  )


def completed(summaries: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
  """A sweep's summaries, every run completed (or an AssertionError)."""
  done = {k: s for k, s in summaries.items() if s is not None and s['status'] == 'completed'}
  assert len(done) == len(summaries), 'a run did not complete'
  return done


def fresh_caches() -> None:
  """Forget every compiled program of this process (the persistent cache is never on here)."""
  import jax

  from ffn_research import programs

  programs.clear_cache()
  jax.clear_caches()


def padding(tmp: str) -> None:
  import numpy as np

  from ffn_research import configfile
  from ffn_research import programs
  from ffn_research import sweep

  factors = [float(f) for f in FLAGS.pad_flops_factors] or [programs.PAD_FLOPS_FACTOR]
  print(machine())
  for arg in FLAGS.sweeps:
    base, grid = configfile.load_sweep_file(f'{SWEEP_FILE}:{arg}')
    runs = sweep.expand(base, grid)
    wall, out = {}, {}
    for f in [1.0, *factors]:
      groups = sweep.group_runs(runs, f)
      fresh_caches()
      t0 = time.time()
      with contextlib.redirect_stderr(io.StringIO()):
        out[f] = completed(
          sweep.run_sweep(base, grid, os.path.join(tmp, arg, f'factor_{f:g}'), pad_flops_factor=f, progress=False)
        )
      wall[f] = time.time() - t0
      compile_s = sum(s['compile_time_s'] / s['sweep_group_size'] for s in out[f].values())
      checkpoint_s = sum(s['checkpoint_time_s'] for s in out[f].values())
      line = (
        f'{SWEEP_FILE}:{arg}: {len(runs)} runs, pad_flops_factor {f:g}: {len(groups):3d} programs, '
        f'{wall[f]:7.1f} s (compiling the train chunks {compile_s:.1f} s, checkpoints {checkpoint_s:.1f} s)'
      )
      if f != 1.0:
        diff = [abs(out[f][k]['eval_loss'] - s['eval_loss']) for k, s in out[1.0].items()]
        rel = max(d / abs(s['eval_loss']) for d, s in zip(diff, out[1.0].values(), strict=True))
        line += (
          f', {wall[1.0] / wall[f]:.2f}x faster than a program per d_ff; max |eval_loss difference| '
          f'of a run padded vs unpadded {max(diff):.2e} (relative {rel:.2e}; median eval_loss '
          f'{np.median([s["eval_loss"] for s in out[1.0].values()]):.3e})'
        )
      print(line, flush=True)


def seeds(tmp: str) -> None:
  import numpy as np

  from ffn_research import configfile
  from ffn_research import loop
  from ffn_research import sweep

  config = configfile.get_config(FLAGS.config)
  num_runs = FLAGS.num_runs or 16
  grid = sweep.values('train.seed', range(num_runs))
  fresh_caches()
  t0 = time.time()
  vmapped = completed(sweep.run_sweep(config, grid, os.path.join(tmp, 'sweep'), progress=False))
  t_vmapped = time.time() - t0
  fresh_caches()
  t0 = time.time()
  separate = {}
  for o in grid:
    with contextlib.redirect_stdout(io.StringIO()):  # the per-step log lines
      separate[sweep.run_name(o)] = loop.train_and_evaluate(
        sweep.apply_overrides(config, o), os.path.join(tmp, 'separate', sweep.run_name(o))
      )
  t_separate = time.time() - t0
  compile_separate = sum(s['compile_time_s'] for s in separate.values())
  compile_vmapped = next(iter(vmapped.values()))['compile_time_s']
  rel = max(abs(vmapped[k]['eval_loss'] - s['eval_loss']) / abs(s['eval_loss']) for k, s in separate.items())
  print(machine())
  print(
    f'config: {FLAGS.config} default ({config.train.steps} steps, batch {config.train.batch_size}, '
    f'd_ff {config.model.d_ff}, {config.model.activation}), {num_runs} seeds'
  )
  print(f'one vmapped program : {t_vmapped:7.2f} s (compile {compile_vmapped:.2f} s)')
  print(f'separate runs       : {t_separate:7.2f} s (compile {compile_separate:.2f} s in total)')
  print(f'speedup             : {t_separate / t_vmapped:.1f}x')
  print(
    f'max relative eval_loss difference, vmapped vs separate: {rel:.2e}; median eval_loss '
    f'{np.median([s["eval_loss"] for s in separate.values()]):.3e}'
  )


# --------------------------------------------------------------------------- frameworks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Config keys the PyTorch reference (benchmarks/bench_torch_sweep.py) reproduces only at these values.
TORCH_FIXED = {
  'model.arch': 'ffn',
  'model.d_model': 1,
  'model.use_bias': True,
  'model.dropout_rate': 0.0,
  'model.match_params': False,
  'model.init': 'xavier_uniform',
  'model.dtype': 'float32',
  'model.moe.num_experts': 0,
  'task.name': 'function',
  'train.optimizer': 'adam',
  'train.schedule': 'cosine',
  'train.eval_every': 0,
}
# Keys that may differ between the runs of a sweep the reference trains (one ensemble per shape).
TORCH_PER_RUN = ('model.d_ff', 'model.activation', 'train.seed')
SIDE_NAMES = {
  'ours': 'ours, cold (no compilation cache)',
  'ours_warm': 'ours, warm compilation cache',
  'loop': 'PyTorch eager loop',
  'func': 'PyTorch torch.func ensembles',
}


def parse_override(text: str) -> tuple[str, object]:
  """'train.steps=20' -> ('train.steps', 20): a Python literal, else the string."""
  key, sep, value = text.partition('=')
  if not sep or not key:
    raise ValueError(f'--overrides entry {text!r} must be KEY=VALUE')
  try:
    return key, ast.literal_eval(value)
  except (ValueError, SyntaxError):
    return key, value


def torch_spec(runs) -> dict:
  """The runs as benchmarks/bench_torch_sweep.py reads them; ValueError (one line) for a sweep it cannot train."""
  from ffn_research import config as config_lib

  flat = [config_lib.flat_keys(r.config) for r in runs]
  for key, value in TORCH_FIXED.items():
    bad = next((f[key] for f in flat if f[key] != value), value)
    if bad != value:
      raise ValueError(f'the PyTorch reference trains {key}={value!r} only, this sweep has {bad!r}')
  shared = {k: v for k, v in flat[0].items() if k not in TORCH_PER_RUN}
  for f, r in zip(flat, runs, strict=True):
    diff = next((k for k, v in shared.items() if f[k] != v), None)
    if diff:
      raise ValueError(
        f'the PyTorch reference varies only {", ".join(TORCH_PER_RUN)} between runs; run {r.name} differs in {diff}'
      )
  tr = runs[0].config.train
  return {
    'task': {k: shared[f'task.{k}'] for k in ('function', 'num_train', 'num_eval', 'grid_size')},
    'train': {
      'steps': tr.steps,
      'batch_size': tr.batch_size,
      'learning_rate': tr.learning_rate,
      'warmup_steps': tr.warmup_steps,
      'grad_clip': tr.grad_clip,
      'log_every': tr.log_every,
    },
    'runs': [
      {
        'name': r.name,
        'd_ff': r.config.model.d_ff,
        'activation': r.config.model.activation,
        'seed': r.config.train.seed,
      }
      for r in runs
    ],
  }


def machine_info() -> dict:
  """CPU model, cores, versions (PyTorch's without importing it), UTC date, load average now."""
  import importlib.metadata

  import jax

  from ffn_research import io as io_lib

  cpu = io_lib.cpu_name()
  try:
    torch_version = importlib.metadata.version('torch')
  except importlib.metadata.PackageNotFoundError:
    torch_version = None
  return {
    'cpu': cpu,
    'cpu_count': os.cpu_count(),
    'python': platform.python_version(),
    'jax': jax.__version__,
    'torch': torch_version,
    'date_utc': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M'),
    'load_average_start': list(os.getloadavg()),
  }


def ours_results(workdir: str) -> dict:
  """eval_loss per run and where the time went, from the sweep's results.csv."""
  with open(os.path.join(workdir, 'results.csv'), encoding='utf-8') as fh:
    rows = list(csv.DictReader(fh))
  num = lambda row, k: float(row[k]) if row.get(k) not in (None, '') else 0.0
  return {
    'status': sorted({r['status'] for r in rows}),
    'eval_loss': {r['name']: num(r, 'eval_loss') for r in rows},
    'groups': len({(r['sweep_padded_d_ff'], r.get('model.activation', '')) for r in rows}),
    'compile_s': sum(num(r, 'compile_time_s') / num(r, 'sweep_group_size') for r in rows),
    'checkpoint_s': sum(num(r, 'checkpoint_time_s') for r in rows),
    'steps_s': sum(num(r, 'step') / num(r, 'steps_per_s') / num(r, 'sweep_group_size') for r in rows),
    'groups_wall_s': sum(num(r, 'wall_time_s') for r in rows),
  }


def torch_results(out: str) -> dict:
  """eval_loss per run and the worker's own clocks, from benchmarks/bench_torch_sweep.py's results.json."""
  with open(os.path.join(out, 'results.json'), encoding='utf-8') as fh:
    doc = json.load(fh)
  losses = {k: r['eval_loss'] for k, r in doc['runs'].items()}
  return {
    'status': sorted({'completed' if v is not None and math.isfinite(v) else 'non-finite' for v in losses.values()}),
    'eval_loss': losses,
    'groups': doc['groups'],
    'threads': doc['threads'],
    'train_s': doc['train_s'],
    'main_s': doc['main_s'],
  }


def time_side(side: str, workdir: str, sweep_spec: str, spec_path: str, cache: str) -> tuple[float, dict]:
  """(seconds from process start to exit, its results) of one side in its own process."""
  if side in ('ours', 'ours_warm'):
    # The real CLI; without torch: run as `python -m experiments.sweep` with torch unimportable (a guard: the
    # run itself no longer imports torch, see io.summary_writer_class).
    start = (
      [
        '-c',
        "import runpy, sys; sys.modules['torch'] = None; "
        "runpy.run_module('experiments.sweep', run_name='__main__', alter_sys=True)",
      ]
      if FLAGS.ours_without_torch
      else ['-m', 'experiments.sweep']
    )
    cmd = [
      sys.executable,
      *start,
      f'--config={sweep_spec}',
      f'--workdir={workdir}',
      f'--compilation_cache_dir={cache if side == "ours_warm" else ""}',
      '--noprogress',
      *(f'--config.{o}' for o in FLAGS.overrides),
    ]
  else:
    cmd = [
      sys.executable,
      '-m',
      'benchmarks.bench_torch_sweep',
      f'--runs={spec_path}',
      f'--side={side}',
      f'--outdir={workdir}',
      f'--threads={FLAGS.torch_threads}',
    ]
  t0 = time.perf_counter()
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
  seconds = time.perf_counter() - t0
  if proc.returncode:
    raise RuntimeError(
      f'{side} failed (exit {proc.returncode}): {" ".join(cmd)}: {(proc.stderr.strip().splitlines() or [""])[-1]}'
    )
  out = ours_results(workdir) if side.startswith('ours') else torch_results(workdir)
  if out['status'] != ['completed']:
    raise RuntimeError(f'{side}: not every run completed ({", ".join(out["status"])}): {" ".join(cmd)}')
  return seconds, out


def frameworks(tmp: str) -> dict:
  """Every side once per round in its own process, the order reversed every other round; the JSON document."""
  import numpy as np

  from ffn_research import configfile
  from ffn_research import sweep

  sweep_spec = WORKLOADS[FLAGS.workload].format(num_runs=FLAGS.num_runs or 64)
  base, grid = configfile.load_sweep_file(sweep_spec)
  overrides = dict(parse_override(o) for o in FLAGS.overrides)
  runs = sweep.expand(sweep.apply_overrides(base, overrides), grid)
  spec = torch_spec(runs) if {'loop', 'func'} & set(FLAGS.sides) else None
  spec_path = os.path.join(tmp, 'runs.json')
  with open(spec_path, 'w', encoding='utf-8') as fh:
    json.dump(spec, fh)
  sides = [s for side in FLAGS.sides for s in ([side, 'ours_warm'] if side == 'ours' and FLAGS.warm else [side])]
  info = machine_info()
  cache = os.path.join(tmp, 'cache')
  tr = runs[0].config.train
  what = (
    f'{sweep_spec}{" " + " ".join(FLAGS.overrides) if FLAGS.overrides else ""}: {len(runs)} runs, '
    f'{len({(r.config.model.activation, r.config.model.d_ff) for r in runs})} shapes, {tr.steps} steps, '
    f'batch {tr.batch_size}'
  )
  log(f'{what}; {FLAGS.rounds} round(s) of {", ".join(sides)}')
  fill_s = None
  if 'ours_warm' in sides:  # fill the compilation cache (untimed for the medians)
    fill_s, _ = time_side('ours_warm', os.path.join(tmp, 'fill'), sweep_spec, spec_path, cache)
    log(f'filled the compilation cache in {fill_s:.1f} s')
  seconds: dict[str, list[float]] = {s: [] for s in sides}
  results: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
  for r in range(FLAGS.rounds):
    for side in sides if r % 2 == 0 else sides[::-1]:
      s, out = time_side(side, os.path.join(tmp, f'{side}_{r}'), sweep_spec, spec_path, cache)
      seconds[side].append(s)
      results[side].append(out)
      log(f'round {r + 1}/{FLAGS.rounds}: {side} {s:.1f} s')
  info['load_average_end'] = list(os.getloadavg())
  median = {s: statistics.median(v) for s, v in seconds.items()}
  evals = {s: float(np.median(list(results[s][0]['eval_loss'].values()))) for s in sides}
  activation = {r.name: r.config.model.activation for r in runs}
  by_act = {
    s: {
      a: float(np.median([v for k, v in results[s][0]['eval_loss'].items() if activation[k] == a]))
      for a in sorted(set(activation.values()))
    }
    for s in sides
  }
  breakdown = {}
  for side in sides:
    keys = (
      ('compile_s', 'checkpoint_s', 'steps_s', 'groups_wall_s') if side.startswith('ours') else ('train_s', 'main_s')
    )
    breakdown[side] = {k: statistics.median(o[k] for o in results[side]) for k in keys}
    breakdown[side]['groups'] = results[side][0]['groups']
  ratios = {}
  for ours in ('ours', 'ours_warm'):
    for other in ('loop', 'func'):
      if ours in median and other in median:
        ratios[f'{other}_over_{ours}'] = median[other] / median[ours]
  return {
    'mode': 'frameworks',
    'workload': FLAGS.workload,
    'sweep': sweep_spec,
    'overrides': FLAGS.overrides,
    'what': what,
    'num_runs': len(runs),
    'rounds': FLAGS.rounds,
    'sides': sides,
    'torch_threads': FLAGS.torch_threads,
    'ours_without_torch': FLAGS.ours_without_torch,
    'machine': info,
    'seconds': seconds,
    'median_s': median,
    'runs_per_hour': {s: 3600 * len(runs) / v for s, v in median.items()},
    'ratios': ratios,
    'cache_fill_s': fill_s,
    'median_eval_loss': evals,
    'median_eval_loss_by_activation': by_act,
    'breakdown': breakdown,
    'eval_loss': {s: results[s][0]['eval_loss'] for s in sides},
    'command': ' '.join(['python -m benchmarks.benchmark_sweep', *sys.argv[1:]]),
  }


def versus(theirs_over_ours: float, who: str) -> str:
  """'ours 3.10x faster than WHO' or 'WHO 1.25x faster than ours' from the ratio of their time to ours."""
  if theirs_over_ours >= 1:
    return f'ours {theirs_over_ours:.2f}x faster than {who}'
  return f'{who} {1 / theirs_over_ours:.2f}x faster than ours'


def log(msg: str) -> None:
  print(f'[benchmark_sweep {time.strftime("%H:%M:%S")}] {msg}', file=sys.stderr, flush=True)


def report(doc: dict) -> str:
  """The printed summary of a frameworks document."""
  m = doc['machine']
  load = lambda v: '/'.join(f'{x:.2f}' for x in v)
  lines = [
    f'machine: {m["cpu"]}, {m["cpu_count"]} cores, python {m["python"]}, jax {m["jax"]}, '
    f'torch {m["torch"]} ({doc["torch_threads"] or "default"} thread(s)); {m["date_utc"]} UTC; load average '
    f'(1/5/15 min) {load(m["load_average_start"])} at the start, {load(m["load_average_end"])} at the end',
    f'workload: {doc["what"]}; {doc["rounds"]} round(s), each side in its own process, process start to '
    'results written; ours '
    + (
      'with torch unimportable (as installed without [bench])' if doc['ours_without_torch'] else 'with torch importable'
    ),
    f'{"side":34s} {"median s":>9s} {"runs/hour":>10s}  {"median eval_loss":>16s}  rounds (s)',
  ]
  for s in doc['sides']:
    lines.append(
      f'{SIDE_NAMES[s]:34s} {doc["median_s"][s]:9.2f} {doc["runs_per_hour"][s]:10,.0f}  '
      f'{doc["median_eval_loss"][s]:16.3e}  ' + ', '.join(f'{x:.2f}' for x in doc['seconds'][s])
    )
  for ours in ('ours', 'ours_warm'):
    parts = [
      versus(doc['ratios'][f'{o}_over_{ours}'], 'the loop' if o == 'loop' else 'torch.func')
      for o in ('loop', 'func')
      if f'{o}_over_{ours}' in doc['ratios']
    ]
    if parts:
      lines.append(f'{SIDE_NAMES[ours]}: ' + ', '.join(parts))
  if 'loop_over_ours' in doc['ratios'] and 'func_over_ours' in doc['ratios']:
    met = lambda ok: 'met' if ok else 'missed'
    lines.append(
      f'targets (cold): >= 3x the loop {met(doc["ratios"]["loop_over_ours"] >= 3)}, ahead of torch.func '
      f'{met(doc["ratios"]["func_over_ours"] > 1)}'
    )
  if len(next(iter(doc['median_eval_loss_by_activation'].values()))) > 1:
    for s, by in doc['median_eval_loss_by_activation'].items():
      lines.append(f'median eval_loss by activation, {s}: ' + ', '.join(f'{a} {v:.2e}' for a, v in by.items()))
  for s, b in doc['breakdown'].items():
    wall = doc['median_s'][s]
    if s.startswith('ours'):
      other = b['groups_wall_s'] - b['compile_s'] - b['checkpoint_s'] - b['steps_s']
      lines.append(
        f'{s}: {b["groups"]} program(s); training steps {b["steps_s"]:.1f} s, compiling the train chunks '
        f'{b["compile_s"]:.1f} s, checkpoints {b["checkpoint_s"]:.1f} s, the rest of the groups (init, '
        f'evaluation, their compiling, tracing, logs) {other:.1f} s; outside the groups (start-up, '
        f'imports, planning, results.csv) {wall - b["groups_wall_s"]:.1f} s'
      )
    else:
      lines.append(
        f'{s}: {b["groups"]} {"ensemble(s)" if s == "func" else "run(s)"}; training and evaluation '
        f'{b["train_s"]:.1f} s, start-up and imports {wall - b["main_s"]:.1f} s'
      )
  evals = list(doc['median_eval_loss'].values())
  if max(evals) > 3 * min(evals):
    lines.append("WARNING: the sides' median eval_loss differ by more than 3x: check the runs before the timings")
  return '\n'.join(lines)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  if FLAGS.mode == 'frameworks':
    main_frameworks()
    return
  if FLAGS.mode == 'scaling':
    main_scaling()
    return
  import jax

  from ffn_research import io as io_lib

  io_lib.summary_writer_class()  # tensorboardX, without torch, as a run imports it
  jax.jit(lambda x: x + 1)(1.0).block_until_ready()  # start-up and imports are charged to neither side
  with tempfile.TemporaryDirectory() as tmp:
    (padding if FLAGS.mode == 'padding' else seeds)(tmp)


def main_frameworks() -> None:
  """--mode=frameworks: flags checked in one line each, the rounds, the report and the JSON."""
  from ffn_research import config as config_lib

  if FLAGS.rounds < 1:
    sys.exit(f'error: --rounds={FLAGS.rounds} must be a positive integer')
  if FLAGS.num_runs is not None and FLAGS.num_runs < 1:
    sys.exit(f'error: --num_runs={FLAGS.num_runs} must be a positive integer')
  bad = [s for s in FLAGS.sides if s not in ('ours', 'loop', 'func')]
  if bad or not FLAGS.sides:
    sys.exit(f'error: --sides={",".join(FLAGS.sides)}: allowed ours, loop, func')
  if {'loop', 'func'} & set(FLAGS.sides):
    import importlib.util

    if importlib.util.find_spec('torch') is None:
      sys.exit('error: torch not installed (pip install -e .[bench]); or --sides=ours')
  try:
    with tempfile.TemporaryDirectory() as tmp:
      doc = frameworks(tmp)
  except (config_lib.ConfigError, ValueError, RuntimeError) as e:
    sys.exit(f'error: {e}')
  print(report(doc))
  if FLAGS.out:
    with open(FLAGS.out + '.tmp', 'w', encoding='utf-8') as fh:
      json.dump(doc, fh, indent=1)
    os.replace(FLAGS.out + '.tmp', FLAGS.out)
    print(f'wrote {FLAGS.out}')


# --------------------------------------------------------------------------- scaling


def watch(proc: subprocess.Popen) -> dict[str, int]:
  """Peak RSS (bytes), threads and open files of a running process, sampled from /proc until it exits."""
  peak = {'rss_bytes': 0, 'threads': 0, 'open_files': 0}
  while proc.poll() is None:
    with contextlib.suppress(OSError, ValueError, StopIteration):
      with open(f'/proc/{proc.pid}/status', encoding='utf-8') as fh:
        hwm = next(line for line in fh if line.startswith('VmHWM:'))
      peak['rss_bytes'] = max(peak['rss_bytes'], int(hwm.split()[1]) * 1024)
      peak['threads'] = max(peak['threads'], len(os.listdir(f'/proc/{proc.pid}/task')))
      peak['open_files'] = max(peak['open_files'], len(os.listdir(f'/proc/{proc.pid}/fd')))
    time.sleep(0.02)
  return peak


def scaling_row(num_runs: int, steps: int, workdir: str) -> dict[str, Any]:
  """One sweep of `num_runs` seeds of the quickstart at `steps` steps, timed and watched in its own process."""
  import resource

  cmd = [
    sys.executable,
    '-m',
    'experiments.sweep',
    f'--config=configs/sweeps/seeds.py:{num_runs}',
    f'--config.train.steps={steps}',
    *(f'--config.{o}' for o in FLAGS.overrides),
    f'--workdir={workdir}',
    '--compilation_cache_dir=',
    '--noprogress',
  ]
  limit = FLAGS.ulimit_n

  def set_limit() -> None:
    if limit > 0:
      resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

  t0 = time.perf_counter()
  with tempfile.TemporaryFile() as err:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=set_limit)
    peak = watch(proc)
    wall = time.perf_counter() - t0
    err.seek(0)
    stderr = err.read().decode(errors='replace')
  if proc.returncode:
    raise RuntimeError(f'{" ".join(cmd)} failed (exit {proc.returncode}): {(stderr.strip().splitlines() or [""])[-1]}')
  out = ours_results(workdir)
  if out['status'] != ['completed']:
    raise RuntimeError(f'not every run completed ({", ".join(out["status"])}): {" ".join(cmd)}')
  rest = wall - out['compile_s'] - out['steps_s']
  return {
    'runs': num_runs,
    'steps': steps,
    'wall_s': wall,
    'compile_s': out['compile_s'],
    'train_s': out['steps_s'],
    'train_share': out['steps_s'] / wall,
    'overhead_ms_per_run': 1000 * rest / num_runs,
    'checkpoint_ms_per_run': 1000 * out['checkpoint_s'] / num_runs,
    **peak,
    'runs_per_hour': 3600 * num_runs / wall,
    'split': next((line for line in stderr.splitlines() if 'groups of at most' in line), ''),
  }


def scaling_table(rows: list[dict[str, Any]]) -> str:
  head = (
    f'{"runs":>6} {"steps":>5} {"wall s":>8} {"compile s":>9} {"train %":>7} {"overhead ms/run":>15} '
    f'{"ckpt ms/run":>11} {"peak RSS GB":>11} {"threads":>7} {"open files":>10} {"runs/hour":>11}'
  )
  lines = [head]
  for r in rows:
    lines.append(
      f'{r["runs"]:>6} {r["steps"]:>5} {r["wall_s"]:>8.1f} {r["compile_s"]:>9.1f} {100 * r["train_share"]:>6.1f}% '
      f'{r["overhead_ms_per_run"]:>15.2f} {r["checkpoint_ms_per_run"]:>11.2f} {r["rss_bytes"] / 1e9:>11.2f} '
      f'{r["threads"]:>7} {r["open_files"]:>10} {r["runs_per_hour"]:>11,.0f}'
    )
  return '\n'.join(lines)


def main_scaling() -> None:
  """--mode=scaling: one sweep process per (runs, steps), the table and the JSON."""
  try:
    sizes = [int(n) for n in FLAGS.scale_runs]
    steps = [int(n) for n in FLAGS.scale_steps]
    if min(sizes + steps) < 1:
      raise ValueError
  except ValueError:
    sys.exit(
      f'error: --scale_runs={",".join(FLAGS.scale_runs)} and --scale_steps={",".join(FLAGS.scale_steps)} '
      'must be positive integers'
    )
  doc: dict[str, Any] = {'machine': machine_info(), 'ulimit_n': FLAGS.ulimit_n, 'overrides': FLAGS.overrides}
  rows = []
  try:
    for s in steps:
      for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
          rows.append(scaling_row(n, s, os.path.join(tmp, 'sweep')))
        log(scaling_table(rows[-1:]).splitlines()[-1])
  except RuntimeError as e:
    sys.exit(f'error: {e}')
  doc['machine']['load_average_end'] = list(os.getloadavg())
  doc['rows'] = rows
  print(scaling_table(rows))
  if FLAGS.out:
    with open(FLAGS.out + '.tmp', 'w', encoding='utf-8') as fh:
      json.dump(doc, fh, indent=1)
    os.replace(FLAGS.out + '.tmp', FLAGS.out)
    print(f'wrote {FLAGS.out}')


if __name__ == '__main__':
  import jax

  jax.config.config_with_absl()  # --jax_debug_nans, --jax_platforms, ...
  app.run(main)
