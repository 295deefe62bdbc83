"""The folder layout is the architecture: these tests hold the arrows to one direction.

Every ``import`` in ``src/ormix`` is read with `ast` (including imports inside functions, which is where the
lazy ones live), so a new module that breaks a rule fails here with the offending line named.
"""

from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. "ormix.ors._client"
    target: str  # what it imports, e.g. "ormix._errors" or "httpx"
    line: int

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def _module_name(path: pathlib.Path) -> str:
    name = ".".join(path.relative_to(SRC).with_suffix("").parts)
    return name.removesuffix(".__init__")


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: -(level - 1)]
    return ".".join([*base, target] if target else base)


def _imports() -> list[Import]:
    out = []
    for path in sorted((SRC / "ormix").rglob("*.py")):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [Import(module, a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    target = _resolve(module, path.name == "__init__.py", node.level, node.module)
                out.append(Import(module, target, node.lineno))
    return out


IMPORTS = _imports()


def _under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _violations(
    importers: tuple[str, ...], forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()
) -> list[str]:
    return [
        str(i)
        for i in IMPORTS
        if _under(i.module, *importers) and _under(i.target, *forbidden) and not _under(i.target, *allowed)
    ]


def test_the_scan_sees_the_package():
    # A scan that found nothing would pass every rule below.
    modules = {i.module for i in IMPORTS}
    assert {"ormix.ors._client", "ormix._spec", "ormix.mixture._mixture", "ormix.rollout._episode"} <= modules
    assert any(i.module == "ormix._spec" and i.target == "ormix.rollout._episode" for i in IMPORTS)


def test_the_protocol_client_imports_nothing_of_ormix_outside_ors_and_nothing_of_trl():
    assert _violations(("ormix.ors",), ("ormix",), allowed=("ormix.ors",)) == []
    assert _violations(("ormix.ors",), ("trl", "transformers", "torch", "datasets")) == []


LIBRARY_PACKAGES = (
    "ormix.config",
    "ormix.mixture",
    "ormix._spec",
    "ormix._connection",
    "ormix.rollout",
    "ormix.tools",
    "ormix.ors",
    "ormix.telemetry",
    "ormix.evaluation",
    "ormix.server",
    "ormix.trl",
)


def _library(module: str) -> bool:
    return _under(module, "ormix") and not _under(module, "ormix.app", "ormix.workbench")


def test_the_rings_library_app_workbench():
    # The library never reaches the commands or the shipped tools; the workbench never reaches the commands.
    modules = {i.module for i in IMPORTS}
    assert all(any(_under(m, package) and _library(m) for m in modules) for package in LIBRARY_PACKAGES)
    library_offenders = [
        str(i) for i in IMPORTS if _library(i.module) and _under(i.target, "ormix.app", "ormix.workbench")
    ]
    assert library_offenders == []
    assert _violations(("ormix.workbench",), ("ormix.app",)) == []


def test_the_rings_hold_with_a_new_offender():
    # The rule above can fail: a library module importing the app is named.
    planted = Import("ormix.mixture._mixture", "ormix.app._cli", 1)
    assert _library(planted.module) and _under(planted.target, "ormix.app")


@pytest.mark.parametrize(
    ("layer", "above"),
    [
        # app -> mixture -> spec -> rollout -> tools -> ors: nothing imports a layer above it.
        ("ormix.tools", ("ormix.rollout", "ormix._spec", "ormix.mixture", "ormix.app")),
        ("ormix.rollout", ("ormix._spec", "ormix.mixture", "ormix.app")),
        ("ormix._spec", ("ormix.mixture", "ormix.app")),
        ("ormix.mixture", ("ormix.app",)),
        ("ormix.config", ("ormix._spec", "ormix.rollout", "ormix._connection", "ormix.app")),
        ("ormix.telemetry", ("ormix._spec", "ormix.mixture", "ormix.app")),
        ("ormix.server", ("ormix._spec", "ormix.mixture", "ormix.rollout", "ormix.tools", "ormix.app")),
    ],
)
def test_arrows_point_one_way(layer, above):
    assert _violations((layer,), above) == []


@pytest.mark.parametrize(
    "pure",
    [
        "ormix.mixture._planner",
        "ormix.mixture._adaptive",
        "ormix.mixture._ablation",
        "ormix.mixture._lagged",
        "ormix.rollout._outcome",
        "ormix.rollout._lookahead",
        "ormix.rollout._stragglers",
        "ormix.rollout._group_scoring",
        "ormix.telemetry._metrics",
        "ormix._targets",
        "ormix.ors._balance",
        "ormix._errors",
        "ormix._hashing",
        "ormix.config._trainer_rules",
        "ormix.config._checks",
        "ormix.tools._schema",
        "ormix.tools._names",
        "ormix.tools._binding",
        "ormix.evaluation._stats",
        "ormix.evaluation._summary",
        "ormix.evaluation._errors",
        "ormix.app._eval_manifest",
    ],
)
def test_pure_logic_does_no_io(pure):
    io = (
        "ormix.ors",
        "ormix._connection",
        "ormix.server",
        "ormix.rollout._episode",
        "ormix.rollout._batch",
        "ormix.rollout._ahead",
        "ormix.telemetry._records",
        "aiohttp",
        "httpx",
        "anyio",
        "socket",
        "subprocess",
        "datasets",
        "openreward",
    )
    assert _violations((pure,), io) == []


def test_trl_transformers_and_torch_are_imported_only_at_the_edges():
    # ormix.trl is the library's one TRL-facing package; the app's train and eval commands and the workbench
    # (tiny model, warm start, scripted policy) are applications of the library, not part of it.
    edges = ("ormix.trl", "ormix.workbench", "ormix.app._train", "ormix.app._eval")
    offenders = [
        str(i)
        for i in IMPORTS
        if _under(i.target, "trl", "transformers", "torch", "accelerate") and not _under(i.module, *edges)
    ]
    assert offenders == []


def test_no_module_reaches_into_another_modules_private_names():
    # Private modules (`_name.py`) are ormix's own and may be imported inside it; private names may not.
    modules = {_module_name(p) for p in (SRC / "ormix").rglob("*.py")}
    offenders = []
    for path in sorted((SRC / "ormix").rglob("*.py")):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or node.level):
                continue
            target = (
                _resolve(module, path.name == "__init__.py", node.level, node.module)
                if node.level
                else node.module
            )
            if not _under(target or "", "ormix") or target == module:
                continue
            offenders += [
                f"{module}:{node.lineno} imports {target}.{a.name}"
                for a in node.names
                if a.name.startswith("_")
                and not a.name.startswith("__")
                and f"{target}.{a.name}" not in modules
            ]
    assert offenders == []
