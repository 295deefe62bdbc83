"""ORS tool specs as Python methods TRL can show the model. Pure: no I/O, nothing executed.

One module per job; the names other layers use are re-exported here, the rest stay in their modules.

==================  =========================================================================================
module              job
==================  =========================================================================================
:mod:`.specs`       one normal form for every spec shape, identity (``schema_hash``), merging probes
:mod:`.schema`      the one JSON Schema walker (``$ref``, ``allOf``, unions, nullables, cycle/depth guards)
:mod:`.hints`       schema → typing objects (``type_hint``)
:mod:`.descriptions` schema → parameter text ("Shape:", "Constraints:", "Default:", ...)
:mod:`.docstrings`  Google-style docstrings: parse a tool description, render a method docstring
:mod:`.names`       identifier-safe names (``safe_identifier``)
:mod:`.binding`     spec → ``ToolBinding`` (``plan_tool``) → method (``make_method``) → class (``bind_tools``)
:mod:`.text`        one-line text and bounded JSON snippets
==================  =========================================================================================

``ormix check``'s example arguments are generated from the same walker (:mod:`ormix.app._check`).

Example:
    >>> class Env:
    ...     def _call_tool(self, name, arguments):
    ...         return f"{name} {arguments}"
    >>> echo = {"name": "echo", "input_schema": {"properties": {"text": {"type": "string"}}}}
    >>> report = bind_tools(Env, [echo])
    >>> Env().echo("hi")
    "echo {'text': 'hi'}"
"""

from ormix.tools._binding import NO_DEFAULT, BindingReport, ServerDefault, ToolBinding, bind_tools, plan_tool
from ormix.tools._names import BindingConflictError
from ormix.tools._specs import merge_tool_specs

__all__ = [
    "NO_DEFAULT",
    "BindingConflictError",
    "BindingReport",
    "ServerDefault",
    "ToolBinding",
    "bind_tools",
    "merge_tool_specs",
    "plan_tool",
]
