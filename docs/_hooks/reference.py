"""MkDocs hook: the mixture-file and command-line references, generated at build time from the code.

A page holds a marker line, ``<!-- ormix:generate mixture-reference -->`` or
``<!-- ormix:generate cli-reference -->``; the hook replaces it with tables built from the pydantic models of
``ormix.config`` (walked from ``MixtureConfig``) and from the click command tree of the typer app
(``ormix.app._cli``). Generated, so the reference cannot drift from what ``ormix`` accepts; on GitHub the
marker is an invisible comment and the hand-written overview above it stays readable.
"""

from __future__ import annotations

import inspect
import re
import types
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

MARKER = re.compile(r"^<!-- ormix:generate ([a-z-]+) -->$", re.M)


CODE_SPAN = re.compile(r"`[^`\n]*`")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return _table_code_pipes(MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown))


def _table_code_pipes(markdown: str) -> str:
    """In a table row, ``\\|`` inside a code span becomes ``|``: GitHub needs the escape there to keep the
    cell, Python-Markdown keeps a code span's pipes in the cell anyway and would show the backslash."""

    def row(line: str) -> str:
        if not line.startswith("|"):
            return line
        return CODE_SPAN.sub(lambda m: m.group(0).replace("\\|", "|"), line)

    return "\n".join(row(line) for line in markdown.split("\n"))


def _cell(text: str) -> str:
    # One table cell: no line breaks, and a pipe would end the cell.
    return " ".join(text.split()).replace("|", "\\|")


def _doc(obj: Any) -> str:
    """A docstring without its examples (the API reference shows those)."""
    doc = inspect.getdoc(obj) or ""
    return re.split(r"^Examples?:\s*$", doc, maxsplit=1, flags=re.M)[0].strip()


# -- mixture files -----------------------------------------------------------------------------------------


def _models(root: type) -> list[type]:
    """Every pydantic model reachable from ``root``'s fields, in the order a reader meets them."""
    from pydantic import BaseModel

    seen: list[type] = []

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in seen:
                return
            seen.append(tp)
            for annotation in _annotations(tp).values():
                visit(annotation)
            return
        for arg in get_args(tp):
            visit(arg)

    visit(root)
    return seen


def _annotations(model: type) -> dict[str, Any]:
    """Each field's type, forward references resolved (a model may name one defined below it)."""
    hints = get_type_hints(model)
    return {name: hints.get(name, field.annotation) for name, field in model.model_fields.items()}  # type: ignore[attr-defined]


def _type(tp: Any) -> str:
    from pydantic import BaseModel

    origin, args = get_origin(tp), get_args(tp)
    if tp is type(None):
        return "`null`"
    if tp is Any:
        return "any"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"[{tp.__name__}](#{tp.__name__.lower()})"
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_type(a) for a in args)
    if origin is not None and str(origin).endswith("Annotated"):
        return _type(args[0])
    if origin in (dict,):
        return f"mapping of {_type(args[0])} to {_type(args[1])}" if args else "mapping"
    if origin in (list, tuple, set, frozenset):
        inner = ", ".join(_type(a) for a in args if a is not Ellipsis)
        return f"list of {inner}" if inner else "list"
    if isinstance(tp, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            tp.__name__, f"`{tp.__name__}`"
        )
    return f"`{tp}`"


def _yaml(value: Any) -> str:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return f"the defaults of [{type(value).__name__}](#{type(value).__name__.lower()})"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, (dict, list)) and not value:
        return "`{}`" if isinstance(value, dict) else "`[]`"
    return f"`{value}`"


_BOUNDS = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤", "min_length": "length ≥", "max_length": "length ≤"}


def _constraints(field: Any) -> str:
    said = []
    for meta in field.metadata:
        for attr, sign in _BOUNDS.items():
            value = getattr(meta, attr, None)
            if value is not None:
                said.append(f"{sign} {value}")
        pattern = getattr(meta, "pattern", None)
        if pattern:
            said.append(f"matches `{pattern}`")
    return ", ".join(said)


def mixture_reference() -> str:
    from pydantic_core import PydanticUndefined

    from ormix.config import MixtureConfig

    out = [
        "Generated from the pydantic models of `ormix.config` when the site is built: every model a mixture "
        "file reaches from its top level, with each key's type, default and bounds. A key marked *required* "
        "has no default.",
        "",
    ]
    for model in _models(MixtureConfig):
        out += [
            f"### {model.__name__}",
            "",
            _doc(model),
            "",
            "| key | type | default | bounds |",
            "|---|---|---|---|",
        ]
        annotations = _annotations(model)
        for name, field in model.model_fields.items():
            key = field.alias or name
            if field.is_required():
                default = "*required*"
            elif field.default_factory is not None:
                default = _yaml(field.default_factory())  # type: ignore[call-arg]
            elif field.default is PydanticUndefined:
                default = ""
            else:
                default = _yaml(field.default)
            row = [f"`{key}`", _type(annotations[name]), default, _constraints(field)]
            if field.description:
                row[0] += f": {field.description}"
            out.append("| " + " | ".join(_cell(c) for c in row) + " |")
        out.append("")
    return "\n".join(out)


# -- the command line --------------------------------------------------------------------------------------


def _param_type(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next((a for a in get_args(annotation) if a is not type(None)), annotation)
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in annotation)
    if get_origin(annotation) in (list, tuple):
        return "repeatable " + _param_type_name(get_args(annotation)[0] if get_args(annotation) else str)
    if getattr(param, "multiple", False):
        return "repeatable " + _param_type_name(annotation)
    return _param_type_name(annotation)


def _param_type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        if issubclass(annotation, Path):
            return "path"
        return {"str": "text", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return "text"


def _param_default(param: Any) -> str:
    default = param.default
    if callable(default) or default is None or default == () or default == []:
        return ""
    if getattr(param, "is_flag", False):
        # A flag's default is which of its spellings is in force, not a boolean.
        return f"`{param.opts[0]}`" if default is True and param.secondary_opts else ""
    if isinstance(default, Enum):
        default = default.value
    if isinstance(default, (list, tuple)):
        default = ",".join(map(str, default))
    return f"`{default}`"


def _params_table(params: list[Any]) -> list[str]:
    rows = ["| argument or option | type | default | what it does |", "|---|---|---|---|"]
    for param in params:
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            name = f"`{(param.metavar or param.name).upper()}`" + ("" if param.required else " (optional)")
        else:
            name = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        cells = [name, _param_type(param), _param_default(param), getattr(param, "help", None) or ""]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return rows


def _usage(name: str, command: Any) -> str:
    pieces = [f"ormix {name}", "[OPTIONS]"]
    for param in command.params:
        if param.param_type_name == "argument":
            shown = (param.metavar or param.name).upper()
            if param.nargs == -1 and not shown.endswith("..."):
                shown += "..."
            pieces.append(shown if param.required else f"[{shown}]")
    return " ".join(pieces)


def cli_reference() -> str:
    import typer
    import typer.main

    from ormix.app import app

    group = typer.main.get_command(app)
    root = typer.Context(group, info_name="ormix")
    out = [
        "Generated from the `ormix` command (its typer app) when the site is built: each command's help, "
        "usage and every argument and option, as `ormix COMMAND --help` shows them.",
        "",
    ]
    if any(not getattr(p, "hidden", False) for p in group.params):
        out += [
            "### ormix",
            "",
            "Options of `ormix` itself, before the command:",
            "",
            *_params_table(group.params),
            "",
        ]
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        if command is None or command.hidden:
            continue
        help_text = inspect.cleandoc(command.help or "").replace("\b\n", "")
        out += [f"### ormix {name}", "", "```text", _usage(name, command), "```", "", help_text, ""]
        out += [*_params_table(command.params), ""]
    return "\n".join(out)


GENERATORS = {"mixture-reference": mixture_reference, "cli-reference": cli_reference}
