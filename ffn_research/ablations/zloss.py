"""load_balancing's z-loss test (its verdict 3): a training failure induced by the Adam rate, the pilot that fixes
the test rate on seeds no verdict reads, and the verdict at that rate with its premises.

A run fails when it diverges (non-finite loss or the loop's blow-up rule) or completes with its held-out relative MSE
at or above FAILED_MSE (a task outcome; never the size of the router logits the z-loss penalises); a completed run
without one is missing. The arms log every Z_LOG_EVERY steps at every budget, so the blow-up rule's
patience (train.blowup_patience = 3 logged chunks) is the same number of steps at T/4, T/2 and T. The test arm
(points none / z_loss / frozen / float32) runs at the one rate the pilot fixes over its budgets (`pilot_rate`,
its Arm.rate_from: planned after the pilot has run; no remedy doubles the pilot, so none moves the rate). A
refutation needs two positive controls: the frozen router (no
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
MARGINAL = (0.1, 0.9)  # the test rate: the smallest whose pilot failed fraction lies in this band at every budget
# A completed run failed at or above this held-out relative MSE: inside the gap between the pilot's two modes at rates
# <= 0.3 (healthy <= 0.19, router z at its floor; broken >= 0.39, the router's softmax saturated, z > 10), chosen with
# the pilot seen (any value in [0.2, 0.39] classifies its 384 runs alike); 1, the mean predictor's, until the design
# review of 2026-11-30 (it counted broken runs ending at 0.39-0.99 as trained). Reported beside: at 1, and diverged.
FAILED_MSE = 0.3
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
  """The points verdict 3's remedies act on: the test arm's (the pilot, which fixes its rate, is never doubled)."""
  del scale
  return tuple(f'{UNSTABLE}: {p}' for p in POINTS)


def with_unstable(sel: pd.DataFrame, prefix: str = UNSTABLE) -> pd.DataFrame:
  """The rows of the arms named `prefix`... that completed or diverged, with `unstable` = 1 where the run failed
  (diverged, or completed with held-out relative MSE not below FAILED_MSE), else 0 (a run that stopped for another
  reason is missing, not unstable)."""
  z = sel[sel['arm'].astype(str).str.startswith(prefix) & sel['status'].isin(('completed', 'diverged'))].copy()
  rel = z['eval_relative_mse'].to_numpy(float) if 'eval_relative_mse' in z else np.full(len(z), math.nan)
  diverged = (z['status'] == 'diverged').to_numpy()
  keep = diverged | np.isfinite(rel)
  z, rel, diverged = z[keep].copy(), rel[keep], diverged[keep]
  z['unstable'] = (diverged | (rel >= FAILED_MSE)).astype(float)
  z['failed_at_1'] = (diverged | (rel >= 1.0)).astype(float)  # reported: the mean predictor's level
  z['diverged'] = diverged.astype(float)  # reported: divergence only
  return z


def router_z(run_dir: str) -> dict[str, float]:
  """A completed z-loss run's router z (ROUTER_Z), the mean over the logs of its second half."""
  with open(os.path.join(run_dir, 'metrics.jsonl')) as f:
    logs = [json.loads(line) for line in f if line.strip()]
  steps = [r['step'] for r in logs if ROUTER_Z in r]
  late = [float(r[ROUTER_Z]) for r in logs if ROUTER_Z in r and r['step'] > max(steps, default=0) / 2]
  return {'router_z': float(np.mean(late)) if late else math.nan}


def pilot_fractions(sel: pd.DataFrame) -> pd.Series:
  """Per rate, the failed fraction of the pilot's seeds (no z-loss), over the budgets in `sel`."""
  z = with_unstable(sel, PILOT)
  return z.groupby(LR)['unstable'].mean() if len(z) else pd.Series(dtype=float)


def test_rate(sel: pd.DataFrame) -> float:
  """The smallest pilot rate whose failed fraction lies inside MARGINAL at every budget it ran (nan: none), so that
  every rung of the test arm's ladder has failures to prevent and runs that train."""
  z = with_unstable(sel, PILOT)
  if not len(z):
    return math.nan
  frac = z.groupby([LR, STEPS])['unstable'].mean()
  inside = ((frac >= MARGINAL[0]) & (frac <= MARGINAL[1])).groupby(level=0).all()
  return float(inside[inside].index.min()) if inside.any() else math.nan


def pilot_rate(frame: pd.DataFrame) -> float:
  """The test arm's rate (Arm.rate_from): `test_rate` of the pilot over every budget it ran (nan: none)."""
  z = frame[frame['arm'].astype(str).str.startswith(PILOT)] if 'arm' in frame else frame.iloc[:0]
  return test_rate(z) if len(z) else math.nan


def lever_check(v: stats.Verdict, sel: pd.DataFrame, lr: float) -> stats.Check:
  """A refutation's control: the z-loss lowers the router's logits (ln router_z, z_loss minus none, paired by seed
  over the seeds where both completed healthy, CI below 0): the lever it pulls moves. Read on healthy pairs only: a
  broken run's router z (10 to 1,000+ against about 4.5) would swing the mean with failures the verdict counts."""
  z = with_unstable(sel)
  z = z.assign(ln_z=np.log(z['router_z'].astype(float)) if 'router_z' in z else math.nan)
  done = z[(z['status'] == 'completed') & (z['unstable'] == 0)]
  lever = rules_lib.paired(
    *base.paired_by_seed(done, f'{UNSTABLE}: z_loss', f'{UNSTABLE}: none', 'ln_z'), expect='less', claim=''
  )
  return checks.refutation_control(
    v,
    'premise: the z-loss lowers the router logits (the lever it pulls moves)',
    f'ln router z (second half of training), z-loss minus none, on the seeds where both trained, at {lr:g}',
    lever,
  )


def verdict(sel: pd.DataFrame, scale: str) -> stats.Verdict:
  """Rule 3 at the rate the pilot fixed over its budgets (the test arm's one rate), gated on its premises. The
  router control compares failures at relative MSE >= 1 (`failed_at_1`): the frozen router's runs end at its fit
  level, 0.16-0.36, which straddles FAILED_MSE (seen in the run of 2026-11-30; changes/)."""
  z = with_unstable(sel)
  rates = sorted(set(z[LR].astype(float)))
  lr = rates[0] if len(rates) == 1 else math.nan
  none = z[z['point'] == f'{UNSTABLE}: none']['unstable'].to_numpy(float)
  exists = stats.Check(
    'premise: a rate where the no-z-loss pilot is unstable',
    math.isfinite(lr),
    f'test rate {lr:g}, fixed by the pilot over its budgets; the failed fraction of the pilot seeds per rate at '
    'this budget: '
    + ', '.join(f'{r:g}: {f:.2f}' for r, f in pilot_fractions(sel).items())
    + f'; needed: some rate with its fraction in [{MARGINAL[0]:g}, {MARGINAL[1]:g}] at every budget',
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
    f'relative MSE >= {FAILED_MSE:g}) with a bfloat16 router at the smallest rate that fails a marginal share of '
    'separate pilot seeds without it at every budget',
  )
  router = rules_lib.paired_binary(
    *base.paired_by_seed(z, f'{UNSTABLE}: none', f'{UNSTABLE}: frozen', 'failed_at_1'), expect='greater', claim=''
  )
  control = checks.refutation_control(
    v,
    "premise: the instability is the router's (the learned router fails more often than the frozen one)",
    f'failed fraction at relative MSE >= 1, learned minus frozen router, no z-loss, at {lr:g}',
    router,
  )
  measured = [stats.as_premise(marginal), control, lever_check(v, sel, lr)]
  premises = [stats.as_premise(exists)] + (measured if math.isfinite(lr) else [])
  return dataclasses.replace(stats.gate(v, premises), points=points(scale))
