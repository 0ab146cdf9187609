"""expansion_ratio ablation: non-embedding counts against the model's own, shapes against brute force,
Kaplan's excess-over-L(N) statistic and the spread on synthetic losses with known answers, the regime
checks turning verdicts invalid, sweeps valid with one program per shape."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from ffn_research import models, sweep, tasks
from ffn_research.ablations import base, verdict
from ffn_research.ablations import expansion_ratio as er


@pytest.mark.parametrize('scale', ['smoke', 'full'])
def test_non_embedding_params_match_model_counts(scale):
  for spec in er.sweeps(scale):
    for r in sweep.expand(spec.base, spec.overrides[::len(er.SETTINGS[scale]['lrs']) * er.SETTINGS[scale]['seeds']]):
      c = models.model_counts(r.config, tasks.build_task(r.config))
      m = r.config.model
      assert (c['num_params'] - c['num_embedding_params'] - c['num_unembedding_params']
              == er.non_embedding_params(m.d_model, m.d_ff, m.num_layers))
      assert c['num_attention_params'] == 4 * m.d_model ** 2 * m.num_layers   # attention is counted


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
    assert abs(p['deviation']) < 0.005                        # within 0.5% of the target
    assert abs(math.log(p['actual_ratio'] / p['ratio'])) < math.log(1.15)   # within 15% of the nominal ratio
  assert min(p['actual_ratio'] for p in pts) < 0.6 and max(p['actual_ratio'] for p in pts) > 15


def _losses(mult, sizes=(1000, 4000), alpha=0.3, a=2.0, seeds=3, noise=0.0):
  """Rows (size, ratio, seed) with loss a N^-alpha mult[r] (times 1 + noise); N exactly the size."""
  rng = np.random.default_rng(0)
  rows = [dict(size=n, ratio=r, non_embedding_params=n, **{er.SEED: s},
               excess_bits=a * n ** -alpha * m * (1 + noise * rng.normal()))
          for n, (r, m), s in itertools.product(sizes, mult.items(), range(seeds))]
  return pd.DataFrame(rows)


def test_excess_over_fit_known_answer():
  # Multipliers with geometric mean 1 at each size: the fit is exactly a N^-alpha, the % excess 100 (m - 1).
  mult = {0.5: 1.2, 1: 1.0, 2: 0.9, 4: 1 / (1.2 * 0.9)}
  out = er.excess_over_fit(_losses(mult))
  np.testing.assert_allclose(out['alpha'], 0.3, rtol=1e-12)
  np.testing.assert_allclose(out['fit'], 2.0 * out['non_embedding_params'] ** -0.3, rtol=1e-12)
  np.testing.assert_allclose(out['excess_pct'], [100 * (mult[r] - 1) for r in out['ratio']], atol=1e-9)
  # Spread over r in {1, 2, 4} (multipliers 1, 0.9, 1/1.08): max - min of 100 (m - 1) = 100 (1 - 0.9).
  for _, g in out.groupby([er.SEED, 'size']):
    assert er.spread(g, ratios=(1, 2, 4)) == pytest.approx(10.0)
  # A shape with a different N is compared with the fit at its own N, not the size's.
  df = _losses({1: 1.0, 4: 1.0})
  df.loc[(df['size'] == 4000) & (df['ratio'] == 4), 'non_embedding_params'] = 4000  # unchanged: still on the law
  assert np.allclose(er.excess_over_fit(df)['excess_pct'], 0, atol=1e-9)


RATIOS = (0.5, 1, 2, 4, 8, 16)


def _results(mult, *, best_lr=6e-3, prev_factor=1.01, scale_excess=1.0, seeds=5):
  """Synthetic sweep frames at full scale: the loss of shape (N, r) at rate lr is
  scale * 0.5 (N / 38000)^-0.3 * mult[r] * (1 + |log10(lr / best_lr)|), seed noise 0.2%."""
  rng = np.random.default_rng(1)
  s = er.SETTINGS['full']
  frames = {}
  for n in s['sizes']:
    rows = []
    for p in [p for p in er.shapes('full') if p['size'] == n]:
      for lr, seed in itertools.product(s['lrs'], range(seeds)):
        loss = (scale_excess * 0.5 * (p['non_embedding_params'] / 38000) ** -0.3 * mult[p['ratio']]
                * (1 + abs(math.log10(lr / best_lr))) * (1 + 0.002 * rng.normal()))
        rows.append({'name': f'{p["d_model"]}-{p["d_ff"]}-{lr}-{seed}', 'status': 'completed',
                     'model.d_model': p['d_model'], 'model.d_ff': p['d_ff'], er.LR: lr, er.SEED: seed,
                     'excess_bits': loss, 'excess_bits_prev': loss * prev_factor, 'eval_bits': 1.3 + loss,
                     'floor_bits': 1.3, 'bigram_bits': 3.4})
    frames[er.sweep_name(n)] = pd.DataFrame(rows)
  return frames


FLAT = {0.5: 1.10, 1: 1.01, 2: 1.0, 4: 0.99, 8: 1.0, 16: 1.08}    # spread over 1..8: about 2 points
STEEP = {0.5: 0.7, 1: 0.8, 2: 0.9, 4: 1.0, 8: 1.1, 16: 1.2}        # spread over 1..8: about 30 points


def _analyze(tmp_path, frames):
  return er.analyze(frames, base.Context(outdir=str(tmp_path), scale='full'))


@pytest.fixture
def no_plot(monkeypatch):
  """The verdict tests do not need the figure (drawn once, in the first analyze test)."""
  monkeypatch.setattr(er, 'plot', lambda winners, table, ctx: base.Figure('none.png', ''))


def test_analyze_flat_is_reproduced_steep_is_not(tmp_path):
  out = _analyze(tmp_path, _results(FLAT))
  assert [v.outcome for v in out.verdicts] == [verdict.REPRODUCED] * 2
  for v in out.verdicts:
    assert v.statistic == pytest.approx(100 * (1.01 - 0.99) / math.prod([1.10, 1.01, 1.0, 0.99, 1.0, 1.08]) ** (1 / 6),
                                        abs=0.5)
    assert [c.passed for c in v.checks] == [True] * 4   # coverage, plateau, dynamic range, learning rate
  assert (tmp_path / 'loss_vs_ratio.png').stat().st_size > 0
  t = out.tables[0].frame
  assert list(t['best rate (seeds)'].unique()) == ['0.006: 5']          # the middle rate won everywhere


def test_analyze_steep_is_not_reproduced(tmp_path, no_plot):  # pylint: disable=redefined-outer-name,unused-argument
  out = _analyze(tmp_path, _results(STEEP))
  assert [v.outcome for v in out.verdicts] == [verdict.NOT_REPRODUCED] * 2
  assert out.verdicts[0].statistic == pytest.approx(100 * 0.3 / math.prod(STEEP.values()) ** (1 / 6), rel=0.05)


def test_regime_checks_make_the_verdict_invalid(tmp_path, no_plot):  # pylint: disable=redefined-outer-name,unused-argument
  # Best rate at the grid's edge.
  out = _analyze(tmp_path, _results(FLAT, best_lr=2e-2))
  assert [v.outcome for v in out.verdicts] == [verdict.INVALID] * 2
  assert 'learning rate inside the grid at N=38,000' in out.verdicts[0].detail
  assert '5/5 seeds at 0.02' in out.verdicts[0].detail
  # The edge is checked per size: an untuned shape at one size leaves the other size's verdict standing.
  frames, edge = _results(FLAT), _results(FLAT, best_lr=2e-2)
  frames['n76000'] = edge['n76000']
  out = _analyze(tmp_path, frames)
  assert [v.outcome for v in out.verdicts] == [verdict.REPRODUCED, verdict.INVALID]
  # Still moving: at the previous evaluation the shapes were STEEP, at the last FLAT (spread ~30 vs ~2 points).
  frames, prev = _results(FLAT), _results(STEEP)
  for k in frames:
    frames[k]['excess_bits_prev'] = prev[k]['excess_bits']
  out = _analyze(tmp_path, frames)
  assert [v.outcome for v in out.verdicts] == [verdict.INVALID] * 2
  assert out.verdicts[0].detail.startswith('invalid: plateau at N=38,000')
  assert out.verdicts[0].extra == {} and out.verdicts[0].statistic < 5   # the measured statistic is kept
  # A uniform 25% drop of every loss since the previous evaluation leaves the spread in place: plateau passes.
  out = _analyze(tmp_path, _results(FLAT, prev_factor=1.25))
  assert [v.outcome for v in out.verdicts] == [verdict.REPRODUCED] * 2
  # Pinned at the floor: every excess below 0.02 bits.
  out = _analyze(tmp_path, _results(FLAT, scale_excess=0.01))
  assert [v.outcome for v in out.verdicts] == [verdict.INVALID] * 2
  assert 'dynamic range' in out.verdicts[0].detail and '(pinned)' in out.verdicts[0].detail
  # A shape missing (its runs pending or diverged at every rate) for one seed.
  frames = _results(FLAT)
  df = frames['n38000']
  frames['n38000'] = df[~((df['model.d_model'] == 56) & (df[er.SEED] == 0))]
  out = _analyze(tmp_path, frames)
  assert [v.outcome for v in out.verdicts] == [verdict.INVALID, verdict.REPRODUCED]
  assert out.verdicts[0].detail.startswith('invalid: every shape measured at N=38,000: ') and '4: 4/5' in out.verdicts[0].detail


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_sweeps_validate_with_one_program_per_shape(scale):
  s = er.SETTINGS[scale]
  specs = er.sweeps(scale)
  assert [x.name for x in specs] == [er.sweep_name(n) for n in s['sizes']]
  for spec in specs:
    runs = sweep.expand(spec.base, spec.overrides)   # validates every config
    assert spec.base.task.name == 'language' and spec.base.model.arch == 'transformer'
    groups = sweep.group_runs(runs)
    assert len(groups) == len(s['ratios'])          # one compiled program per shape ...
    for g in groups:                                # ... holding the whole rate x seed grid
      assert sorted((r.config.train.learning_rate, r.config.train.seed) for r in g) == sorted(
          itertools.product(s['lrs'], range(s['seeds'])))
    assert spec.base.train.eval_every * 4 == spec.base.train.steps      # evaluations at 3/4 and at the end
  assert s['seeds'] >= (5 if scale == 'full' else 3)
