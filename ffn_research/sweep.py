"""Sweeps: expand override grids, group runs that share a compiled program, train each group as one
`jax.vmap`-ed program (sharded over local devices), resume, shard across machines, and collect `results.csv`.

Layout: DIR/sweep.json (the runs' names and overrides, the base config); DIR/runs/<name>/ (config.json,
metrics.jsonl, summary.json, tensorboard/, checkpoints/, sweep_width.json: the run axis its program compiles at);
DIR/results.csv (one row per run, rebuilt from every run's summary.json).

A run's overrides are a flat dict {'model.d_ff': 64, 'train.seed': 0}. Runs whose configs differ only in
identity.PER_RUN_KEYS train together: `Experiment.init` and `Experiment.train_chunk` are vmapped over a leading
run axis, and every other key of PER_RUN_KEYS (identity.TRACED_KEYS: learning rate, weight decay, dropout rate,
MoE balancing coefficients, router jitter, label noise) is fed in as a traced per-run value. Runs that also
differ in `model.d_ff` (dense FFNs without dropout) share a program allocated at the widest run's width, each run
masked to its own, while the padded FLOPs stay within a factor of the real ones (ffn_research.programs).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
import csv
import dataclasses
import functools
import hashlib
import io
import itertools
import json
import os
import re
import resource  # Unix only, like the flock of io.Lock
import sys
import traceback
from typing import Any

import jax
import ml_collections
from tqdm import tqdm

from ffn_research import config as config_lib
from ffn_research import identity
from ffn_research import io as io_lib
from ffn_research import loop as loop_lib
from ffn_research import models
from ffn_research import parallel
from ffn_research import programs as programs_lib
from ffn_research import train as train_lib
from ffn_research import validation

Overrides = dict[str, Any]

# Summary keys written first in results.csv (after the run name, status and swept values).
COUNT_COLUMNS = (
  'num_params',
  'num_active_params',
  'num_ffn_params',
  'num_active_ffn_params',
  'd_ff_effective',
  'flops_per_token',
)
TAIL_COLUMNS = (
  'diverged_step',
  'diverged_reason',
  'wall_time_s',
  'compile_time_s',
  'checkpoint_time_s',
  'steps_per_s',
  'sweep_group_size',
  'sweep_padded_d_ff',
  'error',
)


# --------------------------------------------------------------------------- defining sweeps


def values(key: str, vals: Iterable[Any]) -> list[Overrides]:
  """One axis: [{key: v} for v in vals]."""
  return [{key: v} for v in vals]


def product(*axes: Sequence[Overrides]) -> list[Overrides]:
  """Cartesian product of override lists (the last axis varies fastest)."""
  out = []
  for combo in itertools.product(*axes):
    merged: Overrides = {}
    for o in combo:
      _merge_into(merged, o)
    out.append(merged)
  return out


def zip_(*axes: Sequence[Overrides]) -> list[Overrides]:
  """Element-wise merge of equally long override lists."""
  lengths = {len(a) for a in axes}
  if len(lengths) > 1:
    raise ValueError(f'zip_ needs equally long lists, got lengths {[len(a) for a in axes]}')
  out = []
  for combo in zip(*axes, strict=True):
    merged: Overrides = {}
    for o in combo:
      _merge_into(merged, o)
    out.append(merged)
  return out


def chain(*lists: Sequence[Overrides]) -> list[Overrides]:
  """Concatenation of override lists (explicit lists are plain lists of dicts)."""
  return [dict(o) for lst in lists for o in lst]


def _merge_into(merged: Overrides, o: Mapping[str, Any]) -> None:
  for k, v in o.items():
    if k in merged and merged[k] != v:
      raise ValueError(f'sweep axes set {k!r} twice ({merged[k]!r} and {v!r})')
    merged[k] = v


def apply_overrides(config: ml_collections.ConfigDict, overrides: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """A copy of `config` (its keys sorted, references resolved) with dotted keys set; unknown keys or wrong types
  raise ConfigError."""
  return _set_overrides(ml_collections.ConfigDict(config.to_dict()), overrides)


def _set_overrides(config: ml_collections.ConfigDict, overrides: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """`config` with dotted keys set in place (apply_overrides' checks)."""
  for key, value in overrides.items():
    section, _, leaf = key.rpartition('.')
    try:
      node = config_lib.get_path(config, section) if section else config
    except (KeyError, TypeError):
      node = None
    if not isinstance(node, ml_collections.ConfigDict):
      raise config_lib.ConfigError(f'sweep override {key!r}: no config section {section!r}')
    if leaf not in node:
      options = ', '.join(sorted(node.keys()))
      raise config_lib.ConfigError(f'sweep override {key!r} is not a config key; keys here: {options}')
    try:
      node[leaf] = value
    except TypeError as e:
      raise config_lib.ConfigError(f'sweep override {key}={value!r}: {e}') from None
  return config


def _format_value(v: Any) -> str:
  if isinstance(v, (list, tuple)):
    return '+'.join(_format_value(x) for x in v)
  return repr(v) if isinstance(v, float) else str(v)


def run_name(overrides: Mapping[str, Any], max_len: int = 120) -> str:
  """Stable, filesystem-safe name: 'activation=relu,d_ff=64,seed=0' (keys sorted).

  Keys are shortened to their last component unless two keys of the run share it.
  Names longer than `max_len` are cut and get a hash of the full name appended.
  """
  if not overrides:
    return 'base'
  leaves = [k.rsplit('.', 1)[-1] for k in overrides]
  parts = []
  for key in sorted(overrides):
    leaf = key.rsplit('.', 1)[-1]
    short = leaf if leaves.count(leaf) == 1 else key
    parts.append(f'{short}={_format_value(overrides[key])}')
  name = re.sub(r'[^A-Za-z0-9._=+,-]', '_', ','.join(parts))
  if len(name) > max_len:
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    name = f'{name[: max_len - 11]}-{digest}'
  return name


@dataclasses.dataclass(frozen=True)
class Run:
  name: str
  overrides: Overrides
  config: ml_collections.ConfigDict

  @functools.cached_property
  def program(self) -> str:
    """group_key(config), computed once per run (sharding and planning both group the runs)."""
    return group_key(self.config)


def expand(base: ml_collections.ConfigDict, sweep: Sequence[Overrides]) -> list[Run]:
  """Runs with validated configs and unique names (fails before anything compiles); runs whose overrides differ
  only in train.seed are validated once, their seeds each (validation.check_seed: the one check reading it)."""
  runs: list[Run] = []
  seen: dict[str, Overrides] = {}
  validated: set[str] = set()  # runs that differ only in their seed are validated once, the seed per run
  base = ml_collections.ConfigDict(base.to_dict())  # as apply_overrides copies it, once: each run a cheap copy
  for overrides in sweep:
    config = _set_overrides(base.copy_and_resolve_references(), overrides)
    but_seed = repr(sorted((k, repr(v)) for k, v in overrides.items() if k != identity.SEED_KEY))
    if but_seed in validated:
      validation.check_seed(config.train.seed)
    else:
      validation.validate(config)
      validated.add(but_seed)
    parallel.check_sweep_run(config)
    name = run_name(overrides)
    if name in seen:
      raise ValueError(f'two runs are both named {name!r}: {seen[name]} and {overrides}')
    seen[name] = overrides
    runs.append(Run(name, dict(overrides), config))
  return runs


def group_key(config: ml_collections.ConfigDict, pad: bool = True) -> str:
  """Equal for configs that differ only in identity.PER_RUN_KEYS and, with `pad`, in a dense FFN's d_ff (such
  runs may share one program). Traced keys are ignored outright, not only their values: runs differing in
  dropout still group; a group with dropout does not pad across widths (programs.plan_programs)."""
  return identity.program_key(config, ignore=identity.PER_RUN_KEYS, pad_d_ff=pad)


def group_runs(runs: Sequence[Run], pad_flops_factor: float = programs_lib.PAD_FLOPS_FACTOR) -> list[list[Run]]:
  """Runs grouped into programs: by `group_key` (in order of first appearance), then by
  programs.plan_programs (d_ff padding; pad_flops_factor 1.0 pads nothing)."""
  if not (isinstance(pad_flops_factor, (int, float)) and pad_flops_factor >= 1):
    raise config_lib.ConfigError(f'pad_flops_factor={pad_flops_factor!r} must be a number >= 1 (1: no padding)')
  by_key: dict[str, list[Run]] = {}
  for r in runs:
    by_key.setdefault(r.program, []).append(r)
  return [
    [g[i] for i in program]
    for g in by_key.values()
    for program in programs_lib.plan_programs([r.config for r in g], pad_flops_factor)
  ]


def select_shard(
  runs: Sequence[Run], num_shards: int, shard_index: int, pad_flops_factor: float = programs_lib.PAD_FLOPS_FACTOR
) -> list[Run]:
  """Shard `shard_index` of `num_shards`: contiguous blocks of the runs ordered by group.

  Deterministic from the sweep alone; the shards partition the runs, and keeping
  groups contiguous keeps most of each vmappable group on one machine.
  """
  if not 0 <= shard_index < num_shards:
    raise ValueError(f'shard_index={shard_index} must be in [0, num_shards={num_shards})')
  ordered = [r for g in group_runs(runs, pad_flops_factor) for r in g]
  n = len(ordered)
  return ordered[shard_index * n // num_shards : (shard_index + 1) * n // num_shards]


def shard_from_env(environ: Mapping[str, str] = os.environ) -> tuple[int, int]:
  """(num_shards, shard_index) from a SLURM array job, else (1, 0)."""
  if 'SLURM_ARRAY_TASK_COUNT' in environ and 'SLURM_ARRAY_TASK_ID' in environ:
    first = int(environ.get('SLURM_ARRAY_TASK_MIN', 0))
    return int(environ['SLURM_ARRAY_TASK_COUNT']), int(environ['SLURM_ARRAY_TASK_ID']) - first
  return 1, 0


def enable_compilation_cache(directory: str) -> None:
  """Persistent XLA compilation cache, also for small and fast-compiling programs."""
  jax.config.update('jax_compilation_cache_dir', os.path.abspath(os.path.expanduser(directory)))
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  jax.config.update('jax_persistent_cache_min_entry_size_bytes', -1)


# --------------------------------------------------------------------------- running a group


def _run_dir(workdir: str, name: str) -> io_lib.RunDir:
  return io_lib.RunDir(os.path.join(workdir, 'runs', name))


def _resume_step(workdir: str, name: str) -> int:
  """The newest checkpoint step of a run (0 if none), from folder names alone."""
  folder = os.path.join(_run_dir(workdir, name).path, 'checkpoints')
  steps = [int(d) for d in os.listdir(folder) if d.isdigit()] if os.path.isdir(folder) else []
  return max(steps, default=0)


def _programs(config: ml_collections.ConfigDict, num_runs: int, devices: tuple[Any, ...]) -> programs_lib.GroupPrograms:
  """GroupPrograms of programs.program_config `config`, reused within a process for groups of the
  same program (which traced values are > 0 is part of it)."""
  program = identity.program_key(config, ignore=(identity.SEED_KEY,), on_off=identity.TRACED_KEYS)
  key = ('group', program, num_runs, devices)
  return programs_lib.cached(key, lambda: programs_lib.GroupPrograms(train_lib.Experiment(config), num_runs, devices))


WIDTH_FILE = 'sweep_width.json'  # in a run's folder: {"run_axis": N}, the run axis its program compiles at


def _recorded_width(workdir: str, name: str) -> int:
  """The run axis a run's program was compiled at when the run was first planned (0: none recorded)."""
  path = os.path.join(_run_dir(workdir, name).path, WIDTH_FILE)
  try:
    width = (io_lib.read_json(path) or {}).get('run_axis', 0)
  except (io_lib.CorruptFile, AttributeError) as e:
    io_lib.warn(f'{e}: its run is planned afresh')
    return 0
  return width if isinstance(width, int) and width > 0 else 0


def _record_width(workdir: str, name: str, width: int) -> None:
  folder = _run_dir(workdir, name).path
  os.makedirs(folder, exist_ok=True)
  io_lib.write_json(os.path.join(folder, WIDTH_FILE), {'run_axis': width})


def resume_groups(
  mine: Sequence[Run],
  todo: Sequence[Run],
  resume_step: Callable[[Run], int],
  pad_flops_factor: float,
  max_group_size: int,
  recorded_width: Callable[[Run], int] = lambda r: 0,
) -> list[tuple[list[Run], list[Run], int]]:
  """(runs to train together, the program's runs, the run axis to compile) for the unfinished runs
  `todo` of a shard.

  Programs are planned over all the shard's runs, finished or not (`group_runs`), as an
  uninterrupted sweep plans them, so a resumed run gets the same program (padded width, traced
  paths). The run axis is the one recorded when the run was first planned (`recorded_width`), so
  its figures are bit-identical however many of its group-mates finished before a kill (XLA's
  figures on CPU depend on that size); runs never planned get `max_group_size` or the number of
  them in the program, whichever is smaller (runs added to a finished sweep, e.g. a regime
  extension, are not padded to the finished ones); a run started before widths were recorded gets
  the old rule, the program's size. Within a program, runs train together only from the same
  checkpoint step at the same run axis.
  """

  def capped(n: int) -> int:
    return min(n, max_group_size) if max_group_size > 0 else n

  left = {r.name for r in todo}
  out = []
  for program in group_runs(mine, pad_flops_factor):
    runs = [r for r in program if r.name in left]
    fresh = {r.name for r in runs if not recorded_width(r) and not resume_step(r)}
    by_key: dict[tuple[int, int], list[Run]] = {}
    for r in runs:
      width = recorded_width(r) or capped(len(fresh) if r.name in fresh else len(program))
      by_key.setdefault((resume_step(r), width), []).append(r)
    for (_, width), g in sorted(by_key.items(), key=lambda kv: kv[0]):
      size = capped(width)
      out += [(g[i : i + size], program, width) for i in range(0, len(g), size)]
  return out


def _planned_groups(
  workdir: str, mine: Sequence[Run], todo: Sequence[Run], pad_flops_factor: float, max_group_size: int
) -> list[tuple[list[Run], list[Run], int]]:
  """resume_groups from the runs' folders, each run's run axis written before anything trains (so a kill
  at any moment keeps it)."""
  recorded = {r.name: _recorded_width(workdir, r.name) for r in todo}
  groups = resume_groups(
    mine, todo, lambda r: _resume_step(workdir, r.name), pad_flops_factor, max_group_size, lambda r: recorded[r.name]
  )
  for g, _, width in groups:
    for r in g:
      if recorded[r.name] != width:
        _record_width(workdir, r.name, width)
  return groups


def _train_sweep_group(
  runs: Sequence[Run],
  program_config: Callable[[], ml_collections.ConfigDict],
  width: int,
  workdir: str,
  devices: Sequence[Any] | None,
  progress: bool,
) -> None:
  """Train one group of `resume_groups` together through the run lifecycle (loop.Lifecycle); a group
  that fails or does not fit in memory is recorded 'failed' (retried on rerun), the sweep goes on.

  The program is planned for all the runs of its program (`program_config()`: programs.program_config of them)
  and built at the widest one's d_ff; narrower runs are padded to it and masked (ffn_research.programs). Every
  run's outputs follow a lone run's schema (summary adds `sweep_group_size` and `sweep_padded_d_ff`, the hidden
  width the program allocated; counts are the run's own). A run whose loss turns non-finite or blows up is
  'diverged'; the others go on. Runs resume from their newest common intact checkpoint.

  The run axis is compiled at `width` (resume_groups), a smaller group padded to it
  (GroupPrograms.pad), so a group resumed with fewer runs is bit-identical, and every group of a
  split program shares one compiled program.
  """
  step_bar = tqdm(
    total=runs[0].config.train.steps,
    desc=f'{len(runs)} x {runs[0].name}',
    unit='step',
    leave=False,
    disable=not progress,
    dynamic_ncols=True,
  )
  what = f'group of {len(runs)} runs starting with {runs[0].name}'
  try:
    with loop_lib.Lifecycle([_run_dir(workdir, r.name) for r in runs], [r.config for r in runs], sweep=True) as group:
      if group.todo:
        config = program_config()
        devices = tuple(devices if devices is not None else jax.local_devices())
        group.train(
          lambda: _programs(config, width, devices),
          extra={'sweep_group_size': len(group.todo), 'sweep_padded_d_ff': models.hidden_width(config.model)},
          step_bar=step_bar,
        )
  except Exception as e:
    if isinstance(e, parallel.NotEnoughMemory):
      print(f'sweep: {what} refused: {e}', file=sys.stderr, flush=True)
    else:
      traceback.print_exc()
      print(f'sweep: {what} failed: {e}', file=sys.stderr, flush=True)
  step_bar.close()


# --------------------------------------------------------------------------- what the machine holds

# While a group trains, each of its runs holds one open file, its lock (loop.Lifecycle); its logs and
# checkpoints are opened and closed per write, and no run has a thread of its own.
FILES_PER_RUN = 1
FILES_SPARE = 32  # beyond those open now: the sweep's locks, a run's files while written, JAX's
# Host memory a run of a group holds beyond its state (bookkeeping: its logs, track, locks; measured
# with the quickstart), and the copies of its state a group holds at once (the stacked state, its next
# chunk's, the host copy checkpoints are cut from).
BYTES_PER_RUN = 200_000
STATE_COPIES = 4


def open_files() -> int:
  """Files this process has open now (0 where /proc is absent)."""
  return len(os.listdir('/proc/self/fd')) if os.path.isdir('/proc/self/fd') else 0


def fitting_group_size(run: Run, max_group_size: int) -> tuple[int, str]:
  """(the most runs one group may hold, '' or why fewer than `max_group_size`) under the open-file
  limit (ulimit -n) and the host memory available; ConfigError (one line) when not even one run fits."""
  limits = []
  soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
  if soft != resource.RLIM_INFINITY:
    jax.devices()  # an accelerator's runtime opens its device files when first used: count after that
    fit = (soft - open_files() - FILES_SPARE) // FILES_PER_RUN
    limits.append(
      (fit, f'the open-file limit (ulimit -n {soft}) holds {max(fit, 0)} runs at {FILES_PER_RUN} file each')
    )
  have, source = parallel.available_memory(jax.devices('cpu')[0])
  try:
    abstract = programs_lib.run_abstract_states(train_lib.Experiment(run.config), [run.config])[0]
  except Exception:  # a run that cannot be built fails in its group, recorded there (_train_sweep_group)
    have = None
  if have is not None:
    need = STATE_COPIES * sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(abstract)) + BYTES_PER_RUN
    fit = have // need
    limits.append(
      (fit, f'{have / 2**30:.1f} GiB of host memory ({source}) holds {fit} runs at {need / 1e6:.2f} MB each')
    )
  fit, why = min(limits, default=(0, ''))
  if limits and fit < 1:
    raise config_lib.ConfigError(f'not even one run fits: {why}; raise the limit or free memory')
  if limits and (max_group_size <= 0 or fit < max_group_size):
    return fit, why
  return max_group_size, ''


# --------------------------------------------------------------------------- the sweep


def check_shard(num_shards: int, shard_index: int) -> None:
  """ConfigError unless 0 <= shard_index < num_shards."""
  if not (isinstance(num_shards, int) and num_shards >= 1):
    raise config_lib.ConfigError(f'--num_shards={num_shards} must be an integer >= 1')
  if not (isinstance(shard_index, int) and 0 <= shard_index < num_shards):
    raise config_lib.ConfigError(f'--shard_index={shard_index} must be in [0, --num_shards={num_shards})')


def run_sweep(
  base: ml_collections.ConfigDict,
  sweep: Sequence[Overrides],
  workdir: str,
  *,
  num_shards: int = 1,
  shard_index: int = 0,
  devices: Sequence[Any] | None = None,
  max_group_size: int = 0,
  pad_flops_factor: float = programs_lib.PAD_FLOPS_FACTOR,
  progress: bool = True,
  after_group: Callable[[], None] | None = None,
) -> dict[str, dict[str, Any] | None]:
  """Run this shard's unfinished runs group by group; rebuild results.csv; {name: summary} (None: a run
  another process holds, skipped). `after_group` is called after each group (e.g. to save a caller's clock).

  Groups are split to what the machine holds (`fitting_group_size`: open files, host memory), with
  one line on stderr saying so, before anything compiles.

  Everything is checked before anything is written. One process runs a shard at a time
  (DIR/.lock-shard-I-of-N) and a run at a time (its run folder's .lock: runs held by
  another process are skipped). `max_group_size` > 0 splits larger groups (bounds memory).
  `pad_flops_factor`: programs.PAD_FLOPS_FACTOR (1.0: no d_ff padding).
  """
  check_shard(num_shards, shard_index)
  if not sweep:
    raise config_lib.ConfigError('the sweep has no runs (get_sweep returned an empty list); nothing written')
  runs = expand(base, sweep)
  mine = select_shard(runs, num_shards, shard_index, pad_flops_factor)
  io_lib.prepare_workdir(workdir)
  with io_lib.Lock(workdir, f'.lock-shard-{shard_index}-of-{num_shards}'):
    io_lib.write_json(
      os.path.join(workdir, 'sweep.json'),
      {'base_config': base.to_dict(), 'runs': [{'name': r.name, 'overrides': r.overrides} for r in runs]},
    )
    for r in mine:  # refuse to mix runs of different configs before any training (Lifecycle checks again)
      _run_dir(workdir, r.name).check_config(r.config.to_dict(), identity.free_on_resume(r.config, lone=False))
    todo = [r for r in mine if not _run_dir(workdir, r.name).finished()]
    if todo:  # split what the machine cannot hold at once, before anything compiles
      max_group_size, why = fitting_group_size(todo[0], max_group_size)
      if why and max_group_size < len(todo):
        print(f'sweep: groups of at most {max_group_size} runs: {why}', file=sys.stderr, flush=True)
    groups = _planned_groups(workdir, mine, todo, pad_flops_factor, max_group_size)
    print(
      f'sweep: {len(runs)} runs, shard {shard_index}/{num_shards} has {len(mine)}, '
      f'{len(mine) - len(todo)} already finished, {len(todo)} to run in {len(groups)} groups',
      file=sys.stderr,
      flush=True,
    )
    _train_groups(groups, workdir, devices, progress, after_group)
  write_results(workdir)
  return {r.name: _run_dir(workdir, r.name).summary() for r in mine}


def _train_groups(
  groups: Sequence[tuple[list[Run], list[Run], int]],
  workdir: str,
  devices: Sequence[Any] | None,
  progress: bool,
  after_group: Callable[[], None] | None,
) -> None:
  """_train_sweep_group for each of `resume_groups`' groups, with a run bar; a program's config is built once and
  shared by its groups (each build reads every run of the program)."""
  run_bar = tqdm(
    total=sum(len(g) for g, _, _ in groups), desc='runs', unit='run', disable=not progress, dynamic_ncols=True
  )
  built: dict[tuple[str, ...], ml_collections.ConfigDict] = {}

  def program_config(program: Sequence[Run]) -> ml_collections.ConfigDict:
    key = tuple(r.name for r in program)
    if key not in built:
      built[key] = programs_lib.program_config([r.config for r in program])
    return built[key]

  for g, program, width in groups:
    _train_sweep_group(g, functools.partial(program_config, program), width, workdir, devices, progress)
    run_bar.update(len(g))
    if after_group is not None:
      after_group()
  run_bar.close()


# --------------------------------------------------------------------------- results.csv


def _cell(v: Any) -> Any:
  if v is None:
    return ''
  if isinstance(v, (list, dict)):
    return json.dumps(io_lib.json_safe(v))
  return v


def results_rows(workdir: str) -> tuple[list[str], list[dict[str, Any]]]:
  """(columns, rows) for results.csv from sweep.json and every run's summary.json."""
  spec = io_lib.read_json(os.path.join(workdir, 'sweep.json'))
  if spec is None:
    raise FileNotFoundError(f'{workdir}/sweep.json not found: not a sweep workdir')
  swept: list[str] = []
  for run in spec['runs']:
    swept += [k for k in run['overrides'] if k not in swept]
  if 'train.seed' not in swept:
    swept.append('train.seed')
  rows = []
  for run in spec['runs']:
    try:
      config = io_lib.read_json(os.path.join(_run_dir(workdir, run['name']).path, 'config.json'))
    except io_lib.CorruptFile as e:
      io_lib.warn(str(e))
      config = None
    summary = _run_dir(workdir, run['name']).summary() or {'status': 'pending'}
    row = {'name': run['name'], **summary}
    for key in swept:
      value = run['overrides'].get(key)
      row[key] = config_lib.get_path(config, key) if value is None and config is not None else value
    rows.append(row)
  front = ['name', 'status', *swept, *COUNT_COLUMNS, 'step', 'final_loss']
  rest = sorted({k for row in rows for k in row} - set(front) - set(TAIL_COLUMNS))
  return front + rest + list(TAIL_COLUMNS), rows


def write_results(workdir: str) -> str:
  """Rebuild DIR/results.csv from all run summaries (every shard's); returns its path.

  Under a lock (DIR/.lock-results): each shard writes its summaries before it merges,
  so the last shard to merge sees every summary and no row is lost to a race.
  """
  if not os.path.exists(os.path.join(workdir, 'sweep.json')):
    raise FileNotFoundError(f'{workdir}/sweep.json not found: not a sweep workdir')
  with io_lib.Lock(workdir, '.lock-results', wait=True):
    columns, rows = results_rows(workdir)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator='\n')
    writer.writeheader()
    for row in rows:
      writer.writerow({c: _cell(io_lib.json_safe(row.get(c))) for c in columns})
    path = os.path.join(workdir, 'results.csv')
    io_lib.write_text(path, buf.getvalue())
  return path
