"""moe_memorization_vs_reasoning: at fixed active width, do more experts help memorization but not reasoning?

Claim (Jelassi et al. 2024, "Mixture of Parrots"; docs/references.md#jelassi-et-al-2024): at fixed
active parameters, adding experts keeps improving memorization (memorization tracks total
parameters) while reasoning saturates (reasoning tracks active parameters).

Design. Two tasks, each with three arms at one active width w (the expert weights a token uses):
  * dense references: dense FFNs of width w (dense-active), of E_max * w (dense-total, about the
    largest MoE's total) and, for memorization, in between (the premise's slope needs 3 sizes);
  * MoE top-1: E experts of width w, `softmax_topk` router *without* renormalisation (at k = 1 a
    renormalised weight is exactly 1 and the router gets no task gradient; without it the one
    weight is the softmax probability, Switch-style, so the router learns);
  * MoE top-2 renormalised: 2E experts of width w / 2, `softmax_topk` with the two weights
    renormalised to sum to 1 (the Mixtral/GShard convention): the same active width w and the
    same total width E * w at each point as top-1.
Dropless routing (capacity_factor 0), Switch loss 1e-2 and z-loss 1e-3 (defaults). Learning rate:
each arm trains at its own rate, set from one-seed probes (docs/reproduce.md: dense memorization
stores most at 1e-1, the top-1 MoE at 3e-2); a per-point grid on every seed is 3x the runs, over
the 60-minute budget on 2 CPU cores. Every point also trains rate / 3 and rate x 3 on the first
seed(s) in the same compiled program (the rate is a traced scalar), and `verdict.best_per_point` +
`verdict.edge_check` make every verdict `invalid` if a point's best rate is not its arm's rate
(memorization picks by bits stored, reasoning by the trained compositions' loss, so the held-out
compositions never pick the rate).

  * memorization: N random facts (subject, relation) -> object, `ffn_stack` (embeddings -> causal
    mean -> FFN blocks -> tied unembedding) with trainable embeddings, d_model 16; every parameter
    counted (as Allen-Zhu & Li and Jelassi et al. count them). More facts than 2x the dense-total
    model's capacity at 2 bits per parameter. Score: bits stored. x: total parameters.
  * reasoning: `multi_hop` (2 hops in a random graph, 20% of the compositions held out), a small
    transformer whose FFNs are the MoE. Score: held-out composition accuracy. x: total parameters.

Statistic: the share of the gap between dense-active and dense-total that the MoE of E_max closes,
per seed, gap_closed = (MoE - dense-active) / (dense-total - dense-active) (seeds pair the arms:
a seed fixes the facts / the graph), mean and Student-t CI over seeds.

Verdict rules (written before the full run; the probes in docs/reproduce.md chose only sizes and
steps), per router (top-1, top-2):
  1. overall [headline]: memorization closes much more of its gap than reasoning: the Welch 95% CI
     of mean gap_closed(memorization) - mean gap_closed(reasoning) lies above MUCH = 0.25
     (a quarter of the gap): reproduced; below 0.25: not reproduced; else inconclusive.
  2. memorization: gap_closed CI above HALF = 0.5 (the experts recover most of what the dense
     total width stores): reproduced; below 0.5: not reproduced; else inconclusive.
  3. reasoning saturates: gap_closed CI below 0.5: reproduced; above: not reproduced.
Each verdict is gated (`verdict.gate`) on its regime checks; a failed one makes it `invalid`:
  * memorization premise: the dense references' bits grow in proportion to parameters: per-seed
    log-log slope of bits on total parameters (`verdict.slope_per_seed`), CI lower end >= 0.8;
  * memorization not saturated: dense-total and MoE E_max store < 90% of the facts' entropy;
  * reasoning premise: dense-active (E = 1 without a router) fits >= 90% of the trained
    compositions (CI lower end);
  * dynamic range: dense-total beats dense-active by > 10% of dense-total's bits (memorization)
    and by > 0.1 held-out accuracy (reasoning), so the gap is there to be closed; and it does so
    in every seed, since the share is a per-seed ratio (added after the first full run, where one
    multi_hop seed's dense-total scored 0.01 below its dense-active);
  * plateau: at dense-active, dense-total and MoE E_max the score at the last evaluation differs
    from the one before (3/4 of the steps) by < 5% of bits / < 0.03 accuracy;
  * learning rate: no point's per-seed best rate at its grid's edge (`verdict.edge_check`).
The overall verdict rests on both tasks' checks.
"""

import json
import math
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import ml_collections  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import pandas as pd  # pylint: disable=wrong-import-position
from scipy import stats  # pylint: disable=wrong-import-position

from ffn_research import sweep  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

# Per scale: top-1 expert counts E (top-2 uses 2E experts of half the width; the statistic reads E_max = the
# largest); dense widths as multiples of the active width; seeds; per task facts, steps, batch and each arm's
# learning rate (from the probes in docs/reproduce.md). Every point also trains its arm's rate x GRID_STEP^k for
# each k of its STEPS (default -1, 1: rate / 3 and x 3; `<task>_lr_steps` overrides per arm) on the first
# `grid_seeds` seeds, in the same compiled program, for the edge check.
SETTINGS = {
    'smoke': dict(experts=(2,), mem_dense=(1, 2), hop_dense=(1, 2), seeds=3, grid_seeds=1, mem_facts=384,
                  mem_steps=20, mem_batch=256, hop_steps=20,
                  mem_lr={'dense': 1e-1, 'top1': 3e-2, 'top2': 3e-2}, hop_lr={'dense': 1e-3, 'top1': 1e-3, 'top2': 1e-3}),
    'quick': dict(experts=(16,), mem_dense=(1, 4, 16), hop_dense=(1, 16), seeds=3, grid_seeds=1, mem_facts=6144,
                  mem_steps=300, mem_batch=1024, hop_steps=400,
                  mem_lr={'dense': 1e-1, 'top1': 3e-2, 'top2': 3e-2}, hop_lr={'dense': 1e-3, 'top1': 1e-3, 'top2': 1e-3}),
    'full': dict(experts=(16,), mem_dense=(1, 4, 16), hop_dense=(1, 16), seeds=4, grid_seeds=1, mem_facts=6144,
                 mem_steps=800, mem_batch=1024, hop_steps=1000,
                 mem_lr={'dense': 1e-1, 'top1': 3e-2, 'top2': 3e-2}, hop_lr={'dense': 1e-3, 'top1': 1e-3, 'top2': 1e-3},
                 # Widened after the first full run (the issue's "or widen the grid"): dense d_ff 8's best of
                 # 0.1 x {1/3, 1, 3} was 0.3, by 0.2% (5,544 vs 5,533 bits, seed 0), so the dense grid adds 0.9.
                 mem_lr_steps={'dense': (-1, 1, 2)}),
}
GRID_STEP = 3.0                # the edge-check grid of an arm: its rate / 3, its rate, its rate x 3 by default
STEPS = (-1, 1)
ROUTERS = {  # arm -> (top_k, router, renormalize, expert-count multiplier, expert-width divisor)
    'top1': (1, 'softmax_topk', False, 1, 1),   # Switch-style: the router learns at k = 1
    'top2': (2, 'softmax_topk', True, 2, 2),    # renormalised top-2 of 2E experts of width w / 2
}
MEM_D_MODEL, MEM_LAYERS, MEM_WIDTH = 16, 1, 8     # memorization: residual width, FFN blocks, active width w
MEM_VALUES, MEM_RELATIONS = 64, 48                # objects (6 bits per fact), relations per subject
HOP_D_MODEL, HOP_HEADS, HOP_LAYERS, HOP_WIDTH = 32, 2, 2, 32   # multi_hop transformer; active width w
HOP_NODES, HOP_RELATIONS, HOP_TRAIN = 32, 4, 0.8  # graph: nodes, relations, trained share of compositions
HOP_BATCH, HOP_WEIGHT_DECAY = 128, 1.0            # AdamW as configs/multi_hop.py
EVALS = 4                      # evaluations per run (the plateau check compares the last two)
# 'sort' on CPU, 'ragged' on GPU/TPU (the same function, tested in test_moe.py).
DISPATCH = 'auto'
HALF, MUCH = 0.5, 0.25         # rules 2-3 (gap_closed vs 0.5) and 1 (difference above 0.25)
PREMISE_SLOPE = 0.8            # memorization premise: dense per-seed log-log slope CI lower end
FIT_LEVEL = 0.9                # reasoning premise: trained-composition accuracy CI lower end
SATURATED_FRACTION = 0.9       # memorization: a run storing more than this share of the entropy is saturated
MEM_GAP, HOP_GAP = 0.1, 0.1    # dynamic range: dense-total - dense-active > 10% of bits / 0.1 accuracy
MEM_PLATEAU, HOP_PLATEAU = 0.05, 0.03   # plateau tolerance: relative (bits), absolute (accuracy)
BITS_PER_PARAM = 2.0           # capacity (Allen-Zhu & Li 2024) for the facts >= 2x capacity check
SEED = 'train.seed'
LR = 'train.learning_rate'


def _moe(c, arm: str, experts: int) -> None:
  """Set c.model.moe for `arm` ('dense' or a ROUTERS key) with `experts` top-1-equivalent experts."""
  e = c.model.moe
  e.capacity_factor, e.dispatch = 0.0, DISPATCH
  if arm == 'dense':
    e.num_experts = 0
    return
  k, router, renorm, mult, _ = ROUTERS[arm]
  e.num_experts, e.top_k, e.router, e.renormalize = mult * experts, k, router, renorm


def memorization_config(s: dict, arm: str) -> ml_collections.ConfigDict:
  c = default_config()
  m, t, tr = c.model, c.task, c.train
  m.arch, m.num_layers, m.d_model, m.d_ff = 'ffn_stack', MEM_LAYERS, MEM_D_MODEL, expert_width(MEM_WIDTH, arm)
  m.tie_embeddings = True
  _moe(c, arm, 1)
  t.name, t.num_facts, t.num_relations, t.vocab_size = 'memorization', s['mem_facts'], MEM_RELATIONS, MEM_VALUES
  tr.batch_size, tr.learning_rate = s['mem_batch'], s['mem_lr'][arm]
  base.set_steps(tr, s['mem_steps'])
  tr.eval_every = s['mem_steps'] // EVALS
  return c


def multi_hop_config(s: dict, arm: str) -> ml_collections.ConfigDict:
  c = default_config()
  m, t, tr = c.model, c.task, c.train
  m.arch, m.num_layers, m.d_model, m.num_heads = 'transformer', HOP_LAYERS, HOP_D_MODEL, HOP_HEADS
  m.d_ff = expert_width(HOP_WIDTH, arm)
  _moe(c, arm, 1)
  t.name, t.num_nodes, t.num_relations, t.num_hops, t.train_fraction = ('multi_hop', HOP_NODES, HOP_RELATIONS, 2,
                                                                        HOP_TRAIN)
  tr.optimizer, tr.weight_decay, tr.learning_rate = 'adamw', HOP_WEIGHT_DECAY, s['hop_lr'][arm]
  tr.batch_size = HOP_BATCH
  base.set_steps(tr, s['hop_steps'])
  tr.eval_every = s['hop_steps'] // EVALS
  return c


def expert_width(width: int, arm: str) -> int:
  """One expert's d_ff: the active width for top-1 and dense, half of it for top-2."""
  return width if arm == 'dense' else width // ROUTERS[arm][4]


def scaled(lr: float, k: int) -> float:
  """lr x GRID_STEP^k (a division for k < 0, so rate / 3 is the same float as in run names)."""
  return lr * GRID_STEP ** k if k >= 0 else lr / GRID_STEP ** -k


def grid(s: dict, key: str, arm: str, lr: float = 1.0) -> tuple[float, ...]:
  """The edge-check grid of an arm: its rate (by default 1, i.e. multiples of the rate) scaled by each step."""
  return tuple(scaled(lr, k) for k in sorted({0, *s.get(f'{key}_lr_steps', {}).get(arm, STEPS)}))


def arm_runs(s: dict, arm: str, width: int, key: str) -> list[dict]:
  """Overrides of one arm: its points x seeds at the arm's rate, and x the grid's two other rates on the first
  grid_seeds seeds."""
  lr = s[f'{key}_lr'][arm]
  if arm == 'dense':
    points = [{'model.moe.num_experts': 0, 'model.d_ff': f * width} for f in s[f'{key}_dense']]
  else:
    points = sweep.values('model.moe.num_experts', [ROUTERS[arm][3] * e for e in s['experts']])
  runs = sweep.product(points, sweep.values(LR, [lr]), sweep.values(SEED, range(s['seeds'])))
  return runs + sweep.product(points, sweep.values(LR, [g for g in grid(s, key, arm, lr) if g != lr]),
                              sweep.values(SEED, range(s['grid_seeds'])))


ARMS = ('dense', *ROUTERS)


def sweeps(scale: str) -> list[base.SweepSpec]:
  s = SETTINGS[scale]
  out = []
  for task, config, width, key in (('memorization', memorization_config, MEM_WIDTH, 'mem'),
                                   ('multi_hop', multi_hop_config, HOP_WIDTH, 'hop')):
    out += [base.SweepSpec(f'{task}_{arm}', config(s, arm), arm_runs(s, arm, width, key))
            for arm in ARMS]
  return out


# --------------------------------------------------------------------------- statistics

def entropy_bits(s: dict) -> float:
  """The facts' entropy N log2 V in bits."""
  return s['mem_facts'] * math.log2(MEM_VALUES)


def gap_closed(moe, active, total) -> np.ndarray:
  """Per seed: the share of the gap from dense-active to dense-total that the MoE closes."""
  moe, active, total = (np.asarray(a, float) for a in (moe, active, total))
  return (moe - active) / (total - active)


def difference_above(a, b, *, level: float, claim: str, min_seeds: int = 3,
                     confidence: float = verdict.CONFIDENCE) -> verdict.Verdict:
  """mean(a) - mean(b) of two independent samples, Welch CI; reproduced if it lies above `level`."""
  a, b = (np.asarray(v, float) for v in (a, b))
  a, b = a[np.isfinite(a)], b[np.isfinite(b)]
  test = f'difference of means, Welch (unequal variances) Student-t {confidence:.0%} CI'
  rule = (f'reproduced if the {confidence:.0%} CI of the difference lies above {level:g}; not reproduced if it '
          f'lies below {level:g}; otherwise, or with < {min_seeds} seeds in either sample, inconclusive')
  n = len(a) + len(b)
  d = float(a.mean() - b.mean()) if len(a) and len(b) else math.nan
  if min(len(a), len(b)) < min_seeds:
    return verdict.Verdict(claim, verdict.INCONCLUSIVE, d, (math.nan, math.nan), test, rule, n,
                           f'underpowered: {len(a)} and {len(b)} seeds (< {min_seeds})')
  va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
  se = math.sqrt(va + vb)
  dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if se > 0 else len(a) + len(b) - 2
  half = float(stats.t.ppf(0.5 + confidence / 2, dof) * se)
  ci = (d - half, d + half)
  p = verdict.decision_p(d, se, dof, level, math.inf)
  return verdict.Verdict(claim, verdict.decide(ci, level, math.inf), d, ci, test, rule, n,
                         f'two-sided p = {p:.3g} (Welch t-test against {level:g}); means {a.mean():.3g} '
                         f'({len(a)} seeds) and {b.mean():.3g} ({len(b)} seeds), {dof:.1f} degrees of freedom',
                         p_value=p)


# --------------------------------------------------------------------------- reading the runs

def previous_eval(run_dir: str, key: str) -> float:
  """`eval/<key>` at the evaluation before the last one logged in run_dir/metrics.jsonl (nan if none)."""
  path = os.path.join(run_dir, 'metrics.jsonl')
  if not os.path.exists(path):
    return math.nan
  key = 'eval/' + key.removeprefix('eval_')  # how loop.py names a logged evaluation metric
  with open(path) as f:
    values = [m[key] for m in map(json.loads, f) if key in m]
  return float(values[-2]) if len(values) >= 2 else math.nan


def frame(results: dict[str, pd.DataFrame], task: str, metric: str, outdir: str) -> pd.DataFrame:
  """Completed runs of the task's three arms: columns arm, E (top-1-equivalent experts; 0 for dense), x
  (total parameters), `prev_<metric>` (the evaluation before the last, read from metrics.jsonl unless given)."""
  parts = []
  for arm in ARMS:
    name = f'{task}_{arm}'
    if name not in results:
      continue
    df = base.completed(results[name]).copy()
    df['arm'] = arm
    df['E'] = 0 if arm == 'dense' else df['model.moe.num_experts'] // ROUTERS[arm][3]
    if 'model.d_ff' not in df:
      df['model.d_ff'] = df['d_ff_effective']
    if f'prev_{metric}' not in df:
      df[f'prev_{metric}'] = [previous_eval(os.path.join(outdir, name, 'runs', n), metric) for n in df['name']]
    parts.append(df)
  out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
  out['x'] = out['num_params'].astype(float)
  return out


def at_rate(df: pd.DataFrame, rates: dict[str, float]) -> pd.DataFrame:
  """The runs at each arm's own rate (the statistics' rows)."""
  rate = df['arm'].map(rates).astype(float)
  return df[np.isclose(df[LR].astype(float), rate)].copy()


def lr_grid_check(df: pd.DataFrame, task: str, s: dict, key: str, metric: str,
                  mode: str) -> tuple[verdict.Check, pd.DataFrame]:
  """Edge check of every point's per-seed best rate over its arm's grid (on the seeds that trained all of it),
  read as best / the arm's rate on the grid (1/3, 1, 3); and the winners' table."""
  rates = s[f'{key}_lr']
  ran = df[df[SEED] < s['grid_seeds']]
  best = verdict.best_per_point(ran, by=['arm', 'E', 'model.d_ff'], over=LR, metric=metric, mode=mode, seed=SEED)
  best['ratio'] = best[f'best_{LR}'] / best['arm'].map(rates)
  best['point'] = [f'{a} d_ff={d}' if a == 'dense' else f'{a} E={e}' for a, e, d in
                   zip(best['arm'], best['E'], best['model.d_ff'])]
  table = pd.DataFrame([{'task': task, 'point': p,
                         'grid': ', '.join(f'{g:.3g}' for g in grid(s, key, g_['arm'].iloc[0], rates[g_['arm'].iloc[0]])),
                         'selected by': f'{mode} {metric}',
                         'best per seed': ', '.join(f'{v:.3g}' for v in g_[f'best_{LR}'])}
                        for p, g_ in best.groupby('point', sort=False)])
  name = (f'{task}: each arm\'s learning rate ({", ".join(f"{a} {r:g}" for a, r in rates.items())}) is not at '
          'the edge of its grid (best / rate shown)')
  per_arm = [verdict.edge_check(arm, g_.set_index('point')['ratio'], grid(s, key, arm))
             for arm, g_ in best.groupby('arm', sort=False)]
  detail = '; '.join(f'{c.name}: {c.detail}' for c in per_arm)
  return verdict.Check(name, bool(per_arm) and all(c.passed for c in per_arm), detail), table


def point(w: pd.DataFrame, arm: str, *, E: int = 0, d_ff: int | None = None) -> pd.DataFrame:
  """The winners of one point, indexed by seed."""
  sel = (w['arm'] == arm) & (w['E'] == E)
  if d_ff is not None:
    sel &= w['model.d_ff'] == d_ff
  return w[sel].set_index(SEED).sort_index()


def task_gaps(w: pd.DataFrame, col: str, width: int, e_max: int) -> dict[str, tuple[pd.DataFrame, np.ndarray]]:
  """Per router: (aligned frame of the three points' `col`, per-seed gap_closed)."""
  active = point(w, 'dense', d_ff=width)[col]
  total = point(w, 'dense', d_ff=e_max * width)[col]
  out = {}
  for arm in ROUTERS:
    moe = point(w, arm, E=e_max)[col]
    t = pd.concat({'active': active, 'total': total, 'moe': moe}, axis=1).dropna()
    out[arm] = (t, gap_closed(t['moe'], t['active'], t['total']))
  return out


def _plateau(task: str, points: dict[str, pd.DataFrame], metric: str, tol: float, relative: bool) -> list:
  out = []
  for name, p in points.items():
    label = f'{task} {name}: trained to a plateau ({metric}, last vs previous evaluation)'
    last, prev = p[metric].to_numpy(float), p[f'prev_{metric}'].to_numpy(float)
    if relative and not np.nanmean(prev) != 0:  # no relative change from 0 (or from no evaluation)
      out.append(verdict.Check(label, False, f'{np.nanmean(last):.4g} at the last evaluation vs '
                                             f'{np.nanmean(prev):.4g} at the previous: no relative change defined'))
    else:
      out.append(verdict.plateau_check(label, last, prev, tol, relative=relative))
  return out


def every_seed_gap(task: str, t: pd.DataFrame) -> verdict.Check:
  """The per-seed ratio needs a positive gap in every seed: dense-total above dense-active seed by seed."""
  gaps = (t['total'] - t['active']).to_numpy(float)
  return verdict.Check(f'{task}: dense-total above dense-active in every seed (the per-seed share needs it)',
                       bool(len(gaps)) and bool((gaps > 0).all()),
                       'per-seed gaps ' + ', '.join(f'{g:.4g}' for g in gaps))


def memorization_checks(w: pd.DataFrame, s: dict, arm: str) -> list[verdict.Check]:
  """Regime checks of the memorization verdicts for router `arm` (see the module docstring)."""
  e_max, entropy = max(s['experts']), entropy_bits(s)
  dense = w[w['arm'] == 'dense']
  premise = verdict.slope_per_seed(dense, x='x', y='bits_stored', seed=SEED, claimed=1.0, margin=math.inf,
                                   claim='dense bits vs params')
  pts = {'dense-active': point(w, 'dense', d_ff=MEM_WIDTH), 'dense-total': point(w, 'dense', d_ff=e_max * MEM_WIDTH),
         f'{arm} E={e_max}': point(w, arm, E=e_max)}
  x_total = float(pts['dense-total']['x'].max()) if len(pts['dense-total']) else math.nan
  capacity = BITS_PER_PARAM * x_total
  t, _ = task_gaps(w, 'bits_stored', MEM_WIDTH, e_max)[arm]
  rel_gap = (t['total'] - t['active']) / t['total']
  checks = [
      verdict.premise_check('memorization premise: dense bits grow in proportion to parameters', premise.statistic,
                            premise.ci, PREMISE_SLOPE,
                            what=f'per-seed log-log slope of bits on total parameters over dense d_ff '
                                 f'{sorted(dense["model.d_ff"].unique().tolist())} ({premise.n} seeds)'),
      verdict.Check('memorization: facts >= 2x the dense-total capacity', bool(entropy >= 2 * capacity),
                    f'{entropy:,.0f} bits of facts vs {BITS_PER_PARAM:g} bits/param x {x_total:,.0f} params = '
                    f'{capacity:,.0f} bits ({entropy / capacity:.2f}x)'),
      *[verdict.range_check(f'memorization {name}: not saturated (share of the entropy)',
                            p['bits_stored'] / entropy, ceiling=1.0, margin=1 - SATURATED_FRACTION)
        for name, p in pts.items() if name != 'dense-active'],
      verdict.range_check('memorization: dense-total stores more than dense-active (gap / dense-total bits)',
                          rel_gap, floor=0.0, margin=MEM_GAP),
      every_seed_gap('memorization', t),
      *_plateau('memorization', pts, 'bits_stored', MEM_PLATEAU, relative=True),
  ]
  return checks


def reasoning_checks(w: pd.DataFrame, s: dict, arm: str) -> list[verdict.Check]:
  """Regime checks of the reasoning verdicts for router `arm` (see the module docstring)."""
  e_max = max(s['experts'])
  pts = {'dense-active': point(w, 'dense', d_ff=HOP_WIDTH), 'dense-total': point(w, 'dense', d_ff=e_max * HOP_WIDTH),
         f'{arm} E={e_max}': point(w, arm, E=e_max)}
  t, _ = task_gaps(w, 'eval_accuracy', HOP_WIDTH, e_max)[arm]
  checks = []
  p = pts['dense-active']
  m, lo, hi = verdict.mean_ci(p['accuracy'])
  checks.append(verdict.premise_check('reasoning premise: dense-active (E = 1) fits the trained compositions', m,
                                      (lo, hi), FIT_LEVEL, 1.0, what=f'trained-composition accuracy ({len(p)} seeds)'))
  checks += [
      verdict.range_check('reasoning: dense-total beats dense-active on held-out compositions (accuracy gap)',
                          t['total'] - t['active'], floor=0.0, margin=HOP_GAP),
      every_seed_gap('reasoning', t),
      *_plateau('reasoning', pts, 'eval_accuracy', HOP_PLATEAU, relative=False),
  ]
  return checks


# --------------------------------------------------------------------------- analysis

def _table(w: pd.DataFrame, metrics: dict[str, str]) -> pd.DataFrame:
  rows = []
  for (arm, e, d_ff), g in w.groupby(['arm', 'E', 'model.d_ff'], sort=True):
    row = {'arm': arm, 'E': int(e), 'experts': int(g['model.moe.num_experts'].iloc[0]), 'd_ff': int(d_ff),
           'params': int(g['num_params'].iloc[0]), 'active params': int(g['num_active_params'].iloc[0]),
           'seeds': len(g)}
    for col, name in metrics.items():
      m, lo, hi = verdict.mean_ci(g[col])
      row[name] = m
      row[f'{name} CI'] = f'[{lo:.4g}, {hi:.4g}]'
    rows.append(row)
  return pd.DataFrame(rows)


def _panel(ax, w, y, title, ylabel, log_y=False):
  markers = {'dense': 's', 'top1': 'o', 'top2': '^'}
  for i, arm in enumerate(ARMS):
    g = w[w['arm'] == arm]
    if not len(g):
      continue
    t = verdict.summarize(g, ['x'], [y])
    label = 'dense (d_ff swept)' if arm == 'dense' else f'MoE {arm} (E swept)'
    base.errorbar_ci(ax, t['x'], t[f'{y}_mean'], t[f'{y}_ci_lo'], t[f'{y}_ci_hi'],
                     fmt=markers[arm] + ('--' if arm == 'dense' else '-'), color=f'C{i}', label=label + ', mean, 95% CI')
  base.style_axes(ax, xlabel='total parameters', ylabel=ylabel, title=title, xscale='log',
                  yscale='log' if log_y else None, title_size=9)


def router_verdicts(mem: pd.DataFrame, hop: pd.DataFrame, s: dict, e_max: int, lr_checks) -> tuple[list, list]:
  """Per router: the overall verdict and the two per-task verdicts (gated), and the gap-closed table rows."""
  mem_gaps = task_gaps(mem, 'bits_stored', MEM_WIDTH, e_max)
  hop_gaps = task_gaps(hop, 'eval_accuracy', HOP_WIDTH, e_max)
  overall, per_task, gap_rows = [], [], []
  for arm in ROUTERS:
    k = ROUTERS[arm][0]
    what = (f'{arm} (top-{k} of {ROUTERS[arm][3] * e_max} experts of width {{w}}{", renormalised" if ROUTERS[arm][2] else ""})')
    g_mem, g_hop = mem_gaps[arm][1], hop_gaps[arm][1]
    c_mem, c_hop = memorization_checks(mem, s, arm) + [lr_checks[0]], reasoning_checks(hop, s, arm) + [lr_checks[1]]
    v_mem = verdict.threshold(g_mem, level=HALF, direction='above', claim=(
        f'memorization, {what.format(w=MEM_WIDTH // ROUTERS[arm][4])}: the MoE closes more than half of the gap in '
        'bits stored between dense-active and dense-total'))
    v_hop = verdict.threshold(g_hop, level=HALF, direction='below', claim=(
        f'reasoning saturates, {what.format(w=HOP_WIDTH // ROUTERS[arm][4])}: the MoE closes less than half of the '
        'gap in held-out 2-hop accuracy between dense-active and dense-total'))
    v_all = difference_above(g_mem, g_hop, level=MUCH, claim=(
        f'overall, {arm}: memorization closes much more of its dense-active -> dense-total gap than reasoning '
        f'(difference of gap shares above {MUCH:g}; Jelassi et al. 2024)'))
    overall.append(verdict.gate(v_all, c_mem + c_hop))
    per_task += [verdict.gate(v_mem, c_mem), verdict.gate(v_hop, c_hop)]
    for task, g in (('memorization', g_mem), ('reasoning', g_hop)):
      m, lo, hi = verdict.mean_ci(g)
      gap_rows.append({'router': arm, 'task': task, 'seeds': len(g), 'gap closed': m, 'CI': f'[{lo:.3g}, {hi:.3g}]',
                       'per seed': ', '.join(f'{v:.3g}' for v in g)})
  return overall + per_task, gap_rows


def _gap_panel(ax, gap_rows: list[dict], e_max: int) -> None:
  for i, r in enumerate(gap_rows):
    g = np.array([float(v) for v in r['per seed'].split(', ')]) if r['per seed'] else np.array([])
    m, lo, hi = verdict.mean_ci(g)
    base.errorbar_ci(ax, [i], [m], [lo], [hi], fmt='o', color='C1' if r['task'] == 'memorization' else 'C2', capsize=4)
    ax.scatter(np.full(len(g), i + 0.1), g, s=8, color='gray', alpha=0.6)
  ax.set_xticks(range(len(gap_rows)), [f'{r["router"]}\n{r["task"]}' for r in gap_rows], fontsize=8)
  ax.axhline(0, color='k', lw=0.8)
  ax.axhline(1, color='k', lw=0.8, ls=':')
  ax.axhline(HALF, color='gray', lw=0.8, ls='--')
  ax.set_ylabel(f'gap closed by the MoE at E = {e_max} (mean, 95% CI; dots: seeds)')
  ax.set_title('share of the dense-active -> dense-total gap the MoE closes', fontsize=9)
  ax.grid(True, alpha=0.3)


def main_figure(mem, hop, gap_rows, s, e_max, entropy, ctx) -> base.Figure:
  fig, axes = plt.subplots(1, 3, figsize=(15.0, 4.6))
  _panel(axes[0], mem, 'bits_stored', f'memorization: {s["mem_facts"]:,} facts ({entropy:,.0f} bits), '
         f'active width {MEM_WIDTH}', 'bits stored', log_y=True)
  _panel(axes[1], hop, 'eval_accuracy', f'multi_hop: held-out compositions, active width {HOP_WIDTH}',
         'held-out 2-hop accuracy')
  axes[1].axhline(1 / HOP_NODES, color='k', ls=':', lw=1, label=f'chance (1/{HOP_NODES})')
  _gap_panel(axes[2], gap_rows, e_max)
  return base.save_figure(fig, ctx.outdir, 'memorization_vs_reasoning.png',
                          'left: bits stored vs total parameters for dense FFNs (d_ff swept) and MoEs (E swept at '
                          'fixed active width), each seed at its best learning rate; middle: held-out 2-hop '
                          'accuracy, the same arms; right: the share of the dense-active -> dense-total gap the '
                          f'MoE of E = {e_max} closes, per router and task (0: no better than dense-active, '
                          '1: as good as dense-total)')


def method_notes(mem: pd.DataFrame, s: dict) -> list[str]:
  """The descriptive MoE slopes, then how the learning rate, the active parameters and the scope were set."""
  notes = []
  for arm in ROUTERS:  # descriptive: the MoE's own per-seed log-log slope of bits on total parameters over E
    v = verdict.slope_per_seed(mem[mem['arm'] == arm], x='x', y='bits_stored', seed=SEED, claimed=1.0,
                               margin=math.inf, claim='')
    notes.append(f'descriptive, not a verdict: MoE {arm} bits stored vs total parameters over E: per-seed log-log '
                 f'slope {v.statistic:.3g} (95% CI [{v.ci[0]:.3g}, {v.ci[1]:.3g}], {v.n} seeds).')
  return notes + [
      'Learning rate: each arm trains at its own rate (memorization ' + ', '.join(f'{a} {r:g}' for a, r in
      s['mem_lr'].items()) + '; multi_hop ' + ', '.join(f'{a} {r:g}' for a, r in s['hop_lr'].items()) + '), set '
      f'from the probes; every point also trains rate / {GRID_STEP:g} and rate x {GRID_STEP:g} on the first '
      f'{s["grid_seeds"]} seed(s), and the last table names each seed\'s best (memorization: most bits stored; '
      'multi_hop: lowest trained-composition loss, so the held-out compositions never choose the rate).',
      'Active parameters count the whole router as active (ffn_counts); the expert weights a token uses (width '
      f'{MEM_WIDTH} / {HOP_WIDTH} in total: one expert, or two of half the width) are the same at every E.',
      'The toy can say whether, on these tasks at this budget, added experts close the dense total width\'s gain '
      'in stored bits and in held-out composition accuracy; it says nothing about scale (Jelassi et al. train '
      'billion-parameter models on phone-book and graph/math tasks).',
  ]


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  s = SETTINGS[ctx.scale]
  e_max, entropy = max(s['experts']), entropy_bits(s)
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  notes = [f'runs not completed (excluded): {failed}'] if any(failed.values()) else []
  mem_all = frame(results, 'memorization', 'bits_stored', ctx.outdir)
  hop_all = frame(results, 'multi_hop', 'eval_accuracy', ctx.outdir)
  mem_lr, mem_lr_table = lr_grid_check(mem_all, 'memorization', s, 'mem', 'bits_stored', 'max')
  hop_lr, hop_lr_table = lr_grid_check(hop_all, 'reasoning', s, 'hop', 'train_loss', 'min')
  mem, hop = at_rate(mem_all, s['mem_lr']), at_rate(hop_all, s['hop_lr'])
  mem['share_of_entropy'] = mem['bits_stored'] / entropy
  verdicts, gap_rows = router_verdicts(mem, hop, s, e_max, (mem_lr, hop_lr))
  notes += method_notes(mem, s)
  mem_table = _table(mem, {'bits_stored': 'bits', 'share_of_entropy': 'share of entropy',
                           'prev_bits_stored': 'bits at 3/4 steps'})
  hop_table = _table(hop, {'eval_accuracy': 'held-out accuracy', 'prev_eval_accuracy': 'held-out at 3/4 steps',
                           'accuracy': 'trained accuracy', 'first_hop_accuracy': 'first-hop accuracy',
                           'eval_loss': 'held-out loss'})
  headline = '; '.join(f'{r["router"]} {r["task"]}: gap closed {r["gap closed"]:.2f} {r["CI"]}' for r in gap_rows)
  return base.Analysis(
      verdicts=verdicts, headline=headline,
      tables=[base.Table('gap closed by the MoE at E_max, per router and task (per-seed values)',
                         pd.DataFrame(gap_rows)),
              base.Table(f'memorization ({s["mem_facts"]:,} facts, {entropy:,.0f} bits)', mem_table),
              base.Table('multi_hop (held-out compositions)', hop_table),
              base.Table('learning-rate grids: best rate per seed at every point',
                         pd.concat([mem_lr_table, hop_lr_table], ignore_index=True))],
      figures=[main_figure(mem, hop, gap_rows, s, e_max, entropy, ctx)], notes=notes)


ABLATION = base.Ablation(
    name='moe_memorization_vs_reasoning',
    claim=('At fixed active parameters, adding experts keeps improving memorization (memorization tracks total '
           'parameters) while reasoning saturates (tracks active parameters) (Jelassi et al. 2024, Mixture of '
           'Parrots).'),
    citation=('Jelassi et al. 2024, "Mixture of Parrots: Experts improve memorization more than reasoning" '
              '(arXiv 2410.19034; docs/references.md#jelassi-et-al-2024)'),
    published='qualitative: memorization tracks total parameters, reasoning tracks active parameters',
    sweeps=sweeps, analyze=analyze,
    setup=(f'Arms at one active width w: dense d_ff = w x {{1, ..., E_max}}; MoE top-1 of E experts of width w '
           '(softmax_topk, not renormalised: the router learns at k = 1); MoE top-2 of 2E experts of width w/2 '
           '(softmax_topk, renormalised). Dropless, Switch loss 1e-2, z-loss 1e-3; a learning rate per task and arm, '
           f'with a 3-value grid around it (x {GRID_STEP:g}) on the first seeds for an edge check. Memorization: `ffn_stack`, {MEM_LAYERS} block(s), d_model {MEM_D_MODEL}, tied trainable '
           f'embeddings, w = {MEM_WIDTH}, {MEM_RELATIONS} relations, V = {MEM_VALUES}, Adam. Reasoning: `multi_hop` '
           f'({HOP_NODES} nodes, {HOP_RELATIONS} relations, 2 hops, {HOP_TRAIN:.0%} of the compositions trained), '
           f'transformer {HOP_LAYERS} layers, d_model {HOP_D_MODEL}, {HOP_HEADS} heads, w = {HOP_WIDTH}, batch '
           f'{HOP_BATCH}, AdamW, weight decay {HOP_WEIGHT_DECAY:g}. Warmup 100, cosine decay; {EVALS} evaluations '
           'per run.'))
