"""moe_memorization_vs_reasoning: at fixed active width, do more experts help memorization but not reasoning?

Claim (Jelassi et al. 2024, "Mixture of Parrots"; docs/references.md#jelassi-et-al-2024): at fixed
active parameters, adding experts keeps improving memorization (memorization tracks total
parameters) while reasoning saturates (reasoning tracks active parameters).

Setup. Per task, arms at one active width w (the expert weights a token uses): dense FFNs of width w
(dense-active), E w (dense-total, about the MoE's total) and, for memorization, one in between (the
premise's slope needs 3 sizes); MoE top-1 of E experts of width w; MoE top-2 of 2E experts of width w / 2:
the same active width and total expert width. Both routers are `softmax_topk` with one normalisation, *not*
renormalised (a softmax over all experts, the top-k weights used as they are; renormalised, a top-1 weight is
exactly 1 and its router gets no task gradient), so k and the expert width are the only differences (until
issue 46's redesign top-2 was renormalised, Mixtral/GShard style). One E per scale (16 at quick and full);
dropless, Switch loss 1e-2, z-loss 1e-3.
  * memorization: N random facts (subject, relation) -> object, `ffn_stack` with trainable tied
    embeddings, d_model 16, every parameter counted; the facts exceed 2x dense-total's capacity at 2
    bits/param. Score: bits stored.
  * reasoning: `shortest_path` (tasks/graphs.py) with the bare FFN (no attention, no embeddings): every example
    is a fresh random directed graph (SP_NODES nodes, SP_DEGREE distinct out-edges each) given whole in the
    FFN's input, its flattened adjacency with a one-hot source x and target y; the label is the shortest-path
    distance x -> y (1 ... SP_MAX_DISTANCE, or farther / unreachable: one class), the classes about equally
    often. The facts are in the input and never repeat, so nothing can be memorised: the answer is computed
    per example, and it needs width (distance 1 alone is a conjunction of x, y and one adjacency entry for
    each of n (n - 1) pairs). Score: accuracy on SP_EVAL held-out test graphs; the rate is tuned on as many
    other held-out validation graphs. It trains SP_STEPS_FACTOR x memorization's steps (Arm.steps_factor).
    Until issue 46 the reasoning task was `multi_hop` in a 2-layer transformer, a graph stored in the weights
    (composition of memorised facts); the first redesign (an in-context graph task for the transformer,
    branch mvr-redesign) needed 15,000-49,000 reference-seconds for its first pass and its width gap was
    unstable over seeds (changes/moe_memorization_vs_reasoning.py).
The runner tunes the rate per point on the mean over seeds of `tuning_loss`: memorization, the loss on
the facts (what is stored); reasoning, the error on the validation graphs (held out, so the rate is chosen
for reasoning, as the score asks, and the test graphs choose nothing).

Statistic: the share of the dense-active -> dense-total gap the MoE closes, a ratio of means over seeds
(a seed fixes the facts / the held-out graphs and pairs the arms), G = mean(MoE - active) / mean(total - active), BCa
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
  * reasoning, fixed in code before any MoE result was seen: dense-total learns the task (per seed, its
    held-out accuracy minus the test graphs' majority-class share; the 95% t CI's lower end >= SP_LEARNED;
    remedy: double the steps of every reasoning point, both routers', so the budgets stay equal), and
    dense-total beats dense-active by >= SP_GAP held-out accuracy (the per-seed gap's 95% t CI lower end):
    width buys this reasoning, the gap whose share G the MoE closes. Sizes chosen by dense-only pilots (the
    design change's row gives every pilot and its numbers).
Gates: facts >= 2x dense-total's capacity; dense-total and the MoE store < 90% of the entropy. The runner
adds every seed completed, one budget for the points compared (the reasoning arms at their own T), the rate
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
from ffn_research.tasks import graphs


class Settings(TypedDict):
  experts: int
  dense: dict[str, tuple[int, ...]]  # task -> dense widths / active width
  mem_facts: int
  mem_batch: int


# Per scale: the expert count E of top-1 (top-2 uses 2E experts of half the width); dense widths as multiples
# of the active width (the last is dense-total = E w); the facts and batch of memorization.
SETTINGS: dict[str, Settings] = {
  'smoke': dict(experts=2, dense={'memorization': (1, 2), 'shortest_path': (1, 2)}, mem_facts=384, mem_batch=256),
  'quick': dict(
    experts=16, dense={'memorization': (1, 4, 16), 'shortest_path': (1, 16)}, mem_facts=6144, mem_batch=1024
  ),
  'full': dict(
    experts=16, dense={'memorization': (1, 4, 16), 'shortest_path': (1, 16)}, mem_facts=6144, mem_batch=1024
  ),
}
REGIMES = {  # T = memorization's steps (reasoning trains SP_STEPS_FACTOR T); rates: the memorization MoEs' grid
  'smoke': base.Regime(rates=(0.01, 0.03, 0.1), steps=20, seeds=3, cap=100.0, metric='tuning_loss'),
  'quick': base.Regime(rates=(0.01, 0.03, 0.1), steps=300, seeds=3, cap=300.0, metric='tuning_loss'),
  'full': base.Regime(rates=(0.01, 0.03, 0.1), steps=1000, seeds=10, cap=5400.0, metric='tuning_loss'),
}
# Starting grids (else the regime's); shortest_path: the pilots' best rate 1e-2 in the middle (dense only).
RATES = {'memorization_dense': (0.03, 0.1, 0.3), 'shortest_path': (3e-3, 1e-2, 3e-2)}
ROUTERS = {  # arm -> (top_k, renormalize, expert-count multiplier, expert-width divisor)
  'top1': (1, False, 1, 1),  # softmax_topk, not renormalised: the router learns at k = 1 (Switch)
  'top2': (2, False, 2, 2),  # the same normalisation: top-2 of 2E experts of width w / 2, weights not renormalised
}
TASKS = ('memorization', 'shortest_path')
MEM_D_MODEL, MEM_WIDTH = 16, 8  # memorization: residual width, active width w
MEM_VALUES, MEM_RELATIONS = 64, 48  # objects (6 bits per fact), relations per subject
# shortest_path (tasks/graphs.py), read by the bare FFN: per example a graph of SP_NODES nodes, SP_DEGREE distinct
# out-edges each, distances 1 .. SP_MAX_DISTANCE answered (or farther: one class, 3 classes); its input is the
# adjacency and two one-hot nodes (d_model 80); active width w = 8, so dense-total is d_ff 128. Chosen by pilots
# of dense 8 against dense 128 only (changes/moe_memorization_vs_reasoning.py).
SP_NODES, SP_DEGREE, SP_MAX_DISTANCE, SP_WIDTH = 8, 2, 2, 8
SP_D_MODEL = graphs.input_dim(SP_NODES)
SP_EVAL, SP_BATCH = 2048, 256  # test and validation graphs (each, fixed per seed); fresh training graphs per step
SP_STEPS_FACTOR = 4  # reasoning trains 4 x memorization's T (4,000 steps at full scale)
HALF, MUCH = 0.5, 0.25  # rules 2-3 (G vs 0.5) and 1 (difference above 0.25)
PREMISE_SLOPE = 0.8  # memorization premise: dense per-seed log-log slope CI lower end
SATURATED = 0.9  # memorization: a point storing more than this share of the entropy is saturated
MEM_GAP, SP_GAP = 0.1, 0.1  # dynamic range: dense-total - dense-active > 10% of bits / 0.1 accuracy
SP_LEARNED = 0.1  # reasoning premise: dense-total's held-out accuracy above the majority-class share by this
BITS_PER_PARAM = 2.0  # capacity (Allen-Zhu & Li 2024) for the facts >= 2x capacity check
RESAMPLES = 9999  # bootstrap resamples (as rules_lib.ratio_of_means)
SEED, STEPS = regime_lib.SEED, regime_lib.STEPS
SCORE = {'memorization': 'bits_stored', 'shortest_path': 'eval_accuracy'}
WIDTH = {'memorization': MEM_WIDTH, 'shortest_path': SP_WIDTH}


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
    m.arch, m.d_model = 'ffn', SP_D_MODEL  # the bare FFN: the graph and the query are its input
    t.name, t.num_nodes, t.out_degree, t.max_distance = 'shortest_path', SP_NODES, SP_DEGREE, SP_MAX_DISTANCE
    t.num_eval, tr.batch_size = SP_EVAL, SP_BATCH
  e.capacity_factor, e.dispatch, e.num_experts, m.d_ff = 0.0, 'auto', 0, WIDTH[task]  # dropless; 'auto': sort off TPU
  if arm != 'dense':
    k, renorm, mult, div = ROUTERS[arm]
    e.num_experts, e.top_k, e.router, e.renormalize = mult * s['experts'], k, 'softmax_topk', renorm
    m.d_ff = WIDTH[task] // div
  return c


def arms(scale: str) -> list[base.Arm]:
  s, out = SETTINGS[scale], []
  for task in TASKS:
    hop = task == 'shortest_path'
    rates = lambda arm, hop=hop: (
      RATES['shortest_path'] if hop else RATES['memorization_dense'] if arm == 'dense' else None
    )
    dense = {f'd_ff={f * WIDTH[task]}': {'model.d_ff': f * WIDTH[task]} for f in s['dense'][task]}
    out += [
      base.Arm(
        f'{task}_{arm}',
        config(s, task, arm),
        dense if arm == 'dense' else {f'E={s["experts"]}': {}},
        rates=rates(arm),
        steps_factor=SP_STEPS_FACTOR if hop else 1,
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
  """The tuning metric (lower is better): memorization, the loss on the facts; shortest_path, the error on its
  validation graphs, 1 - accuracy (the score is an accuracy; the test graphs choose nothing)."""
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
  """The reasoning premises: dense-total learns the task (remedy: double the steps of every reasoning point, both
  routers', so the budgets stay equal) and the width gap (no remedy: a property of the task and the sizes)."""
  lab = labels(scale, 'shortest_path')
  learned = _reasoning_learned(sel[sel['point'] == lab['total']])
  every = tuple(v for k, v in lab.items() if k not in ('active', 'total'))  # both routers: budgets stay equal
  return [
    dataclasses.replace(learned, remedy=stats.DOUBLE_STEPS if not learned.passed else '', points=every),
    _reasoning_gap(gaps(sel, scale, 'shortest_path', router)['den']),
  ]


def _reasoning_learned(total: pd.DataFrame) -> stats.Check:
  """Premise: dense-total learns the in-context distances: per seed, its held-out accuracy minus the test graphs'
  majority-class share (the accuracy of always answering that class), the 95% t CI's lower end >= SP_LEARNED."""
  margin = (total['eval_accuracy'] - total['chance_accuracy']) if len(total) else pd.Series(dtype=float)
  m, lo, hi = stats.mean_ci(margin)
  chance = float(total['chance_accuracy'].mean()) if len(total) else math.nan
  return stats.premise_check(
    'premise (reasoning): dense-total learns the in-context distances (held-out accuracy above chance)',
    m,
    (lo, hi),
    SP_LEARNED,
    what=f"per-seed held-out accuracy of dense-total minus the test graphs' majority-class share (chance "
    f'{chance:.3g}; {len(margin.dropna())} seeds)',
  )


def _reasoning_gap(den: pd.Series) -> stats.Check:
  """Premise: width buys held-out accuracy on this task, in every reading of the seeds: the t CI's lower end of the
  per-seed gap (dense-total - dense-active) at least SP_GAP (its history: changes/moe_memorization_vs_reasoning.py)."""
  m, lo, hi = stats.mean_ci(den)
  check = stats.premise_check(
    'premise (reasoning): dense-total beats dense-active on held-out graphs (accuracy gap)',
    m,
    (lo, hi),
    SP_GAP,
    what=f'per-seed held-out accuracy gap ({len(den.dropna())} seeds)',
  )
  if check.passed:
    return check
  why = '; below it the task cannot show whether an MoE closes the gap: width does not buy this reasoning here'
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
    mem, hop = gaps(sel, scale, 'memorization', r), gaps(sel, scale, 'shortest_path', r)
    c_mem, c_hop = memorization_checks(sel, scale, r), reasoning_checks(sel, scale, r)
    p_mem, p_hop = task_points(scale, 'memorization', r), task_points(scale, 'shortest_path', r)
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
      claim=f'reasoning saturates, {what.format(w=SP_WIDTH // div)}: the MoE closes less than half of the gap in '
      'held-out in-context shortest-path accuracy between dense-active and dense-total',
    )
    overall.append(dataclasses.replace(stats.gate(v_all, c_mem + c_hop), points=p_mem + p_hop))
    per_task += [
      dataclasses.replace(stats.gate(v_mem, c_mem), points=p_mem),
      dataclasses.replace(stats.gate(v_hop, c_hop), points=p_hop),
    ]
  return overall + per_task


# --------------------------------------------------------------------------- presentation


def _task_scopes() -> tuple[str, str]:
  """What memorization and shortest_path test at full scale, in words: the opening of their claims' scopes."""
  s, full = SETTINGS['full'], REGIMES['full']
  mem = (
    f'memorization of {s["mem_facts"]:,} random facts ({s["mem_facts"] * math.log2(MEM_VALUES):,.0f} bits) in a '
    f'one-block ffn_stack, d_model {MEM_D_MODEL}, trainable tied embeddings shared by every arm (most of '
    f"dense-active's parameters), T from {full.steps:,} steps at full scale (the budget judged: the ladder line), "
    f"{full.seeds} seeds, rates tuned per point on the facts' loss"
  )
  hop = (
    'reasoning here is a bare FFN (one hidden layer, no attention, no embeddings) reading the whole graph from its '
    f'input: shortest_path, per example a fresh random directed graph ({SP_NODES} nodes, {SP_DEGREE} distinct '
    f'out-edges each) given as its flattened adjacency with a one-hot source and target ({SP_D_MODEL} input '
    f'features), the label the shortest-path distance (1 ... {SP_MAX_DISTANCE}, or farther / unreachable), the '
    "classes about equally often (chance: the test graphs' majority share); the facts are in the input and never "
    "repeat, so nothing can be memorised (in-context facts as in the paper's graph tasks, but no sequence and "
    "not the paper's transformers); Adam, batch "
    f'{SP_BATCH}, {SP_STEPS_FACTOR}x the memorization budget (the ladder line gives the T judged), {full.seeds} '
    f'seeds, rates tuned per point on {SP_EVAL:,} validation graphs, scored on {SP_EVAL:,} other test graphs'
  )
  return mem, hop


def _premises() -> tuple[str, str]:
  """The memorization and reasoning premises, in words."""
  mem = (
    f'memorization: dense bits grow at least in proportion to parameters (per-seed log-log slope, CI lower end >= '
    f'{PREMISE_SLOPE:g}) and dense-total stores more than dense-active by over {MEM_GAP:.0%} of its bits'
  )
  hop = (
    f"reasoning: dense-total learns the task (its per-seed held-out accuracy above the test graphs' majority-class "
    f"share by at least {SP_LEARNED:g}, the 95% t CI's lower end) and beats dense-active on held-out graphs by at "
    f"least {SP_GAP:g} accuracy (the per-seed gap's 95% t CI lower end): width buys this reasoning"
  )
  return mem, hop


def _matched(task: str, e: int) -> str:
  """What one task's MoE verdicts match and what they do not, in words (full scale)."""
  d = MEM_D_MODEL if task == 'memorization' else SP_D_MODEL
  routers = ' and '.join(f'{d * m * e:,}' for _, _, m, _ in ROUTERS.values())
  return (
    f'against dense d_ff = w (active) and {e} w (total): the expert width per token matched, total expert '
    f"parameters about dense-total's (top-2 adds {e} experts' output biases), the router (d_model x experts: "
    f'{routers} parameters for top-1 and top-2) counted as active; one E'
  )


def _claims() -> tuple[base.Claim, ...]:
  """One per verdict of `rules`, in its order (base.Claim): kind, scope (what is matched and what is not), premise."""
  e = SETTINGS['full']['experts']
  router = {
    r: f'top-{k} of {m * e} experts of width {{w}} ({"renormalised" if renorm else "not renormalised"})'
    for r, (k, renorm, m, _) in ROUTERS.items()
  }
  mem_w = {r: MEM_WIDTH // ROUTERS[r][3] for r in ROUTERS}  # expert width per router and task
  hop_w = {r: SP_WIDTH // ROUTERS[r][3] for r in ROUTERS}
  mem, hop = _task_scopes()
  mem_premise, hop_premise = _premises()
  normalisation = (
    'top-1 and top-2 route alike (softmax over all experts, the top-k weights not renormalised): they differ in k '
    'and expert width only'
  )
  overall = [
    base.Claim(
      stats.MAGNITUDE,
      f'memorization and shortest_path as in the per-task verdicts, '
      f'{router[r].format(w=f"{mem_w[r]} / {hop_w[r]}")} against dense d_ff = w and {e} w per task; '
      f"{normalisation}; the tasks' seeds are independent and resampled together by index.",
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
        f'{mem}; {router[r].format(w=mem_w[r])} {_matched("memorization", e)}; {normalisation}.',
        mem_premise,
      ),
      base.Claim(
        stats.MAGNITUDE,
        f'{hop}; {router[r].format(w=hop_w[r])} {_matched("shortest_path", e)}; {normalisation}.',
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
    'top-1 of E experts of width w; MoE top-2 of 2E experts of width w/2 (its points are labelled E=16 after E); '
    'both softmax_topk, the top-k weights not renormalised; E = 16 at quick and full; dropless; the MoE arms also '
    'carry the Switch loss 1e-2 and z-loss 1e-3. '
    f'Memorization: ffn_stack, d_model {MEM_D_MODEL}, w = {MEM_WIDTH}, V = {MEM_VALUES}, Adam, T steps. '
    f'Reasoning: shortest_path read by a bare FFN (a fresh {SP_NODES}-node graph per example, {SP_DEGREE} '
    'out-edges per node, given whole in the input with a one-hot source and target; the distance between them, '
    f'1 ... {SP_MAX_DISTANCE} or farther), d_model {SP_D_MODEL} (the input), w = {SP_WIDTH}, Adam, '
    f'{SP_STEPS_FACTOR}T steps. Rates tuned per point.'
  ),
  regimes=REGIMES,
  arms=arms,
  rules=rules,
  collect=collect,
  claims=_claims(),
  changes=CHANGES,
)
