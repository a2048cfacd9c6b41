"""The workloads pgdyno knows: every plugin of the ``pgdyno.workloads`` entry-point group.

pgdyno's own workloads register in its pyproject.toml exactly as a workload shipped in a
package of its own does (``[project.entry-points."pgdyno.workloads"]``, ``NAME =
"module:Class"``), so installing such a package is all it takes: ``pgdyno bench NAME``, its
options, compare, campaigns and sweeps find it here. The order is stable: by each plugin's
``rank``, then by name. A plugin that fails to load stops pgdyno with one line naming it,
its entry point and its package: one whose import fails or exits, and one that is not a
``Workload`` or lacks what every run needs (``run_iteration``, ``summarise``), checked when
the registry loads, before any command starts anything (its options against pgdyno's own:
``runner.plugin_options``).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pgdyno import serde
from pgdyno.config.model import SizingLine
from pgdyno.config.sizing import Advice, AdviceInputs
from pgdyno.errors import UsageError, interrupted_by
from pgdyno.options import BenchOptions
from pgdyno.results.manifest import Manifest
from pgdyno.workloads.base import Workload
from pgdyno.workloads.metrics import MetricSpec

GROUP = "pgdyno.workloads"


class PluginError(UsageError):
    """A workload plugin that cannot be loaded (exit 2, one line)."""


@functools.cache
def workloads() -> dict[str, Workload]:
    """Name -> plugin instance, every registered workload, in listing order."""
    return {name: plugin for name, (plugin, _) in _loaded().items()}


def origin(name: str) -> str:
    """How a one-line error names a registered workload: "NAME (module:Class from PACKAGE
    VERSION)"."""
    return _origin(_loaded()[name][1])


def is_pgdyno_own(name: str) -> bool:
    """The workload comes with pgdyno itself (not from a package of its own)."""
    dist = _loaded()[name][1].dist
    return dist is not None and dist.name == "pgdyno"


@functools.cache
def _loaded() -> dict[str, tuple[Workload, EntryPoint]]:
    found: dict[str, tuple[Workload, EntryPoint]] = {}
    for ep in entry_points(group=GROUP):
        plugin = _load(ep)
        if plugin.name in found:
            raise PluginError(f"workload {plugin.name!r} is registered twice: by "
                              f"{_origin(found[plugin.name][1])} and by {_origin(ep)}")
        found[plugin.name] = (plugin, ep)
    if not found:
        raise PluginError(f"no workloads registered in the {GROUP!r} entry-point group: "
                          "pgdyno's own metadata is missing; reinstall it (pip install -e .)")
    ordered = sorted(found.values(), key=lambda pair: (pair[0].rank, pair[0].name))
    return {plugin.name: (plugin, ep) for plugin, ep in ordered}


def _load(ep: EntryPoint) -> Workload:
    """One entry point's plugin, or one line saying why it cannot be used."""
    try:
        loaded: Any = ep.load()
        plugin = loaded() if isinstance(loaded, type) else loaded
    except SystemExit as exc:  # sys.exit() in a module ends the import, not pgdyno
        raise PluginError(f"workload plugin {_origin(ep)} failed to load: it called "
                          f"sys.exit({exc.code!r}) while being imported") from None
    except Exception as exc:  # any error of a plugin's import is the plugin's
        if interrupted_by(exc):  # a Ctrl-C that landed inside the import: not the plugin's
            raise
        raise PluginError(f"workload plugin {_origin(ep)} failed to load: "
                          f"{type(exc).__name__}: {' '.join(str(exc).split())}") from None
    if not isinstance(plugin, Workload):
        raise PluginError(f"workload plugin {_origin(ep)} is not a pgdyno Workload "
                          "(subclass pgdyno.workloads.base.Workload)")
    if getattr(plugin, "name", None) != ep.name:
        raise PluginError(f"workload plugin {_origin(ep)} names itself "
                          f"{getattr(plugin, 'name', None)!r}; the entry point's name and "
                          "the class's name must be the same")
    problem = _shape_problem(plugin)
    if problem is not None:
        raise PluginError(f"workload plugin {_origin(ep)} {problem}")
    return plugin


REQUIRED_HOOKS = ("run_iteration", "summarise")
"""The hooks whose base versions only raise: without them a run would start its server and
fail at its first iteration, so a plugin lacking one is refused when it loads."""


def _shape_problem(plugin: Workload) -> str | None:
    """What the core would trip on later in this plugin (None: nothing), checked now so that
    no command starts a server or a run for it first."""
    missing = [hook for hook in REQUIRED_HOOKS
               if getattr(type(plugin), hook, None) is getattr(Workload, hook)]
    if missing:
        return (f"has no {' and no '.join(missing)}; accepted: a Workload that defines "
                f"{' and '.join(REQUIRED_HOOKS)}, or subclasses an engine that does "
                "(pgdyno.workloads.engine.pgbench.PgbenchWorkload)")
    if not isinstance(plugin.description, str):
        return f"has a description of type {type(plugin.description).__name__}, not text"
    if not isinstance(plugin.rank, int) or isinstance(plugin.rank, bool):
        return f"has rank {plugin.rank!r}; accepted: an integer"
    metrics = plugin.metrics
    if (not isinstance(metrics, tuple | list) or not metrics
            or not all(isinstance(m, MetricSpec) for m in metrics)):
        return "declares metrics that are not a non-empty tuple of MetricSpec"
    if not (isinstance(plugin.options_type, type)
            and dataclasses.is_dataclass(plugin.options_type)):
        return (f"has options_type {plugin.options_type!r}; accepted: a dataclass (or "
                "pgdyno.options.NoOptions)")
    try:
        typing.get_type_hints(plugin.options_type)
    except Exception as exc:  # a hint naming what its module never imported
        return (f"has options whose type hints cannot be read ({type(exc).__name__}: "
                f"{exc})")
    return None


def _origin(ep: EntryPoint) -> str:
    dist = f" from {ep.dist.name} {ep.dist.version}" if ep.dist is not None else ""
    return f"{ep.name} ({ep.value}{dist})"


def __getattr__(name: str) -> Any:
    if name == "WORKLOADS":  # registry.WORKLOADS: loaded when first asked for
        return workloads()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def names(where: Any = None) -> list[str]:
    """The registered workloads' names; ``where``: only those plugins it accepts."""
    return [name for name, plugin in workloads().items() if where is None or where(plugin)]


def choices(where: Any = None, sep: str = " | ") -> str:
    """Names for a help text ("tpcb | simple-update | ..."), from the registry."""
    return sep.join(names(where))


def get(name: str) -> Workload:
    try:
        return workloads()[name]
    except KeyError:
        raise UsageError(f"workload {name!r} is unknown; accepted: "
                         f"{', '.join(workloads())}") from None


def typed_options(opts: BenchOptions) -> BenchOptions:
    """The manifest's options with the workload's own options back in their dataclass."""
    raw: Any = opts.workload_options
    if isinstance(raw, dict):
        typed = serde.from_dict(get(opts.workload).options_type, raw)
        return dataclasses.replace(opts, workload_options=typed)
    return opts


def typed_manifest(manifest: Manifest) -> Manifest:
    return dataclasses.replace(manifest, options=typed_options(manifest.options))


class _Advice:
    """Every registered workload's advice for the config engine (``config.sizing.
    WorkloadAdvice``): the tuned matrix's benchmark group and the sizing's dataset units,
    each key or line once (the pgbench built-ins share theirs), in listing order."""

    def advice(self, inputs: AdviceInputs) -> list[Advice]:
        out: dict[str, Advice] = {}
        for plugin in workloads().values():
            for item in plugin.advice(inputs):
                out.setdefault(item.key, item)
        return list(out.values())

    def dataset_lines(self, dataset_bytes: int) -> list[SizingLine]:
        out: dict[str, SizingLine] = {}
        for plugin in workloads().values():
            for line in plugin.dataset_lines(dataset_bytes):
                out.setdefault(line.label, line)
        return list(out.values())


ADVICE = _Advice()
"""Hand it to ``config.resolve_config(advisor=...)``."""


def tuning_of(name: str) -> tuple[str, bool] | None:
    """A benchmark workload's tuning class (tpcb: oltp, write-heavy); None for a name that is
    not a workload (``pgdyno tune --workload web`` names a tuning class itself)."""
    plugin = workloads().get(name)
    return plugin.tuning if plugin is not None else None
