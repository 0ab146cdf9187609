"""Performance suite: this project against PyTorch eager and against the machine, one table + JSON.

  python -m experiments.benchmark                      # CPU suite, writes benchmark.json
  python -m experiments.benchmark --quick              # fewer repeats (~3 minutes)
  python -m experiments.benchmark --out=b.json --write_readme   # and regenerate the Performance blocks
  python -m experiments.benchmark --from_json=b.json --write_readme  # the blocks only, no timing
  python -m experiments.benchmark --suite=gpu          # GPU rows (exits "no GPU" on a CPU)

Every row is timed side by side in one process after warm-up (variants interleaved, so
machine load hits all alike), medians over repeats; one train step = forward, backward and
Adam. PyTorch (`pip install -e .[bench]`) is optional: without it its columns say so.
"""

import contextlib
import datetime
import functools
import io
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags, logging

# Imports inside functions on purpose: a bad flag fails at once; jax, and the optional PyTorch, load
# only for the rows that run.
# pylint: disable=g-import-not-at-top

flags.DEFINE_enum('suite', 'cpu', ['cpu', 'gpu'], 'Which rows: the CPU suite or the GPU suite.')
flags.DEFINE_bool('quick', False, 'Fewer repeats and steps (same shapes).')
flags.DEFINE_bool('tiny', False, 'Tiny shapes, one repeat: a smoke test of every row (tests).')
flags.DEFINE_string('out', 'benchmark.json', 'JSON output file ("" for none).')
flags.DEFINE_list('only', [], 'Row groups to run (default all): dense, moe, matmul, xla_options, '
                  'memorization, quickstart (cpu); dense_bf16, moe, sweep (gpu).')
flags.DEFINE_bool('write_readme', False, 'Regenerate the Performance blocks from the JSON: headline rows '
                  'in --readme, every row in --performance_page.')
flags.DEFINE_string('from_json', '', 'With --write_readme: take this JSON instead of running.')
flags.DEFINE_string('readme', 'README.md', 'README file for --write_readme (headline rows).')
flags.DEFINE_string('performance_page', 'docs/performance.md', 'Page for --write_readme with every row '
                    '("" for none).')
flags.DEFINE_list('moe_dispatches', ['sort'], 'MoE dispatches timed at every capacity factor '
                  '(sort, einsum, ragged; the GPU suite times ragged and sort).')
flags.DEFINE_integer('sort_block', None, "Rows per block past the 'sort' windows (default "
                     'models/moe.py SORT_BLOCK).')
flags.DEFINE_bool('allow_cpu', False, '--suite=gpu on a CPU backend anyway (tests of the GPU rows).')
FLAGS = flags.FLAGS

GROUPS = {'cpu': ('dense', 'moe', 'matmul', 'xla_options', 'memorization', 'quickstart'),
          'gpu': ('dense_bf16', 'moe', 'sweep')}
README_BEGIN, README_END = '<!-- performance:begin -->', '<!-- performance:end -->'
# Rows the README shows (the page shows all): dense vs PyTorch, MoE vs dense, the ceiling, the quickstart.
HEADLINE_IDS = ('dense_512x2048_t8192', 'moe_dense_matched', 'moe_sort_cf1', 'matmul_2048', 'quickstart_cold',
                'quickstart_warm')

# Shapes and repeats per size. dense: (d_model, d_ff, tokens); moe: top-k of E experts of width
# d_expert vs a dense FFN of width k d_expert (the same active FLOPs); memorization: the
# ffn_stack config of issue 12 (16,384 facts, d_model 32, d_ff 64, batch 512).
SIZES = {
    'full': dict(dense=((512, 2048, 8192), (128, 512, 4096), (64, 256, 1024)), repeats=7,
                 moe=dict(tokens=4096, d_model=128, d_expert=512, num_experts=8, top_k=2),
                 moe_repeats=15, capacity_factors=(1.0, 1.25, 0.0), matmul=2048,
                 memorization=dict(facts=16384, relations=16, d_model=32, d_ff=64, batch=512,
                                   log_every=100, steps=500),
                 quickstart=[]),
    'quick': dict(dense=((512, 2048, 8192), (128, 512, 4096), (64, 256, 1024)), repeats=3,
                  moe=dict(tokens=4096, d_model=128, d_expert=512, num_experts=8, top_k=2),
                  moe_repeats=7, capacity_factors=(1.0, 1.25, 0.0), matmul=2048,
                  memorization=dict(facts=16384, relations=16, d_model=32, d_ff=64, batch=512,
                                    log_every=100, steps=200),
                  quickstart=[]),
    'tiny': dict(dense=((16, 32, 64),), repeats=1,
                 moe=dict(tokens=64, d_model=8, d_expert=16, num_experts=4, top_k=2),
                 moe_repeats=1, capacity_factors=(1.0, 1.25, 0.0), matmul=64,
                 memorization=dict(facts=256, relations=16, d_model=8, d_ff=16, batch=64,
                                   log_every=2, steps=4),
                 quickstart=['--config.train.steps=4', '--config.train.log_every=2']),
}
GPU_SIZES = {
    'full': dict(dense=(2048, 8192, 8192), repeats=10, matmul=8192,
                 moe=dict(tokens=16384, d_model=1024, d_expert=2048, num_experts=8, top_k=2),
                 capacity_factors=(1.25, 0.0), sweep_runs=64),
    'quick': dict(dense=(2048, 8192, 8192), repeats=5, matmul=8192,
                  moe=dict(tokens=16384, d_model=1024, d_expert=2048, num_experts=8, top_k=2),
                  capacity_factors=(1.25, 0.0), sweep_runs=16),
    'tiny': dict(dense=(16, 32, 64), repeats=1, matmul=64,
                 moe=dict(tokens=64, d_model=8, d_expert=16, num_experts=4, top_k=2),
                 capacity_factors=(1.25, 0.0), sweep_runs=2),
}
# XLA:CPU compiler options that change the compiled dense step in jax 0.10.2 (checked in the
# compiled HLO: dots run as YNNPACK fusions by default; '' turns those off, so XLA's own Eigen
# dots run; ELTWISE alone leaves the dots to Eigen too). The oneDNN
# (xla_cpu_experimental_onednn_custom_call, xla_cpu_use_onednn) and XNNPACK
# (xla_cpu_use_xnnpack, xla_cpu_experimental_xnn_fusion_type) options leave the compiled
# program unchanged in this build, so they are not timed.
XLA_CPU_OPTIONS = {
    'ynn_off_eigen_dots': {'xla_cpu_experimental_ynn_fusion_type': ''},
    'ynn_eltwise_only': {'xla_cpu_experimental_ynn_fusion_type': 'LIBRARY_FUSION_TYPE_ELTWISE'},
    'fast_math': {'xla_cpu_enable_fast_math': True},
}
# Dense bf16 peak FLOP/s by device kind (vendor data sheets, no sparsity), for MFU.
PEAK_BF16 = {'H100': 989e12, 'H200': 989e12, 'A100': 312e12}


# --------------------------------------------------------------------------- timing


def interleaved_ms(fns, repeats):
  """Median ms per call of each no-argument callable, after one warm-up call each; the
  variants take turns in every round so that machine load hits all alike."""
  for fn in fns:
    fn()
  times = [[] for _ in fns]
  for _ in range(repeats):
    for fn, ts in zip(fns, times):
      t0 = time.perf_counter()
      fn()
      ts.append(time.perf_counter() - t0)
  return [1e3 * statistics.median(ts) for ts in times]


def jax_step_fn(model, x, y, compiler_options=None):
  """A no-argument callable: one jitted, donated train step (MSE + the model's '_loss' aux, Adam)."""
  import jax
  import jax.numpy as jnp
  import optax
  from flax import nnx
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  opt = optax.adam(1e-3)

  def loss_fn(params, x, y):  # rng given: training mode (MoE capacity applies; no dropout or jitter set)
    out, aux = nnx.merge(graphdef, params, rest).apply(x, rng=jax.random.key(0))
    return jnp.mean(jnp.square(out - y)) + sum(v for k, v in aux.items() if k.endswith('_loss'))

  @functools.partial(jax.jit, donate_argnums=(0, 1), compiler_options=compiler_options)
  def step(params, opt_state, x, y):
    grads = jax.grad(loss_fn)(params, x, y)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  state = [params, opt.init(params)]

  def run():
    state[:] = jax.block_until_ready(step(*state, x, y))
  return run


def torch_or_none():
  """experiments.bench_torch, or None when PyTorch is not installed."""
  try:
    from experiments import bench_torch
  except ImportError:
    return None
  return bench_torch


NO_TORCH = 'torch not installed (pip install -e .[bench])'


def row(id_, workload, ours_ms=None, **fields):
  """One table row: `ours_ms` (this project) plus named references and ratios."""
  return {'id': id_, 'workload': workload, 'ours_ms': ours_ms, **fields}


# --------------------------------------------------------------------------- CPU rows


def dense_rows(size, torch_mod):
  """Dense FFN train steps, ours vs PyTorch eager on the same model; achieved GFLOP/s and its
  share of the XLA matmul ceiling (one n^3 matmul timed in the same interleaved rounds)."""
  import jax
  import numpy as np
  from flax import nnx
  from ffn_research.models import ffn as ffn_lib
  n = size['matmul']
  a = jax.random.normal(jax.random.PRNGKey(0), (n, n))
  mm = jax.jit(lambda a: a @ a)
  ceiling_fn = lambda: mm(a).block_until_ready()  # pylint: disable=unnecessary-lambda-assignment
  rows = []
  for d, f, t in size['dense']:
    kx, ky = jax.random.split(jax.random.PRNGKey(0))
    x, y = jax.random.normal(kx, (t, d)), jax.random.normal(ky, (t, d))
    fns = [jax_step_fn(ffn_lib.FFN(d, f, 'relu', rngs=nnx.Rngs(0)), x, y), ceiling_fn]
    if torch_mod:
      fns.append(torch_mod.train_step_fn(torch_mod.dense_ffn(d, f), np.asarray(x), np.asarray(y)))
    ms = interleaved_ms(fns, size['repeats'])
    flops = 12 * t * d * f  # forward 4 T d f (two matmuls), backward twice that
    ceiling = 2 * n ** 3 / ms[1] / 1e6  # the XLA matmul ceiling, timed in the same rounds
    r = row(f'dense_{d}x{f}_t{t}', f'dense FFN {d}/{f}, {t:,} tokens', ms[0],
            step_gflop=flops / 1e9, ours_gflops=flops / ms[0] / 1e6, ceiling_gflops=ceiling,
            ours_of_ceiling=flops / ms[0] / 1e6 / ceiling)
    if torch_mod:
      r.update(torch_ms=ms[2], torch_gflops=flops / ms[2] / 1e6, torch_over_ours=ms[2] / ms[0],
               torch_of_ceiling=flops / ms[2] / 1e6 / ceiling)
    else:
      r['torch'] = NO_TORCH
    rows.append(r)
  return rows


def moe_rows(size, torch_mod, dispatches=('sort',), dense_dtype='float32', tag=''):
  """MoE top-k train steps at each capacity factor vs the FLOP-matched dense FFN and a
  seed-style PyTorch loop over experts."""
  import jax
  import numpy as np
  from flax import nnx
  from ffn_research.models import ffn as ffn_lib
  from ffn_research.models import moe as moe_lib
  m = size['moe']
  t, d, f, e, k = m['tokens'], m['d_model'], m['d_expert'], m['num_experts'], m['top_k']
  kx, ky = jax.random.split(jax.random.PRNGKey(0))
  x, y = jax.random.normal(kx, (t, d)), jax.random.normal(ky, (t, d))
  dense = ffn_lib.FFN(d, k * f, 'relu', dtype=dense_dtype, rngs=nnx.Rngs(0))
  labels, fns = ['dense'], [jax_step_fn(dense, x, y)]
  for cf in size['capacity_factors']:
    for dispatch in dispatches:
      model = moe_lib.MoE(d, f, 'relu', num_experts=e, top_k=k, capacity_factor=cf,
                          dispatch=dispatch, dtype=dense_dtype, rngs=nnx.Rngs(0))
      labels.append((dispatch, cf))
      fns.append(jax_step_fn(model, x, y))
    if torch_mod:
      labels.append(('torch', cf))
      fns.append(torch_mod.train_step_fn(torch_mod.LoopMoE(d, f, e, k, cf), np.asarray(x),
                                         np.asarray(y)))
  ms = dict(zip(labels, interleaved_ms(fns, size.get('moe_repeats', size['repeats']))))
  shape = f'top-{k} of {e}, {t:,} tokens, d {d}, expert d_ff {f}'
  rows = [row(f'moe{tag}_dense_matched', f'dense FFN {d}/{k * f} (FLOP-matched to MoE {shape})',
              ms['dense'])]
  for cf in size['capacity_factors']:
    name = 'dropless' if cf <= 0 else f'cf {cf:g}'
    for dispatch in dispatches:
      ours = ms[(dispatch, cf)]
      r = row(f'moe{tag}_{dispatch}_{name.replace(" ", "")}', f'MoE {shape}, `{dispatch}`, {name}',
              ours, dense_ms=ms['dense'], over_dense=ours / ms['dense'])
      if torch_mod and ('torch', cf) in ms:
        r.update(torch_loop_ms=ms[('torch', cf)], torch_over_ours=ms[('torch', cf)] / ours)
      elif not torch_mod and tag == '':
        r['torch_loop'] = NO_TORCH
      rows.append(r)
  return rows


def matmul_rows(size, torch_mod, dtype='float32'):
  """The machine's matmul ceiling: one n x n x n matmul, XLA and torch (MKL / oneDNN)."""
  import jax
  n = size['matmul']
  a = jax.random.normal(jax.random.PRNGKey(0), (n, n)).astype(dtype)
  mm = jax.jit(lambda a: a @ a)
  fns = [lambda: mm(a).block_until_ready()]
  if torch_mod:
    fns.append(torch_mod.matmul_fn(n))
  ms = interleaved_ms(fns, max(5, size['repeats']))
  flops = 2 * n ** 3
  r = row(f'matmul_{n}', f'one {n}x{n}x{n} {dtype} matmul (the ceiling)', ms[0],
          ours_gflops=flops / ms[0] / 1e6)
  if torch_mod:
    r.update(torch_ms=ms[1], torch_gflops=flops / ms[1] / 1e6, torch_over_ours=ms[1] / ms[0])
  else:
    r['torch'] = NO_TORCH
  return [r]


def xla_option_rows(size):
  """The dense steps under each XLA:CPU compiler option, against the default, interleaved."""
  import jax
  from flax import nnx
  from ffn_research.models import ffn as ffn_lib
  rows = []
  for d, f, t in size['dense'][:2]:
    kx, ky = jax.random.split(jax.random.PRNGKey(0))
    x, y = jax.random.normal(kx, (t, d)), jax.random.normal(ky, (t, d))
    names = ['default', *XLA_CPU_OPTIONS]
    fns = [jax_step_fn(ffn_lib.FFN(d, f, 'relu', rngs=nnx.Rngs(0)), x, y, XLA_CPU_OPTIONS.get(n))
           for n in names]
    ms = interleaved_ms(fns, size['repeats'])
    for name, m in zip(names[1:], ms[1:]):
      rows.append(row(f'xla_{name}_{d}x{f}_t{t}', f'dense FFN {d}/{f}, {t:,} tokens, XLA option '
                      f'{XLA_CPU_OPTIONS[name]}', m, default_ms=ms[0], over_default=m / ms[0]))
  return rows


def quickstart_rows(size):
  """README quickstart through the CLI, in a subprocess: cold, then with a warm compilation cache."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    times = {}
    for name in ('cold', 'warm'):
      cmd = [sys.executable, '-m', 'experiments.train', '--config=configs/regression.py',
             f'--workdir={tmp}/{name}', f'--compilation_cache_dir={tmp}/cache', *size['quickstart']]
      t0 = time.perf_counter()
      proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
      times[name] = time.perf_counter() - t0
      if proc.returncode:
        raise RuntimeError(f'quickstart failed ({" ".join(cmd)}): {proc.stderr.strip()[-500:]}')
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
  rows.append(row('quickstart_cold', 'quickstart `python -m experiments.train '
                  '--config=configs/regression.py`, whole CLI, empty compilation cache',
                  1e3 * times['cold'], peak_rss_mb=child_rss))
  rows.append(row('quickstart_warm', 'the same, warm compilation cache', 1e3 * times['warm'],
                  cold_over_warm=times['cold'] / times['warm']))
  return rows


def memorization_config(m):
  """configs/memorization.py:ffn_stack at issue 12's size (through the public config API)."""
  from ffn_research import configfile
  config = configfile.get_config('configs/memorization.py:ffn_stack')
  config.task.num_facts, config.task.num_relations = m['facts'], m['relations']
  config.model.d_model, config.model.d_ff = m['d_model'], m['d_ff']
  tr = config.train
  tr.batch_size, tr.steps, tr.log_every, tr.checkpoint_every = (m['batch'], m['steps'],
                                                                  m['log_every'], 0)
  return config


def memorization_rows(size):
  """Steps/s and first-chunk compile time of the small sequence model, through loop.train_and_evaluate."""
  from ffn_research import loop
  m = size['memorization']
  config = memorization_config(m)
  with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
    summary = loop.train_and_evaluate(config, os.path.join(tmp, 'run'))
  return [row('memorization_ffn_stack',
              f'memorization ffn_stack {m["facts"]:,} facts, d {m["d_model"]}/d_ff {m["d_ff"]}, '
              f'batch {m["batch"]} ({summary["num_params"]:,} params), {m["steps"]} steps',
              1e3 / summary['steps_per_s'], steps_per_s=summary['steps_per_s'],
              compile_s=summary['compile_time_s'])]


# --------------------------------------------------------------------------- GPU rows


def dense_bf16_rows(size):
  """bf16 dense FFN train step at d_model 2048 / d_ff 8192: ms, TFLOP/s, MFU."""
  import jax
  from flax import nnx
  from ffn_research.models import ffn as ffn_lib
  d, f, t = size['dense']
  kx, ky = jax.random.split(jax.random.PRNGKey(0))
  x, y = jax.random.normal(kx, (t, d)), jax.random.normal(ky, (t, d))
  ms = interleaved_ms([jax_step_fn(ffn_lib.FFN(d, f, 'relu', dtype='bfloat16', rngs=nnx.Rngs(0)),
                                   x, y)], size['repeats'])[0]
  flops = 12 * t * d * f
  kind = jax.devices()[0].device_kind
  peak = next((v for k, v in PEAK_BF16.items() if k in kind), None)
  r = row(f'dense_bf16_{d}x{f}_t{t}', f'dense FFN {d}/{f} bf16 compute, {t:,} tokens', ms,
          ours_tflops=flops / ms / 1e9)
  r['mfu'] = r['ours_tflops'] * 1e12 / peak if peak else None
  r['peak'] = f'{peak / 1e12:.0f} TFLOP/s ({kind})' if peak else f'unknown for {kind}'
  return [r] + matmul_rows(size, None, dtype='bfloat16')


def sweep_rows(size):
  """A sweep of quickstart seeds as vmapped groups: runs per hour (compile included)."""
  from ffn_research import configfile, sweep
  config = configfile.get_config('configs/regression.py')
  n = size['sweep_runs']
  with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    sweep.run_sweep(config, sweep.values('train.seed', range(n)), tmp, progress=False)
    s = time.perf_counter() - t0
  return [row(f'sweep_quickstart_{n}', f'{n} quickstart seeds as one sweep (run_sweep)', 1e3 * s,
              runs_per_hour=3600 * n / s)]


# --------------------------------------------------------------------------- report


def machine_info():
  import jax
  cpu = platform.processor() or platform.machine()
  with contextlib.suppress(OSError):
    with open('/proc/cpuinfo', encoding='utf-8') as fh:
      cpu = next((l.split(':', 1)[1].strip() for l in fh if l.startswith('model name')), cpu)
  torch_mod = torch_or_none()
  devices = jax.devices()
  return {'cpu': cpu, 'cpu_count': os.cpu_count(), 'platform': platform.platform(),
          'python': platform.python_version(), 'jax': jax.__version__,
          'backend': jax.default_backend(),
          'devices': f'{len(devices)} x {devices[0].device_kind}',
          'torch': torch_mod.version() if torch_mod else 'not installed',
          'xla_flags': os.environ.get('XLA_FLAGS', ''),
          'date_utc': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M'),
          'load_average_start': list(os.getloadavg())}


def run_suite(suite: str, size_name: str, only=(), moe_dispatches=('sort',)) -> dict:
  """Every row of `suite` at `size_name` ('full', 'quick', 'tiny'); the JSON document."""
  info = machine_info()
  groups = [g for g in GROUPS[suite] if not only or g in only]
  torch_mod = torch_or_none() if suite == 'cpu' else None
  rows = []
  if suite == 'cpu':
    size = SIZES[size_name]
    if 'dense' in groups:
      rows += dense_rows(size, torch_mod)
    if 'moe' in groups:
      rows += moe_rows(size, torch_mod, tuple(moe_dispatches))
    if 'matmul' in groups:
      rows += matmul_rows(size, torch_mod)
    if 'xla_options' in groups:
      rows += xla_option_rows(size)
    if 'memorization' in groups:
      rows += memorization_rows(size)
    if 'quickstart' in groups:
      rows += quickstart_rows(size)
  else:
    size = GPU_SIZES[size_name]
    if 'dense_bf16' in groups:
      rows += dense_bf16_rows(size)
    if 'moe' in groups:
      rows += moe_rows(size, None, dispatches=('ragged', 'sort'),
                       dense_dtype='bfloat16', tag='_bf16')
    if 'sweep' in groups:
      rows += sweep_rows(size)
  info['load_average_end'] = list(os.getloadavg())
  info['peak_rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  return {'suite': suite, 'size': size_name, 'shapes_and_repeats': size, 'machine': info,
          'rows': rows,
          'command': ' '.join(['python -m experiments.benchmark', *sys.argv[1:]])}


def _fmt_ms(v):
  return '' if v is None else (f'{v / 1e3:.2f} s' if v >= 10_000 else f'{v:.1f} ms' if v >= 10
                               else f'{v:.2f} ms')


def _versus(theirs_over_ours: float, who: str) -> str:
  """'ours 1.25x faster than X' or 'X 1.25x faster than ours' from the ratio of their time to ours."""
  if theirs_over_ours >= 1:
    return f'ours {theirs_over_ours:.2f}x faster than {who}'
  return f'{who} {1 / theirs_over_ours:.2f}x faster than ours'


def describe(r) -> tuple[str, str]:
  """(reference column, note column) of one row."""
  ref, note = [], []
  if 'torch_ms' in r:
    ref.append(f'PyTorch eager {_fmt_ms(r["torch_ms"])}')
    note.append(_versus(r['torch_over_ours'], 'PyTorch'))
  if 'torch_loop_ms' in r:
    ref.append(f'PyTorch loop over experts {_fmt_ms(r["torch_loop_ms"])}')
    note.append(_versus(r['torch_over_ours'], 'the loop'))
  if 'over_default' in r:
    ref.append(f'default options {_fmt_ms(r["default_ms"])}')
    note.append(f'{r["over_default"]:.2f}x the default')
  if 'over_dense' in r:
    note.insert(0, f'{r["over_dense"]:.2f}x FLOP-matched dense')
  for key in ('torch', 'torch_loop'):
    if key in r:
      ref.append(r[key])
  if 'ours_gflops' in r:
    note.append(f'{r["ours_gflops"]:.0f} GFLOP/s'
                + (f' ({100 * r["ours_of_ceiling"]:.0f}% of the XLA ceiling)' if 'ours_of_ceiling' in r
                   else ''))
  if 'torch_gflops' in r:
    note.append(f'PyTorch {r["torch_gflops"]:.0f} GFLOP/s'
                + (f' ({100 * r["torch_of_ceiling"]:.0f}%)' if 'torch_of_ceiling' in r else ''))
  if 'ours_tflops' in r:
    note.append(f'{r["ours_tflops"]:.0f} TFLOP/s, MFU '
                + (f'{100 * r["mfu"]:.0f}% of {r["peak"]}' if r.get('mfu') else r['peak']))
  if 'steps_per_s' in r:
    note.append(f'{r["steps_per_s"]:.0f} steps/s, first chunk compiles in {r["compile_s"]:.1f} s')
  if 'peak_rss_mb' in r:
    note.append(f'peak RSS {r["peak_rss_mb"]:.0f} MB')
  if 'cold_over_warm' in r:
    note.append(f'cold/warm {r["cold_over_warm"]:.2f}x')
  if 'runs_per_hour' in r:
    note.append(f'{r["runs_per_hour"]:,.0f} runs/hour')
  return '; '.join(ref), '; '.join(note)


def table(doc) -> str:
  """Markdown table of the rows."""
  lines = ['| workload | this project | reference | note |', '|---|---:|---|---|']
  for r in doc['rows']:
    ref, note = describe(r)
    lines.append(f'| {r["workload"]} | {_fmt_ms(r["ours_ms"])} | {ref} | {note} |')
  return '\n'.join(lines)


def machine_line(doc) -> str:
  m = doc['machine']
  load = lambda v: '/'.join(f'{x:.2f}' for x in v)  # pylint: disable=unnecessary-lambda-assignment
  return (f'{m["cpu"]}, {m["cpu_count"]} cores, {m["devices"]} ({m["backend"]}), jax {m["jax"]}, '
          f'PyTorch {m["torch"]}, python {m["python"]}, XLA_FLAGS "{m["xla_flags"]}"; '
          f'{m["date_utc"]} UTC; load average (1/5/15 min) {load(m["load_average_start"])} at the '
          f'start, {load(m["load_average_end"])} at the end; peak host RSS of the benchmark '
          f'{m["peak_rss_mb"]:.0f} MB')


def readme_block(doc, headline: bool = False) -> str:
  """The Performance block: every row, or (headline) the HEADLINE_IDS rows (the first five if none is there)."""
  if headline:
    doc = {**doc, 'rows': [r for r in doc['rows'] if r['id'] in HEADLINE_IDS] or doc['rows'][:5]}
  return '\n'.join([
      README_BEGIN,
      f'Generated by `{doc["command"]}` (suite {doc["suite"]}, size {doc["size"]}); regenerate '
      'with `python -m experiments.benchmark --write_readme`. One train step = forward, backward, '
      'Adam; medians over repeats, all variants of a group interleaved in one process.',
      '',
      f'Machine: {machine_line(doc)}.',
      '',
      *([f'**Under load** (load average {doc["machine"]["load_average_start"][0]:.1f} on '
         f'{doc["machine"]["cpu_count"]} cores at the start): absolute times are not speed '
         'claims; only ratios within one group, measured side by side, mean anything, and even '
         'those spread by more than 15% at such loads (docs/performance.md).', '']
        if doc['machine']['load_average_start'][0] > doc['machine']['cpu_count'] else []),
      table(doc),
      '',
      *(['Headline rows; every row, the method and the XLA options: '
         '[docs/performance.md](docs/performance.md).', ''] if headline else []),
      'GPU figures (`--suite=gpu`: bf16 dense MFU at d_model 2048 / d_ff 8192, `ragged` vs `sort` '
      'vs dense MoE dispatch, a sweep\'s runs per hour) are unmeasured: no GPU was available to '
      'the development sessions.',
      README_END])


def write_block(path: str, block: str) -> None:
  """Replace the text between the performance markers of `path` with `block`."""
  with open(path, encoding='utf-8') as fh:
    text = fh.read()
  pattern = re.compile(re.escape(README_BEGIN) + '.*?' + re.escape(README_END), re.S)
  if not pattern.search(text):
    raise ValueError(f'{path} has no {README_BEGIN} ... {README_END} block')
  text = pattern.sub(lambda _: block, text)
  with open(path + '.tmp', 'w', encoding='utf-8') as fh:
    fh.write(text)
  os.replace(path + '.tmp', path)


def write_readme(doc, path: str, page: str = '') -> None:
  """Headline rows into the README at `path`; every row into `page` (if given)."""
  write_block(path, readme_block(doc, headline=True))
  if page:
    write_block(page, readme_block(doc))


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  f = FLAGS
  bad = [g for g in f.only if g not in GROUPS[f.suite]]
  if bad:
    sys.exit(f'error: --only={",".join(bad)} is not a {f.suite} row group; allowed: '
             f'{", ".join(GROUPS[f.suite])}')
  from ffn_research.models import moe as moe_lib
  bad = [d for d in f.moe_dispatches if d not in moe_lib.DISPATCH]
  if bad:
    sys.exit(f'error: --moe_dispatches={",".join(bad)} is unknown; allowed: {", ".join(moe_lib.DISPATCH)}')
  if f.sort_block is not None:
    if f.sort_block < 1:
      sys.exit(f'error: --sort_block={f.sort_block} must be a positive integer')
    moe_lib.SORT_BLOCK = f.sort_block
  if f.from_json:
    try:
      with open(f.from_json, encoding='utf-8') as fh:
        doc = json.load(fh)
      doc['rows'], doc['machine']  # pylint: disable=pointless-statement
    except (OSError, ValueError, KeyError, TypeError) as e:
      sys.exit(f'error: --from_json={f.from_json}: not a benchmark JSON ({e})')
  else:
    import jax
    if f.suite == 'gpu' and jax.default_backend() != 'gpu' and not f.allow_cpu:
      sys.exit(f'no GPU: --suite=gpu needs a GPU backend, this one is {jax.default_backend()} '
               '(GPU figures stay unmeasured)')
    doc = run_suite(f.suite, 'tiny' if f.tiny else 'quick' if f.quick else 'full', f.only,
                    f.moe_dispatches)
    if f.out:
      with open(f.out + '.tmp', 'w', encoding='utf-8') as fh:
        json.dump(doc, fh, indent=1)
      os.replace(f.out + '.tmp', f.out)
  print(f'machine: {machine_line(doc)}')
  print(table(doc))
  if f.write_readme:
    try:
      write_readme(doc, f.readme, f.performance_page)
    except (OSError, ValueError) as e:
      sys.exit(f'error: --write_readme: {e}')
    print(f'wrote the Performance blocks of {f.readme}' + (f' and {f.performance_page}' if f.performance_page else ''))


if __name__ == '__main__':
  import jax
  jax.config.config_with_absl()
  app.run(main)
