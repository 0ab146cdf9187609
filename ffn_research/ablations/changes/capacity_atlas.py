"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

CHANGES = (
  base.DesignChange(
    date='2026-11-30',
    commit='d13aa91',
    change='MoE storage at full: expert widths 8, 16, 32, 80 (total P 4.8k-43k, 8.9x) -> 8, 16, 32 (4.8k-17k, 3.6x, '
    "under the 8x the design asks); width 80 at the `large` scale only. Made after a preview judgement of pass 0's "
    'finished arms (every approximation arm; dense storage; MoE top-1 storage at widths 8 and 16), before any MoE '
    'width-32 or top-2 storage result was read (the MoE teacher arms, top-2 and width 32 among them, had been), for '
    'cost: the finished storage arms ran 2.5-4x their pass-0 price, so the two width-80 arms (~25,000-50,000 '
    'run-seconds) would have spent the 18,000 reference-second cap in pass 0 and left no room for any pass-1 remedy '
    '(rate extensions, doublings); the review that advised it also noted that width 80 lies outside the dense range '
    '(no dense comparison) and adds leverage to an MoE line that bends (slope 1.28 from width 8 to 16)',
    outcome='the preview had judged MoE top-1 storage over widths 8 and 16 (1.26 [1.23, 1.30] bits / P, invalid at '
    "its rate grid's lower edge); the MoE storage numbers are read over 3 widths, not 4",
    verdicts=(4, 5),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='cf7256e, 5b30345, f2f1897',
    change='storage, after the same preview (advised by a cold review of it): bits proportional to P and the peak '
    'inside the N grid reported, not gated (were premises); the number named a lower bound on the most bits over N '
    'where the grid\'s best N is its largest; the control premise\'s words "capacity bounds the peak" -> "the '
    'data do not bound the peak" (the same test: peak fill < 90%); the ladder line\'s saturation reading no longer '
    'says "saturated at T" (the same projection against 10%). Why: the number is read at one P* (a size-free '
    'constant is not needed), the slope above 1 held at every N and budget of the ladder (no compute remedies it), '
    'and the best N was the largest at every dense width, so "peak" overclaimed; the numbers do not change',
    outcome='at the preview (pass 0, not the published run) every storage verdict was invalid under the frozen '
    'gates: ReLU slope 1.13 [1.06, 1.20], GELU 1.12 [1.07, 1.17], SwiGLU 1.10 [1.05, 1.15]; the best N the largest '
    'at every dense width, still rising 3-12% from 4 P to 8 P bits (ReLU bits / P at P* 2.21 [2.07, 2.35], GELU '
    "2.26 [2.17, 2.35], SwiGLU 2.42 [2.36, 2.48], the MoE top-1 rate at its grid's lower edge). At the published "
    'run all five are still invalid under the frozen gates (slopes 1.10-1.30, each CI above 1.05; the best N the '
    'largest); after: ReLU measured 2.21 [2.07, 2.35], MoE top-2 measured 1.93 [1.88, 1.99], GELU and SwiGLU '
    "measured only with the rate-edge rule of 2026-11-30 (the next row), MoE top-1 inconclusive (a tied rate's "
    'control premise fails: worst seed 94.3% < 95%)',
    verdicts=(1, 2, 3, 4, 5),
    to_positive=(1, 5),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='f2f1897',
    change='approximation, after the same preview: the per-width error at T/2 over that at T reported (the '
    "approximation table's last column) and flagged in the atlas table where every width fell more than 1.2x in the "
    "last doubling (the bar declared with it), which the scope calls the optimiser's transient, not a rate in width; "
    'not a gate (the frozen gates stand)',
    outcome='reporting only: no outcome moves; at the preview sin with GELU and SwiGLU was flat in width (sup error '
    '~0.017 and ~0.06 from width 8 to 64) while every width still fell 1.7-5.7x in the last doubling',
    verdicts=(),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='675f7b7, 13b465b',
    change='what the loop buys over the cap (the shared regime, made during pass 0 after the first preview, before '
    'passes 1-3 were bought): rate extensions all or none -> verdict by verdict, cheapest first; then the order: '
    'edges of verdicts that can still pass, doublings, then edges of verdicts a remedy-less failure keeps invalid',
    outcome='no outcome is read through it directly; it chose the runs of passes 1-3 (every extension and doubling '
    "this report has, MoE top-1's rate 0.0033 among them); the loop stopped when no remedy was left, at 17,379 of "
    'the 18,000 reference-second cap',
    verdicts=(),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='a7f8714',
    change="the shared rate check, after the published run's judgement (advised by its cold review, stated for every "
    "study): a rate at its grid's edge fails `inside the grid` -> it passes, reported, where the verdict reads the "
    'same (statistic, outcome and each of its own checks) at every rate its point ran at T: no rate beyond can move '
    'what the point never moves. Here the 0.5 P-bit control cells store >= 99.87% of their facts at every rate '
    "0.01-0.9, and a cell's tuning loss is affine in its bits, so once it is full the loss falls with the rate and "
    'the edge can never settle',
    outcome='GELU storage invalid -> measured 2.26 [2.17, 2.35] and SwiGLU invalid -> measured 2.42 [2.36, 2.48] '
    '(their control cells gelu w160, swiglu w160 and w64 at the edge 0.9 after the two extensions); no other verdict '
    "moves (MoE top-1's control reads differently across its rates; the approximation edges move their exponents)",
    verdicts=(2, 3),
    to_positive=(2, 3),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='37f5a4d',
    change="the approximation's reporting, after the published run's cold review: the atlas table's transient flag "
    "reads the median width's T/2-over-T error ratio (was the least: sin GELU's width 16, worse at T (0.70x), "
    'hid three widths that fell 1.4-2.2x in the last doubling); the error table and figure give the geometric mean '
    'over seeds with its CI on the log (was the arithmetic mean, whose CI crossed zero off the log axis: sin ReLU '
    'width 8 [-0.057, 0.286]), and the T/2-over-T ratio of geometric means; reported, not gated',
    outcome='no outcome moves; flagged (median T/2 over T > 1.2x): sin ReLU 1.32x, sin GELU 1.54x, sin SwiGLU '
    '1.61x (was sin SwiGLU alone, 1.22x least); every teacher cell 1.00-1.11x, not flagged',
    verdicts=(),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='a7f8714',
    change="the shared ladder check, after the published run's judgement (its cold review): a measurement read at "
    'the budget its claim names prints its ladder check as n/a with the last doubling\'s move (was PASS "stable on '
    'the budget ladder" on numbers still rising 7.5-9.2% per doubling); the atlas table shows each ladder, T/4 / T/2 '
    '/ T, and for storage that move',
    outcome='wording only: no outcome moves (a measurement at its budget never rested on the ladder settling)',
    verdicts=(),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='64acd9f, aada324',
    change='wording after the second and third cold reviews of the published run: an invalid verdict whose every '
    'invalidating check names a priced next step reads "cannot decide the claim within the regime\'s limits" (was '
    '"cannot decide the claim (no extension remedies it)", which the priced steps beside it contradicted; shared,'
    " said for every study); the MoE ratios say ReLU's figure is interpolated between its widths and that a ratio"
    ' is an atlas result only where the verdicts it reads are measured; the provenance line names every training '
    "invocation's commit, its load where recorded and the reference step each timed; the why-not column prices "
    "one doubling once however two checks word it (teacher SwiGLU's total ~293 -> ~183 run-seconds); a tie's next"
    " step says more seeds need not settle it; an MoE arm's setup names its experts and top-k",
    outcome='wording only: no number or outcome moves',
    verdicts=(),
  ),
)
