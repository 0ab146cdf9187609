"""Layering: config.py is a leaf, the package's imports form no cycle, no import hides in a function."""

import ast
import glob
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

# Imported inside functions on purpose: optional or heavy, needed by few code paths.
LAZY_OK = ('tensorboardX', 'orbax', 'matplotlib')
# Files that defer imports on purpose, with the reason.
LAZY_FILES = {
  'ffn_research/__init__.py': 'ffn_research.load_run on first use, so importing ffn_research.config stays light',
  'ffn_research/ablations/__init__.py': 'listing and checking ablation names stays instant',
}


def _modules() -> dict[str, str]:
  """{'ffn_research.x.y': path} for every module of the package."""
  out = {}
  for path in glob.glob(os.path.join(REPO_ROOT, 'ffn_research', '**', '*.py'), recursive=True):
    rel = os.path.relpath(path, REPO_ROOT)[:-3].replace(os.sep, '.')
    out[rel.removesuffix('.__init__')] = path
  return out


def _imports(path: str, modules) -> set[str]:
  """Package modules a file imports at module level ('from a import b' counts a.b when a module)."""
  found = set()
  for node in ast.parse(open(path).read()).body:
    if isinstance(node, ast.Import):
      found |= {a.name for a in node.names}
    elif isinstance(node, ast.ImportFrom) and node.module:
      subs = {f'{node.module}.{a.name}' for a in node.names}
      found |= subs & set(modules) or {node.module}  # submodules, else the module's names
  return {m for m in found if m in modules}


def test_importing_config_loads_no_other_module_of_the_package():
  code = 'import ffn_research.config, sys; print(sorted(m for m in sys.modules if m.startswith("ffn_research")))'
  out = subprocess.run(
    [sys.executable, '-c', code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True
  ).stdout
  assert out.strip() == "['ffn_research', 'ffn_research.config']"


def test_config_imports_nothing_of_the_package():
  modules = _modules()
  assert _imports(modules['ffn_research.config'], modules) == set()


def test_package_imports_form_no_cycle():
  modules = _modules()
  # 'from pkg import submodule' is an edge to the submodule; Python's implicit loading of a
  # package's __init__ before its submodules is not an edge.
  graph = {m: _imports(p, modules) - {m} for m, p in modules.items()}
  state: dict[str, int] = {}

  def visit(m, path):
    state[m] = 1
    for dep in sorted(graph[m]):
      if state.get(dep) == 1:
        raise AssertionError('import cycle: ' + ' -> '.join(path + [m, dep]))
      if dep not in state:
        visit(dep, path + [m])
    state[m] = 2

  for m in sorted(graph):
    if m not in state:
      visit(m, [])
  # The layers of /work/shared/DESIGN.md: registries never reach up to train, sweep or analysis.
  for low in ('ffn_research.models', 'ffn_research.tasks', 'ffn_research.optim'):
    for m in graph:
      if m == low or m.startswith(low + '.'):
        assert not graph[m] & {
          'ffn_research.train',
          'ffn_research.sweep',
          'ffn_research.analysis',
          'ffn_research.validation',
        }, m


def test_no_function_level_imports_except_optional_heavy_ones():
  paths = list(_modules().values())  # the entry points (experiments/, benchmarks/) defer imports by choice
  bad = []
  for path in paths:
    if os.path.relpath(path, REPO_ROOT) in LAZY_FILES:
      continue
    for func in ast.walk(ast.parse(open(path).read())):
      if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        continue
      for node in ast.walk(func):
        names = (
          [a.name for a in node.names]
          if isinstance(node, ast.Import)
          else [node.module or '']
          if isinstance(node, ast.ImportFrom)
          else []
        )
        bad += [
          f'{os.path.relpath(path, REPO_ROOT)}:{node.lineno} {n}' for n in names if n.split('.')[0] not in LAZY_OK
        ]
  assert not bad, bad
