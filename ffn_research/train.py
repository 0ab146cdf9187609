"""Training: a pure, jit-compiled train step and the run loop around it.

`Experiment(config)` holds everything a config fixes (model structure, task,
optimizer from `optim`) and exposes pure functions over pytrees:

  init(seed)                                  -> run state (params, opt_state, data, rng, step)
  train_step(params, opt_state, batch, rng)   -> (params, opt_state, metrics)
  train_chunk(state, num_steps)               -> (state, metrics): lax.scan over steps
  evaluate(params, data)                      -> eval metrics

so a sweep can `vmap` them over runs that share shapes. `train_and_evaluate`
runs one config in a workdir: logging, checkpoints, resume and summary.
"""

import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from ffn_research import io as io_lib
from ffn_research import models, optim, tasks, validation

PyTree = Any


# --------------------------------------------------------------------------- experiment

def tree_norm(tree: PyTree) -> jax.Array:
  """Global L2 norm of a pytree."""
  return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(tree)))


def _sum_aux_losses(aux: PyTree) -> jax.Array:
  """Sum of every aux entry whose key ends in '_loss' (already scaled by its coefficient)."""
  total = jnp.zeros((), jnp.float32)
  for path, leaf in jax.tree_util.tree_leaves_with_path(aux):
    key = path[-1]
    name = getattr(key, 'key', getattr(key, 'name', ''))
    if isinstance(name, str) and name.endswith('_loss'):
      total = total + jnp.sum(leaf)
  return total


class Experiment:
  """Pure functions for one config; see the module docstring."""

  def __init__(self, config: ml_collections.ConfigDict):
    self.config = config
    self.task = tasks.build_task(config)
    self.optimizer, self.unit_schedule = optim.build_optimizer(config.train)
    abstract = nnx.eval_shape(lambda: self._build_model(jax.random.PRNGKey(0)))
    self.graphdef, _ = nnx.split(abstract)
    self.counts = models.model_counts(config, self.task)

  def _build_model(self, key):
    return models.build_model(self.config, self.task, nnx.Rngs(params=key))

  def init(self, seed: jax.Array | int) -> dict[str, PyTree]:
    """Run state from a seed: model init, task data and the step RNG all derive from it."""
    key = jax.random.PRNGKey(seed)
    _, params = nnx.split(self._build_model(jax.random.fold_in(key, 0)))
    return {
        'params': params,
        'opt_state': self.optimizer.init(nnx.state(nnx.merge(self.graphdef, params), nnx.Param)),
        'data': self.task.init_data(jax.random.fold_in(key, 1)),
        'rng': jax.random.fold_in(key, 2),
        'step': jnp.zeros((), jnp.int32),
    }

  def train_step(self, params, opt_state, batch, rng):
    """One optimizer step. `params` is the model's whole nnx.State; gradients flow to nnx.Param."""
    weights, rest = nnx.split_state(params, nnx.Param, ...)

    def loss_fn(weights):
      model = nnx.merge(self.graphdef, weights, rest)
      outputs, aux = model.apply(batch['inputs'], rng=rng)
      task_loss, task_metrics = self.task.loss(outputs, batch)
      return task_loss + _sum_aux_losses(aux), (task_loss, task_metrics, aux)

    (total, (task_loss, task_metrics, aux)), grads = jax.value_and_grad(loss_fn, has_aux=True)(weights)
    updates, opt_state = self.optimizer.update(grads, opt_state, weights)
    weights = optax.apply_updates(weights, updates)
    model = nnx.merge(self.graphdef, weights, rest)
    model.after_step(aux)  # non-gradient state (e.g. MoE routing biases)
    _, params = nnx.split(model)
    count = opt_state.count - 1
    metrics = {
        'loss': task_loss, 'total_loss': total,
        'learning_rate': opt_state.hyperparams['learning_rate'] * self.unit_schedule(count),
        'grad_norm': tree_norm(grads), 'param_norm': tree_norm(weights),
        'update_norm': tree_norm(updates), **task_metrics, 'aux': aux,
    }
    return params, opt_state, metrics

  def train_chunk(self, state, num_steps: int):
    """`num_steps` steps under lax.scan; metrics averaged over the chunk, plus the first bad step."""

    def body(state, _):
      step_rng = jax.random.fold_in(state['rng'], state['step'])
      batch_rng, step_rng = jax.random.split(step_rng)
      batch = self.task.sample_batch(state['data'], batch_rng)
      params, opt_state, metrics = self.train_step(state['params'], state['opt_state'], batch, step_rng)
      return {**state, 'params': params, 'opt_state': opt_state, 'step': state['step'] + 1}, metrics

    start = state['step']
    state, metrics = jax.lax.scan(body, state, None, length=num_steps)
    bad = ~jnp.isfinite(metrics['total_loss'])
    out = jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)
    out['first_nonfinite_step'] = jnp.where(jnp.any(bad), start + 1 + jnp.argmax(bad), -1)
    return state, out

  def evaluate(self, params, data):
    model = nnx.merge(self.graphdef, params)
    return self.task.evaluate(lambda x: model.apply(x)[0], data)


# --------------------------------------------------------------------------- the run loop

def _scalars(tree: PyTree, prefix: str = '') -> dict[str, Any]:
  """Flatten metrics to {'a/b': float or list} for JSON and TensorBoard."""
  out = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    name = '/'.join(str(getattr(k, 'key', getattr(k, 'name', getattr(k, 'idx', k)))) for k in path)
    value = np.asarray(leaf)
    out[prefix + name] = value.item() if value.ndim == 0 else value.tolist()
  return out


def log_line(step: int, total_steps: int, m: dict[str, Any]) -> str:
  """The console line for one logged chunk (m: flattened metrics with steps_per_s)."""
  return (f'step {step:>7}/{total_steps} | loss {m["loss"]:.4e} | lr {m["learning_rate"]:.2e} | '
          f'grad_norm {m["grad_norm"]:.3e} | {m["steps_per_s"]:,.0f} steps/s | '
          f'eta {(total_steps - step) / max(m["steps_per_s"], 1e-9):.0f}s')


def run_summary(counts: dict[str, Any], last: dict[str, Any], *, step: int, diverged_at: int,
                evals: dict[str, Any] | None, compile_time_s: float | None,
                wall_time_s: float) -> dict[str, Any]:
  """summary.json of a finished run (train_and_evaluate and sweeps both write this schema).

  `last`: the last logged metrics; `diverged_at` >= 0 is the first non-finite step
  (then `evals` is None); `step` the step reached otherwise.
  """
  summary = {**counts, 'wall_time_s': wall_time_s, 'compile_time_s': compile_time_s,
             'steps_per_s': last.get('steps_per_s'), 'final_loss': last.get('loss')}
  if diverged_at >= 0:
    summary.update(status='diverged', diverged_step=diverged_at, step=diverged_at, eval_loss=None)
  else:
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
  return {'bits_per_param': (bits / np.float32(counts['num_params'])).item(),
          'bits_per_ffn_param': (bits / np.float32(ffn)).item() if ffn else float('nan')}


def _print_counts(counts: dict[str, Any]) -> None:
  print('model: ' + ', '.join(f'{k}={v:,}' if isinstance(v, int) else f'{k}={v}'
                              for k, v in counts.items()), flush=True)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Train one config in `workdir` (resuming if it holds a checkpoint) and write its outputs."""
  validation.validate(config)
  os.makedirs(workdir, exist_ok=True)
  resolved = config.to_dict()
  io_lib.check_or_write_config(workdir, resolved)
  summary_path = os.path.join(workdir, 'summary.json')
  previous = io_lib.read_json(summary_path)
  if previous and previous.get('status') in ('completed', 'diverged'):
    print(f'{workdir}: already {previous["status"]}; delete the workdir to rerun.', flush=True)
    return previous

  start_time = time.time()
  summary: dict[str, Any] = {'status': 'running'}
  try:
    summary = _train(config, workdir)
  except Exception as e:  # recorded, then re-raised: a crash is never a silent success
    summary.update(status='failed', error=f'{type(e).__name__}: {e}',
                   wall_time_s=time.time() - start_time)
    io_lib.write_json(summary_path, summary)
    raise
  io_lib.write_json(summary_path, summary)
  print('summary: ' + json.dumps(io_lib.json_safe(summary)), flush=True)
  return summary


def _train(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """The loop of `train_and_evaluate`; returns the summary."""
  tr = config.train
  exp = Experiment(config)
  _print_counts(exp.counts)
  start_time = time.time()
  state = jax.jit(exp.init)(tr.seed)
  ckpt = io_lib.Checkpointer(os.path.join(workdir, 'checkpoints'))
  state, wall_before = ckpt.restore_latest(state)
  step = int(state['step'])
  if step:
    print(f'resumed from checkpoint at step {step}', flush=True)
  metrics_log = io_lib.MetricsLog(workdir, resume_step=step)

  chunk_fn = jax.jit(exp.train_chunk, static_argnums=1, donate_argnums=0)
  last: dict[str, Any] = {}
  pending = None  # (step, metrics on device): fetched after the next chunk is dispatched
  t_last, step_last = time.time(), step
  compile_time = None

  def flush(pending):
    nonlocal t_last, step_last, last
    at, metrics = pending
    m = _scalars(jax.device_get(metrics))
    now = time.time()
    m['steps_per_s'] = (at - step_last) / max(now - t_last, 1e-9)
    t_last, step_last = now, at
    last = m
    metrics_log.write(at, m)
    print(log_line(at, tr.steps, m), flush=True)
    return m['first_nonfinite_step']

  diverged_at = -1
  while step < tr.steps:
    n = min(tr.log_every, tr.steps - step)
    t0 = time.time()
    state, metrics = chunk_fn(state, n)
    if compile_time is None:
      jax.block_until_ready(state['step'])
      compile_time = time.time() - t0
      t_last = time.time()
    prev_step, step = step, step + n
    if pending is not None:
      diverged_at = flush(pending)
      if diverged_at >= 0:
        break
    pending = (step, metrics)
    # Save on crossing a multiple of checkpoint_every (the final state is saved below).
    if tr.checkpoint_every > 0 and step < tr.steps and step // tr.checkpoint_every > prev_step // tr.checkpoint_every:
      ckpt.save(step, state, wall_before + time.time() - start_time)
  if pending is not None and diverged_at < 0:
    diverged_at = flush(pending)

  evals = None
  if diverged_at >= 0:
    print(f'diverged: non-finite loss at step {diverged_at}', flush=True)
  else:
    ckpt.save(step, state, wall_before + time.time() - start_time)
    evals = _scalars(jax.device_get(jax.jit(exp.evaluate)(state['params'], state['data'])))
  summary = run_summary(exp.counts, last, step=step, diverged_at=diverged_at, evals=evals,
                        compile_time_s=compile_time, wall_time_s=wall_before + time.time() - start_time)
  metrics_log.close()
  return summary
