"""Two-hop lookups in a random graph with held-out compositions (tasks/sequence.py MultiHopTask).

  python -m experiments.train --config=configs/multi_hop.py --workdir=runs/multi_hop
  python -m experiments.train --config=configs/multi_hop.py:ffn_stack --workdir=runs/multi_hop_stack

Arguments (after the colon): default, ffn_stack, no_ffn. summary.json:
first_hop_accuracy (atomic facts), accuracy (trained compositions),
eval_accuracy (held-out compositions).
"""

from ffn_research.config import tiny_transformer_config


def get_config(arg: str = 'default'):
  config = tiny_transformer_config('multi_hop', arg)
  t, tr = config.task, config.train
  t.num_nodes = 64  # chance accuracy 1/64
  t.num_relations = 8
  t.num_hops = 2  # 64 * 8^2 = 4,096 compositions
  t.train_fraction = 0.8  # about 6 trained compositions per atomic fact
  tr.batch_size = 256
  tr.steps = 3000
  tr.optimizer = 'adamw'
  tr.weight_decay = 1.0  # without it the held-out compositions stay near chance
  tr.learning_rate = 3e-3
  return config
