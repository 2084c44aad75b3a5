"""Reading requirements/*.lock and checking it against pyproject.toml: every declared requirement held
at a version that satisfies it, every locked package's own requirements held too, nothing held that
nothing asks for. tests/unit/test_lock.py runs it on the real files and on planted drift."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

# A package line of a uv/pip-tools lock: `name==version \` at the start of a line (hashes follow).
LOCK_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)
# The interpreter the lock is resolved for (scripts/lock.sh's --python-version 3.11 means 3.11.0, so
# a dependency of 3.11.0-3.11.2 only, like redis' async-timeout, is locked too): markers are read so.
LOCK_PYTHON = {"python_version": "3.11", "python_full_version": "3.11.0"}
RELOCK = 'run `bash scripts/lock.sh` (docs/testing.md, "The lock")'


def read_lock(text: str) -> dict[NormalizedName, Version]:
    """Each locked package's normalized name and exact version."""
    return {canonicalize_name(name): Version(version) for name, version in LOCK_LINE.findall(text)}


def read_requirements(text: str) -> list[Requirement]:
    """The requirements of a .in file (one per line, `#` comments)."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line]


def declared(project: Mapping[str, Any], extras: Iterable[str] | None = None) -> list[Requirement]:
    """pyproject.toml's [project] dependencies and those of `extras` (every extra when None)."""
    optional = project.get("optional-dependencies", {})
    names = optional.keys() if extras is None else extras
    texts = list(project.get("dependencies", [])) + [text for name in names for text in optional[name]]
    return [Requirement(text) for text in texts]


def installed_requires(name: str) -> list[Requirement]:
    """The installed distribution's own requirements (its Requires-Dist), markers unevaluated."""
    return [Requirement(text) for text in metadata.distribution(name).requires or ()]


def lock_problems(
    roots: Iterable[Requirement],
    locked: Mapping[NormalizedName, Version],
    requires_of: Callable[[str], list[Requirement]] = installed_requires,
    unlisted: Iterable[str] = (),
) -> list[str]:
    """What is wrong with `locked` as the whole closure of `roots`, each problem saying what to do.

    Walks from the roots through each locked package's requirements (with the extras asked of it);
    `unlisted` names packages the lock leaves out on purpose (the image's lock has no pip).
    """
    problems: list[str] = []
    skipped = {canonicalize_name(name) for name in unlisted}
    reached: set[NormalizedName] = set()
    pending: list[tuple[Requirement, str]] = [(requirement, "pyproject.toml") for requirement in roots]
    seen: set[tuple[NormalizedName, frozenset[str]]] = set()
    while pending:
        requirement, asker = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in skipped:
            continue
        if name not in locked:
            problems.append(f"{asker} asks for {requirement}, which the lock does not hold: {RELOCK}")
            continue
        if not requirement.specifier.contains(locked[name], prereleases=True):
            problems.append(f"{asker} asks for {requirement}, the lock holds {name}=={locked[name]}: {RELOCK}")
        reached.add(name)
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        for dependency in requires_of(name):
            wanted = ["", *sorted(requirement.extras)]
            if dependency.marker is None or any(
                dependency.marker.evaluate({**LOCK_PYTHON, "extra": extra}) for extra in wanted
            ):
                pending.append((dependency, f"{name} {locked[name]}"))
    problems += [f"the lock holds {name}, which nothing asks for: {RELOCK}" for name in sorted(set(locked) - reached)]
    return problems


def installed_mismatches(locked: Mapping[NormalizedName, Version]) -> list[str]:
    """Locked packages whose installed version differs (or that are not installed) in this environment."""
    problems = []
    for name, version in sorted(locked.items()):
        try:
            found = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            problems.append(f"{name} {version} is locked but not installed: run `bash scripts/setup.sh`")
            continue
        if found != version:
            problems.append(f"{name} {found} is installed, the lock holds {version}: run `bash scripts/setup.sh`")
    return problems
