"""Checkpoints of a run's whole state: Orbax (lone runs, maybe sharded) or one msgpack file (a sweep's runs), each
with a sha256 of its content; a checkpoint that cannot be restored is set aside, the next tried."""

import hashlib
import json
import os
import shutil
import tempfile
from typing import Any

from flax import serialization
import jax
import numpy as np

from ffn_research import io as io_lib

CHECKSUMS = 'sha256.json'  # in an Orbax (or older light) checkpoint folder: {relative path: sha256} of its files
LIGHT = 'state.msgpack'  # a sweep run's checkpoint: msgpack {'meta', 'state': {tree path: array}, 'sha256'}


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


def _content_sha256(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
  """sha256 of the meta (canonical JSON) and of each array's path, dtype, shape and bytes, in path order."""
  h = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
  for path in sorted(arrays):
    a = np.ascontiguousarray(arrays[path])
    h.update(f'\n{path} {a.dtype.str} {a.shape}\n'.encode())
    h.update(a.tobytes())
  return h.hexdigest()


def pack_light(state: Any, meta: dict[str, Any]) -> bytes:
  """A light checkpoint's bytes: `flax.serialization.msgpack_restore` reads them back as a dict."""
  leaves = jax.tree_util.tree_flatten_with_path(state)[0]
  arrays = {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in leaves}
  return serialization.msgpack_serialize({'meta': meta, 'state': arrays, 'sha256': _content_sha256(meta, arrays)})


def unpack_light(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """(arrays by tree path, meta) of a light checkpoint; ValueError if it differs from its checksum at save time."""
  content = serialization.msgpack_restore(data)
  if not isinstance(content, dict) or not {'meta', 'state', 'sha256'} <= content.keys():
    raise ValueError(f'{LIGHT} is not a checkpoint')
  if _content_sha256(content['meta'], content['state']) != content['sha256']:
    raise ValueError(f'{LIGHT} differs from its checksum at save time')
  return content['state'], content['meta']


class Checkpointer:
  """Checkpoints of the whole run state (plus a JSON meta), one folder per step; keeps the latest two.

  Two formats, told apart by their files when read: Orbax (`state/`, `meta/metadata`; lone runs,
  whose state may be sharded over a mesh) and, with `light=True` (a sweep's runs), one msgpack file
  `state.msgpack` (the arrays by tree path, the meta and their sha256): one small write per run instead
  of an Orbax CheckpointManager (an older light folder, `state.npz` + `meta.json`, is still read).
  An Orbax folder holds sha256.json of its files. No file or thread is held
  between calls (the Orbax manager is opened when an Orbax checkpoint is written or read). A
  checkpoint that cannot be restored is moved to checkpoints.corrupt/ with a warning naming it,
  and the next older one is tried.
  """

  KEEP = 2

  def __init__(self, directory: str, light: bool = False):
    self.directory = os.path.abspath(directory)
    self.light = light
    self.manager: Any = None

  def _manager(self) -> Any:
    """The Orbax CheckpointManager of the folder, opened on first use."""
    if self.manager is None:
      import orbax.checkpoint as ocp

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
        self.directory,
        options=ocp.CheckpointManagerOptions(max_to_keep=self.KEEP, enable_async_checkpointing=False, **alone),
      )
    return self.manager

  def _folder(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  def _format(self, step: int) -> str:
    """'light', 'npz' (a light checkpoint written before state.msgpack) or 'orbax', from the folder's files."""
    folder = self._folder(step)
    if os.path.exists(os.path.join(folder, LIGHT)):
      return 'light'
    return 'npz' if os.path.exists(os.path.join(folder, 'meta.json')) else 'orbax'

  def steps(self) -> list[int]:
    """Saved steps, newest first (finished checkpoints only: both formats rename a finished folder into place)."""
    names = os.listdir(self.directory) if os.path.isdir(self.directory) else []
    return sorted((int(n) for n in names if n.isdigit()), reverse=True)

  def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
    """Save at `step` unless a checkpoint of that step exists (a rerun after a kill)."""
    if step in self.steps():
      return
    meta = io_lib.json_safe({'step': step, **meta})
    if self.light:
      self._save_light(step, state, meta)
      return
    ocp = self.ocp()
    self._manager().save(
      step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)), force=True
    )
    self.manager.wait_until_finished()
    folder = self._folder(step)
    io_lib.write_json(os.path.join(folder, CHECKSUMS), _checksums(folder))

  @staticmethod
  def ocp() -> Any:
    import orbax.checkpoint as ocp

    return ocp

  def _save_light(self, step: int, state: Any, meta: dict[str, Any]) -> None:
    """state.msgpack in a temporary folder renamed to `step`; older steps beyond KEEP removed."""
    os.makedirs(self.directory, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=self.directory, prefix=f'.tmp-{step}-')
    try:
      with open(os.path.join(tmp, LIGHT), 'wb') as f:
        f.write(pack_light(state, meta))
      os.chmod(tmp, 0o777 & ~io_lib.UMASK)
      os.replace(tmp, self._folder(step))
    except BaseException:
      shutil.rmtree(tmp, ignore_errors=True)
      raise
    for old in self.steps()[self.KEEP :]:
      shutil.rmtree(self._folder(old), ignore_errors=True)

  def read_meta(self, step: int) -> dict[str, Any] | None:
    """The meta dict saved with `step` (plain JSON), or None when absent or unreadable (restore then
    sets the damaged checkpoint aside)."""
    kind = self._format(step)
    try:
      if kind == 'light':
        meta = self._read_light(step)[1]
      else:
        meta = io_lib.read_json(os.path.join(self._folder(step), 'meta.json' if kind == 'npz' else 'meta/metadata'))
    except (io_lib.CorruptFile, ValueError, OSError):
      return None
    return meta if isinstance(meta, dict) else None

  def _verify(self, step: int) -> None:
    """Raise ValueError if a file of the checkpoint differs from its checksum at save time
    (so nothing is read from damaged data; older checkpoints without sums are read as is)."""
    folder = self._folder(step)
    saved = io_lib.read_json(os.path.join(folder, CHECKSUMS))
    if saved is None:
      if self._format(step) == 'npz':
        raise ValueError(f'{CHECKSUMS} is missing')
      return
    now = _checksums(folder)
    changed = sorted(set(saved) ^ set(now) | {f for f in set(saved) & set(now) if saved[f] != now[f]})
    if changed:
      raise ValueError(f'{len(changed)} file(s) differ from their checksums at save time, e.g. {changed[0]}')

  def _read_light(self, step: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    with open(os.path.join(self._folder(step), LIGHT), 'rb') as f:
      return unpack_light(f.read())

  def _restore_light(self, step: int, abstract: Any) -> tuple[Any, Any]:
    """(state, meta) of a light checkpoint (state.msgpack, or an older folder's state.npz + meta.json)."""
    folder = self._folder(step)
    if self._format(step) == 'light':
      arrays, meta = self._read_light(step)
    else:
      with np.load(os.path.join(folder, 'state.npz'), allow_pickle=False) as npz:
        arrays, meta = dict(npz.items()), io_lib.read_json(os.path.join(folder, 'meta.json'))
    paths, treedef = jax.tree_util.tree_flatten_with_path(abstract)
    leaves = []
    for path, a in paths:
      x = arrays[jax.tree_util.keystr(path)]
      if x.dtype != a.dtype and x.dtype.kind == 'V' and x.dtype.itemsize == np.dtype(a.dtype).itemsize:
        x = x.view(a.dtype)  # NumPy stores extension dtypes (bfloat16) as raw bytes
      leaves.append(x)
    return jax.tree_util.tree_unflatten(treedef, [jax.numpy.asarray(x) for x in leaves]), meta

  def restore(self, step: int, abstract: Any) -> tuple[Any, dict[str, Any]] | None:
    """(state, meta) of `step`, or None after setting a damaged checkpoint aside."""
    try:
      self._verify(step)
      if self._format(step) != 'orbax':
        state, meta = self._restore_light(step, abstract)
      else:
        ocp = self.ocp()
        restored = self._manager().restore(
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
    except Exception as e:  # Orbax and NumPy raise many kinds on damage
      path = self._folder(step)
      self.discard(step, corrupt=True)
      io_lib.warn(
        f'checkpoint {path} is damaged ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ""}); '
        f'moved to {self.directory}.corrupt/'
      )
      return None

  def discard(self, step: int, corrupt: bool = False) -> None:
    """Remove the checkpoint of `step` (into checkpoints.corrupt/ when damaged)."""
    path = self._folder(step)
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
    self.close()  # an Orbax manager caches the steps it saw: reopened on next use

  def close(self) -> None:
    if self.manager is not None:
      self.manager.close()
      self.manager = None
