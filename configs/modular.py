"""a + b mod p with held-out pairs (generalisation rather than storage).

  python -m experiments.train --config=configs/modular.py --workdir=runs/modular
  python -m experiments.train --config=configs/modular.py:ffn_stack --workdir=runs/modular_stack

Arguments (after the colon): default, ffn_stack, no_ffn. eval_accuracy in
summary.json is the accuracy on the held-out pairs.
"""

from ffn_research.config import tiny_transformer_config


def get_config(arg: str = 'default'):
  config = tiny_transformer_config('modular_arithmetic', arg)
  t, tr = config.task, config.train
  t.modulus = 31  # 961 pairs; chance accuracy 1/31
  t.train_fraction = 0.5
  tr.batch_size = 256
  tr.steps = 3000
  tr.optimizer = 'adamw'
  tr.weight_decay = 1.0  # strong decay drives held-out generalisation ("grokking")
  tr.learning_rate = 3e-3
  return config
