"""moe_memorization_vs_reasoning: the sweeps keep the active width fixed (exact counts against the
formula), total parameters grow as E, saturation by construction, and the verdict rules and the
analysis on synthetic data with known answers."""

import math

import numpy as np
import pandas as pd
import pytest

from ffn_research import models, sweep, tasks, validation
from ffn_research.ablations import base, verdict
from ffn_research.ablations import moe_memorization_vs_reasoning as mr


def _ffn(d: int, w: int) -> int:
  """Independent count: ReLU FFN d -> w -> d with biases."""
  return d * w + w + w * d + d


def _counts(spec: base.SweepSpec) -> list[tuple[dict, dict]]:
  out = []
  for run in sweep.expand(spec.base, spec.overrides):
    validation.validate(run.config)
    task = tasks.build_task(run.config)
    out.append((run.overrides, models.model_counts(run.config, task)))
  return out


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_active_width_fixed_and_total_grows_with_experts(scale):
  s = mr.SETTINGS[scale]
  specs = {sp.name: sp for sp in mr.sweeps(scale)}
  assert set(specs) == ({'memorization', 'multi_hop', 'memorization_dense', 'multi_hop_dense'} if s['dense']
                        else {'memorization', 'multi_hop'})
  for task, d, w, layers in (('memorization', mr.MEM_D_MODEL, mr.MEM_WIDTH, mr.MEM_LAYERS),
                             ('multi_hop', mr.HOP_D_MODEL, mr.HOP_WIDTH, mr.HOP_LAYERS)):
    counts = [oc for name in (task, f'{task}_dense') if name in specs for oc in _counts(specs[name])]
    rest = {c['num_params'] - c['num_ffn_params'] for _, c in counts}
    assert len(rest) == 1  # embeddings, attention, norms: the same for every run of a task
    for o, c in counts:
      e = o.get('model.moe.num_experts', 1)
      if e == 0:  # dense references: expert width and E_max experts' width
        assert o['model.d_ff'] in (w, max(s['experts']) * w)
        assert c['num_ffn_params'] == c['num_active_ffn_params'] == layers * _ffn(d, o['model.d_ff'])
        continue
      assert c['num_ffn_params'] == layers * (e * _ffn(d, w) + d * e)           # E experts + router
      assert c['num_active_ffn_params'] == layers * (_ffn(d, w) + d * e)        # one expert + whole router
      assert c['num_active_ffn_params'] - layers * d * e == layers * _ffn(d, w)  # expert weights used: fixed
      assert c['d_ff_active'] == w * mr.TOP_K == w
    moe = {o['model.moe.num_experts']: c['num_params'] for o, c in counts if o['model.moe.num_experts'] > 0}
    assert sorted(moe) == sorted(s['experts'])
    for e, n in moe.items():
      assert n - moe[1] == layers * (e - 1) * (_ffn(d, w) + d)  # total grows linearly in E
    if s['dense']:
      dense = {o['model.d_ff']: c['num_params'] for o, c in counts if o['model.moe.num_experts'] == 0}
      e_max = max(s['experts'])
      # Same total parameters as the largest MoE up to its router and the E_max - 1 extra output biases.
      assert moe[e_max] - dense[e_max * w] == layers * (d * e_max + (e_max - 1) * d)
      assert dense[w] == moe[1] - layers * d  # E = 1 is the dense FFN plus a (constant) one-column router


@pytest.mark.parametrize('scale', ['quick', 'full'])
def test_memorization_saturated_by_construction(scale):
  """Even at 2 bits per parameter the largest model could store < 90% of the facts' entropy."""
  s = mr.SETTINGS[scale]
  counts = [c for sp in mr.sweeps(scale) if sp.name.startswith('memorization') for _, c in _counts(sp)]
  assert 2 * max(c['num_params'] for c in counts) < mr.SATURATED_FRACTION * mr.entropy_bits(s)
  assert mr.entropy_bits(s) == s['mem_facts'] * 8


def _xy(slope, noise, seed=0, experts=(1, 2, 4, 8, 16, 32), seeds=5):
  rng = np.random.default_rng(seed)
  x = np.array([300.0 * e for e in experts for _ in range(seeds)])
  s = np.array([k for _ in experts for k in range(seeds)])
  return x, s, rng.normal(0, noise, len(x))


def test_memorization_rule_known_answers():
  x, s, eps = _xy(1.0, 0.02)
  v = mr.slope_above(x, 3 * x * np.exp(eps), level=mr.MEM_LEVEL, claim='c', seeds=s)
  assert v.outcome == verdict.REPRODUCED and v.statistic == pytest.approx(1.0, abs=0.02) and v.n == 30
  flat = mr.slope_above(x, 500 * x ** 0.2 * np.exp(eps), level=mr.MEM_LEVEL, claim='c', seeds=s)
  assert flat.outcome == verdict.NOT_REPRODUCED and flat.ci[1] < 0.5
  exact = mr.slope_above(x, 2 * x, level=mr.MEM_LEVEL, claim='c', seeds=s)  # zero residual: CI is the point
  assert exact.outcome == verdict.REPRODUCED and exact.ci == pytest.approx((1.0, 1.0))
  _, _, big = _xy(0.5, 1.5, seed=3)
  noisy = mr.slope_above(x, x ** 0.5 * np.exp(big), level=mr.MEM_LEVEL, claim='c', seeds=s)
  assert noisy.outcome == verdict.INCONCLUSIVE and noisy.ci[0] < 0.5 < noisy.ci[1]
  x2, s2, e2 = _xy(1.0, 0.01, experts=(1, 2))
  few = mr.slope_above(x2, x2 * np.exp(e2), level=mr.MEM_LEVEL, claim='c', seeds=s2)
  assert few.outcome == verdict.INCONCLUSIVE and 'underpowered' in few.detail
  # The fit is verdict.slope's: same statistic and CI.
  ref = verdict.slope(x, 3 * x * np.exp(eps), claimed=1, margin=1, claim='c', seeds=s)
  assert (v.statistic, v.ci) == (ref.statistic, ref.ci)


def test_reasoning_rule_known_answers():
  x, s, eps = _xy(0.0, 0.01)
  flat = mr.flat_slope(x, 0.4 + eps, margin=mr.REASON_MARGIN, claim='c', seeds=s)
  assert flat.outcome == verdict.REPRODUCED and abs(flat.statistic) < 0.01
  rising = mr.flat_slope(x, 0.2 + 0.06 * np.log2(x) + eps, margin=mr.REASON_MARGIN, claim='c', seeds=s)
  assert rising.outcome == verdict.NOT_REPRODUCED and rising.statistic == pytest.approx(0.06, abs=0.01)
  _, _, big = _xy(0.0, 0.1, seed=2)
  noisy = mr.flat_slope(x, 0.4 + 0.02 * np.log2(x) + big, margin=mr.REASON_MARGIN, claim='c', seeds=s)
  assert noisy.outcome == verdict.INCONCLUSIVE
  # Slope per doubling: accuracy = a + b log2(x) is recovered exactly.
  exact = mr.flat_slope(x, 0.5 + 0.01 * np.log2(x), margin=mr.REASON_MARGIN, claim='c', seeds=s)
  assert exact.statistic == pytest.approx(0.01) and exact.outcome == verdict.REPRODUCED


def _v(outcome):
  return verdict.Verdict('c', outcome, 1.0, (0.9, 1.1), 't', 'r', 30)


@pytest.mark.parametrize('mem,reason,want', [
    (verdict.REPRODUCED, verdict.REPRODUCED, verdict.REPRODUCED),
    (verdict.REPRODUCED, verdict.NOT_REPRODUCED, verdict.NOT_REPRODUCED),
    (verdict.NOT_REPRODUCED, verdict.REPRODUCED, verdict.NOT_REPRODUCED),
    (verdict.NOT_REPRODUCED, verdict.INCONCLUSIVE, verdict.NOT_REPRODUCED),
    (verdict.REPRODUCED, verdict.INCONCLUSIVE, verdict.INCONCLUSIVE),
    (verdict.INCONCLUSIVE, verdict.INCONCLUSIVE, verdict.INCONCLUSIVE),
])
def test_overall_rule(mem, reason, want):
  assert mr.overall(_v(mem), _v(reason)).outcome == want


def _fake_results(scale, mem_slope, hop_slope, seed=0):
  """results.csv-like frames from the real sweeps' counts, with synthetic scores."""
  rng = np.random.default_rng(seed)
  frames = {}
  for spec in mr.sweeps(scale):
    rows = []
    for o, c in _counts(spec):
      row = {'status': 'completed', **o, **c}  # like results.csv: only swept keys as config columns
      x = c['num_params']
      noise = rng.normal(0, 0.02)
      if spec.name.startswith('memorization'):
        row.update(bits_stored=0.5 * x ** mem_slope * math.exp(noise), accuracy=0.1)
      else:
        row.update(eval_accuracy=0.3 + hop_slope * math.log2(c['num_params'] / 10000) + noise, eval_loss=2.0,
                   accuracy=0.9, first_hop_accuracy=1.0)
      rows.append(row)
    frames[spec.name] = pd.DataFrame(rows)
  return frames


@pytest.mark.parametrize('mem_slope,hop_slope,want', [
    (1.0, 0.08, verdict.NOT_REPRODUCED),
    pytest.param(1.0, 0.0, verdict.REPRODUCED, marks=pytest.mark.slow),  # ~5 s each idle (plots)
    pytest.param(0.1, 0.0, verdict.NOT_REPRODUCED, marks=pytest.mark.slow),
])
def test_analysis_on_synthetic_results(tmp_path, mem_slope, hop_slope, want):
  a = mr.analyze(_fake_results('quick', mem_slope, hop_slope), base.Context(outdir=str(tmp_path), scale='quick'))
  assert [v.outcome for v in a.verdicts][0] == want
  assert a.verdicts[1].statistic == pytest.approx(mem_slope, abs=0.05)
  assert a.verdicts[2].statistic == pytest.approx(hop_slope, abs=0.02)
  assert (tmp_path / a.figures[0].file).stat().st_size > 0
  assert all(c.passed for c in a.checks)  # 0.5 * x bits: far below the entropy
  mem_table = a.tables[0].frame
  assert list(mem_table['E']) == [1, 4, 16] and mem_table['seeds'].tolist() == [3] * 3


def test_reasoning_floor_and_ceiling_guard():
  ok = verdict.Verdict('c', verdict.REPRODUCED, 0.0, (-0.01, 0.01), 't', 'r', 30, 'fit')
  assert mr.guard_floor_ceiling(ok, 0.3, 0.4).outcome == verdict.REPRODUCED
  floor = mr.guard_floor_ceiling(ok, 1 / 64, 0.02)
  assert floor.outcome == verdict.INCONCLUSIVE and 'floor' in floor.detail
  ceiling = mr.guard_floor_ceiling(ok, 0.96, 0.99)
  assert ceiling.outcome == verdict.INCONCLUSIVE and 'ceiling' in ceiling.detail
  assert mr.guard_floor_ceiling(ok, math.nan, 0.5).outcome == verdict.INCONCLUSIVE


@pytest.mark.parametrize('mem_slope,premise', [(0.3, False), pytest.param(1.0, True, marks=pytest.mark.slow)])
def test_memorization_premise_check_reads_the_dense_references(tmp_path, mem_slope, premise):
  """Full scale has dense d_ff 8 and E_max * 8: the check reports their log-log slope against MEM_LEVEL."""
  a = mr.analyze(_fake_results('full', mem_slope, 0.0), base.Context(outdir=str(tmp_path), scale='full'))
  check, = [c for c in a.checks if c.name.startswith('memorization premise')]
  assert check.passed is premise
  slope = float(check.detail.split()[2])
  assert slope == pytest.approx(mem_slope, abs=0.05)
  assert a.verdicts[1].statistic == pytest.approx(mem_slope, abs=0.05)  # the verdict's own fit is unchanged
