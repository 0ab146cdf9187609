"""Bad input fails before compiling, with one line naming the key; shipped configs are valid."""

import glob
import os
import subprocess
import sys

import pytest

from ffn_research import config as config_lib
from ffn_research import configfile
from ffn_research import validation
from tests.conftest import REPO_ROOT


def load_config_module(path):
  return configfile.load_module(path)


BAD = [
  ('model.activation', 'tanhh', 'model.activation'),
  ('task.name', 'mnist', 'task.name'),
  ('task.function', 'cubic', 'task.function'),
  ('train.optimizer', 'rmsprop', 'train.optimizer'),
  ('train.schedule', 'exponential', 'train.schedule'),
  ('model.init', 'zeros', 'model.init'),
  ('model.d_model', 0, 'model.d_model'),
  ('model.d_ff', 0, 'model.d_ff'),
  ('model.d_ff', -4, 'model.d_ff'),
  ('train.steps', 0, 'train.steps'),
  ('train.batch_size', -1, 'train.batch_size'),
  ('train.learning_rate', 0.0, 'train.learning_rate'),
  ('train.learning_rate', -1e-3, 'train.learning_rate'),
  ('model.dropout_rate', 1.0, 'model.dropout_rate'),
  ('model.dropout_rate', -0.1, 'model.dropout_rate'),
  ('model.d_model', 3, 'model.d_model'),  # the 1-D function task needs d_model 1
  ('train.momentum', 1.0, 'train.momentum'),
  ('train.warmup_steps', -1, 'train.warmup_steps'),
  ('train.log_every', 0, 'train.log_every'),
  ('train.weight_decay', -0.1, 'train.weight_decay'),
]


@pytest.mark.parametrize('key,value,named', BAD)
def test_bad_values_raise_one_line_naming_the_key(key, value, named):
  config = config_lib.default_config()
  section, name = key.rsplit('.', 1)
  config[section][name] = value
  with pytest.raises(config_lib.ConfigError) as e:
    validation.validate(config)
  message = str(e.value)
  assert named in message and '\n' not in message


def test_unknown_names_list_the_allowed_ones():
  config = config_lib.default_config()
  config.model.activation = 'tanhh'
  with pytest.raises(config_lib.ConfigError, match='allowed: relu, gelu, .*swiglu, bilinear'):
    validation.validate(config)


def test_unknown_key():
  config = config_lib.default_config()
  with config.unlocked():
    config.model.widht = 3
  with pytest.raises(config_lib.ConfigError, match="unknown config key 'model.widht'"):
    validation.validate(config)
  assert 'model.foo' in config_lib.unknown_override_error(['x', '--config.model.foo=1'])
  assert config_lib.unknown_override_error(['x', '--config.model.d_ff=8', '--config.model=x']) is None


def test_defaults_are_valid():
  validation.validate(config_lib.default_config())


@pytest.mark.parametrize('path', sorted(glob.glob(os.path.join(REPO_ROOT, 'configs', '*.py'))))
def test_shipped_configs_are_valid(path):
  module = load_config_module(path)
  validation.validate(module.get_config())


REGRESSION = load_config_module(os.path.join(REPO_ROOT, 'configs', 'regression.py'))


@pytest.mark.parametrize('arg', list(REGRESSION.VARIANTS))
def test_regression_variants_are_valid(arg):
  validation.validate(REGRESSION.get_config(arg))


def test_unknown_variant_is_one_line_listing_the_names():
  with pytest.raises(ValueError, match=r"^unknown config argument 'cubic'; allowed: x_squared, sin, .*random_labels$"):
    REGRESSION.get_config('cubic')


@pytest.mark.parametrize(
  'override,named',
  [
    ('--config.model.activation=foo', 'model.activation'),
    ('--config.model.foo=1', 'model.foo'),
    ('--config.train.steps=0', 'train.steps'),
    ('--config.model.dropout_rate=1.5', 'model.dropout_rate'),
  ],
)
def test_cli_bad_input_exits_nonzero_without_traceback(tmp_path, override, named):
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=configs/regression.py',
      f'--workdir={tmp_path}/run',
      override,
    ],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode != 0
  assert 'Traceback' not in proc.stderr
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and named in lines[0], proc.stderr
  assert not os.path.exists(tmp_path / 'run' / 'summary.json')  # nothing ran
