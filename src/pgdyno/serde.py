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


class SchemaError(TypeError, ValueError):
    """A value that does not fit the dataclass it is read into: a string or Infinity where
    a count belongs, an array where an object does. The message starts with the key's path
    in the file (``iterations[0].metrics.tps``), so that the reader can say which key of
    which file is damaged. Both a TypeError and a ValueError: what readers caught before
    these checks, when such a value failed inside a constructor."""


def from_dict(cls: type[T], data: Any) -> T:
    """Rebuild ``cls`` from ``to_dict`` output; unknown keys are ignored (newer files).
    Values are checked against the fields' types (numbers, booleans, text, paths, lists and
    objects; a union of several types is taken as it is): a mismatch raises
    ``SchemaError`` naming its key, rather than a wrong value failing somewhere later."""
    return _convert(cls, data, "")


def _convert(tp: Any, value: Any, where: str) -> Any:
    if value is None:
        return math.nan if tp is float else None
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        return _convert(options[0], value, where) if len(options) == 1 else value
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, where)
    if origin in (list, tuple):
        return _sequence(tp, value, where)
    if origin is dict:
        _expect(isinstance(value, dict), value, "an object", where)
        key_t, val_t = get_args(tp) or (Any, Any)
        return {_convert(key_t, k, _key(where, k)): _convert(val_t, v, _key(where, k))
                for k, v in value.items()}
    if tp is Path:
        _expect(isinstance(value, str), value, "a path (text)", where)
        return Path(value)
    return _scalar(tp, value, where)


def _dataclass(tp: Any, value: Any, where: str) -> Any:
    _expect(isinstance(value, dict), value, "an object", where)
    hints = get_type_hints(tp)
    for f in dataclasses.fields(tp):
        required = (f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING)
        if f.init and required and f.name not in value:
            raise SchemaError(f"{_key(where, f.name)}: missing")
    kwargs = {f.name: _convert(hints[f.name], value[f.name], _key(where, f.name))
              for f in dataclasses.fields(tp) if f.init and f.name in value}
    return tp(**kwargs)


def _sequence(tp: Any, value: Any, where: str) -> Any:
    _expect(isinstance(value, list | tuple), value, "an array", where)
    args = get_args(tp)
    if get_origin(tp) is tuple and len(args) == len(value) and Ellipsis not in args:
        kinds = list(args)  # tuple[str, float]: a type per position
    else:
        kinds = [args[0] if args else Any] * len(value)
    items = [_convert(kind, v, f"{where}[{i}]")
             for i, (kind, v) in enumerate(zip(kinds, value, strict=True))]
    return tuple(items) if get_origin(tp) is tuple else items


def _scalar(tp: Any, value: Any, where: str) -> Any:
    if tp is float:
        _expect(_is_number(value), value, "a number", where)
        return float(value)
    if tp is int:
        if isinstance(value, str):  # files of old versions held some counts as text
            try:
                return int(value)
            except ValueError:
                _expect(False, value, "a whole number", where)
        # A float is kept as it is (a count once computed as one), but never an infinity.
        _expect(_is_number(value) and math.isfinite(value), value, "a whole number", where)
        return value
    if tp is bool:
        _expect(isinstance(value, bool), value, "true or false", where)
    elif tp is str:
        _expect(isinstance(value, str), value, "text", where)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _expect(ok: bool, value: Any, wanted: str, where: str) -> None:
    if not ok:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise SchemaError(f"{where or 'the file'}: {shown} ({_kind(value)}) where {wanted} "
                          "belongs")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    return {dict: "an object", list: "an array", tuple: "an array", str: "text", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _key(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def first_infinity(obj: Any, where: str = "") -> str | None:
    """The path of the first ±Infinity among ``obj``'s numbers (a dataclass, list or dict),
    None when there is none: for files whose figures are all measured, where Infinity is
    damage (a missing figure is null, read back as NaN, and is no infinity)."""
    if isinstance(obj, float):
        return (where or "the file") if math.isinf(obj) else None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items: Any = ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj))
    elif isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list | tuple):
        items = enumerate(obj)
    else:
        return None
    for key, value in items:
        inner = f"{where}[{key}]" if isinstance(obj, list | tuple) else _key(where, key)
        if (found := first_infinity(value, inner)) is not None:
            return found
    return None


S = TypeVar("S", bound="Serialisable")


class Serialisable:
    """``to_dict`` and ``from_dict`` methods for a dataclass, through the functions above (a
    mixin: the dataclass's fields stay the only list)."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[S], data: dict[str, Any]) -> S:
        return from_dict(cls, data)
