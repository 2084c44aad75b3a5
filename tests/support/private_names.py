"""Which private names of Celery, kombu and billiard our package uses, found in its source.

A name counts when our code reads or writes it on an upstream object (`pool._cache`,
`message._raw`), overrides it in a class that extends an upstream class (`Channel._brpop_read`,
mix-ins included), reads it as `self._x` where an upstream base defines it (`self._cycle`), or
imports it from an upstream module. A private name our own package introduces (a method or an
attribute of a class of ours) does not count, nor do the standard library's documented names that
begin with an underscore (`os._exit`, a namedtuple's `_replace`).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import sys
from pathlib import Path

UPSTREAM = ("celery", "kombu", "billiard")
STDLIB_DOCUMENTED = frozenset({"_exit", "_replace", "_asdict", "_fields", "_make"})
_PRIVATE_IDENTIFIER = re.compile(r"\b(_[A-Za-z]\w*)")


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@functools.cache
def upstream_identifiers() -> frozenset[str]:
    """Every private identifier that appears anywhere in the upstream packages' source."""
    names: set[str] = set()
    for top in UPSTREAM:
        root = Path(importlib.import_module(top).__file__ or "").parent
        for path in root.rglob("*.py"):
            names.update(_PRIVATE_IDENTIFIER.findall(path.read_text(errors="ignore")))
    return frozenset(names)


def _upstream_bases(module: str, class_name: str) -> list[type]:
    """Upstream classes this class extends, or that a class of its module mixing it in extends."""
    cls = getattr(importlib.import_module(module), class_name, None)
    if not isinstance(cls, type):
        return []
    users = [other for other in vars(sys.modules[module]).values() if isinstance(other, type) and cls in other.__mro__]
    return [base for user in users for base in user.__mro__ if base.__module__.split(".")[0] in UPSTREAM]


def _identifiers_of(classes: list[type]) -> set[str]:
    names: set[str] = set()
    for cls in classes:
        names.update(_PRIVATE_IDENTIFIER.findall(inspect.getsource(sys.modules[cls.__module__])))
    return names


class _Scan:
    def __init__(self) -> None:
        self.ours: set[str] = set()
        self.uses: dict[str, set[str]] = {}

    def use(self, name: str, where: str) -> None:
        self.uses.setdefault(name, set()).add(where)

    def definitions(self, tree: ast.AST) -> None:
        """Names our code introduces outside classes (methods are judged by `classes`)."""
        methods = {id(node) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) for node in cls.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and is_private(node.name):
                if id(node) not in methods:
                    self.ours.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and is_private(node.id):
                self.ours.add(node.id)
            elif isinstance(node, ast.arg) and is_private(node.arg):
                self.ours.add(node.arg)

    def classes(self, module: str, tree: ast.AST) -> None:
        """Overrides and self-attributes of classes that extend upstream ones; the rest are ours."""
        for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
            upstream = _identifiers_of(_upstream_bases(module, cls.name))
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node in cls.body:
                    name, defines = node.name, True
                elif isinstance(node, ast.Attribute) and getattr(node.value, "id", None) in ("self", "cls"):
                    name, defines = node.attr, isinstance(node.ctx, ast.Store)
                else:
                    continue
                if not is_private(name):
                    continue
                if name in upstream:
                    self.use(name, f"{module}.{cls.name}")
                elif defines:
                    self.ours.add(name)

    def others(self, module: str, tree: ast.AST) -> None:
        """Private names read on other objects, through getattr, or imported from upstream."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) not in ("self", "cls"):
                if is_private(node.attr):
                    self.use(node.attr, module)
            elif (name := _named_by_getattr(node)) is not None:
                self.use(name, module)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UPSTREAM:
                for alias in node.names:
                    if is_private(alias.name):
                        self.use(alias.name, module)


def _named_by_getattr(node: ast.AST) -> str | None:
    """The private name in `getattr(x, "_name", ...)` (or hasattr, setattr), else None."""
    if not isinstance(node, ast.Call) or getattr(node.func, "id", None) not in ("getattr", "hasattr", "setattr"):
        return None
    name = node.args[1] if len(node.args) > 1 else None
    if isinstance(name, ast.Constant) and isinstance(name.value, str) and is_private(name.value):
        return name.value
    return None


def private_upstream_names(package: Path) -> dict[str, set[str]]:
    """Each private upstream name the package at `package` uses, with where (module or class)."""
    scan = _Scan()
    trees = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        trees[module] = ast.parse(path.read_text())
        scan.definitions(trees[module])
    for module, tree in trees.items():
        scan.classes(module, tree)
    for module, tree in trees.items():
        scan.others(module, tree)
    return {
        name: places
        for name, places in scan.uses.items()
        if name in upstream_identifiers() and name not in STDLIB_DOCUMENTED and name not in scan.ours
    }
