"""The synthetic languages (tasks/language.py) the studies share: the chain's task keys, one constant each."""

# Capacity-limited: V 128 with every token a candidate successor, so 128 x 128 = 16,384 reachable contexts of 2 next
# tokens each, Dirichlet(0.2) weights (entropy floor ~0.32 bits): more than these models store. A one-shape pilot on
# expansion_ratio's 1-layer model put the reducible share of the loss at 0.63 (N = 38,000 non-embedding parameters)
# and 0.49 (N = 76,000) at 3,200 steps. Start contexts by inverse CDF: Gumbel-max over the 16,384 contexts cost about
# a third of a training step (docs/language.md).
CAPACITY_LIMITED = dict(
  vocab_size=128, markov_order=2, num_candidates=128, branching=2, concentration=0.2, start_draw='inverse_cdf'
)
