"""activation_sparsity: are a trained transformer's FFN activations sparse, does the sparsity emerge in training, and are larger models sparser?

Claim (Li et al. 2023, "The Lazy Neuron Phenomenon: On Emergence of Activation Sparsity in
Transformers", ICLR 2023, arXiv 2210.06313; docs/references.md#li-et-al-2023): after training, very
few entries of the FFN hidden activation (after ReLU) are non-zero for each input: on average 3.0% for
T5-Base and 6.3% for ViT-B/16 (the abstract's numbers); the sparsity emerges during training (at
initialisation a ReLU unit is on for about half the inputs: pre-activations are symmetric about 0);
larger transformers (more layers, wider FFNs) are sparser.

Setup: the `language` task (tasks/language.py, an order-2 sparse Markov chain with an exact entropy
floor) on a 2-layer pre-norm transformer with causal attention, bias-free FFNs as in T5 (so at
initialisation a unit's pre-activation is symmetric about 0), Adam with warmup (steps / 20) and cosine
decay. Shapes (SETTINGS): the reference (d_model, d_ff) = ref, d_ff in d_ffs at the reference d_model,
and d_model in d_models at d_ff = 4 d_model; ReLU at every shape, GELU and SiLU at the reference.
Tuning (issue 18): every ReLU shape trains over RATES x two step budgets, T = steps and T/2 (separate
runs, each with its own schedule: warmup budget / 20, checkpoints and evaluation at budget / 2 and at
the budget, 20 logs; `base.tuning_grid` + sweep.product). RATES = (3e-3, 1e-2, 3e-2), fixed before the
run: the previous published run (fixed 3e-3, a descriptive arm at 1e-3 and 1e-2 at the reference shape)
had the lowest held-out bits at 1e-2 (excess over the floor 0.027 vs 0.055 at 3e-3 and 0.459 at 1e-3),
so a (1e-3, 3e-3, 1e-2) grid would have put the reference's optimum on its edge. GELU and SiLU at the
reference stay descriptive: one rate (DESCRIPTIVE_LR = 1e-2, the grid's middle) at T only, to save CPU;
they are compared with ReLU at the same rate and budget. Full scale trims the shape axes to d_ff in
(32, 128, 512) and d_model in (32, 64) with 4 seeds (the previous run: 5 d_ffs, 3 d_models, 5 seeds at
one rate) to keep the 3 x 1.5-budget grid within 25 minutes on 2 cores; the steps (1,000) are not cut.
Seeds are paired (a seed fixes the language, the data order and the initialisation) and vmapped.

Measurement (pure: `density`, `layer_densities`): the FFN hidden activations of each layer
(`probe.ffn_hidden`) on the held-out sequences of the run's language (task.num_eval sequences, every
position); density = the fraction of (token, unit) entries with |a| > tau. ReLU: tau = 0, i.e. the
fraction of non-zero entries (Li et al.'s measure). GELU/SiLU: tau = TAU = 0.1, fixed before any run:
their outputs are never exactly 0, and 0.1 is where GELU's positive branch starts to count (z > 0.17)
while most of its negative branch (|GELU| <= 0.17) and the far tail of SiLU's stay below; the fraction
of positive pre-activations (z > 0) is reported beside it, and ReLU's |a| > TAU too, for comparison.
Measured at initialisation (the seed's initial weights), halfway (the checkpoint at the run's budget / 2)
and at the end of each run. Dead units (never non-zero on the probe set) are counted and reported
(sparsity made of dead units would be a different phenomenon from Li et al.'s).

Learning rate per shape (`tune`, fixed before any full run): `verdict.tune_per_point` by shape, metric
the held-out bits per token (eval_bits; lower is better), mean over seeds at T; one rate per shape, every
seed's run at that rate kept (seeds stay paired across shapes). Verdict rules (`decide`), on the per-seed
density (mean over the layers) at the end of the T run at the shape's chosen rate:
  1. trained ReLU FFNs are sparse: at the reference shape, the t CI over seeds of the mean density
     lies below LEVEL = 10% (above ViT-B/16's 6.3%, the denser of the paper's two headline models;
     our models are ~10^4 times smaller, so "a few percent" is read generously).
  2. wider FFNs are sparser: per seed, the least-squares slope of log density vs log d_ff over d_ffs
     (reference d_model), each shape at its own chosen rate; the t CI of the mean slope lies below 0.
  3. larger models are sparser: the same slope vs log d_model over d_models (d_ff = 4 d_model).
GELU/SiLU at TAU: descriptive (a table and notes), no verdict (the paper's claim is about ReLU).
Each verdict is gated (`verdict.gate`) on the checks of every shape it reads:
  - coverage: every shape's chosen rate has a completed run for every seed at T and at T/2 (a rate
    with a diverged or missing seed at a shape is not eligible there: tune_per_point);
  - init premise: the t CI of the mean density at initialisation lies inside [INIT_LO, INIT_HI] =
    [0.4, 0.6] (the sparsity must emerge from training, not be there at the start);
  - learning rate inside the grid: the chosen rate is not the smallest or largest of RATES;
  - budget plateau of the loss: the best mean held-out bits at T vs the best at T/2 (tune_per_point,
    absolute) change by less than BITS_TOL = 0.05 bits per token;
  - budget plateau of the verdict's statistic: the mean density at T vs the T/2 run at the chosen rate,
    relative change below DENSITY_TOL = 10% (separate runs with their own schedules: under cosine decay
    a within-run comparison flattens as the rate decays whether or not the model has converged; these
    two replace the previous last-two-logs loss check and within-run half-vs-end density check);
  - learned something: the held-out bits per token at the chosen rate lie more than RANGE_MARGIN = 0.1
    bits below the unigram entropy (a model that ignores the context), mean over seeds.
A failed check makes the verdict `invalid`; the runner applies Holm over the three verdicts.
"""

import dataclasses
import math
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import ml_collections  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import pandas as pd  # pylint: disable=wrong-import-position

from ffn_research import probe  # pylint: disable=wrong-import-position
from ffn_research import sweep  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

LEVEL = 0.10            # rule 1: trained ReLU density below 10% (ViT-B/16: 6.3%, T5-Base: 3.0%)
PAPER_T5, PAPER_VIT = 0.030, 0.063   # Li et al. 2023, abstract: mean fraction of non-zero entries
TAU = 0.1               # GELU/SiLU: |a| > TAU counts as on (fixed before any run; module docstring)
INIT_LO, INIT_HI = 0.4, 0.6   # init premise: density at initialisation near 1/2
RATES = (3e-3, 1e-2, 3e-2)    # the learning-rate grid of every ReLU shape (module docstring)
DESCRIPTIVE_LR = 1e-2   # GELU/SiLU (descriptive, full budget only)
BITS_TOL = 0.05         # budget plateau: |held-out bits at T - at T/2| (tuned), bits per token
DENSITY_TOL = 0.10      # budget plateau: relative change of the density at T vs T/2 at the chosen rate
RANGE_MARGIN = 0.1      # held-out bits per token at least this far below the unigram entropy
NUM_LAYERS, NUM_HEADS = 2, 2
SEED = 'train.seed'
STEP_NAMES = {0: 'init', 1: 'half', 2: 'end'}   # the three measurement points, as fractions 0, 1/2, 1 of a run

LANGUAGE = dict(vocab_size=16, markov_order=2, num_candidates=8, branching=4, concentration=0.5, seq_len=32,
                num_eval=256)
# Per scale: seeds, steps T (the T/2 runs are separate), batch, the reference shape (d_model, d_ff), the size axes.
SETTINGS = {
    'smoke': dict(seeds=3, steps=40, batch=8, ref=(16, 32), d_ffs=(16, 32), d_models=(16,),
                  language=dict(LANGUAGE, vocab_size=8, num_candidates=4, branching=2, seq_len=8, num_eval=32)),
    'quick': dict(seeds=3, steps=600, batch=16, ref=(32, 128), d_ffs=(32, 128, 512), d_models=(32, 64),
                  language=LANGUAGE),
    'full': dict(seeds=4, steps=1000, batch=16, ref=(32, 128), d_ffs=(32, 128, 512), d_models=(32, 64),
                 language=LANGUAGE),
}


# --------------------------------------------------------------------------- measurements (pure)

def density(acts: np.ndarray, tau: float = 0.0) -> float:
  """Fraction of the entries of `acts` with |a| > tau (tau = 0: the non-zero fraction)."""
  return float(np.mean(np.abs(np.asarray(acts)) > tau))


def dead_fraction(acts_NxF: np.ndarray, tau: float = 0.0) -> float:
  """Fraction of units (columns) with |a| <= tau on every one of the N inputs."""
  return float(np.mean(np.all(np.abs(np.asarray(acts_NxF)) <= tau, axis=0)))


def layer_densities(acts_NxF: np.ndarray, pre_NxF: np.ndarray, activation: str) -> dict[str, float]:
  """One layer's figures: density (tau 0 for ReLU, TAU otherwise), density at TAU, the fraction of
  positive pre-activations, and the dead-unit fraction at the same tau as density."""
  tau = 0.0 if activation == 'relu' else TAU
  return {'density': density(acts_NxF, tau), 'density_tau': density(acts_NxF, TAU),
          'positive': float(np.mean(np.asarray(pre_NxF) > 0)), 'dead': dead_fraction(acts_NxF, tau)}


def per_seed_slopes(frame: pd.DataFrame, x: str, y: str = 'density') -> pd.Series:
  """Per seed: least-squares slope of log y on log x (seeds with < 2 distinct x are left out)."""
  out = {}
  for s, g in frame.groupby(SEED, sort=True):
    if g[x].nunique() >= 2:
      out[s] = float(np.polyfit(np.log(g[x].to_numpy(float)), np.log(g[y].to_numpy(float)), 1)[0])
  return pd.Series(out, dtype=float)


# --------------------------------------------------------------------------- sweeps

def shapes(scale: str) -> list[tuple[str, int, int]]:
  """(activation, d_model, d_ff) of every arm: ReLU over d_ff and d_model, GELU/SiLU at the reference."""
  s = SETTINGS[scale]
  d_ref, f_ref = s['ref']
  out = [('relu', d_ref, f) for f in s['d_ffs']]
  out += [('relu', d, 4 * d) for d in s['d_models'] if ('relu', d, 4 * d) not in out]
  if ('relu', d_ref, f_ref) not in out:
    out.append(('relu', d_ref, f_ref))
  return out + [(a, d_ref, f_ref) for a in ('gelu', 'silu')]


def budget_grid(rates, steps: int) -> list[dict]:
  """base.tuning_grid's rate x budget overrides, each budget with its own warmup, checkpoints and evaluations."""
  out = []
  for o in base.tuning_grid(rates, steps, num_logs=20):
    b = o['train.steps']
    out.append({**o, 'train.warmup_steps': max(1, b // 20), 'train.checkpoint_every': b // 2,
                'train.eval_every': b // 2})
  return out


def language_config(scale: str, activation: str) -> ml_collections.ConfigDict:
  s = SETTINGS[scale]
  c = default_config()
  m, t, tr = c.model, c.task, c.train
  m.arch, m.num_layers, m.num_heads, m.activation, m.use_bias = 'transformer', NUM_LAYERS, NUM_HEADS, activation, False
  m.d_model, m.d_ff = s['ref']
  t.name = 'language'
  for k, v in s['language'].items():
    t[k] = v
  tr.batch_size, tr.learning_rate, tr.warmup_steps = s['batch'], DESCRIPTIVE_LR, max(1, s['steps'] // 20)
  base.set_steps(tr, s['steps'], num_logs=20)
  tr.checkpoint_every = s['steps'] // 2       # checkpoints at half and at the end (the two kept)
  tr.eval_every = s['steps'] // 2
  return c


def sweeps(scale: str) -> list[base.SweepSpec]:
  """ReLU: shapes x RATES x budgets (T, T/2) x seeds; GELU/SiLU: the reference at DESCRIPTIVE_LR, T, x seeds."""
  s = SETTINGS[scale]
  seeds = sweep.values(SEED, range(s['seeds']))
  out = []
  for act in ('relu', 'gelu', 'silu'):
    runs = [{'model.d_model': d, 'model.d_ff': f} for a, d, f in shapes(scale) if a == act]
    grid = budget_grid(RATES, s['steps']) if act == 'relu' else [{}]
    out.append(base.SweepSpec(act, language_config(scale, act), sweep.product(runs, grid, seeds)))
  return out


# --------------------------------------------------------------------------- reading runs

def model_rows(model, tokens_NxT, activation: str) -> list[dict]:
  """Per layer: layer_densities of the model's FFN hidden activations on the tokens."""
  rows = []
  for layer in range(len(model.blocks)):
    acts = probe.ffn_hidden(model, tokens_NxT, layer)
    x = probe.ffn_input(model, tokens_NxT, layer)
    pre = x @ np.asarray(model.blocks[layer].ffn.w1[...])
    f = acts.shape[-1]
    rows.append({'layer': layer, **layer_densities(acts.reshape(-1, f), pre.reshape(-1, f), activation)})
  return rows


def collect(results: dict[str, pd.DataFrame], outdir: str) -> pd.DataFrame:
  """One row per (run, measurement point, layer) of every completed run."""
  rows = []
  for act, df in results.items():
    for _, r in base.completed(df).iterrows():
      run_dir = os.path.join(outdir, act, 'runs', r['name'])
      config, models, data = base.models_over_training(run_dir)
      steps = int(config.train.steps)
      run = {'activation': act, 'd_model': int(r['model.d_model']), 'd_ff': int(r['model.d_ff']),
             SEED: int(r[SEED]), 'lr': float(config.train.learning_rate), 'steps': steps,
             'eval_bits': float(r['eval_bits']), 'unigram_bits': float(r['unigram_bits']),
             'floor_bits': float(r['floor_bits'])}
      for step, model in models.items():
        point = STEP_NAMES[int(round(2 * step / steps))]
        for lr in model_rows(model, data['eval']['inputs'], act):
          rows.append({**run, 'step': int(step), 'point': point, **lr})
  return pd.DataFrame(rows)


# --------------------------------------------------------------------------- analysis (pure in the frame)

def per_run(stats: pd.DataFrame, point: str = 'end') -> pd.DataFrame:
  """Per (activation, shape, rate, budget, seed) at `point`: figures averaged over the layers."""
  g = stats[stats['point'] == point]
  keys = ['activation', 'd_model', 'd_ff', 'lr', 'steps', SEED]
  cols = ['density', 'density_tau', 'positive', 'dead', 'eval_bits', 'unigram_bits', 'floor_bits']
  return g.groupby(keys, as_index=False)[cols].mean()


def _shape(d: int, f: int) -> str:
  return f'd_model {d}, d_ff {f}'


def tune(stats: pd.DataFrame) -> verdict.Tuned:
  """Per ReLU shape: the rate with the lowest mean held-out bits at T, and its budget-plateau checks."""
  end = per_run(stats, 'end')
  relu = end[end['activation'] == 'relu'].copy()
  relu['shape'] = [_shape(d, f) for d, f in zip(relu['d_model'], relu['d_ff'])]
  return verdict.tune_per_point(relu, by='shape', metric='eval_bits', tol=BITS_TOL, relative=False, over='lr',
                                budget='steps', grid=RATES, seed=SEED)


def selected(stats: pd.DataFrame, tuned: verdict.Tuned) -> pd.DataFrame:
  """Rows of collect's frame at each ReLU shape's chosen rate at T, and GELU/SiLU's (every point)."""
  t_steps = int(stats['steps'].max())
  keep = {(d, f, float(lr)) for d, f, lr in tuned.rows[['d_model', 'd_ff', 'lr']].drop_duplicates().to_numpy()}
  is_relu = stats['activation'] == 'relu'
  chosen = [(d, f, float(lr)) in keep for d, f, lr in zip(stats['d_model'], stats['d_ff'], stats['lr'])]
  return stats[(stats['steps'] == t_steps) & (~is_relu | np.asarray(chosen, bool))]


def _coverage(stats: pd.DataFrame, tuned: verdict.Tuned, shape_list, seeds: int) -> verdict.Check:
  """Every shape's chosen rate has every seed at T and at T/2 (a rate with a diverged seed is not eligible)."""
  end = per_run(stats, 'end')
  relu = end[end['activation'] == 'relu']
  t_steps = int(relu['steps'].max()) if len(relu) else 0
  chosen = dict(zip(tuned.table['shape'], tuned.table['learning_rate'])) if len(tuned.table) else {}
  missing = []
  for d, f in shape_list:
    if _shape(d, f) not in chosen:
      missing.append(f'{_shape(d, f)}: no completed runs')
      continue
    lr = chosen[_shape(d, f)]
    for b in (t_steps, t_steps // 2):
      n = relu[(relu['d_model'] == d) & (relu['d_ff'] == f) & np.isclose(relu['lr'], lr)
               & (relu['steps'] == b)][SEED].nunique()
      if n < seeds:
        missing.append(f'{_shape(d, f)}, lr {lr:g}, {b} steps: {n}/{seeds} seeds')
  return verdict.Check('coverage: every shape\'s chosen rate has every seed at T and T/2', not missing,
                       '; '.join(missing) or 'complete')


def shape_checks(stats: pd.DataFrame, tuned: verdict.Tuned, shape_list, seeds: int) -> list[verdict.Check]:
  """Coverage, init premise, tuning (edge, bits plateau), density budget plateau and learned, at the shapes."""
  end, init = per_run(stats, 'end'), per_run(stats, 'init')
  relu = end[end['activation'] == 'relu']
  premise, edge, bits, dens, learned = [], [], [], [], []
  for d, f in shape_list:
    name = _shape(d, f)
    at = lambda t, lr, b: t[(t['activation'] == 'relu') & (t['d_model'] == d) & (t['d_ff'] == f)
                            & np.isclose(t['lr'], lr) & (t['steps'] == b)]
    row = tuned.table[tuned.table['shape'] == name] if len(tuned.table) else tuned.table
    if row.empty:
      edge.append(verdict.Check(name, False, 'no completed runs at this shape'))
      continue
    lr = float(row['learning_rate'].iloc[0])
    t_steps = int(relu['steps'].max())
    e, h = at(relu, lr, t_steps), at(relu, lr, t_steps // 2)
    premise.append(verdict.premise_check(name, *_mci(at(init, lr, t_steps)['density']), INIT_LO, INIT_HI,
                                         what='density at initialisation'))
    c_edge, c_bits = tuned.checks_for(name)
    edge.append(c_edge)
    bits.append(c_bits)
    c = verdict.plateau_check(f'{name} (lr {lr:g})', e['density'], h['density'], DENSITY_TOL)
    dens.append(dataclasses.replace(c, detail=c.detail.replace('the last evaluation', f'{t_steps} steps').replace(
        'the previous', f'{t_steps // 2} steps (its own schedule)')))
    learned.append(verdict.range_check(name, e['eval_bits'], ceiling=float(e['unigram_bits'].mean()),
                                       margin=RANGE_MARGIN))
  return [_coverage(stats, tuned, shape_list, seeds),
          _all(f'init premise: ReLU density at initialisation inside [{INIT_LO:g}, {INIT_HI:g}]', premise),
          _all('learning rate inside the grid (chosen on the mean held-out bits over seeds)', edge),
          _all(f'budget plateau of the held-out bits: tuned T vs T/2 within {BITS_TOL:g} bits', bits),
          _all(f'budget plateau of the density: T vs T/2 at the chosen rate within {DENSITY_TOL:.0%}', dens),
          _all(f'learned: held-out bits more than {RANGE_MARGIN:g} below the unigram entropy', learned)]


def _mci(values) -> tuple[float, tuple[float, float]]:
  m, lo, hi = verdict.mean_ci(values)
  return m, (lo, hi)


_all = verdict.all_of


def decide(stats: pd.DataFrame, scale: str, tuned: verdict.Tuned | None = None) -> list[verdict.Verdict]:
  """The three verdicts of the module docstring, on the chosen rates' densities, each gated on its shapes' checks."""
  s = SETTINGS[scale]
  d_ref, f_ref = s['ref']
  tuned = tune(stats) if tuned is None else tuned
  relu = tuned.rows
  ref = relu[(relu['d_model'] == d_ref) & (relu['d_ff'] == f_ref)].sort_values(SEED)
  v1 = verdict.threshold(ref['density'], level=LEVEL, direction='below',
                         claim=f'a trained ReLU FFN is sparse: fraction of non-zero hidden activations on held-out '
                               f'text (mean over layers) below {LEVEL:.0%} at {_shape(d_ref, f_ref)}, learning '
                               f'rate tuned (Li et al.: {PAPER_T5:.1%} T5-Base, {PAPER_VIT:.1%} ViT-B/16)')
  out = [verdict.gate(v1, shape_checks(stats, tuned, [(d_ref, f_ref)], s['seeds']))]
  axes = [('d_ff', [(d_ref, f) for f in s['d_ffs']], f'wider FFNs are sparser: per-seed slope of log density vs '
           f'log d_ff over d_ff in {list(s["d_ffs"])} at d_model {d_ref} (rate tuned per shape) is below 0'),
          ('d_model', [(d, 4 * d) for d in s['d_models']], f'larger models are sparser: per-seed slope of log '
           f'density vs log d_model over d_model in {list(s["d_models"])} (d_ff = 4 d_model; rate tuned per shape) '
           'is below 0')]
  for x, shape_list, claim in axes:
    sub = relu[[(d, f) in shape_list for d, f in zip(relu['d_model'], relu['d_ff'])]]
    slopes = per_seed_slopes(sub, x)
    v = verdict.threshold(slopes.to_numpy(), level=0.0, direction='below', claim=claim)
    v = dataclasses.replace(v, test=f'least-squares slope of log density on log {x} per seed (numpy.polyfit); {v.test}')
    out.append(verdict.gate(v, shape_checks(stats, tuned, shape_list, s['seeds'])))
  return out


def density_table(stats: pd.DataFrame) -> pd.DataFrame:
  """Per (activation, shape, rate, point): density mean and CI over seeds (mean over layers), per layer, and more."""
  rows = []
  for point in STEP_NAMES.values():
    pr = per_run(stats, point)
    per_layer = stats[stats['point'] == point]
    for (act, d, f, lr), g in pr.groupby(['activation', 'd_model', 'd_ff', 'lr'], sort=True):
      m, lo, hi = verdict.mean_ci(g['density'])
      row = {'activation': act, 'd_model': d, 'd_ff': f, 'lr': lr, 'point': point, 'seeds': len(g), 'density': m,
             'CI': f'[{lo:.3g}, {hi:.3g}]'}
      pl = per_layer[(per_layer['activation'] == act) & (per_layer['d_model'] == d) & (per_layer['d_ff'] == f)
                     & (per_layer['lr'] == lr)]
      for layer, gl in pl.groupby('layer'):
        row[f'layer {layer}'] = float(gl['density'].mean())
      row.update({f'|a| > {TAU:g}': float(g['density_tau'].mean()), 'pre-act > 0': float(g['positive'].mean()),
                  'dead units': float(g['dead'].mean()), 'excess bits': float((g['eval_bits'] - g['floor_bits']).mean()),
                  'unigram - floor bits': float((g['unigram_bits'] - g['floor_bits']).mean())})
      rows.append(row)
  t = pd.DataFrame(rows)
  order = {p: i for i, p in enumerate(STEP_NAMES.values())}
  return t.sort_values(['activation', 'd_model', 'd_ff', 'point'], key=lambda c: c.map(order) if c.name == 'point'
                       else c).reset_index(drop=True) if len(t) else t


def grid_table(stats: pd.DataFrame, tuned: verdict.Tuned) -> pd.DataFrame:
  """Per ReLU (shape, rate, budget): mean held-out excess bits and density at the end, and which rate was chosen."""
  end = per_run(stats, 'end')
  relu = end[end['activation'] == 'relu']
  rows = []
  for (d, f, lr, b), g in relu.groupby(['d_model', 'd_ff', 'lr', 'steps'], sort=True):
    m, lo, hi = verdict.mean_ci(g['density'])
    rows.append({'d_model': d, 'd_ff': f, 'lr': lr, 'steps': b, 'seeds': len(g),
                 'chosen': tuned.is_chosen(_shape(d, f), lr),
                 'eval bits': float(g['eval_bits'].mean()), 'excess bits': float((g['eval_bits'] - g['floor_bits']).mean()),
                 'density': m, 'CI': f'[{lo:.3g}, {hi:.3g}]'})
  return pd.DataFrame(rows)


def descriptive_notes(stats: pd.DataFrame, scale: str) -> list[str]:
  """GELU/SiLU at TAU against ReLU at the reference at the same rate and budget (paired by seed), and dead units."""
  d_ref, f_ref = SETTINGS[scale]['ref']
  end = per_run(stats, 'end')
  end = end[end['steps'] == end['steps'].max()]
  ref = end[(end['d_model'] == d_ref) & (end['d_ff'] == f_ref) & np.isclose(end['lr'], DESCRIPTIVE_LR)]
  ref = ref.set_index(['activation', SEED])
  notes = []
  for act in ('gelu', 'silu'):
    if act not in ref.index.get_level_values(0) or 'relu' not in ref.index.get_level_values(0):
      continue
    a, r = ref.loc[act], ref.loc['relu']
    diff = (a['density_tau'] - r['density_tau']).dropna()
    m, lo, hi = verdict.mean_ci(diff)
    notes.append(f'descriptive (not a verdict; one rate {DESCRIPTIVE_LR:g}, full budget only): {act.upper()} at the '
                 f'end, fraction |a| > {TAU:g}: {a["density_tau"].mean():.3f} (ReLU at the same rate and threshold '
                 f'{r["density_tau"].mean():.3f}, ReLU non-zero {r["density"].mean():.3f}); paired {act} - relu at '
                 f'|a| > {TAU:g}: {m:+.3f} [{lo:.3f}, {hi:.3f}] (n = {len(diff)}); positive pre-activations '
                 f'{a["positive"].mean():.3f} (ReLU {r["positive"].mean():.3f})')
  relu = end[end['activation'] == 'relu']
  if len(relu):
    notes.append(f'ReLU dead units (never non-zero on the probe set) at the end of the T runs: {relu["dead"].mean():.3f} '
                 f'of the units on average over shapes, rates and seeds (max {relu["dead"].max():.3f}); density among '
                 'live units is density / (1 - dead)')
  return notes


def plot(stats: pd.DataFrame, ctx: base.Context) -> list[base.Figure]:
  s = SETTINGS[ctx.scale]
  d_ref, f_ref = s['ref']
  fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
  end = per_run(stats, 'end')
  relu = end[end['activation'] == 'relu']
  for ax, x, shape_list in ((axes[0], 'd_ff', [(d_ref, f) for f in s['d_ffs']]),
                            (axes[1], 'd_model', [(d, 4 * d) for d in s['d_models']])):
    sub = relu[[(d, f) in shape_list for d, f in zip(relu['d_model'], relu['d_ff'])]]
    t = verdict.summarize(sub, [x], ['density']) if len(sub) else pd.DataFrame(columns=[x] + ['density_mean'] * 3)
    if len(t):
      base.errorbar_ci(ax, t[x], t['density_mean'], t['density_ci_lo'], t['density_ci_hi'],
                       label='ReLU, trained (mean, 95% CI)')
      ax.scatter(sub[x], sub['density'], s=8, alpha=0.4)
    ax.axhline(PAPER_VIT, color='C2', ls=':', label=f'ViT-B/16 {PAPER_VIT:.1%} (Li et al.)')
    ax.axhline(PAPER_T5, color='C3', ls=':', label=f'T5-Base {PAPER_T5:.1%} (Li et al.)')
    ax.axhline(LEVEL, color='k', ls='--', label=f'rule 1 level {LEVEL:.0%}')
    fixed = f'd_model {d_ref}' if x == 'd_ff' else 'd_ff = 4 d_model'
    base.style_axes(ax, xlabel=x, ylabel='fraction of non-zero activations', title=f'{fixed} ({ctx.scale})',
                    xscale='log', xbase=2, yscale='log')
  for i, (act, g) in enumerate(stats[(stats['d_model'] == d_ref) & (stats['d_ff'] == f_ref)].groupby('activation')):
    for layer, gl in g.groupby('layer'):
      t = gl.groupby('step')['density'].mean()
      axes[2].plot(t.index, t.to_numpy(), 'o-' if layer == 0 else 's--', color=f'C{i}',
                   label=f'{act} layer {layer}' + ('' if act == 'relu' else f' (|a| > {TAU:g})'))
  base.style_axes(axes[2], xlabel='training step', ylabel='density (mean over seeds)',
                  title=f'over training at d_model {d_ref}, d_ff {f_ref}', yscale='log')
  return [base.save_figure(fig, ctx.outdir, 'density_vs_size.png',
                           'left, middle: fraction of non-zero ReLU activations on held-out text at the end of '
                           'training (mean over layers; mean and 95% CI over seeds, dots: seeds) vs d_ff and vs '
                           'd_model, each shape at its chosen learning rate, with Li et al.\'s T5-Base and ViT-B/16 '
                           'figures and the rule-1 level; right: '
                           f'density per layer at initialisation, half and end of training (GELU/SiLU: |a| > {TAU:g})')]


def analyze_stats(stats: pd.DataFrame, ctx: base.Context, failed: dict[str, int] | None = None) -> base.Analysis:
  """Verdicts, tables, notes and figure from collect's frame (pure in the frame; tests feed a synthetic one)."""
  tuned = tune(stats)
  verdicts = decide(stats, ctx.scale, tuned)
  chosen = selected(stats, tuned)
  notes = descriptive_notes(stats, ctx.scale)
  if failed and any(failed.values()):
    notes.append(f'runs not completed (excluded): {failed}')
  init = per_run(chosen, 'init')
  relu0 = init[init['activation'] == 'relu']['density']
  rates = ', '.join(f'{r["shape"]}: {r["learning_rate"]:g}' for _, r in tuned.table.iterrows())
  v = verdicts[0]
  headline = (f'trained ReLU density {v.statistic:.3f} (95% CI [{v.ci[0]:.3f}, {v.ci[1]:.3f}]) vs {LEVEL:.0%} '
              f'(init {relu0.mean():.3f}); slope vs d_ff {verdicts[1].statistic:+.3f} '
              f'[{verdicts[1].ci[0]:+.3f}, {verdicts[1].ci[1]:+.3f}]; vs d_model {verdicts[2].statistic:+.3f} '
              f'[{verdicts[2].ci[0]:+.3f}, {verdicts[2].ci[1]:+.3f}]; rates chosen per shape: {rates}')
  tables = [base.Table('FFN activation density per activation, shape and point of training at the T budget (ReLU: '
                       'at the shape\'s chosen rate; GELU/SiLU: at the descriptive rate) (mean over layers; mean and '
                       f'95% CI over seeds; per-layer means; ReLU: non-zero, GELU/SiLU: |a| > {TAU:g})',
                       density_table(chosen)),
            base.Table('ReLU learning-rate x step-budget grid: held-out bits and density at the end of each run '
                       '(mean over seeds; chosen: the rate with the lowest mean held-out bits at T)',
                       grid_table(stats, tuned))]
  return base.Analysis(verdicts=verdicts, headline=headline, tables=tables, figures=plot(chosen, ctx), notes=notes)


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  return analyze_stats(collect(results, ctx.outdir), ctx, failed)


ABLATION = base.Ablation(
    name='activation_sparsity',
    claim=('After training, few FFN hidden activations (after ReLU) are non-zero (3.0% for T5-Base, 6.3% for '
           'ViT-B/16), the sparsity emerges during training (about 50% at initialisation), and larger models '
           'are sparser (Li et al. 2023).'),
    citation=('Li et al. 2023, The Lazy Neuron Phenomenon: On Emergence of Activation Sparsity in Transformers, '
              'ICLR 2023, arXiv 2210.06313 (docs/references.md#li-et-al-2023)'),
    published=f'mean fraction of non-zero FFN activations {PAPER_T5:.1%} (T5-Base), {PAPER_VIT:.1%} (ViT-B/16); '
              'falling with width and depth',
    sweeps=sweeps, analyze=analyze,
    setup=('The `language` task (order-2 sparse Markov chain, V 16, 8 candidates, 4 next tokens, Dirichlet 0.5; '
           'sequences of 32) on a 2-layer pre-norm transformer (2 heads, bias-free FFN as in T5, learned '
           'positions). Adam, warmup, cosine decay, batch 16; ReLU: learning rate tuned per shape over (3e-3, 1e-2, 3e-2) at 1,000 '
           'and 500 steps (separate runs). ReLU over d_ff in (32, 128, 512) at d_model 32 and over d_model (32, 64) '
           'at d_ff = 4 d_model; GELU and SiLU at d_model 32, d_ff 128 (rate 1e-2, 1,000 steps only: descriptive). Density measured per layer on the '
           'held-out sequences at initialisation, half and end of training.'))
