"""Time one full MoE train step (forward, backward, Adam) against a FLOP-matched dense FFN.

  python -m experiments.benchmark_moe
  python -m experiments.benchmark_moe --repeats=50 --capacity_factors=1.0,1.25,0

Top-2 of 8 experts, 4096 tokens, d_model 128, expert d_ff 512 (fp32) versus a
dense FFN of d_ff 1024 (the same active expert FLOPs) and the GShard einsum
dispatch, in one process; medians over repeats; prints ratios and the machine.
"""

import os
import platform
import time

from absl import app, flags
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from ffn_research.models import ffn as ffn_lib
from ffn_research.models import moe as moe_lib

flags.DEFINE_integer('tokens', 4096, 'Tokens per step.')
flags.DEFINE_integer('d_model', 128, 'Model width.')
flags.DEFINE_integer('d_expert', 512, 'Expert hidden width.')
flags.DEFINE_integer('num_experts', 8, 'Experts E.')
flags.DEFINE_integer('top_k', 2, 'Experts per token k.')
flags.DEFINE_string('activation', 'relu', 'Expert and dense activation.')
flags.DEFINE_list('capacity_factors', ['1.0', '1.25'], 'Capacity factors for the sort dispatch (<= 0: dropless).')
flags.DEFINE_list('extra', ['einsum', 'ragged'], 'Other dispatches to time at the first capacity factor.')
flags.DEFINE_integer('repeats', 30, 'Timed steps per variant (median reported).')
FLAGS = flags.FLAGS


def make_step(model):
  """A jitted pure train step: MSE to a fixed target plus the model's '_loss' aux terms, Adam."""
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  opt = optax.adam(1e-3)

  def loss_fn(params, x, y):
    out, aux = nnx.merge(graphdef, params, rest).apply(x, rng=jax.random.PRNGKey(0))
    extra = sum(v for k, v in aux.items() if k.endswith('_loss'))
    return jnp.mean(jnp.square(out - y)) + extra

  @jax.jit
  def step(params, opt_state, x, y):
    grads = jax.grad(loss_fn)(params, x, y)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  return step, params, opt.init(params)


def time_step(model, x, y, repeats):
  step, params, opt_state = make_step(model)
  params, opt_state = jax.block_until_ready(step(params, opt_state, x, y))  # compile
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    params, opt_state = jax.block_until_ready(step(params, opt_state, x, y))
    times.append(time.perf_counter() - t0)
  return float(np.median(times)) * 1e3


def main(argv):
  del argv
  f = FLAGS
  kx, ky = jax.random.split(jax.random.PRNGKey(0))
  x = jax.random.normal(kx, (f.tokens, f.d_model))
  y = jax.random.normal(ky, (f.tokens, f.d_model))
  print(f'machine: {platform.machine()} {platform.processor() or ""}, {os.cpu_count()} CPUs, '
        f'jax {jax.__version__} backend {jax.default_backend()} {jax.devices()[0].device_kind}')
  print(f'one train step (fwd+bwd+Adam), {f.tokens} tokens, d_model {f.d_model}, top-{f.top_k} of '
        f'{f.num_experts} experts of d_ff {f.d_expert}, {f.activation}; median of {f.repeats}')

  rows = []
  dense = ffn_lib.FFN(f.d_model, f.top_k * f.d_expert, f.activation, rngs=nnx.Rngs(0))
  dense_ms = time_step(dense, x, y, f.repeats)
  rows.append((f'dense FFN d_ff {f.top_k * f.d_expert} (FLOP-matched)', dense_ms))

  def moe(dispatch, cf):
    return moe_lib.MoE(f.d_model, f.d_expert, f.activation, num_experts=f.num_experts,
                       top_k=f.top_k, capacity_factor=cf, dispatch=dispatch, rngs=nnx.Rngs(0))

  cfs = [float(c) for c in f.capacity_factors]
  sort_ms = {}
  for cf in cfs:
    sort_ms[cf] = time_step(moe('sort', cf), x, y, f.repeats)
    rows.append((f'MoE sort, capacity_factor {cf:g}' + (' (dropless)' if cf <= 0 else ''), sort_ms[cf]))
  for name in f.extra:
    rows.append((f'MoE {name}, capacity_factor {cfs[0]:g}', time_step(moe(name, cfs[0]), x, y,
                                                                        max(3, f.repeats // 5))))
  for label, ms in rows:
    print(f'  {label:<44} {ms:8.2f} ms   {ms / dense_ms:5.2f}x dense')
  for label, ms in rows:
    if 'einsum' in label:
      print(f'einsum / sort (cf {cfs[0]:g}): {ms / sort_ms[cfs[0]]:.2f}x')


if __name__ == '__main__':
  app.run(main)
