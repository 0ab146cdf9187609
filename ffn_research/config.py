"""The config schema (every key, its default and meaning) and its validation.

Config files in `configs/` start from `default_config()` and change what they
need; `validate` checks the whole resolved config before anything is compiled
and raises `ConfigError` with one line naming the key and what is allowed.
"""

import math
from typing import Any, Iterable

import ml_collections


class ConfigError(ValueError):
  """An invalid config value; the message is one line naming the key."""


def default_config() -> ml_collections.ConfigDict:
  """Every config key with its default. Unknown keys are rejected by `validate`."""
  c = ml_collections.ConfigDict()

  c.model = m = ml_collections.ConfigDict()
  m.arch = 'ffn'            # 'ffn': the bare FFN (regression); see models.ARCHS
  m.d_model = 1             # input/output features of the FFN (1 for 1-D functions)
  m.d_ff = 64               # hidden width (before match_params scaling)
  m.activation = 'relu'     # plain or gated name, see models/activations.py
  m.use_bias = True         # biases b1 (and b_gate) and b2
  m.dropout_rate = 0.0      # dropout on the hidden activations, in [0, 1)
  m.match_params = False    # gated FFNs use round(2/3 d_ff) to match dense params
  m.init = 'xavier_uniform'  # weight initialiser, see models/ffn.py INITS
  m.dtype = 'float32'       # computation dtype: 'float32' or 'bfloat16'
  # Sequence models (arch 'transformer' or 'ffn_stack'; models/transformer.py):
  m.num_layers = 2          # residual blocks
  m.num_heads = 4           # attention heads (transformer); must divide d_model
  m.norm = 'rmsnorm'        # pre-norm layer: 'rmsnorm' or 'layernorm'
  m.positions = 'learned'   # 'learned' embeddings, 'rotary' (transformer only) or 'none'
  m.tie_embeddings = False  # True: unembedding = token embedding transposed
  m.use_ffn = True          # False: no FFN sublayer (attention-only control; transformer only)

  # Mixture of experts (models/moe.py); num_experts > 0 turns every FFN into an MoE
  # whose experts are FFNs of width model.d_ff (effective) / granularity.
  m.moe = moe = ml_collections.ConfigDict()
  moe.num_experts = 0         # routed experts E (before granularity); 0 = dense FFN
  moe.top_k = 2               # experts per token k (before granularity); the "MoE top-k" sweep axis
  moe.capacity_factor = 1.25  # C = ceil(cf * tokens * k / E) per expert; <= 0 = dropless
  moe.router = 'topk_softmax'  # see moe.ROUTERS: softmax_topk, topk_softmax, sigmoid, expert_choice
  moe.renormalize = False     # softmax_topk only: renormalise the k weights to sum to 1
  moe.drop_priority = 'token'  # over capacity keep: 'token' (1st choices in token order, then 2nd) or 'score'
  moe.dispatch = 'auto'       # see moe.DISPATCH: sort, ragged, einsum; auto = sort on CPU, ragged otherwise
  moe.num_shared_experts = 0  # always-active experts of width d_ff / granularity (DeepSeekMoE)
  moe.granularity = 1         # G: G*E experts of width d_ff/G, top G*k (fine-grained experts)
  moe.load_balance_coef = 1e-2  # alpha of the Switch loss alpha*E*sum f_i P_i (f sums to 1, see moe.py)
  moe.z_loss_coef = 1e-3      # router z-loss coefficient (ST-MoE)
  moe.bias_update_rate = 0.0  # DeepSeek-V3 aux-loss-free bias step gamma per train step; 0 = off
  moe.jitter = 0.0            # multiplicative router-input jitter U(1-j, 1+j) in training; 0 = off

  c.task = t = ml_collections.ConfigDict()
  t.name = 'function'       # see tasks.TASKS
  t.function = 'x_squared'  # for 'function': x_squared, sin, abs, step
  t.num_train = 1024        # training-set size (function, teacher_student)
  t.num_eval = 4096         # held-out points (function, teacher_student) or sequences (associative_recall, language)
  t.grid_size = 8193        # dense grid on [-1, 1] for the sup-norm error (function)
  t.teacher_d_ff = 32       # teacher hidden width (teacher_student)
  t.teacher_activation = 'relu'  # teacher activation (teacher_student)
  t.noise_std = 0.0         # Gaussian label noise on training targets (teacher_student)
  t.num_clusters = 0        # teacher_student inputs: 0 = x ~ N(0, I); K > 0 = K Gaussian clusters (skewed, below)
  t.cluster_zipf = 1.0      # cluster c in 1..K drawn with P(c) ~ c^-cluster_zipf (0 = uniform); num_clusters > 0 only
  t.num_points = 256        # N random points to memorise (random_labels)
  t.tolerance = 0.1         # |error| within which a point counts as fitted (random_labels)
  # Sequence tasks (tasks/sequence.py):
  t.vocab_size = 256        # object values (memorization); keys, and as many values (associative_recall); tokens (language)
  t.num_facts = 1024        # facts (subject, relation) -> object (memorization)
  t.num_relations = 4       # relations per subject (memorization); edge labels per node (multi_hop)
  t.num_pairs = 8           # key-value pairs in context (associative_recall)
  t.num_queries = 8         # queried keys per sequence, <= num_pairs (associative_recall)
  t.modulus = 97            # p in a + b mod p (modular_arithmetic)
  t.train_fraction = 0.5    # share of pairs (modular) or compositions (multi_hop) trained on
  t.num_nodes = 64          # graph nodes (multi_hop)
  t.num_hops = 2            # edges followed per query (multi_hop)
  # Synthetic language (tasks/language.py): a sparse random Markov chain of order k.
  t.seq_len = 64            # tokens per sequence (language)
  t.markov_order = 2        # k: the next token depends on the previous k tokens (language)
  t.num_candidates = 8      # m: a context's next tokens come from m candidates fixed by its last token (language)
  t.branching = 4           # s <= m: possible next tokens per context (language)
  t.concentration = 1.0     # Dirichlet alpha of the s next-token probabilities; smaller = peakier (language)

  c.train = tr = ml_collections.ConfigDict()
  tr.steps = 2000           # optimizer steps
  tr.batch_size = 256       # examples per step (drawn with replacement)
  tr.learning_rate = 3e-3   # peak learning rate
  tr.optimizer = 'adam'     # see train.OPTIMIZERS
  tr.schedule = 'cosine'    # 'cosine' (linear warmup, cosine decay to 0) or 'constant'
  tr.warmup_steps = 100     # linear warmup from 0 (both schedules)
  tr.grad_clip = 1.0        # global-norm clipping threshold; <= 0 disables
  tr.weight_decay = 0.0     # decoupled weight decay (adamw, lion)
  tr.momentum = 0.9         # sgd momentum
  tr.seed = 0               # seeds model init, task data and batches
  tr.log_every = 100        # steps per compiled chunk and per logged metrics line
  tr.checkpoint_every = 1000  # steps between checkpoints (rounded to log_every); <= 0: final only
  tr.eval_every = 0         # steps between held-out evaluations logged as eval/... (rounded to log_every); 0: end only
  tr.blowup_factor = 1e4    # 'diverged' once the logged loss exceeds this multiple of the first step's loss ...
  tr.blowup_patience = 3    # ... for this many logged chunks in a row; blowup_factor = 0 turns the rule off
  return c


def tiny_transformer_config(task_name: str, arg: str | None,
                            extra_args: tuple[str, ...] = ()) -> ml_collections.ConfigDict:
  """The base of the sequence configs: a 2-layer, d_model 64, d_ff 256, 4-head transformer on
  `task_name`, with the control variants every sequence config accepts as its argument:
  'default', 'ffn_stack' (no attention), 'no_ffn' (attention only), plus `extra_args`
  that the calling config handles itself.
  """
  config = default_config()
  m = config.model
  m.arch, m.d_model, m.d_ff, m.num_layers, m.num_heads = 'transformer', 64, 256, 2, 4
  config.task.name = task_name
  arg = arg or 'default'
  allowed = ('default', *extra_args, 'ffn_stack', 'no_ffn')
  if arg not in allowed:
    raise ValueError(f'unknown config argument {arg!r}; allowed: {", ".join(allowed)}')
  if arg == 'ffn_stack':
    m.arch = 'ffn_stack'
  elif arg == 'no_ffn':
    m.use_ffn = False
  return config


def _flat_keys(cfg: ml_collections.ConfigDict, prefix: str = '') -> dict[str, Any]:
  out = {}
  for k, v in cfg.items():
    name = f'{prefix}{k}'
    if isinstance(v, ml_collections.ConfigDict):
      out.update(_flat_keys(v, name + '.'))
    else:
      out[name] = v
  return out


def _check(ok: bool, msg: str) -> None:
  if not ok:
    raise ConfigError(msg)


def _one_of(key: str, value: Any, allowed: Iterable[str]) -> None:
  allowed = list(allowed)
  _check(value in allowed, f'{key}={value!r} is unknown; allowed: {", ".join(allowed)}')


def _positive_int(key: str, value: Any) -> None:
  _check(isinstance(value, int) and not isinstance(value, bool) and value > 0,
         f'{key}={value!r} must be a positive integer')


def _positive_float(key: str, value: Any) -> None:
  _check(isinstance(value, (int, float)) and not isinstance(value, bool)
         and math.isfinite(value) and value > 0, f'{key}={value!r} must be a positive number')


def validate(config: ml_collections.ConfigDict) -> None:
  """Raise ConfigError (one line, naming the key) for anything invalid."""
  # Imported here: the registries live with the code they name.
  from ffn_research import models, tasks, train
  from ffn_research.models import activations, ffn

  known = _flat_keys(default_config())
  given = _flat_keys(config)
  for key in given:
    if key not in known:
      section = key.rsplit('.', 1)[0] + '.' if '.' in key else ''
      options = sorted(k for k in known if k.startswith(section))
      raise ConfigError(f'unknown config key {key!r}; keys in this section: {", ".join(options)}')
  for key, default in known.items():
    _check(key in given, f'config key {key!r} is missing (start configs from config.default_config())')
    value = given[key]
    if isinstance(default, bool):
      _check(isinstance(value, bool), f'{key}={value!r} must be True or False')

  m, t, tr = config.model, config.task, config.train
  _one_of('model.arch', m.arch, models.ARCHS)
  _positive_int('model.d_model', m.d_model)
  _positive_int('model.d_ff', m.d_ff)
  _one_of('model.activation', m.activation, activations.ALL_NAMES)
  _one_of('model.init', m.init, ffn.INITS)
  _one_of('model.dtype', m.dtype, ffn.DTYPES)
  _check(isinstance(m.dropout_rate, (int, float)) and 0.0 <= m.dropout_rate < 1.0,
         f'model.dropout_rate={m.dropout_rate!r} must be in [0, 1)')
  if m.arch in models.SEQUENCE_ARCHS:
    _validate_sequence_model(m)

  _validate_moe(m)

  _one_of('task.name', t.name, tasks.TASKS)
  tasks.TASKS[t.name].validate(config)
  sequence_archs = ', '.join(models.SEQUENCE_ARCHS)
  if t.name in tasks.SEQUENCE_TASKS:
    _check(m.arch in models.SEQUENCE_ARCHS,
           f'model.arch={m.arch!r} cannot read tokens; task.name={t.name!r} needs one of: {sequence_archs}')
  else:
    _check(m.arch not in models.SEQUENCE_ARCHS,
           f'model.arch={m.arch!r} needs a sequence task; allowed: {", ".join(tasks.SEQUENCE_TASKS)}')

  _positive_int('train.steps', tr.steps)
  _positive_int('train.batch_size', tr.batch_size)
  _positive_float('train.learning_rate', tr.learning_rate)
  _one_of('train.optimizer', tr.optimizer, train.OPTIMIZERS)
  _one_of('train.schedule', tr.schedule, train.SCHEDULES)
  _check(isinstance(tr.warmup_steps, int) and tr.warmup_steps >= 0,
         f'train.warmup_steps={tr.warmup_steps!r} must be a non-negative integer')
  _positive_int('train.log_every', tr.log_every)
  _check(isinstance(tr.seed, int) and not isinstance(tr.seed, bool) and -2**31 <= tr.seed < 2**31,
         f'train.seed={tr.seed!r} must be an integer in [-2**31, 2**31) (the PRNG seed is int32)')
  _check(isinstance(tr.eval_every, int) and tr.eval_every >= 0,
         f'train.eval_every={tr.eval_every!r} must be an integer >= 0 (0: evaluate at the end only)')
  _check(isinstance(tr.blowup_factor, (int, float)) and not isinstance(tr.blowup_factor, bool)
         and (tr.blowup_factor == 0 or 1 <= tr.blowup_factor < math.inf),
         f'train.blowup_factor={tr.blowup_factor!r} must be 0 (rule off) or a number >= 1')
  _positive_int('train.blowup_patience', tr.blowup_patience)
  _check(isinstance(tr.weight_decay, (int, float)) and tr.weight_decay >= 0,
         f'train.weight_decay={tr.weight_decay!r} must be >= 0')
  _check(isinstance(tr.momentum, (int, float)) and 0 <= tr.momentum < 1,
         f'train.momentum={tr.momentum!r} must be in [0, 1)')
  _check(isinstance(tr.grad_clip, (int, float)) and math.isfinite(tr.grad_clip),
         f'train.grad_clip={tr.grad_clip!r} must be a number (<= 0 disables clipping)')


def _non_negative(key: str, value: Any) -> None:
  _check(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
         and value >= 0, f'{key}={value!r} must be a non-negative number')


def _validate_moe(m: ml_collections.ConfigDict) -> None:
  from ffn_research.models import ffn, moe  # pylint: disable=g-import-not-at-top
  e = m.moe
  _check(isinstance(e.num_experts, int) and not isinstance(e.num_experts, bool)
         and e.num_experts >= 0, f'model.moe.num_experts={e.num_experts!r} must be an integer >= 0')
  _positive_int('model.moe.top_k', e.top_k)
  _check(isinstance(e.capacity_factor, (int, float)) and math.isfinite(e.capacity_factor),
         f'model.moe.capacity_factor={e.capacity_factor!r} must be a number (<= 0: dropless)')
  _one_of('model.moe.router', e.router, moe.ROUTERS)
  _one_of('model.moe.drop_priority', e.drop_priority, moe.DROP_PRIORITIES)
  _one_of('model.moe.dispatch', e.dispatch, ('auto', *moe.DISPATCH))
  _check(isinstance(e.num_shared_experts, int) and e.num_shared_experts >= 0,
         f'model.moe.num_shared_experts={e.num_shared_experts!r} must be an integer >= 0')
  _positive_int('model.moe.granularity', e.granularity)
  for key in ('load_balance_coef', 'z_loss_coef', 'bias_update_rate'):
    _non_negative(f'model.moe.{key}', e[key])
  _check(isinstance(e.jitter, (int, float)) and 0 <= e.jitter < 1,
         f'model.moe.jitter={e.jitter!r} must be in [0, 1)')
  if e.num_experts == 0:
    return
  _check(e.top_k <= e.num_experts,
         f'model.moe.top_k={e.top_k} must be <= model.moe.num_experts={e.num_experts}')
  d_ff = ffn.effective_d_ff(m.d_ff, m.activation, m.match_params)
  _check(d_ff % e.granularity == 0,
         f'model.moe.granularity={e.granularity} must divide the effective d_ff {d_ff}')
  if e.router == 'expert_choice':
    _check(e.capacity_factor > 0,
           'model.moe.capacity_factor must be > 0 with router=expert_choice (it sets tokens per expert)')
    _check(e.bias_update_rate == 0,
           'model.moe.bias_update_rate must be 0 with router=expert_choice (load is balanced by construction)')


def _validate_sequence_model(m: ml_collections.ConfigDict) -> None:
  from ffn_research.models import transformer  # pylint: disable=g-import-not-at-top
  _positive_int('model.num_layers', m.num_layers)
  _one_of('model.norm', m.norm, transformer.NORMS)
  _one_of('model.positions', m.positions, transformer.POSITIONS)
  if m.arch == 'transformer':
    _positive_int('model.num_heads', m.num_heads)
    _check(m.d_model % m.num_heads == 0,
           f'model.d_model={m.d_model} must be divisible by model.num_heads={m.num_heads}')
    _check(m.positions != 'rotary' or (m.d_model // m.num_heads) % 2 == 0,
           f'model.positions=rotary needs an even head size; d_model/num_heads={m.d_model // m.num_heads}')
  else:
    _check(m.positions != 'rotary', f'model.positions=rotary needs attention; model.arch={m.arch!r} has none')
    _check(m.use_ffn, f'model.use_ffn=False leaves model.arch={m.arch!r} with no blocks')


def unknown_override_error(argv: list[str], flag: str = 'config') -> str | None:
  """A one-line error for the first `--config.KEY=...` naming a key outside the schema.

  Checked before absl parses flags, whose own error for this is a traceback.
  """
  known = _flat_keys(default_config())
  sections = {k.rsplit('.', i)[0] for k in known for i in range(1, k.count('.') + 1)}
  prefix = f'--{flag}.'
  for arg in argv[1:]:
    if arg.startswith(prefix):
      key = arg[len(prefix):].split('=', 1)[0]
      if key not in known and key not in sections:
        section = key.rsplit('.', 1)[0] + '.' if '.' in key else ''
        options = sorted(k for k in known if k.startswith(section)) or sorted(known)
        return f'unknown config key {key!r}; keys in this section: {", ".join(options)}'
  return None
