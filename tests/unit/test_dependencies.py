"""Every third-party module the package imports (lazy imports included) comes from a distribution that
pyproject.toml declares, in its base dependencies or an extra: one that only arrives through another
package (vine through kombu) can vanish with that package's next release."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.localstack import REPO_ROOT

PACKAGE = REPO_ROOT / "inference_tasks"


def imported_top_levels(path: Path) -> set[str]:
    """The top-level names of the absolute imports in one module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def declared_distributions() -> set[str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    texts = project["dependencies"] + [text for extra in project["optional-dependencies"].values() for text in extra]
    return {canonicalize_name(Requirement(text).name) for text in texts}


def undeclared_imports(modules: dict[str, set[str]], declared: set[str]) -> dict[str, list[str]]:
    """Third-party top-level name -> the package modules importing it, for names no declared
    distribution provides."""
    providers = metadata.packages_distributions()
    missing: dict[str, list[str]] = {}
    for module, names in sorted(modules.items()):
        for name in sorted(names - set(sys.stdlib_module_names) - {"inference_tasks", "__future__"}):
            if not {canonicalize_name(dist) for dist in providers.get(name, [])} & declared:
                missing.setdefault(name, []).append(module)
    return missing


def package_imports() -> dict[str, set[str]]:
    return {str(path.relative_to(REPO_ROOT)): imported_top_levels(path) for path in PACKAGE.rglob("*.py")}


def test_every_third_party_import_is_a_declared_dependency():
    assert undeclared_imports(package_imports(), declared_distributions()) == {}


def test_an_import_only_a_transitive_dependency_provides_is_found():
    """The check above fails on vine when vine is not declared (kombu brings it, pyproject must too)."""
    declared = declared_distributions() - {"vine"}
    assert "inference_tasks/worker/celery_ext/consumer.py" in undeclared_imports(package_imports(), declared)["vine"]
