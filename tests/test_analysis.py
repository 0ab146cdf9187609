"""Analysis: t quantiles, seed aggregation, power-law fits and the report on synthetic results."""

import csv
import math
import os

import numpy as np
import pytest

from ffn_research import analysis


@pytest.mark.parametrize('df, want', [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423)])
def test_t_quantile_matches_tables(df, want):
  assert analysis.t_quantile(0.975, df) == pytest.approx(want, abs=2e-4)


def test_mean_std_ci():
  s = analysis.mean_std_ci([1.0, 2.0, 3.0, None, float('nan')])
  assert (s['n'], s['mean'], s['std']) == (3, 2.0, 1.0)
  assert s['ci'] == pytest.approx(4.3027 / math.sqrt(3), abs=1e-4)
  assert math.isnan(analysis.mean_std_ci([5.0])['ci']) and analysis.mean_std_ci([])['n'] == 0


def test_aggregate_over_seeds_skips_unfinished_runs():
  rows = [{'model.d_ff': d, 'train.seed': s, 'status': 'completed', 'num_params': 3 * d, 'eval_loss': d + s}
          for d in (4, 8) for s in range(3)]
  rows.append({'model.d_ff': 8, 'train.seed': 3, 'status': 'diverged', 'num_params': 24, 'eval_loss': None})
  agg = analysis.aggregate(rows, ['model.d_ff'], ['eval_loss'])
  assert [(a['model.d_ff'], a['runs'], a['num_params'], a['eval_loss/mean'], a['eval_loss/std'])
          for a in agg] == [(4, '3/3', 12, 5.0, 1.0), (8, '3/4', 24, 9.0, 1.0)]


N = np.array([4, 8, 16, 32, 64, 128, 256, 1024, 4096], np.float64)


@pytest.mark.parametrize('a, b, c', [(2.0, 0.5, 0.1), (30.0, 1.5, 0.0), (1.0, 2.0, 1e-3)])
def test_power_law_fit_recovers_exact_data(a, b, c):
  fit = analysis.fit_power_law(N, a * N ** -b + c)
  assert (fit.a, fit.b, fit.c) == pytest.approx((a, b, c), rel=1e-5, abs=1e-7)
  assert fit.rmse_log < 1e-6 and fit.n == len(N)


def test_power_law_fit_with_noise_has_honest_errors():
  """Three seeds with 2% log-normal noise: the truth lies within 3 standard errors."""
  rng = np.random.default_rng(0)
  x = np.repeat(N, 3)
  y = (2.0 * x ** -0.7 + 0.01) * np.exp(0.02 * rng.standard_normal(x.shape))
  fit = analysis.fit_power_law(x, y)
  for est, se, true in ((fit.a, fit.a_se, 2.0), (fit.b, fit.b_se, 0.7), (fit.c, fit.c_se, 0.01)):
    assert 0 < se < 0.2 * true and abs(est - true) < 3 * se
  assert analysis.fit_power_law([1, 1, 2], [1.0, 1.0, 0.5]) is None


def write_results(path, rows, columns):
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)


def test_analyze_report_plots_and_fits(tmp_path):
  """Synthetic sweep: relu decays as d_ff^-1, swiglu as d_ff^-2; the report recovers both exponents."""
  columns = ['name', 'status', 'model.activation', 'model.d_ff', 'model.moe.top_k', 'train.seed',
             'num_params', 'num_active_params', 'num_ffn_params', 'flops_per_token', 'step', 'final_loss',
             'eval_loss', 'bits_per_param', 'wall_time_s', 'error']
  rows, exponent = [], {'relu': 1.0, 'swiglu': 2.0}
  for act, b in exponent.items():
    for d in (4, 8, 16, 32, 64, 128):
      for seed in range(3):
        loss = 3.0 * d ** -b + 0.001
        rows.append({'name': f'{act}-{d}-{seed}', 'status': 'completed', 'model.activation': act,
                     'model.d_ff': d, 'model.moe.top_k': 1, 'train.seed': seed, 'num_params': 3 * d + 1,
                     'num_active_params': 3 * d + 1, 'num_ffn_params': 3 * d + 1, 'flops_per_token': 4 * d,
                     'step': 10, 'final_loss': loss, 'eval_loss': loss, 'bits_per_param': 2.0,
                     'wall_time_s': 1.0, 'error': ''})
  rows.append({**rows[0], 'name': 'crashed', 'train.seed': 9, 'status': 'failed', 'eval_loss': '',
               'final_loss': '', 'error': 'boom'})
  write_results(tmp_path / 'results.csv', rows, columns)
  report = open(analysis.analyze(str(tmp_path))).read()
  assert '37 runs: 36 completed, 1 failed' in report
  assert '| relu | 4 | 1 | 3/4 | 13 | 13 |' in report
  fit_lines = {line.split(' | ')[1]: line for line in report.splitlines() if line.startswith('| loss_vs_d_ff')}
  for act, b in exponent.items():
    cells = fit_lines[f'activation={act}, top_k=1'].split(' | ')
    assert float(cells[4].split(' ± ')[0]) == pytest.approx(b, rel=1e-4)  # column b
    assert float(cells[3].split(' ± ')[0]) == pytest.approx(3.0, rel=1e-3)  # column a
  for name in ('loss_vs_d_ff', 'loss_vs_params', 'moe_loss_vs_total_params', 'moe_loss_vs_active_params',
               'bits_per_param'):
    assert os.path.getsize(tmp_path / 'analysis' / f'{name}.png') > 1000
    assert f'![{name}]({name}.png)' in report
  with open(tmp_path / 'analysis' / 'aggregate.csv') as f:
    agg = list(csv.DictReader(f))
  assert len(agg) == 12 and agg[0]['runs'] == '3/4' and float(agg[0]['eval_loss/std']) == 0.0


def test_no_fit_through_three_sizes():
  n = [10.0, 100.0, 1000.0] * 2
  loss = [1.0, 0.5, 0.3, 1.1, 0.45, 0.31]
  assert analysis.fit_power_law(n, loss) is None
  assert analysis.fit_power_law(n + [10000.0], loss + [0.2]) is not None
