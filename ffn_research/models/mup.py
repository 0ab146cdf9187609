"""Parametrizations by name (config key `model.parametrization`): 'standard' or 'mup', the maximal
update parametrization (Yang et al. 2021, Tensor Programs V; docs/references.md#yang-et-al-2021,
docs/mup.md) relative to base widths, for Adam-type optimizers (OPTIMIZERS).

Widths are the dimensions that grow with the model: the hidden width d_ff' (after match_params;
base `model.mup_base_d_ff`) everywhere, and d_model (base `model.mup_base_d_model`) in the sequence
models. The bare FFN's d_model and output size are the task's, not widths. A weight matrix is an
input weight (fan-in not a width, fan-out a width), a hidden weight (both widths) or an output
weight (fan-in a width, fan-out not); with m = width / base width of its fan-in, the paper's
Table 3 ("Adam LR" row, multipliers 1), written relative to the base widths so that where every
width equals its base 'mup' builds and trains the 'standard' model:

  input weights:  the init rule (model.init; the embeddings' own rule) evaluated at the base widths,
      Adam learning rate x 1;
  hidden weights: the init rule at the base widths times 1/sqrt(m) (variance 1/fan_in),
      Adam learning rate x 1/m;
  output weights: the init rule at the base widths times 1/m (variance 1/fan_in^2),
      Adam learning rate x 1/m;
  vectors (biases, norm scales and biases): init unchanged, Adam learning rate x 1;
  attention logits q.k scaled by sqrt(base d_head) / d_head (1/d_head, relative to the base)
      instead of 1/sqrt(d_head).

So the bare FFN's w1, w_gate are input weights and w2 an output weight (m = d_ff' / base); in the
sequence models the embeddings are input weights, the attention projections and the FFN's w1,
w_gate, w2 hidden weights (fan-in d_model or d_ff'), the unembedding an output weight (fan-in
d_model). The learning-rate factor depends only on the fan-in's width: the label tree (`lr_labels`)
labels each weight by it, and `lr_multipliers` gives each label's factor.

MoE FFNs (model.moe.num_experts > 0): each expert's w1, w_gate, w2 (stacked (E, ...)) is a dense
FFN's of the expert width d_ff' / G (`expert_dim`; base mup_base_d_ff' / G, the base model's expert
width, so m = d_ff' / base as for a dense FFN), the shared experts one dense FFN of their fused width;
E, top-k and G are not widths. The router (d_model -> E) and Soft MoE's slot parameters (d_model ->
E p) have a fan-out that is not a width: an input weight in the bare FFN (its d_model is the task's),
an output weight, fan-in d_model, in the sequence models (router logits of size 1/sqrt(m) at init,
moved O(1) by a step). Expert biases ((E, d_ff') per expert), the routing bias, Soft MoE's scale:
vectors.

The paper's Table 8 (output multiplier 1/m, init and learning rate unchanged) is the same
parametrization for Adam; Table 3 needs no extra forward-pass op. The per-parameter learning-rate
multipliers are an optax.multi_transform over the label tree after the optimizer, so they scale
Adam's whole update, the decoupled weight decay of adamw included.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections

from ffn_research import config as config_lib
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import inits

PARAMETRIZATIONS = ('standard', 'mup')  # model.parametrization values
# train.optimizer values the rules are for: Adam's (Table 3's "Adam LR" row). SGD's differ; Lion's
# sign update is entrywise like Adam's but untested here.
OPTIMIZERS = ('adam', 'adamw')

# Labels of the optimizer's label tree, by the width of a weight's fan-in: its Adam update is
# scaled by base / width of that width; weights whose fan-in is not a width, and vectors, by 1.
# ('mup_output' predates the sequence models, where w2 is a hidden weight; kept so that the
# optimizer state of a bare FFN's mup checkpoint keeps its keys.)
FAN_IN_D_FF, FAN_IN_D_MODEL, UNSCALED = 'mup_output', 'mup_fan_in_d_model', 'mup_unscaled'

# Weight names (the last key of an nnx.Param's path) whose fan-in is d_ff' or d_model; every other
# matrix (the embeddings: fan-in vocabulary or positions) and every vector is UNSCALED.
# An MoE's experts carry the same names, stacked (E, fan_in, fan_out).
FAN_IN = {
  'w2': FAN_IN_D_FF,  # FFN d_ff' -> d_model (or the bare FFN's output)
  'w1': FAN_IN_D_MODEL,  # FFN d_model -> d_ff' (the bare FFN's d_model is no width: UNSCALED there)
  'w_gate': FAN_IN_D_MODEL,
  'router_w': FAN_IN_D_MODEL,  # MoE router d_model -> E, or Soft MoE's slot parameters d_model -> E p
  'w_qkv': FAN_IN_D_MODEL,  # attention d_model -> 3 d_model
  'w_out': FAN_IN_D_MODEL,  # attention d_model -> d_model
  'unembed': FAN_IN_D_MODEL,  # d_model -> vocabulary
}
EMBEDDINGS = ('embed', 'pos_embed')  # input weights: fan-in vocabulary / positions
EXPERT_BIASES = ('b1', 'b_gate', 'b2')  # vectors, in an MoE one per expert: (E, size) arrays, UNSCALED


class Dim(NamedTuple):
  """One side of a weight matrix: its size here and in the base model (None: not a width)."""

  size: Any  # int, or a traced int (an FFN's true width)
  base: int | None = None


def is_mup(model_cfg: ml_collections.ConfigDict) -> bool:
  return model_cfg.parametrization == 'mup'


def d_model_is_width(model_cfg: ml_collections.ConfigDict) -> bool:
  """d_model grows with the model in the sequence models; the bare FFN's is the task's input size."""
  return model_cfg.arch not in ('ffn', 'ffn_relu_out')


def validate(model_cfg: ml_collections.ConfigDict) -> None:
  """ConfigError (one line) for the parametrization keys, and for models 'mup' does not cover yet."""
  m = model_cfg
  config_lib.one_of('model.parametrization', m.parametrization, PARAMETRIZATIONS)
  config_lib.positive_int('model.mup_base_d_ff', m.mup_base_d_ff)
  config_lib.positive_int('model.mup_base_d_model', m.mup_base_d_model)
  if not is_mup(m):
    return
  config_lib.check(
    m.arch != 'tied_relu',
    "model.parametrization=mup is not built for model.arch='tied_relu' (one matrix is its input and output weight)",
  )
  if not d_model_is_width(m):
    return
  config_lib.check(
    not m.tie_embeddings,
    'model.parametrization=mup needs model.tie_embeddings=False (the embedding is an input weight, '
    'the unembedding an output weight: their init and learning rate differ)',
  )
  config_lib.check(
    m.arch != 'transformer' or m.mup_base_d_model % m.num_heads == 0,
    f'model.mup_base_d_model={m.mup_base_d_model} must be divisible by model.num_heads={m.num_heads} '
    '(mup: the base model has the same heads)',
  )


def validate_optimizer(config: ml_collections.ConfigDict) -> None:
  """ConfigError (one line) for an optimizer the mup rules are not for."""
  config_lib.check(
    not is_mup(config.model) or config.train.optimizer in OPTIMIZERS,
    f'train.optimizer={config.train.optimizer!r} has no mup rules (model.parametrization=mup is '
    f"Adam's); allowed: {', '.join(OPTIMIZERS)}",
  )


def base_width(model_cfg: ml_collections.ConfigDict) -> int:
  """The base model's hidden width, after match_params like the model's own."""
  return ffn_lib.effective_d_ff(model_cfg.mup_base_d_ff, model_cfg.activation, model_cfg.match_params)


def d_ff_dim(model_cfg: ml_collections.ConfigDict, true: Any = None) -> Dim:
  """The hidden width (`true`: the FFN's true width when given, else the config's) and its base."""
  size = ffn_lib.effective_d_ff(model_cfg.d_ff, model_cfg.activation, model_cfg.match_params) if true is None else true
  return Dim(size, base_width(model_cfg))


def expert_dim(model_cfg: ml_collections.ConfigDict, num_experts: int = 1) -> Dim:
  """The fused width of `num_experts` MoE experts (each d_ff' / granularity) and its base (the base
  model's: mup_base_d_ff' / granularity each), so m = d_ff' / base d_ff' as for a dense FFN."""
  g, d = model_cfg.moe.granularity, d_ff_dim(model_cfg)
  assert d.base is not None
  return Dim(num_experts * (d.size // g), num_experts * (d.base // g))


def d_model_dim(model_cfg: ml_collections.ConfigDict, size: int | None = None) -> Dim:
  """d_model (or `size`: a side the bare FFN puts there, e.g. its output) and its base where it is a width."""
  return Dim(
    model_cfg.d_model if size is None else size, model_cfg.mup_base_d_model if d_model_is_width(model_cfg) else None
  )


def init_fans(fan_in: Dim, fan_out: Dim) -> inits.Fans:
  """Where a weight's init rule is evaluated (the base widths) and the gain on its std: 1 for an
  input weight, 1/sqrt(m) for a hidden one, 1/m for an output one (m = fan_in.size / fan_in.base)."""
  rule_in = fan_in.size if fan_in.base is None else fan_in.base
  rule_out = fan_out.size if fan_out.base is None else fan_out.base
  if fan_in.base is None:
    return inits.Fans(rule_in, rule_out)
  ratio = fan_in.base / jnp.asarray(fan_in.size, jnp.float32)  # 1/m; exactly 1 at the base width
  return inits.Fans(rule_in, rule_out, ratio if fan_out.base is None else jnp.sqrt(ratio))


def width_mult(model_cfg: ml_collections.ConfigDict) -> float:
  """m = d_ff' / base_d_ff' (1.0 under 'standard')."""
  if not is_mup(model_cfg):
    return 1.0
  d = d_ff_dim(model_cfg)
  return d.size / d.base


def d_model_mult(model_cfg: ml_collections.ConfigDict) -> float:
  """m = d_model / base_d_model where d_model is a width, else 1.0 (and 1.0 under 'standard')."""
  d = d_model_dim(model_cfg)
  return 1.0 if not is_mup(model_cfg) or d.base is None else d.size / d.base


def lr_multipliers(model_cfg: ml_collections.ConfigDict) -> dict[str, float]:
  """{label: Adam learning-rate multiplier} of the label tree (the bare FFN has no FAN_IN_D_MODEL
  label: its d_model is no width, so its w1 and w_gate are UNSCALED input weights)."""
  factors = {FAN_IN_D_FF: 1.0 / width_mult(model_cfg), UNSCALED: 1.0}
  if d_model_is_width(model_cfg):
    factors[FAN_IN_D_MODEL] = 1.0 / d_model_mult(model_cfg)
  return factors


def lr_labels(model_cfg: ml_collections.ConfigDict) -> Callable[[Any], Any]:
  """weights (an nnx.State of the model's nnx.Param) -> their label tree: each weight labelled by
  its fan-in's width (FAN_IN), or UNSCALED. A matrix the table does not know is an error, so a new
  weight cannot silently go unscaled."""
  d_model_width = d_model_is_width(model_cfg)

  def label(path, leaf):
    name = next((p.key for p in reversed(path) if isinstance(p, jax.tree_util.DictKey)), None)
    if name in FAN_IN:
      return FAN_IN[name] if d_model_width or FAN_IN[name] != FAN_IN_D_MODEL else UNSCALED
    if jnp.ndim(leaf) >= 2 and name not in EMBEDDINGS + EXPERT_BIASES:
      raise ValueError(f'models/mup.py: no learning-rate rule for the weight {jax.tree_util.keystr(path)}')
    return UNSCALED

  return lambda weights: jax.tree_util.tree_map_with_path(label, weights)
