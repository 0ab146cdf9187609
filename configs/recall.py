"""Multi-query associative recall (MQAR, Zoology) with a tiny transformer.

  python -m experiments.train --config=configs/recall.py --workdir=runs/recall
  python -m experiments.train --config=configs/recall.py:ffn_stack --workdir=runs/recall_stack

Arguments (after the colon): default, ffn_stack (no attention: cannot bind keys
to values; it can only guess among the context's values), no_ffn (attention only).
"""

from ffn_research.config import tiny_transformer_config


def get_config(arg: str = 'default'):
  config = tiny_transformer_config('associative_recall', arg)
  t, tr = config.task, config.train
  t.num_keys = 32  # 32 keys and 32 values; chance accuracy 1/32
  t.num_pairs = 4  # Zoology's smallest setting has 4 pairs
  t.num_queries = 4  # sequence length 2 * 4 + 4 = 12
  t.num_eval = 1024
  tr.batch_size = 128
  tr.steps = 1000
  tr.learning_rate = 1e-3
  return config
