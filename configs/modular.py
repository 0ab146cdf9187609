"""a + b mod p with held-out pairs (generalisation rather than storage).

  python -m experiments.train --config=configs/modular.py --workdir=runs/modular
  python -m experiments.train --config=configs/modular.py:ffn_stack --workdir=runs/modular_stack

Arguments (after the colon): default, ffn_stack, no_ffn. eval_accuracy in
summary.json is the accuracy on the held-out pairs.
"""

from ffn_research.config import default_config


def get_config(arg: str = 'default'):
  config = default_config()
  m, t, tr = config.model, config.task, config.train
  m.arch = 'transformer'
  m.d_model = 64
  m.d_ff = 256
  m.num_layers = 2
  m.num_heads = 4
  t.name = 'modular_arithmetic'
  t.modulus = 31            # 961 pairs; chance accuracy 1/31
  t.train_fraction = 0.5
  tr.batch_size = 256
  tr.steps = 3000
  tr.optimizer = 'adamw'
  tr.weight_decay = 1.0     # strong decay drives held-out generalisation ("grokking")
  tr.learning_rate = 3e-3
  tr.log_every = 100
  arg = arg or 'default'
  if arg == 'ffn_stack':
    m.arch = 'ffn_stack'
  elif arg == 'no_ffn':
    m.use_ffn = False
  elif arg != 'default':
    raise ValueError(f'unknown config argument {arg!r}; allowed: default, ffn_stack, no_ffn')
  return config
