"""Per-line steps_per_s in metrics.jsonl: each logged interval is timed by what it contains."""

import json
import os
import time

import jax
import jax.numpy as jnp

from ffn_research import config as config_lib
from ffn_research import loop
from ffn_research import programs
from ffn_research import train

SLEEP_S = 0.05  # each chunk's program sleeps this long on the device (a host callback)


def test_every_line_is_timed_by_its_own_chunk(tmp_path):
  """With every chunk lasting >= SLEEP_S on the device, no line may report more than
  steps / SLEEP_S steps/s, whatever the host does meanwhile (here: compile the evaluation
  mid-run, evaluate, checkpoint). Timing lines by when the host happened to fetch them (the
  old loop) fails this: the chunk that runs while the evaluation compiles is logged at ~0 s.
  Load can only lengthen intervals, so the bounds hold on a busy machine too."""
  c = config_lib.default_config()
  c.model.d_ff = 8
  c.task.num_train, c.task.num_eval, c.task.grid_size = 64, 64, 65
  c.train.steps, c.train.log_every, c.train.batch_size, c.train.warmup_steps = 80, 10, 16, 5
  c.train.eval_every, c.train.checkpoint_every = 30, 50
  exp = train.Experiment(c)
  real_chunk = exp.train_chunk

  def slow_chunk(state, num_steps, scalars=None):
    state, metrics = real_chunk(state, num_steps, scalars)
    step, loss = jax.pure_callback(
      lambda s, line: (time.sleep(SLEEP_S), (s, line))[1],
      (jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((), jnp.float32)),
      state['step'],
      metrics['loss'],
    )
    return {**state, 'step': step}, {**metrics, 'loss': loss}

  exp.train_chunk = slow_chunk
  run_dir = str(tmp_path / 'run')
  os.makedirs(run_dir)
  t0 = time.time()
  summary = loop.train_group(programs.LonePrograms(exp), [c], [run_dir])[0]
  wall = time.time() - t0
  lines = [json.loads(line) for line in open(os.path.join(run_dir, 'metrics.jsonl'))]
  assert [m['step'] for m in lines] == list(range(10, 90, 10))
  assert [m['step'] for m in lines if 'eval/loss' in m] == [30, 60, 80]
  bound = c.train.log_every / SLEEP_S
  for m in lines:
    assert 0 < m['steps_per_s'] <= bound, (m['step'], m['steps_per_s'], bound)
  assert 0 < summary['steps_per_s'] <= bound
  # The intervals are disjoint parts of the training time: their sum is at least the chunks'
  # sleeps and at most the training time the summary's rate is computed over.
  intervals = sum(c.train.log_every / m['steps_per_s'] for m in lines)
  train_s = c.train.steps / summary['steps_per_s']
  assert len(lines) * SLEEP_S <= intervals <= train_s * (1 + 1e-9) <= wall
