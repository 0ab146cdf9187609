"""What a study declares: its claim, its arms per scale, its rules and its figure.

A study module `ffn_research/ablations/NAME.py` defines one module-level `ABLATION = Study(...)`;
it is found by name (ffn_research.ablations.get). A study holds only its claim: the runner
(ablations/runner.py) plans the runs from the study's `Regime` (ablations/regime.py), tunes the
learning rate, checks the regime, extends the grid or the budget, applies Holm and writes the report.
See docs/reproduce.md.
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
import os
import re
import sys
from typing import Any

from matplotlib import figure as mpl_figure
import ml_collections
import numpy as np
import pandas as pd

from ffn_research import loop
from ffn_research import programs
from ffn_research import stats
from ffn_research.ablations import regime as regime_lib

SCALE_NOTES = {
  'smoke': 'smoke scale: a seconds-long pipeline check, NOT a result',
  'quick': 'quick scale (<= 10 min on 2 CPU cores): fewer points/steps than the full setting',
  'full': 'full scale (the setting the README quotes)',
  'large': 'large scale (for GPU/TPU machines)',
}


@dataclasses.dataclass(frozen=True)
class Table:
  title: str  # shown as a heading above the table
  frame: pd.DataFrame  # written with DataFrame.to_markdown-like formatting


@dataclasses.dataclass(frozen=True)
class Figure:
  file: str  # PNG file name inside the ablation's output folder
  caption: str  # what is plotted, including the reference line drawn


Check = stats.Check
Regime = regime_lib.Regime
RATE_POLICIES = (regime_lib.TUNED, regime_lib.COMMON)  # Claim.rate values


class ReproduceError(ValueError):
  """A bad request (unknown scale, unpublishable report, ...): one line for the user."""


def log(msg: str) -> None:
  print(f'[reproduce] {msg}', file=sys.stderr, flush=True)


class StudyError(ValueError):
  """A study that does not declare what a verdict needs (kind, scope, premise): it does not load; one line."""


@dataclasses.dataclass(frozen=True)
class Claim:
  """What one verdict of a study is, declared before any run (`Study.claims`, in the order `rules` returns them)."""

  kind: str  # stats.SIGN ('A beats B after T steps'), MAGNITUDE ('a slope of -2') or EXISTENCE ('can reach')
  scope: str  # one sentence: what is tested (the toy, its sizes, its budget), what is matched and what is not
  premise: str  # the positive control, in words: the condition under which this setup can show the effect
  # (the rule computes it from the same runs, as a check with role stats.PREMISE)
  rate: str = regime_lib.TUNED  # 'tuned': each point read at its own tuned rate; 'common': the verdict's points read at
  # one rate shared by them at each budget (the best mean metric over them; its ties read as every tie is), so
  # that a comparison across sizes is not moved by which rate won at each size (regime.pooled)
  diverged_is_measured: bool = False  # the verdict's outcome is divergence: a diverged run is a measurement of it,
  # not a missing one (the runner's every-seed check counts it)


@dataclasses.dataclass(frozen=True)
class DesignChange:
  """A change to a study's design, statistic or rule made after a result of it was seen (the report lists them)."""

  date: str  # YYYY-MM-DD
  commit: str  # the commit that made it ('' if not recorded)
  change: str  # what changed, before -> after
  outcome: str  # the verdicts' outcomes before -> after (or what it did to the numbers)
  verdicts: tuple[int, ...] = ()  # the 1-based verdicts it moved
  to_positive: tuple[int, ...] = ()  # those it turned from a null (not reproduced / inconclusive / invalid) into
  # reproduced: their verdict lines say so

  def to_dict(self) -> dict[str, Any]:
    return {**dataclasses.asdict(self), 'verdicts': list(self.verdicts), 'to_positive': list(self.to_positive)}


@dataclasses.dataclass(frozen=True)
class Dropped:
  """A claim the study no longer judges because its setup cannot express it: said in the report, not a verdict."""

  claim: str  # the claim as it was judged, with its citation
  reason: str  # why this setup cannot test it, with the numbers that show it and what testing it would need
  date: str  # YYYY-MM-DD of the decision (a change after results: the study's `changes` has its row)
  before: str  # its last outcome as a verdict (the README's table says it beside the count)
  commit: str = ''
  renumbered: str = ''  # the verdict numbers of the rows before the drop, old -> new, where it moved them

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Arm:
  """One sweep of a study: its base config and its points, each run over the regime's rates, budgets, seeds."""

  name: str  # sweep folder DIR/NAME/<name>/
  base: ml_collections.ConfigDict  # base config of every run
  points: Mapping[str, Mapping[str, Any]]  # point label -> overrides of the point (its shape, variant, ...)
  tuned: bool = True  # False: every run at base.train.learning_rate, no rate check
  budget: Callable[[int], dict[str, Any]] | None = None  # steps -> overrides of that budget (default: budget())
  rates: tuple[float, ...] | None = None  # this arm's starting grid (default: the regime's)
  steps_factor: int = 1  # this arm's starting T is regime.steps * steps_factor
  pad_flops_factor: float = programs.PAD_FLOPS_FACTOR  # sweep.run_sweep's d_ff padding bound (1.0: none)
  seeds: int | None = None  # this arm's number of seeds (default: the regime's); arms pair on the seeds they share
  first_seed: int = 0  # its seeds start here (plus --seed_offset): a pilot on seeds no other arm reads
  rate_from: Callable[[pd.DataFrame], float] | None = None  # an untuned arm whose one rate a rule reads from the
  # runs of the arms listed before it (a pilot's), each pass, once they have run; nan: no rate, the arm does not run

  def seed_range(self, regime_seeds: int, seed_offset: int = 0) -> range:
    """The seeds this arm runs: `seeds` (default `regime_seeds`) from first_seed + seed_offset."""
    start = self.first_seed + seed_offset
    return range(start, start + (regime_seeds if self.seeds is None else self.seeds))

  def label(self, point: str) -> str:
    """The point's name across the study: 'arm: point' ('arm' for a point labelled '')."""
    return f'{self.name}: {point}' if point else self.name


def budget(steps: int, num_logs: int = 10) -> dict[str, Any]:
  """A budget's own schedule: `steps` steps, `num_logs` metric lines, no checkpoints."""
  return {'train.steps': steps, 'train.log_every': max(1, steps // num_logs), 'train.checkpoint_every': 0}


def paired_by_seed(sel: pd.DataFrame, a: str, b: str, key: str) -> tuple[np.ndarray, np.ndarray]:
  """Per seed present at both points (sorted): (key at point a, key at point b)."""
  x, y = (sel[sel['point'] == p].set_index(regime_lib.SEED)[key] for p in (a, b))
  both = x.to_frame('a').join(y.to_frame('b'), how='inner').sort_index().dropna()
  return both['a'].to_numpy(float), both['b'].to_numpy(float)


@dataclasses.dataclass(frozen=True)
class Result:
  """What a study's `present` reads: every run, the tuning, the selections and the final verdicts."""

  frame: pd.DataFrame  # every planned run: results.csv columns, `collect`'s, 'arm', 'point'
  tuning: pd.DataFrame  # regime.tune: per (point, level) the chosen rate
  full: pd.DataFrame  # the runs at each point's chosen rate at T (every seed)
  half: pd.DataFrame  # the same at T/2
  verdicts: list[stats.Verdict]  # after the regime checks and Holm
  scale: str
  ladder: Mapping[str, pd.DataFrame] = dataclasses.field(default_factory=dict)  # level (regime.LEVELS) -> runs


@dataclasses.dataclass
class Presentation:
  """What a study shows besides its verdicts."""

  headline: str  # main figure in one line
  tables: list['Table'] = dataclasses.field(default_factory=list)
  figures: list['Figure'] = dataclasses.field(default_factory=list)  # the first is the main plot
  checks: list[Check] = dataclasses.field(default_factory=list)  # shown; gate verdicts in `rules` instead
  notes: list[str] = dataclasses.field(default_factory=list)


# A name in braces left in a claim's text: a string part that lost its f prefix.
UNFORMATTED = re.compile(r'\{[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\}')


@dataclasses.dataclass(frozen=True)
class Study:
  """One claim: what it says, the runs that test it, the rule that decides it, and its figure."""

  name: str  # registry name, = module name
  claim: str  # one sentence, with citation and published number
  citation: str
  published: str  # the published / theoretical number tested
  regimes: Mapping[str, regime_lib.Regime]  # scale -> rates, T, seeds, cap
  arms: Callable[[str], Sequence[Arm]]  # scale -> arms
  rules: Callable[[pd.DataFrame, str], list[stats.Verdict]]  # (runs at one budget's chosen rates, scale) ->
  # verdicts, each naming its `points`
  collect: Callable[[str, Mapping[str, Any]], dict[str, Any]] | None = None  # (run dir, results row) -> values
  # tables, figure(s), headline; None: the registry (ablations.get) attaches ablations/present/NAME.py's `present`
  present: Callable[[Result, 'Context'], Presentation] | None = None
  setup: str = ''  # task/model in words, for the report
  claims: Sequence[Claim] = ()  # one per verdict of `rules`, in its order: kind, scope, premise
  changes: Sequence[DesignChange] = ()  # every change made after a result of this study was seen
  dropped: Sequence[Dropped] = ()  # claims judged once and no longer: the report says which and why

  def __post_init__(self):
    if not self.claims:
      raise StudyError(f'study {self.name}: declares no claims (base.Claim: kind, scope, premise per verdict)')
    for i, c in enumerate(self.claims, 1):
      if c.kind not in stats.KINDS:
        raise StudyError(f'study {self.name}: verdict {i} has kind {c.kind!r}; allowed: {", ".join(stats.KINDS)}')
      if c.rate not in RATE_POLICIES:
        raise StudyError(f'study {self.name}: verdict {i} has rate {c.rate!r}; allowed: {", ".join(RATE_POLICIES)}')
      for field in ('premise', 'scope'):
        if not str(getattr(c, field)).strip():
          raise StudyError(f'study {self.name}: verdict {i} declares no {field}')
        if hole := UNFORMATTED.search(str(getattr(c, field))):
          raise StudyError(f'study {self.name}: verdict {i} {field} has an unformatted {hole.group()} (no f prefix?)')

  @property
  def scales(self) -> tuple[str, ...]:
    return tuple(self.regimes)


@dataclasses.dataclass(frozen=True)
class Context:
  """Handed to an ablation's analysis."""

  outdir: str  # where PNGs go (DIR/NAME)
  scale: str  # one of ablations.SCALES


def figure(rows: int = 1, cols: int = 1, size: tuple[float, float] = (5.0, 3.6)):
  """(Figure, axes) of a rows x cols grid, each panel `size` inches; no pyplot, no global state."""
  fig = mpl_figure.Figure(figsize=(size[0] * cols, size[1] * rows))
  axes = fig.subplots(rows, cols, squeeze=False)
  return fig, axes if rows * cols > 1 else axes[0, 0]


def save_figure(fig, outdir: str, file: str, caption: str, dpi: int = 120) -> Figure:
  """Lays out and writes outdir/file; returns the report's Figure entry."""
  fig.tight_layout()
  fig.savefig(os.path.join(outdir, file), dpi=dpi)
  return Figure(file, caption)


def style_axes(
  ax,
  *,
  xlabel: str,
  ylabel: str,
  title: str = '',
  xscale: str | None = None,
  yscale: str | None = None,
  xbase: float = 10,
  legend: bool = True,
  fontsize: float = 7,
  title_size: float | None = None,
) -> None:
  """The axis setup every ablation plot repeats: scales, labels, title, legend, grid. A log scale is set only
  where the axis holds positive data (a panel with none, e.g. every run collapsed, stays linear and empty)."""
  lim = ax.dataLim
  if xscale == 'log' and np.isfinite(lim.x1) and lim.x1 > 0:
    ax.set_xscale('log', base=xbase)
  elif xscale and xscale != 'log':
    ax.set_xscale(xscale)
  if yscale and (yscale != 'log' or (np.isfinite(lim.y1) and lim.y1 > 0)):
    ax.set_yscale(yscale)
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  if title:
    ax.set_title(title, fontsize=title_size)
  if legend:
    ax.legend(fontsize=fontsize)
  ax.grid(True, which='both', alpha=0.3)


def errorbar_ci(ax, x, mean, lo, hi, **kwargs) -> None:
  """Points at `mean` with asymmetric bars to [lo, hi] (NaN or infinite bars, e.g. an unbounded Fieller interval,
  drawn as none: an infinite one would make the axis limits, and the figure's transform, singular)."""
  mean, lo, hi = (np.asarray(v, float) for v in (mean, lo, hi))
  yerr = np.array([mean - lo, hi - mean])
  yerr = np.clip(np.where(np.isfinite(yerr), yerr, 0.0), 0, None)
  ax.errorbar(np.asarray(x, float), mean, yerr=yerr, **{'fmt': 'o-', 'capsize': 3, **kwargs})


# --------------------------------------------------------------------------- reading a run's models


def models_over_training(run_dir: str):
  """(config, {0: initial model, step: model of each kept checkpoint}, task data) of a run directory."""
  config, params, exp, state = loop.restore(run_dir, which='all')
  return config, {0: exp.merge(state['params']), **{s: exp.merge(p) for s, p in params.items()}}, state['data']
