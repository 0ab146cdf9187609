"""Multi-query associative recall (MQAR, Zoology) with a tiny transformer.

  python -m experiments.train --config=configs/recall.py --workdir=runs/recall
  python -m experiments.train --config=configs/recall.py:ffn_stack --workdir=runs/recall_stack

Arguments (after the colon): default, ffn_stack (no attention: cannot bind keys
to values; it can only guess among the context's values), no_ffn (attention only).
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
  t.name = 'associative_recall'
  t.vocab_size = 32         # 32 keys and 32 values; chance accuracy 1/32
  t.num_pairs = 4           # Zoology's smallest setting has 4 pairs
  t.num_queries = 4         # sequence length 2 * 4 + 4 = 12
  t.num_eval = 1024
  tr.batch_size = 128
  tr.steps = 1000
  tr.learning_rate = 1e-3
  tr.log_every = 100
  arg = arg or 'default'
  if arg == 'ffn_stack':
    m.arch = 'ffn_stack'
  elif arg == 'no_ffn':
    m.use_ffn = False
  elif arg != 'default':
    raise ValueError(f'unknown config argument {arg!r}; allowed: default, ffn_stack, no_ffn')
  return config
