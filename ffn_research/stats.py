"""Statistics: verdicts, their checks, confidence intervals and Holm, shared by analysis and the ablations; the
rules that compute verdicts are rules.py.

A leaf of the package (numpy, scipy, pandas only). Every rule is an interval test on a 95%
confidence interval, decided in three ways:

  reproduced      the CI lies entirely inside the region the claim allows,
  not reproduced  the CI lies entirely outside it,
  inconclusive    the CI straddles its edge, or the input is underpowered (fewer than
                  `min_seeds` seeds, or fewer than `min_points` distinct x values).

So a wide CI can never give `reproduced` (a rule with `max_width` also refuses a CI wider than
that), and a tight CI that misses the claim gives `not reproduced`. A rule records the edges of its
region (`Verdict.boundaries`): the regime policy (ablations/regime.py) reads them to judge whether
the statistic is stable on its budget ladder.

A measurement (`measure`: a number the codebase reports, with no published region to decide it against) is
`measured` when its CI is finite and at most its declared width, else inconclusive; it is never a rejection (Holm
leaves it alone) and it stands only on the same checks as any verdict (premise, the ladder by the measurement kind
against its declared settling margin, ties).

A fifth outcome, `invalid`, means "this setup cannot test the claim" (it is not "not
reproduced"). A verdict rests on checks (`Check`): its premise (role PREMISE, `premise_check` /
`as_premise`: a positive control showing the setup can produce the effect), the regime's
(ablations/regime.py: learning rate inside its grid, stable on the budget ladder by the claim's
kind, no rate tie, no single seed deciding it) and the study's own (`range_check`: not pinned at a
floor or ceiling; any check of the measurement a verdict rests on). `gate(verdict, checks)` attaches
them; a failed check turns the verdict `invalid` with the check's numbers in `detail`, or, where the
check's `demote` is INCONCLUSIVE (noise, not the setup), a decided verdict `inconclusive`; the
statistic, CI and the rule's own outcome (`rule_outcome`) are kept. A failed check may name a
`remedy` (more steps, a rate beyond the grid's edge) and the `points` it applies to: the regime
policy buys that compute.

Multiple comparisons (Holm 1979; docs/references.md#holm-1979). Each decisive outcome is a
rejection: `reproduced` rejects "the true value lies on an edge of the allowed region or outside
it", `not reproduced` rejects "it lies on the nearest edge or inside". A verdict's `p_value` is
the p-value of exactly that test (`decision_p`; for `reproduced` inside a two-sided region, the
larger of the two edges' p-values, i.e. two one-sided tests). With a single test, `p < 0.05` if
and only if the 95% CI decides. The family is every verdict of the ablation, fixed in its code:
`holm` sets `p_holm` on every verdict, an `invalid` verdict or one without a p-value entering with
p = 1, so the family does not depend on which checks passed. A decisive outcome stands only if its
Holm-adjusted p is < 0.05, else it becomes `inconclusive` and says so. Equivalence verdicts
(`paired(..., expect='equal')`, a slope within ± margin) count as rejections too. Holm only ever
downgrades an outcome. The CIs stay 95% per verdict, as printed.
"""

from collections.abc import Mapping, Sequence
import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

Values = Sequence[float] | np.ndarray  # one number per seed (a union: np.asarray narrows it)

REPRODUCED = 'reproduced'
NOT_REPRODUCED = 'not reproduced'
INCONCLUSIVE = 'inconclusive'
INVALID = 'invalid'  # the setup cannot test the claim (a regime check failed)
MEASURED = 'measured'  # a measurement claim's number, settled on its ladder (no region to decide against)
OUTCOMES = (REPRODUCED, NOT_REPRODUCED, MEASURED, INCONCLUSIVE, INVALID)
DECISIVE = (REPRODUCED, NOT_REPRODUCED)
ANSWERED = (*DECISIVE, MEASURED)  # what a check that only demotes (noise) turns into inconclusive
CONFIDENCE = 0.95
ALPHA = 0.05  # familywise error rate of the Holm correction
DOUBLE_STEPS, LOWER_RATE, HIGHER_RATE = 'double_steps', 'lower_rate', 'higher_rate'
REMEDIES = (DOUBLE_STEPS, LOWER_RATE, HIGHER_RATE)  # a failed check's `remedy` (ablations/regime.py applies it)
SIGN, MAGNITUDE, EXISTENCE, MEASUREMENT = 'sign', 'magnitude', 'existence', 'measurement'  # a claim's kind: how
KINDS = (SIGN, MAGNITUDE, EXISTENCE, MEASUREMENT)  # its budget ladder is judged (ablations/checks.stability)
PREMISE = 'premise'  # Check.role of a positive control: the setup can show the claimed effect
BCA_MIN_SEEDS = 10  # below this, bootstrap intervals are replaced by t on a transformed scale


@dataclasses.dataclass(frozen=True)
class Check:
  """A check of the measurement or of the regime a verdict rests on; `detail` holds its numbers."""

  name: str
  passed: bool
  detail: str
  remedy: str = ''  # what more compute could fix a failure: one of REMEDIES, or '' (nothing)
  points: tuple[str, ...] = ()  # the points (study.point_label) the remedy applies to
  role: str = ''  # PREMISE: a positive control of the verdict; '' a check of the measurement or the regime
  demote: str = INVALID  # what a failure makes of the verdict: INVALID, or INCONCLUSIVE (noise, not the setup)
  applies: bool = True  # False: passed because there was nothing to check (the report prints n/a, not PASS)

  def to_dict(self) -> dict[str, Any]:
    return {
      'name': self.name,
      'passed': self.passed,
      'detail': self.detail,
      'remedy': self.remedy,
      'points': list(self.points),
      'role': self.role,
      'demote': self.demote,
      'applies': self.applies,
    }

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> 'Check':
    return cls(
      str(d['name']),
      bool(d['passed']),
      str(d.get('detail', '')),
      str(d.get('remedy') or ''),
      tuple(d.get('points') or ()),
      str(d.get('role') or ''),
      str(d.get('demote') or INVALID),
      bool(d.get('applies', True)),
    )


@dataclasses.dataclass(frozen=True)
class Verdict:
  """One claim's verdict, with the statistic and the rule it follows from."""

  claim: str  # the claim tested, one sentence
  outcome: str  # one of OUTCOMES
  statistic: float  # the measured quantity (slope, mean difference, mean, crossing x)
  ci: tuple[float, float]  # its 95% confidence interval
  test: str  # the statistical test / estimator used
  rule: str  # the decision rule in words
  n: int  # points (or seeds) the statistic is computed from
  detail: str = ''  # why inconclusive / invalid, fit details, ...
  p_value: float | None = None  # of the test the decision rests on (see the module docstring), where it has one
  extra: dict[str, float] = dataclasses.field(default_factory=dict)  # other fitted numbers (e.g. intercept)
  checks: tuple[Check, ...] = ()  # the regime checks the verdict rests on (attached by gate)
  p_holm: float | None = None  # Holm-adjusted p_value within the ablation (set by holm, i.e. the runner)
  boundaries: tuple[float, ...] = ()  # the edges of the rule's region (where its outcome changes)
  rule_outcome: str = ''  # the rule's own outcome, before gate and holm ('' = `outcome`)
  points: tuple[str, ...] = ()  # the points whose runs the statistic reads (the regime checks them)
  settled: dict[str, str] = dataclasses.field(default_factory=dict)  # point -> why no rate there can move the statistic
  kind: str = ''  # one of KINDS (the study's declaration; the runner sets it)
  scope: str = ''  # what was tested, in words: the toy, its sizes, its budget, what is matched and what not
  premise: str = ''  # the positive control the verdict rests on, in words (its numbers are in `checks`)
  ladder: tuple[dict[str, Any], ...] = ()  # per budget (ascending): level, steps, statistic, ci, outcome

  def to_dict(self) -> dict[str, Any]:
    d = dataclasses.asdict(self)
    d['checks'] = [c.to_dict() for c in self.checks]
    return d

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> 'Verdict':
    """Inverse of to_dict; also reads report.json files written before `checks`/`p_holm` existed."""
    nan = lambda v: math.nan if v is None else float(v)  # NaN is written as null
    ci = d.get('ci') or (None, None)
    return cls(
      claim=d['claim'],
      outcome=d['outcome'],
      statistic=nan(d.get('statistic')),
      ci=(nan(ci[0]), nan(ci[1])),
      test=d.get('test', ''),
      rule=d.get('rule', ''),
      n=int(d.get('n') or 0),
      detail=d.get('detail', '') or '',
      p_value=d.get('p_value'),
      extra=dict(d.get('extra') or {}),
      checks=tuple(Check.from_dict(c) for c in d.get('checks') or ()),
      p_holm=d.get('p_holm'),
      boundaries=tuple(nan(b) for b in d.get('boundaries') or ()),
      rule_outcome=d.get('rule_outcome') or '',
      points=tuple(d.get('points') or ()),
      settled=dict(d.get('settled') or {}),
      kind=d.get('kind') or '',
      scope=d.get('scope') or '',
      premise=d.get('premise') or '',
      ladder=tuple(d.get('ladder') or ()),
    )

  @property
  def failed_checks(self) -> tuple[Check, ...]:
    return tuple(c for c in self.checks if not c.passed)

  @property
  def premises(self) -> tuple[Check, ...]:
    return tuple(c for c in self.checks if c.role == PREMISE)

  @property
  def raw_outcome(self) -> str:
    """The rule's outcome before any check or Holm changed it."""
    return self.rule_outcome or self.outcome

  def line(self) -> str:
    lo, hi = self.ci
    return f'**{self.outcome}** — {self.statistic:.4g} (95% CI [{lo:.4g}, {hi:.4g}], n={self.n}; {self.test})'


def decide(ci: tuple[float, float], lo: float, hi: float) -> str:
  """`reproduced` if ci is inside [lo, hi], `not reproduced` if disjoint from it, else inconclusive."""
  c_lo, c_hi = ci
  if not (math.isfinite(c_lo) and math.isfinite(c_hi)):
    return INCONCLUSIVE
  if lo <= c_lo and c_hi <= hi:
    return REPRODUCED
  if c_hi < lo or c_lo > hi:
    return NOT_REPRODUCED
  return INCONCLUSIVE


def decision_p(estimate: float, se: float, dof: float, lo: float, hi: float) -> float:
  """Two-sided t-test p of `estimate` (standard error `se`, `dof` degrees of freedom) against the
  edge of [lo, hi] a CI decision rests on: inside the region, the larger p over its finite edges;
  outside, the p against the nearest edge. So p < 1 - c exactly when decide() on the c-CI decides."""
  edges = [e for e in (lo, hi) if math.isfinite(e)]
  if not edges or not math.isfinite(estimate) or not se >= 0:
    return math.nan

  def p(edge):
    if se == 0:
      return 0.0 if estimate != edge else 1.0
    return float(2 * stats.t.sf(abs(estimate - edge) / se, dof))

  if lo <= estimate <= hi:
    return max(p(e) for e in edges)
  return p(lo if estimate < lo else hi)


def mean_ci(
  values: Values, confidence: float = CONFIDENCE, bounds: tuple[float, float] | None = None
) -> tuple[float, float, float]:
  """(mean, ci_lo, ci_hi) with a Student-t interval; the CI is (nan, nan) for fewer than 2 values.

  `bounds` (lo, hi), either end infinite: the quantity's range (a load ratio >= 1, an error >= 0, a fraction in
  [0, 1]). The interval is then the t interval intersected with the range: the mean lies in the range, so the
  intersection covers it exactly as often as the t interval does, never leaves the range, and decides every
  boundary inside the range as the t interval would (a transformed scale would move outcomes: a log interval of a
  mean of 0.59, 0.59, 0.59, 2e-4, 2e-4 excludes 0.01, the t interval does not)."""
  x = np.asarray(values, float)
  x = x[np.isfinite(x)]
  if len(x) == 0:
    return math.nan, math.nan, math.nan
  m = float(x.mean())
  if len(x) < 2:
    return m, math.nan, math.nan
  half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1)) * float(stats.sem(x))
  lo, hi = m - half, m + half
  if bounds is not None:
    lo, hi = max(lo, float(bounds[0])), min(hi, float(bounds[1]))
  return m, lo, hi


def geo_mean_ci(values: Values, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
  """Geometric mean and its t CI (on the log values, so it never leaves (0, inf)); nan where undefined."""
  m, lo, hi = (
    math.exp(v) if math.isfinite(v) else math.nan for v in mean_ci(np.log(np.asarray(values, float)), confidence)
  )
  return m, lo, hi


def fieller_ci(a: np.ndarray, b: np.ndarray, paired_seeds: bool, confidence: float) -> tuple[float, float]:
  """Fieller's interval for mean a / mean b: the ratios G whose t test of mean(a) - G mean(b) = 0 (variance with
  the covariance of paired seeds) does not reject; (-inf, inf) when mean b is not itself resolved from 0."""
  na, nb = len(a), len(b)
  ma, mb = float(a.mean()), float(b.mean())
  vaa, vbb = float(np.var(a, ddof=1)) / na, float(np.var(b, ddof=1)) / nb
  vab = float(np.cov(a, b, ddof=1)[0, 1]) / na if paired_seeds else 0.0
  t2 = float(stats.t.ppf(0.5 + confidence / 2, min(na, nb) - 1)) ** 2
  qa, qb, qc = mb * mb - t2 * vbb, ma * mb - t2 * vab, ma * ma - t2 * vaa  # qa G^2 - 2 qb G + qc <= 0
  if qa <= 0:
    return -math.inf, math.inf
  half = math.sqrt(max(qb * qb - qa * qc, 0.0))
  return (qb - half) / qa, (qb + half) / qa


def log_ratio_ci(a: np.ndarray, b: np.ndarray, paired_seeds: bool, confidence: float) -> tuple[float, float]:
  """t CI of log(mean a / mean b) by the delta method, exponentiated (nan where a mean is not positive)."""
  ma, mb = float(a.mean()), float(b.mean())
  if not (ma > 0 and mb > 0):
    return math.nan, math.nan
  var = np.var(a, ddof=1) / (len(a) * ma**2) + np.var(b, ddof=1) / (len(b) * mb**2)
  if paired_seeds:
    var -= 2 * np.cov(a, b, ddof=1)[0, 1] / (len(a) * ma * mb)
  half = float(stats.t.ppf(0.5 + confidence / 2, min(len(a), len(b)) - 1) * math.sqrt(max(float(var), 0.0)))
  r = math.log(ma / mb)
  with np.errstate(over='ignore'):  # a few seeds of very different sizes: a half-width past exp's range is inf
    return float(np.exp(r - half)), float(np.exp(r + half))


def summarize(
  df: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], confidence: float = CONFIDENCE
) -> pd.DataFrame:
  """Per setting of `by`: n and mean, ci_lo, ci_hi of each metric over the rows (seeds)."""
  rows = []
  for keys, g in df.groupby(list(by), sort=True):
    keys = keys if isinstance(keys, tuple) else (keys,)
    row = dict(zip(by, keys, strict=True))
    row['n'] = len(g)
    for m in metrics:
      row[f'{m}_mean'], row[f'{m}_ci_lo'], row[f'{m}_ci_hi'] = mean_ci(g[m], confidence)
    rows.append(row)
  return pd.DataFrame(rows)


def underpowered(
  claim, test, rule, n, why, statistic=math.nan, ci=(math.nan, math.nan), boundaries: Sequence[float] = ()
) -> Verdict:
  """An inconclusive verdict for data too thin for the rule (`why` says what is missing)."""
  return Verdict(
    claim,
    INCONCLUSIVE,
    float(statistic),
    (float(ci[0]), float(ci[1])),
    test,
    rule,
    int(n),
    f'underpowered: {why}',
    boundaries=tuple(boundaries),
  )


def ratio_difference_ci(
  x: pd.DataFrame, y: pd.DataFrame, confidence: float = CONFIDENCE, resamples: int = 9999
) -> tuple[float, float, float]:
  """(mean(x.num) / mean(x.den) - mean(y.num) / mean(y.den), ci_lo, ci_hi): a difference of two ratios of means
  (frames indexed by seed, columns num and den) with a bootstrap CI, BCa from BCA_MIN_SEEDS seeds and percentile
  below (BCa's acceleration is noise from a few seeds); the seeds present in both resampled together (pairing them
  by index only lets one resample draw both: two studies' seeds may be independent); nan below 3 seeds."""
  both = x.add_suffix('_x').join(y.add_suffix('_y'), how='inner')
  if len(both) < 3:
    return math.nan, math.nan, math.nan
  data = tuple(both[c].to_numpy(float) for c in ('num_x', 'den_x', 'num_y', 'den_y'))
  f = lambda a, b, c, d, axis=-1: a.mean(axis) / b.mean(axis) - c.mean(axis) / d.mean(axis)
  res = stats.bootstrap(
    data,
    f,
    paired=True,
    vectorized=True,
    n_resamples=resamples,
    confidence_level=confidence,
    method='BCa' if len(both) >= BCA_MIN_SEEDS else 'percentile',
    random_state=np.random.default_rng(0),
  )
  return float(f(*data)), float(res.confidence_interval.low), float(res.confidence_interval.high)


def bootstrap_verdict(
  ci_at, *, lo: float, hi: float, claim: str, test: str, rule: str, n: int, resamples: int = 9999
) -> Verdict:
  """A verdict on a bootstrap CI: ci_at(confidence) -> (statistic, ci_lo, ci_hi), the region [lo, hi].
  Outcome from the 95% CI (`decide`); p = 1 - the largest confidence whose CI still decides, found by
  bisection (the resamples are the same at every level), so p < 0.05 exactly when the 95% CI decides; a p below
  1 / (resamples + 1), the bootstrap's resolution, is reported as that bound."""
  stat, c_lo, c_hi = ci_at(CONFIDENCE)
  if not (math.isfinite(c_lo) and math.isfinite(c_hi)):
    return underpowered(
      claim,
      test,
      rule,
      n,
      f'no bootstrap CI ({n} seeds)',
      statistic=stat,
      ci=(c_lo, c_hi),
      boundaries=[x for x in (lo, hi) if math.isfinite(x)],
    )
  outcome = decide((c_lo, c_hi), lo, hi)
  first, floor = decide(ci_at(1e-4)[1:], lo, hi), 1 / (resamples + 1)  # p below 1 / (R + 1): unresolved
  a, b = 1e-4, 1 - floor
  if first == INCONCLUSIVE:
    p = 1.0
  elif decide(ci_at(b)[1:], lo, hi) == first:
    p = floor
  else:
    for _ in range(20):
      mid = (a + b) / 2
      a, b = (mid, b) if decide(ci_at(mid)[1:], lo, hi) == first else (a, mid)
    p = 1 - a
  why = f'p = {p:.3g}' + (" (at most; the bootstrap's resolution)" if p <= floor else '') + ' (bootstrap CI inversion)'
  return Verdict(
    claim,
    outcome,
    stat,
    (c_lo, c_hi),
    test,
    rule,
    n,
    why,
    p_value=p,
    boundaries=tuple(x for x in (lo, hi) if math.isfinite(x)),
  )


def measure(
  claim,
  statistic,
  ci,
  test,
  n,
  *,
  settle: float | None,
  max_width: float,
  relative: bool = False,
  detail='',
  extra: Mapping[str, float] | None = None,
) -> Verdict:
  """A measurement's verdict, its margins fixed before the run: `measured` where its CI is finite, not degenerate
  and at most `max_width` wide; else inconclusive (an imprecise number is not a measurement). `settle`: the largest
  change of the statistic between the last two budgets of its ladder that counts as settled
  (ablations/checks.stability); None: a number at the budget its claim names (bits stored at 1,000 exposures), its
  ladder shown, not required to settle. With `relative` both are fractions of |statistic|. No boundaries: nothing is
  decided against a region."""
  lo, hi = float(ci[0]), float(ci[1])
  scale = abs(float(statistic)) if relative else 1.0
  width = (hi - lo) / scale if scale > 0 else math.inf
  finite = math.isfinite(statistic) and math.isfinite(lo) and math.isfinite(hi) and hi > lo
  unit = ' of the value' if relative else ''
  why = (
    'no finite, non-degenerate CI'
    if not finite
    else f'the CI is {width:.3g}{unit} wide, more than the {max_width:g}{unit} a measurement may be'
    if width > max_width
    else ''
  )
  rule = f'measured: a finite 95% CI at most {max_width:g}{unit} wide (no region to decide against); ' + (
    'a number at the budget its claim names (its ladder shown, not required to settle)'
    if settle is None
    else f'settled on the ladder when the last change and its projected drift are under {settle:g}{unit}'
  )
  return Verdict(
    claim,
    INCONCLUSIVE if why else MEASURED,
    float(statistic),
    (lo, hi),
    test,
    rule,
    int(n),
    f'imprecise: {why}{f" — {detail}" if detail else ""}' if why else detail,
    extra={
      **dict(extra or {}),
      'settle': math.nan if settle is None else settle * scale,
      'at_budget': float(settle is None),
      'max_width': max_width * scale,
    },
  )


# --------------------------------------------------------------------------- regime checks and `invalid`


def _invalid_prefix(failed: Sequence[Check], raw: str, outcome: str = INVALID) -> str:
  was = f' (the rule alone gave {raw})' if raw != outcome else ''
  return f'{outcome}: ' + '; '.join(f'{c.name}: {c.detail}' for c in failed) + was


def gate(v: Verdict, checks: Sequence[Check]) -> Verdict:
  """v with `checks` attached. A failed check whose `demote` is INVALID makes the verdict `invalid` (the setup
  cannot test the claim); failed checks that only demote (noise: a rate tie, one seed deciding it, a statistic in
  the noise band) make a decisive outcome `inconclusive`. The detail names every failed check first (a verdict
  gated before is re-gated over all its checks, its failed checks named once); statistic, CI and the rule's own
  outcome (`rule_outcome`) are kept."""
  raw = v.raw_outcome
  detail = v.detail
  before = [c for c in v.checks if not c.passed]
  if before and v.outcome != raw:  # strip the earlier gate's prefix: the detail is rebuilt below
    prefix = _invalid_prefix(before, raw, v.outcome)
    detail = detail.removeprefix(prefix).removeprefix(' — ') if detail.startswith(prefix) else detail
  checks = tuple(v.checks) + tuple(checks)
  failed = [c for c in checks if not c.passed]
  v = dataclasses.replace(v, rule_outcome=raw, detail=detail, checks=checks)
  invalidating = [c for c in failed if c.demote == INVALID]
  outcome = INVALID if invalidating else INCONCLUSIVE if failed and raw in ANSWERED else raw
  if outcome == raw:
    return dataclasses.replace(v, outcome=raw)
  why = _invalid_prefix(invalidating or failed, raw, outcome)
  return dataclasses.replace(v, outcome=outcome, detail=why + (f' — {detail}' if detail else ''))


def _mean(values) -> tuple[float, int]:
  x = np.atleast_1d(np.asarray(values, float))
  x = x[np.isfinite(x)]
  return (float(x.mean()) if len(x) else math.nan), len(x)


def range_check(
  name: str, values, floor: float | None = None, ceiling: float | None = None, margin: float = 0.05
) -> Check:
  """Dynamic range: the mean of `values` lies more than `margin` (absolute, in the quantity's units;
  the default suits accuracies and fractions) above `floor` and below `ceiling` (chance, entropy, zero
  error), where given; else the quantity is pinned and cannot move with what the claim varies."""
  m, n = _mean(values)
  parts, passed = [f'mean {m:.4g} over {n} value(s)'], bool(n > 0)
  if floor is not None:
    ok = bool(m - floor > margin)
    parts.append(f'{m - floor:+.3g} from the floor {floor:g}' + ('' if ok else ' (pinned)'))
    passed &= ok
  if ceiling is not None:
    ok = bool(ceiling - m > margin)
    parts.append(f'{m - ceiling:+.3g} from the ceiling {ceiling:g}' + ('' if ok else ' (pinned)'))
    passed &= ok
  return Check(name, passed, ', '.join(parts) + f'; required: more than {margin:g} away from each')


def premise_check(
  name: str, statistic: float, ci: tuple[float, float], lo: float, hi: float = math.inf, what: str = 'the reference arm'
) -> Check:
  """Premise (a positive control): `what` (a statistic with its CI) shows what the claim needs: the CI lies inside
  [lo, hi]."""
  c_lo, c_hi = (float(c) for c in ci)
  passed = bool(math.isfinite(c_lo) and math.isfinite(c_hi) and lo <= c_lo and c_hi <= hi)
  need = f'>= {lo:g}' if hi == math.inf else f'<= {hi:g}' if lo == -math.inf else f'inside [{lo:g}, {hi:g}]'
  detail = f'{what}: {statistic:.4g} (95% CI [{c_lo:.4g}, {c_hi:.4g}]); the CI must lie {need}'
  return as_premise(Check(name, passed, detail))


def as_premise(check: Check, name: str = '') -> Check:
  """`check` as a positive control of the verdict it gates (role PREMISE), named 'premise: ...'."""
  name = name or check.name
  return dataclasses.replace(check, name=name if name.startswith('premise') else f'premise: {name}', role=PREMISE)


def all_of(name: str, checks: Sequence[Check]) -> Check:
  """One check from several (e.g. one per shape): passes if all pass; its detail names the failing ones (or all)."""
  failed = [c for c in checks if not c.passed]
  return Check(
    name, bool(checks) and not failed, '; '.join(f'{c.name}: {c.detail}' for c in (failed or checks)) or 'no checks'
  )


# --------------------------------------------------------------------------- multiple comparisons


def holm_adjust(p: Values) -> np.ndarray:
  """Holm (1979) step-down adjusted p-values, in the input order: sorted ascending, p_(i) * (m - i + 1),
  made monotone by a running maximum and capped at 1."""
  p = np.asarray(p, float)
  m = len(p)
  order = np.argsort(p, kind='stable')
  adj_sorted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
  out = np.empty(m)
  out[order] = adj_sorted
  return out


def holm(verdicts: Sequence[Verdict], alpha: float = ALPHA) -> list[Verdict]:
  """Holm correction over every verdict of the ablation (one family, fixed in its code): an `invalid` verdict
  or one without a finite p-value enters with p = 1. Sets `p_holm` on every verdict; a decisive outcome whose
  p_holm >= alpha becomes `inconclusive` (see the module docstring)."""
  p = [
    v.p_value if v.outcome != INVALID and v.p_value is not None and math.isfinite(v.p_value) else 1.0 for v in verdicts
  ]
  out = []
  for v, p_adj in zip(verdicts, holm_adjust(p) if p else [], strict=True):
    v = dataclasses.replace(v, p_holm=float(p_adj), rule_outcome=v.raw_outcome)
    if v.outcome in DECISIVE and p_adj >= alpha:
      p_text = f'{v.p_value:.3g}' if v.p_value is not None else 'none (entered as 1)'
      why = (
        f'inconclusive after Holm correction: p = {p_text}, Holm-adjusted p = {p_adj:.3g} >= {alpha:g} '
        f'over the {len(verdicts)} verdicts of this ablation (uncorrected outcome: {v.outcome})'
      )
      v = dataclasses.replace(v, outcome=INCONCLUSIVE, detail=why + (f' — {v.detail}' if v.detail else ''))
    out.append(v)
  return out
