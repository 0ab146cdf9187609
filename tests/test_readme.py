"""README.md stays honest: its commands parse, its links resolve, its generated blocks match their JSON."""

import glob
import json
import os
import re
import shlex

import pytest

from benchmarks import benchmark
from experiments import publish as publish_lib
from ffn_research import ablations
from ffn_research import configfile
from ffn_research.config import default_config
from ffn_research.config import flat_keys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
# absl's own flags, accepted by every entry point
ABSL_FLAGS = {'help', 'helpfull', 'helpshort', 'helpxml', 'flagfile', 'undefok', 'logtostderr', 'v', 'verbosity'}


def _commands() -> list[str]:
  """Every command in the README's bash blocks (`a && b` is two), with continuation lines joined."""
  blocks = re.findall(r'```bash\n(.*?)```', README, re.S)
  lines = ' '.join(blocks).replace('\\\n', ' ').split('\n')
  return [c.split('#')[0].strip() for line in lines for c in line.split('&&') if c.strip()]


def _block(text: str, begin: str, end: str) -> str:
  return text.split(begin, 1)[1].split(end, 1)[0]


def _module_flags(module: str) -> set[str]:
  """Flags an entry point (experiments/, benchmarks/) defines (read from its source: importing several would clash)."""
  source = open(os.path.join(ROOT, *module.split('.')) + '.py', encoding='utf-8').read()
  names = set(re.findall(r"DEFINE_\w+\(\s*'(\w+)'", source))
  if 'define_config_flag(' in source:
    names.add('config')
  return names | ABSL_FLAGS


def _check_config_override(key: str) -> None:
  assert key in flat_keys(default_config()), f'--config.{key} is not a config key'


def test_readme_shows_the_ci_commands():
  """The install + quickstart command, the checks and `pytest` are in the README, and .ci/run runs them."""
  commands = _commands()
  install = 'pip install -e ".[test]"'
  quickstart = 'python -m experiments.train --config=configs/regression.py --workdir='
  assert install in commands and any(c.startswith(quickstart) for c in commands) and 'pytest' in commands
  ci = open(os.path.join(ROOT, '.ci', 'run'), encoding='utf-8').read()
  assert re.search(re.escape(f'{install} && {quickstart}') + r'\S+\n', ci)
  assert re.search(r'^pytest$', ci, re.M) and 'pytest -m slow' in ci
  checks = 'ruff check . && ruff format --check . && mypy'
  assert set(checks.split(' && ')) <= set(commands) and re.search('^' + re.escape(checks) + '$', ci, re.M)
  assert ci.index(checks) < ci.index('pytest -m slow')
  assert re.search(r'^test =$', open(os.path.join(ROOT, 'setup.cfg'), encoding='utf-8').read(), re.M)


def test_readme_commands_parse():
  """Each `python -m experiments.X` / `benchmarks.X` names a module, flags it defines, existing configs, arguments."""
  commands = [c for c in _commands() if c.startswith('python -m ')]
  assert len(commands) >= 6
  modules = {shlex.split(c)[2] for c in commands}
  assert {
    'experiments.train',
    'experiments.sweep',
    'experiments.analyze',
    'experiments.reproduce',
    'benchmarks.benchmark',
  } <= modules  # the tour covers every main command
  for command in commands:
    args = shlex.split(command)
    module = args[2]
    assert os.path.exists(os.path.join(ROOT, *module.split('.')) + '.py'), command
    defined = _module_flags(module)
    jax_flags = 'config_with_absl' in open(os.path.join(ROOT, *module.split('.')) + '.py', encoding='utf-8').read()
    for arg in args[3:]:
      assert arg.startswith('--'), f'{command}: positional argument {arg!r}'
      name, _, value = arg[2:].partition('=')
      if name.startswith('config.'):
        _check_config_override(name[len('config.') :])
        continue
      bare = name[2:] if name.startswith('no') and name[2:] in defined else name
      assert bare in defined or (jax_flags and bare.startswith('jax_')), f'{command}: --{name} is not defined'
      if name == 'config':
        path = configfile.split_spec(value)[0]
        assert os.path.exists(os.path.join(ROOT, path)), command
        config = configfile.get_config(os.path.join(ROOT, value))  # the :arg is accepted
        assert config is not None
        if module == 'experiments.sweep':
          assert configfile.get_sweep(os.path.join(ROOT, value)), command
      if name == 'ablation':
        assert value in ablations.names() + ['all'], command


def _markdown_files() -> list[str]:
  return [
    os.path.join(ROOT, 'README.md'),
    os.path.join(ROOT, 'CHANGELOG.md'),
    *sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md'))),
    *sorted(glob.glob(os.path.join(ROOT, 'docs', 'results', '*.md'))),
    *sorted(glob.glob(os.path.join(ROOT, 'docs', 'results', '*', 'history.md'))),
  ]


def _anchors(path: str) -> set[str]:
  """GitHub's heading anchors of a Markdown file."""
  text = re.sub(r'```.*?```', '', open(path, encoding='utf-8').read(), flags=re.S)
  heads = re.findall(r'^#+ (.*)$', text, re.M)
  return {re.sub(r'[^\w\- ]', '', h.strip().lower()).replace(' ', '-') for h in heads}


@pytest.mark.parametrize('path', _markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(path):
  text = re.sub(r'```.*?```', '', open(path, encoding='utf-8').read(), flags=re.S)
  for target in re.findall(r'\]\(([^)\s]+)\)', text):
    if re.match(r'[a-z]+:', target):
      continue
    file, _, anchor = target.partition('#')
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
    assert os.path.exists(resolved), f'{os.path.relpath(path, ROOT)}: link {target} points at nothing'
    if anchor and resolved.endswith('.md'):
      assert anchor in _anchors(resolved), f'{os.path.relpath(path, ROOT)}: no heading for {target}'


def test_every_docs_page_says_what_it_is_for():
  for path in glob.glob(os.path.join(ROOT, 'docs', '*.md')):
    lines = open(path, encoding='utf-8').read().split('\n')
    assert lines[0].startswith('# ') and lines[1] == '' and lines[2].strip(), path


def test_results_blocks_match_the_published_reports():
  assert _block(README, publish_lib.README_BEGIN, publish_lib.README_END) == '\n' + publish_lib.headline_section(
    ROOT
  ), 'README Results block is stale: python -m experiments.reproduce --update_readme'
  page = open(os.path.join(ROOT, publish_lib.RESULTS_PAGE), encoding='utf-8').read()
  assert _block(page, publish_lib.README_BEGIN, publish_lib.README_END) == '\n' + publish_lib.relink(
    publish_lib.results_section(ROOT), 'docs/results'
  ), 'docs/results/README.md is stale: --update_readme'


@pytest.mark.parametrize('name', ['cpu_quick', 'gpu_h100'])
def test_performance_blocks_match_the_published_json(name):
  with open(os.path.join(ROOT, 'docs', 'results', 'benchmark', f'{name}.json'), encoding='utf-8') as f:
    doc = json.load(f)
  page = open(os.path.join(ROOT, 'docs', 'performance.md'), encoding='utf-8').read()
  stale = f'stale: python -m benchmarks.benchmark --from_json=docs/results/benchmark/{name}.json --write_readme'
  assert benchmark.readme_block(doc, headline=True) in README, f'README Performance block is {stale}'
  assert benchmark.readme_block(doc) in page, f'docs/performance.md Performance block is {stale}'


def test_readme_is_a_front_door():
  assert len(README.split('\n')) <= 200
  assert not re.search(r'\b[0-9a-f]{7,12}\b', README.replace(publish_lib.README_BEGIN, '')), 'a commit hash in README'
