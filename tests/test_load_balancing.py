"""load_balancing ablation: the max/mean load of known assignments, the frozen-router knob, the arms, the
verdict rules on synthetic selections (known outcomes and points; `invalid` when a premise or a measurement
check fails), the task's skewed-input option and the CLI's one-line error for bad skew keys; a smoke run
through the real entry point (slow)."""

import json
import math
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest
from scipy.cluster.vq import kmeans2

from ffn_research import ablations
from ffn_research import config as config_lib
from ffn_research import rules as rules_lib
from ffn_research import stats
from ffn_research import train as train_lib
from ffn_research import validation
from ffn_research.ablations import base
from ffn_research.ablations import load_balancing as lb
from ffn_research.ablations import regime
from ffn_research.ablations.present import load_balancing as lb_shown
from ffn_research.tasks import regression
from tests.conftest import REPO_ROOT


def test_cluster_probs_are_zipf():
  p = np.asarray(regression.cluster_probs(16, 1.0))
  ref = 1.0 / np.arange(1, 17)
  np.testing.assert_allclose(p, ref / ref.sum(), rtol=1e-6)
  assert abs(p[0] - 1 / sum(1 / c for c in range(1, 17))) < 1e-6  # 0.2958: the top cluster's share
  np.testing.assert_allclose(np.asarray(regression.cluster_probs(5, 0.0)), np.full(5, 0.2), rtol=1e-6)


def test_clustered_inputs_frequencies_and_spread():
  centers = jax.random.normal(jax.random.PRNGKey(0), (4, 3)) * 10.0
  probs = regression.cluster_probs(4, 1.0)
  n = 40000
  x, c = regression.clustered_inputs(jax.random.PRNGKey(1), centers, probs, n, 0.7)
  x, c = np.asarray(x), np.asarray(c)
  freq = np.bincount(c, minlength=4) / n
  # binomial sd is at most 0.0025 at n = 40000: 4 sd
  np.testing.assert_allclose(freq, np.asarray(probs), atol=0.01)
  resid = x - np.asarray(centers)[c]
  assert abs(resid.std() - 0.7) < 0.01
  assert abs(resid.mean()) < 0.01


def _ts_config(num_clusters):
  config = config_lib.default_config()
  config.task.name = 'teacher_student'
  config.model.d_model = 4
  config.task.num_train, config.task.num_eval = 2000, 100
  config.task.num_clusters = num_clusters
  validation.validate(config)
  return config


def test_teacher_student_inputs_cluster_only_when_asked():
  plain = regression.TeacherStudentTask(_ts_config(0)).init_data(jax.random.PRNGKey(0))
  x = np.asarray(plain['x_train'])
  assert abs(x.std() - 1.0) < 0.05  # N(0, I)
  skew = regression.TeacherStudentTask(_ts_config(3)).init_data(jax.random.PRNGKey(0))
  x = np.asarray(skew['x_train'])
  # every point lies near one of at most 3 centres: 3 distinct rounded cluster means
  centres, labels = kmeans2(x, 3, seed=0, minit='++')
  spread = np.linalg.norm(x - centres[labels], axis=1)
  assert np.median(spread) < 4 * config_lib.default_config().task.cluster_std
  np.testing.assert_array_equal(np.asarray(plain['x_eval']).shape, np.asarray(skew['x_eval']).shape)


@pytest.mark.parametrize('key,value', [('num_clusters', -1), ('cluster_zipf', -0.5)])
def test_bad_skew_keys_raise_one_line(key, value):
  config = _ts_config(0)
  config.task[key] = value
  with pytest.raises(config_lib.ConfigError) as e:
    validation.validate(config)
  assert f'task.{key}' in str(e.value) and '\n' not in str(e.value)


def test_cli_bad_skew_key_exits_with_one_line(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=configs/regression.py:teacher_student',
      f'--workdir={tmp_path}/run',
      '--config.task.num_clusters=-3',
    ],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode != 0 and 'Traceback' not in proc.stderr
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and 'task.num_clusters' in lines[0], proc.stderr


def test_max_mean_load_of_known_assignments():
  load = lb.assignment_load(np.array([0, 0, 0, 1]), 4)
  np.testing.assert_array_equal(load, [0.75, 0.25, 0, 0])
  assert lb.max_mean_load(load) == 3.0
  assert lb.max_mean_load(lb.assignment_load(np.arange(8), 8)) == 1.0  # uniform
  assert lb.max_mean_load(lb.assignment_load(np.full(10, 5), 8)) == 8.0  # every token on one expert


def _moe_config(freeze):
  config = lb._base(freeze=freeze)
  config.train.steps, config.train.log_every = 5, 5
  config.task.num_train, config.task.num_eval, config.train.batch_size = 64, 64, 32
  validation.validate(config)
  return config


def test_router_load_matches_numpy_argmax():
  exp = train_lib.Experiment(_moe_config(False))
  state = exp.init(0)
  model, x = exp.merge(state['params']), np.asarray(state['data']['x_eval'])
  expert_T = np.argmax(x @ np.asarray(model.router_w[...]), axis=1)  # top-1 of softmax = top-1 of logits
  np.testing.assert_allclose(lb.router_load(model, x), lb.assignment_load(expert_T, lb.NUM_EXPERTS), atol=1e-7)


@pytest.mark.parametrize('freeze', [True, False])
def test_frozen_router_weights_do_not_move(freeze):
  exp = train_lib.Experiment(_moe_config(freeze))
  state = exp.init(0)
  after, _ = jax.jit(exp.train_chunk, static_argnums=1)(state, 5)
  before_m, after_m = exp.merge(state['params']), exp.merge(after['params'])
  router_same = np.array_equal(np.asarray(before_m.router_w[...]), np.asarray(after_m.router_w[...]))
  assert router_same == freeze
  assert not np.array_equal(np.asarray(before_m.w1[...]), np.asarray(after_m.w1[...]))  # experts train either way


def test_unstable_rule():
  assert not lb.unstable(False, [4.0, 100.0])  # RMS logsumexp 10 < 16
  assert lb.unstable(False, [4.0, 16.5**2])
  assert lb.unstable(True, [])  # diverged
  assert not lb.unstable(False, [])


COLLAPSE = {'none': 1.5, 'switch': -0.1, 'bias': -0.2, 'frozen': 0.0}
POINTS = {'none': lb.NONE, 'switch': lb.SWITCH, 'bias': lb.BIAS, 'frozen': lb.FROZEN}
LRS = lb.UNSTABLE_LRS['smoke']  # (0.1, 0.3)


def _sel(change=None, seeds=8, unstable_none=(0.75, 1.0), unstable_z=(0.0, 0.5), steps=None, diverged=0):
  """A synthetic selection (one budget, each point at its chosen rate): the collapse points' load change per
  seed (frozen exactly 0), the z-loss arms' unstable flags per rate of LRS (the first seeds unstable); the
  first `diverged` seeds of the no-z-loss arm at the largest rate diverged (no collected values)."""
  change = COLLAPSE if change is None else change
  rng = np.random.default_rng(0)
  rows = []
  for s in range(seeds):
    for arm, c in change.items():
      final = 1.4 + c + (0.01 * rng.standard_normal() if arm != 'frozen' else 0.0)
      rows.append(
        {
          'point': POINTS[arm],
          'arm': 'frozen' if arm == 'frozen' else 'trained',
          lb.SEED: s,
          lb.STEPS: (steps or {}).get(arm, 100),
          lb.LR: 3e-3,
          'status': 'completed',
          'eval_loss': 0.1,
          'load_start': 1.4,
          'load_final': final,
          'load_change': final - 1.4,
        }
      )
    for lr, f_none, f_z in zip(LRS, unstable_none, unstable_z, strict=True):
      for p, f in (('none', f_none), ('z_loss', f_z)):
        dead = p == 'none' and lr == LRS[-1] and s < diverged
        rows.append(
          {
            'point': f'{lb.UNSTABLE}{lr:g}: {p}',
            'arm': f'{lb.UNSTABLE}{lr:g}',
            lb.SEED: s,
            lb.STEPS: 100,
            lb.LR: lr,
            'status': 'diverged' if dead else 'completed',
            'unstable': math.nan if dead else float(s < round(f * seeds)),
            'max_lse': 3.0,
          }
        )
  return pd.DataFrame(rows)


def test_verdicts_known_answers_and_points():
  v = lb.rules(_sel(), 'smoke')
  assert [x.outcome for x in v] == [stats.REPRODUCED] * 4, [x.detail for x in v]
  assert v[0].statistic == pytest.approx(1.5, abs=0.02) and v[0].boundaries == (lb.COLLAPSE_RISE,)
  assert v[0].points == (lb.NONE, lb.FROZEN) and v[1].points == (lb.SWITCH, lb.NONE, lb.FROZEN)
  assert v[3].points == (lb.BIAS, lb.NONE, lb.FROZEN) and v[2].points == lb.unstable_points('smoke')
  assert v[2].statistic == pytest.approx(-0.75)  # at the test rate 0.1: 6/8 unstable without, 0/8 with
  assert lb.test_rate(_sel()) == 0.1 and lb.test_rate(_sel(unstable_none=(0.1, 0.5))) == 0.3
  # a rise below the collapse level is not a collapse; the fixes still have a rise to reduce
  v = lb.rules(_sel({**COLLAPSE, 'none': 0.3}), 'smoke')
  assert [x.outcome for x in v] == [stats.NOT_REPRODUCED, stats.REPRODUCED, stats.REPRODUCED, stats.REPRODUCED]
  # the fixes make it worse; the z-loss run is as unstable as without it
  v = lb.rules(_sel({'none': 1.5, 'switch': 1.9, 'bias': 2.0, 'frozen': 0.0}, unstable_z=(0.75, 1.0)), 'smoke')
  assert [x.outcome for x in v] == [stats.REPRODUCED] + [stats.NOT_REPRODUCED] * 3


def test_every_verdict_declares_its_kind_and_computes_a_premise():
  claims = lb.ABLATION.claims
  assert [c.kind for c in claims] == [stats.SIGN] * 4 and all(c.scope and c.premise for c in claims)
  assert len(lb.ABLATION.changes) >= 4 and any(bool(c.to_positive) for c in lb.ABLATION.changes)
  for sel in (_sel(), _sel({'none': -0.2, 'switch': -0.3, 'bias': -0.3, 'frozen': 0.0}), _sel().iloc[:0]):
    v = lb.rules(sel, 'smoke')
    assert len(v) == len(claims) and all(x.premises for x in v)
  v = lb.rules(_sel(), 'smoke')
  assert [c.name for c in v[0].premises] == ['premise: room for a collapse above the step-0 load']
  assert [len(x.premises) for x in v] == [1, 1, 2, 1] and all(c.passed for x in v for c in x.premises)


def test_collapse_needs_room_above_the_step0_load():
  sel = _sel()
  none = sel['point'] == lb.NONE
  sel.loc[none, 'load_start'] = 7.5 + 0.01 * np.arange(none.sum()) / none.sum()  # starts within 1 of E = 8
  v = lb.rules(sel, 'smoke')[0]
  assert v.outcome == stats.INVALID and v.raw_outcome == stats.REPRODUCED
  (c,) = v.premises
  assert not c.passed and 'premise: room for a collapse' in v.detail and 'must lie >= 1' in c.detail


def test_tables_keep_each_ci_inside_its_range():
  sel = _sel(unstable_none=(0.125, 1.0))
  sel.loc[sel['point'] == lb.SWITCH, 'load_final'] = np.resize([1.0, 1.0, 1.0, 3.0], (sel['point'] == lb.SWITCH).sum())
  t = lb_shown.load_table(sel).set_index('point')
  assert t.loc[lb.SWITCH, 'load_final_ci_lo'] >= 1.0  # a t interval would reach below 1 (mean 1.5, 8 seeds)
  plain = stats.mean_ci(sel.loc[sel['point'] == lb.SWITCH, 'load_final'])
  assert plain[1] < 1.0
  u = lb_shown.unstable_table(sel)
  assert (u['unstable_ci_lo'] >= 0).all() and (u['unstable_ci_hi'] <= 1).all()


def test_no_rise_leaves_the_fixes_nothing_to_reduce():
  v = lb.rules(_sel({'none': -0.2, 'switch': -0.3, 'bias': -0.3, 'frozen': 0.0}), 'smoke')
  assert [x.outcome for x in v] == [stats.NOT_REPRODUCED, stats.INVALID, stats.REPRODUCED, stats.INVALID]
  assert 'premise: training without balancing raises the load' in v[1].detail
  assert v[1].raw_outcome == stats.REPRODUCED  # the rule alone would say it reduces it: kept, gated


def test_measurement_checks_gate_the_load_verdicts():
  sel = _sel()
  sel.loc[(sel['point'] == lb.FROZEN) & (sel[lb.SEED] == 2), 'load_change'] = 0.01  # the frozen router moved
  v = lb.rules(sel, 'smoke')
  assert [x.outcome for x in v] == [stats.INVALID, stats.INVALID, stats.REPRODUCED, stats.INVALID]
  assert 'frozen router: final load = rebuilt step-0 load' in v[0].detail
  assert [c.passed for c in lb.measurement(_sel())] == [True, True]


def test_zloss_premise_needs_a_marginal_instability():
  v = lb.rules(_sel(unstable_none=(0.0, 0.1)), 'smoke')[2]  # never >= 25% unstable without the z-loss
  assert v.outcome == stats.INVALID and 'premise: a rate where the no-z-loss arm is unstable' in v.detail
  v = lb.rules(_sel(unstable_none=(0.0, 1.0)), 'smoke')[2]  # 0 -> 1 between two rates: the band is not resolved
  assert v.outcome == stats.INVALID and 'premise: marginal instability at the test rate 0.3' in v.detail
  # a diverged run counts as unstable (it has no collected values)
  sel = _sel(unstable_none=(0.0, 0.0), unstable_z=(0.0, 0.0), diverged=3)
  assert lb.test_rate(sel) == 0.3 and lb.rules(sel, 'smoke')[2].statistic == pytest.approx(-3 / 8)


def test_a_point_that_is_not_tuned_keeps_its_rate_when_seeds_diverge():
  """regime.tune (core): the z-loss arms are read at their one rate even where seeds diverged."""
  sel = _sel(diverged=3)
  frame = sel.assign(eval_loss=np.where(sel['status'] == 'completed', 0.1, math.nan))
  state = {p: regime.PointState([float(lr)], 100) for p, lr in frame.groupby('point')[lb.LR].first().items()}
  t = regime.tune(frame, state, lb.REGIMES['smoke']).set_index(['point', 'level'])
  assert t.loc[(f'{lb.UNSTABLE}0.3: none', 'T'), 'rate'] == 0.3
  picked = regime.select(frame, t.reset_index(), 'T')
  assert (picked['status'] == 'diverged').sum() == 3 and len(picked) == len(frame)


def test_paired_all_pairs_on_the_edge_is_not_reproduced():
  """0/1 outcomes often tie: equal arms must not count as 'less' (rules_lib.paired's zero-spread case)."""
  assert rules_lib.paired([1, 1, 1], [1, 1, 1], expect='less', claim='').outcome == stats.NOT_REPRODUCED
  assert rules_lib.paired([0, 0, 0], [1, 1, 1], expect='less', claim='').outcome == stats.REPRODUCED


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_arms(scale):
  arms = lb.arms(scale)
  assert [a.name for a in arms] == ['trained', 'frozen'] + [f'{lb.UNSTABLE}{r:g}' for r in lb.UNSTABLE_LRS[scale]]
  assert [a.tuned for a in arms] == [True] + [False] * (len(arms) - 1)
  for a in arms:
    validation.validate(a.base)
    m = a.base.model.moe
    assert (m.num_experts, m.top_k, m.router, m.renormalize, m.capacity_factor) == (8, 1, 'softmax_topk', False, 1.0)
    offset = not a.name.startswith(lb.UNSTABLE)  # the load arms read x = c + N(0, I); the z-loss arms N(0, I)
    assert a.base.task.num_clusters == int(offset) and (not offset or a.base.task.cluster_std == 1.0)
    assert m.freeze_router == (a.name == 'frozen')
    assert not any(k.startswith('train.') for o in a.points.values() for k in o)  # the runner adds rate, steps, seed
    if a.name.startswith(lb.UNSTABLE):
      assert a.base.train.grad_clip == 0 and m.load_balance_coef == lb.SWITCH_ALPHA
      assert a.base.train.learning_rate == float(a.name.removeprefix(lb.UNSTABLE))
  assert arms[2].budget(4000) == {'train.steps': 4000, 'train.log_every': 200, 'train.checkpoint_every': 0}
  assert 3e-2 in lb.REGIMES['full'].rates and lb.REGIMES['full'].seeds >= 10


def test_present_on_a_synthetic_result(tmp_path):
  sel = _sel()
  tuning = pd.DataFrame(
    [{'point': p, 'level': lv, 'rate': g[lb.LR].iloc[0]} for p, g in sel.groupby('point') for lv in ('T', 'T/2')]
  )
  verdicts = lb.rules(sel, 'smoke')
  result = base.Result(sel, tuning, sel, sel, verdicts, 'smoke')
  out = ablations.get('load_balancing').present(result, base.Context(str(tmp_path), 'smoke'))
  assert [c.passed for c in out.checks] == [True, True] and '+1.5' in out.headline
  assert len(out.tables[0].frame) == 4 and len(out.tables[1].frame) == 2 * len(LRS)
  assert (tmp_path / out.figures[0].file).stat().st_size > 1000


@pytest.mark.slow  # the real entry point at smoke scale (~1 minute)
def test_smoke_through_entry_point(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.reproduce',
      '--ablation=load_balancing',
      f'--workdir={tmp_path}',
      '--scale=smoke',
      '--noprogress',
    ],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads((tmp_path / 'load_balancing' / 'report.json').read_text())
  assert len(report['verdicts']) == 4 and all(v['outcome'] in stats.OUTCOMES for v in report['verdicts'])
  assert all(v['p_holm'] is not None for v in report['verdicts']) and report['regime']['iterations']
  assert [c['passed'] for c in report['checks']] == [True, True]  # the frozen router's load does not move


def test_centred_and_offset_teacher_student_inputs():
  """task.center_inputs moves the cluster centres so the inputs' mean is 0 under the Zipf probabilities;
  task.input_offset adds one per-seed offset to every input, before the teacher; both off change nothing."""

  def data(**task):
    c = config_lib.default_config()
    c.task.name, c.model.d_model, c.task.num_train, c.task.num_eval = 'teacher_student', 4, 512, 512
    c.task.num_clusters, c.task.cluster_std, c.task.cluster_teachers = 3, 0.5, True
    for k, v in task.items():
      c.task[k] = v
    validation.validate(c)
    exp = train_lib.Experiment(c)
    return exp, exp.task_data(5)

  _, plain = data()
  exp, centred = data(center_inputs=True)
  # the same draws, every point moved by the centres' mean under P(c): centred's population mean is 0
  shift = np.asarray(plain['x_train'] - centred['x_train'])
  np.testing.assert_allclose(shift, np.broadcast_to(shift[0], shift.shape), atol=1e-5)
  probs = np.asarray(regression.cluster_probs(3, 1.0))
  centres = np.stack([np.asarray(plain['x_train'])[np.asarray(plain['cluster_train']) == k].mean(0) for k in range(3)])
  np.testing.assert_allclose(probs @ (centres - shift[0]), 0.0, atol=0.1)  # sample means of clusters, spread 0.5
  _, offset = data(input_offset=2.0)
  off = np.asarray(offset['x_eval'] - plain['x_eval'])
  np.testing.assert_allclose(off, np.broadcast_to(off[0], off.shape), atol=1e-5)
  np.testing.assert_allclose(np.asarray(offset['x_train'] - plain['x_train'])[0], off[0], atol=1e-5)
  assert 1.0 < np.linalg.norm(off[0]) < 10.0  # about 2 sqrt(4)
  assert not np.allclose(offset['y_eval'], plain['y_eval'])  # the teacher reads the shifted inputs
  with pytest.raises(config_lib.ConfigError, match='task.input_offset'):
    data(input_offset=-1.0)
