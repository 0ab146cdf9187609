"""Where a small sequence model's train step spends its time, side by side in one process.

  python -m benchmarks.profile_step
  python -m benchmarks.profile_step --batch_sizes=64,512 --repeats=30 --json=runs/profile.json

The model is `configs/memorization.py:ffn_stack` at 16,384 facts (16 relations, 1,024 subjects,
vocabulary 1,296), d_model 32, d_ff 64: 91,488 parameters (issue 12, item 4). For each batch size
it reports the compile time of the first chunk (train.log_every steps under lax.scan, the program
the run loop compiles), steps/s of that chunk, and, on one fixed batch, the jitted train_step,
the model's forward, the loss, the loss's gradient and their difference (optimizer update plus
step metrics). Every program is compiled first; the timed calls then take turns (one call of
each per round), so all rows see the same machine load; medians over rounds are reported.
`profile(configs)` is the function a benchmark can call.

  python -m benchmarks.profile_step --group=8 --d_models=32,64 --chunks=5

times instead what a sweep compiles for runs that differ only in seed (issue 20): the vmapped
train chunk (train.log_every steps) of a group of `--group` seeds of configs/language.py (2 layers,
batch 64 x 32) at each d_model (d_ff 4 d_model), through programs.GroupPrograms as the run loop
compiles it: the group's compile time and steps/s per run (a run's steps over a chunk's wall time;
median over `--chunks` chunks after one warm-up). `--losses=PATH` also saves each run's loss at
every one of the first `--loss_steps` steps (one NumPy .npz per d_model) to compare versions.
Each line also gives the group step's ms, XLA's count of its FLOPs (`cost_analysis` of a 1-step
chunk) and the achieved GFLOP/s.

  python -m benchmarks.profile_step --group=8 --d_models=32,64 --variants=default,no_attention,no_ffn

times model variants (VARIANTS: without attention, without FFN, one layer) in turns, one chunk of
each per round: a variant's step time subtracted from the default's is what that part costs, the
most that making it faster can give.
"""

import json
import os
import platform
import time
from typing import Any

from absl import app
from absl import flags
from flax import nnx
import jax
import numpy as np

from ffn_research import config as config_lib
from ffn_research import configfile
from ffn_research import programs as programs_lib
from ffn_research import train
from ffn_research.config import tiny_transformer_config

flags.DEFINE_list('batch_sizes', ['64', '512'], 'Batch sizes to profile (sequences per step).')
flags.DEFINE_integer('repeats', 30, 'Timed rounds (median reported); chunks run every 5th round.')
flags.DEFINE_string('json', None, 'Also write the results to this JSON file.')
flags.DEFINE_integer('group', 0, 'Profile a vmapped group of this many language-model seeds instead.')
flags.DEFINE_list('d_models', ['32', '64'], 'Group mode: the d_models to time (d_ff = 4 d_model).')
flags.DEFINE_integer('chunks', 5, 'Group mode: timed chunks (median reported).')
flags.DEFINE_string('losses', None, 'Group mode: save per-step losses to PATH_d{d_model}.npz.')
flags.DEFINE_integer('loss_steps', 200, 'Group mode: steps of the saved loss trajectories.')
flags.DEFINE_list(
  'variants',
  ['default'],
  'Group mode: model variants timed in turns at each d_model: default, no_attention, no_ffn, one_layer (VARIANTS).',
)
FLAGS = flags.FLAGS

PARTS = ('train_step', 'forward', 'loss', 'grad')


def ffn_stack_config(batch_size: int = 512):
  """The issue-12 config: memorization ffn_stack, 16,384 facts, d_model 32, d_ff 64."""
  config = tiny_transformer_config('memorization', 'ffn_stack')
  m, t, tr = config.model, config.task, config.train
  m.d_model, m.d_ff = 32, 64
  t.num_facts, t.num_relations, t.num_objects = 16384, 16, 256
  tr.batch_size, tr.steps, tr.log_every = batch_size, 1000, 100
  return config


class _Programs:
  """One config's compiled programs and their arguments; `calls[name]()` runs one, blocking."""

  def __init__(self, config):
    exp = train.Experiment(config)
    self.num_params = exp.counts['num_params']
    self.steps = config.train.log_every
    chunk = jax.jit(exp.train_chunk, static_argnums=1, donate_argnums=0)
    t0 = time.perf_counter()
    compiled = chunk.lower(jax.eval_shape(exp.init, 0), self.steps).compile()
    self.compile_s = time.perf_counter() - t0

    init = jax.jit(exp.init)
    self.state = init(0)
    state = init(0)
    batch = jax.jit(exp.task.sample_batch)(state['data'], jax.random.PRNGKey(1))
    rng = jax.random.PRNGKey(2)
    weights, rest = nnx.split_state(state['params'], nnx.Param, ...)

    def forward(weights, inputs):
      return exp.merge(nnx.merge_state(weights, rest)).apply(inputs, rng=rng, **exp.apply_kwargs)[0]

    def loss(weights, batch):
      return exp.task.loss(forward(weights, batch['inputs']), batch)[0]

    def run_chunk():
      self.state, metrics = compiled(self.state)
      return self.state, metrics

    fns = {
      'train_step': (jax.jit(exp.train_step), (state['params'], state['opt_state'], batch, rng)),
      'forward': (jax.jit(forward), (weights, batch['inputs'])),
      'loss': (jax.jit(loss), (weights, batch)),
      'grad': (jax.jit(jax.grad(loss)), (weights, batch)),
    }
    self.calls = {name: (lambda f=f, a=a: jax.block_until_ready(f(*a))) for name, (f, a) in fns.items()}
    self.calls['chunk'] = lambda: jax.block_until_ready(run_chunk())
    for call in self.calls.values():  # compile and warm up
      call()


def _timed(call) -> float:
  t0 = time.perf_counter()
  call()
  return time.perf_counter() - t0


def profile(configs: dict[str, object], repeats: int = 30) -> list[dict[str, float]]:
  """Per config: compile_s (first chunk), steps_per_s (chunks) and per-part ms, timed in turns."""
  programs = {name: _Programs(c) for name, c in configs.items()}
  times: dict[str, dict[str, list[float]]] = {name: {part: [] for part in (*PARTS, 'chunk')} for name in configs}
  for r in range(repeats):
    for name, p in programs.items():
      for part in PARTS:
        times[name][part].append(_timed(p.calls[part]))
      if r % 5 == 0:
        times[name]['chunk'].append(_timed(p.calls['chunk']))
  rows = []
  for name, p in programs.items():
    ms = {f'{part}_ms': 1e3 * float(np.median(times[name][part])) for part in PARTS}
    rows.append(
      {
        'name': name,
        'num_params': p.num_params,
        'compile_s': p.compile_s,
        'steps_per_s': p.steps / float(np.median(times[name]['chunk'])),
        **ms,
        'optimizer_metrics_ms': ms['train_step_ms'] - ms['grad_ms'],
      }
    )
  return rows


COLUMNS = (
  'name',
  'compile_s',
  'steps_per_s',
  'train_step_ms',
  'forward_ms',
  'loss_ms',
  'grad_ms',
  'optimizer_metrics_ms',
)


def language_configs(d_model: int, num_seeds: int):
  """configs/language.py at d_model (d_ff 4 d_model), seeds 0..num_seeds-1: one vmapped group."""
  out = []
  for seed in range(num_seeds):
    config = configfile.get_config('configs/language.py')
    config.model.d_model, config.model.d_ff, config.train.seed = d_model, 4 * d_model, seed
    out.append(config)
  return out


# Group mode's model variants (`--variants`): what a step costs without a part of the model, so
# the difference to 'default' bounds what making that part faster can give.
VARIANTS: dict[str, dict[str, Any]] = {
  'default': {},
  'no_attention': {'model.arch': 'ffn_stack'},  # no attention sublayer (a parameter-free causal mean)
  'no_ffn': {'model.use_ffn': False},  # attention only
  'one_layer': {'model.num_layers': 1},
}


def _compiled_group(configs, steps: int):
  """(compiled vmapped chunk of `steps` steps, its initial state, traced values, compile s, GFLOP per step)."""
  exp = train.Experiment(programs_lib.program_config(configs))
  group = programs_lib.GroupPrograms(exp, len(configs), jax.devices()[:1])
  traced = group.traced(configs)
  t0 = time.perf_counter()
  compiled = group.chunk.lower(group.abstract_state(configs, traced), steps, traced).compile()
  compile_s = time.perf_counter() - t0
  # XLA's FLOP count of one step: a 1-step chunk's lowered program (no while loop to count through).
  cost = group.chunk.lower(group.abstract_state(configs, traced), 1, traced).cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  gflop = float(cost['flops']) / 1e9 if cost and 'flops' in cost else float('nan')
  return compiled, group.init(configs, traced), traced, compile_s, gflop


def profile_groups(groups: dict[str, list], chunks: int = 5) -> dict[str, dict[str, Any]]:
  """Per named group of configs: compile_s, steps_per_s_per_run, ms_per_step (of the whole group),
  gflop_per_step (XLA's cost analysis of one step) and gflops. Every group is compiled first; their
  chunks then run in turns, one chunk each per round after a warm-up round, so all see the same load."""
  steps = {name: configs[0].train.log_every for name, configs in groups.items()}
  built = {name: list(_compiled_group(configs, steps[name])) for name, configs in groups.items()}
  times: dict[str, list[float]] = {name: [] for name in groups}
  for i in range(chunks + 1):
    for name, b in built.items():
      t0 = time.perf_counter()
      b[1], _ = jax.block_until_ready(b[0](b[1], b[2]))
      if i:  # the first round warms up
        times[name].append(time.perf_counter() - t0)
  out = {}
  for name, (_, _, _, compile_s, gflop) in built.items():
    step_s = float(np.median(times[name])) / steps[name]
    out[name] = {
      'compile_s': compile_s,
      'steps_per_s_per_run': 1 / step_s,
      'ms_per_step': 1e3 * step_s,
      'gflop_per_step': gflop,
      'gflops': gflop / step_s,
      'chunk_s': times[name],
    }
  return out


def profile_group(configs, chunks: int = 5, loss_steps: int = 0) -> dict[str, Any]:
  """compile_s and steps_per_s_per_run of a group's vmapped train chunk; per-step losses (R, steps)."""
  out: dict[str, Any] = profile_groups({'group': configs}, chunks)['group']
  if loss_steps:
    exp = train.Experiment(programs_lib.program_config(configs))
    group = programs_lib.GroupPrograms(exp, len(configs), jax.devices()[:1])
    traced = group.traced(configs)

    def per_step(state_R, traced_R):
      def one(state, traced):
        return jax.lax.scan(lambda s, _: exp.train_chunk(s, 1, traced), state, None, length=loss_steps)[1]

      return jax.vmap(one)(state_R, traced_R)['loss']

    out['losses'] = np.asarray(jax.jit(per_step)(group.init(configs, traced), traced))
  return out


def variant_configs(d_model: int, num_seeds: int, variant: str):
  """language_configs with VARIANTS[variant]'s overrides."""
  configs = language_configs(d_model, num_seeds)
  for c in configs:
    for key, value in VARIANTS[variant].items():
      config_lib.set_path(c, key, value)
  return configs


def _machine() -> str:
  load = os.getloadavg()
  return (
    f'{platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__} '
    f'{jax.default_backend()}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}'
  )


def main_group():
  """--group: the language model's vmapped group at each --d_models (and --variants), one line each."""
  unknown = [v for v in FLAGS.variants if v not in VARIANTS]
  if unknown:
    raise app.UsageError(f'unknown --variants {", ".join(unknown)}; allowed: {", ".join(VARIANTS)}')
  if FLAGS.losses and FLAGS.variants != ['default']:
    raise app.UsageError("--losses saves the default model's losses only: leave --variants out")
  rows = []
  for d in FLAGS.d_models:
    if FLAGS.variants == ['default']:
      results = {
        'default': profile_group(
          language_configs(int(d), FLAGS.group), FLAGS.chunks, FLAGS.loss_steps if FLAGS.losses else 0
        )
      }
    else:
      results = profile_groups({v: variant_configs(int(d), FLAGS.group, v) for v in FLAGS.variants}, FLAGS.chunks)
    for variant, r in results.items():
      if FLAGS.losses:
        np.savez(f'{FLAGS.losses}_d{d}.npz', loss=r.pop('losses'))
      rows.append({'d_model': int(d), 'group': FLAGS.group, 'variant': variant, **r})
      name = '' if FLAGS.variants == ['default'] else f', {variant}'
      print(
        f'# language, group of {FLAGS.group} seeds, d_model {d}{name}: compile {r["compile_s"]:.2f} s, '
        f'{r["steps_per_s_per_run"]:.2f} steps/s per run, {r["ms_per_step"]:.1f} ms per group step, '
        f'{r["gflop_per_step"]:.2f} GFLOP per group step ({r["gflops"]:.0f} GFLOP/s); {_machine()}',
        flush=True,
      )
  if FLAGS.json:
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.json)), exist_ok=True)
    with open(FLAGS.json, 'w') as f:
      json.dump({'machine': _machine(), 'rows': rows}, f, indent=1)


def main(argv):
  del argv
  if FLAGS.group:
    return main_group()
  rows = profile({f'batch {b}': ffn_stack_config(int(b)) for b in FLAGS.batch_sizes}, FLAGS.repeats)
  machine = _machine()
  print(f'# memorization ffn_stack, 16,384 facts, d_model 32, d_ff 64, {rows[0]["num_params"]:,} parameters; {machine}')
  print(' | '.join(COLUMNS))
  for r in rows:
    print(' | '.join(f'{r[c]:.4g}' if isinstance(r[c], float) else str(r[c]) for c in COLUMNS))
  if FLAGS.json:
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.json)), exist_ok=True)
    with open(FLAGS.json, 'w') as f:
      json.dump({'machine': machine, 'rows': rows}, f, indent=1)


if __name__ == '__main__':
  app.run(main)
