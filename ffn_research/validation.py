"""Validation of a whole config: the schema, then each registry's own section, then the
checks that span sections. Called before anything compiles (train, sweeps, entry points).

Layering: `config` (schema, ConfigError, check helpers) is a leaf; the registries
(`models` with activations, inits, routers and dispatches; `tasks`; `optim` with
optimizers and schedules) each validate their own keys with its helpers; this
module composes them and sits above all of them.
"""

import math

import ml_collections

from ffn_research import config as config_lib
from ffn_research import models
from ffn_research import optim
from ffn_research import parallel
from ffn_research import tasks


def validate(config: ml_collections.ConfigDict) -> None:
  """Raise ConfigError (one line, naming the key) for anything invalid."""
  config_lib.check_schema(config)
  m, t, tr = config.model, config.task, config.train
  models.validate(m)
  tasks.validate(config)
  sequence_archs = ', '.join(models.SEQUENCE_ARCHS)
  if t.name in tasks.SEQUENCE_TASKS:
    config_lib.check(
      m.arch in models.SEQUENCE_ARCHS,
      f'model.arch={m.arch!r} cannot read tokens; task.name={t.name!r} needs one of: {sequence_archs}',
    )
  else:
    config_lib.check(
      m.arch not in models.SEQUENCE_ARCHS,
      f'model.arch={m.arch!r} needs a sequence task; allowed: {", ".join(tasks.SEQUENCE_TASKS)}',
    )
  _validate_run(tr)
  optim.validate(tr)
  models.mup.validate_optimizer(config)
  parallel.validate(config)
  models.validate_expert_split(m, config.parallel.expert)


def check_seed(seed: object) -> None:
  """The one check that reads train.seed (a sweep validates runs differing only in it once, and this per run)."""
  config_lib.check(
    isinstance(seed, int) and not isinstance(seed, bool) and -(2**31) <= seed < 2**31,
    f'train.seed={seed!r} must be an integer in [-2**31, 2**31) (the PRNG seed is int32)',
  )


def _validate_run(train_cfg: ml_collections.ConfigDict) -> None:
  """The train keys the loop reads (optimizer keys are optim's)."""
  tr = train_cfg
  config_lib.positive_int('train.steps', tr.steps)
  config_lib.positive_int('train.batch_size', tr.batch_size)
  config_lib.positive_int('train.log_every', tr.log_every)
  check_seed(tr.seed)
  config_lib.check(
    isinstance(tr.eval_every, int) and tr.eval_every >= 0,
    f'train.eval_every={tr.eval_every!r} must be an integer >= 0 (0: evaluate at the end only)',
  )
  config_lib.check(
    isinstance(tr.blowup_factor, (int, float))
    and not isinstance(tr.blowup_factor, bool)
    and (tr.blowup_factor == 0 or 1 <= tr.blowup_factor < math.inf),
    f'train.blowup_factor={tr.blowup_factor!r} must be 0 (rule off) or a number >= 1',
  )
  config_lib.positive_int('train.blowup_patience', tr.blowup_patience)
