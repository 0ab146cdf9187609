"""memorization_capacity: how many bits of random facts can an FFN store per parameter, at its peak?

Claims. Allen-Zhu & Li 2024 (Physics of Language Models 3.3; docs/references.md#allen-zhu-and-li-2024):
a model trained to saturation stores about 2 bits per parameter after 1,000 exposures per fact and
about 1 bit per parameter after 100, read as the *peak* over data sizes of the bits stored, over a range
of model sizes where bits grow in proportion to parameters. Second reference (Morris et al. 2025,
docs/references.md#morris-et-al-2025): GPT-style models trained to saturation on random bitstrings store
about 3.6 bits per parameter (drawn as a reference line and quoted, not a verdict: their models are
transformers trained to saturation, ours are FFN stacks at fixed exposure counts). Random labels (Bubeck,
Eldan, Lee & Mikulincer 2020): a ReLU layer of width h on d-dim inputs can fit about h d / 4 generic labels.

Design (fixed before the full run; calibration in docs/reproduce.md):
  * Task `memorization`: N facts (subject, relation) -> object, objects uniform over V = 256 values. Bits
    stored = the repo's `bits_stored` measure: N log2 V minus the model's total cross-entropy on the facts,
    in bits (tasks/sequence.py), i.e. the information the predictions hold about the N answers.
  * Model: `ffn_stack` (causal mean of embeddings -> 2 residual ReLU FFN blocks -> tied unembedding) with
    *frozen* random embeddings (model.freeze_embeddings), so facts can live only in the FFN blocks and the
    3 d_model norm scales. d_model fixed, d_ff swept (a 4x range of sizes, one padded program per (N,
    exposures)). Counted: bits per non-embedding parameter (= every trainable parameter: FFN + norms; the
    headline), bits per FFN parameter and bits per parameter including the frozen tables (descriptive).
  * Peak over N: per (exposures, size, N) the learning rate of the grid with the most bits stored in the
    mean over seeds (verdict.best_per_point on the seed means), then per (exposures, size) the N with the
    most; every seed is read at that (N, rate), so the statistic carries no per-seed maximum.
  * Exposures E per fact at a fixed number of optimizer steps per E (batch = E N / steps), so smaller N
    does not mean fewer steps.
  * MoE arms (1,000 exposures only): each FFN replaced by 16 ReLU experts of width d_e in {1, 2, 3} (Switch-style
    softmax-then-top-k router, k = 1 and k = 2, dropless, default load-balance 1e-2 and z-loss 1e-3 coefficients),
    2,128 / 3,184 / 4,240 total non-embedding parameters (router 16 x 16 per layer, experts with biases), inside
    the dense sizes 2,192 / 4,304 (d_ff 32 / 64); active non-embedding parameters 658-790 (k = 1) and
    756-1,020 (k = 2). Peak over N in {512, 1,024}, learning rate in {0.03, 0.1, 0.3}, 3 seeds, same peak
    reading as the dense arm. Cut to fit 12 minutes of 2 CPU cores (an E = 16 MoE costs about 5x a dense FFN
    per token here): no 100-exposure MoE arm, N = 2,048 and the rate 0.01 dropped, E = 16 not 32.

Verdict rules (written before any full run):
  1. [headline] 1,000 exposures: per seed the geometric mean over sizes of peak bits / non-embedding
     parameters; mean of the logs over seeds with a Student-t 95% CI, exponentiated. Claimed 2:
     reproduced if the CI lies inside [2 / 1.25, 2 * 1.25], not reproduced if outside, else inconclusive.
  2. The same at 100 exposures, claimed 1.
  3. Random labels (bare FFN d = 16, h = 64, 1,153 parameters, h d / 4 = 256): the mean fraction of
     N = h d / 4 points fitted (|error| < 0.1) is above 0.9 (t CI over seeds).
Regime checks (a failed one makes the verdict `invalid`): rules 1-2 rest on
  (a) bits proportional to parameters: the per-seed log-log slope of peak bits on parameters has a 95% CI
      containing 1, or inside 1 ± 0.1 (verdict.slope_per_seed), else bits/param is no constant and is not read;
  (b) the peak lies inside the N grid: for every size the N with most bits (mean over seeds) is not the
      largest N, or the bits there exceed those at the next N by < PEAK_RISE (saturated);
  (c) plateau: the training loss of the peak runs at the last two logs within PLATEAU_TOL (relative);
  (d) learning rate: no size's best rate at its peak N at an edge of the grid (verdict.edge_check).
  4. [MoE, per k] per seed the geometric mean over MoE sizes of (MoE peak bits / total non-embedding params)
     divided by the same seed's dense figure at that size (log-log interpolation between the dense sizes at
     1,000 exposures; clamped to the nearest dense size outside their range, 3% and 1.5% away); paired t on
     the per-seed mean logs (verdict.paired, expect greater, margin log(1 / 1.3)). Claimed >= 1 / 1.3 = 0.77:
     reproduced if the 95% CI of the ratio lies above 0.77, not reproduced if below, else inconclusive.
     Per active parameter reported, not tested (the claim is per total parameter).
  Rule 4 rests on checks (a)-(d) on the MoE arm (its own slope, peak inside its N grid, plateau, rate inside
  {0.03, 0.1, 0.3}) and (b)-(d) on the dense arm at 1,000 exposures (the comparison is at matched size, so the
  dense bits/param need not be constant; its slope is rule 1's check).
  Rule 3 rests on (e) the setup can fail: at the largest N (above the parameter count) the mean fraction
  fitted is below 0.9.
"""

import dataclasses
import math
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import pandas as pd  # pylint: disable=wrong-import-position

from ffn_research import io as io_lib  # pylint: disable=wrong-import-position
from ffn_research import sweep  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

# Per scale. d_model, d_ffs: the model sizes; facts: the N grid (one program per (N, exposures)); max_facts:
# the largest N run per d_ff (the largest N only where the widest model needs it to bracket its peak);
# steps: optimizer steps per exposure count (batch = E N / steps); lrs: the learning-rate grid;
# rl_points: random-label N grid (its largest above the bare FFN's 1,153 parameters), rl_steps.
SETTINGS = {
    'smoke': dict(d_model=8, d_ffs=(8, 16, 32), facts=(64, 128), max_facts={}, relations=8, values=16,
                  steps={100: 20}, lrs=(0.03, 0.1, 0.3), seeds=3, rl_points=(64, 2048), rl_steps=100,
                  moe_d_es=(1, 2), moe_facts=(64, 128), moe_lrs=(0.03, 0.1, 0.3)),
    'quick': dict(d_model=16, d_ffs=(16, 32, 64), facts=(256, 512, 1024, 2048), max_facts={16: 1024, 32: 1024},
                  relations=16, values=256, steps={1000: 1000, 100: 400}, lrs=(0.01, 0.03, 0.1, 0.3), seeds=3,
                  rl_points=(256, 1024, 2048), rl_steps=2000, moe_d_es=(1, 2, 3), moe_facts=(512, 1024),
                  moe_lrs=(0.03, 0.1, 0.3)),
    'full': dict(d_model=16, d_ffs=(16, 32, 64), facts=(256, 512, 1024, 2048, 4096), max_facts={16: 2048, 32: 2048},
                 relations=16, values=256, steps={1000: 1000, 100: 400}, lrs=(0.01, 0.03, 0.1, 0.3), seeds=3,
                 rl_points=(128, 256, 512, 1024, 2048), rl_steps=4000, moe_d_es=(1, 2, 3), moe_facts=(512, 1024),
                  moe_lrs=(0.03, 0.1, 0.3)),
}
CLAIMS = {1000: 2.0, 100: 1.0}        # bits per parameter (Allen-Zhu & Li 2024)
MORRIS_BITS = 3.6                     # bits per parameter at saturation (Morris et al. 2025)
BITS_FACTOR = 1.25                    # rules 1, 2: CI inside [claim / 1.25, claim * 1.25]
SLOPE_MARGIN = 0.1                    # check (a): a CI excluding 1 still passes inside 1 ± 0.1
PEAK_RISE = 0.05                      # check (b): a peak at the largest N must rise < 5% over the next N
PLATEAU_TOL = 0.05                    # check (c): relative change of the training loss at the last two logs
MOE_EXPERTS, MOE_TOP_KS = 16, (1, 2)  # MoE arms: 16 experts of width moe_d_es, Switch router, dropless
MOE_FACTOR = 1.3                      # rule 4: MoE keeps at least 1 / 1.3 of dense bits per total parameter
RL_D_MODEL, RL_D_FF = 16, 64          # random labels: h d / 4 = 256
RL_PARAMS = RL_D_FF * (RL_D_MODEL + 2) + 1
RL_FIT_LEVEL = 0.9                    # rule 3
SEED, E, N, SIZE, LR = 'train.seed', 'exposures', 'facts', 'params', 'train.learning_rate'


def sweep_name(exposures: int, facts: int, top_k: int = 0) -> str:
  return f'moe{MOE_EXPERTS}_k{top_k}_e{exposures}_n{facts}' if top_k else f'e{exposures}_n{facts}'


def moe_exposures(s) -> int:
  return max(s['steps'])


def arm_names(s) -> dict[str, tuple[int, int, int]]:
  """Sweep name -> (top_k (0 = dense), exposures, N) for every memorization sweep."""
  out = {sweep_name(e, n): (0, e, n) for e in s['steps'] for n in s['facts']}
  out.update({sweep_name(moe_exposures(s), n, k): (k, moe_exposures(s), n) for k in MOE_TOP_KS for n in s['moe_facts']})
  return out


def _memorization_base(s, exposures: int, facts: int):
  c = default_config()
  m, t, tr = c.model, c.task, c.train
  m.arch, m.num_layers, m.tie_embeddings, m.freeze_embeddings = 'ffn_stack', 2, True, True
  m.d_model, m.activation = s['d_model'], 'relu'
  t.name, t.num_facts, t.num_relations, t.vocab_size = 'memorization', facts, s['relations'], s['values']
  tr.batch_size = exposures * facts // s['steps'][exposures]
  base.set_steps(tr, s['steps'][exposures])
  return c


def _moe_base(s, facts: int, top_k: int):
  """The dense memorization config with each FFN an MoE of MOE_EXPERTS experts of width d_ff (Switch-style
  softmax-then-top-k router, dropless, default load-balance and z losses)."""
  c = _memorization_base(s, moe_exposures(s), facts)
  e = c.model.moe
  e.num_experts, e.top_k, e.router, e.capacity_factor = MOE_EXPERTS, top_k, 'softmax_topk', 0.0
  e.dispatch = 'ragged'  # same numbers as sort; cheaper on CPU for 16 experts of width <= 3 (a dense masked product)
  return c


def _random_labels_base(s):
  c = default_config()
  c.task.name = 'random_labels'
  c.model.d_model, c.model.d_ff = RL_D_MODEL, RL_D_FF
  c.train.batch_size, c.train.learning_rate = 256, 1e-2
  base.set_steps(c.train, s['rl_steps'])
  return c


def sweeps(scale: str) -> list[base.SweepSpec]:
  s = SETTINGS[scale]
  seeds = sweep.values(SEED, range(s['seeds']))

  def grid(n):
    d_ffs = [f for f in s['d_ffs'] if n <= s['max_facts'].get(f, n)]
    return sweep.product(sweep.values('model.d_ff', d_ffs), sweep.values(LR, s['lrs']), seeds)
  out = [base.SweepSpec(sweep_name(e, n), _memorization_base(s, e, n), grid(n)) for e in s['steps'] for n in s['facts']]
  moe_grid = sweep.product(sweep.values('model.d_ff', s['moe_d_es']), sweep.values(LR, s['moe_lrs']), seeds)
  for k in MOE_TOP_KS:
    out += [base.SweepSpec(sweep_name(moe_exposures(s), n, k), _moe_base(s, n, k), moe_grid) for n in s['moe_facts']]
  out.append(base.SweepSpec('random_labels', _random_labels_base(s),
                            sweep.product(sweep.values('task.num_points', s['rl_points']), seeds)))
  return out


# --------------------------------------------------------------------------- measurements (pure)

def bits_of_fit(cross_entropy_bits: float, facts: int, values: int) -> float:
  """Bits stored by a fit with this total cross-entropy (bits) on N facts over V values (floored at 0)."""
  return max(0.0, facts * math.log2(values) - cross_entropy_bits)


def peaks(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
  """(every seed at the best learning rate per (E, size, N), every seed at the peak N per (E, size)); the rate
  and the peak are chosen on the mean over seeds, so each seed is read at the same point (no per-seed maximum)."""
  means = df.groupby([E, SIZE, N, LR], as_index=False)['bits_stored'].mean().assign(**{SEED: 0})
  pick = verdict.best_per_point(means, by=[E, SIZE, N], metric='bits_stored', mode='max')
  best = df.merge(pick[[E, SIZE, N, LR, f'best_{LR}']], on=[E, SIZE, N, LR])
  top = best.merge(pick.loc[pick.groupby([E, SIZE])['bits_stored'].idxmax(), [E, SIZE, N]], on=[E, SIZE, N])
  return best, top


def peak_inside_check(best: pd.DataFrame, exposures: int, rise: float = PEAK_RISE) -> verdict.Check:
  """Check (b): per size, the N with most bits (mean over seeds) is not the largest N, or barely rises there."""
  bad, where = [], []
  for size, g in best[best[E] == exposures].groupby(SIZE):
    m = g.groupby(N)['bits_stored'].mean().sort_index()
    where.append(f'{size} params: peak at N = {m.idxmax()}')
    if m.idxmax() == m.index[-1] and len(m) > 1 and m.iloc[-1] > (1 + rise) * m.iloc[-2]:
      bad.append(f'{size} params still rise {m.iloc[-1] / m.iloc[-2] - 1:.1%} at the largest N = {m.index[-1]}')
  return verdict.Check(f'{exposures} exposures: peak inside the N grid', not bad and bool(where),
                       '; '.join(bad or where) + f' (a peak at the largest N must rise < {rise:.0%} over the next)')


def regime_checks(top: pd.DataFrame, best: pd.DataFrame, exposures: int, lrs, label: str):
  """Checks (a)-(d) on one arm's peaks at one exposure count, and the per-seed slope verdict behind (a)."""
  g = top[top[E] == exposures]
  slope = verdict.slope_per_seed(g, x=SIZE, y='bits_stored', seed=SEED, claimed=1.0, margin=0.1, claim='slope')
  s_lo, s_hi = slope.ci
  proportional = bool(s_lo <= 1 <= s_hi or (1 - SLOPE_MARGIN <= s_lo and s_hi <= 1 + SLOPE_MARGIN))
  checks = [verdict.Check(f'{label}: bits proportional to params', proportional,
                          f'log-log slope of peak bits on params {slope.statistic:.3g} (95% CI [{s_lo:.3g}, '
                          f'{s_hi:.3g}], per seed); the CI must contain 1 or lie inside 1 ± {SLOPE_MARGIN:g}'),
            dataclasses.replace(peak_inside_check(best, exposures), name=f'{label}: peak inside the N grid'),
            verdict.plateau_check(f'{label}: plateau of the peak runs (training loss, last two logs)',
                                  g['loss_last'].to_numpy(), g['loss_previous'].to_numpy(), PLATEAU_TOL),
            verdict.edge_check(f'{label}: learning rate inside its grid at the peaks',
                               g.set_index(SIZE)[f'best_{LR}'], lrs)]
  return checks, slope


def capacity_verdict(top: pd.DataFrame, best: pd.DataFrame, exposures: int, lrs) -> verdict.Verdict:
  """Rules 1-2 with checks (a)-(d): peak bits per non-embedding parameter, CI over seeds of log means."""
  g = top[top[E] == exposures]
  claimed = CLAIMS[exposures]
  lo_ok, hi_ok = claimed / BITS_FACTOR, claimed * BITS_FACTOR
  per_seed = np.log(g['bits_stored'] / g[SIZE]).groupby(g[SEED]).mean()
  m, lo, hi = verdict.mean_ci(per_seed)
  test = 'per seed the geometric mean over sizes of peak bits / non-embedding params; t 95% CI over seeds'
  rule = f'reproduced if the 95% CI lies inside [{lo_ok:.3g}, {hi_ok:.3g}], not reproduced if outside, else inconclusive'
  claim = f'at {exposures} exposures per fact an FFN stores about {claimed:g} bits per (non-embedding) parameter at its peak'
  if len(per_seed) < 3 or g[SIZE].nunique() < 3:
    v = verdict.Verdict(claim, verdict.INCONCLUSIVE, math.exp(m) if len(per_seed) else math.nan, (math.nan,) * 2,
                        test, rule, len(per_seed), 'underpowered: < 3 seeds or < 3 sizes')
  else:
    se = float(np.std(per_seed, ddof=1) / math.sqrt(len(per_seed)))
    v = verdict.Verdict(claim, verdict.decide((math.exp(lo), math.exp(hi)), lo_ok, hi_ok), math.exp(m),
                        (math.exp(lo), math.exp(hi)), test, rule, len(per_seed),
                        p_value=verdict.decision_p(m, se, len(per_seed) - 1, math.log(lo_ok), math.log(hi_ok)))
  checks, slope = regime_checks(top, best, exposures, lrs, f'{exposures} exposures')
  extra = {'slope': slope.statistic, 'slope_ci_lo': slope.ci[0], 'slope_ci_hi': slope.ci[1]}
  return verdict.gate(dataclasses.replace(v, extra=extra), checks)


def random_labels_verdict(rl: pd.DataFrame) -> verdict.Verdict:
  """Rule 3 with check (e): the largest N (above the parameter count) must fall below the level."""
  at = rl[rl['task.num_points'] == RL_D_MODEL * RL_D_FF // 4]['fraction_fitted']
  v = verdict.threshold(at, level=RL_FIT_LEVEL, direction='above',
                        claim=f'a trained ReLU FFN (h = {RL_D_FF}, d = {RL_D_MODEL}) fits at least {RL_FIT_LEVEL:.0%} '
                              f'of N = h d / 4 = {RL_D_MODEL * RL_D_FF // 4} random real labels')
  top = rl[rl['task.num_points'] == rl['task.num_points'].max()]
  m, lo, hi = verdict.mean_ci(top['fraction_fitted'])
  n_top = int(top['task.num_points'].max()) if len(top) else 0
  return verdict.gate(v, [verdict.premise_check(
      'random labels: the setup can fail', m, (lo, hi), -math.inf, RL_FIT_LEVEL, what=f'fraction fitted at N = {n_top} ({n_top / RL_PARAMS:.2f} x the {RL_PARAMS} parameters)')])


def moe_pairs(moe_top: pd.DataFrame, dense_top: pd.DataFrame) -> pd.DataFrame:
  """Per (seed, MoE size): MoE peak bits per total non-embedding parameter and the same seed's dense figure at
  that size, interpolated log-log between the dense sizes (clamped to the nearest one outside their range)."""
  rows = []
  for seed, g in moe_top.groupby(SEED):
    d = dense_top[dense_top[SEED] == seed].sort_values(SIZE)
    if d.empty:
      continue
    x, y = np.log(d[SIZE].to_numpy(float)), np.log((d['bits_stored'] / d[SIZE]).to_numpy(float))
    for _, r in g.iterrows():
      rows.append({SEED: seed, SIZE: int(r[SIZE]), 'moe_bpp': r['bits_stored'] / r[SIZE],
                   'dense_bpp': math.exp(np.interp(math.log(r[SIZE]), x, y))})
  return pd.DataFrame(rows, columns=[SEED, SIZE, 'moe_bpp', 'dense_bpp'])


def moe_verdict(moe: tuple[pd.DataFrame, pd.DataFrame], dense: tuple[pd.DataFrame, pd.DataFrame], top_k: int,
                exposures: int, moe_lrs, dense_lrs) -> verdict.Verdict:
  """Rule 4 with checks (a)-(d) on the MoE arm and (b)-(d) on the dense arm: MoE / dense peak bits per total
  non-embedding parameter at matched size, paired by seed (verdict.paired on per-seed mean logs)."""
  (moe_best, moe_top), (dense_best, dense_top) = moe, dense
  moe_top, dense_top = moe_top[moe_top[E] == exposures], dense_top[dense_top[E] == exposures]
  r = moe_pairs(moe_top, dense_top)
  a, b = (np.log(r[c]).groupby(r[SEED]).mean() for c in ('moe_bpp', 'dense_bpp'))
  floor = 1 / MOE_FACTOR
  v = verdict.paired(a.to_numpy(), b.to_numpy(), expect='greater', margin=math.log(floor),
                     claim=f'an MoE of {MOE_EXPERTS} experts (top-{top_k}) stores at least 1/{MOE_FACTOR:g} = '
                           f'{floor:.0%} of the dense peak bits per total non-embedding parameter ({exposures} exposures)')
  v = dataclasses.replace(
      v, statistic=math.exp(v.statistic), ci=tuple(math.exp(c) for c in v.ci),
      test='per seed the geometric mean over MoE sizes of (MoE peak bits / total non-embedding params) / (dense, same '
           'seed, log-log interpolated at that size); paired t on the per-seed mean logs, 95% CI exponentiated',
      rule=f'reproduced if the 95% CI of the ratio lies above {floor:.3g}; not reproduced if it lies below; '
           f'otherwise, or with < 3 seeds, inconclusive')
  checks = (regime_checks(moe_top, moe_best, exposures, moe_lrs, f'MoE top-{top_k}')[0]
            + regime_checks(dense_top, dense_best, exposures, dense_lrs, f'dense at {exposures} exposures')[0][1:])
  return verdict.gate(v, checks)


# --------------------------------------------------------------------------- analysis

def _losses(run_dir: str) -> tuple[float, float]:
  """Training loss at the last two logs of a run (NaN where missing)."""
  losses = [r['loss'] for r in io_lib.read_metrics(os.path.join(run_dir, 'metrics.jsonl'))[0] if 'loss' in r]
  return (float(losses[-1]) if losses else math.nan), (float(losses[-2]) if len(losses) > 1 else math.nan)


def collect(results: dict[str, pd.DataFrame], outdir: str, scale: str) -> pd.DataFrame:
  """One row per finished memorization run: arm (top_k, 0 = dense), E, N, sizes (total and active non-embedding
  params), learning rate, seed, bits, training losses at the last two logs."""
  rows = []
  for name, (k, e, n) in arm_names(SETTINGS[scale]).items():
    for _, r in base.completed(results.get(name, pd.DataFrame(columns=['status']))).iterrows():
      last, previous = _losses(os.path.join(outdir, name, 'runs', r['name']))
      size, ffn = int(r['num_trainable_params']), int(r['num_ffn_params'])
      rows.append({'top_k': k, E: e, N: n, 'model.d_ff': int(r['model.d_ff']), LR: float(r[LR]), SEED: int(r[SEED]),
                   SIZE: size, 'active': size - ffn + int(r['num_active_ffn_params']), 'ffn_params': ffn,
                   'all_params': int(r['num_params']), 'bits_stored': float(r['bits_stored']),
                   'accuracy': float(r['accuracy']), 'loss_last': last, 'loss_previous': previous})
  return pd.DataFrame(rows)


def peak_table(top: pd.DataFrame) -> pd.DataFrame:
  """Per (E, size): peak bits and bits per non-embedding / FFN / all parameters, mean over seeds with t CIs."""
  rows = []
  for (e, size), g in top.groupby([E, SIZE]):
    row = {E: e, 'd_ff': int(g['model.d_ff'].iloc[0]), 'non-embedding params': size,
           'FFN params': int(g['ffn_params'].iloc[0]), 'all params': int(g['all_params'].iloc[0]),
           'peak N': int(g[N].iloc[0]), 'best lr': float(g[f'best_{LR}'].iloc[0]), 'seeds': len(g)}
    for name, den in [('peak bits', 1), ('bits/non-emb param', g[SIZE]), ('bits/FFN param', g['ffn_params']),
                      ('bits/param (all)', g['all_params'])]:
      m, lo, hi = verdict.mean_ci(g['bits_stored'] / den)
      row[name], row[f'{name} CI'] = m, f'[{lo:.4g}, {hi:.4g}]'
    rows.append(row)
  return pd.DataFrame(rows)


def plot_capacity(top: pd.DataFrame, best: pd.DataFrame, values: int, ctx: base.Context) -> list[base.Figure]:
  """Peak bits vs non-embedding params (with the reference lines), and best-lr bits vs N per size."""
  es = sorted(top[E].unique(), reverse=True)
  fig, axes = plt.subplots(2, len(es), figsize=(6.0 * len(es), 9.0), squeeze=False)
  for j, e in enumerate(es):
    ax, g = axes[0][j], top[top[E] == e]
    grid = np.geomspace(g[SIZE].min() / 1.5, g[SIZE].max() * 1.5, 20)
    for k, ls, label in [(MORRIS_BITS, ':', 'Morris et al. 2025'), (2.0, '-', 'Allen-Zhu & Li, 1,000 exp.'),
                         (1.0, '--', 'Allen-Zhu & Li, 100 exp.')]:
      ax.plot(grid, k * grid, 'k', ls=ls, lw=1, label=f'{k:g} bits/param ({label})')
    ax.scatter(g[SIZE], g['bits_stored'], s=12, alpha=0.5, label='peak per seed')
    t = verdict.summarize(g, [SIZE], ['bits_stored'])
    base.errorbar_ci(ax, t[SIZE], t['bits_stored_mean'], t['bits_stored_ci_lo'], t['bits_stored_ci_hi'],
                     label='mean, 95% CI')
    base.style_axes(ax, xlabel='non-embedding parameters', ylabel='peak bits stored (over N)', xscale='log',
                    xbase=2, yscale='log', title=f'{e} exposures per fact ({ctx.scale})')
    ax = axes[1][j]
    for size, gs in best[best[E] == e].groupby(SIZE):
      t = verdict.summarize(gs, [N], ['bits_stored'])
      base.errorbar_ci(ax, t[N], t['bits_stored_mean'], t['bits_stored_ci_lo'], t['bits_stored_ci_hi'],
                       label=f'{size} params')
    ns = np.array(sorted(best[N].unique()), float)
    ax.plot(ns, ns * math.log2(values), 'k:', lw=1, label='entropy N log2 V')
    base.style_axes(ax, xlabel='facts N', ylabel='bits stored (best rate, mean over seeds)', xscale='log', xbase=2,
                    yscale='log', title=f'{e} exposures: bits vs N per size')
  return [base.save_figure(fig, ctx.outdir, 'bits_vs_params.png',
                           'top: peak bits over N vs non-embedding parameters (dots: seeds; bars: mean, 95% CI) '
                           'with 2 and 1 bits/param (Allen-Zhu & Li) and 3.6 (Morris et al.); bottom: bits '
                           'stored vs N per size (best learning rate) with the entropy N log2 V')]


def moe_table(moe_tops: dict[int, pd.DataFrame], dense_top: pd.DataFrame) -> pd.DataFrame:
  """Per (top_k, size): peak bits per total and per active non-embedding parameter, and MoE / dense at that size."""
  rows = []
  for k, top in moe_tops.items():
    pairs = moe_pairs(top, dense_top)
    for size, g in top.groupby(SIZE):
      row = {'top_k': k, 'expert width': int(g['model.d_ff'].iloc[0]), 'total non-emb params': size,
             'active non-emb params': int(g['active'].iloc[0]), 'peak N': int(g[N].iloc[0]),
             'best lr': float(g[f'best_{LR}'].iloc[0]), 'seeds': len(g)}
      p = pairs[pairs[SIZE] == size]
      for name, values in [('peak bits', g['bits_stored']), ('bits/total param', g['bits_stored'] / g[SIZE]),
                           ('bits/active param', g['bits_stored'] / g['active']),
                           ('dense bits/param at this size', p['dense_bpp']), ('MoE / dense', p['moe_bpp'] / p['dense_bpp'])]:
        m, lo, hi = verdict.mean_ci(values)
        row[name], row[f'{name} CI'] = m, f'[{lo:.4g}, {hi:.4g}]'
      rows.append(row)
  return pd.DataFrame(rows)


def plot_moe(moe_tops: dict[int, pd.DataFrame], dense_top: pd.DataFrame, ctx: base.Context) -> base.Figure:
  """Peak bits per total (left) and per active (right) non-embedding parameter: dense vs the MoE arms."""
  fig, axes = plt.subplots(1, 2, figsize=(12.0, 4.5))
  arms = [('dense', dense_top.assign(active=dense_top[SIZE]))] + [(f'MoE {MOE_EXPERTS} experts, top-{k}', t)
                                                                   for k, t in moe_tops.items()]
  for ax, x, label in [(axes[0], SIZE, 'total'), (axes[1], 'active', 'active')]:
    for name, t in arms:
      t = t.assign(bpp=t['bits_stored'] / t[x])
      m = verdict.summarize(t, [x], ['bpp'])
      base.errorbar_ci(ax, m[x], m['bpp_mean'], m['bpp_ci_lo'], m['bpp_ci_hi'], label=name)
    ax.axhline(2.0, color='k', lw=1, label='2 bits/param (Allen-Zhu & Li)')
    base.style_axes(ax, xlabel=f'{label} non-embedding parameters', ylabel=f'peak bits per {label} parameter',
                    xscale='log', xbase=2, title=f'MoE vs dense at {moe_exposures(SETTINGS[ctx.scale])} exposures ({ctx.scale})')
  return base.save_figure(fig, ctx.outdir, 'moe_vs_dense.png',
                          'peak bits over N per total (left) and per active (right) non-embedding parameter, dense '
                          'and MoE arms (mean over seeds, 95% CI)')


def plot_random_labels(rl: pd.DataFrame, ctx: base.Context) -> base.Figure:
  fig, ax = plt.subplots(figsize=(6.0, 4.2))
  t = verdict.summarize(rl, ['task.num_points'], ['fraction_fitted'])
  base.errorbar_ci(ax, t['task.num_points'], t['fraction_fitted_mean'], t['fraction_fitted_ci_lo'],
                   t['fraction_fitted_ci_hi'], label='trained ReLU FFN (mean, 95% CI)')
  ax.axvline(RL_D_MODEL * RL_D_FF / 4, color='k', label='N = h d / 4 (Bubeck et al.)')
  ax.axvline(RL_PARAMS, color='k', ls='--', label=f'N = {RL_PARAMS} parameters')
  base.style_axes(ax, xlabel='N random labels', ylabel='fraction fitted (|error| < 0.1)', xscale='log', xbase=2,
                  title=f'random labels, h = {RL_D_FF}, d = {RL_D_MODEL} ({ctx.scale})')
  return base.save_figure(fig, ctx.outdir, 'random_labels.png',
                          'fraction of random labels fitted vs N, with h d / 4 and the parameter count')


def analyze_stats(df: pd.DataFrame, rl: pd.DataFrame, ctx: base.Context) -> base.Analysis:
  """Verdicts, tables and figures from collect's frame and the random-label results (pure in the frames)."""
  s = SETTINGS[ctx.scale]
  arm = df['top_k'] if 'top_k' in df else pd.Series(0, index=df.index)
  best, top = peaks(df[arm == 0])
  verdicts = [capacity_verdict(top, best, e, s['lrs']) for e in sorted(s['steps'], reverse=True)]
  verdicts.append(random_labels_verdict(rl))
  moe = {k: peaks(df[arm == k]) for k in MOE_TOP_KS if (arm == k).any()}
  verdicts += [moe_verdict(moe[k], (best, top), k, moe_exposures(s), s['moe_lrs'], s['lrs']) for k in moe]
  tables = [base.Table('Peak over N of the bits stored, per exposure count and size (mean over seeds, 95% CI)',
                       peak_table(top)),
            base.Table('Bits stored per N at the learning rate best in the seed mean (mean over seeds, 95% CI)',
                       verdict.summarize(best, [E, SIZE, N], ['bits_stored', 'accuracy'])),
            base.Table('Random labels: fraction of N points fitted, mean and 95% CI',
                       verdict.summarize(rl, ['task.num_points'], ['fraction_fitted', 'eval_loss']))]
  dense_top = top[top[E] == moe_exposures(s)]
  if moe:
    tables += [base.Table(f'MoE arms ({MOE_EXPERTS} experts): peak over N per total and per active non-embedding '
                          f'parameter, and MoE / dense at matched total size (mean over seeds, 95% CI)',
                          moe_table({k: t for k, (_, t) in moe.items()}, dense_top)),
               base.Table('MoE arms: bits stored per N at the learning rate best in the seed mean',
                          verdict.summarize(pd.concat([b.assign(top_k=k) for k, (b, _) in moe.items()]),
                                            ['top_k', SIZE, N], ['bits_stored', 'accuracy']))]
  figures = plot_capacity(top, best, s['values'], ctx) + [plot_random_labels(rl, ctx)]
  if moe:
    figures.append(plot_moe({k: t for k, (_, t) in moe.items()}, dense_top, ctx))
  head = verdicts[0]
  morris = f'{head.statistic / MORRIS_BITS:.2f}x Morris et al.\'s {MORRIS_BITS:g}'
  notes = [f'peak bits per non-embedding parameter at {e} exposures = {v.statistic:.3g} = {v.statistic / MORRIS_BITS:.2f} '
           f'x Morris et al. 2025\'s {MORRIS_BITS:g} (reference line, not a verdict); log-log slope '
           f'{v.extra.get("slope", math.nan):.3g}' for e, v in zip(sorted(s['steps'], reverse=True), verdicts)]
  headline = (f'{head.statistic:.3g} peak bits per non-embedding parameter at {max(s["steps"])} exposures '
              f'(95% CI [{head.ci[0]:.3g}, {head.ci[1]:.3g}]; claimed 2, {morris}); {head.outcome}')
  headline += ''.join(f'; MoE top-{k} / dense per total parameter {v.statistic:.3g} (95% CI [{v.ci[0]:.3g}, '
                      f'{v.ci[1]:.3g}]; claimed >= {1 / MOE_FACTOR:.3g}): {v.outcome}' for k, v in zip(moe, verdicts[len(verdicts) - len(moe):]))
  return base.Analysis(verdicts=verdicts, headline=headline, tables=tables, figures=figures, notes=notes)


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  a = analyze_stats(collect(results, ctx.outdir, ctx.scale), base.completed(results['random_labels']), ctx)
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  if any(failed.values()):
    a.notes.append(f'runs not completed (excluded): {failed}')
  return a


ABLATION = base.Ablation(
    name='memorization_capacity',
    claim=('At saturation a model stores about 2 bits of knowledge per parameter after 1,000 exposures per fact and '
           'about 1 bit after 100, read at the peak over data sizes (Allen-Zhu & Li 2024); Morris et al. 2025 '
           'measure about 3.6 bits per parameter for GPT-style models on random bitstrings.'),
    citation=('Allen-Zhu & Li 2024, Physics of Language Models Part 3.3; Morris et al. 2025, How much do language '
              'models memorize?; Bubeck, Eldan, Lee & Mikulincer 2020 (h d / 4 random labels)'),
    published='2 bits/param at 1,000 exposures, 1 bit/param at 100 (Allen-Zhu & Li); 3.6 bits/param (Morris et al.)',
    sweeps=sweeps, analyze=analyze,
    setup=('Task `memorization` (N facts (subject, relation) -> object, V = 256 objects, train = test); `ffn_stack` '
           'with 2 residual ReLU FFN blocks, frozen random tied embeddings, d_model 16, d_ff swept; per (N, '
           'exposures) one vmapped program over d_ff x learning rate {0.01, 0.03, 0.1, 0.3} x seeds; Adam, warmup, cosine '
           'decay; fixed steps per exposure count, batch = E N / steps. Random labels: bare FFN d 16, h 64, Adam 1e-2.'))
