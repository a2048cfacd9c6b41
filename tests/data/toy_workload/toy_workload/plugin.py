"""``pgdyno bench toy``: pgbench runs one SELECT that counts ``--toy-rows`` generated rows.

A whole workload in a few lines: the pgbench engine (``PgbenchWorkload``) runs the
iterations and summarises them into TPS and latency; this plugin brings its options, its
script and its sweep (``--toy-rows 1000,2000`` runs one run per size). Everything else
(telemetry, reports, compare, campaigns, the run index, the sweep report) is pgdyno's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pgdyno.workloads.base import BenchOptions, Prepared, RunContext, option
from pgdyno.workloads.checks import parse_int_list
from pgdyno.workloads.engine.pgbench import PgbenchWorkload, ScriptSpec


@dataclass(frozen=True)
class ToyOptions:
    toy_rows: int = option(1000, "toy: rows each SELECT counts; 1000,2000 runs a sweep",
                           cli_type=str)
    sweep: tuple[int, ...] = ()


class Toy(PgbenchWorkload):
    name = "toy"
    description = "a toy from its own package: pgbench counts generated rows"
    options_type = ToyOptions
    size_unit = "rows"
    tuning = ("web", False)

    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        sizes = parse_int_list(raw.get("toy_rows", "1000"), "--toy-rows", "1000,2000")
        toy = ToyOptions(toy_rows=sizes[0], sweep=sizes if len(sizes) > 1 else ())
        return dataclasses.replace(opts, workload_options=toy)

    def dataset_size(self, opts: BenchOptions) -> float | None:
        return opts.workload_options.toy_rows

    def sweep_steps(self, opts: BenchOptions) -> list[tuple[int, BenchOptions]]:
        return [(n, dataclasses.replace(opts, workload_options=ToyOptions(toy_rows=n)))
                for n in sorted(opts.workload_options.sweep)]

    def prepare_dataset(self, ctx: RunContext) -> Prepared:
        rows = ctx.opts.workload_options.toy_rows
        script = ctx.run_dir.raw / "scripts" / "toy.sql"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(f"SELECT count(*) FROM generate_series(1, {rows});\n")
        return Prepared(dataset={"kind": "none", "rows": rows}, parameters={"rows": rows},
                        scripts=[ScriptSpec(name="toy", path=script)])
