"""Dataclasses to plain dicts and back, driven by the type hints (never by listing fields twice)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def to_dict(obj: Any) -> Any:
    """A JSON-ready copy of a dataclass tree (tuples become lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list | tuple):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a dataclass from :func:`to_dict` output; unknown keys are an error."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    kwargs = {name: _build(hints[name], value) for name, value in data.items()}
    return cls(**kwargs)


def _build(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], value) if len(inner) == 1 else value
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value)
    if origin is list:
        return [_build(args[0], v) for v in value]
    if origin is tuple:
        return tuple(_build(args[0], v) for v in value)
    if origin is dict:
        return {k: _build(args[1], v) for k, v in value.items()}
    return value
