"""Ablations: one published or theoretical claim (or, capacity_atlas, the codebase's own measurements) each, one
module each, found by name.

Any module in this package (other than the machinery: base, cap, checks, judge, regime, report, runner; storage,
a measurement two studies share; languages, the synthetic languages they share; changes/, each study's design
changes after results; present/, each study's tables and figures, attached by `get`) that defines a module-level
`ABLATION` is registered under `ABLATION.name`, which must equal the module name. Adding an ablation is adding its
file, its present/ file and its test; nothing else to edit.
"""

import dataclasses
import importlib
import pkgutil

# Nothing heavy is imported here, so listing names and rejecting a bad one is instant; `get`
# imports the ablation's module (and with it jax, pandas, scipy).
_MACHINERY = frozenset(
  {
    'base',
    'cap',
    'changes',
    'checks',
    'judge',
    'languages',
    'present',
    'regime',
    'report',
    'runner',
    'storage',
    'zloss',
  }
)
SCALES = ('smoke', 'quick', 'full', 'large')  # --scale values; an ablation declares which it has


def names() -> list[str]:
  """Registered ablation names, sorted."""
  return sorted(
    m.name for m in pkgutil.iter_modules(__path__) if m.name not in _MACHINERY and not m.name.startswith('_')
  )


class UnknownAblation(ValueError):
  pass


def check(name: str) -> None:
  """UnknownAblation (one line, with the allowed names) unless `name` is registered."""
  if name not in names():
    raise UnknownAblation(f'--ablation={name!r} is unknown; allowed: {", ".join(names())}, all')


def get(name: str):
  """The study (a base.Study) registered as `name`."""
  from ffn_research.ablations import base

  check(name)
  try:
    ablation = getattr(importlib.import_module(f'{__name__}.{name}'), 'ABLATION', None)
  except base.StudyError as e:  # a study that does not declare what its verdicts need does not load
    raise UnknownAblation(str(e)) from None
  if not isinstance(ablation, base.Study) or ablation.name != name:
    raise UnknownAblation(f'ffn_research/ablations/{name}.py must define ABLATION = base.Study(name={name!r}, ...)')
  if ablation.present is None:  # its tables and figures: present/NAME.py, which imports the study (never the reverse)
    shown = importlib.import_module(f'{__name__}.present.{name}')
    ablation = dataclasses.replace(ablation, present=shown.present)
  return ablation
