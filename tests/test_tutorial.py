"""docs/tutorial.ipynb: in sync with its source docs/tutorial.py, committed without outputs, and
executed end to end (nbclient) with no error and the expected figures."""

import os
import re

import jupytext
from nbclient import NotebookClient
import nbformat
import pytest

from tests.conftest import REPO_ROOT

SOURCE = os.path.join(REPO_ROOT, 'docs', 'tutorial.py')
NOTEBOOK = os.path.join(REPO_ROOT, 'docs', 'tutorial.ipynb')
# PNG figures each numbered section ("## N. ...") must show; section 5 (where next) has none.
FIGURES = {1: 1, 2: 1, 3: 2, 4: 1, 5: 0}


def _cells(nb):
  return [(c.cell_type, c.source) for c in nb.cells]


def test_notebook_is_its_source_converted_and_has_no_outputs():
  nb = nbformat.read(NOTEBOOK, as_version=4)
  assert _cells(nb) == _cells(jupytext.read(SOURCE)), (
    'docs/tutorial.ipynb is out of sync with docs/tutorial.py: run `jupytext --sync docs/tutorial.py`'
  )
  code = [c for c in nb.cells if c.cell_type == 'code']
  assert code and all(c.outputs == [] and c.execution_count is None for c in code), (
    'strip the outputs: `jupytext --sync docs/tutorial.py` after clearing them'
  )


def figures_per_section(nb) -> dict[int, int]:
  """{section number: PNG outputs of its code cells} from the executed notebook."""
  counts, section = {}, 0
  for cell in nb.cells:
    heading = re.match(r'## (\d+)\.', cell.source) if cell.cell_type == 'markdown' else None
    if heading:
      section = int(heading.group(1))
      counts[section] = 0
    elif cell.cell_type == 'code' and section:
      counts[section] += sum('image/png' in o.get('data', {}) for o in cell.outputs)
  return counts


# Slow: it trains three runs, a 36-run sweep and an ablation at smoke scale (85-105 s of CPU; 268-499 s
# of wall time on the shared 2-core dev machine at load average 12-25, 2026-11-23).
@pytest.mark.slow
def test_notebook_runs_end_to_end(tmp_path, monkeypatch):
  # The kernel inherits the environment: this checkout's package, and TMPDIR so the notebook's
  # tempfile.mkdtemp() workdir is under tmp_path, not in the repository.
  monkeypatch.setenv('PYTHONPATH', os.pathsep.join(p for p in (REPO_ROOT, os.environ.get('PYTHONPATH')) if p))
  monkeypatch.setenv('TMPDIR', str(tmp_path))
  nb = nbformat.read(NOTEBOOK, as_version=4)
  NotebookClient(
    nb, timeout=600, kernel_name='python3', resources={'metadata': {'path': str(tmp_path)}}
  ).execute()  # raises on an error cell
  errors = [o for c in nb.cells if c.cell_type == 'code' for o in c.outputs if o.output_type == 'error']
  assert not errors
  assert figures_per_section(nb) == FIGURES
  workdirs = [d for d in os.listdir(tmp_path) if d.startswith('ffn_tutorial_')]
  assert len(workdirs) == 1
  assert {'regression', 'sweep', 'facts_dense', 'facts_moe', 'reproduce'} <= set(os.listdir(tmp_path / workdirs[0]))
