"""Run a sweep (resumable; shardable across machines).

  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py:quick --workdir=runs/cap
  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py --workdir=runs/cap \
      --num_shards=8 --shard_index=3        # defaults from SLURM_ARRAY_TASK_COUNT / _ID
  python -m experiments.sweep --config=configs/sweeps/capacity_dense.py --workdir=runs/cap --merge_only

The config file defines get_config(arg) (the base config; --config.KEY=VALUE overrides
apply to it) and get_sweep(arg) (a list of override dicts, one per run).
"""

import os
import sys

from absl import app
from absl import flags
from absl import logging

# Imports inside functions on purpose: a bad flag or sweep file fails at once, before jax loads; jax
# registers its own flags just before app.run.


flags.DEFINE_string('workdir', None, 'Sweep folder; rerunning on it resumes.')
flags.DEFINE_integer(
  'num_shards', None, 'Split the runs into this many shards (default: SLURM_ARRAY_TASK_COUNT, else 1).'
)
flags.DEFINE_integer(
  'shard_index', None, 'Which shard to run (default: SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, else 0).'
)
flags.DEFINE_bool('merge_only', False, 'Only rebuild results.csv from every run summary.')
flags.DEFINE_integer('max_group_size', 0, 'Split vmapped groups larger than this (0: no limit).')
flags.DEFINE_float(
  'pad_flops_factor',
  None,
  'Runs differing in model.d_ff share a program padded to '
  'the widest while padded FLOPs <= this x real FLOPs (default programs.PAD_FLOPS_FACTOR; '
  '1: no padding).',
)
flags.DEFINE_string(
  'compilation_cache_dir',
  '~/.cache/ffn_research/jax_compilation_cache',
  'Persistent XLA compilation cache ("" disables it).',
)
flags.DEFINE_bool('progress', True, 'Show progress bars (runs, and steps of the current group).')
flags.mark_flags_as_required(['workdir'])
SPEC, SWEEP_MODULE = None, None  # --config's path[:arg] and the loaded file (executed once)
FLAGS = flags.FLAGS


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  from ffn_research import config as config_lib
  from ffn_research import configfile
  from ffn_research import io as io_lib
  from ffn_research import parallel
  from ffn_research import programs
  from ffn_research import sweep

  try:
    if FLAGS.merge_only:
      print(f'wrote {sweep.write_results(FLAGS.workdir)}')
      return
    env_shards, env_index = sweep.shard_from_env(os.environ)
    num_shards = FLAGS.num_shards if FLAGS.num_shards is not None else env_shards
    shard_index = FLAGS.shard_index if FLAGS.shard_index is not None else env_index
    sweep.check_shard(num_shards, shard_index)
    runs = configfile.get_sweep(SPEC, SWEEP_MODULE)
    if FLAGS.compilation_cache_dir:
      sweep.enable_compilation_cache(FLAGS.compilation_cache_dir)
    summaries = sweep.run_sweep(
      FLAGS.config,
      runs,
      FLAGS.workdir,
      num_shards=num_shards,
      shard_index=shard_index,
      max_group_size=FLAGS.max_group_size,
      pad_flops_factor=(programs.PAD_FLOPS_FACTOR if FLAGS.pad_flops_factor is None else FLAGS.pad_flops_factor),
      progress=FLAGS.progress,
    )
  except (config_lib.ConfigError, io_lib.WorkdirError, parallel.NotEnoughMemory, FileNotFoundError, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  statuses = [s['status'] for s in summaries.values() if s]
  print(
    f'shard {shard_index}/{num_shards}: '
    + ', '.join(f'{statuses.count(s)} {s}' for s in sorted(set(statuses)))
    + f'; {FLAGS.workdir}/results.csv'
  )
  finished = len(statuses) == len(summaries) and all(s in io_lib.FINISHED for s in statuses)
  sys.exit(0 if finished else 1)


if __name__ == '__main__':
  from ffn_research import configfile
  from ffn_research.config import unknown_override_error

  if error := unknown_override_error(sys.argv):
    sys.exit(f'error: {error}')
  SPEC, SWEEP_MODULE = configfile.define_config_flag(sys.argv)
  import jax

  jax.config.config_with_absl()  # --jax_debug_nans, --jax_platforms, ...
  app.run(main)
