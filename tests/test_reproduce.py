"""experiments.reproduce: verdict rules on synthetic results with known answers, the runner and
report/publish pipeline, and every registered ablation through the real entry point."""

import dataclasses
import glob
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments import publish as publish_lib
from ffn_research import ablations
from ffn_research import rules as rules_lib
from ffn_research import stats as verdict
from ffn_research.ablations import base
from ffn_research.ablations import report as report_lib
from ffn_research.ablations import runner
from ffn_research.ablations import universal_approximation as ua
from ffn_research.config import default_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
R, NR, INC = verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.INCONCLUSIVE


def reproduce(*args, timeout=600):
  return subprocess.run(
    [sys.executable, '-m', 'experiments.reproduce', *args, '--noprogress'],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


# --------------------------------------------------------------------------- verdict rules


def _power_law(slope, noise, seeds=3, widths=(2, 4, 8, 16, 32, 64), seed=0):
  rng = np.random.default_rng(seed)
  n = np.repeat(np.asarray(widths, float), seeds)
  s = np.tile(np.arange(seeds), len(widths))
  y = 0.5 * n**slope * np.exp(noise * rng.standard_normal(len(n)))
  return n, y, s


def test_slope_exactly_minus_two_is_reproduced():
  n, y, s = _power_law(-2.0, 0.0)
  v = rules_lib.slope(n, y, seeds=s, claimed=-2, margin=0.25, claim='c')
  assert v.outcome == R
  assert v.statistic == pytest.approx(-2.0, abs=1e-9)
  assert v.ci[0] == pytest.approx(-2.0, abs=1e-6) and v.ci[1] == pytest.approx(-2.0, abs=1e-6)
  assert v.n == 18


def test_slope_minus_one_with_tight_ci_is_not_reproduced():
  n, y, s = _power_law(-1.0, 0.01)
  v = rules_lib.slope(n, y, seeds=s, claimed=-2, margin=0.25, claim='c')
  assert v.outcome == NR
  assert -1.05 < v.ci[0] < v.statistic < v.ci[1] < -0.95


def test_slope_ci_matches_independent_formula():
  n, y, s = _power_law(-1.5, 0.3, seed=3)
  v = rules_lib.slope(n, y, seeds=s, claimed=-2, margin=0.25, claim='c')
  lx, ly = np.log(n), np.log(y)
  b, a = np.polyfit(lx, ly, 1)
  resid = ly - (a + b * lx)
  se = math.sqrt(resid @ resid / (len(lx) - 2) / np.sum((lx - lx.mean()) ** 2))
  half = stats.t.ppf(0.975, len(lx) - 2) * se
  assert v.statistic == pytest.approx(b, rel=1e-9)
  assert v.ci == pytest.approx((b - half, b + half), rel=1e-9)


def test_slope_two_noisy_points_is_inconclusive():
  v = rules_lib.slope([2, 512], [0.3, 0.001], claimed=-2, margin=0.25, claim='c')
  assert v.outcome == INC and 'underpowered' in v.detail


def test_slope_too_few_seeds_or_wide_ci_is_inconclusive():
  n, y, s = _power_law(-2.0, 0.0, seeds=2)
  assert rules_lib.slope(n, y, seeds=s, claimed=-2, margin=0.25, claim='c').outcome == INC
  n, y, s = _power_law(-2.0, 2.0, seeds=3, seed=1)  # CI far wider than the margin
  v = rules_lib.slope(n, y, seeds=s, claimed=-2, margin=0.25, claim='c')
  assert v.ci[1] - v.ci[0] > 0.5 and v.outcome == INC


def test_paired_known_answers():
  rng = np.random.default_rng(0)
  b = rng.normal(2.0, 0.1, 5)
  better = b - 0.05 + rng.normal(0, 0.001, 5)  # a lower than b by 0.05, tightly
  v = rules_lib.paired(better, b, expect='less', claim='a < b')
  assert v.outcome == R and v.statistic == pytest.approx(np.mean(better - b))
  assert v.detail.startswith('two-sided p = ')
  assert v.p_value == pytest.approx(stats.ttest_rel(better, b).pvalue, rel=1e-9)
  worse = b + 0.05 + rng.normal(0, 0.001, 5)
  assert rules_lib.paired(worse, b, expect='less', claim='a < b').outcome == NR
  assert rules_lib.paired(worse, b, expect='greater', claim='a > b').outcome == R
  # a real but small advantage, smaller than the claimed margin: not reproduced
  assert rules_lib.paired(better, b, expect='less', margin=0.1, claim='a < b - 0.1').outcome == NR
  # equal within a margin
  same = b + rng.normal(0, 0.001, 5)
  assert rules_lib.paired(same, b, expect='equal', margin=0.01, claim='a = b').outcome == R
  assert rules_lib.paired(worse, b, expect='equal', margin=0.01, claim='a = b').outcome == NR
  # two arms that measured nothing: a tie of zeros is invalid on its premise, never a decided outcome
  zeros = rules_lib.paired([0.0] * 4, [0.0] * 4, expect='equal', margin=0.01, claim='a = b')
  assert zeros.outcome == verdict.INVALID and zeros.rule_outcome == R
  assert [(c.name, c.passed, c.role) for c in zeros.checks] == [
    ('premise: the arms measured something', False, verdict.PREMISE)
  ]


def test_paired_underpowered_or_noisy_is_inconclusive():
  assert rules_lib.paired([1.0, 1.2], [2.0, 2.1], expect='less', claim='c').outcome == INC  # two seeds
  rng = np.random.default_rng(1)
  b = rng.normal(0, 1, 4)
  a = b + rng.normal(0, 1, 4)  # no effect, large noise: CI straddles 0
  v = rules_lib.paired(a, b, expect='less', claim='c')
  assert v.ci[0] < 0 < v.ci[1] and v.outcome == INC
  m, lo, hi = verdict.mean_ci(a - b)
  assert (lo, hi) == pytest.approx(stats.t.interval(0.95, 3, loc=np.mean(a - b), scale=stats.sem(a - b)))


def test_threshold_known_answers():
  assert rules_lib.threshold([1e-3, 2e-3, 1.5e-3], level=1e-2, direction='below', claim='c').outcome == R
  assert rules_lib.threshold([0.5, 0.6, 0.55], level=1e-2, direction='below', claim='c').outcome == NR
  assert rules_lib.threshold([1e-3, 0.5, 1e-3], level=1e-2, direction='below', claim='c').outcome == INC
  assert rules_lib.threshold([1e-3, 2e-3], level=1e-2, direction='below', claim='c').outcome == INC
  assert rules_lib.threshold([0.5, 0.6, 0.55], level=1e-2, direction='above', claim='c').outcome == R


def test_crossing_known_answer():
  # fraction fitted = 1 below x = 1, falling linearly in log x: crosses 0.5 at x = 2 in every seed
  x = np.array([0.25, 0.5, 1, 4, 16])
  rows = [
    {'x': xi, 'y': min(1.0, 1 - 0.5 * math.log(xi) / math.log(2)) if xi > 1 else 1.0, 'seed': s}
    for s in range(3)
    for xi in x
  ]
  df = pd.DataFrame(rows)
  assert rules_lib.crossing_point(x, df[df.seed == 0]['y'], 0.5) == pytest.approx(2.0)
  v = rules_lib.crossing(df, x='x', y='y', seed='seed', level=0.5, claimed=2.0, factor=1.5, claim='c')
  assert v.outcome == R and v.statistic == pytest.approx(2.0)
  assert rules_lib.crossing(df, x='x', y='y', seed='seed', level=0.5, claimed=16.0, factor=2, claim='c').outcome == NR
  assert (
    rules_lib.crossing(
      df[df.seed < 2], x='x', y='y', seed='seed', level=0.5, claimed=2.0, factor=1.5, claim='c'
    ).outcome
    == INC
  )
  assert (
    rules_lib.crossing(df, x='x', y='y', seed='seed', level=-5.0, claimed=2.0, factor=1.5, claim='c').outcome == INC
  )  # never crosses


# --------------------------------------------------------------------------- universal_approximation theory


@pytest.mark.parametrize('n', [1, 2, 7, 64, 512])
def test_grid_lower_bound_holds_and_is_tight(n):
  """The best (n+1)-piece approximant's grid error respects the bound; random (n+1)-piece fits too."""
  grid = np.linspace(-1, 1, 8193)
  k = n + 1
  knots = np.linspace(-1, 1, k + 1)
  best = np.interp(grid, knots, knots**2) - 1 / (2 * k**2)  # interpolant shifted down by h^2/8
  err_best = np.max(np.abs(best - grid**2))
  bound = ua.grid_lower_bound(n, 8193)
  assert bound <= err_best <= 1 / (2 * k**2) + 1e-12
  assert bound == pytest.approx(1 / (2 * k**2), rel=2.1 * (2 / 8192) * k + 1e-9)
  rng = np.random.default_rng(n)
  for _ in range(20):  # random continuous (n+1)-piece functions, knots least-squares fit to x^2
    inner = np.sort(rng.uniform(-1, 1, k - 1))
    kn = np.concatenate([[-1], inner, [1]])
    f = np.interp(grid, kn, kn**2 + rng.normal(0, 1e-3, k + 1)) - rng.uniform(0, 1 / k**2)
    assert np.max(np.abs(f - grid**2)) >= bound


# --------------------------------------------------------------------------- runner and publishing


def _tiny_study():
  config = default_config()
  config.model.d_ff = 8

  def arms(scale):
    del scale
    return [base.Arm('main', config, {'': {}}, tuned=False)]

  def rules(sel, scale):
    del scale
    v = rules_lib.threshold(sel['sup_error'], level=10.0, direction='below', claim='sup error below 10')
    finite = verdict.as_premise(verdict.Check('every run trained', bool(np.isfinite(sel['sup_error']).all()), 'finite'))
    return [dataclasses.replace(verdict.gate(v, [finite]), points=('main',))]

  def present(result, ctx):
    df = result.full
    fig, ax = base.figure()
    ax.plot(df['train.seed'], df['sup_error'])
    return base.Presentation(
      headline=f'mean {result.verdicts[0].statistic:.3g}',
      tables=[base.Table('t', df[['train.seed', 'sup_error']])],
      figures=[base.save_figure(fig, ctx.outdir, 'plot.png', 'sup error per seed')],
    )

  return base.Study(
    name='tiny',
    claim='A tiny claim (Nobody 2026).',
    citation='Nobody 2026',
    published='10',
    regimes={'smoke': base.Regime(rates=(3e-3,), steps=20, seeds=5, cap=60)},
    arms=arms,
    rules=rules,
    present=present,
    claims=[base.Claim(verdict.SIGN, 'a ReLU FFN of width 8 on x^2', 'every run trained')],
  )


def test_runner_writes_report_and_resumes(tmp_path, monkeypatch, capsys):
  tiny = _tiny_study()
  monkeypatch.setattr(ablations, 'get', lambda name: tiny)
  monkeypatch.setattr(ablations, 'names', lambda: ['tiny'])
  report = runner.run('tiny', str(tmp_path), 'smoke', progress=False)
  out = tmp_path / 'tiny'
  assert report['verdicts'][0]['outcome'] == R, report['verdicts'][0]  # sup error of x^2 is < 10 in any sane run
  assert report['verdicts'][0]['p_holm'] is not None and report['regime']['iterations']
  assert report['status_counts'] == {'completed': 15}  # 5 seeds at T/4, T/2 and T (one left out leaves 4)
  assert (out / 'plot.png').stat().st_size > 0
  on_disk = json.loads((out / 'report.json').read_text())
  assert on_disk['verdicts'] == report['verdicts'] and on_disk['scale'] == 'smoke'
  assert on_disk['environment']['jax'] and on_disk['environment']['commit']
  md = (out / 'report.md').read_text()
  for text in [
    'A tiny claim (Nobody 2026).',
    '**reproduced**',
    'rule (fixed before the run)',
    'smoke scale',
    '![sup error per seed](plot.png)',
    '| train.seed | sup_error |',
    '## Regime',
    'PASS stable on the budget ladder (sign claim)',
    'scope: a ReLU FFN of width 8 on x^2',
    '## Design changes after results',
  ]:
    assert text in md
  capsys.readouterr()
  again = runner.run('tiny', str(tmp_path), 'smoke', progress=False)  # resume: nothing retrained
  assert '15 already finished, 0 to run' in capsys.readouterr().err
  assert again['total_wall_time_s'] >= report['total_wall_time_s'] + again['wall_time_s'] - 1e-6
  reports, failed = runner.run_all(str(tmp_path), 'smoke', progress=False)
  assert failed == [] and len(reports) == 1
  index = (tmp_path / 'index.md').read_text().splitlines()
  assert [line for line in index if line.startswith('- ')] == [report_lib.index_line('tiny', reports[0])]
  with pytest.raises(base.ReproduceError, match='only full-scale'):
    publish_lib.publish('tiny', str(tmp_path), repo_root=str(tmp_path))


def test_publish_refuses_an_uncommitted_tree(tmp_path):
  (tmp_path / 'x').mkdir()
  (tmp_path / 'x' / 'report.json').write_text(json.dumps({'scale': 'full', 'environment': {'commit': 'abc+dirty'}}))
  with pytest.raises(base.ReproduceError, match='not a committed tree'):
    publish_lib.publish('x', str(tmp_path), repo_root=str(tmp_path))


def test_publish_copies_and_regenerates_readme(tmp_path):
  work, repo = tmp_path / 'work', tmp_path / 'repo'
  (work / 'x').mkdir(parents=True)
  repo.mkdir()
  v = rules_lib.threshold([1.0, 1.1, 0.9], level=2.0, direction='below', claim='it is small')
  v = dataclasses.replace(v, kind=verdict.SIGN, scope='three numbers', ladder=({'level': 'T'},))
  old = dataclasses.replace(v, kind='', ladder=())  # a report published before premises and the ladder
  report = {
    'name': 'x',
    'claim': 'X is small (A 2020).',
    'scale': 'full',
    'headline': 'mean 1.0',
    'verdicts': [v.to_dict()],
    'figures': [{'file': 'p.png', 'caption': 'cap'}],
    'checks': [
      {'name': 'ok one', 'passed': True, 'detail': 'fine'},
      {'name': 'premise', 'passed': False, 'detail': 'slope 0.35'},
    ],
    'wall_time_s': 12.0,
    'compute_time_s': 30.0,
    'environment': {'machine': 'm', 'device': 'd', 'jax': 'j', 'date': '2026-11-22', 'commit': 'abc'},
  }
  (work / 'x' / 'report.json').write_text(json.dumps(report))
  (work / 'x' / 'report.md').write_text('# x\n')
  (work / 'x' / 'p.png').write_bytes(b'png')
  readme = '# T\n\n## Results\n\n<!-- results:begin -->\nold\n<!-- results:end -->\n\n## After\n'
  (repo / 'README.md').write_text(readme)
  (repo / 'docs' / 'results' / 'x').mkdir(parents=True)
  (repo / 'docs' / 'results' / 'x' / 'history.md').write_text('earlier runs\n')
  (repo / 'docs' / 'results' / 'x' / 'stale.png').write_bytes(b'png')
  publish_lib.publish('x', str(work), repo_root=str(repo))
  assert sorted(os.listdir(repo / 'docs' / 'results' / 'x')) == ['history.md', 'p.png', 'report.json', 'report.md']
  # README.md: the headline row (the question falls back to the claim: 'x' has no module)
  text = (repo / 'README.md').read_text()
  assert 'old' not in text and text.endswith('## After\n') and text.count(publish_lib.README_BEGIN) == 1
  section = text.split(publish_lib.README_BEGIN)[1].split(publish_lib.README_END)[0]
  assert '| [x](docs/results/x/report.md) | X is small (A 2020). | 1 reproduced |' in section
  assert '[docs/results/README.md](docs/results/README.md)' in section and 'it is small' not in section
  # docs/results/README.md (created with a heading): the full section, links relative to docs/results/
  page = (repo / 'docs' / 'results' / 'README.md').read_text()
  assert page.startswith('# Results\n\n' + publish_lib.README_BEGIN)
  section = page.split(publish_lib.README_BEGIN)[1].split(publish_lib.README_END)[0]
  assert '### x' in section and 'X is small (A 2020).' in section
  assert '**reproduced**: it is small (1, 95% CI [0.7516, 1.248], n = 3)' in section
  assert '  - scope: three numbers' in section and 'Published before premises' not in section
  assert '![cap](x/p.png)' in section and 'commit abc' in section and '(x/report.md)' in section
  assert '[docs/reproduce.md](../reproduce.md)' in section
  assert '**Check failed.** premise: slope 0.35' in section and 'ok one' not in section
  publish_lib.update_readme(str(repo))  # idempotent (what --update_readme runs)
  assert (repo / 'README.md').read_text() == text
  assert (repo / 'docs' / 'results' / 'README.md').read_text() == page
  (work / 'x' / 'report.json').write_text(json.dumps({**report, 'verdicts': [old.to_dict()]}))
  publish_lib.publish('x', str(work), repo_root=str(repo))
  assert '1 reproduced (published before premises and the budget ladder' in (repo / 'README.md').read_text()
  assert '**Published before premises and the budget ladder**' in (repo / 'docs' / 'results' / 'README.md').read_text()


def test_headline_question_and_verdict_counts():
  assert publish_lib.question('universal_approximation') == (
    'does the sup error of a trained width-N ReLU FFN on x^2 fall as N^-2?'
  )
  assert publish_lib.question('no_such_ablation') == ''
  assert (
    publish_lib.relink(
      '[a](docs/reproduce.md#x) [b](https://e.org) [c](#top) ![d](docs/results/n/p.png)', 'docs/results'
    )
    == '[a](../reproduce.md#x) [b](https://e.org) [c](#top) ![d](n/p.png)'
  )
  section = publish_lib.headline_section(publish_lib.REPO_ROOT)
  for path in glob.glob(os.path.join(publish_lib.REPO_ROOT, 'docs', 'results', '*', 'report.json')):
    r = json.loads(open(path, encoding='utf-8').read())
    if r['name'] == publish_lib.ATLAS:  # the atlas opens the section with its own table, one row per FFN kind
      cells = publish_lib.atlas_cells(r)
      assert section.index('**The capacity atlas**') < section.index('| ablation | question | verdicts |')
      assert sum(len(row) for row in cells.values()) == len(r['verdicts'])
      assert all(f'| {kind} | ' in section for kind in cells)
      continue
    row = next(line for line in section.splitlines() if line.startswith(f'| [{r["name"]}]('))
    assert sum(int(n) for n in re.findall(r'(\d+) (?:reproduced|not reproduced|inconclusive|invalid)', row)) == len(
      r['verdicts']
    )


def test_registry_finds_ablation_modules():
  assert 'universal_approximation' in ablations.names()
  assert not {'base', 'verdict', 'runner', 'regime', 'languages', 'storage'} & set(ablations.names())
  for name in ablations.names():
    a = ablations.get(name)
    assert a.name == name and a.claim and a.citation and a.published
    assert {'smoke', 'quick', 'full'} <= set(a.scales)
  with pytest.raises(ablations.UnknownAblation, match='allowed: .*universal_approximation'):
    ablations.get('nope')


# --------------------------------------------------------------------------- the entry point


def test_cli_list_and_bad_input():
  proc = reproduce('--list')
  assert proc.returncode == 0, proc.stderr[-2000:]
  listed = [line.split(' ')[0] for line in proc.stdout.strip().splitlines()]
  assert listed == ablations.names()
  proc = reproduce('--ablation=nope', '--workdir=/tmp/unused_reproduce_dir')
  assert proc.returncode == 2 and 'Traceback' not in proc.stderr
  assert proc.stderr.strip().splitlines() == [
    "error: --ablation='nope' is unknown; allowed: " + ', '.join(ablations.names()) + ', all'
  ]
  proc = reproduce('--ablation=universal_approximation', '--workdir=/tmp/unused_reproduce_dir', '--quick', '--publish')
  assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
    'error: --publish needs --scale=full (got quick); only full-scale reports may be published'
  ]
  proc = reproduce('--ablation=universal_approximation', '--workdir=/tmp/unused_reproduce_dir', '--scale=huge')
  assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
    "error: --scale='huge' is unknown; allowed: smoke, quick, full, large"
  ]
  proc = reproduce('--ablation=universal_approximation', '--workdir=/tmp/unused_reproduce_dir', '--seed_offset=-1')
  assert proc.returncode == 2 and proc.stderr.strip().splitlines() == ['error: --seed_offset must be >= 0 (got -1)']
  proc = reproduce(
    '--ablation=universal_approximation', '--workdir=/tmp/unused_reproduce_dir', '--seed_offset=5', '--publish'
  )
  assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
    'error: --publish runs on the published seeds: drop --seed_offset (a run on fresh seeds checks that report)'
  ]
  assert not os.path.exists('/tmp/unused_reproduce_dir')


def test_registry_import_is_light():
  """Listing names and rejecting a bad one must not import jax (so the CLI answers at once)."""
  code = (
    'import sys; from ffn_research import ablations; ablations.names(); '
    'assert "jax" not in sys.modules and "pandas" not in sys.modules, sorted(sys.modules)'
  )
  proc = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.slow  # one subprocess per ablation, each a few compiled groups (~20-30 s idle)
@pytest.mark.parametrize('name', ablations.names())
def test_every_ablation_smoke_through_entry_point(name, study_smoke):
  returncode, stdout, stderr, out = study_smoke(name)  # one smoke per study, shared with the study's own smoke test
  assert returncode == 0, stderr
  report = json.loads((out / 'report.json').read_text())
  assert report['name'] == name and report['scale'] == 'smoke' and report['verdicts']
  assert all(v['outcome'] in verdict.OUTCOMES and v['rule'] for v in report['verdicts'])
  assert all(v['p_holm'] is not None for v in report['verdicts'])
  # issue 45's check, for every study: a premise, a kind, a scope and a ladder of >= 3 budgets on every verdict
  assert all(
    v['premise'] and v['kind'] in verdict.KINDS and v['scope'] and len(v['ladder']) >= 3 for v in report['verdicts']
  )
  assert report['regime']['iterations'] and report['regime']['cap_s'] > 0 and report['regime']['stopped']
  assert report['figures'] and all((out / f['file']).stat().st_size > 1000 for f in report['figures'])
  md = (out / 'report.md').read_text()
  assert report['claim'] in md and 'NOT a result' in md
  assert stdout.startswith(f'{name}: ')


@pytest.mark.slow  # resumes the smoke runs above (analysis only) for every ablation
def test_all_writes_index(study_smoke):
  smoke_dir = study_smoke(ablations.names()[0])[-1].parent  # every study's smoke, run once and shared
  for name in ablations.names():
    assert study_smoke(name)[0] == 0
  proc = reproduce('--ablation=all', f'--workdir={smoke_dir}', '--scale=smoke', timeout=1800)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = [line for line in (smoke_dir / 'index.md').read_text().splitlines() if line.startswith('- ')]
  assert [line.split('**')[1] for line in lines] == ablations.names()
  for name in ablations.names():
    report = json.loads((smoke_dir / name / 'report.json').read_text())
    assert report_lib.index_line(name, report) in lines


def test_the_registry_attaches_each_study_its_presentation_and_a_study_without_one_does_not_run(tmp_path):
  """Each study's tables and figures live in ablations/present/NAME.py, which imports the study (never the
  reverse: no import cycle); ablations.get attaches them. A Study built by hand without `present` stops in one line
  before training anything."""
  for name in ablations.names():
    study = ablations.get(name)
    assert study.present is not None and study.present.__module__ == f'ffn_research.ablations.present.{name}'
    with open(os.path.join(os.path.dirname(ablations.__file__), f'{name}.py'), encoding='utf-8') as f:
      assert 'ablations.present' not in f.read()
  bare = dataclasses.replace(ablations.get('superposition'), present=None)
  with pytest.raises(base.ReproduceError, match='has no presentation') as e:
    runner.run_study(bare, str(tmp_path), 'smoke', progress=False)
  assert '\n' not in str(e.value) and not any(tmp_path.iterdir())


def test_the_readme_results_open_with_the_capacity_atlas_when_it_is_published(tmp_path):
  def measured(claim, value, ci, outcome=verdict.MEASURED):
    v = rules_lib.threshold([value, value], level=0.0, direction='above', claim=claim)
    ladder = ({'level': 'T'},)
    v = dataclasses.replace(v, statistic=value, ci=ci, outcome=outcome, kind=verdict.MEASUREMENT, ladder=ladder)
    return v.to_dict()

  env = {'machine': 'm', 'device': 'd', 'jax': 'j', 'date': '2026-11-29', 'commit': 'abc'}
  atlas = {
    'name': publish_lib.ATLAS,
    'claim': 'measurements',
    'headline': 'bits per parameter by kind',
    'verdicts': [
      {
        **measured('relu: bits stored per trainable parameter at the best N', 2.5, (2.25, 2.75)),
        'extra': {'slope': 1.1, 'slope_lo': 1.05, 'slope_hi': 1.15, 'frozen_invalid': 1.0},
      },
      measured('sin, relu: exponent a of the trained sup error ~ P^a at its budget', -1.5, (-1.75, -1.25)),
      measured('teacher, moe_top1: exponent a of the trained RMSE ~ P^a at its budget', 0.0, (0, 0), 'invalid'),
    ],
    'figures': [{'file': 'atlas.png', 'caption': 'the atlas'}, {'file': 'error.png', 'caption': 'its errors'}],
    'environment': env,
  }
  other = {**atlas, 'name': 'x', 'claim': 'X is small.', 'verdicts': atlas['verdicts'][:1], 'figures': []}
  for r in (atlas, other):
    (tmp_path / 'docs' / 'results' / r['name']).mkdir(parents=True)
    (tmp_path / 'docs' / 'results' / r['name'] / 'report.json').write_text(json.dumps(r))
  lines = publish_lib.headline_section(str(tmp_path)).splitlines()
  first = lines.index(f'| FFN | {publish_lib.STORAGE} | exponent, sin | exponent, teacher |')
  assert lines[first + 2 :][:2] == [  # storage: the slope beside the number, the frozen design's outcome after it
    '| relu | 2.5 [2.25, 2.75]; slope 1.1 [1.05, 1.15] (design as frozen before results: invalid) '
    '| -1.5 [-1.75, -1.25] |  |',
    '| moe_top1 |  |  | invalid |',
  ]
  assert '![the atlas](docs/results/capacity_atlas/atlas.png)' in lines  # both figures, storage first
  assert lines.index('![its errors](docs/results/capacity_atlas/error.png)') > lines.index(
    '![the atlas](docs/results/capacity_atlas/atlas.png)'
  )
  assert first < lines.index('| ablation | question | verdicts |')  # the atlas opens the section
  assert [line for line in lines if line.startswith('| [')] == [
    '| [x](docs/results/x/report.md) | X is small. | 1 measured |'
  ]
