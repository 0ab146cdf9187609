"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

CHANGES = (
  base.DesignChange(
    date='2026-11-24',
    commit='b21698e',
    change=(
      'after a review of the 2026-11-22 run (issue 18 item 4): a one-block memorizer (task `memorization`, Adam '
      '3e-3, 2,000 steps, ReLU / GELU / SiLU) -> a 2-layer ReLU transformer on the `language` task with a rate x '
      'decay x budget grid; the 2% dead level (from no paper), the GELU/SiLU comparison and the fact key/value '
      'analysis (near-forced: the FFN input is nearly additive in subject and relation) dropped; bigram keys and '
      'next-token values against shuffled keys / permuted values'
    ),
    outcome=(
      '2026-11-22: dead 0.39% vs 2% not reproduced, ReLU - GELU / SiLU inconclusive, fact keys +0.061 and values '
      '+0.034 reproduced -> 2026-11-24 09:35: verdicts 1-4 invalid (kills premise), keys layer 0 reproduced '
      '(+0.072), keys layer 1 inconclusive, values layer 1 reproduced (+0.100)'
    ),
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-24',
    commit='dd67148',
    change=(
      'after the quick run of the grid 1e-3 ... 3e-2 killed at most 1% of a layer (the kills premise failed): the '
      'rate 1e-1 added to the dead-unit grid'
    ),
    outcome='verdicts 1-4 invalid -> invalid (full run: kills +0.020 [-0.004, 0.045] at 1e-1 without decay)',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='ffa44ee',
    change=(
      'port to the regime policy (issues 29, 31) after the 2026-11-24 report and a probe showing units die at '
      'rates 0.3 and 1 where the models barely learn (held-out 3.57-3.76 bits against a unigram entropy of 3.89-3.92): '
      'rates 0.3 and 1 added to the dead-unit grid and verdicts 1-4 no longer gated on learning (was: held-out bits '
      '0.1 below the unigram entropy at every cell read); "more" from 1 point of the units (was: CI above 0); 5 -> 10 '
      'seeds'
    ),
    outcome='verdict 1 invalid (+0.0085 per decade, kills premise) -> reproduced, +0.069 [+0.051, +0.087] (06:43 run)',
    verdicts=(1,),
    to_positive=(1,),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='ffa44ee',
    change='the same port (rates 0.3 and 1, no learning gate on 1-4, "more" from 1 point of the units, 10 seeds)',
    outcome=(
      'verdicts 2-4 invalid (kills premise) -> not reproduced: decay -0.058 [-0.075, -0.041], budget -0.029 '
      '[-0.039, -0.019], layer 0 - 1 -0.059 [-0.078, -0.041]'
    ),
    verdicts=(2,),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='ffa44ee',
    change=(
      'the same port for keys and values: a reference arm whose rate the regime tunes (was lr 1e-2 fixed), "more" '
      "from 2 points of a unit's top positions (was: CI above 0), 10 seeds (was 5), the last-two-logs plateau "
      'replaced by stability from T/2 to T, Holm over all seven verdicts (was: over the decided ones)'
    ),
    outcome=(
      'keys layer 0 reproduced (+0.072, n = 5) -> reproduced (+0.067 [+0.038, +0.096], n = 10); keys layer 1 '
      'inconclusive (+0.006) -> invalid (+0.017, stability); values layer 1 reproduced -> reproduced (+0.111)'
    ),
    verdicts=(3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='d6ed0aa',
    change=(
      "after this study's 06:43 results: an outcome inconclusive at both T/2 and T is stable when its drift is "
      "under half its CI's half-width at T (was: half the distance to the rule's boundary); the report rebuilt "
      'from the same runs'
    ),
    outcome='keys layer 1 invalid (drift 0.0027 >= 0.0015) -> inconclusive, +0.0170 [+0.0043, +0.0297]',
    verdicts=(4,),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='42bf48d',
    change=(
      'issue 45 (the ladder in 42bf48d, the premises in the commit that adds this entry): every verdict judged on '
      "the budget ladder T/4, T/2, T as a sign claim (was: stable from T/2 to T); every verdict's premise is "
      '"learned" at every cell it reads, 1 bit below the unigram entropy (was: none for 1-4, 0.1 bit at the '
      'reference for 5-7)'
    ),
    outcome=(
      'from the numbers of the 2026-11-26 run (d6ed0aa): 1 reproduced -> invalid and 2-4 not reproduced -> invalid '
      '(cells lr 0.3 and 1 without decay and lr 1 with it ended 0.20-0.30 bits below the unigram entropy of 3.86 at '
      'T, 0.05-0.53 at T/4); 5-7 kept their premise (the reference 2.56 bits below). The 1-bit threshold is the '
      "one issue 45 states, written after those gaps were seen (they lie between the old reference gate's 0.1 and "
      '1): with 0.1, every cell at T of the republished run passes (lowest gap 0.228, lr 1 without decay), so 1, 2 '
      'and 4 would have been decided; 3 also reads a T/4 cell at 0.081'
    ),
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='',
    change=(
      "after a cold review of the republished report: wording only — the study's claim line (weight decay and "
      'budget named as our hypotheses; keys and values as toy analogues), the scopes of 4 (no positive control for '
      "a layer effect), 5-6 (token selectivity in the shuffled baseline) and 7 (why layer 1), the headline's "
      "outcome per statistic, the premise's reason for 1-4, a note on revived units, the ladder's premise per "
      'rung (the runner, every study); no rule, threshold or run '
      'changed'
    ),
    outcome='the same outcomes and numbers',
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-28',
    commit='13a7c5c, 293a5a0',
    change=(
      'issue 47 item 1, after the cold review of the 2026-11-27 republication (every dead-unit verdict invalid: the '
      'cells at rates 0.3 and 1 did not learn): FFNs with biases b1, b2 (was bias-free; OPT has them), every arm at '
      'T = 3,200 steps (was 800; the short arms at 200), the dead-unit grid at rates 1e-3, 3e-3, 1e-2, 3e-2, 1e-1 '
      'without decay (was 1e-3, 1e-2, 3e-2, 0.1, 0.3, 1 x decay 0 / 0.1: 0.3 and 1 are dropped because the '
      "published run did not learn there), the learned premise's remedy doubles the grid's steps (was: none), the "
      'weight-decay and training-length verdicts dropped (no source states a direction for either: they were our '
      'hypotheses), the layer verdict invalid when the rule alone refutes it (no positive control for a layer effect '
      'exists in this toy). The verdicts are renumbered: 1 rate, 2 layer, 3-4 keys, 5 values (was 1 rate, 2 decay, '
      "3 budget, 4 layer, 5-7 keys and values); the verdict numbers in the column of the entries above are today's, "
      'their texts keep the numbers of the design they changed'
    ),
    outcome=(
      'before: 1 rate invalid (+0.079 [+0.064, +0.094] per decade, the rule alone reproduced; premise learned '
      'failed), 2 decay and 3 budget invalid (dropped), 4 layer invalid (-0.073 [-0.087, -0.059], the rule alone not '
      'reproduced), keys layer 0 reproduced (+0.076), keys layer 1 inconclusive (+0.025), values reproduced '
      '(+0.095) -> after (the first full run, 2026-11-28, T = 3,200): 1 rate inconclusive (+0.009 [+0.004, +0.014] '
      'per decade), 2 layer invalid (-0.009, the rule alone not reproduced; no positive control), 3 keys layer 0 '
      'reproduced (+0.061), 4 keys layer 1 inconclusive (+0.010), 5 values reproduced (+0.123). Also: the kills '
      "premise's remedy doubles the grid's steps (293a5a0), Holm's family is the five verdicts (was seven). Old -> new "
      'numbers: 1 -> 1, 2 and 3 dropped, 4 -> 2, 5 -> 3, 6 -> 4, 7 -> 5'
    ),
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-28',
    commit='',
    change="after a cold review of the redesign's first run, wording only: the notes say where units die per rate "
    'and layer (none in layer 0) and verdict 1 without its largest rate, the citation says what Lu et al. 2019 is '
    "about, the layer control is named a fixed statement, the headline gives the value agreement's levels, the "
    'dead-fraction CIs stay inside [0, 1] and the figure caption draws T only; no rule, threshold or run changed',
    outcome='the same outcomes and numbers',
    verdicts=(1, 2, 5),
  ),
)
