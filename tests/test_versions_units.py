"""Server builds as configs without a server: a [[config]]'s pg-bin as the file is read,
and the version report's words for figures the test sets (every number in a sentence is
the finding's own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.campaign.spec import load_spec
from pgdyno.errors import UsageError
from pgdyno.study.versions import findings
from pgdyno.study.versions_model import MatrixCell, ServerBuild, VersionReport
from pgdyno.study.versions_report import ratio_text, sentence, side_name

PG15 = "/usr/lib/postgresql/15/bin"
CAMPAIGN = """
[campaign]
workloads = ["oltp-point-select"]
[[config]]
label = "a"
{line}
"""


def _load(tmp_path: Path, line: str):  # noqa: ANN202 - a CampaignSpec
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(line=line))
    return load_spec(path, tmp_path / "results")


def test_pg_bin_becomes_the_configs_cells_binaries(tmp_path: Path) -> None:
    if not Path(PG15, "postgres").is_file():
        pytest.skip("PostgreSQL 15 is not installed (setup.sh installs postgresql-15)")
    spec = _load(tmp_path, f'pg-bin = "{PG15}"')
    opts = spec.options_for(spec.cells()[0])
    assert str(opts.target.pg_bin) == PG15 and opts.target.kind == "local"


@pytest.mark.parametrize(("line", "words"), [
    ('pg-bin = "/nonexistent"', "[[config]] a pg-bin: --pg-bin /nonexistent: no PostgreSQL"),
    ("pg-bin = 5", "[[config]] a pg-bin = 5 is an integer; accepted: a directory"),
    (f'pg-bin = "{PG15}"\n[config.bench]\npg-bin = "{PG15}"', "pg-bin given twice"),
])
def test_a_bad_pg_bin_is_refused_in_one_line(tmp_path: Path, line: str, words: str) -> None:
    with pytest.raises(UsageError) as exc:
        _load(tmp_path, line)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def _report(low: float, high: float, ratio: float, verdict: str) -> VersionReport:
    report = VersionReport(
        base="pg15", labels=["pg15", "pg18"], workloads=["oltp-point-select"],
        servers=[ServerBuild("pg15", "15.18 (Debian 15.18-0+deb12u1)", PG15, "here"),
                 ServerBuild("pg18", "18.6", "/x", "there")])
    report.cells.append(MatrixCell("oltp-point-select", "pg18", "tps", 1000.0,
                                   1000.0 * ratio, ratio, low, high, verdict))
    report.findings = findings(report)
    return report


@pytest.mark.parametrize(("low", "high", "ratio", "verdict", "words"), [
    (1.05, 1.19, 1.12, "faster", "pg18 (PostgreSQL 18.6) is faster than pg15 (PostgreSQL "
                                 "15.18) on oltp-point-select by +12.0% (95% interval +5.0% "
                                 "to +19.0%)."),
    (0.80, 0.90, 0.85, "slower", "is slower than pg15 (PostgreSQL 15.18) on "
                                 "oltp-point-select by -15.0% (95% interval -20.0% to -10.0%)"),
    (0.95, 1.10, 1.02, "no significant difference",
     "oltp-point-select: no significant difference between pg18 (PostgreSQL 18.6) and pg15 "
     "(PostgreSQL 15.18): +2.0% (95% interval -5.0% to +10.0%)."),
])
def test_sentences_carry_the_cells_figures(low: float, high: float, ratio: float,
                                           verdict: str, words: str) -> None:
    report = _report(low, high, ratio, verdict)
    lines = [sentence(f, report) for f in report.findings]
    assert any(words in line for line in lines), lines
    mark = {"faster": "▲", "slower": "▼"}.get(verdict, "=")
    assert ratio_text(report.cells[0]) == f"{mark} {ratio:.2f}× [{low:.2f}, {high:.2f}]"
    summary = next(line for f, line in zip(report.findings, lines, strict=True)
                   if f.kind == "summary")
    word = {"faster": "faster on 1", "slower": "slower on 1"}.get(
        verdict, "no significant difference on 1")
    assert word in summary


def test_a_side_is_named_by_its_build() -> None:
    report = _report(1, 1, 1, "no significant difference")
    assert side_name(report, "pg15") == "pg15 (PostgreSQL 15.18)"
    assert side_name(None, "pg15") == "pg15"
