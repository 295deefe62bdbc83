"""Reading and writing mixture files: YAML with duplicate-key detection, line numbers per key path."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from ormix.config._problems import Loc, Problem


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that records duplicate mapping keys instead of silently keeping the last one."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.node_paths: dict[int, Loc] = {}
        self.duplicates: list[Problem] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except (yaml.YAMLError, TypeError):
                    continue  # the base constructor reports unhashable keys
                line = key_node.start_mark.line + 1
                if key in seen:
                    path = (*self.node_paths.get(id(node), ()), str(key))
                    fix = (
                        "each member needs its own name; rename or remove one"
                        if self.node_paths.get(id(node)) == ("members",)
                        else "keep one of them"
                    )
                    self.duplicates.append(
                        Problem(path, f"duplicate key {key!r} (first on line {seen[key]}); {fix}", line)
                    )
                else:
                    seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads `1e-5` as a string; learning rates are written that way, so accept it as a float.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _index_nodes(node: yaml.Node, path: Loc, node_paths: dict[int, Loc], lines: dict[Loc, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        node_paths[id(node)] = path
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            child = (*path, key_node.value)
            # PyYAML keeps the last of duplicate keys, so the last occurrence gives the line.
            lines[child] = key_node.start_mark.line + 1
            _index_nodes(value_node, child, node_paths, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            lines[child] = item.start_mark.line + 1
            _index_nodes(item, child, node_paths, lines)


def load_yaml(text: str) -> tuple[Any, dict[Loc, int], list[Problem]]:
    """Parse a mixture file: ``(data, line of each key path, duplicate-key problems)``.

    Raises ``yaml.YAMLError`` for a syntax error (see `syntax_problem`).

    Example:
        >>> data, lines, dupes = load_yaml("seed: 1\\nseed: 2\\n")
        >>> data, lines[("seed",)], dupes[0].message
        ({'seed': 2}, 2, "duplicate key 'seed' (first on line 1); keep one of them")
    """
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[Loc, int] = {}
        if node is None:
            return None, lines, []
        _index_nodes(node, (), loader.node_paths, lines)
        data = loader.construct_document(node)
        return data, lines, list(loader.duplicates)
    finally:
        loader.dispose()


def line_of(path: Loc, lines: Mapping[Loc, int]) -> int | None:
    """The line of ``path``, or of its closest parent that has one.

    Example:
        >>> line_of(("members", "a", "num_tasks"), {("members",): 1, ("members", "a"): 2})
        2
    """
    for end in range(len(path), 0, -1):
        key = tuple(str(p) if not isinstance(p, int) else p for p in path[:end])
        if key in lines:
            return lines[key]
    return None


def syntax_problem(e: yaml.YAMLError) -> Problem:
    """A YAML syntax error as a `Problem` with its line and column; an unquoted ``${VAR}`` inside a ``{...}``
    mapping (whose braces YAML reads as its own) is named, with the quoting that fixes it.

    Example:
        >>> try:
        ...     yaml.safe_load("members:\\n  a: {target: x, api_key: ${KEY}}\\n")
        ... except yaml.YAMLError as e:
        ...     print(syntax_problem(e).message.split("; ")[1])
        inside {...}, quote a ${VAR} value: api_key: '${KEY}'
    """
    mark = getattr(e, "problem_mark", None)
    what = getattr(e, "problem", None) or str(e)
    line = mark.line + 1 if mark is not None else None
    col = f", column {mark.column + 1}" if mark is not None else ""
    fix = "fix the YAML (check indentation and quoting)"
    buffer = getattr(mark, "buffer", None)
    if mark is not None and isinstance(buffer, str):
        start = buffer.rfind("\n", 0, mark.pointer) + 1
        end = buffer.find("\n", mark.pointer)
        text = buffer[start : end if end >= 0 else len(buffer)]
        ref = re.search(r"([\w-]+):\s*(\$\{\w*\})", text)
        if ref is not None and "{" in text[: ref.start()]:
            fix = f"inside {{...}}, quote a ${{VAR}} value: {ref.group(1)}: '{ref.group(2)}'"
    return Problem((), f"YAML syntax error{col}: {what}; {fix}", line)


def not_a_mapping(data: Any) -> Problem:
    """The problem of a file whose top level is not a mapping.

    Example:
        >>> not_a_mapping(None).message[:17]
        'the file is empty'
    """
    if data is None:
        return Problem((), "the file is empty; a mixture file is a mapping with at least `members:`")
    return Problem(
        (),
        f"expected a mapping with `members:` at the top level, got a {type(data).__name__}; "
        "see mixtures/local-demo.yaml for the layout",
    )


def name_from_stem(stem: str) -> str:
    """A mixture name from a file name's stem (characters a name cannot hold become '-').

    Example:
        >>> name_from_stem("my mixture (v2)")
        'my-mixture-v2'
    """
    return derived_name(re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-._") or "mixture")


def derived_name(name: str) -> str:
    """A derived mixture name (``<name>-without-seta``), cut to the 128 characters a name may have."""
    return name[:128]


class _Dumper(yaml.SafeDumper):
    """Block style for mappings, flow style for short lists of scalars (``indices: [0, 1, 2]``)."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(x, (list, dict)) for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def dump_yaml(data: Any, header: str | None = None) -> str:
    """YAML text for plain data (block mappings, flow lists of scalars), with ``header`` as ``#`` comments.

    Example:
        >>> print(dump_yaml({"members": {"a": {"indices": [0, 1]}}}, header="derived"), end="")
        # derived
        members:
          a:
            indices: [0, 1]
    """
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    if header:
        body = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) + body
    return body
