"""Workdir outputs: atomic JSON, JSON-lines metrics with TensorBoard, Orbax checkpoints,
workdir locks; each fault (corrupt file, busy or unusable workdir) is one line naming the path."""

import datetime
import fcntl
import hashlib
import json
import math
import os
import shutil
import socket
import sys
import tempfile
from typing import Any, TextIO

import jax
import numpy as np

from ffn_research import config as config_lib


def json_safe(obj: Any) -> Any:
  """Non-finite floats become None (strict JSON has no NaN); NumPy scalars become Python."""
  if isinstance(obj, dict):
    return {k: json_safe(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [json_safe(v) for v in obj]
  if isinstance(obj, np.generic):
    obj = obj.item()
  if isinstance(obj, float) and not math.isfinite(obj):
    return None
  return obj


_UMASK = os.umask(0o022)
os.umask(_UMASK)


def write_text(path: str, text: str) -> None:
  """Write via a temporary file in the same folder and rename: readers never see half a file."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-')
  try:
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's 0600 would hide results from other users
    with os.fdopen(fd, 'w') as f:
      f.write(text)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def write_json(path: str, obj: Any) -> None:
  write_text(path, json.dumps(json_safe(obj), indent=2, sort_keys=True) + '\n')


def warn(message: str) -> None:
  print(f'warning: {message}', file=sys.stderr, flush=True)


class WorkdirError(ValueError):
  """A workdir that cannot be used (a file, unwritable, busy, corrupt config.json); one line."""


WorkdirConfigMismatch = WorkdirError  # the old name


def read_json(path: str) -> Any:
  """The parsed file, or None if absent; raises CorruptFile (naming the path) if unreadable."""
  if not os.path.exists(path):
    return None
  try:
    with open(path, 'rb') as f:
      return json.loads(f.read().decode('utf-8'))
  except (ValueError, UnicodeDecodeError, OSError) as e:
    raise CorruptFile(path, f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""}') from None


class CorruptFile(WorkdirError):
  def __init__(self, path: str, why: str):
    super().__init__(f'{path} is unreadable ({why})')
    self.path = path


def read_summary(path: str) -> dict[str, Any] | None:
  """summary.json, or None if absent; a corrupt one is set aside (it is rebuilt by rerunning)."""
  try:
    summary = read_json(path)
    if summary is None or isinstance(summary, dict):
      return summary
    why = f'a JSON {type(summary).__name__}, not an object'
  except CorruptFile as e:
    why = str(e)[len(path) + 1 :]
  aside = set_aside(path)
  warn(
    f'{path} was unreadable ({why.strip("() ")}); moved to {aside}; the run is resumed from '
    'its checkpoint to rebuild it'
  )
  return None


def set_aside(path: str) -> str:
  """Rename `path` to `path.corrupt` (or .corrupt-2, ...); returns the new name."""
  aside, i = path + '.corrupt', 1
  while os.path.exists(aside):
    i += 1
    aside = f'{path}.corrupt-{i}'
  os.replace(path, aside)
  return aside


def prepare_workdir(workdir: str) -> None:
  """Create `workdir` (and parents) or raise WorkdirError saying why it cannot be used."""
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise WorkdirError(f'--workdir={workdir} is a file, not a folder; give a folder path')
  try:
    os.makedirs(workdir, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=workdir, prefix='.tmp-probe-')
    os.close(fd)
    os.unlink(probe)
  except OSError as e:
    raise WorkdirError(
      f'--workdir={workdir} cannot be created or written ({e.strerror or e}); give a writable folder'
    ) from None


def check_or_write_config(
  workdir: str, resolved: dict[str, Any], defaults: dict[str, Any] | None = None, free: tuple[str, ...] = ()
) -> None:
  """Write config.json, or refuse to resume a workdir that holds a different config.

  Keys missing from an older config.json count as equal when `resolved` has their
  `defaults` value (a workdir written before a key existed still resumes). Keys starting
  with a prefix in `free` may change (config.json then records the new values).
  """
  path = os.path.join(workdir, 'config.json')
  try:
    old = read_json(path)
    if old is not None and not isinstance(old, dict):
      raise CorruptFile(path, f'a JSON {type(old).__name__}, not an object')
  except CorruptFile as e:
    raise WorkdirError(
      f'{e}; it records the config of the run in {workdir}: restore it, or delete the workdir to start over'
    ) from None
  new = _flat(json_safe(resolved))
  if old is not None:
    old_flat, default_flat = _flat(old), _flat(json_safe(defaults or {}))
    diff = sorted(
      k
      for k in old_flat.keys() | new.keys()
      if old_flat.get(k) != new.get(k)
      and not (k not in old_flat and k in default_flat and new.get(k) == default_flat[k])
      and not k.startswith(free)
    )
    if diff:
      raise WorkdirError(
        f'{workdir} holds a run with a different config (differs in: {", ".join(diff)}); '
        'use a new --workdir or delete it'
      )
  write_json(path, resolved)


def _flat(d: dict[str, Any], prefix: str = '') -> dict[str, Any]:
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flat(v, f'{prefix}{k}.'))
    else:
      out[prefix + k] = v
  return out


def read_metrics(path: str) -> tuple[list[dict[str, Any]], list[bytes]]:
  """(valid records, one per step, by step; raw lines that cannot be parsed) of a metrics.jsonl."""
  records: dict[int, dict[str, Any]] = {}
  bad = []
  if os.path.exists(path):
    with open(path, 'rb') as f:
      raw_lines = f.read().split(b'\n')
    for raw in raw_lines:
      if not raw.strip():
        continue
      try:
        record = json.loads(raw.decode('utf-8'))
        ok = isinstance(record, dict) and isinstance(record.get('step'), int)
      except (ValueError, UnicodeDecodeError):
        ok = False
      if not ok:
        bad.append(raw)
      else:
        records.setdefault(record['step'], record)
  return [records[k] for k in sorted(records)], bad


def summary_writer_class():
  """tensorboardX.SummaryWriter, imported without PyTorch.

  tensorboardX's writer imports torch whenever it is installed (to accept torch tensors, which this
  project never logs): 1-2 s at the start of every run, and torch's thread pools inside a JAX
  process. Hiding torch for the duration of the import keeps it out; a process that has already
  imported torch keeps it."""
  hide = 'torch' not in sys.modules
  if hide:
    sys.modules['torch'] = None  # `import torch` raises ImportError while this is set
  try:
    from tensorboardX import SummaryWriter
  finally:
    if hide:
      del sys.modules['torch']
  return SummaryWriter


class MetricsLog:
  """metrics.jsonl (one object per logged step) plus TensorBoard scalars (tensorboardX, no TF).

  Opening keeps every valid line up to `resume_step` (once per step) and sets aside
  lines that cannot be parsed in metrics.jsonl.corrupt with a warning; `records`
  holds the kept lines, parsed.
  """

  def __init__(self, workdir: str, resume_step: int = 0):
    self.path = os.path.join(workdir, 'metrics.jsonl')
    records, bad = read_metrics(self.path)
    if bad:
      with open(self.path + '.corrupt', 'ab') as f:
        f.write(b''.join(line + b'\n' for line in bad))
      warn(
        f'{self.path}: {len(bad)} unreadable line(s) set aside in {self.path}.corrupt; '
        f'kept {len(records)} valid line(s)'
      )
    self.records = [r for r in records if r['step'] <= resume_step]
    write_text(self.path, ''.join(json.dumps(r) + '\n' for r in self.records))
    self.file = open(self.path, 'a')
    self.tb = summary_writer_class()(os.path.join(workdir, 'tensorboard'))

  def write(self, step: int, metrics: dict[str, Any]) -> None:
    self.file.write(json.dumps(json_safe({'step': step, **metrics})) + '\n')
    self.file.flush()
    for k, v in metrics.items():
      if isinstance(v, (int, float)):
        self.tb.add_scalar(k, v, step)

  def close(self) -> None:
    self.file.close()
    self.tb.close()


class Busy(WorkdirError):
  """Another process holds the lock."""


class Lock:
  """An exclusive lock on a folder (flock on DIR/NAME): one process owns a workdir at a time.

  The kernel drops the lock when its holder dies, so a killed run leaves no stale lock;
  the file names the holder (pid, host, start time, command) for the error message.
  """

  def __init__(self, folder: str, name: str = '.lock', wait: bool = False):
    self.path = os.path.join(folder, name)
    self.wait = wait
    self.file: TextIO | None = None

  def __enter__(self) -> 'Lock':
    os.makedirs(os.path.dirname(self.path), exist_ok=True)
    f = open(self.path, 'a+')
    try:
      fcntl.flock(f, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
    except BlockingIOError:
      f.seek(0)
      holder = f.read().strip() or 'another process'
      f.close()
      raise Busy(
        f'{os.path.dirname(self.path)} is in use by {holder} (lock {self.path}); wait for it to finish or stop it'
      ) from None
    except OSError as e:  # a filesystem without locks: go on unprotected
      warn(f'cannot lock {self.path} ({e.strerror or e}); not protected against a second process')
    f.seek(0)
    f.truncate()
    f.write(
      f'pid {os.getpid()} on {socket.gethostname()} since '
      f'{datetime.datetime.now().isoformat(timespec="seconds")} ({" ".join(sys.argv)[:200]})\n'
    )
    f.flush()
    self.file = f
    return self

  def __exit__(self, *exc) -> None:
    if self.file is not None:
      self.file.close()  # releases the flock
      self.file = None


# --------------------------------------------------------------------------- a run's folder

FINISHED = ('completed', 'diverged')  # statuses a rerun skips ('failed' runs are retried)


class RunDir:
  """One run's folder: its lock, the config.json check, its status and the one place summary.json is
  written (loop.Lifecycle sequences them, for a lone run and a sweep's runs alike)."""

  def __init__(self, path: str):
    self.path = path
    self.summary_path = os.path.join(path, 'summary.json')

  def lock(self) -> Lock:
    """One process trains the run at a time (io.Busy otherwise)."""
    return Lock(self.path)

  def check_config(self, resolved: dict[str, Any], free: tuple[str, ...] = ()) -> None:
    """Write config.json, or refuse (WorkdirError) a folder that holds a different config.

    A dense run (model.moe.num_experts 0) ignores every model.moe key, so those may differ (e.g. a
    default that changed since the run started); config.json then records the new values."""
    if resolved.get('model', {}).get('moe', {}).get('num_experts', 0) == 0:
      free = (*free, 'model.moe.')
    check_or_write_config(self.path, resolved, config_lib.default_config().to_dict(), free)

  def summary(self) -> dict[str, Any] | None:
    """summary.json, None while unfinished (read_summary)."""
    return read_summary(self.summary_path)

  def finished(self) -> dict[str, Any] | None:
    """summary.json when the run is finished (FINISHED: a rerun skips it), else None."""
    summary = self.summary()
    return summary if summary is not None and summary.get('status') in FINISHED else None

  def write_summary(self, summary: dict[str, Any]) -> None:
    write_json(self.summary_path, summary)

  def write_failure(self, error: BaseException, **extra: Any) -> dict[str, Any]:
    """Record a crash as status 'failed' with its one-line error (the run is retried on rerun)."""
    summary = {'status': 'failed', 'error': f'{type(error).__name__}: {error}'.splitlines()[0], **extra}
    self.write_summary(summary)
    return summary


CHECKSUMS = 'sha256.json'  # in each checkpoint folder: {relative path: sha256} of its files


def _checksums(folder: str) -> dict[str, str]:
  out = {}
  for root, _, files in os.walk(folder):
    for name in files:
      path = os.path.join(root, name)
      rel = os.path.relpath(path, folder)
      if rel != CHECKSUMS:
        with open(path, 'rb') as f:
          out[rel] = hashlib.sha256(f.read()).hexdigest()
  return out


class Checkpointer:
  """Orbax checkpoints of the whole run state (plus a JSON meta); keeps the latest two.

  A checkpoint that cannot be restored is moved to checkpoints.corrupt/ with a warning
  naming it, and the next older one is tried.
  """

  def __init__(self, directory: str):
    import orbax.checkpoint as ocp

    self.ocp = ocp
    self.directory = os.path.abspath(directory)
    self._open()

  def _open(self) -> None:
    ocp = self.ocp
    # With several processes (jax.distributed) only process 0 checkpoints (host copies, ffn_research.parallel).
    alone = {}
    if jax.process_count() > 1:
      os.makedirs(self.directory, exist_ok=True)  # Orbax cannot create it for a subset of processes
      alone = {
        'create': False,
        'multiprocessing_options': ocp.options.MultiprocessingOptions(
          primary_host=jax.process_index(), active_processes={jax.process_index()}
        ),
      }
    self.manager = ocp.CheckpointManager(
      self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=2, enable_async_checkpointing=False, **alone)
    )

  def steps(self) -> list[int]:
    """Saved steps, newest first."""
    return sorted(self.manager.all_steps(), reverse=True)

  def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
    """Save at `step` unless a checkpoint of that step exists (a rerun after a kill)."""
    if step in self.manager.all_steps():
      return
    ocp = self.ocp
    self.manager.save(
      step,
      args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(json_safe({'step': step, **meta}))
      ),
      force=True,
    )
    self.manager.wait_until_finished()
    folder = os.path.join(self.directory, str(step))
    write_json(os.path.join(folder, CHECKSUMS), _checksums(folder))

  def read_meta(self, step: int) -> dict[str, Any] | None:
    """The meta dict saved with `step` (plain JSON), or None when absent or unreadable (restore then
    sets the damaged checkpoint aside)."""
    try:
      meta = read_json(os.path.join(self.directory, str(step), 'meta', 'metadata'))
    except CorruptFile:
      return None
    return meta if isinstance(meta, dict) else None

  def _verify(self, step: int) -> None:
    """Raise ValueError if a file of the checkpoint differs from its checksum at save time
    (so Orbax is never asked to read damaged data; older checkpoints without sums are read as is)."""
    folder = os.path.join(self.directory, str(step))
    saved = read_json(os.path.join(folder, CHECKSUMS))
    if saved is None:
      return
    now = _checksums(folder)
    changed = sorted(set(saved) ^ set(now) | {f for f in set(saved) & set(now) if saved[f] != now[f]})
    if changed:
      raise ValueError(f'{len(changed)} file(s) differ from their checksums at save time, e.g. {changed[0]}')

  def restore(self, step: int, abstract: Any) -> tuple[Any, dict[str, Any]] | None:
    """(state, meta) of `step`, or None after setting a damaged checkpoint aside."""
    ocp = self.ocp
    try:
      self._verify(step)
      restored = self.manager.restore(
        step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore())
      )
      meta, state = restored['meta'], restored['state']
      if not (
        isinstance(meta, dict) and meta.get('step') == step and isinstance(meta.get('wall_time_s'), (int, float))
      ):
        raise ValueError('meta does not match the step')
      got = jax.tree.map(lambda x: (x.shape, x.dtype), state)
      if got != jax.tree.map(lambda x: (x.shape, x.dtype), abstract):
        raise ValueError('arrays of the wrong shape')
      return state, meta
    except Exception as e:  # Orbax raises many kinds on damage
      path = os.path.join(self.directory, str(step))
      self.discard(step, corrupt=True)
      warn(
        f'checkpoint {path} is damaged ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ""}); '
        f'moved to {self.directory}.corrupt/'
      )
      return None

  def discard(self, step: int, corrupt: bool = False) -> None:
    """Remove the checkpoint of `step` (into checkpoints.corrupt/ when damaged)."""
    path = os.path.join(self.directory, str(step))
    if os.path.exists(path):
      if corrupt:
        aside = os.path.join(self.directory + '.corrupt', str(step))
        i = 1
        while os.path.exists(aside):
          i += 1
          aside = os.path.join(self.directory + '.corrupt', f'{step}-{i}')
        os.makedirs(os.path.dirname(aside), exist_ok=True)
        shutil.move(path, aside)
      else:
        shutil.rmtree(path)
    self.manager.close()
    self._open()

  def close(self) -> None:
    self.manager.close()
