"""Entry points take JAX's own flags (config_with_absl) and use the persistent compilation cache."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from ffn_research import loop
from ffn_research import sweep
from tests.conftest import REPO_ROOT

# Adam at learning rate 1e30: the loss is NaN within a few steps.
BLOW_UP = {'train.steps': 20, 'train.log_every': 10, 'train.learning_rate': 1e30, 'train.warmup_steps': 0}


@pytest.mark.slow  # a subprocess plus a run in-process
def test_jax_debug_nans_flag_and_compilation_cache(tmp_path):
  spec = importlib.util.spec_from_file_location('regression', os.path.join(REPO_ROOT, 'configs', 'regression.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  # Without the flag the run ends as 'diverged' (non-finite loss detected by the loop) ...
  plain = loop.train_and_evaluate(sweep.apply_overrides(module.get_config(), BLOW_UP), str(tmp_path / 'plain'))
  assert plain['status'] == 'diverged'
  # ... with --jax_debug_nans JAX itself stops at the first NaN.
  cache = tmp_path / 'cache'
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=configs/regression.py',
      f'--workdir={tmp_path / "debug"}',
      f'--compilation_cache_dir={cache}',
      '--jax_debug_nans',
      *[f'--config.{k}={v}' for k, v in BLOW_UP.items()],
    ],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode != 0
  assert 'FloatingPointError: invalid value (nan)' in proc.stderr, proc.stderr[-2000:]
  summary = json.load(open(tmp_path / 'debug' / 'summary.json'))
  assert summary['status'] == 'failed' and summary['error'].startswith('FloatingPointError')
  # The single run wrote its compiled programs to the persistent cache.
  assert any(name.startswith('jit_train_chunk') for name in os.listdir(cache))
