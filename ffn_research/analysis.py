"""Analysis of a sweep: results as a pandas DataFrame, aggregates over seeds, power-law fits,
plots and a report.

Public helpers (stable names; ablations and notebooks use them):

- `load_results(workdir) -> pandas.DataFrame`: DIR/results.csv, one row per run.
- `swept_keys(workdir) -> list[str]`: the keys the sweep varies, from DIR/sweep.json (seed
  excluded).
- `metric_columns(results, by) -> list[str]`: every numeric result column that is a metric
  (not a swept key, seed, parameter/FLOP count or bookkeeping column).
- `mean_std_ci(xs) -> {'n', 'mean', 'std', 'ci'}`: sample statistics and the half-width of
  the Student-t confidence interval (stats.mean_ci, the one mean CI of the package).
- `aggregate(results, by, metrics=None) -> pandas.DataFrame`: one row per setting of `by`
  over its completed runs; m/mean, m/std, m/ci, m/n for every metric.
- `fit_power_law(n, losses) -> PowerLawFit | None`: L = a N^-b + c by least squares on log L
  (scipy.optimize.curve_fit; c >= 0); standard errors from its covariance
  (s^2 (J^T J)^-1, s^2 = RSS / (n - 3)). A grid over c with linear least squares for
  (log a, b) gives the starting point.
- `analyze(workdir, metric='eval_loss') -> path`: DIR/analysis/{report.md, aggregate.csv,
  *.png}.
"""

from collections.abc import Iterable, Sequence
import dataclasses
import math
import os
from typing import Any

import numpy as np
import pandas as pd
import scipy.optimize

from ffn_research import io as io_lib
from ffn_research import stats

SEED_KEY = 'train.seed'
# Swept keys that set model size: plots against parameter counts do not split series by them.
SIZE_KEYS = ('model.d_ff', 'model.moe.num_experts', 'model.d_model', 'model.num_layers', 'task.num_points')
TOP_K_KEY = 'model.moe.top_k'
# Formula counts (models.model_counts): one value per setting, carried over, not aggregated.
COUNT_COLUMNS = (
  'num_params',
  'num_active_params',
  'num_ffn_params',
  'num_active_ffn_params',
  'num_attention_params',
  'num_embedding_params',
  'num_norm_params',
  'num_unembedding_params',
  'd_ff_effective',
  'd_ff_active',
  'flops_per_token',
)
# Result columns that are neither metrics nor counts.
BOOKKEEPING_COLUMNS = ('name', 'status', 'error', 'step', 'diverged_step', 'sweep_group_size', 'sweep_padded_d_ff')


# --------------------------------------------------------------------------- reading


def load_results(workdir: str) -> pd.DataFrame:
  """DIR/results.csv as a DataFrame (empty cells NaN; list-valued metrics stay JSON strings)."""
  return pd.read_csv(os.path.join(workdir, 'results.csv'))


def swept_keys(workdir: str) -> list[str]:
  """Keys the runs of DIR/sweep.json override, in order of first appearance (seed excluded)."""
  spec = io_lib.read_json(os.path.join(workdir, 'sweep.json'))
  if spec is None:
    raise FileNotFoundError(f'{workdir}/sweep.json not found: not a sweep workdir')
  keys = list(dict.fromkeys(k for run in spec['runs'] for k in run['overrides']))
  return [k for k in keys if k != SEED_KEY]


def metric_columns(results: pd.DataFrame, by: Sequence[str] = ()) -> list[str]:
  """Numeric columns that are metrics: all but `by`, the seed, counts and bookkeeping."""
  skip = {*by, SEED_KEY, *COUNT_COLUMNS, *BOOKKEEPING_COLUMNS}
  return [
    c
    for c in results.columns
    if c not in skip and pd.api.types.is_numeric_dtype(results[c]) and not pd.api.types.is_bool_dtype(results[c])
  ]


# --------------------------------------------------------------------------- statistics


def mean_std_ci(xs: Iterable[float], confidence: float = stats.CONFIDENCE) -> dict[str, float]:
  """n, mean, sample std (ddof 1) and the half-width of stats.mean_ci's t interval (None and non-finite
  values left out; std and ci NaN with fewer than two values)."""
  x = np.asarray([v for v in xs if v is not None], np.float64)
  x = x[np.isfinite(x)]
  mean, lo, _ = stats.mean_ci(x, confidence)
  return {'n': len(x), 'mean': mean, 'std': float(np.std(x, ddof=1)) if len(x) > 1 else math.nan, 'ci': mean - lo}


def aggregate(
  results: pd.DataFrame | Sequence[dict[str, Any]], by: Sequence[str], metrics: Sequence[str] | None = None
) -> pd.DataFrame:
  """One row per setting of `by` (order of first appearance) over its completed runs.

  Columns: `by`, runs ('completed/all'), the count columns present (first non-empty value),
  then m/mean, m/std, m/ci (95%), m/n for each metric (default: `metric_columns`).
  """
  df = results if isinstance(results, pd.DataFrame) else pd.DataFrame(list(results))
  by = list(by)
  metrics = metric_columns(df, by) if metrics is None else list(metrics)
  counts = [c for c in COUNT_COLUMNS if c in df.columns]
  groups = df.groupby(by, sort=False, dropna=False) if by else [((), df)]
  out = []
  for key, members in groups:
    ok = members[members['status'] == 'completed']
    row: dict[str, Any] = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
    row['runs'] = f'{len(ok)}/{len(members)}'
    for c in counts:
      present = members[c].dropna()
      row[c] = present.iloc[0].item() if len(present) else None
    for m in metrics:
      for stat, v in mean_std_ci(ok[m] if m in ok.columns else []).items():
        row[f'{m}/{stat}'] = v
    out.append(row)
  return pd.DataFrame(out)


# --------------------------------------------------------------------------- power-law fits


@dataclasses.dataclass
class PowerLawFit:
  """L = a * N^(-b) + c with standard errors (NaN when n <= 3)."""

  a: float
  b: float
  c: float
  a_se: float
  b_se: float
  c_se: float
  n: int
  rmse_log: float  # root mean squared residual of log L

  def __call__(self, n):
    return self.a * np.power(n, -self.b) + self.c


def _log_power_law(log_x, log_a, b, c):
  return np.log(np.exp(log_a - b * log_x) + c)


def fit_power_law(n_params: Sequence[float], losses: Sequence[float]) -> PowerLawFit | None:
  """Least-squares fit of log L to log(a N^-b + c), c >= 0; None with fewer than 4 distinct N.

  Three parameters through three distinct N would interpolate the means, not test a law.
  """
  x, y = np.asarray(n_params, np.float64), np.asarray(losses, np.float64)
  keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
  x, y = x[keep], y[keep]
  if len(np.unique(x)) < 4:
    return None
  log_x, log_y = np.log(x), np.log(y)

  def sse(theta):
    r = _log_power_law(log_x, *theta) - log_y
    return float(np.sum(r * r)) if np.all(np.isfinite(r)) else math.inf

  # Start: for c on a grid below min(L), log(L - c) = log a - b log N is linear.
  design = np.stack([np.ones_like(log_x), -log_x], axis=1)
  starts = []
  for c in np.min(y) * np.concatenate([[0.0], 1 - np.geomspace(1.0, 1e-4, 60)]):
    (log_a, b), *_ = np.linalg.lstsq(design, np.log(y - c), rcond=None)
    starts.append((log_a, b, c))
  start = min(starts, key=sse)

  theta, cov = scipy.optimize.curve_fit(
    _log_power_law,
    log_x,
    log_y,
    p0=start,
    bounds=([-np.inf, -np.inf, 0.0], np.inf),
    method='trf',
    ftol=1e-15,
    xtol=1e-15,
    gtol=1e-15,
    max_nfev=10_000,
  )
  n, rss = len(x), sse(theta)
  se = np.sqrt(np.maximum(np.diag(cov), 0.0)) if n > 3 and np.all(np.isfinite(cov)) else np.full(3, math.nan)
  a = math.exp(theta[0])
  return PowerLawFit(
    a=a,
    b=float(theta[1]),
    c=float(theta[2]),
    a_se=a * se[0],
    b_se=float(se[1]),
    c_se=float(se[2]),
    n=n,
    rmse_log=math.sqrt(rss / n),
  )


# --------------------------------------------------------------------------- tables and plots


def format_value(v: Any) -> str:
  """A table cell: '–' for None/NaN, integers with thousands separators, other floats to 4 significant digits."""
  if isinstance(v, np.generic):
    v = v.item()
  if v is None or (isinstance(v, float) and not math.isfinite(v)):
    return '–'
  if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
    v = int(v)  # pandas keeps integer columns with empty cells as floats
  if isinstance(v, float):
    return f'{v:.4g}'
  if isinstance(v, int) and not isinstance(v, bool):
    return f'{v:,}'
  return str(v)


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
  """The one markdown table of the package (sweep analyses and ablation reports)."""
  lines = ['| ' + ' | '.join(map(str, columns)) + ' |', '|' + '---|' * len(columns)]
  lines += ['| ' + ' | '.join(format_value(v).replace('|', '\\|') for v in row) + ' |' for row in rows]
  return '\n'.join(lines) + '\n'


def _series_label(keys: Sequence[str], values: Sequence[Any]) -> str:
  values = [v.item() if isinstance(v, np.generic) else v for v in values]
  return ', '.join(f'{k.rsplit(".", 1)[-1]}={v}' for k, v in zip(keys, values, strict=True)) or 'all'


@dataclasses.dataclass
class Plot:
  """One figure: `metric` against column `x`, a line per setting of `series`."""

  name: str
  x: str
  series: list[str]
  metric: str
  log_y: bool = True
  fit: bool = True


def plot_and_fit(plot: Plot, results: pd.DataFrame, agg_by: Sequence[str], outdir: str) -> list[dict[str, Any]]:
  """Draw `plot` (mean and 95% CI over seeds) into outdir/NAME.png; return its fits."""
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  ok = results[(results['status'] == 'completed') & results[plot.x].notna() & results[plot.metric].notna()]
  series = ok.groupby(plot.series, sort=False, dropna=False) if plot.series else [((), ok)]
  fig, ax = plt.subplots(figsize=(6, 4.2))
  fits, drawn = [], 0
  for key, members in series:
    key = key if isinstance(key, tuple) else (key,)
    agg = aggregate(members, list(dict.fromkeys([plot.x, *agg_by])), [plot.metric]).sort_values(plot.x)
    xs = agg[plot.x].to_numpy(np.float64)
    mean = agg[f'{plot.metric}/mean'].to_numpy(np.float64)
    ci = np.nan_to_num(agg[f'{plot.metric}/ci'].to_numpy(np.float64))
    lower = np.minimum(ci, 0.9 * np.abs(mean)) if plot.log_y else ci  # keep bars on a log axis
    label = _series_label(plot.series, key)
    line = ax.errorbar(xs, mean, yerr=[lower, ci], marker='o', ms=4, capsize=3, label=label)
    drawn += 1
    fit = fit_power_law(members[plot.x], members[plot.metric]) if plot.fit else None
    if fit is not None:
      grid = np.geomspace(xs.min(), xs.max(), 100)
      ax.plot(grid, fit(grid), '--', color=line[0].get_color(), lw=1)
      fits.append({'plot': plot.name, 'series': label, 'x': plot.x, 'metric': plot.metric, 'fit': fit})
  ax.set_xscale('log')
  if plot.log_y:
    ax.set_yscale('log')
  ax.set_xlabel(plot.x)
  ax.set_ylabel(plot.metric)
  ax.set_title(f'{plot.metric} vs {plot.x} (mean, 95% CI over seeds; dashed: a N^-b + c)', fontsize=8)
  ax.grid(True, which='both', alpha=0.3)
  if drawn:
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(os.path.join(outdir, f'{plot.name}.png'), dpi=120)
  plt.close(fig)
  return fits


def default_plots(results: pd.DataFrame, swept: Sequence[str], metric: str) -> list[Plot]:
  """Plots that fit the swept keys and the columns present."""
  not_size = [k for k in swept if k not in SIZE_KEYS]
  plots = []
  if 'model.d_ff' in swept:
    plots.append(Plot('loss_vs_d_ff', 'model.d_ff', [k for k in swept if k != 'model.d_ff'], metric))
  plots.append(Plot('loss_vs_params', 'num_params', not_size, metric))
  if TOP_K_KEY in results.columns:
    plots.append(Plot('moe_loss_vs_total_params', 'num_params', [TOP_K_KEY], metric))
    plots.append(Plot('moe_loss_vs_active_params', 'num_active_params', [TOP_K_KEY], metric))
  if 'bits_per_param' in results.columns and results['bits_per_param'].notna().any():
    plots.append(Plot('bits_per_param', 'num_params', not_size, 'bits_per_param', log_y=False, fit=False))
  return plots


def results_table(agg: pd.DataFrame, swept: list[str], metrics: list[str], metric: str) -> str:
  """The report's table: per setting, the swept values, counts and mean ± std of the main metrics."""
  shown = [m for m in (metric, 'final_loss', 'bits_per_param', 'eval_accuracy') if m in metrics]
  cols = [*swept, 'runs', 'num_params', 'num_active_params']
  cols = [c for c in dict.fromkeys(cols) if c in swept or (c in agg.columns and agg[c].notna().any())]
  head = cols + [f'{m} (mean ± std)' for m in shown] + [f'{metric} 95% CI ±']
  body = [
    [a[c] for c in cols]
    + [f'{format_value(a[f"{m}/mean"])} ± {format_value(a[f"{m}/std"])}' for m in shown]
    + [a[f'{metric}/ci']]
    for a in agg.to_dict('records')
  ]
  return markdown_table(head, body)


def fits_table(fits: list[dict[str, Any]]) -> str:
  """The power-law fits: per plot and series, a, b, c with standard errors, points, rms log-residual."""
  est = lambda f, k: f'{format_value(getattr(f["fit"], k))} ± {format_value(getattr(f["fit"], k + "_se"))}'
  rows = [
    [f['plot'], f['series'], f['x'], est(f, 'a'), est(f, 'b'), est(f, 'c'), f['fit'].n, f['fit'].rmse_log] for f in fits
  ]
  return markdown_table(['plot', 'series', 'N', 'a', 'b', 'c', 'points', 'rms log-residual'], rows)


def analyze(workdir: str, metric: str = 'eval_loss') -> str:
  """Write DIR/analysis/{report.md, aggregate.csv, *.png} from DIR/results.csv; return report path."""
  try:
    results = load_results(workdir)
  except (FileNotFoundError, pd.errors.EmptyDataError):
    results = pd.DataFrame()
  if 'status' not in results or not (results['status'] == 'completed').any():
    raise FileNotFoundError(
      f'{workdir}: no run has completed yet ({len(results)} finished or failed rows in results.csv); nothing to analyse'
    )
  swept = [k for k in swept_keys(workdir) if k in results.columns]
  outdir = os.path.join(workdir, 'analysis')
  os.makedirs(outdir, exist_ok=True)
  metrics = metric_columns(results, swept)
  if metric not in metrics:
    metrics.insert(0, metric)
  agg = aggregate(results, swept, metrics)
  io_lib.write_text(os.path.join(outdir, 'aggregate.csv'), agg.to_csv(index=False))

  fits = []
  plots = default_plots(results, swept, metric)
  for p in plots:
    fits += plot_and_fit(p, results, swept, outdir)

  statuses = results['status'].astype(str).tolist()
  parts = [
    f'# Sweep report: {os.path.abspath(workdir)}\n',
    f'{len(results)} runs: '
    + ', '.join(f'{statuses.count(s)} {s}' for s in sorted(set(statuses)))
    + f'. Swept: {", ".join(swept) or "nothing"}; statistics over `{SEED_KEY}` '
    '(mean, sample std, 95% confidence interval from the t distribution; completed runs only).\n',
    '## Results\n',
    results_table(agg, swept, metrics, metric),
    f'\n## Power-law fits: {metric} = a · N^(−b) + c\n',
    'Least squares on log L over every completed run (seeds as separate points); ± is one '
    'standard error from the fit covariance; `–` where there are too few points.\n',
    fits_table(fits) if fits else '(no fits: fewer than four distinct sizes per series)\n',
    '\n## Plots\n',
    *[f'![{p.name}]({p.name}.png)\n' for p in plots],
  ]
  path = os.path.join(outdir, 'report.md')
  io_lib.write_text(path, '\n'.join(parts))
  return path
