"""The lock (requirements/*.lock, made by scripts/lock.sh): it holds the whole closure of pyproject.toml's
dependencies at versions that satisfy them, nothing more, and this environment is what it says.
A dependency added, removed or re-ranged in pyproject.toml without relocking fails here."""

from __future__ import annotations

import copy
import tomllib

import pytest

from tests.support.localstack import REPO_ROOT
from tests.support.lockfile import declared, installed_mismatches, lock_problems, read_lock, read_requirements

PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
PINS = read_requirements((REPO_ROOT / "requirements" / "pins.in").read_text())
DEV_LOCK = read_lock((REPO_ROOT / "requirements" / "dev.lock").read_text())
DEPLOY_LOCK = read_lock((REPO_ROOT / "requirements" / "deploy.lock").read_text())
# The image's extras (deploy/Dockerfile); the image's lock leaves pip out (scripts/lock.sh).
DEPLOY_EXTRAS = ("flower", "openvino", "ctranslate2", "multilingual", "tracing", "static", "gateway")


def test_the_dev_lock_is_the_whole_closure_of_pyproject_and_the_pins():
    """Every dependency and extra of pyproject.toml, torch's CPU build, setuptools and pip, and all they
    require, each at one version that satisfies every range asked of it; nothing else."""
    assert lock_problems(declared(PROJECT) + PINS, DEV_LOCK) == []


def test_the_deploy_lock_is_the_images_closure_at_the_dev_locks_versions():
    """The image's lock holds what the image's extras need, at exactly the versions the suite tests."""
    assert lock_problems(declared(PROJECT, DEPLOY_EXTRAS) + PINS, DEPLOY_LOCK, unlisted=["pip"]) == []
    assert {name: version for name, version in DEPLOY_LOCK.items() if DEV_LOCK.get(name) != version} == {}


def test_this_environment_holds_the_lock():
    """scripts/setup.sh installed every locked package at its locked version (torch 2.13.0+cpu too)."""
    assert installed_mismatches(DEV_LOCK) == []
    assert str(DEV_LOCK["torch"]) == "2.13.0+cpu"


def edited(section: str, change) -> dict:
    project = copy.deepcopy(PROJECT)
    target = project["dependencies"] if section == "base" else project["optional-dependencies"][section]
    change(target)
    return project


@pytest.mark.parametrize(
    ("section", "change", "problem"),
    [
        ("base", lambda deps: deps.append("leftpad>=1"), "asks for leftpad>=1, which the lock does not hold"),
        (
            "base",
            lambda deps: deps.__setitem__(deps.index("redis>=5"), "redis>=99"),
            "asks for redis>=99, the lock holds redis==",
        ),
        ("dev", lambda deps: deps.remove("honcho>=2"), "the lock holds honcho, which nothing asks for"),
    ],
    ids=["added", "re-ranged", "removed"],
)
def test_a_dependency_changed_without_relocking_is_found(section, change, problem):
    """The check above fails, saying to relock, on each way pyproject.toml can drift from the lock."""
    problems = lock_problems(declared(edited(section, change)) + PINS, DEV_LOCK)
    assert any(problem in line and "scripts/lock.sh" in line for line in problems), problems
