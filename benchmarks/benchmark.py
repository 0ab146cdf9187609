"""Performance suite: this project against PyTorch eager and against the machine, one table + JSON.

  python -m benchmarks.benchmark                       # CPU suite, writes benchmark.json
  python -m benchmarks.benchmark --quick               # fewer repeats (~3 minutes)
  python -m benchmarks.benchmark --out=b.json --write_readme    # and regenerate the Performance blocks
  python -m benchmarks.benchmark --from_json=b.json --write_readme   # the blocks only, no timing
  python -m benchmarks.benchmark --suite=gpu           # GPU rows (exits "no GPU" on a CPU)

One train step = forward, backward and Adam. Within one framework, the variants of a group are
timed side by side in one process after warm-up (interleaved, so machine load hits all alike),
medians over repeats. Frameworks are compared in separate processes (PyTorch working inside a JAX
process can slow it, issue 20): per round one process per side (`--worker=GROUP:SIDE`), the order
of the sides alternating between rounds, and each row's figure the median over rounds.
PyTorch (`pip install -e .[bench]`) is optional: without it its columns say so.
"""

import collections
from collections.abc import Callable
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
from typing import Any

from absl import app
from absl import flags
from absl import logging

# Imports inside functions on purpose: a bad flag fails at once; jax, and the optional PyTorch, load
# only for the rows that run.


flags.DEFINE_enum('suite', 'cpu', ['cpu', 'gpu'], 'Which rows: the CPU suite or the GPU suite.')
flags.DEFINE_bool('quick', False, 'Fewer repeats and steps (same shapes).')
flags.DEFINE_bool('tiny', False, 'Tiny shapes, one repeat: a smoke test of every row (tests).')
flags.DEFINE_string('out', 'benchmark.json', 'JSON output file ("" for none).')
flags.DEFINE_list(
  'only',
  [],
  'Row groups to run (default all): dense, moe, matmul, experiment, '
  'xla_options, memorization, quickstart (cpu); dense_bf16, moe, sweep (gpu).',
)
flags.DEFINE_bool(
  'write_readme',
  False,
  'Regenerate the Performance blocks from the JSON: headline rows in --readme, every row in --performance_page.',
)
flags.DEFINE_string('from_json', '', 'With --write_readme: take this JSON instead of running.')
flags.DEFINE_string('readme', 'README.md', 'README file for --write_readme (headline rows).')
flags.DEFINE_string('performance_page', 'docs/performance.md', 'Page for --write_readme with every row ("" for none).')
flags.DEFINE_list(
  'moe_dispatches',
  ['sort'],
  'MoE dispatches timed at every capacity factor (sort, einsum, ragged; the GPU suite times ragged and sort).',
)
flags.DEFINE_integer('sort_block', None, "Rows per block past the 'sort' windows (default models/moe.py SORT_BLOCK).")
flags.DEFINE_integer(
  'rounds',
  None,
  'Rounds of separate processes per group (default: 5 full, 3 quick, 1 tiny); each row is the median over rounds.',
)
flags.DEFINE_string(
  'worker', '', 'Internal: time one side of one group in this process, print its JSON (GROUP:SIDE, e.g. dense:torch).'
)
flags.DEFINE_enum('size', 'full', ['full', 'quick', 'tiny'], 'Internal, with --worker: the shapes.')
flags.DEFINE_bool('allow_cpu', False, '--suite=gpu on a CPU backend anyway (tests of the GPU rows).')
FLAGS = flags.FLAGS

GROUPS = {
  'cpu': ('dense', 'moe', 'matmul', 'experiment', 'xla_options', 'memorization', 'quickstart'),
  'gpu': ('dense_bf16', 'moe', 'sweep'),
}
README_BEGIN, README_END = '<!-- performance:begin -->', '<!-- performance:end -->'
# Each suite's document goes between its own markers: the CPU suite's above, the GPU suite's here.
MARKERS = {'cpu': (README_BEGIN, README_END), 'gpu': ('<!-- performance-gpu:begin -->', '<!-- performance-gpu:end -->')}
SUITE_FLAG = {'cpu': '', 'gpu': ' --suite=gpu'}
# Rows the README shows (the page shows all): dense vs PyTorch, MoE vs dense, the ceiling, the quickstart;
# on a GPU: bf16 MFU, both MoE dispatches at capacity factor 1.25, the sweep.
HEADLINE_IDS = (
  'dense_512x2048_t8192',
  'moe_dense_matched',
  'moe_sort_cf1',
  'matmul_2048',
  'quickstart_cold',
  'quickstart_warm',
  'dense_bf16_2048x8192_t8192',
  'moe_bf16_ragged_cf1.25',
  'moe_bf16_sort_cf1.25',
  'sweep_quickstart_64',
)

# Shapes and repeats per size; rounds: separate-process rounds per framework comparison; experiment: the
# Experiment-path rows (activations at the MoE shape, configs/language.py's argument, steps per timed call).
# dense: (d_model, d_ff, tokens); moe: top-k of E experts of width
# d_expert vs a dense FFN of width k d_expert (the same active FLOPs); memorization: the
# ffn_stack config of issue 12 (16,384 facts, d_model 32, d_ff 64, batch 512).
SIZES = {
  'full': dict(
    dense=((512, 2048, 8192), (128, 512, 4096), (64, 256, 1024)),
    repeats=7,
    moe=dict(tokens=4096, d_model=128, d_expert=512, num_experts=8, top_k=2),
    moe_repeats=15,
    capacity_factors=(1.0, 1.25, 0.0),
    matmul=2048,
    memorization=dict(facts=16384, relations=16, d_model=32, d_ff=64, batch=512, log_every=100, steps=500),
    quickstart=[],
    rounds=5,
    experiment=dict(
      activations=('relu', 'gelu', 'swiglu'),
      language='default',
      steps=5,
      repeats=5,
      torch_between=('dense_gelu', 'moe_gelu'),
    ),
  ),
  'quick': dict(
    dense=((512, 2048, 8192), (128, 512, 4096), (64, 256, 1024)),
    repeats=3,
    moe=dict(tokens=4096, d_model=128, d_expert=512, num_experts=8, top_k=2),
    moe_repeats=7,
    capacity_factors=(1.0, 1.25, 0.0),
    matmul=2048,
    memorization=dict(facts=16384, relations=16, d_model=32, d_ff=64, batch=512, log_every=100, steps=200),
    quickstart=[],
    rounds=3,
    experiment=dict(
      activations=('relu', 'gelu', 'swiglu'),
      language='default',
      steps=5,
      repeats=3,
      torch_between=('dense_gelu', 'moe_gelu'),
    ),
  ),
  'tiny': dict(
    dense=((16, 32, 64),),
    repeats=1,
    moe=dict(tokens=64, d_model=8, d_expert=16, num_experts=4, top_k=2),
    moe_repeats=1,
    capacity_factors=(1.0, 1.25, 0.0),
    matmul=64,
    memorization=dict(facts=256, relations=16, d_model=8, d_ff=16, batch=64, log_every=2, steps=4),
    quickstart=['--config.train.steps=4', '--config.train.log_every=2'],
    rounds=1,
    experiment=dict(activations=('gelu',), language='smoke', steps=2, repeats=1, torch_between=('moe_gelu',)),
  ),
}
GPU_SIZES = {
  'full': dict(
    dense=(2048, 8192, 8192),
    repeats=10,
    matmul=8192,
    moe=dict(tokens=16384, d_model=1024, d_expert=2048, num_experts=8, top_k=2),
    capacity_factors=(1.25, 0.0),
    sweep_runs=64,
  ),
  'quick': dict(
    dense=(2048, 8192, 8192),
    repeats=5,
    matmul=8192,
    moe=dict(tokens=16384, d_model=1024, d_expert=2048, num_experts=8, top_k=2),
    capacity_factors=(1.25, 0.0),
    sweep_runs=16,
  ),
  'tiny': dict(
    dense=(16, 32, 64),
    repeats=1,
    matmul=64,
    moe=dict(tokens=64, d_model=8, d_expert=16, num_experts=4, top_k=2),
    capacity_factors=(1.25, 0.0),
    sweep_runs=2,
  ),
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


def interleaved_ms(fns, repeats, between=None):
  """Median ms per call of each no-argument callable, after one warm-up call each; the
  variants take turns in every round so that machine load hits all alike. `between`: an
  untimed callable run before every timed call (e.g. PyTorch working in the process)."""
  for fn in fns:
    fn()
  times = [[] for _ in fns]
  for _ in range(repeats):
    for fn, ts in zip(fns, times, strict=True):
      if between:
        between()
      t0 = time.perf_counter()
      fn()
      ts.append(time.perf_counter() - t0)
  return [1e3 * statistics.median(ts) for ts in times]


def jax_step_fn(model, x, y, compiler_options=None):
  """A no-argument callable: one jitted, donated train step (MSE + the model's '_loss' aux, Adam)."""
  from flax import nnx
  import jax
  import jax.numpy as jnp
  import optax

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
  """benchmarks.bench_torch, or None when PyTorch is not installed (imports torch: workers only)."""
  try:
    from benchmarks import bench_torch
  except ImportError:
    return None
  return bench_torch


def torch_version() -> str | None:
  """PyTorch's installed version without importing it (the timing processes of JAX stay torch-free)."""
  import importlib.metadata

  try:
    return importlib.metadata.version('torch')
  except importlib.metadata.PackageNotFoundError:
    return None


TORCH = None  # benchmarks.bench_torch, set in a worker process that times the PyTorch side
WORKER_TAG = 'BENCHMARK_WORKER_TIMES '
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker_times(spec: str, size: dict, dispatches=('sort',)) -> dict[str, float]:
  """`--worker=GROUP:SIDE`: ms per label of one side of one group, timed in this process."""
  global TORCH
  group, side = spec.split(':')
  if side == 'torch':
    TORCH = torch_or_none()
    if TORCH is None:
      raise RuntimeError(NO_TORCH)
  timers: dict[str, Callable[..., dict[str, float]]] = {
    'dense': dense_times,
    'moe': functools.partial(moe_times, dispatches=dispatches),
    'matmul': matmul_times,
    'experiment': experiment_times,
  }
  return timers[group](size, side)


def run_worker(spec: str, size_name: str, extra=()) -> dict[str, float]:
  """One worker process (`--worker=spec`); its labels' ms."""
  cmd = [sys.executable, '-m', 'benchmarks.benchmark', f'--worker={spec}', f'--size={size_name}', *extra]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
  lines = [line for line in proc.stdout.splitlines() if line.startswith(WORKER_TAG)]
  if proc.returncode or not lines:
    raise RuntimeError(f'benchmark worker {spec} failed: {proc.stderr.strip()[-800:]}')
  return json.loads(lines[-1][len(WORKER_TAG) :])


def side_by_side(group: str, sides, size_name: str, rounds: int, extra=()) -> dict[str, dict[str, Any]]:
  """Each side of `group` in its own process per round, the sides' order alternating between rounds;
  {side: {label: median ms over rounds}} plus {'rounds': {side: {label: [ms per round]}}}."""
  per: dict[str, dict[str, list[float]]] = {side: collections.defaultdict(list) for side in sides}
  for r in range(rounds):
    for side in sides if r % 2 == 0 else sides[::-1]:
      for label, ms in run_worker(f'{group}:{side}', size_name, extra).items():
        per[side][label].append(ms)
  out: dict[str, dict[str, Any]] = {side: {k: statistics.median(v) for k, v in d.items()} for side, d in per.items()}
  out['rounds'] = {side: dict(d) for side, d in per.items()}
  return out


NO_TORCH = 'torch not installed (pip install -e .[bench])'


def row(id_, workload, ours_ms=None, **fields):
  """One table row: `ours_ms` (this project) plus named references and ratios."""
  return {'id': id_, 'workload': workload, 'ours_ms': ours_ms, **fields}


# --------------------------------------------------------------------------- CPU rows


def dense_times(size, side):
  """ms of the dense FFN steps (and, on the JAX side, the XLA matmul ceiling in the same rounds)."""
  import jax
  import numpy as np

  fns = {}
  if side == 'jax':
    from flax import nnx

    from ffn_research.models import ffn as ffn_lib

    n = size['matmul']
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n))
    mm = jax.jit(lambda a: a @ a)
    fns['ceiling'] = lambda: mm(a).block_until_ready()
  for d, f, t in size['dense']:
    kx, ky = jax.random.split(jax.random.PRNGKey(0))
    x, y = jax.random.normal(kx, (t, d)), jax.random.normal(ky, (t, d))
    if side == 'jax':
      fns[f'{d}x{f}_t{t}'] = jax_step_fn(ffn_lib.FFN(d, f, 'relu', rngs=nnx.Rngs(0)), x, y)
    else:
      fns[f'{d}x{f}_t{t}'] = TORCH.train_step_fn(TORCH.dense_ffn(d, f), np.asarray(x), np.asarray(y))
  # Each shape timed on its own, not interleaved with the others: right after the 512/2048 step, JAX's
  # 128/512 step took 20-22 ms against 14.5-14.6 ms alone (PyTorch's was unaffected; 2026-11-25, Intel
  # Xeon), a cost of the benchmark's mix that no user running one model pays.
  return {label: interleaved_ms([fn], size['repeats'])[0] for label, fn in fns.items()}


def dense_rows(size, times):
  """Dense FFN train steps, ours vs PyTorch eager on the same model; achieved GFLOP/s and its
  share of the XLA matmul ceiling (one n^3 matmul timed in the same interleaved rounds)."""
  ours, theirs = times['jax'], times.get('torch')
  ceiling = 2 * size['matmul'] ** 3 / ours['ceiling'] / 1e6
  rows = []
  for d, f, t in size['dense']:
    label, flops = f'{d}x{f}_t{t}', 12 * t * d * f  # forward 4 T d f (two matmuls), backward twice that
    ms = ours[label]
    r = row(
      f'dense_{label}',
      f'dense FFN {d}/{f}, {t:,} tokens',
      ms,
      step_gflop=flops / 1e9,
      ours_gflops=flops / ms / 1e6,
      ceiling_gflops=ceiling,
      ours_of_ceiling=flops / ms / 1e6 / ceiling,
    )
    if theirs:
      r.update(
        torch_ms=theirs[label],
        torch_gflops=flops / theirs[label] / 1e6,
        torch_over_ours=theirs[label] / ms,
        torch_of_ceiling=flops / theirs[label] / 1e6 / ceiling,
      )
    else:
      r['torch'] = NO_TORCH
    rows.append(r)
  return rows


def moe_times(size, side, dispatches=('sort',), dense_dtype='float32'):
  """ms of the MoE steps at each capacity factor and of the FLOP-matched dense FFN (JAX side),
  or of the seed-style PyTorch loop over experts (torch side)."""
  import jax
  import numpy as np

  m = size['moe']
  t, d, f, e, k = m['tokens'], m['d_model'], m['d_expert'], m['num_experts'], m['top_k']
  kx, ky = jax.random.split(jax.random.PRNGKey(0))
  x, y = jax.random.normal(kx, (t, d)), jax.random.normal(ky, (t, d))
  fns = {}
  if side == 'jax':
    from flax import nnx

    from ffn_research.models import ffn as ffn_lib
    from ffn_research.models import moe as moe_lib

    fns['dense'] = jax_step_fn(ffn_lib.FFN(d, k * f, 'relu', dtype=dense_dtype, rngs=nnx.Rngs(0)), x, y)
    for cf in size['capacity_factors']:
      for dispatch in dispatches:
        model = moe_lib.MoE(
          d,
          f,
          'relu',
          num_experts=e,
          top_k=k,
          capacity_factor=cf,
          dispatch=dispatch,
          dtype=dense_dtype,
          rngs=nnx.Rngs(0),
        )
        fns[f'{dispatch}_{cf:g}'] = jax_step_fn(model, x, y)
  else:
    for cf in size['capacity_factors']:
      fns[f'loop_{cf:g}'] = TORCH.train_step_fn(TORCH.LoopMoE(d, f, e, k, cf), np.asarray(x), np.asarray(y))
  return dict(zip(fns, interleaved_ms(list(fns.values()), size.get('moe_repeats', size['repeats'])), strict=True))


def moe_rows(size, times, dispatches=('sort',), tag=''):
  """MoE top-k train steps at each capacity factor vs the FLOP-matched dense FFN and a
  seed-style PyTorch loop over experts."""
  m = size['moe']
  t, d, f, e, k = m['tokens'], m['d_model'], m['d_expert'], m['num_experts'], m['top_k']
  ours, theirs = times['jax'], times.get('torch')
  shape = f'top-{k} of {e}, {t:,} tokens, d {d}, expert d_ff {f}'
  rows = [row(f'moe{tag}_dense_matched', f'dense FFN {d}/{k * f} (FLOP-matched to MoE {shape})', ours['dense'])]
  for cf in size['capacity_factors']:
    name = 'dropless' if cf <= 0 else f'cf {cf:g}'
    for dispatch in dispatches:
      ms = ours[f'{dispatch}_{cf:g}']
      r = row(
        f'moe{tag}_{dispatch}_{name.replace(" ", "")}',
        f'MoE {shape}, `{dispatch}`, {name}',
        ms,
        dense_ms=ours['dense'],
        over_dense=ms / ours['dense'],
      )
      if theirs:
        r.update(torch_loop_ms=theirs[f'loop_{cf:g}'], torch_over_ours=theirs[f'loop_{cf:g}'] / ms)
      elif tag == '':
        r['torch_loop'] = NO_TORCH
      rows.append(r)
  return rows


def matmul_times(size, side, dtype='float32'):
  import jax

  n = size['matmul']
  if side == 'torch':
    fn = TORCH.matmul_fn(n)
  else:
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n)).astype(dtype)
    mm = jax.jit(lambda a: a @ a)
    fn = lambda: mm(a).block_until_ready()
  return {'matmul': interleaved_ms([fn], max(5, size['repeats']))[0]}


def matmul_rows(size, times, dtype='float32', against_torch=True):
  """The machine's matmul ceiling: one n x n x n matmul, XLA and (against_torch) torch (MKL / oneDNN)."""
  n, ms = size['matmul'], times['jax']['matmul']
  flops = 2 * n**3
  r = row(f'matmul_{n}', f'one {n}x{n}x{n} {dtype} matmul (the ceiling)', ms, ours_gflops=flops / ms / 1e6)
  if times.get('torch'):
    theirs = times['torch']['matmul']
    r.update(torch_ms=theirs, torch_gflops=flops / theirs / 1e6, torch_over_ours=theirs / ms)
  elif against_torch:
    r['torch'] = NO_TORCH
  return [r]


def experiment_configs(size):
  """What users run, through `train.Experiment`: dense and MoE FFNs per activation on teacher_student at
  the MoE benchmark shape (the dense one FLOP-matched, width k * expert width), and configs/language.py."""
  from ffn_research import configfile
  from ffn_research.config import default_config

  m = size['moe']
  out = {}
  for act in size['experiment']['activations']:
    for kind in ('dense', 'moe'):
      c = default_config()
      c.task.name, c.model.d_model, c.model.activation = 'teacher_student', m['d_model'], act
      c.train.batch_size = m['tokens']
      c.model.d_ff = m['d_expert'] if kind == 'moe' else m['top_k'] * m['d_expert']
      if kind == 'moe':
        c.model.moe.num_experts, c.model.moe.top_k, c.model.moe.capacity_factor = m['num_experts'], m['top_k'], 1.25
      out[f'{kind}_{act}'] = c
  out['language'] = configfile.get_config(f'configs/language.py:{size["experiment"]["language"]}')
  return out


def experiment_step_fn(config, steps):
  """A no-argument callable: `steps` train steps through Experiment.train_chunk (one lax.scan), donated."""
  import jax

  from ffn_research import train

  exp = train.Experiment(config)
  chunk = jax.jit(lambda state: exp.train_chunk(state, steps)[0], donate_argnums=0)
  state = [jax.jit(exp.init)(0)]

  def run():
    state[0] = jax.block_until_ready(chunk(state[0]))

  return run


def torch_work_fn():
  """A small PyTorch training step (GELU MLP, Adam), as a tokenizer or data pipeline might run."""
  import torch

  model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
  opt, x = torch.optim.Adam(model.parameters()), torch.randn(1024, 64)

  def work():
    for _ in range(3):
      loss = model(x).square().mean()
      opt.zero_grad()
      loss.backward()
      opt.step()

  return work


def experiment_times(size, side):
  """ms per step through Experiment; side 'jax+torch': the GELU rows with a PyTorch step before each call."""
  e = size['experiment']
  configs = experiment_configs(size)
  if side == 'jax+torch':
    configs = {k: configs[k] for k in e['torch_between']}
  fns = {k: experiment_step_fn(c, e['steps']) for k, c in configs.items()}
  ms = interleaved_ms(list(fns.values()), e['repeats'], between=torch_work_fn() if side == 'jax+torch' else None)
  return {k: v / e['steps'] for k, v in zip(fns, ms, strict=True)}


def experiment_rows(size, times):
  """Dense and MoE steps as users run them (task sampling, the flat optimizer, metrics), MoE over its
  FLOP-matched dense per activation, the language model, and the GELU steps with PyTorch working between."""
  e, m, ours = size['experiment'], size['moe'], times['jax']
  shape = f'{m["tokens"]:,} tokens, d {m["d_model"]}'
  rows = []
  for act in e['activations']:
    dense, moe = ours[f'dense_{act}'], ours[f'moe_{act}']
    rows.append(
      row(
        f'experiment_dense_{act}',
        f'Experiment step, dense {act} FFN {m["d_model"]}/{m["top_k"] * m["d_expert"]}, teacher_student, {shape}',
        dense,
      )
    )
    rows.append(
      row(
        f'experiment_moe_{act}',
        f'Experiment step, MoE {act} top-{m["top_k"]} of {m["num_experts"]}, '
        f'expert d_ff {m["d_expert"]}, cf 1.25, teacher_student, {shape}',
        moe,
        dense_ms=dense,
        over_dense=moe / dense,
      )
    )
  lm = experiment_configs(size)['language'].model
  rows.append(
    row(
      'experiment_language',
      f'Experiment step, configs/language.py:{e["language"]} ({lm.num_layers}-layer '
      f'transformer, d_model {lm.d_model}, one run)',
      ours['language'],
      steps_per_s=1e3 / ours['language'],
    )
  )
  for k, ms in (times.get('jax+torch') or {}).items():
    rows.append(
      row(
        f'experiment_{k}_torch_between',
        f'the {k.replace("_", " ")} Experiment step with a PyTorch training step before each call, same process',
        ms,
        without_ms=ours[k],
        over_without=ms / ours[k],
      )
    )
  if 'jax+torch' not in times:
    rows.append(
      row('experiment_torch_between', 'the GELU Experiment steps with PyTorch working in the process', torch=NO_TORCH)
    )
  return rows


def xla_option_rows(size):
  """The dense steps under each XLA:CPU compiler option, against the default, interleaved."""
  from flax import nnx
  import jax

  from ffn_research.models import ffn as ffn_lib

  rows = []
  for d, f, t in size['dense'][:2]:
    kx, ky = jax.random.split(jax.random.PRNGKey(0))
    x, y = jax.random.normal(kx, (t, d)), jax.random.normal(ky, (t, d))
    names = ['default', *XLA_CPU_OPTIONS]
    fns = [jax_step_fn(ffn_lib.FFN(d, f, 'relu', rngs=nnx.Rngs(0)), x, y, XLA_CPU_OPTIONS.get(n)) for n in names]
    ms = interleaved_ms(fns, size['repeats'])
    for name, m in zip(names[1:], ms[1:], strict=True):
      rows.append(
        row(
          f'xla_{name}_{d}x{f}_t{t}',
          f'dense FFN {d}/{f}, {t:,} tokens, XLA option {XLA_CPU_OPTIONS[name]}',
          m,
          default_ms=ms[0],
          over_default=m / ms[0],
        )
      )
  return rows


def quickstart_rows(size):
  """README quickstart through the CLI, in a subprocess: cold, then with a warm compilation cache."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    times = {}
    for name in ('cold', 'warm'):
      cmd = [
        sys.executable,
        '-m',
        'experiments.train',
        '--config=configs/regression.py',
        f'--workdir={tmp}/{name}',
        f'--compilation_cache_dir={tmp}/cache',
        *size['quickstart'],
      ]
      t0 = time.perf_counter()
      proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
      times[name] = time.perf_counter() - t0
      if proc.returncode:
        raise RuntimeError(f'quickstart failed ({" ".join(cmd)}): {proc.stderr.strip()[-500:]}')
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
  rows.append(
    row(
      'quickstart_cold',
      'quickstart `python -m experiments.train --config=configs/regression.py`, whole CLI, empty compilation cache',
      1e3 * times['cold'],
      peak_rss_mb=child_rss,
    )
  )
  rows.append(
    row(
      'quickstart_warm',
      'the same, warm compilation cache',
      1e3 * times['warm'],
      cold_over_warm=times['cold'] / times['warm'],
    )
  )
  return rows


def memorization_config(m):
  """configs/memorization.py:ffn_stack at issue 12's size (through the public config API)."""
  from ffn_research import configfile

  config = configfile.get_config('configs/memorization.py:ffn_stack')
  config.task.num_facts, config.task.num_relations = m['facts'], m['relations']
  config.model.d_model, config.model.d_ff = m['d_model'], m['d_ff']
  tr = config.train
  tr.batch_size, tr.steps, tr.log_every, tr.checkpoint_every = (m['batch'], m['steps'], m['log_every'], 0)
  return config


def memorization_rows(size):
  """Steps/s and first-chunk compile time of the small sequence model, through loop.train_and_evaluate."""
  from ffn_research import loop

  m = size['memorization']
  config = memorization_config(m)
  with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
    summary = loop.train_and_evaluate(config, os.path.join(tmp, 'run'))
  return [
    row(
      'memorization_ffn_stack',
      f'memorization ffn_stack {m["facts"]:,} facts, d {m["d_model"]}/d_ff {m["d_ff"]}, '
      f'batch {m["batch"]} ({summary["num_params"]:,} params), {m["steps"]} steps',
      1e3 / summary['steps_per_s'],
      steps_per_s=summary['steps_per_s'],
      compile_s=summary['compile_time_s'],
    )
  ]


# --------------------------------------------------------------------------- GPU rows


def dense_bf16_rows(size):
  """bf16 dense FFN train step at d_model 2048 / d_ff 8192: ms, TFLOP/s, MFU."""
  from flax import nnx
  import jax

  from ffn_research.models import ffn as ffn_lib

  d, f, t = size['dense']
  kx, ky = jax.random.split(jax.random.PRNGKey(0))
  x, y = jax.random.normal(kx, (t, d)), jax.random.normal(ky, (t, d))
  ms = interleaved_ms(
    [jax_step_fn(ffn_lib.FFN(d, f, 'relu', dtype='bfloat16', rngs=nnx.Rngs(0)), x, y)], size['repeats']
  )[0]
  flops = 12 * t * d * f
  kind = jax.devices()[0].device_kind
  peak = next((v for k, v in PEAK_BF16.items() if k in kind), None)
  r = row(f'dense_bf16_{d}x{f}_t{t}', f'dense FFN {d}/{f} bf16 compute, {t:,} tokens', ms, ours_tflops=flops / ms / 1e9)
  r['mfu'] = r['ours_tflops'] * 1e12 / peak if peak else None
  r['peak'] = f'{peak / 1e12:.0f} TFLOP/s ({kind})' if peak else f'unknown for {kind}'
  return [r] + matmul_rows(size, {'jax': matmul_times(size, 'jax', 'bfloat16')}, 'bfloat16', against_torch=False)


def sweep_rows(size):
  """A sweep of quickstart seeds as vmapped groups: runs per hour (compile included)."""
  from ffn_research import configfile
  from ffn_research import sweep

  config = configfile.get_config('configs/regression.py')
  n = size['sweep_runs']
  with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    sweep.run_sweep(config, sweep.values('train.seed', range(n)), tmp, progress=False)
    s = time.perf_counter() - t0
  return [
    row(f'sweep_quickstart_{n}', f'{n} quickstart seeds as one sweep (run_sweep)', 1e3 * s, runs_per_hour=3600 * n / s)
  ]


# --------------------------------------------------------------------------- report


def machine_info():
  import jax

  from ffn_research import io as io_lib

  cpu = io_lib.cpu_name()
  devices = jax.devices()
  return {
    'cpu': cpu,
    'cpu_count': os.cpu_count(),
    'platform': platform.platform(),
    'python': platform.python_version(),
    'jax': jax.__version__,
    'backend': jax.default_backend(),
    'devices': f'{len(devices)} x {devices[0].device_kind}',
    'torch': torch_version() or 'not installed',
    'xla_flags': os.environ.get('XLA_FLAGS', ''),
    'date_utc': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M'),
    'load_average_start': list(os.getloadavg()),
  }


def run_suite(suite: str, size_name: str, only=(), moe_dispatches=('sort',), rounds=None, extra=()) -> dict:
  """Every row of `suite` at `size_name` ('full', 'quick', 'tiny'); the JSON document. `extra`: flags
  the worker processes get (e.g. --sort_block)."""
  info = machine_info()
  groups = [g for g in GROUPS[suite] if not only or g in only]
  rows, round_ms = [], {}
  if suite == 'cpu':
    size = SIZES[size_name]
    rounds = rounds or size['rounds']
    torch_ok = torch_version() is not None
    extra = (f'--moe_dispatches={",".join(moe_dispatches)}', *extra)
    builders: dict[str, Callable[..., list[dict[str, Any]]]] = {
      'dense': dense_rows,
      'moe': functools.partial(moe_rows, dispatches=tuple(moe_dispatches)),
      'matmul': matmul_rows,
      'experiment': experiment_rows,
    }
    for g in groups:
      if g in builders:
        other = 'jax+torch' if g == 'experiment' else 'torch'
        log_progress(f'{g}: {rounds} round(s) of separate processes')
        times = side_by_side(g, ('jax', other) if torch_ok else ('jax',), size_name, rounds, extra)
        round_ms[g] = times.pop('rounds')
        rows += builders[g](size, times)
      else:
        log_progress(f'{g}: in this process')
        rows += {'xla_options': xla_option_rows, 'memorization': memorization_rows, 'quickstart': quickstart_rows}[g](
          size
        )
  else:
    size = GPU_SIZES[size_name]
    if 'dense_bf16' in groups:
      rows += dense_bf16_rows(size)
    if 'moe' in groups:
      dispatches = ('ragged', 'sort')
      rows += moe_rows(size, {'jax': moe_times(size, 'jax', dispatches, 'bfloat16')}, dispatches, tag='_bf16')
    if 'sweep' in groups:
      rows += sweep_rows(size)
  info['load_average_end'] = list(os.getloadavg())
  info['peak_rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  return {
    'suite': suite,
    'size': size_name,
    'shapes_and_repeats': size,
    'machine': info,
    'rounds': rounds,
    'round_ms': round_ms,
    'rows': rows,
    'command': ' '.join(['python -m benchmarks.benchmark', *sys.argv[1:]]),
  }


def log_progress(msg: str) -> None:
  print(f'[benchmark {time.strftime("%H:%M:%S")}] {msg}', file=sys.stderr, flush=True)


def _fmt_ms(v):
  return '' if v is None else (f'{v / 1e3:.2f} s' if v >= 10_000 else f'{v:.1f} ms' if v >= 10 else f'{v:.2f} ms')


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
  if 'over_without' in r:
    ref.append(f'without PyTorch working {_fmt_ms(r["without_ms"])}')
    note.append(f'{r["over_without"]:.2f}x the step without PyTorch working')
  if 'over_dense' in r:
    note.insert(0, f'{r["over_dense"]:.2f}x FLOP-matched dense')
  for key in ('torch', 'torch_loop'):
    if key in r:
      ref.append(r[key])
  if 'ours_gflops' in r:
    note.append(
      f'{r["ours_gflops"]:.0f} GFLOP/s'
      + (f' ({100 * r["ours_of_ceiling"]:.0f}% of the XLA ceiling)' if 'ours_of_ceiling' in r else '')
    )
  if 'torch_gflops' in r:
    note.append(
      f'PyTorch {r["torch_gflops"]:.0f} GFLOP/s'
      + (f' ({100 * r["torch_of_ceiling"]:.0f}%)' if 'torch_of_ceiling' in r else '')
    )
  if 'ours_tflops' in r:
    note.append(
      f'{r["ours_tflops"]:.0f} TFLOP/s, MFU ' + (f'{100 * r["mfu"]:.0f}% of {r["peak"]}' if r.get('mfu') else r['peak'])
    )
  if 'steps_per_s' in r:
    note.append(
      f'{r["steps_per_s"]:.0f} steps/s'
      + (f', first chunk compiles in {r["compile_s"]:.1f} s' if 'compile_s' in r else '')
    )
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
  load = lambda v: '/'.join(f'{x:.2f}' for x in v)
  return (
    f'{m["cpu"]}, {m["cpu_count"]} cores, {m["devices"]} ({m["backend"]}), jax {m["jax"]}, '
    f'PyTorch {m["torch"]}, python {m["python"]}, XLA_FLAGS "{m["xla_flags"]}"; '
    f'{m["date_utc"]} UTC; load average (1/5/15 min) {load(m["load_average_start"])} at the '
    f'start, {load(m["load_average_end"])} at the end; peak host RSS of the benchmark '
    f'{m["peak_rss_mb"]:.0f} MB'
  )


def method(doc) -> str:
  """How the document's figures were timed (documents written before the separate-process rounds say so)."""
  if not doc.get('rounds'):  # documents before the separate-process rounds; the GPU suite (one process)
    return 'medians over repeats, all variants of a group interleaved in one process.'
  return (
    'medians over repeats, the variants of one framework interleaved in one process; frameworks in '
    f'separate processes, {doc["rounds"]} round(s) alternating their order, each figure the median over rounds.'
  )


def current_command(command: str) -> str:
  """A recorded command under today's module path: documents written before the benchmarks left
  experiments/ for benchmarks/ (2026-11-26) record `python -m experiments.benchmark`; the flags are the same."""
  old = 'python -m experiments.benchmark '
  return 'python -m benchmarks.benchmark ' + command[len(old) :] if command.startswith(old) else command


def readme_block(doc, headline: bool = False) -> str:
  """The Performance block: every row, or (headline) the HEADLINE_IDS rows (the first five if none is there)."""
  begin, end = MARKERS[doc['suite']]
  if headline:
    doc = {**doc, 'rows': [r for r in doc['rows'] if r['id'] in HEADLINE_IDS] or doc['rows'][:5]}
  return '\n'.join(
    [
      begin,
      f'Generated by `{current_command(doc["command"])}` (suite {doc["suite"]}, size {doc["size"]}); regenerate '
      f'with `python -m benchmarks.benchmark{SUITE_FLAG[doc["suite"]]} --write_readme`. '
      'One train step = forward, backward, Adam; ' + method(doc),
      '',
      f'Machine: {machine_line(doc)}.',
      '',
      *(
        [
          f'**Under load** (load average {doc["machine"]["load_average_start"][0]:.1f} on '
          f'{doc["machine"]["cpu_count"]} cores at the start): absolute times are not speed '
          'claims; only ratios within one group, measured side by side, mean anything, and even '
          'those spread by more than 15% at such loads (docs/performance.md).',
          '',
        ]
        if doc['machine']['load_average_start'][0] > doc['machine']['cpu_count']
        else []
      ),
      table(doc),
      '',
      *(
        ['Headline rows; every row, the method and the XLA options: [docs/performance.md](docs/performance.md).', '']
        if headline
        else []
      ),
      end,
    ]
  )


def write_block(path: str, block: str, suite: str = 'cpu') -> None:
  """Replace the text between `suite`'s performance markers in `path` with `block`."""
  begin, end = MARKERS[suite]
  with open(path, encoding='utf-8') as fh:
    text = fh.read()
  pattern = re.compile(re.escape(begin) + '.*?' + re.escape(end), re.S)
  if not pattern.search(text):
    raise ValueError(f'{path} has no {begin} ... {end} block')
  text = pattern.sub(lambda _: block, text)
  with open(path + '.tmp', 'w', encoding='utf-8') as fh:
    fh.write(text)
  os.replace(path + '.tmp', path)


def write_readme(doc, path: str, page: str = '') -> None:
  """Headline rows into the README at `path`; every row into `page` (if given)."""
  write_block(path, readme_block(doc, headline=True), doc['suite'])
  if page:
    write_block(page, readme_block(doc), doc['suite'])


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  f = FLAGS
  bad = [g for g in f.only if g not in GROUPS[f.suite]]
  if bad:
    sys.exit(f'error: --only={",".join(bad)} is not a {f.suite} row group; allowed: {", ".join(GROUPS[f.suite])}')
  from ffn_research.models import dispatch as dispatch_lib

  bad = [d for d in f.moe_dispatches if d not in dispatch_lib.DISPATCH]
  if bad:
    sys.exit(f'error: --moe_dispatches={",".join(bad)} is unknown; allowed: {", ".join(dispatch_lib.DISPATCH)}')
  if f.sort_block is not None:
    if f.sort_block < 1:
      sys.exit(f'error: --sort_block={f.sort_block} must be a positive integer')
    dispatch_lib.SORT_BLOCK = f.sort_block
  if f.worker:
    size = (SIZES if f.suite == 'cpu' else GPU_SIZES)[f.size]
    print(WORKER_TAG + json.dumps(worker_times(f.worker, size, tuple(f.moe_dispatches))), flush=True)
    return
  if f.rounds is not None and f.rounds < 1:
    sys.exit(f'error: --rounds={f.rounds} must be a positive integer')
  if f.from_json:
    try:
      with open(f.from_json, encoding='utf-8') as fh:
        doc = json.load(fh)
      doc['rows'], doc['machine']
    except (OSError, ValueError, KeyError, TypeError) as e:
      sys.exit(f'error: --from_json={f.from_json}: not a benchmark JSON ({e})')
  else:
    import jax

    if f.suite == 'gpu' and jax.default_backend() != 'gpu' and not f.allow_cpu:
      sys.exit(
        f'no GPU: --suite=gpu needs a GPU backend, this one is {jax.default_backend()} (GPU figures stay unmeasured)'
      )
    doc = run_suite(
      f.suite,
      'tiny' if f.tiny else 'quick' if f.quick else 'full',
      f.only,
      f.moe_dispatches,
      f.rounds,
      extra=() if f.sort_block is None else (f'--sort_block={f.sort_block}',),
    )
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
