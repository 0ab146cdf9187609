"""Test-wide JAX settings: implicit rank promotion is an error (catches silent broadcasting bugs), and
float32 matmuls are full float32 on every backend (GPUs default to TF32, about 1e-3 off the NumPy
references the tests compare against; CPUs already compute them in full)."""

import os
import sys

import jax

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
