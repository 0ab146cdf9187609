"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base
from ffn_research.ablations.changes import PROJECTED_DRIFT_SETTLES
from ffn_research.ablations.changes import TIE_NO_LONGER_WITHHOLDS_DOUBLING

_RUN_DURING = 'made during the full run of 2026-11-23 (21:28-23:20 UTC), whose partial results may have been seen'
CHANGES = (
  base.DesignChange(
    '2026-11-22',
    '9ac4fa3',
    'withdrawn ffn_stack design, memorization arm: frozen embeddings (they stored nothing at d_model 8 in 200 '
    'steps) -> trainable embeddings',
    "that design's verdicts (knee and spread, memorization and modular) were published after it; none maps to a "
    'current verdict',
  ),
  base.DesignChange(
    '2026-11-23',
    '48e29e3',
    'issue 17: ffn_stack (no attention) at fixed FFN parameters on memorization and (a + b) mod 31, a "4x is the '
    'knee" rule and the % spread of the loss -> the language task on a transformer at fixed non-embedding '
    'parameters (two sizes, d_model >= 32), per-seed best rate of a 3-rate grid, % excess over the L(N) fit, '
    'spread = max - min over r in 1..8, regime checks',
    '4 verdicts not reproduced (knee 11.9x and 12.2x; spread 179% and 87%) withdrawn -> 2 verdicts, both invalid '
    '(68.0 [54.1, 82.0] and 66.5 [44.0, 89.0] points; the rule alone: not reproduced)',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    '2026-11-23',
    '8807fb0',
    f'a coverage check (every shape measured at every seed) gates each verdict; {_RUN_DURING}',
    'none: both verdicts invalid (plateau, rate edge) either way',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    '2026-11-23',
    'd414ca7',
    f'the learning-rate edge check over all shapes -> per size; {_RUN_DURING}',
    'none: each size failed its own edge check (38,000: r = 8 and 16 at the top; 76,000: r = 0.5 at the bottom, '
    'r = 16 at the top); both invalid',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    '2026-11-26',
    'ef446d6',
    'issues 29 and 30 (docs/results/reanalysis-2026-11-26.md): % of the excess bits over the L(N) fit, max - min '
    "per seed, t CI -> Kaplan's % change of the total loss of the worst shape vs the best (a ratio of means, "
    'most of that loss the entropy floor: 97.6% in the published run), the rate tuned on the mean over seeds '
    '(6e-4 ... 6e-2), T doubled until stable; L(N) fit, within-run plateau and per-seed edge checks dropped',
    'invalid 68.0 [54.1, 82.0] and 66.5 [44.0, 89.0] points, the rule alone not reproduced -> invalid 3.95 [3.58, '
    '4.31] and 2.78 [2.45, 3.10] % at T = 3,200, the rule alone reproduced (stability failed)',
    verdicts=(1, 2),
    to_positive=(1, 2),
  ),
  base.DesignChange(
    '2026-11-26',
    'e99e5fc',
    'after pass 0 of the first regime run: a doubled point runs all five rates -> the rate chosen at T and its two '
    'neighbours',
    'no outcome moved; pass 2 (3,200 steps) cost 1,901 run-seconds instead of ~3,170, and three shapes then chose '
    'the top of the kept grid (38,000: r = 2 and 8; 76,000: r = 4)',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    '2026-11-26',
    '5875427',
    'after the report stopped at the doubling limit (T = 3,200): 2 doublings -> 4, the cap ends the loop, which '
    'runs the part of an extension that fits the cap',
    'N = 38,000: invalid 3.95 [3.58, 4.31] at 3,200 -> invalid 2.47 [2.28, 2.57] at 6,400 (still falling: 3.95 at '
    'T/2); N = 76,000 unchanged (invalid, 2.78 at 3,200)',
    verdicts=(1,),
  ),
  base.DesignChange(
    '2026-11-27',
    '42bf48d',
    'issue 45: stability from T/2 to T -> the ladder T/4, T/2, T judged as a magnitude; BCa from 5 seeds -> a t '
    "interval of the log ratio below 10 seeds; a premise computed (the best shape's reducible share at least 5%)",
    'from the published runs: both invalid (stability) -> invalid (premise: reducible share 2.4% at N = 38,000 '
    'and 3.4% at 76,000, both under 5%); the republication (a fresh run, 2026-11-27 18:42, T = 800): both '
    'inconclusive, premises passing (13.3%, 11.5%: the models far from converged)',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='43f1e1c',
    change=(
      "wording only, after the 18:42 republication: each verdict's scope quoted the superseded report's budget "
      '(6,400 and 3,200 steps) and entropy-floor share (97.6%, 96.6%); it now points to the ladder line and the '
      "premise check, which give the run's own, and says the budget may fall short of convergence; no rule, "
      'threshold or run changed'
    ),
    outcome='the same outcomes and numbers',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='fbc31ef',
    change=TIE_NO_LONGER_WITHHOLDS_DOUBLING,
    outcome=(
      'both inconclusive at T = 800, the loop stopped after one pass (1,378 of 7,126 run-seconds) -> resumed '
      '(19:42): both points doubled to T = 3,200, spreads 3.89% and 2.70% (the rule alone reproduced), both '
      'invalid on the premise (reducible share 4.17% and 3.42%, under 5%)'
    ),
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='cddebcd, c13492b',
    change=(
      'after a cold review of the 18:42 republication: a rate worse than the chosen one on every seed is no longer '
      "tied (the machinery, all studies: 38k r = 8's tied 0.06 was worse on all 5 seeds by 0.04-1.4 bits, two of "
      "them stuck), a tied rung never lends its own CI as the ladder's noise allowance; the scope names the task's "
      'confound (attention-light chain, attention share falling with r, loss monotone in r); the figure shades the '
      'achieved ratios and says at which T the ratios outside the spread ran'
    ),
    outcome=(
      'no outcome of the six other re-judgeable reports changes (re-judged on their runs); this study, resumed '
      'under the new rules, doubled to T = 3,200 and is invalid on its premise (the row above)'
    ),
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='f158f66, 5805934, 6d8d9f4',
    change=(
      "issue 47's redesign, after the published report (both invalid on the premise: the entropy floor 96-97% of "
      'the loss): the language V 64, 16 candidates, 4 next tokens, Dirichlet 0.5 (1,024 contexts, learned almost '
      'to the floor) -> V 128, 128 candidates, 2 next tokens, Dirichlet 0.2 (16,384 contexts, more than these '
      'sizes store), so that about half the loss is reducible at T; T = 800 doubled up to 4 times, r = 0.5 and 16 '
      'at 800 steps only -> one budget T = 3,200 fixed before the run, every shape at it, no doublings. The '
      'language was chosen by a pilot that measured only the reducible share of one shape (r = 4, rate 0.02, '
      'seed 0, T = 3,200) per candidate language: the published one 0.05 at 3,200 steps in its report; V 64 '
      'with 4,096 contexts 0.07-0.17; V 128 with 8,192 contexts 0.31; V 128 with 16,384 contexts 0.63 at N = '
      '38,000 (chosen; 0.49 at N = 76,000, measured after the choice); no spread (which needs two shapes) was '
      'computed. Before any result: the full regime 5 rates x 5 seeds -> 3 rates (2e-3, 6e-3, 2e-2; the regime '
      'extends an edge) x 4 seeds, for cost: a first start (2026-11-29 05:48, 3f6a257) measured ~21 ms per run-step'
      ' beside other work, so its pass 0 (2.3 million run-steps) would have run ~13 hours; it was stopped after 13 '
      'minutes with one group of 25 runs at T/4 finished and none of their losses read.'
      ' Then one size, 38,000, where there were two (38,000 and 76,000): the restarted pass (3 rates x 4 seeds, '
      '2026-11-29 06:28, fc5136f) measured ~15 minutes per group of 12 runs beside the work of two helpers, so its pass'
      ' 0 alone was several times the cap; stopped at 07:51 with 60 runs of N = 38,000 finished (reused by the next '
      'start, then moved aside with its runs), none of'
      " their losses read; verdict 2 (N = 76,000) dropped. Then (6d8d9f4) each sequence's start context drawn by "
      'inverse CDF (task.start_draw: the same distribution, other draws) for cost, 203 -> 91 ms per step of a '
      "12-run group: the pass restarted at 07:54 (5805934) under the Gumbel draw was stopped by the session's end "
      'with 97 runs finished; they were moved aside (kept on the machine that ran them, not in the repository), '
      'none of their losses read; every run of the report draws its start by inverse CDF'
    ),
    outcome=(
      'both invalid (premise: reducible share 4.17% and 3.42%; spreads 3.89% and 2.70% of the total loss at T = '
      '3,200, the rule alone reproduced) -> the run of 2026-11-29 09:10 (d4f9b69; 264 runs, 2,799 run-seconds): '
      'N = 38,000 not reproduced, 23.32 [20.61, 26.09] (reducible share 0.64, premise passing), before the row '
      'below made it invalid'
    ),
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='646d645',
    change=(
      'after that run and its cold review (a helper reading the report against the review standard): a refutation '
      'now needs a positive control, a second premise (refutation_guard) that no arm of this design meets: nothing '
      'shows the setup reads a spread under 5% where shape should not matter (r = 4 vs r = 8, 1.9% [0.4, 3.4], was '
      'read after the run, spans 2x in r, and read 4.99% at T/4), and T is far short of convergence (from T/2 to '
      "T every shape's loss fell 25-29%, the best shape's reducible share 0.82 -> 0.73 -> 0.64); the scope "
      'puts the attention confound and the convergence first and gives spread = (excess ratio - 1) x share; '
      'the headline reworded'
    ),
    outcome='not reproduced (23.32 [20.61, 26.09]) -> invalid, the same number (the rule alone: not reproduced)',
    verdicts=(1,),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='85735c3, 1947c37',
    change=PROJECTED_DRIFT_SETTLES,
    outcome=(
      'not judged again at the change (its runs are not on this machine); on the published ladder (22.40, 29.18, '
      '23.32, noise 1.37, the boundary 5: d/2 9.16), the stability check PASS -> FAIL (projected drift 9.44); the '
      'verdict invalid -> invalid (its premise already failed)'
    ),
    verdicts=(1,),
  ),
)
