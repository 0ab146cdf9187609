"""moe_memorization_vs_reasoning: at fixed active width, do more experts help memorization but not reasoning?

Claim (Jelassi et al. 2024, "Mixture of Parrots"; docs/references.md#jelassi-et-al-2024): at fixed
active parameters, adding experts keeps improving memorization (memorization tracks total
parameters) while reasoning saturates (reasoning tracks active parameters).

Setup. Per task, arms at one active width w (the expert weights a token uses): dense FFNs of width w
(dense-active), E w (dense-total, about the MoE's total) and, for memorization, one in between (the
premise's slope needs 3 sizes); MoE top-1 of E experts of width w, `softmax_topk` *not* renormalised (at
k = 1 a renormalised weight is exactly 1 and the router gets no task gradient); MoE top-2 of 2E experts
of width w / 2, renormalised (Mixtral/GShard): the same active width and total expert width. One E per
scale (16 at quick and full); dropless, Switch loss 1e-2, z-loss 1e-3.
  * memorization: N random facts (subject, relation) -> object, `ffn_stack` with trainable tied
    embeddings, d_model 16, every parameter counted; the facts exceed 2x dense-total's capacity at 2
    bits/param. Score: bits stored.
  * reasoning: `multi_hop` (2 hops in a random graph; 80% of the compositions trained, 10% held out
    as validation, 10% held out as test), a small transformer whose FFNs are the MoE. Score: test
    composition accuracy. It trains twice memorization's steps (Arm.steps_factor 2; history.md says why).
The runner tunes the rate per point on the mean over seeds of `tuning_loss`: memorization, the loss on
the facts (what is stored); reasoning, the error on the validation compositions (held out, so the rate
is chosen for composing, as the score asks, and the test compositions choose nothing).

Statistic: the share of the dense-active -> dense-total gap the MoE closes, a ratio of means over seeds
(a seed fixes the facts / graph and pairs the arms), G = mean(MoE - active) / mean(total - active), BCa
bootstrap CI (rules_lib.ratio_of_means). p = 1 - the largest confidence at which the CI still decides.

Verdict rules (fixed before the run), per router (top-1, top-2), in this order: overall top-1, overall top-2,
then memorization and reasoning of top-1, then of top-2. Every verdict is a magnitude claim (stats.MAGNITUDE:
a share G against a margin; the runner asks that G settle on the ladder T/4, T/2, T, its last change under half
its distance to the boundary):
  1. overall [headline]: G(memorization) - G(reasoning), bootstrap CI above MUCH = 0.25 (a quarter of the
     gap): reproduced; below: not reproduced; else inconclusive.
  2. memorization: G's CI above HALF = 0.5 (the experts recover most of what dense-total adds):
     reproduced; below: not reproduced.
  3. reasoning saturates: G's CI below 0.5: reproduced; above: not reproduced.
Premises (positive controls, role stats.PREMISE; a failed one: `invalid`; the overall verdict rests on both
tasks'):
  * memorization: dense bits grow in proportion to parameters (per-seed log-log slope, CI lower end
    >= 0.8), and dense-total stores > 10% more than dense-active (a gap to close);
  * reasoning: dense-active fits the trained compositions (CI lower end >= 0.9; remedy: double the
    steps of every reasoning point), and dense-total beats dense-active by > 0.1 held-out accuracy (width
    helps composition here: a gap whose share can be asked).
Gates: facts >= 2x dense-total's capacity; dense-total and the MoE store < 90% of the entropy. The runner
adds every seed completed, one budget for the points compared (the reasoning arms at their 2 T), the rate
inside the grid, the budget ladder, rate ties and leave-one-seed-out.
"""

import dataclasses
import math
from typing import TypedDict

import ml_collections
import numpy as np
import pandas as pd
from scipy import stats as sp_stats

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import regime as regime_lib
from ffn_research.ablations.changes.moe_memorization_vs_reasoning import CHANGES
from ffn_research.config import default_config


class Settings(TypedDict):
  experts: int
  dense: dict[str, tuple[int, ...]]  # task -> dense widths / active width
  mem_facts: int
  mem_batch: int


# Per scale: the expert count E of top-1 (top-2 uses 2E experts of half the width); dense widths as multiples
# of the active width (the last is dense-total = E w); the facts and batch of memorization.
SETTINGS: dict[str, Settings] = {
  'smoke': dict(experts=2, dense={'memorization': (1, 2), 'multi_hop': (1, 2)}, mem_facts=384, mem_batch=256),
  'quick': dict(experts=16, dense={'memorization': (1, 4, 16), 'multi_hop': (1, 16)}, mem_facts=6144, mem_batch=1024),
  'full': dict(experts=16, dense={'memorization': (1, 4, 16), 'multi_hop': (1, 16)}, mem_facts=6144, mem_batch=1024),
}
REGIMES = {  # T = memorization's steps (reasoning trains 2T); rates: the memorization MoEs' starting grid
  'smoke': base.Regime(rates=(0.01, 0.03, 0.1), steps=20, seeds=3, cap=100.0, metric='tuning_loss'),
  'quick': base.Regime(rates=(0.01, 0.03, 0.1), steps=300, seeds=3, cap=300.0, metric='tuning_loss'),
  'full': base.Regime(rates=(0.01, 0.03, 0.1), steps=1000, seeds=10, cap=6000.0, metric='tuning_loss'),
}
RATES = {'memorization_dense': (0.03, 0.1, 0.3), 'multi_hop': (3e-3, 1e-2, 3e-2)}  # starting grids (else the regime's)
ROUTERS = {  # arm -> (top_k, renormalize, expert-count multiplier, expert-width divisor)
  'top1': (1, False, 1, 1),  # Switch-style: the router learns at k = 1
  'top2': (2, True, 2, 2),  # renormalised top-2 of 2E experts of width w / 2
}
TASKS = ('memorization', 'multi_hop')
MEM_D_MODEL, MEM_WIDTH = 16, 8  # memorization: residual width, active width w
MEM_VALUES, MEM_RELATIONS = 64, 48  # objects (6 bits per fact), relations per subject
HOP_D_MODEL, HOP_HEADS, HOP_LAYERS, HOP_WIDTH = 32, 2, 2, 32  # multi_hop transformer; active width w
HOP_NODES, HOP_RELATIONS, HOP_TRAIN = 32, 4, 0.8  # graph: nodes, relations, trained share of compositions
HOP_VALIDATION = 0.1  # validation share of the compositions (held out; chooses the rate); the rest: test
# AdamW. Weight decay 0.3, not configs/multi_hop.py's 1.0: at 1.0 dense-active lost its fit at 3e-3 (trained
# compositions 0.587 at 2,000 steps); at 0.3 it fits them at 1e-3 ... 3e-2 (a check: history.md).
HOP_BATCH, HOP_WEIGHT_DECAY = 128, 0.3
HALF, MUCH = 0.5, 0.25  # rules 2-3 (G vs 0.5) and 1 (difference above 0.25)
PREMISE_SLOPE = 0.8  # memorization premise: dense per-seed log-log slope CI lower end
FIT_LEVEL = 0.9  # reasoning premise: trained-composition accuracy CI lower end
SATURATED = 0.9  # memorization: a point storing more than this share of the entropy is saturated
MEM_GAP, HOP_GAP = 0.1, 0.1  # dynamic range: dense-total - dense-active > 10% of bits / 0.1 accuracy
BITS_PER_PARAM = 2.0  # capacity (Allen-Zhu & Li 2024) for the facts >= 2x capacity check
RESAMPLES = 9999  # bootstrap resamples (as rules_lib.ratio_of_means)
SEED, STEPS = regime_lib.SEED, regime_lib.STEPS
SCORE = {'memorization': 'bits_stored', 'multi_hop': 'eval_accuracy'}
WIDTH = {'memorization': MEM_WIDTH, 'multi_hop': HOP_WIDTH}


# --------------------------------------------------------------------------- arms


def config(s: Settings, task: str, arm: str) -> ml_collections.ConfigDict:
  """The base config of one arm ('dense' or a ROUTERS key) of `task`."""
  c = default_config()
  m, t, tr, e = c.model, c.task, c.train, c.model.moe
  if task == 'memorization':
    m.arch, m.num_layers, m.d_model, m.tie_embeddings = 'ffn_stack', 1, MEM_D_MODEL, True
    t.name, t.num_facts, t.num_relations, t.num_objects = 'memorization', s['mem_facts'], MEM_RELATIONS, MEM_VALUES
    tr.batch_size = s['mem_batch']
  else:
    m.arch, m.num_layers, m.d_model, m.num_heads = 'transformer', HOP_LAYERS, HOP_D_MODEL, HOP_HEADS
    t.name, t.num_nodes, t.num_relations, t.num_hops = 'multi_hop', HOP_NODES, HOP_RELATIONS, 2
    t.train_fraction, tr.optimizer, tr.weight_decay, tr.batch_size = HOP_TRAIN, 'adamw', HOP_WEIGHT_DECAY, HOP_BATCH
    t.validation_fraction = HOP_VALIDATION
  e.capacity_factor, e.dispatch, e.num_experts, m.d_ff = 0.0, 'auto', 0, WIDTH[task]  # dropless; 'auto': sort off TPU
  if arm != 'dense':
    k, renorm, mult, div = ROUTERS[arm]
    e.num_experts, e.top_k, e.router, e.renormalize = mult * s['experts'], k, 'softmax_topk', renorm
    m.d_ff = WIDTH[task] // div
  return c


def arms(scale: str) -> list[base.Arm]:
  s, out = SETTINGS[scale], []
  for task in TASKS:
    hop = task == 'multi_hop'
    rates = lambda arm, hop=hop: RATES['multi_hop'] if hop else RATES['memorization_dense'] if arm == 'dense' else None
    dense = {f'd_ff={f * WIDTH[task]}': {'model.d_ff': f * WIDTH[task]} for f in s['dense'][task]}
    out += [
      base.Arm(
        f'{task}_{arm}',
        config(s, task, arm),
        dense if arm == 'dense' else {f'E={s["experts"]}': {}},
        rates=rates(arm),
        steps_factor=2 if hop else 1,
      )
      for arm in ('dense', *ROUTERS)
    ]
  return out


def labels(scale: str, task: str) -> dict[str, str]:
  """Point labels of a task: 'active', 'total', every dense width 'd_ff=...', and each router."""
  s, w = SETTINGS[scale], WIDTH[task]
  out = {f'd_ff={f * w}': f'{task}_dense: d_ff={f * w}' for f in s['dense'][task]}
  out.update(active=f'{task}_dense: d_ff={w}', total=f'{task}_dense: d_ff={s["experts"] * w}')
  out.update({r: f'{task}_{r}: E={s["experts"]}' for r in ROUTERS})
  return out


def task_points(scale: str, task: str, router: str) -> tuple[str, ...]:
  """The points one router's verdict on `task` reads: every dense width and the router's MoE."""
  lab = labels(scale, task)
  return tuple(v for k, v in lab.items() if k.startswith('d_ff=')) + (lab[router],)


def collect(run_dir: str, row) -> dict[str, float]:
  """The tuning metric (lower is better): memorization, the loss on the facts; multi_hop, the error on the
  validation compositions, 1 - accuracy (the score is an accuracy; these models' validation loss is
  dominated by confident misses, above ln 32 at rates whose accuracy differs twofold)."""
  del run_dir
  mem = str(row['arm']).startswith('memorization')
  return {'tuning_loss': float(row['eval_loss']) if mem else 1.0 - float(row['val_accuracy'])}


# --------------------------------------------------------------------------- statistics


def bootstrap_verdict(ci_at, *, lo: float, hi: float, claim: str, test: str, rule: str, n: int) -> stats.Verdict:
  """A verdict on a bootstrap CI: ci_at(confidence) -> (statistic, ci_lo, ci_hi), the region [lo, hi].
  Outcome from the 95% CI (stats.decide); p = 1 - the largest confidence whose CI still decides, found by
  bisection (the resamples are the same at every level), so p < 0.05 exactly when the 95% CI decides."""
  stat, c_lo, c_hi = ci_at(stats.CONFIDENCE)
  if not (math.isfinite(c_lo) and math.isfinite(c_hi)):
    return stats.underpowered(
      claim,
      test,
      rule,
      n,
      f'no bootstrap CI ({n} seeds)',
      statistic=stat,
      ci=(c_lo, c_hi),
      boundaries=[x for x in (lo, hi) if math.isfinite(x)],
    )
  outcome = stats.decide((c_lo, c_hi), lo, hi)
  first, floor = stats.decide(ci_at(1e-4)[1:], lo, hi), 1 / (RESAMPLES + 1)  # p below 1 / (R + 1): unresolved
  a, b = 1e-4, 1 - floor
  if first == stats.INCONCLUSIVE:
    p = 1.0
  elif stats.decide(ci_at(b)[1:], lo, hi) == first:
    p = floor
  else:
    for _ in range(20):
      mid = (a + b) / 2
      a, b = (mid, b) if stats.decide(ci_at(mid)[1:], lo, hi) == first else (a, mid)
    p = 1 - a
  why = f'p = {p:.3g}' + (" (at most; the bootstrap's resolution)" if p <= floor else '') + ' (bootstrap CI inversion)'
  return stats.Verdict(
    claim,
    outcome,
    stat,
    (c_lo, c_hi),
    test,
    rule,
    n,
    why,
    p_value=p,
    boundaries=tuple(x for x in (lo, hi) if math.isfinite(x)),
  )


def gap_difference(mem: pd.DataFrame, hop: pd.DataFrame, confidence: float) -> tuple[float, float, float]:
  """G(memorization) - G(reasoning) with a bootstrap CI, BCa from stats.BCA_MIN_SEEDS seeds and percentile below
  (BCa's acceleration is noise from a few seeds); seeds present in both tasks resampled together (the tasks' seeds
  are independent: pairing them by index only lets one resample draw both)."""
  both = mem.add_suffix('_m').join(hop.add_suffix('_h'), how='inner')
  if len(both) < 3:
    return math.nan, math.nan, math.nan
  data = tuple(both[c].to_numpy(float) for c in ('num_m', 'den_m', 'num_h', 'den_h'))
  f = lambda a, b, c, d, axis=-1: a.mean(axis) / b.mean(axis) - c.mean(axis) / d.mean(axis)
  d = float(f(*data))
  res = sp_stats.bootstrap(
    data,
    f,
    paired=True,
    vectorized=True,
    n_resamples=RESAMPLES,
    confidence_level=confidence,
    method='BCa' if len(both) >= stats.BCA_MIN_SEEDS else 'percentile',
    random_state=np.random.default_rng(0),
  )
  return d, float(res.confidence_interval.low), float(res.confidence_interval.high)


def gaps(sel: pd.DataFrame, scale: str, task: str, router: str) -> pd.DataFrame:
  """Per seed (index): active, total, moe scores, num = moe - active, den = total - active."""
  lab, col = labels(scale, task), SCORE[task]
  get = lambda p: sel[sel['point'] == p].set_index(SEED)[col]
  t = pd.concat({'active': get(lab['active']), 'total': get(lab['total']), 'moe': get(lab[router])}, axis=1).dropna()
  return t.assign(num=t['moe'] - t['active'], den=t['total'] - t['active']).sort_index()


def memorization_checks(sel: pd.DataFrame, scale: str, router: str) -> list[stats.Check]:
  s, lab = SETTINGS[scale], labels(scale, 'memorization')
  entropy = s['mem_facts'] * math.log2(MEM_VALUES)
  dense = sel[sel['arm'] == 'memorization_dense']
  premise = rules_lib.slope_per_seed(
    dense, x='num_params', y='bits_stored', seed=SEED, claimed=1.0, margin=math.inf, claim='dense bits vs params'
  )
  at = lambda p: sel[sel['point'] == lab[p]]
  x_total = float(at('total')['num_params'].max()) if len(at('total')) else math.nan
  t = gaps(sel, scale, 'memorization', router)
  return [
    stats.premise_check(
      'premise (memorization): dense bits grow at least in proportion to parameters',
      premise.statistic,
      premise.ci,
      PREMISE_SLOPE,
      what=f'per-seed log-log slope of bits on total parameters over '
      f'dense d_ff {sorted(dense["model.d_ff"].unique().tolist())} ({premise.n} seeds)',
    ),
    stats.Check(
      'memorization: facts >= 2x the dense-total capacity',
      bool(entropy >= 2 * BITS_PER_PARAM * x_total),
      f'{entropy:,.0f} bits of facts vs {BITS_PER_PARAM:g} bits/param x {x_total:,.0f} params',
    ),
    *[
      stats.range_check(
        f'memorization {p}: not saturated (share of the entropy)',
        at(p)['bits_stored'] / entropy,
        ceiling=1.0,
        margin=1 - SATURATED,
      )
      for p in ('total', router)
    ],
    stats.as_premise(
      stats.range_check(
        'premise (memorization): dense-total stores more than dense-active (gap / dense-total bits)',
        t['den'] / t['total'],
        floor=0.0,
        margin=MEM_GAP,
      )
    ),
  ]


def reasoning_checks(sel: pd.DataFrame, scale: str, router: str) -> list[stats.Check]:
  lab = labels(scale, 'multi_hop')
  fit = sel[sel['point'] == lab['active']]['accuracy']
  m, lo, hi = stats.mean_ci(fit)
  premise = stats.premise_check(
    'premise (reasoning): dense-active fits the trained compositions',
    m,
    (lo, hi),
    FIT_LEVEL,
    1.0,
    what=f'trained-composition accuracy ({len(fit)} seeds)',
  )
  every = tuple(v for k, v in lab.items() if k not in ('active', 'total'))  # both routers: budgets stay equal
  return [
    dataclasses.replace(premise, remedy=stats.DOUBLE_STEPS if not premise.passed else '', points=every),
    _reasoning_gap(gaps(sel, scale, 'multi_hop', router)['den']),
  ]


def _reasoning_gap(den: pd.Series) -> stats.Check:
  """Premise: width buys held-out accuracy on this task, in every reading of the seeds: the t CI's lower end of the
  per-seed gap (dense-total - dense-active) at least HOP_GAP (its history: changes/moe_memorization_vs_reasoning.py)."""
  m, lo, hi = stats.mean_ci(den)
  check = stats.premise_check(
    'premise (reasoning): dense-total beats dense-active on held-out compositions (accuracy gap)',
    m,
    (lo, hi),
    HOP_GAP,
    what=f'per-seed held-out accuracy gap ({len(den.dropna())} seeds)',
  )
  if check.passed:
    return check
  why = (
    '; below it the task cannot show whether an MoE closes the gap, and even above it this multi_hop stores the '
    "graph in the weights (not Jelassi et al.'s in-context reasoning): issue 46 redesigns it"
  )
  return dataclasses.replace(check, detail=check.detail + why)


def rules(sel: pd.DataFrame, scale: str) -> list[stats.Verdict]:
  """Per router: overall, then memorization and reasoning (module docstring), each naming its points."""
  s = SETTINGS[scale]
  overall, per_task = [], []
  test = (
    'ratio of means over seeds, 95% CI by rules_lib.ratio_of_means (BCa bootstrap from 10 seeds, seeds resampled '
    'together; below, t on the log scale)'
  )
  for r, (k, renorm, mult, div) in ROUTERS.items():
    what = f'top-{k} of {mult * s["experts"]} experts of width {{w}}{", renormalised" if renorm else ""}'
    mem, hop = gaps(sel, scale, 'memorization', r), gaps(sel, scale, 'multi_hop', r)
    c_mem, c_hop = memorization_checks(sel, scale, r), reasoning_checks(sel, scale, r)
    p_mem, p_hop = task_points(scale, 'memorization', r), task_points(scale, 'multi_hop', r)
    v_all = bootstrap_verdict(
      lambda c, mem=mem, hop=hop: gap_difference(mem, hop, c),
      lo=MUCH,
      hi=math.inf,
      n=min(len(mem), len(hop)),
      test='difference of two ratios of means, bootstrap 95% CI (scipy.stats.bootstrap, seeds together; BCa from '
      '10 seeds, percentile below)',
      rule=f'reproduced if the 95% CI of G(memorization) - G(reasoning) lies above {MUCH:g}; not reproduced if it '
      f'lies below; otherwise, or with < 3 seeds, inconclusive',
      claim=f'overall, {r}: memorization closes much more of its dense-active -> dense-total gap than reasoning '
      f'(difference of gap shares above {MUCH:g}; Jelassi et al. 2024)',
    )
    v_mem = bootstrap_verdict(
      lambda c, mem=mem: rules_lib.ratio_of_means(mem['num'], mem['den'], confidence=c),
      lo=HALF,
      hi=math.inf,
      n=len(mem),
      test=test,
      rule=f'reproduced if the 95% CI of G lies above {HALF:g}; not reproduced if below; else inconclusive',
      claim=f'memorization, {what.format(w=MEM_WIDTH // div)}: the MoE closes more than half of the gap in bits '
      'stored between dense-active and dense-total',
    )
    v_hop = bootstrap_verdict(
      lambda c, hop=hop: rules_lib.ratio_of_means(hop['num'], hop['den'], confidence=c),
      lo=-math.inf,
      hi=HALF,
      n=len(hop),
      test=test,
      rule=f'reproduced if the 95% CI of G lies below {HALF:g}; not reproduced if above; else inconclusive',
      claim=f'reasoning saturates, {what.format(w=HOP_WIDTH // div)}: the MoE closes less than half of the gap in '
      'held-out 2-hop accuracy between dense-active and dense-total',
    )
    overall.append(dataclasses.replace(stats.gate(v_all, c_mem + c_hop), points=p_mem + p_hop))
    per_task += [
      dataclasses.replace(stats.gate(v_mem, c_mem), points=p_mem),
      dataclasses.replace(stats.gate(v_hop, c_hop), points=p_hop),
    ]
  return overall + per_task


# --------------------------------------------------------------------------- presentation


def _task_scopes() -> tuple[str, str]:
  """What memorization and multi_hop test at full scale, in words: the opening of their claims' scopes."""
  s, full = SETTINGS['full'], REGIMES['full']
  mem = (
    f'memorization of {s["mem_facts"]:,} random facts ({s["mem_facts"] * math.log2(MEM_VALUES):,.0f} bits) in a '
    f'one-block ffn_stack, d_model {MEM_D_MODEL}, trainable tied embeddings shared by every arm (most of '
    f"dense-active's parameters), T from {full.steps:,} steps at full scale (the budget judged: the ladder line), "
    f"{full.seeds} seeds, rates tuned per point on the facts' loss"
  )
  hop = (
    f'multi_hop ({HOP_NODES} nodes, {HOP_RELATIONS} relations, 2 hops; {HOP_TRAIN:.0%} of the compositions trained, '
    f"{HOP_VALIDATION:.0%} validation chooses the rate, the rest scores), the graph's facts stored in the weights, "
    f"not given in context (a composition of stored facts, not Jelassi et al.'s in-context reasoning); "
    f'{HOP_LAYERS}-layer transformer, d_model {HOP_D_MODEL} in every arm (only d_ff widens), AdamW, twice the '
    f'memorization budget (the ladder line gives the T judged), {full.seeds} seeds; no arm controls for '
    'saturation (a dense arm widened in d_model), so G near 1 is what both readings of the claim predict'
  )
  return mem, hop


def _premises() -> tuple[str, str]:
  """The memorization and reasoning premises, in words."""
  mem = (
    f'memorization: dense bits grow at least in proportion to parameters (per-seed log-log slope, CI lower end >= '
    f'{PREMISE_SLOPE:g}) and dense-total stores more than dense-active by over {MEM_GAP:.0%} of its bits'
  )
  hop = (
    f'reasoning: dense-active fits its trained compositions (CI lower end >= {FIT_LEVEL:g}) and dense-total beats it '
    f"on held-out compositions by at least {HOP_GAP:g} accuracy (the per-seed gap's CI lower end)"
  )
  return mem, hop


def _claims() -> tuple[base.Claim, ...]:
  """One per verdict of `rules`, in its order (base.Claim): kind, scope (what is matched and what is not), premise."""
  e = SETTINGS['full']['experts']
  router = {
    r: f'top-{k} of {m * e} experts of width {{w}} ({"renormalised" if renorm else "not renormalised"})'
    for r, (k, renorm, m, _) in ROUTERS.items()
  }
  mem_w = {r: MEM_WIDTH // ROUTERS[r][3] for r in ROUTERS}  # expert width per router and task
  hop_w = {r: HOP_WIDTH // ROUTERS[r][3] for r in ROUTERS}
  mem, hop = _task_scopes()
  matched = (
    f'against dense d_ff = w (active) and {e} w (total): the expert width per token matched, total expert '
    "parameters about dense-total's, the router's counted as active; one E"
  )
  mem_premise, hop_premise = _premises()
  normalisation = 'top-1 is not renormalised and top-2 is, so the two routers differ in more than k'
  overall = [
    base.Claim(
      stats.MAGNITUDE,
      f'memorization and multi_hop as in the per-task verdicts, {router[r].format(w=f"{mem_w[r]} / {hop_w[r]}")} '
      f"{matched}; {normalisation}; the tasks' seeds are independent and resampled together by index.",
      f'{mem_premise}; {hop_premise}',
    )
    for r in ROUTERS
  ]
  per_task = [
    claim
    for r in ROUTERS
    for claim in (
      base.Claim(
        stats.MAGNITUDE,
        f'{mem}; {router[r].format(w=mem_w[r])} {matched}; {normalisation}.',
        mem_premise,
      ),
      base.Claim(
        stats.MAGNITUDE,
        f'{hop}; {router[r].format(w=hop_w[r])} in both layers {matched}; {normalisation}.',
        hop_premise,
      ),
    )
  ]
  return (*overall, *per_task)


ABLATION = base.Study(
  name='moe_memorization_vs_reasoning',
  claim=(
    'At fixed active parameters, adding experts keeps improving memorization (memorization tracks total '
    'parameters) while reasoning saturates (tracks active parameters) (Jelassi et al. 2024, Mixture of '
    'Parrots).'
  ),
  citation=(
    'Jelassi et al. 2024, "Mixture of Parrots: Experts improve memorization more than reasoning" '
    '(arXiv 2410.19034; docs/references.md#jelassi-et-al-2024)'
  ),
  published='qualitative: memorization tracks total parameters, reasoning tracks active parameters',
  setup=(
    'Arms at one active width w: dense d_ff = w x {1, 4, 16} (memorization) and w x {1, 16} (reasoning); MoE '
    'top-1 of E experts of width w (not renormalised); MoE top-2 of 2E experts of width w/2 (renormalised; its '
    'points are labelled E=16 after E); E = 16 at quick and full; dropless; the MoE arms also carry the Switch '
    'loss 1e-2 and z-loss 1e-3. '
    f'Memorization: ffn_stack, d_model {MEM_D_MODEL}, w = {MEM_WIDTH}, V = {MEM_VALUES}, Adam, T steps. '
    'Reasoning: '
    f'multi_hop ({HOP_NODES} nodes, {HOP_RELATIONS} relations, 2 hops, {HOP_TRAIN:.0%} trained), transformer '
    f'{HOP_LAYERS} layers, d_model {HOP_D_MODEL}, w = {HOP_WIDTH}, AdamW, 2T steps. Rates tuned per point.'
  ),
  regimes=REGIMES,
  arms=arms,
  rules=rules,
  collect=collect,
  claims=_claims(),
  changes=CHANGES,
)
