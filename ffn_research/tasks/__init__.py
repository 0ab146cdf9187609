"""Task registry. A task is built from the config and is pure and jit-able:

- `output_dim`: features the model must output (regression) or vocabulary size.
- sequence tasks also: `vocab_size` (= output_dim) and `seq_len`; a batch is
  {'inputs': int (B, T), 'targets': int (B, T), 'weights': float (B, T)}; optional
  `scored_vocab`: the leading tokens an answer can be (the model's logits cover these only).
- `init_data(rng) -> data`: every array the task needs (datasets, teachers),
  a pytree, so runs with different seeds can be vmapped.
- `sample_batch(data, rng) -> batch`: one training batch, inside the compiled step.
- `loss(outputs, batch) -> (loss, metrics)`: the training objective.
- `evaluate(apply_fn, data) -> metrics`: held-out metrics, 'eval_loss' among them.
- `validate(config)` (static): raise config.ConfigError for bad task keys.
- optional `traced`: names of task keys `init_data` also takes as keyword arguments, possibly
  traced, so runs that differ only in them share one program (TRACED_KEYS below).

`validate(config)` below checks task.name and then that task's keys.
"""

from typing import Any

from ffn_research import config as config_lib
from ffn_research.tasks import graphs
from ffn_research.tasks import language
from ffn_research.tasks import regression
from ffn_research.tasks import sequence

# Token-sequence tasks, for model.arch in models.SEQUENCE_ARCHS.
SEQUENCE_TASKS = {**sequence.TASKS, **language.TASKS}

# task.name -> task class (duck-typed: validate, init_data, sample_batch, evaluate, ...)
TASKS: dict[str, Any] = {
  'function': regression.FunctionTask,
  'teacher_student': regression.TeacherStudentTask,
  'random_labels': regression.RandomLabelsTask,
  'sparse_features': regression.SparseFeaturesTask,  # Elhage et al. 2022's sparse inputs, reconstructed
  **graphs.TASKS,  # shortest_path: in-context shortest-path distance on a fresh graph per example (bare FFN)
  **SEQUENCE_TASKS,
}

# Task keys a task's init_data takes traced (e.g. teacher_student's label noise); unused by the others.
TRACED_KEYS = tuple(sorted({f'task.{k}' for task in TASKS.values() for k in getattr(task, 'traced', ())}))


def build_task(config):
  return TASKS[config.task.name](config)


def validate(config) -> None:
  """ConfigError for the task section: task.name, then the chosen task's own keys."""
  config_lib.one_of('task.name', config.task.name, TASKS)
  config_lib.check_renamed(config)
  TASKS[config.task.name].validate(config)
