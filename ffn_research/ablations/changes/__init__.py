"""Per study, its design changes made after a result of it was seen: history, kept apart from the design.

A change to the shared machinery that moved several studies is worded once here and recorded by each."""

TIE_NO_LONGER_WITHHOLDS_DOUBLING = (
  "the runner's stability rule (machinery, all studies), after expansion_ratio's republished run of 18:42: a "
  'rate tie whose tied rate makes the ladder stable no longer withholds the doubling an unsettled ladder needs '
  '(it only makes a stability failure left at the end inconclusive rather than invalid); that run had stopped '
  'after one pass on a tied ladder 7.8, 18.1, 27.5 "stable" only by lying far from the boundary'
)
