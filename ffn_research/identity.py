"""Program identity: what role each config key plays in a compiled program, and a config's program key.

Every flat config key has one role (`role`):

  traced       a per-run float32 value the programs take as an input (TRACED_KEYS: the optimizer's
               hyperparameters, the model's Hyper variables, the task's traced arguments); a value > 0 may
               switch a path on (dropout, jitter), so a compiled program knows which are on
  seed         train.seed: draws the initial parameters and data; a traced input of init
  schedule     the number of steps and of warmup steps: the schedule is a function of the step count, the
               state does not depend on them
  bookkeeping  when the loop logs, checkpoints and evaluates: chunk boundaries, not what a step computes
  placement    parallel.*: where one run's program runs (a resumed single run may move)
  structure    everything else: a different value compiles a different program

`program_key` is the one key builder: the sweep's grouping (`sweep.group_key`), both program caches
(`sweep._programs`, `loop.restore_program`) ask it, each saying which roles vary inside one program; and
`free_on_resume` says which keys a resumed run may change.
"""

from collections.abc import Collection
import json

import ml_collections

from ffn_research import config as config_lib
from ffn_research import io as io_lib
from ffn_research import models
from ffn_research import optim
from ffn_research import tasks

TRACED, SEED, SCHEDULE, BOOKKEEPING, PLACEMENT, STRUCTURE = (
  'traced',
  'seed',
  'schedule',
  'bookkeeping',
  'placement',
  'structure',
)
ROLES = (TRACED, SEED, SCHEDULE, BOOKKEEPING, PLACEMENT, STRUCTURE)

# The optimizer's HYPERPARAMS live in opt_state.hyperparams, the model's in ffn.Hyper variables, the task's are
# init_data arguments: runs that differ only in these (and the seed) share one vmapped program.
TRACED_KEYS = (*(f'train.{k}' for k in optim.HYPERPARAMS), *models.TRACED_KEYS, *tasks.TRACED_KEYS)
SEED_KEY = 'train.seed'
PER_RUN_KEYS = (SEED_KEY, *TRACED_KEYS)  # what a sweep vmaps over: one value per run of a group
_SCHEDULE = ('train.steps', 'train.warmup_steps')
_BOOKKEEPING = ('train.log_every', 'train.checkpoint_every', 'train.eval_every')
_PLACEMENT = 'parallel.'


def role(key: str) -> str:
  """The role of a flat config key (module docstring)."""
  if key in TRACED_KEYS:
    return TRACED
  if key == SEED_KEY:
    return SEED
  if key in _SCHEDULE:
    return SCHEDULE
  if key in _BOOKKEEPING:
    return BOOKKEEPING
  if key.startswith(_PLACEMENT):
    return PLACEMENT
  return STRUCTURE


def keys_with(roles: Collection[str], config: ml_collections.ConfigDict) -> tuple[str, ...]:
  """The flat keys of `config` whose role is in `roles`."""
  return tuple(k for k in config_lib.flat_keys(config) if role(k) in roles)


def program_key(
  config: ml_collections.ConfigDict,
  *,
  ignore: Collection[str] = (),
  on_off: Collection[str] = (),
  pad_d_ff: bool = False,
) -> str:
  """Equal for configs one compiled program serves: the keys in `ignore` may differ freely, those in `on_off`
  only in their values > 0 (the paths they switch on stay the same), and with `pad_d_ff` a dense FFN's d_ff too
  (an FFN kind that pads: d_ff padding, ffn_research.programs); every other key must be equal."""
  flat = config_lib.flat_keys(config)
  for key in ignore:
    flat[key] = None
  for key in on_off:
    if key not in ignore:
      flat[key] = bool(flat[key] > 0)
  if pad_d_ff and models.ffn_kind(config.model).pads:
    flat['model.d_ff'] = None
  return json.dumps(io_lib.json_safe(flat), sort_keys=True)


def free_on_resume(config: ml_collections.ConfigDict, *, lone: bool) -> tuple[str, ...]:
  """Prefixes of the keys a resumed run may change (its config.json then records the new values): placement for
  a lone run (it may resume on another mesh; a sweep places its runs itself), and every model.moe key for a dense
  FFN, which reads none of them (e.g. a default that changed since the run started)."""
  free = (_PLACEMENT,) if lone else ()
  return free + models.ffn_kind(config.model).unread
