"""`pgdyno tune --search` from the command line's values: the trials' bench defaults, the
`tune` options that do not apply to a search, and the SearchOptions built from the rest."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from pgdyno.errors import UsageError

if TYPE_CHECKING:
    from pgdyno.search.run import SearchOptions

SEARCH_BENCH_DEFAULTS = {"duration": 30, "warmup": 10, "iterations": 1}
"""A search trial is a short run with a warm-up; the bench defaults apply otherwise."""

def search_options(workload: str, search: dict[str, Any], bench: dict[str, Any],
                   tune: dict[str, Any]) -> SearchOptions:
    """SearchOptions from `pgdyno tune`'s values: ``search`` the search's own (budget,
    time_limit, knobs, fix, allow_unsafe, allow_os_changes, top, reruns, compare_pairs,
    compare_design, compare_max_pairs, search_seed, search_name), ``bench`` the trials'
    bench options (None: not given), ``tune`` tune's own (overrides, dsn, diff, hardware,
    pg_bin), refused where they do not apply to a search."""
    from pgdyno.runner.options import build_options
    from pgdyno.search.run import SearchOptions, parse_knobs, parse_time_limit

    if tune["overrides"]:
        raise UsageError("tune --search: --set does not apply; pin a setting with --fix "
                         "key=value")
    if tune["dsn"] or tune["diff"]:
        raise UsageError("tune --search restarts the server it tunes; --dsn and --diff do not "
                         "apply")
    if tune["hardware"] != "detect":
        raise UsageError("tune --search runs on this host; --hardware does not apply")
    given = dict(bench)
    for name, value in SEARCH_BENCH_DEFAULTS.items():
        if given.get(name) is None:
            given[name] = value
    opts = build_options(workload, **given, pg_bin=tune["pg_bin"])
    return SearchOptions(
        bench=opts, budget=search["budget"],
        time_s=parse_time_limit(search["time_limit"]) if search["time_limit"] is not None
        else None, knobs=parse_knobs(search["knobs"]) if search["knobs"] is not None
        else None, fixes=tuple(search["fix"]), allow_unsafe=search["allow_unsafe"],
        top=search["top"], reruns=search["reruns"], compare_pairs=search["compare_pairs"],
        compare_design=search["compare_design"],
        trial_design=search.get("trial_design", "auto"),
        compare_max_pairs=search["compare_max_pairs"], seed=search["search_seed"],
        name=search["search_name"], show_progress=opts.show_progress,
        storage=study_storage(search["storage"]), study_name=search["study_name"],
        seed_from=search["seed_from"], worker=search["worker"], workers=search["workers"],
        argv=tuple(sys.argv[1:]), validate_s=parse_validate(search.get("validate", "0")),
        validate_against=parse_validate_against(search.get("validate_against",
                                                           "pgtune,tuned")),
        allow_os_changes=bool(search.get("allow_os_changes", False)))


def parse_validate(text: str) -> float:
    """--validate: 0 (no long validation) or a duration such as 30m, 1h, 90s."""
    from pgdyno.search.run import parse_time_limit

    if text.strip() in ("0", "0s", "0m"):
        return 0.0
    try:
        return parse_time_limit(text)
    except UsageError:
        raise UsageError(f"--validate {text!r}: accepted: a duration such as 30m, 1h, 90s, "
                         "or 0 to skip the long validation") from None


def parse_validate_against(text: str) -> tuple[str, ...]:
    """--validate-against: named configs, comma-separated; tuned is added when left out (the
    winner holds only by beating it)."""
    from pgdyno.config.resolve import NAMED

    names = [name.strip() for name in text.split(",") if name.strip()]
    wrong = [name for name in names if name not in NAMED]
    if not names or wrong:
        raise UsageError(f"--validate-against {text!r}: accepted: one or more of "
                         f"{', '.join(NAMED)}, comma-separated")
    return tuple(dict.fromkeys((*names, "tuned")))


STORAGE_ENV = "PGDYNO_SEARCH_STORAGE"
"""--storage's default (how `pgdyno fleet search` hands the URL to its hosts)."""


def study_storage(value: str | None) -> str | None:
    """--storage (else $PGDYNO_SEARCH_STORAGE): the shared study's database as SQLAlchemy's
    URL, or None (study.db in the search's directory)."""
    from pgdyno.search.study import storage_url

    option = "--storage"
    if value is None:
        value, option = os.environ.get(STORAGE_ENV), STORAGE_ENV
    return storage_url(value, option) if value is not None and value.strip() else None
