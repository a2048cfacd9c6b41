"""The documentation: the site builds with ``mkdocs build --strict`` (a broken link or
anchor, a page left out of the navigation, a reference page the code no longer builds, all
fail it), the README stays short and keeps the test command, and no page, example or help
text names a planning document instead of saying what a thing does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_COMMAND = "bash setup.sh && .venv/bin/pytest"
README_MAX_LINES = 150
PLANNING = re.compile(r"seeds? ?[0-9]{3}|issue ?#?[0-9]+", re.IGNORECASE)
"""A reference to a planning document (the word "seed" or "issue" and its number) that
readers do not have."""


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d",
         str(site)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = mkdocs_build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _text(html_file: Path) -> str:
    return re.sub(r"<[^>]+>", " ", html_file.read_text())


def test_site_builds_strict_with_the_generated_reference(site: Path) -> None:
    from pgdyno.runner.options import all_options
    from pgdyno.workloads import registry

    commands = _text(site / "reference" / "commands" / "index.html")
    for command in ("pgdyno bench", "pgdyno compare", "pgdyno provision apply",
                    "pgdyno fleet run", "pgdyno tune"):
        assert command in commands
    options = _text(site / "reference" / "bench-options" / "index.html")
    for opt in all_options():
        assert opt.cli_flag in options, opt.cli_flag
    for name in registry.names():
        assert name in options
    run_dir = _text(site / "reference" / "run-directory" / "index.html")
    for key in ("schema_version", "started_at", "interval_tps", "percentiles_ms", "records"):
        assert key in run_dir
    campaign = _text(site / "reference" / "campaign-file" / "index.html")
    for key in ("repeat", "workloads", "candidate", "cache_states", "per_core"):
        assert key in campaign
    tprocc = _text(site / "workloads" / "tprocc" / "index.html")
    assert "--warehouses" in tprocc and "nopm" in tprocc and "pgdyno:" not in tprocc
    assert (site / "results" / "index.html").exists()


def test_a_broken_link_or_a_page_outside_the_nav_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    (docs / "index.md").write_text((docs / "index.md").read_text()
                                   + "\n[gone](guides/no-such-page.md)\n")
    (docs / "stray.md").write_text("# A page nobody links to\n")
    config = (ROOT / "mkdocs.yml").read_text()
    config = config.replace("docs_dir: docs", f"docs_dir: {docs}")
    config = config.replace("  - docs/hooks.py", f"  - {ROOT / 'docs' / 'hooks.py'}")
    (tmp_path / "mkdocs.yml").write_text(config)
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr and "stray.md" in done.stderr


def test_readme_is_short_and_holds_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    assert TEST_COMMAND in readme
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to {target}, which is missing"


def test_no_planning_document_references(site: Path) -> None:
    """README, the written pages, the generated reference (which holds every command's and
    option's help), the measured results and the examples."""
    files = [ROOT / "README.md", ROOT / "bench" / "RESULTS.md",
             *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").iterdir()),
             *sorted(site.rglob("*.html"))]
    found = [f"{path.relative_to(path.anchor)}: {match[0]!r}" for path in files
             if path.is_file() for match in [PLANNING.search(path.read_text())] if match]
    assert not found, found
