"""glu_variants: at equal parameters, do gated FFNs (GEGLU, SwiGLU, Bilinear, ...) beat ReLU?

Claim (Shazeer 2020, "GLU Variants Improve Transformer", arXiv 2002.05202, Table 1;
docs/references.md#shazeer-2020): bias-free FFNs in T5-base, gated d_ff scaled by 2/3 so that
parameters match; held-out log-perplexity on C4 at 65,536 steps (mean of 4 runs) GEGLU 1.942,
SwiGLU 1.944 against ReLU 1.997, Bilinear 1.960; at 524,288 steps (one run) 1.633, 1.636, 1.648
against 1.677.

Setup. Eight FFN variants, every one parameter-matched (`model.match_params=True`: gated d_ff =
round(2/3 d_ff)) and run on the same seeds (a seed fixes the language, the data order and the
initialisation, so variants are paired by seed), on next-token prediction on the synthetic Markov language
(tasks/language.py) with a 2-layer transformer (d_model 32, d_ff 128) whose FFNs are bias-free (as in the paper).
The language is the capacity-limited one (`languages.CAPACITY_LIMITED`: V 128, order 2, every token a candidate,
2 next tokens per context, Dirichlet 0.2; 16,384 reachable contexts, entropy floor ~0.32 bits), more than a model
of ~34k parameters can store, so that no variant should reach the floor within the budget and a gap at T is not a
lead in a race to a floor every variant reaches. Score: excess bits/token, the model's held-out bits minus the true
chain's on the same tokens (0 is the entropy floor). Each variant is a point whose learning rate the runner tunes on
the mean score over seeds; Adam with a linear warmup over a tenth of the steps and cosine decay to 0, each budget
(T/4, T/2, T) a run with its own schedule. One budget T fixed before the run (2,000 steps at full;
`max_doublings=0` at every scale): the ladder is computed, but never a reason to train longer.

No proxy task: no teacher is known to be neutral between gated and plain FFNs (a tanh teacher fitted by one-layer
students asks which family approximates tanh; a deeper student on a random-network teacher favours whichever
activation the teacher uses), and Shazeer's measurements are a language model's pre-training loss (T5's span
corruption), not a function fit.

Verdict rules (fixed before the run), on the runs at T, each variant at its chosen rate:
  1.-3. GEGLU, SwiGLU, Bilinear vs ReLU: paired t CI of mean(variant - relu) below 0: reproduced;
        above 0: not reproduced; else inconclusive (`rules_lib.paired`, less).
  4.    gated family vs plain: per seed, the mean over {glu, bilinear, reglu, geglu, swiglu} minus
        the mean over {relu, gelu, silu}; the same paired rule.
  5.    ordering: Spearman rho between Shazeer's 65k column (the mean of 4 runs) and our per-variant
        means, permutation test: reproduced if rho >= 0.5 with one-sided p < 0.05 (`rules_lib.rank_agreement`).
Kind: 1.-4. are fixed-budget comparisons, `stats.SIGN` (Shazeer's Table 1 compares variants after the same
steps); 5. is `stats.MAGNITUDE` (rho >= 0.5). The runner computes each at T/4, T/2 and T, each at its own tuned
rates: a sign claim's decided outcome stands only if it is the same at every budget (an advantage that shrinks
but keeps its sign is an answer at T), the rank's rho must settle; a ladder that does not makes an outcome decided
at T invalid (a failed stability check with no remedy: no doubling left) and leaves an undecided one inconclusive.
The paper's 524k column is not asked separately.
Premise (positive control, role `stats.PREMISE`, computed from the runs the verdict reads): learning happened and
no variant it reads is at its floor: each variant's mean excess bits (95% CI over seeds) inside [FLOOR_MARGIN,
ceiling - LEARNED], above 0.02 bits and at least 1 bit below the unigram model's excess (~6.6 bits on this
language); no remedy, the budget being fixed. For a refutation a second premise, a measured positive control that
the setup orders two FFNs whose order is known: a control point, ReLU at half the FFN width (CONTROL, d_ff 64; its
own tuned rate, same seeds), must lose to ReLU by the paired rule (CI of mean(relu - half) below 0) at the same
budget, with ReLU's learning premise; a `not reproduced` of the rule without it is `invalid`. (When it was added,
and what it replaced: the change rows.)
Gates besides: each variant off its floor and ceiling (the mean, as above with the ceiling's margin
FLOOR_MARGIN) and the parameters matched within PARAM_TOL of ReLU's. Holm over the five verdicts.
"""

import dataclasses
import math

import numpy as np
import pandas as pd

from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research.ablations import base
from ffn_research.ablations import checks
from ffn_research.ablations import languages
from ffn_research.ablations import regime as regime_lib
from ffn_research.ablations.changes.glu_variants import CHANGES
from ffn_research.config import default_config

# Shazeer 2020 Table 1 (docs/references.md): held-out log-perplexity (nats) at 65,536 steps (mean
# of 4 runs; their standard deviation in PAPER_65K_SD) and at 524,288 steps (one run). Our names.
PAPER_65K = {
  'relu': 1.997,
  'gelu': 1.983,
  'silu': 1.994,
  'glu': 1.982,
  'bilinear': 1.960,
  'geglu': 1.942,
  'swiglu': 1.944,
  'reglu': 1.953,
}
PAPER_65K_SD = {
  'relu': 0.005,
  'gelu': 0.005,
  'silu': 0.003,
  'glu': 0.006,
  'bilinear': 0.005,
  'geglu': 0.004,
  'swiglu': 0.010,
  'reglu': 0.003,
}
PAPER_524K = {
  'relu': 1.677,
  'gelu': 1.679,
  'silu': 1.683,
  'glu': 1.663,
  'bilinear': 1.648,
  'geglu': 1.633,
  'swiglu': 1.636,
  'reglu': 1.645,
}
PLAIN = ('relu', 'gelu', 'silu')
GATED = ('glu', 'bilinear', 'reglu', 'geglu', 'swiglu')
HEAD_TO_HEAD = ('geglu', 'swiglu', 'bilinear')  # the claims tested one by one against relu
REFERENCE = 'relu'
CONTROL = 'relu_half'  # the refutations' positive control: ReLU at half the FFN width (known to be worse)
ARM = 'language'  # the study's one arm (the sweep folder and the points' prefix)
ACT = 'model.activation'
SEED = regime_lib.SEED
STEPS = regime_lib.STEPS
FLOOR_MARGIN = 0.02  # excess bits/token the mean must keep from 0 and from the unigram model
LEARNED = 1.0  # premise: excess bits at least 1 bit below the unigram model's (held-out bits 1 below its entropy)
PARAM_TOL = 0.02  # parameter counts within 2% of ReLU's (match_params: 0.19% at full, 0.6% in smoke's tiny model)
SCORE = 'excess bits/token over the true chain'
WHERE = 'language modelling (synthetic Markov language)'

ACTIVATIONS = {'smoke': ('relu', 'geglu'), 'quick': tuple(PAPER_65K), 'full': tuple(PAPER_65K)}
# Smoke's tiny language (seconds per run); quick and full read the capacity-limited one.
SMOKE_LANGUAGE = dict(
  vocab_size=8, markov_order=2, num_candidates=4, branching=2, concentration=0.5, start_draw='inverse_cdf'
)
# One budget T fixed before the run at every scale (max_doublings=0): the ladder T/4, T/2, T is computed, and a
# ladder that does not settle is a failed check, never a reason to train longer. Cap in reference-seconds: the full
# first pass (960 runs) estimated at ~4,800 with the stationary solve once per chain (cached) and the Gumbel start
# draw; the inverse-CDF draw (task.start_draw) makes a step cheaper still, which leaves room for rate extensions.
REGIMES = {
  'smoke': base.Regime(
    rates=(1e-3, 3e-3, 1e-2), steps=16, seeds=3, cap=270, metric='score', max_extensions=1, max_doublings=0
  ),
  'quick': base.Regime(rates=(2e-3, 1e-2, 5e-2), steps=200, seeds=3, cap=600, metric='score', max_doublings=0),
  'full': base.Regime(rates=(4e-4, 2e-3, 1e-2, 5e-2), steps=2000, seeds=10, cap=7200, metric='score', max_doublings=0),
}


def schedule(steps: int) -> dict:
  """A budget's own schedule: warmup over a tenth of its steps, then cosine decay to 0 at its end."""
  return {**base.budget(steps), 'train.warmup_steps': steps // 10}


def language_config(scale: str):
  """The language task (capacity-limited; smoke: a tiny one) and a 2-layer, bias-free tiny transformer (smaller still
  at smoke scale)."""
  config = default_config()
  m, t, tr = config.model, config.task, config.train
  m.arch, m.d_model, m.d_ff, m.num_layers, m.num_heads = 'transformer', 32, 128, 2, 2
  m.use_bias, m.match_params = False, True
  t.name = 'language'
  for k, v in (SMOKE_LANGUAGE if scale == 'smoke' else languages.CAPACITY_LIMITED).items():
    t[k] = v
  t.seq_len, t.num_eval = 32, 512
  tr.batch_size, tr.schedule = 16, 'cosine'
  if scale == 'smoke':
    m.d_model, m.d_ff, m.num_layers = 16, 32, 1
    t.seq_len, t.num_eval = 8, 64
  return config


def arms(scale: str) -> list[base.Arm]:
  config = language_config(scale)
  points = {a: {ACT: a} for a in ACTIVATIONS[scale]}
  points[CONTROL] = {ACT: REFERENCE, 'model.d_ff': config.model.d_ff // 2}
  return [base.Arm(ARM, config, points, budget=schedule)]


def collect(run_dir: str, row) -> dict[str, float]:
  """The score (lower is better), the quantity the range check reads and its ceiling."""
  del run_dir
  excess = float(row['excess_bits'])
  return {'score': excess, 'value': excess, 'ceiling': float(row['unigram_bits']) - float(row['floor_bits'])}


# --------------------------------------------------------------------------- verdicts (pure in the selection)


def label(act: str) -> str:
  return f'{ARM}: {act}'


def of(at: pd.DataFrame, name: str) -> pd.DataFrame:
  """The runs of one point (a variant, or CONTROL)."""
  return at[at['point'] == label(name)]


def wide(at: pd.DataFrame, names) -> pd.DataFrame:
  """Seeds x points (variants, CONTROL) of the score (a point without runs: a column of NaN)."""
  if not len(at):
    return pd.DataFrame(columns=list(names), dtype=float)
  w = at.pivot_table(index=SEED, columns='point', values='score', aggfunc='first')
  return w.reindex(columns=[label(n) for n in names]).set_axis(list(names), axis=1)


def range_of(at: pd.DataFrame, act: str) -> stats.Check:
  g = of(at, act)
  ceiling = float(g['ceiling'].mean()) if len(g) else math.nan
  return stats.range_check(
    f'{label(act)}: excess bits off the entropy floor (0) and the unigram ceiling',
    g['value'] if len(g) else [],
    floor=0.0,
    ceiling=ceiling,
    margin=FLOOR_MARGIN,
  )


def param_check(at: pd.DataFrame) -> stats.Check:
  """match_params: every variant's parameter count within PARAM_TOL of ReLU's."""
  variants = at[at['point'] != label(CONTROL)]
  counts = variants.groupby(ACT)['num_params'].first().dropna().astype(int) if len(at) else pd.Series(dtype=int)
  name = f'{ARM}: parameters matched across variants (match_params)'
  if REFERENCE not in counts:
    return stats.Check(name, False, 'no relu runs')
  worst = float((counts / counts[REFERENCE] - 1).abs().max())
  return stats.Check(
    name,
    worst <= PARAM_TOL,
    ', '.join(f'{k} {v}' for k, v in counts.items())
    + f'; largest relative difference from relu {worst:.2%} (allowed {PARAM_TOL:.0%})',
  )


def learning_premise(at: pd.DataFrame, read) -> stats.Check:
  """Premise of every verdict: learning happened and no variant it reads is at its floor. Each variant's mean excess
  bits with its 95% CI over seeds (bounded below by 0) lies inside [FLOOR_MARGIN, ceiling - LEARNED]. No remedy:
  the budget is fixed before the run, so a variant short of the learned bar is not given more steps."""
  parts, ceilings = [], []
  for act in read:
    g = of(at, act)
    m, lo, hi = stats.mean_ci(g['value'].to_numpy(float) if len(g) else [], bounds=(0.0, math.inf))
    ceiling = float(g['ceiling'].mean()) if len(g) else math.nan
    ceilings.append(ceiling)
    top = ceiling - LEARNED
    ok = all(map(math.isfinite, (lo, hi, top))) and lo >= FLOOR_MARGIN and hi <= top
    parts.append((act, m, lo, hi, ok))
  failed = [p for p in parts if not p[4]]
  ceiling = float(np.nanmean(ceilings)) if np.isfinite(ceilings).any() else math.nan
  detail = (
    'excess bits, mean [95% CI over seeds]: '
    + ', '.join(f'{a} {m:.4g} [{lo:.4g}, {hi:.4g}]' + ('' if ok else ' (fails)') for a, m, lo, hi, ok in parts)
    + f'; each CI must lie above {FLOOR_MARGIN:g} (off the floor) and below the unigram excess {ceiling:.4g} - '
    f'{LEARNED:g} bit (learned)'
  )
  check = stats.Check(
    f'premise: {ARM}: learning happened and no variant at its floor (excess bits off 0, {LEARNED:g} below the '
    'unigram model)',
    bool(parts) and not failed,
    detail if parts else 'no variant to read',
  )
  return stats.as_premise(check)


def rules(sel: pd.DataFrame, scale: str) -> list[stats.Verdict]:
  """Rules 1.-5., each gated on the ranges of the variants it reads, on parameter matching and on its premise
  (learning happened, no variant at its floor)."""
  acts = ACTIVATIONS[scale]
  at = sel[sel['arm'] == ARM]
  w, ranges, params = wide(at, acts), {a: range_of(at, a) for a in acts}, param_check(at)
  known = control(at)

  def done(v, read):
    gates = (
      [ranges[a] for a in read]
      if len(read) < 3
      else [stats.all_of(f'{ARM}: every variant off its floor and ceiling', [ranges[a] for a in read])]
    )
    gates += [params, learning_premise(at, read), refutation_control(v, known)]
    # the control's point is read (its rate and ladder checked) only where it gates: a refutation
    needed = (CONTROL,) if v.raw_outcome == stats.NOT_REPRODUCED else ()
    return dataclasses.replace(stats.gate(v, gates), points=tuple(label(a) for a in (*read, *needed)))

  out = []
  for name in HEAD_TO_HEAD:
    v = rules_lib.paired(
      w.get(name, w[REFERENCE] * np.nan),
      w[REFERENCE],
      expect='less',
      claim=f'{WHERE}: {name} beats {REFERENCE} at equal parameters ({SCORE}, lower is better)',
    )
    out.append(done(v, [a for a in (name, REFERENCE) if a in acts]))
  gated, plain = [a for a in GATED if a in acts], [a for a in PLAIN if a in acts]
  v = rules_lib.paired(
    w[gated].mean(axis=1, skipna=False),
    w[plain].mean(axis=1, skipna=False),
    expect='less',
    claim=f'{WHERE}: the gated family ({", ".join(gated)}) beats the plain one ({", ".join(plain)}) '
    f'(per-seed means of {SCORE})',
  )
  out.append(done(v, gated + plain))
  names = [a for a in PAPER_65K if a in acts]
  v = rules_lib.rank_agreement(
    [PAPER_65K[a] for a in names],
    w[names].mean(axis=0).to_numpy(),
    claim=f'{WHERE}: the variants order as in Shazeer 2020 Table 1 at 65,536 steps (Spearman rho of the means)',
  )
  out.append(done(v, names))
  return out


def control(at: pd.DataFrame) -> stats.Verdict:
  """The refutations' positive control: ReLU beats ReLU at half the FFN width (paired by seed, the same rule as
  1.-3.), gated on ReLU's learning premise."""
  w = wide(at, (REFERENCE, CONTROL))
  v = rules_lib.paired(
    w[REFERENCE],
    w[CONTROL],
    expect='less',
    claim=f'{WHERE}: {REFERENCE} beats {REFERENCE} at half the FFN width ({SCORE}, lower is better)',
  )
  return stats.gate(v, [learning_premise(at, [REFERENCE])])


def refutation_control(v: stats.Verdict, known: stats.Verdict) -> stats.Check:
  """A refutation's positive control: the setup orders two FFNs whose order is known (`control` reproduced)."""
  return checks.refutation_control(
    v,
    'for a refutation, a positive control: the setup orders two FFNs whose order is known (ReLU beats ReLU at half '
    'the width)',
    f'{REFERENCE} - {CONTROL} (excess bits, paired by seed)',
    known,
  )


# --------------------------------------------------------------------------- claims and design changes

_SCOPE = (
  'Next-token prediction on a synthetic order-2 Markov language too large for the model to store (V 128, 16,384 '
  'contexts of 2 next tokens each, Dirichlet 0.2), a 2-layer bias-free transformer (d_model 32, d_ff 128, gated 85; '
  '34.0k parameters, matched within 0.2%), each variant at its own tuned rate, paired over 10 seeds, at one budget '
  'T = 2,000 steps fixed before the run (ladder 500 / 1,000 / 2,000; no doublings), an early-training budget (most of '
  "each variant's held-out loss still above the floor at T: the notes give the share); score: excess bits over the "
  'exact entropy floor, not T5-base on C4; an order-2 Markov chain may reward multiplicative units in general, not '
  'GLU gating'
)
_LEARNED = (
  "learning happened and no variant read is at the entropy floor: each one's held-out excess bits (95% CI over "
  "seeds) above 0.02 and at least 1 bit below the unigram model's excess; for a refutation, a positive control "
  'that the setup orders two FFNs whose order is known: ReLU beats ReLU at half the FFN width (d_ff 64) by the '
  'paired rule'
)
CLAIMS = (
  base.Claim(stats.SIGN, f'{_SCOPE}; GEGLU vs ReLU.', _LEARNED),
  base.Claim(stats.SIGN, f'{_SCOPE}; SwiGLU vs ReLU.', _LEARNED),
  base.Claim(stats.SIGN, f'{_SCOPE}; Bilinear vs ReLU.', _LEARNED),
  base.Claim(stats.SIGN, f'{_SCOPE}; per-seed mean of the five gated vs the three plain variants.', _LEARNED),
  base.Claim(
    stats.MAGNITUDE,
    f"{_SCOPE}; Spearman rho of the eight variants' means against the paper's 65k column (exact permutation test).",
    _LEARNED,
  ),
)
# Why no proxy task (setup, notes and the redesign's change row).
NO_PROXY = (
  'No proxy task: no teacher is known to be neutral between gated and plain FFNs (a tanh teacher fitted by '
  'one-layer students asks which family approximates tanh; a deeper student on a random-network teacher favours '
  "whichever activation the teacher uses), and Shazeer's measurements are a language model's pre-training loss "
  "(T5's span corruption), not a function fit"
)


ABLATION = base.Study(
  name='glu_variants',
  claim=(
    'At equal parameters, bias-free gated FFNs beat ReLU: GEGLU 1.942 and SwiGLU 1.944 vs ReLU 1.997 held-out '
    'log-perplexity at 65k steps (1.633, 1.636 vs 1.677 at 524k), Bilinear beats ReLU (Shazeer 2020, Table 1); '
    "the gated family beats the plain one (this project's summary of Table 1, which has GLU level with GELU)."
  ),
  citation='Shazeer 2020, "GLU Variants Improve Transformer", arXiv 2002.05202, Table 1 (T5-base on C4); '
  'docs/references.md',
  published='log-perplexity at 65,536 / 524,288 steps: ReLU 1.997 / 1.677, GELU 1.983 / 1.679, Swish 1.994 / 1.683, '
  'GLU 1.982 / 1.663, Bilinear 1.960 / 1.648, GEGLU 1.942 / 1.633, SwiGLU 1.944 / 1.636, '
  'ReGLU 1.953 / 1.645',
  setup=(
    'language: order-2 sparse Markov language too large for the model to store (V 128, every token a candidate, 2 '
    'next tokens per context, Dirichlet 0.2: 16,384 contexts, entropy floor ~0.32 bits; sequences of 32), 2-layer '
    'transformer d_model 32, 2 heads, bias-free FFN d_ff 128 (gated 85), batch 16 sequences. Adam, warmup over a '
    'tenth of the steps, cosine decay to 0, each budget its own run; one budget T = 2,000 fixed before the run '
    '(no doublings); the rate tuned per variant on the mean over seeds. Every variant with match_params=True, same '
    f'seeds. {NO_PROXY}.'
  ),
  claims=CLAIMS,
  changes=CHANGES,
  regimes=REGIMES,
  arms=arms,
  rules=rules,
  collect=collect,
)
