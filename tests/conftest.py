"""Test-wide JAX settings: implicit rank promotion is an error (catches silent broadcasting bugs)."""

import os
import sys

import jax

jax.config.update('jax_numpy_rank_promotion', 'raise')

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)
