"""Training: a pure, jit-compiled train step and the run loop around it.

`Experiment(config)` holds everything a config fixes (model structure, task,
optimizer from `optim`) and exposes pure functions over pytrees:

  init(seed)                                  -> run state (params, opt_state, data, rng, step)
  train_step(params, opt_state, batch, rng)   -> (params, opt_state, metrics)
  train_chunk(state, num_steps)               -> (state, metrics): lax.scan over steps
  evaluate(params, data)                      -> eval metrics

so a sweep can `vmap` them over runs that share shapes. The run loop around them
(logging, checkpoints, resume, summaries) is ffn_research.loop.
"""

from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import nnx

from ffn_research import models, optim, parallel, tasks

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

  def __init__(self, config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh | None = None):
    self.config = config
    self.mesh = mesh  # parallel.build_mesh: batch over 'data', MoE experts over 'expert'; None = one device
    self.task = tasks.build_task(config)
    self.optimizer, self.unit_schedule = optim.build_optimizer(config.train)
    abstract = nnx.eval_shape(lambda: self._build_model(jax.random.PRNGKey(0)))
    self.graphdef, _ = nnx.split(abstract)
    self.counts = models.model_counts(config, self.task)

  def _build_model(self, key):
    return models.build_model(self.config, self.task, nnx.Rngs(params=key), parallel.expert_mesh(self.mesh))

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
      batch = parallel.shard_batch(self.task.sample_batch(state['data'], batch_rng), self.mesh)
      params, opt_state, metrics = self.train_step(state['params'], state['opt_state'], batch, step_rng)
      return {**state, 'params': params, 'opt_state': opt_state, 'step': state['step'] + 1}, metrics

    start = state['step']
    state, metrics = jax.lax.scan(body, state, None, length=num_steps)
    bad = ~jnp.isfinite(metrics['total_loss'])
    out = jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)
    out['first_step_loss'] = metrics['loss'][0]  # the blow-up rule's reference (ffn_research.loop)
    out['first_nonfinite_step'] = jnp.where(jnp.any(bad), start + 1 + jnp.argmax(bad), -1)
    return state, out

  def evaluate(self, params, data):
    model = nnx.merge(self.graphdef, params)
    return self.task.evaluate(lambda x: model.apply(x)[0], data)




def __getattr__(name: str):
  """`train.train_and_evaluate` and friends moved to ffn_research.loop (kept for old callers)."""
  if name in ('train_and_evaluate', 'run_summary', 'log_line'):
    from ffn_research import loop  # pylint: disable=g-import-not-at-top  # loop imports this module
    return getattr(loop, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
