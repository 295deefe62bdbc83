"""TRL-facing adapters: tool binding (``ormix.env.binding``), name mapping (``ormix.env.naming``), episodes, routing.

Example:
    >>> from ormix.env.binding import plan_tool
    >>> plan_tool({"name": "echo", "description": "Echo.", "input_schema": {}}).method_name
    'echo'
"""
