"""Validation of a whole config: the schema, then each registry's own section, then the
checks that span sections. Called before anything compiles (train, sweeps, entry points).

Layering: `config` (schema, ConfigError, check helpers) is a leaf; the registries
(`models` with activations, inits, routers and dispatches; `tasks`; `optim` with
optimizers and schedules) each validate their own keys with its helpers; this
module composes them and sits above all of them.
"""

import ml_collections

from ffn_research import config as config_lib
from ffn_research import models, optim, tasks


def validate(config: ml_collections.ConfigDict) -> None:
  """Raise ConfigError (one line, naming the key) for anything invalid."""
  config_lib.check_schema(config)
  m, t, tr = config.model, config.task, config.train
  models.validate(m)
  tasks.validate(config)
  sequence_archs = ', '.join(models.SEQUENCE_ARCHS)
  if t.name in tasks.sequence.TASKS:
    config_lib.check(m.arch in models.SEQUENCE_ARCHS,
                     f'model.arch={m.arch!r} cannot read tokens; task.name={t.name!r} needs one of: {sequence_archs}')
  else:
    config_lib.check(m.arch not in models.SEQUENCE_ARCHS,
                     f'model.arch={m.arch!r} needs a sequence task; allowed: {", ".join(tasks.sequence.TASKS)}')
  _validate_run(tr)
  optim.validate(tr)


def _validate_run(train_cfg: ml_collections.ConfigDict) -> None:
  """The train keys the loop reads (optimizer keys are optim's)."""
  tr = train_cfg
  config_lib.positive_int('train.steps', tr.steps)
  config_lib.positive_int('train.batch_size', tr.batch_size)
  config_lib.positive_int('train.log_every', tr.log_every)
  config_lib.check(isinstance(tr.seed, int), f'train.seed={tr.seed!r} must be an integer')
