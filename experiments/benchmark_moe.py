"""Time one full MoE train step (forward, backward, Adam) against a FLOP-matched dense FFN.

  python -m experiments.benchmark_moe
  python -m experiments.benchmark_moe --repeats=50 --capacity_factors=1.0,1.25,0 --buffers

Top-2 of 8 experts, 4096 tokens, d_model 128, expert d_ff 512 (fp32) versus a
dense FFN of d_ff 1024 (the same active expert FLOPs) and the GShard einsum
dispatch, in one process; medians over repeats; prints ratios and the machine.
--buffers adds, in the same interleaved loop, 'sort' with plain capacity buffers
(C rows per expert, C = T when dropless: the layout before windows + blocks).
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
flags.DEFINE_integer('sort_block', None, "Rows per block past the 'sort' windows (default moe.SORT_BLOCK).")
flags.DEFINE_bool('buffers', False, "Also time 'sort' with capacity buffers only (the old layout).")
flags.DEFINE_integer('repeats', 30, 'Timed steps per variant (median reported).')
FLAGS = flags.FLAGS


class BufferMoE(moe_lib.MoE):
  """'sort' with every expert a capacity buffer of C rows, nothing in blocks (the old layout)."""

  def layout(self, num_tokens):
    return moe_lib.Layout(self.capacity(num_tokens), 1)


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


def time_steps(models, x, y, repeats):
  """Median ms per step of each model; variants interleaved so machine load hits all alike."""
  runs = []
  for model in models:
    step, params, opt_state = make_step(model)
    runs.append([step, *jax.block_until_ready(step(params, opt_state, x, y))])  # compile
  times = [[] for _ in models]
  for _ in range(repeats):
    for run, ts in zip(runs, times):
      t0 = time.perf_counter()
      run[1:] = jax.block_until_ready(run[0](*run[1:], x, y))
      ts.append(time.perf_counter() - t0)
  return [float(np.median(ts)) * 1e3 for ts in times]


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

  def moe(dispatch, cf):
    return moe_lib.MoE(f.d_model, f.d_expert, f.activation, num_experts=f.num_experts,
                       top_k=f.top_k, capacity_factor=cf, dispatch=dispatch, rngs=nnx.Rngs(0))

  if f.sort_block is not None:
    moe_lib.SORT_BLOCK = f.sort_block
  cfs = [float(c) for c in f.capacity_factors]
  labels = [f'dense FFN d_ff {f.top_k * f.d_expert} (FLOP-matched)']
  models = [ffn_lib.FFN(f.d_model, f.top_k * f.d_expert, f.activation, rngs=nnx.Rngs(0))]
  for cf in cfs:
    m = moe('sort', cf)
    window, block = m.layout(f.tokens)
    labels.append(f'MoE sort, capacity_factor {cf:g}' + (' (dropless)' if cf <= 0 else ''))
    models.append(m)
    _, routing = m.route(x)
    sizes = moe_lib.plan(routing, m.num_experts, m.capacity(f.tokens), 'token').group_sizes_E
    over = int(np.sum(np.maximum(np.asarray(sizes) - window, 0)))
    print(f'sort cf {cf:g}: C {m.capacity(f.tokens)}, window {window}, {over} rows past the '
          f'windows (blocks of {block}; routing at init)')
    if f.buffers:
      labels.append('  the same, capacity buffers (C rows per expert)')
      models.append(BufferMoE(f.d_model, f.d_expert, f.activation, num_experts=f.num_experts,
                              top_k=f.top_k, capacity_factor=cf, dispatch='sort', rngs=nnx.Rngs(0)))
  ms = time_steps(models, x, y, f.repeats)
  rows = [(label, t, t / ms[0]) for label, t in zip(labels, ms)]
  slow = [moe(name, cfs[0]) for name in f.extra]  # fewer repeats: these are 5-20x slower
  if slow:  # their own interleaved loop, with dense and sort again for the ratios
    slow_ms = time_steps([models[0], models[1], *slow], x, y, max(3, f.repeats // 5))
    for name, t in zip(f.extra, slow_ms[2:]):
      rows.append((f'MoE {name}, capacity_factor {cfs[0]:g}', t, t / slow_ms[0]))
      print(f'{name} / sort (cf {cfs[0]:g}): {t / slow_ms[1]:.2f}x')
  for label, t, ratio in rows:
    print(f'  {label:<44} {t:8.2f} ms   {ratio:5.2f}x dense')

if __name__ == '__main__':
  app.run(main)
