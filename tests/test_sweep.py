"""Sweeps: grid helpers, naming, grouping, shards, vmapped groups vs single runs, resume."""

import csv
import json
import os
import subprocess
import sys

from flax import nnx
import jax
import numpy as np
import pytest

import ffn_research
from ffn_research import config as config_lib
from ffn_research import configfile
from ffn_research import identity
from ffn_research import io as io_lib
from ffn_research import loop
from ffn_research import models
from ffn_research import sweep
from ffn_research import tasks
from ffn_research import train
from ffn_research import validation

# A vmapped group is the same computation as a single run, but XLA fuses the batched
# program differently, so float32 reductions round differently: results agree to
# float32 rounding, not bit for bit (measured: max |param difference| 1.2e-7 after
# 20 steps). Tolerance for metrics after TINY's 20 steps:
RTOL, ATOL = 1e-4, 1e-7
TIMING_KEYS = {
  'wall_time_s',
  'compile_time_s',
  'checkpoint_time_s',
  'steps_per_s',
  'sweep_group_size',
  'sweep_padded_d_ff',
}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_config():
  c = config_lib.default_config()
  c.model.d_ff = 8
  c.task.num_train, c.task.num_eval, c.task.grid_size = 64, 64, 65
  c.train.steps, c.train.log_every, c.train.batch_size = 20, 10, 16
  c.train.warmup_steps, c.train.checkpoint_every = 5, 0
  return c


def read_jsonl(path):
  with open(path) as f:
    return [json.loads(line) for line in f]


def read_csv(path):
  with open(path) as f:
    rows = list(csv.DictReader(f))
  with open(path) as f:
    header = next(csv.reader(f))
  return header, rows


def assert_close_metrics(got: dict, want: dict):
  assert set(got) - TIMING_KEYS == set(want) - TIMING_KEYS
  for k in set(want) - TIMING_KEYS:
    if isinstance(want[k], float):
      np.testing.assert_allclose(got[k], want[k], rtol=RTOL, atol=ATOL, err_msg=k)
    else:
      assert got[k] == want[k], k


# --------------------------------------------------------------------------- defining sweeps


def test_product_zip_chain():
  grid = sweep.product(sweep.values('model.d_ff', [4, 8]), sweep.values('train.seed', [0, 1, 2]))
  assert grid == [{'model.d_ff': d, 'train.seed': s} for d in (4, 8) for s in (0, 1, 2)]
  zipped = sweep.zip_(sweep.values('model.d_ff', [4, 8]), sweep.values('train.learning_rate', [0.1, 0.2]))
  assert zipped == [{'model.d_ff': 4, 'train.learning_rate': 0.1}, {'model.d_ff': 8, 'train.learning_rate': 0.2}]
  assert sweep.chain(zipped, [{'model.d_ff': 2}]) == zipped + [{'model.d_ff': 2}]
  assert len(sweep.product(grid, sweep.values('model.activation', ['relu', 'gelu']))) == 12
  with pytest.raises(ValueError, match='equally long'):
    sweep.zip_(sweep.values('a.b', [1]), sweep.values('a.c', [1, 2]))
  with pytest.raises(ValueError, match="'model.d_ff' twice"):
    sweep.product(sweep.values('model.d_ff', [4]), sweep.values('model.d_ff', [8]))


def test_apply_overrides():
  base = tiny_config()
  c = sweep.apply_overrides(base, {'model.d_ff': 32, 'train.learning_rate': 0.1})
  assert (c.model.d_ff, c.train.learning_rate, base.model.d_ff) == (32, 0.1, 8)
  with pytest.raises(config_lib.ConfigError, match="'model.dff' is not a config key"):
    sweep.apply_overrides(base, {'model.dff': 32})
  with pytest.raises(config_lib.ConfigError, match="no config section 'modle'"):
    sweep.apply_overrides(base, {'modle.d_ff': 32})
  with pytest.raises(config_lib.ConfigError, match='model.d_ff=2.5'):
    sweep.apply_overrides(base, {'model.d_ff': 2.5})


def test_run_name_stable_and_safe():
  a = sweep.run_name({'train.seed': 0, 'model.d_ff': 64, 'model.activation': 'relu'})
  b = sweep.run_name({'model.activation': 'relu', 'model.d_ff': 64, 'train.seed': 0})
  assert a == b == 'activation=relu,d_ff=64,seed=0'
  assert sweep.run_name({'train.learning_rate': 3e-05}) == 'learning_rate=3e-05'
  assert sweep.run_name({'task.name': 'a/b c'}) == 'name=a_b_c'
  assert sweep.run_name({'model.x.top_k': 1, 'model.y.top_k': 2}) == 'model.x.top_k=1,model.y.top_k=2'
  assert sweep.run_name({}) == 'base'
  long = sweep.run_name({'task.function': 'x' * 300})
  assert len(long) == 120 and long != sweep.run_name({'task.function': 'x' * 299})
  with pytest.raises(ValueError, match='both named'):
    sweep.expand(tiny_config(), [{'task.function': 'sin'}, {'task.function': 'sin'}])


def test_expand_copies_the_base_as_apply_overrides_does():
  """expand copies one normalised base per run: each run's config equals apply_overrides' key for key, in the same
  key order (config.json, program keys), and the caller's base is left as it was."""
  base = tiny_config()
  before = base.to_json()
  grid = sweep.product(sweep.values('model.d_ff', [4, 8]), sweep.values('train.learning_rate', [0.1, 0.2]))
  runs = sweep.expand(base, grid)
  assert [r.config.to_json() for r in runs] == [sweep.apply_overrides(base, o).to_json() for o in grid]
  assert runs[0].config is not runs[1].config and runs[0].config.model is not runs[1].config.model
  assert base.to_json() == before and [r.program for r in runs[:2]] == [sweep.group_key(r.config) for r in runs[:2]]


def test_expand_validates_before_running():
  with pytest.raises(config_lib.ConfigError, match='model.activation'):
    sweep.expand(tiny_config(), sweep.values('model.activation', ['relu', 'nope']))


def test_expand_validates_runs_differing_only_in_seed_once_and_every_seed(monkeypatch):
  calls = []
  real = validation.validate
  monkeypatch.setattr(validation, 'validate', lambda config: calls.append(config.train.seed) or real(config))
  grid = sweep.product(sweep.values('train.learning_rate', [0.1, 0.2]), sweep.values('train.seed', [0, 1, 2]))
  assert len(sweep.expand(tiny_config(), grid)) == 6 and calls == [0, 0]  # once per rate
  for bad in (2**31, -(2**31) - 1):  # (a float or a bool is refused by the override itself)
    with pytest.raises(config_lib.ConfigError, match=rf'train.seed={bad!r} must be an integer'):
      sweep.expand(tiny_config(), sweep.values('train.seed', [0, bad]))


def test_group_runs_only_merges_vmapped_keys():
  assert identity.PER_RUN_KEYS[:3] == ('train.seed', 'train.learning_rate', 'train.weight_decay')  # and more:
  # tests/test_traced_scalars.py
  grid = sweep.product(
    sweep.values('model.d_ff', [4, 8]),
    sweep.values('train.learning_rate', [0.1, 0.2]),
    sweep.values('train.seed', [0, 1]),
  )
  groups = sweep.group_runs(sweep.expand(tiny_config(), grid), pad_flops_factor=1.0)  # no d_ff padding
  assert [[r.overrides['model.d_ff'] for r in g] for g in groups] == [[4] * 4, [8] * 4]
  assert len(sweep.group_runs(sweep.expand(tiny_config(), grid))) == 1  # padded (tests/test_padding.py)


@pytest.mark.parametrize('num_runs', [1, 7, 23])
def test_shards_partition_runs(num_runs):
  grid = sweep.product(sweep.values('task.num_train', list(range(1, num_runs + 1))))
  runs = sweep.expand(tiny_config(), grid)
  names = [r.name for r in runs]
  for num_shards in range(1, 9):
    shards = [[r.name for r in sweep.select_shard(runs, num_shards, i)] for i in range(num_shards)]
    flat = [n for s in shards for n in s]
    assert sorted(flat) == sorted(names) and len(set(flat)) == len(names)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert shards == [[r.name for r in sweep.select_shard(runs, num_shards, i)] for i in range(num_shards)]
  with pytest.raises(ValueError):
    sweep.select_shard(runs, 2, 2)


def test_shard_from_env():
  assert sweep.shard_from_env({}) == (1, 0)
  env = {'SLURM_ARRAY_TASK_COUNT': '4', 'SLURM_ARRAY_TASK_ID': '3', 'SLURM_ARRAY_TASK_MIN': '1'}
  assert sweep.shard_from_env(env) == (4, 2)


# --------------------------------------------------------------------------- running

GROUP = sweep.chain(sweep.values('train.seed', [0, 1]), [{'train.seed': 2, 'train.learning_rate': 0.05}])


@pytest.fixture(scope='module')
def group_sweep(tmp_path_factory):
  """One vmapped group of three runs (two learning rates) plus two of them trained alone."""
  workdir = str(tmp_path_factory.mktemp('sweep'))
  summaries = sweep.run_sweep(tiny_config(), GROUP, workdir, progress=False)
  alone = {}
  for overrides in GROUP[1:]:  # the second seed and the second learning rate
    run_dir = str(tmp_path_factory.mktemp('alone'))
    loop.train_and_evaluate(sweep.apply_overrides(tiny_config(), overrides), run_dir)
    alone[sweep.run_name(overrides)] = run_dir
  return workdir, summaries, alone


def test_vmapped_group_equals_separate_runs(group_sweep):
  workdir, summaries, alone = group_sweep
  assert len(summaries) == 3 and {s['sweep_group_size'] for s in summaries.values()} == {3}
  for name, alone_dir in alone.items():
    run_dir = os.path.join(workdir, 'runs', name)
    for fname in ('config.json',):
      assert json.load(open(os.path.join(run_dir, fname))) == json.load(open(os.path.join(alone_dir, fname)))
    assert_close_metrics(summaries[name], json.load(open(os.path.join(alone_dir, 'summary.json'))))
    got, want = read_jsonl(os.path.join(run_dir, 'metrics.jsonl')), read_jsonl(os.path.join(alone_dir, 'metrics.jsonl'))
    assert [m['step'] for m in got] == [m['step'] for m in want] == [10, 20]
    for g, w in zip(got, want, strict=True):
      assert_close_metrics(g, w)
  # The two learning rates really were used: the lr-0.05 run logs a 0.05-peaked schedule.
  lr_fast = read_jsonl(os.path.join(workdir, 'runs', 'learning_rate=0.05,seed=2', 'metrics.jsonl'))
  lr_slow = read_jsonl(os.path.join(workdir, 'runs', 'seed=0', 'metrics.jsonl'))
  np.testing.assert_allclose(lr_fast[0]['learning_rate'] / lr_slow[0]['learning_rate'], 0.05 / 3e-3, rtol=1e-5)


def test_weight_decay_is_vmapped_and_equals_a_lone_run(tmp_path):
  """Runs differing only in train.weight_decay share one program; each equals its lone run."""
  base = tiny_config()
  base.train.optimizer = 'adamw'
  grid = sweep.values('train.weight_decay', [0.0, 0.5])
  assert len(sweep.group_runs(sweep.expand(base, grid))) == 1
  summaries = sweep.run_sweep(base, grid, str(tmp_path / 'sweep'), progress=False)
  assert {s['sweep_group_size'] for s in summaries.values()} == {2}
  alone = loop.train_and_evaluate(sweep.apply_overrides(base, grid[1]), str(tmp_path / 'alone'))
  assert_close_metrics(summaries['weight_decay=0.5'], alone)
  got = read_jsonl(str(tmp_path / 'sweep' / 'runs' / 'weight_decay=0.5' / 'metrics.jsonl'))
  for g, w in zip(got, read_jsonl(str(tmp_path / 'alone' / 'metrics.jsonl')), strict=True):
    assert_close_metrics(g, w)
  # The decay really differed per run: it shrank the weights of the decayed run only.
  undecayed = read_jsonl(str(tmp_path / 'sweep' / 'runs' / 'weight_decay=0.0' / 'metrics.jsonl'))
  assert got[-1]['param_norm'] < undecayed[-1]['param_norm']


def test_results_csv_schema(group_sweep):
  workdir, summaries, _ = group_sweep
  header, rows = read_csv(os.path.join(workdir, 'results.csv'))
  assert header[:5] == ['name', 'status', 'train.seed', 'train.learning_rate', 'num_params']
  for col in (
    'num_active_params',
    'num_ffn_params',
    'flops_per_token',
    'final_loss',
    'eval_loss',
    'sup_error',
    'wall_time_s',
    'compile_time_s',
    'diverged_step',
    'error',
  ):
    assert col in header
  assert [r['name'] for r in rows] == [sweep.run_name(o) for o in GROUP]
  counts = models.model_counts(tiny_config(), tasks.build_task(tiny_config()))
  for row, overrides in zip(rows, GROUP, strict=True):
    assert row['status'] == 'completed'
    assert int(row['train.seed']) == overrides['train.seed']
    assert float(row['train.learning_rate']) == overrides.get('train.learning_rate', 3e-3)
    assert int(row['num_params']) == counts['num_params'] == 8 * 3 + 1
    assert float(row['eval_loss']) == summaries[row['name']]['eval_loss']


def test_divergence_is_per_run(tmp_path):
  """A run whose loss blows up is 'diverged' at the step a lone run reports; its group-mate is unharmed."""
  base = tiny_config()
  base.train.optimizer, base.train.grad_clip, base.train.warmup_steps = 'sgd', 0.0, 0
  base.train.steps, base.train.log_every = 30, 5
  grid = sweep.values('train.learning_rate', [1e-2, 1e4])
  summaries = sweep.run_sweep(base, grid, str(tmp_path / 'sweep'), progress=False)
  ok, bad = summaries['learning_rate=0.01'], summaries['learning_rate=10000.0']
  alone = loop.train_and_evaluate(sweep.apply_overrides(base, grid[1]), str(tmp_path / 'alone'))
  assert alone['status'] == bad['status'] == 'diverged'
  assert bad['diverged_step'] == alone['diverged_step'] and bad['step'] == alone['step']
  assert ok['status'] == 'completed' and ok['step'] == 30 and np.isfinite(ok['eval_loss'])
  bad_lines = read_jsonl(str(tmp_path / 'sweep' / 'runs' / 'learning_rate=10000.0' / 'metrics.jsonl'))
  assert [m['step'] for m in bad_lines] == [m['step'] for m in read_jsonl(str(tmp_path / 'alone' / 'metrics.jsonl'))]


def test_failed_group_recorded_then_retried(tmp_path, monkeypatch):
  grid = sweep.values('model.d_ff', [4, 8])
  workdir = str(tmp_path)
  real_init = train.Experiment.__init__

  def broken_init(self, config):
    if config.model.d_ff == 4:
      raise RuntimeError('boom\nsecond line')
    real_init(self, config)

  monkeypatch.setattr(train.Experiment, '__init__', broken_init)
  first = sweep.run_sweep(tiny_config(), grid, workdir, progress=False, pad_flops_factor=1.0)  # two groups
  assert first['d_ff=4'] == {'status': 'failed', 'error': 'RuntimeError: boom'}
  assert first['d_ff=8']['status'] == 'completed'
  _, rows = read_csv(os.path.join(workdir, 'results.csv'))
  assert [(r['name'], r['status'], r['error']) for r in rows] == [
    ('d_ff=4', 'failed', 'RuntimeError: boom'),
    ('d_ff=8', 'completed', ''),
  ]
  monkeypatch.setattr(train.Experiment, '__init__', real_init)
  second = sweep.run_sweep(tiny_config(), grid, workdir, progress=False, pad_flops_factor=1.0)
  assert second['d_ff=4']['status'] == 'completed'
  assert second['d_ff=8'] == first['d_ff=8']  # finished runs are skipped, not retrained


def test_failed_group_records_only_the_runs_it_holds(tmp_path, monkeypatch):
  """A crash is recorded in the runs the group trained (loop.Lifecycle), not in a group-mate another
  process holds: its folder is that process's."""
  busy = tmp_path / 'runs' / 'seed=1'
  busy.mkdir(parents=True)

  def broken(*args, **kwargs):
    raise RuntimeError('boom')

  monkeypatch.setattr(loop, 'train_group', broken)
  with io_lib.Lock(str(busy)):
    out = sweep.run_sweep(tiny_config(), sweep.values('train.seed', [0, 1]), str(tmp_path), progress=False)
  assert out == {'seed=0': {'status': 'failed', 'error': 'RuntimeError: boom'}, 'seed=1': None}


def test_resume_after_kill(tmp_path, group_sweep):
  """Shard 0 finishes, one of its runs is then 'killed' mid-way; a rerun completes each run exactly once."""
  ref_dir, ref, _ = group_sweep
  workdir = str(tmp_path)
  part = sweep.run_sweep(tiny_config(), GROUP, workdir, num_shards=2, shard_index=0, progress=False)
  assert sorted(part) == ['seed=0']  # contiguous blocks of the one group: 3 * 0 // 2 .. 3 // 2
  _, rows = read_csv(os.path.join(workdir, 'results.csv'))
  assert [r['status'] for r in rows] == ['completed', 'pending', 'pending']
  part = sweep.run_sweep(tiny_config(), GROUP, workdir, num_shards=2, shard_index=1, progress=False)
  killed = os.path.join(workdir, 'runs', 'seed=1')
  os.remove(os.path.join(killed, 'summary.json'))
  with open(os.path.join(killed, 'metrics.jsonl')) as f:
    first_line = f.readline()
  with open(os.path.join(killed, 'metrics.jsonl'), 'w') as f:
    f.write(first_line + first_line[:20])  # a kill cut the second line
  keep = json.load(open(os.path.join(workdir, 'runs', 'seed=0', 'summary.json')))

  final = sweep.run_sweep(tiny_config(), GROUP, workdir, progress=False)
  assert final['seed=0'] == keep and final['seed=1']['sweep_group_size'] == 1
  _, rows = read_csv(os.path.join(workdir, 'results.csv'))
  assert sorted(r['name'] for r in rows) == sorted(ref) and all(r['status'] == 'completed' for r in rows)
  assert [m['step'] for m in read_jsonl(os.path.join(killed, 'metrics.jsonl'))] == [10, 20]
  for name in ref:
    assert_close_metrics(final[name], ref[name])


@pytest.mark.slow  # a subprocess with its own JAX start-up and compiles (~10 s)
def test_sharded_over_four_devices(tmp_path, group_sweep):
  """The run axis sharded over 4 (forced host) devices, 3 runs padded to 4: same results as one device."""
  script = f"""
import jax, json, sys
sys.path.insert(0, {REPO!r})
from tests.test_sweep import tiny_config, GROUP
from ffn_research import programs, sweep, train
assert len(jax.local_devices()) == 4
runs = sweep.expand(tiny_config(), GROUP)
progs = programs.GroupPrograms(train.Experiment(runs[0].config), 3, jax.local_devices())
assert progs.padded == 4 and len(progs.pad(__import__('numpy').arange(3)).sharding.device_set) == 4
out = sweep.run_sweep(tiny_config(), GROUP, {str(tmp_path)!r}, progress=False)
print(json.dumps(out))
"""
  env = {**os.environ, 'XLA_FLAGS': '--xla_force_host_platform_device_count=4', 'JAX_PLATFORMS': 'cpu'}
  proc = subprocess.run([sys.executable, '-c', script], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert set(out) == {sweep.run_name(o) for o in GROUP}
  for name, summary in out.items():
    assert_close_metrics(summary, group_sweep[1][name])


# --------------------------------------------------------------------------- shipped sweeps


def test_capacity_dense_quick_expands():
  base, grid = configfile.load_sweep_file(os.path.join(REPO, 'configs/sweeps/capacity_dense.py:quick'))
  runs = sweep.expand(base, grid)
  assert len(runs) == 16 and len(sweep.group_runs(runs, 1.0)) == 8  # seeds share a program
  assert len(sweep.group_runs(runs)) == 2  # and d_ff 4..256 are padded into one per activation
  assert runs[0].name == 'activation=relu,d_ff=4,seed=0'


def test_capacity_dense_memorization_expands():
  base, grid = configfile.load_sweep_file(os.path.join(REPO, 'configs/sweeps/capacity_dense.py:memorization_quick'))
  assert len(sweep.expand(base, grid)) == 8


def test_seeds_sweep_expands():
  """configs/sweeps/seeds.py: N seeds of the quickstart config, one program; 64 by default."""
  base, grid = configfile.load_sweep_file(os.path.join(REPO, 'configs/sweeps/seeds.py:3'))
  runs = sweep.expand(base, grid)
  quickstart = configfile.get_config(os.path.join(REPO, 'configs/regression.py'))
  assert [r.name for r in runs] == ['seed=0', 'seed=1', 'seed=2'] and len(sweep.group_runs(runs)) == 1
  assert base.to_dict() == quickstart.to_dict()
  assert len(configfile.load_sweep_file(os.path.join(REPO, 'configs/sweeps/seeds.py'))[1]) == 64
  with pytest.raises(config_lib.ConfigError, match='must be a positive number of seeds'):
    configfile.load_sweep_file(os.path.join(REPO, 'configs/sweeps/seeds.py:0'))


def test_moe_topk_quick_expands():
  base, grid = configfile.load_sweep_file(os.path.join(REPO, 'configs/sweeps/moe_topk.py:quick'))
  runs = sweep.expand(base, grid)
  assert len(runs) == 10 and all(r.config.model.moe.top_k <= r.config.model.moe.num_experts for r in runs)


@pytest.mark.slow  # the real entry point on a shrunk quick sweep, merge and analysis (~30 s)
def test_sweep_and_analyze_entry_points(tmp_path):
  workdir = str(tmp_path / 'cap')
  cmd = [
    sys.executable,
    '-m',
    'experiments.sweep',
    '--config=configs/sweeps/capacity_dense.py:quick',
    f'--workdir={workdir}',
    '--config.train.steps=20',
    '--config.train.log_every=10',
    '--noprogress',
    f'--compilation_cache_dir={tmp_path / "cache"}',
  ]
  for shard in ('0', '1'):
    proc = subprocess.run(
      cmd + ['--num_shards=2', f'--shard_index={shard}'], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
  assert len(os.listdir(tmp_path / 'cache')) > 0  # persistent compilation cache written
  proc = subprocess.run(
    [sys.executable, '-m', 'experiments.analyze', f'--workdir={workdir}'],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  _, rows = read_csv(os.path.join(workdir, 'results.csv'))
  assert len(rows) == 16 and {r['status'] for r in rows} == {'completed'}
  assert os.path.exists(os.path.join(workdir, 'analysis', 'loss_vs_d_ff.png'))


def test_load_run_of_a_sweep_run(group_sweep):
  """Every sweep run keeps its trained weights; evaluated alone they give its eval_loss to float32
  rounding (the group evaluated them vmapped)."""
  workdir, summaries, _ = group_sweep
  name = 'learning_rate=0.05,seed=2'
  config, model, summary = ffn_research.load_run(os.path.join(workdir, 'runs', name))
  assert config.train.learning_rate == 0.05 and summary == summaries[name]
  exp = train.Experiment(config)
  evals = jax.jit(exp.evaluate)(nnx.state(model), jax.jit(exp.init)(config.train.seed)['data'])
  np.testing.assert_allclose(float(evals['eval_loss']), summary['eval_loss'], rtol=1e-5)
