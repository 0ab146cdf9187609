"""expansion_ratio: non-embedding counts against the model's own, shapes against brute force, the spread
(Kaplan's % change of the total loss vs the best shape) on synthetic selections with known answers, the
study's gates turning verdicts invalid, arms valid with one program per shape and budget."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ffn_research import ablations
from ffn_research import models
from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research import sweep
from ffn_research import tasks
from ffn_research.ablations import base
from ffn_research.ablations import checks
from ffn_research.ablations import expansion_ratio as er
from ffn_research.ablations import languages
from ffn_research.tasks import language


def _expand(arm, steps=20, seeds=(0,)):
  return sweep.expand(
    arm.base,
    [{**o, **arm.budget(steps), er.SEED: s, 'train.learning_rate': 1e-3} for o in arm.points.values() for s in seeds],
  )


@pytest.mark.parametrize('scale', ['smoke', 'full'])
def test_non_embedding_params_match_model_counts(scale):
  for arm in er.arms(scale):
    for r in _expand(arm):
      c = models.model_counts(r.config, tasks.build_task(r.config))
      m = r.config.model
      assert c['num_params'] - c['num_embedding_params'] - c['num_unembedding_params'] == er.non_embedding_params(
        m.d_model, m.d_ff, m.num_layers
      )
      assert c['num_attention_params'] == 4 * m.d_model**2 * m.num_layers  # attention is counted


def test_non_embedding_formula_by_hand():
  # d 32, d_ff 520, one layer: 4*1024 + (2*32*520 + 520 + 32) + 2*32 + 32 (final norm).
  assert er.non_embedding_params(32, 520) == 4096 + 33280 + 552 + 64 + 32 == 38024
  assert er.non_embedding_params(10, 7, num_layers=2) == 2 * (400 + 140 + 7 + 10 + 20) + 10


@pytest.mark.parametrize('target,ratio', list(itertools.product([38_000, 76_000], er.RATIOS)))
def test_shape_for_is_the_closest_ratio_at_the_budget(target, ratio):
  d, d_ff = er.shape_for(ratio, target, min_d_model=32)
  assert d >= 32 and d % er.NUM_HEADS == 0
  # d_ff is the integer closest to the budget at this d: off by at most half a hidden unit's parameters.
  assert abs(er.non_embedding_params(d, d_ff) - target) <= (2 * d + 1) / 2
  # No other allowed d gives a ratio closer to the nominal one (brute force).
  best = math.inf
  for e in range(32, 1000, er.NUM_HEADS):
    f = round((target - er.non_embedding_params(e, 0)) / (2 * e + 1))
    if f >= 1:
      best = min(best, abs(math.log(f / e / ratio)))
  assert abs(math.log(d_ff / d / ratio)) == pytest.approx(best)


def test_full_shapes_hit_the_budget():
  pts = er.shapes('full')
  assert len(pts) == len(er.SETTINGS['full']['sizes']) * len(er.RATIOS)
  for p in pts:
    assert p['d_model'] >= 32
    assert abs(p['deviation']) < 0.005  # within 0.5% of the target
    assert abs(math.log(p['actual_ratio'] / p['ratio'])) < math.log(1.15)  # within 15% of the nominal ratio
  assert min(p['actual_ratio'] for p in pts) < 0.6 and max(p['actual_ratio'] for p in pts) > 15
  for scale in er.SETTINGS:  # the parameter-matching gate passes at every declared scale
    assert max(abs(p['deviation']) for p in er.shapes(scale)) <= er.MAX_DEVIATION


FLAT = {0.5: 1.10, 1: 1.01, 2: 1.0, 4: 0.99, 8: 1.0, 16: 1.08}  # spread over 1..8: about 2 points
STEEP = {0.5: 0.7, 1: 0.8, 2: 0.9, 4: 1.0, 8: 1.1, 16: 1.2}  # spread over 1..8: about 37 points


def _sel(mult, *, seeds=5, total=2.0, excess=0.5, noise=0.002, floor=1.5, drop=()):
  """A selection at full scale: shape (N, r) has total loss total * mult[r] * (1 + noise), of which
  excess * mult[r] above the floor; bigram excess 2 bits. `drop`: (point, seed) rows left out."""
  rng = np.random.default_rng(1)
  rows = []
  for p in er.shapes('full'):
    for s in range(seeds):
      if (p['point'], s) in drop:
        continue
      e = 1 + noise * rng.normal()
      rows.append(
        {
          'point': p['point'],
          'arm': er.arm_name(p['size']),
          er.SEED: s,
          'train.learning_rate': 6e-3,
          'train.steps': 800,
          er.LOSS: total * p['size'] ** -0.01 * mult[p['ratio']] * e,
          er.EXCESS: excess * mult[p['ratio']] * e,
          'floor_bits': floor,
          'bigram_bits': floor + 2.0,
        }
      )
  return pd.DataFrame(rows)


def test_spread_verdict_known_answer_and_its_test():
  rng = np.random.default_rng(0)
  loss = pd.DataFrame(
    {'a': 2.0 + 0.01 * rng.normal(size=6), 'b': 2.04 + 0.01 * rng.normal(size=6), 'c': 2.02 + 0.01 * rng.normal(size=6)}
  )
  v = er.spread_verdict(loss, level=5.0, claim='c')
  r, lo, hi = rules_lib.ratio_of_means(loss['b'], loss['a'])  # worst b over best a: a ratio of means
  assert v.statistic == pytest.approx(100 * (r - 1)) and v.ci == pytest.approx((100 * (lo - 1), 100 * (hi - 1)))
  assert v.outcome == stats.REPRODUCED and v.boundaries == (5.0,) and v.n == 6
  d = loss['b'] - 1.05 * loss['a']  # Fieller: mean(b - 1.05 a) < 0
  assert v.p_value == pytest.approx(2 * sps.t.sf(abs(d.mean()) / sps.sem(d), 5))
  assert 'worst b, best a' in v.detail
  assert er.spread_verdict(loss[['a']], level=5.0, claim='c').outcome == stats.INCONCLUSIVE
  assert er.spread_verdict(loss.iloc[:2], level=5.0, claim='c').detail.startswith('underpowered')


def test_rules_flat_is_reproduced_steep_is_not():
  flat = er.rules(_sel(FLAT), 'full')
  assert [v.outcome for v in flat] == [stats.REPRODUCED]
  assert flat[0].points == tuple(f'n38000: r={r}' for r in (1, 2, 4, 8))
  for v in flat:
    assert v.statistic == pytest.approx(100 * (1.01 / 0.99 - 1), abs=0.5)  # r = 0.5 and 16 are not in it
    assert [c.passed for c in v.checks] == [True] * 4  # not pinned, matched, the premise, the refutation guard
    assert [c.role for c in v.checks] == ['', '', stats.PREMISE, stats.PREMISE]
    assert 'not needed for this outcome' in v.checks[3].detail
  # The rule refutes, but no arm is a positive control for a refutation: invalid, with the rule's outcome kept.
  steep = er.rules(_sel(STEEP), 'full')
  assert [v.outcome for v in steep] == [stats.INVALID] and steep[0].raw_outcome == stats.NOT_REPRODUCED
  assert [c.passed for c in steep[0].checks] == [True, True, True, False]
  assert 'the rule alone refutes: not evidence against Kaplan et al.' in steep[0].checks[3].detail
  assert steep[0].statistic == pytest.approx(100 * (1.1 / 0.8 - 1), rel=0.02)


def test_gates_make_the_verdict_invalid():
  # Pinned at the floor: every excess below 0.02 bits (the total-loss spread alone would say reproduced).
  out = er.rules(_sel(FLAT, excess=0.01), 'full')
  assert [v.outcome for v in out] == [stats.INVALID] and out[0].raw_outcome == stats.REPRODUCED
  assert 'not pinned at N=38,000' in out[0].detail and '(pinned)' in out[0].detail
  assert out[0].failed_checks[0].remedy == ''  # more steps cannot lift a floor
  # Pinned at the bigram ceiling: a model that ignores the order-2 context; more steps may fix that.
  v = er.rules(_sel(FLAT, excess=1.99), 'full')[0]
  assert v.outcome == stats.INVALID
  assert v.failed_checks[0].remedy == stats.DOUBLE_STEPS and v.failed_checks[0].points == v.points
  # One shape lacks a seed at its chosen rate: the runner's coverage check fails that size only.
  n = er.REGIMES['full'].seeds
  sel = _sel(FLAT, seeds=n, drop={('n38000: r=4', 0)})
  cov = [checks.coverage(v, sel, n) for v in er.rules(sel, 'full')]
  assert [c.passed for c in cov] == [False] and cov[0].detail == f'n38000: r=4: {n - 1}/{n}'
  # A shape with no eligible rate at all (no rows): invalid, not a crash.
  sel = _sel(FLAT)
  out = er.rules(sel[sel['point'] != 'n38000: r=8'], 'full')
  assert out[0].outcome == stats.INVALID and 'n38000: r=8: mean nan over 0' in out[0].detail
  assert checks.coverage(out[0], sel[sel['point'] != 'n38000: r=8'], 5).detail == 'n38000: r=8: 0/5'


def test_present_table_and_figure(tmp_path):
  sel = _sel(STEEP)
  verdicts = er.rules(sel, 'full')
  result = base.Result(sel, pd.DataFrame(), sel, sel, verdicts, 'full')
  shown = ablations.get('expansion_ratio').present(result, base.Context(outdir=str(tmp_path), scale='full'))
  t = shown.tables[0].frame
  assert len(t) == len(er.RATIOS) and (tmp_path / 'loss_vs_ratio.png').stat().st_size > 0
  row = t[(t['N target'] == 38_000) & (t['r'] == 16)].iloc[0]
  assert row['% vs best'] == pytest.approx(100 * (1.2 / 0.8 - 1), rel=0.02)  # best of the spread's shapes: r = 1
  assert t[(t['N target'] == 38_000) & (t['r'] == 1)]['% vs best'].iloc[0] == 0
  assert t[(t['N target'] == 38_000) & (t['r'] == 0.5)]['% vs best'].iloc[0] == pytest.approx(-12.5, abs=0.5)
  assert 'N=38,000: spread' in shown.headline and 'shown, not in the spread' in shown.notes[0]
  assert 'not in the spread' in shown.figures[0].caption


def test_claims_declare_a_magnitude_with_scope_premise_and_changes():
  assert len(er.ABLATION.claims) == len(er.SETTINGS['full']['sizes'])
  for c in er.ABLATION.claims:
    assert c.kind == stats.MAGNITUDE and 'entropy floor' in c.scope and 'one T fixed before the run' in c.scope
    assert 'reducible share' in c.premise
  assert [bool(c.to_positive) for c in er.ABLATION.changes if c.commit == 'ef446d6'] == [True]
  assert all(set(c.verdicts) <= {1, 2} for c in er.ABLATION.changes)


def test_one_budget_fixed_before_the_run_for_every_shape_on_a_language_too_large_to_store():
  """Issue 47: every ratio, 0.5 and 16 included, at one T set in code (the regime never doubles it), on the
  capacity-limited language: 16,384 reachable contexts of 2 next tokens each (the published one had 1,024 of 4)."""
  assert all(r.max_doublings == 0 for r in er.REGIMES.values()) and er.REGIMES['full'].steps == 3200
  for arm in er.arms('full'):
    assert arm.steps_factor == 1 and len(arm.points) == len(er.RATIOS)
  t = er.language_config('full').task
  contexts = language.reachable_contexts(t.vocab_size, t.markov_order, t.num_candidates)
  assert contexts == 16_384 and t.branching == 2
  assert {k: t[k] for k in languages.CAPACITY_LIMITED} == languages.CAPACITY_LIMITED  # the one shared constant
  assert (t.seq_len, t.num_eval) == (16, 2048)


def test_premise_the_total_loss_can_move():
  """Excess 0.03 of ~1.8 total bits: off the floor (the pinned gate passes), but a share of 1.7%: even the steep
  shapes' spread is capped by the floor, so the verdict is invalid (no remedy), never decided."""
  for mult in (FLAT, STEEP):
    out = er.rules(_sel(mult, excess=0.03), 'full')
    for v in out:
      assert v.outcome == stats.INVALID and [c.passed for c in v.checks][:3] == [True, True, False]
      premise = v.premises[0]
      assert premise.remedy == '' and 'reducible share' in premise.name and 'the entropy floor is 98' in premise.detail
  v = er.rules(_sel(FLAT), 'full')[0]  # excess 0.5 of ~1.8 bits: a share of ~28%
  assert v.premises[0].passed and 'excess / total bits of the best shape n38000: r=4' in v.premises[0].detail
  out = er.rules(_sel(FLAT).iloc[:0], 'full')  # no runs: the premise is computed and fails
  assert all(len(v.premises) == 2 and not v.premises[0].passed and v.premises[1].passed for v in out)


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_arms_validate_with_one_program_per_shape(scale):
  s, regime = er.SETTINGS[scale], er.REGIMES[scale]
  arms = er.arms(scale)
  assert [a.name for a in arms] == [er.arm_name(n) for n in s['sizes']]
  for arm in arms:
    assert list(arm.points) == [f'r={r:g}' for r in s['ratios']] and arm.tuned
    assert arm.base.task.name == 'language' and arm.base.model.arch == 'transformer'
    runs = _expand(arm, regime.steps, range(regime.seeds))  # validates every config
    assert len(sweep.group_runs(runs)) == len(s['ratios'])  # one compiled program per shape and budget
    assert runs[0].config.train.warmup_steps == max(1, regime.steps // 20)
  assert regime.metric == er.LOSS and regime.seeds >= (4 if scale == 'full' else 3)
  if scale == 'full':
    assert regime.rates == pytest.approx((2e-3, 6e-3, 2e-2))
