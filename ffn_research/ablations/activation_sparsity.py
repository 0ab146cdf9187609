"""activation_sparsity: are a trained transformer's FFN activations sparse, and are larger models sparser?

Claim (Li et al. 2023, "The Lazy Neuron Phenomenon", ICLR 2023, arXiv 2210.06313;
docs/references.md#li-et-al-2023): after training few entries of the FFN hidden activation (after
ReLU) are non-zero per input, on average 3.0% for T5-Base and 6.3% for ViT-B/16 (the abstract); the
sparsity emerges in training (at initialisation a unit is on for about half the inputs); larger
transformers are sparser.

Setup: the `language` task (an order-2 sparse Markov chain with an exact entropy floor) on a 2-layer
pre-norm transformer (2 heads) with bias-free FFNs as in T5 (a pre-activation is symmetric about 0 at
initialisation); Adam, warmup budget / 20, cosine decay, a checkpoint and an evaluation at half and at
the end of every budget (`budget`). ReLU over d_ff (`d_ffs`, reference d_model) and over d_model
(`d_models`, d_ff = 4 d_model), each shape's rate tuned by the regime on the mean held-out bits. GELU
and SiLU at the reference shape are descriptive and not tuned (`tuned=False`): the claim is about ReLU,
so they get no verdict and one rate, DESCRIPTIVE_LR (the starting grid's middle), to save CPU, and are
compared with ReLU at the same shape, rate and budget. Seeds are paired and vmapped.

Measurement (`collect`): the FFN hidden activations of each layer (`probe.ffn_hidden`) on every
held-out position, at initialisation, half and end; density = the fraction of entries with |a| > tau:
tau = 0 for ReLU (Li et al.'s measure), TAU = 0.1 for GELU/SiLU (never exactly 0; 0.1 counts GELU's
positive branch from z > 0.17 and leaves most of its negative branch, |GELU| <= 0.17, below). Also: the
fraction of positive pre-activations, ReLU at TAU, and dead units (never on over the probe set).

Verdicts (`rules`, fixed before the runs), on the per-seed density (mean over the layers) at the end of
the runs at each shape's chosen rate, each with its kind (how the runner judges its budget ladder T/4, T/2, T):
  1. sparse: at the reference shape the t CI of the mean density (intersected with [0, 1]: a fraction, bounds
     (0, 1)) lies below LEVEL = 10% (above ViT-B/16's 6.3%; our models are ~10^4 times smaller, "a few
     percent" is read generously). Kind: magnitude (a level with a margin, read where the density has settled).
  2. wider FFNs are sparser: per seed, the least-squares slope of log density on log d_ff; the t CI of
     the mean slope lies below -SLOPE_MARGIN = -0.03 (at least 2% less density per doubling). Kind: sign (the
     direction at one budget for every width; the margin is the smallest effect counted).
  3. larger models are sparser: the same on log d_model (d_ff = 4 d_model, d_model over 4x). Kind: sign.
  Both slopes are read with every size of the axis at one shared rate (`base.Claim(rate='common')`: the rate with
  the best mean held-out bits over the sizes, each budget), so that which rate wins a tie at one size cannot set
  the slope; the runner reads the shared rates tied with it too (issue 47; was: each size at its own rate).
  The positive control of verdict 1: the sparsest ReLU shape reaches the level (its CI below 10%).
Premises (positive controls, role stats.PREMISE, computed at every shape a verdict reads, from the same runs):
the density at initialisation has its CI inside [0.4, 0.6] (the sparsity can only come from training); and
learned: the held-out bits lie more than 1 bit below the unigram entropy (the model uses the context; remedy:
double the steps). The runner adds every seed completed, one budget for the shapes compared, the rate inside its
grid, stability on the ladder by kind, no learning-rate tie deciding it (the d_model slope is -0.53 or -0.04
depending on which of two rates with equal held-out bits wins at d_model 64), no single seed deciding it, and
Holm over the three.
"""

from collections.abc import Mapping, Sequence
import dataclasses
import math
from typing import TypedDict

import ml_collections
import numpy as np
import pandas as pd

from ffn_research import probe
from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import regime as regime_lib
from ffn_research.ablations.changes.activation_sparsity import CHANGES
from ffn_research.config import default_config

LEVEL = 0.10  # rule 1: trained ReLU density below 10% (ViT-B/16: 6.3%, T5-Base: 3.0%)
PAPER_T5, PAPER_VIT = 0.030, 0.063  # Li et al. 2023, abstract: mean fraction of non-zero entries
SLOPE_MARGIN = 0.03  # rules 2, 3: "sparser" is a log-log slope below -0.03
TAU = 0.1  # GELU/SiLU: |a| > TAU counts as on
INIT_LO, INIT_HI = 0.4, 0.6  # init premise: density at initialisation near 1/2
RANGE_MARGIN = 1.0  # learned: held-out bits at least this far below the unigram entropy (1 bit, as every study)
DESCRIPTIVE_LR = 1e-2  # GELU/SiLU (descriptive, not tuned)
RATES = (3e-3, 1e-2, 3e-2)
FULL_RATES = (*RATES, 1e-1)  # 0.03 was the top chosen at every d_model-32 shape of the earlier full runs (issue 30)
NUM_LAYERS, NUM_HEADS, NUM_LOGS = 2, 2, 20
# Each d_ff compiles its own program: padded to 512 with d_ff 32 and 128 (the sweep's default bound, 4),
# the d_model-32 group cost 90.3 run-s per 24 runs of 1,000 steps against 74.2 unpadded (-18%; 2-core AMD
# EPYC: CHANGELOG.md): at these budgets step FLOPs, not compiling, set the cost.
PAD_FLOPS_FACTOR = 1.0
SEED, STEPS, LR = regime_lib.SEED, regime_lib.STEPS, regime_lib.LR
PHASES = {'_init': 'init', '_half': 'half', '': 'end'}  # collect's column suffix -> point of training

LANGUAGE = dict(
  vocab_size=16, markov_order=2, num_candidates=8, branching=4, concentration=0.5, seq_len=32, num_eval=256
)


class Settings(TypedDict):
  batch: int
  ref: tuple[int, int]  # (d_model, d_ff)
  d_ffs: tuple[int, ...]
  d_models: tuple[int, ...]
  language: dict[str, float]  # task keys


SETTINGS: dict[str, Settings] = {  # per scale: batch, the reference (d_model, d_ff), the two size axes, the language
  'smoke': dict(
    batch=8,
    ref=(16, 32),
    d_ffs=(16, 32),
    d_models=(16,),
    language=dict(LANGUAGE, vocab_size=8, num_candidates=4, branching=2, seq_len=8, num_eval=32),
  ),
  'quick': dict(batch=16, ref=(32, 128), d_ffs=(32, 128, 512), d_models=(32, 64), language=LANGUAGE),
  'full': dict(batch=16, ref=(32, 128), d_ffs=(32, 128, 512), d_models=(32, 64, 128), language=LANGUAGE),
}
REGIMES = {
  'smoke': base.Regime(rates=RATES, steps=40, seeds=3, cap=150, metric='eval_bits'),
  'quick': base.Regime(rates=RATES, steps=600, seeds=3, cap=450, metric='eval_bits'),
  # 4 doublings, as expansion_ratio and universal_approximation: the cap, not a doubling count, ends the loop
  # (after 2 the d_model slope was still moving, -0.071 -> -0.532 from T = 2,000 to 4,000, and its report
  # could not say what a larger cap would run).
  # cap 3,600 -> 7,200 reference-seconds with d_model 128 (issue 47's 4x range), set before its first run
  'full': base.Regime(rates=FULL_RATES, steps=1000, seeds=8, cap=7200, metric='eval_bits', max_doublings=4),
}


# --------------------------------------------------------------------------- measurements (pure)


def density(acts: np.ndarray, tau: float = 0.0) -> float:
  """Fraction of the entries of `acts` with |a| > tau (tau = 0: the non-zero fraction)."""
  return float(np.mean(np.abs(np.asarray(acts)) > tau))


def dead_fraction(acts_NxF: np.ndarray, tau: float = 0.0) -> float:
  """Fraction of units (columns) with |a| <= tau on every one of the N inputs."""
  return float(np.mean(np.all(np.abs(np.asarray(acts_NxF)) <= tau, axis=0)))


def layer_densities(acts_NxF: np.ndarray, pre_NxF: np.ndarray, activation: str) -> dict[str, float]:
  """One layer's figures: density (tau 0 for ReLU, TAU otherwise), density at TAU, the fraction of
  positive pre-activations, and the dead-unit fraction at the same tau as density."""
  tau = 0.0 if activation == 'relu' else TAU
  return {
    'density': density(acts_NxF, tau),
    'density_tau': density(acts_NxF, TAU),
    'positive': float(np.mean(np.asarray(pre_NxF) > 0)),
    'dead': dead_fraction(acts_NxF, tau),
  }


def per_seed_slopes(frame: pd.DataFrame, x: str, y: str = 'density') -> pd.Series:
  """Per seed: least-squares slope of log y on log x (seeds with < 2 distinct x are left out)."""
  out = {}
  for s, g in frame.groupby(SEED, sort=True):
    if g[x].nunique() >= 2:
      out[s] = float(np.polyfit(np.log(g[x].to_numpy(float)), np.log(g[y].to_numpy(float)), 1)[0])
  return pd.Series(out, dtype=float)


# --------------------------------------------------------------------------- arms


def budget(steps: int) -> dict:
  """A budget's own schedule: warmup steps / 20, NUM_LOGS logs, a checkpoint and an evaluation at half and end."""
  return {
    STEPS: steps,
    'train.log_every': max(1, steps // NUM_LOGS),
    'train.warmup_steps': max(1, steps // 20),
    'train.checkpoint_every': steps // 2,
    'train.eval_every': steps // 2,
  }


def language_config(scale: str, activation: str = 'relu') -> ml_collections.ConfigDict:
  s = SETTINGS[scale]
  c = default_config()
  m, t, tr = c.model, c.task, c.train
  m.arch, m.num_layers, m.num_heads, m.activation, m.use_bias = 'transformer', NUM_LAYERS, NUM_HEADS, activation, False
  m.d_model, m.d_ff = s['ref']
  t.name = 'language'
  for k, v in s['language'].items():
    t[k] = v
  tr.batch_size, tr.learning_rate = s['batch'], DESCRIPTIVE_LR
  return c


def shape(d: int, f: int) -> str:
  return f'd_model {d}, d_ff {f}'


def relu_points(scale: str) -> dict[str, tuple[int, int]]:
  """ReLU point label ('relu: d_model D, d_ff F') -> (D, F): the d_ff axis, the d_model axis, the reference."""
  s = SETTINGS[scale]
  shapes = [(s['ref'][0], f) for f in s['d_ffs']] + [(d, 4 * d) for d in s['d_models']] + [s['ref']]
  return {f'relu: {shape(d, f)}': (d, f) for d, f in dict.fromkeys(shapes)}


def axis_points(scale: str) -> dict[str, list[str]]:
  """The labels of each size axis: 'd_ff' at the reference d_model, 'd_model' at d_ff = 4 d_model."""
  s = SETTINGS[scale]
  return {
    'd_ff': [f'relu: {shape(s["ref"][0], f)}' for f in s['d_ffs']],
    'd_model': [f'relu: {shape(d, 4 * d)}' for d in s['d_models']],
  }


def arms(scale: str) -> list[base.Arm]:
  relu = base.Arm(
    'relu',
    language_config(scale),
    budget=budget,
    pad_flops_factor=PAD_FLOPS_FACTOR,
    points={
      p.removeprefix('relu: '): {'model.d_model': d, 'model.d_ff': f} for p, (d, f) in relu_points(scale).items()
    },
  )
  return [relu] + [
    base.Arm(a, language_config(scale, a), {'': {}}, tuned=False, budget=budget) for a in ('gelu', 'silu')
  ]


# --------------------------------------------------------------------------- reading a run


def model_rows(model, tokens_NxT, activation: str) -> list[dict]:
  """Per layer: layer_densities of the model's FFN hidden activations on the tokens."""
  rows = []
  for layer in range(len(model.blocks)):
    acts = probe.ffn_hidden(model, tokens_NxT, layer)
    pre = probe.ffn_input(model, tokens_NxT, layer) @ np.asarray(model.blocks[layer].ffn.w1[...])
    f = acts.shape[-1]
    rows.append({'layer': layer, **layer_densities(acts.reshape(-1, f), pre.reshape(-1, f), activation)})
  return rows


def collect(run_dir: str, row: Mapping) -> dict[str, float]:
  """A run's figures (mean over layers; density per layer too) at initialisation, half and end (PHASES)."""
  del row
  config, models, data = base.models_over_training(run_dir)
  steps = sorted(models)
  out = {}
  for step, model in models.items():
    suffix = '_init' if step == steps[0] else '' if step == steps[-1] else '_half'
    rows = model_rows(model, data['eval']['inputs'], config.model.activation)
    out.update(
      {k + suffix: float(np.mean([r[k] for r in rows])) for k in ('density', 'density_tau', 'positive', 'dead')}
    )
    out.update({f'density_l{r["layer"]}{suffix}': r['density'] for r in rows})
  return out


# --------------------------------------------------------------------------- rules


FRACTION = (0.0, 1.0)  # a density is a fraction: its t intervals intersected with [0, 1] (stats.mean_ci bounds)
INIT_PREMISE = (
  f'premise: density at initialisation inside [{INIT_LO:g}, {INIT_HI:g}] (the sparsity comes from training)'
)
LEARNED_PREMISE = f'premise: learned: held-out bits more than {RANGE_MARGIN:g} below the unigram entropy'
CAN_BE_SPARSE = f'premise: the setup can produce a ReLU density below {LEVEL:.0%} (positive control)'
# What a failed control needs next, with its cost on the 2-core development machine (the ReLU arm's runs at T:
# ~2,000 of its 3,530 run-seconds; its densities still fall with T: 0.40, 0.36, 0.25 at T/4, T/2, T at d_ff 512).
SPARSE_NEXT_STEP = (
  'T = 2,000 and 4,000 for the ReLU shapes the verdicts read, at the chosen rate and its two neighbours, fixed '
  'before the run (~9,000 run-seconds), or a setting known to sparsify (longer training is the cited one)'
)


def can_be_sparse(relu: pd.DataFrame) -> stats.Check:
  """Positive control of verdict 1: the sparsest ReLU shape the study trains (at its chosen rate, end of the budget)
  has its density's 95% CI below LEVEL; a setup in which no shape gets there cannot refute "sparse"."""
  by_point = {p: stats.mean_ci(g['density'], bounds=FRACTION) for p, g in relu.groupby('point', sort=True)}
  if not by_point:
    return stats.as_premise(stats.Check(CAN_BE_SPARSE, False, 'no ReLU shape at this budget'))
  p, (m, lo, hi) = min(by_point.items(), key=lambda kv: kv[1][0])
  check = stats.premise_check(CAN_BE_SPARSE, m, (lo, hi), -math.inf, LEVEL, what=f'density of the sparsest shape ({p})')
  return check if check.passed else dataclasses.replace(check, detail=f'{check.detail}; next step: {SPARSE_NEXT_STEP}')


def shape_checks(sel: pd.DataFrame, points: Sequence[str], scale: str) -> list[stats.Check]:
  """The two premises (role PREMISE) at the shapes `points`: density at initialisation near 1/2, and learned (the
  runner checks every seed and one budget)."""
  rows = {p: sel[sel['point'] == p] for p in points}
  premise = [
    stats.premise_check(p, m, (lo, hi), INIT_LO, INIT_HI, what='density at initialisation')
    for p, (m, lo, hi) in ((p, stats.mean_ci(g['density_init'], bounds=FRACTION)) for p, g in rows.items())
  ]
  learned = [
    stats.range_check(p, g['eval_bits'], ceiling=float(g['unigram_bits'].mean()), margin=RANGE_MARGIN)
    for p, g in rows.items()
  ]
  stuck = tuple(p for p, c in zip(points, learned, strict=True) if not c.passed)
  return [
    stats.as_premise(stats.all_of(INIT_PREMISE, premise)),
    dataclasses.replace(
      stats.as_premise(stats.all_of(LEARNED_PREMISE, learned)),
      remedy=stats.DOUBLE_STEPS if stuck else '',
      points=stuck,
    ),
  ]


def rules(sel: pd.DataFrame, scale: str) -> list[stats.Verdict]:
  """The three verdicts of the module docstring on one budget's runs at the chosen rates."""
  d_ref, f_ref = SETTINGS[scale]['ref']
  ref = f'relu: {shape(d_ref, f_ref)}'
  relu = sel[sel['arm'] == 'relu']
  v = rules_lib.threshold(
    relu.loc[relu['point'] == ref, 'density'],
    level=LEVEL,
    direction='below',
    bounds=FRACTION,
    claim=f'a trained ReLU FFN is sparse: fraction of non-zero hidden activations on held-out sequences '
    f'(mean over layers) below {LEVEL:.0%} at {shape(d_ref, f_ref)}, learning rate tuned '
    f'(Li et al.: {PAPER_T5:.1%} T5-Base, {PAPER_VIT:.1%} ViT-B/16)',
  )
  out = [stats.gate(dataclasses.replace(v, points=(ref,)), [*shape_checks(sel, [ref], scale), can_be_sparse(relu)])]
  what = {
    'd_ff': f'wider FFNs are sparser: d_ff over {list(SETTINGS[scale]["d_ffs"])} at d_model {d_ref}',
    'd_model': f'larger models are sparser: d_model over {list(SETTINGS[scale]["d_models"])} at d_ff = 4 d_model',
  }
  for x, points in axis_points(scale).items():
    slopes = per_seed_slopes(relu[relu['point'].isin(points)], f'model.{x}')
    v = rules_lib.threshold(
      slopes.to_numpy(),
      level=-SLOPE_MARGIN,
      direction='below',
      claim=f'{what[x]}: the per-seed slope of log density on log {x} (every size at one shared rate) is '
      f'below {-SLOPE_MARGIN:g}',
    )
    v = dataclasses.replace(
      v, points=tuple(points), test=f'least-squares slope of log density on log {x} per seed (numpy.polyfit); {v.test}'
    )
    out.append(stats.gate(v, shape_checks(sel, points, scale)))
  return out


# --------------------------------------------------------------------------- presentation


_TOY = (
  'a 2-layer pre-norm transformer (2 heads, bias-free FFNs as in T5) on an order-2 sparse Markov language (V 16, '
  'sequences of 32), ~10^4x smaller than T5-Base or ViT-B/16 and trained on neither text nor images; density = '
  'the fraction of non-zero ReLU outputs over both layers on 256 held-out sequences; 8 seeds at full, at the budget '
  'the regime reaches (T in the budget ladder below)'
)
PREMISE = (
  'the sparsity can only come from training, and training happened: at every shape the verdict reads, the density '
  f'at initialisation has its 95% CI inside [{INIT_LO:g}, {INIT_HI:g}], and the mean held-out bits lie more than '
  f'{RANGE_MARGIN:g} below the unigram entropy (the model uses the context)'
)
CLAIMS = (
  base.Claim(
    kind=stats.MAGNITUDE,
    scope=f'{_TOY}; at d_model 32, d_ff 128 only, at its own rate tuned on held-out bits; the 10% level is read '
    "generously above ViT-B/16's 6.3%. Li et "
    'al. find larger models sparser, so a model ~10^4x smaller ending denser is what their trend predicts: the '
    'verdict can refute only where this setup shows it can reach the level (its positive control).',
    premise=f'{PREMISE}; and the positive control: the setup can produce a ReLU density below {LEVEL:.0%} (the '
    'sparsest ReLU shape it trains, at its chosen rate, has its 95% CI below the level)',
  ),
  base.Claim(
    kind=stats.SIGN,
    scope=f'{_TOY}; d_ff 32, 128, 512 at d_model 32 (a 16x range of the FFN width alone, attention and depth '
    'fixed), where Li et al. compare whole models across families and sizes and state no trend in d_ff alone; every '
    'width at one shared rate per '
    'budget (the best mean held-out bits over the widths; shared rates tied with it read too), so the slope is '
    'not set by which rate won at each width; the shared rate is one Adam step size for every width (standard '
    'parametrisation). Points end near the entropy floor, where held-out bits barely separate rates.',
    premise=PREMISE,
    rate=regime_lib.COMMON,
  ),
  base.Claim(
    kind=stats.SIGN,
    scope=f'{_TOY}; d_model 32, 64, 128 with d_ff = 4 d_model (a 4x range, depth fixed at 2), every size at one '
    'shared rate per budget (the best mean held-out bits over the sizes; shared rates tied with it read too): the '
    'density moves with the rate as much as with the size, so per-size tuning let a tie set the slope; in the '
    'standard parametrisation one Adam rate is still a larger step for a wider model, so the slope is of size and '
    'step together; the notes give the slope with each size at its own tuned rate, and where its sign differs the '
    'verdict holds for models trained at one step size only (muP, which the codebase has, would separate the two).',
    premise=PREMISE,
    rate=regime_lib.COMMON,
  ),
)


ABLATION = base.Study(
  name='activation_sparsity',
  claim=(
    'After training, few FFN hidden activations (after ReLU) are non-zero (3.0% for T5-Base, 6.3% for '
    'ViT-B/16), the sparsity emerges during training (about 50% at initialisation), and larger models '
    'are sparser (Li et al. 2023).'
  ),
  citation=(
    'Li et al. 2023, The Lazy Neuron Phenomenon: On Emergence of Activation Sparsity in Transformers, '
    'ICLR 2023, arXiv 2210.06313 (docs/references.md#li-et-al-2023)'
  ),
  published=f'mean fraction of non-zero FFN activations {PAPER_T5:.1%} (T5-Base), {PAPER_VIT:.1%} (ViT-B/16); '
  'falling with model size',
  regimes=REGIMES,
  arms=arms,
  rules=rules,
  collect=collect,
  setup=(
    'The `language` task (order-2 sparse Markov chain, V 16, 8 candidates, 4 next tokens, Dirichlet 0.5; '
    'sequences of 32) on a 2-layer pre-norm transformer (2 heads, bias-free FFN as in T5, learned positions); '
    'Adam, warmup, cosine decay, batch 16. ReLU over d_ff at d_model 32 and over d_model at d_ff = 4 d_model, '
    'the learning rate tuned per shape by the regime policy (verdict 1 reads the reference shape at its own rate; '
    'verdicts 2 and 3 read every size of their axis at one shared rate, checked against each size at its own); '
    'GELU and SiLU at d_model 32, d_ff 128 at rate '
    '1e-2 (descriptive). Density per layer on the held-out sequences at initialisation, half and end.'
  ),
  claims=CLAIMS,
  changes=CHANGES,
)
