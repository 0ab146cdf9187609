"""memorization_capacity: how many bits of random facts can an FFN store per parameter, at its peak?

Claims. Allen-Zhu & Li 2024 (Physics of Language Models 3.3; docs/references.md#allen-zhu-and-li-2024):
a model trained to saturation stores about 2 bits per parameter after 1,000 exposures per fact and
about 1 bit after 100, read as the *peak* over data sizes, over model sizes where bits grow in proportion
to parameters; an MoE keeps about 1/1.3 of the dense capacity per total parameter. Morris et al. 2025
(docs/references.md#morris-et-al-2025): about 3.6 bits per parameter (a reference line, not a verdict).
Random labels (Bubeck, Eldan, Lee & Mikulincer 2020): a ReLU layer of width h on d-dim inputs fits about
h d / 4 generic labels.

Setup. Task `memorization`: N facts (subject, relation) -> object, objects uniform over V = 256 values;
bits stored = N log2 V minus the total cross-entropy on the facts in bits (tasks/sequence.py). Model
`ffn_stack` (causal mean of embeddings -> 2 residual ReLU FFN blocks -> tied unembedding) with frozen
random embeddings, so the facts live only in the FFN blocks and 3 norm scales: bits per non-embedding
(= trainable) parameter. d_model 16, d_ff 32, 64, 128 (2,192, 4,304, 8,528 parameters; full scale). E
exposures per fact at a fixed step budget per E, batch = E N / steps (the T/2 runs keep E and double the
batch; full: E = 1,000 is 8,000 steps of batch N/8, so "exposures" are passes over the facts in minibatches, not
full-batch steps). One arm per (E, N); its points are the sizes whose peak that N helps bracket. MoE arms (full:
1,000 exposures, the dense arm's batches): each FFN 4 or 12 ReLU experts 8 units wide (Switch
softmax-then-top-k router, k = 1, 2, dropless, default load-balance and z losses; 2,416 and 7,152 total
non-embedding parameters, inside the dense range, the router 5% of them), one arm per (k, N) with the sizes
whose peak that N brackets as points, with their own rate grid (top-1 {0.003, 0.01, 0.03}; top-2 {0.01, 0.03, 0.1};
the control {0.01, 0.03, 0.1, 0.3} at full). The regime policy tunes the rate per point on
the mean over seeds of the final cross-entropy on the facts (`eval_loss`, the training objective). Random labels
(bare FFN d = 16, h = 64, 1,153 parameters, batch 256) are not tuned: at N = h d / 4 the fit is exact and the
loss left (~1e-14 at Adam 1e-2) is float32 rounding, which a tuned rate would chase. Per (arm, size) the peak N
has the most bits in the mean over seeds; every seed is read at that N. Full scale: dense rates {0.01, 0.03, 0.1}
at E = 1,000 and {0.01, 0.03, 0.1, 0.3} at E = 100, MoE as above to start, 5 seeds, cap FULL_CAP
reference-seconds. The sizes and grids, and why these (d_ff 16 dropped, 128 added; d_ff 256 over the cap on 2 CPU
cores): history.md.

Verdict rules (fixed before the run; Holm over all of them; in `rules` order: 1 and 2 are rule 1 at E = 1,000
and 100, 3 is rule 2, 4 and 5 are rule 3 at k = 1 and 2):
  1. [per E; kind `magnitude`: a number with a margin, read on the budget ladder T/4, T/2, T] per seed the
     geometric mean over sizes of peak bits / non-embedding params; t CI over seeds of the logs,
     exponentiated; claimed 2 (E = 1,000) or 1 (E = 100): reproduced if the CI lies inside [claim / 1.25,
     claim * 1.25], not reproduced if outside. Premise (stats.PREMISE) (a) bits proportional to params: the
     per-seed log-log slope of peak bits on params has its CI containing 1 (or inside 1 ± 0.1) and narrower
     than 0.3 (remedy: double the steps), the paper's own reading ("over model sizes where bits grow in
     proportion to parameters"); gated also on (b) every size's peak inside its N grid.
  2. Random labels [kind `existence`: "can fit"]: the mean fraction of N = h d / 4 = 256 points fitted
     (|error| < 0.1) is above 0.9, its CI intersected with [0, 1]; premise (c) the setup can fail: at the
     largest N (above the parameter count) it is below 0.9.
  3. [MoE, per k; kind `magnitude`] ratio of means over seeds of (mean over MoE sizes of MoE peak bits / total
     params) to (the same seeds' dense figure at those sizes, log-log interpolated, clamped outside the dense
     range); CI from rules_lib.ratio_of_means (a t CI of the log ratio below 10 seeds, BCa from 10), its p the CI
     inverted; reproduced if the CI lies above 1 / 1.3, not reproduced if below. Premise (d) the MoE arm can
     express the comparison, computed from its runs: experts at least MOE_MIN_WIDTH = 8 units wide, the router
     under MOE_MAX_ROUTER = 10% of the MoE's total non-embedding parameters, and every MoE size inside the dense
     arm's size range (no clamped extrapolation); the arm before issue 46 (16 experts 1 wide, the router 512 of
     2,128 total parameters, below the dense range) failed it. Gated also on (b) for the MoE arm and the dense
     arm at its E; no slope check: the comparison is at matched size, and 2 MoE sizes cannot give a slope CI.
     A `not reproduced` stands only on its positive control (checks.refutation_control; built after the published
     refutations, which were invalid without it): the same 4 experts with all of them active (top-k = E = 4: a ReLU
     FFN of width 32 whose four 8-unit groups the learned router's softmax weights scale, summing to 1), on the same N
     grid and budgets, rule 3 reproduced on it:
     the measurement and this MoE module can return a ratio above the bar, so a top-1 or top-2 shortfall is not
     theirs (it is top-k over 8-unit experts', not separable from the narrow active path: the control has no hard
     selection and no load-balance gradient); else `invalid` with both numbers. One control serves both k (a
     token-hash control until the design review of 2026-11-30: four disjoint 8-wide stacks, expected on the bar by
     width scaling alone; changes/).
(b): a peak at the largest N fails if it rises >= 5% over the next N; a peak at the smallest N fails unless
its bits exceed (N/2) log2 V, all that a grid point below could hold.
Rate edges: a verdict reads a size only at its peak N, so an N whose every fact stored (N log2 V bits) is below
the size's peak bits at another N cannot be the peak at any rate, and its rate edge is not a failed check (`settled`).
History: docs/results/memorization_capacity/history.md.
"""

import dataclasses
import math
import re
from typing import TypedDict

import numpy as np
import pandas as pd

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import checks
from ffn_research.ablations import regime as regime_lib
from ffn_research.ablations.changes.memorization_capacity import CHANGES
from ffn_research.ablations.storage import PEAK_RISE  # noqa: F401
from ffn_research.ablations.storage import SIZE
from ffn_research.ablations.storage import SLOPE_MARGIN  # noqa: F401
from ffn_research.ablations.storage import SLOPE_MAX_WIDTH  # noqa: F401
from ffn_research.ablations.storage import N  # noqa: F401  (the measurement's home: ablations/storage.py)
from ffn_research.ablations.storage import bits_of_fit  # noqa: F401
from ffn_research.ablations.storage import moe_pairs
from ffn_research.ablations.storage import peak_inside_check
from ffn_research.ablations.storage import peaks
from ffn_research.ablations.storage import proportional_check
from ffn_research.ablations.storage import routing_check
from ffn_research.ablations.storage import settled
from ffn_research.config import default_config


class Settings(TypedDict):
  """A scale's task, grids and step counts."""

  d_model: int
  relations: int
  values: int
  exposures: dict[int, int]  # exposure count E -> steps
  d_ffs: dict[int, tuple[int, ...]]  # d_ff -> its N grid
  moe_e: int
  moe_width: int  # each expert's width (d_ff of an expert)
  moe_facts: dict[int, tuple[int, ...]]  # number of experts (an MoE size) -> its N grid
  control_facts: dict[int, tuple[int, ...]]  # the control's MoE size (experts, all active) -> its N grid
  rl_points: tuple[int, ...]
  rl_steps: int


# Per scale: steps per exposure count E (T; the regime's steps is their common divisor), d_ff -> its N grid,
# the MoE arms' E, expert width and N grid per number of experts, the random labels' N grid and steps.
SETTINGS: dict[str, Settings] = {
  'smoke': dict(
    d_model=8,
    relations=8,
    values=16,
    exposures={1000: 20, 100: 20},  # both claimed E: the study declares one verdict per E at every scale
    d_ffs={8: (64, 128), 16: (64, 128), 32: (64, 128)},
    moe_e=100,
    moe_width=8,
    moe_facts={4: (128,), 8: (128,)},
    control_facts={4: (128,)},
    rl_points=(256, 2048),
    rl_steps=100,
  ),
  'quick': dict(
    d_model=16,
    relations=16,
    values=256,
    exposures={1000: 4000, 100: 400},  # E = 1,000 at batch N/4
    d_ffs={16: (256, 512), 32: (512, 1024), 64: (512, 1024, 2048)},
    moe_e=100,
    moe_width=8,
    moe_facts={4: (256, 512, 1024), 8: (512, 1024, 2048)},
    control_facts={4: (256, 512, 1024)},
    rl_points=(256, 1024, 2048),
    rl_steps=2000,
  ),
  'full': dict(
    d_model=16,
    relations=16,
    values=256,
    exposures={1000: 8000, 100: 400},  # E = 1,000 at batch N/8: exposures, not full-batch steps
    d_ffs={32: (512, 1024, 2048), 64: (512, 1024, 2048), 128: (1024, 2048, 4096)},
    moe_e=1000,
    moe_width=8,
    moe_facts={4: (256, 512, 1024, 2048), 12: (1024, 2048, 4096)},  # 2,416 and 7,152 parameters: inside the dense range
    control_facts={4: (256, 512, 1024, 2048)},  # the control at the smaller size only (the cap)
    rl_points=(128, 256, 512, 1024, 2048),
    rl_steps=4000,
  ),
}
RATES = {'smoke': (0.03, 0.1, 0.3), 'quick': (0.01, 0.03, 0.1), 'full': (0.01, 0.03, 0.1, 0.3)}
E_RATES = {'full': {1000: (0.01, 0.03, 0.1)}}  # per scale, an exposure count's own dense grid (else RATES)
MOE_RATES = {'smoke': (0.03, 0.1, 0.3), 'quick': (0.003, 0.01, 0.03), 'full': (0.003, 0.01, 0.03)}  # top-1
# top-2: a step up, where the published top-2 chose the grid's top (0.03)
MOE_RATES_UP = {'smoke': (0.03, 0.1, 0.3), 'quick': (0.01, 0.03, 0.1), 'full': (0.01, 0.03, 0.1)}
# the control: one more step up (dense d_ff 32, which it contains, ties at 0.1; the softmax weights scale each expert
# by about 1/4)
MOE_RATES_CONTROL = {'smoke': (0.03, 0.1, 0.3), 'quick': (0.01, 0.03, 0.1, 0.3), 'full': (0.01, 0.03, 0.1, 0.3)}
CLAIMS = {1000: 2.0, 100: 1.0}  # bits per parameter (Allen-Zhu & Li 2024)
MORRIS_BITS = 3.6  # bits per parameter at saturation (Morris et al. 2025)
BITS_FACTOR = 1.25  # rule 1: CI inside [claim / 1.25, claim * 1.25]
MOE_TOP_KS = (1, 2)
# Full cap in reference-seconds, fixed before the first run of issue 46's design: the published run's step rates
# put the E = 1,000 dense arm at 8,000 steps of N/8 near its old cost (~2,300 run-seconds: a step of N/8 ran 8.5x
# faster than one of N) and the MoE arms (2 sizes, 6 N, top-1 and top-2) at 2,000-4,000; two hours, above issue
# 46's 60-minute guide, rather than a cap that stops the run before its ladders.
# 7,200 until the MoE control; 9,000 with the token-hash control (the run of 2026-11-27 spent 7,980 without any);
# 11,500 after the design review of 2026-11-30 (pass 0 ~9,500 with a control, its likely rate edges and the E = 100
# doublings): changes/
FULL_CAP = 11500.0
MOE_FACTOR = 1.3  # rule 3: MoE keeps at least 1 / 1.3 of dense bits per total parameter
MOE_MIN_WIDTH = 8  # premise (d): experts at least this wide
MOE_MAX_ROUTER = 0.10  # premise (d): the router under this share of the MoE's total non-embedding parameters
RL_D_MODEL, RL_D_FF = 16, 64  # random labels: h d / 4 = 256
RL_PARAMS = RL_D_FF * (RL_D_MODEL + 2) + 1
RL_QUARTER = RL_D_MODEL * RL_D_FF // 4
RL_FIT_LEVEL = 0.9
SEED, E, K = regime_lib.SEED, 'exposures', 'top_k'
_ARM = re.compile(r'^(?:moe_k(\d+)(a?)_)?e(\d+)_n(\d+)$')
CONTROL = 'control'  # memorization_rows: the MoE verdicts' control arm (all experts active)
EXPERTS = 'model.moe.num_experts'


def arm_name(exposures: int, facts: int, top_k: int = 0, control: bool = False) -> str:
  return f'moe_k{top_k}{"a" * control}_e{exposures}_n{facts}' if top_k else f'e{exposures}_n{facts}'


def control_k(s: Settings) -> int:
  """The control's top-k: its MoE size's every expert."""
  (experts,) = s['control_facts']
  return experts


def moe_label(experts: int) -> str:
  return f'experts={experts}'


def dense_label(e: int, n: int, d_ff: int) -> str:
  return f'{arm_name(e, n)}: d_ff={d_ff}'


# --------------------------------------------------------------------------- arms


def _memorization_base(s: Settings, facts: int):
  c = default_config()
  m, t = c.model, c.task
  m.arch, m.num_layers, m.tie_embeddings, m.freeze_embeddings = 'ffn_stack', 2, True, True
  m.d_model, m.activation = s['d_model'], 'relu'
  t.name, t.num_facts, t.num_relations, t.num_objects = 'memorization', facts, s['relations'], s['values']
  return c


def _moe_base(s: Settings, facts: int, top_k: int):
  c = _memorization_base(s, facts)
  e = c.model.moe
  e.num_experts, e.top_k, e.capacity_factor, e.router = max(s['moe_facts']), top_k, 0.0, 'softmax_topk'
  return c


def _random_labels_base():
  c = default_config()
  c.task.name = 'random_labels'
  c.model.d_model, c.model.d_ff = RL_D_MODEL, RL_D_FF
  c.train.batch_size, c.train.learning_rate = 256, 1e-2
  return c


def _exposure_budget(exposures: int, facts: int):
  return lambda steps: {**base.budget(steps), 'train.batch_size': exposures * facts // steps}


def steps_unit(s: Settings) -> int:
  return math.gcd(*s['exposures'].values(), s['rl_steps'])


def arms(scale: str) -> list[base.Arm]:
  s = SETTINGS[scale]
  unit, out = steps_unit(s), []
  for e, steps in s['exposures'].items():
    for n in sorted({n for ns in s['d_ffs'].values() for n in ns}):
      out.append(
        base.Arm(
          arm_name(e, n),
          _memorization_base(s, n),
          {f'd_ff={f}': {'model.d_ff': f} for f, ns in s['d_ffs'].items() if n in ns},
          budget=_exposure_budget(e, n),
          rates=E_RATES.get(scale, {}).get(e),
          steps_factor=steps // unit,
        )
      )
  moe_steps = s['exposures'][s['moe_e']] // unit
  families = [(k, False, s['moe_facts']) for k in MOE_TOP_KS] + [(control_k(s), True, s['control_facts'])]
  for k, control, facts in families:
    out += [
      base.Arm(
        arm_name(s['moe_e'], n, k, control),
        _moe_base(s, n, k),
        {moe_label(x): {EXPERTS: x, 'model.d_ff': s['moe_width']} for x, ns in facts.items() if n in ns},
        budget=_exposure_budget(s['moe_e'], n),
        rates=(MOE_RATES_CONTROL if control else MOE_RATES if k == 1 else MOE_RATES_UP)[scale],
        steps_factor=moe_steps,
      )
      for n in sorted({n for ns in facts.values() for n in ns})
    ]
  out.append(
    base.Arm(
      'random_labels',
      _random_labels_base(),
      {f'N={n}': {'task.num_points': n} for n in s['rl_points']},
      tuned=False,
      steps_factor=s['rl_steps'] // unit,
    )
  )
  return out


# --------------------------------------------------------------------------- measurements (pure)


def memorization_rows(sel: pd.DataFrame) -> pd.DataFrame:
  """The memorization runs of a selection with their top_k (0 = dense), E and N read from the arm's name."""
  keys = sel['arm'].str.extract(_ARM)
  mem = sel[keys[3].notna()].copy()
  keys = keys[keys[3].notna()]
  mem[K], mem[E], mem[N] = keys[0].fillna('0').astype(int), keys[2].astype(int), keys[3].astype(int)
  mem[CONTROL] = keys[1] == 'a'
  mem[SIZE] = mem[SIZE].astype(int)
  mem['active'] = mem[SIZE] - mem['num_ffn_params'] + mem['num_active_ffn_params']
  return mem


# --------------------------------------------------------------------------- verdicts (pure in the selection)


def family(mem: pd.DataFrame, top_k: int, exposures: int, control: bool = False) -> pd.DataFrame:
  """The runs of one arm family: dense (top_k 0), an MoE's, or (control) the MoE verdicts' control."""
  return mem[(mem[K] == top_k) & (mem[E] == exposures) & (mem[CONTROL] == control)]


def capacity_verdict(mem: pd.DataFrame, exposures: int, s: Settings) -> stats.Verdict:
  """Rule 1 with checks (a) and (b): peak bits per non-embedding parameter, CI over seeds of log means."""
  g = family(mem, 0, exposures)
  top, claimed = peaks(g), CLAIMS[exposures]
  lo_ok, hi_ok = claimed / BITS_FACTOR, claimed * BITS_FACTOR
  points = [dense_label(exposures, n, f) for f, ns in s['d_ffs'].items() for n in ns]
  with np.errstate(divide='ignore'):  # a size that stored nothing gives -inf: the seed's mean is not finite
    per_seed = np.log(top['bits_stored'] / top[SIZE]).groupby(top[SEED]).mean()
  m, lo, hi = stats.mean_ci(per_seed)
  test = 'per seed the geometric mean over sizes of peak bits / non-embedding params; t 95% CI over seeds'
  rule = (
    f'reproduced if the 95% CI lies inside [{lo_ok:.3g}, {hi_ok:.3g}], not reproduced if outside, else (or with '
    '< 3 seeds or < 3 sizes) inconclusive'
  )
  claim = (
    f'at {exposures} exposures per fact an FFN stores about {claimed:g} bits per (non-embedding) parameter at its peak'
  )
  if len(per_seed) < 3 or top[SIZE].nunique() < 3:
    v = stats.underpowered(
      claim,
      test,
      rule,
      len(per_seed),
      '< 3 seeds or < 3 sizes',
      statistic=math.exp(m) if len(per_seed) else math.nan,
      boundaries=(lo_ok, hi_ok),
    )
  else:
    se = float(np.std(per_seed, ddof=1) / math.sqrt(len(per_seed)))
    v = stats.Verdict(
      claim,
      stats.decide((math.exp(lo), math.exp(hi)), lo_ok, hi_ok),
      math.exp(m),
      (math.exp(lo), math.exp(hi)),
      test,
      rule,
      len(per_seed),
      p_value=stats.decision_p(m, se, len(per_seed) - 1, math.log(lo_ok), math.log(hi_ok)),
      boundaries=(lo_ok, hi_ok),
    )
  check, slope = proportional_check(top, f'{exposures} exposures', points)
  v = dataclasses.replace(
    v,
    extra={'slope': slope.statistic, 'slope_ci_lo': slope.ci[0], 'slope_ci_hi': slope.ci[1]},
    points=tuple(points),
    settled=settled(g, s['values']),
  )
  return stats.gate(v, [stats.as_premise(check), peak_inside_check(g, f'{exposures} exposures', s['values'])])


def random_labels_verdict(sel: pd.DataFrame, s: Settings) -> stats.Verdict:
  """Rule 2 with check (c): the largest N (above the parameter count) must fall below the level."""
  rl = sel[sel['arm'] == 'random_labels']
  v = rules_lib.threshold(
    rl.loc[rl['task.num_points'] == RL_QUARTER, 'fraction_fitted'],
    level=RL_FIT_LEVEL,
    direction='above',
    bounds=(0.0, 1.0),
    claim=f'a trained ReLU FFN (h = {RL_D_FF}, d = {RL_D_MODEL}) fits at least '
    f'{RL_FIT_LEVEL:.0%} of N = h d / 4 = {RL_QUARTER} random real labels',
  )
  n_top = max(s['rl_points'])
  m, lo, hi = stats.mean_ci(rl.loc[rl['task.num_points'] == n_top, 'fraction_fitted'], bounds=(0.0, 1.0))
  check = stats.premise_check(
    'random labels: the setup can fail',
    m,
    (lo, hi),
    -math.inf,
    RL_FIT_LEVEL,
    what=f'fraction fitted at N = {n_top} ({n_top / RL_PARAMS:.2f} x the {RL_PARAMS} parameters)',
  )
  return dataclasses.replace(
    stats.gate(v, [check]), points=(f'random_labels: N={RL_QUARTER}', f'random_labels: N={n_top}')
  )


def ratio_p(a, b, edge: float) -> float:
  """Two-sided p of mean(a) / mean(b) against `edge`: one minus the largest confidence whose CI
  (rules_lib.ratio_of_means) still excludes the edge, so p < 0.05 exactly when the 95% CI excludes it."""

  def excludes(c):
    _, lo, hi = rules_lib.ratio_of_means(a, b, confidence=c)
    return math.isfinite(lo) and math.isfinite(hi) and not lo <= edge <= hi

  if not excludes(0.01):
    return 1.0
  c_lo, c_hi = 0.01, 0.9999
  for _ in range(14):
    c = (c_lo + c_hi) / 2
    c_lo, c_hi = (c, c_hi) if excludes(c) else (c_lo, c)
  return 1.0 - c_lo


def router_params(moe: pd.DataFrame, top_k: int) -> pd.Series:
  """Per MoE run, its router's parameters from its counts: the FFN's total minus active parameters are the E - k
  experts not used per token (E: the run's `model.moe.num_experts`), so one expert has (total - active) / (E - k)
  and the router what remains of the active count after k experts."""
  expert = (moe['num_ffn_params'] - moe['num_active_ffn_params']) / (moe[EXPERTS].astype(float) - top_k)
  return moe['num_active_ffn_params'] - top_k * expert


def moe_premise(moe: pd.DataFrame, dense: pd.DataFrame, top_k: int) -> stats.Check:
  """Premise (d): the MoE arm can express the comparison with the dense arm, from its runs: experts at least
  MOE_MIN_WIDTH wide, the router under MOE_MAX_ROUTER of the total non-embedding parameters, every MoE size inside
  the dense arm's size range (the dense figure interpolated, not clamped)."""
  name = f'MoE top-{top_k} can express the comparison (experts >= {MOE_MIN_WIDTH} wide, router < {MOE_MAX_ROUTER:.0%} '
  name += 'of the parameters, sizes inside the dense range)'
  if moe.empty or dense.empty:
    return stats.as_premise(stats.Check(name, False, 'no MoE or no dense runs to compute it from'))
  width = int(moe['model.d_ff'].min()) if 'model.d_ff' in moe else 0
  by_size = moe.assign(router=router_params(moe, top_k)).groupby(SIZE)[['router', 'active']].mean()
  share = by_size['router'] / by_size.index
  lo, hi = int(dense[SIZE].min()), int(dense[SIZE].max())
  outside = [int(x) for x in by_size.index if not lo <= x <= hi]
  parts = [
    (width >= MOE_MIN_WIDTH, f'experts {width} wide (>= {MOE_MIN_WIDTH} required)'),
    (
      bool((share < MOE_MAX_ROUTER).all()),
      'router '
      + ', '.join(
        f'{r:.0f} of {size} total ({r / size:.0%}) and of {a:.0f} active ({r / a:.0%}) parameters'
        for size, r, a in zip(by_size.index, by_size['router'], by_size['active'], strict=True)
      )
      + f' (< {MOE_MAX_ROUTER:.0%} of the total required)',
    ),
    (
      not outside,
      f'MoE sizes {", ".join(str(int(x)) for x in by_size.index)} against the dense range [{lo}, {hi}]'
      + (
        f' ({", ".join(map(str, outside))} outside: the dense figure is clamped, not interpolated)' if outside else ''
      ),
    ),
  ]
  failed = [text for ok, text in parts if not ok]
  detail = '; '.join(('' if ok else 'FAILS: ') + text for ok, text in parts)
  if failed:
    detail += '; this arm cannot show the claim either way (redesign: issue 46)'
  return stats.as_premise(stats.Check(name, not failed, detail))


def moe_verdict(mem: pd.DataFrame, top_k: int, s: Settings) -> stats.Verdict:
  """Rule 3 with check (b) on the MoE arm and the dense arm at its E."""
  e, floor = s['moe_e'], 1 / MOE_FACTOR
  moe, dense, every = family(mem, top_k, e), family(mem, 0, e), family(mem, control_k(s), e, control=True)
  by_size = moe_pairs(peaks(moe), peaks(dense))
  pairs = by_size.groupby(SEED)[['moe_bpp', 'dense_bpp']].mean()
  r, lo, hi = rules_lib.ratio_of_means(pairs['moe_bpp'], pairs['dense_bpp'])
  p = ratio_p(pairs['moe_bpp'], pairs['dense_bpp'], floor) if math.isfinite(lo) else None
  v = stats.Verdict(
    f'an MoE ({"/".join(map(str, s["moe_facts"]))} experts {s["moe_width"]} wide, top-{top_k}) stores at least '
    f'1/{MOE_FACTOR:g} = {floor:.0%} of the dense peak bits per total non-embedding parameter ({e} exposures)',
    stats.decide((lo, hi), floor, math.inf),
    r,
    (lo, hi),
    'ratio of means over seeds of (mean over MoE sizes of MoE peak bits / total non-embedding params) to (the same '
    "seeds' dense figure at those sizes, log-log interpolated); 95% CI of rules_lib.ratio_of_means (t on the log ratio "
    'below 10 seeds, BCa from 10), seeds paired',
    f'reproduced if the 95% CI of the ratio lies above {floor:.3g}; not reproduced if it lies below; otherwise, or '
    'with < 3 seeds, inconclusive',
    len(pairs),
    f'p = {p:.3g} (the CI inverted)'
    if p is not None
    else 'no CI: < 3 paired seeds, or a degenerate sample (no bits stored)',
    p_value=p,
    boundaries=(floor,),
    points=tuple(f'{arm_name(e, n, top_k)}: {moe_label(x)}' for x, ns in s['moe_facts'].items() for n in ns)
    + tuple(dense_label(e, n, f) for f, ns in s['d_ffs'].items() for n in ns),
    settled={**settled(moe, s['values']), **settled(dense, s['values']), **settled(every, s['values'])},
  )
  control = moe_control(v, by_size, all_experts_control(every, dense, s), s)
  v = dataclasses.replace(v, points=v.points + control.points)
  return stats.gate(
    v,
    [
      moe_premise(moe, dense, top_k),
      routing_check(by_size, f'top-{top_k}', needed=v.outcome == stats.NOT_REPRODUCED),
      control,
      peak_inside_check(moe, f'MoE top-{top_k}', s['values']),
      peak_inside_check(dense, f'dense at {e} exposures', s['values']),
    ],
  )


def all_experts_control(every: pd.DataFrame, dense: pd.DataFrame, s: Settings) -> stats.Verdict:
  """The MoE refutations' positive control: the same experts with every one active (top-k = E, the learned router
  as gate), rule 3 on them at their size (s['control_facts']): reproduced if their ratio to dense per total parameter
  has its CI above 1 / MOE_FACTOR."""
  pairs = moe_pairs(peaks(every), peaks(dense)).groupby(SEED)[['moe_bpp', 'dense_bpp']].mean()
  return checks.ratio_control(
    f'control: {"/".join(map(str, s["control_facts"]))} experts {s["moe_width"]} wide, all active (top-'
    f'{control_k(s)}), keep at least {1 / MOE_FACTOR:.0%} of the dense bits per total parameter',
    pairs['moe_bpp'],
    pairs['dense_bpp'],
    1 / MOE_FACTOR,
  )


def moe_control(v: stats.Verdict, by_size: pd.DataFrame, control: stats.Verdict, s: Settings) -> stats.Check:
  """Rule 3's refutation control (checks.refutation_control): `all_experts_control` reproduced where the rule alone
  refutes,
  its points then read with the verdict's; the rule's numbers per MoE size in the detail."""
  per_size = '; '.join(
    f'{size:,} parameters: {rules_lib.ratio_of_means(g["moe_bpp"], g["dense_bpp"])[0]:.3g}'
    for size, g in by_size.groupby(SIZE)
  )
  needed = v.outcome == stats.NOT_REPRODUCED
  points = tuple(
    f'{arm_name(s["moe_e"], n, control_k(s), control=True)}: {moe_label(x)}'
    for x, ns in s['control_facts'].items()
    for n in ns
  )
  check = checks.refutation_control(
    v,
    'premise: a positive control for a refutation (the same experts, all active, keep >= 1/1.3)',
    f'the same experts with all of them active, at {"/".join(map(str, s["control_facts"]))} experts only, rule 3 '
    f"on them (this verdict's own rule alone per MoE size, for comparison: {per_size}); the control",
    control,
    points=points if needed else (),
  )
  return check


def rules(sel: pd.DataFrame, scale: str) -> list[stats.Verdict]:
  s, mem = SETTINGS[scale], memorization_rows(sel)
  return (
    [capacity_verdict(mem, e, s) for e in sorted(s['exposures'], reverse=True)]
    + [random_labels_verdict(sel, s)]
    + [moe_verdict(mem, k, s) for k in MOE_TOP_KS]
  )


# --------------------------------------------------------------------------- tables and figures


# A limit a design review of capacity_atlas found after this redesign's run began: said in every memorization
# scope, not a change to the runs.
_SOFTMAX = (
  ' The object is scored over every token (V objects + N/16 subjects + 16 relations), so a larger N also pays to '
  'keep mass off more distractors in the 16-d frozen embedding space: every bits figure is a lower bound on the '
  'same weights scored over the V objects only (task.object_softmax, not used here), and the gap may be larger '
  'where fewer facts are recalled at the peak (the MoE arms).'
)


ABLATION = base.Study(
  name='memorization_capacity',
  claim=(
    'At saturation a model stores about 2 bits of knowledge per parameter after 1,000 exposures per fact and '
    'about 1 bit after 100, read at the peak over data sizes, and an MoE keeps about 1/1.3 of it per total '
    'parameter (Allen-Zhu & Li 2024); Morris et al. 2025 measure about 3.6 bits per parameter for GPT-style '
    'models on random bitstrings.'
  ),
  citation=(
    'Allen-Zhu & Li 2024, Physics of Language Models Part 3.3; Morris et al. 2025, How much do language '
    'models memorize?; Bubeck, Eldan, Lee & Mikulincer 2020 (h d / 4 random labels)'
  ),
  published='2 bits/param at 1,000 exposures, 1 bit/param at 100 (Allen-Zhu & Li); 3.6 bits/param (Morris et al.)',
  regimes={
    scale: base.Regime(
      rates=RATES[scale], steps=steps_unit(SETTINGS[scale]), seeds=seeds, cap=cap, metric='eval_loss', mode='min'
    )
    for scale, seeds, cap in (('smoke', 3, 70.0), ('quick', 3, 600.0), ('full', 5, FULL_CAP))
  },
  arms=arms,
  rules=rules,
  setup=(
    'Task `memorization` (N facts (subject, relation) -> object, V = 256 objects, train = test); `ffn_stack` '
    'with 2 residual ReLU FFN blocks, frozen random tied embeddings, d_model 16, d_ff swept; one arm per (E, N) '
    'with the sizes it brackets as points; Adam, warmup, cosine decay; fixed steps per exposure count (full: '
    "8,000 at E = 1,000, 400 at E = 100; the regime's T is their common unit, each arm a multiple of it), batch "
    '= E N / steps: at E = 1,000 the T run has batch N/8 (T/2 and T/4 keep E with batch N/4 and N/2), at E = 100 '
    'its batch is N/4 at 400 steps and halves with each doubling of T. MoE: each FFN 4 or 12 ReLU experts 8 units '
    'wide (2,416 and 7,152 total non-embedding parameters, inside the dense range; the router 5% of them), top-1 '
    "and top-2, at E = 1,000 with the dense arm's batches; their control, the 4-expert MoE with all 4 experts active "
    '(top-4). Random labels: bare FFN d 16, h 64, Adam 1e-2, not tuned.'
  ),
  claims=(
    base.Claim(
      kind=stats.MAGNITUDE,
      scope=(
        'Dense `ffn_stack` (2 residual ReLU FFN blocks, frozen random tied embeddings, d_model 16) at d_ff 32, '
        '64, 128 (2,192-8,528 trainable parameters, a 4x range) on N random facts over V = 256 objects, 1,000 '
        'exposures per fact as 8,000 minibatch steps (batch N/8; the T/2 and T/4 rungs keep E at batch N/4 and N/2), '
        'the peak over N in {512, ..., 4,096} per size at its tuned rate, 5 seeds (full scale); bits per trainable '
        '(non-embedding) parameter of a 2-block toy, not per parameter of a language model with learned embeddings '
        'trained on biographies as in Allen-Zhu & Li. The ladder still rises at T: a lower bound on saturation.'
        + _SOFTMAX
      ),
      premise=(
        'bits grow in proportion to parameters over the sizes tested (the per-seed log-log slope of peak bits on '
        'parameters has a CI containing 1, or inside 1 +- 0.1, narrower than 0.3): only then is "bits per '
        'parameter" one number, as the paper reads it'
      ),
    ),
    base.Claim(
      kind=stats.MAGNITUDE,
      scope=(
        'The same dense arm at 100 exposures per fact: T = 400 steps at batch N/4 to start, each doubling of T '
        'halving the batch (the ladder line gives the T it was judged at: 1,600 steps of batch N/16 after both '
        'doublings), the peak over N per size at its tuned rate, 5 seeds (full scale); bits per trainable '
        '(non-embedding) parameter of the 2-block toy, a lower bound where its ladder still rises. The ladder mixes '
        'budget and batch.' + _SOFTMAX
      ),
      premise=(
        'bits grow in proportion to parameters over the sizes tested (the per-seed log-log slope of peak bits on '
        'parameters has a CI containing 1, or inside 1 +- 0.1, narrower than 0.3)'
      ),
    ),
    base.Claim(
      kind=stats.EXISTENCE,
      scope=(
        f'One bare ReLU FFN, d = {RL_D_MODEL}, h = {RL_D_FF} ({RL_PARAMS} parameters), on N = h d / 4 = '
        f'{RL_QUARTER} random real labels (generic inputs), Adam 1e-2 not tuned, 4,000 steps at batch 256 (full '
        "scale), 5 seeds; fitted means |error| < 0.1; one (h, d) of Bubeck et al.'s statement, not a sweep of them."
      ),
      premise=(
        f'the setup can fail: at the largest N (2,048 at full scale, above the {RL_PARAMS} parameters) the fraction '
        f'fitted has its CI below {RL_FIT_LEVEL:g}'
      ),
    ),
    *(
      base.Claim(
        kind=stats.MAGNITUDE,
        scope=(
          'Each FFN of the same `ffn_stack` as 4 or 12 ReLU experts 8 units wide, top-'
          f'{k} (Switch softmax-then-top-k router, dropless, load-balance and z losses): 2,416 and 7,152 total '
          'non-embedding parameters, the router about 5% of them (but 17-39% of the active parameters at top-1, '
          '10-25% at top-2: a top-1 token uses one 8-unit expert, half of d_model), inside the dense range '
          '[2,192, 8,528] where the '
          "dense figure is interpolated, at 1,000 exposures per fact with the dense arm's batches (N/8 at T), the "
          'peak over N per size (4 experts: N in {256, ..., 2,048}; 12: {1,024, 2,048, 4,096}), 5 seeds (full '
          'scale); per total parameter (per active parameter in the table, not judged); two MoE sizes, not 32 '
          'experts of a trained language model as in Allen-Zhu & Li. The control (every expert active) runs at the '
          '4-expert size only: it shows the measurement and this MoE module can return a ratio above the bar, not '
          "that a shortfall is the hard routing's: with every expert active it exercises neither hard selection nor "
          'the load-balance loss (constant at k = E), and its active width is 32 against 8 (top-1) and 16 (top-2), '
          'so a refutation reads "top-k over 8-unit experts in this toy stores less per total parameter", not '
          'separable from the narrow active path; it does not cover the 12-expert size (the control check gives '
          "this verdict's rule per size: a refutation stands at the 4-expert size only, the 12-expert one is "
          'uncontrolled). The two sizes are averaged: where they fall on opposite sides of 1/1.3 (the control check '
          'line gives each) the average decides nothing about either.' + _SOFTMAX
        ),
        premise=(
          f'the MoE arm can express the comparison: experts at least {MOE_MIN_WIDTH} units wide, the router under '
          f"{MOE_MAX_ROUTER:.0%} of the MoE's total non-embedding parameters, and every MoE size inside the dense "
          "arm's size range (computed from the MoE and dense runs); for a refutation a positive control, the same "
          'experts at the smaller size (4) with all of them active keeping >= 1/1.3 (rule 3 on them; built after '
          'the published refutations, which were invalid without it; a token-hash control until the design review '
          'of 2026-11-30), and routing matters '
          '(storage.routing_check; both added after a published result, f042e80 and the next commit)'
        ),
      )
      for k in MOE_TOP_KS
    ),
  ),
  changes=CHANGES,
)
