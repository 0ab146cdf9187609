"""Optimizers and learning-rate schedules by name (config keys `train.optimizer`, `train.schedule`).

`build_optimizer(train_cfg)` returns a maker of the optax transformation with the peak
learning rate and the weight decay held in its state (`optax.inject_hyperparams`: the maker's
arguments are the values its `init` writes there, the one place they enter a state), so runs that
differ in them share one vmapped program, and the unit-peak schedule the learning rate multiplies.
`validate(train_cfg)` checks the keys this module reads.
"""

from collections.abc import Callable
import math

import jax.numpy as jnp
import ml_collections
import optax

from ffn_research import config as config_lib

# train.optimizer name -> (learning-rate schedule, weight decay, train config) -> optax transformation.
OPTIMIZERS: dict[str, Callable[..., optax.GradientTransformation]] = {
  'sgd': lambda lr, wd, cfg: optax.sgd(lr, momentum=cfg.momentum or None),  # momentum 0 = plain SGD
  'adam': lambda lr, wd, cfg: optax.adam(lr),
  'adamw': lambda lr, wd, cfg: optax.adamw(lr, weight_decay=wd),  # decoupled weight decay
  'lion': lambda lr, wd, cfg: optax.lion(lr, weight_decay=wd),
}

# Train keys held in the optimizer state (optax.inject_hyperparams) rather than compiled in:
# runs that differ only in these share one vmapped program (identity.PER_RUN_KEYS).
HYPERPARAMS = ('learning_rate', 'weight_decay')


def _constant(cfg):
  return (
    optax.linear_schedule(0.0, 1.0, max(cfg.warmup_steps, 1))
    if cfg.warmup_steps
    else (lambda count: jnp.ones_like(count, jnp.float32))
  )


def _cosine(cfg):
  return optax.warmup_cosine_decay_schedule(
    0.0 if cfg.warmup_steps else 1.0, 1.0, cfg.warmup_steps, max(cfg.steps, cfg.warmup_steps + 1)
  )


# Unit-peak schedules (multiplied by train.learning_rate).
SCHEDULES: dict[str, Callable[[ml_collections.ConfigDict], optax.Schedule]] = {
  'constant': _constant,  # linear warmup, then constant
  'cosine': _cosine,  # linear warmup, then cosine decay to 0 at train.steps
}


def validate(train_cfg: ml_collections.ConfigDict) -> None:
  """ConfigError for bad optimizer, schedule and their hyperparameters in the train section."""
  tr = train_cfg
  config_lib.positive_float('train.learning_rate', tr.learning_rate)
  config_lib.one_of('train.optimizer', tr.optimizer, OPTIMIZERS)
  config_lib.one_of('train.schedule', tr.schedule, SCHEDULES)
  config_lib.check(
    isinstance(tr.warmup_steps, int) and tr.warmup_steps >= 0,
    f'train.warmup_steps={tr.warmup_steps!r} must be a non-negative integer',
  )
  config_lib.check(
    isinstance(tr.weight_decay, (int, float)) and tr.weight_decay >= 0,
    f'train.weight_decay={tr.weight_decay!r} must be >= 0',
  )
  config_lib.check(
    isinstance(tr.momentum, (int, float)) and 0 <= tr.momentum < 1, f'train.momentum={tr.momentum!r} must be in [0, 1)'
  )
  config_lib.check(
    isinstance(tr.grad_clip, (int, float)) and math.isfinite(tr.grad_clip),
    f'train.grad_clip={tr.grad_clip!r} must be a number (<= 0 disables clipping)',
  )


def build_optimizer(
  train_cfg: ml_collections.ConfigDict,
  lr_multipliers: dict[str, float] | None = None,
  lr_labels: Callable | None = None,
) -> tuple[Callable[..., optax.GradientTransformation], optax.Schedule]:
  """(maker, unit): `maker(learning_rate=..., weight_decay=...)` is the optax optimizer with HYPERPARAMS in its
  state, holding the given values from `init` on (sweeps vmap them; `update` reads the state, never the maker's
  arguments); `unit` is the unit-peak schedule the learning rate multiplies.

  `lr_multipliers` {label: factor} with `lr_labels` (parameters -> label tree): per-parameter
  learning-rate factors (μP, models/mup.py), an optax.multi_transform of optax.scale after the
  optimizer, so each scales the whole update (decoupled weight decay included). None: no such stage.
  """
  unit = SCHEDULES[train_cfg.schedule](train_cfg)

  def make(learning_rate, weight_decay):
    opt = OPTIMIZERS[train_cfg.optimizer](lambda count: learning_rate * unit(count), weight_decay, train_cfg)
    if train_cfg.grad_clip > 0:
      opt = optax.chain(optax.clip_by_global_norm(train_cfg.grad_clip), opt)
    if lr_multipliers is not None:
      opt = optax.chain(opt, optax.multi_transform({k: optax.scale(v) for k, v in lr_multipliers.items()}, lr_labels))
    return opt

  return optax.inject_hyperparams(make), unit
