"""d_ff padding: runs of different widths in one program (programs.PAD_FLOPS_FACTOR).

A padded run must equal the same run alone: its initialisation does not depend on the
allocated width (per-unit keys, true fan-in/fan-out), padded units are exactly zero and get
exactly zero updates (AdamW weight decay and global-norm clipping included), and summaries
carry the run's own counts. Training results agree to float32 rounding (a wider matmul sums
extra zeros in a different order), not bit for bit.
"""

import itertools
import json

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import checkpoints as checkpoints_lib
from ffn_research import config as config_lib
from ffn_research import loop
from ffn_research import models
from ffn_research import programs
from ffn_research import sweep
from ffn_research import tasks
from ffn_research import train
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import inits


def tiny_config(activation='relu', d_ff=8):
  c = config_lib.default_config()
  c.model.activation, c.model.d_ff = activation, d_ff
  c.task.num_train, c.task.num_eval, c.task.grid_size = 64, 64, 65
  c.train.steps, c.train.log_every, c.train.batch_size = 20, 10, 16
  c.train.warmup_steps, c.train.checkpoint_every = 5, 0
  return c


def padding_outside(x: np.ndarray, true_shape) -> np.ndarray:
  """The entries of x outside its leading true_shape block (the padded units)."""
  x = np.array(x, copy=True)
  x[tuple(slice(0, n) for n in true_shape)] = 0
  return x


# --------------------------------------------------------------------------- the module


@pytest.mark.parametrize('activation,init', [('relu', 'he_normal'), ('swiglu', 'xavier_uniform')])
def test_init_and_forward_do_not_depend_on_padding(activation, init):
  lone = ffn_lib.FFN(3, 5, activation, init=init, d_out=2, rngs=nnx.Rngs(params=7))
  wide = ffn_lib.FFN(3, 64, activation, init=init, d_out=2, d_ff_true=5, rngs=nnx.Rngs(params=7))
  for name in ('w1', 'w2', 'b1', 'b2') + (('w_gate', 'b_gate') if lone.gated else ()):
    a, b = np.asarray(getattr(lone, name)[...]), np.asarray(getattr(wide, name)[...])
    np.testing.assert_array_equal(b[tuple(slice(0, n) for n in a.shape)], a, err_msg=name)  # bit for bit
    assert not padding_outside(b, a.shape).any(), name
  x = jax.random.normal(jax.random.PRNGKey(1), (7, 3))
  np.testing.assert_allclose(wide(x), lone(x), rtol=1e-6, atol=1e-7)
  h = np.asarray(wide.hidden(x))
  assert not h[:, 5:].any()


@pytest.mark.parametrize('partitionable', [True, pytest.param(False, marks=pytest.mark.slow)])
def test_per_unit_rows_do_not_depend_on_the_allocated_width(partitionable):
  """Both draws of inits.per_unit: one matrix (partitionable threefry) or fold_in per unit."""
  before = jax.config.jax_threefry_partitionable
  jax.config.update('jax_threefry_partitionable', partitionable)
  try:
    for name in ('xavier_uniform', 'lecun_normal'):
      init = inits.get(name)
      draw = lambda units, init=init: np.asarray(
        inits.per_unit(init, jax.random.PRNGKey(3), units, 4, fan_in=4, fan_out=5, true_units=5)
      )
      narrow, wide = draw(5), draw(64)
      np.testing.assert_array_equal(wide[:5], narrow)
      assert not wide[5:].any() and np.all(narrow != 0)
  finally:
    jax.config.update('jax_threefry_partitionable', before)


@pytest.mark.slow
def test_per_unit_init_has_the_variance_scaling_std():
  """std = sqrt(scale / n) with the true fans (n = fan_in, or the mean of fan_in and fan_out)."""
  key = jax.random.PRNGKey(0)
  for name, fan_in, fan_out, want in [
    ('xavier_uniform', 256, 64, np.sqrt(2 / (256 + 64))),
    ('lecun_normal', 256, 64, np.sqrt(1 / 256)),
    ('he_normal', 256, 64, np.sqrt(2 / 256)),
    ('small', 256, 64, 0.1 * np.sqrt(1 / 256)),
  ]:
    init = inits.get(name)
    draw = jax.jit(
      lambda k, f_in, f_out, n, init=init: inits.per_unit(init, k, 128, 256, fan_in=f_in, fan_out=f_out, true_units=n)
    )
    w = np.asarray(draw(key, fan_in, fan_out, 64))
    assert not w[64:].any()
    assert abs(w[:64].std() / want - 1) < 0.03, name
    assert abs(w[:64].mean()) < 0.03 * want, name


@pytest.mark.slow
def test_traced_width_equals_static_width():
  """The width a vmapped init receives as a traced value builds the same weights as a static one."""
  cfg = tiny_config('swiglu', d_ff=32)
  exp = train.Experiment(cfg)
  lone = train.Experiment(tiny_config('swiglu', d_ff=8)).init(3)
  padded = jax.jit(jax.vmap(lambda seed, width: exp.init(seed, None, width)))(jnp.array([3, 3]), jnp.array([8, 32]))
  for (path, a), b in zip(
    jax.tree_util.tree_leaves_with_path(lone['params']), jax.tree.leaves(padded['params']), strict=True
  ):
    a, b = np.asarray(a), np.asarray(b)
    np.testing.assert_array_equal(b[0][tuple(slice(0, n) for n in a.shape)], a, err_msg=str(path))
    assert not padding_outside(b[0], a.shape).any()
  assert int(padded['params']['width'][...][0]) == 8 and int(padded['params']['width'][...][1]) == 32


# --------------------------------------------------------------------------- grouping


def widths_of(groups):
  return [sorted({r.config.model.d_ff for r in g}) for g in groups]


def test_grouping_splits_by_the_flop_bound():
  base = tiny_config()
  grid = sweep.product(
    sweep.values('model.d_ff', [4, 8, 16, 32, 64, 128, 256, 512, 1024]),
    sweep.values('model.activation', ['relu', 'swiglu']),
    sweep.values('train.seed', range(3)),
  )
  runs = sweep.expand(base, grid)
  three = [[4, 8, 16], [32, 64, 128], [256, 512, 1024]]
  assert widths_of(sweep.group_runs(runs, 2.0)) == three * 2  # relu's programs, then swiglu's
  assert widths_of(sweep.group_runs(runs, 4.0)) == [[4, 8, 16, 32, 64, 128, 256], [512, 1024]] * 2
  assert widths_of(sweep.group_runs(runs, 1.0)) == [[w] for w in [4, 8, 16, 32, 64, 128, 256, 512, 1024]] * 2
  task = tasks.build_task(base)
  for factor in (1.0, 1.5, 2.0, 3.0, 4.0, 10.0):
    groups = sweep.group_runs(runs, factor)
    assert sorted(r.name for g in groups for r in g) == sorted(r.name for r in runs)
    for g in groups:
      assert len({r.config.model.activation for r in g}) == 1
      flops = [models.model_counts(r.config, task)['flops_per_token'] for r in g]
      assert len(g) * max(flops) <= factor * sum(flops)  # the bound holds ...
    for g, h in itertools.pairwise(groups):  # ... and greedy: the next program's narrowest width would break it
      if g[0].config.model.activation == h[0].config.model.activation:
        w = min(r.config.model.d_ff for r in h)
        ext = g + [r for r in h if r.config.model.d_ff == w]
        flops = [models.model_counts(r.config, task)['flops_per_token'] for r in ext]
        assert len(ext) * max(flops) > factor * sum(flops)
  with pytest.raises(config_lib.ConfigError, match='pad_flops_factor=0.5 must be a number >= 1'):
    sweep.group_runs(runs, 0.5)


def test_only_dense_ffns_without_dropout_pad():
  grid = sweep.product(sweep.values('model.d_ff', [8, 16]), sweep.values('train.seed', range(2)))
  moe = tiny_config()
  moe.task.name, moe.model.d_model, moe.model.moe.num_experts = 'teacher_student', 4, 2
  dropout = tiny_config()
  dropout.model.dropout_rate = 0.1
  for base, n in [(tiny_config(), 1), (moe, 2), (dropout, 2)]:
    assert len(sweep.group_runs(sweep.expand(base, grid), 100.0)) == n
  seq = config_lib.tiny_transformer_config('memorization', None)  # the transformer's FFNs pad too
  assert len(sweep.group_runs(sweep.expand(seq, sweep.values('model.d_ff', [128, 256])), 2.0)) == 1


# --------------------------------------------------------------------------- through the sweep


def test_padded_sweep_equals_lone_runs_and_reports_true_counts(tmp_path):
  """A width-4 and a width-8 run in one program padded to 32; the width-4 run vs the same run
  alone; checkpoints hold each run's own shapes (load_run), summaries its own counts."""
  base = tiny_config()
  base.train.optimizer, base.train.weight_decay, base.train.grad_clip = 'adamw', 0.1, 0.05  # clipping active
  grid = sweep.values('model.d_ff', [4, 8, 32])
  assert len(sweep.group_runs(sweep.expand(base, grid), 100.0)) == 1
  summaries = sweep.run_sweep(base, grid, str(tmp_path / 'sweep'), pad_flops_factor=100.0, progress=False)
  task = tasks.build_task(base)
  for d_ff in (4, 8):
    name, cfg = f'd_ff={d_ff}', sweep.apply_overrides(base, {'model.d_ff': d_ff})
    got = summaries[name]
    counts = models.model_counts(cfg, task)
    assert {k: got[k] for k in counts} == counts and got['num_params'] == 3 * d_ff + 1
    assert got['sweep_padded_d_ff'] == 32 and got['sweep_group_size'] == 3
    assert jax.tree.leaves(loop.load_run(str(tmp_path / 'sweep' / 'runs' / name)).model.w2)[0].shape == (d_ff, 1)
    if d_ff == 8:
      continue
    lone = loop.train_and_evaluate(cfg, str(tmp_path / f'lone{d_ff}'))
    np.testing.assert_allclose(got['eval_loss'], lone['eval_loss'], rtol=1e-5)
    a = nnx.state(loop.load_run(str(tmp_path / 'sweep' / 'runs' / name)).model, nnx.Param)
    b = nnx.state(loop.load_run(str(tmp_path / f'lone{d_ff}')).model, nnx.Param)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
      assert x.shape == y.shape
      np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
  with open(tmp_path / 'sweep' / 'results.csv') as f:
    assert 'sweep_padded_d_ff' in f.readline().strip().split(',')


# --------------------------------------------------------------------------- long runs


@pytest.mark.slow
@pytest.mark.parametrize('activation', ['relu', 'swiglu'])
def test_width_16_padded_to_256_equals_lone_over_300_steps(activation):
  """The issue's test: 300 steps of AdamW with weight decay and active global-norm clipping.
  The padded program's padded units stay exactly 0 in params and optimizer state."""

  def cfg(d_ff):
    c = tiny_config(activation, d_ff)
    c.task.num_train, c.task.num_eval, c.task.grid_size = 256, 256, 257
    c.train.steps, c.train.batch_size = 300, 32
    c.train.optimizer, c.train.weight_decay, c.train.grad_clip = 'adamw', 0.1, 0.05
    return c

  lone_exp, wide_exp = train.Experiment(cfg(16)), train.Experiment(cfg(256))
  lone = programs.LonePrograms(lone_exp)
  lone_traced = lone.traced([cfg(16)])
  state_lone, _ = lone.chunk(lone.init([cfg(16)], lone_traced), 300, lone_traced)
  group = programs.GroupPrograms(wide_exp, 2, jax.local_devices()[:1])
  traced = group.traced([cfg(16), cfg(256)])
  state_group, metrics = group.chunk(group.init([cfg(16), cfg(256)], traced), 300, traced)
  assert float(np.asarray(metrics['grad_norm'])[0]) > 0.05  # clipping was active
  true = jax.eval_shape(lone_exp.init, 0)
  host = jax.device_get(state_group)
  for (path, x), a in zip(
    jax.tree_util.tree_leaves_with_path(host['params']), jax.tree.leaves(true['params']), strict=True
  ):
    assert not padding_outside(np.asarray(x)[0], a.shape).any(), jax.tree_util.keystr(path)
  cut = group.unstack(state_group, [true])[0]
  # Padding the cut state back gives the group's state: every padded entry, of the parameters and
  # of the flat optimizer vectors (Adam's mu and nu, parameter by parameter), is exactly 0.
  back = jax.tree.map(lambda x: x[0], jax.device_get(group.stack([cut, cut])))
  for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(back), jax.tree.leaves(host), strict=True):
    np.testing.assert_array_equal(x, np.asarray(y)[0], err_msg=jax.tree_util.keystr(path))
  for k in ('params', 'opt_state'):
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(cut[k]), jax.tree.leaves(state_lone[k]), strict=True):
      np.testing.assert_allclose(x, y, rtol=1e-4, atol=2e-6, err_msg=jax.tree_util.keystr(path))
  ev_lone = float(lone.evaluate(state_lone['params'], state_lone['data'])['eval_loss'])
  ev_group = float(np.asarray(group.evaluate(state_group['params'], state_group['data'])['eval_loss'])[0])
  np.testing.assert_allclose(ev_group, ev_lone, rtol=1e-5)


@pytest.mark.slow  # two sweeps and a resume of a padded group (~15 s)
def test_padded_group_resumes_bit_exactly_from_its_checkpoints(tmp_path, monkeypatch):
  """Checkpoints hold each run's own shapes; a killed padded group restores them zero-padded."""
  base = tiny_config()
  base.train.steps, base.train.checkpoint_every = 40, 20
  grid = sweep.values('model.d_ff', [4, 8, 16])
  ref = sweep.run_sweep(base, grid, str(tmp_path / 'ref'), pad_flops_factor=100.0, progress=False)
  real_save, saved = checkpoints_lib.Checkpointer.save, []

  def save_then_die(self, step, state, meta):
    real_save(self, step, state, meta)
    saved.append(jax.tree.leaves(state['params']['w2'])[0].shape)  # (the run's own d_ff, 1)
    if step == 20 and len(saved) == 3:
      raise KeyboardInterrupt

  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', save_then_die)
  with pytest.raises(KeyboardInterrupt):
    sweep.run_sweep(base, grid, str(tmp_path / 'run'), pad_flops_factor=100.0, progress=False)
  assert saved == [(4, 1), (8, 1), (16, 1)]
  monkeypatch.setattr(checkpoints_lib.Checkpointer, 'save', real_save)
  out = sweep.run_sweep(base, grid, str(tmp_path / 'run'), pad_flops_factor=100.0, progress=False)
  for name, summary in ref.items():
    assert out[name]['eval_loss'] == summary['eval_loss'] and out[name]['sweep_padded_d_ff'] == 16
    with open(tmp_path / 'run' / 'runs' / name / 'metrics.jsonl') as f:
      assert [json.loads(line)['step'] for line in f] == [10, 20, 30, 40]


@pytest.mark.slow  # a transformer compiled twice (~30 s)
def test_transformer_ffn_blocks_pad(tmp_path):
  """The transformer's FFN blocks: d_ff 16 in a program padded to 64 vs the run alone."""
  base = config_lib.tiny_transformer_config('memorization', None)
  base.model.d_model, base.model.d_ff, base.model.num_heads = 16, 64, 2
  base.task.num_facts, base.task.num_objects = 64, 32
  base.train.steps, base.train.log_every, base.train.batch_size = 40, 20, 16
  base.train.warmup_steps, base.train.checkpoint_every = 5, 0
  grid = sweep.values('model.d_ff', [16, 64])
  summaries = sweep.run_sweep(base, grid, str(tmp_path / 'sweep'), progress=False)
  cfg = sweep.apply_overrides(base, {'model.d_ff': 16})
  lone = loop.train_and_evaluate(cfg, str(tmp_path / 'lone'))
  got = summaries['d_ff=16']
  assert got['sweep_padded_d_ff'] == 64 and got['num_ffn_params'] == lone['num_ffn_params']
  np.testing.assert_allclose(got['eval_loss'], lone['eval_loss'], rtol=1e-5)
  a = nnx.state(loop.load_run(str(tmp_path / 'sweep' / 'runs' / 'd_ff=16')).model, nnx.Param)
  b = nnx.state(loop.load_run(str(tmp_path / 'lone')).model, nnx.Param)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)
