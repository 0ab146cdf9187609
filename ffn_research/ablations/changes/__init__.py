"""Per study, its design changes made after a result of it was seen: history, kept apart from the design.

A change to the shared machinery that moved several studies is worded once here and recorded by each."""

TIE_NO_LONGER_WITHHOLDS_DOUBLING = (
  "the runner's stability rule (machinery, all studies), after expansion_ratio's republished run of 18:42: a "
  'rate tie whose tied rate makes the ladder stable no longer withholds the doubling an unsettled ladder needs '
  '(it only makes a stability failure left at the end inconclusive rather than invalid); that run had stopped '
  'after one pass on a tied ladder 7.8, 18.1, 27.5 "stable" only by lying far from the boundary'
)

PROJECTED_DRIFT_SETTLES = (
  "the runner's magnitude ladder rule (machinery, all studies), after a cold review of "
  "moe_memorization_vs_reasoning's run of 2026-11-29 (its top-2 overall ladder -0.280, -0.266, -0.249, changes "
  '0.014, 0.017 against 0.25 allowed, failed for not shrinking), revised after a second cold review the same day: '
  'was, the changes shrink (a change within a quarter of the CI width at T counting as shrinking) and the last is '
  'under half the distance d/2 to the nearest boundary; now, the last change c is under d/2 and either within that '
  'noise or, projected for as many doublings again as the ladder has at its ratio r to the change before (floored at '
  'the noise), c (r + r^2) stays under d/2 (a flat ladder far from its boundary settles; a growing change does not, '
  'whatever its CI)'
)
