"""Faults injected through the real entry points and the one loop (issue 11): kills at chosen
moments, corrupt checkpoints and logs, two processes on one workdir, bad input, models that
cannot fit, blow-ups. Each rerun must end as the uninterrupted run did, bit for bit on CPU."""

import csv
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from ffn_research import checkpoints as checkpoints_lib
from ffn_research import configfile
from ffn_research import io as io_lib
from ffn_research import loop
from ffn_research import programs
from ffn_research import sweep
from tests.conftest import REPO_ROOT

TINY_FLAGS = [
  '--config.model.d_ff=16',
  '--config.train.steps=200',
  '--config.train.batch_size=32',
  '--config.train.log_every=50',
  '--config.train.warmup_steps=10',
  '--config.train.checkpoint_every=100',
  '--config.task.num_train=128',
  '--config.task.num_eval=128',
  '--config.task.grid_size=257',
]
STEPS = [50, 100, 150, 200]


def tiny_config(**overrides):
  config = configfile.get_config(os.path.join(REPO_ROOT, 'configs/regression.py'))
  for flag in TINY_FLAGS:
    key, value = flag[len('--config.') :].split('=')
    section, name = key.split('.')
    config[section][name] = type(config[section][name])(value)
  for key, value in overrides.items():
    section, name = key.rsplit('.', 1)
    config[section][name] = value
  return config


def cli(module, *args, timeout=300):
  return subprocess.run(
    [sys.executable, '-m', f'experiments.{module}', *args],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def train_cli(workdir, *args):
  return cli('train', '--config=configs/regression.py', f'--workdir={workdir}', *TINY_FLAGS, *args)


def one_line_error(proc, *named):
  """A non-zero exit with exactly one non-empty stderr line, naming each of `named`."""
  assert proc.returncode != 0, proc.stdout
  assert 'Traceback' not in proc.stderr, proc.stderr
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1, proc.stderr
  for name in named:
    assert name in lines[0], lines[0]
  return lines[0]


def read_jsonl(path):
  with open(path) as f:
    return [json.loads(line) for line in f]


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """An uninterrupted tiny run (checkpoints at 100 and 200): (workdir, summary, metrics lines)."""
  workdir = str(tmp_path_factory.mktemp('reference'))
  summary = loop.train_and_evaluate(tiny_config(), workdir)
  return workdir, summary, read_jsonl(os.path.join(workdir, 'metrics.jsonl'))


def copy_run(reference, tmp_path, drop_summary=True):
  workdir = str(tmp_path / 'run')
  shutil.copytree(reference[0], workdir)
  if drop_summary:
    os.remove(os.path.join(workdir, 'summary.json'))
  return workdir


def assert_same_run(workdir, reference):
  """Completed, every logged step once, and bit-identical losses and eval metrics."""
  _, ref_summary, ref_lines = reference
  summary = json.load(open(os.path.join(workdir, 'summary.json')))
  assert summary['status'] == 'completed'
  assert summary['eval_loss'] == ref_summary['eval_loss'] and summary['final_loss'] == ref_summary['final_loss']
  lines = read_jsonl(os.path.join(workdir, 'metrics.jsonl'))
  assert [line['step'] for line in lines] == STEPS
  assert [line['loss'] for line in lines] == [line['loss'] for line in ref_lines]


# --------------------------------------------------------------------------- kills


def test_kill_after_final_checkpoint_before_summary_finishes_on_rerun(reference, tmp_path):
  """Issue 11.1: the disk state such a kill leaves (final checkpoint, no summary) used to stick."""
  workdir = copy_run(reference, tmp_path)
  proc = train_cli(workdir)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert 'resumed from checkpoint at step 200' in proc.stdout
  assert_same_run(workdir, reference)


def test_metrics_of_a_checkpoint_are_on_disk_before_it_counts(reference, tmp_path, monkeypatch):
  """Issue 11.2: a kill right after a checkpoint is saved left that step's metrics line unwritten."""
  workdir = str(tmp_path / 'run')
  real_save = checkpoints_lib.Checkpointer.save

  def save_then_die(self, step, state, meta):
    real_save(self, step, state, meta)
    if step == 100:
      assert [line['step'] for line in read_jsonl(os.path.join(workdir, 'metrics.jsonl'))] == [50, 100]
      raise KeyboardInterrupt  # a kill right after the save

  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', save_then_die)
  with pytest.raises(KeyboardInterrupt):
    loop.train_and_evaluate(tiny_config(), workdir)
  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', real_save)
  loop.train_and_evaluate(tiny_config(), workdir)
  assert_same_run(workdir, reference)


@pytest.mark.slow  # three sweeps of a group of 3 (~10 s)
def test_sweep_group_resumes_bit_exactly_from_its_checkpoints(tmp_path, monkeypatch):
  """Sweep runs checkpoint too: a kill mid-group resumes from the checkpoint, not from step 0."""
  base = tiny_config(**{'model.d_ff': 8, 'train.steps': 40, 'train.log_every': 10, 'train.checkpoint_every': 20})
  grid = sweep.values('train.seed', [0, 1, 2])
  ref = sweep.run_sweep(base, grid, str(tmp_path / 'ref'), progress=False)
  real_save = checkpoints_lib.Checkpointer.save
  saved = []

  def save_then_die(self, step, state, meta):
    real_save(self, step, state, meta)
    saved.append(step)
    if step == 20 and len(saved) == 3:  # every run of the group has its step-20 checkpoint
      raise KeyboardInterrupt

  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', save_then_die)
  with pytest.raises(KeyboardInterrupt):
    sweep.run_sweep(base, grid, str(tmp_path / 'run'), progress=False)
  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', real_save)
  steps_run = []
  real_chunk = programs.GroupPrograms._chunk
  monkeypatch.setattr(
    programs.GroupPrograms, '_chunk', lambda self, s, n, c: (steps_run.append(n), real_chunk(self, s, n, c))[1]
  )
  out = sweep.run_sweep(base, grid, str(tmp_path / 'run'), progress=False)
  for name, summary in ref.items():
    assert out[name]['status'] == 'completed' and out[name]['eval_loss'] == summary['eval_loss']
    lines = read_jsonl(str(tmp_path / 'run' / 'runs' / name / 'metrics.jsonl'))
    assert [line['step'] for line in lines] == [10, 20, 30, 40]
    assert [line['loss'] for line in lines] == [
      line['loss'] for line in read_jsonl(str(tmp_path / 'ref' / 'runs' / name / 'metrics.jsonl'))
    ]


def test_kill_between_checkpoints_of_a_padded_group_resumes_bit_identically(tmp_path, monkeypatch):
  """A kill after the narrow run of a padded group saved its checkpoint and before the wide one
  did: the two then resume from different steps, in separate groups, each still in the program the
  uninterrupted sweep planned (padded to the widest run), so the figures are bit-identical."""
  base = tiny_config(**{'train.steps': 20, 'train.log_every': 10, 'train.checkpoint_every': 10})
  grid = sweep.product(sweep.values('model.d_ff', [4, 16]), sweep.values('train.seed', [0]))
  ref = sweep.run_sweep(base, grid, str(tmp_path / 'ref'), progress=False)
  assert {s['sweep_padded_d_ff'] for s in ref.values()} == {16}  # one program, padded
  real_save = checkpoints_lib.Checkpointer.save

  def save_then_die(self, step, state, meta):
    real_save(self, step, state, meta)
    raise KeyboardInterrupt  # after the first run's first checkpoint

  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', save_then_die)
  with pytest.raises(KeyboardInterrupt):
    sweep.run_sweep(base, grid, str(tmp_path / 'run'), progress=False)
  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', real_save)
  steps = {n: sweep._resume_step(str(tmp_path / 'run'), n) for n in ref}
  assert sorted(steps.values()) == [0, 10]
  out = sweep.run_sweep(base, grid, str(tmp_path / 'run'), progress=False)
  for name, summary in ref.items():
    for key in ('eval_loss', 'final_loss', 'sweep_padded_d_ff'):
      assert out[name][key] == summary[key], (name, key)


def _last_logged_step(path):
  """The largest step in a metrics log being written (read_metrics skips a torn last line), or 0."""
  records = io_lib.read_metrics(str(path))[0]
  return records[-1]['step'] if records else 0


@pytest.mark.slow  # real SIGKILLs at several moments through the entry point (~60 s)
def test_sigkill_at_any_moment_then_rerun_equals_uninterrupted(tmp_path):
  """Each kill is triggered by the run's own progress, so it lands however fast the machine is:
  as a checkpoint appears (the moment of issue 11.2), as the log passes a chosen step, or at a
  random moment from start-up on. None lets the run finish: past step 560 every attempt is killed."""
  flags = ['--config.train.steps=600', '--config.train.log_every=20', '--config.train.checkpoint_every=60']
  ref_dir = tmp_path / 'ref'
  assert train_cli(ref_dir, *flags).returncode == 0
  ref_lines = read_jsonl(ref_dir / 'metrics.jsonl')
  workdir = tmp_path / 'run'
  ckpt_dir, log = workdir / 'checkpoints', workdir / 'metrics.jsonl'
  cmd = [
    sys.executable,
    '-m',
    'experiments.train',
    '--config=configs/regression.py',
    f'--workdir={workdir}',
    *TINY_FLAGS,
    *flags,
  ]
  rng = np.random.default_rng(0)
  kills, moments = 0, []
  for attempt in range(12):
    if kills == 4:
      break
    moment = ('checkpoint', 'logged step', 'random delay')[attempt % 3]
    before = set(os.listdir(ckpt_dir)) if ckpt_dir.exists() else set()
    target_step = _last_logged_step(log) + 20 * int(rng.integers(1, 4))
    deadline = time.time() + (rng.uniform(0.2, 3.0) if moment == 'random delay' else 120.0)
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and time.time() < deadline:
      if moment == 'checkpoint' and ckpt_dir.exists() and set(os.listdir(ckpt_dir)) - before:
        break
      if _last_logged_step(log) >= (min(target_step, 560) if moment == 'logged step' else 560):
        break
      time.sleep(0.002)
    if proc.poll() is None:
      proc.send_signal(signal.SIGKILL)
      kills += 1
      moments.append(moment)
    proc.wait()
  proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert kills == 4 and {'checkpoint', 'logged step'} <= set(moments), moments
  lines = read_jsonl(log)
  assert [line['step'] for line in lines] == [line['step'] for line in ref_lines] == list(range(20, 601, 20))
  assert [line['loss'] for line in lines] == [line['loss'] for line in ref_lines]
  assert (
    json.load(open(workdir / 'summary.json'))['eval_loss'] == json.load(open(ref_dir / 'summary.json'))['eval_loss']
  )


# --------------------------------------------------------------------------- one process per workdir


def test_second_process_on_a_busy_workdir_is_refused_naming_the_holder(tmp_path):
  workdir = tmp_path / 'run'
  workdir.mkdir()
  with io_lib.Lock(str(workdir)):
    proc = train_cli(workdir)
  line = one_line_error(proc, str(workdir), f'pid {os.getpid()}')
  assert proc.returncode == 2 and 'in use' in line
  assert sorted(os.listdir(workdir)) == ['.lock']  # nothing else written


@pytest.mark.slow  # two subprocesses, one a run (~6 s)
def test_lock_of_a_killed_process_is_not_stale(reference, tmp_path):
  workdir = copy_run(reference, tmp_path)
  script = (
    'import os, signal, sys; from ffn_research import io; '
    f'io.Lock({workdir!r}).__enter__(); os.kill(os.getpid(), signal.SIGKILL)'
  )
  assert subprocess.run([sys.executable, '-c', script], cwd=REPO_ROOT).returncode == -signal.SIGKILL
  assert 'pid' in open(os.path.join(workdir, '.lock')).read()  # the dead holder's note is still there
  proc = train_cli(workdir)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert_same_run(workdir, reference)


def test_two_sweeps_on_one_shard_are_refused(tmp_path):
  workdir = tmp_path / 'sweep'
  workdir.mkdir()
  args = [
    '--config=configs/sweeps/capacity_dense.py:quick',
    f'--workdir={workdir}',
    '--noprogress',
    '--compilation_cache_dir=',
    '--num_shards=2',
    '--shard_index=1',
  ]
  with io_lib.Lock(str(workdir), '.lock-shard-1-of-2'):
    proc = cli('sweep', *args)
  one_line_error(proc, str(workdir), f'pid {os.getpid()}')
  assert sorted(os.listdir(workdir)) == ['.lock-shard-1-of-2']


def test_sweep_skips_runs_another_process_trains(tmp_path):
  base = tiny_config(**{'model.d_ff': 8, 'train.steps': 10, 'train.log_every': 10})
  grid = sweep.values('model.d_ff', [4, 8])
  busy = tmp_path / 'runs' / 'd_ff=4'
  busy.mkdir(parents=True)
  with io_lib.Lock(str(busy)):
    out = sweep.run_sweep(base, grid, str(tmp_path), progress=False)
  assert out['d_ff=4'] is None and out['d_ff=8']['status'] == 'completed'


def _write_summaries_then_merge(workdir, names, barrier):
  for name in names:
    io_lib.write_json(os.path.join(workdir, 'runs', name, 'summary.json'), {'status': 'completed', 'eval_loss': 1.0})
  barrier.wait()
  sweep.write_results(workdir)


@pytest.mark.slow  # 3 rounds of 4 processes that import JAX (~15 s)
def test_concurrent_shards_lose_no_results_rows(tmp_path):
  names = [f'd_ff={d}' for d in range(1, 41)]
  workdir = str(tmp_path)
  for round_ in range(3):
    io_lib.write_json(
      os.path.join(workdir, 'sweep.json'),
      {'base_config': {}, 'runs': [{'name': n, 'overrides': {'model.d_ff': i + 1}} for i, n in enumerate(names)]},
    )
    for n in names:
      shutil.rmtree(os.path.join(workdir, 'runs', n), ignore_errors=True)
      io_lib.write_json(os.path.join(workdir, 'runs', n, 'config.json'), {'train': {'seed': 0}})
    ctx = multiprocessing.get_context('spawn')
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_write_summaries_then_merge, args=(workdir, names[i::4], barrier)) for i in range(4)]
    for p in procs:
      p.start()
    for p in procs:
      p.join(60)
      assert p.exitcode == 0
    with open(os.path.join(workdir, 'results.csv')) as f:
      rows = list(csv.DictReader(f))
    assert [r['status'] for r in rows] == ['completed'] * len(names), round_


# --------------------------------------------------------------------------- corrupt files


def _damage(ckpt_dir, how):
  state = os.path.join(ckpt_dir, 'state')
  if how == 'truncate_all':
    for root, _, files in os.walk(ckpt_dir):
      for f in files:
        with open(os.path.join(root, f), 'r+b') as fh:
          fh.truncate(os.path.getsize(os.path.join(root, f)) // 2)
  elif how == 'array_data_halved':
    for root, _, files in os.walk(os.path.join(state, 'd')):
      for f in files:
        with open(os.path.join(root, f), 'r+b') as fh:
          fh.truncate(os.path.getsize(os.path.join(root, f)) // 2)
  elif how == 'manifest_garbage':
    with open(os.path.join(state, 'manifest.ocdbt'), 'wb') as fh:
      fh.write(b'\x00garbage' * 10)
  elif how == 'manifest_random':
    with open(os.path.join(state, 'manifest.ocdbt'), 'wb') as fh:
      fh.write(np.random.default_rng(0).bytes(20))
  elif how == 'no_METADATA':
    os.remove(os.path.join(state, '_METADATA'))
  elif how == 'no_meta_metadata':
    os.remove(os.path.join(ckpt_dir, 'meta', 'metadata'))
  elif how == 'no_state':
    shutil.rmtree(state)


@pytest.mark.parametrize(
  'how',
  [
    'manifest_garbage',
    pytest.param('truncate_all', marks=pytest.mark.slow),
    pytest.param('no_state', marks=pytest.mark.slow),
    pytest.param('manifest_random', marks=pytest.mark.slow),
    pytest.param('array_data_halved', marks=pytest.mark.slow),
    pytest.param('no_METADATA', marks=pytest.mark.slow),
    pytest.param('no_meta_metadata', marks=pytest.mark.slow),
  ],
)
def test_damaged_latest_checkpoint_falls_back_to_the_previous(reference, tmp_path, capfd, how):
  workdir = copy_run(reference, tmp_path)
  _damage(os.path.join(workdir, 'checkpoints', '200'), how)
  loop.train_and_evaluate(tiny_config(), workdir)
  out, err = capfd.readouterr()
  assert 'Traceback' not in err
  assert f'checkpoint {os.path.join(os.path.abspath(workdir), "checkpoints", "200")} is damaged' in err
  assert 'resumed from checkpoint at step 100' in out
  assert os.path.isdir(os.path.join(workdir, 'checkpoints.corrupt', '200'))
  assert_same_run(workdir, reference)


@pytest.mark.slow  # a whole run in a subprocess (~6 s)
def test_no_intact_checkpoint_starts_over_through_the_entry_point(reference, tmp_path):
  workdir = copy_run(reference, tmp_path)
  _damage(os.path.join(workdir, 'checkpoints', '200'), 'manifest_random')
  _damage(os.path.join(workdir, 'checkpoints', '100'), 'no_state')
  proc = train_cli(workdir)
  assert proc.returncode == 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
  assert 'starting over' in proc.stderr and 'resumed' not in proc.stdout
  assert_same_run(workdir, reference)


def test_corrupt_metrics_lines_are_set_aside_and_valid_ones_kept(reference, tmp_path, capfd):
  workdir = copy_run(reference, tmp_path)
  path = os.path.join(workdir, 'metrics.jsonl')
  lines = open(path, 'rb').read().splitlines(keepends=True)
  with open(path, 'wb') as f:
    f.write(lines[0] + b'{"step": garbage\n' + lines[1] + b'\xff\xfe\x00binary\n' + b''.join(lines[2:]))
  loop.train_and_evaluate(tiny_config(), workdir)
  assert 'metrics.jsonl: 2 unreadable line(s) set aside' in capfd.readouterr().err
  assert open(path + '.corrupt', 'rb').read() == b'{"step": garbage\n\xff\xfe\x00binary\n'
  assert_same_run(workdir, reference)


def test_a_lost_metrics_line_is_recomputed_from_an_earlier_checkpoint(reference, tmp_path, capfd):
  """Garbage in place of the step-150 line: the rerun resumes from step 100, not 200, so every
  logged step is on disk exactly once."""
  workdir = copy_run(reference, tmp_path)
  path = os.path.join(workdir, 'metrics.jsonl')
  lines = open(path, 'rb').read().splitlines(keepends=True)
  with open(path, 'wb') as f:
    f.write(b''.join(lines[:2]) + b'garbage\n' + lines[3])
  loop.train_and_evaluate(tiny_config(), workdir)
  out, err = capfd.readouterr()
  assert 'resumed from checkpoint at step 100' in out and '1 unreadable line(s)' in err
  assert_same_run(workdir, reference)


@pytest.mark.parametrize(
  'content',
  [
    b'{"status": "compl',
    pytest.param(b'', marks=pytest.mark.slow),
    pytest.param(b'\x89PNG\x00\xff', marks=pytest.mark.slow),
    pytest.param(b'[1, 2]', marks=pytest.mark.slow),
  ],
)
def test_corrupt_summary_is_set_aside_and_rebuilt(reference, tmp_path, capfd, content):
  workdir = copy_run(reference, tmp_path)
  with open(os.path.join(workdir, 'summary.json'), 'wb') as f:
    f.write(content)
  loop.train_and_evaluate(tiny_config(), workdir)
  err = capfd.readouterr().err
  assert f'{workdir}/summary.json was unreadable' in err
  assert open(os.path.join(workdir, 'summary.json.corrupt'), 'rb').read() == content
  assert_same_run(workdir, reference)


@pytest.mark.parametrize(
  'content',
  [
    b'{"model": ',
    pytest.param(b'\x00\xff', marks=pytest.mark.slow),
    pytest.param(b'"a string"', marks=pytest.mark.slow),
  ],
)
def test_corrupt_config_json_is_one_line_naming_it(tmp_path, content):
  workdir = tmp_path / 'run'
  workdir.mkdir()
  (workdir / 'config.json').write_bytes(content)
  proc = train_cli(workdir)
  one_line_error(proc, f'{workdir}/config.json', 'delete the workdir')
  assert proc.returncode == 2


# --------------------------------------------------------------------------- bad input

BAD_FILES = {
  'syntax.py': 'def get_config(:\n  pass\n',
  'no_get_config.py': 'X = 1\n',
  'raises.py': 'raise RuntimeError("import-time failure")\n',
}


@pytest.mark.parametrize(
  'spec,named',
  [
    ('{tmp}/syntax.py', 'syntax.py:1: syntax error'),
    ('{tmp}/missing.py', 'missing.py not found'),
    ('{tmp}/no_get_config.py', 'defines no get_config'),
    ('{tmp}/raises.py', 'RuntimeError: import-time failure'),
    ('configs/regression.py:cubic', "get_config('cubic') failed: ValueError: unknown config argument 'cubic'"),
  ],
)
def test_bad_config_file_is_one_line(tmp_path, spec, named):
  for name, text in BAD_FILES.items():
    (tmp_path / name).write_text(text)
  proc = cli('train', f'--config={spec.format(tmp=tmp_path)}', f'--workdir={tmp_path}/run')
  one_line_error(proc, named)
  assert not (tmp_path / 'run').exists()
  proc = cli('sweep', f'--config={spec.format(tmp=tmp_path)}', f'--workdir={tmp_path}/sweep')
  one_line_error(proc, named)
  assert not (tmp_path / 'sweep').exists()


def test_bad_workdirs_are_one_line(tmp_path):
  (tmp_path / 'file').write_text('x')
  one_line_error(train_cli(tmp_path / 'file'), f'--workdir={tmp_path}/file is a file')
  one_line_error(train_cli(tmp_path / 'file' / 'sub'), 'cannot be created')


def test_seed_outside_the_prng_range_writes_nothing(tmp_path):
  one_line_error(train_cli(tmp_path / 'run', '--config.train.seed=1099511627776'), 'train.seed=1099511627776')
  assert not (tmp_path / 'run').exists()


@pytest.mark.parametrize(
  'args,named',
  [
    (['--num_shards=0'], '--num_shards=0'),
    pytest.param(['--num_shards=2', '--shard_index=2'], '--shard_index=2', marks=pytest.mark.slow),
    pytest.param(['--num_shards=2', '--shard_index=-1'], '--shard_index=-1', marks=pytest.mark.slow),
  ],
)
def test_bad_shards_write_nothing(tmp_path, args, named):
  proc = cli(
    'sweep',
    '--config=configs/sweeps/capacity_dense.py:quick',
    f'--workdir={tmp_path}/sweep',
    '--compilation_cache_dir=',
    *args,
  )
  one_line_error(proc, named)
  assert not (tmp_path / 'sweep').exists()


@pytest.mark.slow  # compiles the 8.6e9-parameter program (~5 s)
def test_model_that_cannot_fit_is_refused_before_allocating(tmp_path):
  t0 = time.time()
  proc = cli(
    'train',
    '--config=configs/regression.py:teacher_student',
    f'--workdir={tmp_path}',
    '--config.model.d_model=65536',
    '--config.model.d_ff=65536',
  )
  line = one_line_error(proc, 'GiB', 'available')
  assert line.count('GiB') >= 3 and proc.returncode == 2
  assert time.time() - t0 < 120
  assert not os.path.exists(tmp_path / 'summary.json')


def test_available_memory_honours_the_address_space_limit():
  script = (
    'import resource, jax; from ffn_research import parallel; '
    'resource.setrlimit(resource.RLIMIT_AS, (12 * 2**30, resource.RLIM_INFINITY)); '
    'have, source = parallel.available_memory(jax.devices()[0]); print(have, source)'
  )
  proc = subprocess.run([sys.executable, '-c', script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
  have, source = proc.stdout.split(' ', 1)
  assert 0 < int(have) <= 12 * 2**30 and ('ulimit' in source or 'MemAvailable' in source)


# --------------------------------------------------------------------------- divergence


def test_blowup_is_diverged_and_the_rule_can_be_turned_off(tmp_path):
  config = tiny_config(**{'train.learning_rate': 1e6})
  summary = loop.train_and_evaluate(config, str(tmp_path / 'on'))
  assert summary['status'] == 'diverged' and summary['diverged_reason'] == 'blow-up'
  lines = read_jsonl(tmp_path / 'on' / 'metrics.jsonl')
  initial = lines[0]['initial_loss']
  over = [line['step'] for line in lines if line['loss'] > 1e4 * initial]
  assert summary['diverged_step'] == over[2] == lines[-1]['step']  # the third chunk over the line
  off = loop.train_and_evaluate(
    tiny_config(**{'train.learning_rate': 1e6, 'train.blowup_factor': 0.0}), str(tmp_path / 'off')
  )
  assert off['status'] == 'completed' and off['final_loss'] > 1e4 * initial


@pytest.mark.slow  # the sweep entry point (~8 s)
def test_sweep_report_counts_diverged_runs(tmp_path):
  proc = cli(
    'sweep',
    '--config=configs/sweeps/capacity_dense.py:quick',
    f'--workdir={tmp_path}',
    '--noprogress',
    '--compilation_cache_dir=',
    '--config.model.d_ff=8',
    '--config.train.steps=20',
    '--config.train.log_every=5',
    '--config.train.learning_rate=1e6',
    '--num_shards=8',
    '--shard_index=0',
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert 'shard 0/8: 2 diverged' in proc.stdout


@pytest.mark.slow  # imports the analysis stack in a subprocess (~4 s)
def test_analyze_on_a_folder_that_is_not_a_sweep_is_one_line(tmp_path):
  one_line_error(cli('analyze', f'--workdir={tmp_path}'), f'{tmp_path}/sweep.json not found')


@pytest.mark.slow  # two entry points in subprocesses (~10 s)
def test_empty_sweep_and_analyze_without_finished_runs_are_one_line(tmp_path):
  (tmp_path / 'empty.py').write_text(
    textwrap.dedent("""
      from ffn_research import config
      def get_config(arg=None):
        return config.default_config()
      def get_sweep(arg=None):
        return []
  """)
  )
  proc = cli('sweep', f'--config={tmp_path}/empty.py', f'--workdir={tmp_path}/sweep', '--compilation_cache_dir=')
  assert proc.returncode == 2
  one_line_error(proc, 'the sweep has no runs')
  assert not (tmp_path / 'sweep').exists()
  workdir = tmp_path / 'unfinished'  # a sweep that has started but finished no run
  workdir.mkdir()
  (workdir / 'sweep.json').write_text('{"base_config": {}, "runs": [{"name": "a", "overrides": {}}]}')
  proc = cli('analyze', f'--workdir={workdir}')
  assert proc.returncode == 2
  one_line_error(proc, 'no run has completed yet')
