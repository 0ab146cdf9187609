"""Next-token prediction on a synthetic language with a known entropy floor (tasks/language.py).

  python -m experiments.train --config=configs/language.py --workdir=runs/language
  python -m experiments.train --config=configs/language.py:no_ffn --workdir=runs/language_no_ffn

Arguments (after the colon): default (the tiny transformer), ffn_stack (no
attention: it sees only a bag of the tokens so far, so it cannot read the
order-2 context), no_ffn (attention only), smoke (a seconds-long run for tests).
summary.json: eval_bits, excess_bits (over the true chain on the same held-out
tokens), floor_bits, bigram_bits, unigram_bits, accuracy, accuracy_ceiling.
"""

from ffn_research.config import tiny_transformer_config


def get_config(arg: str = 'default'):
  config = tiny_transformer_config('language', arg, extra_args=('smoke',))
  t, tr = config.task, config.train
  t.vocab_size = 64  # tokens
  t.markov_order = 2  # order-2 chain: 64 * 16 = 1,024 reachable contexts
  t.num_candidates = 16  # the last token fixes 16 candidates (bigram ~ 3.5 bits)
  t.branching = 4  # each context picks 4 of them (floor ~ 1.3 bits)
  t.concentration = 0.5  # Dirichlet alpha: fairly peaked next-token probabilities
  t.seq_len = 32  # 31 scored positions per sequence
  t.num_eval = 1024  # held-out sequences (31,744 scored tokens)
  tr.batch_size = 64  # 2,048 tokens per step
  tr.steps = 1000
  tr.learning_rate = 3e-3
  tr.checkpoint_every = 0
  if arg == 'smoke':
    m = config.model
    m.d_model, m.d_ff, m.num_layers, m.num_heads = 16, 32, 1, 2
    t.vocab_size, t.num_candidates, t.branching, t.seq_len, t.num_eval = 8, 4, 2, 8, 64
    tr.steps, tr.batch_size, tr.log_every, tr.warmup_steps = 40, 16, 20, 10
  return config
