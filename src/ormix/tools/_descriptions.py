"""Parameter descriptions: what a type hint cannot carry, written as text the model reads.

``get_json_schema`` shows a parameter's docstring text as its ``description``. ormix puts there, in order:

- what the parameter is: the schema's ``description``, the text the tool's own docstring gives it
  (``Args:``), or failing both its ``title`` (a pydantic title such as ``"File Path"`` for ``file_path`` is
  not a description: it gives way to real text);
- ``Shape: ...``: a compact picture of nested structure (object fields with ``?`` for optional ones, their
  defaults and descriptions; recursive parts marked ``(recursive)``);
- ``One of: ...`` for non-scalar enums, ``Constraints: ...`` (``pattern``, ``minimum``, ``maxItems``...),
  ``Also: ...`` for keywords no hint expresses, ``Default: ...``, and ``Note: ...`` on what was approximated.

Example:
    >>> walker = SchemaWalker({"type": "integer", "title": "Count", "minimum": 1, "default": 3})
    >>> param_text(walker, walker.node(), "n").render()
    'Count. Constraints: minimum=1. Default: 3.'

Shapes are spelled out :data:`SHAPE_DEPTH` levels deep and cut at :data:`SHAPE_LIMIT` characters; the keywords
of :data:`CONSTRAINT_KEYS` are listed as constraints, those of :data:`UNCARRIED_KEYS` verbatim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ormix.tools._docstrings import safe_text, split_choices
from ormix.tools._schema import Node, SchemaWalker, is_scalar
from ormix.tools._text import one_line, snippet

#: Nesting levels spelled out in a "Shape:" text.
SHAPE_DEPTH = 6
#: Characters of "Shape:" text per parameter.
SHAPE_LIMIT = 1500
#: Validation keywords listed in "Constraints:" (in this order).
CONSTRAINT_KEYS = tuple(
    (
        "format pattern minLength maxLength minimum maximum exclusiveMinimum exclusiveMaximum multipleOf "
        "minItems maxItems uniqueItems minProperties maxProperties contentMediaType contentEncoding"
    ).split()
)
#: Keywords neither a type hint nor a constraint can express; shown verbatim under "Also:".
UNCARRIED_KEYS = tuple(
    (
        "not if then else patternProperties dependentRequired dependentSchemas dependencies propertyNames "
        "contains unevaluatedProperties unevaluatedItems"
    ).split()
)
_SENTENCE_END = ".!?:;"


def constraints_text(schema: Mapping[str, Any]) -> str:
    """The validation keywords of one schema as ``key=value`` pairs (``""`` when there are none).

    Example:
        >>> constraints_text({"type": "string", "pattern": "^a", "maxLength": 9})
        'pattern="^a", maxLength=9'
    """
    return ", ".join(f"{k}={snippet(schema[k], 80)}" for k in CONSTRAINT_KEYS if k in schema)


def is_generated_title(title: Any, name: str) -> bool:
    """True when ``title`` is only what pydantic derives from the name (``file_path`` → ``"File Path"``).

    Such a title says nothing the name does not: real text from a docstring takes its place.

    Example:
        >>> is_generated_title("File Path", "file_path"), is_generated_title("Count", "n")
        (True, False)
    """

    def norm(text: str) -> str:
        return " ".join(text.replace("_", " ").split()).casefold()

    return isinstance(title, str) and norm(title) == norm(name)


def shape_text(walker: SchemaWalker, node: Node) -> str:
    """A compact TypeScript-like picture of ``node``, for shapes type hints cannot carry.

    Example:
        >>> walker = SchemaWalker({"type": "array", "items": {"type": "object", "required": ["a"],
        ...     "properties": {"a": {"type": "string"}, "b": {"enum": [1, 2], "default": 1}}}})
        >>> shape_text(walker, walker.node())
        'list of {a: string; b?: 1 | 2 (default 1)}'
    """
    if node.depth > SHAPE_DEPTH:
        return "…"
    kind = node.kind
    if kind == "cycle":
        return f"{node.label} (recursive)"
    if kind == "never":
        return "nothing"
    if node.values is not None:
        shown = " | ".join(snippet(v, 80) for v in node.values[:50])
        return shown + (" | …" if len(node.values) > 50 else "")
    if kind == "union":
        text = " | ".join(dict.fromkeys(shape_text(walker, m) for m in node.members))
    elif kind == "array":
        prefix = walker.prefix_items(node)
        rest = walker.rest_items(node)
        if prefix:
            text = "[" + ", ".join(shape_text(walker, p) for p in prefix) + "]"
        else:
            text = "list" if rest is None else f"list of {shape_text(walker, rest)}"
    elif kind == "object":
        text = _object_shape(walker, node)
    elif kind in ("string", "integer", "number", "boolean", "null"):
        constraints = constraints_text(node.schema)
        text = kind + (f" ({constraints})" if constraints else "")
    else:
        text = "any"
    return text + (" | null" if node.nullable else "")


def _object_shape(walker: SchemaWalker, node: Node) -> str:
    fields = walker.fields(node)
    if fields:
        required = walker.required(node)
        parts = []
        for name, child in fields:
            text = f"{name}{'' if name in required else '?'}: {shape_text(walker, child)}"
            if "default" in child.schema:
                text += f" (default {snippet(child.schema['default'], 60)})"
            about = child.schema.get("description")
            if isinstance(about, str) and about.strip():
                about = one_line(about)
                text += f" — {about if len(about) <= 120 else about[:119] + '…'}"
            parts.append(text)
        return "{" + "; ".join(parts) + "}"
    extra = walker.extra_properties(node)
    return "object" if extra is None else f"object of {shape_text(walker, extra)}"


def needs_shape(walker: SchemaWalker, node: Node, *, nested: bool = False) -> bool:
    """True when ``node`` holds structure its type hint cannot show (fields, nested constraints, cycles).

    ``nested`` is set below array items and object values, whose constraints "Constraints:" does not list.

    Example:
        >>> walker = SchemaWalker({"type": "array", "items": {"type": "string", "maxLength": 3}})
        >>> needs_shape(walker, walker.node()), needs_shape(walker, walker.node({"type": "string"}))
        (True, False)
    """
    if node.depth > SHAPE_DEPTH:
        return False
    if node.kind == "cycle":
        return True
    schema = node.schema
    if node.kind == "object" and walker.fields(node):
        return True
    if nested and (constraints_text(schema) or any(k in schema for k in UNCARRIED_KEYS)):
        return True
    if nested and node.values is not None and not all(is_scalar(v) for v in node.values):
        return True  # at the top level the "One of:" text lists them
    if node.kind == "union":
        return any(needs_shape(walker, m, nested=nested) for m in node.members)
    if node.kind == "array":
        inner = [*walker.prefix_items(node), walker.rest_items(node)]
        return any(needs_shape(walker, c, nested=True) for c in inner if c is not None)
    extra = walker.extra_properties(node) if node.kind == "object" else None
    return extra is not None and needs_shape(walker, extra, nested=True)


@dataclass(frozen=True)
class ParamText:
    """The parts of one parameter's description; :meth:`render` joins them into the text the model reads.

    ``described`` is the schema's own description (``""`` when it has none, or only its generated title);
    ``details`` are the "Shape:" ... "Note:" sentences; ``enum`` says the type hint already lists the allowed
    values (then a ``(choices: ...)`` clause in server text stays plain text). ``notes`` are what was
    approximated, for logs.

    Example:
        >>> text = ParamText("text", described="", title="Text")
        >>> text.render(), text.render("The string to echo back.")
        ('Text', 'The string to echo back.')
    """

    name: str
    described: str = ""
    title: str = ""
    details: tuple[str, ...] = ()
    enum: bool = False
    notes: tuple[str, ...] = ()

    def render(self, documented: str = "") -> str:
        """The description, with ``documented`` (the tool docstring's text for this parameter) folded in.

        Real text (schema description, docstring text, both when they differ) comes first, else the title,
        else ``"The <name> value."``; then the details. A valid trailing ``(choices: [...])`` of the server's
        text moves to the very end, where ``get_json_schema`` reads it as an ``enum``.

        Example:
            >>> ParamText("mode", details=("Default: \\"r\\".",)).render('File mode (choices: ["r", "w"])')
            'File mode. Default: "r". (choices: ["r", "w"])'
        """
        summary = _join(self.described, one_line(documented)) or self.title or f"The {self.name} value."
        summary, clause = (summary, None) if self.enum else split_choices(summary)
        summary = summary or f"The {self.name} value."
        if self.details and summary[-1] not in _SENTENCE_END:
            summary += "."  # the added sentences must not run into the server's text
        text = " ".join([summary, *self.details]) + (f" {clause}" if clause else "")
        return safe_text(text, keep_choices=clause is not None)


def _join(first: str, second: str) -> str:
    if not second or second.casefold() in first.casefold():
        return first
    if not first or first.casefold() in second.casefold():
        return second
    return first + ("" if first[-1] in _SENTENCE_END else ".") + " " + second


def param_text(walker: SchemaWalker, node: Node, name: str, notes: Iterable[str] = ()) -> ParamText:
    """The :class:`ParamText` of the parameter ``name`` whose schema is ``node``.

    ``notes`` (e.g. from :func:`~ormix.tools._hints.type_hint`) are shown as a "Note:" sentence; notes about
    the text itself (a truncated shape, keywords shown only as text) are added to the result's ``notes``.

    Example:
        >>> walker = SchemaWalker({"type": "object", "description": "Options.",
        ...     "properties": {"deep": {"type": "boolean", "default": False}}})
        >>> param_text(walker, walker.node(), "opts").render()
        'Options. Shape: {deep?: boolean (default false)}.'
    """
    schema = node.schema
    notes = list(notes)
    description = schema.get("description")
    title = schema.get("title")
    described = one_line(description) if isinstance(description, str) else ""
    if described and is_generated_title(described, name):
        described = ""
    details: list[str] = []
    if needs_shape(walker, node):
        shape = shape_text(walker, node)
        if len(shape) > SHAPE_LIMIT:
            shape = shape[: SHAPE_LIMIT - 1] + "…"
            notes.append("the shape description is truncated")
        details.append(f"Shape: {shape}.")
    values = node.values
    scalar_values = values is not None and all(is_scalar(v) for v in values)
    if isinstance(schema.get("enum"), list) and values is not None and not scalar_values:
        details.append(f"One of: {snippet(list(values), 400)}.")
    sources = [schema, *(m.schema for m in node.members)]
    constraints = list(dict.fromkeys(c for c in map(constraints_text, sources) if c))
    if constraints:
        details.append(f"Constraints: {'; '.join(constraints)}.")
    uncarried = {k: schema[k] for k in UNCARRIED_KEYS if k in schema}
    if uncarried:
        details.append(f"Also: {snippet(uncarried, 300)}.")
        notes.append(f"schema keywords {sorted(uncarried)} are described in text only")
    if "default" in schema:
        details.append(f"Default: {snippet(schema['default'])}.")
    if notes:
        details.append("Note: " + "; ".join(notes) + ".")
    return ParamText(
        name,
        described,
        one_line(title) if isinstance(title, str) else "",
        tuple(details),
        enum=scalar_values,
        notes=tuple(notes),
    )
