"""Data / expert parallelism from config, two processes with jax.distributed, bf16 compute.

Equality tolerance between meshes: every logged loss and the final eval loss agree to
rtol 1e-5 in float32 (the same batches are drawn on every mesh; only the order of the
float additions in the all-reduces differs; observed differences are ~1e-7 relative).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import io as io_lib
from ffn_research import parallel
from ffn_research import sweep
from ffn_research import train
from ffn_research import validation
from ffn_research.models import moe as moe_lib
from tests.conftest import REPO_ROOT
from tests.test_faults import one_line_error
from tests.test_faults import read_jsonl

RTOL = 1e-5
TINY = {
  'train.steps': 30,
  'train.log_every': 10,
  'train.checkpoint_every': 0,
  'task.num_train': 256,
  'task.num_eval': 256,
  'task.grid_size': 257,
  'train.batch_size': 64,
}
TINY_MOE = {
  **TINY,
  'task.name': 'teacher_student',
  'model.d_model': 4,
  'model.d_ff': 8,
  'task.teacher_d_ff': 8,
  'model.moe.num_experts': 4,
  'model.moe.top_k': 2,
}


def make_config(overrides):
  config = config_lib.default_config()
  for key, value in overrides.items():
    section, name = key.rsplit('.', 1)
    node = config
    for part in section.split('.'):
      node = node[part]
    node[name] = value
  return config


def losses(workdir):
  """Every logged loss, then the final eval loss."""
  summary = json.load(open(os.path.join(workdir, 'summary.json')))
  return [r['loss'] for r in read_jsonl(os.path.join(workdir, 'metrics.jsonl'))] + [summary['eval_loss']]


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
  'overrides, named',
  [
    ({'parallel.data': -1}, 'parallel.data=-1'),
    ({'parallel.expert': 0}, 'parallel.expert=0'),
    ({'parallel.distributed': 'yes'}, 'parallel.distributed'),
    ({'parallel.expert': 2}, 'needs an MoE model'),
    ({**TINY_MOE, 'parallel.expert': 3}, 'must divide the number of experts'),
    ({**TINY_MOE, 'parallel.expert': 2, 'model.moe.dispatch': 'ragged'}, 'ragged'),
  ],
)
def test_bad_parallel_keys_are_one_line_config_errors(overrides, named):
  with pytest.raises(config_lib.ConfigError, match=named) as e:
    validation.validate(make_config(overrides))
  assert '\n' not in str(e.value)


def test_mesh_shape_against_the_devices():
  config = make_config({'parallel.data': 0, 'train.batch_size': 64})
  assert parallel.mesh_shape(config, 8) == (8, 1)
  assert parallel.mesh_shape(make_config({**TINY_MOE, 'parallel.expert': 2}), 8) == (4, 2)
  assert parallel.mesh_shape(make_config({'parallel.data': 2}), 8) == (2, 1)  # the first two devices
  with pytest.raises(config_lib.ConfigError, match='only 4 are present'):
    parallel.mesh_shape(make_config({'parallel.data': 8}), 4)
  with pytest.raises(config_lib.ConfigError, match=r'train.batch_size=100 must be divisible by the 8 devices'):
    parallel.mesh_shape(make_config({'train.batch_size': 100}), 8)
  assert parallel.build_mesh(make_config({})) is None  # one device here: the plain program


def test_launch_detection():
  assert parallel.launch_detected({}) is None
  assert parallel.launch_detected({'SLURM_JOB_ID': '7', 'SLURM_NTASKS': '1'}) is None  # a sweep array task
  assert 'SLURM' in parallel.launch_detected({'SLURM_JOB_ID': '7', 'SLURM_NTASKS': '4'})
  assert parallel.launch_detected({'JAX_COORDINATOR_ADDRESS': '10.0.0.1:1234'}) == 'JAX_COORDINATOR_ADDRESS'
  assert 'TPU' in parallel.launch_detected({'TPU_WORKER_HOSTNAMES': 'a,b'})
  assert parallel.launch_detected({'TPU_WORKER_HOSTNAMES': 'a'}) is None
  off = make_config({'parallel.distributed': 'off'}).parallel
  assert not parallel.initialize_distributed(off, {'JAX_COORDINATOR_ADDRESS': '10.0.0.1:1234'})
  assert not parallel.initialize_distributed(make_config({}).parallel, {})  # auto, nothing detected


def test_too_many_devices_is_a_one_line_error_from_the_cli(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=configs/regression.py',
      f'--workdir={tmp_path / "w"}',
      '--config.parallel.data=3',
      '--compilation_cache_dir=',
    ],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=300,
    env={**os.environ, 'JAX_PLATFORMS': 'cpu'},
  )
  assert proc.returncode == 2
  one_line_error(proc, 'parallel.data=3', 'only 1 are present')


# --------------------------------------------------------------------------- bf16


def test_bf16_compute_keeps_float32_params_optimizer_state_and_router():
  config = make_config({**TINY_MOE, 'model.dtype': 'bfloat16'})
  exp = train.Experiment(config)
  state = jax.eval_shape(exp.init, 0)
  floats = [
    x.dtype for x in jax.tree.leaves((state['params'], state['opt_state'])) if jnp.issubdtype(x.dtype, jnp.floating)
  ]
  assert floats and all(d == jnp.float32 for d in floats)
  x_TxD = jnp.ones((16, 4), jnp.bfloat16)

  def forward(params):  # traced only (jax.eval_shape): the dtypes are what is checked
    model = exp.merge(params)
    assert isinstance(model, moe_lib.MoE)
    return model.route(x_TxD), model.apply(x_TxD)

  (logits_TxE, routing), (y, aux) = jax.eval_shape(forward, state['params'])
  assert logits_TxE.dtype == jnp.float32 and routing.probs_TxE.dtype == jnp.float32
  assert routing.weight_TxJ.dtype == jnp.float32
  assert y.dtype == jnp.bfloat16 and aux['load_balance_loss'].dtype == jnp.float32


_BF16_SCRIPT = textwrap.dedent("""
    import json, sys
    from ffn_research import configfile, loop
    out = {}
    for name, path, overrides in (
        ('quickstart', 'configs/regression.py', {}),
        ('memorization', 'configs/memorization.py',
         {'task.num_facts': 256, 'task.num_relations': 4, 'task.num_objects': 64, 'model.num_layers': 1,
          'model.d_model': 32, 'model.d_ff': 128, 'train.steps': 600, 'train.batch_size': 128})):
      for dtype in ('float32', 'bfloat16'):
        config = configfile.get_config(path)
        for key, value in {**overrides, 'model.dtype': dtype, 'train.checkpoint_every': 0}.items():
          section, leaf = key.split('.')
          config[section][leaf] = value
        out[f'{name}/{dtype}'] = loop.train_and_evaluate(config, f'{sys.argv[1]}/{name}_{dtype}')
    print('RESULT ' + json.dumps(out))
""")


@pytest.mark.slow  # two quickstarts and two small transformers (~40 s idle)
def test_bf16_trains_like_float32(tmp_path):
  """bf16 compute reaches the float32 result within stated tolerances.

  Quickstart (2000 steps, x^2): held-out MSE within a factor 3 of float32 and below 1e-3
  (float32 reaches ~1.5e-5). Memorization (256 facts, 1-layer transformer): final accuracy
  within 0.05 of float32 and eval loss within 0.1 nats.
  """
  proc = subprocess.run(
    [sys.executable, '-c', _BF16_SCRIPT, str(tmp_path)],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=600,
    env={**os.environ, 'JAX_PLATFORMS': 'cpu'},
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.split('RESULT ')[-1])
  print({k: (v['eval_loss'], v.get('accuracy')) for k, v in out.items()})  # shown with -s
  f32, bf16 = out['quickstart/float32'], out['quickstart/bfloat16']
  assert bf16['status'] == 'completed' and bf16['eval_loss'] < 1e-3
  assert bf16['eval_loss'] < 3 * f32['eval_loss'] + 1e-4, (bf16['eval_loss'], f32['eval_loss'])
  f32, bf16 = out['memorization/float32'], out['memorization/bfloat16']
  assert abs(bf16['accuracy'] - f32['accuracy']) < 0.05, (bf16['accuracy'], f32['accuracy'])
  assert abs(bf16['eval_loss'] - f32['eval_loss']) < 0.1, (bf16['eval_loss'], f32['eval_loss'])


# --------------------------------------------------------------------------- 4 host devices

_MESH_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax
    from ffn_research import loop, parallel, programs, train
    from tests import test_parallel
    assert jax.device_count() == 4
    base, checks = getattr(test_parallel, sys.argv[2]), {}
    for mesh in sys.argv[3:]:
      data, expert = map(int, mesh.split('x'))
      config = test_parallel.make_config({**base, 'parallel.data': data, 'parallel.expert': expert})
      loop.train_and_evaluate(config, f'{sys.argv[1]}/{mesh}')
      if data * expert > 1:  # how the run's program lays things out
        progs = programs.LonePrograms(train.Experiment(config, parallel.build_mesh(config)))
        specs = {'/'.join(str(getattr(k, 'key', getattr(k, 'name', getattr(k, 'idx', k)))) for k in p): list(s.spec)
                 for p, s in jax.tree_util.tree_leaves_with_path(progs.shardings)}
        traced = progs.traced([config])
        text = progs.chunk.lower(progs.abstract_state([config], traced), 10, traced).as_text()
        checks[mesh] = {'w1': specs['params/w1/value'],
                        'mu_w1': [v for k, v in specs.items() if 'opt_state' in k and k.endswith('w1/value')],
                        'data_constraint': '[{"data"}' in text}
    print('RESULT ' + json.dumps(checks))
""")


def _train_on_meshes(tmp_path, base: str, meshes):
  """Train TINY or TINY_MOE on 1x1 and on each 'DATAxEXPERT' mesh of 4 host devices; same losses."""
  env = {**os.environ, 'XLA_FLAGS': '--xla_force_host_platform_device_count=4', 'JAX_PLATFORMS': 'cpu'}
  proc = subprocess.run(
    [sys.executable, '-c', _MESH_SCRIPT, str(tmp_path), base, '1x1', *meshes],
    cwd=REPO_ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=1200,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  checks = json.loads(proc.stdout.split('RESULT ')[-1])
  ref = losses(tmp_path / '1x1')
  assert len(ref) == 4  # 3 logged chunks and the eval loss
  for mesh in meshes:
    np.testing.assert_allclose(losses(tmp_path / mesh), ref, rtol=RTOL, err_msg=mesh)
    assert checks[mesh]['data_constraint'] == (mesh[0] != '1')  # the batch is laid out over 'data'
  return checks


@pytest.mark.slow  # a fresh process with 4 host devices, 3 tiny runs
def test_data_parallel_matches_one_device(tmp_path):
  checks = _train_on_meshes(tmp_path, 'TINY', ['2x1', '4x1'])
  assert checks['4x1']['w1'] == []  # parameters replicated


@pytest.mark.slow  # a fresh process with 4 host devices, 5 small MoE runs
def test_moe_data_and_expert_parallel_match_one_device(tmp_path):
  checks = _train_on_meshes(tmp_path, 'TINY_MOE', ['2x1', '4x1', '1x2', '2x2'])
  # Expert weights and their Adam moments live split over 'expert'; replicated without an expert axis.
  assert checks['1x2']['w1'] == ['expert'] and checks['2x2']['w1'] == ['expert']
  assert len(checks['1x2']['mu_w1']) == 2 and all(s == ['expert'] for s in checks['1x2']['mu_w1'])
  assert checks['2x1']['w1'] == []


# --------------------------------------------------------------------------- two processes


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _two_processes(tmp_path, args):
  """experiments.train as processes 0 and 1 of one jax.distributed job; process i gets workdir p{i}."""
  port, procs = _free_port(), []
  for i in range(2):
    env = {
      **os.environ,
      'JAX_PLATFORMS': 'cpu',
      'JAX_COORDINATOR_ADDRESS': f'127.0.0.1:{port}',
      'JAX_NUM_PROCESSES': '2',
      'JAX_PROCESS_ID': str(i),
    }
    procs.append(
      subprocess.Popen(
        [sys.executable, '-m', 'experiments.train', f'--workdir={tmp_path / f"p{i}"}', *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
      )
    )
  outs = [p.communicate(timeout=300) for p in procs]
  for p, (_, stderr) in zip(procs, outs, strict=True):
    assert p.returncode == 0, stderr[-3000:]
  assert not os.path.exists(tmp_path / 'p1')  # process 1 never touches a workdir
  # gloo announces its connections on stdout; everything else on stdout is ours
  return ['\n'.join(line for line in stdout.splitlines() if not line.startswith('[Gloo]')) for stdout, _ in outs]


@pytest.mark.slow  # four launches of two JAX processes through jax.distributed (~40 s idle)
def test_two_processes_match_one_and_only_process_0_writes(tmp_path):
  args = [
    '--config=configs/regression.py',
    '--compilation_cache_dir=',
    *(f'--config.{k}={v}' for k, v in {**TINY, 'train.checkpoint_every': 10}.items()),
  ]
  one = subprocess.run(
    [sys.executable, '-m', 'experiments.train', f'--workdir={tmp_path / "one"}', *args],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=300,
    env={**os.environ, 'JAX_PLATFORMS': 'cpu'},
  )
  assert one.returncode == 0, one.stderr[-3000:]
  out0, out1 = _two_processes(tmp_path, args)
  assert 'mesh: data=2, expert=1 over 2 cpu devices in 2 process(es)' in out0
  assert 'summary:' in out0 and 'step ' in out0 and out1.strip() == ''
  assert sorted(os.listdir(tmp_path / 'p0')) == sorted(os.listdir(tmp_path / 'one'))
  np.testing.assert_allclose(losses(tmp_path / 'p0'), losses(tmp_path / 'one'), rtol=RTOL)
  # Killed after its step-20 checkpoint: process 0 restores it and hands it to process 1.
  shutil.rmtree(tmp_path / 'p0' / 'checkpoints' / '30')
  os.remove(tmp_path / 'p0' / 'summary.json')
  out0, _ = _two_processes(tmp_path, args)
  assert 'resumed from checkpoint at step 20' in out0
  assert [r['step'] for r in read_jsonl(tmp_path / 'p0' / 'metrics.jsonl')] == [10, 20, 30]
  np.testing.assert_allclose(losses(tmp_path / 'p0'), losses(tmp_path / 'one'), rtol=RTOL)
  # A finished run: process 0 reads its summary and tells process 1; both stop.
  out0, out1 = _two_processes(tmp_path, args)
  assert 'already completed' in out0 and out1.strip() == ''


def test_a_run_may_resume_on_another_mesh_but_not_with_another_model(tmp_path):
  defaults = config_lib.default_config().to_dict()
  io_lib.check_or_write_config(
    str(tmp_path), make_config({'parallel.data': 4}).to_dict(), defaults, free=('parallel.',)
  )
  io_lib.check_or_write_config(
    str(tmp_path), make_config({'parallel.data': 2}).to_dict(), defaults, free=('parallel.',)
  )
  assert json.load(open(tmp_path / 'config.json'))['parallel']['data'] == 2
  with pytest.raises(io_lib.WorkdirError, match=r'differs in: model\.d_ff'):
    io_lib.check_or_write_config(
      str(tmp_path), make_config({'parallel.data': 2, 'model.d_ff': 8}).to_dict(), defaults, free=('parallel.',)
    )


def test_a_sweep_refuses_parallel_keys_it_cannot_honour():
  with pytest.raises(config_lib.ConfigError, match='a sweep shards its run axis'):
    sweep.expand(make_config({**TINY_MOE, 'parallel.expert': 2}), [{'train.seed': 0}])
  assert len(sweep.expand(make_config({'parallel.data': 1}), [{'train.seed': 0}, {'train.seed': 1}])) == 2
