"""The config schema (every key, its default and meaning), `ConfigError` and check helpers.

A leaf: it imports nothing else of the package. Config files in `configs/` start
from `default_config()` and change what they need. Each registry validates its
own section with the helpers below (`check`, `one_of`, `positive_int`, ...), and
`ffn_research.validation.validate` composes them over the whole config; every
failure is a `ConfigError` with one line naming the key and what is allowed.
"""

from collections.abc import Iterable, Mapping
import functools
import math
import types
from typing import Any

import ml_collections


class ConfigError(ValueError):
  """An invalid config value; the message is one line naming the key."""


def default_config() -> ml_collections.ConfigDict:
  """Every config key with its default. Unknown keys are rejected by `validate`."""
  c = ml_collections.ConfigDict()

  c.model = m = ml_collections.ConfigDict()
  m.arch = 'ffn'  # 'ffn': the bare FFN (regression); 'tied_relu': ReLU(W^T W x + b); 'ffn_relu_out': ReLU(FFN(x));
  # 'kinks': the bare 1-d ReLU FFN parametrised by its kink positions (models/toy.py)
  m.d_model = 1  # input/output features of the FFN (1 for 1-D functions)
  m.d_ff = 64  # hidden width (before match_params scaling)
  m.activation = 'relu'  # plain or gated name, see models/activations.py
  m.use_bias = True  # biases b1 (and b_gate) and b2
  m.dropout_rate = 0.0  # dropout on the hidden activations, in [0, 1)
  m.match_params = False  # gated FFNs use round(2/3 d_ff) to match dense params
  m.init = 'xavier_uniform'  # weight initialiser, see models/inits.py INITS
  m.dtype = 'float32'  # computation dtype: 'float32' or 'bfloat16'
  # Sequence models (arch 'transformer' or 'ffn_stack'; models/transformer.py):
  m.num_layers = 2  # residual blocks
  m.num_heads = 4  # attention heads (transformer); must divide d_model
  m.norm = 'rmsnorm'  # pre-norm layer: 'rmsnorm' or 'layernorm'
  m.positions = 'learned'  # 'learned' embeddings, 'rotary' (transformer only) or 'none'
  m.tie_embeddings = False  # True: unembedding = token embedding transposed
  m.use_ffn = True  # False: no FFN sublayer (attention-only control; transformer only)
  m.freeze_embeddings = False  # True: token/position embeddings and unembedding stay at their random init (no gradient)
  # 'standard', or 'mup': the maximal update parametrization (Yang et al. 2021), init and per-layer Adam
  # learning rates scaled with the widths relative to a base model, so the best learning rate transfers
  # across widths (models/mup.py, docs/mup.md); bare FFN and sequence models, dense, gated or MoE FFNs;
  # train.optimizer adam or adamw. mup equals standard where d_ff and d_model equal their bases.
  m.parametrization = 'standard'
  m.mup_base_d_ff = 64  # mup: the base model's d_ff (before match_params; MoE: its expert width before granularity)
  m.mup_base_d_model = 64  # mup, sequence models: the base model's d_model, same heads (the bare FFN's is the task's)

  # Mixture of experts (models/moe.py); num_experts > 0 turns every FFN into an MoE
  # whose experts are FFNs of width model.d_ff (effective) / granularity.
  m.moe = moe = ml_collections.ConfigDict()
  moe.num_experts = 0  # routed experts E (before granularity); 0 = dense FFN
  moe.top_k = 2  # experts per token k (before granularity); the "MoE top-k" sweep axis
  moe.capacity_factor = 1.25  # C = ceil(cf * tokens * k / E) per expert; <= 0 = dropless
  moe.router = (
    'topk_softmax'  # see moe.ROUTERS: softmax_topk, topk_softmax, sigmoid, expert_choice, hash, token_hash, soft
  )
  moe.renormalize = False  # softmax_topk only: renormalise the k weights to sum to 1
  moe.freeze_router = False  # True: router weights stay at their random init (no gradient, no optimizer state)
  moe.stop_combine_grad = False  # True: no gradient through the combine weights (forward unchanged; the
  # router then learns only from the aux losses through P_i and z)
  # Over capacity keep: 'position' (all k choices of token t before token t+1), 'token' (all 1st
  # choices in token order, then 2nd, GShard) or 'score' (highest weight first); 'auto' = 'position'
  # in sequence models (causal), 'token' for the bare FFN.
  moe.drop_priority = 'auto'
  # Tokens that share the capacity C: 'sequence' (each sequence its own C; causal, GShard's groups) or
  # 'batch' (the whole batch); 'auto' = 'sequence' in sequence models, 'batch' for the bare FFN.
  moe.capacity_scope = 'auto'
  # Sequence models refuse MoE settings that leak later tokens or other sequences into a token's output
  # (expert_choice, soft, batch-wide capacity, 'token' priority with k > 1, 'score'); True accepts the leak and
  # the run's summary.json says so (moe_noncausal). See docs/moe.md#causality.
  moe.allow_noncausal = False
  moe.dispatch = 'auto'  # see moe.DISPATCH: sort, ragged, einsum; auto = ragged on TPU, sort elsewhere
  moe.num_shared_experts = 0  # always-active experts of width d_ff / granularity (DeepSeekMoE)
  moe.granularity = 1  # G: G*E experts of width d_ff/G, top G*k (fine-grained experts)
  moe.load_balance_coef = 1e-2  # alpha of the Switch loss alpha*E*sum f_i P_i (f sums to 1, see moe.py)
  moe.z_loss_coef = 1e-3  # router z-loss coefficient (ST-MoE)
  moe.bias_update_rate = 0.0  # DeepSeek-V3 aux-loss-free bias step gamma per train step; 0 = off
  moe.jitter = 0.0  # multiplicative router-input jitter U(1-j, 1+j) in training; 0 = off
  # Token-choice routers: the dtype of the router's logits, softmax and top-k ('float32', or 'bfloat16': the
  # round-off ST-MoE's instability lives in; the combine weights and the aux terms then read the rounded values)
  moe.router_dtype = 'float32'
  # router 'soft' (Soft MoE, Puigcerver et al. 2023) only: p slots per expert, E*p slots in all, each a
  # softmax-weighted average of all tokens of its group (the batch, or a sequence; see capacity_scope).
  moe.slots_per_expert = 1

  c.task = t = ml_collections.ConfigDict()
  t.name = 'function'  # see tasks.TASKS
  t.function = 'x_squared'  # for 'function': x_squared, sin, abs, step
  t.num_train = 1024  # training-set size (function, teacher_student)
  # held-out points (function, teacher_student, sparse_features) or sequences (associative_recall, language);
  # shortest_path: graphs in its test set and in its validation set, each
  t.num_eval = 4096
  t.grid_size = 8193  # dense grid on [-1, 1] for the sup-norm error (function)
  t.teacher_d_ff = 32  # teacher hidden width (teacher_student)
  t.teacher_activation = 'relu'  # teacher activation (teacher_student)
  t.noise_std = 0.0  # Gaussian label noise on training targets (teacher_student)
  t.num_clusters = 0  # teacher_student inputs: 0 = x ~ N(0, I); K > 0 = K Gaussian clusters (skewed, below)
  t.cluster_zipf = 1.0  # cluster c in 1..K drawn with P(c) ~ c^-cluster_zipf (0 = uniform); num_clusters > 0 only
  t.cluster_std = 0.25  # spread of each cluster around its centre (centres N(0, I)); num_clusters > 0 only
  t.cluster_teachers = (
    False  # True: each cluster has its own random teacher (targets teacher_c(x)); num_clusters > 0 only
  )
  t.center_inputs = False  # teacher_student: True = the cluster centres shifted so the inputs' mean is 0
  t.input_offset = 0.0  # teacher_student: s > 0 adds one offset c ~ N(0, s^2 I) per seed to every input
  t.num_points = 256  # N random points to memorise (random_labels)
  t.tolerance = 0.1  # |error| within which a point counts as fitted (random_labels)
  # sparse_features (Elhage et al. 2022): n = model.d_model features, reconstructed (tasks/regression.py).
  t.feature_sparsity = 0.0  # S: probability that a feature is 0 (else uniform on [0, 1]); in [0, 1)
  t.importance_decay = 1.0  # r: feature i's weight in the loss is r^i (1 = uniform importance)
  # Sequence tasks (tasks/sequence.py):
  t.vocab_size = 256  # tokens (language)
  t.num_objects = 256  # V object values a fact's answer is drawn from (memorization)
  t.num_keys = 256  # K keys, and as many values: 2K tokens (associative_recall)
  t.num_facts = 1024  # facts (subject, relation) -> object (memorization)
  t.object_softmax = False  # memorization: True scores the object over the V object tokens only (not every token)
  # relations R, each a function on entities: a subject's R facts (memorization), a node's R out-edges (multi_hop)
  t.num_relations = 4
  t.num_pairs = 8  # key-value pairs in context (associative_recall)
  t.num_queries = 8  # queried keys per sequence, <= num_pairs (associative_recall)
  t.modulus = 97  # p in a + b mod p (modular_arithmetic)
  t.train_fraction = 0.5  # share of pairs (modular) or compositions (multi_hop) trained on
  t.validation_fraction = 0.0  # share of compositions held out to choose settings on (multi_hop: val_*); 0: none
  t.num_nodes = 64  # graph nodes (multi_hop; shortest_path: per example, model.d_model = n^2 + 2n)
  t.out_degree = 2  # shortest_path: distinct successors of every node (no self-loop), < num_nodes
  t.max_distance = 2  # shortest_path: D; distances 1 .. D are classes, farther or unreachable one more class
  t.num_graphs = 0  # shortest_path: 0 = a fresh graph per training example; P > 0 = a fixed pool of P (graph, query)
  # examples drawn once per seed, the training batches sampled from it and eval_* scored on it (a storage control)
  t.num_hops = 2  # edges followed per query (multi_hop)
  # Synthetic language (tasks/language.py): a sparse random Markov chain of order k.
  t.seq_len = 64  # tokens per sequence (language)
  t.markov_order = 2  # k: the next token depends on the previous k tokens (language)
  t.num_candidates = 8  # m: a context's next tokens come from m candidates fixed by its last token (language)
  t.branching = 4  # s <= m: possible next tokens per context (language)
  t.concentration = 1.0  # Dirichlet alpha of the s next-token probabilities; smaller = peakier (language)
  # language: how each sequence's start context is drawn from the stationary pi: 'gumbel' (jax.random.categorical's
  # draws; work per sequence grows with the contexts) or 'inverse_cdf' (one uniform and a binary search in cumsum(pi):
  # the same distribution, other draws, far cheaper with many contexts; docs/language.md)
  t.start_draw = 'gumbel'

  c.train = tr = ml_collections.ConfigDict()
  tr.steps = 2000  # optimizer steps
  tr.batch_size = 256  # examples per step (drawn with replacement)
  tr.learning_rate = 3e-3  # peak learning rate
  tr.optimizer = 'adam'  # see optim.OPTIMIZERS
  tr.schedule = 'cosine'  # see optim.SCHEDULES: 'cosine' (warmup, cosine decay to 0) or 'constant'
  tr.warmup_steps = 100  # linear warmup from 0 (both schedules)
  tr.grad_clip = 1.0  # global-norm clipping threshold; <= 0 disables
  tr.weight_decay = 0.0  # decoupled weight decay (adamw, lion)
  tr.momentum = 0.9  # sgd momentum
  tr.seed = 0  # seeds model init, task data and batches
  tr.log_every = 100  # steps per compiled chunk and per logged metrics line
  tr.checkpoint_every = 1000  # steps between checkpoints (rounded to log_every); <= 0: final only
  tr.eval_every = 0  # steps between held-out evaluations logged as eval/... (rounded to log_every); 0: end only
  tr.blowup_factor = 1e4  # 'diverged' once the logged loss exceeds this multiple of the first step's loss ...
  tr.blowup_patience = 3  # ... for this many logged chunks in a row; blowup_factor = 0 turns the rule off

  # Parallelism of one run (ffn_research/parallel.py; sweeps shard their run axis instead):
  c.parallel = p = ml_collections.ConfigDict()
  p.data = 0  # devices on the 'data' mesh axis (the batch is split over them); 0 = all devices / expert
  p.expert = 1  # devices on the 'expert' mesh axis (MoE experts split over them); must divide the experts
  p.distributed = 'auto'  # jax.distributed.initialize(): 'auto' when a multi-process launch is detected, 'on', 'off'
  return c


def tiny_transformer_config(
  task_name: str, arg: str | None, extra_args: tuple[str, ...] = ()
) -> ml_collections.ConfigDict:
  """The base of the sequence configs: a 2-layer, d_model 64, d_ff 256, 4-head transformer on
  `task_name`, with the control variants every sequence config accepts as its argument:
  'default', 'ffn_stack' (no attention), 'no_ffn' (attention only), plus `extra_args`
  that the calling config handles itself.
  """
  config = default_config()
  m = config.model
  m.arch, m.d_model, m.d_ff, m.num_layers, m.num_heads = 'transformer', 64, 256, 2, 4
  config.task.name = task_name
  variants = {
    'default': {},
    **{name: {} for name in extra_args},
    'ffn_stack': {'model.arch': 'ffn_stack'},
    'no_ffn': {'model.use_ffn': False},
  }
  return set_paths(config, variant(variants, arg or 'default'))


def variant(variants: Mapping[str, Any], arg: str) -> Any:
  """The variant named `arg` (a config file's ':arg'); ValueError listing the names when there is none."""
  if arg not in variants:
    raise ValueError(f'unknown config argument {arg!r}; allowed: {", ".join(variants)}')
  return variants[arg]


def set_paths(cfg: Any, overrides: Mapping[str, Any]) -> Any:
  """`cfg` with each dotted key of `overrides` set (set_path)."""
  for key, value in overrides.items():
    set_path(cfg, key, value)
  return cfg


def get_path(cfg: Any, key: str) -> Any:
  """cfg['a']['b'] for the dotted key 'a.b' (a ConfigDict or a plain nested dict)."""
  node = cfg
  for part in key.split('.'):
    node = node[part]
  return node


def set_path(cfg: Any, key: str, value: Any) -> None:
  """cfg['a']['b'] = value for the dotted key 'a.b'."""
  section, _, leaf = key.rpartition('.')
  (get_path(cfg, section) if section else cfg)[leaf] = value


def flat_keys(cfg: ml_collections.ConfigDict, prefix: str = '') -> dict[str, Any]:
  """{'section.key': value} of a (nested) config."""
  out = {}
  for k, v in cfg.items():
    name = f'{prefix}{k}'
    if isinstance(v, ml_collections.ConfigDict):
      out.update(flat_keys(v, name + '.'))
    else:
      out[name] = v
  return out


# --------------------------------------------------------------------------- check helpers


def check(ok: bool, msg: str) -> None:
  """Raise ConfigError(msg) unless ok."""
  if not ok:
    raise ConfigError(msg)


def one_of(key: str, value: Any, allowed: Iterable[str]) -> None:
  allowed = list(allowed)
  check(value in allowed, f'{key}={value!r} is unknown; allowed: {", ".join(allowed)}')


def _is_number(value: Any) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_int(key: str, value: Any) -> None:
  check(
    isinstance(value, int) and not isinstance(value, bool) and value > 0, f'{key}={value!r} must be a positive integer'
  )


def non_negative_int(key: str, value: Any) -> None:
  check(
    isinstance(value, int) and not isinstance(value, bool) and value >= 0, f'{key}={value!r} must be an integer >= 0'
  )


def positive_float(key: str, value: Any) -> None:
  check(_is_number(value) and math.isfinite(value) and value > 0, f'{key}={value!r} must be a positive number')


def non_negative(key: str, value: Any) -> None:
  check(_is_number(value) and math.isfinite(value) and value >= 0, f'{key}={value!r} must be a non-negative number')


def fraction(key: str, value: Any) -> None:
  """value in the open interval (0, 1)."""
  check(_is_number(value) and 0.0 < value < 1.0, f'{key}={value!r} must be in (0, 1)')


# Keys renamed so that each means one thing: {task.name: {old key: the key that task reads now}}. The old key keeps
# its other task's meaning: set away from its default for this task it is an error naming the new key
# (check_renamed), and a config.json written before the rename still resumes (upgrade_renamed).
RENAMED = {
  'memorization': {'task.vocab_size': 'task.num_objects'},
  'associative_recall': {'task.vocab_size': 'task.num_keys'},
}


def check_renamed(config: ml_collections.ConfigDict) -> None:
  """ConfigError naming the new key where a config sets a key its task no longer reads (RENAMED)."""
  known = _schema()
  for old, new in RENAMED.get(config.task.name, {}).items():
    value = get_path(config, old)
    check(
      value == known[old],
      f'{old}={value!r} is not read by task {config.task.name!r}: set {new} (renamed from {old}, which is the '
      f"language task's token count)",
    )


def upgrade_renamed(flat: dict[str, Any]) -> dict[str, Any]:
  """A flat config recorded before a rename (RENAMED) with its values under the keys its task reads now."""
  out = dict(flat)
  for old, new in RENAMED.get(str(flat.get('task.name')), {}).items():
    if new not in out and old in out:
      out[new] = out.pop(old)
  return out


@functools.cache
def _schema() -> Mapping[str, Any]:
  """{'section.key': default} of default_config(), built once (read-only)."""
  return types.MappingProxyType(flat_keys(default_config()))


def check_schema(config: ml_collections.ConfigDict) -> None:
  """Every key of default_config() present, no other key, booleans where the default is one."""
  known = _schema()
  given = flat_keys(config)
  for key in given:
    if key not in known:
      section = key.rsplit('.', 1)[0] + '.' if '.' in key else ''
      options = sorted(k for k in known if k.startswith(section))
      raise ConfigError(f'unknown config key {key!r}; keys in this section: {", ".join(options)}')
  for key, default in known.items():
    check(key in given, f'config key {key!r} is missing (start configs from config.default_config())')
    value = given[key]
    if isinstance(default, bool):
      check(isinstance(value, bool), f'{key}={value!r} must be True or False')


def unknown_override_error(argv: list[str], flag: str = 'config') -> str | None:
  """A one-line error for the first `--config.KEY=...` naming a key outside the schema.

  Checked before absl parses flags, whose own error for this is a traceback.
  """
  known = _schema()
  sections = {k.rsplit('.', i)[0] for k in known for i in range(1, k.count('.') + 1)}
  prefix = f'--{flag}.'
  for arg in argv[1:]:
    if arg.startswith(prefix):
      key = arg[len(prefix) :].split('=', 1)[0]
      if key not in known and key not in sections:
        section = key.rsplit('.', 1)[0] + '.' if '.' in key else ''
        options = sorted(k for k in known if k.startswith(section)) or sorted(known)
        return f'unknown config key {key!r}; keys in this section: {", ".join(options)}'
  return None
