"""The one run loop: a group of runs that share compiled programs (a lone run is a group of one).

`train_group(programs, configs, run_dirs)` trains the runs together (`GroupLoop`) and writes each
run's logs and checkpoints:

  metrics.jsonl, tensorboard/   one line per logged chunk; `eval/...` every train.eval_every
  checkpoints/                  every train.checkpoint_every steps and at the end (Orbax; a
                                sweep's runs: checkpoints.Checkpointer's NumPy format)
                                (the final one holds the trained parameters: `load_run`)

`Lifecycle` is the one lifecycle of lone runs (`train_and_evaluate`) and a sweep's groups alike:
it locks each run and checks its config.json before `train_group`, and writes its summary.json
(or records its failure) after.

Chunks are `lax.scan`s of train.log_every steps; a chunk's metrics are fetched after the
next chunk is dispatched, except before a checkpoint: every logged step up to a checkpoint
is on disk before it is saved, and the summary only after the final checkpoint, so a kill at
any moment followed by a rerun resumes from the newest intact checkpoint and ends as an
uninterrupted run would have (bit-identical on CPU), each step logged once.

A run ends `diverged` when its loss turns non-finite, or when the blow-up rule fires: the
logged loss exceeds train.blowup_factor times the first step's loss for
train.blowup_patience consecutive logged chunks (train.blowup_factor = 0 turns it off).
"""

import collections
from collections.abc import Callable, Sequence
import contextlib
import dataclasses
import functools
import json
import os
import sys
import time
from typing import Any, NamedTuple

import jax
import ml_collections

from ffn_research import checkpoints as checkpoints_lib
from ffn_research import identity
from ffn_research import io as io_lib
from ffn_research import metrics as metrics_lib
from ffn_research import models
from ffn_research import parallel
from ffn_research import programs as programs_lib
from ffn_research import train
from ffn_research import validation

PyTree = Any
Checkpoints = checkpoints_lib.Checkpointer | parallel.NoCheckpoints  # process 0's, or the others' stand-in


# --------------------------------------------------------------------------- the loop


def logged_up_to(records: list[dict[str, Any]], tr: ml_collections.ConfigDict) -> float:
  """The step up to which every line a run logs is in `records` (inf once they show divergence)."""
  by_step = {r['step']: r for r in records}
  track, covered = metrics_lib.Track(), 0
  for end in range(tr.log_every, tr.steps + tr.log_every, tr.log_every):
    end = min(end, tr.steps)
    if end not in by_step:
      return covered
    track.observe(end, by_step[end], tr)
    if track.diverged_at >= 0:
      return float('inf')
    covered = end
  return covered


def check_checkpoint_meta(ckpts: Sequence[Checkpoints], configs: Sequence[ml_collections.ConfigDict]) -> None:
  """io.WorkdirError (one line) when a run's checkpoint was saved under another model.parametrization
  (its meta records it; none recorded: 'standard'), before any restore could set it aside as damaged."""
  for c, config in zip(ckpts, configs, strict=True):
    for step in c.steps():
      had = (c.read_meta(step) or {}).get('parametrization', 'standard')
      if had != config.model.parametrization:
        raise io_lib.WorkdirError(
          f'{c.directory}/{step} was saved with model.parametrization={had}, this run has '
          f'{config.model.parametrization}; use a new --workdir or delete it'
        )


def _restore(ckpts: Sequence[Checkpoints], abstract_ones: list[PyTree], max_step: float):
  """(per-run states, step, per-run meta) at the newest step <= max_step that every run has
  intact, or None; newer checkpoints are removed (a rerun recreates them)."""
  common = set.intersection(*(set(c.steps()) for c in ckpts))
  had_any = any(c.steps() for c in ckpts)
  chosen = None
  for step in sorted((s for s in common if s <= max_step), reverse=True):
    restored = [c.restore(step, a) for c, a in zip(ckpts, abstract_ones, strict=True)]
    intact = [r for r in restored if r is not None]
    if len(intact) == len(restored):
      chosen = [r[0] for r in intact], step, [r[1] for r in intact]
      break
  for c in ckpts:
    for later in [s for s in c.steps() if chosen is None or s > chosen[1]]:
      c.discard(later)
  if chosen is None and had_any:
    io_lib.warn(
      f'no usable checkpoint in {", ".join(c.directory for c in ckpts)} (damaged, or past the '
      'last step logged in metrics.jsonl); starting over'
    )
  return chosen


class Stopwatch:
  """Wall time since creation, seconds spent per activity that is not training (compiling,
  held-out evaluation, checkpointing), and the training time between them."""

  def __init__(self):
    self.start = self.mark = self.train_start = time.time()
    self.spent: dict[str, float] = collections.defaultdict(float)
    self._spent_before = 0.0  # spent before start_training

  @contextlib.contextmanager
  def excluded(self, activity: str):
    """Time `activity` into spent[activity]; the current training interval starts after it."""
    t0 = time.time()
    try:
      yield
    finally:
      self.mark = time.time()
      self.spent[activity] += self.mark - t0

  def lap(self) -> float:
    """Seconds since the end of the last lap or excluded activity; a new lap starts now."""
    now = time.time()
    took, self.mark = now - self.mark, now
    return took

  def start_training(self) -> None:
    self.mark = self.train_start = time.time()
    self._spent_before = sum(self.spent.values())

  def training_time(self) -> float:
    """Seconds since start_training less every excluded activity since then."""
    return time.time() - self.train_start - (sum(self.spent.values()) - self._spent_before)

  def elapsed(self) -> float:
    return time.time() - self.start


@dataclasses.dataclass
class Chunk:
  """A finished chunk whose lines are not written yet (they are written after the next dispatch)."""

  step: int  # the step it ended at
  metrics: PyTree  # on device
  steps_per_s: float  # its steps over its own interval (Stopwatch.lap)
  evals: PyTree = None  # held-out metrics at `step`, when due


def _crossed(every: int, before: int, after: int) -> bool:
  return every > 0 and after // every > before // every


class GroupLoop:
  """Trains the runs that share `programs` together, chunk by chunk (`train_group`).

  State: `step` (of every run: they train in lockstep), `state` (the programs'), `pending`
  (the last chunk, its lines not yet written), `tracks` (per run, from its logged lines).
  """

  def __init__(
    self,
    programs: programs_lib.Programs,
    configs: Sequence[ml_collections.ConfigDict],
    run_dirs: Sequence[str],
    verbose: bool,
    step_bar: Any,
    light_checkpoints: bool = False,
  ):
    self.programs, self.configs, self.run_dirs = programs, configs, run_dirs
    self.tr, self.num_runs = configs[0].train, len(configs)
    self.verbose, self.step_bar = verbose, step_bar
    self.clock = Stopwatch()
    self.traced = programs.traced(configs)  # identity.TRACED_KEYS, one value per run
    self.abstract = programs.abstract_state(configs, self.traced)
    self.run_abstracts = programs_lib.run_abstract_states(programs.exp, configs)  # what checkpoints hold
    self.primary = parallel.is_primary()  # with several processes only process 0 reads and writes run_dirs
    self.ckpts: list[Checkpoints] = [
      checkpoints_lib.Checkpointer(os.path.join(d, 'checkpoints'), light=light_checkpoints)
      if self.primary
      else parallel.NoCheckpoints(os.path.join(d, 'checkpoints'))
      for d in run_dirs
    ]
    self.compiled: set[int] = set()  # chunk lengths compiled
    self.state: PyTree = None
    self.step, self.wall_before = 0, [0.0] * self.num_runs
    self.logs: list[Any] = []
    self.tracks: list[metrics_lib.Track] = []
    self.pending: Chunk | None = None
    self.unwritable: dict[int, str] = {}  # run index -> the one-line error of a run whose files failed

  def _write(self, i: int, write: Callable[[], None]) -> None:
    """write() for run i; an OSError (a full disk, a folder gone) fails that run alone, in one line."""
    try:
      write()
    except OSError as e:
      self.unwritable[i] = f'{type(e).__name__}: {e}'.splitlines()[0]
      io_lib.warn(f'{self.run_dirs[i]} cannot be written ({self.unwritable[i]}); the run fails, its group goes on')

  @property
  def training(self) -> bool:
    """Whether some run has neither diverged nor failed to be written."""
    return any(t.diverged_at < 0 and i not in self.unwritable for i, t in enumerate(self.tracks))

  def compile(self, n: int) -> None:
    """Compile the n-step chunk once (the jit call reuses it); the first also checks memory."""
    if n in self.compiled:
      return
    with self.clock.excluded('compile'):
      executable = self.programs.chunk.lower(self.abstract, n, self.traced).compile()
    if not self.compiled:
      parallel.check_memory(executable, jax.local_devices()[0], self.num_runs)
    self.compiled.add(n)

  def resume(self) -> None:
    """Start fresh, or from the newest checkpoint every run has intact and logged; open the logs."""
    tr = self.tr
    check_checkpoint_meta(self.ckpts, self.configs)  # before compiling
    if not all(c.steps() and c.steps()[0] >= tr.steps for c in self.ckpts):
      self.compile(min(tr.log_every, tr.steps))  # and refuse what cannot fit, before allocating
    logged = (
      min(logged_up_to(io_lib.read_metrics(os.path.join(d, 'metrics.jsonl'))[0], tr) for d in self.run_dirs)
      if self.primary
      else 0
    )
    restored = parallel.from_primary(_restore(self.ckpts, self.run_abstracts, logged))
    if restored is None:
      self.state = self.programs.init(self.configs, self.traced)
    else:
      states, self.step, metas = restored
      self.state, self.wall_before = self.programs.stack(states), [float(m['wall_time_s']) for m in metas]
      if self.verbose:
        print(f'resumed from checkpoint at step {self.step}', flush=True)
    for d in self.run_dirs:
      self.logs.append(io_lib.MetricsLog(d, resume_step=self.step) if self.primary else parallel.NoLog([]))
    for records in parallel.from_primary([log.records for log in self.logs]):
      self.tracks.append(metrics_lib.Track())
      for record in records:
        self.tracks[-1].observe(record['step'], record, tr)

  def dispatch(self) -> int:
    """Run the next chunk, writing the previous chunk's lines meanwhile; the step it started at."""
    n = min(self.tr.log_every, self.tr.steps - self.step)
    self.compile(n)
    self.state, metrics = self.programs.chunk(self.state, n, self.traced)
    start, self.step = self.step, self.step + n
    self.flush()  # the host writes the previous chunk's lines while this one runs
    if self.step_bar is not None:
      self.step_bar.update(n)
    jax.block_until_ready((self.state, metrics))
    self.pending = Chunk(self.step, metrics, n / max(self.clock.lap(), 1e-9))
    return start

  def flush(self) -> None:
    """Write the pending chunk's line of every run still training."""
    chunk, self.pending = self.pending, None
    if chunk is None or not self.training:
      return
    metrics, evals = jax.device_get((chunk.metrics, chunk.evals))
    metrics = self.programs.per_run(metrics, self.num_runs)
    evals = [None] * self.num_runs if evals is None else self.programs.per_run(evals, self.num_runs)
    for i, track in enumerate(self.tracks):
      if track.diverged_at >= 0 or i in self.unwritable:
        continue
      m = metrics_lib.flatten_metrics(metrics[i])
      first = m.pop('first_step_loss')
      if chunk.step == min(self.tr.log_every, self.tr.steps):
        m['initial_loss'] = first  # the first chunk's line holds the first step's loss
      m['steps_per_s'] = chunk.steps_per_s
      if evals[i] is not None:
        m.update(metrics_lib.eval_log_names(metrics_lib.flatten_metrics(evals[i])))
      self.logs[i].write(chunk.step, m)
      track.observe(chunk.step, m, self.tr)
      if self.verbose:
        print(metrics_lib.log_line(chunk.step, self.tr.steps, m), flush=True)
    for i, log in enumerate(self.logs):  # each run's lines of this chunk in one append, its files closed after
      if i not in self.unwritable:
        self._write(i, log.flush)

  def evaluate(self, start: int) -> None:
    """Held-out metrics for the pending chunk's line every train.eval_every steps and at the end."""
    every = self.tr.eval_every
    if _crossed(every, start, self.step) or (every > 0 and self.step == self.tr.steps):
      with self.clock.excluded('eval'):
        assert self.pending is not None  # dispatch set it
        self.pending.evals = jax.block_until_ready(self.programs.evaluate(self.state['params'], self.state['data']))

  def checkpoint(self) -> None:
    """Save every run's state at the current step (as its own shapes), its lines already on disk."""
    self.flush()  # every logged step is on disk before the checkpoint counts
    with self.clock.excluded('checkpoint'):
      states = self.programs.unstack(self.state, self.run_abstracts)
      elapsed = self.clock.elapsed() / self.num_runs
      for i, (c, state, before, config) in enumerate(
        zip(self.ckpts, states, self.wall_before, self.configs, strict=True)
      ):
        if i not in self.unwritable:
          meta = {'wall_time_s': before + elapsed, 'parametrization': config.model.parametrization}
          self._write(i, functools.partial(c.save, self.step, state, meta))

  def train(self) -> tuple[float | None, PyTree]:
    """(steps per second of training time, final held-out metrics or None if every run diverged)."""
    jax.block_until_ready(self.state)  # init or restore is not training time
    first_step = self.step
    self.clock.start_training()
    while self.step < self.tr.steps and self.training:
      start = self.dispatch()
      self.evaluate(start)
      if _crossed(self.tr.checkpoint_every, start, self.step) and self.step < self.tr.steps:
        self.checkpoint()
    self.flush()
    train_s = self.clock.training_time()
    rate = (self.step - first_step) / train_s if self.step > first_step and train_s > 0 else None
    self.checkpoint()  # the final state (a no-op when a rerun restored it)
    evals = None
    if self.training:
      evals = jax.device_get(self.programs.evaluate(self.state['params'], self.state['data']))
    return rate, evals

  def finish(self, rate: float | None, evals: PyTree) -> list[dict[str, Any]]:
    """Each run's summary.json content (the caller writes it)."""
    elapsed = self.clock.elapsed() / self.num_runs
    evals = [None] * self.num_runs if evals is None else self.programs.per_run(evals, self.num_runs)
    summaries: list[dict[str, Any]] = []
    for i, (config, track, run_evals, before) in enumerate(
      zip(self.configs, self.tracks, evals, self.wall_before, strict=True)
    ):
      if i in self.unwritable:
        summaries.append({'status': 'failed', 'error': self.unwritable[i]})
        continue
      counts = {**models.model_counts(config, self.programs.exp.task), **models.run_notes(config)}
      summaries.append(
        metrics_lib.run_summary(
          counts,
          track,
          step=self.step,
          evals=None if track.diverged_at >= 0 else metrics_lib.flatten_metrics(run_evals),
          compile_time_s=self.clock.spent['compile'] if self.compiled else None,
          checkpoint_time_s=self.clock.spent['checkpoint'] / self.num_runs,
          wall_time_s=before + elapsed,
          steps_per_s=rate,
        )
      )
      if track.diverged_at >= 0 and self.verbose:
        print(f'diverged: {track.reason} at step {track.diverged_at}', flush=True)
    return summaries

  def close(self) -> None:
    for i, log in enumerate(self.logs):
      if i not in self.unwritable:
        self._write(i, log.close)
    for c in self.ckpts:
      c.close()


def train_group(
  programs: programs_lib.Programs,
  configs: Sequence[ml_collections.ConfigDict],
  run_dirs: Sequence[str],
  *,
  verbose: bool = False,
  step_bar: Any = None,
  light_checkpoints: bool = False,
) -> list[dict[str, Any]]:
  """Train runs that share `programs` together; write each run's logs and checkpoints; return
  their summaries (a lone run is a group of one: programs.LonePrograms). `light_checkpoints`:
  checkpoints.Checkpointer's NumPy format (a sweep's runs) instead of Orbax.

  wall_time_s of a group is its time divided by its size; compile_time_s is what this process
  spent compiling (None if nothing was compiled); checkpoint_time_s the time spent saving
  checkpoints. With several processes (jax.distributed) every process calls this; process 0
  alone reads and writes `run_dirs` and hands what it read to the others (ffn_research.parallel).

  Throughput: chunk k+1 is dispatched before chunk k's metrics are written, then waited for,
  so each logged line's `steps_per_s` is its chunk's steps over the time from the end of the
  previous chunk (or of whatever came between: compiling, evaluating, checkpointing, which are
  not counted) to the end of this one. The summary's steps_per_s is all steps trained here over
  the training time: the loop's wall time less compiling, held-out evaluation and checkpoints.
  """
  loop = GroupLoop(programs, configs, run_dirs, verbose, step_bar, light_checkpoints)
  try:
    loop.resume()
    rate, evals = loop.train()
  finally:
    loop.close()
  return loop.finish(rate, evals)


# --------------------------------------------------------------------------- a run's lifecycle


class Lifecycle:
  """The one lifecycle of runs trained together: a lone run (a group of one) or a group of a sweep.

  Entering starts each run: creates its folder, locks it (io.Busy when another process holds it) and
  checks its config.json; `done` holds the summaries of the finished runs (a rerun skips them),
  `todo` the (RunDir, config) of the others. `train` resumes and trains `todo` together and writes
  each summary.json, or records a crash in each as 'failed' and re-raises it. Leaving releases the
  locks. With several processes (jax.distributed) process 0 alone touches the folders.

  What differs in a sweep's group (`sweep=True`): a run another process holds is skipped with a line
  on stderr (its group-mates still train), config.json must match in every key (a lone run may
  resume on another mesh: parallel.* may change), a refusal (parallel.NotEnoughMemory) is recorded as a
  failure too (the sweep goes on; results.csv says why), and a failure records no wall time.
  """

  def __init__(
    self, run_dirs: Sequence[io_lib.RunDir], configs: Sequence[ml_collections.ConfigDict], *, sweep: bool = False
  ):
    self.run_dirs, self.configs, self.sweep = run_dirs, configs, sweep
    self.primary = parallel.is_primary()
    self.locks = contextlib.ExitStack()
    self.done: list[dict[str, Any]] = []
    self.todo: list[tuple[io_lib.RunDir, ml_collections.ConfigDict]] = []
    self.start_time = 0.0  # when the runs were started (a lone run's failure records the time since)

  def __enter__(self) -> 'Lifecycle':
    held = []
    try:
      for run_dir, config in zip(self.run_dirs, self.configs, strict=True):
        if not self.primary or self._start(run_dir, config):
          held.append((run_dir, config))
      finished = parallel.from_primary([d.finished() for d, _ in held] if self.primary else None)
    except BaseException:
      self.locks.close()
      raise
    self.done = [s for s in finished if s is not None]
    self.todo = [run for run, s in zip(held, finished, strict=True) if s is None]
    self.start_time = time.time()
    return self

  def _start(self, run_dir: io_lib.RunDir, config: ml_collections.ConfigDict) -> bool:
    """Create, lock and check the run's folder; False when a sweep skips it (another process holds it)."""
    if self.sweep:  # inside the sweep's workdir, probed once by run_sweep
      os.makedirs(run_dir.path, exist_ok=True)
    else:
      io_lib.prepare_workdir(run_dir.path)
    try:
      self.locks.enter_context(run_dir.lock())
    except io_lib.Busy as e:
      if not self.sweep:
        raise
      print(f'sweep: skipped {os.path.basename(run_dir.path)}: {e}', file=sys.stderr, flush=True)
      return False
    run_dir.check_config(config.to_dict(), free=identity.free_on_resume(config, lone=not self.sweep))
    return True

  def train(
    self,
    programs: Callable[[], programs_lib.Programs],
    *,
    extra: dict[str, Any] | None = None,
    verbose: bool = False,
    step_bar: Any = None,
  ) -> list[dict[str, Any]]:
    """Train `todo` together (train_group on `programs()`); write and return each summary (plus `extra`)."""
    run_dirs, configs = [d for d, _ in self.todo], [c for _, c in self.todo]
    try:
      summaries = train_group(
        programs(),
        configs,
        [d.path for d in run_dirs],
        verbose=verbose,
        step_bar=step_bar,
        light_checkpoints=self.sweep,
      )
    except Exception as e:  # recorded, then re-raised: a crash is never a silent success
      if self.primary and (self.sweep or not isinstance(e, parallel.NotEnoughMemory)):
        for d in run_dirs:
          d.write_failure(e, **({} if self.sweep else {'wall_time_s': time.time() - self.start_time}))
      raise
    for d, summary in zip(run_dirs, summaries, strict=True):
      summary.update(extra or {})
      if self.primary:
        try:
          d.write_summary(summary)
        except OSError as e:  # that run alone (its folder cannot be written); its group-mates are recorded
          if summary['status'] != 'failed':
            raise
          io_lib.warn(f'{d.path}: summary.json cannot be written ({type(e).__name__}: {e})'.splitlines()[0])
    return summaries

  def __exit__(self, *exc) -> None:
    self.locks.close()


# --------------------------------------------------------------------------- one run in a workdir


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Train one config in `workdir` (resuming from its newest intact checkpoint); write its outputs.

  Raises ConfigError, io.WorkdirError (unusable, busy or mismatched workdir) or
  parallel.NotEnoughMemory before training; a crash during training is recorded as status 'failed'
  (`Lifecycle`). With several processes (jax.distributed) process 0 alone owns the workdir.
  """
  validation.validate(config)
  mesh = parallel.build_mesh(config)  # ConfigError when parallel.* does not fit the devices
  primary = parallel.is_primary()
  with Lifecycle([io_lib.RunDir(workdir)], [config]) as run:
    if run.done:
      if primary:
        print(f'{workdir}: already {run.done[0]["status"]}; delete the workdir to rerun.', flush=True)
      return run.done[0]
    exp = train.Experiment(config, mesh)
    if primary:
      _print_model(exp, mesh)
    (summary,) = run.train(lambda: programs_lib.LonePrograms(exp), verbose=primary)
    if primary:
      print('summary: ' + json.dumps(io_lib.json_safe(summary)), flush=True)
  return summary


def _print_model(exp: train.Experiment, mesh: jax.sharding.Mesh | None) -> None:
  print(
    'model: ' + ', '.join(f'{k}={v:,}' if isinstance(v, int) else f'{k}={v}' for k, v in exp.counts.items()), flush=True
  )
  if mesh is not None:
    print(
      f'mesh: data={mesh.shape["data"]}, expert={mesh.shape["expert"]} over {mesh.size} '
      f'{mesh.devices.flat[0].platform} devices in {jax.process_count()} process(es)',
      flush=True,
    )


# --------------------------------------------------------------------------- reading a run back


class LoadedRun(NamedTuple):
  config: ml_collections.ConfigDict  # the resolved config (config.json)
  model: Any  # the nnx model with the run's final weights
  summary: dict[str, Any] | None  # summary.json (None while unfinished)


def restore_program(config: ml_collections.ConfigDict):
  """(Experiment, jitted init with the seed traced, abstract state) of `config`, from the one program cache."""
  # The seed (a traced input of init), the schedule and bookkeeping change neither the initial parameters and
  # data nor the state's structure; the learning rate and weight decay are values in the optimizer state (whether
  # decay is on is not); the other traced values still key it (init draws the task data with them).
  init_free = (
    *identity.keys_with((identity.SEED, identity.SCHEDULE, identity.BOOKKEEPING), config),
    'train.learning_rate',
  )
  key = identity.program_key(config, ignore=init_free, on_off=('train.weight_decay',))

  def build():
    exp = train.Experiment(config)
    init = jax.jit(exp.init)
    return exp, init, jax.eval_shape(init, config.train.seed)

  return programs_lib.cached(('restore', key), build)


def restore(run_dir: str, which: str = 'newest'):
  """(config, {step: params} of the intact checkpoints (`which`='newest': the newest only; 'all'), Experiment,
  initial state of the run's seed). The one path that reads a run's checkpoints back."""
  raw = io_lib.read_json(os.path.join(run_dir, 'config.json'))
  if raw is None:
    raise FileNotFoundError(f'{run_dir}/config.json not found: not a run directory')
  config = ml_collections.ConfigDict(raw)
  exp, init, abstract = restore_program(config)
  params = {}
  ckpt = checkpoints_lib.Checkpointer(os.path.join(run_dir, 'checkpoints'))
  try:
    for step in sorted(ckpt.steps(), reverse=True):
      restored = ckpt.restore(step, abstract)
      if restored is not None:
        params[int(step)] = restored[0]['params']
        if which == 'newest':
          break
  finally:
    ckpt.close()
  return config, dict(sorted(params.items())), exp, init(config.train.seed)


def load_run(run_dir: str) -> LoadedRun:
  """(config, model with the newest intact checkpoint's weights, summary) of a run directory."""
  config, params, exp, _ = restore(run_dir)
  if not params:
    raise FileNotFoundError(f'{run_dir}/checkpoints holds no intact checkpoint')
  model = exp.merge(next(iter(params.values())))
  return LoadedRun(config, model, io_lib.read_json(io_lib.RunDir(run_dir).summary_path))
