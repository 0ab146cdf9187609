"""Data and expert parallelism of one run, and multi-process runs (config section `parallel`).

One run trains on a 2-D device mesh ('data', 'expert') built from the config:

  parallel.data      devices on the 'data' axis: each step's batch is split over them
                     (0: all devices, divided by parallel.expert)
  parallel.expert    devices on the 'expert' axis: MoE experts (their weights, their
                     optimizer moments and their matmuls) are split over them; 1 = off
  parallel.distributed  'auto': call jax.distributed.initialize() when a multi-process
                     launch is detected (JAX_COORDINATOR_ADDRESS, or SLURM / Open MPI with
                     more than one task, or a multi-host Cloud TPU); 'on': always call it
                     (JAX detects the rest); 'off': never

Everything else is replicated: parameters, optimizer state, the task's data, the RNG. The
batch is drawn inside the compiled step from the replicated data exactly as on one device
(jax's partitionable threefry gives the same numbers for any sharding), then laid out over
'data'; routing and capacity of an MoE are over the whole batch, as on one device. So a
run gives the same losses on any mesh up to float reassociation (tested).

With several processes (jax.distributed), every process runs the same program on the
global mesh; process 0 alone reads and writes the workdir and hands what it read (the
restored state, the logged lines) to the others (`from_primary`).

Sweeps do not use this: a vmapped group shards its run axis over the local devices
(programs.GroupPrograms) and shards of a sweep run as independent processes (docs/sweeps.md).
"""

from collections.abc import Mapping
import os
import pickle
import resource
from typing import Any

import jax
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import ml_collections
import numpy as np

from ffn_research import config as config_lib

PyTree = Any

AXES = ('data', 'expert')
DISTRIBUTED = ('auto', 'on', 'off')
# MoE expert weights: (E, ...) leaves named so in an MoE's parameter tree (and in the optimizer
# moments, which mirror it); dense FFN weights of the same names have one dimension less.
EXPERT_LEAVES = {'w1': 3, 'w_gate': 3, 'w2': 3, 'b1': 2, 'b_gate': 2, 'b2': 2}


# --------------------------------------------------------------------------- config


def validate(config: ml_collections.ConfigDict) -> None:
  """ConfigError for the parallel section (what does not depend on the devices present)."""
  p = config.parallel
  config_lib.non_negative_int('parallel.data', p.data)
  config_lib.positive_int('parallel.expert', p.expert)
  config_lib.one_of('parallel.distributed', p.distributed, DISTRIBUTED)


def check_sweep_run(config: ml_collections.ConfigDict) -> None:
  """ConfigError for parallel keys a sweep cannot honour (its runs share devices along the run axis)."""
  p = config.parallel
  config_lib.check(
    p.data in (0, 1) and p.expert == 1,
    f'parallel.data={p.data}, parallel.expert={p.expert}: a sweep shards its run axis over the '
    'local devices instead; leave parallel.data at 0 or 1 and parallel.expert at 1 '
    '(train one run with experiments.train to split it over devices)',
  )


def mesh_shape(config: ml_collections.ConfigDict, num_devices: int) -> tuple[int, int]:
  """(data, expert) axis sizes for `num_devices` devices; ConfigError when they do not fit."""
  p = config.parallel
  expert = p.expert
  data = p.data or max(num_devices // expert, 1)
  config_lib.check(
    data * expert <= num_devices,
    f'parallel.data={p.data} x parallel.expert={expert} = {data * expert} devices, but only {num_devices} are present',
  )
  config_lib.check(
    jax.process_count() == 1 or data * expert == num_devices,
    f'parallel.data x parallel.expert = {data * expert} must use all {num_devices} devices '
    f'of the {jax.process_count()} processes',
  )
  config_lib.check(
    config.train.batch_size % data == 0,
    f'train.batch_size={config.train.batch_size} must be divisible by the {data} devices of '
    f'the data axis (parallel.data={p.data}{", 0 = all devices" if not p.data else ""})',
  )
  return data, expert


def build_mesh(config: ml_collections.ConfigDict) -> jax.sharding.Mesh | None:
  """The run's ('data', 'expert') mesh over the first data x expert devices; None for one device."""
  data, expert = mesh_shape(config, jax.device_count())
  if data * expert == 1:
    return None
  return jax.make_mesh(
    (data, expert), AXES, axis_types=(jax.sharding.AxisType.Auto,) * 2, devices=jax.devices()[: data * expert]
  )


def expert_mesh(mesh: jax.sharding.Mesh | None) -> jax.sharding.Mesh | None:
  """The mesh the MoE layers split experts over (None when the expert axis has one device)."""
  return mesh if mesh is not None and mesh.shape['expert'] > 1 else None


# --------------------------------------------------------------------------- placement


def shard_batch(batch: PyTree, mesh: jax.sharding.Mesh | None) -> PyTree:
  """Lay each batch leaf's leading (example) axis over 'data' (inside jit); identity without a mesh.

  A leaf whose leading axis the data axis does not divide (e.g. random_labels' whole point
  set) stays as the compiler places it.
  """
  if mesh is None or mesh.shape['data'] == 1:
    return batch
  n = mesh.shape['data']
  return jax.tree.map(
    lambda x: (
      jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P('data'))) if x.ndim and x.shape[0] % n == 0 else x
    ),
    batch,
  )


def state_shardings(abstract: PyTree, mesh: jax.sharding.Mesh) -> PyTree:
  """NamedSharding per leaf of a run state: MoE expert weights (and moments) over 'expert', the rest replicated."""

  def one(path, leaf):
    name = getattr(path[-1], 'key', getattr(path[-1], 'name', None)) if path else None
    # nnx.State paths end in the variable's name, or in its 'value' under the name.
    if name == 'value' and len(path) > 1:
      name = getattr(path[-2], 'key', getattr(path[-2], 'name', None))
    split = (
      mesh.shape['expert'] > 1
      and EXPERT_LEAVES.get(name) == len(leaf.shape)
      and leaf.shape[0] % mesh.shape['expert'] == 0
    )
    return NamedSharding(mesh, P('expert') if split else P())

  return jax.tree_util.tree_map_with_path(one, abstract)


def place(tree: PyTree, shardings: PyTree) -> PyTree:
  """Host (or single-device) values, the same on every process, as global arrays with `shardings`."""

  def one(x, sharding):
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

  return jax.tree.map(one, tree, shardings)


def to_host(tree: PyTree) -> PyTree:
  """NumPy copies of (possibly sharded, multi-process) arrays: a collective with several processes."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  return multihost_utils.process_allgather(tree, tiled=True)


# --------------------------------------------------------------------------- processes


def is_primary() -> bool:
  """Process 0: the one that reads and writes the workdir."""
  return jax.process_index() == 0


def from_primary(obj: Any) -> Any:
  """`obj` as process 0 holds it, on every process (pickled through a broadcast); as is with one process."""
  if jax.process_count() == 1:
    return obj
  data = np.frombuffer(pickle.dumps(jax.device_get(obj)), np.uint8) if is_primary() else np.zeros(0, np.uint8)
  size = int(multihost_utils.broadcast_one_to_all(np.int64(data.size)))
  buffer = np.zeros(size, np.uint8)
  buffer[: data.size] = data
  return pickle.loads(np.asarray(multihost_utils.broadcast_one_to_all(buffer)).tobytes())


def launch_detected(environ: Mapping[str, str] = os.environ) -> str | None:
  """What announces a multi-process launch in `environ`, or None."""
  if environ.get('JAX_COORDINATOR_ADDRESS'):
    return 'JAX_COORDINATOR_ADDRESS'
  if 'SLURM_JOB_ID' in environ and int(environ.get('SLURM_NTASKS', '1') or 1) > 1:
    return 'SLURM with SLURM_NTASKS > 1'
  if 'OMPI_MCA_orte_hnp_uri' in environ and int(environ.get('OMPI_COMM_WORLD_SIZE', '1') or 1) > 1:
    return 'Open MPI with OMPI_COMM_WORLD_SIZE > 1'
  if ',' in environ.get('TPU_WORKER_HOSTNAMES', ''):
    return 'a multi-host Cloud TPU (TPU_WORKER_HOSTNAMES)'
  return None


def initialize_distributed(parallel_cfg: ml_collections.ConfigDict, environ: Mapping[str, str] = os.environ) -> bool:
  """Call jax.distributed.initialize() per parallel.distributed (before any other JAX call); True if called.

  JAX itself reads JAX_COORDINATOR_ADDRESS and detects SLURM, Open MPI and Cloud TPU;
  JAX_NUM_PROCESSES and JAX_PROCESS_ID (read here) complete a hand-made launch.
  """
  mode = parallel_cfg.distributed
  config_lib.one_of('parallel.distributed', mode, DISTRIBUTED)
  if mode == 'off' or (mode == 'auto' and launch_detected(environ) is None) or jax.distributed.is_initialized():
    return False
  kwargs: dict[str, Any] = {}
  for key, env in (('num_processes', 'JAX_NUM_PROCESSES'), ('process_id', 'JAX_PROCESS_ID')):
    if environ.get(env):
      try:
        kwargs[key] = int(environ[env])
      except ValueError:
        raise config_lib.ConfigError(f'{env}={environ[env]!r} must be an integer') from None
  jax.distributed.initialize(**kwargs)
  return True


# --------------------------------------------------------------------------- no-op writers


class NoCheckpoints:
  """A Checkpointer for processes other than 0: holds nothing, saves nothing."""

  def __init__(self, directory: str):
    self.directory = directory

  def steps(self) -> list[int]:
    return []

  def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
    del step, state, meta

  def restore(self, step: int, abstract: Any) -> None:
    del step, abstract  # never called: there are no steps

  def read_meta(self, step: int) -> None:
    del step

  def discard(self, step: int, corrupt: bool = False) -> None:
    del step, corrupt

  def close(self) -> None:
    pass


class NoLog:
  """A MetricsLog for processes other than 0: `records` come from process 0, nothing is written."""

  def __init__(self, records: list[dict[str, Any]]):
    self.records = records

  def write(self, step: int, metrics: dict[str, Any]) -> None:
    del step, metrics

  def flush(self) -> None:
    pass

  def close(self) -> None:
    pass


# --------------------------------------------------------------------------- device memory


class NotEnoughMemory(ValueError):
  """A run whose estimated memory exceeds what the device has; one line with both numbers."""


def available_memory(device) -> tuple[int | None, str]:
  """(bytes the run may still allocate, where that figure comes from)."""
  if device.platform != 'cpu':
    stats = device.memory_stats() or {}
    if 'bytes_limit' in stats:
      return stats['bytes_limit'] - stats.get('bytes_in_use', 0), f'{device.device_kind} memory'
    return None, ''
  have, source = None, ''
  try:
    with open('/proc/meminfo') as f:
      info = {line.split(':')[0]: int(line.split()[1]) * 1024 for line in f}
    have, source = info['MemAvailable'], 'MemAvailable in /proc/meminfo'
  except (OSError, KeyError, ValueError, IndexError):
    pass
  limit = resource.getrlimit(resource.RLIMIT_AS)[0]
  if limit != resource.RLIM_INFINITY:
    try:
      with open('/proc/self/statm') as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError):
      used = 0
    if have is None or limit - used < have:
      have, source = limit - used, 'address-space limit (ulimit -v) minus what this process maps'
  return have, source


def check_memory(compiled, device, num_runs: int) -> None:
  """Refuse a program whose buffers (XLA's own count) exceed the device's free memory."""
  analysis = compiled.memory_analysis()
  if analysis is None:
    return
  need = (
    analysis.argument_size_in_bytes
    + analysis.output_size_in_bytes
    - analysis.alias_size_in_bytes
    + analysis.temp_size_in_bytes
  )
  have, source = available_memory(device)
  if have is not None and need > have:
    runs = f'{num_runs} runs' if num_runs > 1 else 'the run'
    raise NotEnoughMemory(
      f'{runs} would need {need / 2**30:.2f} GiB (state {analysis.argument_size_in_bytes / 2**30:.2f} GiB '
      f'+ temporaries of one chunk {analysis.temp_size_in_bytes / 2**30:.2f} GiB) but only '
      f'{max(have, 0) / 2**30:.2f} GiB is available ({source}); use a smaller model, batch or '
      'train.log_every' + (', or --max_group_size' if num_runs > 1 else '')
    )
