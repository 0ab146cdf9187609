"""What a run records: its metrics flattened for the logs, the running loss it is judged on (`Track`: the
diverged and blow-up rules), the log line, and the summary written at its end (`run_summary`, `per_param`)."""

import dataclasses
from typing import Any

import jax
import ml_collections
import numpy as np

PyTree = Any


def flatten_metrics(tree: PyTree, prefix: str = '') -> dict[str, Any]:
  """Flatten metrics to {'a/b': float or list} for JSON and TensorBoard."""
  out = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    name = '/'.join(str(getattr(k, 'key', getattr(k, 'name', getattr(k, 'idx', k)))) for k in path)
    value = np.asarray(leaf)
    out[prefix + name] = value.item() if value.ndim == 0 else value.tolist()
  return out


@dataclasses.dataclass
class Track:
  """One run's state derived from its logged lines (so a resumed run replays it from disk)."""

  last: dict[str, Any] = dataclasses.field(default_factory=dict)
  initial_loss: float | None = None
  above: int = 0  # consecutive logged chunks over the blow-up threshold
  diverged_at: int = -1  # step at which the run was declared diverged
  reason: str | None = None  # 'non-finite loss' or 'blow-up'

  def observe(self, step: int, m: dict[str, Any], tr: ml_collections.ConfigDict) -> None:
    self.last = m
    if self.initial_loss is None and m.get('initial_loss') is not None:
      self.initial_loss = float(m['initial_loss'])
    bad = m.get('first_nonfinite_step')
    loss = m.get('loss')
    if bad is not None and bad >= 0:
      self.diverged_at, self.reason = int(bad), 'non-finite loss'
    elif loss is None or not np.isfinite(loss):  # a JSON null after a resume
      self.diverged_at, self.reason = step, 'non-finite loss'
    elif tr.blowup_factor > 0 and self.initial_loss and loss > tr.blowup_factor * abs(self.initial_loss):
      self.above += 1
      if self.above >= tr.blowup_patience:
        self.diverged_at, self.reason = step, 'blow-up'
    else:
      self.above = 0


def eval_log_names(evals: dict[str, Any]) -> dict[str, Any]:
  """Held-out metrics as logged: `eval_X` -> `eval/X`; a training-set `X` beside an `eval_X` -> `eval/train_X`
  (e.g. modular arithmetic's training `accuracy` and held-out `eval_accuracy`); any other `Y` -> `eval/Y`."""
  out = {}
  for k, v in evals.items():
    if k.startswith('eval_'):
      out['eval/' + k.removeprefix('eval_')] = v
    else:
      out[('eval/train_' if f'eval_{k}' in evals else 'eval/') + k] = v
  return out


def log_line(step: int, total_steps: int, m: dict[str, Any]) -> str:
  """The console line for one logged chunk (m: flattened metrics with steps_per_s)."""
  return (
    f'step {step:>7}/{total_steps} | loss {m["loss"]:.4e} | lr {m["learning_rate"]:.2e} | '
    f'grad_norm {m["grad_norm"]:.3e} | {m["steps_per_s"]:,.0f} steps/s | '
    f'eta {(total_steps - step) / max(m["steps_per_s"], 1e-9):.0f}s'
  )


def run_summary(
  counts: dict[str, Any],
  track: Track,
  *,
  step: int,
  evals: dict[str, Any] | None,
  compile_time_s: float | None,
  checkpoint_time_s: float,
  wall_time_s: float,
  steps_per_s: float | None = None,
) -> dict[str, Any]:
  """summary.json of a finished run (every entry point writes this schema).

  `steps_per_s`: steps trained by this process over its training time (compiling, held-out
  evaluation and checkpointing excluded); the last logged interval's rate when not given.
  """
  last = track.last
  summary = {
    **counts,
    'wall_time_s': wall_time_s,
    'compile_time_s': compile_time_s,
    'checkpoint_time_s': checkpoint_time_s,
    'steps_per_s': last.get('steps_per_s') if steps_per_s is None else steps_per_s,
    'final_loss': last.get('loss'),
  }
  if track.diverged_at >= 0:
    summary.update(
      status='diverged',
      diverged_step=track.diverged_at,
      diverged_reason=track.reason,
      step=track.diverged_at,
      eval_loss=None,
    )
  else:
    assert evals is not None  # a run that did not diverge was evaluated
    summary.update(status='completed', step=step, **evals, **per_param(evals, counts))
  return summary


def per_param(evals: dict[str, Any], counts: dict[str, Any]) -> dict[str, float]:
  """bits_per_param and bits_per_ffn_param from a task's `bits_stored` (NaN without an FFN).

  Divided in float32, as the device would: the summary's one place for per-parameter figures.
  """
  if evals.get('bits_stored') is None:
    return {}
  bits = np.float32(evals['bits_stored'])
  ffn = counts.get('num_ffn_params', counts['num_params'])
  return {
    'bits_per_param': (bits / np.float32(counts['num_params'])).item(),
    'bits_per_ffn_param': (bits / np.float32(ffn)).item() if ffn else float('nan'),
  }
