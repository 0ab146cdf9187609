"""The one run loop: a group of runs that share a compiled program (a lone run is a group of one).

`run_group(programs, configs, run_dirs)` trains the runs together and writes each run's
outputs (config.json is written by the caller):

  metrics.jsonl, tensorboard/   one line per logged chunk; `eval/...` every train.eval_every
  checkpoints/                  Orbax, every train.checkpoint_every steps and at the end
                                (the final one holds the trained parameters: `load_run`)
  summary.json                  counts, final metrics, status, timings

Chunks are `lax.scan`s of train.log_every steps; a chunk's metrics are fetched after the
next chunk is dispatched, except before a checkpoint: every logged step up to a checkpoint
is on disk before it is saved, and the summary only after the final checkpoint, so a kill at
any moment followed by a rerun resumes from the newest intact checkpoint and ends as an
uninterrupted run would have (bit-identical on CPU), each step logged once.

A run ends `diverged` when its loss turns non-finite, or when the blow-up rule fires: the
logged loss exceeds train.blowup_factor times the first step's loss for
train.blowup_patience consecutive logged chunks (train.blowup_factor = 0 turns it off).
"""

import contextlib
import dataclasses
import json
import os
import resource
import time
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from ffn_research import config as config_lib
from ffn_research import io as io_lib
from ffn_research import models, parallel, train, validation

PyTree = Any


class NotEnoughMemory(ValueError):
  """A run whose estimated memory exceeds what the device has; one line with both numbers."""


# --------------------------------------------------------------------------- programs

class LonePrograms:
  """The programs of one run: jit(init), jit(train_chunk), jit(evaluate), no run axis.

  With a mesh (`exp.mesh`, parallel.build_mesh) the state is laid out by
  parallel.state_shardings and the metrics are replicated.
  """

  batched = False

  def __init__(self, exp):
    self.exp = exp
    self.shardings, state_in, state_out, out = None, {}, {}, {}
    if exp.mesh is not None:
      self.shardings = parallel.state_shardings(jax.eval_shape(exp.init, 0), exp.mesh)
      replicated = jax.sharding.NamedSharding(exp.mesh, jax.sharding.PartitionSpec())
      state_in, out = {'in_shardings': (self.shardings, replicated)}, {'out_shardings': replicated}
      state_out = {'out_shardings': (self.shardings, replicated)}
    self.init_fn = jax.jit(exp.init, **({'out_shardings': self.shardings} if self.shardings else {}))
    self.chunk = jax.jit(exp.train_chunk, static_argnums=1, donate_argnums=0, **state_in, **state_out)
    self.evaluate = jax.jit(exp.evaluate, **out)

  def scalars(self, configs: Sequence[ml_collections.ConfigDict]) -> dict[str, jax.Array]:
    """The run's train.TRACED_KEYS values as float32 arrays (passed to init and every chunk)."""
    return {k: jnp.float32(v) for k, v in train.traced_values(configs[0]).items()}

  def init(self, seeds, scalars, widths):
    del widths  # the config's, already in the model
    return self.init_fn(seeds[0], scalars)

  def abstract_state(self, seeds, scalars, widths):
    del widths
    return jax.eval_shape(self.init_fn, seeds[0], scalars)

  def run(self, tree: PyTree, i: int) -> PyTree:
    del i
    return tree

  def run_state(self, state: PyTree, i: int, abstract: PyTree) -> PyTree:
    del i, abstract
    return state

  def stack(self, states: Sequence[PyTree]) -> PyTree:
    return states[0] if self.shardings is None else parallel.place(states[0], self.shardings)

  def host(self, state: PyTree) -> PyTree:
    """The state to checkpoint: as is on one device, NumPy copies (every process calls this) on a mesh."""
    return state if self.shardings is None else parallel.to_host(state)


class GroupPrograms:
  """The vmapped (and, over several devices, sharded) programs of a group of runs.

  `exp` may be built wider than some runs (a d_ff-padded group, sweep.PAD_FLOPS_FACTOR):
  each run gets its true FFN width at init (a traced per-run value); its state is padded
  with zeros to the program's shapes on the way in (`stack`) and cut back to its own on
  the way out (`run_state`), so checkpoints always hold the run's true shapes.
  """

  batched = True

  def __init__(self, exp, num_runs: int, devices: Sequence[Any]):
    self.exp = exp
    self.num_devices = len(devices)
    self.padded = -(-num_runs // self.num_devices) * self.num_devices
    self.sharding = None
    if self.num_devices > 1:
      mesh = jax.sharding.Mesh(np.asarray(devices), ('runs',))
      self.sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('runs'))

    shard_out = {} if self.sharding is None else {'out_shardings': self.sharding}
    self.init_fn = jax.jit(jax.vmap(exp.init), **shard_out)  # (seed, scalars, d_ff) per run
    self.chunk = jax.jit(self._chunk, static_argnums=1, donate_argnums=0)
    self.evaluate = jax.jit(jax.vmap(exp.evaluate))
    self.full = jax.eval_shape(exp.init, 0)  # one run's state at the program's (padded) shapes

  def _chunk(self, state_R, num_steps, scalars_R):
    out = jax.vmap(lambda s, c: self.exp.train_chunk(s, num_steps, c))(state_R, scalars_R)
    return out if self.sharding is None else jax.lax.with_sharding_constraint(out, self.sharding)

  def pad(self, x_R: np.ndarray) -> jax.Array:
    """Pad the run axis (repeating the last run) to a multiple of the device count."""
    x_R = np.concatenate([x_R, np.repeat(x_R[-1:], self.padded - len(x_R), axis=0)])
    return jax.device_put(x_R, self.sharding) if self.sharding is not None else jnp.asarray(x_R)

  def scalars(self, configs: Sequence[ml_collections.ConfigDict]) -> dict[str, jax.Array]:
    """{key in train.TRACED_KEYS: one float32 value per run}, the run axis padded."""
    values = [train.traced_values(c) for c in configs]
    return {k: self.pad(np.asarray([v[k] for v in values], np.float32)) for k in train.TRACED_KEYS}

  def _padded(self, seeds, scalars, widths):
    return self.pad(np.asarray(seeds, np.int32)), scalars, self.pad(np.asarray(widths, np.int32))

  def init(self, seeds, scalars, widths):
    """scalars: GroupPrograms.scalars; widths: each run's true d_ff."""
    return self.init_fn(*self._padded(seeds, scalars, widths))

  def abstract_state(self, seeds, scalars, widths):
    abstract = jax.eval_shape(self.init_fn, *self._padded(seeds, scalars, widths))
    if self.sharding is None:
      return abstract
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=self.sharding), abstract)

  def run(self, tree: PyTree, i: int) -> PyTree:
    return jax.tree.map(lambda x: x[i], tree)

  def run_state(self, state: PyTree, i: int, abstract: PyTree) -> PyTree:
    """Run i's state (host arrays) cut to its own shapes `abstract` (padded units dropped)."""
    src, dst = _param_shapes(self.full), _param_shapes(abstract)
    return jax.tree.map(lambda x, a: _resize(np.asarray(x[i]), src, dst, a.shape), state, abstract)

  def stack(self, states: Sequence[PyTree]) -> PyTree:
    """Runs' states (their own shapes) zero-padded to the program's and stacked on the run axis."""
    full, full_shapes = self.full, _param_shapes(self.full)

    def pad_one(a, x, own):
      return _resize(np.asarray(x), _param_shapes(own), full_shapes, a.shape)

    return jax.tree.map(lambda a, *xs: self.pad(np.stack([pad_one(a, x, own) for x, own in zip(xs, states)])),
                        full, *states)


def _param_shapes(state: PyTree) -> list[tuple[int, ...]]:
  """Shapes of the nnx.Param leaves of a run state, in the order train.Experiment._flat ravels them."""
  return [tuple(x.shape) for x in jax.tree.leaves(nnx.split_state(state['params'], nnx.Param, ...)[0])]


def _resize(x: np.ndarray, src: list[tuple[int, ...]], dst: list[tuple[int, ...]], shape) -> np.ndarray:
  """`x` cut or zero-padded to `shape`. A flat optimizer vector (every parameter raveled, e.g. Adam's
  mu/nu: train.Experiment._flat) is resized parameter by parameter from shapes `src` to `dst`."""
  n_src, n_dst = sum(int(np.prod(s)) for s in src), sum(int(np.prod(s)) for s in dst)
  if x.ndim == 1 and len(shape) == 1 and x.shape[0] == n_src and shape[0] == n_dst and n_src != n_dst:
    parts, at = [], 0
    for s, d in zip(src, dst):
      piece = x[at:at + int(np.prod(s))].reshape(s)
      at += int(np.prod(s))
      parts.append(_resize(piece, [], [], d).ravel())
    return np.concatenate(parts)
  if not x.ndim:
    return x
  x = x[tuple(slice(0, n) for n in shape)]
  return np.pad(x, [(0, n - m) for n, m in zip(shape, x.shape)])


# --------------------------------------------------------------------------- bookkeeping

def scalars(tree: PyTree, prefix: str = '') -> dict[str, Any]:
  """Flatten metrics to {'a/b': float or list} for JSON and TensorBoard."""
  out = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    name = '/'.join(str(getattr(k, 'key', getattr(k, 'name', getattr(k, 'idx', k)))) for k in path)
    value = np.asarray(leaf)
    out[prefix + name] = value.item() if value.ndim == 0 else value.tolist()
  return out


@dataclasses.dataclass
class Track:
  """One run's state derived from its logged lines (so a resumed run replays it from disk)."""
  last: dict[str, Any] = dataclasses.field(default_factory=dict)
  initial_loss: float | None = None
  above: int = 0           # consecutive logged chunks over the blow-up threshold
  diverged_at: int = -1    # step at which the run was declared diverged
  reason: str | None = None  # 'non-finite loss' or 'blow-up'

  def observe(self, step: int, m: dict[str, Any], tr: ml_collections.ConfigDict) -> None:
    self.last = m
    if self.initial_loss is None and m.get('initial_loss') is not None:
      self.initial_loss = float(m['initial_loss'])
    bad = m.get('first_nonfinite_step')
    loss = m.get('loss')
    if bad is not None and bad >= 0:
      self.diverged_at, self.reason = int(bad), 'non-finite loss'
    elif loss is None or not np.isfinite(loss):  # a JSON null after a resume
      self.diverged_at, self.reason = step, 'non-finite loss'
    elif tr.blowup_factor > 0 and self.initial_loss and loss > tr.blowup_factor * abs(self.initial_loss):
      self.above += 1
      if self.above >= tr.blowup_patience:
        self.diverged_at, self.reason = step, 'blow-up'
    else:
      self.above = 0


def log_line(step: int, total_steps: int, m: dict[str, Any]) -> str:
  """The console line for one logged chunk (m: flattened metrics with steps_per_s)."""
  return (f'step {step:>7}/{total_steps} | loss {m["loss"]:.4e} | lr {m["learning_rate"]:.2e} | '
          f'grad_norm {m["grad_norm"]:.3e} | {m["steps_per_s"]:,.0f} steps/s | '
          f'eta {(total_steps - step) / max(m["steps_per_s"], 1e-9):.0f}s')


def run_summary(counts: dict[str, Any], track: Track, *, step: int, evals: dict[str, Any] | None,
                compile_time_s: float | None, checkpoint_time_s: float, wall_time_s: float,
                steps_per_s: float | None = None) -> dict[str, Any]:
  """summary.json of a finished run (every entry point writes this schema).

  `steps_per_s`: steps trained by this process over its training time (compiling, held-out
  evaluation and checkpointing excluded); the last logged interval's rate when not given.
  """
  last = track.last
  summary = {**counts, 'wall_time_s': wall_time_s, 'compile_time_s': compile_time_s,
             'checkpoint_time_s': checkpoint_time_s,
             'steps_per_s': last.get('steps_per_s') if steps_per_s is None else steps_per_s,
             'final_loss': last.get('loss')}
  if track.diverged_at >= 0:
    summary.update(status='diverged', diverged_step=track.diverged_at, diverged_reason=track.reason,
                   step=track.diverged_at, eval_loss=None)
  else:
    summary.update(status='completed', step=step, **evals, **per_param(evals, counts))
  return summary


def per_param(evals: dict[str, Any], counts: dict[str, Any]) -> dict[str, float]:
  """bits_per_param and bits_per_ffn_param from a task's `bits_stored` (NaN without an FFN).

  Divided in float32, as the device would: the summary's one place for per-parameter figures.
  """
  if evals.get('bits_stored') is None:
    return {}
  bits = np.float32(evals['bits_stored'])
  ffn = counts.get('num_ffn_params', counts['num_params'])
  return {'bits_per_param': (bits / np.float32(counts['num_params'])).item(),
          'bits_per_ffn_param': (bits / np.float32(ffn)).item() if ffn else float('nan')}


# --------------------------------------------------------------------------- memory

def available_memory(device) -> tuple[int | None, str]:
  """(bytes the run may still allocate, where that figure comes from)."""
  if device.platform != 'cpu':
    stats = device.memory_stats() or {}
    if 'bytes_limit' in stats:
      return stats['bytes_limit'] - stats.get('bytes_in_use', 0), f'{device.device_kind} memory'
    return None, ''
  have, source = None, ''
  try:
    with open('/proc/meminfo') as f:
      info = {line.split(':')[0]: int(line.split()[1]) * 1024 for line in f}
    have, source = info['MemAvailable'], 'MemAvailable in /proc/meminfo'
  except (OSError, KeyError, ValueError, IndexError):
    pass
  limit = resource.getrlimit(resource.RLIMIT_AS)[0]
  if limit != resource.RLIM_INFINITY:
    try:
      with open('/proc/self/statm') as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError):
      used = 0
    if have is None or limit - used < have:
      have, source = limit - used, 'address-space limit (ulimit -v) minus what this process maps'
  return have, source


def check_memory(compiled, device, num_runs: int) -> None:
  """Refuse a program whose buffers (XLA's own count) exceed the device's free memory."""
  analysis = compiled.memory_analysis()
  if analysis is None:
    return
  need = (analysis.argument_size_in_bytes + analysis.output_size_in_bytes
          - analysis.alias_size_in_bytes + analysis.temp_size_in_bytes)
  have, source = available_memory(device)
  if have is not None and need > have:
    runs = f'{num_runs} runs' if num_runs > 1 else 'the run'
    raise NotEnoughMemory(
        f'{runs} would need {need / 2**30:.2f} GiB (state {analysis.argument_size_in_bytes / 2**30:.2f} GiB '
        f'+ temporaries of one chunk {analysis.temp_size_in_bytes / 2**30:.2f} GiB) but only '
        f'{max(have, 0) / 2**30:.2f} GiB is available ({source}); use a smaller model, batch or '
        'train.log_every' + (', or --max_group_size' if num_runs > 1 else ''))


# --------------------------------------------------------------------------- the loop

def logged_up_to(records: list[dict[str, Any]], tr: ml_collections.ConfigDict) -> float:
  """The step up to which every line a run logs is in `records` (inf once they show divergence)."""
  by_step = {r['step']: r for r in records}
  track, covered = Track(), 0
  for end in range(tr.log_every, tr.steps + tr.log_every, tr.log_every):
    end = min(end, tr.steps)
    if end not in by_step:
      return covered
    track.observe(end, by_step[end], tr)
    if track.diverged_at >= 0:
      return float('inf')
    covered = end
  return covered


def run_abstract_states(exp, configs: Sequence[ml_collections.ConfigDict]) -> list[PyTree]:
  """Each run's state shapes at its own d_ff (what its checkpoints hold), even in a padded program."""
  by_width = {models.hidden_width(exp.config.model): jax.eval_shape(exp.init, 0)}
  for c in configs:
    w = models.hidden_width(c.model)
    if w not in by_width:
      by_width[w] = jax.eval_shape(train.Experiment(c).init, 0)
  return [by_width[models.hidden_width(c.model)] for c in configs]


def _restore(ckpts: list[io_lib.Checkpointer], abstract_ones: list[PyTree], max_step: float):
  """(per-run states, step, per-run meta) at the newest step <= max_step that every run has
  intact, or None; newer checkpoints are removed (a rerun recreates them)."""
  common = set.intersection(*(set(c.steps()) for c in ckpts))
  had_any = any(c.steps() for c in ckpts)
  chosen = None
  for step in sorted((s for s in common if s <= max_step), reverse=True):
    restored = [c.restore(step, a) for c, a in zip(ckpts, abstract_ones)]
    if all(r is not None for r in restored):
      chosen = [r[0] for r in restored], step, [r[1] for r in restored]
      break
  for c in ckpts:
    for later in [s for s in c.steps() if chosen is None or s > chosen[1]]:
      c.discard(later)
  if chosen is None and had_any:
    io_lib.warn(f'no usable checkpoint in {", ".join(c.directory for c in ckpts)} (damaged, or past the '
                'last step logged in metrics.jsonl); starting over')
  return chosen


def run_group(programs, configs: Sequence[ml_collections.ConfigDict], run_dirs: Sequence[str], *,
              verbose: bool = False, step_bar: Any = None) -> list[dict[str, Any]]:
  """Train runs that share `programs` together; write each run's outputs; return summaries.

  `programs`: LonePrograms (one run) or GroupPrograms. wall_time_s of a group is its time
  divided by its size; compile_time_s is what this process spent compiling (None if
  nothing was compiled); checkpoint_time_s the time spent saving checkpoints. With several
  processes (jax.distributed) every process calls this; process 0 alone reads and writes
  `run_dirs` and hands what it read to the others (ffn_research.parallel).

  Throughput: chunk k+1 is dispatched before chunk k's metrics are written, then waited for,
  so each logged line's `steps_per_s` is its chunk's steps over the time from the end of the
  previous chunk (or of whatever came between: compiling, evaluating, checkpointing, which are
  not counted) to the end of this one. The summary's steps_per_s is all steps trained here over
  the training time: the loop's wall time less compiling, held-out evaluation and checkpoints.
  """
  start_time = time.time()
  exp, tr, num_runs = programs.exp, configs[0].train, len(configs)
  device = jax.local_devices()[0]
  seeds = [c.train.seed for c in configs]
  traced = programs.scalars(configs)  # train.TRACED_KEYS, one value per run
  widths = [models.hidden_width(c.model) for c in configs]  # true; the program may be wider
  abstract = programs.abstract_state(seeds, traced, widths)
  abstract_ones = run_abstract_states(exp, configs)
  primary = parallel.is_primary()  # with several processes only process 0 reads and writes run_dirs
  ckpts = [(io_lib.Checkpointer if primary else parallel.NoCheckpoints)(os.path.join(d, 'checkpoints'))
           for d in run_dirs]

  compiled: set[int] = set()
  compile_time = 0.0

  def ensure_compiled(n: int) -> float:
    """Compile the n-step chunk once; the seconds it took (0 when already compiled)."""
    nonlocal compile_time
    if n in compiled:
      return 0.0
    t0 = time.time()
    executable = programs.chunk.lower(abstract, n, traced).compile()  # the jit call below reuses it
    took = time.time() - t0
    compile_time += took
    if not compiled:
      check_memory(executable, device, num_runs)
    compiled.add(n)
    return took

  if not all(c.steps() and c.steps()[0] >= tr.steps for c in ckpts):
    ensure_compiled(min(tr.log_every, tr.steps))  # and refuse what cannot fit, before allocating
  logged = min(logged_up_to(io_lib.read_metrics(os.path.join(d, 'metrics.jsonl'))[0], tr)
               for d in run_dirs) if primary else 0
  restored = parallel.from_primary(_restore(ckpts, abstract_ones, logged))
  if restored is None:
    state, step, wall_before = programs.init(seeds, traced, widths), 0, [0.0] * num_runs
  else:
    states, step, metas = restored
    state, wall_before = programs.stack(states), [float(m['wall_time_s']) for m in metas]
    if verbose:
      print(f'resumed from checkpoint at step {step}', flush=True)

  logs, tracks = [], []
  try:
    for d in run_dirs:
      logs.append(io_lib.MetricsLog(d, resume_step=step) if primary else parallel.NoLog([]))
    for records in parallel.from_primary([log.records for log in logs]):
      tracks.append(Track())
      for record in records:
        tracks[-1].observe(record['step'], record, tr)

    pending = None  # (step, metrics, steps_per_s, evals) of a finished chunk, written after the next dispatch
    checkpoint_time = eval_time = 0.0

    def flush(pending) -> None:
      at, metrics, steps_per_s, evals = pending
      host, host_evals = jax.device_get((metrics, evals))
      for i in range(num_runs):
        if tracks[i].diverged_at >= 0:
          continue
        m = scalars(programs.run(host, i))
        first = m.pop('first_step_loss')
        if at == min(tr.log_every, tr.steps):
          m['initial_loss'] = first  # the first chunk's line holds the first step's loss
        m['steps_per_s'] = steps_per_s
        if host_evals is not None:
          m.update({'eval/' + k.removeprefix('eval_'): v for k, v in scalars(programs.run(host_evals, i)).items()})
        logs[i].write(at, m)
        tracks[i].observe(at, m, tr)
        if verbose:
          print(log_line(at, tr.steps, m), flush=True)

    def save_all(at: int) -> None:
      nonlocal checkpoint_time
      t0 = time.time()
      host = jax.device_get(state) if programs.batched else programs.host(state)
      elapsed = (time.time() - start_time) / num_runs
      for i, c in enumerate(ckpts):
        c.save(at, programs.run_state(host, i, abstract_ones[i]), {'wall_time_s': wall_before[i] + elapsed})
      checkpoint_time += time.time() - t0

    def crossed(every: int, before: int, after: int) -> bool:
      return every > 0 and after // every > before // every

    jax.block_until_ready(state)  # init or restore is not training time
    loop_start, loop_step, compile_before = time.time(), step, compile_time
    t_mark = loop_start  # where the next chunk's interval starts: the device is idle here
    while step < tr.steps and any(t.diverged_at < 0 for t in tracks):
      n = min(tr.log_every, tr.steps - step)
      t_mark += ensure_compiled(n)
      state, metrics = programs.chunk(state, n, traced)
      prev, step = step, step + n
      if pending is not None:
        flush(pending)  # the host writes the previous chunk's line while this one runs
      if step_bar is not None:
        step_bar.update(n)
      jax.block_until_ready((state, metrics))
      now = time.time()
      pending, t_mark = (step, metrics, n / max(now - t_mark, 1e-9), None), now
      if crossed(tr.eval_every, prev, step) or (tr.eval_every > 0 and step == tr.steps):
        evals = jax.block_until_ready(programs.evaluate(state['params'], state['data']))
        pending, t_mark = pending[:3] + (evals,), time.time()
        eval_time += t_mark - now
      if crossed(tr.checkpoint_every, prev, step) and step < tr.steps:
        if any(t.diverged_at < 0 for t in tracks):
          flush(pending)  # every logged step is on disk before the checkpoint counts
        pending = None
        save_all(step)
        t_mark = time.time()
    if pending is not None and any(t.diverged_at < 0 for t in tracks):
      flush(pending)
    train_s = time.time() - loop_start - (compile_time - compile_before) - checkpoint_time - eval_time
    rate = (step - loop_step) / train_s if step > loop_step and train_s > 0 else None
    save_all(step)  # the final state (a no-op when a rerun restored it)
    all_evals = None
    if any(t.diverged_at < 0 for t in tracks):
      all_evals = jax.device_get(programs.evaluate(state['params'], state['data']))
  finally:
    for log in logs:
      log.close()
    for c in ckpts:
      c.close()

  elapsed = (time.time() - start_time) / num_runs
  summaries = []
  for i, d in enumerate(run_dirs):
    evals = None if tracks[i].diverged_at >= 0 else scalars(programs.run(all_evals, i))
    summary = run_summary({**models.model_counts(configs[i], exp.task), **models.run_notes(configs[i])},
                          tracks[i], step=step, evals=evals,
                          compile_time_s=compile_time if compiled else None,
                          checkpoint_time_s=checkpoint_time / num_runs,
                          wall_time_s=wall_before[i] + elapsed, steps_per_s=rate)
    if tracks[i].diverged_at >= 0 and verbose:
      print(f'diverged: {tracks[i].reason} at step {tracks[i].diverged_at}', flush=True)
    summaries.append(summary)
  return summaries


# --------------------------------------------------------------------------- one run in a workdir

def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Train one config in `workdir` (resuming from its newest intact checkpoint); write its outputs.

  Raises ConfigError, io.WorkdirError (unusable, busy or mismatched workdir) or
  NotEnoughMemory before training; a crash during training is recorded as status 'failed'.
  """
  validation.validate(config)
  mesh = parallel.build_mesh(config)  # ConfigError when parallel.* does not fit the devices
  primary = parallel.is_primary()  # several processes (jax.distributed): process 0 owns the workdir
  if primary:
    io_lib.prepare_workdir(workdir)
  with io_lib.Lock(workdir) if primary else contextlib.nullcontext():
    if primary:
      io_lib.check_or_write_config(workdir, config.to_dict(), config_lib.default_config().to_dict(),
                                   free=('parallel.',))  # a run may resume on another mesh
    summary_path = os.path.join(workdir, 'summary.json')
    previous = parallel.from_primary(io_lib.read_summary(summary_path) if primary else None)
    if previous and previous.get('status') in ('completed', 'diverged'):
      if primary:
        print(f'{workdir}: already {previous["status"]}; delete the workdir to rerun.', flush=True)
      return previous
    start_time = time.time()
    exp = train.Experiment(config, mesh)
    if primary:
      print('model: ' + ', '.join(f'{k}={v:,}' if isinstance(v, int) else f'{k}={v}'
                                  for k, v in exp.counts.items()), flush=True)
      if mesh is not None:
        print(f'mesh: data={mesh.shape["data"]}, expert={mesh.shape["expert"]} over {mesh.size} '
              f'{mesh.devices.flat[0].platform} devices in {jax.process_count()} process(es)', flush=True)
    try:
      summary = run_group(LonePrograms(exp), [config], [workdir], verbose=primary)[0]
    except NotEnoughMemory:
      raise
    except Exception as e:  # recorded, then re-raised: a crash is never a silent success
      if primary:
        io_lib.write_json(summary_path, {'status': 'failed', 'error': f'{type(e).__name__}: {e}',
                                         'wall_time_s': time.time() - start_time})
      raise
    if primary:
      io_lib.write_json(summary_path, summary)
      print('summary: ' + json.dumps(io_lib.json_safe(summary)), flush=True)
  return summary


# --------------------------------------------------------------------------- reading a run back

class LoadedRun(NamedTuple):
  config: ml_collections.ConfigDict  # the resolved config (config.json)
  model: Any                         # the nnx model with the run's final weights
  summary: dict[str, Any] | None     # summary.json (None while unfinished)


def load_run(run_dir: str) -> LoadedRun:
  """(config, model with the newest checkpoint's weights, summary) of a run directory."""
  raw = io_lib.read_json(os.path.join(run_dir, 'config.json'))
  if raw is None:
    raise FileNotFoundError(f'{run_dir}/config.json not found: not a run directory')
  config = ml_collections.ConfigDict(raw)
  exp = train.Experiment(config)
  ckpt = io_lib.Checkpointer(os.path.join(run_dir, 'checkpoints'))
  try:
    for step in ckpt.steps():
      restored = ckpt.restore(step, jax.eval_shape(jax.jit(exp.init), config.train.seed))
      if restored is not None:
        break
    else:
      raise FileNotFoundError(f'{run_dir}/checkpoints holds no intact checkpoint')
  finally:
    ckpt.close()
  model = exp.merge(restored[0]['params'])
  return LoadedRun(config, model, io_lib.read_json(os.path.join(run_dir, 'summary.json')))
