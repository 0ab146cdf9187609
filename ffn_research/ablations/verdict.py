"""LEGACY shim while the studies move to the regime policy (ablations/regime.py): the statistics now live in
ffn_research.stats; the per-study tuning and plateau helpers below feed no ported study and go when the last
study is ported."""
# pylint: skip-file
import dataclasses
import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ffn_research.stats import *  # noqa: F401,F403
from ffn_research.stats import Check, _underpowered  # noqa: F401


def _mean(values) -> tuple[float, int]:
  x = np.atleast_1d(np.asarray(values, float))
  x = x[np.isfinite(x)]
  return (float(x.mean()) if len(x) else math.nan), len(x)


def _values(values) -> str:
  m, n = _mean(values)
  return f'{m:.4g}' if np.ndim(values) == 0 or n == 1 else f'{m:.4g} (mean of {n})'


def plateau_check(name: str, last, previous, tol: float, relative: bool = True) -> Check:
  """Trained to a plateau: the statistic at the last evaluation (or at 2x steps) differs from the
  previous one by < tol (relative to |previous| by default). Per-seed arrays compare their means."""
  m1, _ = _mean(last)
  m0, _ = _mean(previous)
  if not relative:
    change = abs(m1 - m0)
  elif m0 == 0:
    change = 0.0 if m1 == 0 else math.inf
  else:
    change = abs(m1 - m0) / abs(m0)
  passed = bool(math.isfinite(change) and change < tol)
  kind = 'relative change' if relative else 'change'
  return Check(name, passed, f'{_values(last)} at the last evaluation vs {_values(previous)} at the previous: '
                             f'{kind} {change:.3g} ({"<" if passed else ">="} tolerance {tol:g})')


def edge_check(name: str, best_values, grid: Sequence[float]) -> Check:
  """A tuned hyperparameter whose per-seed best sits at the smallest or largest grid value at any point
  fails (the grid may not contain the optimum). `best_values`: {point: per-seed bests}, or a pd.Series
  indexed by point (repeated per seed), e.g. `winners.set_index(by)['best_train.learning_rate']`."""
  if isinstance(best_values, pd.Series):
    idx = list(range(best_values.index.nlevels))
    best_values = {k: g.to_numpy() for k, g in best_values.groupby(level=idx if len(idx) > 1 else 0)}
  lo, hi = float(np.min(grid)), float(np.max(grid))
  at_edge = []
  for point, vals in best_values.items():
    vals = np.atleast_1d(np.asarray(vals, float))
    n_lo, n_hi = int(np.isclose(vals, lo).sum()), int(np.isclose(vals, hi).sum())
    if len(vals) == 1 and (n_lo or n_hi):  # one value per point (e.g. chosen on the mean over seeds)
      at_edge.append(f'{point}: {vals[0]:g}, the grid\'s {"smallest" if n_lo else "largest"}')
    elif n_lo or n_hi:
      where = ', '.join(w for w in (f'{n_lo}/{len(vals)} seeds at {lo:g}' if n_lo else '',
                                    f'{n_hi}/{len(vals)} seeds at {hi:g}' if n_hi else '') if w)
      at_edge.append(f'{point}: {where}')
  grid_s = ', '.join(f'{g:g}' for g in sorted(grid))
  if at_edge:
    return Check(name, False, f'best value at the edge of the grid {{{grid_s}}} for ' + '; '.join(at_edge))
  if all(np.size(v) == 1 for v in best_values.values()):
    chosen = ', '.join(f'{p}: {float(np.ravel(v)[0]):g}' for p, v in best_values.items())
    return Check(name, True, f'chosen value inside the grid {{{grid_s}}} ({chosen})')
  return Check(name, True, f'every per-seed best is inside the grid {{{grid_s}}} ({len(best_values)} points)')


# --------------------------------------------------------------------------- hyperparameter grids

def best_per_point(df: pd.DataFrame, *, by: Sequence[str] | str, over: str = 'train.learning_rate', metric: str,
                   mode: str = 'min', seed: str = 'train.seed') -> pd.DataFrame:
  """Each seed's best row per point of `by`, over the grid values of `over` (rows with a NaN metric, e.g.
  diverged runs, never win; a (point, seed) whose runs all diverged is dropped). Returns the winning rows
  with a column `best_<over>`; `edge_check` reads `winners.set_index(by)[f'best_{over}']`."""
  if mode not in ('min', 'max'):
    raise ValueError(f"mode={mode!r}; allowed: min, max")
  by = [by] if isinstance(by, str) else list(by)
  ok = df[np.isfinite(df[metric].astype(float))]
  if ok.empty:
    return df.iloc[:0].assign(**{f'best_{over}': pd.Series(dtype=float)})
  groups = ok[metric].astype(float).groupby([ok[c] for c in by + [seed]], sort=True)
  idx = groups.idxmin() if mode == 'min' else groups.idxmax()
  winners = ok.loc[idx.to_numpy()].copy()
  winners[f'best_{over}'] = winners[over]
  return winners.reset_index(drop=True)


@dataclasses.dataclass(frozen=True)
class Tuned:
  """`tune_per_point`'s answer: per point one learning rate, its runs, and the checks a verdict on them needs."""
  rows: pd.DataFrame                 # the chosen rate's rows at the full budget (every seed), per point
  table: pd.DataFrame                # per point: chosen rate, mean metric at the full and at the half budget
  checks: dict[Any, tuple[Check, ...]]  # per point: learning rate inside the grid, step-budget plateau
  rates: dict[Any, float] = dataclasses.field(default_factory=dict)  # per point: the chosen rate

  def is_chosen(self, point, rate) -> bool:
    """Whether `rate` is the rate chosen at `point` (a key as in `checks`)."""
    return bool(np.isclose(self.rates.get(point, math.nan), float(rate)))

  def checks_for(self, *points) -> list[Check]:
    """The checks of every named point (a missing point fails: nothing was run there)."""
    out = []
    for p in points:
      out += list(self.checks.get(p, (Check(f'{p}: tuned runs', False, 'no completed runs at this point'),)))
    return out


def tune_per_point(df: pd.DataFrame, *, by: Sequence[str] | str, metric: str, tol: float, relative: bool = True,
                   mode: str = 'min', over: str = 'train.learning_rate', budget: str = 'train.steps',
                   grid: Sequence[float] | None = None, seed: str = 'train.seed') -> Tuned:
  """Learning rate tuned per point, and a step-budget plateau, from a sweep of rate x budget x seeds.

  Per point of `by`: the rate whose mean `metric` over seeds is best at the largest `budget` (each seed's
  run at that rate is kept: one rate per point, so paired seeds stay comparable and no seed picks its own
  lucky rate). Two checks per point:
    - learning rate inside the grid (`edge_check` on the chosen rate): at an edge, the optimum may lie
      outside the grid;
    - step-budget plateau: the best mean metric at the largest budget against the best at the next smaller
      one (separate runs with their own schedules, not a point inside one run: under cosine decay the loss
      of a run flattens as the rate decays whether or not more steps would help); the change must be below
      `tol` (relative to the smaller budget's by default, absolute with relative=False, e.g. log scores).
  Rows with a NaN metric (diverged runs) never win; a rate with fewer finite seeds than the most at its
  point is not eligible (a mean over the survivors would flatter it)."""
  if mode not in ('min', 'max'):
    raise ValueError(f"mode={mode!r}; allowed: min, max")
  by = [by] if isinstance(by, str) else list(by)
  grid = sorted(set(df[over].astype(float))) if grid is None else sorted(float(g) for g in grid)
  sign = 1.0 if mode == 'min' else -1.0
  ok = df[np.isfinite(df[metric].astype(float))]
  rows, table, checks, rates = [], [], {}, {}
  for point, g in ok.groupby(by if len(by) > 1 else by[0], sort=True):
    budgets = sorted(set(g[budget].astype(int)))
    best = {}
    for b in budgets:
      at = g[g[budget].astype(int) == b]
      n = at.groupby(over)[seed].nunique()
      means = at.groupby(over)[metric].mean()[n == n.max()]
      rate = float((sign * means).idxmin())
      best[b] = (rate, float(means.loc[rate]), at[at[over].astype(float) == rate])
    full = budgets[-1]
    rate, m_full, chosen = best[full]
    rows.append(chosen)
    name = ' '.join(map(str, point)) if isinstance(point, tuple) else str(point)
    edge = edge_check(f'{name}: learning rate inside the grid (chosen on the mean over seeds)', {name: [rate]}, grid)
    if len(budgets) < 2:
      flat = Check(f'{name}: step-budget plateau', False, f'only one step budget ({full}) was run: no plateau shown')
      m_half = math.nan
    else:
      half = budgets[-2]
      m_half = best[half][1]
      flat = plateau_check(f'{name}: step-budget plateau ({metric}, tuned, {full} vs {half} steps)', m_full, m_half,
                           tol, relative=relative)
      flat = dataclasses.replace(flat, detail=flat.detail.replace('the last evaluation', f'{full} steps').replace(
          'the previous', f'{half} steps (its own schedule)'))
    checks[point], rates[point] = (edge, flat), rate
    table.append({**dict(zip(by, point if isinstance(point, tuple) else (point,))), 'learning_rate': rate,
                  f'{metric}_full': m_full, f'{metric}_half': m_half, 'seeds': int(chosen[seed].nunique())})
  return Tuned(pd.concat(rows, ignore_index=True) if rows else df.iloc[:0], pd.DataFrame(table), checks, rates)
