"""Sweeps of many small runs (issue 34): what a group holds (threads, open files) does not grow with its
runs beyond one lock each, groups are split to the open-file limit, a large group resumes bit-exactly,
and a run's files stay readable without the code."""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import threading

from flax import serialization
import jax
import numpy as np
import pytest

from ffn_research import checkpoints as checkpoints_lib
from ffn_research import io as io_lib
from ffn_research import loop
from ffn_research import programs as programs_lib
from ffn_research import sweep
from tests.conftest import REPO_ROOT
from tests.test_faults import read_jsonl
from tests.test_faults import tiny_config


def small_base(**overrides):
  return tiny_config(**{'train.steps': 20, 'train.log_every': 5, 'train.checkpoint_every': 10, **overrides})


def seeds(n):
  return sweep.values('train.seed', range(n))


def threads():
  return len(os.listdir('/proc/self/task'))


def test_threads_and_open_files_do_not_grow_with_the_group(tmp_path, monkeypatch):
  """Sampled at every flush of a group's training: 8 runs vs 48 runs. Threads are the same; open files
  grow by at most one per run (its lock)."""
  real_flush, seen = loop.GroupLoop.flush, []

  def sampling_flush(self):
    real_flush(self)
    seen[-1].append((sweep.open_files(), threads(), threading.active_count()))

  monkeypatch.setattr(loop.GroupLoop, 'flush', sampling_flush)
  peaks = {}
  for n in (8, 48):
    seen.append([])
    out = sweep.run_sweep(small_base(), seeds(n), str(tmp_path / str(n)), progress=False)
    assert {s['status'] for s in out.values()} == {'completed'}
    peaks[n] = np.max(np.array(seen[-1]), axis=0)
  assert peaks[48][0] - peaks[8][0] <= 40 * sweep.FILES_PER_RUN, peaks
  assert peaks[48][1] <= peaks[8][1] + 1 and peaks[48][2] == peaks[8][2], peaks


def test_a_sweep_with_more_runs_than_the_open_file_limit_completes(tmp_path):
  """ulimit -n 128 and 150 runs: split into groups that fit, said in one line before compiling."""
  workdir = tmp_path / 'sweep'
  cmd = (
    f'ulimit -n 128 && exec {sys.executable} -m experiments.sweep --config=configs/sweeps/seeds.py:150 '
    f'--workdir={workdir} --noprogress --compilation_cache_dir= --config.train.steps=10 '
    '--config.train.log_every=5 --config.task.num_train=64 --config.task.num_eval=64'
  )
  proc = subprocess.run(['bash', '-c', cmd], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'groups of at most' in proc.stderr and 'ulimit -n 128' in proc.stderr, proc.stderr[-3000:]
  assert 'Too many open files' not in proc.stderr
  statuses = [json.load(open(workdir / 'runs' / f'seed={i}' / 'summary.json'))['status'] for i in range(150)]
  assert statuses == ['completed'] * 150


def test_not_even_one_run_fits_is_one_line_before_compiling(tmp_path, monkeypatch):
  monkeypatch.setattr(sweep, 'FILES_SPARE', 10**6)
  with pytest.raises(sweep.config_lib.ConfigError, match='not even one run fits: the open-file limit'):
    sweep.run_sweep(small_base(), seeds(2), str(tmp_path), progress=False)
  assert not os.path.exists(tmp_path / 'runs' / 'seed=0' / 'metrics.jsonl')


def test_kill_of_a_large_group_between_its_runs_checkpoints_resumes_bit_exactly(tmp_path, monkeypatch):
  """40 runs; killed after 17 of them saved their step-10 checkpoint: they resume from it, the other 23
  start over, and every run ends as in the uninterrupted sweep, each step logged once."""
  base, grid = small_base(), seeds(40)
  ref = sweep.run_sweep(base, grid, str(tmp_path / 'ref'), progress=False)
  real_save, saved = checkpoints_lib.Checkpointer.save, []

  def save_then_die(self, step, state, meta):
    real_save(self, step, state, meta)
    saved.append(step)
    if len(saved) == 17:
      raise KeyboardInterrupt

  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', save_then_die)
  with pytest.raises(KeyboardInterrupt):
    sweep.run_sweep(base, grid, str(tmp_path / 'run'), progress=False)
  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', real_save)
  steps = sorted(sweep._resume_step(str(tmp_path / 'run'), n) for n in ref)
  assert steps == [0] * 23 + [10] * 17
  out = sweep.run_sweep(base, grid, str(tmp_path / 'run'), progress=False)
  for name, summary in ref.items():
    assert out[name]['status'] == 'completed'
    assert out[name]['eval_loss'] == summary['eval_loss'] and out[name]['final_loss'] == summary['final_loss']
    lines = read_jsonl(tmp_path / 'run' / 'runs' / name / 'metrics.jsonl')
    ref_lines = read_jsonl(tmp_path / 'ref' / 'runs' / name / 'metrics.jsonl')
    assert [line['step'] for line in lines] == [5, 10, 15, 20]
    assert [line['loss'] for line in lines] == [line['loss'] for line in ref_lines]


def _events(folder):
  """(tag, step, value) of every scalar in a run's TensorBoard files, read by their record framing."""
  _, event_pb2, _ = io_lib.tensorboard_records()
  out = []
  for name in sorted(os.listdir(folder)):
    data = open(os.path.join(folder, name), 'rb').read()
    i = 0
    while i < len(data):
      (n,) = struct.unpack('Q', data[i : i + 8])
      event = event_pb2.Event.FromString(data[i + 12 : i + 12 + n])
      i += 12 + n + 4
      out += [(v.tag, event.step, v.simple_value) for v in event.summary.value]
  return out


def test_a_sweep_runs_files_are_readable_without_the_code_and_load_run_reads_it(tmp_path):
  workdir = tmp_path / 'sweep'
  sweep.run_sweep(small_base(), seeds(3), str(workdir), progress=False)
  run_dir = workdir / 'runs' / 'seed=1'
  lines = read_jsonl(run_dir / 'metrics.jsonl')
  events = _events(run_dir / 'tensorboard')
  assert [(s, v) for t, s, v in events if t == 'loss'] == [(line['step'], np.float32(line['loss'])) for line in lines]
  numeric = {k: v for k, v in lines[-1].items() if k != 'step' and isinstance(v, (int, float))}
  assert {t: v for t, s, v in events if s == lines[-1]['step']} == {k: np.float32(v) for k, v in numeric.items()}
  ckpt = run_dir / 'checkpoints' / '20'
  assert sorted(os.listdir(ckpt)) == ['state.msgpack']
  assert sorted(os.listdir(run_dir / 'checkpoints')) == ['10', '20']
  content = serialization.msgpack_restore((ckpt / 'state.msgpack').read_bytes())  # one library call
  arrays = content['state']
  assert content['meta']['step'] == 20 and content['meta']['parametrization'] == 'standard'
  loaded = loop.load_run(str(run_dir))
  assert loaded.summary['status'] == 'completed' and loaded.config.train.seed == 1
  params = loop.restore(str(run_dir))[1][20]  # load_run's own path
  leaves = jax.tree_util.tree_flatten_with_path({'params': params})[0]
  assert leaves and all(k in arrays for k in (jax.tree_util.keystr(p) for p, _ in leaves))
  for path, x in leaves:
    np.testing.assert_array_equal(np.asarray(x), arrays[jax.tree_util.keystr(path)])


def _as_npz_checkpoint(ckpt):
  """Rewrite a light checkpoint folder as written before state.msgpack: state.npz, meta.json, sha256.json."""
  arrays, meta = checkpoints_lib.unpack_light((ckpt / checkpoints_lib.LIGHT).read_bytes())
  os.remove(ckpt / checkpoints_lib.LIGHT)
  np.savez(ckpt / 'state.npz', **arrays)
  (ckpt / 'meta.json').write_text(json.dumps(meta))
  sums = {n: hashlib.sha256((ckpt / n).read_bytes()).hexdigest() for n in ('state.npz', 'meta.json')}
  (ckpt / checkpoints_lib.CHECKSUMS).write_text(json.dumps(sums))


def test_a_run_checkpointed_in_the_older_npz_format_resumes_from_it(tmp_path, capfd, monkeypatch):
  workdir = tmp_path / 'sweep'
  base, grid = small_base(), seeds(2)
  ref = sweep.run_sweep(base, grid, str(workdir), progress=False)
  run_dir = workdir / 'runs' / 'seed=0'
  _as_npz_checkpoint(run_dir / 'checkpoints' / '10')
  shutil.rmtree(run_dir / 'checkpoints' / '20')
  os.remove(run_dir / 'summary.json')
  read, restore = [], checkpoints_lib.Checkpointer._restore_light
  monkeypatch.setattr(
    checkpoints_lib.Checkpointer,
    '_restore_light',
    lambda self, step, abstract: read.append((step, self._format(step))) or restore(self, step, abstract),
  )
  out = sweep.run_sweep(base, grid, str(workdir), progress=False)
  assert 'damaged' not in capfd.readouterr().err and read == [(10, 'npz')]
  assert out['seed=0']['eval_loss'] == ref['seed=0']['eval_loss']


@pytest.mark.parametrize('how', ['truncate', 'flip', 'npz_flip', 'npz_no_sums'])
def test_a_damaged_light_checkpoint_is_set_aside_and_the_previous_one_used(tmp_path, capfd, how):
  workdir = tmp_path / 'sweep'
  base, grid = small_base(), seeds(2)
  ref = sweep.run_sweep(base, grid, str(workdir), progress=False)
  run_dir = workdir / 'runs' / 'seed=0'
  ckpt = run_dir / 'checkpoints' / '20'
  if how.startswith('npz'):
    _as_npz_checkpoint(ckpt)
  name = 'state.npz' if how.startswith('npz') else checkpoints_lib.LIGHT
  data = bytearray((ckpt / name).read_bytes())
  if how == 'truncate':
    (ckpt / name).write_bytes(data[: len(data) // 2])
  elif how == 'npz_no_sums':
    os.remove(ckpt / checkpoints_lib.CHECKSUMS)
  else:
    data[len(data) // 2] ^= 1
    (ckpt / name).write_bytes(bytes(data))
  os.remove(run_dir / 'summary.json')
  out = sweep.run_sweep(base, grid, str(workdir), progress=False)
  err = capfd.readouterr().err
  assert f'checkpoint {ckpt} is damaged' in err and (run_dir / 'checkpoints.corrupt' / '20').is_dir()
  assert out['seed=0']['eval_loss'] == ref['seed=0']['eval_loss']


def test_a_run_that_cannot_be_written_fails_alone_in_one_line(tmp_path, monkeypatch, capfd):
  """A full disk for one run's metrics mid-group: that run is 'failed' with one line, its group-mates
  complete as they would have; the rerun retries it."""
  base, grid = small_base(), seeds(3)
  ref = sweep.run_sweep(base, grid, str(tmp_path / 'ref'), progress=False)
  real_flush = io_lib.MetricsLog.flush

  def full_disk(self):
    if 'seed=1' in self.path and self.lines and json.loads(self.lines[0])['step'] == 10:
      raise OSError(28, 'No space left on device')
    real_flush(self)

  monkeypatch.setattr(io_lib.MetricsLog, 'flush', full_disk)
  out = sweep.run_sweep(base, grid, str(tmp_path / 'run'), progress=False)
  assert out['seed=1'] == {
    'status': 'failed',
    'error': 'OSError: [Errno 28] No space left on device',
    'sweep_group_size': 3,
    'sweep_padded_d_ff': 16,
  }
  assert 'seed=1 cannot be written (OSError: [Errno 28] No space left on device)' in capfd.readouterr().err
  for name in ('seed=0', 'seed=2'):
    assert out[name]['eval_loss'] == ref[name]['eval_loss']
  monkeypatch.setattr(io_lib.MetricsLog, 'flush', real_flush)
  again = sweep.run_sweep(base, grid, str(tmp_path / 'run'), progress=False)
  assert again['seed=1']['status'] == 'completed' and again['seed=1']['eval_loss'] == ref['seed=1']['eval_loss']


def _spy_widths(monkeypatch):
  """The run axes the sweep compiles at, call by call."""
  widths, real = [], sweep._programs

  def spy(config, num_runs, devices):
    widths.append(num_runs)
    return real(config, num_runs, devices)

  monkeypatch.setattr(sweep, '_programs', spy)
  return widths


def _width_file(workdir, name):
  return json.load(open(os.path.join(workdir, 'runs', name, sweep.WIDTH_FILE)))['run_axis']


def test_runs_added_to_a_finished_sweep_train_at_their_own_width(tmp_path, monkeypatch):
  """A regime extension adds runs to a finished program: they compile at their own count, not padded to
  the finished runs', and end exactly as a sweep of them alone."""
  workdir = str(tmp_path / 'run')
  sweep.run_sweep(small_base(), seeds(4), workdir, progress=False)
  assert {_width_file(workdir, f'seed={i}') for i in range(4)} == {4}
  widths = _spy_widths(monkeypatch)
  out = sweep.run_sweep(small_base(), seeds(6), workdir, progress=False)
  assert widths == [2] and {_width_file(workdir, f'seed={i}') for i in (4, 5)} == {2}
  alone = sweep.run_sweep(small_base(), sweep.values('train.seed', [4, 5]), str(tmp_path / 'alone'), progress=False)
  for name in ('seed=4', 'seed=5'):
    assert out[name]['eval_loss'] == alone[name]['eval_loss'] and out[name]['sweep_group_size'] == 2


def test_a_split_program_builds_its_config_once(tmp_path, monkeypatch):
  """Groups of at most 2 of 5 runs, one program: its config is built once from all 5 runs, not once per group
  (each build reads every run of the program: per group, a sweep's cost grew with runs x groups)."""
  real, calls = programs_lib.program_config, []

  def spy(configs):
    calls.append(len(configs))
    return real(configs)

  monkeypatch.setattr(programs_lib, 'program_config', spy)
  out = sweep.run_sweep(small_base(), seeds(5), str(tmp_path), progress=False, max_group_size=2)
  assert calls == [5] and {s['sweep_group_size'] for s in out.values()} == {1, 2}


def test_a_split_program_killed_between_its_groups_keeps_its_width(tmp_path, monkeypatch):
  """Groups of at most 3 of 5 runs; a kill before the second group starts: its 2 never-started runs
  keep the run axis of 3 recorded when the sweep planned them, and end as in the uninterrupted sweep."""
  ref = sweep.run_sweep(small_base(), seeds(5), str(tmp_path / 'ref'), progress=False, max_group_size=3)
  workdir = str(tmp_path / 'run')
  real, calls = sweep._train_sweep_group, []

  def die_on_second(*args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
      raise KeyboardInterrupt
    real(*args, **kwargs)

  monkeypatch.setattr(sweep, '_train_sweep_group', die_on_second)
  with pytest.raises(KeyboardInterrupt):
    sweep.run_sweep(small_base(), seeds(5), workdir, progress=False, max_group_size=3)
  monkeypatch.setattr(sweep, '_train_sweep_group', real)
  assert [_width_file(workdir, f'seed={i}') for i in range(5)] == [3] * 5
  widths = _spy_widths(monkeypatch)
  out = sweep.run_sweep(small_base(), seeds(5), workdir, progress=False, max_group_size=3)
  assert widths == [3]
  for name, summary in ref.items():
    assert out[name]['eval_loss'] == summary['eval_loss'] and out[name]['final_loss'] == summary['final_loss']


def test_a_damaged_width_file_is_one_warning_and_the_run_is_planned_afresh(tmp_path, capfd):
  workdir = str(tmp_path / 'run')
  os.makedirs(os.path.join(workdir, 'runs', 'seed=0'))
  with open(os.path.join(workdir, 'runs', 'seed=0', sweep.WIDTH_FILE), 'w') as f:
    f.write('{"run_axis": ')
  out = sweep.run_sweep(small_base(), seeds(2), workdir, progress=False)
  assert 'sweep_width.json is unreadable' in capfd.readouterr().err
  assert {s['status'] for s in out.values()} == {'completed'} and _width_file(workdir, 'seed=0') == 2
