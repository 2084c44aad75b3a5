"""Commit subjects stay short (issue 61, item 5): at most 72 characters, the detail in the body. Checked
from the first commit that kept the rule; older history is what it is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The last commit before the rule held for every commit (stop 68's last).
RULE_SINCE = "9521f85"
MOST_CHARACTERS = 72


def subjects_since(revision: str) -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    known = subprocess.run(["git", "cat-file", "-e", f"{revision}^{{commit}}"], cwd=REPO, capture_output=True)
    if known.returncode != 0:
        pytest.skip(f"{revision} is not in this clone's history (a shallow clone)")
    done = subprocess.run(["git", "log", "--format=%s", f"{revision}..HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.splitlines()


def test_every_commit_subject_since_the_rule_is_at_most_72_characters():
    long = [subject for subject in subjects_since(RULE_SINCE) if len(subject) > MOST_CHARACTERS]
    assert long == [], f"subjects over {MOST_CHARACTERS} characters (put the detail in the body): {long}"
