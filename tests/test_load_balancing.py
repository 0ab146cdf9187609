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
from ffn_research.ablations import zloss as zl
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
  config = lb._base(lb.OFFSET, freeze=freeze)
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


COLLAPSE = {'none': 1.5, 'switch': -0.1, 'bias': -0.2, 'frozen': 0.0}
LRS = zl.PILOT_LRS['smoke']  # (0.1, 0.3)


def _label(condition, balancing):
  return lb.frozen(condition) if balancing == 'frozen' else lb.point(condition, balancing)


def _sel(
  change=None,
  seeds=8,
  pilot=(0.0, 0.5),
  unstable=(0.75, 0.0, 0.0),
  steps=None,
  conditions=None,
  dense_mse=0.3,
  frozen_first=False,
  test_lr=0.3,
  relative_mse=0.1,
  lever=0.5,
  fail_by='diverged',
):
  """A synthetic selection (one budget, each point at its chosen rate): per input condition the load points' load
  change per seed (frozen exactly 0; `conditions`: {condition: change} overriding `change`; held-out MSE 0.1), the
  routing task's dense references (held-out MSE `dense_mse`), the z-loss pilot's diverged flags per rate of LRS (its
  own seeds, 100 ...; the first seeds diverged) and the test arm's at `test_lr` (None: not run), `unstable` = the
  failed fractions of none, z_loss, frozen and float32 (float32 as none where three are given; the first seeds
  failed, `frozen_first`: the frozen router's the last) by divergence or, `fail_by` 'mse', by held-out relative MSE
  5 (the others `relative_mse`), and the test arm's router z: none's about 2, z_loss's `lever` times it."""
  change = COLLAPSE if change is None else change
  rng = np.random.default_rng(0)
  rows = []
  status = lambda bad: 'diverged' if bad else 'completed'
  for s in range(seeds):
    for c in lb.CONDITIONS:
      start = 1.4 if c == lb.CONTROL else 2.5  # the routing task's collapse level 3.5 lies above 8 / H_8 = 2.94
      for arm, ch in (conditions or {}).get(c, change).items():
        final = start + ch + (0.01 * rng.standard_normal() if arm != 'frozen' else 0.0)
        rows.append(
          {
            'point': _label(c, arm),
            'arm': lb.frozen(c) if arm == 'frozen' else c,
            lb.SEED: s,
            lb.STEPS: (steps or {}).get(arm, 100),
            lb.LR: 3e-3,
            'status': 'completed',
            'eval_loss': 0.1,
            'load_start': start,
            'load_final': final,
            'load_change': final - start,
          }
        )
    for c in lb.ROUTED:
      mse = dense_mse * (1 + 0.01 * rng.standard_normal())
      rows.append(
        {
          'point': lb.dense(c),
          'arm': lb.dense(c),
          lb.SEED: s,
          lb.STEPS: 100,
          lb.LR: 1e-2,
          'status': 'completed',
          'eval_loss': mse,
        }
      )
    for lr, f_pilot in zip(LRS, pilot, strict=True):
      rows.append(
        {
          'point': f'{zl.PILOT}{lr:g}: none',
          'arm': f'{zl.PILOT}{lr:g}',
          lb.SEED: 100 + s,
          lb.STEPS: 100,
          lb.LR: lr,
          'status': status(s < round(f_pilot * seeds)),
          'eval_relative_mse': 0.1,
        }
      )
    for lr in [] if test_lr is None else [test_lr]:
      fractions = (*unstable, unstable[0]) if len(unstable) == 3 else unstable
      for p, f in zip(zl.POINTS, fractions, strict=True):
        bad = (seeds - 1 - s if frozen_first and p == 'frozen' else s) < round(f * seeds)
        z = 2.0 * (1 + 0.05 * rng.standard_normal()) * (lever if p == 'z_loss' else 1.0)
        rows.append(
          {
            'point': f'{zl.UNSTABLE}: {p}',
            'arm': zl.UNSTABLE,
            lb.SEED: s,
            lb.STEPS: 100,
            lb.LR: lr,
            'status': status(bad and fail_by == 'diverged'),
            'eval_relative_mse': 5.0 if bad and fail_by == 'mse' else relative_mse,
            'router_z': z,
          }
        )
  return pd.DataFrame(rows)


def test_a_zloss_run_fails_by_diverging_or_by_not_training():
  """A run fails when it diverges or completes no better than the mean predictor (held-out relative MSE >= 1), in
  the pilot and the test arm alike; where nothing trains, the marginal premise fails at its ceiling."""
  by_mse = lb.rules(_sel(seeds=16, fail_by='mse'), 'smoke')[2]
  by_divergence = lb.rules(_sel(seeds=16), 'smoke')[2]
  assert by_mse.outcome == by_divergence.outcome == stats.REPRODUCED
  assert by_mse.statistic == by_divergence.statistic == pytest.approx(-0.75)
  z = zl.with_unstable(_sel(seeds=16, fail_by='mse', relative_mse=0.29)).groupby('point').mean(numeric_only=True)
  assert z.loc[f'{zl.UNSTABLE}: none', 'unstable'] == 0.75  # 12 of 16 at relative MSE 5, the rest at 0.29
  assert z.loc[f'{zl.UNSTABLE}: none', 'failed_at_1'] == 0.75 and z.loc[f'{zl.UNSTABLE}: none', 'diverged'] == 0
  z = zl.with_unstable(_sel(seeds=16, relative_mse=0.5)).groupby('point').mean(numeric_only=True)
  assert z.loc[f'{zl.UNSTABLE}: z_loss', 'unstable'] == 1 and z.loc[f'{zl.UNSTABLE}: z_loss', 'failed_at_1'] == 0
  missing = _sel(seeds=16)
  missing.loc[missing['point'] == f'{zl.UNSTABLE}: z_loss', 'eval_relative_mse'] = math.nan
  assert (zl.with_unstable(missing)['point'] == f'{zl.UNSTABLE}: z_loss').sum() == 0  # missing, not failed
  nothing_trains = lb.rules(_sel(seeds=16, relative_mse=5e4), 'smoke')[2]
  assert nothing_trains.outcome == stats.INVALID  # every run fails, frozen router too: no control either
  assert [c.name for c in nothing_trains.failed_checks][0] == (
    "premise: marginal instability at the test rate 0.3 (the no-z-loss failed fraction of the verdict's seeds off "
    'its floor 0 and its ceiling 1: some runs fail, some train)'
  )
  pilot = _sel(seeds=16).assign(eval_relative_mse=zl.FAILED_MSE)  # every completed pilot run failed: not marginal
  assert zl.pilot_fractions(pilot).tolist() == [1.0, 1.0] and math.isnan(zl.test_rate(pilot))


def test_a_zloss_refutation_needs_its_lever_to_move():
  """Not reproduced stands only where the z-loss lowered the router z (ln, paired CI below 0)."""
  name = 'premise: the z-loss lowers the router logits (the lever it pulls moves)'
  v = lb.rules(_sel(unstable=(0.75, 0.75, 0.0), seeds=16), 'smoke')[2]
  (c,) = [c for c in v.premises if c.name == name]
  assert v.outcome == stats.NOT_REPRODUCED and c.passed and 'z-loss minus none' in c.detail
  v = lb.rules(_sel(unstable=(0.75, 0.75, 0.0), seeds=16, lever=1.0), 'smoke')[2]
  assert v.outcome == stats.INVALID and v.raw_outcome == stats.NOT_REPRODUCED
  assert [c.name for c in v.failed_checks] == [name] and 'needed for a not reproduced' in v.detail
  assert lb.rules(_sel(seeds=16, lever=1.0), 'smoke')[2].outcome == stats.REPRODUCED  # a reproduction needs none


def test_router_z_is_the_mean_of_the_second_half_of_the_logs(tmp_path):
  logs = [{'step': t, zl.ROUTER_Z: float(t)} for t in (50, 100, 150, 200)] + [{'step': 200, 'loss': 1.0}]
  (tmp_path / 'metrics.jsonl').write_text('\n'.join(json.dumps(r) for r in logs) + '\n')
  assert zl.router_z(str(tmp_path)) == {'router_z': 175.0}  # steps 150 and 200: above half of 200
  assert lb.collect(str(tmp_path), {'arm': zl.UNSTABLE}) == {'router_z': 175.0}
  assert lb.collect(str(tmp_path), {'arm': f'{zl.PILOT}0.1'}) == {}


def test_verdicts_known_answers_and_points():
  v = lb.rules(_sel(), 'smoke')
  assert [x.outcome for x in v] == [stats.REPRODUCED] * 5, [x.detail for x in v]
  assert v[0].statistic == pytest.approx(1.5, abs=0.02) and v[0].boundaries == (lb.COLLAPSE_RISE,)
  control = (lb.point(lb.CONTROL, 'none'), lb.frozen(lb.CONTROL))
  assert control == (lb.NONE, lb.FROZEN)  # the fixes read the control condition
  offset = (lb.point(lb.OFFSET, 'none'), lb.frozen(lb.OFFSET))
  assert v[0].points == (*offset, *control) and v[1].points == (lb.SWITCH, lb.NONE, lb.FROZEN)
  assert v[4].points == (lb.point(lb.CENTRED, 'none'), lb.frozen(lb.CENTRED), *control)
  assert v[3].points == (lb.BIAS, lb.NONE, lb.FROZEN) and v[2].points == zl.points('smoke')
  assert v[2].statistic == pytest.approx(-0.75)  # at the test rate 0.3: 6/8 diverged without, 0/8 with
  assert zl.test_rate(_sel()) == 0.3 and zl.test_rate(_sel(pilot=(0.25, 0.5))) == 0.1
  # a rise below the collapse level is not a collapse; the fixes still have a rise to reduce
  v = lb.rules(_sel({**COLLAPSE, 'none': 0.3}, conditions={lb.CONTROL: COLLAPSE}), 'smoke')
  assert [x.outcome for x in v] == [stats.NOT_REPRODUCED] + [stats.REPRODUCED] * 3 + [stats.NOT_REPRODUCED]
  # no rise on the routing task but one on control: the fixes are judged on control, and need its rise
  flat = {**COLLAPSE, 'none': 0.0}
  v = lb.rules(_sel(flat, conditions={lb.CONTROL: COLLAPSE}), 'smoke')
  assert [v[i].outcome for i in (1, 3)] == [stats.REPRODUCED] * 2
  # the fixes make it worse; the z-loss run diverges as often as without it, the frozen router never
  worse = {'none': 1.5, 'switch': 1.9, 'bias': 2.0, 'frozen': 0.0}
  v = lb.rules(_sel(worse, unstable=(0.75, 0.75, 0.0), seeds=16), 'smoke')
  assert [x.outcome for x in v] == [stats.REPRODUCED] + [stats.NOT_REPRODUCED] * 3 + [stats.REPRODUCED]


def test_the_test_rate_is_the_smallest_pilot_rate_marginal_at_every_budget():
  """From the pilot's own seeds: a rate whose failed fraction leaves [0.1, 0.9] at any budget is not chosen, so no
  rung of the test arm's ladder sits where nothing fails (the design review of 2026-11-30)."""
  sel = _sel(pilot=(0.0, 0.25))  # 2 of 8 pilot seeds diverge at 0.3: the test rate
  assert zl.test_rate(sel) == 0.3 and zl.pilot_rate(sel) == 0.3 and lb.rules(sel, 'smoke')[2].outcome == 'reproduced'
  assert 'test rate 0.3' in lb.rules(sel, 'smoke')[2].premises[0].detail
  assert '0.1: 0.00, 0.3: 0.25' in lb.rules(sel, 'smoke')[2].premises[0].detail
  assert set(sel.loc[sel['arm'].str.startswith(zl.PILOT), lb.SEED]).isdisjoint(set(sel[lb.SEED][:8]))
  shorter = _sel(pilot=(0.5, 0.5)).assign(**{lb.STEPS: 50})  # at a shorter budget alone the pilot would fix 0.1
  both = pd.concat([shorter, sel], ignore_index=True)
  assert zl.test_rate(both[both[lb.STEPS] == 50]) == 0.1 and zl.pilot_rate(both) == 0.3  # 0.1: none fail at 100
  assert math.isnan(zl.pilot_rate(_sel(pilot=(0.0, 0.0)))) and math.isnan(zl.pilot_rate(pd.DataFrame()))


def test_a_zloss_refutation_needs_the_router_to_be_the_cause():
  """Not reproduced (the z-loss diverges as often) stands only where the learned router diverges more than the
  frozen one; where the frozen router diverges as often, the instability is not the router's: invalid."""
  v = lb.rules(_sel(unstable=(0.75, 0.75, 0.0), seeds=16), 'smoke')[2]
  assert v.outcome == stats.NOT_REPRODUCED
  (c,) = [c for c in v.premises if "router's" in c.name]
  assert c.passed and 'learned minus frozen router, no z-loss, at 0.3: +0.75' in c.detail
  v = lb.rules(_sel(unstable=(0.75, 0.75, 0.75), frozen_first=True, seeds=16), 'smoke')[2]  # as often, other seeds
  assert v.outcome == stats.INVALID and v.raw_outcome == stats.NOT_REPRODUCED
  assert "the instability is the router's" in v.detail and 'needed for a not reproduced' in v.detail
  v = lb.rules(_sel(unstable=(0.75, 0.0, 0.75)), 'smoke')[2]  # a reproduction needs no control
  assert v.outcome == stats.REPRODUCED


def test_zloss_premises_need_a_marginal_instability():
  v = lb.rules(_sel(pilot=(0.0, 0.0), test_lr=None), 'smoke')[2]  # the pilot never fails: no test arm
  assert v.outcome == stats.INVALID and [c.name for c in v.premises] == [
    'premise: a rate where the no-z-loss pilot is unstable'
  ]
  v = lb.rules(_sel(unstable=(1.0, 0.0, 0.0)), 'smoke')[2]  # every no-z-loss seed diverges: not marginal
  assert v.outcome == stats.INVALID and 'premise: marginal instability at the test rate 0.3' in v.detail
  v = lb.rules(_sel(unstable=(0.0, 0.0, 0.0)), 'smoke')[2]  # none fails: nothing for the z-loss to prevent
  assert v.outcome == stats.INVALID and '+0 from the floor 0 (pinned)' in v.detail


def test_a_refutation_of_collapse_needs_the_control_to_collapse():
  flat = {'none': 0.1, 'switch': 0.0, 'bias': 0.0, 'frozen': 0.0}
  v = lb.rules(_sel(flat, conditions={lb.CONTROL: COLLAPSE}), 'smoke')  # the control collapses: a refutation
  assert v[0].outcome == v[4].outcome == stats.NOT_REPRODUCED
  v = lb.rules(_sel(flat), 'smoke')  # nothing collapses anywhere: no positive control, invalid
  assert v[0].outcome == v[4].outcome == stats.INVALID and v[0].raw_outcome == stats.NOT_REPRODUCED
  (c,) = [c for c in v[0].failed_checks if c.role == stats.PREMISE]
  assert 'the one-teacher control collapses' in c.name and 'needed for a not reproduced' in c.detail
  v = lb.rules(_sel(conditions={lb.CONTROL: flat}), 'smoke')  # a reproduction needs no control
  assert v[0].outcome == stats.REPRODUCED and 'needed only for a refutation' in v[0].premises[1].detail


def test_every_verdict_declares_its_kind_and_computes_a_premise():
  claims = lb.ABLATION.claims
  assert [c.kind for c in claims] == [stats.SIGN] * 5 and all(c.scope and c.premise for c in claims)
  assert len(lb.ABLATION.changes) >= 5 and any(bool(c.to_positive) for c in lb.ABLATION.changes)
  for sel in (_sel(), _sel({'none': -0.2, 'switch': -0.3, 'bias': -0.3, 'frozen': 0.0}), _sel().iloc[:0]):
    v = lb.rules(sel, 'smoke')
    assert len(v) == len(claims) and all(x.premises for x in v)
  v = lb.rules(_sel(), 'smoke')
  assert [c.name for c in v[0].premises] == [
    'premise: room for a collapse above the step-0 load (offset)',
    'premise: the setup can produce a collapse (the one-teacher control collapses)',
  ]
  assert [len(x.premises) for x in v] == [2, 1, 4, 1, 2] and all(c.passed for x in v for c in x.premises)


def test_the_zloss_claim_is_back_after_its_drop_was_refused():
  """The drop was never published (its rerun's check fired at rate 3); the claim is verdict 3 again, disclosed."""
  assert not lb.ABLATION.dropped and 'z-loss' in lb.ABLATION.claims[2].scope
  (back,) = [c for c in lb.ABLATION.changes if 'z-loss claim back as verdict 3' in c.change]
  assert back.verdicts == (1, 2, 3, 4, 5) and 'every 50 steps' in back.change and 'frozen' in back.change
  assert {0.5, 1.0, 1.5, 2.0, 3.0} <= set(zl.PILOT_LRS['full']) and 'pilot' in back.change
  assert zl.Z_SEEDS['full'] >= 64 and 3 * zl.Z_LOG_EVERY['full'] == 150
  assert all(max(c.verdicts, default=0) <= len(lb.ABLATION.claims) for c in lb.ABLATION.changes)


def _grid(sel, points, rates=(1e-3, 3e-3, 1e-2, 3e-2)):
  """Every run of `sel` plus the same runs of `points` at the other `rates` (held-out MSE doubled): a frame in which
  their chosen rate (sel's) lies inside the grid they ran."""
  extra = [
    sel[sel['point'] == p].assign(**{lb.LR: r, 'eval_loss': lambda f: 2 * f['eval_loss']})
    for p in points
    for r in rates
    if not np.isclose(r, sel[sel['point'] == p][lb.LR].iloc[0])
  ]
  return pd.concat([sel, *extra], ignore_index=True)


def test_the_routing_premise_reads_four_states_and_gates_nothing():
  """ln MSE of each trained top-1 point minus the dense FFN of its expert width, paired by seed: MoE 0.1 vs dense
  0.3, ln(1/3) = -1.10, passes; vs dense 0.105 (-0.05), fails with both rates inside their grids; a dense rate at its
  grid's edge or unequal T: n/a; no verdict moves."""
  points = [lb.dense(c) for c in lb.ROUTED] + [lb.point(c, b) for c in lb.ROUTED for b in lb.BALANCING]
  sel = _sel()
  rows = lb.routing_margins(sel, _grid(sel, points))
  assert [(r['condition'], r['MoE point']) for r in rows] == [(c, b) for c in lb.ROUTED for b in lb.BALANCING]
  assert all(r['reading'] == 'passes' and r['n'] == 8 for r in rows)
  assert all(r['ln MSE, MoE - dense'] == pytest.approx(math.log(1 / 3), abs=0.02) for r in rows)
  assert all(r['ci_lo'] < r['ln MSE, MoE - dense'] < r['ci_hi'] <= -lb.ROUTING_MARGIN for r in rows)
  near = _sel(dense_mse=0.105)
  assert {r['reading'] for r in lb.routing_margins(near, _grid(near, points))} == {'fails'}
  assert lb.routing_margins(near, near)[0]['reading'].startswith('n/a')  # one rate run: the dense rate at an edge
  only_dense = _grid(near, [lb.dense(c) for c in lb.ROUTED])  # the MoE at its grid's edge: a fail is n/a
  assert {r['reading'] for r in lb.routing_margins(near, only_dense)} == {"n/a (the MoE rate at its grid's edge)"}
  assert {r['reading'] for r in lb.routing_margins(sel, _grid(sel, [lb.dense(c) for c in lb.ROUTED]))} == {'passes'}
  longer = _sel(steps={'none': 200})  # none doubled, dense not: unequal T
  readings = {r['MoE point']: r['reading'] for r in lb.routing_margins(longer, _grid(longer, points))}
  assert readings['none'].startswith('n/a (unequal T') and readings['switch'] == 'passes'
  v = lambda lo, hi: stats.Verdict('', stats.INCONCLUSIVE, (lo + hi) / 2, (lo, hi), 't', 'r', 8)
  assert lb.routing_reading(v(-0.15, -0.05), False, False, True) == 'undecided'
  assert lb.routing_reading(v(-0.15, -0.1), True, False, True) == 'passes'  # an MoE edge only understates it
  assert [v.outcome for v in lb.rules(near, 'smoke')] == [v.outcome for v in lb.rules(sel, 'smoke')]
  t = lb_shown.routing_table(sel, _grid(sel, points))
  assert list(t['T (MoE, dense)']) == ['100, 100'] * 6 and (t['reading'] == 'passes').all()


def test_a_collapse_must_rise_past_the_load_of_one_expert_per_cluster():
  """collapse_margin: where the step-0 load + 1 stays below 8 / H_8 = 2.94, the load of a router that gives each
  Zipf cluster its own expert, a collapse must rise past it (on centred, start 1.6: a margin of 1.34)."""
  h8 = sum(1 / i for i in range(1, 9))
  assert lb.specialised_load(lb.OFFSET) == pytest.approx(8 / h8) and lb.specialised_load(lb.CONTROL) == 1.0

  def at_start(change):
    sel = _sel(conditions={lb.CENTRED: {**COLLAPSE, 'none': change}, lb.CONTROL: COLLAPSE})
    centred = sel['point'].isin([lb.point(lb.CENTRED, 'none'), lb.frozen(lb.CENTRED)])
    sel.loc[centred, 'load_start'] = 1.6
    sel.loc[centred, 'load_final'] = sel.loc[centred, 'load_change'] + 1.6
    return sel

  assert lb.collapse_margin(at_start(1.5), lb.CENTRED) == pytest.approx(8 / h8 - 1.6)
  assert lb.collapse_margin(at_start(1.5), lb.OFFSET) == lb.COLLAPSE_RISE  # start 2.5: 2.5 + 1 > 2.94
  v = lb.rules(at_start(1.5), 'smoke')  # a rise of 1.5 passes 1.34
  assert v[4].outcome == stats.REPRODUCED and v[4].boundaries == (pytest.approx(8 / h8 - 1.6),)
  v = lb.rules(at_start(1.2), 'smoke')  # above 1, below the rise to one expert per cluster: not a collapse
  assert v[4].outcome == stats.NOT_REPRODUCED and v[0].outcome == stats.REPRODUCED
  assert 'by more than 1.34' in v[4].claim


def test_collapse_needs_room_above_the_step0_load():
  sel = _sel()
  none = sel['point'] == lb.point(lb.OFFSET, 'none')
  sel.loc[none, 'load_start'] = 7.5 + 0.01 * np.arange(none.sum()) / none.sum()  # starts within 1 of E = 8
  v = lb.rules(sel, 'smoke')[0]
  assert v.outcome == stats.INVALID and v.raw_outcome == stats.REPRODUCED
  c = v.premises[0]
  assert not c.passed and 'premise: room for a collapse' in v.detail and 'must lie >= 1' in c.detail


def test_tables_keep_each_ci_inside_its_range():
  sel = _sel(pilot=(0.125, 1.0))
  sel.loc[sel['point'] == lb.SWITCH, 'load_final'] = np.resize([1.0, 1.0, 1.0, 3.0], (sel['point'] == lb.SWITCH).sum())
  t = lb_shown.load_table(sel).set_index('point')
  assert t.loc[lb.SWITCH, 'load_final_ci_lo'] >= 1.0  # a t interval would reach below 1 (mean 1.5, 8 seeds)
  plain = stats.mean_ci(sel.loc[sel['point'] == lb.SWITCH, 'load_final'])
  assert plain[1] < 1.0
  u = lb_shown.unstable_table(sel)
  assert (u['unstable_ci_lo'] >= 0).all() and (u['unstable_ci_hi'] <= 1).all()
  pilot = u[u['seeds'] == 'pilot']
  assert list(pilot[lb.LR]) == list(LRS) and list(pilot['unstable_mean']) == [0.125, 1.0]
  test = u[u['seeds'] == 'test'].set_index('point')
  assert list(test['unstable_mean']) == [0.75, 0.0, 0.75, 0.0]
  assert list(test.index) == ['float32', 'frozen', 'none', 'z_loss']
  assert (test['router_z_ci_lo'] > 0).all() and test.loc['z_loss', 'router_z_mean'] < test.loc['none', 'router_z_mean']


def test_no_rise_leaves_the_fixes_nothing_to_reduce():
  flat = {'none': -0.2, 'switch': -0.3, 'bias': -0.3, 'frozen': 0.0}
  v = lb.rules(_sel(COLLAPSE, conditions={lb.CONTROL: flat}), 'smoke')  # the routing task collapses, control not
  assert [x.outcome for x in v] == [stats.REPRODUCED, stats.INVALID, stats.REPRODUCED, stats.INVALID] + [
    stats.REPRODUCED
  ]
  assert (
    'premise: training without balancing collapses the router' in v[1].detail and 'rule 1 on control' in v[1].detail
  )
  assert v[1].raw_outcome == stats.REPRODUCED  # the rule alone would say it reduces it: kept, gated
  small = {'none': 0.5, 'switch': 0.0, 'bias': 0.0, 'frozen': 0.0}  # a rise, but below the collapse level
  v = lb.rules(_sel(COLLAPSE, conditions={lb.CONTROL: small}), 'smoke')
  assert v[1].outcome == v[3].outcome == stats.INVALID and v[1].raw_outcome == stats.REPRODUCED


def test_measurement_checks_gate_the_load_verdicts():
  sel = _sel()
  moved = (sel['point'] == lb.frozen(lb.CENTRED)) & (sel[lb.SEED] == 2)
  sel.loc[moved, 'load_change'] = 0.01  # one frozen router moved
  v = lb.rules(sel, 'smoke')
  assert [x.outcome for x in v] == [stats.INVALID, stats.INVALID, stats.REPRODUCED, stats.INVALID, stats.INVALID]
  assert 'frozen router: final load = rebuilt step-0 load' in v[0].detail
  assert [c.passed for c in lb.measurement(_sel())] == [True, True]


def test_a_point_that_is_not_tuned_keeps_its_rate_when_seeds_diverge():
  """regime.tune (core): the z-loss arms are read at their one rate even where seeds diverged."""
  frame = _sel(pilot=(0.25, 0.5)).assign(eval_loss=lambda f: np.where(f['status'] == 'completed', 0.1, math.nan))
  state = {p: regime.PointState([float(lr)], 100) for p, lr in frame.groupby('point')[lb.LR].first().items()}
  t = regime.tune(frame, state, lb.REGIMES['smoke']).set_index(['point', 'level'])
  assert t.loc[(f'{zl.PILOT}0.3: none', 'T'), 'rate'] == t.loc[(f'{zl.UNSTABLE}: none', 'T'), 'rate'] == 0.3
  picked = regime.select(frame, t.reset_index(), 'T')
  assert (picked['status'] == 'diverged').sum() == (frame['status'] == 'diverged').sum() > 0
  assert len(picked) == len(frame)


def test_paired_all_pairs_on_the_edge_is_not_reproduced():
  """0/1 outcomes often tie: equal arms must not count as 'less' (rules_lib.paired's zero-spread case)."""
  assert rules_lib.paired([1, 1, 1], [1, 1, 1], expect='less', claim='').outcome == stats.NOT_REPRODUCED
  assert rules_lib.paired([0, 0, 0], [1, 1, 1], expect='less', claim='').outcome == stats.REPRODUCED


@pytest.mark.parametrize('scale', ['smoke', 'quick', 'full'])
def test_arms(scale):
  arms = {a.name: a for a in lb.arms(scale)}
  assert list(arms) == [
    *(n for c in lb.CONDITIONS for n in (c, lb.frozen(c))),
    *(lb.dense(c) for c in lb.ROUTED),
    *(f'{zl.PILOT}{r:g}' for r in zl.PILOT_LRS[scale]),
    zl.UNSTABLE,  # after the pilot: its rate rule reads the pilot's runs
  ]
  for name, a in arms.items():
    validation.validate(a.base)
    m = a.base.model.moe
    assert not any(k.startswith('train.') for o in a.points.values() for k in o)  # the runner adds rate, steps, seed
    t = a.base.task
    if name.startswith(lb.DENSE):  # the routing premise's reference: the MoE's task and expert width, no experts
      moe = arms[name.removeprefix(lb.DENSE)].base
      assert m.num_experts == 0 and a.base.model.d_ff == moe.model.d_ff == lb.EXPERT_WIDTH == 32 and a.tuned
      assert a.base.task.to_dict() == moe.task.to_dict() and list(a.points) == ['']
      continue
    assert (m.num_experts, m.top_k, m.router, m.renormalize, m.capacity_factor) == (8, 1, 'softmax_topk', False, 1.0)
    assert a.tuned == (name in lb.CONDITIONS) and m.freeze_router == name.startswith('frozen_')
    if name.startswith((zl.PILOT, zl.UNSTABLE)):
      assert a.base.train.grad_clip == 0 and m.load_balance_coef == lb.SWITCH_ALPHA and m.router_dtype == 'bfloat16'
      assert t.num_clusters == 0 and a.base.model.d_ff == lb.Z_EXPERT_WIDTH == 64
      for steps in (4, 40, 4000):  # one log every Z_LOG_EVERY steps at every budget: the blow-up rule's patience
        assert a.budget(steps)['train.log_every'] == zl.Z_LOG_EVERY[scale] and a.budget(steps)['train.steps'] == steps
      if name.startswith(zl.PILOT):
        assert a.base.train.learning_rate == float(name.split('_lr')[1]) and a.rate_from is None
        assert list(a.points) == ['none'] and a.points['none'] == {zl.Z_KEY: 0.0}
        want = range(zl.PILOT_FIRST_SEED, zl.PILOT_FIRST_SEED + zl.PILOT_SEEDS[scale])
      else:
        assert a.points == {
          'none': {zl.Z_KEY: 0.0},
          'z_loss': {zl.Z_KEY: 1e-3},
          'frozen': {zl.Z_KEY: 0.0, 'model.moe.freeze_router': True},
          'float32': {zl.Z_KEY: 0.0, 'model.moe.router_dtype': 'float32'},
        }
        want = range(zl.Z_SEEDS[scale])
        assert a.rate_from is zl.pilot_rate
      assert a.seed_range(lb.REGIMES[scale].seeds) == want
    else:
      assert m.router_dtype == 'float32' and a.seeds is None and a.base.model.d_ff == 32
      condition = name.removeprefix('frozen_')
      routing = condition != lb.CONTROL
      assert (t.num_clusters, t.cluster_teachers) == ((8, True) if routing else (1, False))
      assert t.center_inputs == routing and t.input_offset == (1.0 if condition == lb.OFFSET else 0.0)
  assert lb.REGIMES['full'].seeds >= 10


def test_present_on_a_synthetic_result(tmp_path):
  sel = _sel()
  tuning = pd.DataFrame(
    [{'point': p, 'level': lv, 'rate': g[lb.LR].iloc[0]} for p, g in sel.groupby('point') for lv in ('T', 'T/2')]
  )
  verdicts = lb.rules(sel, 'smoke')
  result = base.Result(sel, tuning, sel, sel, verdicts, 'smoke')
  out = ablations.get('load_balancing').present(result, base.Context(str(tmp_path), 'smoke'))
  assert [c.passed for c in out.checks] == [True, True] and '+1.5' in out.headline and 'control' in out.headline
  assert 'z-loss minus none -0.75 (reproduced) at the test rate 0.3' in out.headline
  assert len(out.tables[0].frame) == 4 * len(lb.CONDITIONS) and len(out.tables[2].frame) == len(LRS) + len(zl.POINTS)
  assert len(out.tables[1].frame) == len(lb.ROUTED) * len(lb.BALANCING) and 'routing premise (offset)' in out.headline
  assert (tmp_path / out.figures[0].file).stat().st_size > 1000


@pytest.mark.slow  # the real entry point at smoke scale (~1 minute)
def test_smoke_through_entry_point(study_smoke):
  returncode, _, stderr, out = study_smoke('load_balancing')  # the run the every-ablation smoke test reads too
  assert returncode == 0, stderr
  report = json.loads((out / 'report.json').read_text())
  assert (
    len(report['verdicts']) == 5
    and not report.get('dropped')
    and all(v['outcome'] in stats.OUTCOMES for v in report['verdicts'])
  )
  assert all(v['p_holm'] is not None for v in report['verdicts']) and report['regime']['iterations']
  assert [c['passed'] for c in report['checks']][:2] == [True, True]  # the frozen router's load does not move
  assert len(report['checks']) == 2 and 'premise: a rate where the no-z-loss pilot is unstable' in json.dumps(report)


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
