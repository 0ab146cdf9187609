"""Two-hop lookups in a random graph with held-out compositions (tasks/sequence.py MultiHopTask).

  python -m experiments.train --config=configs/multi_hop.py --workdir=runs/multi_hop
  python -m experiments.train --config=configs/multi_hop.py:ffn_stack --workdir=runs/multi_hop_stack

Arguments (after the colon): default, ffn_stack, no_ffn. summary.json:
first_hop_accuracy (atomic facts), accuracy (trained compositions),
eval_accuracy (held-out compositions).
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
  t.name = 'multi_hop'
  t.num_nodes = 64          # chance accuracy 1/64
  t.num_relations = 8
  t.num_hops = 2            # 64 * 8^2 = 4,096 compositions
  t.train_fraction = 0.8    # about 6 trained compositions per atomic fact
  tr.batch_size = 256
  tr.steps = 3000
  tr.optimizer = 'adamw'
  tr.weight_decay = 1.0     # without it the held-out compositions stay near chance
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
