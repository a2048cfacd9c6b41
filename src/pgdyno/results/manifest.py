"""The run record: its manifest, typed and versioned, and the readers of every JSON file.

``manifest.json`` is a ``Manifest`` written through ``pgdyno.serde``: the bench options
(``pgdyno.options.BenchOptions``) are embedded once (``options``), the run's role (baseline,
candidate, campaign cell) is written when the run starts, and every reader goes through
``load_manifest``, which refuses a file of a schema version it does not know with one line
instead of misreading it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pgdyno import serde
from pgdyno.errors import UsageError
from pgdyno.options import BenchOptions

MANIFEST_SCHEMA_VERSION = 2
"""2: typed options embedded once, the role, the workload and context at the top."""


@dataclass
class TargetInfo:
    kind: str
    pg_bin: str | None = None
    pgbench_version: str | None = None
    wal_dir: str | None = None
    ssh: str | None = None
    """--ssh: the database host (``user@host``; never a key)."""
    data_dir: str | None = None
    """A remote target's cluster, on that host (pg_bin is then the host's binaries too)."""


@dataclass
class ToolInfo:
    name: str
    version: str


@dataclass
class Manifest:
    """``manifest.json``: environment, settings, commands and status of one run."""

    schema_version: int
    tool: ToolInfo
    workload: str
    context: str
    status: str
    started_at: str
    options: BenchOptions
    host: dict[str, Any]
    """This machine (``runner.environment.HostFacts``): with --ssh, the client's."""
    ended_at: str | None = None
    reason: str = ""
    role: dict[str, Any] = field(default_factory=dict)
    """Why the run exists: {"compare_side": "A", ...}, {"campaign": ..., "cell": ...}."""
    target: TargetInfo | None = None
    """None for workloads that need no server."""
    config: dict[str, Any] = field(default_factory=dict)
    """The config record: name, pg_settings, sources (rationale per setting)."""
    server: dict[str, Any] | None = None
    """The server's facts (version, settings with their stock values): read when it starts,
    again once the dataset is ready (a load may restart it) and after each ``--cache cold``
    restart, so they are those of the server the measured window ran on."""
    connection: str | None = None
    """How the run connects to that server (its socket or host and port), read with it."""
    commands: list[str] = field(default_factory=list)
    dataset: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    config_rollback: dict[str, Any] | None = None
    database_host: dict[str, Any] | None = None
    """--ssh: the database host, detected on it (``HostFacts``' keys and ``destination``);
    None when the server runs on this machine or its host was not reached."""

    @property
    def config_name(self) -> str:
        return str(self.config.get("name", "default"))


def manifest_to_dict(manifest: Manifest) -> dict[str, Any]:
    return serde.to_dict(manifest)


def manifest_from_dict(data: Any, source: Path | str = "manifest.json") -> Manifest:
    """A Manifest from its JSON; workload options stay a plain dict here (the workload
    registry, above this layer, turns them into the plugin's dataclass)."""
    return from_versioned(Manifest, data, MANIFEST_SCHEMA_VERSION, source, "run manifest",
                          version_advice="; rerun the benchmark with this version")


def read_json_file(path: Path, what: str, advice: str = "") -> Any:
    """The JSON of one file pgdyno reads, or one line naming the file and what is wrong
    with it (missing, a directory, empty, binary, truncated, not JSON): the one loader of
    every JSON file of a results directory. ``advice`` ends the line ("; rebuild it ...")."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: missing; not a complete pgdyno {what}{advice}") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: cannot read the {what}: a directory is where the file "
                         f"should be{advice}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: cannot read the {what}: binary data, not JSON text"
                         f"{advice}") from None
    return parse_json(text, path, what, advice)


_CUT_TOKEN = re.compile(r"[0-9eE.+-]+|t(r(ue?)?)?|f(a(l(se?)?)?)?|n(u(ll?)?)?")
"""What a cut leaves where the parser stopped: the rest of a number (``1.`` or ``2e-``) or
the start of true, false or null."""


def parse_json(text: str, source: Path | str, what: str, advice: str = "") -> Any:
    """``read_json_file`` of text already read: empty, truncated and invalid JSON each get
    their own words, since "truncated" tells the user the file was cut (a full disk, a
    crash) and "not valid JSON" that it was edited or overwritten."""
    if not text.strip():
        raise UsageError(f"{source}: cannot read the {what}: the file is empty{advice}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # Text that ends before the JSON does, or inside a string, was cut short.
        if (exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
                or _CUT_TOKEN.fullmatch(text[exc.pos:].rstrip())):
            raise UsageError(f"{source}: cannot read the {what}: the file is truncated "
                             f"(its JSON ends early, at line {exc.lineno}){advice}") from None
        raise UsageError(f"{source}: cannot read the {what}: not valid JSON ({exc.msg} at "
                         f"line {exc.lineno}, column {exc.colno}){advice}") from None
    except RecursionError:  # "[[[[..." nested deeper than the parser goes
        raise UsageError(f"{source}: cannot read the {what}: not valid JSON (nested too "
                         f"deeply){advice}") from None


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number",
               float: "a number", bool: "a boolean", type(None): "null"}

T = TypeVar("T")


Upgrade = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns the JSON of an older version of a file into the current version's shape."""


def check_version(data: Any, version: int, source: Path | str, what: str, advice: str = "",
                  version_advice: str = "", older: Mapping[int | None, Upgrade] | None = None
                  ) -> dict[str, Any]:
    """A file's JSON object in the current version's shape, or one line naming the file
    when it is not an object or carries a ``schema_version`` this pgdyno does not read
    (unknown, or newer than ``version``). ``older`` maps each earlier version still read to
    the function that upgrades it (key None: a file from before it carried a version)."""
    if not isinstance(data, dict):
        held = _JSON_TYPES.get(type(data), type(data).__name__)
        raise UsageError(f"{source}: not a pgdyno {what.split()[-1]} (the {what} is a JSON "
                         f"object; this file holds {held}){advice}")
    older = older or {}
    found = data.get("schema_version")
    if _is_int(found) and found == version:  # True == 1, but is no version
        return data
    if (found is None or _is_int(found)) and found in older:
        try:
            return {**older[found](dict(data)), "schema_version": version}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UsageError(f"{source}: damaged {what} (schema_version {found}: "
                             f"{type(exc).__name__}: {exc}){advice}") from None
    if found is None:
        raise UsageError(f"{source}: not a pgdyno {what.split()[-1]} (no schema_version)"
                         f"{advice}")
    reads = sorted({version, *(v for v in older if v is not None)})
    newer = _is_int(found) and found > version
    why = "a newer pgdyno wrote it; " if newer else ""
    raise UsageError(f"{source}: {what} schema_version {found!r} is not supported ({why}this "
                     f"pgdyno reads {_versions(reads)}){version_advice or advice}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _versions(reads: list[int]) -> str:
    return str(reads[0]) if len(reads) == 1 else ", ".join(map(str, reads[:-1])) + \
        f" and {reads[-1]}"


def from_versioned(cls: type[T], data: Any, version: int, source: Path | str, what: str,
                   advice: str = "", version_advice: str = "",
                   older: Mapping[int | None, Upgrade] | None = None) -> T:
    """``cls`` from a file's JSON, refused in one line when it is not an object, carries
    a ``schema_version`` it does not read (``check_version``) or does not fit the
    dataclass (a damaged file). ``version_advice`` ends the line of a file of another
    version (else ``advice``); ``older``: the earlier versions still read."""
    data = check_version(data, version, source, what, advice, version_advice, older)
    try:
        return serde.from_dict(cls, data)
    except serde.SchemaError as exc:  # its message names the key
        raise UsageError(f"{source}: damaged {what} ({exc}){advice}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{source}: damaged {what} ({type(exc).__name__}: {exc}){advice}") \
            from None


def read_versioned(cls: type[T], path: Path, version: int, what: str, advice: str = "",
                   older: Mapping[int | None, Upgrade] | None = None) -> T:
    """``from_versioned`` of the JSON file at ``path``: how every versioned file is read."""
    return from_versioned(cls, read_json_file(path, what, advice), version, path, what, advice,
                          older=older)


def load_manifest(run_dir: Path) -> Manifest:
    path = Path(run_dir) / "manifest.json"
    return manifest_from_dict(read_json_file(path, "run manifest"), path)
