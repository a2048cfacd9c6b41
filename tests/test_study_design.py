"""How a study's two sides are compared, decided before anything runs: which workloads
become block comparisons (both servers up at once), which run in whole runs and why, and
how the study file states it. No server: the decisions read the options alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.campaign.pairs import PairDesign, paired_workloads
from pgdyno.campaign.spec import load_spec
from pgdyno.compare.blocks import Side, choose_design, options_for_side
from pgdyno.errors import UsageError
from pgdyno.runner.options import build_options
from pgdyno.study.run import pair_design
from pgdyno.study.spec import study_of

STUDY = """
[campaign]
name = "pairs"
workloads = ["tpcb", "cpu"{more}]
clients = [2]
repeat = 2
[bench]
duration = 5
warmup = 1
iterations = 1
[bench.tpcb]
scale = 1
[[config]]
label = "stock"
[[config]]
label = "tuned"
config = "tuned"
{config}
[study]
question = "Does tuning help?"
{study}
[size.quick]
repeat = 1
{size}
"""


def _spec(tmp_path: Path, *, more: str = "", config: str = "", study: str = "",
          size: str = "", at: str | None = None):
    path = tmp_path / "study.toml"
    path.write_text(STUDY.format(more=more, config=config, study=study, size=size))
    return load_spec(path, tmp_path / "results", size=at)


def test_each_compared_workload_becomes_one_block_comparison(tmp_path: Path) -> None:
    spec = _spec(tmp_path, study='design = "interleaved"\npairs = 5\nbudget = "90s"\n'
                                 'precision = "2%"')
    study = study_of(spec)
    plan = pair_design(study)
    assert plan == PairDesign("stock", "tuned", "interleaved", 5, 90.0, 2.0)
    paired, sequential = paired_workloads(spec, plan, spec.cells())
    # cpu runs no server (and once, under one config): described, never compared
    assert set(paired) == {"tpcb"} and sequential == {}
    group = paired["tpcb"]
    assert (group.baseline.key, group.candidate.key) == ("r1:tpcb:stock", "r1:tpcb:tuned")
    # the second repetition's cells are measured in the first one's blocks
    assert sorted(c.key for c in group.covered) == ["r2:tpcb:stock", "r2:tpcb:tuned"]
    assert group.design == "interleaved" and group.why == "asked for"
    # cells done before (a resumed study) are not compared again
    rest = [c for c in spec.cells() if c.workload != "tpcb"]
    assert paired_workloads(spec, plan, rest) == ({}, {})


def test_auto_runs_whole_runs_where_blocks_cannot_serve_and_says_why(
        tmp_path: Path) -> None:
    cold = _spec(tmp_path, config='[config.bench]\ncache = "cold"')
    paired, sequential = paired_workloads(cold, pair_design(study_of(cold)), cold.cells())
    assert paired == {}
    assert sequential["tpcb"].startswith("auto: --cache cold drops the OS page cache")
    os_change = _spec(tmp_path, config='[config.os]\n"vm.swappiness" = "10"')
    paired, sequential = paired_workloads(os_change, pair_design(study_of(os_change)),
                                          os_change.cells())
    assert paired == {} and "changes OS settings" in sequential["tpcb"]
    # asked for by name, a design that cannot run is refused in one line
    asked = _spec(tmp_path, config='[config.bench]\ncache = "cold"',
                  study='design = "duet"')
    with pytest.raises(UsageError, match=r"^campaign .*study.toml: \[study\] design = "
                       r"'duet': tpcb: --cache cold.*; accepted: design = \"sequential\" "
                       r"or \"auto\"$"):
        paired_workloads(asked, pair_design(study_of(asked)), asked.cells())
    seq = _spec(tmp_path, study='design = "sequential"')
    assert paired_workloads(seq, pair_design(study_of(seq)), seq.cells()) == (
        {}, {"tpcb": "asked for"})


def test_a_size_changes_the_design_keys(tmp_path: Path) -> None:
    spec = _spec(tmp_path, study='design = "duet"\npairs = 8',
                 size='[size.quick.study]\npairs = 4\ndesign = "interleaved"', at="quick")
    study = study_of(spec)
    assert (study.design, study.pairs) == ("interleaved", 4)
    assert study_of(_spec(tmp_path, study='design = "duet"\npairs = 8',
                          size='[size.quick.study]\npairs = 4')).pairs == 8


@pytest.mark.parametrize("study, size, words", [
    ('design = "blocks"', "", r"\[study\] design = 'blocks'; accepted: auto, alternating, "
                              "interleaved, duet, sequential"),
    ("pairs = 1", "", r"\[study\] pairs = 1; accepted: a whole number of at least 2"),
    ("pairs = true", "", r"\[study\] pairs = True; accepted: a whole number"),
    ('budget = "5"', "", r"\[study\] budget = '5'; accepted: a duration of at least 10 s"),
    ('precision = "0%"', "", r"\[study\] precision = '0%'; accepted: a half-width in %"),
    ("", "[size.quick.study]\nquestion = 'x'",
     r"\[size.quick.study\] question not accepted; accepted: budget, design, pairs, "
     "precision"),
])
def test_bad_design_keys_are_one_line_naming_file_and_key(tmp_path: Path, study: str,
                                                          size: str, words: str) -> None:
    with pytest.raises(UsageError, match=words) as err:
        spec = _spec(tmp_path, study=study, size=size, at="quick" if size else None)
        study_of(spec)
    assert str(tmp_path / "study.toml") in str(err.value)
    assert "\n" not in str(err.value)


def test_each_side_archives_into_its_own_workdir(tmp_path: Path) -> None:
    """Without --archive-dir, each side's archive moves into its own workdir, and the block
    designs may run; a directory the user named would be written by both servers."""
    base = build_options("tpcb", archive="buffered", workdir=tmp_path / "wd", clients="2")
    assert base.target.archive_dir == (tmp_path / "wd" / "archive").absolute()
    sides = [options_for_side(base, Side(name), tmp_path / "wd" / name)
             for name in ("baseline", "candidate")]
    assert [s.target.archive_dir for s in sides] == [
        (tmp_path / "wd" / name / "archive").absolute() for name in ("baseline", "candidate")]
    assert choose_design("interleaved", base, True, 1 << 20, 1 << 34)[0] == "interleaved"
    named = build_options("tpcb", archive="direct", archive_dir=tmp_path / "arch",
                          workdir=tmp_path / "wd", clients="2")
    side = options_for_side(named, Side("x"), tmp_path / "wd" / "baseline")
    assert side.target.archive_dir == (tmp_path / "arch").absolute()
    with pytest.raises(UsageError, match=r"--archive-dir .*arch is one directory"):
        choose_design("duet", named, True, 1 << 20, 1 << 34)
    command = build_options("tpcb", archive="cp %p /tmp/%f", workdir=tmp_path / "wd",
                            clients="2")
    assert choose_design("auto", command, True, 1 << 20, 1 << 34)[0] == "sequential"


def test_configs_that_archive_into_their_own_directories_pair(tmp_path: Path) -> None:
    """One --archive-dir for both sides blocks the blocks; a campaign whose two configs
    each name their own does not."""
    text = STUDY.format(more="", config="", study='design = "interleaved"', size="")
    for last_line, method in (('label = "stock"\n', "buffered"),
                              ('config = "tuned"\n', "direct")):
        text = text.replace(last_line, f'{last_line}[config.bench]\narchive = "{method}"\n'
                            f'archive-dir = "{tmp_path / method}"\n', 1)
    path = tmp_path / "study.toml"
    path.write_text(text)
    spec = load_spec(path, tmp_path / "results")
    paired, _ = paired_workloads(spec, pair_design(study_of(spec)), spec.cells())
    assert set(paired) == {"tpcb"}



def test_auto_takes_turns_where_the_load_can_be_paused_and_says_why(tmp_path: Path) -> None:
    """A study's auto design, as `pgdyno compare`'s: turns of one second for a pgbench
    load that can be paused; blocks where it cannot (a paced load), and a design asked by
    name that cannot run is refused in one line naming the file and key."""
    spec = _spec(tmp_path)
    paired, _ = paired_workloads(spec, pair_design(study_of(spec)), spec.cells())
    assert paired["tpcb"].design == "alternating"
    assert "take turns of one second" in paired["tpcb"].why
    paced = _spec(tmp_path, more="", config='[config.bench]\nrate = 100')
    paired, _ = paired_workloads(paced, pair_design(study_of(paced)), paced.cells())
    assert paired["tpcb"].design not in ("alternating", "sequential")
    asked = _spec(tmp_path, config='[config.bench]\nrate = 100', study='design = "alternating"')
    with pytest.raises(UsageError) as err:
        paired_workloads(asked, pair_design(study_of(asked)), asked.cells())
    words = str(err.value)
    assert words.startswith(f"campaign {tmp_path / 'study.toml'}: [study] design = "
                            "'alternating': tpcb: --rate")
    assert words.endswith('accepted: design = "interleaved" or "auto"') and "\n" not in words
    # too short a block for a quad of turns after its lead: blocks, not turns
    short = _spec(tmp_path, study="", size="[size.quick.bench]\nduration = 2\nwarmup = 0",
                  at="quick")
    paired, _ = paired_workloads(short, pair_design(study_of(short)), short.cells())
    assert paired["tpcb"].design != "alternating"


def test_the_campaigns_estimate_counts_a_studys_blocks_not_its_iterations(tmp_path) -> None:
    """The WAL archiving study compares each warehouse count in six pairs of interleaved
    blocks of 15 + 60 s: 2 counts x 12 blocks x (75 s + a block's overhead), where the
    cells' own plan (2 iterations a count a side) said a third of that."""
    from pgdyno.campaign.pairs import BLOCK_OVERHEAD_S
    from pgdyno.campaign.runner import estimate_campaign_seconds, estimate_seconds

    root = Path(__file__).resolve().parents[1]
    spec = load_spec(root / "examples" / "wal-archiving.toml", tmp_path / "results")
    plan = pair_design(study_of(spec))
    todo = spec.cells()
    paired, _ = paired_workloads(spec, plan, todo)
    assert set(paired) == {"tprocc"} and paired["tprocc"].design == "interleaved"
    blocks = 2 * 6 * 2
    assert estimate_campaign_seconds(spec, todo, plan, paired) == pytest.approx(
        blocks * (15 + 60 + BLOCK_OVERHEAD_S))
    # Without the study's pairs the same cells are planned runs, as before.
    assert estimate_campaign_seconds(spec, todo, None, {}) == estimate_seconds(spec, todo)
    assert estimate_seconds(spec, todo) < blocks * 75 / 2
