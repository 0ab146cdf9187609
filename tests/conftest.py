"""Test-wide JAX settings: implicit rank promotion is an error (catches silent broadcasting bugs), and
float32 matmuls are full float32 on every backend (GPUs default to TF32, about 1e-3 off the NumPy
references the tests compare against; CPUs already compute them in full)."""

import fcntl
import json
import os
import subprocess
import sys

import jax
import pytest

jax.config.update('jax_numpy_rank_promotion', 'raise')
jax.config.update('jax_default_matmul_precision', 'highest')

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)


# LLVM optimisation level 0 for the default run: XLA's own (HLO) passes are unchanged, only the
# machine-code optimisation is skipped; every test passes the same, in about two thirds of the time
# (default suite on the 2-core dev CPU: 317 s -> 215 s, 2026-11-22). The slow step (`pytest -m
# slow`) keeps the optimised backend users run. XLA reads XLA_FLAGS when the backend starts (first
# use, after this hook), and subprocesses of tests inherit it. An XLA_FLAGS set by the caller wins.
FAST_COMPILE_FLAGS = '--xla_backend_optimization_level=0'


def pytest_configure(config):
  if config.getoption('markexpr', '').strip() == 'not slow' and 'XLA_FLAGS' not in os.environ:
    os.environ['XLA_FLAGS'] = FAST_COMPILE_FLAGS


@pytest.fixture(scope='session')
def study_smoke(tmp_path_factory):
  """`run(name)` -> (returncode, stdout, stderr tail, output folder) of one study's `experiments.reproduce
  --scale=smoke`, run once per test session: the every-ablation test and the study's own smoke test read one run
  (the xdist workers share it through a lock file), so CI pays for each study's smoke once."""
  base = tmp_path_factory.getbasetemp()
  root = (base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base) / 'study_smoke'
  root.mkdir(exist_ok=True)

  def run(name):
    with open(root / f'{name}.lock', 'w') as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      done = root / f'{name}.json'
      if not done.exists():
        proc = subprocess.run(
          [
            sys.executable,
            '-m',
            'experiments.reproduce',
            f'--ablation={name}',
            f'--workdir={root}',
            '--scale=smoke',
            '--noprogress',
          ],
          cwd=REPO_ROOT,
          capture_output=True,
          text=True,
          timeout=1800,  # a hang guard: a smoke is compile-bound, ~2x slower on a 2-core Xeon than on the AMD
          check=False,
        )
        result = {'returncode': proc.returncode, 'stdout': proc.stdout, 'stderr': proc.stderr[-3000:]}
        done.write_text(json.dumps(result))
      result = json.loads(done.read_text())
    return result['returncode'], result['stdout'], result['stderr'], root / name

  return run
