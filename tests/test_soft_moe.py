"""Soft MoE (model.moe.router=soft): an independent NumPy reference in outputs and gradients, the
group structure (permutation equivariance, dependence within a group only), counts held against the
real tree and the real computation, validation, and the causal refusal through the real entry point."""

import json
import math
import os
import subprocess
import sys

from flax import nnx
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

from ffn_research import config as config_lib
from ffn_research import models
from ffn_research import validation
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import moe as moe_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D, F = 5, 4  # d_model, expert width


def make_soft(num_experts=3, slots=2, activation='relu', *, seed=0, **kw):
  """A Soft MoE whose parameters (biases, slot parameters, scale) are all random."""
  m = moe_lib.MoE(
    D, F, activation, num_experts=num_experts, top_k=1, router='soft', slots_per_expert=slots, rngs=nnx.Rngs(seed), **kw
  )
  leaves, treedef = jax.tree.flatten(nnx.state(m, nnx.Param))
  draws = np.random.default_rng(seed + 100)
  new = [
    jnp.asarray(0.7 * draws.standard_normal(x.shape) + (2.0 if x.ndim == 0 else 0.0), x.dtype) for x in leaves
  ]  # the scale near 2 +- 0.7: peakier weights than at its init of 1
  nnx.update(m, jax.tree.unflatten(treedef, new))
  return m


def inputs(shape, seed=1):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


# --------------------------------------------------------------------------- NumPy reference


def _np_act(name, h):
  """The experts' hidden activation in NumPy: relu, or swiglu (silu(gate) * linear)."""
  if name == 'relu':
    return np.maximum(h, 0.0)
  lin, gate = h
  return gate / (1.0 + np.exp(-gate)) * lin


def numpy_soft_moe(params, x_GxMxD, num_experts, slots, activation):
  """Soft MoE written from the paper (Puigcerver et al. 2023, Algorithms 1-2), float64, loops:
  params = {'phi': (D, E p), 'scale': (), 'w1', 'w_gate' (gated), 'w2', 'b1', 'b_gate', 'b2': per expert}."""
  x = np.asarray(x_GxMxD, np.float64)
  phi = np.asarray(params['phi'], np.float64)
  phi_unit = phi / np.sqrt((phi**2).sum(0, keepdims=True) + 1e-6)
  out = np.zeros(x.shape[:2] + (np.asarray(params['w2']).shape[-1],))
  for g in range(x.shape[0]):
    xg = x[g]
    x_unit = xg / np.sqrt((xg**2).sum(1, keepdims=True) + 1e-6)
    logits = float(params['scale']) * x_unit @ phi_unit  # (M, S)
    dispatch = np.exp(logits - logits.max(0, keepdims=True))
    dispatch /= dispatch.sum(0, keepdims=True)  # each column (slot) sums to 1 over the tokens
    combine = np.exp(logits - logits.max(1, keepdims=True))
    combine /= combine.sum(1, keepdims=True)  # each row (token) sums to 1 over the slots
    slot_out = []
    for s in range(num_experts * slots):
      e = s // slots
      x_slot = sum(dispatch[m, s] * xg[m] for m in range(xg.shape[0]))
      h = x_slot @ params['w1'][e] + params['b1'][e]
      if activation == 'relu':
        a = _np_act('relu', h)
      else:
        a = _np_act('swiglu', (h, x_slot @ params['w_gate'][e] + params['b_gate'][e]))
      slot_out.append(a @ params['w2'][e] + params['b2'][e])
    for m in range(xg.shape[0]):
      out[g, m] = sum(combine[m, s] * slot_out[s] for s in range(len(slot_out)))
  return out


def module_params(m):
  """The module's parameters under the reference's names, as float64 NumPy arrays."""
  p = {k: np.asarray(v, np.float64) for k, v in m.expert_weights().items()}
  return {**p, 'phi': np.asarray(m.router_w[...], np.float64), 'scale': np.asarray(m.router_scale[...], np.float64)}


@pytest.mark.parametrize('activation,slots,num_experts', [('relu', 2, 3), ('swiglu', 1, 4), ('relu', 3, 1)])
@pytest.mark.parametrize('grouped', [False, True])
def test_matches_numpy_reference(activation, slots, num_experts, grouped):
  """Outputs equal the NumPy reference: the bare FFN's batch is one group; with capacity_scope
  'sequence' each sequence of (B, T, D) is its own group."""
  m = make_soft(num_experts, slots, activation, capacity_scope='sequence' if grouped else 'batch')
  x = inputs((3, 7, D)) if grouped else inputs((9, D))
  y, aux = m.apply(x)
  x_GxMxD = x if grouped else x[None]
  ref = numpy_soft_moe(module_params(m), x_GxMxD, num_experts, slots, activation)
  np.testing.assert_allclose(np.asarray(y).reshape(ref.shape), ref, rtol=2e-5, atol=2e-5)
  assert float(aux['dropped_fraction']) == 0 and float(aux['load_balance_loss']) == 0 == float(aux['z_loss'])
  np.testing.assert_allclose(np.sum(aux['load']), 1.0, rtol=1e-6)


def test_gradients_match_finite_differences_of_the_numpy_reference():
  """jax.grad of the module (float32) = central differences of the NumPy reference (float64), for
  every parameter (slot parameters and scale included) and the input; gated experts, 2 groups."""
  num_experts, slots = 2, 2
  m = make_soft(num_experts, slots, 'swiglu', capacity_scope='sequence')
  x = inputs((2, 4, D))
  r = np.random.default_rng(7).standard_normal((2, 4, D))
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)

  def loss(params, x):
    return jnp.sum(nnx.merge(graphdef, params, rest).apply(x)[0] * r)

  g_params, g_x = jax.grad(loss, argnums=(0, 1))(params, x)
  names = {'router_w': 'phi', 'router_scale': 'scale'}
  ref_params = module_params(m)

  def ref_loss(p, xx):
    return float(np.sum(numpy_soft_moe(p, xx, num_experts, slots, 'swiglu') * r))

  def finite_diff(array, f, h=1e-6):
    grad = np.zeros(array.shape)
    for i in np.ndindex(array.shape):
      old = array[i]
      array[i] = old + h
      up = f()
      array[i] = old - h
      down = f()
      array[i] = old
      grad[i] = (up - down) / (2 * h)
    return grad

  x64 = np.asarray(x, np.float64)
  for path, g in jax.tree_util.tree_leaves_with_path(g_params):
    name = path[-1].key if isinstance(path[-1], jax.tree_util.DictKey) else path[-2].key
    key = names.get(name, name)
    fd = finite_diff(ref_params[key], lambda: ref_loss(ref_params, x64))
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-4, atol=2e-5, err_msg=key)
  fd_x = finite_diff(x64, lambda: ref_loss(ref_params, x64))
  np.testing.assert_allclose(np.asarray(g_x), fd_x, rtol=1e-4, atol=2e-5)
  assert np.abs(np.asarray(g_params['router_scale'][...])) > 1e-4  # the scale does learn


# --------------------------------------------------------------------------- group structure


@pytest.mark.parametrize('grouped', [False, True])
def test_permutation_equivariant_over_the_tokens_of_a_group(grouped):
  m = make_soft(capacity_scope='sequence' if grouped else 'batch')
  x = inputs((2, 8, D)) if grouped else inputs((16, D))
  perm = np.random.default_rng(3).permutation(x.shape[-2])
  y = np.asarray(m.apply(x)[0])
  y_perm = np.asarray(m.apply(x[..., perm, :])[0])
  np.testing.assert_allclose(y_perm, y[..., perm, :], rtol=1e-5, atol=1e-6)
  assert not np.allclose(y_perm, y, atol=1e-3)  # the outputs do differ per token


def test_a_token_depends_on_its_group_and_on_no_other_group():
  """With per-sequence groups, changing token 5 of sequence 0 moves the outputs at every position
  of sequence 0 (earlier ones included: why a causal model must refuse it), and leaves the other
  sequences bit for bit unchanged. In the bare FFN the whole batch is one group."""
  m = make_soft(capacity_scope='sequence')
  x = inputs((3, 8, D))
  x2 = x.at[0, 5].set(x[0, 5] + 1.0)
  y, y2 = np.asarray(m.apply(x)[0]), np.asarray(m.apply(x2)[0])
  changed = np.abs(y2[0] - y[0]).max(-1)
  assert np.all(np.delete(changed, 5) > 1e-5), changed
  np.testing.assert_array_equal(y2[1:], y[1:])
  flat = make_soft(capacity_scope='batch')  # the bare FFN: one group, the whole batch
  y, y2 = (np.asarray(flat.apply(v.reshape(-1, D))[0]) for v in (x, x2))
  assert np.all(np.abs(y2 - y).max(-1)[8:] > 1e-5)  # rows of "other sequences" move too


def test_one_slot_gives_every_token_the_same_output():
  """E p = 1: the single combine weight is 1, so every token outputs the expert on the group's
  dispatch-weighted average; an exact special case."""
  m = make_soft(1, 1)
  y = np.asarray(m.apply(inputs((6, D)))[0])
  np.testing.assert_allclose(y, np.broadcast_to(y[:1], y.shape), rtol=1e-6, atol=1e-7)


def test_zero_scale_averages_uniformly():
  """scale 0: every slot is the plain mean of its group and every token the plain mean of the slots."""
  m = make_soft(2, 2)
  m.router_scale[...] = jnp.zeros(())
  x = inputs((6, D))
  _, aux = m.apply(x)
  np.testing.assert_allclose(aux['dispatch_weight_max'], 1 / 6, rtol=1e-6)
  np.testing.assert_allclose(aux['combine_weight_max'], 1 / 4, rtol=1e-6)
  np.testing.assert_allclose(aux['load'], [0.5, 0.5], rtol=1e-6)
  np.testing.assert_allclose(aux['router_entropy'], math.log(4), rtol=1e-6)


def test_route_refuses_and_no_token_is_dropped():
  m = make_soft()
  with pytest.raises(ValueError, match='soft_route'):
    m.route(inputs((4, D)))


def test_bfloat16_experts_float32_routing():
  m = make_soft(dtype='bfloat16')
  x = inputs((6, D))
  logits, routing = m.soft_route(x)
  assert logits.dtype == jnp.float32 and routing.combine_GxMxS.dtype == jnp.float32
  assert m.apply(x)[0].dtype == jnp.bfloat16


def test_frozen_router_freezes_slot_parameters_and_scale():
  m = make_soft(freeze_router=True)
  assert not {'router_w', 'router_scale'} & set(nnx.state(m, nnx.Param))
  assert m.num_params == make_soft().num_params


# --------------------------------------------------------------------------- counts


def soft_config(**moe_kw):
  config = config_lib.default_config()
  config.task.name = 'teacher_student'
  config.model.d_model, config.model.d_ff, config.task.teacher_d_ff = D, 8, 8
  config.task.num_train, config.task.num_eval = 64, 64
  config.train.batch_size = 12
  moe = config.model.moe
  moe.num_experts, moe.router, moe.slots_per_expert = 3, 'soft', 2
  for k, v in moe_kw.items():
    moe[k] = v
  return config


def matmul_flops(fn, *args) -> int:
  """2 x multiply-adds of every dot_general in the jaxpr of fn(*args) (nested jaxprs included)."""

  def walk(jaxpr):
    total = 0
    for eqn in jaxpr.eqns:
      if eqn.primitive.name == 'dot_general':
        (contract, _), _ = eqn.params['dimension_numbers']
        lhs = eqn.invars[0].aval.shape
        total += 2 * math.prod(eqn.outvars[0].aval.shape) * math.prod(lhs[i] for i in contract)
      for sub in jax.extend.core.jaxprs_in_params(eqn.params):
        total += walk(sub)
    return total

  return walk(jax.make_jaxpr(fn)(*args).jaxpr)


@pytest.mark.parametrize(
  'activation,use_bias,granularity,shared,slots',
  [('relu', True, 1, 0, 2), ('swiglu', False, 2, 1, 1), ('geglu', True, 1, 2, 3)],
)
def test_counts_match_the_tree_and_the_computation(activation, use_bias, granularity, shared, slots):
  """Parameters: formula = the tree; FLOPs per token: formula = the matmuls of the real forward pass
  (counted in its jaxpr) divided by the tokens, at the training group (the batch: 12 tokens)."""
  config = soft_config(granularity=granularity, num_shared_experts=shared, slots_per_expert=slots)
  config.model.activation, config.model.use_bias = activation, use_bias
  validation.validate(config)
  task = type('Task', (), {'output_dim': 3})()
  m = models.build_ffn(config.model, D, 3, nnx.Rngs(0))
  counts = models.model_counts(config, task)
  e, d_e = 3 * granularity, 8 // granularity
  assert counts['num_params'] == ffn_lib.param_tree_size(m) == m.num_params == counts['num_active_params']
  assert m.router_w.shape == (D, e * slots) and m.router_scale.shape == ()
  assert counts['d_ff_active'] == (e + shared) * d_e and counts['d_ff_effective'] == d_e
  x = inputs((12, D))
  assert counts['flops_per_token'] == matmul_flops(lambda x: m.apply(x)[0], x) / 12
  # and by hand: logits + slot inputs 2 * 2 D S, combine 2 S O, S expert evaluations per 12 tokens
  s = e * slots
  expert = ffn_lib.ffn_flops_per_token(D, d_e, activation, 3)
  shared_flops = ffn_lib.ffn_flops_per_token(D, shared * d_e, activation, 3) if shared else 0
  assert counts['flops_per_token'] == pytest.approx(4 * D * s + 2 * s * 3 + s * expert / 12 + shared_flops, rel=1e-12)


def test_group_tokens_follow_the_capacity_scope():
  config = soft_config()
  assert models.group_tokens(config, None) == 12  # bare FFN: the batch
  seq = config_lib.tiny_transformer_config('language', None)
  seq.model.moe.num_experts, seq.model.moe.router = 4, 'soft'
  task = type('Task', (), {'seq_len': 32, 'output_dim': 64})()
  assert models.group_tokens(seq, task) == 32  # one sequence
  seq.model.moe.capacity_scope = 'batch'
  assert models.group_tokens(seq, task) == 32 * seq.train.batch_size


def test_sweep_arms_are_matched_as_documented():
  """configs/sweeps/soft_moe.py: every run validates; the matched arm is within 2% of top-2's parameters
  and FLOPs per token, and the counts are those its docstring and docs/moe.md state."""
  from ffn_research import configfile
  from ffn_research import tasks

  base, grid = configfile.load_sweep_file(os.path.join(REPO, 'configs/sweeps/soft_moe.py'))
  module = configfile.load_module(os.path.join(REPO, 'configs/sweeps/soft_moe.py'))
  assert len(grid) == len(module.ARMS) * len(module.LEARNING_RATES) * 5
  counts = {}
  for overrides in grid:
    config = base.copy_and_resolve_references()
    for k, v in overrides.items():
      config_lib.set_path(config, k, v)
    validation.validate(config)
    arm = next(a for a, o in module.ARMS.items() if all(overrides[k] == v for k, v in o.items()))
    c = models.model_counts(config, tasks.build_task(config))
    counts[arm] = (c['num_params'], c['flops_per_token'])
  assert counts == {
    'topk_softmax': (17152, 8448),
    'soft_matched': (17125, 8585.0),
    'soft_same': (18177, 8064.0),
    'soft_p1': (17153, 896.0),
    'dense_flops': (4372, 8448),
  }
  (p0, f0), (p1, f1) = counts['topk_softmax'], counts['soft_matched']
  assert abs(p1 / p0 - 1) < 0.02 and abs(f1 / f0 - 1) < 0.02


# --------------------------------------------------------------------------- config, causality


@pytest.mark.parametrize(
  'overrides,key',
  [
    ({'slots_per_expert': 0}, 'model.moe.slots_per_expert'),
    ({'router': 'topk_softmax', 'slots_per_expert': 2, 'top_k': 1}, 'model.moe.slots_per_expert'),
    ({'bias_update_rate': 1e-3}, 'model.moe.bias_update_rate'),
    ({'stop_combine_grad': True}, 'model.moe.stop_combine_grad'),
  ],
)
def test_config_errors_name_the_key(overrides, key):
  with pytest.raises(config_lib.ConfigError, match=key.replace('.', r'\.')) as e:
    validation.validate(soft_config(**overrides))
  assert '\n' not in str(e.value)


def test_top_k_and_capacity_do_not_apply():
  validation.validate(soft_config(num_experts=1, top_k=2, capacity_factor=0.0))


def test_causal_model_refuses_soft_in_one_line_through_the_cli(tmp_path):
  """The real entry point: a transformer with router=soft exits 2 with one line naming the key and
  allow_noncausal, no traceback, before any training."""
  cmd = [
    sys.executable,
    '-m',
    'experiments.train',
    '--config=configs/language.py:smoke',
    f'--workdir={tmp_path / "run"}',
    '--config.model.moe.num_experts=4',
    '--config.model.moe.router=soft',
  ]
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
  assert len(lines) == 1 and lines[0].startswith('error: model.moe.router=soft: '), proc.stderr
  assert 'allow_noncausal' in lines[0]
  assert not (tmp_path / 'run' / 'summary.json').exists()


@pytest.mark.slow  # two runs in fresh processes, each compiling a train chunk
def test_cli_trains_soft_moe_and_records_allow_noncausal(tmp_path):
  """The issue's command (shortened) trains and reports its loss; an ffn_stack with allow_noncausal
  trains and its summary names the leak (the transformer's forward pass: test_transformer's probe)."""
  run = tmp_path / 'soft'
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=configs/regression.py:teacher_student_moe',
      '--config.model.moe.router=soft',
      '--config.train.steps=200',
      f'--workdir={run}',
    ],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  summary = json.loads((run / 'summary.json').read_text())
  assert summary['status'] == 'completed' and math.isfinite(summary['eval_loss'])
  assert summary['num_params'] == summary['num_active_params']
  seq = tmp_path / 'seq'
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=configs/language.py:smoke',
      f'--workdir={seq}',
      '--config.model.arch=ffn_stack',
      '--config.model.moe.num_experts=4',
      '--config.model.moe.router=soft',
      '--config.model.moe.allow_noncausal=True',
    ],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  summary = json.loads((seq / 'summary.json').read_text())
  assert summary['moe_noncausal'].startswith('model.moe.router=soft: ')


_EP_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
from flax import nnx
from ffn_research.models import moe
assert jax.device_count() == 4
x = jax.random.normal(jax.random.PRNGKey(1), (32, 6))
r = jax.random.normal(jax.random.PRNGKey(2), (32, 6))
for axis_type in ('Explicit', 'Auto'):
  mesh = jax.make_mesh((4,), ('expert',), axis_types=(getattr(jax.sharding.AxisType, axis_type),))
  out = []
  for m in (None, mesh):
    model = moe.MoE(6, 8, 'swiglu', num_experts=8, top_k=1, router='soft', slots_per_expert=3, mesh=m,
                    rngs=nnx.Rngs(0))
    g, p, rest = nnx.split(model, nnx.Param, ...)
    if m is not None:  # expert weights live on their devices
      p = jax.tree.map(lambda a: jax.device_put(a, jax.sharding.NamedSharding(
          mesh, jax.sharding.PartitionSpec(*(('expert',) if a.ndim > 1 and a.shape[0] == 8 else ())))), p)
    loss = lambda p: jnp.sum(nnx.merge(g, p, rest).apply(x)[0] * r)
    y = jax.jit(lambda p: nnx.merge(g, p, rest).apply(x)[0])(p)
    out.append((y, jax.jit(jax.grad(loss))(p)))
  np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), out[0][1], out[1][1])
  assert len(out[1][1]['w1'][...].sharding.device_set) == 4
print('EP_OK')
"""


@pytest.mark.slow  # a fresh process with 4 host devices
def test_expert_parallel_matches_single_device():
  env = {**os.environ, 'XLA_FLAGS': '--xla_force_host_platform_device_count=4', 'JAX_PLATFORMS': 'cpu'}
  out = subprocess.run(
    [sys.executable, '-c', _EP_SCRIPT], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
  )
  assert 'EP_OK' in out.stdout, out.stderr[-3000:]
