"""The package's shape, held: a small public surface, few exception classes (each one a caller can act on),
no long functions. Read with `ast` from the source, so a change that grows the surface fails here, naming it.

The limits are issue 43's: at most 130 names exported across every `__all__` (package faces only: private
modules carry none), at most 30 exception classes, each raised and caught or asserted by name somewhere, and
no function over 80 lines outside the typer declarations of `ormix.app._cli`.
"""

from __future__ import annotations

import ast
import pathlib
import re

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "ormix"
TESTS = pathlib.Path(__file__).resolve().parent
TREES = {path: ast.parse(path.read_text(), str(path)) for path in sorted(SRC.rglob("*.py"))}


def _private(path: pathlib.Path) -> bool:
    parts = path.relative_to(SRC).parts
    return any(p.startswith("_") and not p.startswith("__") for p in parts)


def _exports(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def _is_exception(node: ast.ClassDef, known: set[str]) -> bool:
    bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
    builtin = {"Exception", "ValueError", "RuntimeError", "TimeoutError", "KeyError", "OSError"}
    return bool(bases & (builtin | known))


def _exception_classes() -> dict[str, pathlib.Path]:
    found: dict[str, pathlib.Path] = {}
    grew = True
    while grew:  # subclasses of subclasses: until nothing new is found
        grew = False
        for path, tree in TREES.items():
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ClassDef)
                    and node.name not in found
                    and _is_exception(node, set(found))
                ):
                    found[node.name] = path
                    grew = True
    return found


def test_private_modules_export_nothing_and_the_faces_stay_small():
    private_all = [str(p.relative_to(SRC)) for p, tree in TREES.items() if _private(p) and _exports(tree)]
    assert private_all == []
    exported = sum(len(_exports(tree)) for tree in TREES.values())
    assert 40 <= exported <= 130, exported


def test_at_most_30_exception_classes_each_raised_and_caught_or_asserted_by_name():
    classes = _exception_classes()
    assert {"OrmixError", "UsageError", "ORSError", "TransportError"} <= set(classes)  # the scan sees them
    assert len(classes) <= 30, sorted(classes)
    text = "\n".join(p.read_text() for p in [*TREES, *TESTS.rglob("*.py")])
    unused = []
    for name in classes:
        raised = re.search(rf"raise {name}\b|raise .*\b{name}\(|\b{name}\(", text)
        handled = re.search(
            rf"except \(?[\w., ]*\b{name}\b|raises\(\(?[\w., ]*\b{name}\b|isinstance\([^)]*\b{name}\b", text
        )
        if not (raised and handled):
            unused.append(name)
    assert unused == []


def test_no_function_over_80_lines_outside_the_typer_declarations():
    long = []
    for path, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                declared = any(ast.unparse(d).startswith("app.command") for d in node.decorator_list)
                if lines > 80 and not declared:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_two_families_a_caller_catches():
    # A caller tells bad input (fix it, exit 2) from a failure while running (exit 1) by these two classes.
    from ormix._errors import (
        MixtureError,
        OrmixError,
        OrmixRuntimeError,
        ServerStartError,
        TargetError,
        UsageError,
        exit_status,
    )
    from ormix.rollout._episode import ToolCallError
    from ormix.workbench.envs.sandbox import SandboxError

    for runtime in (ServerStartError("down"), ToolCallError("x"), SandboxError("closed")):
        assert isinstance(runtime, OrmixRuntimeError) and not isinstance(runtime, UsageError)
        assert exit_status(runtime) == 1
    for usage in (TargetError("bad"), MixtureError("bad")):
        assert isinstance(usage, UsageError) and isinstance(usage, OrmixError)
        assert exit_status(usage) == 2
