"""memorization_capacity: the bits of a known fit, peak selection, the verdicts on synthetic frames (including
`invalid` when a regime check fails), and its sweeps (valid configs, one program per (N, exposures))."""

import math
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from ffn_research import models, sweep, tasks
from ffn_research.ablations import base, verdict
from ffn_research.ablations import memorization_capacity as mc
from ffn_research.tasks import sequence

SIZES = (2000, 4000, 8000)
FACTS = (512, 1024, 2048, 4096)
LRS = mc.SETTINGS['full']['lrs']


def test_bits_of_a_known_fit():
  # Every one of 1,000 facts over V = 256 objects predicted with p = 1/2 on the right object: 7 bits each.
  ce_nats = np.full(1000, math.log(2.0))
  assert mc.bits_of_fit(float(ce_nats.sum() / math.log(2)), 1000, 256) == pytest.approx(7000.0)
  assert float(sequence.bits_stored(jnp.asarray(ce_nats), 256)) == pytest.approx(7000.0, rel=1e-6)
  assert mc.bits_of_fit(1000 * 8.0, 1000, 256) == 0.0 and mc.bits_of_fit(1e9, 1000, 256) == 0.0  # uniform, floor
  assert float(sequence.bits_stored(jnp.full(10, math.log(256.0)), 256)) == pytest.approx(0.0, abs=1e-3)


def _frame(bits_per_param=2.0, power=1.0, e=1000, peak_n=2048, plateau_jump=0.0, best_lr=0.1, seeds=3,
           sizes=SIZES, top_k=0):
  """Bits = k params^power x shape(N), peaking at peak_n; the best rate `best_lr`, others 20% worse."""
  rows, rng = [], np.random.default_rng(0)
  for size in sizes:
    for n in FACTS:
      shape = 1.0 - 0.1 * abs(math.log2(n / peak_n))
      for lr in LRS:
        for s in range(seeds):
          bits = bits_per_param * sizes[0] * (size / sizes[0]) ** power * shape * (1 + 0.01 * rng.normal())
          rows.append({'top_k': top_k, 'active': size // (4 - top_k) if top_k else size, mc.E: e, mc.N: n, 'model.d_ff': size // 100, mc.LR: lr, mc.SEED: s, mc.SIZE: size,
                       'ffn_params': size - 48, 'all_params': size + 5000,
                       'bits_stored': bits * (1.0 if lr == best_lr else 0.8), 'accuracy': 0.5,
                       'loss_last': 1.0 + plateau_jump, 'loss_previous': 1.0})
  return pd.DataFrame(rows)


def test_peak_selection_on_a_synthetic_frame():
  df = _frame(peak_n=1024)
  best, top = mc.peaks(df)
  assert len(best) == len(SIZES) * len(FACTS) * 3 and (best[f'best_{mc.LR}'] == 0.1).all()
  assert (best[mc.LR] == 0.1).all() and (top[f'best_{mc.LR}'] == 0.1).all()
  assert len(top) == len(SIZES) * 3 and (top[mc.N] == 1024).all()
  pick = df[(df[mc.N] == 1024) & (df[mc.LR] == 0.1)].set_index([mc.SIZE, mc.SEED])['bits_stored']
  np.testing.assert_array_equal(top.set_index([mc.SIZE, mc.SEED])['bits_stored'].sort_index(), pick.sort_index())
  assert mc.peak_inside_check(best, 1000).passed
  assert not mc.peak_inside_check(mc.peaks(_frame(peak_n=8192))[0], 1000).passed  # still rising at N = 4096


def _verdict(**kw):
  best, top = mc.peaks(_frame(**kw))
  return mc.capacity_verdict(top, best, kw.get('e', 1000), LRS)


def test_capacity_verdict_known_answers_and_invalid():
  v = _verdict()
  assert v.outcome == verdict.REPRODUCED and v.statistic == pytest.approx(2.0, rel=0.02) and v.n == 3
  assert all(c.passed for c in v.checks) and len(v.checks) == 4
  assert _verdict(bits_per_param=1.0).outcome == verdict.NOT_REPRODUCED
  assert _verdict(e=100, bits_per_param=1.0).outcome == verdict.REPRODUCED  # 100 exposures: claimed 1
  steep = _verdict(power=1.4)  # bits not proportional to params: the slope check fails
  assert steep.outcome == verdict.INVALID and 'bits proportional to params' in steep.detail
  assert steep.extra['slope'] == pytest.approx(1.4, abs=0.02)
  assert _verdict(plateau_jump=0.2).outcome == verdict.INVALID   # no plateau
  assert _verdict(best_lr=0.3).outcome == verdict.INVALID        # best rate at the grid's edge
  assert _verdict(peak_n=8192).outcome == verdict.INVALID        # peak beyond the N grid
  few = _verdict(seeds=2)
  assert few.outcome == verdict.INVALID or 'underpowered' in few.detail


def test_capacity_verdict_carries_its_decision_p():
  for k in (1.5, 2.0, 3.0):
    v = _verdict(bits_per_param=k)
    assert v.p_value is not None and (v.outcome != verdict.INCONCLUSIVE) == (v.p_value < 0.05)


def _rl(at_quarter=1.0, at_top=0.3):
  return pd.DataFrame([{'task.num_points': n, mc.SEED: s, 'eval_loss': 0.0,
                        'fraction_fitted': {256: at_quarter, 2048: at_top}.get(n, 1.0) - 0.01 * s}
                       for n in (128, 256, 2048) for s in range(3)])


def test_random_labels_verdict_can_fail_and_is_invalid_when_it_cannot():
  assert mc.random_labels_verdict(_rl()).outcome == verdict.REPRODUCED
  assert mc.random_labels_verdict(_rl(at_quarter=0.5)).outcome == verdict.NOT_REPRODUCED
  cannot = mc.random_labels_verdict(_rl(at_top=1.0))  # fits even N > parameters: the check cannot fail
  assert cannot.outcome == verdict.INVALID and 'can fail' in cannot.detail


def test_analyze_stats_end_to_end_on_synthetic_frames(tmp_path):
  df = pd.concat([_frame(e=1000), _frame(e=100, bits_per_param=1.0)])
  a = mc.analyze_stats(df, _rl(), base.Context(str(tmp_path), 'full'))
  assert [v.outcome for v in a.verdicts] == [verdict.REPRODUCED] * 3
  assert (tmp_path / 'bits_vs_params.png').stat().st_size > 1000
  table = a.tables[0].frame
  assert set(table['peak N']) == {2048} and set(table['best lr']) == {0.1} and set(table['seeds']) == {3}
  np.testing.assert_allclose(table['bits/FFN param'] / table['bits/non-emb param'],
                             table['non-embedding params'] / table['FFN params'], rtol=1e-12)


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_sweeps_validate_and_share_one_program_per_n(scale):
  s = mc.SETTINGS[scale]
  specs = mc.sweeps(scale)
  arms = mc.arm_names(s)
  assert [x.name for x in specs] == list(arms) + ['random_labels']
  assert sorted({k for k, _, _ in arms.values()}) == [0, *mc.MOE_TOP_KS]
  for spec in specs[:-1]:
    runs = sweep.expand(spec.base, spec.overrides)  # validates every config
    top_k, exposures, n = arms[spec.name]
    # dense: d_ff x learning rate x seeds in one padded, vmapped program; MoE: one program per expert width
    widths = {r.config.model.d_ff for r in runs}
    assert len(sweep.group_runs(runs)) == (len(widths) if top_k else 1)
    assert not top_k or widths == {w for w in s['moe_d_es'] if n <= s.get('moe_max_facts', {}).get(w, n)}
    c = spec.base
    assert c.model.freeze_embeddings and c.train.steps * c.train.batch_size == exposures * n == exposures * c.task.num_facts
    assert c.model.moe.num_experts == (mc.MOE_EXPERTS if top_k else 0) and (not top_k or c.model.moe.top_k == top_k)
  assert max(s['rl_points']) > mc.RL_PARAMS  # the random-label arm can fail
  rl = sweep.expand(specs[-1].base, specs[-1].overrides)[0].config
  assert models.model_counts(rl, tasks.build_task(rl))['num_params'] == mc.RL_PARAMS


@pytest.mark.slow
def test_smoke_through_the_entry_point(tmp_path):
  proc = subprocess.run([sys.executable, '-m', 'experiments.reproduce', '--ablation=memorization_capacity',
                         f'--workdir={tmp_path}', '--scale=smoke'], capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = (tmp_path / 'memorization_capacity' / 'report.md').read_text()
  assert 'peak bits per non-embedding parameter' in report and (tmp_path / 'memorization_capacity' /
                                                                 'bits_vs_params.png').exists()


def test_peak_is_chosen_on_the_seed_mean_not_per_seed():
  # Seed 0 does best at N = 512 / lr 0.03, seeds 1 and 2 (and the mean) at N = 1024 / lr 0.1: every seed is
  # read at N = 1024, lr 0.1.
  rows = [{mc.E: 1000, mc.SIZE: 100, mc.N: n, mc.LR: lr, mc.SEED: s,
           'bits_stored': {(512, 0.03, 0): 500.0, (1024, 0.1, 1): 400.0, (1024, 0.1, 2): 400.0,
                           (1024, 0.1, 0): 300.0}.get((n, lr, s), 100.0)}
          for n in (512, 1024) for lr in (0.03, 0.1) for s in range(3)]
  best, top = mc.peaks(pd.DataFrame(rows))
  assert sorted(top['bits_stored']) == [300.0, 400.0, 400.0] and set(top[mc.N]) == {1024}
  assert set(best[best[mc.N] == 512][mc.LR]) == {0.03}  # mean at N = 512: 0.03 -> 233, 0.1 -> 100


def test_moe_arm_parameter_counts_match_the_formula_and_the_dense_sizes():
  s, d, ex = mc.SETTINGS['full'], mc.SETTINGS['full']['d_model'], mc.MOE_EXPERTS
  dense_sizes = set()
  for spec in mc.sweeps('full')[:-1]:
    top_k = mc.arm_names(s)[spec.name][0]
    for run in sweep.expand(spec.base, spec.overrides):
      c = models.model_counts(run.config, tasks.build_task(run.config))
      w = run.config.model.d_ff
      if not top_k:
        assert c['num_trainable_params'] == 2 * (2 * d * w + w + d) + 3 * d
        dense_sizes.add(c['num_trainable_params'])
        continue
      expert = 2 * d * w + w + d  # in and out matrices, hidden and output biases
      assert c['num_trainable_params'] == 2 * (d * ex + ex * expert) + 3 * d  # router d x E per layer, 3 norms
      assert c['num_active_ffn_params'] == 2 * (d * ex + top_k * expert)
  moe_sizes = [2 * (d * ex + ex * (2 * d * w + w + d)) + 3 * d for w in s['moe_d_es']]
  assert moe_sizes == [2128, 3184, 4240] and min(dense_sizes) < min(moe_sizes)
  # the smallest and largest MoE sizes lie within 4% of a dense size; all inside the dense range
  assert all(min(abs(m / x - 1) for x in dense_sizes) < 0.04 for m in (moe_sizes[0], moe_sizes[-1]))
  assert max(moe_sizes) < max(dense_sizes)


MOE_SIZES = (2500, 4000, 6000)


def _moe_verdict(ratio, top_k=1, **kw):
  dense = mc.peaks(_frame())
  moe = mc.peaks(_frame(bits_per_param=2.0 * ratio, sizes=MOE_SIZES, top_k=top_k, **kw))
  return mc.moe_verdict(moe, dense, top_k, 1000, LRS, LRS)


def test_moe_pairs_interpolate_the_dense_arm_per_seed():
  dense_top = pd.DataFrame({mc.SEED: 0, mc.SIZE: [1000, 4000], 'bits_stored': [1000.0, 16000.0]})  # 1 and 4 bits/param
  moe_top = pd.DataFrame({mc.SEED: 0, mc.SIZE: [500, 2000, 8000], 'bits_stored': [500.0, 2000.0, 8000.0]})
  r = mc.moe_pairs(moe_top, dense_top)
  np.testing.assert_allclose(r['dense_bpp'], [1.0, 2.0, 4.0])  # clamped, log-log midpoint, clamped
  np.testing.assert_allclose(r['moe_bpp'], [1.0, 1.0, 1.0])
  assert mc.moe_pairs(moe_top.assign(**{mc.SEED: 1}), dense_top).empty  # no dense run of that seed: no pair


def test_moe_verdict_known_answers_and_invalid():
  v = _moe_verdict(0.9)
  assert v.outcome == verdict.REPRODUCED and v.statistic == pytest.approx(0.9, rel=0.03) and v.n == 3
  assert len(v.checks) == 7 and all(c.passed for c in v.checks)
  assert v.ci[0] > 1 / mc.MOE_FACTOR and v.p_value is not None
  low = _moe_verdict(0.5)
  assert low.outcome == verdict.NOT_REPRODUCED and low.ci[1] < 1 / mc.MOE_FACTOR
  assert _moe_verdict(0.9, power=1.4).outcome == verdict.INVALID   # MoE bits not proportional to params
  assert _moe_verdict(0.9, best_lr=0.01).outcome == verdict.INVALID  # MoE's best rate at the grid's edge
  assert _moe_verdict(0.9, peak_n=8192).outcome == verdict.INVALID  # MoE peak beyond its N grid
  assert _moe_verdict(0.9, plateau_jump=0.2).outcome == verdict.INVALID
  dense_bad = mc.moe_verdict(mc.peaks(_frame(bits_per_param=1.8, sizes=MOE_SIZES, top_k=1)),
                             mc.peaks(_frame(best_lr=0.3)), 1, 1000, LRS, LRS)
  assert dense_bad.outcome == verdict.INVALID and 'dense at 1000 exposures: learning rate' in dense_bad.detail
  steep_dense = mc.moe_verdict(mc.peaks(_frame(bits_per_param=1.8, sizes=MOE_SIZES, top_k=1)),
                               mc.peaks(_frame(power=1.4)), 1, 1000, LRS, LRS)
  assert steep_dense.outcome != verdict.INVALID  # the dense slope is rule 1's check, not rule 4's


def test_analyze_stats_with_moe_arms(tmp_path):
  df = pd.concat([_frame(e=1000), _frame(e=100, bits_per_param=1.0),
                  _frame(bits_per_param=1.8, sizes=MOE_SIZES, top_k=1), _frame(bits_per_param=1.0, sizes=MOE_SIZES, top_k=2)])
  a = mc.analyze_stats(df, _rl(), base.Context(str(tmp_path), 'full'))
  assert [v.outcome for v in a.verdicts] == [verdict.REPRODUCED] * 4 + [verdict.NOT_REPRODUCED]
  assert (tmp_path / 'moe_vs_dense.png').stat().st_size > 1000 and 'MoE top-2 / dense' in a.headline
  t = a.tables[3].frame
  assert list(t['top_k']) == [1, 1, 1, 2, 2, 2] and list(t['total non-emb params']) == list(MOE_SIZES) * 2
  np.testing.assert_allclose(t['MoE / dense'], [0.9] * 3 + [0.5] * 3, rtol=0.03)
  np.testing.assert_allclose(t['bits/active param'] / t['bits/total param'],
                             t['total non-emb params'] / t['active non-emb params'], rtol=1e-12)
