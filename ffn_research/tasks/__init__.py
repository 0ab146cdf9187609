"""Task registry. A task is built from the config and is pure and jit-able:

- `output_dim`: features the model must output (regression) or vocabulary size.
- `init_data(rng) -> data`: every array the task needs (datasets, teachers),
  a pytree, so runs with different seeds can be vmapped.
- `sample_batch(data, rng) -> batch`: one training batch, inside the compiled step.
- `loss(outputs, batch) -> (loss, metrics)`: the training objective.
- `evaluate(apply_fn, data) -> metrics`: held-out metrics, 'eval_loss' among them.
- `validate(config)` (static): raise config.ConfigError for bad task keys.
"""

from ffn_research.tasks import regression

TASKS = {
    'function': regression.FunctionTask,
    'teacher_student': regression.TeacherStudentTask,
    'random_labels': regression.RandomLabelsTask,
}


def build_task(config):
  return TASKS[config.task.name](config)
