"""Program identity (ffn_research/identity.py): every key's role, and the program keys the sweep's grouping and
both program caches take from `program_key`."""

import json

from ffn_research import config as config_lib
from ffn_research import identity
from ffn_research import sweep
from ffn_research.config import default_config


def _config(**overrides):
  c = default_config()
  for k, v in overrides.items():
    config_lib.set_path(c, k, v)
  return c


def test_every_key_has_one_role():
  flat = config_lib.flat_keys(default_config())
  roles = {k: identity.role(k) for k in flat}
  assert set(roles.values()) <= set(identity.ROLES)
  assert [k for k, r in roles.items() if r == identity.TRACED] == [k for k in flat if k in identity.TRACED_KEYS]
  assert [k for k, r in roles.items() if r == identity.SEED] == ['train.seed']
  assert sorted(k for k, r in roles.items() if r == identity.SCHEDULE) == ['train.steps', 'train.warmup_steps']
  assert sorted(k for k, r in roles.items() if r == identity.BOOKKEEPING) == [
    'train.checkpoint_every',
    'train.eval_every',
    'train.log_every',
  ]
  assert all(r == identity.PLACEMENT for k, r in roles.items() if k.startswith('parallel.'))
  assert roles['model.d_ff'] == roles['train.batch_size'] == identity.STRUCTURE


def test_program_key_ignores_what_it_is_told_and_keeps_paths_on_or_off():
  base = _config()
  key = lambda c, **kw: identity.program_key(c, **kw)  # noqa: E731
  lr, wd = _config(**{'train.learning_rate': 0.5}), _config(**{'train.weight_decay': 0.1})
  assert key(base) != key(lr)  # nothing ignored: every key counts
  assert key(base, ignore=('train.learning_rate',)) == key(lr, ignore=('train.learning_rate',))
  assert key(base, on_off=('train.weight_decay',)) != key(wd, on_off=('train.weight_decay',))  # 0 vs > 0
  wd2 = _config(**{'train.weight_decay': 0.3})
  assert key(wd, on_off=('train.weight_decay',)) == key(wd2, on_off=('train.weight_decay',))  # both on
  assert json.loads(key(wd, on_off=('train.weight_decay',)))['train.weight_decay'] is True
  wide = _config(**{'model.d_ff': 4 * base.model.d_ff})
  assert key(base) != key(wide) and key(base, pad_d_ff=True) == key(wide, pad_d_ff=True)
  moe_ = _config(**{'model.moe.num_experts': 4})
  moe_wide = _config(**{'model.moe.num_experts': 4, 'model.d_ff': 4 * base.model.d_ff})
  assert key(moe_, pad_d_ff=True) != key(moe_wide, pad_d_ff=True)  # MoE experts are not padded


def test_group_key_is_program_key_over_the_per_run_keys():
  base = _config()
  per_run = _config(
    **{'train.seed': 3, 'train.learning_rate': 0.5, 'train.weight_decay': 0.1, 'model.dropout_rate': 0.2}
  )
  assert sweep.group_key(base) == sweep.group_key(per_run)
  assert sweep.group_key(base) != sweep.group_key(_config(**{'train.steps': base.train.steps + 1}))
  assert sweep.group_key(base) == identity.program_key(base, ignore=identity.PER_RUN_KEYS, pad_d_ff=True)


def test_free_on_resume():
  dense, moe_ = _config(), _config(**{'model.moe.num_experts': 4})
  assert identity.free_on_resume(dense, lone=True) == ('parallel.', 'model.moe.')
  assert identity.free_on_resume(dense, lone=False) == ('model.moe.',)  # a sweep places its runs itself
  assert identity.free_on_resume(moe_, lone=True) == ('parallel.',)  # an MoE reads its section
  assert identity.free_on_resume(moe_, lone=False) == ()
  assert all(identity.role(k) == identity.PLACEMENT for k in config_lib.flat_keys(dense) if k.startswith('parallel.'))


def test_ffn_kinds_answer_what_the_programs_ask():
  from ffn_research import models
  from ffn_research import programs

  dense = _config()
  moe_ = _config(**{'model.moe.num_experts': 4})
  soft = _config(**{'model.moe.num_experts': 4, 'model.moe.router': 'soft'})
  assert [models.ffn_kind(c.model).name for c in (dense, moe_, soft)] == ['dense', 'moe', 'soft_moe']
  assert programs.pads_d_ff(dense.model) and not programs.pads_d_ff(moe_.model)
  assert not programs.pads_d_ff(_config(**{'model.dropout_rate': 0.1}).model)  # a dense kind pads, dropout not
  assert [models.ffn_kind(c.model).flat_optimizer for c in (dense, moe_, soft)] == [True, False, False]


def test_each_ffn_kind_validates_what_it_reads_and_a_dense_ffn_ignores_the_routed_settings():
  """A dense FFN reads none of the routed MoE's settings (top-k above the experts, a mup granularity that does not
  divide the base width): only the section's types are checked; the MoE kind checks them, μP rule included."""
  import pytest

  from ffn_research import models
  from ffn_research.config import ConfigError
  from ffn_research.models import moe_config

  odd = {'model.moe.top_k': 8, 'model.moe.granularity': 3, 'model.d_ff': 96}
  models.validate(_config(**odd).model)  # dense: nothing it reads is wrong
  assert models.ffn_kind(_config(**{'model.moe.num_experts': 4}).model).validate is moe_config.validate_routed
  with pytest.raises(ConfigError, match=r'model.moe.top_k=8 must be <= model.moe.num_experts=4'):
    models.validate(_config(**odd, **{'model.moe.num_experts': 4}).model)
  mup = {'model.parametrization': 'mup', 'model.mup_base_d_ff': 64, 'model.moe.granularity': 3, 'model.d_ff': 96}
  with pytest.raises(ConfigError, match=r'granularity=3 must divide the effective base d_ff 64'):
    models.validate(_config(**mup, **{'model.moe.num_experts': 4}).model)
  models.validate(_config(**mup).model)  # the same μP settings on a dense FFN: nothing to divide
  with pytest.raises(ConfigError, match=r'model.moe.top_k'):  # the section's types, whatever the kind
    models.validate(_config(**{'model.moe.top_k': 0}).model)
