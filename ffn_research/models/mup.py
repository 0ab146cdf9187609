"""Parametrizations by name (config key `model.parametrization`): 'standard' or 'mup', the maximal
update parametrization (Yang et al. 2021, Tensor Programs V; docs/references.md#yang-et-al-2021,
docs/mup.md) relative to base widths, for Adam-type optimizers.

Built for the bare FFN (model.arch='ffn', dense or gated), whose only width is the hidden width
d_ff (d_model and the output size are fixed by the task). With m = d_ff' / base_d_ff' (both after
match_params), the paper's Table 3 ("Adam LR" row, multipliers 1), written relative to the base
width so that at m = 1 'mup' and 'standard' build the same model:

  input weights w1, w_gate (fan-in d_model fixed): the init rule (any of model.init) evaluated at
      the base width (std independent of d_ff: variance 1/fan_in), Adam learning rate x 1;
  output weights w2 (fan-in d_ff):  the init rule at the base width times 1/m (variance 1/fan_in^2),
      Adam learning rate x 1/m;
  biases: zero init, Adam learning rate x 1.

The paper's Table 8 (output multiplier 1/m, init and learning rate unchanged) is the same
parametrization for Adam; Table 3 needs no extra forward-pass op. The per-parameter learning-rate
multipliers are an optax.multi_transform over a label tree (`lr_labels`) after the optimizer, so
they scale Adam's whole update, the decoupled weight decay of adamw included.
"""

import jax
import ml_collections

from ffn_research import config as config_lib
from ffn_research.models import ffn as ffn_lib

PARAMETRIZATIONS = ('standard', 'mup')  # model.parametrization values

# Labels of the optimizer's label tree: parameters whose Adam update is scaled by 1/m, and the rest.
OUTPUT, UNSCALED = 'mup_output', 'mup_unscaled'


def is_mup(model_cfg: ml_collections.ConfigDict) -> bool:
  return model_cfg.parametrization == 'mup'


def validate(model_cfg: ml_collections.ConfigDict) -> None:
  """ConfigError (one line) for the parametrization keys, and for models 'mup' does not cover yet."""
  m = model_cfg
  config_lib.one_of('model.parametrization', m.parametrization, PARAMETRIZATIONS)
  config_lib.positive_int('model.mup_base_d_ff', m.mup_base_d_ff)
  if not is_mup(m):
    return
  config_lib.check(
    m.arch == 'ffn',
    f'model.parametrization=mup supports model.arch=ffn only; '
    f'{m.arch!r} is not built yet (embeddings, unembedding, attention 1/d scaling)',
  )
  config_lib.check(
    m.moe.num_experts == 0,
    'model.parametrization=mup supports dense and gated FFNs only; '
    'MoE experts (model.moe.num_experts > 0) are not built yet',
  )


def base_width(model_cfg: ml_collections.ConfigDict) -> int:
  """The base model's hidden width, after match_params like the model's own."""
  return ffn_lib.effective_d_ff(model_cfg.mup_base_d_ff, model_cfg.activation, model_cfg.match_params)


def width_mult(model_cfg: ml_collections.ConfigDict) -> float:
  """m = d_ff' / base_d_ff' (1.0 under 'standard')."""
  if not is_mup(model_cfg):
    return 1.0
  return ffn_lib.effective_d_ff(model_cfg.d_ff, model_cfg.activation, model_cfg.match_params) / base_width(model_cfg)


def lr_multipliers(model_cfg: ml_collections.ConfigDict) -> dict[str, float]:
  """{label: Adam learning-rate multiplier} of the label tree."""
  return {OUTPUT: 1.0 / width_mult(model_cfg), UNSCALED: 1.0}


def lr_labels(weights):
  """The label tree of a bare FFN's weights (an nnx.State of its nnx.Param): w2 is OUTPUT."""

  def label(path, _):
    names = [getattr(p, 'key', getattr(p, 'name', None)) for p in path]
    return OUTPUT if 'w2' in names else UNSCALED

  return jax.tree_util.tree_map_with_path(label, weights)
