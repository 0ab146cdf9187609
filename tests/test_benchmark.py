"""benchmarks/benchmark.py: rows and JSON of the smoke path, the README block, the PyTorch reference."""

import json
import os
import subprocess
import sys

from flax import nnx
import jax
import numpy as np
import pytest

from benchmarks import benchmark
from ffn_research.models import moe as moe_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_tiny_dense_and_matmul_rows():
  """The JAX sides timed in this process (as a worker would), the rows built from them."""
  size = benchmark.SIZES['tiny']
  times = {g: {'jax': benchmark.worker_times(f'{g}:jax', size)} for g in ('dense', 'matmul')}
  (dense,) = benchmark.dense_rows(size, times['dense'])
  (mm,) = benchmark.matmul_rows(size, times['matmul'])
  assert (dense['id'], mm['id']) == ('dense_16x32_t64', 'matmul_64')
  assert dense['step_gflop'] == pytest.approx(12 * 64 * 16 * 32 / 1e9)
  assert dense['ours_gflops'] == pytest.approx(dense['step_gflop'] / dense['ours_ms'] * 1e3)
  assert dense['ours_of_ceiling'] == pytest.approx(dense['ours_gflops'] / dense['ceiling_gflops'])
  assert mm['ours_gflops'] == pytest.approx(2 * 64**3 / mm['ours_ms'] / 1e6)
  assert dense['torch'] == mm['torch'] == benchmark.NO_TORCH  # no torch side given
  with_torch = benchmark.dense_rows(size, {**times['dense'], 'torch': {'16x32_t64': 2 * dense['ours_ms']}})[0]
  assert with_torch['torch_over_ours'] == pytest.approx(2.0) and 'torch' not in with_torch
  m = benchmark.machine_info()
  assert m['cpu_count'] == os.cpu_count() and m['jax'] == jax.__version__ and len(m['load_average_start']) == 3


def test_the_orchestrating_process_never_imports_torch():
  """JAX rows timed in the main process (xla_options, memorization) run without PyTorch loaded."""
  code = (
    'import sys; from benchmarks import benchmark; m = benchmark.machine_info(); '
    'print(m["torch"] == (benchmark.torch_version() or "not installed"), "torch" in sys.modules)'
  )
  proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
  assert proc.stdout.split() == ['True', 'False']


def test_side_by_side_alternates_sides_and_takes_medians(monkeypatch):
  calls = []

  def fake_worker(spec, size_name, extra=()):
    calls.append(spec)
    return {'x': {'g:a': 1.0, 'g:b': 3.0}[spec] * len(calls)}

  monkeypatch.setattr(benchmark, 'run_worker', fake_worker)
  out = benchmark.side_by_side('g', ('a', 'b'), 'tiny', 3)
  assert calls == ['g:a', 'g:b', 'g:b', 'g:a', 'g:a', 'g:b']  # the order alternates between rounds
  assert out['rounds'] == {'a': {'x': [1.0, 4.0, 5.0]}, 'b': {'x': [6.0, 9.0, 18.0]}}
  assert out['a'] == {'x': 4.0} and out['b'] == {'x': 9.0}


def test_worker_failure_is_one_clear_error():
  with pytest.raises(RuntimeError, match='benchmark worker nope:jax failed'):
    benchmark.run_worker('nope:jax', 'tiny')


def test_readme_block_is_replaced_between_markers(tmp_path):
  doc = {
    'suite': 'cpu',
    'size': 'tiny',
    'command': 'python -m benchmarks.benchmark --tiny',
    'machine': {
      'cpu': 'Test CPU',
      'cpu_count': 2,
      'devices': '1 x cpu',
      'backend': 'cpu',
      'jax': '0',
      'torch': 'not installed',
      'python': '3',
      'xla_flags': '',
      'date_utc': '2026-11-22 06:00',
      'load_average_start': [1, 2, 3],
      'load_average_end': [3, 2, 1],
      'peak_rss_mb': 10.0,
    },
    'rows': [benchmark.row('dense_1', 'dense FFN 1/2, 3 tokens', 12.5, torch_ms=25.0, torch_over_ours=2.0)],
  }
  doc['rows'].append(benchmark.row('matmul_2048', 'one matmul', 3.0))
  readme, page = tmp_path / 'README.md', tmp_path / 'performance.md'
  readme.write_text(f'a\n{benchmark.README_BEGIN}\nold\n{benchmark.README_END}\nb\n')
  page.write_text(f'# P\n{benchmark.README_BEGIN}\n{benchmark.README_END}\n')
  benchmark.write_readme(doc, str(readme), str(page))
  text, full = readme.read_text(), page.read_text()
  assert text.startswith('a\n<!-- performance:begin -->') and text.endswith('<!-- performance:end -->\nb\n')
  assert full.startswith('# P\n<!-- performance:begin -->') and full.endswith('<!-- performance:end -->\n')
  for t in (text, full):
    assert 'old' not in t and 'Test CPU, 2 cores' in t and '2026-11-22 06:00 UTC' in t
    assert '| one matmul | 3.00 ms |  |  |' in t
  dense = '| dense FFN 1/2, 3 tokens | 12.5 ms | PyTorch eager 25.0 ms | ours 2.00x faster than PyTorch |'
  assert dense in full and dense not in text  # the README shows the HEADLINE_IDS rows only
  assert '[docs/performance.md](docs/performance.md)' in text and 'docs/performance.md)' not in full
  gpu_begin, gpu_end = benchmark.MARKERS['gpu']
  readme.write_text(f'{text}{gpu_begin}\nold\n{gpu_end}\n')  # a GPU document fills its own block only
  gpu_doc = {**doc, 'suite': 'gpu', 'rows': [benchmark.row('sweep_quickstart_64', 'a GPU sweep', 7.0)]}
  benchmark.write_readme(gpu_doc, str(readme))
  cpu_part, gpu_part = readme.read_text().split(gpu_begin)
  assert cpu_part == text and '| a GPU sweep | 7.00 ms |' in gpu_part and 'old' not in gpu_part
  assert 'benchmark --suite=gpu --write_readme' in gpu_part
  readme.write_text('no markers\n')
  with pytest.raises(ValueError, match='performance:begin'):
    benchmark.write_readme(doc, str(readme))
  with pytest.raises(ValueError, match='performance-gpu:begin'):
    benchmark.write_readme(gpu_doc, str(readme))


def test_a_command_recorded_before_the_move_shows_under_benchmarks():
  """Published JSON keeps `python -m experiments.benchmark ...` as run; the block names today's module, same flags."""
  old = 'python -m experiments.benchmark --quick --out=runs/b.json'
  assert benchmark.current_command(old) == 'python -m benchmarks.benchmark --quick --out=runs/b.json'
  assert benchmark.current_command('python -m benchmarks.benchmark --tiny') == 'python -m benchmarks.benchmark --tiny'
  assert benchmark.current_command('python -m experiments.benchmark_sweep') == 'python -m experiments.benchmark_sweep'
  doc = json.load(open(os.path.join(ROOT, 'docs', 'results', 'benchmark', 'cpu_quick.json'), encoding='utf-8'))
  assert doc['command'].startswith('python -m experiments.benchmark ')
  assert 'Generated by `python -m benchmarks.benchmark --quick ' in benchmark.readme_block(doc)


@pytest.mark.parametrize('cf', [1.0, 0.0])  # with drops; dropless (windows + blocks)
def test_torch_loop_moe_computes_our_moe(cf):
  """The PyTorch reference is the same function: same weights, same outputs and aux loss."""
  torch = pytest.importorskip('torch')
  from benchmarks import bench_torch

  t, d, f, e, k = 64, 8, 16, 4, 2
  ours = moe_lib.MoE(d, f, 'relu', num_experts=e, top_k=k, capacity_factor=cf, dispatch='sort', rngs=nnx.Rngs(1))
  w = ours.expert_weights()
  w['b1'], w['b2'] = w['b1'] + 0.1, w['b2'] - 0.1  # nonzero biases
  ours.b1[...], ours.b2[...] = w['b1'], w['b2']
  ref = bench_torch.LoopMoE(d, f, e, k, cf)
  with torch.no_grad():
    ref.router.copy_(torch.tensor(np.asarray(ours.router_w[...])))
    for name in ('w1', 'b1', 'w2', 'b2'):
      getattr(ref, name).copy_(torch.tensor(np.asarray(w[name])))
  x = np.random.default_rng(0).standard_normal((t, d)).astype(np.float32) * 2
  # training mode (an rng), as the benchmark's train step: evaluation with batch-wide capacity is dropless
  y, aux = nnx.jit(lambda m, x: m.apply(x, rng=jax.random.key(0)))(ours, x)
  y_ref, aux_ref = ref(torch.tensor(x))
  np.testing.assert_allclose(y, y_ref.detach().numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(aux['load_balance_loss'] + aux['z_loss'], aux_ref.item(), rtol=1e-5)
  if cf == 1.0:
    assert float(aux['dropped_fraction']) > 0  # the capacity case really drops


@pytest.mark.skipif(jax.default_backend() == 'gpu', reason='a GPU is present: the suite runs instead')
def test_gpu_suite_says_no_gpu_on_cpu():
  proc = subprocess.run(
    [sys.executable, '-m', 'benchmarks.benchmark', '--suite=gpu', '--out='],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=False,
    timeout=120,
  )
  assert proc.returncode == 1 and proc.stderr.strip().startswith('no GPU: --suite=gpu needs a GPU')
  assert 'Traceback' not in proc.stderr


@pytest.mark.slow
def test_tiny_cli_writes_every_row_and_the_readme(tmp_path):
  """Every CPU row group through the real entry point (tiny shapes), then --from_json."""
  out, readme = tmp_path / 'b.json', tmp_path / 'README.md'
  readme.write_text(f'{benchmark.README_BEGIN}\n{benchmark.README_END}\n')
  cmd = [sys.executable, '-m', 'benchmarks.benchmark', '--tiny', f'--out={out}']
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, timeout=900)
  assert proc.returncode == 0, proc.stderr[-2000:]
  doc = json.loads(out.read_text())
  ids = [r['id'] for r in doc['rows']]
  torch_rows = ['experiment_moe_gelu_torch_between'] if benchmark.torch_version() else ['experiment_torch_between']
  assert ids == [
    'dense_16x32_t64',
    'moe_dense_matched',
    'moe_sort_cf1',
    'moe_sort_cf1.25',
    'moe_sort_dropless',
    'matmul_64',
    'experiment_dense_gelu',
    'experiment_moe_gelu',
    'experiment_language',
    *torch_rows,
    'xla_ynn_off_eigen_dots_16x32_t64',
    'xla_ynn_eltwise_only_16x32_t64',
    'xla_fast_math_16x32_t64',
    'memorization_ffn_stack',
    'quickstart_cold',
    'quickstart_warm',
  ]
  rows = {r['id']: r for r in doc['rows']}
  for i in ids[2:5]:
    assert rows[i]['over_dense'] == pytest.approx(rows[i]['ours_ms'] / rows['moe_dense_matched']['ours_ms'])
  assert rows['experiment_moe_gelu']['over_dense'] == pytest.approx(
    rows['experiment_moe_gelu']['ours_ms'] / rows['experiment_dense_gelu']['ours_ms']
  )
  assert doc['rounds'] == 1 and set(doc['round_ms']) == {'dense', 'moe', 'matmul', 'experiment'}
  assert rows['memorization_ffn_stack']['steps_per_s'] > 0
  assert rows['memorization_ffn_stack']['compile_s'] > 0
  assert rows['quickstart_cold']['peak_rss_mb'] > 0
  assert all(r['workload'] in proc.stdout for r in doc['rows'])
  page = tmp_path / 'performance.md'
  page.write_text(readme.read_text())
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'benchmarks.benchmark',
      f'--from_json={out}',
      '--write_readme',
      f'--readme={readme}',
      f'--performance_page={page}',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=False,
    timeout=120,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert rows['moe_sort_dropless']['workload'] in page.read_text()
  assert rows['moe_sort_cf1']['workload'] in readme.read_text()
  bad = subprocess.run(
    [sys.executable, '-m', 'benchmarks.benchmark', f'--from_json={readme}'],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=False,
    timeout=120,
  )
  assert bad.returncode == 1 and bad.stderr.startswith('error: --from_json=') and 'Traceback' not in bad.stderr


# --------------------------------------------------------------------------- sweeps against PyTorch


def test_torch_sweep_schedule_is_the_projects():
  """The PyTorch reference's learning rate at every step is optax's (count 0 first: rate 0)."""
  from benchmarks import bench_torch_sweep  # loads without torch too
  from ffn_research import optim
  from ffn_research.config import default_config

  tr = default_config().train
  tr.steps, tr.warmup_steps = 300, 40
  unit = optim.SCHEDULES['cosine'](tr)
  ours = np.asarray([unit(i) for i in range(tr.steps)])
  np.testing.assert_allclose([bench_torch_sweep.unit_schedule(i, 300, 40) for i in range(300)], ours, atol=1e-6)
  assert ours[0] == 0 and bench_torch_sweep.unit_schedule(0, 300, 40) == 0


@pytest.mark.parametrize('activation', ['relu', 'swiglu'])
def test_torch_func_ensemble_trains_each_run_as_its_own_adam(activation):
  """One Adam over stacked parameters (loss: sum of each model's mean loss, each model clipped by its own
  norm) ends where each run's own nn.Module + torch.optim.Adam ends, fed the same batches."""
  torch = pytest.importorskip('torch')
  from benchmarks import bench_torch_sweep

  spec = {
    'task': {'function': 'x_squared', 'num_train': 64, 'num_eval': 128, 'grid_size': 33},
    'train': {
      'steps': 60,
      'batch_size': 16,
      'learning_rate': 3e-2,
      'warmup_steps': 10,
      'grad_clip': 0.1,
      'log_every': 25,
    },
  }
  runs = [{'name': f'seed={s}', 'd_ff': 8, 'activation': activation, 'seed': s} for s in range(3)]
  idx = torch.randint(0, 64, (60, 3, 16), generator=torch.Generator().manual_seed(5))
  outs, state = bench_torch_sweep.train_func_group(runs, spec, indices=lambda i: idx[i])
  for m, run in enumerate(runs):
    alone, own = bench_torch_sweep.train_loop_run(run, spec, indices=lambda i, m=m: idx[i, m])
    for k, v in own['model'].items():
      np.testing.assert_allclose(state['params'][k][m].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)
    for k in ('eval_loss', 'train_mse', 'sup_error', 'final_loss'):
      assert outs[m][k] == pytest.approx(alone[k], rel=1e-5)
    assert len(alone['losses']) == len(outs[m]['losses']) == 3  # 25, 50 and the last 10 steps
  assert bench_torch_sweep.shapes(runs + [{**runs[0], 'd_ff': 4}]) == [runs, [{**runs[0], 'd_ff': 4}]]


def test_frameworks_mode_bad_flags_are_one_line():
  """Bad flags and sweeps the PyTorch reference cannot train fail in one line, before any timing."""
  for args, msg in (
    (['--sides=ours,nope'], 'error: --sides=ours,nope: allowed ours, loop, func'),
    (['--rounds=0'], 'error: --rounds=0 must be a positive integer'),
    (
      ['--overrides=train.optimizer=sgd', '--sides=loop'],
      "error: the PyTorch reference trains train.optimizer='adam' only, this sweep has 'sgd'",
    ),
  ):
    if 'loop' in args[-1] and not benchmark.torch_version():
      msg = 'error: torch not installed'
    proc = subprocess.run(
      [sys.executable, '-m', 'benchmarks.benchmark_sweep', '--mode=frameworks', '--out=', *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
      check=False,
      timeout=300,
    )
    assert proc.returncode == 1 and proc.stderr.startswith(msg), proc.stderr[-1000:]
    assert 'Traceback' not in proc.stderr


@pytest.mark.slow  # four processes per round (~30 s)
def test_frameworks_mode_tiny_end_to_end(tmp_path):
  """--mode=frameworks through the real entry point at a tiny size: every side, ratios, runs/hour, JSON."""
  if not benchmark.torch_version():
    pytest.skip('torch not installed (pip install -e .[bench]): no PyTorch sides to time')
  out = tmp_path / 'f.json'
  cmd = [
    sys.executable,
    '-m',
    'benchmarks.benchmark_sweep',
    '--mode=frameworks',
    '--workload=seeds64',
    '--num_runs=2',
    '--overrides=train.steps=40,train.log_every=20',
    '--rounds=1',
    f'--out={out}',
  ]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  doc = json.loads(out.read_text())
  assert doc['sweep'] == 'configs/sweeps/seeds.py:2' and doc['num_runs'] == 2
  assert doc['sides'] == ['ours', 'ours_warm', 'loop', 'func']
  for side in doc['sides']:
    assert len(doc['seconds'][side]) == 1 and doc['median_s'][side] > 0
    assert doc['runs_per_hour'][side] == pytest.approx(3600 * 2 / doc['median_s'][side])
    assert set(doc['eval_loss'][side]) == {'seed=0', 'seed=1'}
  assert doc['ratios']['loop_over_ours'] == pytest.approx(doc['median_s']['loop'] / doc['median_s']['ours'])
  losses = doc['median_eval_loss']
  assert max(losses.values()) < 2 * min(losses.values())  # the same runs, trained alike
  assert losses['ours'] == pytest.approx(losses['ours_warm'], rel=1e-6)  # the cache changes no number
  assert len(doc['machine']['load_average_end']) == 3 and doc['machine']['torch'] == benchmark.torch_version()
  assert 'PyTorch torch.func ensembles' in proc.stdout and 'targets (cold)' in proc.stdout
  assert doc['ours_without_torch'] and doc['torch_threads'] == 1


@pytest.mark.slow  # two sweep processes (~30 s)
def test_scaling_mode_tiny_end_to_end(tmp_path):
  """--mode=scaling through the real entry point at a tiny size, under an open-file limit: the table and JSON."""
  out = tmp_path / 's.json'
  cmd = [
    sys.executable,
    '-m',
    'benchmarks.benchmark_sweep',
    '--mode=scaling',
    '--scale_runs=2,40',
    '--scale_steps=10',
    '--overrides=train.log_every=5,task.num_train=64,task.num_eval=64',
    '--ulimit_n=64',
    f'--out={out}',
  ]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  doc = json.loads(out.read_text())
  assert [(r['runs'], r['steps']) for r in doc['rows']] == [(2, 10), (40, 10)]
  for r in doc['rows']:
    assert 0 < r['train_share'] < 1 and r['compile_s'] > 0 and r['rss_bytes'] > 0
    assert 0 < r['open_files'] <= 64 and r['threads'] > 0
    assert r['runs_per_hour'] == pytest.approx(3600 * r['runs'] / r['wall_s'])
    assert r['overhead_ms_per_run'] == pytest.approx(1000 * (r['wall_s'] - r['compile_s'] - r['train_s']) / r['runs'])
  assert 'groups of at most' in doc['rows'][1]['split']  # 40 runs do not fit 64 open files at once
  assert 'overhead ms/run' in proc.stdout and 'runs/hour' in proc.stdout
