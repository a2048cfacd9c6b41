"""pgbench's built-in workloads (tpcb, simple-update, select-only) and user scripts (custom).

All four run on the pgbench tables at one scale; a built-in can take user scripts into its
mix (``--script FILE@W``), and ``custom`` runs user scripts only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pgdyno.config.units import human_bytes
from pgdyno.errors import UsageError
from pgdyno.results import load
from pgdyno.targets import PgInstall
from pgdyno.workloads import bulkload
from pgdyno.workloads.base import (
    Advice,
    AdviceInputs,
    BenchOptions,
    Prepared,
    RunContext,
    SizingLine,
    option,
)
from pgdyno.workloads.checks import check_positive, exclusive, parse_size_option
from pgdyno.workloads.engine.pgbench import PgbenchWorkload, ScriptSpec, check_scripts
from pgdyno.workloads.pgbench.dataset import DATASET_NAME, PGBENCH_TABLES, initialise

DEFAULT_SCALE = 10
BYTES_PER_SCALE = 15_700_000
"""Bytes of pgbench data per scale unit, measured on PG 18 at scale 10: the accounts table
(100,000 rows of 100-byte tuples) + its index ≈ 15.7 MB per scale unit. The project's one
figure for turning a scale into a dataset size and back."""
MB_PER_SCALE_TEXT = f"{BYTES_PER_SCALE / 1e6:g} MB"
"""The same for rationale text: '15.7 MB'."""


@dataclass(frozen=True)
class PgbenchOptions:
    scale: int = option(DEFAULT_SCALE, "pgbench scale factor (default 10)")
    dataset_size: str | None = option(None, "dataset size, e.g. 3GB (sets the scale)")
    script: tuple[str, ...] = option((), "FILE[@WEIGHT]: a pgbench script, repeatable")


def parse_script(text: str) -> ScriptSpec:
    """``FILE[@WEIGHT]``: a readable pgbench script holding SQL or a meta-command."""
    path_text, weight = text, 1
    if "@" in text:
        path_text, _, weight_text = text.rpartition("@")
        if not weight_text.isdigit() or int(weight_text) < 1:
            raise UsageError(f"--script {text}: weight {weight_text!r} is not a positive "
                             "integer; expected FILE[@WEIGHT], e.g. my.sql@3")
        weight = int(weight_text)
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"--script {text}: file {path_text} does not exist; "
                         "expected FILE[@WEIGHT] naming a pgbench script")
    try:
        body = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--script {text}: cannot read {path_text} ({exc})") from exc
    if not any(line.strip() and not line.strip().startswith("--") for line in body.splitlines()):
        raise UsageError(f"--script {text}: {path_text} holds no SQL or meta-command")
    return ScriptSpec(name=path.stem, weight=weight, path=path.absolute())


class PgbenchBuiltin(PgbenchWorkload):
    """One of pgbench's built-in scripts (``-b``), optionally mixed with user scripts."""

    options_type: ClassVar[type] = PgbenchOptions
    size_unit: ClassVar[str] = "scale"
    bytes_per_size: ClassVar[float | None] = BYTES_PER_SCALE
    builtin: ClassVar[str | None]

    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        exclusive({"--scale": raw.get("scale"), "--dataset-size": raw.get("dataset_size")})
        check_positive(raw.get("scale"), "--scale")
        scale = raw.get("scale") or DEFAULT_SCALE
        if raw.get("dataset_size"):
            size = parse_size_option(raw["dataset_size"], "--dataset-size")
            scale = self.size_for_bytes(size)
        scripts = tuple(raw.get("script") or ())
        for text in scripts:
            parse_script(text)  # refuse a bad file before anything is created
        if self.builtin is None and not scripts:
            raise UsageError(f"workload {self.name} needs at least one --script FILE[@WEIGHT]")
        return dataclasses.replace(opts, workload_options=PgbenchOptions(scale=scale,
                                                                         script=scripts))

    def check_with_target(self, opts: BenchOptions, install: PgInstall | None) -> None:
        """pgbench itself parses the user's scripts (an invalid meta-command or expression
        is refused in pgbench's words before a run directory exists)."""
        user = [s for s in self.scripts(opts) if s.path is not None]
        if user and install is not None:
            check_scripts(install, user)
        super().check_with_target(opts, install)

    def dataset_tables(self, opts: BenchOptions) -> tuple[str, str, list[str]]:
        return DATASET_NAME, f"scale={opts.workload_options.scale}", list(PGBENCH_TABLES)

    def scripts(self, opts: BenchOptions) -> list[ScriptSpec]:
        specs = [parse_script(s) for s in opts.workload_options.script]
        if self.builtin is not None:
            specs.insert(0, ScriptSpec(name=self.name, builtin=self.builtin))
        return specs

    def dataset_size(self, opts: BenchOptions) -> float | None:
        return opts.workload_options.scale

    def describe_dataset(self, opts: BenchOptions) -> str:
        return f"scale {opts.workload_options.scale}"

    def advice(self, inputs: AdviceInputs) -> list[Advice]:
        """pgbench's lines of the tuned matrix (the four built-ins share them)."""
        if inputs.dataset_bytes:
            scale = max(1, inputs.dataset_bytes // BYTES_PER_SCALE)
            why = (f"--dataset-size {human_bytes(inputs.dataset_bytes)} / "
                   f"{MB_PER_SCALE_TEXT} per scale unit")
        else:
            scale = max(1, int(inputs.ram_bytes * 1.25) // BYTES_PER_SCALE)
            why = "1.25 x RAM: the dataset exceeds the cache, storage is exercised"
        cpus, heavy = inputs.vcpus, min(100, max(1, inputs.client_room))
        return [
            Advice("PGBENCH_SCALE", scale, why),
            Advice("PGBENCH_DURATION", 60,
                   "seconds per run: several checkpoints-free minutes add noise"),
            Advice("PGBENCH_CLIENTS_LIGHT", cpus, f"{cpus} vCPUs: one client per CPU"),
            Advice("PGBENCH_CLIENTS_MEDIUM", 4 * cpus,
                   "4 x vCPUs: CPUs busy while others wait on I/O"),
            Advice("PGBENCH_CLIENTS_HEAVY", heavy,
                   f"max_connections {inputs.max_connections} - {inputs.pgdyno_sessions} "
                   f"pgdyno sessions - {inputs.reserved_slots} reserved slots, at most 100")]

    def dataset_lines(self, dataset_bytes: int) -> list[SizingLine]:
        return [SizingLine("cache", "pgbench scale of that size",
                           f"dataset / {MB_PER_SCALE_TEXT} per scale unit",
                           str(max(1, dataset_bytes // BYTES_PER_SCALE)))]

    def prepare_dataset(self, ctx: RunContext) -> Prepared:
        assert ctx.conn is not None and ctx.install is not None
        scale = ctx.opts.workload_options.scale
        ctx.status(f"pgbench dataset, scale {scale}")
        log = ctx.run_dir.raw / self.engine_dir / "init.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with bulkload.minimal_wal(ctx, self.dataset_tables(ctx.opts)) as wal:
            init = initialise(ctx.conn, ctx.install, scale, ctx.opts.force, log)
        return Prepared(
            scripts=self.scripts(ctx.opts),
            dataset={"kind": "pgbench", "scale": scale, "reused": init.reused,
                     "build_seconds": round(init.seconds, 3),
                     load.RECORD_KEY: wal.stamp(init.load_record()).to_dict()},
            commands=[" ".join(init.command)] if init.command else [],
            parameters={"scale": scale})


class Tpcb(PgbenchBuiltin):
    name = "tpcb"
    rank = 10
    description = "pgbench's TPC-B-like transaction (5 statements, 3 updates)"
    builtin = "tpcb-like"
    tuning = ("oltp", True)


class SimpleUpdate(PgbenchBuiltin):
    name = "simple-update"
    rank = 11
    description = "pgbench's simple-update (TPC-B without the branch and teller updates)"
    builtin = "simple-update"
    tuning = ("oltp", True)


class SelectOnly(PgbenchBuiltin):
    name = "select-only"
    rank = 12
    description = "pgbench's select-only (one primary-key lookup)"
    builtin = "select-only"
    tuning = ("web", False)


class Custom(PgbenchBuiltin):
    name = "custom"
    rank = 13
    description = "your pgbench scripts (--script FILE[@WEIGHT]) on the pgbench tables"
    builtin = None
    tuning = ("mixed", True)
