"""Benchmark (not a test) of sweep grouping, side by side in one process, compile time included.

  python -m experiments.benchmark_sweep                          # d_ff padding: quick and full capacity_dense
  python -m experiments.benchmark_sweep --sweeps=quick           # only capacity_dense.py:quick
  python -m experiments.benchmark_sweep --sweeps=quick --pad_flops_factors=2,4
  python -m experiments.benchmark_sweep --mode=seeds             # 16 seeds: one vmapped program vs 16 runs
  python -m experiments.benchmark_sweep --mode=seeds --num_runs=64

--mode=padding: each sweep with today's grouping (sweep.group_runs with pad_flops_factor 1:
a program per d_ff), then with d_ff padding (each of --pad_flops_factors, default
programs.PAD_FLOPS_FACTOR); prints wall times, the ratios and the largest eval_loss difference
of a run between the padded sweep and the same run unpadded.
--mode=seeds: N seeds of a config as one vmapped sweep group vs N separate
`train_and_evaluate` runs. The persistent compilation cache is off and in-process caches
are cleared before each side, so every side compiles everything it runs.
"""

import contextlib
import io
import os
import platform
import tempfile
import time

from absl import app, flags, logging

# Imports inside functions on purpose: a bad flag fails at once; jax and the heavy optional imports
# load inside the timed modes, outside the timings.
# pylint: disable=g-import-not-at-top

flags.DEFINE_enum('mode', 'padding', ['padding', 'seeds'], 'What to compare (see the docstring).')
flags.DEFINE_list('sweeps', ['quick', 'regression'], 'padding: capacity_dense.py arguments to run '
                  '(quick: 16 runs, 500 steps; regression: the full 162 runs, 2000 steps).')
flags.DEFINE_list('pad_flops_factors', [], 'padding: factors of the padded sides (default: programs.PAD_FLOPS_FACTOR).')
flags.DEFINE_integer('num_runs', 16, 'seeds: seeds to train.')
flags.DEFINE_string('config', 'configs/regression.py', 'seeds: config file (get_config() default arg).')
FLAGS = flags.FLAGS

SWEEP_FILE = 'configs/sweeps/capacity_dense.py'


def machine() -> str:
  import jax
  devices = jax.local_devices()
  return (f'machine: {platform.machine()} {platform.processor() or ""}, {os.cpu_count()} CPUs, '
          f'{len(devices)} x {devices[0].device_kind} ({jax.default_backend()}), '
          f'jax {jax.__version__}, python {platform.python_version()}')


def fresh_caches() -> None:
  """Forget every compiled program of this process (the persistent cache is never on here)."""
  import jax
  from ffn_research import sweep
  sweep._PROGRAMS.clear()  # pylint: disable=protected-access
  jax.clear_caches()


def padding(tmp: str) -> None:
  import numpy as np
  from ffn_research import configfile, programs, sweep
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
        out[f] = sweep.run_sweep(base, grid, os.path.join(tmp, arg, f'factor_{f:g}'), pad_flops_factor=f,
                                 progress=False)
      wall[f] = time.time() - t0
      assert all(s['status'] == 'completed' for s in out[f].values()), 'a run did not complete'
      compile_s = sum(s['compile_time_s'] / s['sweep_group_size'] for s in out[f].values())
      checkpoint_s = sum(s['checkpoint_time_s'] for s in out[f].values())
      line = (f'{SWEEP_FILE}:{arg}: {len(runs)} runs, pad_flops_factor {f:g}: {len(groups):3d} programs, '
              f'{wall[f]:7.1f} s (compiling the train chunks {compile_s:.1f} s, checkpoints {checkpoint_s:.1f} s)')
      if f != 1.0:
        diff = [abs(out[f][k]['eval_loss'] - s['eval_loss']) for k, s in out[1.0].items()]
        rel = max(d / abs(s['eval_loss']) for d, s in zip(diff, out[1.0].values()))
        line += (f', {wall[1.0] / wall[f]:.2f}x faster than a program per d_ff; max |eval_loss difference| '
                 f'of a run padded vs unpadded {max(diff):.2e} (relative {rel:.2e}; median eval_loss '
                 f'{np.median([s["eval_loss"] for s in out[1.0].values()]):.3e})')
      print(line, flush=True)


def seeds(tmp: str) -> None:
  import numpy as np
  from ffn_research import configfile, loop, sweep
  config = configfile.get_config(FLAGS.config)
  grid = sweep.values('train.seed', range(FLAGS.num_runs))
  fresh_caches()
  t0 = time.time()
  vmapped = sweep.run_sweep(config, grid, os.path.join(tmp, 'sweep'), progress=False)
  t_vmapped = time.time() - t0
  fresh_caches()
  t0 = time.time()
  separate = {}
  for o in grid:
    with contextlib.redirect_stdout(io.StringIO()):  # the per-step log lines
      separate[sweep.run_name(o)] = loop.train_and_evaluate(
          sweep.apply_overrides(config, o), os.path.join(tmp, 'separate', sweep.run_name(o)))
  t_separate = time.time() - t0
  compile_separate = sum(s['compile_time_s'] for s in separate.values())
  compile_vmapped = next(iter(vmapped.values()))['compile_time_s']
  rel = max(abs(vmapped[k]['eval_loss'] - s['eval_loss']) / abs(s['eval_loss']) for k, s in separate.items())
  print(machine())
  print(f'config: {FLAGS.config} default ({config.train.steps} steps, batch {config.train.batch_size}, '
        f'd_ff {config.model.d_ff}, {config.model.activation}), {FLAGS.num_runs} seeds')
  print(f'one vmapped program : {t_vmapped:7.2f} s (compile {compile_vmapped:.2f} s)')
  print(f'separate runs       : {t_separate:7.2f} s (compile {compile_separate:.2f} s in total)')
  print(f'speedup             : {t_separate / t_vmapped:.1f}x')
  print(f'max relative eval_loss difference, vmapped vs separate: {rel:.2e}; median eval_loss '
        f'{np.median([s["eval_loss"] for s in separate.values()]):.3e}')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  import jax
  import orbax.checkpoint  # pylint: disable=unused-import
  import tensorboardX  # pylint: disable=unused-import  # imports torch: ~5-25 s
  jax.jit(lambda x: x + 1)(1.0).block_until_ready()  # start-up and imports are charged to neither side
  with tempfile.TemporaryDirectory() as tmp:
    (padding if FLAGS.mode == 'padding' else seeds)(tmp)


if __name__ == '__main__':
  import jax
  jax.config.config_with_absl()  # --jax_debug_nans, --jax_platforms, ...
  app.run(main)
