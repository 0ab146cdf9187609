"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base
from ffn_research.ablations.changes import PROJECTED_DRIFT_SETTLES
from ffn_research.ablations.changes import TIE_NO_LONGER_WITHHOLDS_DOUBLING

CHANGES = (
  base.DesignChange(
    date='2026-11-22',
    commit='89db482',
    change='after the first published run (all three verdicts not reproduced): the full setting E = 1 ... 32 with 5 '
    'seeds per task; a reported (not gating) premise, dense bits vs parameters slope >= 0.5 (fce0d0e)',
    outcome='run of 2026-11-22 07:05 -> 09:31 (ed319fc): overall, memorization (MoE slope 0.097 -> 0.047) and '
    'reasoning (+0.042 -> +0.055 per doubling) not reproduced -> not reproduced; the premise failed (dense slope '
    '0.35)',
    verdicts=(1, 2, 3, 4, 5, 6),
  ),
  base.DesignChange(
    date='2026-11-23',
    commit='d4380a1',
    change='MoE slopes over E (memorization log-log, reasoning accuracy per doubling; 3 verdicts) -> the share of '
    'the dense-active -> dense-total gap closed, per router (top-1 not renormalised, top-2 renormalised; 6 '
    'verdicts); memorization at d_model 16 with trainable tied embeddings and facts >= 2x dense-total capacity; a '
    '32-node multi_hop; premise, plateau, range and rate-edge gates; per-arm rates from one-seed probes',
    outcome='run of 2026-11-22 09:31 -> 2026-11-23 22:45 (184bca6+dirty): overall not reproduced -> invalid (both); '
    'memorization not reproduced -> inconclusive (top-1, 0.43) and reproduced (top-2, 0.66); reasoning not '
    'reproduced -> invalid (both)',
    verdicts=(1, 2, 3, 4, 5, 6),
    to_positive=(5,),
  ),
  base.DesignChange(
    date='2026-11-23',
    commit='838c719',
    change='dense memorization rate grid {0.033, 0.1, 0.3} -> widened by 0.9, after the first full run of the new '
    "design (d_ff 8's best was the grid's top by 0.2%)",
    outcome="that point's rate-edge check failed -> passed; the statistics unchanged (the report of 22:45)",
    verdicts=(1, 2, 3, 5),
  ),
  base.DesignChange(
    date='2026-11-23',
    commit='c2d0d4f',
    change='a check added after the same run: dense-total above dense-active in every seed (one multi_hop seed '
    'scored 0.01 below)',
    outcome='reasoning and overall invalid -> invalid (their premise and rate checks had failed already)',
    verdicts=(1, 2, 4, 6),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='52d3227',
    change='mean of per-seed shares (Welch CI), per-arm rates with an edge check, plateau checks, 4 seeds -> a '
    'ratio of means with a BCa CI, rates tuned by the runner per point on all seeds, T/2-vs-T stability, '
    'reasoning at 2T, 10 seeds, one E per scale; the every-seed gap check dropped',
    outcome='run of 2026-11-26 11:43 (9157a6b): memorization top-1 inconclusive (0.43) -> not reproduced (0.41); '
    'memorization top-2 reproduced (0.66, n = 4) -> reproduced (0.69, n = 10); the other four invalid -> invalid',
    verdicts=(3,),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='f65a0c2',
    change="reasoning rate tuned on the trained compositions' loss -> on a held-out validation split (10%), after "
    'the reasoning gap premise failed (0.075) at rates chosen for memorizing',
    outcome='run of 2026-11-26 14:41 (958c960): overall top-1 invalid (-0.067) -> invalid (+0.05); overall top-2 '
    'invalid (+0.58) -> invalid (-1.05); reasoning top-1 invalid (0.47) -> invalid (0.36); reasoning top-2 invalid '
    '(0.12) -> invalid (1.74): the gap premise passes, the rate edge, the fit and stability fail',
    verdicts=(1, 2, 4, 6),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='82f704f',
    change='multi_hop AdamW weight decay 1.0 -> 0.3, reasoning grid 3e-4 ... 3e-3 -> from 3e-3, 1e-2, 3e-2, tuned '
    'on the validation loss -> the validation error (1 - accuracy); chosen on a 2-seed check after the 14:41 run',
    outcome='run of 2026-11-26 15:16 (82f704f, published): overall top-1 invalid (+0.05) -> not reproduced (-0.49); '
    'overall top-2 invalid (-1.05) -> not reproduced (-0.34); reasoning top-1 invalid (0.36) -> invalid (0.90, '
    'stability); reasoning top-2 invalid (1.74) -> not reproduced (1.03)',
    verdicts=(1, 2, 4, 6),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='ced2605',
    change='after a cold review of the issue-45 republication: the reasoning gap premise reads the per-seed '
    "gap's t CI lower end (>= 0.1) instead of its mean (0.139 at T rested on one seed: CI [0.068, 0.211]); the "
    'memorization premise renamed "at least proportional" (the slope is 1.42, the check has no upper bound); '
    'scopes and setup say what the runs are (the budgets judged, the widths, the auxiliary losses, that multi_hop '
    'composes stored facts and has no saturation control); the same runs judged again (--judge_only)',
    outcome='(2) overall top-2 not reproduced -0.286 -> invalid; (6) reasoning top-2 not reproduced 1.042 -> '
    'invalid; (1), (4) invalid with a second failed premise; (3), (5) unchanged',
    verdicts=(1, 2, 4, 6),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='fbc31ef',
    change=TIE_NO_LONGER_WITHHOLDS_DOUBLING,
    outcome=(
      'none: the two verdicts where the clause fired (1 and 4) are invalid on their premises, and the loop was '
      "stopped by the cap; only the stability check's wording and remedy change"
    ),
    verdicts=(),
  ),
  base.DesignChange(
    date='2026-11-29',
    commit='97ad41b, 72b4cd9',
    change=(
      "issue 46's redesign (item 4), after the published report (5 of 6 verdicts invalid; the reasoning gap premise "
      'failed, 0.139 [0.068, 0.211]) and the review of 2026-11-27 (multi_hop stores its graph in the weights; top-1 '
      'was not renormalised and top-2 was). Reasoning: multi_hop in a 2-layer transformer (32 nodes, 4 relations, 2 '
      'hops, the graph stored, 80/10/10% of the compositions trained/validation/test, d_model 32, w 32, AdamW, 2T) '
      '-> shortest_path read by a bare FFN (tasks/graphs.py: per example a fresh random directed graph, 8 nodes, 2 '
      'distinct out-edges each, given whole in the input as its flattened adjacency with a one-hot source and target, '
      '80 features; the label the distance 1, 2 or farther, classes about equally often, chance 0.34; w 8, dense-total '
      'd_ff 128; Adam, batch 256; 4T = 4,000 steps; rates 3e-3, 1e-2, 3e-2; 2,048 validation graphs choose the rate, '
      '2,048 test graphs score). Why not the transformer task of branch mvr-redesign (graph_distance, in context, '
      '8 nodes): its first pass was estimated at 15,000-49,000 reference-seconds against this cap, and its width gap '
      'was unstable over seeds (0.225, 0.181, -0.003 at 6,000 steps: one narrow seed caught up; two of three at D = '
      '2). Routers: top-2 renormalised -> not renormalised, so top-1 and top-2 are both softmax_topk '
      'with the top-k weights as they are (this also changes memorization top-2, verdict 5; memorization is otherwise '
      'unchanged). Reasoning premises: "dense-active fits its trained compositions" (there are none) -> "dense-total '
      'above the test graphs\' majority-class share by >= 0.1" (per-seed 95% t CI lower end; remedy: double every '
      'reasoning point); the gap premise kept (per-seed gap t CI lower end >= 0.1). Full cap 6,000 -> 5,400 '
      "reference-seconds (the issue's 90 minutes). Chosen by dense-only pilots before any MoE result of this design "
      'was seen (dense d_ff 8 against 128, held-out test accuracy at the rate with the best mean validation '
      'accuracy, 3 seeds, niced on the 2 busy cores; the MoE arms ran only to time their steps, 400 steps, their '
      'accuracies not read): (p0) 200 steps, rate 3e-3, seed 0: 0.356 vs 0.395 (timing); (p1) '
      '2,000 steps, rates 3e-3, 1e-2: 0.483, 0.505, 0.506 vs 0.780, 0.790, 0.777 (gap 0.297, 0.285, '
      '0.272); (p2) 6,000 steps, 1e-2, 3e-2: 0.485, 0.518, 0.513 vs 0.829, 0.808, 0.819 (gap 0.344, 0.290, 0.306); '
      '(p3) 1,000 steps, 3e-3 ... 3e-2: 0.449, 0.470, 0.420 vs 0.649, 0.698, 0.659 (gap 0.200, 0.229, 0.238); (p4) '
      '4,000 steps, 3e-3 ... 3e-2: 0.491, 0.514, 0.485 vs 0.822, 0.808, 0.818 (gap 0.332, 0.294, 0.333, mean 0.320, '
      't CI [0.27, 0.37]); chance 0.342. p1 and p2 chose the sizes (the first setting tried); p3 and p4 are the '
      "design's T/4 and T: both widths' best rate 1e-2 inside the grid at T. Priced from every arm's step time "
      'measured here (groups of 3 rates x 10 seeds, scaled by the reference step, 0.34-0.63 ms on the busy cores): '
      'the first pass ~1,400 reference-seconds (1,060-1,980; memorization 51%, reasoning ~680), one doubling of '
      'every point ~1,450 more; a second doubling (~2,850) would pass the cap. Then, before any MoE run (no result '
      "seen), a cold review of this design (2026-11-29) and the owner's decisions on it: the reasoning and overall "
      "scopes say what a reviewer would sign (the toy, what is matched and what is not, the router's 65% / 79% of "
      "the MoEs' active parameters); every not reproduced is invalid (checks.refutation_guard: no control for "
      '"experts help reasoning", whose router sees the whole problem, nor for memorization); a small reasoning G '
      '(reproduced, and the overall reproduced) stands only on a storage control, the same arms on a fixed pool of '
      'examples (task.num_graphs; scored on the pool; 5 seeds, 4T, rates 1e-2, 3e-2, 0.1) where the MoE must close '
      ">= 0.5 of the gap; dense widths matched to each MoE's active parameters (d_ff 23 and 39, 5 seeds; G with "
      'its floor there is reported, not a verdict); reasoning 4T -> 8T (rungs 2,000 / 4,000 / 8,000: p1 and p4 are '
      'its T/4 and T/2); every verdict worded at E = 16. The pool chosen by a dense-only pilot (d_ff 8 against 128, '
      'pool accuracy at the rate with the best mean pool loss, fresh-graph accuracy in brackets; no MoE arm run): '
      '(q0) P = 4,096, 2,000 steps, 1e-2, 1 seed: 0.535 vs 1.000 (0.368 vs 0.410); (q1) P = 8,192, 8,000 steps, '
      '1e-2 and 3e-2, 2 seeds: 0.528, 0.530 (1e-2) vs 1.000, 1.000 (3e-2) (0.474, 0.477 vs 0.470, 0.484); (q2) P '
      '= 8,192, 2,000 steps: 0.532, 0.475 vs 0.9998, 0.9999 (both 3e-2); (q3) P = 16,384, 8,000 steps: 0.542, '
      '0.539 vs 0.990, 0.991 (both 3e-2; 0.523, 0.492 vs 0.634, 0.653): P = 8,192, which dense-total stores by '
      '2,000 steps and dense-active does not (its fresh-graph level; the pool gap ~0.47); at 16,384 dense-total '
      'starts to generalise and no longer stores it all. Re-priced from every arm timed for 200 steps (groups of 3 '
      "rates x the arm's seeds, niced on the 2 busy cores, load average 2.3-3.8, reference step 0.36-0.51 ms): the "
      'first pass ~2,550 reference-seconds (2,170-3,100: memorization ~770, reasoning ~1,350, matched widths ~220, '
      'storage control ~210), one doubling of every point (memorization forced by one_budget when reasoning '
      'doubles) ~2,820 (2,400-3,430): ~5,370 (4,560-6,530) against the 5,400 cap, inside it at the middle '
      'estimate only. Cut to fit: the matched widths and the control run 5 seeds, the control 4T (10 seeds and 8T '
      'would add ~650 to the first pass and ~750 to a doubling); no second doubling fits'
    ),
    outcome=(
      'the published run (2026-11-27) -> the first run of this design (2026-11-29 22:52, 6840a19; 5,639 '
      'run-seconds): overall top-1 invalid -0.71 -> invalid -0.592 (no control for a refutation); overall top-2 '
      'invalid -0.29 -> invalid -0.249; memorization top-1 invalid 0.435 (stability) -> invalid 0.407 (no control); '
      'reasoning top-1 invalid 1.14 -> invalid 0.999 (no control); memorization top-2 reproduced 0.756 '
      '(renormalised) -> reproduced 0.761 (not renormalised); reasoning top-2 invalid 1.04 -> invalid 1.010'
    ),
    verdicts=(1, 2, 3, 4, 5, 6),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='d53bb0f',
    change=(
      'after a cold review of that run, before publishing (same runs, judged again): the memorization scopes say '
      "the MoEs' active parameters also exceed dense-active's (+6% top-1, +13% top-2: the router; no dense arm "
      'matches them), that T is 167 exposures per fact with no arm converged (G measures how fast as much as how '
      "much), and that one E is tested ('keeps improving' as E grows is not); top-2's label says its 32 experts "
      'are 2E'
    ),
    outcome='no outcome moves: scopes in words (memorization top-2 reproduced 0.761 now reads narrowed)',
    verdicts=(1, 2, 3, 5),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='def7a9e',
    change=(
      "after the published run of 2026-11-29 (memorization top-1 G 0.407, invalid: no control for the rule's "
      'refutation), the control that report named as the next step, with the bar it named: a memorization arm '
      "of top-1's experts (16 of width 8) routed by a hash of the token ids (model.moe.router = token_hash, new: "
      'a fact goes to the expert its subject and relation ids hash to, fixed through training), 10 seeds, the '
      "MoEs' rate grid, the memorization ladder; memorization top-1's `not reproduced` now stands if that arm's G "
      "has its 95% CI above 0.5 (checks.refutation_control) and is invalid otherwise; top-2's and the overall "
      "verdicts keep the guard (other experts; reasoning has no control). The run's other arms are reused: only "
      'the new arm ran'
    ),
    outcome=(
      'the published run (2026-11-29 22:52, 6840a19) -> that run with the control arm added (2026-11-30 03:25 -> '
      '03:32, def7a9e; only the new arm ran, 120 runs, about 390 run-seconds; the runner added the rate 0.3 above '
      'its grid, and 0.1 won at every budget): memorization top-1 invalid 0.407 (no control) -> not reproduced 0.407 '
      '[0.382, 0.446] (Holm 0.0006), its control G 0.98 [0.96, 1.005] at T (1.58 at T/4, 1.10 at T/2); overall top-1 '
      'invalid -> invalid (its reasoning half has no control). The control differs from top-1 in more than the '
      "routing given: its gate weight is 1 (top-1's is the softmax p), its split is balanced by construction, its "
      'rate is its own (0.1 against 0.03); its router is computed, unused and counted in its parameters. The model '
      'and router code it needed (token_hash) touches no reused arm (none routes by a hash)'
    ),
    verdicts=(1, 3),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='',
    change=(
      "after a cold review of the control's run, before publishing (the same runs, judged again): memorization "
      "top-1's scope says what its refutation is of (the learned router's routing or gating at this budget, not the "
      "experts' capacity: the control's G and how it differs from top-1); the setup names the control; the control's "
      'CI prints four digits (it had shown 1.005 as 1); one colour per arm in every panel; the regime record kept '
      'its ledger when an added arm restarted the loop (runner: the 03:25 invocation had repriced the 5,639 '
      'run-seconds of 2026-11-29 at its own reference step, 0.300 ms, not 0.251: the record was repaired by hand '
      'to its published step)'
    ),
    outcome='no outcome moves: memorization top-1 not reproduced, narrowed in words; the spent reference-seconds '
    'corrected',
    verdicts=(3,),
  ),
  base.DesignChange(
    date='2026-11-30',
    commit='85735c3, 1947c37',
    change=PROJECTED_DRIFT_SETTLES,
    outcome=(
      "overall top-2 (verdict 2): its ladder's stability check FAIL -> PASS (the same runs judged again; projected "
      'drift 0.042 < 0.25); the verdict invalid -> invalid (its refutation has no control); no other verdict of '
      'this study moves (the five other ladders pass under both rules)'
    ),
    verdicts=(2,),
  ),
  base.DesignChange(
    date='2026-12-01',
    commit='a226afd',
    change=(
      "issue 46's routing premise reported (not gated): each verdict's detail gives, per task it reads, the MoE's "
      'margin over dense-active per seed with its t CI (bits stored; held-out accuracy), at the one MoE size E = 16. '
      "These verdicts compare the MoE with dense, not routing choices, so the margin is G's numerator in its own "
      'units; added after the published results, to say the premise the issue asks every MoE report to print'
    ),
    outcome='no outcome moves: reported only, read by no rule (the same runs judged again)',
  ),
)
