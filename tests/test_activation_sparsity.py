"""activation_sparsity: the density measurements, the sweeps and the verdicts on synthetic frames."""

import itertools
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest

from ffn_research import ablations, sweep
from ffn_research.ablations import activation_sparsity as asp
from ffn_research.ablations import base, verdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_density_and_dead_fraction_of_known_arrays():
  a = np.array([[0.0, 1.0, -0.05], [0.2, 0.0, 0.0]])
  assert asp.density(a) == pytest.approx(3 / 6)
  assert asp.density(a, 0.1) == pytest.approx(2 / 6)     # 1.0 and 0.2; -0.05 is below 0.1
  assert asp.density(a, 0.05) == pytest.approx(2 / 6)    # strictly above tau
  assert asp.dead_fraction(a) == 0.0
  assert asp.dead_fraction(a, 0.1) == pytest.approx(1 / 3)   # column 2 never exceeds 0.1
  assert asp.dead_fraction(np.zeros((4, 5))) == 1.0


def test_layer_densities_use_tau_zero_for_relu_only():
  pre = np.array([[-1.0, 0.5], [0.05, -0.2]])
  relu = asp.layer_densities(np.maximum(pre, 0), pre, 'relu')
  assert relu == {'density': 0.5, 'density_tau': 0.25, 'positive': 0.5, 'dead': 0.0}
  gelu_like = np.array([[-0.16, 0.35], [0.03, -0.08]])
  g = asp.layer_densities(gelu_like, pre, 'gelu')
  assert g['density'] == g['density_tau'] == pytest.approx(0.5)   # |a| > TAU = 0.1: -0.16 and 0.35
  assert g['dead'] == 0.0 and g['positive'] == 0.5


def test_per_seed_slopes_recover_a_power_law():
  rows = [{asp.SEED: s, 'd_ff': f, 'density': (0.3 + 0.1 * s) * f ** -0.4} for s in range(3) for f in (32, 64, 256)]
  rows.append({asp.SEED: 9, 'd_ff': 32, 'density': 0.1})   # one point: no slope
  slopes = asp.per_seed_slopes(pd.DataFrame(rows), 'd_ff')
  assert list(slopes.index) == [0, 1, 2]
  np.testing.assert_allclose(slopes.to_numpy(), -0.4, atol=1e-12)


def test_sweeps_tune_every_relu_shape_over_rates_and_budgets_with_their_own_schedules():
  for scale in ('smoke', 'quick', 'full'):
    s = asp.SETTINGS[scale]
    specs = {spec.name: spec for spec in asp.sweeps(scale)}
    assert set(specs) == {'relu', 'gelu', 'silu'}
    runs = {(name, o['model.d_model'], o['model.d_ff']) for name, spec in specs.items() for o in spec.overrides}
    assert runs == set(asp.shapes(scale))
    relu_shapes = {(d, f) for a, d, f in asp.shapes(scale) if a == 'relu'}
    assert len(specs['relu'].overrides) == s['seeds'] * len(relu_shapes) * len(asp.RATES) * 2
    cells = {(o['model.d_model'], o['model.d_ff'], o['train.learning_rate'], o['train.steps'], o[asp.SEED])
             for o in specs['relu'].overrides}
    assert len(cells) == len(specs['relu'].overrides)   # every (shape, rate, budget, seed) once
    for o in specs['relu'].overrides:   # each budget has its own warmup, checkpoints (half, end) and evaluations
      b = o['train.steps']
      assert b in (s['steps'], s['steps'] // 2)
      assert o['train.checkpoint_every'] * 2 == b and o['train.eval_every'] * 2 == b
      assert o['train.warmup_steps'] == max(1, b // 20) and o['train.log_every'] == max(1, b // 20)
    for name in ('gelu', 'silu'):   # descriptive: one rate, the full budget only
      c = [sweep.apply_overrides(specs[name].base, o) for o in specs[name].overrides]
      assert len(c) == s['seeds'] and {(x.train.learning_rate, x.train.steps) for x in c} == {
          (asp.DESCRIPTIVE_LR, s['steps'])}
      assert c[0].train.checkpoint_every * 2 == s['steps'] and c[0].model.use_bias is False
  assert asp.RATES == (3e-3, 1e-2, 3e-2) and asp.DESCRIPTIVE_LR in asp.RATES
  full = asp.shapes('full')
  assert {(d, f) for a, d, f in full if a == 'relu'} == {(32, 32), (32, 128), (32, 512), (64, 256)}
  # one compiled program per (d_model, budget) (d_ff padded, rates and seeds traced) + GELU + SiLU
  configs = [sweep.apply_overrides(spec.base, o) for spec in asp.sweeps('full') for o in spec.overrides]
  assert len({sweep.group_key(c) for c in configs}) == 6


def test_relu_density_equals_the_positive_pre_activation_fraction_of_a_real_model():
  config = asp.language_config('smoke', 'relu')
  exp, init, _ = base._program(config)   # pylint: disable=protected-access
  state = init(0)
  rows = asp.model_rows(exp.merge(state['params']), state['data']['eval']['inputs'], 'relu')
  assert [r['layer'] for r in rows] == [0, 1]
  for r in rows:
    assert r['density'] == r['positive'] and 0.3 < r['density'] < 0.7   # relu(z) != 0 exactly when z > 0


BITS = {3e-3: 1.6, 1e-2: 1.5, 3e-2: 1.55}   # held-out bits at T per rate: 1e-2 is best


def synthetic(scale='full', trained=0.05, init=0.5, d_ff_exp=-0.3, d_model_exp=-0.2, bits=None, half_bits=0.02,
              half_density=1.05, eval_bits_shift=0.0) -> pd.DataFrame:
  """A stats frame like collect's: every ReLU shape x rate x budget, GELU/SiLU at T, every seed, point and layer.
  The density at T scales with the rate (lr / 1e-2), so a statistic read at the wrong rate shows."""
  s = asp.SETTINGS[scale]
  d_ref, t_steps = s['ref'][0], s['steps']
  bits = BITS if bits is None else bits
  rows = []
  for act, d, f in asp.shapes(scale):
    cells = ([(lr, b) for lr in asp.RATES for b in (t_steps, t_steps // 2)] if act == 'relu'
             else [(asp.DESCRIPTIVE_LR, t_steps)])
    for (lr, b), seed in itertools.product(cells, range(s['seeds'])):
      jitter = 1 + 0.02 * (seed - 2)
      end = trained * (f / (4 * d)) ** d_ff_exp * (d / d_ref) ** d_model_exp * jitter * (lr / 1e-2)
      if b < t_steps:
        end *= half_density
      run = {'activation': act, 'd_model': d, 'd_ff': f, asp.SEED: seed, 'lr': lr, 'steps': b,
             'eval_bits': bits[lr] + eval_bits_shift + (half_bits if b < t_steps else 0.0), 'unigram_bits': 3.0,
             'floor_bits': 1.4}
      for step, point, dens in ((0, 'init', init * jitter), (b // 2, 'half', 1.2 * end), (b, 'end', end)):
        for layer in range(2):
          rows.append({**run, 'step': step, 'point': point, 'layer': layer, 'density': dens,
                       'density_tau': dens, 'positive': dens, 'dead': 0.0})
  return pd.DataFrame(rows)


def test_verdicts_on_synthetic_frames_read_the_chosen_rate(tmp_path):
  frame = synthetic()
  tuned = asp.tune(frame)
  assert list(tuned.table['learning_rate']) == [1e-2] * 4 and set(tuned.rows['steps']) == {1000}
  a = asp.analyze_stats(frame, base.Context(str(tmp_path), 'full'))
  assert [v.outcome for v in a.verdicts] == [verdict.REPRODUCED] * 3
  # the reference's density at 1e-2, T (at 3e-3 or 3e-2 it would be 0.3x or 3x this)
  assert a.verdicts[0].statistic == pytest.approx(0.05 * np.mean([1 + 0.02 * (s - 2) for s in range(4)]))
  assert a.verdicts[1].statistic == pytest.approx(-0.3) and a.verdicts[2].statistic == pytest.approx(-0.2)
  assert all(c.passed for v in a.verdicts for c in v.checks)
  assert os.path.exists(tmp_path / 'density_vs_size.png')
  density, grid = a.tables[0].frame, a.tables[1].frame
  assert len(density) == 3 * len(asp.shapes('full')) and set(density['point']) == {'init', 'half', 'end'}
  assert set(density[density['activation'] == 'relu']['lr']) == {1e-2}
  assert len(grid) == 4 * 3 * 2 and grid['chosen'].sum() == 4 * 2
  assert 'd_model 32, d_ff 128: 0.01' in a.headline
  # dense after training, density rising with size: not reproduced
  dense = asp.decide(synthetic(trained=0.3, d_ff_exp=0.2, d_model_exp=0.3), 'full')
  assert [v.outcome for v in dense] == [verdict.NOT_REPRODUCED] * 3


@pytest.mark.parametrize('kwargs,failed', [
    (dict(init=0.2), 'init premise'),                       # already sparse at initialisation: nothing emerged
    (dict(bits={3e-3: 1.6, 1e-2: 1.55, 3e-2: 1.5}), 'learning rate inside the grid'),   # best at the edge
    (dict(half_bits=0.2), 'budget plateau of the held-out bits'),   # T/2 much worse: more steps still help
    (dict(half_density=1.5), 'budget plateau of the density'),      # density still falling with the budget
    (dict(eval_bits_shift=1.45), 'learned'),                # within 0.1 bits of the unigram model (3.0 bits)
])
def test_a_failed_regime_check_makes_every_verdict_invalid(kwargs, failed):
  verdicts = asp.decide(synthetic(**kwargs), 'full')
  assert [v.outcome for v in verdicts] == [verdict.INVALID] * 3
  for v in verdicts:
    assert len(v.failed_checks) == 1 and v.failed_checks[0].name.startswith(failed)


def test_budget_check_uses_the_chosen_rate_only():
  frame = synthetic()
  bad = (frame['lr'] == 3e-3) & (frame['steps'] == 500)   # a non-chosen rate's T/2 runs: denser, worse bits
  frame.loc[bad, 'density'] *= 2
  frame.loc[bad, 'eval_bits'] += 1.0
  assert [v.outcome for v in asp.decide(frame, 'full')] == [verdict.REPRODUCED] * 3
  frame.loc[(frame['lr'] == 1e-2) & (frame['steps'] == 500), 'density'] *= 2
  verdicts = asp.decide(frame, 'full')
  assert [v.outcome for v in verdicts] == [verdict.INVALID] * 3
  assert '1000 steps vs' in verdicts[0].failed_checks[0].detail and 'its own schedule' in verdicts[0].failed_checks[0].detail


def test_missing_seed_fails_coverage_and_a_diverged_rate_is_not_eligible():
  frame = synthetic()
  gone = (frame['d_ff'] == 512) & (frame[asp.SEED] == 0)   # seed 0 at d_ff 512, every rate and budget
  verdicts = asp.decide(frame[~gone], 'full')
  assert [v.outcome for v in verdicts] == [verdict.REPRODUCED, verdict.INVALID, verdict.REPRODUCED]
  assert [c.name.split(':')[0] for c in verdicts[1].failed_checks] == ['coverage']
  assert 'lr 0.01, 1000 steps: 3/4 seeds' in verdicts[1].failed_checks[0].detail
  # seed 0 diverged at 1e-2, d_ff 512 (T only): 1e-2 is not eligible there, 3e-2 (edge) is chosen
  frame.loc[(frame['d_ff'] == 512) & (frame[asp.SEED] == 0) & (frame['lr'] == 1e-2)
            & (frame['steps'] == 1000), 'eval_bits'] = np.nan
  tuned = asp.tune(frame)
  assert tuned.table.set_index('shape')['learning_rate']['d_model 32, d_ff 512'] == 3e-2
  verdicts = asp.decide(frame, 'full', tuned)
  assert [v.outcome for v in verdicts] == [verdict.REPRODUCED, verdict.INVALID, verdict.REPRODUCED]
  assert [c.name.split(' (')[0] for c in verdicts[1].failed_checks] == ['learning rate inside the grid']


def test_registered():
  assert 'activation_sparsity' in ablations.names()
  assert ablations.get('activation_sparsity').name == 'activation_sparsity'


@pytest.mark.slow  # six compiled groups and the analysis (~1-2 min)
def test_smoke_through_entry_point(tmp_path):
  proc = subprocess.run([sys.executable, '-m', 'experiments.reproduce', '--ablation=activation_sparsity',
                         f'--workdir={tmp_path}', '--scale=smoke'], cwd=REPO, capture_output=True, text=True,
                        env={**os.environ, 'PYTHONPATH': REPO}, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  report = json.loads((tmp_path / 'activation_sparsity' / 'report.json').read_text())
  assert report['scale'] == 'smoke' and len(report['verdicts']) == 3
  rows = report['tables'][0]['rows']
  assert {r['point'] for r in rows} == {'init', 'half', 'end'}
  assert len(rows) == 3 * len(asp.shapes('smoke'))     # one rate per shape: the chosen one (ReLU)
  relu_shapes = [s for s in asp.shapes('smoke') if s[0] == 'relu']
  grid = report['tables'][1]['rows']
  assert len(grid) == len(relu_shapes) * len(asp.RATES) * 2 and {r['steps'] for r in grid} == {20, 40}
  assert sum(r['chosen'] for r in grid) == 2 * len(relu_shapes)
  for r in rows:
    if r['activation'] == 'relu':
      assert r['density'] == pytest.approx(r['pre-act > 0'])
  assert jax.numpy.isfinite(report['verdicts'][0]['statistic'])
