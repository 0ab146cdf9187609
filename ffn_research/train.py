"""Training's pure functions: the train step, a chunk of steps and the evaluation of one config.

`Experiment(config)` holds everything a config fixes (model structure, task,
optimizer from `optim`) and exposes pure functions over pytrees:

  init(seed, traced=None, d_ff=None)                    -> run state (params, opt_state, data, rng, step)
  task_data(seed, traced=None)                          -> the run's task data (init(seed)['data'])
  train_step(params, opt_state, batch, rng, traced=None) -> (params, opt_state, metrics)
  train_chunk(state, num_steps, traced=None)          -> (state, metrics): lax.scan over steps
  evaluate(params, data)                               -> eval metrics

so a sweep can `vmap` them over runs that share shapes. `traced` holds each of identity.TRACED_KEYS
as a traced float32 value; None means the config's values. They are compiled in
ffn_research.programs and driven by the run loop (logging, checkpoints, resume) in ffn_research.loop.
"""

from typing import Any

from flax import nnx
import jax
import jax.flatten_util
import jax.numpy as jnp
import ml_collections
import optax

from ffn_research import config as config_lib
from ffn_research import identity
from ffn_research import models
from ffn_research import optim
from ffn_research import parallel
from ffn_research import tasks

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


def traced_values(config: ml_collections.ConfigDict) -> dict[str, float]:
  """{key: the config's value} for identity.TRACED_KEYS."""
  return {k: float(config_lib.get_path(config, k)) for k in identity.TRACED_KEYS}


class Experiment:
  """Pure functions for one config; see the module docstring."""

  def __init__(self, config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh | None = None):
    self.config = config
    self.mesh = mesh  # parallel.build_mesh: batch over 'data', MoE experts over 'expert'; None = one device
    self.task = tasks.build_task(config)
    self._make_optimizer, self.unit_schedule = optim.build_optimizer(
      config.train,
      *(
        (models.mup.lr_multipliers(config.model), models.mup.lr_labels(config.model))
        if models.mup.is_mup(config.model)
        else ()
      ),
    )
    # update() reads the hyperparameters from the state; init() writes a run's own (its traced values) there.
    self.optimizer = self._make_optimizer(**{k: config.train[k] for k in optim.HYPERPARAMS})
    abstract = nnx.eval_shape(lambda: self._build_model(jax.random.PRNGKey(0)))
    self.graphdef, self._hyper = nnx.split(abstract, models.Hyper, ...)[:2]
    self.counts = models.model_counts(config, self.task)
    # Sequence tasks: logits only at the positions the loss can weigh (tasks.sequence `scored`).
    scored = getattr(self.task, 'scored', None)
    self.apply_kwargs = {} if scored is None else {'positions': scored}

  def _build_model(self, key, d_ff=None):
    return models.build_model(
      self.config, self.task, nnx.Rngs(params=key), parallel.expert_mesh(self.mesh), d_ff_true=d_ff
    )

  def _traced(self, traced: dict[str, Any] | None) -> dict[str, Any]:
    return traced_values(self.config) if traced is None else traced

  def merge(self, params, traced: dict[str, Any] | None = None) -> nnx.Module:
    """The model from `params` (a run state's, or a whole nnx.state) with `traced` in its Hyper variables."""
    params = nnx.filter_state(params, nnx.Not(models.Hyper))
    return nnx.merge(self.graphdef, params, models.hyper_state(self._hyper, self._traced(traced)))

  def init(
    self, seed: jax.Array | int, traced: dict[str, Any] | None = None, d_ff: jax.Array | int | None = None
  ) -> dict[str, PyTree]:
    """Run state from a seed: model init, task data and the step RNG all derive from it.

    The optimizer's hyperparameters and the task's traced keys come from `traced`; the model's
    Hyper variables are not part of the state (train_step takes them from `traced`).
    `d_ff`: the run's true FFN width when this Experiment's config is a padded program's
    (d_ff padding: ffn_research.programs): units past it start at 0 and stay 0; None: the config's width.
    """
    traced = self._traced(traced)
    key = jax.random.PRNGKey(seed)
    params = nnx.split(self._build_model(jax.random.fold_in(key, 0), d_ff), models.Hyper, ...)[
      -1
    ]  # (graphdef, Hyper, rest)
    optimizer = self._make_optimizer(**{k: traced[f'train.{k}'] for k in optim.HYPERPARAMS})
    opt_state = optimizer.init(self._flat(nnx.split_state(params, nnx.Param, ...)[0])[0])
    return {
      'params': params,
      'opt_state': opt_state,
      'data': self.task_data(seed, traced),
      'rng': jax.random.fold_in(key, 2),
      'step': jnp.zeros((), jnp.int32),
    }

  def task_data(self, seed: jax.Array | int, traced: dict[str, Any] | None = None) -> PyTree:
    """The task's data (datasets, teachers) of the run with this seed: `init(seed)['data']`, without
    building the model or the optimizer state (e.g. the facts of a loaded run, `load_run`)."""
    traced = self._traced(traced)
    task_traced = {k: traced[f'task.{k}'] for k in getattr(self.task, 'traced', ())}
    return self.task.init_data(jax.random.fold_in(jax.random.PRNGKey(seed), 1), **task_traced)

  def _flat(self, weights):
    """(one float32 vector of every nnx.Param, the function that rebuilds the State from it).

    The optimizer and the norms work on this vector: a few kernels instead of a few per
    parameter array (compile time and per-step overhead of small models; docs/sequence.md).
    MoE models keep the tree: their stacked expert weights hold E/k times the parameters a token
    uses, and raveling them and their gradients every step cost about 10% of the step at the
    benchmark's shape (1M parameters; docs/performance.md), more than the kernels it saves. With
    experts split over an 'expert' mesh axis, the tree also lays each expert's Adam moments out
    with its weights (a flat vector would be replicated). Padded d_ff groups are dense, so a run
    and its program always agree on the layout. μP keeps the tree: its learning-rate factors are
    per parameter array (optim.build_optimizer's label tree).
    """
    if (
      not models.ffn_kind(self.config.model).flat_optimizer
      or parallel.expert_mesh(self.mesh) is not None
      or models.mup.is_mup(self.config.model)
    ):
      return weights, lambda w: w
    return jax.flatten_util.ravel_pytree(weights)

  def train_step(self, params, opt_state, batch, rng, traced=None):
    """One optimizer step. `params` is the model's nnx.State (no Hyper); gradients flow to nnx.Param."""
    weights, rest = nnx.split_state(params, nnx.Param, ...)
    weights, unflatten = self._flat(weights)
    hyper = models.hyper_state(self._hyper, self._traced(traced))

    def loss_fn(weights):
      model = nnx.merge(self.graphdef, unflatten(weights), rest, hyper)
      outputs, aux = model.apply(batch['inputs'], rng=rng, **self.apply_kwargs)
      task_loss, task_metrics = self.task.loss(outputs, batch)
      return task_loss + _sum_aux_losses(aux), (task_loss, task_metrics, aux)

    (total, (task_loss, task_metrics, aux)), grads = jax.value_and_grad(loss_fn, has_aux=True)(weights)
    updates, opt_state = self.optimizer.update(grads, opt_state, weights)
    weights = optax.apply_updates(weights, updates)
    model = nnx.merge(self.graphdef, unflatten(weights), rest, hyper)
    model.after_step(aux)  # non-gradient state (e.g. MoE routing biases)
    _, _, params = nnx.split(model, models.Hyper, ...)
    count = opt_state.count - 1
    metrics = {
      'loss': task_loss,
      'total_loss': total,
      'learning_rate': opt_state.hyperparams['learning_rate'] * self.unit_schedule(count),
      'grad_norm': tree_norm(grads),
      'param_norm': tree_norm(weights),
      'update_norm': tree_norm(updates),
      **task_metrics,
      'aux': aux,
    }
    return params, opt_state, metrics

  def train_chunk(self, state, num_steps: int, traced=None):
    """`num_steps` steps under lax.scan; metrics averaged over the chunk, plus the first bad step."""

    def body(state, _):
      step_rng = jax.random.fold_in(state['rng'], state['step'])
      batch_rng, step_rng = jax.random.split(step_rng)
      batch = parallel.shard_batch(self.task.sample_batch(state['data'], batch_rng), self.mesh)
      params, opt_state, metrics = self.train_step(state['params'], state['opt_state'], batch, step_rng, traced)
      return {**state, 'params': params, 'opt_state': opt_state, 'step': state['step'] + 1}, metrics

    start = state['step']
    state, metrics = jax.lax.scan(body, state, None, length=num_steps)
    bad = ~jnp.isfinite(metrics['total_loss'])
    out = jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)
    out['first_step_loss'] = metrics['loss'][0]  # the blow-up rule's reference (ffn_research.loop)
    out['first_nonfinite_step'] = jnp.where(jnp.any(bad), start + 1 + jnp.argmax(bad), -1)
    return state, out

  def evaluate(self, params, data):
    """Held-out metrics; they depend on no traced scalar (dropout and jitter act in training only)."""
    model = self.merge(params)
    return self.task.evaluate(lambda x: model.apply(x)[0], data)
