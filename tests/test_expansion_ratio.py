"""expansion_ratio ablation: shapes at fixed parameters (brute force), the knee and flatness rules
on synthetic curves with known answers, sweeps valid at every scale."""

import itertools

import numpy as np
import pandas as pd
import pytest

from ffn_research import models, sweep, tasks
from ffn_research.ablations import base, verdict
from ffn_research.ablations import expansion_ratio as er


def test_ffn_params_formula_matches_model_counts():
  spec = er.sweeps('smoke')[0]
  for r in sweep.expand(spec.base, spec.overrides):
    c = models.model_counts(r.config, tasks.build_task(r.config))
    assert c['num_ffn_params'] == er.ffn_params(r.config.model.d_model, r.config.model.d_ff)


@pytest.mark.parametrize('d_model', [8, 16, 32])
def test_shape_for_is_the_closest_shape(d_model):
  target = er.ffn_params(d_model, 4 * d_model)
  for ratio in er.RATIOS:
    d, d_ff = er.shape_for(ratio, target)
    assert d_ff == max(1, round(ratio * d))
    best = min(abs(er.ffn_params(e, max(1, round(ratio * e))) - target) for e in range(1, 10 * d_model))
    assert abs(er.ffn_params(d, d_ff) - target) == best
    assert abs(er.ffn_params(d, d_ff) - target) <= 0.15 * target
  assert er.shape_for(4, target) == (d_model, 4 * d_model)


def _curves(loss_of_ratio, seeds=3, noise=0.0):
  rng = np.random.default_rng(0)
  rows = [{'model.d_model': 16, 'model.d_ff': int(16 * r), 'train.seed': s, 'status': 'completed',
           'eval_loss': loss_of_ratio(r) * (1 + noise * rng.normal())}
          for r, s in itertools.product(er.RATIOS, range(seeds))]
  return pd.DataFrame(rows)


def _knee(df):
  a = er._with_ratio(df)  # pylint: disable=protected-access
  a = a.assign(share=pd.concat([er.improvement_share(g) for _, g in a.groupby('train.seed')]))
  return verdict.crossing(a, x='ratio', y='share', seed='train.seed', level=er.KNEE_LEVEL,
                          claimed=er.KNEE_CLAIM, factor=er.KNEE_FACTOR, claim='c')


def test_knee_rule_known_answers():
  # Improvement shares 0, .3, .6, .9, .95, 1 at r = 0.5..16: the 90% knee is exactly at 4.
  share = dict(zip(er.RATIOS, [0.0, 0.3, 0.6, 0.9, 0.95, 1.0]))
  v = _knee(_curves(lambda r: 3.0 - 2.0 * share[r]))
  assert v.outcome == verdict.REPRODUCED and v.statistic == pytest.approx(4.0)
  # Still improving steadily up to 16: knee at 16, outside [2, 8].
  lin = dict(zip(er.RATIOS, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]))
  v = _knee(_curves(lambda r: 3.0 - 2.0 * lin[r]))
  assert v.outcome == verdict.NOT_REPRODUCED and v.statistic > 8


def test_flatness_rule_known_answers():
  flat = _curves(lambda r: 2.0 * (1 + 0.01 * np.log2(r)))   # spread 4% over 1..16
  spreads = [er.relative_spread(g) for _, g in er._with_ratio(flat).groupby('train.seed')]  # pylint: disable=protected-access
  assert spreads == pytest.approx([0.04] * 3)
  assert verdict.threshold(spreads, level=er.FLAT_LEVEL, direction='below', claim='c').outcome == verdict.REPRODUCED
  steep = _curves(lambda r: 2.0 * (1 + 0.1 * np.log2(r)))  # spread 40%
  spreads = [er.relative_spread(g) for _, g in er._with_ratio(steep).groupby('train.seed')]  # pylint: disable=protected-access
  assert verdict.threshold(spreads, level=er.FLAT_LEVEL, direction='below',
                           claim='c').outcome == verdict.NOT_REPRODUCED


def test_analyze_on_synthetic_results(tmp_path):
  share = dict(zip(er.RATIOS, [0.0, 0.3, 0.6, 0.9, 0.95, 1.0]))
  fixed_d = _curves(lambda r: 3.0 - 2.0 * share[r])
  flat = _curves(lambda r: 2.0 * (1 + 0.01 * np.log2(r)))
  results = {f'{t}_{k}': df for t in ('memorization', 'modular')
             for k, df in (('fixed_d_model', fixed_d), ('fixed_params', flat))}
  for df in results.values():
    df['num_ffn_params'] = er.ffn_params(16, 64)
  out = er.analyze(results, base.Context(outdir=str(tmp_path), scale='full'))
  assert [v.outcome for v in out.verdicts] == [verdict.REPRODUCED] * 4
  assert (tmp_path / 'loss_vs_ratio.png').stat().st_size > 0


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_sweeps_validate(scale):
  specs = er.sweeps(scale)
  assert [s.name for s in specs] == ['memorization_fixed_d_model', 'memorization_fixed_params',
                                     'modular_fixed_d_model', 'modular_fixed_params']
  for s in specs:
    runs = sweep.expand(s.base, s.overrides)  # validates every config
    assert len({r.config.train.seed for r in runs}) >= 3
  assert specs[0].base.task.name == 'memorization' and specs[2].base.task.name == 'modular_arithmetic'
