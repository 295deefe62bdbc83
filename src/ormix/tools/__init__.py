"""ORS tool specs as Python methods TRL can show the model. Pure: no I/O, nothing executed.

One module per job; the names other layers use are re-exported here.

==========================  =================================================================================
module                      job
==========================  =================================================================================
:mod:`.specs`               one normal form for every spec shape (``normalize_spec``), identity (``schema_hash``)
:mod:`.schema`              the one JSON Schema walker (``$ref``, ``allOf``, unions, nullables, cycle/depth guards)
:mod:`.hints`               schema → typing objects (``type_hint``)
:mod:`.descriptions`        schema → parameter text ("Shape:", "Constraints:", "Default:", ...)
:mod:`.docstrings`          Google-style docstrings: parse a tool description, render a method docstring
:mod:`.names`               identifier-safe, reversible names (``safe_identifier``, ``NameMap``)
:mod:`.plan`                spec → ``ToolBinding`` (``plan_tool``)
:mod:`.binding`             ``ToolBinding`` → method (``make_method``), methods onto a class (``bind_tools``)
:mod:`.merge`               several probes' tool lists → one (``merge_tool_specs``)
:mod:`.examples`            schema → example arguments, for ``ormix check`` (``example_arguments``)
:mod:`.text`                one-line text and bounded JSON snippets
==========================  =================================================================================

Example:
    >>> class Env:
    ...     def _call_tool(self, name, arguments):
    ...         return f"{name} {arguments}"
    >>> report = bind_tools(Env, [{"name": "echo", "input_schema": {"properties": {"text": {"type": "string"}}}}])
    >>> Env().echo("hi")
    "echo {'text': 'hi'}"
"""

from ormix.tools.binding import (
    RESERVED_METHOD_NAMES,
    BindingReport,
    RenamedTool,
    ServerDefault,
    SkippedTool,
    bind_tools,
    make_method,
)
from ormix.tools.examples import example_arguments, example_value
from ormix.tools.merge import ToolConflict, merge_tool_specs
from ormix.tools.names import NameMap, NameMapError, is_safe_identifier, safe_identifier
from ormix.tools.plan import NO_DEFAULT, BindingConflictError, ParamBinding, ToolBinding, plan_tool
from ormix.tools.specs import ToolSpecError, normalize_spec, schema_hash

__all__ = [
    "NO_DEFAULT",
    "RESERVED_METHOD_NAMES",
    "BindingConflictError",
    "BindingReport",
    "NameMap",
    "NameMapError",
    "ParamBinding",
    "RenamedTool",
    "ServerDefault",
    "SkippedTool",
    "ToolBinding",
    "ToolConflict",
    "ToolSpecError",
    "bind_tools",
    "example_arguments",
    "example_value",
    "is_safe_identifier",
    "make_method",
    "merge_tool_specs",
    "normalize_spec",
    "plan_tool",
    "safe_identifier",
    "schema_hash",
]
