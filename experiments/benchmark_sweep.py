"""Benchmark (not a test): N seeds of the quickstart model as one vmapped sweep group vs N
separate `train_and_evaluate` runs of the same config, compile time included.

  python -m experiments.benchmark_sweep                 # 16 seeds of configs/regression.py
  python -m experiments.benchmark_sweep --num_runs=64

The persistent compilation cache is off for both, so each separate run compiles (as a
fresh `python -m experiments.train` would without the cache).
"""

import os
import platform
import tempfile
import time

from absl import app, flags, logging

flags.DEFINE_integer('num_runs', 16, 'Seeds to train.')
flags.DEFINE_string('config', 'configs/regression.py', 'Config file (get_config() default arg).')
FLAGS = flags.FLAGS


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  import contextlib, io  # pylint: disable=g-import-not-at-top,multiple-import
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from ffn_research import configfile, loop, sweep  # pylint: disable=g-import-not-at-top
  config = configfile.get_config(FLAGS.config)
  seeds = sweep.values('train.seed', range(FLAGS.num_runs))
  jax.jit(lambda x: x + 1)(1.0).block_until_ready()  # JAX start-up is charged to neither side

  with tempfile.TemporaryDirectory() as tmp:
    t0 = time.time()
    vmapped = sweep.run_sweep(config, seeds, os.path.join(tmp, 'sweep'), progress=False)
    t_vmapped = time.time() - t0

    t0 = time.time()
    separate = {}
    for o in seeds:
      with contextlib.redirect_stdout(io.StringIO()):  # the per-step log lines
        separate[sweep.run_name(o)] = loop.train_and_evaluate(
            sweep.apply_overrides(config, o), os.path.join(tmp, 'separate', sweep.run_name(o)))
    t_separate = time.time() - t0

  compile_separate = sum(s['compile_time_s'] for s in separate.values())
  compile_vmapped = next(iter(vmapped.values()))['compile_time_s']
  rel = max(abs(vmapped[k]['eval_loss'] - s['eval_loss']) / abs(s['eval_loss']) for k, s in separate.items())
  devices = jax.local_devices()
  print(f'machine: {platform.machine()} {platform.processor() or ""}, {os.cpu_count()} CPUs, '
        f'{len(devices)} x {devices[0].device_kind} ({jax.default_backend()}), '
        f'jax {jax.__version__}, python {platform.python_version()}')
  print(f'config: {FLAGS.config} default ({config.train.steps} steps, batch {config.train.batch_size}, '
        f'd_ff {config.model.d_ff}, {config.model.activation}), {FLAGS.num_runs} seeds')
  print(f'one vmapped program : {t_vmapped:7.2f} s (compile {compile_vmapped:.2f} s)')
  print(f'separate runs       : {t_separate:7.2f} s (compile {compile_separate:.2f} s in total)')
  print(f'speedup             : {t_separate / t_vmapped:.1f}x')
  print(f'max relative eval_loss difference, vmapped vs separate: {rel:.2e}; median eval_loss '
        f'{np.median([s["eval_loss"] for s in separate.values()]):.3e}')


if __name__ == '__main__':
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.config_with_absl()  # --jax_debug_nans, --jax_platforms, ...
  app.run(main)
