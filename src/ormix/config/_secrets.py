"""Secrets in mixture files: ``${ENV_VAR}`` references expanded at load, values never shown."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic_core import core_schema

from ormix.config._problems import problem_error

#: An environment variable name.
ENV_VAR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `$${` escapes a literal `${`; `${NAME}` is a reference. Braces inside are not allowed, so an unclosed or
# nested `${` in a literal secret simply stays literal.
_ENV_REF_RE = re.compile(r"\$\$\{|\$\{([^{}]*)\}")


class Secret:
    """A secret value from a mixture file, as written (``source``) and as expanded (`get_secret_value`).

    ``source`` is the text in the file: a reference such as ``${OPENREWARD_API_KEY}`` or, for a literal
    secret, the secret itself. ``repr``/``str`` never show a value, only referenced variable names.

    Example:
        >>> s = Secret.expand("${TOKEN}", {"TOKEN": "abc"})
        >>> s, s.get_secret_value(), s.env_vars
        (Secret(from $TOKEN), 'abc', ('TOKEN',))
    """

    __slots__ = ("_missing", "_source", "_value", "env_vars")

    def __init__(
        self, source: str, value: str, env_vars: tuple[str, ...] = (), missing: tuple[str, ...] = ()
    ) -> None:
        self._source = source
        self._value = value
        self._missing = missing
        self.env_vars = env_vars

    @classmethod
    def expand(
        cls, source: str, environ: Mapping[str, str] | None = None, *, defer_missing: bool = False
    ) -> Secret:
        """Expand ``${NAME}`` references in ``source`` from ``environ`` (default: ``os.environ``).

        Raises ``ValueError`` naming the missing variables (never the value). With ``defer_missing`` a missing
        variable is an error only when the value is used (`get_secret_value`): what `ormix inspect` needs to
        show a catalog mixture on a machine without the key.

        A value that is ``$NAME`` alone (a shell habit) raises ``ValueError``: it would be sent as written.

        Example:
            >>> Secret.expand("${NOT_SET_HERE}", {}, defer_missing=True).missing
            ('NOT_SET_HERE',)
        """
        if re.fullmatch(r"\$[A-Za-z_][A-Za-z0-9_]*", source):
            # A shell habit: sent as written, it fails later as an authentication error. Not echoed, as it may
            # be a literal secret; one that really is `$NAME` can come from a variable holding it.
            raise ValueError(
                "a secret written $NAME is sent as those characters, not read from the variable; write "
                "${NAME} to read it"
            )
        env = os.environ if environ is None else environ
        names: list[str] = []
        missing: list[str] = []
        bad = False

        def sub(m: re.Match[str]) -> str:
            nonlocal bad
            if m.group(0) == "$${":
                return "${"
            name = m.group(1)
            if not ENV_VAR_RE.fullmatch(name):
                bad = True
                return ""
            names.append(name)
            if not env.get(name):
                missing.append(name)
                return ""
            return env[name]

        value = _ENV_REF_RE.sub(sub, source)
        if bad:
            # The text between the braces may be part of a literal secret: do not echo it.
            raise ValueError(
                "a ${...} reference must hold an environment variable name (letters, digits, '_'); "
                "write '$${' for a literal '${'"
            )
        if missing and not defer_missing:
            raise ValueError(_missing_message(missing))
        return cls(source, value, tuple(dict.fromkeys(names)), tuple(dict.fromkeys(missing)))

    @classmethod
    def literal(cls, value: str) -> Secret:
        """A secret given as a value (the Python API): kept as is, never expanded.

        Example:
            >>> Secret.literal("${NOT_EXPANDED}").get_secret_value()
            '${NOT_EXPANDED}'
        """
        return cls(value, value)

    @property
    def source(self) -> str:
        """The text as written in the file (a literal secret if it has no ``${NAME}`` reference)."""
        return self._source

    @property
    def is_reference(self) -> bool:
        """True when the value comes from environment variables rather than the file."""
        return bool(self.env_vars)

    @property
    def missing(self) -> tuple[str, ...]:
        """Referenced variables that were not set when the secret was loaded (deferred; see `expand`)."""
        return self._missing

    def get_secret_value(self) -> str:
        """The expanded secret; pass it on, never log it. Raises `UsageError` if a variable was missing."""
        if self._missing:
            from ormix._errors import UsageError

            raise UsageError(_missing_message(self._missing))
        return self._value

    def __repr__(self) -> str:
        if self.env_vars:
            return "Secret(from " + ", ".join(f"${n}" for n in self.env_vars) + ")"
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return self._source == other._source and self._value == other._value

    def __hash__(self) -> int:
        return hash(self._source)

    @classmethod
    def __get_pydantic_core_schema__(cls, source_type: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.with_info_plain_validator_function(
            cls._pydantic_validate,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda s: s.source),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "string", "description": "a secret, or ${ENV_VAR} references expanded at load"}

    @classmethod
    def _pydantic_validate(cls, value: Any, info: core_schema.ValidationInfo) -> Secret:
        if isinstance(value, Secret):
            return value
        if not isinstance(value, str):
            raise problem_error(
                f"a secret must be a string, not {type(value).__name__}; quote it in the file"
            )
        context = info.context if isinstance(info.context, Mapping) else {}
        try:
            return cls.expand(
                value, context.get("environ"), defer_missing=bool(context.get("defer_missing_secrets"))
            )
        except ValueError as e:
            raise problem_error(str(e)) from None


def _missing_message(missing: tuple[str, ...] | list[str]) -> str:
    listed = ", ".join(dict.fromkeys(missing))
    return (
        f"environment variable {listed} is not set or empty; export it before loading "
        f"(export {missing[0]}=...) or remove the reference"
    )
