"""load_balancing: does training collapse a token-choice router, and do the balancing fixes work?

Claims (docs/references.md#fedus-et-al-2021, #zoph-et-al-2022, #deepseek-v3-2024): without a
balancing term a learned token-choice router sends most tokens to few experts (Shazeer et al. 2017;
Fedus et al. 2021); the Switch loss alpha E sum_i f_i P_i with alpha = 1e-2 prevents it (Fedus et al.
2021); the router z-loss, coefficient 1e-3, stabilises training (Zoph et al. 2022, ST-MoE, Table 4:
3 of 3 runs stable with it, 4 of 6 without); DeepSeek-V3's per-expert selection bias (gamma = 1e-3)
balances without an auxiliary loss (DeepSeek-AI 2024).

Setup (issue 46's redesign): a Switch-style MoE of E = 8 ReLU experts of width EXPERT_WIDTH = 32, top-1,
`softmax_topk` without renormalisation (the router gets task gradient at k = 1), capacity factor 1.0 in training,
d_model 16 (moe_topk's 8 x 32, where its routing premise passed). Coefficients as published, not tuned. The load
arms run on three inputs (CONDITIONS), each with its trained arm (points none / switch / bias) and its frozen-router
control:
  * `offset`: the task where routing matters (moe_topk's: 8 Gaussian clusters, Zipf(1) weights, spread 1.0, a
    different ReLU teacher of width 64 per cluster, so one expert cannot fit every cluster), the cluster centres
    shifted so the inputs' mean is 0 (task.center_inputs) and then one offset c ~ N(0, I) per seed added to every
    input (task.input_offset 1), the anisotropic residual stream a transformer's router reads;
  * `centred`: the same task without the offset: inputs of mean 0;
  * `control`: the published design, one ReLU teacher of width 32 (a single expert can fit it) on c + N(0, I):
    where the published run saw collapse (+2.28 with experts of width 64), the positive control of a refutation.
A bias-free linear router on centred, symmetric inputs cannot give an expert more than half the tokens (an expert
that wins at x loses at -x); clustered inputs of mean 0 are not symmetric, so `centred` can collapse, less easily.

Measurement. Collapse is a *change* caused by training, not a level. Per run, the max/mean expert
load E max_i f_i (1 = uniform, E = 8 = every token on one expert) of the router on the run's 4,096
held-out inputs (before capacity drops), at step 0 (the run's init rebuilt from its seed) and after
the last step; `load_change` = final - step 0 (`collect`). The trained points' Adam rate is tuned per point by
the runner on the held-out MSE (eval_loss); the frozen router (model.moe.freeze_router: only the experts train)
runs at 3e-3, not tuned: its change is exactly 0 by construction, a check of the measurement. The routing premise
(issue 46), reported, not a gate (no verdict here compares routing choices): on `offset` and `centred` a dense FFN of
the expert width (d_ff 32, `dense_CONDITION`, its rate tuned) against each trained top-1 point, ln held-out MSE paired
by seed, read in four states (`routing_reading`).

The z-loss test (verdict 3; ablations/zloss.py): experts of width Z_EXPERT_WIDTH = 64 (as in every earlier z-loss
run), the router in bfloat16 (model.moe.router_dtype: logits, softmax and top-k rounded; Switch cast its router to
float32 because bfloat16 was unstable there, so this induces an instability the papers avoided), Switch loss on, no
clipping, the one-teacher task on N(0, I); a run fails when it diverges (the blow-up rule over the same steps at
every budget) or ends with held-out relative MSE >= zloss.FAILED_MSE (0.3); the test rate is the smallest pilot rate
(its own seeds) whose failed fraction lies in [0.1, 0.9] at every budget (zloss.pilot_rate); the test arm (none /
z_loss / frozen router / float32 router, 64 seeds at full) runs there, after the pilot.

Verdict rules (fixed before the run; paired by seed; each arm at its chosen rate at T). Every verdict is a
sign claim (stats.SIGN: the papers observe collapse, and its removal, after training; none publishes a
size, so each rule asks which side of its boundary the CI lies on after T steps, and the runner requires
the same side at T/4, T/2 and T):
  1. training collapses the router on `offset`: load_change(none) - load_change(frozen) lies above
     COLLAPSE_RISE = 1 (paired t CI): the busiest expert gains at least one more expert's fair share
     of the tokens (1/E = 12.5%), a seventh of the way from uniform (1) to total collapse (E = 8); or, where the
     step-0 load + 1 would not reach the load of one expert per Zipf cluster (8 / H_8 = 2.94), the rise to it
     (`collapse_margin`: a collapse is never the specialisation the task rewards; a premise until 2026-11-29).
  2. the Switch loss reduces it (`control`, where training without balancing collapses the router):
     load_change(switch) - load_change(none) below 0.
  3. the z-loss stabilises training: failed(z_loss) - failed(none) below 0 (0/1 per seed) at the test rate.
  4. the bias reduces it (`control`): load_change(bias) - load_change(none) below 0.
  5. as 1 on `centred`.
Gates (stats.gate; a failed one makes the verdict `invalid`): 1, 2, 4 and 5 rest on the measurement (every load
within [1, E]; every frozen router's change exactly 0 at every seed). Premises (positive controls, role
stats.PREMISE, computed from the same runs):
  1, 5. room for a collapse: the no-balancing router's step-0 load leaves more than the margin below E; and,
     for a `not reproduced` only, the setup can produce a collapse: rule 1 on `control` reproduced.
  2, 4. training without balancing collapses the router on `control` (rule 1 reproduced there: a collapse to
     prevent; a rise above 0 until the cold design review of 2026-11-29).
     The routing task's conditions show their fixes' loads in the table, judged by no verdict: a fix can only
     prevent a collapse where one happens (the first run of this redesign saw none on `offset`; history.md).
  3. the pilot finds a test rate, and there the no-z-loss failed fraction (the verdict's seeds) is off its floor 0
     and its ceiling 1 (more than 0.05 from each); and, for a `not reproduced` only, the instability is the
     router's (at the test rate the learned router, no z-loss, fails more often at relative MSE >= 1 than the frozen
     one, whose fit level straddles 0.3: paired CI above
     0) and the z-loss lowers the router's logits (ln router z on the seeds where both trained, paired CI below 0),
     so a fix of the router's logits had something to fix and moved what it acts on.
The runner adds the rate-inside-grid checks, the budget ladder, rate ties and leave-one-seed-out. Tables
give every load, load change, MSE and the z-loss arms' failed fraction a CI inside its range (stats.mean_ci bounds).
History: docs/results/load_balancing/history.md.
"""

import dataclasses
import math

import numpy as np
import pandas as pd

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import checks
from ffn_research.ablations import regime as regime_lib
from ffn_research.ablations import zloss
from ffn_research.ablations.changes.load_balancing import CHANGES
from ffn_research.config import default_config
from ffn_research.models import routers as routers_lib

NUM_EXPERTS = 8
SWITCH_ALPHA = 1e-2  # Fedus et al. 2021
BIAS_RATE = 1e-3  # DeepSeek-AI 2024 (gamma)
EXPERT_WIDTH, Z_EXPERT_WIDTH = 32, 64  # expert width: the load arms' (moe_topk's 8 x 32); the z-loss arms'
BALANCING = {'none': (0.0, 0.0), 'switch': (SWITCH_ALPHA, 0.0), 'bias': (0.0, BIAS_RATE)}  # (alpha, gamma)
COLLAPSE_RISE = 1.0  # rules 1, 4: the load change that counts as a collapse (max/mean scale 1 .. E)
ROUTING_MARGIN = 0.1  # the routing premise (moe_topk's margin): top-1 beats dense of its expert width by this, ln MSE
ALPHA_KEY, GAMMA_KEY = 'model.moe.load_balance_coef', 'model.moe.bias_update_rate'
SEED, LR, STEPS = regime_lib.SEED, regime_lib.LR, regime_lib.STEPS
CLUSTERS, CLUSTER_STD, CLUSTER_TEACHER_WIDTH = 8, 1.0, 64  # the routing task (moe_topk's)
OFFSET, CENTRED, CONTROL = 'offset', 'centred', 'control'
ROUTED = (OFFSET, CENTRED)  # the routing task's conditions, each with a dense reference (the routing premise)
ROUTING_TASK = {  # moe_topk's task, its inputs shifted to mean 0
  'task.num_clusters': CLUSTERS,
  'task.cluster_zipf': 1.0,
  'task.cluster_std': CLUSTER_STD,
  'task.cluster_teachers': True,
  'task.teacher_d_ff': CLUSTER_TEACHER_WIDTH,
  'task.center_inputs': True,
}
_ROUTING = 'the routing task (8 Zipf(1) clusters, spread 1.0, a ReLU teacher of width 64 each)'
CONDITIONS = {  # the load arms' inputs -> (words, task overrides)
  OFFSET: (f'{_ROUTING}, mean 0, plus one offset c ~ N(0, I) per seed', {**ROUTING_TASK, 'task.input_offset': 1.0}),
  CENTRED: (f'{_ROUTING}, inputs of mean 0', ROUTING_TASK),
  CONTROL: (
    'one ReLU teacher of width 32 (a single expert can fit it) on c + N(0, I), one offset c per seed (the '
    "published design's inputs and teacher; its +2.28 was measured with experts of width 64)",
    {'task.num_clusters': 1, 'task.cluster_std': 1.0},
  ),
}


def point(condition: str, balancing: str) -> str:
  """A trained point's label: 'CONDITION: none|switch|bias'."""
  return f'{condition}: {balancing}'


def dense(condition: str) -> str:
  """The dense reference of a routing-task condition (its arm's name): 'dense_CONDITION'."""
  return f'{DENSE}{condition}'


def frozen(condition: str) -> str:
  """The frozen-router control's label (its arm's name): 'frozen_CONDITION'."""
  return f'frozen_{condition}'


# verdicts 2, 4 (the fixes) read the condition where training without balancing collapses the router: `control`
NONE, SWITCH, BIAS, FROZEN = point(CONTROL, 'none'), point(CONTROL, 'switch'), point(CONTROL, 'bias'), frozen(CONTROL)
COLORS = {'none': 'C0', 'switch': 'C1', 'bias': 'C2', 'frozen': 'C3'}  # one colour per balancing in every panel
BOUNDS = {  # the range of each tabulated quantity: its CI stays inside (stats.mean_ci)
  'load_start': (1.0, float(NUM_EXPERTS)),
  'load_final': (1.0, float(NUM_EXPERTS)),
  'load_change': (1.0 - NUM_EXPERTS, NUM_EXPERTS - 1.0),
  'eval_loss': (0.0, math.inf),
  'unstable': (0.0, 1.0),
  'router_z': (0.0, math.inf),
  'failed_at_1': (0.0, 1.0),
  'diverged': (0.0, 1.0),
}
DENSE = 'dense_'  # the dense references' arm name prefix
REGIMES = {  # rates of the trained arms; T (and its ladder) of every arm; the load arms' seeds; cap in run-seconds
  'smoke': base.Regime(rates=(1e-3, 3e-3, 1e-2), steps=60, seeds=3, cap=60.0),
  'quick': base.Regime(rates=(3e-3, 1e-2, 3e-2, 1e-1), steps=2000, seeds=8, cap=600.0),
  'full': base.Regime(rates=(1e-3, 3e-3, 1e-2, 3e-2, 1e-1), steps=4000, seeds=16, cap=5400.0),
}


# --------------------------------------------------------------------------- measurements (pure)


def assignment_load(expert_T: np.ndarray, num_experts: int) -> np.ndarray:
  """(E,) fraction of the assignments per expert."""
  return np.bincount(np.asarray(expert_T).reshape(-1), minlength=num_experts) / np.asarray(expert_T).size


def max_mean_load(load_E) -> float:
  """E max_i f_i: 1 when uniform, E when every assignment goes to one expert."""
  load_E = np.asarray(load_E, float)
  return float(len(load_E) * load_E.max() / load_E.sum())


def router_load(model, x_TxD) -> np.ndarray:
  """(E,) the bare MoE's router load fractions on inputs x (routing bias included, before capacity drops)."""
  _, routing = model.route(x_TxD)
  return np.asarray(routers_lib.load_fraction(routing, model.num_experts))


# --------------------------------------------------------------------------- arms


def _base(condition: str, freeze: bool = False):
  """The MoE on the inputs of `condition` (CONDITIONS)."""
  config = default_config()
  config.task.name, config.model.d_model, config.model.d_ff, config.task.teacher_d_ff = 'teacher_student', 16, 32, 32
  for key, value in CONDITIONS[condition][1].items():
    section, name = key.split('.')
    config[section][name] = value
  moe = config.model.moe
  moe.num_experts, moe.top_k, moe.router, moe.renormalize = NUM_EXPERTS, 1, 'softmax_topk', False
  moe.capacity_factor, moe.freeze_router = 1.0, freeze
  moe.load_balance_coef = moe.z_loss_coef = moe.bias_update_rate = 0.0
  return config


def _dense_base(condition: str):
  """The dense FFN of the MoE's expert width (32) on the inputs of `condition`: the routing premise's reference."""
  config = _base(condition)
  config.model.moe = default_config().model.moe  # no experts: every moe.* setting back to its default
  return config


def _unstable_base(rate: float):
  """The z-loss arms: experts of width 64 on the published one-teacher task on N(0, I), the router in bfloat16,
  Switch loss on, no gradient clipping, Adam at `rate`."""
  config = _base(CONTROL)
  config.task.num_clusters, config.model.d_ff = 0, Z_EXPERT_WIDTH
  config.model.moe.load_balance_coef, config.model.moe.router_dtype = SWITCH_ALPHA, 'bfloat16'
  config.train.grad_clip = 0.0
  config.train.learning_rate = rate
  return config


def _budget(steps: int) -> dict:
  return base.budget(steps, num_logs=20)


def arms(scale: str) -> list[base.Arm]:
  trained = {k: {ALPHA_KEY: a, GAMMA_KEY: g} for k, (a, g) in BALANCING.items()}
  load = [
    arm
    for c in CONDITIONS
    for arm in (
      base.Arm(c, _base(c), trained, budget=_budget),
      base.Arm(frozen(c), _base(c, freeze=True), {'': {}}, tuned=False, budget=_budget),
    )
  ]
  grid = REGIMES[scale].rates
  dense_rates = (grid[0] / 9, grid[0] / 3, *grid) if scale == 'full' else None  # the none points needed < 1e-3
  dense_refs = [base.Arm(dense(c), _dense_base(c), {'': {}}, budget=_budget, rates=dense_rates) for c in ROUTED]
  z_budget = zloss.budget(scale)
  pilot = [
    base.Arm(
      f'{zloss.PILOT}{r:g}',
      _unstable_base(r),
      {'none': zloss.POINTS['none']},
      tuned=False,
      budget=z_budget,
      seeds=zloss.PILOT_SEEDS[scale],
      first_seed=zloss.PILOT_FIRST_SEED,
    )
    for r in zloss.PILOT_LRS[scale]
  ]
  test = base.Arm(  # after the pilot: its one rate is the pilot's test rate over the pilot's budgets
    zloss.UNSTABLE,
    _unstable_base(max(zloss.PILOT_LRS[scale])),
    zloss.POINTS,
    tuned=False,
    budget=z_budget,
    seeds=zloss.Z_SEEDS[scale],
    rate_from=zloss.pilot_rate,
  )
  return [*load, *dense_refs, *pilot, test]


# --------------------------------------------------------------------------- collection


def load_change(run_dir: str) -> dict[str, float]:
  """Max/mean load on the held-out inputs at step 0 (init rebuilt from the seed) and after the last step."""
  config, models, data = base.models_over_training(run_dir)  # {0: init, last step: final (the only checkpoint)}
  if len(models) < 2 or max(models) != config.train.steps:
    raise FileNotFoundError(f'{run_dir}: no checkpoint at the last step {config.train.steps}')
  start, final = (max_mean_load(router_load(models[k], data['x_eval'])) for k in (0, max(models)))
  return {'load_start': start, 'load_final': final, 'load_change': final - start}


def collect(run_dir: str, row) -> dict[str, float]:
  """A finished run of a load arm: its load at step 0 and at the end; of the z-loss test arm: its router z (the
  pilot and the dense references: nothing; a run's status says whether it diverged)."""
  arm = str(row['arm'])
  if arm.startswith(zloss.UNSTABLE):
    return zloss.router_z(run_dir)
  return {} if arm.startswith((zloss.PILOT, DENSE)) else load_change(run_dir)


# --------------------------------------------------------------------------- rules


def measurement(sel: pd.DataFrame) -> list[stats.Check]:
  """Every load within [1, E]; every frozen router's final load equals its rebuilt step-0 load at every seed."""
  loads = sel.dropna(subset=['load_start']) if 'load_start' in sel else sel.iloc[:0]
  vals = loads[['load_start', 'load_final']].to_numpy(float)
  still = loads[loads['point'].isin([frozen(c) for c in CONDITIONS])]['load_change'].abs()
  return [
    stats.Check(
      'max/mean load within [1, E]',
      bool(len(vals)) and bool(np.all((vals >= 1 - 1e-6) & (vals <= NUM_EXPERTS + 1e-6))),
      f'{len(loads)} runs at step 0 and at the end',
    ),
    stats.Check(
      'frozen router: final load = rebuilt step-0 load',
      bool(len(still)) and bool(still.max() < 1e-6),
      f'largest |change| {still.max() if len(still) else math.nan:.3g} over {len(still)} runs',
    ),
  ]


def _at_edge(frame: pd.DataFrame, full: pd.DataFrame, p: str) -> bool:
  """Whether point `p`'s chosen rate at its T is the smallest or the largest rate it ran at that T."""
  row = full[full['point'] == p]
  if row.empty:
    return True
  t, rate = row[STEPS].max(), float(row[LR].iloc[0])
  run = frame[(frame['point'] == p) & (frame[STEPS] == t)][LR].astype(float)
  return bool(run.empty or np.isclose(rate, run.min()) or np.isclose(rate, run.max()))


def routing_reading(v: stats.Verdict, moe_edge: bool, dense_edge: bool, same_t: bool) -> str:
  """The routing premise's reading, fixed before its runs: 'passes' where the CI lies at or below -ROUTING_MARGIN
  (an MoE rate at its grid's edge only understates the margin), 'fails' where it lies above with both rates inside
  their grids, 'undecided' where it straddles; 'n/a' where dense's rate is at an edge or the two T differ."""
  lo, hi = v.ci
  if not same_t:
    return 'n/a (unequal T)'
  if dense_edge:
    return "n/a (the dense rate at its grid's edge)"
  if not (math.isfinite(lo) and math.isfinite(hi)):
    return 'n/a (no CI)'
  if hi <= -ROUTING_MARGIN:
    return 'passes'
  if lo > -ROUTING_MARGIN:
    return "n/a (the MoE rate at its grid's edge)" if moe_edge else 'fails'
  return 'undecided'


def routing_margins(full: pd.DataFrame, frame: pd.DataFrame) -> list[dict]:
  """The routing premise, reported (no verdict compares routing choices here): per routing-task condition and
  trained MoE point (switch is the premise; none and bias are diagnostics), ln held-out MSE minus the dense FFN of
  the expert width's, paired by seed, each at its chosen rate and T; read by `routing_reading`."""
  rows = []
  logs = full.assign(ln_mse=np.log(full['eval_loss'].astype(float)))
  for c in ROUTED:
    for b in BALANCING:
      moe_p, ref_p = point(c, b), dense(c)
      t = [int(full[full['point'] == p][STEPS].max()) if (full['point'] == p).any() else 0 for p in (moe_p, ref_p)]
      v = rules_lib.paired(
        *base.paired_by_seed(logs, moe_p, ref_p, 'ln_mse'), expect='less', margin=ROUTING_MARGIN, claim=''
      )
      reading = routing_reading(v, _at_edge(frame, full, moe_p), _at_edge(frame, full, ref_p), t[0] == t[1])
      rows.append(
        {
          'condition': c,
          'MoE point': b,
          'T (MoE, dense)': f'{t[0]}, {t[1]}',
          'n': v.n,
          'ln MSE, MoE - dense': v.statistic,
          'ci_lo': v.ci[0],
          'ci_hi': v.ci[1],
          'reading': reading,
        }
      )
  return rows


def specialised_load(condition: str) -> float:
  """Max/mean load of a router that sends each input cluster of `condition` to its own expert: E times the largest
  cluster's share (1 without clusters: any split of one teacher's inputs is already a specialisation)."""
  task = CONDITIONS[condition][1]
  k = int(task.get('task.num_clusters', 0))
  if k <= 1:
    return 1.0
  w = np.arange(1, k + 1, dtype=float) ** -float(task['task.cluster_zipf'])
  return float(NUM_EXPERTS * w.max() / w.sum())


def collapse_margin(sel: pd.DataFrame, condition: str) -> float:
  """Rules 1, 5: the rise that counts as a collapse: COLLAPSE_RISE, or more where that would not lift the load past
  the load of a router that specialises one expert per cluster (its mean step-0 load + the margin reaches it), so
  that a collapse is never the specialisation the task rewards."""
  start = sel[sel['point'] == point(condition, 'none')]['load_start'] if 'load_start' in sel else []
  start = np.asarray(start, float)
  return max(COLLAPSE_RISE, specialised_load(condition) - float(start.mean())) if len(start) else COLLAPSE_RISE


def headroom_premise(sel: pd.DataFrame, condition: str) -> stats.Check:
  """Rules 1, 5: the no-balancing router starts more than its collapse margin below E (room for a collapse)."""
  p = point(condition, 'none')
  room = NUM_EXPERTS - sel[sel['point'] == p]['load_start'].astype(float) if 'load_start' in sel else []
  m, lo, hi = stats.mean_ci(room, bounds=(0.0, NUM_EXPERTS - 1.0))
  return stats.premise_check(
    f'premise: room for a collapse above the step-0 load ({condition})',
    m,
    (lo, hi),
    collapse_margin(sel, condition),
    what=f'E - max/mean load at step 0 of {p} ({len(room)} seeds; t CI intersected with [0, E - 1])',
  )


def collapse_rule(sel: pd.DataFrame, condition: str) -> stats.Verdict:
  """Rules 1, 5 on `condition`, ungated: load_change(none) - load_change(frozen) above its collapse margin."""
  margin = collapse_margin(sel, condition)
  return rules_lib.paired(
    *base.paired_by_seed(sel, point(condition, 'none'), frozen(condition), 'load_change'),
    expect='greater',
    margin=margin,
    claim=f'without a balancing loss training collapses the top-1 router ({condition} inputs: '
    f'{CONDITIONS[condition][0]}): per seed, its max/mean load rises from step 0 by more than {margin:.3g} '
    f"(one expert's fair share of the tokens, {COLLAPSE_RISE:g}, or the rise to the load of one expert per cluster, "
    f"{specialised_load(condition):.3g}, if larger) beyond the frozen-router control's",
  )


def collapse_control(v: stats.Verdict, control: stats.Verdict) -> stats.Check:
  """A refutation's positive control: the setup collapses where one expert suffices (rule 1 on `control`
  reproduced)."""
  return checks.refutation_control(
    v,
    'the setup can produce a collapse (the one-teacher control collapses)',
    f'rule 1 on {CONTROL} ({CONDITIONS[CONTROL][0]})',
    control,
  )


def rules(sel: pd.DataFrame, scale: str) -> list[stats.Verdict]:
  """The five verdicts of the module docstring (each naming the points it reads)."""
  checks = measurement(sel)
  control = stats.gate(collapse_rule(sel, CONTROL), checks + [headroom_premise(sel, CONTROL)])

  def collapse(condition):
    v = collapse_rule(sel, condition)
    gates = checks + [
      headroom_premise(sel, condition),
      collapse_control(v, control),
    ]
    points = (point(condition, 'none'), frozen(condition), point(CONTROL, 'none'), frozen(CONTROL))
    return dataclasses.replace(stats.gate(v, gates), points=points)

  premise = stats.as_premise(
    stats.Check(
      'premise: training without balancing collapses the router (a collapse to prevent)',
      control.outcome == stats.REPRODUCED,
      f'rule 1 on {CONTROL}: load change, no balancing minus frozen router, {control.statistic:+.3g} '
      f'[{control.ci[0]:+.3g}, {control.ci[1]:+.3g}] ({control.outcome}; a collapse is a rise above '
      f'+{COLLAPSE_RISE:g})',
    )
  )

  def fix(p, words):
    v = rules_lib.paired(
      *base.paired_by_seed(sel, p, NONE, 'load_change'),
      expect='less',
      claim=f'{words} ({CONTROL} inputs, where training without balancing collapses the router): per seed, its '
      "change of max/mean load is below no balancing's",
    )
    return dataclasses.replace(stats.gate(v, checks + [premise]), points=(p, NONE, FROZEN))

  return [
    collapse(OFFSET),
    fix(SWITCH, f'the Switch loss (alpha {SWITCH_ALPHA:g}) reduces it'),
    zloss.verdict(sel, scale),
    fix(BIAS, f'the DeepSeek-V3 bias (gamma {BIAS_RATE:g}), no aux loss, reduces it'),
    collapse(CENTRED),
  ]


# --------------------------------------------------------------------------- presentation


_RISE = (
  f'training without balancing collapses the router on {CONTROL} (rule 1 reproduced there: its rise beyond the '
  f"frozen router's above +{COLLAPSE_RISE:g}): a collapse to prevent"
)
_ROOM = (
  f"room for a collapse: the no-balancing router's step-0 max/mean load lies more than the collapse margin below "
  f'E = {NUM_EXPERTS} (the margin: {COLLAPSE_RISE:g}, or the rise to the load of one expert per cluster if larger, '
  'so that a collapse is not the specialisation the task rewards); and, for a refutation, the setup can produce a '
  f'collapse: rule 1 reproduced on {CONTROL} ({CONDITIONS[CONTROL][0]})'
)


def _offset_claim(load: str) -> base.Claim:
  """Verdict 1's claim (collapse on offset): `load`, the load arms' scope, then its inputs and reading."""
  return base.Claim(
    stats.SIGN,
    f'{load}; inputs: {CONDITIONS[OFFSET][0]}: a task built so that a collapse costs fit (one expert of width '
    f'{EXPERT_WIDTH} against eight cluster teachers of width 64), unlike {CONTROL}, the published one-teacher '
    'design, where it '
    "costs none. Whether it does is the routing premise's table (reported, not a gate): where it passes, a "
    'collapse would cost at least 0.1 in ln held-out MSE; where it fails or is undecided, routing buys less than '
    'that here and the task is closer to the control. Each condition is read at its own tuned rate: the positive '
    'control shows the measurement '
    "registers a collapse at the control's rate, not that the routing task can collapse at its own (lower) rates; "
    'in the run of 2026-11-30 the rise stayed below +1 at every rate of the grid at T (upper CI ends <= 0.82) and '
    'the router settled near the load of one expert per cluster (final load about 2.9 = 8 / H_8): specialisation, '
    'not collapse. A refutation on this toy task, not of the papers (there, collapse happens where it costs no '
    'fit), and not on inputs a linear router cannot cluster.',
    _ROOM,
  )


def _claims() -> tuple[base.Claim, ...]:
  """One per verdict of `rules`, in its order (base.Claim): kind, scope (what is matched and what is not), premise."""
  full = REGIMES['full']
  moe = (
    f'a bare top-1 softmax_topk MoE of {NUM_EXPERTS} ReLU experts of width {EXPERT_WIDTH} (d_model 16), capacity '
    f'factor 1.0, T = {full.steps:,} steps at full scale to start, doubled by the regime where a ladder asked '
    "(each verdict's budget ladder gives its T)"
  )
  load = (
    f'{moe}, {full.seeds} seeds, load on 4,096 held-out inputs before capacity drops; each trained point at its own '
    'rate tuned on held-out MSE, the frozen-router control at an untuned 3e-3 (its load change is 0 at every rate), '
    'paired by seed'
  )
  return (
    _offset_claim(load),
    base.Claim(
      stats.SIGN,
      f'{load}; inputs: {CONDITIONS[CONTROL][0]}, where a single expert can fit the teacher, so the collapse the fix '
      'prevents costs no fit (on the routing task, where no-balancing training did not raise the load in the first '
      'run, the fixes are tabulated, not judged). The inputs judged were chosen after that run, with the fix loads '
      'on control seen: the published design the cold review questioned (change row of 2026-11-29); a replication on '
      "fresh seeds with the inputs fixed first is the remedy, not run (the seeds are the earlier width-64 run's: the "
      'same inits and offsets, so a replication at another expert width, not on fresh seeds). The offset already '
      'skews the router at init (step-0 load about 4.4 of 8); in the run of 2026-11-30 no balancing ended near 6.8, '
      'the Switch loss and the bias near 1.25: they balance the load, not only reduce its rise. The Switch loss at the '
      f'published alpha {SWITCH_ALPHA:g} (not tuned) against no balancing.',
      _RISE,
    ),
    zloss.claim(NUM_EXPERTS, Z_EXPERT_WIDTH, REGIMES['full'].steps),
    base.Claim(
      stats.SIGN,
      f'{load}; inputs: {CONDITIONS[CONTROL][0]}, where a single expert can fit the teacher, chosen after results '
      '(as verdict 2, on its seeds: a replication at another expert width, not on fresh seeds); the '
      f'DeepSeek-V3 bias at the published gamma {BIAS_RATE:g} (not '
      "tuned), no auxiliary loss, against no balancing. The control's imbalance is largely a constant logit per "
      "expert (the router's weights times the seed's offset), which a per-expert bias cancels by construction; in the "
      'run of 2026-11-30 the bias balanced the load (final about 1.25) at its tuned rate but not at Adam 0.1 (final '
      'about 7).',
      _RISE,
    ),
    base.Claim(
      stats.SIGN,
      f'{load}; inputs: {CONDITIONS[CENTRED][0]} (clustered inputs of mean 0 are not symmetric, so a linear router '
      'can still collapse on them, less easily than with an offset); as verdict 1, a task built so that a collapse '
      "costs fit (whether it does: the routing premise's table). Here the step-0 load (about 1.6) + 1 lies below the "
      'load of one expert per Zipf cluster (8 / H_8 = 2.94), so a collapse must rise past 2.94 (the margin is the '
      'rise to it): a rise that one expert per cluster would explain is not counted. That margin (1.315 in the run of '
      '2026-11-30) was set before that run, after earlier results (change row 1044f9c), and it decides the verdict: '
      "with +1 the tied rates' CIs straddle the boundary. The chosen rate falls with each doubling (0.01, 0.003, "
      '0.001 over T/4, T/2, T), and at a fixed rate the rise still grows with the budget (at 3e-3: about 0.57, 0.83, '
      '0.99): no collapse within 4,000 steps at the MSE-tuned rate, not that none would come.',
      _ROOM,
    ),
  )


ABLATION = base.Study(
  name='load_balancing',
  claim=(
    'Without a balancing loss token-choice routers collapse onto few experts; the Switch loss '
    '(alpha = 1e-2, Fedus et al. 2021) prevents it; the router z-loss (1e-3, Zoph et al. 2022) '
    'stabilises training; the DeepSeek-V3 bias (gamma = 1e-3) balances '
    'without an auxiliary loss.'
  ),
  citation=(
    'Shazeer et al. 2017; Fedus, Zoph, Shazeer 2021 (Switch Transformer); Zoph et al. 2022 '
    '(ST-MoE); DeepSeek-AI 2024 (DeepSeek-V3, aux-loss-free balancing)'
  ),
  published='alpha = 1e-2 (Switch), z-loss 1e-3 (ST-MoE: 3/3 runs stable with it, 4/6 without), bias step '
  'gamma = 1e-3 (DeepSeek-V3); qualitative: collapsed vs balanced load',
  setup=(
    'teacher_student with an MoE of 8 ReLU experts of width 32 (d_model 16), top-1 softmax_topk (Switch), capacity '
    'factor 1.0. Load arms on three inputs: offset (the routing task, 8 Zipf clusters with a teacher of width 64 '
    'each, mean 0, plus a per-seed offset c ~ N(0, I)), centred (the same, mean 0) and control (one teacher of '
    'width 32 on c + N(0, I), the published design); each with trained points none / switch / bias tuned per point '
    'on held-out MSE and a frozen router at 3e-3 (not tuned: its load change is 0 by construction); load measured '
    'on 4,096 held-out inputs at step 0 and at the end; collapse = a rise of max/mean load above +1 (scale 1 .. 8), or '
    'past the load of one expert per cluster where that is more. '
    "A dense FFN of d_ff 32 on offset and on centred (rate tuned) is the routing premise's reference, reported. "
    'The z-loss test: experts of width 64, bfloat16 router, Switch loss on, no gradient clipping, one teacher on '
    'N(0, I); a pilot without z-loss at Adam rates 0.07 ... 3 on 16 seeds of its own fixes the test rate (failed '
    'fraction in [0.1, 0.9] at every budget); the test arm (none, z-loss 1e-3, frozen router, float32 router) on '
    '64 seeds runs there after it; failed = diverged (the blow-up rule over 150 steps at every budget) or held-out '
    'relative MSE >= 0.3'
  ),
  regimes=REGIMES,
  arms=arms,
  rules=rules,
  collect=collect,
  claims=_claims(),
  changes=CHANGES,
)
