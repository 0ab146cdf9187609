"""universal_approximation: the least-squares baselines, collapse detection and the verdicts on synthetic frames."""

import os

import numpy as np
import pandas as pd
import pytest

from ffn_research import sweep
from ffn_research.ablations import base, verdict
from ffn_research.ablations import universal_approximation as ua

R, NR, INV = verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.INVALID
GRID = 8193


def _galerkin_nodal_values(nodes: np.ndarray) -> np.ndarray:
  """Continuous L2 projection of x^2 onto linear splines with these nodes, by hat functions: the exact
  mass matrix (h/3 on the diagonal per element, h/6 off it) and exact integrals of x^2 times each hat."""
  k = len(nodes)
  mass, load = np.zeros((k, k)), np.zeros(k)
  for e in range(k - 1):
    a, c = nodes[e], nodes[e + 1]
    h = c - a
    mass[e:e + 2, e:e + 2] += h * np.array([[1 / 3, 1 / 6], [1 / 6, 1 / 3]])
    i2, i3 = (c ** 3 - a ** 3) / 3, (c ** 4 - a ** 4) / 4   # int x^2, int x^3 over [a, c]
    load[e] += (c * i2 - i3) / h
    load[e + 1] += (i3 - a * i2) / h
  return np.linalg.solve(mass, load)


def _dense_points(m=20_000):
  return -1 + (np.arange(m) + 0.5) * 2 / m   # midpoints: discrete least squares -> the L2 projection


@pytest.mark.parametrize('n', [7, 15, 31])
def test_equal_kinks_least_squares_has_the_closed_form_error(n):
  """The L2 projection of x^2 on N + 1 equal pieces (h = 2/(N+1)) is x^2 - h^2/6 at every node, so its sup
  error is h^2/6 = 2/(3 (N+1)^2) (nodes lie on the grid when N + 1 is a power of 2)."""
  h = 2 / (n + 1)
  nodes = np.concatenate([[-1], ua.equal_kinks(n), [1]])
  np.testing.assert_allclose(_galerkin_nodal_values(nodes) - nodes ** 2, -h ** 2 / 6, rtol=1e-9)
  assert ua.lstsq_sup_error(_dense_points(), ua.equal_kinks(n), GRID) == pytest.approx(h ** 2 / 6, rel=1e-3)
  assert ua.lstsq_sup_error(_dense_points(), ua.equal_kinks(n), GRID) >= ua.grid_lower_bound(n, GRID)


@pytest.mark.parametrize('n,seed', [(3, 0), (8, 1), (20, 2)])
def test_random_kinks_least_squares_matches_galerkin(n, seed):
  kinks = ua.random_kinks(n, seed)
  assert np.all(np.diff(kinks) > 0) and kinks.min() >= -1 and kinks.max() <= 1 and len(kinks) == n
  np.testing.assert_array_equal(kinks, ua.random_kinks(n, seed))            # reproducible per (seed, N)
  nodes = np.concatenate([[-1], kinks, [1]])
  grid = np.linspace(-1, 1, GRID)
  expected = np.max(np.abs(np.interp(grid, nodes, _galerkin_nodal_values(nodes)) - grid ** 2))
  assert ua.lstsq_sup_error(_dense_points(), kinks, GRID) == pytest.approx(expected, rel=1e-3)


def test_relu_basis_spans_piecewise_linear_functions():
  x = np.linspace(-1, 1, 101)
  basis = ua.relu_basis(x, np.array([-0.5, 0.0, 0.5]))
  assert basis.shape == (101, 5)
  target = np.abs(x) + 0.3 * np.maximum(x - 0.5, 0) - 2 * x + 1   # kinks at 0 and 0.5 only
  coef = np.linalg.lstsq(basis, target, rcond=None)[0]
  np.testing.assert_allclose(coef, [1, -3, 0, 2, 0.3], atol=1e-10)


def test_baselines_frame_on_a_seeds_points():
  x = np.random.default_rng(0).uniform(-1, 1, 2048)
  b = ua.baselines(x, [8, 16], seed=3, grid_size=GRID)
  assert list(b[ua.N]) == [8, 16] and set(b[ua.SEED]) == {3}
  assert b['lstsq_equal'].iloc[1] == pytest.approx(ua.lstsq_sup_error(x, ua.equal_kinks(16), GRID))
  assert b['lstsq_random'].iloc[0] == pytest.approx(ua.lstsq_sup_error(x, ua.random_kinks(8, 3), GRID))


def test_collapse_detection():
  np.testing.assert_array_equal(ua.collapsed([0.5, 0.125, 0.1249, 1e-3, 1.2]), [True, True, False, False, True])
  assert ua.COLLAPSE_ERROR == pytest.approx(float(ua.optimum(2)))   # the best one-kink (two-piece) error
  rows = pd.DataFrame([{'arm': '1x', ua.N: n, ua.SEED: s, 'sup_error': e}
                       for n, s, e in [(4, 0, 0.01), (8, 0, 0.5), (8, 1, 0.01), (16, 0, 0.2), (16, 1, 0.003)]])
  fit = ua.fitted(rows)
  assert list(zip(fit[ua.N], fit[ua.SEED])) == [(8, 1), (16, 1)]   # N < 8 and collapsed runs dropped


def _stats(trained=lambda n: 12 * ua.optimum(n), long=lambda n: 3 * ua.optimum(n), equal=lambda n: 1.3 * ua.optimum(n),
           random=lambda n: 0.5 * n ** -1.5, seeds=5, widths=(2, 4, 8, 16, 32, 64, 128), collapse=None, jump=0.0,
           best=lambda arm, n: ua.RATES[1]):
  """A stats frame like collect's, every rate of ua.RATES: at the rate best(arm, n) errors are the functions
  of N, seed s scaling them by (1 + 0.01 s); every other rate has 3x the final loss and 7x the error (so a
  wrong choice shows in every verdict). collapse: {N: number of seeds whose run (at the best rate) ends at sup
  error 0.5}; jump: relative loss change at the end."""
  rows = []
  for arm, err in (('1x', trained), ('4x', long)):
    for n in widths:
      for rate in ua.RATES:
        is_best = bool(np.isclose(rate, best(arm, n)))
        for s in range(seeds):
          bad = s < (collapse or {}).get(n, 0) and is_best
          rows.append({'arm': arm, ua.N: n, ua.LR: rate, ua.SEED: s, 'name': f'{arm} d_ff={n},lr={rate:g},seed={s}',
                       'sup_error': 0.5 if bad else err(n) * (1 + 0.01 * s) * (1 if is_best else 7),
                       'loss_last': 1e-6 * (1 + jump) * (1 if is_best else 3), 'loss_previous': 1e-6 * (1 if is_best else 3),
                       'lstsq_equal': equal(n) * (1 + 0.02 * s), 'lstsq_random': random(n) * (1 + 0.03 * s)})
  return pd.DataFrame(rows)


def _controls(value=1e-4, seeds=5, best=lambda control: ua.RATES[1]):
  """Every control at every rate: at best(control) sup error `value`, elsewhere 1000x it and 3x the loss."""
  return pd.DataFrame([{'control': c, ua.LR: r, ua.SEED: s, 'sup_error': value * (1 if r == best(c) else 1000),
                        'loss_last': 1e-6 * (1 if r == best(c) else 3)}
                       for c in ua.CONTROLS for r in ua.RATES for s in range(seeds)])


def _outcomes(stats, tmp_path, controls=None):
  a = ua.analyze_stats(stats, _controls() if controls is None else controls,
                       base.Context(outdir=str(tmp_path), scale='quick'), GRID)
  return a, [v.outcome for v in a.verdicts]


def test_verdicts_on_synthetic_stats(tmp_path):
  # slope exactly -2 in every seed (12x the optimum: every run at N = 2 and 4 is >= 1/8, collapsed, and one at
  # N = 8 collapses too; all excluded): reproduced; the trained nets fall 0.5 faster than the random-kink baseline
  # (slope -1.5): reproduced; 4x steps lower errors 4x: reproduced
  a, outcomes = _outcomes(_stats(collapse={8: 1}), tmp_path)
  assert outcomes == [R, R, R, R, R, R]
  assert a.verdicts[0].statistic == pytest.approx(-2.0, abs=1e-9) and a.verdicts[0].n == 5
  assert a.verdicts[1].statistic == pytest.approx(-0.5, abs=1e-9)
  assert a.verdicts[2].statistic == pytest.approx(-2.0, abs=1e-9)
  assert all(c.passed for c in a.verdicts[0].checks) and len(a.verdicts[0].checks) == 5 + 1 + 1 + 1 + 1
  assert a.checks[0].passed and {f.file for f in a.figures} <= set(os.listdir(tmp_path))
  t = a.tables[0].frame.set_index(ua.N)
  assert t.loc[2, 'collapsed'] == 5 and t.loc[4, 'collapsed'] == 5 and t.loc[8, 'collapsed'] == 1
  assert (t['runs'] == 5).all() and not t.loc[4, 'fitted'] and t.loc[8, 'fitted']
  np.testing.assert_allclose(t.loc[16:, 'trained / optimum'], 12 * np.exp(np.mean(np.log(1 + 0.01 * np.arange(5)))))
  slopes = a.tables[2].frame
  np.testing.assert_allclose(slopes['trained 1x - random'], -0.5 + 0 * slopes['trained 1x'], atol=1e-9)
  # slope -1 against baselines at slope -1.5: both not reproduced
  stats = _stats(trained=lambda n: 0.1 / n, long=lambda n: 0.1 / n)
  vs = ua.decide(stats, _controls())[0]
  assert [v.outcome for v in vs[:3]] == [NR, NR, NR] and vs[1].statistic == pytest.approx(0.5, abs=1e-9)


def test_failed_regime_checks_give_invalid():
  def outcomes(stats):
    vs = ua.decide(stats, _controls())[0]
    return vs, [v.outcome for v in vs]
  # no plateau: verdicts 1 and 2 invalid, the others untouched
  assert outcomes(_stats(jump=0.5))[1][:3] == [INV, INV, R]
  # 2 of 5 runs collapsed at a fitted N (40% > 20%): invalid
  vs, out = outcomes(_stats(collapse={16: 2}))
  assert out[:2] == [INV, INV] and 'collapsed' in vs[0].detail and '16: 40%' in vs[0].detail
  # 4x steps change the slope from -2 to -1 (more than the margin 0.25): the slope is not at a plateau, invalid
  vs, out = outcomes(_stats(long=lambda n: 0.1 / n))
  assert out[:2] == [INV, INV] and 'slope plateau in steps' in vs[0].detail and 'change 1 ' in vs[0].detail
  # one collapsed of 5 (20%) is allowed
  assert outcomes(_stats(collapse={16: 1}))[1][:2] == [R, R]
  # data premise: the equal-kink baseline falls only as N^-1 (the training points do not pin x^2): verdict 1 invalid
  vs, out = outcomes(_stats(equal=lambda n: 0.01 / n))
  assert out[:2] == [INV, R] and 'data premise' in vs[0].detail
  # the lowest loss at the grid's largest rate at a fitted N: verdicts 1 and 2 invalid; at N = 2 (not fitted): no effect
  vs, out = outcomes(_stats(best=lambda arm, n: ua.RATES[-1] if (arm, n) == ('1x', 16) else ua.RATES[1]))
  assert out[:3] == [INV, INV, R] and 'learning rate inside the grid' in vs[0].detail and f'1x N = 16: {ua.RATES[-1]:g}, ' in vs[0].detail
  assert outcomes(_stats(best=lambda arm, n: ua.RATES[0] if n == 2 else ua.RATES[1]))[1][:3] == [R, R, R]
  # ... in the 4x arm at N >= 32: verdict 3 (4x vs 1x) invalid, 1 and 2 untouched
  vs, out = outcomes(_stats(best=lambda arm, n: ua.RATES[0] if (arm, n) == ('4x', 64) else ua.RATES[1]))
  assert out[:3] == [R, R, INV] and f'4x N = 64: {ua.RATES[0]:g}, ' in vs[2].detail


def test_rate_is_chosen_on_the_training_loss_per_arm_and_width():
  # at 1e-3 the sup error is lower but the training loss higher: the verdicts still read the rate of the lowest loss
  stats = _stats(best=lambda arm, n: ua.RATES[2] if n < 8 else ua.RATES[1])
  tempting = np.isclose(stats[ua.LR], ua.RATES[0])
  stats.loc[tempting, 'sup_error'] = stats.loc[tempting, 'sup_error'] / 100
  vs, chosen, _, rates = ua.decide(stats, _controls())
  assert len(chosen) == 2 * 7 * 5 and set(chosen.groupby(['arm', ua.N])[ua.SEED].nunique()) == {5}
  assert all(np.isclose(r, ua.RATES[2] if n < 8 else ua.RATES[1]) for n, r in zip(rates[ua.N], rates['learning rate']))
  assert vs[0].statistic == pytest.approx(-2.0, abs=1e-9) and vs[0].outcome == R
  np.testing.assert_allclose(rates.set_index(['arm', ua.N]).loc[('1x', 16), f'loss at {ua.RATES[0]:g}'], 3e-6)
  # a diverged seed (NaN loss) makes its rate ineligible at that point: the next-best complete rate is kept
  stats = _stats()
  stats.loc[(stats[ua.N] == 16) & np.isclose(stats[ua.LR], ua.RATES[1]) & (stats[ua.SEED] == 0), 'loss_last'] = np.nan
  _, chosen, _, rates = ua.decide(stats, _controls())
  picked = rates.set_index(['arm', ua.N]).loc[('1x', 16), 'learning rate']
  assert picked != ua.RATES[1] and (chosen[(chosen['arm'] == '1x') & (chosen[ua.N] == 16)][ua.SEED].nunique() == 5)


def test_controls_are_tuned_and_gated_on_their_own_rate():
  vs, _, controls, rates = ua.decide(_stats(), _controls(best=lambda c: ua.RATES[-1] if c == 'swiglu' else ua.RATES[2]))
  assert [v.outcome for v in vs[3:]] == [R, R, INV] and 'swiglu: learning rate inside the grid' in vs[5].detail
  assert len(controls) == 15 and set(controls[ua.LR]) == {ua.RATES[2], ua.RATES[-1]}
  assert rates.set_index('control').loc['abs', 'learning rate'] == ua.RATES[2]
  # an exact control trained to rounding at every rate from RATES[2] up: losses below the floor tie, the smallest wins
  ctrl = _controls()
  at_floor = ctrl[ua.LR] >= ua.RATES[2]
  ctrl.loc[at_floor, 'loss_last'] = ua.LOSS_FLOOR * 10.0 ** -np.arange(at_floor.sum()) / 3
  ctrl.loc[at_floor, 'sup_error'] = 1e-7
  vs, _, controls, rates = ua.decide(_stats(), ctrl)
  assert set(controls[ua.LR]) == {ua.RATES[2]} and [v.outcome for v in vs[3:]] == [R, R, R]


def test_lower_bound_check_flags_runs_below_it():
  stats = _stats()
  assert ua.lower_bound_check(stats, GRID).passed
  stats.loc[(stats[ua.N] == 128) & (stats[ua.SEED] == 0) & (stats['arm'] == '1x') & np.isclose(stats[ua.LR], 1e-2),
            'sup_error'] = 0.5 * ua.grid_lower_bound(128, GRID)
  c = ua.lower_bound_check(stats, GRID)   # every run is checked, the rates not chosen too
  assert not c.passed and '1x d_ff=128,lr=0.01,seed=0' in c.detail


def test_sweeps_train_on_num_train_points():
  for scale in ua.ABLATION.scales:
    for spec in ua.sweeps(scale):
      runs = sweep.expand(spec.base, spec.overrides)
      assert {r.config.task.num_train for r in runs} == {ua.NUM_TRAIN}
  assert min(ua.SETTINGS['smoke']['widths'][1:]) >= ua.MIN_FIT_WIDTH and len(ua.SETTINGS['smoke']['widths']) - 1 >= 3
