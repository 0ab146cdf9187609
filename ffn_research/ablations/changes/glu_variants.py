"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

_REWRITE = (
  'one-layer model with biases, fixed rate 3e-3, 5 seeds, 800 steps, no regime checks, no Holm, rank by a seed '
  "bootstrap -> bias-free 2-layer transformer, 10 paired seeds, each seed's best of a 3-rate grid, an early "
  '(step 250) and a plateau (step 1,000) budget read from constant-rate runs, regime checks (rate edge, floor and '
  'ceiling, plateau), Holm, rank by permutation test'
)
_LADDER = (
  'stability: the outcome kept from T/2 to T with a change under half the distance to the boundary -> the ladder '
  "T/4, T/2, T judged by the claim's kind (sign: the same decided outcome at every budget); rank p by 10,000 "
  'Monte-Carlo orders -> exact over all 8! orders; premises computed (learning happened, no variant at its floor; '
  'teacher-student Bilinear: the best quadratic beats ReLU)'
)
CHANGES = (
  base.DesignChange(
    '2026-11-23',
    'd87574e',
    _REWRITE,
    'language SwiGLU and Bilinear inconclusive -> reproduced (early budget: -0.066, -0.049 bits)',
    verdicts=(2, 3),
    to_positive=(2, 3),
  ),
  base.DesignChange(
    '2026-11-23',
    'd87574e',
    f'(the same change) {_REWRITE}',
    'language GEGLU reproduced (-0.010 at 800 steps) -> reproduced (-0.068 early, invalid at the plateau); '
    'language family and ordering reproduced -> invalid (rate edge); teacher-student GEGLU reproduced -> '
    'inconclusive; Bilinear not reproduced -> not reproduced (+0.056); family not reproduced -> invalid; ordering '
    'reproduced (bootstrap CI of rho) -> invalid',
    verdicts=(1, 4, 5, 6, 8, 9, 10),
  ),
  base.DesignChange(
    '2026-11-26',
    '3d4dfbe',
    "the regime policy (issue 29): each seed's best rate, early and plateau budgets of constant-rate runs, "
    'per-seed rate-edge and 10% plateau checks, Holm over the valid verdicts -> one rate per variant tuned on the '
    'mean over seeds, a cosine-decayed run per budget (language grid + 4e-4, teacher-student grid x sqrt(3) around '
    '5e-3), one verdict per claim and task judged by doubling T, Holm over all ten',
    '15 verdicts (3 reproduced, 1 not reproduced, 2 inconclusive, 9 invalid) -> 10 (first regime run: 8 invalid, '
    '2 not reproduced); language GEGLU, SwiGLU, Bilinear reproduced (early) -> invalid (floor, stability); '
    'teacher-student family invalid (+0.013) -> not reproduced (+0.040)',
    verdicts=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
  ),
  base.DesignChange(
    '2026-11-26',
    '3d7e8ae',
    'the regime loop extends every verdict with a failed check until the cap -> only verdicts whose every failed '
    'check has a remedy (regime.fixable); resumed after the cap-stopped report a66122e',
    'a66122e: all 10 invalid (cap) -> teacher-student extended (rate 0.135, T 8,000): Bilinear not reproduced '
    '(+0.154 [+0.138, +0.171]), family not reproduced (+0.040 [+0.034, +0.047]); the other 8 invalid',
    verdicts=(8, 9),
  ),
  base.DesignChange(
    '2026-11-26',
    'd6ed0aa',
    'stability of an outcome inconclusive at T/2 and T: its change under half the distance to the boundary -> '
    "under half its CI's half-width at T",
    'teacher-student GEGLU invalid -> inconclusive (-0.0052 [-0.0176, +0.0071]); teacher-student ordering invalid '
    '-> inconclusive (rho 0.048)',
    verdicts=(6, 10),
  ),
  base.DesignChange(
    '2026-11-26',
    '8c5dcfd',
    'language V 16, 8 candidates (every variant within 0.012 bits of the entropy floor at T = 2,000) -> '
    "expansion_ratio's V 64, 16 candidates; model, rates, seeds and budgets unchanged",
    'language 1-5 invalid (floor; GEGLU - ReLU -0.0014) -> 1-4 invalid on stability with the rule reproduced at T/2 '
    'and T (GEGLU - ReLU -0.149 -> -0.051 bits), 5 inconclusive (rho 0.86, Holm p 0.050)',
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    '2026-11-27',
    '42bf48d',
    _LADDER,
    'the republication of 2026-11-27 (fresh runs, T = 1,000 at every language point: the ladder passed at T, no '
    'doubling): language 1-4 invalid (stability, T = 2,000) -> reproduced (GEGLU - ReLU -0.150 [-0.170, -0.131] '
    'bits; -0.110, -0.521, -0.150 at T/4, T/2, T); 5 inconclusive -> inconclusive (exact p 0.0109, Holm 0.065)',
    verdicts=(1, 2, 3, 4, 5),
    to_positive=(1, 2, 3, 4),
  ),
  base.DesignChange(
    '2026-11-27',
    '42bf48d',
    f'(the same change) {_LADDER}',
    'the republication of 2026-11-27: teacher-student Bilinear not reproduced (+0.154) -> invalid (premise: the '
    'best quadratic does not beat relu); SwiGLU invalid -> inconclusive (undecided at T = 8,000); the gated '
    'family not reproduced -> invalid (the rule inconclusive at T/4 = 2,000, no doubling left)',
    verdicts=(7, 8, 9),
  ),
  base.DesignChange(
    '2026-11-27',
    '',
    "after the republication's cold review: the teacher-student gated family (9) also gated on verdict 8's premise "
    '(its mean holds Bilinear, about 0.029 of its +0.040); the rank verdicts (5, 10) judged as magnitude claims '
    '(rho >= 0.5), not sign claims; the language scope says T = 1,000 is an early-training budget',
    'no outcome moved: 9 invalid (now also on the premise), 5 and 10 inconclusive (their ladders settle: +0.071, '
    '+0.024)',
    verdicts=(5, 9, 10),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='5705583',
    change=(
      "issue 47's redesign, after the published report (language 1-4 reproduced at T = 1,000, an early-training "
      'comparison: GEGLU - ReLU -0.110, -0.521, -0.150 bits at 250, 500, 1,000 steps, and -0.149 at 1,000, -0.051 '
      'at 2,000 in the superseded run of 2026-11-26: every variant near the floor, the gap shrinking about 3x per '
      'doubling; the tanh teacher not neutral between the families): the language V 64, 16 candidates, 4 next '
      'tokens, Dirichlet 0.5 (1,024 contexts) -> the capacity-limited one (ablations/languages.py: V 128, 128 '
      "candidates, 2 next tokens, Dirichlet 0.2; 16,384 contexts), chosen from expansion_ratio's pilot (reducible "
      'share 0.63 and 0.49 at 38,000 and 76,000 non-embedding parameters of its 1-layer model at 3,200 steps), not '
      'from any glu_variants run; the budget T = 1,000 with up to 2 doublings -> one budget T = 2,000 fixed before '
      "the run, no doublings (the largest language budget this study's superseded designs ran, not tuned on any "
      'result of this design); the teacher-student proxy (5 verdicts) -> dropped: no teacher is known to be neutral '
      'between gated and plain FFNs (a tanh teacher fitted by one-layer students asks which family approximates '
      'tanh; a deeper student on a random-network teacher favours whichever activation the teacher uses), and '
      "Shazeer's claim is about language modelling; the cap stays 7,200 reference-seconds (the first pass is "
      'estimated at ~4,800: ~4,400 training, ~300 compiling and evaluation, and one exact stationary solve per seed '
      '(~8 each) since the solve is cached per chain); the verdicts 1-5 language, 6-10 teacher-student -> 1-5 '
      'language. Then, before any result of this design was read: the start context drawn by inverse CDF '
      '(task.start_draw, for cost; 6d8d9f4), and, while its first run ran (started 09:57 at f495f2c), a refutation '
      'guard (a second premise: for a `not reproduced`, a positive control that the setup orders two FFNs whose '
      "order is known; none in this design, so a refutation is invalid), after expansion_ratio's cold review "
      'refused a refutation without one; then, the run stopped with 640 of its 960 first-pass runs on disk and none '
      'of their results read (its log prints verdicts only at the end), that fixed guard -> a measured control '
      'point, ReLU at half the FFN width (d_ff 64; its own tuned rate, the same seeds and budgets; 120 more '
      'first-pass runs), which must lose to ReLU by the paired rule for a refutation to stand (the next step the '
      "guard named; e962958). The 640 runs were trained at f495f2c, the other 440 at 0624078 (the eight variants' "
      'training configs identical at both); the first invocation stopped because the session running it ended (the '
      'process died with it), not by a decision about the run'
    ),
    outcome=(
      'run 2026-11-29 (1,080 runs): 1-4 reproduced -> reproduced (GEGLU - ReLU -0.150 [-0.170, -0.131] bits at T '
      '= 1,000 -> -0.316 [-0.353, -0.278] at T = 2,000); 5 inconclusive -> reproduced under the rule of the time '
      '(rho 0.81, exact one-sided p 0.0109: the same rho and p as before; its Holm p 0.065 over 10 verdicts -> '
      "0.0109 over 5, the family halved by dropping the proxy, a decision made after the proxy's results were "
      'seen; the next row moves it back). Before (the report of 2026-11-27, language T = 1,000): GEGLU, SwiGLU, '
      'Bilinear vs ReLU reproduced (-0.150 [-0.170, -0.131], -0.148 [-0.166, -0.130], -0.165 [-0.187, -0.142] '
      'bits), the gated family reproduced (-0.106 [-0.115, -0.097]), the ordering inconclusive (rho 0.81, p 0.011, '
      'Holm 0.065); teacher-student (T = 8,000; dropped): GEGLU and SwiGLU inconclusive (-0.005, +0.006 ln(1 - '
      'R^2)), Bilinear invalid (+0.154; premise: the best quadratic does not beat ReLU), the gated family invalid '
      '(+0.040; the same premise), the ordering inconclusive (rho 0.05)'
    ),
    verdicts=(1, 2, 3, 4, 5),
    to_positive=(5,),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='2ec1819',
    change=(
      "after this design's run and its cold review: the rank rule (rules_lib.rank_agreement) reproduced if rho >= "
      '0.5 (the point estimate) with one-sided permutation p < 0.05 -> if the 95% CI of rho lies at or above 0.5 '
      'with that p (the claim is a magnitude, rho >= 0.5, and the point estimate does not show it); a stricter '
      'rule, not toward the paper. Beside it, wording only: a refutation control that is not needed says so on '
      'every verdict; the scope says the budget is early training; the claim says the family comparison is this '
      "project's summary of Table 1 and that Table 1 is T5's span-corruption loss; the notes give the excess share, "
      "the gaps' move from T/2 to T, GELU alone against ReLU and the rates; a table of the gate alone (each gated "
      'variant minus the plain one with its activation)'
    ),
    outcome=(
      '5 reproduced (rho 0.81, Holm p 0.0109) -> inconclusive (its CI [0.115, 0.973] reaches below 0.5); 1-4 '
      'unchanged (reproduced)'
    ),
    verdicts=(5,),
    to_positive=(),
  ),
)
