"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

CHANGES = (
  base.DesignChange(
    date='2026-11-24',
    commit='1ec7838',
    change='top-k at fixed total only, router trap on the iid task with arms that differed in gradient and output '
    'scale -> k also at matched active parameters (new verdict 2); router arms learned / stop_grad / weight_1 / '
    'frozen / hash on a clustered task with a teacher per cluster (new verdict 4; verdict 5 moved there); '
    'router-cluster mutual information',
    outcome='run of 2026-11-22 10:39 (cd95386) -> 2026-11-24 01:27: fixed total reproduced (-0.401) -> reproduced '
    '(-0.44); granularity inconclusive (+0.033) -> inconclusive (-0.007); router trap not reproduced (+0.155, iid '
    'task) -> reproduced (-0.79, clustered task); new: matched active reproduced (-0.17), learned - stop_grad '
    'reproduced (-1.20)',
    verdicts=(2, 4, 5),
    to_positive=(5,),
  ),
  base.DesignChange(
    date='2026-11-25',
    commit='11434b8',
    change='every point at Adam 3e-3, plateau on the last two logs -> rate tuned per point over 3e-3 / 1e-2 / 3e-2 '
    'at T and T/2, gated on the rate inside the grid and a per-point T/2 -> T plateau (< 0.1 in ln 1 - R^2)',
    outcome='reproduced (-0.44), reproduced (-0.17), inconclusive (-0.007), reproduced (-1.20), reproduced (-0.79) '
    "-> all five invalid (-0.296, +0.073, +0.162, -1.13, -1.00): 3e-2, the grid's top, chosen at 20 of 21 points",
    verdicts=(1, 2, 3, 4, 5),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='262d16c',
    change="grid 3e-3 .. 3e-2, 5 seeds, per-point plateau, granularity p the best G's raw p -> grid 1e-2 .. 0.3 "
    "extended by the runner, 10 seeds, the T/2 -> T stability of each verdict's own statistic (a re-analysis of "
    'the published tuning table under it had passed all five), Bonferroni p for granularity, 1 - R^2 off 0 and 1',
    outcome='run of 2026-11-26 03:41 (ee2f968): fixed total invalid (-0.296) -> reproduced (-0.303); matched active '
    'invalid (+0.073) -> not reproduced (+0.0655); granularity invalid (+0.162) -> not reproduced (+0.160); '
    'learned - stop_grad and learned - weight_1 invalid -> invalid (1 - R^2 within 0.01 of the exact fit)',
    verdicts=(1, 2, 3),
    to_positive=(1,),
  ),
  base.DesignChange(
    date='2026-11-26',
    commit='65146f3',
    change='clustered task spread 0.25 -> 1.0 (task.cluster_std; at 0.25 every router arm fitted to 1 - R^2 < 0.01) '
    "and the clustered arms' rates from 3e-3, chosen on a 3-seed check at 2,000 steps after that run",
    outcome='run of 2026-11-26 17:44 (e195276): learned - stop_grad invalid (-1.22) -> reproduced (-0.643); learned '
    '- weight_1 invalid (-1.11) -> reproduced (-0.614)',
    verdicts=(4, 5),
    to_positive=(4, 5),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='42bf48d, 638efba',
    change='verdicts 1-3 had no premise -> gated on "routing matters on the iid task" (top-1 of 8 x 32 minus dense '
    'd_ff 32, paired CI below -0.1 in ln 1 - R^2; the margin set after the published 0.066 vs 0.069 '
    "were seen); verdict 2's claim names the halved total; verdicts 4-5's routing premise unchanged, now marked "
    "as their positive control; the runner's T/2-vs-T check -> the T/4, T/2, T ladder by kind, rate ties, "
    'leave-one-seed-out (issue 45)',
    outcome='the republication of 2026-11-27 (same statistics): fixed total reproduced -> invalid (premise -0.042 '
    '[-0.059, -0.024], above -0.1); matched active not reproduced -> invalid (premise; its ladder also fails: '
    'inconclusive at T/4); granularity not reproduced -> invalid (premise); 4-5 reproduced -> reproduced (premise '
    '-0.506, ladder keeps its sign)',
    verdicts=(1, 2, 3),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='f48fcac',
    change="issue 46's redesign, after the republication (verdicts 1-3 invalid: on the iid task 8x the total "
    'parameters bought -0.042 in ln(1 - R^2), the premise needs <= -0.1): every top-k and granularity arm moved '
    'to the clustered task, where the router arms showed routing matters; granularity from 8 experts of width 32 '
    '(was 4 of 64) so that G = 2 is top-2 at matched active and total; a sixth verdict, top-2 vs top-1 at matched '
    'active and total; the premise of 1-3 and 6 is top-1 beating dense of its active width by 0.1 on that task '
    '(with a doubling as remedy); top-1 is the learned router arm for every comparison (the iid arms and their '
    "dense references dropped). Set before any run of this design, but not before its premise's numbers: the "
    'clustered router arms of 2026-11-26 had shown learned top-1 well below dense d_ff 32 (premise -0.506 then), '
    'so the premise was known to pass when it was chosen',
    outcome='the first run of this design (2026-11-27 19:15, ff5ec8d): fixed total invalid -> reproduced -0.164 '
    '[-0.217, -0.111]; matched active invalid -> inconclusive -0.047 [-0.116, +0.022]; granularity invalid (published '
    'before issue 45 as not reproduced) -> reproduced -0.128 [-0.203, -0.054]; the new verdict 6 reproduced -0.101 '
    "[-0.159, -0.043] (the same runs as verdict 3's G = 2 leg); 4-5 reproduced -> reproduced",
    verdicts=(1, 2, 3, 6),
    to_positive=(1, 3),
  ),
  base.DesignChange(
    date='2026-11-27',
    commit='acaae36',
    change=(
      'after a cold review of the first run of the redesign (the routing premise computed at 8 x 32 only, while '
      'verdicts 2, 3 and 6 read 8 x 16, 16 x 16, 32 x 8 and 64 x 4): the premise of 1-3 and 6 holds at every MoE '
      'shape the verdict reads (top-1 at that shape beats dense of its expert width by 0.1), each margin in its '
      'detail; a `sizes` arm (top-1 at the other shapes) and dense references of widths 16, 8, 4 added'
    ),
    outcome='verdicts 2, 3 and 6 of the 19:15 run could not be judged by it (no runs at those shapes): the next run',
    verdicts=(2, 3, 6),
  ),
)
