"""Traced per-run scalars (identity.TRACED_KEYS): runs that differ only in dropout rate, MoE balancing
coefficients, router jitter or label noise share one vmapped program, and each run of such a group
equals the same run trained alone; a value of 0 on a compiled-in path changes nothing, bit for bit."""

import json

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import identity
from ffn_research import loop
from ffn_research import models
from ffn_research import programs
from ffn_research import sweep
from ffn_research import tasks
from ffn_research import train
from ffn_research.models import ffn as ffn_lib

# A vmapped group rounds float32 reductions differently from a lone run (tests/test_sweep.py).
RTOL, ATOL = 1e-4, 1e-7


def teacher_student(**overrides):
  """A tiny teacher-student config (20 steps); `overrides` are dotted keys."""
  c = config_lib.default_config()
  c.task.name, c.model.d_model, c.model.d_ff, c.task.teacher_d_ff = 'teacher_student', 4, 8, 4
  c.task.num_train, c.task.num_eval = 64, 64
  c.train.steps, c.train.log_every, c.train.batch_size = 20, 10, 16
  c.train.warmup_steps, c.train.checkpoint_every = 5, 0
  return sweep.apply_overrides(c, overrides)


def moe(**overrides):
  return teacher_student(**{'model.moe.num_experts': 4, 'model.moe.top_k': 2, **overrides})


def read_jsonl(path):
  with open(path) as f:
    return [json.loads(line) for line in f]


def assert_group_equals_lone(base, grid, tmp_path):
  """One group for the whole grid; every run's summary and metrics lines equal its lone run's."""
  assert len(sweep.group_runs(sweep.expand(base, grid))) == 1
  summaries = sweep.run_sweep(base, grid, str(tmp_path / 'sweep'), progress=False)
  assert {s['sweep_group_size'] for s in summaries.values()} == {len(grid)}
  for overrides in grid:
    name = sweep.run_name(overrides)
    alone = loop.train_and_evaluate(sweep.apply_overrides(base, overrides), str(tmp_path / name))
    assert summaries[name]['status'] == alone['status'] == 'completed'
    np.testing.assert_allclose(summaries[name]['eval_loss'], alone['eval_loss'], rtol=RTOL, atol=ATOL, err_msg=name)
    got = read_jsonl(str(tmp_path / 'sweep' / 'runs' / name / 'metrics.jsonl'))
    want = read_jsonl(str(tmp_path / name / 'metrics.jsonl'))
    for g, w in zip(got, want, strict=True):
      for key in ('loss', 'total_loss', 'grad_norm', 'param_norm'):
        np.testing.assert_allclose(g[key], w[key], rtol=RTOL, atol=ATOL, err_msg=f'{name} {key}')
  return summaries


def test_traced_keys():
  assert identity.TRACED_KEYS == (
    'train.learning_rate',
    'train.weight_decay',
    'model.dropout_rate',
    'model.moe.load_balance_coef',
    'model.moe.z_loss_coef',
    'model.moe.bias_update_rate',
    'model.moe.jitter',
    'task.feature_sparsity',
    'task.noise_std',
  )
  assert identity.PER_RUN_KEYS == ('train.seed', *identity.TRACED_KEYS)
  # every traced key is a config key, and each model key names the Hyper variables that read it
  flat = config_lib.flat_keys(config_lib.default_config())
  assert all(k in flat for k in identity.TRACED_KEYS)
  assert {identity.role(k) for k in identity.TRACED_KEYS} == {identity.TRACED}
  config = moe(**{'model.moe.num_shared_experts': 1})
  m = nnx.eval_shape(lambda: models.build_model(config, tasks.build_task(config), nnx.Rngs(params=0)))
  names = {path[-1] for path, _ in nnx.to_flat_state(nnx.state(m, models.Hyper))}
  assert names == {k.rsplit('.', 1)[-1] for k in models.TRACED_KEYS}


def test_program_config_turns_a_path_on_when_any_run_uses_it():
  configs = [teacher_student(), teacher_student(**{'model.dropout_rate': 0.3, 'train.learning_rate': 0.1})]
  g = programs.program_config(configs)
  assert (g.model.dropout_rate, g.train.learning_rate, g.model.moe.jitter) == (0.3, 0.1, 0.0)
  assert configs[0].model.dropout_rate == 0.0  # the runs' configs are untouched
  assert sweep.group_key(configs[0]) == sweep.group_key(configs[1]) == sweep.group_key(g)
  wider = teacher_student(**{'model.d_ff': 16})
  assert sweep.group_key(configs[0], pad=False) != sweep.group_key(wider, pad=False)
  # Widths pad into one program (programs.PAD_FLOPS_FACTOR) unless a run of the group has dropout.
  runs = [sweep.Run(str(i), {}, c) for i, c in enumerate([configs[0], wider])]
  assert [len(g) for g in sweep.group_runs(runs)] == [2]
  runs.append(sweep.Run('2', {}, configs[1]))
  assert sorted(len(g) for g in sweep.group_runs(runs)) == [1, 2]


def test_dropout_rate_zero_is_the_identity_bit_for_bit():
  x = jax.random.normal(jax.random.PRNGKey(0), (32, 16))
  for dtype in (jnp.float32, jnp.bfloat16):
    y = jax.jit(ffn_lib.dropout)(x.astype(dtype), jnp.float32(0.0), jax.random.PRNGKey(1))
    assert y.dtype == dtype and np.array_equal(np.asarray(y), np.asarray(x.astype(dtype)))
  y = jax.jit(ffn_lib.dropout)(x, jnp.float32(0.5), jax.random.PRNGKey(1))
  kept = np.asarray(y) != 0
  np.testing.assert_array_equal(np.asarray(y)[kept], 2 * np.asarray(x)[kept])
  assert 0.35 < kept.mean() < 0.65


def _chunk_params(config, runs, steps=20):
  """Parameters after `steps` lone steps of `config`'s program, for each config of `runs`'s traced values."""
  exp = train.Experiment(config)
  init, chunk = jax.jit(exp.init), jax.jit(exp.train_chunk, static_argnums=1)
  out = []
  for run in runs:
    values = {k: jnp.float32(v) for k, v in train.traced_values(run).items()}
    out.append(chunk(init(0, values), steps, values)[0]['params'])
  return out


def test_dense_group_equals_lone_runs_and_zero_is_bit_identical():
  """Runs differing in dropout rate and label noise, vmapped in one program, equal the same program
  run alone per run (float32 tolerance); and the rate-0 run of that program, whose dropout path is
  compiled in, equals the program without the path bit for bit after 20 steps."""
  plain = teacher_student()
  runs = [plain, teacher_student(**{'model.dropout_rate': 0.3}), teacher_student(**{'task.noise_std': 0.5})]
  assert len(sweep.group_runs(sweep.expand(plain, [{}, {'model.dropout_rate': 0.3}, {'task.noise_std': 0.5}]))) == 1
  exp = train.Experiment(programs.program_config(runs))
  values = [{k: jnp.float32(v) for k, v in train.traced_values(r).items()} for r in runs]
  values_R = jax.tree.map(lambda *v: jnp.stack(v), *values)
  states = jax.jit(jax.vmap(exp.init))(jnp.zeros(3, jnp.int32), values_R)  # label noise per run
  group = jax.jit(jax.vmap(lambda s, v: exp.train_chunk(s, 20, v)))(states, values_R)[0]['params']
  run = lambda i: jax.tree.map(lambda x: x[i], states)
  chunk = jax.jit(exp.train_chunk, static_argnums=1)
  lone = [chunk(run(i), 20, values[i])[0]['params'] for i in range(3)]
  for i, alone in enumerate(lone):
    for a, b in zip(jax.tree.leaves(group), jax.tree.leaves(alone), strict=True):
      np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=RTOL, atol=1e-6)
  without = jax.jit(train.Experiment(plain).train_chunk, static_argnums=1)(run(0), 20)[0]['params']
  for a, b in zip(jax.tree.leaves(without), jax.tree.leaves(lone[0]), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  # each value was really used: the dropout and the noisy run trained differently from the plain one
  for alone in lone[1:]:
    assert not np.allclose(jax.tree.leaves(alone)[0], jax.tree.leaves(lone[0])[0], rtol=1e-3)


@pytest.mark.slow  # two MoE compiles (~15 s)
def test_moe_zero_on_a_compiled_in_path_is_bit_identical():
  """As above for an MoE with the dropout and router-jitter paths compiled in (both at 0)."""
  plain = moe()
  on = programs.program_config([plain, moe(**{'model.dropout_rate': 0.3, 'model.moe.jitter': 0.1})])
  [without] = _chunk_params(plain, [plain])
  with_path, used = _chunk_params(on, [plain, on])
  for a, b in zip(jax.tree.leaves(without), jax.tree.leaves(with_path), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert not np.array_equal(jax.tree.leaves(used)[0], jax.tree.leaves(without)[0])


@pytest.mark.slow  # one group and three lone runs through the loop (~25 s)
def test_dropout_and_label_noise_vmapped_equal_lone_runs(tmp_path):
  base = teacher_student()
  grid = [{'model.dropout_rate': 0.0}, {'model.dropout_rate': 0.3}, {'model.dropout_rate': 0.0, 'task.noise_std': 0.5}]
  summaries = assert_group_equals_lone(base, grid, tmp_path)
  plain = summaries['dropout_rate=0.0']
  # each value was really used, per run
  for name in ('dropout_rate=0.3', 'dropout_rate=0.0,noise_std=0.5'):
    assert not np.isclose(summaries[name]['final_loss'], plain['final_loss'], rtol=1e-3), name


@pytest.mark.slow  # one MoE group and five lone MoE runs (~40 s)
def test_moe_balancing_scalars_vmapped_equal_lone_runs(tmp_path):
  keys = ('load_balance_coef', 'z_loss_coef', 'bias_update_rate', 'jitter')
  base = moe(**{f'model.moe.{k}': 0.0 for k in keys})
  values = {'load_balance_coef': 0.5, 'z_loss_coef': 0.1, 'bias_update_rate': 0.01, 'jitter': 0.2}
  grid = [{'model.moe.jitter': 0.0}] + [{f'model.moe.{k}': v} for k, v in values.items()]
  summaries = assert_group_equals_lone(base, grid, tmp_path)
  lines = {
    sweep.run_name(o): read_jsonl(str(tmp_path / 'sweep' / 'runs' / sweep.run_name(o) / 'metrics.jsonl'))[-1]
    for o in grid
  }
  plain = lines['jitter=0.0']
  assert plain['total_loss'] == plain['loss']  # no aux loss at coefficients 0
  lb, z = lines['load_balance_coef=0.5'], lines['z_loss_coef=0.1']
  np.testing.assert_allclose(lb['aux/load_balance_loss'], 0.5 * lb['aux/load_balance'], rtol=1e-5)
  np.testing.assert_allclose(z['aux/z_loss'], 0.1 * z['aux/router_z'], rtol=1e-5)
  for name in ('bias_update_rate=0.01', 'jitter=0.2'):
    assert not np.isclose(summaries[name]['final_loss'], summaries['jitter=0.0']['final_loss'], rtol=1e-4)
  config, model, _ = loop.load_run(str(tmp_path / 'sweep' / 'runs' / 'bias_update_rate=0.01'))
  assert np.abs(np.asarray(model.routing_bias[...])).max() > 0 and model.bias_update_rate[...] == np.float32(0.01)
  _, plain_model, _ = loop.load_run(str(tmp_path / 'sweep' / 'runs' / 'jitter=0.0'))
  assert np.all(np.asarray(plain_model.routing_bias[...]) == 0)


def test_every_hyper_variable_names_a_traced_key_and_hyper_state_fills_each_by_it():
  exp = train.Experiment(moe(**{'model.moe.num_shared_experts': 1}))
  keys = [v.key for _, v in exp._hyper.flat_state()]
  assert set(keys) == set(models.TRACED_KEYS)  # the routed layer's five and the shared experts' dropout
  values = {k: 0.01 * (i + 1) for i, k in enumerate(models.TRACED_KEYS)}
  filled = models.hyper_state(exp._hyper, values)
  assert {v.key: float(v.get_value()) for _, v in filled.flat_state()} == pytest.approx(values)
  dense = train.Experiment(teacher_student())
  assert [v.key for _, v in dense._hyper.flat_state()] == ['model.dropout_rate']
