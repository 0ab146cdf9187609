"""Parametric fact memorization with a tiny transformer (tasks/sequence.py MemorizationTask).

  python -m experiments.train --config=configs/memorization.py --workdir=runs/memorization
  python -m experiments.train --config=configs/memorization.py:4096 --workdir=runs/mem4096
  python -m experiments.train --config=configs/memorization.py:ffn_stack --workdir=runs/mem_stack

Arguments (after the colon): default (1,024 facts), 4096 (4,096 facts),
ffn_stack (the default without attention), no_ffn (the default without FFN).
summary.json reports accuracy, bits_stored, bits_per_param, bits_per_ffn_param
and exposures_per_fact.
"""

from ffn_research.config import tiny_transformer_config


def get_config(arg: str = 'default'):
  config = tiny_transformer_config('memorization', arg, extra_args=('4096',))
  t, tr = config.task, config.train
  t.num_facts = 1024
  t.num_relations = 4  # 256 subjects
  t.num_objects = 256  # 8 bits per fact, 8,192 bits in all
  tr.batch_size = 256
  tr.steps = 1000  # 250 exposures per fact
  tr.learning_rate = 3e-3
  if arg == '4096':
    t.num_facts = 4096  # 32,768 bits
    t.num_relations = 16  # 256 subjects (keeps the vocabulary, hence the unembedding, small)
    tr.batch_size = 512
    tr.steps = 1200  # 150 exposures per fact
  return config
