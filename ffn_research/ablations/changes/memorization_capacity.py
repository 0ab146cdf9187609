"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

CHANGES = (
  base.DesignChange(
    date='2026-11-24',
    commit='8f2cac4',
    change=(
      'after the review of the 2026-11-22 run (issue 18 item 1): d_model 2-8 with trainable embeddings (the FFN '
      '11-30% of the parameters) and a fit through the origin -> d_model 16 with frozen embeddings, bits per '
      'non-embedding parameter at the peak over N per size, a rate per point, check (a) bits proportional to '
      'params (slope CI containing 1) and (b) the peak inside the N grid; the random-label check made able to fail '
      '(N up to 2,048 above the 1,153 parameters); the SwiGLU, 4-expert MoE and bits-per-FFN-parameter verdicts '
      'dropped'
    ),
    outcome=(
      '2026-11-22: 2 bits at 1,000 exposures inconclusive (1.601 [1.485, 1.716]), 1 bit at 100 reproduced (0.969 '
      '[0.869, 1.069]), random labels reproduced -> 2026-11-24 01:10: invalid (1.446, slope 1.16 [1.03, 1.29]), '
      'inconclusive (0.823 [0.662, 1.024]), reproduced'
    ),
    verdicts=(1, 2, 3),
  ),
  base.DesignChange(
    date='2026-11-24',
    commit='2c049e5',
    change=(
      'after the quick run of the rewrite (per-seed best rates scattered over flat optima): the rate and the peak N '
      'chosen on the mean over seeds (was per seed); the rate grid {0.01, 0.03, 0.1, 0.3}; check (a) also passes a '
      'slope CI inside 1 +- 0.1 (was: containing 1 only)'
    ),
    outcome='quick run only (1.47 [1.36, 1.58], slope 1.15 [1.07, 1.23]: check (a) failed before and after)',
    verdicts=(1, 2),
  ),
  base.DesignChange(
    date='2026-11-24',
    commit='5539326',
    change=(
      'after the dense-only full run (01:10): MoE arms added (16 experts of width 1-3, top-1 and top-2, rates '
      '{0.03, 0.1, 0.3}) with rule 3, MoE / dense peak bits per total parameter at matched size >= 1/1.3'
    ),
    outcome='new verdicts: top-1 0.295 [0.225, 0.387], top-2 0.573 [0.456, 0.720], both invalid (rate at the bottom)',
    verdicts=(4, 5),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='372b939',
    change=(
      'port to the regime policy after the 2026-11-24 report: check (a) also needs a CI narrower than 0.3 and the '
      'MoE verdicts no longer rest on an MoE slope (top-1 had passed on [0.25, 1.46]); (b) also fails a peak at the '
      'smallest N; the plateau and edge checks replaced by the stability and inside-grid checks; rule 3 a paired t '
      'on per-seed mean log ratios -> a ratio of means with a BCa CI; MoE rates {0.03, 0.1, 0.3} -> {0.003, 0.01, '
      '0.03} (0.03, the bottom, had been chosen at every MoE size); 3 -> 5 seeds; d_ff 128 and 256 added'
    ),
    outcome=(
      '2026-11-24: invalid, invalid, reproduced, invalid, invalid -> 2026-11-26 20:30 (with the next change): the '
      "same outcomes (1.577, 0.873, 1.000, 0.354, 0.595; rates at the grid's top)"
    ),
    verdicts=(1, 2, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='d46b16c',
    change=(
      'sizes d_ff 16..256 -> 32, 64, 128: d_ff 16 dropped because bits per parameter still rose with size in the '
      '2026-11-24 run (1.28 -> 1.49 -> 1.58, slope 1.16), d_ff 256 and MoE widths 2-3 dropped for cost; cap 18,000 '
      '-> 3,600 run-seconds'
    ),
    outcome=(
      'check (a) fails -> passes (E = 1,000 slope 1.16 [1.04, 1.28] -> 1.05 [1.01, 1.09]; E = 100 1.11 [1.03, '
      "1.20] -> 0.971 [0.949, 0.993]); verdicts 1 and 2 stay invalid, now on rates at the grid's top; a "
      "precondition of verdict 2's reproduced of 2026-11-27"
    ),
    verdicts=(1, 2, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='3755063',
    change=(
      "after the 20:30 run chose its grid's top at every E = 1,000 and MoE point and at five of nine E = 100 "
      'points: rates one step up (E = 1,000 {0.03, 0.1, 0.3}, E = 100 {0.01, ..., 0.3}, MoE {0.01, 0.03, 0.1}); the '
      "150 runs at rates no longer in a grid moved out of the report's folder"
    ),
    outcome=(
      'invalid (rates at the top) x4 -> 21:38 run: E = 1,000 invalid (1.583; three points at the top rate, T/2 1.46), '
      'E = 100 invalid (0.873 [0.786, 0.970], T/2 0.736: stability), MoE invalid on rate edges only (rule alone not '
      'reproduced, 0.350 and 0.588)'
    ),
    verdicts=(1, 2, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='6ce6dc9',
    change=(
      "after the 21:38 run: a rate edge at an N that cannot be its size's peak at any rate (N log2 V below the "
      "size's peak bits at another N) passes the inside-grid check (Verdict.settled); with it the resumed pass "
      'added rate 0.0033 for MoE top-1 at N = 512'
    ),
    outcome=(
      'MoE top-1 / top-2 invalid -> not reproduced (0.350 [0.319, 0.367], 0.588 [0.559, 0.615]; 22:36 run); '
      'verdict 1 stays invalid (stability)'
    ),
    verdicts=(1, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='ab89046',
    change=(
      'after the 21:38 run stopped at the cap: the regime loop runs the part of an over-cap extension that fits '
      '(rate extensions first, then the doublings of verdicts whose rates are settled, cheapest first; 1b5b0e1 and '
      'ab89046)'
    ),
    outcome=(
      'E = 100: invalid (0.873 at T = 400) -> invalid at T = 800 (0.980 [0.923, 1.04], T/2 0.873; Xeon, 22:36) -> '
      'reproduced 1.026 [0.958, 1.098] at T = 1,600 (fresh run on an AMD EPYC, 2026-11-27 02:25, where pass 0 '
      'cost fewer run-seconds and the doubling fit the cap)'
    ),
    verdicts=(2,),
    to_positive=(2,),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='42bf48d',
    change=(
      'issue 45 (the ladder and intervals in 42bf48d, the premises in the commit that adds this entry): every '
      "verdict judged on the budget ladder T/4, T/2, T by its kind (was: stable from T/2 to T); the MoE ratio's CI "
      "a t CI of the log ratio below 10 seeds (was BCa from 5 seeds); the random-label fraction's CI on the logit "
      'scale (tried, then dropped for the t interval cut at [0, 1]); premise (d) for the MoE verdicts (experts '
      '>= 8 wide, router < 10%, sizes inside the dense range); '
      'the smoke scale adds E = 1,000'
    ),
    outcome=(
      'from the published numbers: MoE top-1 and top-2 not reproduced -> invalid (experts 1 wide; the router 512 '
      'of 2,128 total = 24% and of 658 / 756 active parameters; 2,128 below the dense range [2,192, 8,528]); '
      'verdicts 1-3 keep their premises (slopes 1.05 [0.985, 1.11] and 0.999 [0.965, 1.03]; 0.168 fitted at '
      'N = 2,048)'
    ),
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='2749953',
    change=(
      'the issue-45 republication: fresh runs judged on the ladder with premises (no rule changed for it); '
      'verdict 2 is judged where the loop stopped, T = 400: a learning-rate tie at T (tied rates move the '
      "statistic by at most 0.013, but one flips it to reproduced) withheld the doubling under the runner's tie "
      'rule, though the ladder itself had not settled and 1,195 of 5,356 run-seconds were left'
    ),
    outcome=(
      'verdict 1 invalid -> inconclusive (1.571, in its noise band); verdict 2 reproduced (1.026 at T = 1,600 in '
      "the old run) -> inconclusive (0.869 at T = 400): the loop's stop, not evidence against the claim; 4-5 not "
      'reproduced -> invalid (premise)'
    ),
    verdicts=(1, 2, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='801670f',
    change=(
      "after the republication above: the runner's tie rule (regime.stability, now checks.stability) withholds "
      'the doubling only when a tied rate, read in its rung, makes the ladder stable (was: whenever a tie changed '
      "any rung's outcome); verdict 2's ladder (0.42, 0.73, 0.87) had not settled at any rate, so the loop "
      'resumed the same runs and doubled T for the E = 100 points within the cap; no rule, threshold or run '
      'changed otherwise. Changed after seeing this verdict stop; the only published verdict the rule touches'
    ),
    outcome=(
      'verdict 2: inconclusive at T = 400 (a tie withheld the doubling) -> the loop doubled T twice within the cap '
      '(400 -> 1,600; 5,604 run-seconds here): 1.026 [0.958, 1.098] on a stable ladder (0.869, 0.982, 1.026), '
      "but still inconclusive, now on a tie at T/4 that flips that rung's own outcome (0.8689 inconclusive -> "
      '0.8613 reproduced at a tied rate) and leaves the ladder as it is'
    ),
    verdicts=(2,),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='649d2ca',
    change=(
      "after that resumed run: the runner's tie check (checks.rate_tie) counts a tie as deciding a verdict when it "
      "changes the outcome at T or, read in its rung, whether the ladder is stable; a lower rung's own outcome is "
      "not the verdict (was: any rung's outcome). The second change to the tie rules made after this verdict was "
      'seen, and again it is the verdict that gains: a reader should weigh it so. The reason is the claim kinds: '
      "a magnitude claim is judged at T on the ladder's values, and at T every tied rate gives reproduced here "
      '(1.012 at the one tie at T)'
    ),
    outcome='verdict 2: inconclusive (tie at T/4) -> reproduced 1.026 [0.958, 1.098] at T = 1,600',
    verdicts=(2,),
    to_positive=(2,),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='3c4b2cd',
    change=(
      "issue 46's redesign, after the MoE verdicts were invalid on premise (d) and a review read 1,000 full-batch "
      'steps as "1,000 exposures" only loosely: the E = 1,000 arms train 8,000 steps of batch N/8 (was 1,000 of '
      'batch N); the MoE arm is 4 or 12 experts 8 units wide (2,416 and 7,152 parameters, inside the dense range, '
      "the router 5%; was 16 experts 1 wide, 2,128 parameters, the router 24%), with the dense arm's batches and "
      'a table per active parameter; the full cap 3,600 -> 7,200 reference-seconds for the longer runs'
    ),
    outcome=(
      'E = 1,000: inconclusive 1.57 [1.49, 1.65] at 1,000 full-batch steps -> invalid 1.72 [1.68, 1.77] at 8,000 '
      'steps of N/8 (the rule alone: reproduced; with the tie check, inconclusive: two tied rates at T/2 unsettle its '
      'ladder; invalid: the rate, 0.03, is the bottom of the grid at 8 of 9 points, and a lower rate may raise it); '
      'MoE top-1: invalid (premise (d)) -> invalid 0.516 [0.486, 0.548] (premise (d) passes; the rule alone: not '
      'reproduced, but no evidence either way: its rates sit at the bottom of the grid, where one step down in rate '
      'raised the bits by 16-127% per point); MoE top-2: invalid (premise (d)) -> invalid 0.788 [0.751, 0.826] (the '
      'rule alone: inconclusive; the 4-expert peak not bracketed, rates at the bottom of the grid). Its first run '
      '(fresh workdir, '
      '2026-11-27 20:23-23:00 UTC) spent the whole cap in pass 0 (6,976 run-seconds against 6,732), so no '
      'extension ran (the next: 0.01 below the dense grid, 0.0033 below the MoE grid and E = 100 doubled to 800 '
      'steps, ~2,519 run-seconds); and '
      'E = 100, whose design did not change, stopped at T = 400: reproduced 1.026 at T = 1,600 -> inconclusive 0.869 '
      '[0.794, 0.951] at T = 400, the doubling its ladder needs not bought'
    ),
    verdicts=(1, 2, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='4f256e7',
    change=(
      'after the report above (stopped by the cap before any extension): the E = 1,000 dense grid 0.03, 0.1, 0.3 '
      '-> 0.01, 0.03, 0.1 and the MoE grid 0.01, 0.03, 0.1 -> 0.003, 0.01, 0.03 (the rates the regime would have '
      'added next, at the bottom edge where 8 of 9 dense and 6 of 12 MoE points chose; the runner still extends an '
      'edge), and the 4-expert MoE N grid 256, 512, 1,024 -> 256 ... 2,048 (its top-2 bits still rose 7.1% at '
      '1,024, so its peak was not bracketed). No rule, claim or threshold changed'
    ),
    outcome=(
      'not yet run; before: E = 1,000 invalid 1.72 [1.68, 1.77]; MoE top-1 invalid 0.516; MoE top-2 invalid 0.788'
    ),
    verdicts=(1, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='f042e80',
    change=(
      "after this redesign's full run (MoE top-1 not reproduced, 0.508 [0.481, 0.537]; top-2 invalid on rate "
      "edges), before publishing: issue 46's routing premise as the positive control a refutation of verdicts 4-5 "
      'needs (storage.routing_check): at every MoE size the MoE stores more than a dense FFN of its active size '
      'would, MoE peak bits over (the dense bits per parameter at the active size, clamped below the dense range, '
      'where bits are proportional to size) x active parameters, its CI lower end above e^0.1; failed, a not '
      'reproduced is invalid with its numbers. Also the 4-expert N grid in the MoE scope corrected to 256 ... 2,048 '
      '(the grid since 4f256e7; the scope still said 256 ... 1,024)'
    ),
    outcome='no outcome moves: top-1 passes it (it stores 1.94x [1.79, 2.10] and 3.32x [2.92, 3.78] the dense bits '
    'of its active size, 4 and 12 experts), top-2 is invalid on its rate edges either way',
    verdicts=(4, 5),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='75248e2',
    change=(
      'after a cold review of this run, before publishing: the routing premise is no positive control (it passes '
      'any MoE keeping about 0.34 (4 experts) or 0.15 (12 experts) of dense bits per total parameter, far below '
      '1/1.3): an MoE refutation now also needs the same experts with routing given to keep >= 1/1.3, not built '
      '(checks.refutation_guard: invalid with its numbers per MoE size; the control, a hash or frozen router beside '
      'dense d_ff 8 and 16, about 1,800 run-seconds at T here and 4,900 with its ladder); scopes: verdict 1 a lower '
      "bound (its ladder still rises), verdict 2's ladder mixes budget and batch, the MoE premise says both checks "
      "were added after the result; the docstring's rate grids brought up to date"
    ),
    outcome='MoE top-1 not reproduced 0.508 [0.481, 0.537] -> invalid (no positive control; 0.586 at 4 experts, '
    '0.434 at 12); the others unchanged (same runs, judged again)',
    verdicts=(4, 5),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='311719a',
    change=(
      "the MoE refutations' positive control built (the published report: top-1 invalid 0.508, no control; top-2 "
      'invalid): the same MoE at the smaller size (4 experts of width 8) routed by a hash of the token ids '
      '(model.moe.router = token_hash, new: a fact goes to the expert its subject and relation ids hash to, '
      'fixed through training), top-1 and top-2, the same N grid (256 ... 2,048), rates, batches and budgets; rule '
      "3 on it must reproduce for rule 3's not reproduced to stand (checks.refutation_control), else invalid with "
      'both numbers; one size only, for the cap, which rises 7,200 -> 9,000 reference-seconds (the published run '
      'spent 7,980 without the control; the control adds 2 x 4 arms of the 4-expert MoE, about a third of the MoE '
      'cost). Every run is new (the runs of 2026-11-29 were lost with their machine)'
    ),
    outcome='never run: replaced before any run by the next row',
    verdicts=(4, 5),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='8419983 and the next',
    change=(
      'after a cold design review before the rerun (its published results seen; nothing of this design run): the '
      "control's token-hash MoE -> the same 4 experts with every one active (top-k = E = 4; one control for both k): "
      'the hash control is four disjoint 8-wide stacks, whose ratio to dense by width scaling alone (4^(1-s), s about '
      '1.1-1.17 below the dense range) sits on the 1/1.3 bar, so it was no known positive; the every-expert MoE, a '
      "ReLU FFN of width 32 whose four 8-unit groups the router's softmax weights scale (summing to 1), contains "
      'dense d_ff 32 plus 224 parameters and is expected near 0.9 (0.85-1.0: the published 4-expert MoE kept 0.59 at '
      'top-1, 0.85 at top-2); it exercises neither hard expert selection nor the load-balance loss, so a refutation '
      'reads "sparse top-k with 8-unit experts costs capacity", not separable from the narrow active width. Rate '
      'grids per MoE family: top-1 keeps {0.003, 0.01, 0.03}; top-2 {0.01, 0.03, 0.1} (the published top-2 chose '
      "0.03, the grid's top, at four points; the regime's extension there could not be bought); the control {0.01, "
      '0.03, 0.1, 0.3} (dense d_ff 32 ties at 0.1). Cap 9,000 -> 11,500 reference-seconds (priced for the two-family '
      'hash control: pass 0 about 9,500, now about 8,700-9,300 with one control family, plus likely rate edges and '
      'the E = 100 doublings; the published run spent 7,980 without a control): verdicts 1 and 2 may move when '
      "extensions run. Scope: the control covers the 4-expert size only. Not taken: a remedy for the control's check "
      "while its points sit at a rate edge (the regime buys such a verdict's edges last); a peak-inside check on the "
      'control; the hashed top-1 arm kept as a reported attribution of routing against width; a pilot of the control '
      'on separate seeds; an objects-only rescoring (the runs keep no checkpoints)'
    ),
    outcome=(
      'the run of 2026-11-30 17:01 -> 2026-12-01 00:09 UTC (4 invocations, 6946082 ... 5e906fc, and a fifth of 25 runs '
      'added by hand after its cold review, the next row; every run new, the '
      'configs and seeds of the published run): (1) reproduced 1.735 -> reproduced 1.735 [1.692, 1.779] (the same '
      'numbers); (2) inconclusive 0.873 at T = 400 (its doubling not bought) -> reproduced 1.027 [0.959, 1.100] at '
      'T = 1,600 (the two E = 100 doublings bought under the larger cap; ladder 0.873, 0.980, 1.027; of the '
      "verdict's earlier null -> positive rows, ab89046's partial extension and 649d2ca's tie rule did not act in "
      'this run: the cap was not reached, and no tied rate changes a rung); (4) invalid '
      '0.508 (no control) -> not reproduced 0.508 [0.481, 0.537] (Holm 0.0006), its control, every expert active, '
      '0.943 [0.878, 1.013] reproduced; (5) invalid 0.792 (rate edges at 0.03) -> inconclusive 0.792 [0.764, 0.820] '
      '(0.1 in its grid, so no top edge; the CI contains 0.769, and a tied rate fails the tie check; its bottom '
      'edge at one point: the next row)'
    ),
    verdicts=(1, 2, 4, 5),
    to_positive=(2,),
  ),
  base.DesignChange(
    date='2026-12-01',
    commit='a7f8714 (the rule); this row (the runs)',
    change=(
      'the shared rate-edge rule of a7f8714 (judge._immaterial_edges: a failed rate-edge check passes, reported, '
      'where the verdict reads the same at every rate its point ran at T), committed during this run (17:37, after '
      "its first invocation began at 17:01; made after the capacity atlas's results, before any result of this run "
      'was read), waived two edges here: e100_n512: d_ff=32 at 0.03, the bottom of {0.03, 0.1} at T = 1,600 (verdict '
      '2), and moe_k2_e1000_n512: experts=4 at 0.01, the bottom of {0.01, 0.03, 0.1} (verdict 5). A cold review of the '
      "run found the waiver holds by construction at a point that is not its size's peak (read at a worse rate it "
      'never becomes the peak), though a rate past the edge might make it one; neither point is excluded by the '
      "study's own rule (`settled`: 4,096 bits of facts above the peaks, 2,213 and 3,463). So the two one-point "
      'rate extensions the rule as frozen would have bought were added to the regime state by hand (0.01 restored '
      'at the first, 0.003 added below the second) and run from the same clean commit (5e906fc, 2026-12-01 00:22; 25 '
      'runs, 84 s); the loop then judged as before. The rule itself is unchanged (it still waives such an edge in '
      'other studies: a known limit, docs/reproduce.md)'
    ),
    outcome=(
      'no outcome moves; both checks now pass inside their grids under the rule as frozen and under a7f8714 alike '
      '(e100_n512: d_ff=32 chose 0.03 inside {0.01, 0.03, 0.1}; moe_k2_e1000_n512: experts=4 chose 0.01 inside '
      '{0.003, 0.01, 0.03, 0.1}); verdicts 2 and 5 keep 1.027 [0.959, 1.100] and 0.792 [0.764, 0.820], and no '
      'edge of this report is waived by that rule'
    ),
    verdicts=(2, 5),
  ),
)
