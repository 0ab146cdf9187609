"""Toy regression tasks for the bare FFN: 1-D functions, teacher-student, random labels.

All data are generated from the run's seed in `init_data`; batches are drawn
inside the compiled step.
"""

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections

from ffn_research import config as config_lib
from ffn_research.models import activations
from ffn_research.models import ffn as ffn_lib

# 1-D targets on [-1, 1].
FUNCTIONS = {
  'x_squared': jnp.square,
  'sin': lambda x: jnp.sin(jnp.pi * x),  # one period on [-1, 1]
  'abs': jnp.abs,
  'step': lambda x: (x > 0).astype(x.dtype),  # discontinuous at 0
}


def mse(pred: jax.Array, target: jax.Array) -> jax.Array:
  return jnp.mean(jnp.square(pred.astype(jnp.float32) - target))


def _batched_apply(apply_fn, x_NxD: jax.Array, chunk: int = 8192) -> jax.Array:
  """apply_fn over x in chunks (bounds memory for large eval sets)."""
  n = x_NxD.shape[0]
  if n <= chunk:
    return apply_fn(x_NxD)
  pad = -n % chunk
  xs = jnp.pad(x_NxD, ((0, pad), (0, 0))).reshape(-1, chunk, x_NxD.shape[-1])
  ys = jax.lax.map(apply_fn, xs)
  return ys.reshape(-1, ys.shape[-1])[:n]


class _Regression:
  """Shared pieces: a fixed training set, batches drawn with replacement, MSE loss."""

  def __init__(self, config: ml_collections.ConfigDict):
    self.config = config
    self.batch_size = config.train.batch_size

  def sample_batch(self, data, rng):
    n = data['x_train'].shape[0]
    idx = jax.random.randint(rng, (self.batch_size,), 0, n)
    return {'inputs': data['x_train'][idx], 'targets': data['y_train'][idx]}

  def loss(self, outputs, batch):
    return mse(outputs, batch['targets']), {}


class FunctionTask(_Regression):
  """Fit f(x) on [-1, 1] (d_model = 1). Reports train/held-out MSE and sup-norm error."""

  output_dim = 1

  @staticmethod
  def validate(config):
    t = config.task
    config_lib.one_of('task.function', t.function, FUNCTIONS)
    config_lib.check(
      config.model.d_model == 1, f'model.d_model={config.model.d_model} must be 1 for task.name=function (1-D inputs)'
    )
    for key in ('num_train', 'num_eval', 'grid_size'):
      config_lib.positive_int(f'task.{key}', t[key])

  def __init__(self, config):
    super().__init__(config)
    self.f = FUNCTIONS[config.task.function]

  def init_data(self, rng):
    t = self.config.task
    k_train, k_eval = jax.random.split(jax.random.fold_in(rng, 1))
    x_train = jax.random.uniform(k_train, (t.num_train, 1), minval=-1.0, maxval=1.0)
    x_eval = jax.random.uniform(k_eval, (t.num_eval, 1), minval=-1.0, maxval=1.0)
    return {'x_train': x_train, 'y_train': self.f(x_train), 'x_eval': x_eval, 'y_eval': self.f(x_eval)}

  def evaluate(self, apply_fn, data):
    grid = jnp.linspace(-1.0, 1.0, self.config.task.grid_size)[:, None]
    err_grid = _batched_apply(apply_fn, grid).astype(jnp.float32) - self.f(grid)
    return {
      'train_mse': mse(_batched_apply(apply_fn, data['x_train']), data['y_train']),
      'eval_loss': mse(_batched_apply(apply_fn, data['x_eval']), data['y_eval']),
      'sup_error': jnp.max(jnp.abs(err_grid)),
    }


def cluster_probs(num_clusters: int, zipf: float) -> jax.Array:
  """Zipf cluster probabilities P(c) proportional to c^-zipf, c = 1..num_clusters."""
  w = jnp.arange(1, num_clusters + 1, dtype=jnp.float32) ** -zipf
  return w / jnp.sum(w)


def clustered_inputs(rng, centers_KxD: jax.Array, probs_K: jax.Array, n: int, std: float):
  """(x_NxD, cluster_N): x = centre of a cluster drawn from probs_K + std * N(0, I)."""
  k_c, k_x = jax.random.split(rng)
  cluster_N = jax.random.categorical(k_c, jnp.log(probs_K), shape=(n,))
  x_NxD = centers_KxD[cluster_N] + std * jax.random.normal(k_x, (n, centers_KxD.shape[1]))
  return x_NxD, cluster_N


# Teacher c of task.cluster_teachers: weights from fold_in(fold_in(k_teacher, CLUSTER_TEACHER_TAG), c),
# hidden biases from fold_in(fold_in(k_bias, CLUSTER_TEACHER_TAG), c) (k_teacher, k_bias: init_data's).
CLUSTER_TEACHER_TAG = 11


def teacher_ffn(d: int, width: int, activation: str, key_w, key_b) -> ffn_lib.FFN:
  """A random teacher: lecun_normal weights, N(0, 0.5^2) hidden biases (its kinks away from the origin)."""
  teacher = ffn_lib.FFN(d, width, activation, init='lecun_normal', rngs=nnx.Rngs(params=key_w))
  teacher.b1[...] = 0.5 * jax.random.normal(key_b, (width,))
  return teacher


def per_cluster_targets(teachers: list, x_NxD: jax.Array, cluster_N: jax.Array) -> jax.Array:
  """y_n = teachers[cluster_n](x_n)."""
  y_KxNxO = jnp.stack([t(x_NxD) for t in teachers])
  return jnp.take_along_axis(y_KxNxO, cluster_N[None, :, None], axis=0)[0]


OFFSET_TAG = 13  # task.input_offset's draw: fold_in(k_teacher, 13), apart from the centres' 7 and the teachers' 11


class TeacherStudentTask(_Regression):
  """Regress a random teacher FFN (d_model -> teacher_d_ff -> d_model) on x ~ N(0, I), or on
  skewed inputs: task.num_clusters Gaussian clusters drawn with Zipf probabilities (MoE routing);
  with task.cluster_teachers each cluster has a teacher of its own (so routing by cluster matters).
  task.center_inputs shifts the cluster centres so the inputs' mean is 0 (x ~ N(0, I) already has it);
  task.input_offset s adds one offset c ~ N(0, s^2 I) per seed to every input, before the teacher."""

  @staticmethod
  def validate(config):
    t = config.task
    config_lib.one_of('task.teacher_activation', t.teacher_activation, activations.ALL_NAMES)
    for key in ('num_train', 'num_eval', 'teacher_d_ff'):
      config_lib.positive_int(f'task.{key}', t[key])
    config_lib.check(t.noise_std >= 0, f'task.noise_std={t.noise_std!r} must be >= 0')
    config_lib.check(
      isinstance(t.num_clusters, int) and not isinstance(t.num_clusters, bool) and t.num_clusters >= 0,
      f'task.num_clusters={t.num_clusters!r} must be an integer >= 0 (0: no clusters)',
    )
    config_lib.non_negative('task.cluster_zipf', t.cluster_zipf)
    config_lib.positive_float('task.cluster_std', t.cluster_std)
    config_lib.check(
      isinstance(t.cluster_teachers, bool), f'task.cluster_teachers={t.cluster_teachers!r} must be True or False'
    )
    config_lib.check(
      not t.cluster_teachers or t.num_clusters > 0,
      'task.cluster_teachers=True needs task.num_clusters > 0 (one teacher per cluster)',
    )
    config_lib.check(isinstance(t.center_inputs, bool), f'task.center_inputs={t.center_inputs!r} must be True or False')
    config_lib.non_negative('task.input_offset', t.input_offset)

  traced = ('noise_std',)  # init_data's traced keyword arguments (tasks.TRACED_KEYS)

  def __init__(self, config):
    super().__init__(config)
    self.output_dim = config.model.d_model

  def init_data(self, rng, noise_std: float | jax.Array | None = None):
    """The datasets; `noise_std` (default task.noise_std) may be traced: it changes no shape.
    With cluster_teachers also each point's cluster ('cluster_train', 'cluster_eval', int32)."""
    t, d = self.config.task, self.config.model.d_model
    noise_std = t.noise_std if noise_std is None else noise_std
    k_teacher, k_bias, k_train, k_eval, k_noise = jax.random.split(jax.random.fold_in(rng, 2), 5)
    teacher = teacher_ffn(d, t.teacher_d_ff, t.teacher_activation, k_teacher, k_bias)
    cluster = {}
    if t.num_clusters:
      k_centers = jax.random.fold_in(k_teacher, 7)  # k_teacher's other uses are unchanged
      centers_KxD = jax.random.normal(k_centers, (t.num_clusters, d))
      probs_K = cluster_probs(t.num_clusters, t.cluster_zipf)
      if t.center_inputs:
        centers_KxD = centers_KxD - jnp.broadcast_to(probs_K @ centers_KxD, centers_KxD.shape)
      x_train, c_train = clustered_inputs(k_train, centers_KxD, probs_K, t.num_train, t.cluster_std)
      x_eval, c_eval = clustered_inputs(k_eval, centers_KxD, probs_K, t.num_eval, t.cluster_std)
      cluster = {'cluster_train': c_train.astype(jnp.int32), 'cluster_eval': c_eval.astype(jnp.int32)}
    else:
      x_train = jax.random.normal(k_train, (t.num_train, d))
      x_eval = jax.random.normal(k_eval, (t.num_eval, d))
    if t.input_offset:
      offset_D = t.input_offset * jax.random.normal(jax.random.fold_in(k_teacher, OFFSET_TAG), (d,))
      x_train = x_train + jnp.broadcast_to(offset_D, x_train.shape)
      x_eval = x_eval + jnp.broadcast_to(offset_D, x_eval.shape)
    if t.num_clusters and t.cluster_teachers:
      fold = lambda k, c: jax.random.fold_in(jax.random.fold_in(k, CLUSTER_TEACHER_TAG), c)
      teachers = [
        teacher_ffn(d, t.teacher_d_ff, t.teacher_activation, fold(k_teacher, c), fold(k_bias, c))
        for c in range(t.num_clusters)
      ]
      target = lambda x, c: per_cluster_targets(teachers, x, c)
      y_train, y_eval = target(x_train, cluster['cluster_train']), target(x_eval, cluster['cluster_eval'])
    else:
      y_train, y_eval = teacher(x_train), teacher(x_eval)
      cluster = {}  # the data of runs without cluster teachers stay as they were (checkpoints restore)
    y_train = y_train + noise_std * jax.random.normal(k_noise, y_train.shape)
    return {'x_train': x_train, 'y_train': y_train, 'x_eval': x_eval, 'y_eval': y_eval, **cluster}

  def evaluate(self, apply_fn, data):
    eval_mse = mse(_batched_apply(apply_fn, data['x_eval']), data['y_eval'])
    return {
      'train_mse': mse(_batched_apply(apply_fn, data['x_train']), data['y_train']),
      'eval_loss': eval_mse,
      # Held-out MSE relative to predicting the mean target (1 - R^2).
      'eval_relative_mse': eval_mse / jnp.var(data['y_eval']),
    }


class RandomLabelsTask(_Regression):
  """Memorise N random points x ~ N(0, I_d) with scalar labels y ~ N(0, 1).

  The model outputs one feature. A width-h ReLU FFN provably fits about h*d/4
  generic real labels (Bubeck, Eldan, Lee, Mikulincer 2020); `fraction_fitted`
  is the share of points with |prediction - label| <= task.tolerance.
  """

  output_dim = 1

  @staticmethod
  def validate(config):
    config_lib.positive_int('task.num_points', config.task.num_points)
    config_lib.positive_float('task.tolerance', config.task.tolerance)

  def init_data(self, rng):
    t, d = self.config.task, self.config.model.d_model
    k_x, k_y = jax.random.split(jax.random.fold_in(rng, 3))
    return {'x_train': jax.random.normal(k_x, (t.num_points, d)), 'y_train': jax.random.normal(k_y, (t.num_points, 1))}

  def sample_batch(self, data, rng):
    if self.batch_size >= data['x_train'].shape[0]:  # full batch
      return {'inputs': data['x_train'], 'targets': data['y_train']}
    return super().sample_batch(data, rng)

  def evaluate(self, apply_fn, data):
    pred = _batched_apply(apply_fn, data['x_train']).astype(jnp.float32)
    err = jnp.abs(pred - data['y_train'])[:, 0]
    fitted = jnp.sum(err <= self.config.task.tolerance)
    return {
      'eval_loss': jnp.mean(jnp.square(err)),
      'points_fitted': fitted,
      'fraction_fitted': fitted / err.shape[0],
    }


def sparse_features(rng, shape, density: float | jax.Array) -> jax.Array:
  """Elhage et al. 2022's inputs: each entry 0 with probability 1 - density, else uniform on [0, 1]."""
  k_on, k_value = jax.random.split(rng)
  on = jax.random.uniform(k_on, shape) < density
  return jnp.where(on, jax.random.uniform(k_value, shape), 0.0)


def importance(n: int, decay: float) -> jax.Array:
  """Feature importances I_i = decay^i, i = 0..n-1 (decay 1: uniform)."""
  return jnp.asarray(decay, jnp.float32) ** jnp.arange(n, dtype=jnp.float32)


def weighted_mse(pred_BxN: jax.Array, target_BxN: jax.Array, importance_N: jax.Array) -> jax.Array:
  """Mean over examples of sum_i I_i (pred_i - target_i)^2 (Elhage et al. 2022's loss)."""
  err_BxN = jnp.square(pred_BxN.astype(jnp.float32) - target_BxN)
  return jnp.mean(jnp.sum(err_BxN * jnp.broadcast_to(importance_N, err_BxN.shape), axis=-1))


class SparseFeaturesTask:
  """Reconstruct x from itself through a bottleneck (Elhage et al. 2022, toy models of superposition):
  n = model.d_model features, each 0 with probability task.feature_sparsity (S), else U[0, 1]; loss
  sum_i I_i (y_i - x_i)^2 with I_i = task.importance_decay^i. Fresh inputs every step."""

  traced = ('feature_sparsity',)  # init_data's traced keyword arguments (tasks.TRACED_KEYS)

  @staticmethod
  def validate(config):
    t = config.task
    s = t.feature_sparsity
    config_lib.check(
      isinstance(s, (int, float)) and not isinstance(s, bool) and 0 <= s < 1,
      f'task.feature_sparsity={s!r} must be in [0, 1) (probability that a feature is 0)',
    )
    config_lib.positive_float('task.importance_decay', t.importance_decay)
    config_lib.positive_int('task.num_eval', t.num_eval)

  def __init__(self, config):
    self.config = config
    self.batch_size = config.train.batch_size
    self.output_dim = config.model.d_model
    self.importance_N = importance(config.model.d_model, config.task.importance_decay)

  def init_data(self, rng, feature_sparsity: float | jax.Array | None = None):
    """The run's feature density 1 - S (may be traced) and a held-out set of num_eval inputs."""
    s = self.config.task.feature_sparsity if feature_sparsity is None else feature_sparsity
    density = 1.0 - jnp.asarray(s, jnp.float32)
    x_eval = sparse_features(jax.random.fold_in(rng, 4), (self.config.task.num_eval, self.output_dim), density)
    return {'density': density, 'x_eval': x_eval}

  def sample_batch(self, data, rng):
    x_BxN = sparse_features(rng, (self.batch_size, self.output_dim), data['density'])
    return {'inputs': x_BxN, 'targets': x_BxN}

  def loss(self, outputs, batch):
    return weighted_mse(outputs, batch['targets'], self.importance_N), {}

  def evaluate(self, apply_fn, data):
    pred = _batched_apply(apply_fn, data['x_eval'])
    return {'eval_loss': weighted_mse(pred, data['x_eval'], self.importance_N), 'eval_mse': mse(pred, data['x_eval'])}
