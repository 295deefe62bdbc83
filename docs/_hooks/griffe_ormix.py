"""Griffe extension for the API reference (loaded by mkdocstrings, see mkdocs.yml).

- ormix's docstrings title their doctest section ``Example:``; griffe's Google parser knows ``Examples:``,
  and would otherwise render the ``>>>`` lines as prose (where ``d["a"][0]`` reads as a Markdown link).
- Every name a package face exports in ``__all__`` (a package's ``__init__``, or a module right under
  ``ormix``: what the API reference renders) must have a docstring: one without is a warning, which
  ``mkdocs build --strict`` turns into a failed build.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import griffe

LOG = logging.getLogger("mkdocs.plugins.ormix_api")
EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.M)


class OrmixDocstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = EXAMPLE.sub(r"\1Examples:", obj.docstring.value)

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for module in _modules(pkg):
            for name in sorted(module.exports or ()):
                if not isinstance(name, str) or name.startswith("__"):
                    continue
                try:
                    member = module[name]
                    docstring = member.docstring
                except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                    continue  # re-exported from outside what griffe loaded: documented where it lives
                if not member.is_attribute and (docstring is None or not docstring.value.strip()):
                    LOG.warning("%s.%s is exported (__all__) but has no docstring", module.path, name)


def _modules(module: griffe.Module) -> list[griffe.Module]:
    """The package faces under ``module``: packages, and the modules right under the top-level package."""
    found = [module]
    for name, member in module.modules.items():
        if member.is_alias or name.startswith("_"):
            continue
        if member.is_package:
            found += _modules(member)
        elif module.parent is None:
            found.append(member)
    return found
