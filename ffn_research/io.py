"""Workdir outputs: atomic JSON, JSON-lines metrics with TensorBoard, Orbax checkpoints."""

import json
import math
import os
import tempfile
from typing import Any

import jax
import numpy as np


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


def write_text(path: str, text: str) -> None:
  """Write via a temporary file in the same folder and rename: readers never see half a file."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-')
  try:
    with os.fdopen(fd, 'w') as f:
      f.write(text)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def write_json(path: str, obj: Any) -> None:
  write_text(path, json.dumps(json_safe(obj), indent=2, sort_keys=True) + '\n')


def read_json(path: str) -> Any:
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


class WorkdirConfigMismatch(ValueError):
  pass


def check_or_write_config(workdir: str, resolved: dict[str, Any]) -> None:
  """Write config.json, or refuse to resume a workdir that holds a different config."""
  path = os.path.join(workdir, 'config.json')
  old = read_json(path)
  if old is not None and old != json_safe(resolved):
    diff = sorted(k for k in _flat(old).keys() | _flat(resolved).keys()
                  if _flat(old).get(k) != _flat(json_safe(resolved)).get(k))
    raise WorkdirConfigMismatch(
        f'{workdir} holds a run with a different config (differs in: {", ".join(diff)}); '
        'use a new --workdir or delete it')
  write_json(path, resolved)


def _flat(d: dict[str, Any], prefix: str = '') -> dict[str, Any]:
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flat(v, f'{prefix}{k}.'))
    else:
      out[prefix + k] = v
  return out


class MetricsLog:
  """metrics.jsonl (one object per logged step) plus TensorBoard scalars (tensorboardX, no TF)."""

  def __init__(self, workdir: str, resume_step: int = 0):
    self.path = os.path.join(workdir, 'metrics.jsonl')
    lines = []
    if os.path.exists(self.path):  # keep only what the restored checkpoint had reached
      with open(self.path) as f:
        for line in f:
          try:
            if json.loads(line)['step'] <= resume_step:
              lines.append(line if line.endswith('\n') else line + '\n')
          except (json.JSONDecodeError, KeyError):
            break  # a line cut by a kill
    write_text(self.path, ''.join(lines))
    self.file = open(self.path, 'a')
    from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
    self.tb = SummaryWriter(os.path.join(workdir, 'tensorboard'))

  def write(self, step: int, metrics: dict[str, Any]) -> None:
    self.file.write(json.dumps(json_safe({'step': step, **metrics})) + '\n')
    self.file.flush()
    for k, v in metrics.items():
      if isinstance(v, (int, float)):
        self.tb.add_scalar(k, v, step)

  def close(self) -> None:
    self.file.close()
    self.tb.close()


class Checkpointer:
  """Orbax checkpoints of the whole run state; keeps the latest two."""

  def __init__(self, directory: str):
    import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
    self.ocp = ocp
    self.manager = ocp.CheckpointManager(
        os.path.abspath(directory),
        options=ocp.CheckpointManagerOptions(max_to_keep=2, enable_async_checkpointing=False))

  def save(self, step: int, state: Any, wall_time_s: float) -> None:
    ocp = self.ocp
    self.manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state),
        meta=ocp.args.JsonSave({'step': step, 'wall_time_s': wall_time_s})), force=True)
    self.manager.wait_until_finished()

  def restore_latest(self, state: Any) -> tuple[Any, float]:
    """(restored state, wall time spent before), or (state, 0.0) when there is no checkpoint."""
    step = self.manager.latest_step()
    if step is None:
      return state, 0.0
    ocp = self.ocp
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    restored = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
    return restored['state'], float(restored['meta']['wall_time_s'])
