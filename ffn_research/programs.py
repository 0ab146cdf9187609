"""The compiled programs a run loop drives, and d_ff padding: how runs of different widths share one.

A run's programs are jit(init), jit(train_chunk) and jit(evaluate) of one `train.Experiment`;
`Programs` states what the loop (ffn_research.loop) needs of them. `LonePrograms` serve one run
(on one device, or laid out over a mesh: ffn_research.parallel); `GroupPrograms` vmap them over
a leading run axis for the runs of a sweep that share shapes (sharded over local devices).

d_ff padding. Runs of dense FFNs without dropout (`pads_d_ff`) that differ only in
identity.PER_RUN_KEYS and model.d_ff share one program allocated at the widest run's hidden width
(`program_config`), as long as the group's padded FLOPs stay within PAD_FLOPS_FACTOR of its real
FLOPs (`split_by_flops`). Each run's true width enters init as a traced per-run value (`Experiment.init(d_ff=)`):
  - models/inits.py `per_unit` draws an FFN's weights unit by unit with the true fan-in and
    fan-out, so a hidden unit's weights do not depend on how wide the matrix is allocated;
  - models/ffn.py `Width` holds the true width and `real_units` masks the units past it to
    exactly 0 in every forward pass, so they start at 0, get zero gradient and stay 0;
so a padded run initialises and trains as it would alone. Its state is zero-padded to the program's
shapes on the way in (`GroupPrograms.stack`) and cut back to its own on the way out
(`GroupPrograms.unstack`, `run_abstract_states`), so its checkpoints always hold its true shapes.
"""

from collections.abc import Sequence
from typing import Any, Protocol

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from ffn_research import config as config_lib
from ffn_research import identity
from ffn_research import models
from ffn_research import parallel
from ffn_research import tasks
from ffn_research import train

PyTree = Any
Configs = Sequence[ml_collections.ConfigDict]

# Runs that differ only in identity.PER_RUN_KEYS and model.d_ff (where `pads_d_ff`) share one
# program padded to their widest hidden width as long as the group's padded FLOPs (every
# run at the widest width) stay within this factor of its real FLOPs (flops_per_token at
# each run's own width); wider ranges split into several programs, greedily over sorted
# widths (`split_by_flops`). 1.0 turns padding off (only equal widths share a program).
# 4, not 2: the small models this project sweeps on CPU are bound by compiling and per-step
# overhead, not FLOPs (docs/sweeps.md "Measured"); for large models on accelerators, where
# time follows FLOPs, pass a smaller factor (experiments.sweep --pad_flops_factor=2).
# Example, capacity_dense.py (widths 4..1024, doubling, 3 seeds): factor 2 gives the programs
# {4,8,16} {32,64,128} {256,512,1024} per activation; factor 4 gives {4..256} {512,1024}.
PAD_FLOPS_FACTOR = 4.0


# --------------------------------------------------------------------------- planning padded programs


_PROGRAMS: dict = {}  # the process's compiled programs, oldest first (dicts keep insertion order)


def cached(key: Any, build, maxsize: int = 8):
  """The one program cache of a process: `build()` once per `key` (hashable), the oldest of `maxsize` dropped.
  Compiled programs hold XLA executables; a sweep or an ablation that walks many shapes stays bounded."""
  if key not in _PROGRAMS:
    if len(_PROGRAMS) >= maxsize:
      _PROGRAMS.pop(next(iter(_PROGRAMS)))
    _PROGRAMS[key] = build()
  return _PROGRAMS[key]


def clear_cache() -> None:
  """Forget every program `cached` holds (benchmarks that time compilation)."""
  _PROGRAMS.clear()


def pads_d_ff(model_cfg: ml_collections.ConfigDict) -> bool:
  """Whether runs of this model may share a program padded to a wider d_ff: dense FFNs without
  dropout (a dropout mask's random bits depend on the allocated width; MoE experts are not padded),
  in the standard parametrization (μP's learning-rate factors depend on the width and are compiled in)."""
  return models.ffn_kind(model_cfg).pads and model_cfg.dropout_rate == 0 and model_cfg.parametrization == 'standard'


def split_by_flops(
  items: Sequence[Any], widths: Sequence[int], flops: Sequence[float], factor: float
) -> list[list[Any]]:
  """`items` (runs of one program shape, hidden `widths`) cut into programs whose padded FLOPs,
  len(program) * its largest flops, stay within `factor` of their real FLOPs, the sum of flops:
  greedy over the distinct widths in increasing order, all items of a width together, a new
  program whenever adding the next width would break the bound (flops_per_token grows with d_ff)."""
  by_width: dict[int, list[int]] = {}
  for i, w in enumerate(widths):
    by_width.setdefault(w, []).append(i)
  out: list[list[int]] = []
  for w in sorted(by_width):
    cand = (out[-1] if out else []) + by_width[w]
    if out and len(cand) * max(flops[j] for j in cand) <= factor * sum(flops[j] for j in cand):
      out[-1] = cand
    else:
      out.append(by_width[w])
  return [[items[i] for i in g] for g in out]


def plan_programs(configs: Configs, factor: float = PAD_FLOPS_FACTOR) -> list[list[int]]:
  """Indices of `configs` (configs that differ only in identity.PER_RUN_KEYS and model.d_ff) grouped
  into programs: all widths padded together when every run `pads_d_ff`, else each width on its
  own (in order of first appearance), then cut by `split_by_flops` (narrowest first)."""
  widths = [models.hidden_width(c.model) for c in configs]
  if all(pads_d_ff(c.model) for c in configs):
    same_program = [list(range(len(configs)))]
  else:  # some run has dropout: each width compiles on its own
    by_width: dict[int, list[int]] = {}
    for i, w in enumerate(widths):
      by_width.setdefault(w, []).append(i)
    same_program = list(by_width.values())
  task = tasks.build_task(configs[0])  # the same for all: only PER_RUN_KEYS and d_ff differ
  out = []
  for h in same_program:
    flops = [models.model_counts(configs[i], task)['flops_per_token'] for i in h]
    out += split_by_flops(h, [widths[i] for i in h], flops, factor)
  return out


def program_config(configs: Configs) -> ml_collections.ConfigDict:
  """The config a group's program is built from: the (first) widest run's, each traced key at its
  largest value in the group, so a path a value > 0 turns on (dropout, router jitter) is compiled
  in when any run uses it; each run's own values are then fed in as traced values (a value of 0
  on that path changes nothing: models.TRACED_KEYS)."""
  widest = max(configs, key=lambda c: models.hidden_width(c.model))
  config = ml_collections.ConfigDict(widest.to_dict())
  values = [train.traced_values(c) for c in configs]
  for key in identity.TRACED_KEYS:
    config_lib.set_path(config, key, max(v[key] for v in values))
  return config


def run_abstract_states(exp: train.Experiment, configs: Configs) -> list[PyTree]:
  """Each run's state shapes at its own d_ff (what its checkpoints hold), even in a padded program."""
  by_width = {models.hidden_width(exp.config.model): jax.eval_shape(exp.init, 0)}
  for c in configs:
    w = models.hidden_width(c.model)
    if w not in by_width:
      by_width[w] = jax.eval_shape(train.Experiment(c).init, 0)
  return [by_width[models.hidden_width(c.model)] for c in configs]


# --------------------------------------------------------------------------- the programs


class Programs(Protocol):
  """What the run loop needs of the programs of one run or of a group of runs."""

  exp: train.Experiment  # what the programs compile (a padded group's: at its widest width)
  chunk: Any  # jit: (state, num_steps (static), traced) -> (state, metrics)
  evaluate: Any  # jit: (params, data) -> held-out metrics

  def traced(self, configs: Configs) -> dict[str, jax.Array]:
    """The runs' identity.TRACED_KEYS values as the programs take them."""

  def init(self, configs: Configs, traced: dict[str, jax.Array]) -> PyTree:
    """The programs' state of fresh runs."""

  def abstract_state(self, configs: Configs, traced: dict[str, jax.Array]) -> PyTree:
    """init's shapes, dtypes (and shardings)."""

  def stack(self, states: Sequence[PyTree]) -> PyTree:
    """The programs' state from each run's own (restored) state."""

  def unstack(self, state: PyTree, abstracts: Sequence[PyTree]) -> list[PyTree]:
    """Each run's own state (to checkpoint, at its shapes `abstracts`) from the programs' state."""

  def per_run(self, tree: PyTree, num_runs: int) -> list[PyTree]:
    """Each run's part of fetched outputs (metrics, evaluations)."""


class LonePrograms:
  """The programs of one run, no run axis. With a mesh (`exp.mesh`, parallel.build_mesh) the
  state is laid out by parallel.state_shardings and the metrics are replicated."""

  def __init__(self, exp: train.Experiment):
    self.exp = exp
    self.shardings = None
    state_in: dict[str, Any] = {}
    state_out: dict[str, Any] = {}
    out: dict[str, Any] = {}
    if exp.mesh is not None:
      self.shardings = parallel.state_shardings(jax.eval_shape(exp.init, 0), exp.mesh)
      replicated = jax.sharding.NamedSharding(exp.mesh, jax.sharding.PartitionSpec())
      state_in, out = {'in_shardings': (self.shardings, replicated)}, {'out_shardings': replicated}
      state_out = {'out_shardings': (self.shardings, replicated)}
    self.init_fn = jax.jit(exp.init, **({'out_shardings': self.shardings} if self.shardings else {}))
    self.chunk = jax.jit(exp.train_chunk, static_argnums=1, donate_argnums=0, **state_in, **state_out)
    self.evaluate = jax.jit(exp.evaluate, **out)

  def traced(self, configs: Configs) -> dict[str, jax.Array]:
    return {k: jnp.float32(v) for k, v in train.traced_values(configs[0]).items()}

  def init(self, configs: Configs, traced: dict[str, jax.Array]) -> PyTree:
    return self.init_fn(configs[0].train.seed, traced)

  def abstract_state(self, configs: Configs, traced: dict[str, jax.Array]) -> PyTree:
    return jax.eval_shape(self.init_fn, configs[0].train.seed, traced)

  def stack(self, states: Sequence[PyTree]) -> PyTree:
    return states[0] if self.shardings is None else parallel.place(states[0], self.shardings)

  def unstack(self, state: PyTree, abstracts: Sequence[PyTree]) -> list[PyTree]:
    """As is on one device; NumPy copies (every process calls this) on a mesh."""
    return [state if self.shardings is None else parallel.to_host(state)]

  def per_run(self, tree: PyTree, num_runs: int) -> list[PyTree]:
    return [tree]


# Runs a group evaluates at once on one device: held-out evaluation's temporaries are per run (the
# quickstart's: 2.2 MB, its 4,096 eval points x d_ff 64), so a whole group at once grew with it.
EVAL_BLOCK = 32


class GroupPrograms:
  """The vmapped (and, over several devices, sharded) programs of a group of runs, possibly
  d_ff-padded (module docstring): `exp` may be built wider than some runs. The run axis holds
  `num_runs` (or more, to a multiple of the devices); a group of fewer runs is padded (`pad`)."""

  def __init__(self, exp: train.Experiment, num_runs: int, devices: Sequence[Any]):
    self.exp = exp
    self.num_devices = len(devices)
    self.padded = -(-num_runs // self.num_devices) * self.num_devices
    self.sharding = None
    if self.num_devices > 1:
      mesh = jax.sharding.Mesh(np.asarray(devices), ('runs',))
      self.sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('runs'))

    shard_out: dict[str, Any] = {} if self.sharding is None else {'out_shardings': self.sharding}
    self.init_fn = jax.jit(jax.vmap(exp.init), **shard_out)  # (seed, traced, d_ff) per run
    self.chunk = jax.jit(self._chunk, static_argnums=1, donate_argnums=0)
    self.evaluate = jax.jit(jax.vmap(exp.evaluate) if self.num_devices > 1 else self._evaluate_blocks)
    self.full = jax.eval_shape(exp.init, 0)  # one run's state at the program's (padded) shapes

  def _chunk(self, state_R, num_steps, traced_R):
    out = jax.vmap(lambda s, c: self.exp.train_chunk(s, num_steps, c))(state_R, traced_R)
    return out if self.sharding is None else jax.lax.with_sharding_constraint(out, self.sharding)

  def _evaluate_blocks(self, params_R, data_R):
    """Held-out metrics EVAL_BLOCK runs at a time (their temporaries, activations over the eval set, do
    not grow with the group); the run axis padded to whole blocks, so every run of a group wider than
    a block is evaluated in a block of the same size wherever it sits (the same figures when resumed)."""
    n = jax.tree.leaves(params_R)[0].shape[0]
    if n <= EVAL_BLOCK:
      return jax.vmap(self.exp.evaluate)(params_R, data_R)
    grow = lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], -n % EVAL_BLOCK, axis=0)])
    out = jax.lax.map(lambda pd: self.exp.evaluate(*pd), jax.tree.map(grow, (params_R, data_R)), batch_size=EVAL_BLOCK)
    return jax.tree.map(lambda x: x[:n], out)

  def pad(self, x_R: np.ndarray) -> jax.Array:
    """Pad the run axis (repeating the last run) to the program's (num_runs, a multiple of the devices)."""
    x_R = np.concatenate([x_R, np.repeat(x_R[-1:], self.padded - len(x_R), axis=0)])
    return jax.device_put(x_R, self.sharding) if self.sharding is not None else jnp.asarray(x_R)

  def traced(self, configs: Configs) -> dict[str, jax.Array]:
    """{key in identity.TRACED_KEYS: one float32 value per run}, the run axis padded."""
    values = [train.traced_values(c) for c in configs]
    return {k: self.pad(np.asarray([v[k] for v in values], np.float32)) for k in identity.TRACED_KEYS}

  def _init_args(self, configs: Configs, traced: dict[str, jax.Array]):
    """(seeds, traced, true widths) per run, the run axis padded: the program may be wider."""
    seeds = np.asarray([c.train.seed for c in configs], np.int32)
    widths = np.asarray([models.hidden_width(c.model) for c in configs], np.int32)
    return self.pad(seeds), traced, self.pad(widths)

  def init(self, configs: Configs, traced: dict[str, jax.Array]) -> PyTree:
    return self.init_fn(*self._init_args(configs, traced))

  def abstract_state(self, configs: Configs, traced: dict[str, jax.Array]) -> PyTree:
    abstract = jax.eval_shape(self.init_fn, *self._init_args(configs, traced))
    if self.sharding is None:
      return abstract
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=self.sharding), abstract)

  def stack(self, states: Sequence[PyTree]) -> PyTree:
    """Runs' states (their own shapes) zero-padded to the program's and stacked on the run axis."""
    full, full_shapes = self.full, _param_shapes(self.full)

    def pad_one(a, x, own):
      return _resize(np.asarray(x), _param_shapes(own), full_shapes, a.shape)

    return jax.tree.map(
      lambda a, *xs: self.pad(np.stack([pad_one(a, x, own) for x, own in zip(xs, states, strict=True)])), full, *states
    )

  def unstack(self, state: PyTree, abstracts: Sequence[PyTree]) -> list[PyTree]:
    """Each run's state (host arrays) cut to its own shapes (padded units dropped)."""
    host, src = jax.device_get(state), _param_shapes(self.full)
    if all(_param_shapes(a) == src for a in abstracts):  # no run narrower than the program: a slice each
      return [jax.tree.map(lambda x, i=i: x[i], host) for i in range(len(abstracts))]
    return [
      jax.tree.map(
        lambda x, a, i=i, abstract=abstract: _resize(np.asarray(x[i]), src, _param_shapes(abstract), a.shape),
        host,
        abstract,
      )
      for i, abstract in enumerate(abstracts)
    ]

  def per_run(self, tree: PyTree, num_runs: int) -> list[PyTree]:
    return [jax.tree.map(lambda x, i=i: x[i], tree) for i in range(num_runs)]


def _param_shapes(state: PyTree) -> list[tuple[int, ...]]:
  """Shapes of the nnx.Param leaves of a run state, in the order train.Experiment._flat ravels them."""
  return [tuple(x.shape) for x in jax.tree.leaves(nnx.split_state(state['params'], nnx.Param, ...)[0])]


def _resize(x: np.ndarray, src: list[tuple[int, ...]], dst: list[tuple[int, ...]], shape) -> np.ndarray:
  """`x` cut or zero-padded to `shape`. A flat optimizer vector (every parameter raveled, e.g. Adam's
  mu/nu: train.Experiment._flat) is resized parameter by parameter from shapes `src` to `dst`."""
  n_src, n_dst = sum(int(np.prod(s)) for s in src), sum(int(np.prod(s)) for s in dst)
  if x.ndim == 1 and len(shape) == 1 and x.shape[0] == n_src and shape[0] == n_dst and n_src != n_dst:
    parts, at = [], 0
    for s, d in zip(src, dst, strict=True):
      piece = x[at : at + int(np.prod(s))].reshape(s)
      at += int(np.prod(s))
      parts.append(_resize(piece, [], [], d).ravel())
    return np.concatenate(parts)
  if not x.ndim:
    return x
  x = x[tuple(slice(0, n) for n in shape)]
  return np.pad(x, [(0, n - m) for n, m in zip(shape, x.shape, strict=True)])
