"""MkDocs hook: the reference pages, written from pgdyno's own code at every build.

Nothing here is documentation written by hand: the commands and their options come from
the typer app and the option table (``pgdyno.runner.options``), the result files from the
dataclasses that write them, the campaign and study keys from the sets their readers check,
the layers from ``tests/test_layers.py``. A page cannot drift from the code, since it is the
code, read when the site is built.

Two mechanisms:

- ``on_files`` adds the generated pages (``GENERATED``) to the site; ``mkdocs.yml``'s nav
  names them like any other page;
- ``on_page_markdown`` replaces a marker line ``<!-- pgdyno:NAME ARG -->`` in a written page
  by a generated table (a workload's options and figures, the layers).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import re
import textwrap
import typing
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]


# ----- small Markdown writers -------------------------------------------------------------

def _cell(value: Any) -> str:
    text = " ".join(str(value).split())
    return text.replace("|", "\\|")


def _table(head: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _code(value: Any) -> str:
    return f"`{value}`" if value not in (None, "") else ""


def _inline(text: str) -> str:
    """reST's ``literal`` as Markdown's `literal`."""
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def _docstring_text(doc: str | None) -> str:
    """A docstring as Markdown: reST's ``literal`` becomes `literal`, ``::`` blocks are
    fenced."""
    if not doc:
        return ""
    doc = inspect.cleandoc(doc)
    out: list[str] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            head = line.rstrip()[:-2].rstrip()
            if head:
                out.append(_inline(head) + ":")
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i])
                i += 1
            out += ["", "```text", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        out.append(_inline(line))
        i += 1
    return "\n".join(out) + "\n"


# ----- commands -------------------------------------------------------------------------

def _app_command() -> Any:
    import typer

    try:
        from pgdyno.cli.app import pgdyno_app
        app = pgdyno_app()
    except ImportError:  # an older layout: the app built in pgdyno.cli.main
        from pgdyno.cli.main import app
    return typer.main.get_command(app)


def _param_row(param: Any) -> list[Any]:
    if type(param).__name__.endswith("Argument"):
        name = param.name.upper()
        kind = "argument" + ("" if param.required else ", optional")
        default = ""
    else:
        names = [*param.opts, *param.secondary_opts]
        name = ", ".join(names)
        kind = "flag" if getattr(param, "is_flag", False) else "option"
        default = param.default
        if default is None or default == () or default == []:
            default = ""
        elif isinstance(default, Path):
            default = str(default)
    return [f"`{name}`", kind, _code(default), getattr(param, "help", "") or ""]


def _help_text(text: str | None) -> str:
    """A command's help as Markdown: indented ``name: meaning`` lines (the workloads of
    ``bench``) become a list, runs of blank lines one."""
    text = re.sub(r"(?m)^ {2,}([\w.-]+): ", r"- `\1`: ", _docstring_text(text))
    return re.sub(r"\n{3,}", "\n\n", text)


def commands_page() -> str:
    root = _app_command()
    parts = ["# Commands and options\n",
             "Every command and option of `pgdyno`, read from the command line's own "
             "definition when this site was built (`pgdyno COMMAND --help` prints the "
             "same). The options of `pgdyno bench` that belong to one workload are listed "
             "by workload in [bench options](bench-options.md).\n"]

    def walk(cmd: Any, path: str, depth: int) -> None:
        if depth:
            parts.append(f"{'#' * min(depth + 1, 4)} `{path}`\n")
            parts.append(_help_text(cmd.help))
        params = [p for p in cmd.params if p.name != "help"]
        if params:
            parts.append(_table(["name", "kind", "default", "meaning"],
                                [_param_row(p) for p in params]))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            if not getattr(sub, "hidden", False):
                walk(sub, f"{path} {name}", depth + 1)

    walk(root, "pgdyno", 0)
    return "\n".join(parts)


def bench_options_page() -> str:
    from pgdyno.runner.options import COMMON, all_options
    from pgdyno.workloads import registry

    common = {o.name for o in COMMON}
    parts = ["# bench options\n",
             "The option table of `pgdyno bench` (`pgdyno.runner.options.all_options()`): "
             "the options every workload shares, then those that workload plugins declare "
             "in their `options_type`. Campaign files take the same options by their long "
             "names in `[bench]`, `[bench.WORKLOAD]` and `[config.bench]`; `pgdyno compare` "
             "takes the shared ones. A workload's option given to another workload is "
             "refused in one line.\n",
             "## Shared by every workload\n"]
    shared = [o for o in all_options() if o.name in common]
    parts.append(_table(["option", "default", "meaning"],
                        [[f"`{o.cli_flag}`", _code(_default(o.default)), o.help]
                         for o in shared]))
    parts.append("## Declared by workloads\n")
    own = [o for o in all_options() if o.name not in common]
    parts.append(_table(["option", "workloads", "meaning"],
                        [[f"`{o.cli_flag}`", ", ".join(o.workloads), o.help] for o in own]))
    parts.append("## Workloads\n")
    parts.append(_table(["workload", "needs a server", "engine", "what it runs"],
                        [[f"`{n}`", "yes" if w.needs_server else "no", w.engine,
                          w.description] for n, w in registry.workloads().items()]))
    return "\n".join(parts)


def _default(value: Any) -> Any:
    if value in (None, (), []):
        return ""
    return str(value) if isinstance(value, Path) else value


# ----- a workload's options and figures (markers in the workload pages) ------------------

def workload_tables(names: str) -> str:
    """The options and the figures of the workloads named (comma-separated): the first's
    options, with every later one's added, and the figures of the first."""
    from pgdyno.workloads import registry
    from pgdyno.workloads.base import cli_fields, cli_flag

    wanted = names.split(",")
    plugins = [registry.get(n) for n in wanted]
    seen: dict[str, list[Any]] = {}
    for plugin in plugins:
        for f in cli_fields(plugin.options_type):
            seen.setdefault(cli_flag(f), [f"`{cli_flag(f)}`", _code(_default(f.default)),
                                          f.metadata["cli_help"]])
    out = [f"**Options** of `{'`, `'.join(wanted)}` (beside the shared ones in "
           "[bench options](../reference/bench-options.md)), from the plugin's "
           "`options_type`:\n"]
    out.append(_table(["option", "default", "meaning"], list(seen.values()))
               if seen else "None of its own.\n")
    directions = {1: "higher is better", -1: "lower is better", 0: "neither"}
    out.append(f"\n**Figures** each iteration records (`metrics` of the plugin; the "
               f"headline leads the index, `compare` and campaigns), default `--max-tries` "
               f"{plugins[0].default_max_tries}:\n")
    out.append(_table(["figure", "key", "unit", "direction"],
                      [[m.label + (" (headline)" if m.headline else ""), f"`{m.name}`",
                        m.unit, directions.get(m.direction, "")]
                       for m in plugins[0].metrics]))
    return "\n".join(out)


# ----- result files ----------------------------------------------------------------------

def _field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right after it in the class body)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[node.target.id] = _inline(inspect.cleandoc(after.value.value))
    return docs


def _type_text(tp: Any) -> str:
    text = tp if isinstance(tp, str) else getattr(tp, "__name__", str(tp))
    return text.replace("typing.", "")


def _schema(cls: type, seen: set[type]) -> list[str]:
    """``cls``'s fields as a table, then every dataclass it holds that was not shown yet."""
    seen.add(cls)
    docs = _field_docs(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if not f.metadata.get("serialise", True):
            continue
        rows.append([f"`{f.name}`", f"`{_type_text(f.type)}`", docs.get(f.name, "")])
    out = [f"### `{cls.__name__}`\n", _docstring_text(cls.__doc__)
           if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "(") else "",
           _table(["key", "type", "meaning"], rows)]
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        for inner in _dataclasses_in(hints.get(f.name)):
            if inner not in seen:
                out += _schema(inner, seen)
    return out


def _dataclasses_in(tp: Any) -> list[type]:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return [tp]
    return [c for a in typing.get_args(tp) for c in _dataclasses_in(a)]


def run_directory_page() -> str:
    from pgdyno.analysis import summary
    from pgdyno.analysis.telemetry import meta
    from pgdyno.results import manifest, rundir

    parts = ["# The run directory\n",
             "Every file of a run, and the keys of its JSON files, read from the "
             "dataclasses that write them when this site was built. Every JSON file "
             "carries a `schema_version`; a reader refuses a version it does not know in "
             "one line.\n",
             _docstring_text(rundir.__doc__)]
    files = [("manifest.json", manifest.Manifest, manifest.MANIFEST_SCHEMA_VERSION),
             ("raw/run.json", rundir.RunPlan, rundir.PLAN_SCHEMA_VERSION),
             ("summary.json", summary.RunSummary, summary.SCHEMA_VERSION),
             ("raw/<engine>/c<clients>-i<iteration>/telemetry/meta.json",
              meta.TelemetryMeta, meta.META_SCHEMA_VERSION)]
    seen: set[type] = set()
    for name, cls, version in files:
        parts.append(f"## `{name}` (schema_version {version})\n")
        parts += _schema(cls, seen)
    return "\n".join(parts)


# ----- campaign and study files ---------------------------------------------------------

def campaign_page() -> str:
    from pgdyno.campaign import spec
    from pgdyno.runner.options import all_options
    from pgdyno.study import spec as study

    bench_keys = sorted(o.cli_flag[2:] for o in all_options()
                        if o.name not in spec.CELL_OWNED)
    parts = ["# Campaign and study files\n",
             "The keys a campaign file may hold, read from the sets its reader "
             "(`pgdyno.campaign.spec`, `pgdyno.study.spec`) checks when this site was "
             "built: any other key is refused in one line naming it and what is accepted, "
             "before anything runs.\n",
             "## A campaign\n", _docstring_text(spec.__doc__),
             "## Tables and keys\n",
             _table(["table", "keys"], [
                 ["`[campaign]`", ", ".join(f"`{k}`" for k in sorted(spec.CAMPAIGN_KEYS))],
                 ["`[[config]]`", ", ".join(f"`{k}`" for k in sorted(spec.CONFIG_KEYS))],
                 ["`[size.NAME]`", ", ".join(f"`{k}`" for k in sorted(
                     spec.SIZE_CAMPAIGN_KEYS)) + ", and a table `[size.NAME.bench]`"],
                 ["`[size.NAME.study]`", ", ".join(f"`{k}`" for k in sorted(
                     spec.SIZE_STUDY_KEYS))],
                 ["`[study]`", ", ".join(f"`{k}`" for k in sorted(study.STUDY_KEYS))],
                 ["`[study.validate]`", ", ".join(f"`{k}`"
                                                  for k in sorted(study.VALIDATE_KEYS))],
             ]),
             "Every table the file may have: " + ", ".join(
                 f"{v} (`{k}`)" for k, v in spec.TABLES.items()) + ".\n",
             "## `[bench]`, `[bench.WORKLOAD]` and `[config.bench]`\n",
             "Any long option of `pgdyno bench` ([bench options]"
             "(bench-options.md)), by its name without the dashes (`-` or `_`): "
             + ", ".join(f"`{k}`" for k in bench_keys) + ". The campaign decides these "
             "itself, per cell: " + ", ".join(f"`{k}`" for k in sorted(spec.CELL_OWNED))
             + ".\n",
             "## `[study]`\n", _docstring_text(study.__doc__),
             "Sections of the study report, in their order: "
             + ", ".join(f"`{s}`" for s in study.SECTIONS) + "; by default all but "
             + ", ".join(f"`{s}`" for s in study.SECTIONS if s not in study.DEFAULT_SECTIONS)
             + ".\n"]
    return "\n".join(parts)


# ----- the layers -------------------------------------------------------------------------

def layers_table(_arg: str | None = None) -> str:
    path = ROOT / "tests" / "test_layers.py"
    module_spec = importlib.util.spec_from_file_location("_pgdyno_layers", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    rows = []
    for rank, names in enumerate(module.LAYERS):
        first = []
        for name in names:
            init = ROOT / "src" / "pgdyno" / name / "__init__.py"
            doc = ast.get_docstring(ast.parse(init.read_text())) if init.exists() else None
            if doc:
                first.append(_inline(doc.split("\n\n")[0]))
        rows.append([rank + 1, ", ".join(f"`{n}`" for n in names), " ".join(first)])
    return _table(["rank", "packages", "what (the package's docstring)"], rows)


# ----- measured results -------------------------------------------------------------------

def results_page() -> str:
    """bench/RESULTS.md as a page of the site: the one file, read where it lives."""
    return (ROOT / "bench" / "RESULTS.md").read_text()


GENERATED = {
    "reference/commands.md": commands_page,
    "reference/bench-options.md": bench_options_page,
    "reference/run-directory.md": run_directory_page,
    "reference/campaign-file.md": campaign_page,
    "results.md": results_page,
}
INSERTS = {"workload": workload_tables, "layers": layers_table}
MARKER = re.compile(r"^<!-- pgdyno:(\w+)(?: ([\w,.-]+))? -->$", re.MULTILINE)
"""A marker on a line of its own (one quoted inside a sentence is left as it is)."""


def on_files(files: Any, config: Any) -> Any:
    for uri, make in GENERATED.items():
        files.append(File.generated(config, uri, content=make()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def insert(match: re.Match[str]) -> str:
        if match[1] not in INSERTS:
            raise ValueError(f"{page.file.src_uri}: unknown marker {match[0]}")
        return INSERTS[match[1]](match[2])

    return MARKER.sub(insert, markdown)
