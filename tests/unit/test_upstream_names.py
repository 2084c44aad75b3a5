"""Every private Celery, kombu or billiard name our package uses is listed, with its reason, in
docs/upstream.md ("Private names we use"), and the list holds no name we no longer use."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.private_names import private_upstream_names

REPO = Path(__file__).resolve().parents[2]
UPSTREAM_DOC = REPO / "docs" / "upstream.md"
SECTION = "## Private names we use"
# The most distinct private upstream names the package may use (the house issue's bound of 15): a
# new one means giving up another, or a case for raising this in review. 16 since broker/wakeup.py
# reads redis-py's `Connection._sock` (kombu reads the same attribute, so the scan counts it):
# docs/upstream.md, "Waking an idle consumer". 17 since broker/bindings.py names priority lists in
# `_q_for_pri`: stock Celery clients need kombu's table separator while our lists keep "inference:3"
# (kombu names both with one `sep`; docs/upstream.md, the bindings row).
MOST_PRIVATE_NAMES = 17


def documented_names(markdown: str) -> set[str]:
    """The names in the first column of the section's table."""
    section = markdown.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return {match for line in section.splitlines() for match in re.findall(r"^\| `(_\w+)` \|", line)}


def test_every_private_upstream_name_we_use_is_documented_and_no_other() -> None:
    """The scan of the package and the table in docs/upstream.md name the same private names."""
    used = private_upstream_names(REPO / "inference_tasks")
    documented = documented_names(UPSTREAM_DOC.read_text())
    assert {name: sorted(places) for name, places in used.items() if name not in documented} == {}
    assert documented - set(used) == set(), "listed in docs/upstream.md but no longer used: remove the rows"


def test_the_package_uses_at_most_seventeen_private_upstream_names() -> None:
    used = private_upstream_names(REPO / "inference_tasks")
    assert len(used) <= MOST_PRIVATE_NAMES, sorted(used)


def test_the_scan_finds_a_private_name_read_overridden_or_imported(tmp_path: Path) -> None:
    """Reading `pool._cache`, overriding kombu's `Channel._get`, and `getattr(x, "_busy_workers")` are
    found; a private name of our own, and os._exit, are not."""
    package = tmp_path / "planted_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(
        "import os\n"
        "from kombu.transport import redis\n"
        "class Channel(redis.Channel):\n"
        "    def _get(self, queue, timeout=None):\n"
        "        return self._own_helper()\n"
        "    def _own_helper(self):\n"
        "        return None\n"
        "def jobs(pool):\n"
        "    os._exit(0)\n"
        "    return pool._cache, getattr(pool, '_busy_workers', None)\n"
    )
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        found = private_upstream_names(package)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name.startswith("planted_pkg")]:
            del sys.modules[name]
    assert {name: sorted(places) for name, places in found.items()} == {
        "_get": ["planted_pkg.mod.Channel"],
        "_cache": ["planted_pkg.mod"],
        "_busy_workers": ["planted_pkg.mod"],
    }


def test_the_doc_check_fails_when_a_used_name_has_no_row() -> None:
    """A table without one of the names in use is caught."""
    markdown = f"{SECTION}\n\n| name | why |\n|---|---|\n| `_cache` | billiard's jobs |\n\n## Next\n| `_get` | x |\n"
    assert documented_names(markdown) == {"_cache"}
