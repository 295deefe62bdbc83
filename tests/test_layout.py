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
    module: str  # the importing module, e.g. "ormix.ors.client"
    target: str  # what it imports, e.g. "ormix.errors" or "httpx"
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
    assert {"ormix.ors.client", "ormix.spec", "ormix.mixture.mixture", "ormix.rollout.episode"} <= modules
    assert any(i.module == "ormix.spec" and i.target == "ormix.rollout.episode" for i in IMPORTS)


def test_the_protocol_client_imports_nothing_of_ormix_outside_ors_and_nothing_of_trl():
    assert _violations(("ormix.ors",), ("ormix",), allowed=("ormix.ors",)) == []
    assert _violations(("ormix.ors",), ("trl", "transformers", "torch", "datasets")) == []


@pytest.mark.parametrize(
    ("layer", "above"),
    [
        # cli/train -> mixture -> spec -> rollout -> tools -> ors: nothing imports a layer above it.
        ("ormix.tools", ("ormix.rollout", "ormix.spec", "ormix.mixture", "ormix.train", "ormix.cli")),
        ("ormix.rollout", ("ormix.spec", "ormix.mixture", "ormix.train", "ormix.cli")),
        ("ormix.spec", ("ormix.mixture", "ormix.train", "ormix.cli")),
        ("ormix.mixture", ("ormix.train", "ormix.cli")),
        ("ormix.train", ("ormix.cli",)),
        ("ormix.config", ("ormix.spec", "ormix.rollout", "ormix.connection", "ormix.train", "ormix.cli")),
        ("ormix.telemetry", ("ormix.spec", "ormix.mixture", "ormix.train", "ormix.cli")),
        ("ormix.diagnostics", ("ormix.train", "ormix.cli")),
        (
            "ormix.local",
            ("ormix.spec", "ormix.mixture", "ormix.rollout", "ormix.tools", "ormix.train", "ormix.cli"),
        ),
    ],
)
def test_arrows_point_one_way(layer, above):
    assert _violations((layer,), above) == []


@pytest.mark.parametrize(
    "pure",
    [
        "ormix.mixture.planner",
        "ormix.mixture.adaptive",
        "ormix.mixture.ablation",
        "ormix.mixture.lagged",
        "ormix.rollout.outcome",
        "ormix.rollout.lookahead",
        "ormix.rollout.stragglers",
        "ormix.rollout.group_scoring",
        "ormix.telemetry.metrics",
        "ormix.targets",
        "ormix.ors.balance",
        "ormix.errors",
        "ormix.hashing",
        "ormix.config.trainer_rules",
        "ormix.config.checks",
        "ormix.tools.schema",
        "ormix.tools.names",
        "ormix.tools.binding",
        "ormix.evaluation.stats",
        "ormix.evaluation.summary",
        "ormix.evaluation.errors",
        "ormix.evaluation.manifest",
    ],
)
def test_pure_logic_does_no_io(pure):
    io = (
        "ormix.ors",
        "ormix.connection",
        "ormix.local",
        "ormix.rollout.episode",
        "ormix.rollout.batch",
        "ormix.rollout.ahead",
        "ormix.telemetry.records",
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
    # integrations/trl is the library's one TRL-facing module; train/ (the CLI's runner), the eval runner
    # (the one evaluation module driving a trainer) and demo/ are applications of the library, not part of it.
    edges = ("ormix.integrations.trl", "ormix.demo", "ormix.train", "ormix.evaluation.runner")
    offenders = [
        str(i)
        for i in IMPORTS
        if _under(i.target, "trl", "transformers", "torch", "accelerate") and not _under(i.module, *edges)
    ]
    assert offenders == []


def test_demo_tooling_is_not_part_of_the_library():
    # Only `ormix train` and `ormix eval` reach the demo (the default tiny model, the warm start `train`
    # offers, the scripted policy the oracle run plays its reference solutions with): of eval's modules, the
    # runner, the model it loads (the tiny one by default) and the oracle (the scripted policy).
    applications = (
        "ormix.demo",
        "ormix.train",
        "ormix.evaluation.runner",
        "ormix.evaluation.model",
        "ormix.evaluation.oracle",
    )
    offenders = [
        str(i) for i in IMPORTS if _under(i.target, "ormix.demo") and not _under(i.module, *applications)
    ]
    assert offenders == []


def test_no_module_reaches_into_another_modules_private_names():
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
                if a.name.startswith("_") and not a.name.startswith("__")
            ]
    assert offenders == []
