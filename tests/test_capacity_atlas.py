"""capacity_atlas: its cells against the parameter-count formulas, the measurements on synthetic selections with
known answers (a geometric mean, an exponent), the premises, and the claims declared per verdict."""

import math

import numpy as np
import pandas as pd
import pytest

from ffn_research import stats
from ffn_research.ablations import capacity_atlas as atlas

SEEDS = (0, 1, 2)


def _store_frame(bits_per_param=(2.0, 2.2, 1.8), kinds=tuple(atlas.KINDS), share=0.5):
  """Every storage cell at `smoke` shapes: the middle N stores bits_per_param[seed] bits per parameter at every
  width, the smaller 10% less, the larger 2% less (a peak inside the N grid); `share` 0: nothing stored."""
  s, rows = atlas.SETTINGS['smoke'], []
  for kind in kinds:
    for w in atlas.widths(kind, s):
      p = atlas.trainable_params(s, kind, w)
      sizes = atlas.facts(s, kind, w)
      active = p // 4 if kind in atlas.MOE_KINDS else p
      for seed, b in zip(SEEDS, bits_per_param, strict=True):
        for n, bits in zip(sizes, (0.9 * b * p, b * p, 0.98 * b * p), strict=True):
          rows.append(
            {
              'arm': f'store_{kind}_w{w}',
              'point': f'store_{kind}_w{w}: n={n}',
              atlas.SEED: seed,
              'bits_stored': bits if share else 0.0,
              atlas.SIZE: p,
              'num_ffn_params': p - 48,
              'num_active_ffn_params': active - 48,
              atlas.STEPS: 32,
            }
          )
  return pd.DataFrame(rows)


def _approx_frame(exponent=-2.0, relative=1e-3):
  rows = []
  for target in atlas.TARGETS:
    for kind in atlas.KINDS:
      for w in (8, 16, 32):
        p = 3 * w + 1
        for seed in SEEDS:
          err = 5.0 * p**exponent * (1 + 0.01 * seed)
          rows.append(
            {
              'arm': f'{target}_{kind}',
              'point': f'{target}_{kind}: w={w}',
              atlas.SEED: seed,
              'num_params': p,
              'sup_error': err,
              'eval_loss': err**2 if target == 'teacher' else relative * atlas.SIN_VARIANCE * (w == 32 or 50),
              'eval_relative_mse': relative,
              atlas.STEPS: 40,
            }
          )
  return pd.DataFrame(rows)


def test_cells_span_8x_in_parameters_with_experts_at_least_8_wide_and_facts_from_the_bits_formula():
  s = atlas.SETTINGS['full']
  for kind in atlas.KINDS:
    p = [atlas.trainable_params(s, kind, w) for w in atlas.widths(kind, s)]
    assert len(p) >= 4 and p == sorted(p) and p[-1] / p[0] >= 8, (kind, p)
    for w in atlas.widths(kind, s):
      pw = atlas.trainable_params(s, kind, w)
      for n, x in zip(atlas.facts(s, kind, w), atlas.STORE_BITS, strict=True):  # N log2 256 = x P bits, N % 8 = 0
        assert n * 8 == pytest.approx(x * pw, abs=32) and n % 8 == 0
  assert min(atlas.SETTINGS['full']['moe']) >= atlas.MOE_MIN_WIDTH
  arms = atlas.arms('full')
  store = [a for a in arms if a.name.startswith('store_')]
  assert len(store) == sum(len(atlas.widths(k, s)) for k in atlas.KINDS)
  for a in store:  # batch N/8 at every budget: the ladder is 4x the exposures per fact
    assert all(o['train.batch_size'] * 8 == o['task.num_facts'] for o in a.points.values())
  moe = next(a for a in arms if a.name == 'teacher_moe_top2')
  assert not any(a.name.startswith('sin_moe') for a in arms)  # a scalar input routes to at most 2k experts
  assert moe.base.model.moe.num_experts == 8 and moe.base.model.moe.top_k == 2
  assert moe.base.model.moe.capacity_factor == 0.0 and moe.base.model.moe.router == 'softmax_topk'
  swiglu = next(a for a in arms if a.name == 'teacher_swiglu')
  assert swiglu.base.model.match_params and swiglu.base.model.d_model == 4


def test_bits_per_parameter_is_the_geometric_mean_over_widths_per_seed_at_the_peak_n():
  frame = _store_frame()
  verdicts = atlas.storage_verdicts(frame, 'smoke')
  assert len(verdicts) == 7  # 3 dense kinds + 2 MoE kinds x (total, active)
  relu = verdicts[0]
  logs = np.log([2.0, 2.2, 1.8])
  m, lo, hi = stats.mean_ci(logs)
  assert relu.outcome == stats.MEASURED, relu.detail
  assert relu.statistic == pytest.approx(math.exp(m)) and relu.ci == pytest.approx((math.exp(lo), math.exp(hi)))
  top1_total, top1_active = verdicts[3], verdicts[4]
  assert top1_total.statistic == pytest.approx(math.exp(m))
  assert 'active' in top1_active.claim and top1_active.statistic > 3 * top1_total.statistic  # active = P / 4
  assert all(p.startswith('store_relu_') for p in relu.points) and len(relu.points) == 3


def test_a_storage_cell_that_stored_nothing_is_invalid_never_a_number():
  v = atlas.storage_verdicts(_store_frame(share=0.0), 'smoke')[0]
  assert v.outcome == stats.INVALID and 'training learned the facts' in v.detail and v.raw_outcome == stats.MEASURED


def test_the_exponent_is_the_per_seed_log_log_slope_and_needs_training_to_have_learned():
  verdicts = [atlas.exponent_verdict(atlas.approx_rows(_approx_frame(), t), t, 'relu') for t in atlas.TARGETS]
  for v in verdicts:
    assert v.outcome == stats.MEASURED and v.statistic == pytest.approx(-2.0), v.detail
  bad = atlas.exponent_verdict(atlas.approx_rows(_approx_frame(relative=0.5), 'teacher'), 'teacher', 'gelu')
  assert bad.outcome == stats.INVALID and 'training learned the target' in bad.detail


def test_rules_give_one_measurement_per_declared_claim_in_order():
  frame = pd.concat([_store_frame(), _approx_frame()], ignore_index=True)
  verdicts = atlas.rules(frame, 'smoke')
  assert len(verdicts) == len(atlas.CLAIMS) == 15
  assert all(c.kind == stats.MEASUREMENT for c in atlas.CLAIMS)
  assert [v.claim.split(':')[0] for v in verdicts[7:10]] == ['sin, relu', 'sin, gelu', 'sin, swiglu']  # no MoE on sin
  assert [v.claim.split(':')[0] for v in verdicts[10:]] == [f'teacher, {k}' for k in atlas.KINDS]
  assert all(v.outcome == stats.MEASURED for v in verdicts), [v.detail for v in verdicts if v.outcome != 'measured']
