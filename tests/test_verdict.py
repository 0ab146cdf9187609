"""The verdict machinery of issue 17 on synthetic inputs with known answers: `invalid` and the regime
checks, Holm, per-seed slopes, rank agreement by permutation, best-per-point learning rates, and how
the runner renders them (report.md, report.json, the Results sections, the console line)."""

import dataclasses
import glob
import json
import math
import os

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments import publish as publish_lib
from ffn_research import rules as rules_lib
from ffn_research import stats as verdict
from ffn_research.ablations import base
from ffn_research.ablations import report as report_lib
from ffn_research.ablations import runner
from ffn_research.config import default_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
R, NR, INC, INV = verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.INCONCLUSIVE, verdict.INVALID


def _v(outcome=R, p=None, claim='c'):
  return verdict.Verdict(claim, outcome, 1.0, (0.5, 1.5), 'test', 'rule', 5, 'fit', p_value=p)


# --------------------------------------------------------------------------- invalid and gate


def test_invalid_is_an_outcome_and_check_moved():
  assert verdict.OUTCOMES == (R, NR, verdict.MEASURED, INC, INV) and INV == 'invalid'
  assert base.Check is verdict.Check


def test_gate_failed_check_gives_invalid_with_its_numbers():
  ok = verdict.Check('plateau', True, 'change 0.001')
  bad = verdict.Check('premise', False, 'slope 0.35 < 0.8')
  bad2 = verdict.Check('range', False, 'pinned at 0.0625')
  v = verdict.gate(_v(NR, p=0.01), [ok, bad, bad2])
  assert v.outcome == INV and v.checks == (ok, bad, bad2)
  assert v.detail.startswith('invalid: premise: slope 0.35 < 0.8; range: pinned at 0.0625')
  assert 'the rule alone gave not reproduced' in v.detail and v.detail.endswith('fit')
  assert (v.statistic, v.ci, v.p_value) == (1.0, (0.5, 1.5), 0.01)  # what was measured is kept
  assert v.failed_checks == (bad, bad2)


def test_gate_passing_checks_keep_the_outcome():
  for outcome in (R, NR, INC):
    v = verdict.gate(_v(outcome), [verdict.Check('a', True, 'x'), verdict.Check('b', True, 'y')])
    assert v.outcome == outcome and len(v.checks) == 2 and v.detail == 'fit'


def test_verdict_round_trips_through_json_and_reads_old_reports():
  v = verdict.gate(_v(R, p=0.02), [verdict.Check('p', False, 'd')])
  v = verdict.holm([v, _v(R, p=0.01)])[0]
  back = verdict.Verdict.from_dict(json.loads(json.dumps(v.to_dict())))
  assert back == v
  old = {k: val for k, val in _v(R, p=0.02).to_dict().items() if k not in ('checks', 'p_holm')}
  old['ci'] = [None, None]
  back = verdict.Verdict.from_dict(old)
  assert back.checks == () and back.p_holm is None and math.isnan(back.ci[0])


# --------------------------------------------------------------------------- regime checks


def test_range_check_fires_when_pinned():
  c = verdict.range_check('reasoning above chance', [0.067, 0.066], floor=0.0625, margin=0.05)
  assert not c.passed and 'floor 0.0625 (pinned)' in c.detail
  assert verdict.range_check('acc', [0.5, 0.6], floor=0.0625, ceiling=1.0).passed
  assert not verdict.range_check('acc', [0.99, 1.0], floor=0.0, ceiling=1.0).passed
  assert not verdict.range_check('empty', [], floor=0.0).passed


def test_premise_check():
  assert verdict.premise_check('dense slope', 0.9, (0.82, 0.98), 0.8).passed
  c = verdict.premise_check('dense slope', 0.35, (0.2, 0.5), 0.8, what='dense bits vs params slope')
  assert not c.passed and c.detail.startswith('dense bits vs params slope: 0.35') and '>= 0.8' in c.detail
  assert not verdict.premise_check('p', 0.9, (0.7, 1.1), 0.8).passed  # CI not above the bar
  assert not verdict.premise_check('p', 0.9, (0.85, 1.1), 0.8, 1.0).passed
  assert not verdict.premise_check('p', math.nan, (math.nan, math.nan), 0.8).passed


def test_holm_hand_computed():
  # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04)
  assert np.allclose(verdict.holm_adjust([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
  out = verdict.holm([_v(R, 0.01, 'a'), _v(R, 0.04, 'b'), _v(NR, 0.03, 'c')])
  assert [v.p_holm for v in out] == pytest.approx([0.03, 0.06, 0.06])
  assert [v.outcome for v in out] == [R, INC, INC]
  assert 'inconclusive after Holm correction' in out[1].detail and 'uncorrected outcome: reproduced' in out[1].detail
  assert 'uncorrected outcome: not reproduced' in out[2].detail
  assert verdict.holm(out) == out  # idempotent


def test_holm_family_is_every_verdict_invalid_and_missing_p_at_one():
  gated = verdict.gate(_v(R, 0.001), [verdict.Check('x', False, 'y')])
  out = verdict.holm([gated, _v(R, None), _v(R, 0.02), _v(INC, 0.5), _v(R, math.nan)])
  assert all(v.p_holm is not None for v in out)  # set on every verdict, the family fixed by the study
  assert out[0].outcome == verdict.INVALID and out[0].p_holm == 1.0 and out[0].raw_outcome == R
  assert out[2].p_holm == pytest.approx(0.1) and out[2].outcome == INC  # 5 x 0.02: a family of 5
  assert out[1].outcome == INC and 'none (entered as 1)' in out[1].detail  # a decision without a test
  assert out[3].p_holm == pytest.approx(1.0) and out[3].outcome == INC  # never upgraded
  assert verdict.holm([_v(R, 0.03)])[0].outcome == R  # a family of one is unchanged


def test_holm_adjusted_p_is_monotone_and_at_least_p():
  rng = np.random.default_rng(0)
  for _ in range(50):
    p = rng.uniform(0, 0.2, rng.integers(1, 12))
    adj = verdict.holm_adjust(p)
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= -1e-15) and np.all(adj >= p) and np.all(adj <= 1)
    assert adj[order[0]] == pytest.approx(min(1, len(p) * p[order[0]]))


def test_decision_p_agrees_with_the_ci_decision():
  rng = np.random.default_rng(1)
  for _ in range(60):
    a, b = rng.normal(0, 1, 6), rng.normal(rng.uniform(-1, 1), 1, 6)
    for expect, margin in [('less', 0.0), ('greater', 0.0), ('less', 0.3), ('equal', 0.8)]:
      v = rules_lib.paired(a, b, expect=expect, margin=margin, claim='c')
      assert (v.outcome != INC) == (v.p_value < 0.05)
    t = rules_lib.threshold(a, level=0.3, direction='below', claim='c')
    assert (t.outcome != INC) == (t.p_value < 0.05)
  # margin 0: the paired p is scipy's ttest_rel p
  v = rules_lib.paired(a, b, expect='less', claim='c')
  assert v.p_value == pytest.approx(stats.ttest_rel(a, b).pvalue)


def test_equivalence_p_is_two_one_sided_tests_and_holm_can_downgrade_it():
  rng = np.random.default_rng(5)
  b = rng.normal(2.0, 0.1, 6)
  a = b + 0.01 + rng.normal(0, 0.01, 6)
  d = a - b
  v = rules_lib.paired(a, b, expect='equal', margin=0.03, claim='a = b within 0.03')
  edges = [stats.ttest_1samp(d, e).pvalue for e in (-0.03, 0.03)]
  assert v.outcome == R and v.p_value == pytest.approx(max(edges))  # the farther edge is trivially rejected
  far = rules_lib.paired(a + 0.1, b, expect='equal', margin=0.03, claim='c')
  assert far.outcome == NR and far.p_value == pytest.approx(stats.ttest_1samp(d + 0.1, 0.03).pvalue)
  # with enough other tests in the family, a borderline equivalence loses its decision like any other
  weak = dataclasses.replace(v, p_value=0.03)
  out = verdict.holm([weak, _v(R, 0.04), _v(NR, 0.045)])
  assert out[0].p_holm == pytest.approx(0.09) and [o.outcome for o in out] == [INC, INC, INC]


# --------------------------------------------------------------------------- per-seed slopes


def _slope_frame(slopes, noise, rng, widths=(4, 8, 16, 32, 64, 128)):
  rows = []
  for s, b in enumerate(slopes):
    for w in widths:
      rows.append({'d': w, 'seed': s, 'err': 0.3 * w**b * math.exp(noise * rng.standard_normal())})
  return pd.DataFrame(rows)


def test_slope_per_seed_known_answers():
  rng = np.random.default_rng(0)
  df = _slope_frame([-2.0, -2.0, -2.0], 0.0, rng)
  v = rules_lib.slope_per_seed(df, x='d', y='err', seed='seed', claimed=-2, margin=0.25, claim='c')
  assert v.outcome == R and v.statistic == pytest.approx(-2.0) and v.n == 3
  assert v.extra['intercept'] == pytest.approx(math.log(0.3)) and v.extra['residual_rms'] < 1e-9
  df = _slope_frame([-1.0, -1.02, -0.98, -1.01], 0.0, rng)
  v = rules_lib.slope_per_seed(df, x='d', y='err', seed='seed', claimed=-2, margin=0.25, claim='c')
  assert v.outcome == NR and v.ci == pytest.approx(
    stats.t.interval(0.95, 3, loc=-1.0025, scale=stats.sem([-1, -1.02, -0.98, -1.01]))
  )
  two = _slope_frame([-2.0, -2.0], 0.0, rng)
  assert rules_lib.slope_per_seed(two, x='d', y='err', seed='seed', claimed=-2, margin=0.25, claim='c').outcome == INC
  few = df[df['d'] <= 8]
  v = rules_lib.slope_per_seed(few, x='d', y='err', seed='seed', claimed=-2, margin=0.25, claim='c')
  assert v.outcome == INC and 'underpowered' in v.detail


def test_slope_per_seed_reports_curvature():
  x = np.array([1, 2, 4, 8, 16, 32], float)
  rows = [{'x': xi, 's': s, 'y': math.exp(0.5 * math.log(xi) ** 2) * (1 + 0.01 * s)} for s in range(4) for xi in x]
  v = rules_lib.slope_per_seed(pd.DataFrame(rows), x='x', y='y', seed='s', claimed=1, margin=10, claim='c')
  assert v.extra['curvature'] == pytest.approx(0.5) and v.extra['residual_rms'] > 0.5
  assert 'curvature 0.5' in v.detail


def test_slope_per_seed_ci_covers_the_true_slope_at_the_stated_rate():
  # 400 datasets of 5 seeds; each seed has its own slope (seed-level variation) plus point noise.
  rng = np.random.default_rng(42)
  true, sims, seeds = -1.5, 400, 5
  lx = np.log(np.array([4, 8, 16, 32, 64, 128], float))
  slopes = true + 0.1 * rng.standard_normal((sims, seeds))
  ly = 1.0 + slopes[..., None] * lx + 0.05 * rng.standard_normal((sims, seeds, len(lx)))
  # vectorised per-seed least squares (the same estimator as slope_per_seed), t CI over seeds
  xc = lx - lx.mean()
  b = (ly - ly.mean(-1, keepdims=True)) @ xc / (xc @ xc)
  half = stats.t.ppf(0.975, seeds - 1) * b.std(-1, ddof=1) / math.sqrt(seeds)
  covered = np.abs(b.mean(-1) - true) <= half
  assert 0.92 <= covered.mean() <= 0.98
  # the function itself agrees with the vectorised computation on a few of them
  for i in range(5):
    df = pd.DataFrame(
      {'x': np.tile(np.exp(lx), seeds), 'seed': np.repeat(np.arange(seeds), len(lx)), 'y': np.exp(ly[i]).ravel()}
    )
    v = rules_lib.slope_per_seed(df, x='x', y='y', seed='seed', claimed=true, margin=0.5, claim='c')
    assert v.statistic == pytest.approx(b[i].mean()) and v.ci[1] - v.statistic == pytest.approx(half[i])
  # pooling every (x, seed) point as independent (rules_lib.slope's fit) under-covers with seed-level variation
  x = np.tile(lx, seeds)
  xp = x - x.mean()
  y = ly.reshape(sims, -1)
  bp = (y - y.mean(-1, keepdims=True)) @ xp / (xp @ xp)
  resid = y - y.mean(-1, keepdims=True) - bp[:, None] * xp
  se = np.sqrt((resid**2).sum(-1) / (len(x) - 2) / (xp @ xp))
  assert np.mean(np.abs(bp - true) <= stats.t.ppf(0.975, len(x) - 2) * se) < 0.92
  fit = stats.linregress(x, y[0])
  assert (fit.slope, fit.stderr) == pytest.approx((bp[0], se[0]))


# --------------------------------------------------------------------------- rank agreement


def test_rank_agreement_monotone_vs_shuffled():
  a = np.arange(7, dtype=float)
  v = rules_lib.rank_agreement(a, a**2 + 3, claim='c')
  assert v.outcome == R and v.statistic == pytest.approx(1.0)
  assert v.p_value == pytest.approx(1 / math.factorial(7))  # exact: only the identity ordering reaches rho 1
  assert 'exact over all 5040 orderings' in v.detail
  rev = rules_lib.rank_agreement(a, -a, claim='c')
  assert rev.outcome == NR and rev.p_value == pytest.approx(1 / math.factorial(7))
  shuffled = rules_lib.rank_agreement(a, np.array([3, 6, 0, 5, 1, 2, 4.0]), claim='c')
  rho = stats.spearmanr(a, [3, 6, 0, 5, 1, 2, 4]).statistic
  assert shuffled.statistic == pytest.approx(rho) and shuffled.outcome == INC and shuffled.p_value > 0.2
  # the case: rho 0.4 over 5 items is no evidence (p ~ 0.3)
  five = rules_lib.rank_agreement([1, 2, 3, 4, 5], [2, 1, 5, 3, 4], claim='c')
  assert five.statistic == pytest.approx(0.6) and five.outcome == INC and five.p_value > 0.1
  assert rules_lib.rank_agreement([1, 2, 3], [1, 2, 3], claim='c').outcome == INC  # < 4 items
  # A magnitude claim: rho 0.83 over 8 items is significantly > 0, but its CI reaches far below 0.5: not shown.
  eight = rules_lib.rank_agreement(np.arange(8.0), [3, 1, 2, 5, 4, 8, 6, 7], claim='c')
  assert eight.statistic == pytest.approx(1 - 6 * 14 / (8 * 63)) and eight.p_value < 0.05
  assert eight.ci[0] < 0.5 < eight.statistic and eight.outcome == INC and 'rho >= 0.5 is not shown' in eight.detail


def test_rank_agreement_permutation_p_matches_scipy_and_exact():
  rng = np.random.default_rng(3)
  a = rng.normal(size=6)
  b = a + rng.normal(scale=1.0, size=6)
  v = rules_lib.rank_agreement(a, b, claim='c', threshold=0.0)  # 6! = 720 orderings: exact
  ref = stats.permutation_test(
    (b,),
    lambda y: stats.spearmanr(a, y).statistic,
    permutation_type='pairings',
    n_resamples=1000,
    alternative='greater',
  ).pvalue
  assert 'exact over all 720' in v.detail and v.extra['p_positive'] == pytest.approx(ref)
  a, b = rng.normal(size=8), rng.normal(size=8)
  exact = rules_lib.rank_agreement(a, b, claim='c', n_perm=50000)
  sampled = rules_lib.rank_agreement(a, b, claim='c', n_perm=10000)
  assert 'random orderings' in sampled.detail and 'exact' in exact.detail
  assert sampled.extra['p_positive'] == pytest.approx(exact.extra['p_positive'], abs=0.015)


# --------------------------------------------------------------------------- learning rate per point


def _fake_study():
  def rules(sel, scale):
    del sel, scale
    gated = verdict.gate(
      _v(NR, 0.001, 'the claim an unfit setup cannot test'),
      [
        verdict.Check('trained to a plateau', True, 'change 0.001'),
        verdict.as_premise(verdict.Check('dense slope >= 0.8', False, 'slope 0.35 (95% CI [0.2, 0.5])')),
      ],
    )
    control = verdict.as_premise(verdict.Check('the control shows the effect', True, 'it does'))
    return [
      dataclasses.replace(v, points=('main',))
      for v in [
        gated,
        *(verdict.gate(_v(*a), [control]) for a in ((R, 0.01, 'strong'), (R, 0.04, 'weak'), (NR, 0.03, 'other'))),
      ]
    ]

  def present(result, ctx):
    del result, ctx
    return base.Presentation(headline='h', checks=[base.Check('metric sane', True, 'ok')])

  return base.Study(
    name='fake',
    claim='A fake claim (Nobody 2026).',
    citation='Nobody 2026',
    published='1',
    regimes={'full': base.Regime(rates=(1e-3,), steps=10, seeds=1, cap=1.0)},
    arms=lambda scale: [base.Arm('main', default_config(), {'': {}}, tuned=False)],
    rules=rules,
    present=present,
    claims=[base.Claim(verdict.MAGNITUDE, 'a fake setup', 'a fake control')] * 4,
    changes=[
      base.DesignChange('2026-11-20', 'abc1234', 'grid widened', 'invalid -> reproduced', (2, 3), to_positive=(2,)),
    ],
  )


def _fake_runs(study, outdir, points, rec, regime, progress, tick, seed_offset):
  """A pass that trains nothing: one completed run per budget."""
  del study, outdir, points, rec, regime, progress, seed_offset
  tick()
  return pd.DataFrame(
    {
      'arm': 'main',
      'point': 'main',
      'status': 'completed',
      'eval_loss': 1.0,
      'train.learning_rate': 1e-3,
      'train.steps': [2, 5, 10],
      'train.seed': 0,
      'wall_time_s': 1.0,
    }
  ), 0


def test_a_verdict_a_failed_check_made_inconclusive_prints_its_p_as_no_decision():
  """Holm's own demotion prints p and the adjusted p as usual; a decided rule withheld by a failed check (a settled
  existence ladder before every doubling is spent, a rate tie) says its p decides nothing."""
  v = rules_lib.threshold([1.5, 1.6, 1.55], level=1.0, direction='below', claim='c')
  v = dataclasses.replace(v, p_holm=0.002)
  assert report_lib._p_text(v).endswith('Holm-adjusted 0.002')
  ladder = verdict.Check('stable on the budget ladder', False, 'x', demote=verdict.INCONCLUSIVE)
  held = verdict.gate(v, [ladder])
  assert held.outcome == verdict.INCONCLUSIVE and held.raw_outcome == verdict.NOT_REPRODUCED
  assert report_lib._p_text(dataclasses.replace(held, p_holm=0.002)) == (
    f'p = {report_lib.fmt(v.p_value)} of the rule alone; Holm-adjusted 0.002 (not a decision: a failed check made '
    'it inconclusive)'
  )


def test_runner_applies_holm_and_renders_invalid(tmp_path, monkeypatch):
  monkeypatch.setattr(runner.ablations, 'get', lambda name: _fake_study())
  monkeypatch.setattr(runner, '_run_pass', _fake_runs)
  monkeypatch.setattr(report_lib, 'git_commit', lambda *a: 'abc123')  # a committed tree (publish refuses +dirty)
  report = runner.run('fake', str(tmp_path / 'work'), 'full', progress=False)
  outcomes = [v['outcome'] for v in report['verdicts']]
  assert outcomes == [INV, R, INC, INC]  # Holm over all 4 verdicts, the invalid one at p = 1
  assert [v['p_holm'] for v in report['verdicts']] == [
    1.0,
    pytest.approx(0.04),
    pytest.approx(0.09),
    pytest.approx(0.09),
  ]
  assert report['verdicts'][0]['checks'][1] == {
    'name': 'premise: dense slope >= 0.8',
    'passed': False,
    'detail': 'slope 0.35 (95% CI [0.2, 0.5])',
    'remedy': '',
    'points': [],
    'role': verdict.PREMISE,
    'demote': INV,
    'applies': True,
  }
  md = (tmp_path / 'work' / 'fake' / 'report.md').read_text()
  assert '- **invalid** — the claim an unfit setup cannot test' in md
  assert '## Design changes after results' in md and '| 2026-11-20 | abc1234 | grid widened |' in md
  strong, weak = md.split('— strong')[1].split('\n- **')[0], md.split('— weak')[1].split('\n- **')[0]
  assert '**changed after results** (2026-11-20 **(null -> positive)**): grid widened' in strong
  assert '1 other design change(s) after results moved it' in weak  # verdict 3 moved, not to positive
  assert (
    '**invalid: a check the verdict rests on failed, so this setup cannot decide the claim (no extension remedies '
    'it)**; '
    'failed: premise: dense slope >= 0.8: slope 0.35' in md
  )
  assert '- PASS trained to a plateau: change 0.001' in md and '- **FAIL** premise: dense slope >= 0.8' in md
  assert md.count('slope 0.35 (95% CI [0.2, 0.5])') == 1  # a failed check's numbers are said once
  # each rung of the ladder records its premise: the failed one at every budget, the passing control, and says so
  assert [r['premise'] for r in report['verdicts'][0]['ladder']] == [False] * 3
  assert [r['premise'] for r in report['verdicts'][1]['ladder']] == [True] * 3
  assert md.count('premise fails (the rule alone: ') == 3
  assert '[0.5, 1.5] premise fails (the rule alone: not reproduced); T/2 (5 steps)' in md
  assert "the premise fails at T/4, T/2, T: these are the rule's outcomes, not a refutation" in md
  assert 'p = 0.04, Holm-adjusted 0.09' in md and 'Holm correction over the 4 verdict(s)' in md
  assert report_lib.outcome_text(report['verdicts'][0]) == 'invalid (failed: premise: dense slope >= 0.8)'
  assert report_lib.index_line('fake', report).count('invalid (failed: premise') == 1
  # README Results block
  (tmp_path / 'README.md').write_text(f'# T\n\n{publish_lib.README_BEGIN}\nold\n{publish_lib.README_END}\n')
  publish_lib.publish('fake', str(tmp_path / 'work'), repo_root=str(tmp_path))
  assert '| 1 reproduced, 2 inconclusive, 1 invalid |' in (tmp_path / 'README.md').read_text()
  page = (tmp_path / 'docs' / 'results' / 'README.md').read_text()
  section = page.split(publish_lib.README_BEGIN)[1].split(publish_lib.README_END)[0]
  assert '- **invalid**: the claim an unfit setup cannot test' in section
  assert '  - failed check: premise: dense slope >= 0.8: slope 0.35 (95% CI [0.2, 0.5])' in section
  assert 'trained to a plateau' not in section  # passing checks stay in report.md
  assert '- **inconclusive**: weak (1, 95% CI [0.5, 1.5], n = 5, Holm-adjusted p = 0.09)' in section
  # report.md regenerates from report.json alone (what an old published report has)
  again = report_lib.report_markdown(json.loads((tmp_path / 'work' / 'fake' / 'report.json').read_text()))
  assert again == md


@pytest.mark.parametrize('path', sorted(glob.glob(os.path.join(REPO, 'docs', 'results', '*', 'report.json'))))
def test_published_reports_still_render(path):
  r = json.loads(open(path, encoding='utf-8').read())
  if 'verdicts' not in r:
    pytest.skip('not an ablation report')
  md = report_lib.report_markdown(r)
  assert all(f'**{v["outcome"]}** — {v["claim"]}' in md for v in r['verdicts'])
  assert all(report_lib.outcome_text(v) for v in r['verdicts'])


def test_results_section_renders_published_reports():
  section = publish_lib.results_section(REPO)
  for path in glob.glob(os.path.join(REPO, 'docs', 'results', '*', 'report.json')):
    r = json.loads(open(path, encoding='utf-8').read())
    assert f'### {r["name"]}' in section
    env = r['environment']  # the CPU model where the report named one (not just the architecture again)
    named = env['processor'] not in env['machine']
    assert (f'{env["machine"]}, {env["processor"]}' in section) == named


def test_a_dropped_claim_is_said_in_the_report_the_results_page_and_the_readme_table(tmp_path):
  """base.Dropped: a claim no longer judged is listed with its reason after the verdicts, on the results page and as a
  count beside the README's verdict counts; it is not a verdict."""
  r = json.loads(open(os.path.join(REPO, 'docs', 'results', 'moe_topk', 'report.json'), encoding='utf-8').read())
  d = base.Dropped('the z-loss stabilises training', 'no rate diverged (0 of 16)', '2026-11-29', 'invalid')
  r['dropped'] = [d.to_dict()]
  md = report_lib.report_markdown(r)
  line = '- **dropped** (2026-11-29; invalid before): the z-loss stabilises training — no rate diverged (0 of 16)'
  assert '## Claims not tested here' in md and line in md and 'those of their day' not in md
  assert md.index('## Claims not tested here') < md.index('## Design changes after results')
  assert '## Claims not tested here' not in report_lib.report_markdown({**r, 'dropped': []})
  moved = report_lib.report_markdown({**r, 'dropped': [{**d.to_dict(), 'renumbered': 'old 4 = the bias (now 3)'}]})
  key = 'Verdict numbers in the text of earlier change rows are those of their day: old 4 = the bias (now 3)'
  assert moved.count(key) == 2 and moved.index('## Design changes after results') < moved.rindex(key)  # both sections
  folder = tmp_path / 'docs' / 'results' / r['name']
  folder.mkdir(parents=True)
  (folder / 'report.json').write_text(json.dumps(r))
  assert (
    '- **dropped** (invalid before): the z-loss stabilises training — no rate diverged (0 of 16)'
    in publish_lib.results_section(str(tmp_path))
  )
  (row,) = [x for x in publish_lib.headline_section(str(tmp_path)).splitlines() if x.startswith(f'| [{r["name"]}]')]
  assert row.endswith('| 5 reproduced, 1 inconclusive; 1 claim dropped (invalid before; the report says why) |'), row


def test_threshold_at_exactly_the_level_is_not_strictly_beyond_it():
  for direction in ('below', 'above'):
    v = rules_lib.threshold([5.0] * 4, level=5.0, direction=direction, claim='c')
    assert v.outcome == verdict.NOT_REPRODUCED
  assert rules_lib.threshold([6.0] * 4, level=5.0, direction='above', claim='c').outcome == verdict.REPRODUCED


# --------------------------------------------------------------------------- issue 45: exact and bounded statistics


def test_exact_rank_p_of_eight_items_matches_enumeration():
  """8! = 40,320 orderings are enumerated, not sampled: the p is the share of orderings with rho >= the observed."""
  import itertools

  a = np.arange(8.0)
  b = np.array([0, 2, 1, 3, 5, 4, 7, 6.0])
  v = rules_lib.rank_agreement(a, b, claim='c')
  rho = stats.spearmanr(a, b).statistic
  count = sum(stats.spearmanr(a, b[list(p)]).statistic >= rho - 1e-12 for p in itertools.permutations(range(8)))
  assert 'exact over all 40320 orderings' in v.detail
  assert v.extra['p_positive'] == pytest.approx(count / 40320)
  big = rules_lib.rank_agreement(np.arange(11.0), np.arange(11.0), claim='c', n_perm=2000)
  assert '2000 random orderings' in big.detail and 'Monte Carlo standard error' in big.detail


def test_a_bounded_interval_never_leaves_its_range():
  """The t interval intersected with the range: never outside it, and the same decision as the t interval for every
  boundary inside the range (a transformed scale would move outcomes)."""
  loads = [1.01, 1.02, 1.0, 3.0]  # max/mean load >= 1; a t interval reaches below 1
  m, lo, hi = verdict.mean_ci(loads)
  assert lo < 1
  m_b, lo_b, hi_b = verdict.mean_ci(loads, bounds=(1.0, math.inf))
  assert (m_b, lo_b, hi_b) == (m, 1.0, hi)
  fracs = [0.97, 0.99, 0.999, 0.9]  # fractions in [0, 1]
  assert verdict.mean_ci(fracs)[2] > 1 and verdict.mean_ci(fracs, bounds=(0.0, 1.0))[2] == 1.0
  stuck = [0.59, 0.59, 0.59, 2e-4, 2e-4]  # 3 of 5 seeds stuck: the mean's t interval reaches 0.01
  for level in (1.05, 1.5, 2.0, 3.0, 0.01):
    data = stuck if level == 0.01 else loads
    bounds = (0.0, math.inf) if level == 0.01 else (1.0, math.inf)
    t = rules_lib.threshold(data, level=level, direction='below', claim='c')
    b = rules_lib.threshold(data, level=level, direction='below', claim='c', bounds=bounds)
    assert b.outcome == t.outcome and b.p_value == t.p_value and bounds[0] <= b.ci[0], (level, b)


def test_ratio_of_means_uses_bca_only_from_ten_seeds():
  r, lo, hi = rules_lib.ratio_of_means([-100.0, 100.5, 0.1], [1.0, 1.0, 1.0])  # values of both signs, a mean near 0
  assert r == pytest.approx(0.2) and lo == 0.0 and hi == math.inf  # a log interval past exp's range: [0, inf]
  rng = np.random.default_rng(0)
  a, b = rng.uniform(1, 2, 5), rng.uniform(2, 3, 5)
  r, lo, hi = rules_lib.ratio_of_means(a, b)
  ma, mb = a.mean(), b.mean()
  var = a.var(ddof=1) / (5 * ma**2) + b.var(ddof=1) / (5 * mb**2) - 2 * np.cov(a, b)[0, 1] / (5 * ma * mb)
  half = stats.t.ppf(0.975, 4) * math.sqrt(var)
  assert (lo, hi) == pytest.approx((r * math.exp(-half), r * math.exp(half)))  # t on the log scale below 10 seeds
  a10, b10 = rng.uniform(1, 2, 10), rng.uniform(2, 3, 10)
  r10, lo10, hi10 = rules_lib.ratio_of_means(a10, b10)
  ref = stats.bootstrap(
    (a10, b10),
    lambda x, y, axis=-1: x.mean(axis=axis) / y.mean(axis=axis),
    paired=True,
    vectorized=True,
    n_resamples=9999,
    method='BCa',
    random_state=np.random.default_rng(0),
  ).confidence_interval
  assert (lo10, hi10) == pytest.approx((ref.low, ref.high))


def test_ratio_of_means_below_ten_seeds_uses_fieller_where_a_mean_is_not_positive():
  """A share of a gap whose numerator mean is <= 0 (the log ratio undefined): Fieller's interval, which is the set of
  ratios G a paired t test of a - G b does not reject (checked by inverting the test on a grid)."""
  a = np.array([-0.05, -0.12, -0.08, -0.11, -0.07, -0.10, -0.06, -0.13, -0.09])  # MoE - dense-active, 9 seeds
  b = np.array([0.95, 1.05, 1.0, 0.98, 1.02, 0.97, 1.03, 0.99, 1.01])  # dense-total - dense-active
  r, lo, hi = rules_lib.ratio_of_means(a, b)
  assert r == pytest.approx(a.mean() / b.mean()) and lo < r < hi < 0
  grid = np.linspace(-0.2, 0.0, 20001)
  kept = [g for g in grid if stats.ttest_1samp(a - g * b, 0.0).pvalue >= 0.05]
  assert (lo, hi) == pytest.approx((kept[0], kept[-1]), abs=2e-5)
  assert rules_lib.ratio_of_means(a, b - 0.99)[1:] == (-math.inf, math.inf)  # mean b (0.01) not resolved from 0
  pos = rules_lib.ratio_of_means(-a, b)  # both means positive: the log-ratio interval, as before
  assert pos[1:] == pytest.approx(verdict.log_ratio_ci(-a, b, True, 0.95))


def test_a_study_without_a_premise_does_not_load(monkeypatch):
  ok = dict(
    name='x',
    claim='c',
    citation='c',
    published='p',
    regimes={},
    arms=lambda s: [],
    rules=lambda sel, s: [],
    present=lambda r, c: None,
  )
  with pytest.raises(base.StudyError, match='declares no claims'):
    base.Study(**ok)
  with pytest.raises(base.StudyError, match='verdict 2 declares no premise'):
    base.Study(**ok, claims=[base.Claim(verdict.SIGN, 's', 'p'), base.Claim(verdict.SIGN, 's', ' ')])
  with pytest.raises(base.StudyError, match="kind 'slope'"):
    base.Study(**ok, claims=[base.Claim('slope', 's', 'p')])
  with pytest.raises(base.StudyError, match=r'verdict 1 premise has an unformatted \{CONTROL\} \(no f prefix\?\)$'):
    base.Study(**ok, claims=[base.Claim(verdict.SIGN, 's', 'rule 1 reproduced on {CONTROL} (one teacher)')])
  base.Study(**ok, claims=[base.Claim(verdict.SIGN, 'rates {0.01, 0.03}', 'p')])  # a set of numbers is text
  from ffn_research import ablations

  def broken(name):
    raise base.StudyError('study moe_topk: verdict 3 declares no premise')

  monkeypatch.setattr(ablations.importlib, 'import_module', broken)
  with pytest.raises(ablations.UnknownAblation, match='^study moe_topk: verdict 3 declares no premise$'):
    ablations.get('moe_topk')


def test_a_verdict_without_a_computed_premise_is_invalid_never_not_reproduced(tmp_path, monkeypatch):
  study = _fake_study()
  bare = dataclasses.replace(
    study, rules=lambda sel, scale: [dataclasses.replace(_v(NR, 0.001, 'x'), points=('main',))] * 4
  )
  monkeypatch.setattr(runner.ablations, 'get', lambda name: bare)
  monkeypatch.setattr(runner, '_run_pass', _fake_runs)
  report = runner.run('fake', str(tmp_path), 'full', progress=False)
  for v in report['verdicts']:
    assert v['outcome'] == INV and v['rule_outcome'] == NR
    assert any(c['role'] == verdict.PREMISE and not c['passed'] for c in v['checks'])
    assert 'no positive control was computed' in v['detail']
    assert v['kind'] == verdict.MAGNITUDE and v['scope'] == 'a fake setup' and len(v['ladder']) == 3
    assert all(r['premise'] is None for r in v['ladder'])  # none computed at any budget


def test_errorbar_ci_draws_an_unbounded_interval_as_no_bar(tmp_path):
  """An unbounded Fieller interval (ratio_of_means below 10 seeds) is drawn as no bar; the figure still saves."""
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots()
  base.errorbar_ci(ax, [1, 2, 3], [0.5, 0.2, 0.1], [0.4, -math.inf, math.nan], [0.7, math.inf, 0.2])
  segments = ax.containers[0].lines[2][0].get_segments()
  assert [tuple(s[:, 1]) for s in segments] == [(0.4, 0.7), (0.2, 0.2), (0.1, 0.2)]
  fig.savefig(tmp_path / 'f.png')
  plt.close(fig)


def test_ratio_difference_ci_pairs_seeds_by_index_and_needs_three():
  """stats.ratio_difference_ci: mean(x.num) / mean(x.den) - mean(y.num) / mean(y.den) over the seeds both frames
  hold (joined by index), a bootstrap CI around it (percentile below 10 seeds, BCa from 10); nan below 3 seeds."""
  rng = np.random.default_rng(0)
  x = pd.DataFrame({'num': rng.normal(9, 1, 12), 'den': rng.normal(10, 1, 12)})
  y = pd.DataFrame({'num': rng.normal(2, 1, 10), 'den': rng.normal(10, 1, 10)}, index=range(2, 12))
  d, lo, hi = verdict.ratio_difference_ci(x, y)
  both = x.index.intersection(y.index)
  want = x.loc[both, 'num'].mean() / x.loc[both, 'den'].mean() - y['num'].mean() / y['den'].mean()
  assert d == pytest.approx(want) and lo < d < hi and hi - lo < 0.5
  assert verdict.ratio_difference_ci(x, y, confidence=0.5)[1] > lo  # a narrower interval at a lower confidence
  assert all(math.isnan(v) for v in verdict.ratio_difference_ci(x.iloc[:2], y))  # 0 seeds in common


def _binary_pairs(k: int, c: int, ties: int) -> tuple[np.ndarray, np.ndarray]:
  """k pairs (1, 0), c pairs (0, 1) and `ties` pairs (1, 1)."""
  a = np.array([1.0] * k + [0.0] * c + [1.0] * ties)
  b = np.array([0.0] * k + [1.0] * c + [1.0] * ties)
  return a, b


def test_paired_binary_is_the_exact_mcnemar_test():
  """The CI is the Clopper-Pearson interval of k / n (beta quantiles, computed here independently) mapped to
  mean(a - b); p < 0.05 exactly where the CI decides; 5 discordant pairs all one way: a t interval decides, the
  exact test not."""
  for k, c, ties in [(3, 7, 10), (0, 5, 59), (10, 0, 54), (12, 20, 0), (1, 1, 3)]:
    a, b = _binary_pairs(k, c, ties)
    v = rules_lib.paired_binary(a, b, expect='less', claim='')
    n, big = k + c, k + c + ties
    lo = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    assert v.statistic == pytest.approx((k - c) / big) and v.n == big
    assert v.ci == pytest.approx((n / big * (2 * lo - 1), n / big * (2 * hi - 1)), rel=1e-6)
    assert (v.p_value < 0.05) == (v.outcome != verdict.INCONCLUSIVE)
  a, b = _binary_pairs(0, 5, 59)
  assert rules_lib.paired(a, b, expect='less', claim='').outcome == verdict.REPRODUCED  # t: anti-conservative
  v = rules_lib.paired_binary(a, b, expect='less', claim='')
  assert v.outcome == verdict.INCONCLUSIVE and v.p_value == pytest.approx(2 / 32)
  assert rules_lib.paired_binary(*_binary_pairs(0, 10, 54), expect='less', claim='').outcome == verdict.REPRODUCED
  v = rules_lib.paired_binary(*_binary_pairs(10, 0, 54), expect='less', claim='')
  assert v.outcome == verdict.NOT_REPRODUCED and v.p_value == pytest.approx(2 / 1024)
  assert rules_lib.paired_binary(*_binary_pairs(10, 0, 54), expect='greater', claim='').outcome == verdict.REPRODUCED
  same = rules_lib.paired_binary(*_binary_pairs(0, 0, 8), expect='less', claim='')
  assert same.outcome == verdict.NOT_REPRODUCED and same.ci == (0.0, 0.0)  # every pair diverged in both arms
  zeros = rules_lib.paired_binary(np.zeros(8), np.zeros(8), expect='less', claim='')
  assert zeros.outcome == verdict.INVALID
  assert rules_lib.paired_binary([1, 0], [0, 0], expect='less', claim='').outcome == verdict.INCONCLUSIVE  # 2 pairs
  with pytest.raises(ValueError, match='0/1'):
    rules_lib.paired_binary([0.5, 1, 0], [0, 0, 0], expect='less', claim='')


def test_the_commit_line_names_the_runs_commits_when_a_later_commit_judged():
  env = {'commit': '9d9514533c4b', 'date': '2026-11-30 03:27 UTC'}
  same = {'environment': env, 'regime': {'iterations': [{'commit': '9d9514533c4b'}]}}
  assert report_lib._commit_line(same) == '- commit 9d9514533c4b, 2026-11-30 03:27 UTC'
  older = {'environment': env, 'regime': {'iterations': [{'commit': '539b25fdb4b7'}, {'commit': '539b25fdb4b7'}]}}
  assert report_lib._commit_line(older) == (
    '- judged at commit 9d9514533c4b, 2026-11-30 03:27 UTC; the runs at 539b25fdb4b7 (the regime table)'
  )
  assert report_lib._commit_line({'environment': env}) == '- commit 9d9514533c4b, 2026-11-30 03:27 UTC'


def test_the_commit_line_names_every_commit_and_load_the_runs_were_made_at_from_the_invocations_record():
  env = {'commit': '9d9514533c4b', 'date': '2026-11-30 18:16 UTC', 'machine': 'x86_64 Linux, 2 CPU cores'}
  calls = [
    {'commit': '539b25fdb4b7', 'start': '2026-11-30 03:49 UTC', 'wall_s': 10.0, 'load': None, 'source': 'a log'},
    {'commit': '539b25fdb4b7', 'start': '2026-11-30 05:13 UTC', 'wall_s': 10.0, 'load': 2.56},
    {'commit': '6946082aaaaa', 'start': '2026-11-30 15:27 UTC', 'wall_s': 10.0, 'load': 1.0},
    {'commit': '9d9514533c4b', 'start': '2026-11-30 18:16 UTC', 'wall_s': 9.0, 'load': 3.0, 'judge_only': True},
  ]
  ledger = [[0.0, 0.000306], [10.0, 0.000188]]
  line = report_lib._commit_line({'environment': env, 'regime': {'invocations': calls, 'ledger': ledger}})
  assert line == (
    '- judged at commit 9d9514533c4b, 2026-11-30 18:16 UTC; 3 training invocation(s) (1 of them '
    'as read from a log), started 2026-11-30 03:49 UTC to 2026-11-30 15:27 UTC, at commits 539b25f, 6946082; load '
    'average at their starts 1.00-2.56 where recorded (2 of them); the reference step timed 0.188-0.306 ms by the 2 '
    'training invocations that timed one (the run-seconds, and the prices made of them, come from the machine as it '
    'was then)'
  )
  calls[2]['end'] = '2026-11-30 17:01 UTC'
  line = report_lib._commit_line({'environment': env, 'regime': {'invocations': calls[:1] + calls[2:3]}})
  assert 'to 2026-11-30 15:27 UTC; the last ended 2026-11-30 17:01 UTC, at' in line


def test_an_arm_s_fixed_settings_name_the_experts_and_top_k_of_an_moe_and_nothing_of_moe_for_a_dense_ffn():
  from ffn_research import config as config_lib

  dense = config_lib.default_config()
  assert not any(k.startswith('model.moe.') for k in report_lib.fixed_settings(dense))
  moe = config_lib.default_config()
  moe.model.moe.num_experts, moe.model.moe.top_k = 8, 1
  shown = report_lib.fixed_settings(moe)
  assert shown['model.moe.num_experts'] == 8 and shown['model.moe.top_k'] == 1
  assert 'model.moe.top_k' not in report_lib.fixed_settings(moe, swept=['model.moe.top_k'])
