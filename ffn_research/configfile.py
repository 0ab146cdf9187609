"""Load a config file by 'path[:arg]' (the one loader every entry point and test uses).

A config file is Python defining `get_config(arg)` (and, for sweeps, `get_sweep(arg)`);
anything wrong with it (missing, a syntax error, no get_config, an argument it rejects)
is a ConfigError whose one line names the file and what is allowed.
"""

import importlib.util
import os
import sys
import types
from typing import Any

import ml_collections
from ml_collections import config_flags

from ffn_research.config import ConfigError


def split_spec(spec: str) -> tuple[str, str | None]:
  """'configs/x.py:arg' -> ('configs/x.py', 'arg'); no ':arg' -> (path, None)."""
  path, sep, arg = spec.partition('.py:')
  path = path + '.py' if sep or not spec.endswith('.py') else spec
  return path, (arg if sep else None)


def load_module(path: str) -> types.ModuleType:
  """Execute a config file (once) as a fresh module."""
  if not os.path.isfile(path):
    raise ConfigError(f'config file {path} not found' + (' (it is a folder)' if os.path.isdir(path) else ''))
  name = 'ffn_config_' + ''.join(c if c.isalnum() else '_' for c in os.path.abspath(path))
  module_spec = importlib.util.spec_from_file_location(name, path)
  if module_spec is None or module_spec.loader is None:
    raise ConfigError(f'config file {path} cannot be loaded as Python (its name must end in .py)')
  module = importlib.util.module_from_spec(module_spec)
  try:
    module_spec.loader.exec_module(module)
  except SyntaxError as e:
    raise ConfigError(f'config file {path}:{e.lineno}: syntax error: {e.msg}') from None
  except Exception as e:
    raise ConfigError(f'config file {path} failed to load: {type(e).__name__}: {_first_line(e)}') from None
  return module


def _first_line(e: BaseException) -> str:
  return (str(e).splitlines() or [''])[0]


def call(module: types.ModuleType, path: str, function: str, arg: str | None) -> Any:
  """module.function(arg) (or with no argument when arg is None), errors as one line."""
  fn = getattr(module, function, None)
  if not callable(fn):
    raise ConfigError(
      f'config file {path} defines no {function}(arg); a {"sweep " if function == "get_sweep" else ""}config file must'
    )
  try:
    return fn(arg) if arg is not None else fn()
  except Exception as e:  # e.g. an unknown ':variant'
    shown = f'{function}({arg!r})' if arg is not None else f'{function}()'
    raise ConfigError(f'config file {path}: {shown} failed: {type(e).__name__}: {_first_line(e)}') from None


def get_config(spec: str, module: types.ModuleType | None = None) -> ml_collections.ConfigDict:
  """get_config(arg) of 'path[:arg]'."""
  path, arg = split_spec(spec)
  module = module or load_module(path)
  config = call(module, path, 'get_config', arg)
  if not isinstance(config, ml_collections.ConfigDict):
    raise ConfigError(
      f'config file {path}: get_config returned a {type(config).__name__}, not an ml_collections.ConfigDict'
    )
  return config


def get_sweep(spec: str, module: types.ModuleType | None = None) -> list[dict[str, Any]]:
  """get_sweep(arg) of 'path[:arg]', as a list of override dicts."""
  path, arg = split_spec(spec)
  module = module or load_module(path)
  runs = call(module, path, 'get_sweep', arg)
  try:
    runs = list(runs)
  except TypeError:
    raise ConfigError(f'config file {path}: get_sweep must return a list of override dicts') from None
  if not all(isinstance(r, dict) for r in runs):
    raise ConfigError(f'config file {path}: get_sweep must return a list of override dicts')
  return runs


def load_sweep_file(spec: str) -> tuple[ml_collections.ConfigDict, list[dict[str, Any]]]:
  """(get_config(arg), get_sweep(arg)) of 'path[:arg]', the file executed once."""
  path, _ = split_spec(spec)
  module = load_module(path)
  return get_config(spec, module), get_sweep(spec, module)


def define_config_flag(argv: list[str], name: str = 'config') -> tuple[str | None, types.ModuleType | None]:
  """For entry points, before absl parses flags: load the file of `--NAME=path[:arg]`, define
  --NAME as its ConfigDict (so `--NAME.KEY=VALUE` overrides apply) and drop the file argument
  from argv. Returns (the spec, the loaded module); a bad file exits with one line.
  """
  spec, index, width = None, 0, 0
  for i, arg in enumerate(argv[1:], start=1):
    if arg.startswith(f'--{name}='):
      spec, index, width = arg.split('=', 1)[1], i, 1
    elif arg == f'--{name}' and i + 1 < len(argv):
      spec, index, width = argv[i + 1], i, 2
  if spec is None:
    if not any(a.startswith('--help') for a in argv):
      sys.exit(f'error: --{name}=path/to/config.py[:arg] is required')
    return None, None
  try:
    module = load_module(split_spec(spec)[0])
    config = get_config(spec, module)
  except ConfigError as e:
    sys.exit(f'error: {e}')
  del argv[index : index + width]
  config_flags.DEFINE_config_dict(
    name, config, f'Config from {spec} (override with --{name}.KEY=VALUE).', lock_config=True
  )
  return spec, module
