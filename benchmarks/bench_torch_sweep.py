"""PyTorch references of a sweep for `benchmark_sweep --mode=frameworks` (optional: `pip install -e .[bench]`).

  python -m benchmarks.bench_torch_sweep --runs=runs.json --side=loop --outdir=DIR    # one run after another
  python -m benchmarks.bench_torch_sweep --runs=runs.json --side=func --outdir=DIR    # torch.func ensembles

The runs of a regression sweep (`runs.json`, written by benchmarks.benchmark_sweep from the project's
sweep file: each run's d_ff, activation and seed, and the shared task and train settings) trained
the way this project trains them: a dense FFN d_model 1 -> d_ff -> 1 (plain or gated, biases,
Xavier-uniform weights, zero biases) on f(x) over [-1, 1] (num_train training points, batches drawn
with replacement, MSE), Adam at the peak learning rate times a linear warmup from 0 and a cosine decay
to 0 at the last step (optax.warmup_cosine_decay_schedule; the first step has rate 0 as optax's),
global-norm gradient clipping, the mean loss logged every log_every steps; then held-out MSE
(num_eval points), training MSE and the sup-norm error on a grid_size grid.

--side=loop: one nn.Module and one torch.optim.Adam per run, the runs one after another.
--side=func: one ensemble per shape (runs of equal d_ff and activation): torch.func.stack_module_state
and torch.func.vmap(functional_call) over the stacked parameters, one Adam over the stacked tensors
with the loss the sum over models of each model's mean loss and each model's gradient clipped by its
own norm, so each model trains as with its own Adam (Adam is elementwise; tests/test_benchmark.py
checks it against the loop). The runs' data and initial weights come from torch generators seeded
by the run's seed, the same on both sides; the batches differ between the sides (the loop draws a
run's indices from its generator, an ensemble all its runs' indices in one draw).
Writes DIR/results.json (per run: eval_loss, train_mse, sup_error, final_loss, the logged losses;
the worker's own timings) and each run's final weights and Adam state (DIR/weights/).
"""

import json
import math
import os
import sys
import time

from absl import app
from absl import flags

try:
  import torch
  from torch import func
  from torch import nn
  from torch.nn import functional as F
except ImportError:  # main() says so in one line
  torch = None

flags.DEFINE_string('runs', None, 'runs.json written by benchmarks.benchmark_sweep.')
flags.DEFINE_enum('side', 'loop', ['loop', 'func'], 'loop: one run after another; func: torch.func ensembles.')
flags.DEFINE_string('outdir', None, 'Folder for results.json and the weights.')
flags.DEFINE_integer(
  'threads',
  1,
  "torch.set_num_threads; 1 (default): as fast as PyTorch's default (2 on the "
  '2-core development machine) when quiet, 4-25x faster per step under load (docs/performance.md); 0: the default.',
)
FLAGS = flags.FLAGS

TARGETS = {  # the project's tasks/regression.py FUNCTIONS
  'x_squared': lambda x: x * x,
  'sin': lambda x: torch.sin(math.pi * x),
  'abs': lambda x: x.abs(),
  'step': lambda x: (x > 0).to(x.dtype),
}
PLAIN = ('relu', 'gelu', 'silu')  # exact GELU, as models/activations.py
GATED = ('swiglu', 'geglu', 'bilinear', 'reglu', 'glu')
ACTIVATIONS = PLAIN + GATED


def unit_schedule(step: int, steps: int, warmup: int) -> float:
  """The project's unit-peak 'cosine' schedule at optimizer count `step` (optim._cosine)."""
  if warmup and step < warmup:
    return step / warmup
  decay = max(steps, warmup + 1) - warmup
  return 0.5 * (1 + math.cos(math.pi * min(step - warmup, decay) / decay))


def act_fn(name: str):
  return {
    'relu': F.relu,
    'gelu': F.gelu,
    'silu': F.silu,
    'swiglu': F.silu,
    'geglu': F.gelu,
    'reglu': F.relu,
    'glu': torch.sigmoid,
    'bilinear': lambda x: x,
  }[name]


class FFN(nn.Module if torch else object):  # type: ignore[misc]  # a stand-in base when torch is absent
  """The project's FFN d_model -> d_ff -> d_model: act(x W1 + b1) W2 + b2, or
  (gate(x Wg + bg) * (x W1 + b1)) W2 + b2; Xavier-uniform weights drawn from `generator`, zero biases."""

  def __init__(self, d_ff: int, activation: str, generator, d_model: int = 1):
    super().__init__()
    self.act, self.gated = act_fn(activation), activation in GATED
    self.w1, self.w2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
    layers = [self.w1, self.w2]
    if self.gated:
      self.gate = nn.Linear(d_model, d_ff)
      layers.append(self.gate)
    with torch.no_grad():
      for layer in layers:
        nn.init.xavier_uniform_(layer.weight, generator=generator)
        layer.bias.zero_()

  def forward(self, x):
    h = self.act(self.gate(x)) * self.w1(x) if self.gated else self.act(self.w1(x))
    return self.w2(h)


def run_data(run: dict, task: dict):
  """(generator, model, data) of one run: its weights, then its training and held-out points."""
  t = task
  g = torch.Generator().manual_seed(run['seed'])
  model = FFN(run['d_ff'], run['activation'], g)
  f = TARGETS[t['function']]
  x_train = torch.rand(t['num_train'], 1, generator=g) * 2 - 1
  x_eval = torch.rand(t['num_eval'], 1, generator=g) * 2 - 1
  return g, model, {'x_train': x_train, 'y_train': f(x_train), 'x_eval': x_eval, 'y_eval': f(x_eval)}


def learning_rates(tr: dict) -> list[float]:
  return [tr['learning_rate'] * unit_schedule(i, tr['steps'], tr['warmup_steps']) for i in range(tr['steps'])]


def evaluate(apply, data, grid, f) -> dict:
  """The project's FunctionTask.evaluate: training MSE, held-out MSE, sup-norm error on the grid."""
  return {
    'train_mse': float((apply(data['x_train']) - data['y_train']).square().mean()),
    'eval_loss': float((apply(data['x_eval']) - data['y_eval']).square().mean()),
    'sup_error': float((apply(grid) - f(grid)).abs().max()),
  }


def train_loop_run(run: dict, spec: dict, indices=None) -> tuple[dict, dict]:
  """One run, eager: nn.Module + torch.optim.Adam. `indices(step)`: the batch's indices (default:
  drawn from the run's generator). Returns (the run's results, its final state)."""
  tr, t = spec['train'], spec['task']
  g, model, data = run_data(run, t)
  opt = torch.optim.Adam(model.parameters(), lr=0.0, fused=True)  # fused: fastest on CPU
  params = list(model.parameters())
  lrs, losses, chunk = learning_rates(tr), [], torch.zeros(())
  for step in range(tr['steps']):
    opt.param_groups[0]['lr'] = lrs[step]
    idx = indices(step) if indices else torch.randint(0, t['num_train'], (tr['batch_size'],), generator=g)
    loss = F.mse_loss(model(data['x_train'][idx]), data['y_train'][idx])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if tr['grad_clip'] > 0:
      torch.nn.utils.clip_grad_norm_(params, tr['grad_clip'])
    opt.step()
    chunk += loss.detach()
    if (step + 1) % tr['log_every'] == 0 or step + 1 == tr['steps']:
      losses.append(chunk.item() / ((step % tr['log_every']) + 1))
      chunk = torch.zeros(())
  with torch.no_grad():
    out = evaluate(model, data, torch.linspace(-1, 1, t['grid_size'])[:, None], TARGETS[t['function']])
  return {**out, 'final_loss': losses[-1], 'losses': losses}, {'model': model.state_dict(), 'adam': opt.state_dict()}


def train_func_group(runs: list[dict], spec: dict, indices=None) -> tuple[list[dict], dict]:
  """Runs of one shape as one torch.func ensemble: vmap(functional_call) over stacked parameters,
  one Adam over the stacked tensors, per-model clipping. `indices(step)`: (models, batch) indices
  (default: one draw for all models). Returns (each run's results, the group's final state)."""
  tr, t = spec['train'], spec['task']
  made = [run_data(r, t) for r in runs]
  models = [m for _, m, _ in made]
  data = {k: torch.stack([d[k] for _, _, d in made]) for k in made[0][2]}  # (models, n, 1)
  params, buffers = func.stack_module_state(models)
  base = models[0]

  def one(p, x):
    return func.functional_call(base, (p, buffers), (x,))

  apply = func.vmap(one)  # stacked params, a batch per model
  num = len(runs)
  g = torch.Generator().manual_seed(runs[0]['seed'])
  leaves = list(params.values())
  opt = torch.optim.Adam(leaves, lr=0.0, fused=True)
  lrs, losses, chunk = learning_rates(tr), [], torch.zeros(num)
  rows = torch.arange(num)[:, None]
  for step in range(tr['steps']):
    opt.param_groups[0]['lr'] = lrs[step]
    idx = indices(step) if indices else torch.randint(0, t['num_train'], (num, tr['batch_size']), generator=g)
    per_model = (apply(params, data['x_train'][rows, idx]) - data['y_train'][rows, idx]).square().mean((1, 2))
    opt.zero_grad(set_to_none=True)
    per_model.sum().backward()
    if tr['grad_clip'] > 0:  # each model by its own global norm (torch's clip_grad_norm_ rule)
      norm = torch.stack([p.grad.reshape(num, -1).square().sum(1) for p in leaves]).sum(0).sqrt()
      coef = (tr['grad_clip'] / (norm + 1e-6)).clamp(max=1.0)
      for p in leaves:
        p.grad.mul_(coef.reshape(num, *[1] * (p.dim() - 1)))
    opt.step()
    chunk += per_model.detach()
    if (step + 1) % tr['log_every'] == 0 or step + 1 == tr['steps']:
      losses.append((chunk / ((step % tr['log_every']) + 1)).tolist())
      chunk = torch.zeros(num)
  f, grid = TARGETS[t['function']], torch.linspace(-1, 1, t['grid_size'])[:, None]
  with torch.no_grad():
    pred = {k: apply(params, data[k]) for k in ('x_train', 'x_eval')}
    pred_grid = func.vmap(one, in_dims=(0, None))(params, grid)
    train_mse = (pred['x_train'] - data['y_train']).square().mean((1, 2))
    eval_loss = (pred['x_eval'] - data['y_eval']).square().mean((1, 2))
    sup = (pred_grid - f(grid)).abs().amax((1, 2))
  out = [
    {
      'train_mse': float(train_mse[i]),
      'eval_loss': float(eval_loss[i]),
      'sup_error': float(sup[i]),
      'final_loss': losses[-1][i],
      'losses': [c[i] for c in losses],
    }
    for i in range(num)
  ]
  return out, {'params': {k: v.detach() for k, v in params.items()}, 'adam': opt.state_dict()}


def shapes(runs: list[dict]) -> list[list[dict]]:
  """Runs grouped by (activation, d_ff), in first-seen order (one torch.func ensemble each)."""
  groups: dict[tuple, list[dict]] = {}
  for r in runs:
    groups.setdefault((r['activation'], r['d_ff']), []).append(r)
  return list(groups.values())


def check_spec(spec: dict) -> str | None:
  """One line saying what this reference cannot train, or None."""
  bad = [r['activation'] for r in spec['runs'] if r['activation'] not in ACTIVATIONS]
  if bad:
    return f'activation {bad[0]!r} has no PyTorch reference here; allowed: {", ".join(ACTIVATIONS)}'
  if spec['task']['function'] not in TARGETS:
    return f'task.function {spec["task"]["function"]!r} has no PyTorch reference; allowed: {", ".join(TARGETS)}'
  return None


def main(argv):
  del argv
  t0 = time.perf_counter()
  if not FLAGS.runs or not FLAGS.outdir:
    sys.exit('error: --runs=runs.json and --outdir=DIR are required')
  try:
    with open(FLAGS.runs, encoding='utf-8') as fh:
      spec = json.load(fh)
  except (OSError, ValueError) as e:
    sys.exit(f'error: --runs={FLAGS.runs}: {e}')
  if error := check_spec(spec):
    sys.exit(f'error: {error}')
  if torch is None:
    sys.exit('error: torch not installed (pip install -e .[bench])')
  if FLAGS.threads:
    torch.set_num_threads(FLAGS.threads)
  os.makedirs(os.path.join(FLAGS.outdir, 'weights'), exist_ok=True)
  results, t_train = {}, time.perf_counter()
  if FLAGS.side == 'loop':
    for r in spec['runs']:
      results[r['name']], state = train_loop_run(r, spec)
      torch.save(state, os.path.join(FLAGS.outdir, 'weights', f'{r["name"]}.pt'))
  else:
    for i, group in enumerate(shapes(spec['runs'])):
      outs, state = train_func_group(group, spec)
      results.update({r['name']: o for r, o in zip(group, outs, strict=True)})
      torch.save({'runs': [r['name'] for r in group], **state}, os.path.join(FLAGS.outdir, 'weights', f'group_{i}.pt'))
  doc = {
    'side': FLAGS.side,
    'torch': torch.__version__,
    'threads': torch.get_num_threads(),
    'groups': len(shapes(spec['runs'])) if FLAGS.side == 'func' else len(spec['runs']),
    'train_s': time.perf_counter() - t_train,
    'main_s': time.perf_counter() - t0,
    'runs': results,
  }
  with open(os.path.join(FLAGS.outdir, 'results.json.tmp'), 'w', encoding='utf-8') as fh:
    json.dump(doc, fh)
  os.replace(os.path.join(FLAGS.outdir, 'results.json.tmp'), os.path.join(FLAGS.outdir, 'results.json'))
  print(f'{FLAGS.side}: {len(results)} runs in {time.perf_counter() - t0:.2f} s', flush=True)


if __name__ == '__main__':
  app.run(main)
