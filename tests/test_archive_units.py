"""WAL archiving without a server: the options, the archive command itself (real bash, cp,
dd on a real filesystem), its log, the lag arithmetic, the verdict's marking, mincore."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pgdyno.analysis.archive import ArchiveSummary, judge, lag_of, segment_number
from pgdyno.errors import UsageError
from pgdyno.reports.archive_sections import memory_stack
from pgdyno.targets import archive
from pgdyno.telemetry.archiver import directory_residency, file_residency
from tests.conftest import make_shared_dir

SEG = 16 * 2**20


def test_parse_archive_methods_and_refusals(tmp_path: Path) -> None:
    off = archive.parse_archive(None, None, tmp_path, None)
    assert not off.enabled
    buffered = archive.parse_archive("buffered", None, tmp_path, None)
    assert buffered.directory == (tmp_path / "archive").absolute()
    assert archive.parse_archive("DIRECT", tmp_path / "a", tmp_path, None).method == "direct"
    own = archive.parse_archive("cp %p /x/%f", None, tmp_path, None)
    assert (own.method, own.command) == ("command", "cp %p /x/%f")
    with pytest.raises(UsageError, match="--dsn"):
        archive.parse_archive("buffered", None, tmp_path, "postgresql://x@y/z")
    with pytest.raises(UsageError, match="%p"):
        archive.parse_archive("cp a b", None, tmp_path, None)
    with pytest.raises(UsageError, match="--archive-dir needs"):
        archive.parse_archive("off", tmp_path, tmp_path, None)


def test_dsn_refused_by_the_options_table() -> None:
    from pgdyno.runner.options import build_options

    with pytest.raises(UsageError, match="--archive with --dsn"):
        build_options("tpcb", dsn="postgresql://u@127.0.0.1:1/db", archive="direct")


def test_archive_settings_quote_paths() -> None:
    spec = archive.ArchiveSpec("direct", Path("/srv/it's/arch"))
    settings = archive.archive_settings(spec)
    assert settings["archive_mode"] == "on"
    command = settings["archive_command"]
    assert command.startswith("'") and command.endswith("'")
    inner = command[1:-1].replace("''", "'")
    argv = __import__("shlex").split(inner)
    assert argv == [str(spec.script), "direct", "%p", "%f", "/srv/it's/arch", str(spec.log)]
    with pytest.raises(UsageError, match="wal_level"):
        archive.check_wal_level({"wal_level": "minimal"})


def _run_script(method: str, src: Path, arch: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(arch / archive.SCRIPT_NAME), method, str(src), src.name,
                           str(arch), str(arch / archive.LOG_NAME)],
                          capture_output=True, text=True, check=False)


@pytest.fixture()
def arch_dir():
    """A directory on a real disk (/var/tmp: O_DIRECT works there, unlike tmpfs)."""
    root = make_shared_dir("pgdyno-archive-unit-")
    arch = root / "archive"
    arch.mkdir()
    (arch / archive.SCRIPT_NAME).write_text(archive.SCRIPT)
    (arch / archive.SCRIPT_NAME).chmod(0o755)
    try:
        yield root, arch
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _segment(root: Path, name: str = "000000010000000000000001") -> Path:
    """A segment written and fsynced, as PostgreSQL hands them to the archiver (the kernel
    drops only clean pages on DONTNEED)."""
    src = root / name
    with src.open("wb") as fh:
        fh.write(os.urandom(SEG))
        fh.flush()
        os.fsync(fh.fileno())
    return src


def test_command_refuses_a_different_segment_and_accepts_an_identical_one(arch_dir) -> None:
    root, arch = arch_dir
    src = _segment(root)
    first = _run_script("buffered", src, arch)
    assert first.returncode == 0, first.stderr
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    assert hashlib.sha256((arch / src.name).read_bytes()).hexdigest() == digest
    assert _run_script("direct", src, arch).returncode == 0  # identical: success
    src.write_bytes(os.urandom(SEG))  # same name, other content
    refused = _run_script("buffered", src, arch)
    assert refused.returncode != 0 and "different content" in refused.stderr
    assert hashlib.sha256((arch / src.name).read_bytes()).hexdigest() == digest  # untouched
    lines, _ = archive.read_log(arch / archive.LOG_NAME)
    assert [x.outcome for x in lines] == ["ok", "identical", "conflict"]
    assert all(x.end >= x.start for x in lines)
    assert not list(arch.glob(f".*{archive.TMP_SUFFIX}"))  # no temporary copy left


def test_unreadable_source_exits_non_zero(arch_dir) -> None:
    root, arch = arch_dir
    result = _run_script("direct", root / "000000010000000000000009", arch)
    assert result.returncode != 0
    assert not (arch / "000000010000000000000009").exists()


def _fincore_bytes(path: Path) -> int:
    """util-linux's own count of the file's bytes in the page cache."""
    out = subprocess.run(["fincore", "--bytes", "--json", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return int(json.loads(out)["fincore"][0]["res"])


@pytest.mark.skipif(shutil.which("fincore") is None, reason="util-linux fincore missing")
def test_direct_copy_stays_out_of_the_page_cache_and_buffered_does_not(arch_dir) -> None:
    root, arch = arch_dir
    buffered_src, direct_src = _segment(root, "0000000100000000000000A1"), \
        _segment(root, "0000000100000000000000A2")
    assert _run_script("buffered", buffered_src, arch).returncode == 0
    assert _run_script("direct", direct_src, arch).returncode == 0
    buffered_copy, direct_copy = arch / buffered_src.name, arch / direct_src.name
    assert _fincore_bytes(buffered_copy) > SEG * 0.9
    assert _fincore_bytes(direct_copy) == 0
    # iflag=nocache asks the kernel to drop the source (DONTNEED); whether it does depends
    # on how recently the pages were written, so the source is not asserted here.
    # pgdyno's own mincore agrees with fincore.
    for path in (buffered_copy, direct_copy, direct_src, buffered_src):
        assert file_residency(path) == (SEG, _fincore_bytes(path))
    usage = directory_residency(arch)
    assert usage.files == 4 and usage.cached_bytes == sum(
        _fincore_bytes(p) for p in arch.iterdir() if p.stat().st_size)


def test_only_segments_pgdyno_archived_are_emptied(arch_dir) -> None:
    root, arch = arch_dir
    mine = _segment(root, "000000010000000000000011")
    assert _run_script("buffered", mine, arch).returncode == 0
    foreign = arch / "000000010000000000000012"
    foreign.write_bytes(b"someone else's")
    assert archive.empty_archived(arch) == 1
    assert not (arch / mine.name).exists() and foreign.exists()
    assert (arch / archive.LOG_NAME).read_text() == ""


def test_log_lines_partial_and_damaged(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("000000010000000000000001 1.5 2.0 ok direct\ngarbage\n"
                   "000000010000000000000002 3.0 3.25 error buffered\n000000010000000000000003 4")
    lines, offset = archive.read_log(log)
    assert [(x.segment[-1], x.seconds, x.outcome) for x in lines] == [
        ("1", 0.5, "ok"), ("2", 0.25, "error")]
    assert offset == log.read_bytes().rfind(b"\n") + 1  # the partial line is read next time


def test_lag_in_segments() -> None:
    assert segment_number("0000000100000001000000FF", SEG) == 256 + 255
    assert segment_number("000000010000000000000003.partial", SEG) is None
    row = {"current_wal": "000000010000000100000002", "last_archived_wal":
           "0000000100000000000000FE", "ready_count": "3"}
    assert lag_of(row, SEG) == 3  # FF, 100, 101 written and waiting; 102 being written
    assert lag_of({"current_wal": "000000010000000000000005", "last_archived_wal": "",
                   "ready_count": "4"}, SEG) == 4


def test_judge_marks_failure_and_falling_behind() -> None:
    ok = ArchiveSummary(lag_start=0, lag_end=1, lag_segments=[0, 1])
    judge(ok)
    assert not ok.failing and not ok.fell_behind and not ok.evidence
    bad = ArchiveSummary(failed=3, last_failed_wal="000000010000000000000009", lag_start=1,
                         lag_end=6, lag_segments=[1, 4, 6], archived_mb_s=5.0,
                         wal_written_mb_s=20.0)
    bad.commands.outcomes = {"error": 3}
    judge(bad)
    assert bad.failing and bad.fell_behind
    assert "3 failed" in bad.evidence[0] and "6 segments" in bad.evidence[1]


def test_memory_stack_splits_the_page_cache() -> None:
    from pgdyno.analysis.archive import MemorySeries

    m = MemorySeries(t=[0.0, 1.0], meminfo_mib={
        "total": [1000, 1000], "free": [300, 280], "buffers": [10, 10],
        "cached": [500, 520], "shmem": [100, 100], "anon": [150, 150]},
        cached_mib={"data": [200, 210], "wal": [50, None], "archive": [None, 60]})
    stack = dict(memory_stack(m))
    assert stack["page cache: other files"] == [150, 150]
    assert stack["kernel and other"] == [40, 40]
    for i in range(2):  # every category together is the memory that is not free
        assert sum(v[i] for v in stack.values()) == 1000 - m.meminfo_mib["free"][i]


def test_a_named_archive_directory_keeps_its_owner(tmp_path: Path) -> None:
    """pgdyno gives the server user the archive directory it makes, and never changes the
    owner or mode of one that was there: one the server user can write to is used as it
    is, one it cannot is refused in one line that says how to open it."""
    from pgdyno.targets.osuser import server_user, writable_by

    user = server_user()
    if user.is_current:
        pytest.skip("needs root, with the server user apart from it")
    root = make_shared_dir("pgdyno-archdir-")
    try:
        made = root / "new" / "arch"
        archive.prepare(archive.ArchiveSpec("buffered", made), user)
        assert made.stat().st_uid == user.uid and writable_by(made, user)

        theirs = root / "theirs"
        theirs.mkdir(mode=0o755)
        os.chown(theirs, 0, 0)
        before = theirs.stat()
        assert not writable_by(theirs, user)
        with pytest.raises(UsageError, match=rf"--archive-dir {theirs}: the server user "
                                             rf"{user.name} cannot write to it.*chown"):
            archive.prepare(archive.ArchiveSpec("buffered", theirs), user)
        after = theirs.stat()
        assert (after.st_uid, after.st_gid, after.st_mode) == (before.st_uid, before.st_gid,
                                                               before.st_mode)
        assert list(theirs.iterdir()) == []

        shared = root / "shared"
        shared.mkdir()
        shared.chmod(0o1777)  # open to everyone, as /tmp is
        assert writable_by(shared, user)
        archive.prepare(archive.ArchiveSpec("buffered", shared), user)
        assert shared.stat().st_uid == 0 and (shared / archive.LOG_NAME).exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)
