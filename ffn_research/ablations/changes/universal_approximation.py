"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

CHANGES = (
  base.DesignChange(
    date='2026-11-23',
    commit='538126b',
    change='slope: one pooled least-squares fit over every (N, seed) point -> a fit per seed, CI over the seeds',
    outcome='made after the 2026-11-22 full runs (pooled slope -1.038 [-1.173, -0.904], not reproduced); no full '
    'run was judged with this change alone (the next, 2026-11-24, also changed the data and the fitted N)',
    verdicts=(1,),
  ),
  base.DesignChange(
    date='2026-11-24',
    commit='31043d9',
    change='1,024 -> 16,384 training points; slope over N >= 8 with collapsed runs (sup error >= 1/8) excluded '
    '(was every N, collapsed included); least-squares baselines at equal and random fixed kinks, and the verdict '
    'against the random-kink baseline, added; loss plateau, collapse fraction and data premise gate verdicts 1-2',
    outcome='verdict 1: not reproduced (-1.04, pooled, 1,024 points) -> invalid (-0.84 [-0.97, -0.71] at rate '
    '3e-3; its 4x-steps slope -1.11 failed the slope plateau); verdict 2 new: invalid (+0.65 [0.51, 0.78])',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-24',
    commit='a022d7e',
    change='slope-plateau-in-steps check added (per-seed slope at 4x steps within 0.25 of that at 1x), after the '
    'quick run, before the full run was analysed',
    outcome='the 2026-11-24 01:37 full run: verdicts 1 and 2 invalid on it (slope -0.84 -> -1.11 at 4x steps)',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-25',
    commit='afdd43c',
    change='Adam 3e-3 for every width (the untuned default) -> the rate tuned per arm and width on the mean final '
    'training loss over {1e-3, ..., 1e-1}, with an inside-the-grid check',
    outcome='verdict 1: invalid (-0.84) -> not reproduced with every check passing (-0.96 [-1.11, -0.81]; 4x '
    'slope -1.14, change 0.18 < 0.25); verdict 2: invalid (+0.65) -> not reproduced (+0.53)',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-25',
    commit='7ab5454',
    change='rate grid widened at its lower edge to 3e-4, then 1e-4 (the bound fixed before that step), after the '
    '4x arm chose the smallest rate; the controls tuned on the same grid (were at 3e-3); final losses below 1e-13 '
    'tie (the bilinear control had chosen 1e-1 on rounding noise)',
    outcome='verdicts 1 and 2: not reproduced -> invalid (4x slope -1.21, then -1.40: the slope plateau failed); '
    'swiglu control: not reproduced (0.056 at 3e-3) -> invalid (0.019 at 1e-1, the grid top); |x| inconclusive '
    '(0.30 -> 0.32); bilinear reproduced',
    verdicts=(1, 2, 5),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='58aa5d5',
    change='ported to the regime policy: the runner tunes, extends the grid and doubles T; the 4x-steps arm, its '
    'verdict ("4x steps lower the error >= 2x") and the loss and slope plateaus removed; stability of each '
    "verdict's statistic from T/2 to T instead",
    outcome='rerun 92160bb: verdict 1 invalid -> not reproduced (-0.959 [-1.108, -0.810]); verdict 2 invalid -> '
    'not reproduced (+0.526 [+0.382, +0.670]); |x| inconclusive and bilinear reproduced unchanged; the 4x verdict '
    '(invalid) dropped',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='58aa5d5',
    change='the same port, for the swiglu control: the runner extended its rate grid above 1e-1 (0.3) and doubled '
    'its T four times (10,000 -> 160,000 steps)',
    outcome='rerun 92160bb: swiglu control invalid (0.0193 at 1e-1, the grid top) -> reproduced (0.0061 [0.0058, '
    '0.0064] at T = 160,000, rate 3e-3)',
    verdicts=(5,),
    to_positive=(5,),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='e98b1d6',
    change='descriptive ladder arm relu_width_4x added (the widths at 2T and 4T, rates from 1e-5), read by no verdict',
    outcome='no outcome changed; it showed the slope -1.117 (2T) and -1.399 (4T), and the difference to random '
    "kinks +0.368 (2T) and +0.086 [-0.076, +0.248] (4T, inside the rule's +0.25)",
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='42bf48d, 7af1152',
    change="issue 45: the T/2-vs-T stability check -> the runner's T/4, T/2, T ladder judged by kind (all five "
    'existence), rate ties and leave-one-seed-out; premises gate every verdict (the data premise now verdict 2 '
    'too; constructions and the bilinear control the controls); a not reproduced of verdicts 1-2 also needs the '
    "4T ladder arm not to cross the boundary nor to move by half its distance to it; the controls' t CI within the "
    'range [0, inf) (the |x| t interval reached below 0); the optimum drawn with N + 1 pieces',
    outcome='published before: not reproduced, not reproduced, inconclusive, reproduced, reproduced; after: the '
    'verdicts above (re-judged from the same runs plus the T/4 rung)',
    verdicts=(1, 2, 3),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='',
    change=(
      'after the republication under issue 45, a machinery rule (every study): an existence claim reached at T at '
      'the chosen rates is not demoted by a tied rate that does not reach it (one rate reaching shows "can '
      'reach"; `regime.rate_tie(reached=...)`); the same runs judged again'
    ),
    outcome=(
      'control x^2, 1 bilinear unit: inconclusive (tied rates 3e-4 and 1e-3 at T give 0.26 and 0.0028) -> '
      'reproduced, 1.8e-7 [7.4e-8, 2.8e-7] at the chosen rate, as its use as the premise of 3 and 5 already read it; '
      'its only beneficiary so far: no other published study declares an existence claim, and the rejudged page had '
      'predicted "reproduced" for it before the fresh runs'
    ),
    verdicts=(4,),
    to_positive=(4,),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='',
    change=(
      "after a cold review of the republished report, wording only: the study's claim line (what is tested is "
      'whether training reaches the rate the construction allows), the headline names each outcome, the 4T '
      "check says the ladder arm is fixed (invalid as run, not a refutation), the scopes of 2 (no paper's claim), "
      '3 (bimodal seeds) and 5 (the budget it was reached at); no rule, threshold or run changed'
    ),
    outcome='the same outcomes and numbers',
    verdicts=(1, 2, 3, 5),
  ),
  base.DesignChange(
    date='2026-11-28',
    commit='5284e09',
    change=(
      'issue 47 item 6, after the published run (verdicts 1-2 invalid: the slope still steepening, -0.96 at T = '
      '10,000 and -1.40 at 40,000 in the fixed ladder arm): the ladder arm `relu_width_4x` and its check '
      '(`longer_budget_check`) dropped, so an unsettled existence ladder doubles T of relu_width itself (the '
      "machinery's existence rule: a not reproduced stands only on a settled ladder); a `kinks` arm (the same "
      'widths, the width-N ReLU FFN parametrised by its kink positions, model.arch=kinks) and a sixth verdict on '
      'it, with the premise that the arm can express the equal-piece interpolant (slope -2)'
    ),
    outcome=(
      'before: 1 invalid (-0.959 [-1.108, -0.810]; 4T -1.399), 2 invalid (+0.526 [+0.382, +0.670]; 4T +0.086) -> '
      "the redesign's first full run (2026-11-29, fresh runs, the same seeds, rates and T = 10,000, so the same "
      'numbers): the relu_width ladder -0.818, -0.930, -0.959 passed the magnitude rule with no doubling, and 1 and 2 '
      'read not reproduced (-0.959 [-1.108, -0.810]; +0.526 [+0.382, +0.670]); 6 inconclusive (-0.80 [-0.90, '
      '-0.71], rate ties); then the row below'
    ),
    verdicts=(1, 2, 6),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='3919827',
    change=(
      "after the redesign's first full run, a machinery rule (every study): an existence claim's not reproduced "
      '("cannot reach") stands only at the largest budget the regime allows, every doubling spent; before that the '
      'ladder check fails with the next doubling as its remedy and the verdict is inconclusive (was: a settled '
      'ladder at any budget). Made because the ladder that settled at T = 10,000 here had moved from -0.96 to -1.40 '
      "at 40,000 steps in the superseded design's fixed arm: a settled ladder is not evidence of convergence for a "
      '"can reach" claim. No other published verdict is an existence claim read not reproduced'
    ),
    outcome=(
      '1 not reproduced -> inconclusive (-0.959 [-1.108, -0.810], 0 of 4 doublings spent); 2 not reproduced -> '
      'inconclusive (+0.526 [+0.382, +0.670]); a refutation of either needs relu_width at T = 160,000: four '
      'doublings, more than the 3,600 reference-second cap (the next doubling alone ~1,130 run-seconds on the Intel '
      'Xeon of this run, which fits the cap: 1,198 of 3,600 reference-seconds spent; not bought, for lack of session '
      'time: the report was re-judged from the finished loop with --judge_only)'
    ),
    verdicts=(1, 2),
  ),
)
