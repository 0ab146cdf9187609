"""Model registry: `build_model(config, task, rngs)`, formula-based counts, and
`validate(model_cfg)` for the model section (each sub-registry checks its own keys).

`task` supplies what the data fixes: `task.output_dim` (regression features or
vocabulary size) and, for sequence tasks, `task.seq_len`.

Every model follows `ffn.Layer`: `apply(x, rng=None) -> (outputs, aux)` and
`after_step(aux)`.
"""

from collections.abc import Callable, Mapping
import dataclasses
from typing import Any

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections

from ffn_research import config as config_lib
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import moe_config
from ffn_research.models import mup
from ffn_research.models import toy
from ffn_research.models import transformer
from ffn_research.models.sublayer import build_ffn  # the models package's API
from ffn_research.models.sublayer import ffn_counts  # the models package's API
from ffn_research.models.sublayer import ffn_kind as ffn_kind  # the models package's API (re-exported)
from ffn_research.models.sublayer import hidden_width as hidden_width  # the models package's API (re-exported)

Hyper = ffn_lib.Hyper
# Model keys read at run time from ffn.Hyper variables (each names its key): runs that differ only in these
# share one program (identity.TRACED_KEYS). A module compiles a path in only for a value > 0 (dropout, router
# jitter); every other use is arithmetic on the value.
TRACED_KEYS = (
  'model.dropout_rate',
  'model.moe.load_balance_coef',
  'model.moe.z_loss_coef',
  'model.moe.bias_update_rate',
  'model.moe.jitter',
)


def hyper_state(template: nnx.State, values: Mapping[str, Any]) -> nnx.State:
  """`template` (a model's Hyper variables) with each set to values[its key]."""
  return jax.tree_util.tree_map(
    lambda v: v.replace(jnp.asarray(values[v.key], jnp.float32)),
    template,
    is_leaf=lambda x: isinstance(x, Hyper),
  )


def validate(model_cfg: ml_collections.ConfigDict) -> None:
  """ConfigError (one line, naming the key) for anything invalid in the model section."""
  config_lib.one_of('model.arch', model_cfg.arch, ARCHS)
  ffn_lib.validate(model_cfg)
  ARCHS[model_cfg.arch].validate(model_cfg)
  moe_config.validate_section(model_cfg)
  mup.validate(model_cfg)
  ffn_kind(model_cfg).validate(model_cfg)  # what its kind reads (its μP rules included)


def validate_expert_split(model_cfg: ml_collections.ConfigDict, expert: int) -> None:
  """ConfigError unless the model's FFN kind has experts that `expert` devices (parallel.expert) can split."""
  if expert <= 1:
    return
  num_experts = ffn_kind(model_cfg).experts(model_cfg)
  config_lib.check(num_experts > 0, f'parallel.expert={expert} needs an MoE model (model.moe.num_experts > 0)')
  config_lib.check(
    num_experts % expert == 0,
    f'parallel.expert={expert} must divide the number of experts (model.moe.num_experts x granularity = {num_experts})',
  )
  config_lib.check(
    model_cfg.moe.dispatch != 'ragged',
    'parallel.expert > 1 needs model.moe.dispatch sort, einsum or auto (ragged has no expert split)',
  )


def build_model(
  config: ml_collections.ConfigDict, task: Any, rngs: nnx.Rngs, expert_mesh: Any = None, d_ff_true: Any = None
) -> ffn_lib.Layer:
  """The model a config selects; MoE experts split over `expert_mesh`'s 'expert' axis when given;
  `d_ff_true`: every FFN's true width when config's d_ff is a padded program's."""
  return _arch(config.model).build(config, task, rngs, expert_mesh, d_ff_true)


def model_counts(config: ml_collections.ConfigDict, task: Any) -> dict[str, Any]:
  """Exact parameter and FLOP counts from formulas (tests hold them against the trees)."""
  return _arch(config.model).counts(config, task)


def _arch(model_cfg: ml_collections.ConfigDict) -> 'Arch':
  if model_cfg.arch not in ARCHS:
    raise ValueError(f'model.arch={model_cfg.arch!r} is unknown; allowed: {", ".join(ARCHS)}')
  return ARCHS[model_cfg.arch]


# --------------------------------------------------------------------------- the architectures


@dataclasses.dataclass(frozen=True)
class Arch:
  """One model.arch: how it builds from a config, counts its parameters and FLOPs, and checks its keys."""

  build: Callable[..., ffn_lib.Layer]  # (config, task, rngs, expert_mesh, d_ff_true) -> model
  counts: Callable[[ml_collections.ConfigDict, Any], dict[str, Any]]  # (config, task) -> model_counts
  validate: Callable[[ml_collections.ConfigDict], None]  # (model section) -> ConfigError or None
  sequence: bool = False  # token inputs, vocabulary logits (the sequence tasks)


def _ffn_build(config, task, rngs, expert_mesh, d_ff_true):
  m = config.model
  return build_ffn(m, m.d_model, task.output_dim, rngs, expert_mesh, d_ff_true)


def _ffn_counts(config, task):
  m = config.model
  c = ffn_counts(m, m.d_model, task.output_dim, group_tokens(config, task))
  return {
    'num_params': c['num_params'],
    'num_active_params': c['num_active_params'],
    'num_ffn_params': c['num_params'],
    'num_active_ffn_params': c['num_active_params'],
    'd_ff_effective': c['d_ff_effective'],
    'd_ff_active': c['d_ff_active'],
    'flops_per_token': c['flops_per_token'],
  }


def _no_embeddings(model_cfg):
  config_lib.check(
    not model_cfg.freeze_embeddings,
    f'model.freeze_embeddings=True needs a sequence model (transformer, ffn_stack); '
    f'model.arch={model_cfg.arch!r} has no embeddings',
  )


def _relu_out_build(config, task, rngs, expert_mesh, d_ff_true):
  return toy.OutputReLU(_ffn_build(config, task, rngs, expert_mesh, d_ff_true))


def _tied_build(config, task, rngs, expert_mesh, d_ff_true):
  del expert_mesh
  m = config.model
  _check_autoencoder(m, task)
  return toy.TiedReLU(m.d_model, m.d_ff, use_bias=m.use_bias, init=m.init, d_ff_true=d_ff_true, rngs=rngs)


def _whole_model_counts(params: int, d_ff: int, flops: int) -> dict[str, int]:
  """model_counts of a model that is one FFN-like layer, every parameter active."""
  return {
    'num_params': params,
    'num_active_params': params,
    'num_ffn_params': params,
    'num_active_ffn_params': params,
    'd_ff_effective': d_ff,
    'd_ff_active': d_ff,
    'flops_per_token': flops,
  }


def _tied_counts(config, task):
  m = config.model
  _check_autoencoder(m, task)
  return _whole_model_counts(toy.tied_relu_param_count(m.d_model, m.d_ff, m.use_bias), m.d_ff, 4 * m.d_model * m.d_ff)


def _tied_validate(model_cfg):
  config_lib.check(
    model_cfg.moe.num_experts == 0,
    f'model.moe.num_experts={model_cfg.moe.num_experts} must be 0 for model.arch=tied_relu (no FFN inside)',
  )
  config_lib.check(
    model_cfg.activation == 'relu' and model_cfg.dropout_rate == 0 and not model_cfg.match_params,
    'model.arch=tied_relu is ReLU(W^T W x + b): it needs model.activation=relu, '
    'model.dropout_rate=0 and model.match_params=False',
  )


def _kinks_build(config, task, rngs, expert_mesh, d_ff_true):
  del expert_mesh, task
  m = config.model
  return toy.Kinks(m.d_ff, init=m.init, d_ff_true=d_ff_true, rngs=rngs)


def _kinks_counts(config, task):
  m = config.model
  return _whole_model_counts(toy.kinks_param_count(m.d_ff), m.d_ff, 2 * 2 * m.d_ff)  # units' and output's mul-adds


def _kinks_validate(model_cfg):
  m = model_cfg
  _no_embeddings(m)
  config_lib.check(
    m.d_model == 1 and m.activation == 'relu' and m.moe.num_experts == 0 and m.d_ff >= 2,
    'model.arch=kinks is a 1-d ReLU FFN parametrised by its kinks: it needs model.d_model=1, model.activation=relu, '
    f'model.moe.num_experts=0 and model.d_ff >= 2 (got {m.d_model}, {m.activation!r}, {m.moe.num_experts}, {m.d_ff})',
  )
  config_lib.check(
    m.dropout_rate == 0 and not m.match_params and m.parametrization == 'standard',
    'model.arch=kinks needs model.dropout_rate=0, model.match_params=False and model.parametrization=standard',
  )


def _sequence(cls) -> Arch:
  def build(config, task, rngs, expert_mesh, d_ff_true):
    return cls(
      config.model,
      task.output_dim,
      task.seq_len,
      rngs=rngs,
      expert_mesh=expert_mesh,
      d_ff_true=d_ff_true,
      scored_vocab=getattr(task, 'scored_vocab', None),  # optional: default every token
    )

  def counts(config, task):
    m = config.model
    return transformer.counts(
      m, task.output_dim, task.seq_len, ffn_counts(m, m.d_model, m.d_model, group_tokens(config, task))
    )

  return Arch(build, counts, transformer.validate, sequence=True)


# model.arch -> Arch. 'ffn' is the bare FFN used for regression tasks; 'tied_relu' is Elhage et al. 2022's toy
# model of superposition ReLU(W^T W x + b) (models/toy.py), also for regression tasks, and 'ffn_relu_out' its untied
# form, the bare FFN with a ReLU on its output; the sequence models take
# tokens: 'transformer' (pre-norm decoder: attention + FFN blocks), 'ffn_stack' (FFN blocks only, over a causal
# mean of embeddings); 'kinks' is the bare ReLU FFN on a 1-d input parametrised by its kink positions (models/toy.py).
ARCHS: dict[str, Arch] = {
  'ffn': Arch(_ffn_build, _ffn_counts, _no_embeddings),
  'tied_relu': Arch(_tied_build, _tied_counts, _tied_validate),
  'ffn_relu_out': Arch(_relu_out_build, _ffn_counts, _no_embeddings),
  'kinks': Arch(_kinks_build, _kinks_counts, _kinks_validate),
  'transformer': _sequence(transformer.Transformer),
  'ffn_stack': _sequence(transformer.FFNStack),
}
SEQUENCE_ARCHS = tuple(name for name, a in ARCHS.items() if a.sequence)


def group_tokens(config: ml_collections.ConfigDict, task: Any) -> int:
  """Tokens an MoE routes together in a training step (`MoE.num_groups`): one sequence with
  per-sequence capacity, else the whole batch (its rows, times the sequence length)."""
  scope, _ = moe_config.routing_settings(config.model)
  seq_len = task.seq_len if ARCHS[config.model.arch].sequence else 1
  return seq_len if scope == 'sequence' else config.train.batch_size * seq_len


def _check_autoencoder(model_cfg: ml_collections.ConfigDict, task: Any) -> None:
  """tied_relu outputs its d_model inputs: the task must ask for d_model outputs."""
  config_lib.check(
    task.output_dim == model_cfg.d_model,
    f'model.arch=tied_relu reconstructs its input: task outputs {task.output_dim} != model.d_model={model_cfg.d_model}',
  )


def run_notes(config: ml_collections.ConfigDict) -> dict[str, str]:
  """What a run's summary.json must say about its model beyond the counts: {'moe_noncausal': why}
  when a sequence model's MoE leaks later tokens or other sequences (model.moe.allow_noncausal)."""
  reason = moe_config.noncausal_reason(config.model)
  return {} if reason is None else {'moe_noncausal': f'model.moe.{reason}'}
