"""A tiny pre-norm decoder-only transformer and an attention-free FFN stack.

Both models map tokens_BxT (int) to logits_BxTxV and follow `ffn.Layer`:
`apply(tokens, rng=None) -> (logits, aux)` with aux = {'layer_i': that layer's
FFN aux}, and `after_step(aux)` forwards each layer's aux to its FFN. The FFN
sublayer comes from `sublayer.build_ffn`, so every `model.activation`, `model.d_ff`
and `model.moe.*` setting applies unchanged.

- `Transformer`: token (+ learned) embedding, then per layer
  `x += Attn(Norm(x)); x += FFN(Norm(x))`, final norm, unembedding (tied or not).
  Causal multi-head attention without biases; rotary positions (Su et al. 2021,
  RoFormer) rotate q and k per head (half-split pairs, base 10,000).
- `FFNStack`: the same without attention. Its only cross-position operation is
  a parameter-free causal mean of the input embeddings (position t sees the mean
  of embeddings 0..t, positions included), so each FFN block sees the bag of the
  tokens so far and anything the model stores lives in FFN (and embedding)
  weights.
"""

from collections.abc import Callable

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections

from ffn_research import config as config_lib
from ffn_research.models import ffn as ffn_lib
from ffn_research.models import inits
from ffn_research.models import mup
from ffn_research.models import routers as routers_lib
from ffn_research.models import sublayer

# Pre-norm layers by name (config key `model.norm`) and their parameters per feature.
NORMS: dict[str, Callable[[int, nnx.Rngs], nnx.Module]] = {
  'rmsnorm': lambda d, rngs: nnx.RMSNorm(d, epsilon=1e-6, rngs=rngs),  # scale
  'layernorm': lambda d, rngs: nnx.LayerNorm(d, epsilon=1e-6, rngs=rngs),  # scale and bias
}
NORM_PARAMS_PER_FEATURE = {'rmsnorm': 1, 'layernorm': 2}

# Position encodings (config key `model.positions`); 'rotary' needs attention.
POSITIONS = ('learned', 'rotary', 'none')

# Token and learned-position embeddings, (rows, d_model) matrices: N(0, 1/d_model) (fan-out d_model).
EMBED_INIT = inits.Init(1.0, 'fan_out', 'normal')

ROPE_BASE = 10_000.0


def validate(model_cfg: ml_collections.ConfigDict) -> None:
  """ConfigError for the sequence-model keys of the model section (arch transformer or ffn_stack)."""
  m, check = model_cfg, config_lib.check
  config_lib.positive_int('model.num_layers', m.num_layers)
  config_lib.one_of('model.norm', m.norm, NORMS)
  config_lib.one_of('model.positions', m.positions, POSITIONS)
  if m.arch == 'transformer':
    config_lib.positive_int('model.num_heads', m.num_heads)
    check(m.d_model % m.num_heads == 0, f'model.d_model={m.d_model} must be divisible by model.num_heads={m.num_heads}')
    check(
      m.positions != 'rotary' or (m.d_model // m.num_heads) % 2 == 0,
      f'model.positions=rotary needs an even head size; d_model/num_heads={m.d_model // m.num_heads}',
    )
  else:
    check(m.positions != 'rotary', f'model.positions=rotary needs attention; model.arch={m.arch!r} has none')
    check(m.use_ffn, f'model.use_ffn=False leaves model.arch={m.arch!r} with no blocks')


def rotary(x_BxTxHxK: jax.Array) -> jax.Array:
  """Rotate feature pairs (i, i + K/2) of each head by angle t * base^(-2i/K)."""
  t, k = x_BxTxHxK.shape[1], x_BxTxHxK.shape[-1]
  inv_freq_F = ROPE_BASE ** (-jnp.arange(0, k, 2, dtype=jnp.float32) / k)
  angle_TxF = jnp.arange(t, dtype=jnp.float32)[:, None] * inv_freq_F[None, :]
  cos_1xTx1xF = jnp.cos(angle_TxF)[None, :, None, :].astype(x_BxTxHxK.dtype)
  sin_1xTx1xF = jnp.sin(angle_TxF)[None, :, None, :].astype(x_BxTxHxK.dtype)
  x1, x2 = jnp.split(x_BxTxHxK, 2, axis=-1)
  return jnp.concatenate([x1 * cos_1xTx1xF - x2 * sin_1xTx1xF, x2 * cos_1xTx1xF + x1 * sin_1xTx1xF], axis=-1)


class CausalSelfAttention(nnx.Module):
  """Multi-head causal self-attention, four d_model x d_model projections, no biases.

  `mup_base_d_model`: None for the standard parametrization; for μP (models/mup.py) the base
  model's d_model (same heads): the projections are hidden weights, and the logits q.k are scaled
  by sqrt(base head size) / head size instead of 1 / sqrt(head size)."""

  def __init__(
    self,
    d_model: int,
    num_heads: int,
    *,
    rope: bool,
    init: str,
    dtype: str,
    rngs: nnx.Rngs,
    mup_base_d_model: int | None = None,
  ):
    self.num_heads, self.head_dim, self.rope = num_heads, d_model // num_heads, rope
    self.dtype = ffn_lib.DTYPES[dtype]
    w_init = inits.get(init)
    fans_qkv = fans_out = None
    # μP's logits factor on top of 1/sqrt(head size): sqrt(base / head size), exactly 1 at the base width.
    self.mup_logit_factor = None
    if mup_base_d_model is not None:
      d, d3 = mup.Dim(d_model, mup_base_d_model), mup.Dim(3 * d_model, 3 * mup_base_d_model)
      fans_qkv, fans_out = mup.init_fans(d, d3), mup.init_fans(d, d)
      self.mup_logit_factor = ((mup_base_d_model // num_heads) / self.head_dim) ** 0.5
    self.w_qkv = nnx.Param(w_init(rngs.params(), (d_model, 3 * d_model), jnp.float32, fans_qkv))
    self.w_out = nnx.Param(w_init(rngs.params(), (d_model, d_model), jnp.float32, fans_out))

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    b, t, d = x_BxTxD.shape
    qkv_BxTx3D = x_BxTxD.astype(self.dtype) @ self.w_qkv[...].astype(self.dtype)
    q_BxTxHxK, k_BxTxHxK, v_BxTxHxK = (
      y.reshape(b, t, self.num_heads, self.head_dim) for y in jnp.split(qkv_BxTx3D, 3, axis=-1)
    )
    if self.rope:
      q_BxTxHxK, k_BxTxHxK = rotary(q_BxTxHxK), rotary(k_BxTxHxK)
    scores_BxHxTxS = jnp.einsum('bthk,bshk->bhts', q_BxTxHxK, k_BxTxHxK).astype(jnp.float32)
    scores_BxHxTxS = scores_BxHxTxS / jnp.sqrt(jnp.float32(self.head_dim))
    if self.mup_logit_factor is not None:
      scores_BxHxTxS = scores_BxHxTxS * jnp.float32(self.mup_logit_factor)
    causal_1x1xTxS = jnp.tril(jnp.ones((t, t), bool))[None, None]
    scores_BxHxTxS = jnp.where(causal_1x1xTxS, scores_BxHxTxS, jnp.finfo(jnp.float32).min)
    probs_BxHxTxS = jax.nn.softmax(scores_BxHxTxS, axis=-1).astype(self.dtype)
    out_BxTxHxK = jnp.einsum('bhts,bshk->bthk', probs_BxHxTxS, v_BxTxHxK)
    return out_BxTxHxK.reshape(b, t, d) @ self.w_out[...].astype(self.dtype)


class Block(nnx.Module):
  """Pre-norm residual block: optional attention sublayer, optional FFN sublayer."""

  def __init__(
    self,
    model_cfg: ml_collections.ConfigDict,
    *,
    attention: bool,
    rngs: nnx.Rngs,
    expert_mesh: jax.sharding.Mesh | None = None,
    d_ff_true: jax.Array | None = None,
  ):
    d, norm = model_cfg.d_model, NORMS[model_cfg.norm]
    self.attn_norm = norm(d, rngs) if attention else None
    self.attn = (
      CausalSelfAttention(
        d,
        model_cfg.num_heads,
        rope=model_cfg.positions == 'rotary',
        init=model_cfg.init,
        dtype=model_cfg.dtype,
        rngs=rngs,
        mup_base_d_model=model_cfg.mup_base_d_model if mup.is_mup(model_cfg) else None,
      )
      if attention
      else None
    )
    self.ffn_norm = norm(d, rngs) if model_cfg.use_ffn else None
    self.ffn = sublayer.build_ffn(model_cfg, d, d, rngs, expert_mesh, d_ff_true) if model_cfg.use_ffn else None

  def __call__(self, x_BxTxD: jax.Array, rng: jax.Array | None, route_hash_BxT: jax.Array | None = None):
    aux = {}
    if self.attn is not None and self.attn_norm is not None:  # both or neither
      x_BxTxD = x_BxTxD + self.attn(self.attn_norm(x_BxTxD)).astype(x_BxTxD.dtype)
    if self.ffn is not None and self.ffn_norm is not None:  # both or neither
      hashed = {} if route_hash_BxT is None else {'route_hash': route_hash_BxT}  # token routers only
      y_BxTxD, aux = self.ffn.apply(self.ffn_norm(x_BxTxD), rng=rng, **hashed)
      x_BxTxD = x_BxTxD + y_BxTxD.astype(x_BxTxD.dtype)
    return x_BxTxD, aux


class SequenceModel(ffn_lib.Layer):
  """Embedding -> blocks -> final norm -> unembedding; `Transformer` and `FFNStack` below."""

  attention: bool = True

  def __init__(
    self,
    model_cfg: ml_collections.ConfigDict,
    vocab_size: int,
    seq_len: int,
    *,
    rngs: nnx.Rngs,
    expert_mesh: jax.sharding.Mesh | None = None,
    d_ff_true: jax.Array | None = None,
    scored_vocab: int | None = None,
  ):
    """`scored_vocab`: logits for the first this many tokens only (default all `vocab_size`), the tokens a task can
    score as an answer; the embedding and unembedding keep every token."""
    d = model_cfg.d_model
    self.scored_vocab = vocab_size if scored_vocab is None else scored_vocab
    # μP (models/mup.py): the embeddings are input weights (fan-in vocabulary / positions), the
    # unembedding an output weight; standard: every rule at the true fans.
    is_mup, d_dim = mup.is_mup(model_cfg), mup.d_model_dim(model_cfg)

    def fans(fan_in: mup.Dim, fan_out: mup.Dim) -> inits.Fans | None:
      return mup.init_fans(fan_in, fan_out) if is_mup else None

    self.embed = nnx.Param(EMBED_INIT(rngs.params(), (vocab_size, d), jnp.float32, fans(mup.Dim(vocab_size), d_dim)))
    self.pos_embed = (
      nnx.Param(EMBED_INIT(rngs.params(), (seq_len, d), jnp.float32, fans(mup.Dim(seq_len), d_dim)))
      if model_cfg.positions == 'learned'
      else None
    )
    self.blocks = nnx.List(
      [
        Block(model_cfg, attention=self.attention, rngs=rngs, expert_mesh=expert_mesh, d_ff_true=d_ff_true)
        for _ in range(model_cfg.num_layers)
      ]
    )
    self.final_norm = NORMS[model_cfg.norm](d, rngs)
    self.unembed = (
      None
      if model_cfg.tie_embeddings
      else nnx.Param(
        inits.get(model_cfg.init)(rngs.params(), (d, vocab_size), jnp.float32, fans(d_dim, mup.Dim(vocab_size)))
      )
    )
    # Frozen: fixed random codes in and out, so whatever is learned lives in the blocks
    # (Adam's update for a zero gradient is exactly zero; adamw/lion decay would still shrink them).
    self.freeze = model_cfg.freeze_embeddings
    e = model_cfg.moe
    self.token_routed = model_cfg.use_ffn and e.num_experts > 0 and e.router in routers_lib.TOKEN_ROUTERS

  def _maybe_frozen(self, w: jax.Array) -> jax.Array:
    return jax.lax.stop_gradient(w) if self.freeze else w

  def embed_tokens(self, tokens_BxT: jax.Array) -> jax.Array:
    """Token (+ learned position) embeddings, position by position."""
    x_BxTxD = jnp.take(self._maybe_frozen(self.embed[...]), tokens_BxT, axis=0)
    if self.pos_embed is not None:
      x_BxTxD = x_BxTxD + self._maybe_frozen(self.pos_embed[...])[None, : tokens_BxT.shape[1]]
    return x_BxTxD

  def mix(self, x_BxTxD: jax.Array) -> jax.Array:
    """Parameter-free mixing across positions before the blocks (none here)."""
    return x_BxTxD

  def forward(
    self,
    x_BxTxD: jax.Array,
    *,
    rng: jax.Array | None = None,
    positions: slice | None = None,
    route_hash_BxT: jax.Array | None = None,
  ):
    """Embeddings -> (logits_BxPxV, aux): everything after the embedding lookup.

    `positions`: the positions to compute logits at (P of them; default all T). The blocks
    still see every position, so their outputs and aux do not depend on it. `route_hash_BxT`:
    a token router's input (`apply` computes it from the tokens).
    """
    x_BxTxD = self.mix(x_BxTxD)
    aux = {}
    for i, block in enumerate(self.blocks):
      x_BxTxD, block_aux = block(x_BxTxD, None if rng is None else jax.random.fold_in(rng, i), route_hash_BxT)
      if block.ffn is not None:
        aux[f'layer_{i}'] = block_aux
    if positions is not None:
      x_BxTxD = x_BxTxD[:, positions]
    h_BxPxD = self.final_norm(x_BxTxD)
    w_DxV = self.embed[: self.scored_vocab].T if self.unembed is None else self.unembed[:, : self.scored_vocab]
    return (h_BxPxD @ self._maybe_frozen(w_DxV)).astype(jnp.float32), aux

  def apply(self, tokens_BxT: jax.Array, *, rng: jax.Array | None = None, positions: slice | None = None):
    route_hash_BxT = routers_lib.prefix_hash(tokens_BxT) if self.token_routed else None
    return self.forward(self.embed_tokens(tokens_BxT), rng=rng, positions=positions, route_hash_BxT=route_hash_BxT)

  def after_step(self, aux) -> None:
    for i, block in enumerate(self.blocks):
      if block.ffn is not None:
        block.ffn.after_step(aux[f'layer_{i}'])


class Transformer(SequenceModel):
  """Decoder-only pre-norm transformer (model.arch='transformer')."""

  attention = True


class FFNStack(SequenceModel):
  """Residual FFN blocks over a causal mean of the embeddings, no attention (model.arch='ffn_stack')."""

  attention = False

  def mix(self, x_BxTxD: jax.Array) -> jax.Array:
    """Causal mean: position t gets the mean of the embeddings at positions 0..t."""
    count_1xTx1 = jnp.arange(1, x_BxTxD.shape[1] + 1, dtype=x_BxTxD.dtype)[None, :, None]
    return jnp.cumsum(x_BxTxD, axis=1) / count_1xTx1


def counts(model_cfg: ml_collections.ConfigDict, vocab_size: int, seq_len: int, ffn: dict[str, int]) -> dict[str, int]:
  """Exact parameter counts by part and forward FLOPs per token, given one FFN sublayer's counts.

  flops_per_token counts matmuls only (2 per multiply-add): per layer the four
  attention projections (8 d^2), scores and mixing over the full seq_len
  (4 T d; the causal mask is not exploited) and the FFN; plus the unembedding.
  """
  d, num_layers = model_cfg.d_model, model_cfg.num_layers
  attention = model_cfg.arch == 'transformer'
  ffn_total = ffn['num_params'] if model_cfg.use_ffn else 0
  ffn_active = ffn['num_active_params'] if model_cfg.use_ffn else 0
  ffn_flops = ffn['flops_per_token'] if model_cfg.use_ffn else 0
  norms_per_layer = int(attention) + int(model_cfg.use_ffn)
  c = {
    'num_embedding_params': vocab_size * d + (seq_len * d if model_cfg.positions == 'learned' else 0),
    'num_unembedding_params': 0 if model_cfg.tie_embeddings else d * vocab_size,
    'num_attention_params': num_layers * 4 * d * d if attention else 0,
    'num_ffn_params': num_layers * ffn_total,
    'num_active_ffn_params': num_layers * ffn_active,
    'num_norm_params': (num_layers * norms_per_layer + 1) * NORM_PARAMS_PER_FEATURE[model_cfg.norm] * d,
  }
  frozen = c['num_embedding_params'] + c['num_unembedding_params'] if model_cfg.freeze_embeddings else 0
  rest = c['num_embedding_params'] + c['num_unembedding_params'] + c['num_attention_params'] + c['num_norm_params']
  attn_flops = (8 * d * d + 4 * seq_len * d) if attention else 0
  return {
    'num_params': rest + c['num_ffn_params'],
    'num_active_params': rest + c['num_active_ffn_params'],
    **c,
    'num_trainable_params': rest + c['num_ffn_params'] - frozen,  # all but frozen embeddings
    # Hidden widths as ffn_counts reports them ('d_ff_active' once MoE defines it).
    **{k: ffn[k] if model_cfg.use_ffn else 0 for k in ('d_ff_effective', 'd_ff_active') if k in ffn},
    'flops_per_token': num_layers * (attn_flops + ffn_flops) + 2 * d * vocab_size,
  }
