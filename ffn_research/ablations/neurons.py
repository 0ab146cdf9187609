"""neurons: which training settings leave dead ReLU units in which layer, and do live units detect n-grams
and promote the tokens that follow them? A 2-layer transformer on the `language` task.

Claims, all *directional* (no source gives a dead-unit level that transfers to a 2-layer toy, so none is
tested; the previous version's "more than 2%" came from no paper and is dropped):
  * Dead units sit in the early layers: Voita, Ferrando, Nalmpantis 2024 ("Neurons in Large Language
    Models: Dead, N-gram, Positional", Findings of ACL 2024, arXiv 2309.04827; docs/references.md) find in
    OPT models (125m-66b) that the early part of the network holds many "dead" FFN neurons (never
    activated on a large collection of diverse data; more than 70% in some layers of the 66b model, more
    with scale). Tested: layer 0 leaves more dead units than layer 1.
  * The dying-ReLU account (a unit knocked off the data gets no gradient and stays dead; the CS231n
    course notes: "as much as 40%" of a network "if the learning rate is set too high"; folklore, not a
    measured law, docs/references.md#lu-et-al-2019 for the mechanism): more units die at a larger
    learning rate, and, death being (nearly) irreversible, more after a longer budget.
  * Weight decay: no source found that states a direction; tested as our hypothesis that decoupled
    weight decay (AdamW 0.1, the OPT setting) leaves more dead units than none.
  * Keys and values (Geva et al. 2021, docs/references.md#geva-et-al-2021; Voita et al. 2024): lower-layer
    keys fire on shallow patterns, many early units are token / n-gram detectors; values promote the
    tokens likely to follow the key's pattern (in Geva et al. above all in the upper layers).

Setup: the `language` task (activation_sparsity's LANGUAGE: order-2 sparse Markov chain, V 16, 8
candidates, 4 next tokens, Dirichlet 0.5, sequences of 32) on a 2-layer pre-norm transformer (2 heads,
d_model 32, d_ff 128, ReLU, bias-free FFN as in T5; activation_sparsity's reference shape). AdamW
(decoupled weight decay on every parameter), warmup steps / 20 then cosine decay, batch 16. Grid:
learning rate in LRS = 1e-3, 1e-2, 3e-2, 1e-1 x weight decay in WDS = 0, 0.1 x two step budgets (each budget its own run with its own
schedule); seeds paired (a seed fixes the language, the data order and the initial weights) and vmapped
(one compiled program per budget: rate and decay are traced). The rate 1e-1 was added after the quick
run (1,000 steps, 3 seeds) of the grid 1e-3..3e-2 killed at most 1% of a layer (layer 1 at 3e-2; the
"kills" premise failed): the grid needs a harsh end to be able to show dying units. Nothing else changed.

Dead units (pure: `dead_mask`): a unit of a layer whose activation is 0 at every position of the held-out
sequences (task.num_eval sequences x seq_len positions; `probe.ffn_hidden`), at initialisation, at the
checkpoint halfway and at the end of each run.

Keys and values (pure: `concentration`, `value_agreement`, at the end of each run, per layer): positions
t >= 1 of the held-out sequences; a unit is live if its TOP_K-th largest activation there is > 0; its
TOP_K = 16 top-activating positions (ties by lower index). N-gram concentration: the fraction of them
whose bigram (x[t-1], x[t]) is their modal bigram (also reported: the current token alone). Baselines:
(a) shuffled keys: each unit's input weights permuted over the d_model coordinates (independently per
unit) and applied to the same FFN inputs (trained upstream), live units of that; (b) chance: TOP_K
positions drawn uniformly without replacement (Monte Carlo). The concentration is measured, not forced:
any key on these inputs (also a random one) responds to the tokens, which is what the shuffled-key
baseline measures. Values: a unit's direct-path logit contribution is proportional to (w2[i] * final-norm
scale) @ W_U (activations > 0 at its top positions), its promoted token the argmax; agreement = the
fraction of its top positions whose next token is that token; baseline: value rows permuted across the
live units of the layer.

Verdict rules (fixed before the full run; `decide`); "cell" = (learning rate, weight decay), "long" = the
larger budget, dead fraction per run = the mean over the two layers unless per layer:
  1. learning rate: per seed, the least-squares slope of the dead fraction (long, weight decay 0) on
     log10 learning rate over LRS; t CI of the mean slope above 0 (verdict.threshold).
  2. weight decay: per seed, dead(wd WDS[1]) - dead(wd 0) averaged over LRS (long); paired CI above 0.
  3. steps: per seed, dead(long) - dead(short) averaged over every cell; paired CI above 0.
  4. layer: per seed, dead(layer 0) - dead(layer 1) averaged over every cell (long); paired CI above 0.
  5, 6. keys, layer 0 and layer 1: per seed, n-gram concentration trained - shuffled keys (mean over live
     units) at the reference cell (REF_LR, weight decay 0, long); paired CI above 0.
  7. values, layer 1 (upper): per seed, agreement trained - permuted value rows at the reference cell;
     paired CI above 0. (Layer 0's is reported, not tested.)
Regime checks (verdict.gate; a failed check makes the verdict `invalid`):
  - kills (1-4): training kills units somewhere in the grid: at the long budget, at the cell with the
    largest mean dead fraction, the per-seed dead fraction at the end minus at initialisation (same seed,
    same initial weights) has its t CI above 0 (premise); if no grid point kills a unit the grid cannot
    show 1-4 (units dead at initialisation are counted but are not deaths caused by training);
  - plateau: the training loss at the last two logs changes by less than PLATEAU_TOL (relative, mean over
    seeds) at every long-budget cell the verdict reads;
  - learned: held-out bits per token more than RANGE_MARGIN below the unigram entropy (mean over seeds) at
    every long-budget cell the verdict reads (a diverged or stuck rate cannot speak for "training");
  - keys/values (5-7): every seed has at least MIN_LIVE live units in the layer, and the shuffled-key
    concentration lies more than 0.05 below 1 (room above the baseline).
The runner applies Holm over the verdicts. The fact-memorization key/value part of the previous version
is dropped (see SCOPE_NOTES).
"""

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
from ffn_research.ablations import activation_sparsity as sparsity  # pylint: disable=wrong-import-position
from ffn_research.ablations import base  # pylint: disable=wrong-import-position
from ffn_research.ablations import verdict  # pylint: disable=wrong-import-position
from ffn_research.config import default_config  # pylint: disable=wrong-import-position

SEED, LR, WD, STEPS = 'train.seed', 'train.learning_rate', 'train.weight_decay', 'train.steps'
TOP_K = 16              # top-activating positions per unit
CHANCE_DRAWS = 2000     # Monte-Carlo draws for the chance concentration
MIN_LIVE = 8            # keys/values: live units per layer and seed
PLATEAU_TOL = 0.05      # relative change of the training loss between the last two logs
RANGE_MARGIN = 0.1      # held-out bits at least this far below the unigram entropy
NUM_LOGS = 20
POINTS = {0: 'init', 1: 'half', 2: 'end'}

_SMOKE_LANGUAGE = dict(sparsity.LANGUAGE, vocab_size=8, num_candidates=4, branching=2, seq_len=8, num_eval=32)
SETTINGS = {
    'smoke': dict(seeds=3, budgets=(20, 40), batch=8, lrs=(1e-3, 1e-2, 3e-2, 1e-1), wds=(0.0, 0.1), ref_lr=1e-2,
                  shape=(16, 32), language=_SMOKE_LANGUAGE),
    'quick': dict(seeds=3, budgets=(200, 1000), batch=16, lrs=(1e-3, 1e-2, 3e-2, 1e-1), wds=(0.0, 0.1), ref_lr=1e-2,
                  shape=(32, 128), language=sparsity.LANGUAGE),
    'full': dict(seeds=5, budgets=(500, 2000), batch=16, lrs=(1e-3, 1e-2, 3e-2, 1e-1), wds=(0.0, 0.1), ref_lr=1e-2,
                 shape=(32, 128), language=sparsity.LANGUAGE),
}


def _base(scale: str) -> ml_collections.ConfigDict:
  s = SETTINGS[scale]
  c = default_config()
  m, t, tr = c.model, c.task, c.train
  m.arch, m.num_layers, m.num_heads = 'transformer', sparsity.NUM_LAYERS, sparsity.NUM_HEADS
  m.activation, m.use_bias = 'relu', False
  m.d_model, m.d_ff = s['shape']
  t.name = 'language'
  for k, v in s['language'].items():
    t[k] = v
  tr.optimizer, tr.batch_size = 'adamw', s['batch']
  return c


def budget(steps: int) -> dict:
  """One step budget's train overrides: warmup steps / 20, NUM_LOGS logs, checkpoints (and evals) at half."""
  return {STEPS: steps, 'train.warmup_steps': max(1, steps // 20), 'train.log_every': max(1, steps // NUM_LOGS),
          'train.checkpoint_every': steps // 2, 'train.eval_every': steps // 2}


def sweeps(scale: str) -> list[base.SweepSpec]:
  s = SETTINGS[scale]
  grid = [{**budget(b), LR: float(lr), WD: float(wd)} for b in s['budgets'] for lr in s['lrs'] for wd in s['wds']]
  return [base.SweepSpec('relu', _base(scale), sweep.product(grid, sweep.values(SEED, range(s['seeds']))))]


# --------------------------------------------------------------------------- metrics (pure)

def dead_mask(acts_NxF: np.ndarray) -> np.ndarray:
  """(F,) bool: units whose activation is <= 0 on every one of the N inputs (ReLU: never non-zero)."""
  return np.all(np.asarray(acts_NxF) <= 0, axis=0)


def top_k_indices(acts_NxF: np.ndarray, k: int) -> np.ndarray:
  """(k, F): per unit the indices of its k largest activations, largest first, ties by lower index."""
  return np.argsort(-np.asarray(acts_NxF), axis=0, kind='stable')[:k]


def live_units(acts_NxF: np.ndarray, k: int) -> np.ndarray:
  """(F,) bool: units whose k-th largest activation is > 0 (a top k of genuinely active inputs)."""
  return np.sort(np.asarray(acts_NxF), axis=0)[-k] > 0


def modal_fraction(labels_KxF: np.ndarray) -> np.ndarray:
  """(F,): per column the fraction of its K labels equal to the column's most common label."""
  labels_KxF = np.asarray(labels_KxF)
  return np.array([np.unique(col, return_counts=True)[1].max() / labels_KxF.shape[0] for col in labels_KxF.T])


def concentration(acts_NxF: np.ndarray, labels_N: np.ndarray, k: int) -> np.ndarray:
  """(F,): per unit the fraction of its top-k inputs sharing their modal label."""
  return modal_fraction(np.asarray(labels_N)[top_k_indices(acts_NxF, k)])


def chance_concentration(labels_N: np.ndarray, k: int, draws: int = CHANCE_DRAWS, seed: int = 0) -> float:
  """Expected modal fraction of k inputs drawn uniformly without replacement (Monte Carlo)."""
  rng = np.random.default_rng(seed)
  n, out = len(labels_N), []
  for start in range(0, draws, 256):
    idx_KxD = np.argpartition(rng.random((n, min(256, draws - start))), k - 1, axis=0)[:k]
    out.append(modal_fraction(np.asarray(labels_N)[idx_KxD]))
  return float(np.concatenate(out).mean())


def value_agreement(acts_NxF: np.ndarray, next_N: np.ndarray, promoted_F: np.ndarray, k: int) -> np.ndarray:
  """(F,): per unit the fraction of its top-k inputs whose next token is the unit's promoted token."""
  return np.mean(np.asarray(next_N)[top_k_indices(acts_NxF, k)] == np.asarray(promoted_F)[None, :], axis=0)


def shuffle_keys(w1_DxF: np.ndarray, seed: int) -> np.ndarray:
  """Each column (a unit's input weights) permuted over the input coordinates, independently."""
  rng = np.random.default_rng(seed)
  return np.stack([rng.permutation(col) for col in np.asarray(w1_DxF).T], axis=1)


def ngram_labels(tokens_NxT: np.ndarray, vocab: int) -> dict[str, np.ndarray]:
  """Per position t >= 1 (flattened (N, T - 1)): 'token' x[t], 'ngram' the bigram (x[t-1], x[t])."""
  x = np.asarray(tokens_NxT)
  return {'token': x[:, 1:].reshape(-1), 'ngram': (x[:, :-1] * vocab + x[:, 1:]).reshape(-1)}


# --------------------------------------------------------------------------- reading models

def promoted_tokens(model, layer: int) -> np.ndarray:
  """(F,): per unit the token its value row promotes most (direct path through the final norm's scale)."""
  ffn = model.blocks[layer].ffn
  w_u = np.asarray(model.embed[...]).T if model.unembed is None else np.asarray(model.unembed[...])
  return np.argmax((np.asarray(ffn.w2[...]) * np.asarray(model.final_norm.scale[...])) @ w_u, axis=1)


def key_value(model, tokens_NxT, next_NxT, layer: int, seed: int) -> dict:
  """One layer's n-gram concentration (trained, shuffled keys), token concentration, value agreement."""
  x_NxTxD = probe.ffn_input(model, tokens_NxT, layer)[:, 1:]
  x = x_NxTxD.reshape(-1, x_NxTxD.shape[-1])
  w1 = np.asarray(model.blocks[layer].ffn.w1[...])
  acts = {'trained': np.maximum(x @ w1, 0), 'shuffled': np.maximum(x @ shuffle_keys(w1, seed + 2000 + layer), 0)}
  labels = ngram_labels(tokens_NxT, model.embed.shape[0])
  out = {}
  for name, a in acts.items():
    live = live_units(a, TOP_K)
    out[f'{name}_live'] = int(live.sum())
    for lab, y in labels.items():
      out[f'{name}_{lab}'] = float(concentration(a[:, live], y, TOP_K).mean()) if live.any() else math.nan
  a = acts['trained']
  live = live_units(a, TOP_K)
  nxt = np.asarray(next_NxT)[:, 1:].reshape(-1)
  promoted = promoted_tokens(model, layer)[live]
  perm = np.random.default_rng(seed + 1000 + layer).permutation(len(promoted))
  ok = live.any()
  out['value'] = float(value_agreement(a[:, live], nxt, promoted, TOP_K).mean()) if ok else math.nan
  out['value_permuted'] = float(value_agreement(a[:, live], nxt, promoted[perm], TOP_K).mean()) if ok else math.nan
  return out


_CHANCE: dict[bytes, dict] = {}


def chance_of(tokens_NxT: np.ndarray, vocab: int) -> dict[str, float]:
  """Chance concentrations of the held-out positions' bigrams and tokens (cached: a seed's text is fixed)."""
  key = np.asarray(tokens_NxT).tobytes()
  if key not in _CHANCE:
    _CHANCE[key] = {f'chance_{lab}': chance_concentration(y, TOP_K) for lab, y in ngram_labels(tokens_NxT, vocab).items()}
  return _CHANCE[key]


def run_rows(run_dir: str, row: pd.Series) -> list[dict]:
  """Per (point, layer) of one run: dead fraction; at the end also key_value."""
  config, models, data = base.models_over_training(run_dir)
  last, prev = base.last_two_losses(run_dir)
  tokens, nxt = np.asarray(data['eval']['inputs']), np.asarray(data['eval']['targets'])
  steps, seed = int(config.train.steps), int(config.train.seed)
  run = {'lr': float(config.train.learning_rate), 'wd': float(config.train.weight_decay), 'steps': steps,
         SEED: seed, 'loss_last': last, 'loss_previous': prev, 'eval_bits': float(row['eval_bits']),
         'unigram_bits': float(row['unigram_bits']), 'floor_bits': float(row['floor_bits'])}
  chance = chance_of(tokens, config.task.vocab_size)
  rows = []
  for step, model in models.items():
    point = POINTS[int(round(2 * step / steps))]
    for layer in range(len(model.blocks)):
      acts = probe.ffn_hidden(model, tokens, layer)
      r = {**run, 'point': point, 'layer': layer, 'dead': float(dead_mask(acts.reshape(-1, acts.shape[-1])).mean())}
      if point == 'end':
        r.update(key_value(model, tokens, nxt, layer, seed), **chance)
      rows.append(r)
  return rows


def collect(results: dict[str, pd.DataFrame], outdir: str) -> pd.DataFrame:
  rows = []
  for name, df in results.items():
    for _, r in base.completed(df).iterrows():
      rows += run_rows(os.path.join(outdir, name, 'runs', r['name']), r)
  return pd.DataFrame(rows)


# --------------------------------------------------------------------------- analysis (pure in the frame)

def per_run(stats: pd.DataFrame, point: str = 'end', layer: int | None = None) -> pd.DataFrame:
  """Per (lr, wd, steps, seed) at `point`: the figures averaged over the layers (or of one layer)."""
  g = stats[stats['point'] == point]
  if layer is not None:
    g = g[g['layer'] == layer]
  cols = [c for c in g.columns if c not in ('lr', 'wd', 'steps', SEED, 'point', 'layer')]
  return g.groupby(['lr', 'wd', 'steps', SEED], as_index=False)[cols].mean()


def _cell(lr: float, wd: float) -> str:
  return f'lr {lr:g}, wd {wd:g}'


def _per_seed(t: pd.DataFrame, col: str = 'dead') -> np.ndarray:
  """Per seed (sorted) the mean of `col` over the rows of that seed."""
  return t.groupby(SEED)[col].mean().sort_index().to_numpy(float)


def regime_checks(stats: pd.DataFrame, cells, steps: int) -> list[verdict.Check]:
  """Plateau and learned checks at the given (lr, wd) cells of the `steps` budget, one check each."""
  end = per_run(stats)
  plateau, learned = [], []
  for lr, wd in cells:
    e = end[(end['lr'] == lr) & (end['wd'] == wd) & (end['steps'] == steps)]
    plateau.append(verdict.plateau_check(_cell(lr, wd), e['loss_last'], e['loss_previous'], PLATEAU_TOL))
    learned.append(verdict.range_check(_cell(lr, wd), e['eval_bits'], ceiling=float(e['unigram_bits'].mean()),
                                       margin=RANGE_MARGIN))
  return [verdict.all_of(f'plateau at {steps} steps: training loss at the last two logs within {PLATEAU_TOL:.0%}',
                         plateau),
          verdict.all_of(f'learned at {steps} steps: held-out bits more than {RANGE_MARGIN:g} below the unigram '
                         'entropy', learned)]


def dead_checks(stats: pd.DataFrame, steps: int) -> list[verdict.Check]:
  """Premise: training kills units somewhere in the grid (the deadliest cell, end minus initialisation)."""
  end, init = per_run(stats), per_run(stats, 'init')
  end = end[end['steps'] == steps]
  means = end.groupby(['lr', 'wd'])['dead'].mean()
  lr, wd = means.idxmax() if len(means) else (math.nan, math.nan)
  keys = ['lr', 'wd', 'steps', SEED]
  cell = end[(end['lr'] == lr) & (end['wd'] == wd)].merge(init[keys + ['dead']], on=keys, suffixes=('', '_init'))
  killed = (cell['dead'] - cell['dead_init']).to_numpy(float)
  m, lo, hi = verdict.mean_ci(killed) if len(killed) > 1 else (math.nan, math.nan, math.nan)
  return [verdict.premise_check('kills: training kills units somewhere in the grid', m, (lo, hi), 1e-9,
                                what=f'dead fraction at the end minus at initialisation, same seeds, at the '
                                     f'deadliest cell ({_cell(lr, wd)}, {steps} steps)')]


def key_checks(end_layer: pd.DataFrame, seeds: int) -> list[verdict.Check]:
  """Every seed has MIN_LIVE live units; the shuffled-key baseline leaves room below 1."""
  few = end_layer[end_layer['trained_live'] < MIN_LIVE]
  n = end_layer[SEED].nunique()
  live = verdict.Check(f'live: every seed has >= {MIN_LIVE} live units', n == seeds and few.empty,
                       f'{n}/{seeds} seeds; live units per seed: {end_layer["trained_live"].tolist()}')
  room = verdict.range_check('room: shuffled-key n-gram concentration below 1', end_layer['shuffled_ngram'],
                             ceiling=1.0, margin=0.05)
  return [live, room]


def decide(stats: pd.DataFrame, scale: str) -> list[verdict.Verdict]:
  """The seven verdicts of the module docstring, each gated on its checks."""
  s = SETTINGS[scale]
  short, long = s['budgets']
  lrs, wds = s['lrs'], s['wds']
  end = per_run(stats)
  lo = end[end['steps'] == long]
  every = [(lr, wd) for lr in lrs for wd in wds]
  dead = dead_checks(stats, long)
  flat = lo[lo['wd'] == 0.0].copy()
  flat['log_lr'] = np.log10(flat['lr'])
  fits = verdict.per_seed_fits(flat['log_lr'].to_numpy(float), flat['dead'].to_numpy(float), flat[SEED].to_numpy())
  v1 = verdict.threshold(fits['slope'], level=0.0, direction='above',
                         claim=f'more ReLU units die at a larger learning rate: per-seed slope of the dead fraction '
                               f'(mean over layers, {long} steps, no weight decay) on log10 lr over {list(lrs)} > 0')
  v1 = verdict.gate(v1, dead + regime_checks(stats, [(lr, 0.0) for lr in lrs], long))
  wd = wds[-1]
  v2 = verdict.paired(_per_seed(lo[lo['wd'] == wd]), _per_seed(lo[lo['wd'] == 0.0]), expect='greater',
                      claim=f'more units die with weight decay {wd:g} than without (AdamW; per seed, mean over '
                            f'the learning rates and layers, {long} steps)')
  v2 = verdict.gate(v2, dead + regime_checks(stats, every, long))
  v3 = verdict.paired(_per_seed(lo), _per_seed(end[end['steps'] == short]), expect='greater',
                      claim=f'more units are dead after {long} steps than after {short} (separate runs, each with '
                            'its own schedule; per seed, mean over the cells and layers)')
  v3 = verdict.gate(v3, dead + regime_checks(stats, every, long))
  l0, l1 = per_run(stats, layer=0), per_run(stats, layer=1)
  v4 = verdict.paired(_per_seed(l0[l0['steps'] == long]), _per_seed(l1[l1['steps'] == long]), expect='greater',
                      claim=f'the early layer has more dead units than the later one (Voita et al. 2024): '
                            f'dead(layer 0) - dead(layer 1) per seed, mean over the cells, {long} steps')
  v4 = verdict.gate(v4, dead + regime_checks(stats, every, long))
  return [v1, v2, v3, v4] + key_value_verdicts(stats, scale)


def key_value_verdicts(stats: pd.DataFrame, scale: str) -> list[verdict.Verdict]:
  """Verdicts 5-7 at the reference cell."""
  s = SETTINGS[scale]
  long, ref = s['budgets'][1], s['ref_lr']
  regime = regime_checks(stats, [(ref, 0.0)], long)
  out = []
  for layer in (0, 1):
    e = per_run(stats, layer=layer)
    e = e[(e['steps'] == long) & (e['lr'] == ref) & (e['wd'] == 0.0)].sort_values(SEED)
    v = verdict.paired(e['trained_ngram'], e['shuffled_ngram'], expect='greater',
                       claim=f'keys, layer {layer}: a live unit\'s top-{TOP_K} positions share their bigram '
                             f'(x[t-1], x[t]) more than with shuffled input weights ({_cell(ref, 0.0)}, {long} steps)')
    out.append(verdict.gate(v, key_checks(e, s['seeds']) + regime))
    if layer == 1:
      v = verdict.paired(e['value'], e['value_permuted'], expect='greater',
                         claim=f'values, layer 1: the token a live unit\'s value row promotes is the next token at its '
                               f'top-{TOP_K} positions more often than with value rows permuted across units')
      out.append(verdict.gate(v, key_checks(e, s['seeds']) + regime))
  return out


def dead_table(stats: pd.DataFrame) -> pd.DataFrame:
  """Per (steps, wd, lr): dead fraction per layer at init / half / end (mean over seeds), the end CI, and bits."""
  rows = []
  end = per_run(stats)
  for (steps, wd, lr), g in end.groupby(['steps', 'wd', 'lr'], sort=True):
    m, lo, hi = verdict.mean_ci(g['dead']) if len(g) > 1 else (float(g['dead'].mean()), math.nan, math.nan)
    row = {'steps': steps, 'wd': wd, 'lr': lr, 'seeds': len(g), 'dead (mean of layers)': m, 'CI': f'[{lo:.3g}, {hi:.3g}]'}
    for point in POINTS.values():
      pl = stats[(stats['point'] == point) & (stats['steps'] == steps) & (stats['wd'] == wd) & (stats['lr'] == lr)]
      for layer, gl in pl.groupby('layer'):
        row[f'L{layer} {point}'] = float(gl['dead'].mean())
    row['excess bits'] = float((g['eval_bits'] - g['floor_bits']).mean())
    row['unigram - floor'] = float((g['unigram_bits'] - g['floor_bits']).mean())
    row['loss change, last log'] = float(((g['loss_last'] - g['loss_previous']) / g['loss_previous']).mean())
    rows.append(row)
  return pd.DataFrame(rows)


KV_COLS = ['trained_live', 'trained_ngram', 'shuffled_ngram', 'chance_ngram', 'trained_token', 'shuffled_token',
           'chance_token', 'value', 'value_permuted']


def kv_table(stats: pd.DataFrame, steps: int) -> pd.DataFrame:
  """Per (layer, wd, lr) at the end of the `steps` budget: key/value figures, means over seeds."""
  end = stats[(stats['point'] == 'end') & (stats['steps'] == steps)]
  t = end.groupby(['layer', 'wd', 'lr'], as_index=False)[KV_COLS].mean()
  return t.round(4)


def _dead_plot(ax, stats: pd.DataFrame, layer: int, scale: str) -> None:
  end = per_run(stats, layer=layer)
  for i, ((steps, wd), g) in enumerate(end.groupby(['steps', 'wd'], sort=True)):
    t = verdict.summarize(g, ['lr'], ['dead'])
    base.errorbar_ci(ax, t['lr'] * (1 + 0.04 * (i - 1.5)), t['dead_mean'], t['dead_ci_lo'], t['dead_ci_hi'],
                     color=f'C{i}', fmt='o-' if wd == 0 else 'o--', label=f'{steps} steps, wd {wd:g}')
  base.style_axes(ax, xlabel='learning rate (peak)', ylabel='dead fraction of the FFN units',
                  title=f'layer {layer} ({scale})', xscale='log')


def _kv_plot(ax, stats: pd.DataFrame, scale: str) -> None:
  s = SETTINGS[scale]
  e = stats[(stats['point'] == 'end') & (stats['steps'] == s['budgets'][1]) & (stats['lr'] == s['ref_lr'])
            & (stats['wd'] == 0.0)]
  series = [('trained_ngram', 'keys: trained'), ('shuffled_ngram', 'keys: shuffled'), ('chance_ngram', 'keys: chance'),
            ('value', 'values: own'), ('value_permuted', 'values: permuted')]
  x = np.arange(2)
  for j, (col, label) in enumerate(series):
    m = [e[e['layer'] == layer][col].mean() for layer in (0, 1)]
    sd = [e[e['layer'] == layer][col].std() for layer in (0, 1)]
    ax.bar(x + (j - 2) * 0.16, m, 0.16, yerr=sd, capsize=2, label=label, color=f'C{j}')
  ax.set_xticks(x, ['layer 0', 'layer 1'])
  base.style_axes(ax, xlabel='', ylabel=f'share of a live unit\'s top-{TOP_K} positions',
                  title=f'keys: same bigram; values: promoted = next token ({_cell(s["ref_lr"], 0.0)})')


def plot(stats: pd.DataFrame, ctx: base.Context) -> list[base.Figure]:
  fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
  for layer in (0, 1):
    _dead_plot(axes[layer], stats, layer, ctx.scale)
  _kv_plot(axes[2], stats, ctx.scale)
  return [base.save_figure(fig, ctx.outdir, 'neurons.png',
                           'left, middle: fraction of the FFN units never non-zero on the held-out sequences at the '
                           'end of training, per layer, vs the peak learning rate, per step budget (colour) and '
                           'weight decay (dashed: 0.1); mean and 95% CI over seeds. Right, reference cell: share of '
                           f'a live unit\'s top-{TOP_K} positions sharing their modal bigram (trained keys, keys '
                           'with shuffled input weights, random positions) and whose next token is the token the '
                           'unit\'s value row promotes (own vs permuted value rows); mean ± sd over seeds')]


def notes(stats: pd.DataFrame, scale: str) -> list[str]:
  """Where the dead units are, and whether training or initialisation made them."""
  s = SETTINGS[scale]
  init, half, end = (per_run(stats, p) for p in ('init', 'half', 'end'))
  long = end[end['steps'] == s['budgets'][1]]
  half_long = half[half['steps'] == s['budgets'][1]]
  return [f'dead fraction (mean over layers, cells and seeds): initialisation {init["dead"].mean():.4f}; '
          f'{s["budgets"][1]}-step runs at half {half_long["dead"].mean():.4f}, at the end {long["dead"].mean():.4f}; '
          f'largest single run {end["dead"].max():.4f}',
          f'weight decay applies to every parameter (optax.adamw, no mask): embeddings and norm scales decay too; '
          'a bias-free ReLU unit with zero gradient keeps the sign of w1 . x as decay shrinks w1, so decay alone '
          'neither kills nor revives a unit, only the moving inputs and the Adam momentum can']


SCOPE_NOTES = [
    'Toy scope: 2 layers, d_ff 128, a 16-token order-2 Markov language: "early vs late" is layer 0 vs layer 1, '
    'and the n-grams a unit can detect are bigrams of a language whose next token depends on exactly the last '
    'two. Voita et al. measured OPT (125m-66b, ReLU with biases) on a large diverse corpus; their >70% dead '
    'in some layers of the 66b model is not a level this toy is expected to reach, so no level is tested.',
    'Dead means never non-zero on the held-out probe set (256 sequences x 32 positions); a unit dead there '
    'may fire on text outside it. Only the probe set is seen by the analysis, the training data are fresh samples.',
    'The shuffled-key baseline is the comparison for the key verdicts: the FFN input carries the current token '
    '(embedding) and, through attention, the previous one, so any key, also a random one, concentrates on '
    'bigrams above chance; the verdicts ask whether trained keys do so more.',
    'Dropped from the previous version (fact memorization, one FFN block; its verdicts are in history.md): '
    'the 2% dead level (no source), the GELU/SiLU comparison (out of this rework\'s grid), and the fact '
    'key/value analysis: on a one-block memorizer whose FFN input is nearly additive in subject and '
    'relation, any key concentrates on a relation (0.826 with shuffled keys vs 0.887 trained), so the '
    'measured +0.06 was mostly relation-driven and says little about key-value memories; the language '
    'n-gram analysis replaces it.',
]


def analyze_stats(stats: pd.DataFrame, ctx: base.Context, failed: dict[str, int] | None = None) -> base.Analysis:
  """Verdicts, tables, notes and figure from collect's frame (pure in the frame)."""
  verdicts = decide(stats, ctx.scale)
  s = SETTINGS[ctx.scale]
  extra = [f'runs not completed (excluded): {failed}'] if failed and any(failed.values()) else []
  v = verdicts
  headline = (f'dead-fraction slope per decade of lr {v[0].statistic:+.3f} [{v[0].ci[0]:+.3f}, {v[0].ci[1]:+.3f}]; '
              f'wd {v[1].statistic:+.3f}; steps {v[2].statistic:+.3f}; layer 0 - 1 {v[3].statistic:+.3f}; '
              f'n-gram keys minus shuffled L0 {v[4].statistic:+.3f}, L1 {v[5].statistic:+.3f}; '
              f'values minus permuted L1 {v[6].statistic:+.3f}')
  tables = [base.Table('dead fraction per cell (end: mean over layers, mean and 95% CI over seeds; per layer L0/L1 '
                       'at init, half, end), excess held-out bits over the true chain, and the relative change '
                       'of the training loss at the last log', dead_table(stats)),
            base.Table(f'keys and values at the end of the {s["budgets"][1]}-step runs, per layer and cell (means '
                       f'over seeds; live units: TOP_K-th activation > 0; concentration = share of the top-{TOP_K} '
                       'positions with the modal bigram / token)', kv_table(stats, s['budgets'][1]))]
  return base.Analysis(verdicts=verdicts, headline=headline, tables=tables, figures=plot(stats, ctx),
                       notes=notes(stats, ctx.scale) + extra + SCOPE_NOTES)


def analyze(results: dict[str, pd.DataFrame], ctx: base.Context) -> base.Analysis:
  failed = {k: int((v['status'] != 'completed').sum()) for k, v in results.items()}
  return analyze_stats(collect(results, ctx.outdir), ctx, failed)


ABLATION = base.Ablation(
    name='neurons',
    claim=('Directional: in a ReLU transformer more FFN units die (never activate) at a larger learning rate, with '
           'weight decay, after longer training, and in the early layer (Voita et al. 2024: many dead neurons in '
           'the early layers of OPT); live units are n-gram detectors (Voita et al. 2024; Geva et al. 2021: '
           'lower-layer keys fire on shallow patterns) whose values promote the tokens that follow them.'),
    citation=('Voita, Ferrando, Nalmpantis 2024 (Neurons in Large Language Models: Dead, N-gram, Positional, '
              'Findings of ACL 2024, arXiv 2309.04827); Geva, Schuster, Berant, Levy 2021 (Transformer Feed-Forward '
              'Layers Are Key-Value Memories); the dying-ReLU account (Lu et al. 2019; CS231n notes)'),
    published=('qualitative: OPT has many dead neurons in the early layers (more than 70% in some layers of the 66b '
               'model; more with scale); many live early neurons are token / n-gram detectors; no learning-rate or '
               'weight-decay dependence is quantified in these sources'),
    sweeps=sweeps, analyze=analyze,
    setup=('The `language` task (order-2 sparse Markov chain, V 16, sequences of 32) on a 2-layer pre-norm '
           'transformer (2 heads, d_model 32, d_ff 128, ReLU, bias-free FFN). AdamW, warmup then cosine decay, '
           'batch 16; learning rate 1e-3 / 1e-2 / 3e-2 / 1e-1 x weight decay 0 / 0.1 x 500 / 2,000 steps, 5 seeds. Dead '
           'units and keys/values read per layer on 256 held-out sequences at initialisation, half and end.'))
