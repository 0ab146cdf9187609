"""Alias of `python -m experiments.benchmark --only=moe` (the MoE rows of the benchmark suite).

  python -m experiments.benchmark_moe [--quick] [--moe_dispatches=sort,einsum,ragged]
"""

import sys

from absl import app

from experiments import benchmark

if __name__ == '__main__':
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.config_with_absl()
  sys.argv[1:1] = ['--only=moe', '--out=']
  app.run(benchmark.main)
