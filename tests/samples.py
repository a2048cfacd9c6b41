"""Values of pgdyno's dataclasses with every field set apart from its default.

A round trip through ``pgdyno.serde`` of such a value fails when a field is dropped, or read
back as its default (a boolean left at its default would come back the same either way)."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

SCALARS: dict[Any, Any] = {int: 7, float: 1.5, str: "x", bool: True, Path: Path("/p")}
"""A value of each scalar type; ``_other`` gives a second one when this is the default."""


CHOICES: dict[str, Any] = {"ScriptOptions.protocol": "extended"}
"""Fields whose class accepts only some values (``Class.field`` -> a value it accepts that
is not its default)."""


def sample(tp: Any) -> Any:
    """A value of type ``tp``: a dataclass with every field set apart from its default,
    a list or dict of one sampled item, a scalar from SCALARS (``Any``: a small object)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)))
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: _field_sample(tp, f, hints[f.name]) for f in dataclasses.fields(tp)
                     if f.init and f.metadata.get("serialise", True)})
    if origin is list:
        return [sample(args[0])]
    if origin is tuple:
        fixed = args and Ellipsis not in args
        return tuple(sample(a) for a in args) if fixed else (sample(args[0]),)
    if origin is dict:
        return {sample(args[0]): sample(args[1])}
    return SCALARS.get(tp, {"a": 1})


def current_versions(value: Any) -> Any:
    """``value`` with every ``schema_version`` in it, at any depth, set back to its class's
    own (a sample's is another, so that a round trip shows it): what a reader accepts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            inner = getattr(value, f.name)
            object.__setattr__(value, f.name, default_of(f) if f.name == "schema_version"
                               else current_versions(inner))
    elif isinstance(value, list):
        value[:] = [current_versions(v) for v in value]
    elif isinstance(value, dict):
        value.update({k: current_versions(v) for k, v in value.items()})
    return value


def default_of(f: dataclasses.Field) -> Any:
    """``f``'s default value; ``dataclasses.MISSING`` when it has none."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _field_sample(cls: type, f: dataclasses.Field, tp: Any) -> Any:
    if f"{cls.__name__}.{f.name}" in CHOICES:
        return CHOICES[f"{cls.__name__}.{f.name}"]
    value = sample(tp)
    return _other(value) if value == default_of(f) else value


def _other(value: Any) -> Any:
    """Another value of ``value``'s scalar type (``not`` for a boolean)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "y"
    if isinstance(value, Path):
        return value / "q"
    return value


def left_at_default(value: Any) -> list[str]:
    """The serialised fields of the dataclass ``value`` that still hold their default: a
    sample with none is one whose round trip checks every field."""
    return [f.name for f in dataclasses.fields(value)
            if f.init and f.metadata.get("serialise", True)
            and getattr(value, f.name) == default_of(f)]
