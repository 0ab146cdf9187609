"""moe_topk: the per-cluster-teacher task option, router-cluster mutual information, and the verdict
rules on synthetic selections (the arms and the router gradient: tests/test_glu_moe_ablations.py)."""

import json
import math

import jax
import numpy as np
import pandas as pd
import pytest

from ffn_research import ablations
from ffn_research import config as config_lib
from ffn_research import stats
from ffn_research import validation
from ffn_research.ablations import base
from ffn_research.ablations import moe_topk
from ffn_research.ablations.present import moe_topk as topk_shown
from ffn_research.tasks import regression

R, NR, INC, INV = stats.REPRODUCED, stats.NOT_REPRODUCED, stats.INCONCLUSIVE, stats.INVALID


def _cluster_config(cluster_teachers, num_clusters=3):
  config = config_lib.default_config()
  config.task.name = 'teacher_student'
  config.model.d_model = 4
  config.task.num_train, config.task.num_eval, config.task.teacher_d_ff = 600, 100, 16
  config.task.num_clusters, config.task.cluster_teachers = num_clusters, cluster_teachers
  validation.validate(config)
  return config


def test_cluster_teachers_each_cluster_has_its_own_teacher():
  rng = jax.random.PRNGKey(0)
  data = regression.TeacherStudentTask(_cluster_config(True)).init_data(rng)
  plain = regression.TeacherStudentTask(_cluster_config(False)).init_data(rng)
  k_teacher, k_bias = jax.random.split(jax.random.fold_in(rng, 2), 5)[:2]
  fold = lambda k, c: jax.random.fold_in(jax.random.fold_in(k, regression.CLUSTER_TEACHER_TAG), c)
  x, cluster, y = (np.asarray(data[k]) for k in ('x_train', 'cluster_train', 'y_train'))
  np.testing.assert_array_equal(x, plain['x_train'])  # the inputs do not change
  assert set(plain) == {'x_train', 'y_train', 'x_eval', 'y_eval'}  # nor the data of runs without the option
  centers = np.asarray(jax.random.normal(jax.random.fold_in(k_teacher, 7), (3, 4)))
  assert abs(np.std(x - centers[cluster]) - 0.25) < 0.02  # ids are the drawn clusters (task.cluster_std's default)
  teachers = [regression.teacher_ffn(4, 16, 'relu', fold(k_teacher, c), fold(k_bias, c)) for c in range(3)]
  for c in range(3):
    rows = cluster == c
    assert rows.sum() > 50
    np.testing.assert_allclose(y[rows], teachers[c](x[rows]), rtol=1e-5, atol=1e-6)
    other = teachers[(c + 1) % 3](x[rows])
    assert np.mean(np.square(other - y[rows])) > 0.1 * np.var(y[rows])  # the teachers differ
  shared = regression.teacher_ffn(4, 16, 'relu', k_teacher, k_bias)
  np.testing.assert_allclose(plain['y_train'], shared(x), rtol=1e-5, atol=1e-6)  # one teacher without it
  ev = np.asarray(data['cluster_eval'])
  np.testing.assert_allclose(data['y_eval'], regression.per_cluster_targets(teachers, data['x_eval'], ev), rtol=1e-6)


def test_cluster_teachers_needs_clusters():
  config = _cluster_config(False, num_clusters=0)
  config.task.cluster_teachers = True
  with pytest.raises(config_lib.ConfigError, match=r'task\.cluster_teachers') as e:
    validation.validate(config)
  assert '\n' not in str(e.value)


# --------------------------------------------------------------------------- mutual information


def test_mutual_information_known_tables():
  assert moe_topk.mutual_information(np.eye(4) * 25) == pytest.approx(math.log(4), rel=1e-12)  # one expert per cluster
  assert moe_topk.mutual_information(np.outer([1, 2, 3], [4, 1])) == pytest.approx(0.0, abs=1e-12)  # independent
  # p = [[1/2, 0], [1/4, 1/4]]: rows 1/2, 1/2; columns 3/4, 1/4
  want = 0.5 * math.log(4 / 3) + 0.25 * math.log(2 / 3) + 0.25 * math.log(2)
  assert moe_topk.mutual_information(np.array([[2, 0], [1, 1]])) == pytest.approx(want, rel=1e-12)
  table = moe_topk.contingency(np.array([0, 0, 1, 1]), np.array([0, 0, 0, 1]), 2, 3)
  np.testing.assert_array_equal(table, [[2, 0, 0], [1, 1, 0]])
  assert moe_topk.mutual_information(table) == pytest.approx(want, rel=1e-12)  # an empty expert changes nothing
  assert moe_topk.entropy(np.array([1, 1, 2, 0])) == pytest.approx(1.5 * math.log(2), rel=1e-12)


# --------------------------------------------------------------------------- verdict rules on synthetic selections

ROUTING_MATTERS = {  # both premises pass: dense of the active width worse by more than the margin, frozen worse
  'cluster_dense: d_ff=32': 1.0,
  'cluster_dense: d_ff=16': 1.0,  # and at every other shape a verdict reads (the `sizes` arm's top-1 against these)
  'cluster_dense: d_ff=8': 1.0,
  'cluster_dense: d_ff=4': 1.0,
  'routers: frozen': 0.5,
  'routers: hash': 1.0,
}


def selection(shift=None, seeds=range(5), scale='full', base_score=-2.0):
  """A runner-shaped selection: one row per point and seed at its chosen rate; score = base_score + 0.1 seed
  + shift[point] + small noise, rel_mse = exp(score)."""
  shift = shift or {}
  rng = np.random.default_rng(0)
  rows = []
  for arm in moe_topk.arms(scale):
    for p in arm.points:
      label = arm.label(p)
      for seed in seeds:
        score = base_score + 0.1 * seed + shift.get(label, 0.0) + rng.normal(0, 0.005)
        rows.append(
          {
            'arm': arm.name,
            'point': label,
            moe_topk.SEED: seed,
            'train.learning_rate': 0.1,
            'train.steps': 2000,
            'score': score,
            'rel_mse': math.exp(score),
            'num_params': 100,
            'num_active_params': 10,
            **({'mi': 1.0, 'h_cluster': 1.8, 'max_load': 2.0} if arm.name == 'routers' else {}),
          }
        )
  return pd.DataFrame(rows)


def outcomes(sel, scale='full'):
  return [v.outcome for v in moe_topk.rules(sel, scale)]


TOP1, DENSE = moe_topk.TOP1, moe_topk.DENSE_ACTIVE  # 'routers: learned' is k = G = 1


def test_verdicts_come_out_as_the_rules_say_with_their_points():
  shift = {
    'fixed_total: k=2': -0.3,
    'matched_active: k=2': 0.2,
    'granularity: G=4': -0.1,
    'granularity: G=2': 0.15,
    'routers: stop_grad': 0.3,
    'routers: weight_1': 0.0,
    **ROUTING_MATTERS,
  }
  vs = moe_topk.rules(selection(shift), 'full')
  assert [v.outcome for v in vs] == [R, NR, R, R, INC, NR]
  assert vs[0].statistic == pytest.approx(-0.3, abs=0.01) and vs[1].statistic == pytest.approx(0.2, abs=0.01)
  assert vs[5].statistic == pytest.approx(0.15, abs=0.01)  # top-2 at matched active and total: G = 2 vs top-1
  assert vs[0].points == ('fixed_total: k=2', TOP1, DENSE)  # top-1 is the learned router arm's runs
  shape = lambda e, w: (f'sizes: E={e},w={w}', f'cluster_dense: d_ff={w}')  # top-1 at a shape, its dense
  assert vs[1].points == ('matched_active: k=2', TOP1, DENSE, *shape(8, 16))
  gran = (*(f'granularity: G={g}' for g in (2, 4, 8)), TOP1, DENSE, *shape(16, 16), *shape(32, 8), *shape(64, 4))
  assert vs[2].points == gran and vs[2].boundaries == (0.0,)
  assert vs[3].points == ('routers: learned', 'routers: stop_grad', 'routers: frozen', DENSE)
  assert vs[5].points == ('granularity: G=2', TOP1, DENSE, *shape(16, 16))
  margins = vs[2].premises[0].detail  # the premise's margin at every shape the verdict reads
  assert [f'top-1 of {e} x {w}' in margins for e, w in ((8, 32), (16, 16), (32, 8), (64, 4))] == [True] * 4
  assert all(c.passed for v in vs for c in v.checks)
  assert {a.name for a in moe_topk.arms('full')} == {
    'fixed_total',
    'matched_active',
    'granularity',
    'routers',
    'cluster_dense',
    'sizes',
  }
  assert all(a.base.task.cluster_teachers for a in moe_topk.arms('full'))  # every arm on the clustered task


def test_every_verdict_declares_its_kind_and_computes_a_premise():
  claims = moe_topk.ABLATION.claims
  assert [c.kind for c in claims] == [stats.SIGN] * 6  # fixed-budget comparisons
  assert all(c.scope and c.premise for c in claims) and 'about half' in claims[1].scope
  assert 'total and active' in claims[5].scope and 'matched' in claims[5].scope
  assert len(moe_topk.ABLATION.changes) >= 4 and all(c.date and c.change for c in moe_topk.ABLATION.changes)
  for sel in (selection(ROUTING_MATTERS), selection(), selection().iloc[:0]):  # passing, failing, no runs
    vs = moe_topk.rules(sel, 'full')
    assert len(vs) == len(claims) and all(len(v.premises) == 1 for v in vs)
  names = [v.premises[0].name for v in moe_topk.rules(selection(ROUTING_MATTERS), 'full')]
  margin = 'premise: routing matters by the margin at every MoE shape read'
  clustered = 'premise: routing matters on the clustered task'
  assert names == [margin] * 3 + [clustered] * 2 + [margin]


def test_topk_premise_top1_must_beat_dense_of_its_active_width_by_the_margin():
  shift = {**ROUTING_MATTERS, 'fixed_total: k=2': -0.3, 'routers: stop_grad': 0.3, 'routers: weight_1': 0.3}
  shift[DENSE] = 0.04  # 8x the total buys ~0.04 < 0.1
  vs = moe_topk.rules(selection(shift), 'full')
  assert [v.outcome for v in vs] == [INV, INV, INV, R, R, INV]  # the frozen router still shows routing matters
  assert vs[0].raw_outcome == R and 'routing matters by the margin' in vs[0].detail
  (c,) = vs[2].premises
  assert not c.passed and c.remedy == stats.DOUBLE_STEPS and c.points == vs[2].points  # a router may need longer
  assert 'FAILS: top-1 of 8 x 32' in c.detail and '-0.04' in c.detail
  shift[DENSE] = 0.15  # beats dense by more than the margin
  vs = moe_topk.rules(selection(shift), 'full')
  assert vs[0].outcome == R and all(v.premises[0].passed for v in vs)
  shift['cluster_dense: d_ff=8'] = 0.04  # routing buys too little at 32 x 8 only: granularity alone is invalid
  vs = moe_topk.rules(selection(shift), 'full')
  assert [v.outcome == INV for v in vs] == [False, False, True, False, False, False]
  (c,) = vs[2].premises
  assert 'FAILS: top-1 of 32 x 8' in c.detail and 'FAILS: top-1 of 16 x 16' not in c.detail
  assert c.remedy == stats.DOUBLE_STEPS
  shift['routers: weight_1'] = -0.2  # the weight-1 router wins
  assert outcomes(selection(shift))[4] == NR


def test_premise_routing_matters_else_invalid_with_a_doubling():
  shift = {'routers: stop_grad': 0.3, 'routers: weight_1': 0.3}  # dense-32 and frozen as good as learned
  vs = moe_topk.rules(selection(shift), 'full')
  assert [v.outcome for v in vs] == [INV] * 6 and 'routing matters' in vs[3].detail
  assert vs[3].raw_outcome == R
  premise = [c for c in vs[4].failed_checks if c.name.startswith('premise')][0]
  assert premise.remedy == stats.DOUBLE_STEPS and premise.points == vs[4].points
  shift['routers: frozen'] = 0.5  # learned beats the frozen router: enough for 4-5 (not for the margin of 1-3, 6)
  assert outcomes(selection(shift))[3:5] == [R, R] and outcomes(selection(shift))[0] == INV
  del shift['routers: frozen']
  shift[DENSE] = 0.5  # or it beats the dense FFN of its expert width (by more than the margin: 1-3 and 6 too)
  vs = moe_topk.rules(selection(shift), 'full')
  assert [v.outcome for v in vs[3:5]] == [R, R] and vs[0].premises[0].passed


def test_pinned_scores_and_too_few_seeds_are_invalid():
  shift = {'fixed_total: k=2': -0.3, **ROUTING_MATTERS}
  pinned = moe_topk.rules(selection(shift, base_score=-6.0), 'full')  # 1 - R^2 ~ 0.002: an exact fit
  assert pinned[0].outcome == INV and '(pinned)' in pinned[0].detail and pinned[0].raw_outcome == R
  few = moe_topk.rules(selection(shift, seeds=range(2)), 'full')[0]
  assert few.raw_outcome == INC and few.outcome == INV  # and 2 seeds cannot compute the premise's CI either
  assert 'nan' in few.premises[0].detail


def test_the_family_is_fixed_at_every_scale():
  smoke = moe_topk.rules(selection({**ROUTING_MATTERS}, scale='smoke'), 'smoke')
  assert len(smoke) == 6 and smoke[2].points[:2] == ('granularity: G=2', TOP1)
  assert len(moe_topk.rules(selection().iloc[:0], 'full')) == 6


def test_granularity_rule_known_answers_and_bonferroni_p():
  seeds = np.arange(5)
  rng = np.random.default_rng(0)
  common = rng.normal(0, 0.1, 5)

  def wide(deltas):
    return pd.DataFrame({g: common + d + rng.normal(0, 1e-3, 5) for g, d in deltas.items()}, index=seeds)

  v, each = moe_topk.granularity_verdict(wide({1: 0.0, 2: 0.05, 4: -0.1, 8: 0.02}), claim='c')
  assert v.outcome == R and len(each) == 3 and v.statistic == pytest.approx(-0.1, abs=3e-3)
  assert v.p_value == pytest.approx(min(1.0, 3 * each[1].p_value))  # the best G's p, Bonferroni over 3
  v, each = moe_topk.granularity_verdict(wide({1: 0.0, 2: 0.05, 4: 0.1, 8: 0.02}), claim='c')
  assert v.outcome == NR and v.p_value == pytest.approx(max(e.p_value for e in each))  # every G must reject
  v, _ = moe_topk.granularity_verdict(wide({1: 0.0, 2: 0.05, 4: 0.0, 8: 0.02}), claim='c')
  assert v.outcome == INC


def test_present_tables_figure_and_the_matched_active_note(tmp_path):
  shift = {'fixed_total: k=2': -0.3, 'matched_active: k=2': 0.07, **ROUTING_MATTERS}
  sel = selection(shift)
  verdicts = stats.holm(moe_topk.rules(sel, 'full'))
  frame = pd.concat([sel, sel.assign(**{'train.learning_rate': 0.3, 'score': sel['score'] + 0.2})])
  result = base.Result(frame, pd.DataFrame(), sel, sel, verdicts, 'full')
  shown = ablations.get('moe_topk').present(result, base.Context(str(tmp_path), 'full'))
  assert (tmp_path / 'moe_topk.png').exists()
  table = shown.tables[0].frame
  routers = table[table['point'].str.startswith('routers: ')]
  assert list(routers['point']) == [f'routers: {a}' for a in moe_topk.ARMS]
  assert np.allclose(routers['I(expert; cluster) nats'], 1.0) and set(table['n']) == {5}
  assert list(shown.tables[2].frame.columns) == ['point', 'lr 0.1', 'lr 0.3']
  note = shown.notes[0]
  assert note.startswith('Matched active parameters, with every regime check passed: top-2 loses to top-1')
  gated = [stats.gate(verdicts[0], []), stats.gate(verdicts[1], [stats.Check('x', False, 'failed')])]
  assert 'the direction stays open' in topk_shown.matched_active_note(gated[1])


@pytest.mark.slow  # the real entry point at smoke scale: 5 arms, every one on the clustered task
def test_smoke_through_entry_point(study_smoke):
  returncode, _, stderr, out = study_smoke('moe_topk')  # the run the every-ablation smoke test reads too
  assert returncode == 0, stderr
  report = json.loads((out / 'report.json').read_text())
  assert len(report['verdicts']) == 6 and all(v['p_holm'] is not None for v in report['verdicts'])
  assert report['regime']['iterations']
  rows = report['tables'][0]['rows']
  mi = {r['point']: r['I(expert; cluster) nats'] for r in rows if r['point'].startswith('routers: ')}
  assert len(mi) == len(moe_topk.ARMS)
  assert mi['routers: hash'] < 0.05 < mi['routers: frozen']  # the hash ignores the clusters; a random router does not
