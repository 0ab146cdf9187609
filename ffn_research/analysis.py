"""Analysis of a sweep's results.csv: aggregate over seeds, fit power laws, plot, report.

`analyze(workdir)` writes DIR/analysis/: report.md (Markdown tables: mean, std and 95%
confidence interval over seeds; power-law fits), aggregate.csv and PNG plots.

Power laws L = a * N^(-b) + c are fitted by least squares on log L (every seed's point
counts): a grid over c with linear least squares in log space for (log a, b) gives a
start, Levenberg-Marquardt refines all three; standard errors come from the Jacobian,
cov = s^2 (J^T J)^-1 with s^2 = RSS / (n - 3).
"""

import csv
import dataclasses
import math
import os
from typing import Any, Iterable, Sequence

import numpy as np

from ffn_research import io as io_lib

SEED_KEY = 'train.seed'
# Swept keys that set model size: plots against parameter counts do not split series by them.
SIZE_KEYS = ('model.d_ff', 'model.moe.num_experts', 'model.d_model', 'model.num_layers',
             'task.num_points')
TOP_K_KEY = 'model.moe.top_k'
# Result columns aggregated over seeds when present.
METRIC_COLUMNS = ('eval_loss', 'final_loss', 'sup_error', 'train_mse', 'eval_relative_mse',
                  'fraction_fitted', 'accuracy', 'eval_accuracy', 'bits_stored', 'bits_per_param',
                  'bits_per_ffn_param', 'wall_time_s')
COUNT_COLUMNS = ('num_params', 'num_active_params', 'num_ffn_params', 'flops_per_token')


# --------------------------------------------------------------------------- reading

def _parse(value: str) -> Any:
  if value == '':
    return None
  for kind in (int, float):
    try:
      return kind(value)
    except ValueError:
      pass
  return value


def read_results(path: str) -> tuple[list[str], list[dict[str, Any]]]:
  """(columns, rows) of a results.csv, with numbers parsed and empty cells None."""
  with open(path) as f:
    reader = csv.DictReader(f)
    rows = [{k: _parse(v) for k, v in row.items()} for row in reader]
    return list(reader.fieldnames or []), rows


def swept_keys(columns: Sequence[str]) -> list[str]:
  """Swept config keys: results.csv puts them between 'status' and 'num_params' (seed excluded)."""
  return [c for c in columns[columns.index('status') + 1:columns.index('num_params')] if c != SEED_KEY]


# --------------------------------------------------------------------------- statistics

def t_quantile(p: float, df: int) -> float:
  """Quantile of Student's t distribution (p in (0.5, 1)): bisection on a Simpson-integrated CDF."""
  log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

  def cdf(t):
    x = np.linspace(0.0, t, 4001)
    pdf = np.exp(log_norm - (df + 1) / 2 * np.log1p(x * x / df))
    w = np.ones_like(x)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return 0.5 + float(np.sum(w * pdf)) * (t / 4000) / 3

  lo, hi = 0.0, 1.0
  while cdf(hi) < p:
    hi *= 2
  for _ in range(60):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
  return (lo + hi) / 2


def mean_std_ci(xs: Iterable[float], level: float = 0.95) -> dict[str, float]:
  """Mean, sample std (ddof 1) and the half-width of the t-based confidence interval."""
  x = np.asarray([v for v in xs if v is not None and math.isfinite(v)], np.float64)
  n = len(x)
  if n == 0:
    return {'n': 0, 'mean': math.nan, 'std': math.nan, 'ci': math.nan}
  std = float(np.std(x, ddof=1)) if n > 1 else math.nan
  ci = t_quantile(0.5 + level / 2, n - 1) * std / math.sqrt(n) if n > 1 else math.nan
  return {'n': n, 'mean': float(np.mean(x)), 'std': std, 'ci': ci}


def aggregate(rows: Sequence[dict[str, Any]], by: Sequence[str],
              metrics: Sequence[str]) -> list[dict[str, Any]]:
  """One row per setting of `by` (order of first appearance) over its completed runs.

  Each metric m gets m/mean, m/std, m/ci (95%), m/n; count columns are carried over.
  """
  groups: dict[tuple, list[dict[str, Any]]] = {}
  for row in rows:
    groups.setdefault(tuple(row.get(k) for k in by), []).append(row)
  out = []
  for key, members in groups.items():
    ok = [r for r in members if r.get('status') == 'completed']
    agg = dict(zip(by, key))
    agg['runs'] = f'{len(ok)}/{len(members)}'
    for c in COUNT_COLUMNS:
      agg[c] = next((r[c] for r in members if r.get(c) is not None), None)
    for m in metrics:
      for stat, v in mean_std_ci(r.get(m) for r in ok).items():
        agg[f'{m}/{stat}'] = v
    out.append(agg)
  return out


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


def _log_residuals(theta, log_x, log_y):
  log_a, b, c = theta
  pred = np.exp(log_a - b * log_x) + c
  return np.log(pred) - log_y, pred


def _jacobian(theta, log_x, pred):
  log_a, b, _ = theta
  term = np.exp(log_a - b * log_x)
  return np.stack([term / pred, -log_x * term / pred, 1.0 / pred], axis=1)


def fit_power_law(n_params: Sequence[float], losses: Sequence[float],
                  iterations: int = 200) -> PowerLawFit | None:
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
    r, _ = _log_residuals(theta, log_x, log_y)
    return float(np.sum(r * r)) if np.all(np.isfinite(r)) else math.inf

  # Start: for c on a grid below min(L), log(L - c) = log a - b log N is linear.
  best = None
  design = np.stack([np.ones_like(log_x), -log_x], axis=1)
  for c in np.min(y) * np.concatenate([[0.0], 1 - np.geomspace(1.0, 1e-4, 60)]):
    (log_a, b), *_ = np.linalg.lstsq(design, np.log(y - c), rcond=None)
    theta = np.array([log_a, b, c])
    if best is None or sse(theta) < sse(best):
      best = theta

  # Levenberg-Marquardt on (log a, b, c), projecting c onto c >= 0.
  theta, lam = best, 1e-3
  for _ in range(iterations):
    r, pred = _log_residuals(theta, log_x, log_y)
    jac = _jacobian(theta, log_x, pred)
    jtj, jtr = jac.T @ jac, jac.T @ r
    step = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-12), -jtr)
    trial = theta + step
    trial[2] = max(trial[2], 0.0)
    if sse(trial) < sse(theta):
      converged = sse(theta) - sse(trial) <= 1e-15 * max(sse(theta), 1e-300)
      theta, lam = trial, lam / 3
      if converged:
        break
    else:
      lam *= 3
      if lam > 1e12:
        break

  r, pred = _log_residuals(theta, log_x, log_y)
  n, rss = len(x), float(np.sum(r * r))
  se = np.full(3, math.nan)
  if n > 3:
    cov = rss / (n - 3) * np.linalg.pinv(_jacobian(theta, log_x, pred).T @ _jacobian(theta, log_x, pred))
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
  a = math.exp(theta[0])
  return PowerLawFit(a=a, b=float(theta[1]), c=float(theta[2]), a_se=a * se[0], b_se=float(se[1]),
                     c_se=float(se[2]), n=n, rmse_log=math.sqrt(rss / n))


# --------------------------------------------------------------------------- tables and plots

def _fmt(v: Any) -> str:
  if v is None or (isinstance(v, float) and not math.isfinite(v)):
    return '–'
  if isinstance(v, float):
    return f'{v:.4g}'
  if isinstance(v, int):
    return f'{v:,}'
  return str(v)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
  lines = ['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
  lines += ['| ' + ' | '.join(_fmt(v) for v in row) + ' |' for row in rows]
  return '\n'.join(lines) + '\n'


def _series_label(keys: Sequence[str], values: Sequence[Any]) -> str:
  return ', '.join(f'{k.rsplit(".", 1)[-1]}={v}' for k, v in zip(keys, values)) or 'all'


@dataclasses.dataclass
class Plot:
  """One figure: `metric` against column `x`, a line per setting of `series`."""
  name: str
  x: str
  series: list[str]
  metric: str
  log_y: bool = True
  fit: bool = True


def plot_and_fit(plot: Plot, rows: Sequence[dict[str, Any]], agg_by: Sequence[str],
                 outdir: str) -> list[dict[str, Any]]:
  """Draw `plot` (mean and 95% CI over seeds) into outdir/NAME.png; return its fits."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  ok = [r for r in rows if r.get('status') == 'completed' and r.get(plot.x) is not None
        and r.get(plot.metric) is not None]
  series: dict[tuple, list[dict[str, Any]]] = {}
  for r in ok:
    series.setdefault(tuple(r.get(k) for k in plot.series), []).append(r)
  fig, ax = plt.subplots(figsize=(6, 4.2))
  fits = []
  for key, members in series.items():
    agg = aggregate(members, list(dict.fromkeys([plot.x, *agg_by])), [plot.metric])
    agg.sort(key=lambda a: a[plot.x])
    xs = np.array([a[plot.x] for a in agg], np.float64)
    mean = np.array([a[f'{plot.metric}/mean'] for a in agg])
    ci = np.nan_to_num(np.array([a[f'{plot.metric}/ci'] for a in agg]))
    lower = np.minimum(ci, 0.9 * np.abs(mean)) if plot.log_y else ci  # keep bars on a log axis
    label = _series_label(plot.series, key)
    line = ax.errorbar(xs, mean, yerr=[lower, ci], marker='o', ms=4, capsize=3, label=label)
    fit = fit_power_law([r[plot.x] for r in members], [r[plot.metric] for r in members]) if plot.fit else None
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
  if series:
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(os.path.join(outdir, f'{plot.name}.png'), dpi=120)
  plt.close(fig)
  return fits


def default_plots(columns: Sequence[str], rows: Sequence[dict[str, Any]], metric: str) -> list[Plot]:
  """Plots that fit the swept keys and the columns present."""
  swept = swept_keys(columns)
  not_size = [k for k in swept if k not in SIZE_KEYS]
  plots = []
  if 'model.d_ff' in swept:
    plots.append(Plot('loss_vs_d_ff', 'model.d_ff', [k for k in swept if k != 'model.d_ff'], metric))
  plots.append(Plot('loss_vs_params', 'num_params', not_size, metric))
  if TOP_K_KEY in columns:
    plots.append(Plot('moe_loss_vs_total_params', 'num_params', [TOP_K_KEY], metric))
    plots.append(Plot('moe_loss_vs_active_params', 'num_active_params', [TOP_K_KEY], metric))
  if any(r.get('bits_per_param') is not None for r in rows):
    plots.append(Plot('bits_per_param', 'num_params', not_size, 'bits_per_param', log_y=False, fit=False))
  return plots


def analyze(workdir: str, metric: str = 'eval_loss') -> str:
  """Write DIR/analysis/{report.md, aggregate.csv, *.png} from DIR/results.csv; return report path."""
  columns, rows = read_results(os.path.join(workdir, 'results.csv'))
  outdir = os.path.join(workdir, 'analysis')
  os.makedirs(outdir, exist_ok=True)
  swept = swept_keys(columns)
  metrics = [m for m in METRIC_COLUMNS if m in columns]
  if metric not in metrics:
    metrics.insert(0, metric)
  agg = aggregate(rows, swept, metrics)

  with open(os.path.join(outdir, 'aggregate.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(agg[0]) if agg else ['runs'])
    writer.writeheader()
    writer.writerows(io_lib.json_safe(agg))

  fits = []
  plots = default_plots(columns, rows, metric)
  for p in plots:
    fits += plot_and_fit(p, rows, swept, outdir)

  statuses = [r.get('status') for r in rows]
  shown = [m for m in (metric, 'final_loss', 'bits_per_param', 'eval_accuracy') if m in metrics]
  table_cols = [*swept, 'runs', 'num_params', 'num_active_params']
  table_cols = [c for c in dict.fromkeys(table_cols) if c in swept or any(a.get(c) is not None for a in agg)]
  head = table_cols + [f'{m} (mean ± std)' for m in shown] + [f'{metric} 95% CI ±']
  body = [[a.get(c) for c in table_cols]
          + [f'{_fmt(a[f"{m}/mean"])} ± {_fmt(a[f"{m}/std"])}' for m in shown] + [a[f'{metric}/ci']]
          for a in agg]
  fit_rows = [[f['plot'], f['series'], f['x'], f'{_fmt(f["fit"].a)} ± {_fmt(f["fit"].a_se)}',
               f'{_fmt(f["fit"].b)} ± {_fmt(f["fit"].b_se)}', f'{_fmt(f["fit"].c)} ± {_fmt(f["fit"].c_se)}',
               f['fit'].n, f['fit'].rmse_log] for f in fits]
  parts = [
      f'# Sweep report: {os.path.abspath(workdir)}\n',
      f'{len(rows)} runs: ' + ', '.join(f'{statuses.count(s)} {s}' for s in sorted(set(statuses), key=str))
      + f'. Swept: {", ".join(swept) or "nothing"}; statistics over `{SEED_KEY}` '
      '(mean, sample std, 95% confidence interval from the t distribution; completed runs only).\n',
      '## Results\n', markdown_table(head, body),
      f'\n## Power-law fits: {metric} = a · N^(−b) + c\n',
      'Least squares on log L over every completed run (seeds as separate points); ± is one '
      'standard error from the Jacobian; `–` where there are too few points.\n',
      markdown_table(['plot', 'series', 'N', 'a', 'b', 'c', 'points', 'rms log-residual'], fit_rows)
      if fit_rows else '(no fits: fewer than four distinct sizes per series)\n',
      '\n## Plots\n', *[f'![{p.name}]({p.name}.png)\n' for p in plots],
  ]
  path = os.path.join(outdir, 'report.md')
  io_lib.write_text(path, '\n'.join(parts))
  return path
