"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

CHANGES = (
  base.DesignChange(
    date='2026-11-24',
    commit='6fd59c2',
    change='after the quick run: a density-settled check (end within 10% of halfway) beside the loss plateau, a '
    'descriptive learning-rate arm at the reference shape, and the full budget 1,500 -> 1,000 steps (quick: loss '
    'and density flat by 600)',
    outcome='no full-scale result before it; the first full run (2026-11-24 00:51, fixed rate 3e-3) passed both '
    'plateaus: not reproduced (0.428), reproduced (-0.039), reproduced (-0.220)',
  ),
  base.DesignChange(
    date='2026-11-24',
    commit='a7c388d',
    change='one fixed rate 3e-3 -> the rate tuned per ReLU shape on held-out bits over {3e-3, 1e-2, 3e-2} with '
    'separate T/2 runs; budget plateaus of the bits (0.05 bits) and of the density (10%) replace the last-two-logs '
    'and half-vs-end checks; full trimmed to d_ff 32/128/512, d_model 32/64, 4 seeds (was 5 d_ff, 3 d_model, 5 '
    'seeds)',
    outcome='(1) not reproduced 0.428 -> invalid 0.255; (2) reproduced -0.039 -> invalid -0.099; (3) reproduced '
    '-0.220 -> invalid -0.097 (rate at the grid top, plateaus failed)',
    verdicts=(1, 2, 3),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='d577e9b',
    change='ported to the regime policy: the runner tunes and extends the grid; the bits and density plateaus -> '
    'stability of each statistic from T/2 to T; the slope rules need a slope below -0.03 (was below 0); full: '
    'd_model 32/48/64, 8 seeds, cap 2,700 run-seconds',
    outcome='rerun 8a76dc2 (2026-11-26 07:16): invalid, invalid, invalid before and after (0.255, -0.099, -0.097 '
    '-> 0.250, -0.090, -0.002: rate 0.03 at the grid top, not stable)',
    verdicts=(1, 2, 3),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='27adef9',
    change='rate 0.1 added to the full starting grid; cap 2,700 -> 3,600 run-seconds',
    outcome='invalid x3 before and after (the same statistics, every rate inside its grid; the doubling of T '
    'priced over the cap)',
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='7814426',
    change='the ReLU arm compiled per d_ff (no padding to 512: -18% run-seconds) and the study run afresh on the '
    '2-core AMD EPYC (the Intel Xeon before): the same cap now paid for two doublings of T (1,000 -> 4,000)',
    outcome='(1) invalid 0.250 -> not reproduced 0.2065 [0.199, 0.214]; (3) invalid -0.002 -> invalid -0.532 '
    '(-0.071 at T/2: not stable)',
    verdicts=(1, 3),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='7814426',
    change='the same change, for the d_ff slope: two doublings of T (1,000 -> 4,000) within the cap',
    outcome='in that (since superseded) run: (2) invalid -0.090 [-0.118, -0.062] (not stable: -0.167 at T/2) -> '
    'reproduced -0.128 [-0.151, -0.105] (-0.0998 at T/2); the republication below reads it inconclusive',
    verdicts=(2,),
    to_positive=(2,),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='193de5c',
    change='full regime: at most 2 -> 4 doublings of T (after 2 the d_model slope still moved)',
    outcome='the same three outcomes and statistics; the loop ran the part of its next step that fits (rate 0.1 '
    'restored at d_model 64, 16 runs); (3) still invalid, its doubling (T = 8,000, ~2,497 run-seconds) over the cap',
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='42bf48d, 7af1152',
    change="issue 45: the T/2-vs-T stability check -> the runner's T/4, T/2, T ladder judged by kind (1 magnitude, "
    '2-3 sign), rate ties read at each tied rate, leave-one-seed-out; the init and learned checks are the '
    "verdicts' premises, learned raised from 0.1 to 1 bit below the unigram entropy (the project's one bar, set "
    "after the published 1.298 vs 3.866 were seen; it only demotes); the density's t intervals intersected with "
    '[0, 1]; the GELU/SiLU notes no longer print nan when ReLU has no run of their budget',
    outcome='published before: not reproduced, reproduced, invalid; republished 2026-11-27 from fresh runs '
    '(T/4, T/2, T = 500, 1,000, 2,000): not reproduced, inconclusive (rate tie), inconclusive',
    verdicts=(1, 2, 3),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='5256e8a',
    change='after a cold review of the republication: verdict 1 gets a positive control as its premise (the '
    'setup can produce a density below 10%: the sparsest ReLU shape it trains, at its chosen rate, has its CI '
    'below 10%), as issue 45 requires of every refutation; the report adds the fixed-rate slope table, an '
    'emergence note and the distance of every chosen point from the entropy floor, and names in words the '
    'rate-tie and parametrisation caveats of verdicts 2-3; the same runs, judged again (--judge_only)',
    outcome='(1) not reproduced 0.2245 -> invalid: the sparsest shape at its chosen rate ends at about 0.18, its '
    'CI above 10% (no run of this setup reaches 10%); (2), (3) unchanged',
    verdicts=(1,),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='5fb2a04',
    change="issue 47's redesign, after the republication and its cold review: the d_ff and d_model slopes read "
    'with every size of an axis at one shared rate per budget (base.Claim(rate=common); was: each size at its own '
    'tuned rate, where a tie on held-out bits at one size set the d_model slope: -0.53 or -0.04); d_model over 4x '
    '(32, 64, 128; was 32, 48, 64); the full cap 3,600 -> 7,200 reference-seconds for d_model 128. Set before '
    'any run of this design; the fixed-rate table of the republished report (the slope at each shared rate) had '
    'been seen',
    outcome='republished 2026-11-27 (each size at its own rate; d_model 32, 48, 64): (2) inconclusive -0.0998 '
    '[-0.119, -0.080] (a rate tie), (3) inconclusive -0.071 [-0.132, -0.010] -> the first full run of this design '
    '(2026-11-28, T = 1,000, no doubling; the shared rate at T 0.03 for d_ff, 0.01 for d_model): (2) reproduced '
    '-0.091 [-0.117, -0.064], (3) reproduced -0.248 [-0.297, -0.199]; both null -> positive by a change made after '
    'the fixed-rate table was seen (it read -0.43 to -0.47 for d_model), as issue 47 asked: the reading at one '
    'rate is the one the cold review proposed, and in the standard parametrisation one Adam rate is a larger step '
    'for a wider model, so (3) is a slope of size and step together',
    verdicts=(2, 3),
    to_positive=(2, 3),
  ),
  base.DesignChange(
    date='2026-11-28',
    commit='7e75b2c',
    change="after the redesign's first run and its cold review: a machinery rule (every claim read at one shared rate, "
    'only this study declares one): such a verdict stands only where each point at its own tuned rate gives the '
    "same decided outcome (checks.rate_policy), else inconclusive; the report adds each axis's slope at its sizes' "
    'own rates, marks the rates the verdicts read in the fixed-rate table, draws the shared-rate points in the '
    "figure; verdict 1's budget and the doublings its control would need named; wording (Setup, scopes)",
    outcome='(3) reproduced -0.248 [-0.297, -0.199] at the shared rate -> inconclusive (each size at its own tuned '
    'rate: +0.151 [+0.098, +0.205]); (1), (2) unchanged',
    verdicts=(3,),
  ),
)
