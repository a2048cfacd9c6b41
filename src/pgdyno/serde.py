"""One way to turn result dataclasses into JSON and back, driven by their type hints.

Listing fields twice (once to save, once to load) is how result files drift apart
from the code that reads them; here the dataclass definition is the only list.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")


def to_dict(obj: Any) -> Any:
    """Dataclasses, lists, tuples and dicts to plain JSON-ready values (NaN becomes null)."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.metadata.get("serialise", True)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: type[T], data: Any) -> T:
    """Rebuild ``cls`` from ``to_dict`` output; unknown keys are ignored (newer files)."""
    return _convert(cls, data)


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return math.nan if tp is float else None
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        return _convert(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp)
        kwargs = {f.name: _convert(hints[f.name], value[f.name])
                  for f in dataclasses.fields(tp) if f.init and f.name in value}
        return tp(**kwargs)
    if origin in (list, tuple):
        args = get_args(tp)
        inner = args[0] if args else Any
        items = [_convert(inner, v) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        key_t, val_t = get_args(tp) or (Any, Any)
        return {_convert(key_t, k): _convert(val_t, v) for k, v in value.items()}
    if tp is Path:
        return Path(value)
    if tp is float and isinstance(value, int):
        return float(value)
    if tp is int and isinstance(value, str):
        return int(value)
    return value


S = TypeVar("S", bound="Serialisable")


class Serialisable:
    """``to_dict`` and ``from_dict`` methods for a dataclass, through the functions above (a
    mixin: the dataclass's fields stay the only list)."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[S], data: dict[str, Any]) -> S:
        return from_dict(cls, data)
