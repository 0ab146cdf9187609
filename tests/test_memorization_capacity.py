"""memorization_capacity ablation: its statistics against NumPy, its verdict rules on known answers,
its sweeps (valid configs, parameter matching, saturation by construction)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ffn_research import models, sweep, tasks
from ffn_research.ablations import memorization_capacity as mc
from ffn_research.ablations import verdict


def test_fit_through_origin_matches_numpy():
  rng = np.random.default_rng(0)
  x = rng.uniform(1e3, 1e4, 12)
  y = 1.7 * x + rng.normal(0, 300, 12)
  k, lo, hi = mc.fit_through_origin(x, y)
  (k_np,), res, _, _ = np.linalg.lstsq(x[:, None], y, rcond=None)
  se = math.sqrt(res[0] / (len(x) - 1) / np.sum(x * x))
  t = stats.t.ppf(0.975, len(x) - 1)
  np.testing.assert_allclose([k, lo, hi], [k_np, k_np - t * se, k_np + t * se], rtol=1e-10)


def _frame(sizes, seeds, bits_per_param, noise=0.0, seed=0):
  rng = np.random.default_rng(seed)
  rows = [{'model.d_model': d, 'train.seed': s, 'num_params': 1000 * d,
           'bits_stored': bits_per_param * 1000 * d * (1 + noise * rng.normal())} for d in sizes for s in range(seeds)]
  return pd.DataFrame(rows)


def test_bits_per_param_rule_known_answers():
  kw = dict(params='num_params', size='model.d_model', claim='c')
  exact = mc.bits_per_param_verdict(_frame([1, 2, 4], 3, 2.0), claimed=2.0, **kw)
  assert exact.outcome == verdict.REPRODUCED and exact.statistic == pytest.approx(2.0) and exact.n == 9
  half = mc.bits_per_param_verdict(_frame([1, 2, 4], 3, 1.0, noise=0.01), claimed=2.0, **kw)
  assert half.outcome == verdict.NOT_REPRODUCED and half.ci[1] < 1.6
  two_sizes = mc.bits_per_param_verdict(_frame([1, 2], 3, 2.0), claimed=2.0, **kw)
  assert two_sizes.outcome == verdict.INCONCLUSIVE and 'underpowered' in two_sizes.detail
  noisy = mc.bits_per_param_verdict(_frame([1, 2, 4], 3, 1.6, noise=0.5, seed=1), claimed=2.0, **kw)
  assert noisy.outcome == verdict.INCONCLUSIVE  # the CI straddles an edge of [1.6, 2.5]


def test_ratio_rule_known_answers():
  relu = _frame([1, 2, 4], 3, 1.3)
  swiglu = _frame([1, 2, 4], 3, 1.0)
  gated = dict(lo_ok=mc.GATED_RATIO / mc.GATED_FACTOR, hi_ok=mc.GATED_RATIO * mc.GATED_FACTOR, claim='c')
  v = mc.ratio_verdict(relu, swiglu, **gated)
  assert v.outcome == verdict.REPRODUCED and v.statistic == pytest.approx(1.3) and v.n == 9
  same = mc.ratio_verdict(relu, relu, **gated)
  assert same.outcome == verdict.NOT_REPRODUCED and same.statistic == pytest.approx(1.0)
  assert mc.ratio_verdict(relu, relu, lo_ok=1 / 1.1, hi_ok=1.1, claim='c').outcome == verdict.REPRODUCED
  few = mc.ratio_verdict(relu.iloc[:2], swiglu.iloc[:2], **gated)
  assert few.outcome == verdict.INCONCLUSIVE


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_sweeps_validate_and_match_parameters(scale):
  s = mc.SETTINGS[scale]
  specs = mc.sweeps(scale)
  assert [x.name for x in specs] == [f'exposures_{e}' for e in s['exposures']] + ['ffn_only', 'random_labels']
  for spec, e in zip(specs, s['exposures']):
    assert spec.base.train.steps * spec.base.train.batch_size == e * s['facts']
  counts = {}
  for spec in specs[:1]:
    for r in sweep.expand(spec.base, spec.overrides):  # validates every config
      counts[(mc.kind_of(pd.DataFrame([{'model.moe.num_experts': r.config.model.moe.num_experts,
                                        'model.activation': r.config.model.activation}]))[0],
              r.config.model.d_model)] = models.model_counts(r.config, tasks.build_task(r.config))
  entropy = mc.entropy_bits(s)
  for d in s['d_models']:
    relu = counts[('relu', d)]
    if ('swiglu', d) in counts:  # match_params: gated FFN weights within rounding of the dense ones
      assert abs(counts[('swiglu', d)]['num_ffn_params'] - relu['num_ffn_params']) <= 0.15 * relu['num_ffn_params']
    if ('moe', d) in counts:  # same expert weights as the dense FFN, plus a d x E router per layer
      moe = counts[('moe', d)]
      assert moe['num_ffn_params'] - relu['num_ffn_params'] == 2 * (d * mc.EXPERTS + (mc.EXPERTS - 1) * d)
  if scale != 'smoke':  # saturation by construction: 2 bits/param of the largest model < the entropy
    assert 2 * max(c['num_params'] for c in counts.values()) < entropy
    ffn = specs[-2]
    biggest = max(sweep.expand(ffn.base, ffn.overrides), key=lambda r: r.config.model.d_ff).config
    assert biggest.model.freeze_embeddings
    assert 2 * models.model_counts(biggest, tasks.build_task(biggest))['num_ffn_params'] < entropy
