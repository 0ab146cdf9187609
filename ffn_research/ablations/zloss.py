"""load_balancing's z-loss test (its verdict 3): a training failure induced by the Adam rate, the pilot that fixes
the test rate on seeds no verdict reads, and the verdict at that rate with its premises.

A run fails when it diverges (non-finite loss or the loop's blow-up rule) or completes with its held-out MSE at or
above the targets' variance (relative MSE >= FAILED_MSE: no better than predicting the mean); never by the size of
the router logits the z-loss penalises. The arms log every Z_LOG_EVERY steps at every budget, so the blow-up rule's
patience (train.blowup_patience = 3 logged chunks) is the same number of steps at T/4, T/2 and T. The test arm
(points none / z_loss / frozen / float32) runs at the one rate the pilot fixes at its longest budget (`pilot_rate`,
its Arm.rate_from: planned after the pilot has run). A refutation needs two positive controls: the frozen router (no
z-loss) fails less often (the failure involves the router, so a fix of the router's logits has something to fix),
and the z-loss lowers the router's logits (`router_z`: the lever it pulls moves). The float32 router is reported:
whether the failure is the bfloat16 router's."""

import dataclasses
import json
import math
import os

import numpy as np
import pandas as pd

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import checks
from ffn_research.ablations import regime as regime_lib

Z_COEF = 1e-3  # Zoph et al. 2022
Z_KEY = 'model.moe.z_loss_coef'
PREMISE_FRACTION = 0.25  # the test rate: the smallest with this failed fraction of the pilot's seeds
FAILED_MSE = 1.0  # a completed run failed at or above this held-out relative MSE (the mean predictor's)
ROUTER_Z = 'aux/router_z'  # the logged mean squared logsumexp of the router logits, what the z-loss penalises
UNSTABLE, PILOT = 'unstable', 'pilot_lr'  # the test arm's name, the pilot arms' prefix
LR, STEPS = regime_lib.LR, regime_lib.STEPS
PILOT_FIRST_SEED = 1000  # the pilot's seeds: no other arm runs them
# The pilot's Adam rates per scale: the z-loss design's grid, at full extended by 0.5, 1 and 3 (the next step its
# scope named, run on 2026-11-29) and by 1.5 and 2 (a cold design review: no rate between 1 and 3).
PILOT_LRS = {
  'smoke': (0.1, 0.3),
  'quick': (0.1, 0.14, 0.2, 0.3),
  'full': (0.07, 0.1, 0.12, 0.14, 0.17, 0.2, 0.25, 0.3, 0.5, 1.0, 1.5, 2.0, 3.0),
}
PILOT_SEEDS = {'smoke': 3, 'quick': 8, 'full': 16}
Z_SEEDS = {'smoke': 4, 'quick': 16, 'full': 64}  # the z-loss test's seeds (issue 46: >= 64 at full)
Z_LOG_EVERY = {'smoke': 3, 'quick': 25, 'full': 50}  # the z-loss arms' steps per logged chunk, at every budget
POINTS = {  # the z-loss test's points: without it, with it, the frozen router (a refutation's control), float32
  'none': {Z_KEY: 0.0},
  'z_loss': {Z_KEY: Z_COEF},
  'frozen': {Z_KEY: 0.0, 'model.moe.freeze_router': True},
  'float32': {Z_KEY: 0.0, 'model.moe.router_dtype': 'float32'},
}


def budget(scale: str):
  """The z-loss arms' budgets: Z_LOG_EVERY steps per logged chunk at every budget (the blow-up rule's patience)."""
  return lambda steps: {**base.budget(steps), 'train.log_every': Z_LOG_EVERY[scale]}


def points(scale: str) -> tuple[str, ...]:
  """Every point verdict 3 reads: the test arm's, and the pilot's."""
  return (*(f'{UNSTABLE}: {p}' for p in POINTS), *(f'{PILOT}{r:g}: none' for r in PILOT_LRS[scale]))


def with_unstable(sel: pd.DataFrame, prefix: str = UNSTABLE) -> pd.DataFrame:
  """The rows of the arms named `prefix`... that completed or diverged, with `unstable` = 1 where the run failed
  (diverged, or completed with held-out relative MSE not below FAILED_MSE), else 0 (a run that stopped for another
  reason is missing, not unstable)."""
  z = sel[sel['arm'].astype(str).str.startswith(prefix) & sel['status'].isin(('completed', 'diverged'))].copy()
  rel = z['eval_relative_mse'].astype(float) if 'eval_relative_mse' in z else pd.Series(math.nan, index=z.index)
  z['unstable'] = ((z['status'] == 'diverged') | ~(rel < FAILED_MSE)).astype(float)
  return z


def router_z(run_dir: str) -> dict[str, float]:
  """A completed z-loss run's router z (ROUTER_Z), the mean over the logs of its second half."""
  with open(os.path.join(run_dir, 'metrics.jsonl')) as f:
    logs = [json.loads(line) for line in f if line.strip()]
  steps = [r['step'] for r in logs if ROUTER_Z in r]
  late = [float(r[ROUTER_Z]) for r in logs if ROUTER_Z in r and r['step'] > max(steps, default=0) / 2]
  return {'router_z': float(np.mean(late)) if late else math.nan}


def pilot_fractions(sel: pd.DataFrame) -> pd.Series:
  """Per rate, the unstable fraction of the pilot's seeds (no z-loss)."""
  z = with_unstable(sel, PILOT)
  return z.groupby(LR)['unstable'].mean() if len(z) else pd.Series(dtype=float)


def test_rate(sel: pd.DataFrame) -> float:
  """The smallest rate at which >= PREMISE_FRACTION of the pilot's seeds are unstable (nan: none)."""
  frac = pilot_fractions(sel)
  hit = frac[frac >= PREMISE_FRACTION]
  return float(hit.index.min()) if len(hit) else math.nan


def pilot_rate(frame: pd.DataFrame) -> float:
  """The test arm's rate (Arm.rate_from): `test_rate` of the pilot at the longest budget it ran (nan: none)."""
  z = frame[frame['arm'].astype(str).str.startswith(PILOT)] if 'arm' in frame else frame.iloc[:0]
  return test_rate(z[z[STEPS] == z[STEPS].max()]) if len(z) else math.nan


def lever_check(v: stats.Verdict, sel: pd.DataFrame, lr: float) -> stats.Check:
  """A refutation's control: the z-loss lowers the router's logits (ln router_z, z_loss minus none, paired by seed
  over the runs of both that completed, CI below 0): the lever it pulls moves."""
  logs = sel.assign(ln_z=np.log(sel['router_z'].astype(float))) if 'router_z' in sel else sel.assign(ln_z=math.nan)
  done = logs[logs['status'] == 'completed']
  lever = rules_lib.paired(
    *base.paired_by_seed(done, f'{UNSTABLE}: z_loss', f'{UNSTABLE}: none', 'ln_z'), expect='less', claim=''
  )
  return checks.refutation_control(
    v,
    'premise: the z-loss lowers the router logits (the lever it pulls moves)',
    f'ln router z (second half of training), z-loss minus none, completed runs paired by seed, at {lr:g}',
    lever,
  )


def verdict(sel: pd.DataFrame, scale: str) -> stats.Verdict:
  """Rule 3 at the rate the pilot fixed at its longest budget (the test arm's one rate), gated on its premises."""
  z = with_unstable(sel)
  rates = sorted(set(z[LR].astype(float)))
  lr = rates[0] if len(rates) == 1 else math.nan
  none = z[z['point'] == f'{UNSTABLE}: none']['unstable'].to_numpy(float)
  exists = stats.Check(
    'premise: a rate where the no-z-loss pilot is unstable',
    math.isfinite(lr),
    f'test rate {lr:g}, fixed by the pilot at its longest budget; the failed fraction of the pilot '
    'seeds per rate at this budget: '
    + ', '.join(f'{r:g}: {f:.2f}' for r, f in pilot_fractions(sel).items())
    + f'; needed: >= {PREMISE_FRACTION:g} at some rate',
  )
  marginal = stats.range_check(
    f"premise: marginal instability at the test rate {lr:g} (the no-z-loss failed fraction of the verdict's "
    'seeds off its floor 0 and its ceiling 1: some runs fail, some train)',
    none,
    floor=0.0,
    ceiling=1.0,
  )
  v = rules_lib.paired_binary(
    *base.paired_by_seed(z, f'{UNSTABLE}: z_loss', f'{UNSTABLE}: none', 'unstable'),
    expect='less',
    claim=f'the router z-loss ({Z_COEF:g}) stabilises training: per seed, fewer failed runs (diverged, or held-out '
    f'MSE no better than the mean) with a bfloat16 router at the smallest rate that fails >= {PREMISE_FRACTION:g} '
    'of separate pilot seeds without it',
  )
  router = rules_lib.paired_binary(
    *base.paired_by_seed(z, f'{UNSTABLE}: none', f'{UNSTABLE}: frozen', 'unstable'), expect='greater', claim=''
  )
  control = checks.refutation_control(
    v,
    "premise: the instability is the router's (the learned router fails more often than the frozen one)",
    f'failed fraction, learned minus frozen router, no z-loss, at {lr:g}',
    router,
  )
  measured = [stats.as_premise(marginal), control, lever_check(v, sel, lr)]
  premises = [stats.as_premise(exists)] + (measured if math.isfinite(lr) else [])
  return dataclasses.replace(stats.gate(v, premises), points=points(scale))
