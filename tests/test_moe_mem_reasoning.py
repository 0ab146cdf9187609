"""moe_memorization_vs_reasoning: the arms keep the active width fixed (exact counts against the
formula), the facts exceed 2x the dense-total capacity by construction, the bootstrap verdict's p agrees
with its CI, and the rules on synthetic selections: known gap shares come back, and a failed premise,
dynamic range or budget check gives `invalid` (the reasoning premise with its remedy)."""

import functools
import math

import numpy as np
import pandas as pd
import pytest

from ffn_research import ablations
from ffn_research import models
from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research import sweep
from ffn_research import tasks
from ffn_research import validation
from ffn_research.ablations import base
from ffn_research.ablations import moe_memorization_vs_reasoning as mr


def _ffn(d: int, w: int, d_out: int | None = None) -> int:
  """Independent count: ReLU FFN d -> w -> d_out (default d) with biases."""
  d_out = d if d_out is None else d_out
  return d * w + w + w * d_out + d_out


@functools.cache
def _counts(scale: str, name: str) -> tuple:
  """(point overrides, counts) of every point of arm `name` (at its first rate, T, seed 0)."""
  (arm,) = [a for a in mr.arms(scale) if a.name == name]
  out = []
  for o in arm.points.values():
    rate = (arm.rates or mr.REGIMES[scale].rates)[0]
    (run,) = sweep.expand(arm.base, [{**o, **base.budget(100), 'train.learning_rate': rate, 'train.seed': 0}])
    validation.validate(run.config)
    out.append((dict(o), models.model_counts(run.config, tasks.build_task(run.config))))
  return tuple(out)


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_active_width_fixed_and_total_grows_with_experts(scale):
  s = mr.SETTINGS[scale]
  arms = mr.arms(scale)
  assert [a.name for a in arms] == [f'{t}_{a}' for t in mr.TASKS for a in ('dense', 'top1', 'top2')]
  for task, d, d_out, w, layers in (
    ('memorization', mr.MEM_D_MODEL, mr.MEM_D_MODEL, mr.MEM_WIDTH, 1),
    ('shortest_path', mr.SP_D_MODEL, mr.SP_MAX_DISTANCE + 1, mr.SP_WIDTH, 1),  # bare FFN: input -> classes
  ):
    counts = {a: _counts(scale, f'{task}_{a}') for a in ('dense', 'top1', 'top2')}
    rest = {c['num_params'] - c['num_ffn_params'] for cs in counts.values() for _, c in cs}
    assert len(rest) == 1  # embeddings, attention, norms: the same for every run of a task
    assert {o['model.d_ff'] for o, _ in counts['dense']} == {f * w for f in s['dense'][task]}
    for o, c in counts['dense']:
      assert c['num_ffn_params'] == c['num_active_ffn_params'] == layers * _ffn(d, o['model.d_ff'], d_out)
    total = {}
    for arm, k, width in (('top1', 1, w), ('top2', 2, w // 2)):
      ((_, c),) = counts[arm]
      n = k * s['experts']
      assert c['num_ffn_params'] == layers * (n * _ffn(d, width, d_out) + d * n)  # experts + router
      assert c['num_active_ffn_params'] == layers * (k * _ffn(d, width, d_out) + d * n)  # k experts + whole router
      assert c['d_ff_active'] == k * width == w  # active width fixed
      total[arm] = c['num_ffn_params'] - layers * d * n  # expert weights
    assert total['top2'] - total['top1'] == layers * s['experts'] * d_out  # top-2's extra output biases only
    assert total['top1'] == layers * s['experts'] * _ffn(d, w, d_out)
    assert max(s['dense'][task]) == s['experts']  # dense-total = E w


@pytest.mark.parametrize('scale', ['quick', 'full'])
def test_facts_exceed_twice_the_dense_total_capacity(scale):
  s = mr.SETTINGS[scale]
  dense_total = max(c['num_params'] for _, c in _counts(scale, 'memorization_dense'))
  largest = max(c['num_params'] for a in ('dense', 'top1', 'top2') for _, c in _counts(scale, f'memorization_{a}'))
  entropy = s['mem_facts'] * math.log2(mr.MEM_VALUES)
  assert entropy == s['mem_facts'] * 6 and entropy >= 2 * mr.BITS_PER_PARAM * dense_total
  assert 2 * largest < mr.SATURATED * entropy  # even 2 bits/param cannot saturate


def test_arms_budgets_rates_and_programs():
  arms = {a.name: a for a in mr.arms('full')}
  assert all(a.tuned for a in arms.values()) and mr.REGIMES['full'].seeds >= 10
  assert {n: a.steps_factor for n, a in arms.items()} == {n: 4 if n.startswith('shortest_path') else 1 for n in arms}
  assert arms['memorization_dense'].rates == (0.03, 0.1, 0.3)
  assert arms['shortest_path_top2'].rates == mr.RATES['shortest_path'] == (3e-3, 1e-2, 3e-2)
  assert arms['memorization_top1'].rates is None and mr.REGIMES['full'].rates == (0.01, 0.03, 0.1)
  for a in arms.values():
    assert not any(k.startswith('train.') for o in a.points.values() for k in o)  # the runner adds them
    runs = sweep.expand(
      a.base,
      [
        {**o, **base.budget(100), 'train.learning_rate': r, 'train.seed': s}
        for o in a.points.values()
        for r in a.rates or mr.REGIMES['full'].rates
        for s in range(3)
      ],
    )
    if not a.name.endswith('dense'):
      assert len(sweep.group_runs(runs)) == 1  # rates and seeds of a budget share one compiled program
  assert mr.task_points('full', 'memorization', 'top2') == (
    'memorization_dense: d_ff=8',
    'memorization_dense: d_ff=32',
    'memorization_dense: d_ff=128',
    'memorization_top2: E=16',
  )
  assert mr.labels('full', 'shortest_path')['total'] == 'shortest_path_dense: d_ff=128'
  assert mr.collect('', {'arm': 'memorization_top1', 'eval_loss': 2.0, 'train_loss': 9.0}) == {'tuning_loss': 2.0}
  row = {'arm': 'shortest_path_dense', 'eval_accuracy': 0.9, 'train_loss': 0.5, 'val_loss': 1.5, 'val_accuracy': 0.75}
  assert mr.collect('', row) == {'tuning_loss': 0.25}  # validation error; never the test compositions


def test_bootstrap_verdict_p_agrees_with_the_ci():
  rng = np.random.default_rng(0)
  den, noise = rng.normal(10, 1, 10), rng.normal(0, 1, 10)
  for g, want in ((0.62, stats.REPRODUCED), (0.49, stats.NOT_REPRODUCED)):  # G ~ g - 0.05, CI half-width ~0.05
    num = g * den + noise
    v = mr.bootstrap_verdict(
      lambda c, num=num: rules_lib.ratio_of_means(num, den, confidence=c),
      lo=0.5,
      hi=math.inf,
      claim='c',
      test='t',
      rule='r',
      n=10,
    )
    assert v.outcome == want and 1e-3 < v.p_value < 0.05 and v.statistic == pytest.approx(num.mean() / den.mean())
    assert v.ci == rules_lib.ratio_of_means(num, den)[1:]
    # at the confidence 1 - p the CI touches the edge: just inside it does not decide, just outside it does
    assert stats.decide(rules_lib.ratio_of_means(num, den, confidence=1 - v.p_value * 0.9)[1:], 0.5, math.inf) != want
    assert stats.decide(rules_lib.ratio_of_means(num, den, confidence=1 - v.p_value * 1.1)[1:], 0.5, math.inf) == want
  num = 0.9 * den + rng.normal(0, 0.3, 10)  # far above: p at the bootstrap's resolution
  v = mr.bootstrap_verdict(
    lambda c: rules_lib.ratio_of_means(num, den, confidence=c), lo=0.5, hi=math.inf, claim='c', test='t', rule='r', n=10
  )
  assert v.outcome == stats.REPRODUCED and v.p_value == 1 / (mr.RESAMPLES + 1) and 'resolution' in v.detail
  num = 0.5 * den + rng.normal(0, 0.5, 10)
  v = mr.bootstrap_verdict(
    lambda c: rules_lib.ratio_of_means(num, den, confidence=c), lo=0.5, hi=math.inf, claim='c', test='t', rule='r', n=10
  )
  assert v.outcome == stats.INCONCLUSIVE and v.p_value > 0.05
  few = mr.bootstrap_verdict(
    lambda c: rules_lib.ratio_of_means([1, 2], [2, 3], confidence=c),
    lo=0.5,
    hi=math.inf,
    claim='c',
    test='t',
    rule='r',
    n=2,
  )
  assert few.outcome == stats.INCONCLUSIVE and 'underpowered' in few.detail


SCALE = 'quick'


def _sel(g_mem=0.9, g_hop=0.1, dense_slope=1.0, chance=0.34, seeds=10, steps=None):
  """A synthetic selection at the real points' counts with known gap shares G (ratio of means ~ g):
  memorization dense bits = 0.5 x^dense_slope, MoE = active + g (total - active) (1 + 2% noise per seed);
  shortest_path held-out 0.3 (active) and 0.8 (total), the test graphs' majority share `chance`; every seed scales
  a task's scores by its own factor."""
  rng = np.random.default_rng(1)
  rows = []
  for task, g in (('memorization', g_mem), ('shortest_path', g_hop)):
    lab = mr.labels(SCALE, task)
    dense = {o['model.d_ff']: c['num_params'] for o, c in _counts(SCALE, f'{task}_dense')}
    x_a, x_t = dense[mr.WIDTH[task]], max(dense.values())
    for arm in ('dense', *mr.ROUTERS):
      for o, c in _counts(SCALE, f'{task}_{arm}'):
        x = c['num_params']
        if task == 'memorization':
          y = lambda xx: 0.5 * xx**dense_slope
        else:
          y = lambda xx, x_a=x_a, x_t=x_t: 0.3 + 0.5 * math.log(xx / x_a) / math.log(x_t / x_a)
        point = lab[f'd_ff={o["model.d_ff"]}'] if arm == 'dense' else lab[arm]
        for s in range(seeds):
          f = 1 + 0.02 * s
          score = y(x) if arm == 'dense' else y(x_a) + g * (y(x_t) - y(x_a)) * (1 + 0.02 * rng.standard_normal())
          rows.append(
            {
              'point': point,
              'arm': f'{task}_{arm}',
              mr.SEED: s,
              mr.STEPS: (steps or {}).get(point, 100),
              'train.learning_rate': 0.01,
              'status': 'completed',
              **o,
              **c,
              mr.SCORE[task]: score * f,
              'chance_accuracy': chance,
              'val_accuracy': score * f,
              'eval_loss': 2.0,
            }
          )
  return pd.DataFrame(rows)


def test_rules_recover_known_gap_shares_and_name_their_points():
  v = mr.rules(_sel(), SCALE)
  assert len(v) == 6 and [x.outcome for x in v] == [stats.REPRODUCED] * 6, [x.detail for x in v]
  assert [x.claim.split(',')[0] for x in v] == [
    'overall',
    'overall',
    'memorization',
    'reasoning saturates',
    'memorization',
    'reasoning saturates',
  ]
  assert v[2].statistic == pytest.approx(0.9, abs=0.02) and v[3].statistic == pytest.approx(0.1, abs=0.02)
  assert v[0].statistic == pytest.approx(v[2].statistic - v[3].statistic)
  assert all(c.passed for x in v for c in x.checks) and all(x.p_value < 0.05 for x in v)
  mem, hop = mr.task_points(SCALE, 'memorization', 'top1'), mr.task_points(SCALE, 'shortest_path', 'top1')
  assert v[0].points == mem + hop and v[2].points == mem and v[3].points == hop
  assert v[4].points == mr.task_points(SCALE, 'memorization', 'top2')


def test_rules_not_reproduced_when_memorization_closes_little():
  v = mr.rules(_sel(g_mem=0.2, g_hop=0.1), SCALE)
  assert [x.outcome for x in v] == [
    stats.NOT_REPRODUCED,
    stats.NOT_REPRODUCED,
    stats.NOT_REPRODUCED,
    stats.REPRODUCED,
    stats.NOT_REPRODUCED,
    stats.REPRODUCED,
  ]


def test_every_verdict_declares_its_kind_and_computes_a_premise():
  claims = mr.ABLATION.claims
  assert [c.kind for c in claims] == [stats.MAGNITUDE] * 6 and all(c.scope and c.premise for c in claims)
  assert all('(not renormalised)' in c.scope for c in claims) and 'route alike' in claims[0].scope
  assert 'bare FFN' in claims[3].scope and 'no attention' in claims[3].scope and "not the paper's" in claims[3].scope
  assert any(bool(c.to_positive) for c in mr.ABLATION.changes) and all(
    c.date and c.outcome for c in mr.ABLATION.changes
  )
  for sel in (_sel(), _sel(dense_slope=0.3, chance=0.85), _sel().iloc[:0]):
    v = mr.rules(sel, SCALE)
    assert len(v) == len(claims) and all(x.premises for x in v)
  v = mr.rules(_sel(), SCALE)
  task = lambda x: {c.name.split(')')[0].removeprefix('premise (') for c in x.premises}
  assert [task(x) for x in v] == [{'memorization', 'reasoning'}] * 2 + [{'memorization'}, {'reasoning'}] * 2
  assert all(len(x.premises) >= 2 for x in v)  # each task: its learning control and its gap


def test_gap_premises_need_dense_total_above_dense_active():
  sel = _sel()
  lab = mr.labels(SCALE, 'shortest_path')
  at_total = sel['point'] == lab['total']
  sel.loc[at_total, 'eval_accuracy'] = sel.loc[sel['point'] == lab['active'], 'eval_accuracy'].to_numpy() + 0.02
  v = mr.rules(sel, SCALE)
  assert [x.outcome for x in v][3::2] == [stats.INVALID] * 2 and v[0].outcome == stats.INVALID
  assert 'premise (reasoning): dense-total beats dense-active' in v[3].detail


def test_failed_memorization_premise_invalidates_memorization_and_overall():
  v = mr.rules(_sel(dense_slope=0.3), SCALE)
  for x in v:
    if x.claim.startswith(('overall', 'memorization')):
      assert x.outcome == stats.INVALID and 'premise (memorization): dense bits grow' in x.detail
      assert math.isfinite(x.statistic) and x.raw_outcome == stats.REPRODUCED  # the statistic and rule are kept
    else:
      assert x.outcome == stats.REPRODUCED  # reasoning rests on its own checks


def test_reasoning_premise_doubles_every_reasoning_point():
  v = mr.rules(_sel(chance=0.85), SCALE)
  assert [x.outcome for x in v] == [
    stats.INVALID,
    stats.INVALID,
    stats.REPRODUCED,
    stats.INVALID,
    stats.REPRODUCED,
    stats.INVALID,
  ]
  (c,) = [c for c in v[3].failed_checks]
  every = tuple(p for k, p in mr.labels(SCALE, 'shortest_path').items() if k not in ('active', 'total'))
  assert c.name.startswith('premise (reasoning)') and c.remedy == stats.DOUBLE_STEPS and c.points == every
  assert c.role == stats.PREMISE
  assert len(every) == 4


def test_present_on_a_synthetic_result(tmp_path):
  sel = _sel()
  tuning = pd.DataFrame([{'point': p, 'level': lv, 'rate': 0.01} for p in sel['point'].unique() for lv in ('T', 'T/2')])
  result = base.Result(sel, tuning, sel, sel, mr.rules(sel, SCALE), SCALE)
  out = ablations.get('moe_memorization_vs_reasoning').present(result, base.Context(str(tmp_path), SCALE))
  assert out.headline.startswith('top1 memorization: G 0.9') and len(out.tables[0].frame) == 8
  assert len(out.tables[1].frame) == 5 and len(out.tables[2].frame) == 4
  assert (tmp_path / out.figures[0].file).stat().st_size > 1000


def test_the_reasoning_gap_premise_reads_the_ci_lower_end_not_the_mean():
  one_seed_lifts = pd.Series([0.06, 0.08, 0.1, 0.1, 0.11, 0.12, 0.08, 0.09, 0.06, 0.59])  # mean 0.139
  c = mr._reasoning_gap(one_seed_lifts)
  assert not c.passed and c.role == stats.PREMISE and 'width does not buy' in c.detail
  assert mr._reasoning_gap(pd.Series([0.2, 0.21, 0.19, 0.2, 0.22])).passed


def test_top1_and_top2_share_one_router_normalisation():
  """Issue 46: the same router for top-1 and top-2 in both tasks, softmax_topk with the top-k weights as they are."""
  for a in mr.arms('full'):
    if not a.name.endswith('dense'):
      e = a.base.model.moe
      assert (e.router, e.renormalize, e.capacity_factor) == ('softmax_topk', False, 0.0)
      assert e.top_k == (1 if a.name.endswith('top1') else 2)


def test_reasoning_arms_are_bare_ffns_with_the_stated_parameter_counts():
  """Full scale: input 8^2 + 2 x 8 = 80 features, 3 classes; dense 8 and 128; 16 x 8 top-1, 32 x 4 top-2."""
  got = {
    a: [
      (o.get('model.d_ff'), c['num_params'], c['num_active_params']) for o, c in _counts('full', f'shortest_path_{a}')
    ]
    for a in ('dense', 'top1', 'top2')
  }
  assert got['dense'] == [(8, 675, 675), (128, 10755, 10755)]  # 80*w + w + 3w + 3
  assert got['top1'] == [(None, 16 * 675 + 80 * 16, 675 + 80 * 16)]  # 12,080 total; the router 1,280
  assert got['top2'] == [(None, 32 * 339 + 80 * 32, 2 * 339 + 80 * 32)]  # 13,408 total; the router 2,560
  (arm,) = [a for a in mr.arms('full') if a.name == 'shortest_path_top1']
  m, t = arm.base.model, arm.base.task
  assert (m.arch, m.d_model, t.name, t.num_nodes, t.out_degree, t.max_distance) == ('ffn', 80, 'shortest_path', 8, 2, 2)


def test_the_reasoning_learning_premise_reads_accuracy_above_the_majority_share():
  total = pd.DataFrame({'eval_accuracy': [0.8, 0.82, 0.78], 'chance_accuracy': [0.34, 0.35, 0.33]})
  c = mr._reasoning_learned(total)
  assert c.passed and c.role == stats.PREMISE and c.name.startswith('premise (reasoning)')
  assert '0.34' in c.detail and '3 seeds' in c.detail
  near = total.assign(eval_accuracy=[0.45, 0.40, 0.50])  # margins 0.11, 0.05, 0.17: mean 0.11, CI below 0.1
  assert not mr._reasoning_learned(near).passed
  assert not mr._reasoning_learned(total.iloc[:0]).passed
