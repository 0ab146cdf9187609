"""Workdir outputs: atomic JSON, JSON-lines metrics with TensorBoard, a run's folder, workdir locks
(checkpoints: checkpoints.py); no file is held open between writes but a lock; each fault (corrupt file,
busy or unusable workdir) is one line naming the path."""

import contextlib
import datetime
import fcntl
import functools
import json
import math
import os
import platform
import socket
import sys
import tempfile
import time
from typing import Any, TextIO

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


UMASK = os.umask(0o022)
os.umask(UMASK)


def write_text(path: str, text: str) -> None:
  """Write via a temporary file in the same folder and rename: readers never see half a file."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-')
  try:
    os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp's 0600 would hide results from other users
    with os.fdopen(fd, 'w') as f:
      f.write(text)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def json_text(safe: Any) -> str:
  """The text of a JSON file as this project writes it (`safe`: already through json_safe)."""
  return json.dumps(safe, indent=2, sort_keys=True) + '\n'


def write_json(path: str, obj: Any) -> None:
  write_text(path, json_text(json_safe(obj)))


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
  if old is not None and old == resolved:
    return  # as written (a config of plain values, as to_dict gives): nothing to compare or rewrite
  safe = json_safe(resolved)
  if old == safe:
    return
  new = _flat(safe)
  if old is not None:
    old_flat, default_flat = config_lib.upgrade_renamed(_flat(old)), _flat(json_safe(defaults or {}))
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
  write_text(path, json_text(safe))


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


def _without_torch(load):
  """load(), with `import torch` failing meanwhile unless torch is already imported.

  tensorboardX imports torch whenever it is installed (to accept torch tensors, which this project
  never logs): 1-2 s at the start of every run, and torch's thread pools inside a JAX process."""
  hide = 'torch' not in sys.modules
  if hide:
    sys.modules['torch'] = None  # `import torch` raises ImportError while this is set
  try:
    return load()
  finally:
    if hide:
      del sys.modules['torch']


def summary_writer_class():
  """tensorboardX.SummaryWriter, imported without PyTorch (_without_torch)."""

  def load():
    from tensorboardX import SummaryWriter

    return SummaryWriter

  return _without_torch(load)


@functools.cache
def tensorboard_records():
  """(tensorboardX's summary module, event_pb2, RecordWriter), imported without PyTorch."""

  def load():
    from tensorboardX import record_writer
    from tensorboardX import summary
    from tensorboardX.proto import event_pb2

    return summary, event_pb2, record_writer.RecordWriter

  return _without_torch(load)


class _Records:
  """TensorBoard event records framed by tensorboardX's RecordWriter (length, CRCs) into memory."""

  def __init__(self):
    self.summary, self.event_pb2, record_writer = tensorboard_records()
    self.buffer = bytearray()
    self.writer = record_writer.__new__(record_writer)  # its framing, our buffer: no file held open
    self.writer._writer = self  # RecordWriter.write calls self._writer.write(bytes)

  def write(self, data: bytes) -> None:
    self.buffer += data

  def event(self, **fields: Any) -> None:
    """One Event (a step's scalars together: one record, one pair of CRCs)."""
    self.writer.write(self.event_pb2.Event(wall_time=time.time(), **fields).SerializeToString())


class MetricsLog:
  """metrics.jsonl (one object per logged step) plus TensorBoard scalars (tensorboardX's records, no TF).

  Holds no open file and no thread: `write` buffers a step's line and events, `flush` appends them
  (open, write, close) to metrics.jsonl and to tensorboard/events.out.tfevents.<time>.<host> (one
  file per opening of the log, as a SummaryWriter would make). Opening keeps every valid line up
  to `resume_step` (once per step) and sets aside lines that cannot be parsed in
  metrics.jsonl.corrupt with a warning; `records` holds the kept lines, parsed.
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
    if records or bad:  # drop lines past the resume step and the unreadable ones (a fresh run has nothing to keep)
      write_text(self.path, ''.join(json.dumps(r) + '\n' for r in self.records))
    self.tb_path = os.path.join(
      workdir, 'tensorboard', f'events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}'
    )
    self.lines: list[str] = []
    self.events: _Records | None = None

  def write(self, step: int, metrics: dict[str, Any]) -> None:
    """Buffer the step's line and scalars (written by `flush`)."""
    self.lines.append(json.dumps(json_safe({'step': step, **metrics})) + '\n')
    if self.events is None:
      self.events = _Records()
      if not os.path.exists(self.tb_path):
        self.events.event(file_version='brain.Event:2')
    summary = self.events.summary.Summary  # the protos tensorboardX's summary.scalar builds, built directly
    values = [summary.Value(tag=k, simple_value=float(v)) for k, v in metrics.items() if isinstance(v, (int, float))]
    self.events.event(step=step, summary=summary(value=values))

  def flush(self) -> None:
    """Append the buffered lines and events to their files (each opened and closed here)."""
    if self.lines:
      with open(self.path, 'a') as f:
        f.write(''.join(self.lines))
      self.lines = []
    if self.events is not None and self.events.buffer:
      os.makedirs(os.path.dirname(self.tb_path), exist_ok=True)
      with open(self.tb_path, 'ab') as f:
        f.write(self.events.buffer)
      self.events.buffer = bytearray()

  def close(self) -> None:
    self.flush()


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


@functools.cache
def _default_config() -> dict[str, Any]:
  """config.default_config() as a dict, built once (read only: check_or_write_config)."""
  return config_lib.default_config().to_dict()


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
    """Write config.json, or refuse (WorkdirError) a folder that holds a different config; keys under a prefix
    in `free` may differ (identity.free_on_resume says which)."""
    check_or_write_config(self.path, resolved, _default_config(), free)

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


def cpu_name() -> str:
  """The CPU's model name (/proc/cpuinfo's `model name`, with its family, model and stepping: a virtual machine's
  name can be generic, e.g. "Intel(R) Xeon(R) Processor"), else platform.processor() or the architecture."""
  cpu = platform.processor() or platform.machine()
  with contextlib.suppress(OSError):
    with open('/proc/cpuinfo', encoding='utf-8') as fh:
      first = {}
      for line in fh:
        if not line.strip():
          break  # the first processor's block
        key, _, value = line.partition(':')
        first[key.strip()] = value.strip()
    ids = [f'{k} {first[k]}' for k in ('cpu family', 'model', 'stepping') if first.get(k)]
    cpu = first.get('model name', cpu) + (f' ({", ".join(ids)})' if ids else '')
  return cpu
