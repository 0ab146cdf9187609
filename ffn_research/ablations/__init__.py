"""Ablations: one published or theoretical claim each, one module each, found by name.

Any module in this package (other than the machinery: base, verdict, runner) that defines a
module-level `ABLATION` is registered under `ABLATION.name`, which must equal the module
name. Adding an ablation is adding one file (plus its test); nothing else to edit.
"""

import importlib
import pkgutil

from ffn_research.ablations.base import Ablation  # pylint: disable=unused-import

_MACHINERY = frozenset({'base', 'verdict', 'runner'})


def names() -> list[str]:
  """Registered ablation names, sorted."""
  return sorted(m.name for m in pkgutil.iter_modules(__path__)
                if m.name not in _MACHINERY and not m.name.startswith('_'))


class UnknownAblation(ValueError):
  pass


def get(name: str) -> Ablation:
  """The ablation registered as `name` (UnknownAblation with the allowed names otherwise)."""
  if name not in names():
    raise UnknownAblation(f'--ablation={name!r} is unknown; allowed: {", ".join(names())}, all')
  ablation = getattr(importlib.import_module(f'{__name__}.{name}'), 'ABLATION', None)
  if not isinstance(ablation, Ablation) or ablation.name != name:
    raise UnknownAblation(f'ffn_research/ablations/{name}.py must define ABLATION = Ablation(name={name!r}, ...)')
  return ablation
