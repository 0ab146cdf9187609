"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

CHANGES = (
  base.DesignChange(
    date='2026-11-24',
    commit='a85f747',
    change='levels of the late-training max/mean load on 16 Zipf-skewed input clusters (collapse > 2, Switch and '
    'bias < 1.5), z-loss at no quality cost -> the change of max/mean load from step 0 on uniform inputs against a '
    'frozen-router control, z-loss under an induced instability with a premise (the skew alone forced a max/mean '
    'of 2.4)',
    outcome='run of 2026-11-22 10:14 (4e09386) -> 2026-11-24 01:59 (8ec5d9e): collapse reproduced (3.11) -> '
    'reproduced (+0.385); Switch reproduced (1.32) -> reproduced (-0.526); z-loss inconclusive -> inconclusive; '
    'bias reproduced (1.27) -> reproduced (-0.606)',
    verdicts=(1, 2, 3, 4),
  ),
  base.DesignChange(
    date='2026-11-24',
    commit='df9e5e6',
    change='every arm at Adam 3e-3, plateau on the last two logs -> rate tuned per arm over 1e-3 / 3e-3 / 1e-2 at T '
    'and T/2 (e2a5c9d), gated on the rate inside the grid and 10% plateaus of held-out MSE and load',
    outcome='run of 2026-11-24 10:18 (93abf3b): collapse reproduced (+0.385) -> invalid (+0.285); Switch '
    'reproduced -> invalid (-0.533); z-loss inconclusive -> inconclusive; bias reproduced -> invalid (-0.492): '
    "every trained arm at the grid's top",
    verdicts=(1, 2, 4),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='6681d80',
    change='collapse = any rise (CI above 0) -> a rise above +1 max/mean; trained grid + 3e-2, frozen router not '
    'tuned; z-loss arms at 0.1 / 0.3 / 1 / 3 -> one arm per rate through 0.07 ... 0.3 with a marginal-instability '
    'premise; plateaus -> T/2-vs-T stability of each statistic; 16 seeds',
    outcome='run of 2026-11-26 04:59 (246af57): collapse invalid (+0.285) -> invalid (+0.014; the rule alone: not '
    'reproduced); Switch invalid -> invalid (-0.126); z-loss inconclusive -> invalid (-0.19); bias invalid -> '
    'invalid (-0.067)',
    verdicts=(1, 2, 3, 4),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='4526db6',
    change='load arms on centred inputs N(0, I) (where +0.014 had been seen) -> inputs c + N(0, I), one offset per '
    'seed (a bias-free router on centred inputs cannot collapse); trained grid + 0.1; cap 2,700 -> 3,600 '
    'run-seconds; the z-loss arms unchanged (runs reused)',
    outcome='run of 2026-11-26 22:25 (43a6b55): collapse invalid (+0.014) -> reproduced (+2.28); Switch invalid '
    '(-0.126) -> reproduced (-5.20); z-loss invalid -> invalid (same runs); bias invalid (-0.067) -> reproduced '
    '(-5.47)',
    verdicts=(1, 2, 4),
    to_positive=(1, 2, 4),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='42bf48d, 638efba',
    change='verdict 1 had no premise -> gated on room for a collapse (E - step-0 load, CI above 1); the z-loss '
    "verdict's two existing checks marked as its premises; table CIs kept inside each quantity's range; the "
    "runner's T/2-vs-T check -> the T/4, T/2, T ladder by kind, rate ties at every budget, leave-one-seed-out "
    '(issue 45)',
    outcome='the republication of 2026-11-27 (same statistics): collapse and Switch reproduced -> reproduced '
    '(premise: room 3.61); z-loss invalid (stability) -> inconclusive (undecided at T); bias reproduced -> '
    'reproduced (a rate tie on raw MSE had made it inconclusive until ties were tested on log MSE)',
    verdicts=(1, 3, 4),
  ),
  base.DesignChange(
    date='2026-11-28',
    commit='8e8618b',
    change=(
      'issue 46 item 5, after the cold review of the published run (collapse, Switch and bias reproduced on a '
      'one-teacher task a single expert can fit, with the offset added after centred inputs gave +0.014; z-loss '
      'inconclusive on 16 seeds, its test rate chosen on the seeds it reads, instability counted by the router-logit '
      'size the z-loss penalises): the load arms on three inputs, the routing task (8 clusters, a teacher each) with '
      'an offset (verdicts 1, 2, 4) and centred (a new verdict 5), and the published one-teacher design kept as the '
      'control a refutation of collapse needs; the z-loss arms with the router in bfloat16, unstable = diverged only, '
      '64 seeds, the test rate fixed on 16 pilot seeds no verdict reads'
    ),
    outcome=(
      'before: collapse reproduced (+2.28), Switch reproduced (-5.20), z-loss inconclusive (-0.19), bias reproduced '
      "(-5.47) -> after: the redesign's first full run (2026-11-29 02:57, 73f1dd7; not published, its report is "
      "history.md's section of that date): all five invalid: collapse on offset -0.143 [-0.502, +0.216] (the rule "
      'alone: not reproduced) at the bottom rate 0.001; Switch -0.546 and bias -1.552 (rule alone: reproduced) on '
      'the failed premise that no-balancing training raises the load on offset; z-loss 0 of 16 pilot seeds diverged '
      'at every rate 0.07 ... 0.3 (premise); collapse on centred +0.454, its ladder unsettled'
    ),
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='7a765de',
    change=(
      'after that run: the fixes (verdicts 2, 4) judged on offset, where no-balancing training did not raise the load '
      '(their premise failed) -> judged on control, the one condition whose collapse premise passed (+2.28 '
      '[+1.35, +3.21] there; the fix loads on offset and centred stay in the table, judged by no verdict); cap 3,600 '
      '-> 5,400 reference-seconds: pass 0 spent 3,716 (about 2,250 of them the z-loss arms), so the rate extension '
      'below 0.001 the regime asked for (offset, centred) and the ladder doubling could not run; the z-loss verdict '
      'unchanged (its runs reused: its premise fails, so it stays invalid)'
    ),
    outcome=(
      "the run of 2026-11-29 06:01 (7a765de; the first run's runs reused, 352 + 64 new): Switch invalid "
      '(premise, offset) -> reproduced (-5.70 [-6.50, -4.90] on control); bias invalid (premise, offset) -> '
      "reproduced (-5.42 [-6.27, -4.56] on control); collapse on offset invalid (rate at the grid's bottom) -> not "
      'reproduced (-0.018 [-0.377, +0.341] at 8,000 steps, after the extension below 0.001); collapse on centred '
      'invalid (ladder) -> not reproduced (+0.319 [+0.149, +0.489] at 8,000 steps); z-loss invalid -> invalid '
      '(same runs). The cap raise let the extension below 1e-3 and the doubling to 8,000 steps run, which moved '
      "verdicts 1 and 5 from invalid to not reproduced: at the first run's reference step (0.218 ms) the whole "
      "spend, 7,341 run-seconds, is about 4,650 reference-seconds, over the old 3,600 (this invocation's own step, "
      '0.337 ms timed beside two other processes, prices it at 3,004: a cap priced by a step timed under load is '
      'loose)'
    ),
    verdicts=(1, 2, 4, 5),
    to_positive=(2, 4),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='df8faed',
    change=(
      'after the cold review of that run, before publishing: the collapse verdicts (1, 5) gated also on a premise '
      'that the collapse level (step-0 load + 1) lies above the load of a router sending each Zipf(1) cluster to its '
      'own expert (8 / H_8 = 2.94; the review: on centred inputs, start 1.63 + 1 = 2.63, so specialisation alone '
      'would count as collapse, and at fixed rates 3e-3 and 1e-2 the centred rise reaches +1.04 to +1.11 while the '
      "tuned rate falls with each doubling); the z-loss verdict's marginal-instability premise read only where the "
      'pilot fixes a test rate (it had passed at the fallback rate with nothing diverging); leave-one-seed-out counts '
      "the seeds a verdict reads (every report: it had counted all the study's seeds; no outcome can change); scopes "
      'say which inputs were chosen after results, that the control is read at its own rate, and the z-loss next '
      'step with its cost'
    ),
    outcome='collapse on centred not reproduced (+0.319 [+0.149, +0.489]) -> invalid (the new premise); the others '
    'unchanged (same runs, judged again)',
    verdicts=(1, 3, 5),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='735bdba, d0b28be',
    change=(
      'the z-loss claim dropped (Study.dropped: the report says why, not a verdict), after its premise had failed: '
      'no Adam rate 0.07 ... 0.3 diverged any of the 16 pilot seeds; the next step its scope named was run: the '
      "pilot extended to 0.5, 1 and 3 on its 16 seeds, a scouting sweep outside the study's runner and its cap "
      'accounting (0, 0 and 3 of 16 diverged: below the 0.25 the test needs; the republished pilot table reruns '
      'them inside the study, and a check fails the report if any rate reaches 0.25; at rates 50 to 300 times the '
      "one-teacher condition's tuned 0.01, a divergence judged the whole network's, not the router's), so the "
      'claim is beyond this toy (issue 46 allows the drop with its reason); the 64-seed test arms left the plan '
      '(their runs stay on disk, read by nothing); verdicts renumbered: old 4 (bias) and 5 (collapse on centred) are '
      "3 and 4 (the drop was never published: its rerun's own check refused it, and the last row brings the claim "
      'back, numbered as before). Dropping the verdict took the Holm family from 5 to 4 (it entered at p = 1: no '
      'outcome can move). After a cold review of this change (before the rerun): the reason cites the evidence for its '
      'judgement (the run of 2026-11-24) and says how the scouting sweep was made'
    ),
    outcome='z-loss invalid (premise: no rate where the pilot is unstable) -> dropped; collapse on offset, Switch, '
    'bias and collapse on centred unchanged (same runs, judged again)',
    verdicts=(3,),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='2739b0a, d0b28be',
    change=(
      "issue 46's routing premise added, reported and not a gate (no verdict here compares routing choices): a "
      "dense FFN of the expert width (d_ff 64, its rate tuned, the load arms' ladder) on the two routing-task "
      'conditions, each trained top-1 point minus it in ln held-out MSE paired by seed, passed at a CI at or below '
      "-0.1 (moe_topk's margin); the collapse scopes point to its table. Added after the collapse results were "
      'seen (not reproduced on offset, invalid on centred), before its own runs; after a cold review of it, also '
      'before them: the dense grid extended down to 1.1e-4 (the none points needed rates below 1e-3), the reading '
      "fixed in four states (passes, fails, undecided, n/a at unequal T or a dense rate at its grid's edge; an MoE "
      'rate at its edge may pass, since it only understates the margin), and the two collapse scopes say what each '
      'reading would mean instead of asserting that a collapse costs fit'
    ),
    outcome='no verdict moves: the premise gates none (its numbers are in the table and the headline); the two '
    'collapse scopes changed in words',
    verdicts=(1, 5),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='1044f9c',
    change=(
      'after the unpublished rerun of 2026-11-29 20:57 (b9d330c), whose own check refused the drop (the pilot at rate '
      '3 diverged 16, 12 and 3 of 16 seeds at T/4, T/2 and T) and whose routing premise failed (offset, no balancing '
      'minus dense d_ff 64: -0.003 [-0.071, +0.066] in ln held-out MSE): the z-loss claim back as verdict 3 (the '
      'numbering before the drop); the z-loss arms log every 50 steps at every budget (was steps / 20), so the '
      'blow-up rule asks 150 steps above 1e4 x the first loss at T/4, T/2 and T alike (it had asked 150 at T/4 and '
      '600 at T: every rerun divergence fired at a fixed early chunk); one 64-seed test arm, run after the pilot at '
      'the rate the pilot fixes at its longest budget (Arm.rate_from; the same rate at T/4, T/2 and T), with a third '
      "point, the frozen router, as the positive control a refutation needs (the instability must be the router's); "
      "the load arms and the dense references from experts and d_ff of width 64 to 32 (moe_topk's 8 x 32, where its "
      'routing premise passed at -0.506), so that the routing task is one where routing can matter; the z-loss arms '
      'kept at width 64. Every run is new (the machine holding the earlier runs was replaced). Why 150 steps and not '
      "600 (the rerun's patience at T): 150 is the shortest any earlier run used, and 600 had left the test's premise "
      'failing (3 of 16 at T), so the choice favours a test existing, not its outcome; it counts transient spikes as '
      'divergence. After a cold design review (before the run): diverged runs count as measured for this verdict (the '
      "runner's every-seed check had made any divergence `invalid`: Claim.diverged_is_measured); unstable = status "
      'diverged only (a failed run is missing); the exact McNemar test (rules.paired_binary) for the verdict and its '
      'router control, where a paired t on 0/1 decides on too few discordant pairs; the test arm after the pilot at '
      'its one rate (the first version planned arms at rates 1 and 3, chosen after the earlier pilots, and chose the '
      'rate again at each budget); the pilot gains rates 1.5 and 2; scopes: the bfloat16 router is an instability the '
      'papers avoided, the frozen router shows the router involved, not the logit size, and the control is the '
      'published inputs and teacher, not its experts; verdicts 2 and 4 need a collapse on control (rule 1 reproduced '
      'there; was a rise above 0), as their claim says; the collapse verdicts (1, 5): the specialisation premise '
      '(step-0 load + 1 above 8 / H_8 = 2.94, which fails by construction on centred inputs: the step-0 load, 1.55 to '
      '1.93, does not depend on the expert width) becomes part of the rule, a collapse being a rise past both +1 and '
      'the load of one expert per cluster (collapse_margin: about 1.3 on centred; 1.315 in the run), so verdict 5 can '
      'be decided'
    ),
    outcome=(
      'the published report (runs of 2026-11-26 / 2026-11-29, experts of width 64) -> the first run of this design '
      '(2026-11-30 00:38 -> 03:23, 539b25f; 3,369 run-seconds, 1,755 reference-seconds of the 5,400 cap): collapse on '
      'offset not reproduced -0.018 [-0.377, +0.341] -> not reproduced +0.099 [-0.202, +0.399], now with its '
      'positive control (control +2.40 [+1.58, +3.23]); Switch reproduced -5.70 -> reproduced -5.54 [-6.14, -4.93]; '
      'z-loss invalid (0 [0, 0], no rate where the pilot was unstable) -> inconclusive +0.078 [-0.111, +0.253] (64 '
      "seeds at the pilot's rate 2, exact McNemar p 0.49); bias reproduced -5.42 -> reproduced -5.55 [-6.20, -4.90]; "
      'collapse on centred invalid (specialisation premise) +0.319 -> not reproduced +0.733 [+0.521, +0.945] against '
      'the margin 1.315'
    ),
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='',
    change=(
      'after a cold review of that run, before publishing (the same runs, judged again): verdict 3 gains a premise, '
      'training works at the test rate where runs do not diverge (of the learned-router runs that completed, the '
      'share beating the mean predictor on held-out data, Clopper-Pearson lower end >= 0.5: zloss.trained_check), '
      'because at rate 2 none of the 61 that completed trained (held-out relative MSE 1.5e4 and above) and every '
      "learned-router run spiked above 1e4 x its first loss: the 'marginal instability' the premise read was the "
      "blow-up rule's patience, not a training that diverges sometimes (the pilot stops training from rate 0.17, the "
      'rule fires from 1.5); scopes narrowed in words: collapse on offset read at every rate and the router settling '
      'at one expert per cluster; the fixes balance the load (finals about 1.25 against 6.8), on the width-64 '
      "run's seeds, the bias failing at Adam 0.1 and cancelling a constant per-expert logit by construction; the "
      "z-loss scope's rate ratio (2.3-100x, not 7-300x) and its spike wording; collapse on centred decided by its "
      'margin, set before the run after earlier results, with the rise still growing at a fixed rate; the report '
      "names the runs' commit beside the judging one"
    ),
    outcome=(
      'z-loss inconclusive +0.078 -> invalid (no training to stabilise at the test rate: 0 of 61); collapse on offset '
      '(not reproduced), Switch and bias (reproduced) and collapse on centred (not reproduced) unchanged, narrowed '
      'in words'
    ),
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='46660b6, c410785, d507e50',
    change=(
      'issue 46 item 5, after the published run (its z-loss verdict invalid: at the test rate 2 nothing trained, '
      "diverged or not), with the pilot's runs seen (they are reused: the earlier review's fresh pilot seeds over "
      '0.1-0.2 were not run) and no z-loss run at the new rate yet: a run of the z-loss arms fails when it diverges or '
      'completes with held-out relative MSE >= 0.3, pilot and test arm alike (before: diverged only). A first cut at '
      "relative MSE >= 1 (46660b6, not run) was revised by a cold design review before any run: the pilot's runs at "
      'rates <= 0.3 are bimodal (healthy <= 0.19 with router z at its floor; broken >= 0.39 with the router softmax '
      'saturated), 19 broken runs ended at 0.39-0.99 and counted as trained at 1 (3 of 16 at Adam 0.14 and 1,000 '
      'steps), and at 1 no pilot rate has failures at every budget (0.14: 0, 1, 7 of 16), so the sign ladder could '
      'not hold; the threshold 0.3 sits in the gap, set with that distribution in view (any value in [0.2, 0.39] '
      'classifies the 384 runs alike), the fractions at 1 and divergence-only reported beside it. The test rate: the '
      'smallest pilot rate with its failed fraction in [0.1, 0.9] at every budget (before: >= 0.25 at the longest '
      'only), 0.14 from the pilot (0.19, 0.13, 0.56 at 1,000, 2,000, 4,000 steps); no remedy doubles the pilot '
      "(before: the verdict's points included it, so a doubling would have moved the rate). The premise 'training "
      "works where runs do not diverge' (zloss.trained_check) is part of the failure measured now and was removed; "
      'the marginal-instability premise reads both sides (more than 0.05 from 0 as well as from 1). A second '
      'refutation control: the z-loss lowers ln router z on the seeds where both trained (the review of the '
      'published run found it had not moved at rate 2: -0.027 at step 50). A float32-router point, reported, its '
      'two readings written before the run. No margin added (the earlier review asked one); 64 seeds per point as '
      'before, new runs at the new rate'
    ),
    outcome=(
      'the published run (z-loss invalid: nothing trained at rate 2) -> the run of 2026-11-30 12:27 (c410785; 768 new '
      'runs, 660 run-seconds): inconclusive -0.0625 [-0.163, +0.065] at the test rate 0.14 (64 seeds; failed '
      'fractions none 0.14, 0.22, 0.44 and z-loss 0.016, 0.094, 0.375 at 1,000, 2,000, 4,000 steps: the ladder reads '
      'reproduced at T/4, inconclusive at T/2 and T); every premise passed (marginal 0.44; learned minus frozen '
      '+0.36; the lever -0.058 in ln router z on healthy pairs); float32 0.53 at T, its CI overlapping none\'s: "a '
      'step-size instability, not bfloat16 rounding", by the reading fixed before the run. Seen after the run: the '
      "frozen router's 'failures' at 0.3 are its fit level (all 192 frozen runs end at relative MSE 0.16-0.36, none at "
      '1), not an instability; its control reads the same at 1 (none 0.31, frozen 0 at T)'
    ),
    verdicts=(3,),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='edb364e',
    change=(
      "after that run and a cold review of its report: verdict 3's router control (a refutation's, that the learned "
      'router fails more often than the frozen one) compares failures at relative MSE >= 1 (failed_at_1), not at 0.3: '
      "the frozen router's 192 runs all end at 0.16-0.36, its fit with a fixed random routing, which straddles 0.3 "
      '(at T/4 and T/2 it "failed" as often as the learned router); the scope adds what the run showed (the gap '
      "between the pilot's modes not clean in the test arm, 27 of 384 learned-router runs between 0.19 and 0.39; the "
      "z-loss's benefit shrinking with the schedule; failing z-loss runs less saturated but failing almost as often; "
      'the lever showing the term acting, not preventing saturation; the power at T)'
    ),
    outcome='none: verdict 3 inconclusive -0.0625 before and after (the control is needed only for a refutation; at T '
    'it reads +0.3594 at 0.3 and +0.3125 at 1)',
    verdicts=(3,),
  ),
)
