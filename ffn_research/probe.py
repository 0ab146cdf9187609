"""Looking inside a trained sequence model (`load_run`'s model): what its FFNs see and do.

Public helpers (the tutorial notebook uses them; each recomputes the model's own forward pass):

- `ffn_input(model, tokens_BxT, layer=0) -> (B, T, D)`: the normed input block `layer`'s FFN
  sublayer receives.
- `ffn_hidden(model, tokens_BxT, layer=0) -> (B, T, F)`: a dense FFN's hidden activations
  (after the nonlinearity, or the gate product for gated FFNs).
- `expert_load(model, tokens_BxT, layer=0, positions=None) -> (E,)`: an MoE layer's router
  load, the fraction of its assignments each expert gets (before capacity drops, as the
  logged `load`), over the tokens at `positions` (default: every position).
"""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from ffn_research.models import moe as moe_lib
from ffn_research.models import routers as routers_lib


def _block(model, layer: int):
  """Block `layer` of a sequence model with an FFN; ValueError (one line) otherwise."""
  blocks = getattr(model, 'blocks', None)
  if blocks is None:
    raise ValueError(
      f'{type(model).__name__} has no blocks: probe needs a sequence model (model.arch transformer or ffn_stack)'
    )
  if not 0 <= layer < len(blocks):
    raise ValueError(f'layer={layer} is out of range: the model has {len(blocks)} blocks')
  block = blocks[layer]
  if block.ffn is None:
    raise ValueError('the model has no FFN sublayer (model.use_ffn=False)')
  return block


def _ffn_input(model, tokens_BxT, layer):
  block = model.blocks[layer]
  x_BxTxD, h_BxT = model.mix(model.embed_tokens(tokens_BxT)), _route_hash(model, tokens_BxT)
  for earlier in list(model.blocks)[:layer]:
    x_BxTxD, _ = earlier(x_BxTxD, None, h_BxT)
  if block.attn is not None:
    x_BxTxD = x_BxTxD + block.attn(block.attn_norm(x_BxTxD)).astype(x_BxTxD.dtype)
  return block.ffn_norm(x_BxTxD)


def _route_hash(model, tokens_BxT):
  """The token routers' input, as the model's forward pass computes it (None for the other routers)."""
  return routers_lib.prefix_hash(tokens_BxT) if model.token_routed else None


# One compiled program per call shape: run op by op, a model's forward pass (an MoE's above all)
# spends seconds dispatching.
@nnx.jit(static_argnames='layer')
def _compiled_input(model, tokens_BxT, layer):
  return _ffn_input(model, tokens_BxT, layer)


@nnx.jit(static_argnames='layer')
def _compiled_hidden(model, tokens_BxT, layer):
  x_BxTxD = _ffn_input(model, tokens_BxT, layer)
  b, t, d = x_BxTxD.shape
  return model.blocks[layer].ffn.hidden(x_BxTxD.reshape(b * t, d)).reshape(b, t, -1)


@nnx.jit(static_argnames='layer')
def _compiled_load(model, tokens_BxT, layer, index_P):
  moe = model.blocks[layer].ffn
  x_BxPxD = _ffn_input(model, tokens_BxT, layer)[:, index_P]
  h_BxT = _route_hash(model, tokens_BxT)
  h_T = None if h_BxT is None else h_BxT[:, index_P].reshape(-1)
  _, routing = moe.route(x_BxPxD.reshape(-1, x_BxPxD.shape[-1]), route_hash_T=h_T)
  return routers_lib.load_fraction(routing, moe.num_experts)


def ffn_input(model, tokens_BxT: jax.Array, layer: int = 0) -> np.ndarray:
  """(B, T, D): the normed input of block `layer`'s FFN, as the model's forward pass computes it."""
  _block(model, layer)
  return np.asarray(_compiled_input(model, jnp.asarray(tokens_BxT), layer))


def ffn_hidden(model, tokens_BxT: jax.Array, layer: int = 0) -> np.ndarray:
  """(B, T, F): hidden activations of block `layer`'s dense FFN."""
  if not hasattr(_block(model, layer).ffn, 'hidden'):
    raise ValueError(
      f'layer {layer} is an MoE: its experts have no single hidden layer; see expert_load for its routing'
    )
  return np.asarray(_compiled_hidden(model, jnp.asarray(tokens_BxT), layer))


def expert_load(model, tokens_BxT: jax.Array, layer: int = 0, positions=None) -> np.ndarray:
  """(E,): fraction of block `layer`'s router assignments per expert over the tokens at `positions`
  (an int, a slice or a list of positions; None: all). Expert-choice routing picks tokens among
  those routed together, so for it the load depends on which positions are given."""
  if not isinstance(_block(model, layer).ffn, moe_lib.MoE):
    raise ValueError(f'layer {layer} is a dense FFN, not an MoE (model.moe.num_experts=0)')
  tokens_BxT = jnp.asarray(tokens_BxT)
  index_P = np.arange(tokens_BxT.shape[1])[positions if positions is not None else slice(None)]
  return np.asarray(_compiled_load(model, tokens_BxT, layer, jnp.asarray(np.atleast_1d(index_P))))
