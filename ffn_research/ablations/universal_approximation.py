"""universal_approximation: does the sup error of a trained width-N ReLU FFN on x^2 fall as N^-2?

Theory (docs/references.md#equal-piece-optimum-for-x-squared): a width-N ReLU layer on a 1-D
input is piecewise linear with at most N kinks (N + 1 pieces; N pieces are guaranteed to be
reachable), and the best sup-norm error of a K-piece linear approximation of x^2 on [-1, 1] is
1/(2 K^2). So error *can* fall as N^-2; whether training finds it is the question (Adcock &
Dexter 2020 and Hanin & Rolnick 2019 report trained nets falling short).

Setup. Task `function` (x^2 on [-1, 1]), NUM_TRAIN = 16,384 training points drawn uniformly by the
run's seed (the task default 1,024 fails the data premise below), sup error on the task's 8,193-point
grid; bare FFN, d_model 1, Adam with warmup and cosine decay, batch 256 (configs/regression.py).
Arms: `relu_width` (points N = 2 ... 512 ReLU units), `kinks` (the same widths, model.arch='kinks': the width-N ReLU
FFN parametrised by its kink positions, each trained directly, its units facing alternately right and left;
models/toy.py) and `controls` (points `abs`: |x| with 2 ReLU units, exact; `bilinear`: x^2 with 1 bilinear unit,
exact; `swiglu`: x^2 with 1 swiglu unit, approximate). The
regime policy (ablations/regime.py) tunes the rate per point on the mean over seeds of the final training
loss (`tuning_loss`; losses below LOSS_FLOOR = 1e-13, float32 rounding of values near 1, tie and the
smallest tied rate wins: an exact control reaches ~1e-15 at several rates), never on the sup error; it
extends the rate grid beyond an edge and doubles the budget T until each verdict's statistic is stable.
Full scale: rates 1e-4 ... 1e-1 (half-decades) to start, T = 10,000 steps, 5 seeds, up to four doublings of
T (160,000 steps: the slope was still steepening at 40,000) within 3,600 reference-seconds. An existence claim's
`not reproduced` stands only on a settled ladder at the largest budget the regime allows, every doubling spent
(ablations/checks.stability): before that the loop doubles T for the verdict's points while the cap allows and the
verdict is inconclusive, so a refutation comes from the declared best effort or not at all.

Definitions (fixed before the run):
  collapsed   sup error >= COLLAPSE_ERROR = 1/8, the best error of any function with one kink (two
              pieces): the net does no better than 0 or 1 working kinks. Excluded from every fit.
  fitted N    N >= MIN_FIT_WIDTH = 8.
  baselines   least squares (numpy.linalg.lstsq, float64) of x^2 on the run's own training points in the
              basis {1, x, ReLU(x - t_j), j = 1..N}, sup error on the same grid. `equal`: t_j = -1 + 2j/(N+1);
              `random`: t_j iid uniform on [-1, 1] from numpy default_rng((seed, N)), a net whose first
              layer never moves from a random spread of kinks. Where pieces hold too few points lstsq's
              minimum-norm solution decides.

Verdicts (rules fixed before the run; Holm over all six), each with its kind (how the runner judges its budget
ladder T/4, T/2, T) and its premise (a positive control computed from the same selection, role stats.PREMISE):
  1. slope of log sup error on log N fitted per seed over the fitted N, collapsed runs excluded
     (rules_lib.slope_per_seed, CI over seeds): claimed -2 ± 0.25. Kind: existence ("error *can* fall as N^-2").
     Premise: the data premise below.
  2. per seed, slope of the trained nets minus slope of the `random` baseline on the same N; claim
     "training falls at least as fast as least squares on random fixed kinks": mean below +0.25. Kind:
     existence (what training can find). Premise: the data premise below.
  6. as 1, on the `kinks` arm: the sup error of width-N ReLU FFNs trained with their kink positions as parameters
     falls as N^-2. Kind: existence (a best effort at the same function class). Premises: the data premise (on the
     arm's own rows) and `kinks_construction_check`: the arm can express the equal-piece interpolant of x^2, whose
     sup error 1/(N + 1)^2 falls with slope -2 over the fitted N (an explicit construction, tests/test_kinks.py).
  3.-5. controls: mean sup error over seeds below 1e-2 (|x|, bilinear, swiglu), each at its own rate; the t CI
     intersected with [0, inf) (an error is >= 0: bounds (0, inf)). Kind: existence (training can reach a
     representation the arm has). Premise: the arm can express the target below 1e-2 (`construction_check`: an explicit
     construction through the arm's units, |x| = ReLU(x) + ReLU(-x), x^2 = (x)(x), x^2 ~ (2/a) x silu(a x) with
     sup error tanh(a/2), evaluated on the grid); for |x| and swiglu also that training works at this budget
     (`optimiser_check`: the bilinear control's mean sup error, t CI within [0, inf), below 1e-2 in the same selection).
Verdicts 1, 2 and 6 are gated on: at most MAX_COLLAPSED = 20% of the runs collapsed at every fitted N; no
run they read below the proven grid lower bound (`grid_lower_bound`; a run below it is a bug in the
metric); the data premise (role PREMISE): the `equal` baseline's per-seed slope has its CI inside
[-2.25, -1.75] (the training points pin x^2 finely enough that a fit to them can show N^-2).
History of this ablation: docs/results/universal_approximation/history.md.
"""

import dataclasses
import functools
import json
import math
import os

import ml_collections
import numpy as np
import pandas as pd

from ffn_research import io as io_lib
from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research import train
from ffn_research.ablations import base
from ffn_research.ablations import regime as regime_lib
from ffn_research.ablations.changes.universal_approximation import CHANGES
from ffn_research.config import default_config

WIDTHS = {
  'smoke': (2, 8, 16, 32),
  'quick': (2, 4, 8, 16, 32, 64, 128, 256, 512),
  'full': (2, 4, 8, 16, 32, 64, 128, 256, 512),
}
NUM_TRAIN = 16384  # training points (the task default is 1,024; see the data premise)
GRID_SIZE = default_config().task.grid_size  # the sup error's evaluation grid (8,193 points)
RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)  # the starting grid at quick and full; the policy extends it
CLAIMED_SLOPE, SLOPE_MARGIN = -2.0, 0.25
MIN_FIT_WIDTH = 8  # slopes are fitted over N >= this
COLLAPSE_ERROR = 1.0 / 8  # best sup error with one kink (two pieces): at or above it, a run collapsed
MAX_COLLAPSED = 0.2  # at most this fraction of runs collapsed at every fitted N
CONTROL_LEVEL = 1e-2  # controls: exact representations should train below this sup error
LOSS_FLOOR = 1e-13  # tuning: final losses below this tie (float32 rounding, (3 ulps at 1)^2, not fit)
SEED, N, LR, STEPS = regime_lib.SEED, 'N', regime_lib.LR, regime_lib.STEPS
RELU, KINKS, CONTROLS_ARM = 'relu_width', 'kinks', 'controls'
WIDTH_ARMS = (RELU, KINKS)  # the arms whose points are the widths N
CONTROLS = {
  'abs': ('|x|, 2 ReLU units (exact)', {'task.function': 'abs', 'model.d_ff': 2}),
  'bilinear': ('x^2, 1 bilinear unit (exact)', {'model.activation': 'bilinear', 'model.d_ff': 1}),
  'swiglu': ('x^2, 1 swiglu unit (approximate)', {'model.activation': 'swiglu', 'model.d_ff': 1}),
}
ERROR_BOUNDS = (0.0, math.inf)  # a sup error is >= 0: its t intervals intersected with [0, inf) (stats.mean_ci bounds)
SWIGLU_GATE = 1e-3  # the swiglu construction's gate slope a: (2/a) x silu(a x) = 2 x^2 sigmoid(a x), error tanh(a/2)


def _silu(z):
  return z / (1.0 + np.exp(-z))


CONSTRUCTIONS = {  # control -> (the construction in words, its output on x through the arm's units, the target)
  'abs': ('ReLU(x) + ReLU(-x) (2 units)', lambda x: np.maximum(x, 0.0) + np.maximum(-x, 0.0), np.abs),
  'bilinear': ('(x)(x) (1 unit, gate and value both x)', lambda x: x * x, np.square),
  'swiglu': (
    f'(2/a) silu(a x) x with a = {SWIGLU_GATE:g} (1 unit)',
    lambda x: (2.0 / SWIGLU_GATE) * _silu(SWIGLU_GATE * x) * x,
    np.square,
  ),
}


# --------------------------------------------------------------------------- theory and baselines (pure)


def grid_lower_bound(n, grid_size: int = GRID_SIZE):
  """A proven lower bound on the *grid* sup error of any width-n ReLU layer on x^2.

  At most n + 1 pieces, so one piece spans at least 2/(n+1); the grid points inside it span
  L >= 2/(n+1) - 2h (h the grid spacing) and one of them lies within h/2 of their midpoint.
  The best linear fit of x^2 on three points a < c < b has sup error (c-a)(b-c)/2, so the grid
  error is at least ((L/2)^2 - (h/2)^2)/2. Without the grid terms this is 1/(2(n+1)^2).
  """
  h = 2.0 / (grid_size - 1)
  length = 2.0 / (np.asarray(n, float) + 1) - 2 * h
  return np.maximum(((length / 2) ** 2 - (h / 2) ** 2) / 2, 0.0)


def equal_kinks(n: int) -> np.ndarray:
  """n kinks splitting [-1, 1] into n + 1 equal pieces."""
  return -1.0 + 2.0 * np.arange(1, n + 1) / (n + 1)


def random_kinks(n: int, seed: int) -> np.ndarray:
  """n kinks iid uniform on [-1, 1], drawn from default_rng((seed, n)), sorted."""
  return np.sort(np.random.default_rng((seed, n)).uniform(-1.0, 1.0, n))


def relu_basis(x_P: np.ndarray, kinks_K: np.ndarray) -> np.ndarray:
  """[1, x, ReLU(x - t_1), ..., ReLU(x - t_K)] at the points x: shape (P, K + 2)."""
  x_P = np.asarray(x_P, np.float64)
  return np.concatenate([np.ones((len(x_P), 1)), x_P[:, None], np.maximum(x_P[:, None] - kinks_K[None], 0.0)], 1)


def lstsq_sup_error(x_P: np.ndarray, kinks_K: np.ndarray, grid_size: int = GRID_SIZE) -> float:
  """Sup error on the grid of the least-squares fit of x^2 at x_P with kinks fixed at kinks_K."""
  coef = np.linalg.lstsq(relu_basis(x_P, kinks_K), np.square(np.asarray(x_P, np.float64)), rcond=None)[0]
  grid = np.linspace(-1.0, 1.0, grid_size)
  return float(np.max(np.abs(relu_basis(grid, kinks_K) @ coef - grid**2)))


def collapsed(sup_error) -> np.ndarray:
  """True where a run does no better than the best one-kink function (sup error >= 1/8)."""
  return np.asarray(sup_error, float) >= COLLAPSE_ERROR


# --------------------------------------------------------------------------- arms and collection


def _base():
  config = default_config()
  config.task.name, config.task.function, config.task.num_train = 'function', 'x_squared', NUM_TRAIN
  config.model.activation = 'relu'
  return config


def _kinks_base():
  config = _base()
  config.model.arch = 'kinks'
  return config


def arms(scale: str) -> list[base.Arm]:
  widths = {f'N={n}': {'model.d_ff': n} for n in WIDTHS[scale]}
  return [
    base.Arm(RELU, _base(), widths),
    base.Arm(CONTROLS_ARM, _base(), {k: o for k, (_, o) in CONTROLS.items()}),
    base.Arm(KINKS, _kinks_base(), widths),
  ]


@functools.lru_cache(maxsize=16)
def _training_points(task_json: str, seed: int) -> np.ndarray:
  """A seed's training inputs, regenerated as the run drew them (train.Experiment.task_data)."""
  config = _base()
  config.task = ml_collections.ConfigDict(json.loads(task_json))
  return np.asarray(train.Experiment(config).task_data(seed)['x_train'], np.float64)[:, 0]


@functools.lru_cache(maxsize=1024)
def _baselines(task_json: str, seed: int, n: int) -> tuple[float, float]:
  x_P = _training_points(task_json, seed)
  return lstsq_sup_error(x_P, equal_kinks(n)), lstsq_sup_error(x_P, random_kinks(n, seed))


def collect(run_dir: str, row) -> dict[str, float]:
  """The tuning loss (final training loss, floored at LOSS_FLOOR); for ReLU runs the seed's baselines at N."""
  out = {'tuning_loss': max(float(row['final_loss']), LOSS_FLOOR)}
  if row['arm'] in WIDTH_ARMS:
    task = io_lib.read_json(os.path.join(run_dir, 'config.json'))['task']
    out['lstsq_equal'], out['lstsq_random'] = _baselines(
      json.dumps(task, sort_keys=True), int(row[SEED]), int(row['model.d_ff'])
    )
  return out


# --------------------------------------------------------------------------- verdicts (pure in the selection)


def relu_rows(sel: pd.DataFrame, arm: str = RELU) -> pd.DataFrame:
  return sel[sel['arm'] == arm].assign(**{N: lambda f: f['model.d_ff'].astype(int)})


def fitted(relu: pd.DataFrame) -> pd.DataFrame:
  """The rows a slope is fitted on: N >= MIN_FIT_WIDTH, not collapsed."""
  g = relu[relu[N] >= MIN_FIT_WIDTH]
  return g[~collapsed(g['sup_error'])]


def seed_slopes(fit: pd.DataFrame, column: str) -> pd.Series:
  """Per seed, the least-squares slope of log column on log N (seeds with >= 3 distinct N)."""
  f = rules_lib.per_seed_fits(np.log(fit[N].to_numpy(float)), np.log(fit[column].to_numpy(float)), fit[SEED].to_numpy())
  return f.set_index('seed')['slope'].rename(column)


def collapse_check(relu: pd.DataFrame) -> stats.Check:
  frac = relu[relu[N] >= MIN_FIT_WIDTH].groupby(N)['sup_error'].apply(lambda e: float(np.mean(collapsed(e))))
  return stats.Check(
    f'collapsed runs at most {MAX_COLLAPSED:.0%} at every fitted N',
    bool(len(frac)) and bool((frac <= MAX_COLLAPSED).all()),
    f'collapsed (sup error >= {COLLAPSE_ERROR:g}) per N: ' + ', '.join(f'{n}: {f:.0%}' for n, f in frac.items()),
  )


def lower_bound_check(relu: pd.DataFrame) -> stats.Check:
  """No ReLU run below the proven grid lower bound (a measured error below it is a bug in the metric)."""
  beaten = relu[relu['sup_error'].to_numpy(float) < grid_lower_bound(relu['model.d_ff'].to_numpy(float))]
  return stats.Check(
    'lower bound never beaten',
    beaten.empty,
    f'{len(beaten)} of {len(relu)} ReLU runs below the proven grid lower bound ((L/2)^2 - (h/2)^2)/2 '
    f'with L = 2/(N+1) - 2h, h = 2/{GRID_SIZE - 1}' + ''.join(', ' + s for s in beaten['name']),
  )


def data_premise(relu: pd.DataFrame) -> stats.Check:
  """The `equal` baseline's per-seed slope over the fitted N has its CI inside claimed ± margin."""
  v = rules_lib.slope_per_seed(
    relu[relu[N] >= MIN_FIT_WIDTH],
    x=N,
    y='lstsq_equal',
    seed=SEED,
    claimed=CLAIMED_SLOPE,
    margin=SLOPE_MARGIN,
    claim='',
  )
  return stats.premise_check(
    'premise (data): least squares at N equal kinks on the training points falls as N^-2',
    v.statistic,
    v.ci,
    CLAIMED_SLOPE - SLOPE_MARGIN,
    CLAIMED_SLOPE + SLOPE_MARGIN,
    what=f'per-seed slope of the equal-kink baseline over N >= {MIN_FIT_WIDTH}',
  )


def slope_verdict(relu: pd.DataFrame) -> stats.Verdict:
  """Verdict 1's rule on ReLU rows (any arm): the per-seed slope over the fitted N against -2 ± 0.25."""
  return rules_lib.slope_per_seed(
    fitted(relu),
    x=N,
    y='sup_error',
    seed=SEED,
    claimed=CLAIMED_SLOPE,
    margin=SLOPE_MARGIN,
    claim=f'sup error of trained width-N ReLU FFNs on x^2 falls as N^-2 (log-log slope -2, '
    f'per seed over N >= {MIN_FIT_WIDTH}, collapsed runs excluded)',
  )


def difference_verdict(relu: pd.DataFrame) -> stats.Verdict:
  """Verdict 2's rule on ReLU rows (any arm): per seed, trained slope - random-kink slope, mean below +0.25."""
  fit = fitted(relu)
  diff = (seed_slopes(fit, 'sup_error') - seed_slopes(fit, 'lstsq_random')).dropna()
  return rules_lib.threshold(
    diff.to_numpy(),
    level=SLOPE_MARGIN,
    direction='below',
    claim=f'training falls at least as fast as least squares on N random fixed kinks (same training '
    f'points): per-seed slope difference trained - baseline below +{SLOPE_MARGIN:g}',
  )


def kinks_construction_check(widths) -> stats.Check:
  """Premise of verdict 6: the `kinks` arm can express an error falling as N^-2: at every fitted N the equal-piece
  interpolant of x^2 (kinks at -1 + 2j/(N + 1), each unit's output weight 2h, h = 2/(N + 1): tests/test_kinks.py)
  has sup error h^2/4 = 1/(N + 1)^2 on the grid, and the log-log slope of those errors over the fitted N lies within
  the claim's margin of -2. Evaluated here in float64 through the same formula as the arm, independent of the runs."""
  ns = np.array([n for n in widths if n >= MIN_FIT_WIDTH], float)
  grid = np.linspace(-1.0, 1.0, GRID_SIZE)
  errors = []
  for n in ns.astype(int):
    h = 2.0 / (n + 1)
    t = -1.0 + h * np.arange(1, n + 1)
    s = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    c = 1.0 - 2 * h * np.sum((t + 1.0)[s < 0])
    f = np.maximum(s[None] * (grid[:, None] - t[None]), 0.0) @ np.full(n, 2 * h) + c
    errors.append(float(np.max(np.abs(f - grid**2))))
  slope = float(np.polyfit(np.log(ns), np.log(errors), 1)[0]) if len(ns) >= 2 else math.nan
  ok = bool(abs(slope - CLAIMED_SLOPE) < SLOPE_MARGIN)
  return stats.as_premise(
    stats.Check(
      'the kinks arm can express an error falling as N^-2 (the equal-piece interpolant through its units)',
      ok,
      f'sup error of the construction on the {GRID_SIZE:,}-point grid at N = {", ".join(str(int(n)) for n in ns)}: '
      f'{", ".join(f"{e:.3g}" for e in errors)}; log-log slope {slope:.3f}, must lie within {SLOPE_MARGIN:g} of '
      f'{CLAIMED_SLOPE:g}',
    )
  )


def construction_check(key: str) -> stats.Check:
  """Premise of a control: the arm can express its target below CONTROL_LEVEL on the task's grid (an explicit
  construction through the arm's units, float64; it does not depend on the runs)."""
  label = CONTROLS[key][0]
  how, f, target = CONSTRUCTIONS[key]
  x = np.linspace(-1.0, 1.0, GRID_SIZE)
  err = float(np.max(np.abs(f(x) - target(x))))
  return stats.as_premise(
    stats.Check(
      f'the arm can express the target: {label}',
      bool(err < CONTROL_LEVEL),
      f'{how} on the {GRID_SIZE:,}-point grid: sup error {err:.3g}; must be below {CONTROL_LEVEL:g}',
    )
  )


def optimiser_check(sel: pd.DataFrame) -> stats.Check:
  """Premise of the |x| and swiglu controls: training works at this budget and rate policy: the bilinear control
  (x^2 by one exact unit, in the same selection) has its mean sup error's t CI (within [0, inf)) below CONTROL_LEVEL."""
  e = sel.loc[sel['point'] == f'{CONTROLS_ARM}: bilinear', 'sup_error'].to_numpy(float)
  m, lo, hi = stats.mean_ci(e, bounds=ERROR_BOUNDS)
  return stats.premise_check(
    f'training reaches an exact representation at this budget (the bilinear control below {CONTROL_LEVEL:g})',
    m,
    (lo, hi),
    0.0,
    CONTROL_LEVEL,
    what=f'mean sup error of x^2 with 1 bilinear unit over {len(e)} seeds (t CI within [0, inf))',
  )


def width_checks(rows: pd.DataFrame) -> list[stats.Check]:
  """The checks of a verdict on a width arm's rows: collapse, the lower bound, the data premise."""
  return [collapse_check(rows), lower_bound_check(rows[rows[N] >= MIN_FIT_WIDTH]), data_premise(rows)]


def rules(sel: pd.DataFrame, scale: str) -> list[stats.Verdict]:
  relu, kinks = relu_rows(sel), relu_rows(sel, KINKS)
  points = {arm: tuple(f'{arm}: N={n}' for n in WIDTHS[scale] if n >= MIN_FIT_WIDTH) for arm in WIDTH_ARMS}
  out = [
    dataclasses.replace(stats.gate(rule(relu), width_checks(relu)), points=points[RELU])
    for rule in (slope_verdict, difference_verdict)
  ]
  for key, (label, _) in CONTROLS.items():
    point = f'{CONTROLS_ARM}: {key}'
    v = rules_lib.threshold(
      sel.loc[sel['point'] == point, 'sup_error'],
      level=CONTROL_LEVEL,
      direction='below',
      claim=f'control {label}: trained sup error below {CONTROL_LEVEL:g}',
      bounds=ERROR_BOUNDS,
    )
    premises = [construction_check(key)] + ([optimiser_check(sel)] if key != 'bilinear' else [])
    out.append(dataclasses.replace(stats.gate(v, premises), points=(point,)))
  v = dataclasses.replace(
    slope_verdict(kinks),
    claim=f'sup error of width-N ReLU FFNs trained with their kink positions as parameters falls as N^-2 (log-log '
    f'slope -2, per seed over N >= {MIN_FIT_WIDTH}, collapsed runs excluded)',
  )
  checks = [*width_checks(kinks), kinks_construction_check(WIDTHS[scale])]
  out.append(dataclasses.replace(stats.gate(v, checks), points=points[KINKS]))
  return out


# --------------------------------------------------------------------------- tables and figures


_RELU_SCOPE = (
  'a bare one-hidden-layer ReLU FFN on 1-D x^2 over [-1, 1] (16,384 uniform training points, sup error on an '
  '8,193-point grid), widths N = 8 ... 512 fitted (N = 2, 4 drawn, not fitted; collapsed runs excluded), Adam '
  'with cosine decay at batch 256, the rate tuned per N on the final training loss (never on the sup error), 5 '
  'seeds, the biases b1 started at 0 (every kink starts at x = 0; the kinks arm, verdict 6, starts them uniform), '
  'from T = 10,000 steps at full, doubled by the loop while the ladder T/4, T/2, T is outside the magnitude rule '
  '(up to 160,000; the ladder line gives the T reached); a not reproduced only at T = 160,000 inside that rule, '
  'which is not evidence of convergence (a ladder inside it at 10,000 had moved from -0.96 to -1.40 at 40,000 in '
  "the superseded design's fixed arm): reaching T = 160,000 costs more than the 3,600 reference-second cap, so at "
  'this cap the verdict reads reproduced or inconclusive, never not reproduced (changed after results: see the '
  'design changes); the log-log curve bends (the detail gives its curvature), so a slope over N = 8 ... 512 '
  'averages a steeper stretch at small N with a flatter one at large N; the '
  'same function class with its kinks optimised directly is verdict 6'
)
_KINKS_SCOPE = (
  'the same task, widths, optimiser, rate policy and seeds as verdict 1, with a ladder of its own (its T doubled '
  'separately: the ladder line gives it; its rate grid extended above 0.1 where the loop found an edge), on a '
  'width-N ReLU FFN '
  'parametrised by its kinks (y = sum_j v_j ReLU(s_j (x - t_j)) + c, s_j = +1, -1 alternately and fixed; t_j '
  "trained directly, started uniform on [-1, 1]; 2N + 1 trained parameters against the plain FFN's 3N + 1): the "
  'functions of a plain width-N ReLU FFN whose units face alternately right and left, which include the '
  'equal-piece interpolant; an answer to whether gradient descent can find kinks that give N^-2 when they are its '
  'parameters, not to whether the plain parametrisation does (verdict 1). Its premise shows the class, not the '
  'recipe: no run starts at the equal-piece solution, and the kinks start where the random-kink baseline puts '
  'them, which this arm trails at the largest N (the per-N table), so a refutation would also need a recipe '
  'control; as for verdict 1, not reproduced only at T = 160,000'
)
DATA_PREMISE = (
  'the training points pin x^2 finely enough for N^-2 to show: least squares at N equal fixed kinks on each '
  "run's own training points falls with a per-seed slope whose 95% CI lies inside [-2.25, -1.75]"
)
CLAIMS = (
  base.Claim(kind=stats.EXISTENCE, scope=f'{_RELU_SCOPE}.', premise=DATA_PREMISE),
  base.Claim(
    kind=stats.EXISTENCE,
    scope=f'{_RELU_SCOPE}; the baseline is least squares at N random fixed kinks (iid uniform) on the same points, '
    'a net whose kinks never move, with its output layer solved exactly rather than trained; no paper makes this '
    "claim: it is the project's benchmark of training against fixed kinks; in the superseded design's fixed arm "
    'the difference fell from +0.526 at 10,000 steps to +0.086 [-0.076, +0.248] at 40,000, inside the rule.',
    premise=DATA_PREMISE + ' (so both slopes measure the approximation, not the sampling of the training set)',
  ),
  base.Claim(
    kind=stats.EXISTENCE,
    scope='|x| on [-1, 1] by a bare FFN with 2 ReLU units, which represents it exactly; mean sup error over 5 seeds '
    'at the rate tuned on the final training loss, at T = 10,000 steps at full; the t interval within [0, inf). '
    'Seeds either reach it or stay stuck near 0.59 (the controls table counts the seeds below 0.01), so the mean '
    'of the two clusters says little.',
    premise='the arm can express |x| below 0.01 (ReLU(x) + ReLU(-x) on the grid: error 0), and training reaches an '
    'exact representation at this budget (the bilinear control, same selection, below 0.01)',
  ),
  base.Claim(
    kind=stats.EXISTENCE,
    scope='x^2 on [-1, 1] by a bare FFN with one bilinear unit, which represents it exactly; mean sup error over 5 '
    'seeds at the tuned rate, T = 10,000 steps at full; the t interval within [0, inf).',
    premise='the arm can express x^2 below 0.01 (gate and value both x on the grid: error 0)',
  ),
  base.Claim(
    kind=stats.EXISTENCE,
    scope='x^2 on [-1, 1] by a bare FFN with one swiglu unit, which approximates it only (large weights needed); '
    'mean sup error over 5 seeds at the tuned rate, at the budget the regime reaches by doubling T until it is '
    "reached or the cap (the ladder line says which; 8 x the ReLU arm's T in the run published 2026-11-27); the "
    "threshold 0.01 is the study's; the t interval within [0, inf).",
    premise=f'the arm can express x^2 below 0.01 ((2/a) x silu(a x) with a = {SWIGLU_GATE:g} on the grid: error '
    'tanh(a/2)), and training reaches an exact representation at this budget (the bilinear control below 0.01)',
  ),
  base.Claim(
    kind=stats.EXISTENCE,
    scope=f'{_KINKS_SCOPE}.',
    premise=DATA_PREMISE + '; and the arm can express an error falling as N^-2: the equal-piece interpolant through '
    'its units has sup error 1/(N + 1)^2 at every fitted N (slope -2)',
  ),
)


ABLATION = base.Study(
  name='universal_approximation',
  claim=(
    'A width-N ReLU FFN is piecewise linear with at most N kinks and the best sup-norm error for x^2 '
    'on [-1, 1] with N pieces is 1/(2N^2), so a width-N FFN can represent an error falling as N^-2 (slope -2 on '
    'log-log axes); tested here: whether trained FFNs reach that rate (Adcock & Dexter 2020 report that trained '
    'networks fall short of such rates).'
  ),
  citation=(
    'kink argument and equal-piece optimum (docs/references.md#equal-piece-optimum-for-x-squared); '
    'trained nets fall short: Adcock & Dexter 2020 (arXiv 2001.07523), Hanin & Rolnick 2019'
  ),
  published='optimum sup error 1/(2N^2), i.e. log-log slope -2; 1.2e-4 at N = 64',
  regimes={
    'smoke': base.Regime(rates=(1e-3, 1e-2, 1e-1), steps=500, seeds=3, cap=90.0, metric='tuning_loss'),
    'quick': base.Regime(rates=RATES, steps=2000, seeds=3, cap=420.0, metric='tuning_loss'),
    'full': base.Regime(rates=RATES, steps=10000, seeds=5, cap=3600.0, metric='tuning_loss', max_doublings=4),
  },
  arms=arms,
  rules=rules,
  collect=collect,
  setup=(
    f'Task `function` (x^2 on [-1, 1], {NUM_TRAIN:,} training points, sup error on an {GRID_SIZE:,}-point grid); '
    'bare FFN, d_model 1, ReLU, and the same FFN parametrised by its kink positions (controls: |x| with 2 ReLU '
    'units, x^2 with 1 bilinear or 1 swiglu unit), Adam '
    'with warmup 100 and cosine decay, batch 256 (configs/regression.py except the training-set size); the rate '
    'tuned per point on the mean final training loss over seeds (floored at 1e-13).'
  ),
  claims=CLAIMS,
  changes=CHANGES,
)
