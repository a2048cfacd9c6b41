"""Names and lists a hostile (or unlucky) user gives: one line, exit 2, nothing created.

Every name that becomes a directory or file name under --results-dir (a campaign's name,
its --size, a context, a search's name, a study's config labels) is refused when it would
lead out of the results directory (``..``, ``/``, an absolute path), point at it (``.``,
empty), or fail later as a path (a control character, too long). A comma-separated list
given empty (an unset shell variable: ``--only "$KEYS"``) is refused, never read as "all" or
"none". And ``pgdyno runs`` keeps each run's name whole at any terminal width.

Each refusal is checked as a user meets it: the exit code, exactly one line on stderr naming
the option or key, no traceback, and the whole test directory (the working directory, the
results directory, what lies above it, the workdir) as it was. The corpus runs through the
CLI's entry point in this process (``run_cli_here``); a few cases of each class also run as
``python -m pgdyno`` in a subprocess. Nothing here starts a server: campaigns name a --dsn
on a closed port, so that even a check that regressed would fail to connect, not start one.
"""

from __future__ import annotations

import hashlib
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgdyno.results.index import RunIndex, RunRow
from pgdyno.results.listing import build_listing, render
from tests.conftest import run_cli, run_cli_here

RESULTS = "a/b/res"
"""The results directory, two levels down the test's directory: a name that climbs out of
it with ``..`` lands inside the test's directory, where the snapshot sees it."""
LONG = "x" * 300


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _campaign(name: str = "t", extra: str = "") -> str:
    """A campaign whose only cell would fail to connect (no server is ever started), with
    sizes whose table names are hostile, so that only the name check stands in the way."""
    return (f'[campaign]\nname = "{name}"\nworkloads = ["tpcb"]\nclients = [1]\nrepeat = 1\n'
            f'[bench]\ndsn = "host=127.0.0.1 port={_closed_port()} dbname=x user=x '
            'connect_timeout=1"\nscale = 1\nduration = 1\n'
            '[size.quick]\nrepeat = 1\n[size."../../esc"]\nrepeat = 1\n[size.".."]\nrepeat = 1\n'
            f'{extra}')


STUDY = '[study]\nquestion = "Does it help?"\n'


@dataclass(frozen=True)
class Case:
    id: str
    args: list[str]
    words: list[str]
    """What the one error line must contain: the option or key, and why."""


def _tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a digest of its content (directories: "dir")."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """The test's directory: ``cwd/`` (the command's working directory, with the files it
    names), the results directory ``a/b/res`` holding one finished campaign ``t--quick``,
    and ``a/b/x`` and ``abs``, each with a campaign copy a name could reach by escaping."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "c.toml").write_text(_campaign())
    (cwd / "inv").write_text("[all]\nlocalhost\n")
    journal = tmp_path / RESULTS / "campaigns" / "t--quick"
    journal.mkdir(parents=True)
    (journal / "campaign.toml").write_text(_campaign())
    for bait in (tmp_path / "a" / "b" / "x", tmp_path / "abs"):
        bait.mkdir(parents=True)
        (bait / "campaign.toml").write_text(_campaign())
    return tmp_path


def _refused(out, *words: str) -> str:
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("pgdyno: error: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _run(place: Path, args: list[str], subprocess: bool = False):
    """``pgdyno ARGS`` from ``place/cwd``, ``{abs}`` and ``{res}`` replaced by those
    directories; the test's directory must be as it was afterwards."""
    args = [a.replace("{abs}", str(place / "abs")).replace("{res}", str(place / RESULTS))
            for a in args]
    before = _tree(place)
    if subprocess:
        out = run_cli(args, place / "work", timeout=120, cwd=place / "cwd")
    else:
        out = run_cli_here(args, place / "work", cwd=place / "cwd")
    assert _tree(place) == before, out.stderr
    return out


RES = ["--results-dir", "{res}"]
ESCAPES = "would leave the results directory"


# ----- names that become directories under --results-dir ---------------------------------

NAME_CASES = [
    # `pgdyno campaign FILE --size NAME`: its journal is RESULTS/campaigns/NAME--SIZE
    Case("size-climbs", ["campaign", "c.toml", "--size", "../../esc", *RES],
         ["--size '../../esc'", ESCAPES, "accepted: a name without /"]),
    Case("size-parent", ["campaign", "c.toml", "--size", "..", *RES], ["--size '..'", ESCAPES]),
    Case("size-dot", ["campaign", "c.toml", "--size", ".", *RES], ["--size '.'", "itself"]),
    Case("size-empty", ["campaign", "c.toml", "--size", "", *RES], ["--size ''", "empty"]),
    Case("size-blank", ["campaign", "c.toml", "--size", "  ", *RES], ["--size", "empty"]),
    Case("size-absolute", ["campaign", "c.toml", "--size", "{abs}", *RES], ["--size", ESCAPES]),
    Case("size-backslash", ["campaign", "c.toml", "--size", "..\\x", *RES], ["--size", ESCAPES]),
    Case("size-newline", ["campaign", "c.toml", "--size", "a\nb", *RES],
         ["--size", "control character"]),
    Case("size-long", ["campaign", "c.toml", "--size", LONG, *RES],
         ["--size", "300 bytes long", "100 bytes"]),
    # `pgdyno report --campaign NAME [--size SIZE]`: RESULTS/campaigns/NAME[--SIZE]
    Case("report-campaign-climbs", ["report", "--campaign", "../../x", *RES],
         ["--campaign '../../x'", ESCAPES]),
    Case("report-campaign-absolute", ["report", "--campaign", "{abs}", *RES],
         ["--campaign", ESCAPES]),
    Case("report-campaign-parent", ["report", "--campaign", "..", *RES], ["--campaign", ESCAPES]),
    Case("report-campaign-empty", ["report", "--campaign", "", *RES], ["--campaign ''", "empty"]),
    Case("report-campaign-long", ["report", "--campaign", LONG, *RES],
         ["--campaign", "300 bytes long"]),
    Case("report-campaign-size-climbs", ["report", "--campaign", "t", "--size", "../..", *RES],
         ["--size '../..'", ESCAPES]),
    Case("report-campaign-size-empty", ["report", "--campaign", "t", "--size", "", *RES],
         ["--size ''", "empty"]),
    # contexts: RESULTS/CONTEXT (report written there), RESULTS/provision/CONTEXT
    Case("report-context-parent", ["report", "--context", "..", *RES], ["--context '..'", ESCAPES]),
    Case("report-context-dot", ["report", "--context", ".", *RES], ["--context '.'", "itself"]),
    Case("report-context-empty", ["report", "--context", "", *RES], ["--context ''", "empty"]),
    Case("report-context-absolute", ["report", "--context", "{abs}", *RES],
         ["--context", ESCAPES]),
    Case("report-against-climbs", ["report", "--context", "t", "--against", "../..", *RES],
         ["--against '../..'", ESCAPES]),
    Case("journal-parent", ["journal", "..", *RES], ["journal CONTEXT '..'", ESCAPES]),
    Case("journal-empty", ["journal", "", *RES], ["journal CONTEXT ''", "empty"]),
    Case("context-report-absolute", ["context-report", "{abs}", *RES],
         ["context-report CONTEXT", ESCAPES]),
    Case("context-report-against", ["context-report", "t", "--against", "..", *RES],
         ["--against '..'", ESCAPES]),
    Case("provision-apply-context", ["provision", "apply", "--context", "../../x", *RES],
         ["--context '../../x'", ESCAPES]),
    Case("provision-verify-context", ["provision", "verify", "--context", "../../x", *RES],
         ["--context '../../x'", ESCAPES]),
    Case("provision-verify-context-empty", ["provision", "verify", "--context", "", *RES],
         ["--context ''", "empty"]),
    Case("provision-revert-context", ["provision", "revert", "--context", "..", *RES],
         ["--context '..'", ESCAPES]),
    Case("bench-context-long", ["bench", "tpcb", "--context", LONG, "--dsn",
                                "host=127.0.0.1 port=9 dbname=x user=x", *RES],
         ["--context", "300 bytes long"]),
    Case("bench-context-backslash", ["bench", "tpcb", "--context", "a\\..", "--dsn",
                                     "host=127.0.0.1 port=9 dbname=x user=x", *RES],
         ["--context", ESCAPES]),
    # searches: RESULTS/searches/NAME, and each fleet host's copy of it
    Case("search-name-parent", ["tune", "--search", "tpcb", "--budget", "1", "--search-name",
                                "..", *RES], ["--search-name '..'", ESCAPES]),
    Case("search-name-dot", ["tune", "--search", "tpcb", "--budget", "1", "--search-name",
                             ".", *RES], ["--search-name '.'", "itself"]),
    Case("search-name-long", ["tune", "--search", "tpcb", "--budget", "1", "--search-name",
                              LONG, *RES], ["--search-name", "300 bytes long"]),
    Case("study-name-empty", ["tune", "--search", "tpcb", "--budget", "1", "--storage",
                              "postgresql://u@127.0.0.1/db", "--study-name", "", *RES],
         ["--study-name ''", "empty"]),
    Case("fleet-search-name-parent", ["fleet", "search", "tpcb", "-i", "inv", "--storage",
                                      "postgresql://u@127.0.0.1/db", "--search-name", "..",
                                      *RES], ["--search-name '..'", ESCAPES]),
    Case("fleet-search-name-dot", ["fleet", "search", "tpcb", "-i", "inv", "--storage",
                                   "postgresql://u@127.0.0.1/db", "--search-name", ".", *RES],
         ["--search-name '.'", "itself"]),
]


@pytest.mark.parametrize("case", NAME_CASES, ids=lambda c: c.id)
def test_a_name_that_would_leave_the_results_directory_is_refused(place: Path,
                                                                  case: Case) -> None:
    _refused(_run(place, case.args), *case.words)


# ----- names inside a campaign file -------------------------------------------------------

FILE_CASES = [
    ("name-long", _campaign(LONG), ["[campaign] name =", "300 bytes long"]),
    ("name-parent", _campaign(".."), ["[campaign] name = '..'", ESCAPES]),
    ("study-label-slash", _campaign(extra=f'[[config]]\nlabel = "a/b"\n{STUDY}'),
     ["[[config]] label = 'a/b'", ESCAPES]),
    ("study-label-climbs", _campaign(extra=f'[[config]]\nlabel = "../../../x"\n{STUDY}'),
     ["[[config]] label = '../../../x'", ESCAPES]),
    ("study-label-long", _campaign(extra=f'[[config]]\nlabel = "{LONG}"\n{STUDY}'),
     ["[[config]] label =", "300 bytes long"]),
    ("study-label-from-config-path",
     _campaign(extra=f'[[config]]\nconfig = "cfgs/mine.toml"\n{STUDY}'),
     ["without a label", "'cfgs/mine.toml'", ESCAPES]),
]


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in FILE_CASES],
                         ids=[c[0] for c in FILE_CASES])
def test_a_campaign_files_names_are_checked_before_anything(place: Path, text: str,
                                                            words: list[str]) -> None:
    """A study keeps a file per config named after its label (plan-LABEL.json): a label
    holding / made the study fail half-way, or write outside its directory."""
    (place / "cwd" / "cfgs").mkdir()
    (place / "cwd" / "cfgs" / "mine.toml").write_text("")
    (place / "cwd" / "h.toml").write_text(text)
    _refused(_run(place, ["campaign", "h.toml", *RES]), "campaign h.toml", *words)


def test_a_campaign_named_by_a_file_whose_stem_is_dot_dot_is_refused(place: Path) -> None:
    """Without [campaign] name the file's stem names the journal: ``...toml``'s is ``..``."""
    text = _campaign().replace('name = "t"\n', "")
    (place / "cwd" / "...toml").write_text(text)
    _refused(_run(place, ["campaign", "...toml", *RES]), "its file's name '..'", ESCAPES)


def test_a_label_with_a_slash_is_kept_in_a_campaign_without_a_study(place: Path) -> None:
    """Without a [study] no label becomes a path: a config file given without a label (its
    path is the label) stays accepted; the name check is not what refuses this file."""
    (place / "cwd" / "h.toml").write_text(
        _campaign(extra='[[config]]\nlabel = "a/b"\n[[config]]\nlabel = "a/b"\n'))
    line = _refused(_run(place, ["campaign", "h.toml", *RES]), "labels must be unique")
    assert ESCAPES not in line


# ----- the same, as a user runs them: python -m pgdyno in a subprocess ---------------------

# Two commands' cases, a campaign's and a search's (whose libraries load late); every case
# runs through the same entry point in this process above.
@pytest.mark.parametrize("case", [c for c in NAME_CASES if c.id in {
    "size-climbs", "search-name-parent"}], ids=lambda c: c.id)
def test_a_hostile_name_in_a_subprocess(place: Path, case: Case) -> None:
    _refused(_run(place, case.args, subprocess=True), *case.words)


def test_the_sizes_and_names_that_are_fine_still_work(place: Path) -> None:
    """The check refuses paths, not names: a size of the file runs (its one cell fails to
    connect to the closed port, as the campaign says; exit 0, its journal where it belongs)."""
    out = run_cli_here(["campaign", "c.toml", "--size", "quick", "--results-dir",
                        str(place / RESULTS), "--no-progress"], place / "work",
                       cwd=place / "cwd")
    assert out.returncode == 0, out.stderr
    assert (place / RESULTS / "campaigns" / "t--quick" / "journal.jsonl").is_file()
    assert not (place / "a" / "esc").exists()


# ----- an empty list is not "everything" --------------------------------------------------

LIST_CASES = [
    Case("plan-only-empty", ["provision", "plan", "--only", ""], ["--only ''", "nothing named",
                                                                  "every setting"]),
    Case("plan-only-comma", ["provision", "plan", "--only", ","], ["--only ','", "nothing"]),
    Case("plan-only-blank", ["provision", "plan", "--only", " "], ["--only ' '", "nothing"]),
    Case("plan-only-trailing", ["provision", "plan", "--only", "vm.swappiness,"],
         ["--only 'vm.swappiness,'", "an empty item"]),
    Case("plan-only-repeated", ["provision", "plan", "--only", "vm.swappiness", "--only", ""],
         ["--only ''", "nothing named"]),
    Case("apply-only-empty", ["provision", "apply", "--only", "", *RES], ["--only ''"]),
    Case("apply-only-comma", ["provision", "apply", "--only", ",", *RES], ["--only ','"]),
    Case("verify-only-empty", ["provision", "verify", "--only", "", *RES], ["--only ''"]),
    Case("plan-data-devices-empty", ["provision", "plan", "--data-devices", ""],
         ["--data-devices ''", "nothing named", "/dev/nvme1n1"]),
    Case("plan-wal-devices-comma", ["provision", "plan", "--wal-devices", " , "],
         ["--wal-devices ' , '", "nothing named"]),
    Case("apply-destroy-data-empty", ["provision", "apply", "--destroy-data", "", *RES],
         ["--destroy-data ''"]),
    Case("apply-force-device-trailing", ["provision", "apply", "--force-device",
                                         "/dev/loop3,", *RES], ["--force-device", "empty item"]),
    Case("fleet-run-limit-empty", ["fleet", "run", "c.toml", "-i", "inv", "--limit", "", *RES],
         ["--limit ''", "whole group"]),
    Case("fleet-run-limit-trailing", ["fleet", "run", "c.toml", "-i", "inv", "--limit", "a,",
                                      *RES], ["--limit 'a,'", "empty item"]),
    Case("fleet-run-group-empty", ["fleet", "run", "c.toml", "-i", "inv", "--group", " ", *RES],
         ["--group ' '", "empty"]),
    Case("fleet-search-limit-comma", ["fleet", "search", "tpcb", "-i", "inv", "--storage",
                                      "postgresql://u@127.0.0.1/db", "--search-name", "s",
                                      "--limit", ",", *RES], ["--limit ','"]),
    Case("runs-empty-id", ["runs", "", *RES], ["run ''", "empty run id"]),
]


@pytest.mark.parametrize("case", LIST_CASES, ids=lambda c: c.id)
def test_an_empty_selection_is_refused(place: Path, case: Case) -> None:
    """``provision apply --only "$KEYS"`` with the variable unset selected all settings (with
    --yes, applied them all); these are refused while parsing, before any plan (apply is
    only ever run here as a dry run)."""
    assert "--yes" not in case.args
    _refused(_run(place, case.args), *case.words)


def test_an_empty_only_in_a_subprocess(place: Path) -> None:
    _refused(_run(place, ["provision", "apply", "--only", "", *RES], subprocess=True),
             "--only ''", "nothing named")


# ----- pgdyno runs at any width --------------------------------------------------------------

def _row(run_id: str) -> RunRow:
    return RunRow(run_id=run_id, context=run_id.split("/")[0], workload="tpcb", status="ok",
                  started_at="2026-11-25T13:08:44Z", ended_at=None, config="default",
                  clients="2", headline=3061.2, p99_ms=9.49, pg_version="18.1",
                  headline_metric="TPS", headline_unit="tx/s", dataset="scale 1")


RUN_IDS = ["box--tpcb/tpcb-20261125T130844Z", "a-long-context-name-of-a-host--tpcb/"
           "tpcb-20261125T130845Z", "two--tpcb/tpcb-20261125T130846Z",
           "one--tpcb/tpcb-20261125T130846Z"]
NAMES = ["tpcb-20261125T130844Z", "tpcb-20261125T130845Z", RUN_IDS[2], RUN_IDS[3]]
"""What ``runs`` names them: the directory, or the whole id when two share a directory."""


@pytest.mark.parametrize("width", [1, 2, 5, 20, 30])
def test_a_narrow_listing_keeps_each_run_name_whole(width: int) -> None:
    lines = render(build_listing([_row(r) for r in RUN_IDS], width))
    assert lines[0].startswith("run")
    assert [line.split()[0] for line in lines[1:]] == NAMES
    assert not any("…" in line.split()[0] for line in lines)


@pytest.mark.parametrize("columns", ["1", "12", "40"])
def test_runs_at_a_tiny_COLUMNS_prints_the_run_names(tmp_path: Path, columns: str) -> None:
    results = tmp_path / "res"
    RunIndex(results).rebuild([_row(r) for r in RUN_IDS])
    out = run_cli_here(["runs", "--results-dir", str(results)], tmp_path / "work",
                       env={"COLUMNS": columns})
    assert out.returncode == 0, out.stderr
    names = [line.split()[0] for line in out.stdout.splitlines()[1:]]
    assert sorted(names) == sorted(NAMES), out.stdout
    assert "Traceback" not in out.stderr


def test_runs_at_COLUMNS_1_in_a_subprocess(tmp_path: Path) -> None:
    results = tmp_path / "res"
    RunIndex(results).rebuild([_row(r) for r in RUN_IDS])
    out = run_cli(["runs", "--results-dir", str(results)], tmp_path / "work", timeout=120,
                  env={"COLUMNS": "1"})
    assert out.returncode == 0, out.stderr
    assert sorted(line.split()[0] for line in out.stdout.splitlines()[1:]) == sorted(NAMES)
    assert all(line.startswith("note: ") for line in out.stderr.splitlines()), out.stderr
