"""Analysis: t-based CIs, seed aggregation, power-law fits and the report on synthetic results."""

import csv
import json
import math
import os

import numpy as np
import pytest

from ffn_research import analysis


@pytest.mark.parametrize('df, want', [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423)])
def test_ci_uses_t_quantiles_of_the_tables(df, want):
  """n = df + 1 values with sample std 1: the CI half-width is t_{0.975, df} / sqrt(n)."""
  x = np.random.default_rng(df).standard_normal(df + 1)
  x = (x - x.mean()) / x.std(ddof=1)
  s = analysis.mean_std_ci(x)
  assert s['ci'] * math.sqrt(df + 1) == pytest.approx(want, abs=1e-4)


def test_mean_std_ci():
  s = analysis.mean_std_ci([1.0, 2.0, 3.0, None, float('nan')])
  assert (s['n'], s['mean'], s['std']) == (3, 2.0, 1.0)
  assert s['ci'] == pytest.approx(4.3027 / math.sqrt(3), abs=1e-4)
  assert math.isnan(analysis.mean_std_ci([5.0])['ci']) and analysis.mean_std_ci([])['n'] == 0


def test_aggregate_over_seeds_skips_unfinished_runs():
  rows = [
    {'model.d_ff': d, 'train.seed': s, 'status': 'completed', 'num_params': 3 * d, 'eval_loss': d + s}
    for d in (4, 8)
    for s in range(3)
  ]
  rows.append({'model.d_ff': 8, 'train.seed': 3, 'status': 'diverged', 'num_params': 24, 'eval_loss': None})
  agg = analysis.aggregate(rows, ['model.d_ff'], ['eval_loss'])
  assert [
    (a['model.d_ff'], a['runs'], a['num_params'], a['eval_loss/mean'], a['eval_loss/std'])
    for a in agg.to_dict('records')
  ] == [(4, '3/3', 12, 5.0, 1.0), (8, '3/4', 24, 9.0, 1.0)]


N = np.array([4, 8, 16, 32, 64, 128, 256, 1024, 4096], np.float64)


@pytest.mark.parametrize('a, b, c', [(2.0, 0.5, 0.1), (30.0, 1.5, 0.0), (1.0, 2.0, 1e-3)])
def test_power_law_fit_recovers_exact_data(a, b, c):
  fit = analysis.fit_power_law(N, a * N**-b + c)
  assert (fit.a, fit.b, fit.c) == pytest.approx((a, b, c), rel=1e-5, abs=1e-7)
  assert fit.rmse_log < 1e-6 and fit.n == len(N)


def test_power_law_fit_with_noise_has_honest_errors():
  """Three seeds with 2% log-normal noise: the truth lies within 3 standard errors."""
  rng = np.random.default_rng(0)
  x = np.repeat(N, 3)
  y = (2.0 * x**-0.7 + 0.01) * np.exp(0.02 * rng.standard_normal(x.shape))
  fit = analysis.fit_power_law(x, y)
  for est, se, true in ((fit.a, fit.a_se, 2.0), (fit.b, fit.b_se, 0.7), (fit.c, fit.c_se, 0.01)):
    assert 0 < se < 0.2 * true and abs(est - true) < 3 * se
  assert analysis.fit_power_law([1, 1, 2], [1.0, 1.0, 0.5]) is None


def write_results(workdir, rows, columns, swept):
  """results.csv, and the sweep.json that names the swept keys (the analysis reads them there)."""
  with open(workdir / 'results.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
  runs = [{'name': r['name'], 'overrides': {k: r[k] for k in swept}} for r in rows]
  (workdir / 'sweep.json').write_text(json.dumps({'base_config': {}, 'runs': runs}))


def test_analyze_report_plots_and_fits(tmp_path):
  """Synthetic sweep: relu decays as d_ff^-1, swiglu as d_ff^-2; the report recovers both exponents."""
  columns = [
    'name',
    'status',
    'model.activation',
    'model.d_ff',
    'model.moe.top_k',
    'train.seed',
    'num_params',
    'num_active_params',
    'num_ffn_params',
    'flops_per_token',
    'step',
    'final_loss',
    'eval_loss',
    'bits_per_param',
    'wall_time_s',
    'error',
  ]
  rows, exponent = [], {'relu': 1.0, 'swiglu': 2.0}
  for act, b in exponent.items():
    for d in (4, 8, 16, 32, 64, 128):
      for seed in range(3):
        loss = 3.0 * d**-b + 0.001
        rows.append(
          {
            'name': f'{act}-{d}-{seed}',
            'status': 'completed',
            'model.activation': act,
            'model.d_ff': d,
            'model.moe.top_k': 1,
            'train.seed': seed,
            'num_params': 3 * d + 1,
            'num_active_params': 3 * d + 1,
            'num_ffn_params': 3 * d + 1,
            'flops_per_token': 4 * d,
            'step': 10,
            'final_loss': loss,
            'eval_loss': loss,
            'bits_per_param': 2.0,
            'wall_time_s': 1.0,
            'error': '',
          }
        )
  rows.append(
    {
      **rows[0],
      'name': 'crashed',
      'train.seed': 9,
      'status': 'failed',
      'eval_loss': '',
      'final_loss': '',
      'error': 'boom',
    }
  )
  write_results(tmp_path, rows, columns, ['model.activation', 'model.d_ff', 'model.moe.top_k', 'train.seed'])
  report = open(analysis.analyze(str(tmp_path))).read()
  assert '37 runs: 36 completed, 1 failed' in report
  assert '| relu | 4 | 1 | 3/4 | 13 | 13 |' in report
  fit_lines = {line.split(' | ')[1]: line for line in report.splitlines() if line.startswith('| loss_vs_d_ff')}
  for act, b in exponent.items():
    cells = fit_lines[f'activation={act}, top_k=1'].split(' | ')
    assert float(cells[4].split(' ± ')[0]) == pytest.approx(b, rel=1e-4)  # column b
    assert float(cells[3].split(' ± ')[0]) == pytest.approx(3.0, rel=1e-3)  # column a
  for name in (
    'loss_vs_d_ff',
    'loss_vs_params',
    'moe_loss_vs_total_params',
    'moe_loss_vs_active_params',
    'bits_per_param',
  ):
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


def test_swept_keys_from_sweep_json_and_every_numeric_metric_aggregated(tmp_path):
  """Swept keys come from sweep.json whatever the column order; metrics nobody listed are kept."""
  columns = [
    'name',
    'status',
    'train.seed',
    'model.d_ff',
    'num_params',
    'step',
    'eval_loss',
    'first_hop_accuracy',
    'brand_new_metric',
    'curve',
    'wall_time_s',
    'error',
  ]
  rows = [
    {
      'name': f'{d}-{s}',
      'status': 'completed',
      'train.seed': s,
      'model.d_ff': d,
      'num_params': 3 * d,
      'step': 10,
      'eval_loss': 1.0 / d,
      'first_hop_accuracy': 0.5 + s / 10,
      'brand_new_metric': d + s,
      'curve': '[1, 2]',
      'wall_time_s': 2.0,
      'error': '',
    }
    for d in (4, 8, 16, 32)
    for s in range(3)
  ]
  write_results(tmp_path, rows, columns, ['model.d_ff', 'train.seed'])
  results = analysis.load_results(str(tmp_path))
  assert results.shape == (12, len(columns)) and results['model.d_ff'].tolist()[:4] == [4, 4, 4, 8]
  assert analysis.swept_keys(str(tmp_path)) == ['model.d_ff']
  assert analysis.metric_columns(results, ['model.d_ff']) == [
    'eval_loss',
    'first_hop_accuracy',
    'brand_new_metric',
    'wall_time_s',
  ]
  analysis.analyze(str(tmp_path))
  with open(tmp_path / 'analysis' / 'aggregate.csv') as f:
    agg = list(csv.DictReader(f))
  assert [int(a['model.d_ff']) for a in agg] == [4, 8, 16, 32]
  assert float(agg[1]['first_hop_accuracy/mean']) == pytest.approx(0.6)
  assert float(agg[1]['brand_new_metric/std']) == pytest.approx(1.0)
  assert int(agg[0]['num_params']) == 12 and 'num_params/mean' not in agg[0]
  with pytest.raises(FileNotFoundError, match='sweep.json'):
    analysis.swept_keys(str(tmp_path / 'nowhere'))
