"""activation_sparsity: the density measurements, the arms, the rules and their gates on synthetic selections,
and a smoke run through the real entry point."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from ffn_research import ablations
from ffn_research import io as io_lib
from ffn_research import loop
from ffn_research import stats
from ffn_research import sweep
from ffn_research.ablations import activation_sparsity as asp
from ffn_research.ablations import base
from ffn_research.ablations import regime as regime_lib
from ffn_research.ablations.present import activation_sparsity as asp_shown

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_density_and_dead_fraction_of_known_arrays():
  a = np.array([[0.0, 1.0, -0.05], [0.2, 0.0, 0.0]])
  assert asp.density(a) == pytest.approx(3 / 6)
  assert asp.density(a, 0.1) == pytest.approx(2 / 6)  # 1.0 and 0.2; -0.05 is below 0.1
  assert asp.density(a, 0.05) == pytest.approx(2 / 6)  # strictly above tau
  assert asp.dead_fraction(a) == 0.0
  assert asp.dead_fraction(a, 0.1) == pytest.approx(1 / 3)  # column 2 never exceeds 0.1
  assert asp.dead_fraction(np.zeros((4, 5))) == 1.0


def test_layer_densities_use_tau_zero_for_relu_only():
  pre = np.array([[-1.0, 0.5], [0.05, -0.2]])
  relu = asp.layer_densities(np.maximum(pre, 0), pre, 'relu')
  assert relu == {'density': 0.5, 'density_tau': 0.25, 'positive': 0.5, 'dead': 0.0}
  gelu_like = np.array([[-0.16, 0.35], [0.03, -0.08]])
  g = asp.layer_densities(gelu_like, pre, 'gelu')
  assert g['density'] == g['density_tau'] == pytest.approx(0.5)  # |a| > TAU = 0.1: -0.16 and 0.35
  assert g['dead'] == 0.0 and g['positive'] == 0.5


def test_per_seed_slopes_recover_a_power_law():
  rows = [{asp.SEED: s, 'd_ff': f, 'density': (0.3 + 0.1 * s) * f**-0.4} for s in range(3) for f in (32, 64, 256)]
  rows.append({asp.SEED: 9, 'd_ff': 32, 'density': 0.1})  # one point: no slope
  slopes = asp.per_seed_slopes(pd.DataFrame(rows), 'd_ff')
  assert list(slopes.index) == [0, 1, 2]
  np.testing.assert_allclose(slopes.to_numpy(), -0.4, atol=1e-12)


def test_arms_declare_shapes_only_and_checkpoint_at_half_and_end():
  for scale, regime in asp.REGIMES.items():
    arms = {a.name: a for a in asp.arms(scale)}
    assert set(arms) == {'relu', 'gelu', 'silu'}
    relu = arms['relu']
    assert relu.tuned and {relu.label(p) for p in relu.points} == set(asp.relu_points(scale))
    for o in relu.points.values():  # no rate, steps or seed: the runner adds them
      assert set(o) == {'model.d_model', 'model.d_ff'}
    for name in ('gelu', 'silu'):  # descriptive: one rate, not tuned
      a = arms[name]
      assert not a.tuned and a.base.train.learning_rate == asp.DESCRIPTIVE_LR and a.base.model.activation == name
    for steps in (regime.steps, regime.steps // 2, 4 * regime.steps):
      b = relu.budget(steps)
      assert b['train.checkpoint_every'] * 2 == steps and b['train.eval_every'] * 2 == steps and b[asp.STEPS] == steps
  assert asp.REGIMES['full'].seeds >= 8 and len(asp.SETTINGS['full']['d_models']) >= 3
  assert {d for d, _ in asp.relu_points('full').values()} == {32, 64, 128}
  # one compiled program per (d_model, budget) of the ReLU arm (d_ff padded, rates and seeds traced)
  relu = asp.arms('full')[0]
  configs = [
    sweep.apply_overrides(relu.base, {**o, **relu.budget(b), asp.LR: r, asp.SEED: 0})
    for o in relu.points.values()
    for b in (500, 1000)
    for r in asp.RATES
  ]
  assert len({sweep.group_key(c) for c in configs}) == 3 * 2


def test_relu_density_equals_the_positive_pre_activation_fraction_of_a_real_model():
  config = asp.language_config('smoke', 'relu')
  exp, init, _ = loop.restore_program(config)
  state = init(0)
  rows = asp.model_rows(exp.merge(state['params']), state['data']['eval']['inputs'], 'relu')
  assert [r['layer'] for r in rows] == [0, 1]
  for r in rows:
    assert r['density'] == r['positive'] and 0.3 < r['density'] < 0.7  # relu(z) != 0 exactly when z > 0


def selection(
  trained=0.05, d_ff_exp=-0.3, d_model_exp=-0.2, init=0.5, bits=1.4, steps=1000, seeds=8, scale='full'
) -> pd.DataFrame:
  """A runner selection at one budget: every ReLU point and GELU/SiLU, every seed, with collect's columns."""
  rows = []
  d_ref = asp.SETTINGS[scale]['ref'][0]
  for p, (d, f) in asp.relu_points(scale).items():
    for s in range(seeds):
      jitter = 1 + 0.02 * (s - 3.5)
      rows.append(
        {
          'arm': 'relu',
          'point': p,
          'model.d_model': d,
          'model.d_ff': f,
          asp.SEED: s,
          asp.STEPS: steps,
          asp.LR: 1e-2,
          'status': 'completed',
          'eval_bits': bits,
          'unigram_bits': 3.0,
          'floor_bits': 1.3,
          'density': trained * (f / (4 * d)) ** d_ff_exp * (d / d_ref) ** d_model_exp * jitter,
          'density_init': init * jitter,
        }
      )
  for a in ('gelu', 'silu'):
    rows += [
      {
        'arm': a,
        'point': a,
        asp.SEED: s,
        asp.STEPS: steps,
        'status': 'completed',
        'density': 0.6,
        'eval_bits': bits,
        'unigram_bits': 3.0,
        'density_init': 0.7,
      }
      for s in range(seeds)
    ]
  return pd.DataFrame(rows)


def test_rules_read_each_axis_and_name_their_points():
  v = asp.rules(selection(), 'full')
  assert [x.outcome for x in v] == [stats.REPRODUCED] * 3, [x.detail for x in v]
  assert v[0].statistic == pytest.approx(0.05) and v[0].points == ('relu: d_model 32, d_ff 128',)
  assert v[1].statistic == pytest.approx(-0.3) and v[2].statistic == pytest.approx(-0.2)
  assert v[1].points == tuple(f'relu: d_model 32, d_ff {f}' for f in (32, 128, 512))
  assert v[2].points == tuple(f'relu: d_model {d}, d_ff {4 * d}' for d in (32, 64, 128))
  assert v[1].boundaries == (-asp.SLOPE_MARGIN,) and all(c.passed for x in v for c in x.checks)
  # dense after training and denser with size: no shape reaches 10%, so verdict 1 has no positive control
  # (invalid, never not reproduced); the slopes are not reproduced; a fall smaller than the margin is not "sparser"
  dense = asp.rules(selection(trained=0.3, d_ff_exp=0.2, d_model_exp=0.3), 'full')
  assert [x.outcome for x in dense] == [stats.INVALID, stats.NOT_REPRODUCED, stats.NOT_REPRODUCED]
  assert _failed(dense[0]) == [asp.CAN_BE_SPARSE] and 'sparsest shape (relu: d_model 32, d_ff 32)' in (
    dense[0].failed_checks[0].detail
  )
  # the widest FFN reaches 7.5% (0.3 x 4^-1): the control passes and the dense reference is not reproduced
  wide = asp.rules(selection(trained=0.3, d_ff_exp=-1.0), 'full')
  assert wide[0].outcome == stats.NOT_REPRODUCED and 'sparsest shape (relu: d_model 32, d_ff 512)' in next(
    c.detail for c in wide[0].premises if c.name == asp.CAN_BE_SPARSE
  )
  assert [x.outcome for x in asp.rules(selection(d_ff_exp=-0.01, d_model_exp=-0.01), 'full')][1:] == [
    stats.NOT_REPRODUCED
  ] * 2


def _failed(v):
  return [c.name for c in v.failed_checks]


def test_gates_premise_and_learned():
  v = asp.rules(selection(init=0.2), 'full')  # already sparse at initialisation: nothing emerged
  assert [x.outcome for x in v] == [stats.INVALID] * 3 and all(_failed(x) == [asp.INIT_PREMISE] for x in v)
  v = asp.rules(selection(bits=2.95), 'full')  # within 1 bit of the unigram model: learned little
  (learned,) = v[1].failed_checks
  assert learned.name == asp.LEARNED_PREMISE and learned.role == stats.PREMISE
  assert learned.remedy == stats.DOUBLE_STEPS and learned.points == v[1].points
  assert v[1].outcome == stats.INVALID  # a failed premise: invalid, never not reproduced


def test_every_verdict_declares_its_kind_and_carries_a_computed_premise():
  assert [c.kind for c in asp.ABLATION.claims] == [stats.MAGNITUDE, stats.SIGN, stats.SIGN]
  assert [c.rate for c in asp.ABLATION.claims] == [regime_lib.TUNED, regime_lib.COMMON, regime_lib.COMMON]
  assert all(c.scope and c.premise for c in asp.ABLATION.claims)
  for sel in (selection(), selection(init=0.2), selection(bits=2.95), selection().iloc[:0]):
    v = asp.rules(sel, 'full')
    assert len(v) == len(asp.ABLATION.claims)
    assert [c.name for c in v[0].premises] == [asp.INIT_PREMISE, asp.LEARNED_PREMISE, asp.CAN_BE_SPARSE]
    assert all([c.name for c in x.premises] == [asp.INIT_PREMISE, asp.LEARNED_PREMISE] for x in v[1:])
  # the T doublings of 2026-11-27 and the shared-rate redesign, each disclosed as null -> positive
  assert [c.to_positive for c in asp.ABLATION.changes if c.to_positive] == [(2,), (2, 3)]


def test_density_intervals_stay_inside_zero_one():
  sel = selection(trained=0.004, seeds=3)  # near 0 with a spread: a t interval would reach below 0
  ref = sel['point'] == 'relu: d_model 32, d_ff 128'
  sel.loc[ref, 'density'] = [0.0005, 0.004, 0.012]
  assert stats.mean_ci(sel.loc[ref, 'density'])[1] < 0
  v = asp.rules(sel, 'full')[0]
  assert 0 == v.ci[0] < v.ci[1] < 1 and v.outcome == stats.REPRODUCED  # the t interval, cut at the range


def _result(frame: pd.DataFrame) -> base.Result:
  """A result whose selection at T is every run of `frame` (one rate per point there)."""
  return base.Result(frame, pd.DataFrame(), frame, frame.iloc[:0], [], 'full')


def test_gelu_and_silu_notes_never_print_nan():
  """GELU/SiLU stay at T = 1,000 (descriptive, never doubled); ReLU at the reference may have no run of that
  budget at the descriptive rate: the note names ReLU's nearest budget instead of printing nan ... n = 0."""
  gated = selection(steps=1000)
  gated = gated[gated['arm'] != 'relu'].assign(
    **{asp.LR: asp.DESCRIPTIVE_LR, 'density_tau': 0.6, 'positive': 0.33, 'dead': 0.0}
  )
  relu = selection(steps=4000).query("arm == 'relu'").assign(density_tau=0.2, positive=0.21, dead=0.0)
  notes = asp_shown.notes(_result(pd.concat([gated, relu])))
  # GELU, SiLU, emergence, the entropy floor, the slope of each axis at each size's own rate, dead units
  assert len(notes) == 7 and not any('nan' in n for n in notes[:4] + notes[6:])
  assert notes[4].startswith('d_ff slope with each size at its own tuned rate') and 'nan at one shared' in notes[4]
  assert 'lower at the end in 8 of 8 seeds' in notes[2] and 'within 0.100-0.100 bits of the entropy floor' in notes[3]
  assert 'no 1000-step run: at 4000 steps (another budget, not paired)' in notes[0]
  relu_same = selection(steps=1000).query("arm == 'relu'").assign(density_tau=0.2, positive=0.21, dead=0.0)
  notes = asp_shown.notes(_result(pd.concat([gated, relu_same])))
  assert 'paired gelu - relu +0.400 [0.400, 0.400] (n = 8 seeds)' in notes[0] and 'nan' not in notes[1]
  notes = asp_shown.notes(_result(pd.concat([gated, relu.assign(**{asp.LR: 0.03})])))
  assert 'never ran at rate 0.01' in notes[0] and not any('nan' in n for n in notes[:4] + notes[6:])
  # every seed and one budget are the runner's checks now (tests/test_regime.py)


def test_registered():
  assert 'activation_sparsity' in ablations.names()
  assert isinstance(ablations.get('activation_sparsity'), base.Study)


@pytest.mark.slow  # six compiled programs, 66 runs and their analysis (~5 min at load 8 on 2 cores)
def test_smoke_through_entry_point(study_smoke):
  returncode, _, stderr, out = study_smoke('activation_sparsity')  # the run the every-ablation smoke test reads too
  assert returncode == 0, stderr
  report = json.loads((out / 'report.json').read_text())
  assert report['scale'] == 'smoke' and len(report['verdicts']) == 3 and report['regime']['iterations']
  assert all(v['p_holm'] is not None and v['points'] for v in report['verdicts'])
  assert [v['kind'] for v in report['verdicts']] == [c.kind for c in asp.ABLATION.claims]
  for v in report['verdicts']:  # declared claim, the budget ladder T/4, T/2, T and a computed premise
    assert v['scope'] and v['premise'] and len(v['ladder']) == 3
    assert any(c['role'] == stats.PREMISE for c in v['checks'])
  assert len(report['design_changes']) == len(asp.ABLATION.changes)
  rows = report['tables'][0]['rows']
  assert {r['point'] for r in rows} == set(asp.relu_points('smoke')) | {'gelu', 'silu'}
  for r in rows:
    assert r['init'] is not None and r['half'] is not None and r['end'] is not None
    if r['point'].startswith('relu'):
      assert 0.3 < r['init'] < 0.7 and r['end'] == pytest.approx(r['pre-act > 0'])  # relu(z) != 0 iff z > 0
  assert (out / 'density_vs_size.png').exists()
  relu = pd.read_csv(out / 'relu' / 'results.csv')
  assert (relu['sweep_padded_d_ff'] == relu['model.d_ff']).all()  # the arm's pad_flops_factor 1: no padding
  assert io_lib.cpu_name() in (out / 'report.md').read_text()


def test_fixed_rate_slopes_read_every_point_of_an_axis_at_one_rate():
  frame = pd.concat([selection(), selection(d_ff_exp=-0.5).assign(**{asp.LR: 3e-2})])
  t = asp_shown.fixed_rate_slopes(frame, 'full').set_index(['axis', 'rate'])
  assert t.loc[('d_ff', 1e-2), 'slope'] == pytest.approx(-0.3) and t.loc[('d_ff', 3e-2), 'slope'] == pytest.approx(-0.5)
  assert t.loc[('d_model', 1e-2), 'slope'] == pytest.approx(-0.2) and t.loc[('d_ff', 1e-2), 'seeds'] == 8
  assert len(t) == 4  # two axes x two rates, one budget
  partial = frame[~((frame['point'] == 'relu: d_model 64, d_ff 256') & np.isclose(frame[asp.LR], 3e-2))]
  assert ('d_model', 3e-2) not in asp_shown.fixed_rate_slopes(partial, 'full').set_index(['axis', 'rate']).index
