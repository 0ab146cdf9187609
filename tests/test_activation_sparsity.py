"""activation_sparsity: the density measurements, the sweeps and the verdicts on synthetic frames."""

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


def test_sweeps_cover_every_shape_with_checkpoints_at_half_and_end():
  for scale in ('smoke', 'quick', 'full'):
    s = asp.SETTINGS[scale]
    specs = {spec.name: spec for spec in asp.sweeps(scale)}
    assert set(specs) == {'relu', 'gelu', 'silu'}
    runs = {(name, o['model.d_model'], o['model.d_ff']) for name, spec in specs.items() for o in spec.overrides}
    assert runs == set(asp.shapes(scale))
    for name, spec in specs.items():
      extra = len(s['lr_arm']) if name == 'relu' else 0   # the reference shape at other learning rates
      shapes = {(o['model.d_model'], o['model.d_ff']) for o in spec.overrides}
      assert len(spec.overrides) == s['seeds'] * (len(shapes) + extra)
      tr, m = spec.base.train, spec.base.model
      assert tr.checkpoint_every * 2 == tr.steps and m.use_bias is False and m.num_layers == 2
    d_ref, f_ref = s['ref']
    assert ('gelu', d_ref, f_ref) in runs and ('relu', d_ref, f_ref) in runs
  full = asp.shapes('full')
  assert {f for a, d, f in full if a == 'relu' and d == 32} == {32, 64, 128, 256, 512}
  assert {(d, f) for a, d, f in full if a == 'relu' and f == 4 * d} == {(32, 128), (48, 192), (64, 256)}
  # one compiled program per d_model (d_ff padded), so full trains 3 ReLU programs + GELU + SiLU
  configs = [sweep.apply_overrides(spec.base, o) for spec in asp.sweeps('full') for o in spec.overrides]
  assert len({sweep.group_key(c) for c in configs}) == 5


def test_relu_density_equals_the_positive_pre_activation_fraction_of_a_real_model():
  config = asp.language_config('smoke', 'relu')
  exp, init, _ = base._program(config)   # pylint: disable=protected-access
  state = init(0)
  rows = asp.model_rows(exp.merge(state['params']), state['data']['eval']['inputs'], 'relu')
  assert [r['layer'] for r in rows] == [0, 1]
  for r in rows:
    assert r['density'] == r['positive'] and 0.3 < r['density'] < 0.7   # relu(z) != 0 exactly when z > 0


def synthetic(scale='full', trained=0.05, init=0.5, d_ff_exp=-0.3, d_model_exp=-0.2, plateau=True,
              eval_bits=2.0, settle=1.05) -> pd.DataFrame:
  """A stats frame like collect's: every shape, seed, point and layer, with seed-to-seed noise."""
  s = asp.SETTINGS[scale]
  d_ref, f_ref = s['ref']
  rows = []
  for act, d, f in asp.shapes(scale):
    for seed in range(s['seeds']):
      jitter = 1 + 0.02 * (seed - 2)
      end = trained * (f / (4 * d)) ** d_ff_exp * (d / d_ref) ** d_model_exp * jitter
      run = {'activation': act, 'd_model': d, 'd_ff': f, asp.SEED: seed, 'lr': s['lr'], 'loss_last': 1.0,
             'loss_previous': 1.01 if plateau else 1.5, 'eval_bits': eval_bits, 'unigram_bits': 3.0,
             'floor_bits': 1.5}
      for step, point, dens in ((0, 'init', init * jitter), (s['steps'] // 2, 'half', settle * end), (s['steps'], 'end', end)):
        for layer in range(2):
          rows.append({**run, 'step': step, 'point': point, 'layer': layer, 'density': dens,
                       'density_tau': dens, 'positive': dens, 'dead': 0.0})
  return pd.DataFrame(rows)


def test_verdicts_on_synthetic_frames(tmp_path):
  a = asp.analyze_stats(synthetic(), base.Context(str(tmp_path), 'full'))
  assert [v.outcome for v in a.verdicts] == [verdict.REPRODUCED] * 3
  assert a.verdicts[0].statistic == pytest.approx(0.05 * np.mean([1 + 0.02 * (s - 2) for s in range(5)]))
  assert a.verdicts[1].statistic == pytest.approx(-0.3) and a.verdicts[2].statistic == pytest.approx(-0.2)
  assert os.path.exists(tmp_path / 'density_vs_size.png')
  table = a.tables[0].frame
  assert len(table) == 3 * len(asp.shapes('full')) and set(table['point']) == {'init', 'half', 'end'}
  # dense after training, density rising with size: not reproduced
  dense = asp.decide(synthetic(trained=0.3, d_ff_exp=0.2, d_model_exp=0.3), 'full')
  assert [v.outcome for v in dense] == [verdict.NOT_REPRODUCED] * 3


@pytest.mark.parametrize('kwargs,failed', [
    (dict(init=0.2), 'init premise'),                 # already sparse at initialisation: nothing emerged
    (dict(plateau=False), 'plateau'),
    (dict(eval_bits=2.95), 'learned'),                # no better than the unigram model
    (dict(settle=1.5), 'density settled'),            # still falling fast: not at its plateau
])
def test_a_failed_regime_check_makes_every_verdict_invalid(kwargs, failed):
  verdicts = asp.decide(synthetic(**kwargs), 'full')
  assert [v.outcome for v in verdicts] == [verdict.INVALID] * 3
  for v in verdicts:
    assert [c.name.split(':')[0] for c in v.failed_checks] == [failed]


def test_learning_rate_arm_is_kept_out_of_the_verdicts(tmp_path):
  frame = synthetic()
  arm = frame[(frame['activation'] == 'relu') & (frame['d_model'] == 32) & (frame['d_ff'] == 128)].copy()
  arm['lr'], arm['density'] = 1e-2, 0.9           # a dense arm at another rate: descriptive only
  a = asp.analyze_stats(pd.concat([frame, arm]), base.Context(str(tmp_path), 'full'))
  assert [v.outcome for v in a.verdicts] == [verdict.REPRODUCED] * 3
  assert a.verdicts[0].statistic == pytest.approx(0.05)
  assert any('0.01: 0.900' in n for n in a.notes)


def test_missing_seed_fails_coverage():
  frame = synthetic()
  verdicts = asp.decide(frame[~((frame['d_ff'] == 512) & (frame[asp.SEED] == 0))], 'full')
  assert [v.outcome for v in verdicts] == [verdict.REPRODUCED, verdict.INVALID, verdict.REPRODUCED]
  assert verdicts[1].failed_checks[0].name.startswith('coverage')


def test_registered():
  assert 'activation_sparsity' in ablations.names()
  assert ablations.get('activation_sparsity').name == 'activation_sparsity'


@pytest.mark.slow  # three compiled groups and the analysis (~1-3 min)
def test_smoke_through_entry_point(tmp_path):
  proc = subprocess.run([sys.executable, '-m', 'experiments.reproduce', '--ablation=activation_sparsity',
                         f'--workdir={tmp_path}', '--scale=smoke'], cwd=REPO, capture_output=True, text=True,
                        env={**os.environ, 'PYTHONPATH': REPO}, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  report = json.loads((tmp_path / 'activation_sparsity' / 'report.json').read_text())
  assert report['scale'] == 'smoke' and len(report['verdicts']) == 3
  rows = report['tables'][0]['rows']
  assert {r['point'] for r in rows} == {'init', 'half', 'end'}
  assert len(rows) == 3 * len(asp.shapes('smoke'))
  for r in rows:
    if r['activation'] == 'relu':
      assert r['density'] == pytest.approx(r['pre-act > 0'])
  assert jax.numpy.isfinite(report['verdicts'][0]['statistic'])
