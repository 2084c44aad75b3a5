"""The package's shape: no import cycle, and the producer-safe top level never reaches worker code.

Imports inside functions count: a lazy import only hides a cycle until someone calls the
function at import time. Imports under `if TYPE_CHECKING:` do not run and are skipped.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "inference_tasks"
# The top level a producer (Rails-side Python, Flower, a Django app) imports: it must never pull in
# the worker's lifecycle, the batching hot path, training or the operator tools. Every module at the
# top level, and every module of config/, gateway/ (the HTTP gateway holds no model) and integrations/
# (framework adapters in a producer's process) is on the producer side, with no exemption: one that
# imports worker code belongs under worker/.
PRODUCER_SAFE = (
    "inference_tasks",
    *sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"),
    *(
        name
        for folder in ("config", "gateway", "integrations")
        for name in (
            folder,
            *sorted(f"{folder}.{path.stem}" for path in (PACKAGE / folder).glob("*.py") if path.stem != "__init__"),
        )
    ),
)
WORKER_ONLY = ("inference_tasks.worker", "inference_tasks.ml", "inference_tasks.ops")
# The app registers Flower's option check in every process (it acts only where Flower runs), so
# this one ops module, stdlib-only, is on the producer side.
PRODUCER_SIDE_OPS = {"inference_tasks.ops", "inference_tasks.ops.flower_guard"}
# worker/'s layers, lowest first: a module imports from its own layer and the layers before it, never
# from a later one (TYPE_CHECKING imports included). worker/__init__.py says what each layer holds.
WORKER_LAYERS = ("host", "runtimes", "cache", "kinds", "lifecycle", "celery_ext", "batching", "tasks")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def _skips_type_checking(tree: ast.AST) -> list[ast.AST]:
    nodes: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            nodes.extend(ast.walk(node))
    return nodes


def imports_of(name: str, path: Path, known: set[str], type_checking: bool = False) -> set[str]:
    """Modules of this package that `name` imports, at module level or inside functions; with
    `type_checking`, also those imported under `if TYPE_CHECKING:` (for annotations only)."""
    tree = ast.parse(path.read_text())
    skipped = set() if type_checking else {id(node) for node in _skips_type_checking(tree)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):  # some names are attributes of node.module itself
                found.add(node.module)
    return {target for target in found if target in known and target != name}


def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    """A fresh copy (tests plant edges in theirs) of the graph parsed once per run: parsing every module
    for each of the parametrized checks was most of the unit tier's time."""
    return {name: set(targets) for name, targets in _parsed_graph(type_checking).items()}


@functools.cache
def _parsed_graph(type_checking: bool) -> dict[str, frozenset[str]]:
    found = modules()
    return {name: frozenset(imports_of(name, path, set(found), type_checking)) for name, path in found.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that starts and ends at the same module, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_package_has_no_import_cycle() -> None:
    """Not even through imports made for annotations only: a module two others need for their types
    lives below both (worker/runtimes/capabilities.py, config/checks.py reading values, not Settings)."""
    assert find_cycle(import_graph(type_checking=True)) is None


def layer_of(module: str) -> int | None:
    """The index of `module`'s layer in WORKER_LAYERS, or None outside worker/'s layers."""
    parts = module.split(".")
    if parts[:2] != ["inference_tasks", "worker"] or len(parts) < 3:
        return None
    return WORKER_LAYERS.index(parts[2])


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a worker layer into a later one."""
    found = []
    for name, targets in sorted(graph.items()):
        if (own := layer_of(name)) is None:
            continue
        for target in sorted(targets):
            if (theirs := layer_of(target)) is not None and theirs > own:
                found.append(f"{name} ({WORKER_LAYERS[own]}) imports {target} ({WORKER_LAYERS[theirs]})")
    return found


def test_worker_modules_all_live_in_a_layer() -> None:
    """worker/ holds its __init__ and the layer packages only, and every layer exists."""
    loose = sorted(path.name for path in (PACKAGE / "worker").glob("*.py") if path.name != "__init__.py")
    folders = sorted(path.name for path in (PACKAGE / "worker").iterdir() if (path / "__init__.py").exists())
    assert loose == [] and folders == sorted(WORKER_LAYERS)


def test_no_worker_layer_imports_a_later_one() -> None:
    assert layer_violations(import_graph(type_checking=True)) == []


def test_the_layer_check_finds_a_planted_upward_import() -> None:
    graph = import_graph(type_checking=True)
    graph["inference_tasks.worker.host.threads"] = {"inference_tasks.worker.tasks.steps"}
    assert layer_violations(graph) == [
        "inference_tasks.worker.host.threads (host) imports inference_tasks.worker.tasks.steps (tasks)"
    ]


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = import_graph()
    graph["inference_tasks.config.defaults"] = {
        *graph["inference_tasks.config.defaults"],
        "inference_tasks.worker.kinds.model_holder",
    }
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]


@pytest.mark.parametrize("top", PRODUCER_SAFE)
def test_producer_side_modules_reach_no_worker_code(top: str) -> None:
    name = top if top == "inference_tasks" else f"inference_tasks.{top}"
    graph = import_graph()
    leaked = sorted(
        module
        for module in reachable(graph, name)
        if module.startswith(WORKER_ONLY) and module not in PRODUCER_SIDE_OPS
    )
    assert leaked == [], f"{name} imports worker-side modules: {leaked}"


def test_every_top_level_module_is_checked_as_producer_side() -> None:
    """The list above is the directory: a new top-level module is covered without editing this test."""
    assert {"app", "config", "config.catalogue", "routing", "validation", "codec", "producer"} <= set(PRODUCER_SAFE)
    assert {"gateway.app", "integrations.langchain", "integrations.llama_index"} <= set(PRODUCER_SAFE)
    assert "tasks" not in PRODUCER_SAFE  # the task bodies import worker code: worker/tasks/embedding.py


def test_producer_side_redis_helpers_import_no_broker_or_worker_code() -> None:
    """redis_access/ is what producers use of Redis: it reaches neither the transport nor any worker code."""
    graph = import_graph()
    clients = [name for name in graph if name.startswith("inference_tasks.redis_access")]
    assert len(clients) >= 4
    for name in clients:
        leaked = sorted(m for m in reachable(graph, name) if m.startswith((*WORKER_ONLY, "inference_tasks.broker")))
        assert leaked == [], f"{name} imports {leaked}"


def test_test_and_benchmark_helpers_are_not_shipped() -> None:
    names = set(modules())
    assert not {"inference_tasks.localstack", "inference_tasks.wire"} & names


# Module-level assignments that hold no state: loggers, compiled patterns, frozen sets, paths, and the
# task specs (frozen dataclasses of frozen dataclasses: a description, read-only).
STATELESS_CALLS = {"getLogger", "compile", "frozenset", "Path", "bytes", "list", "create_app", "_env_kinds", "TaskSpec"}


def module_state(name: str, source: str) -> list[str]:
    """Module-level assignments in module `name` that could hold mutable state: an instance built at
    import, or a name annotated without a literal value (filled in later)."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
            call = node.value.func
            called = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
            if called not in STATELESS_CALLS:
                found.append(f"{name}: {ast.unparse(node)}")
        elif isinstance(node, ast.AnnAssign) and (node.value is None or ast.unparse(node.value) == "None"):
            found.append(f"{name}: {ast.unparse(node)}")
    return found


def test_worker_state_lives_only_in_the_worker_context() -> None:
    """No module builds worker state at import (a model holder, shared memory, a budget): the one
    worker context (worker/lifecycle/context.py) is the only module-level slot for it."""
    state = [line for name, path in sorted(modules().items()) for line in module_state(name, path.read_text())]
    assert state == ["inference_tasks.worker.lifecycle.context: _current: WorkerContext | None = None"]


def test_the_state_finder_finds_an_instance_built_at_import() -> None:
    """A module that builds a holder or leaves a slot for a budget at import is reported; a logger is not."""
    source = "import logging\nlogger = logging.getLogger(__name__)\nHOLDER = ModelHolder()\nBUDGET: int | None = None\n"
    assert module_state("planted", source) == ["planted: HOLDER = ModelHolder()", "planted: BUDGET: int | None = None"]


BENCHMARKS = PACKAGE.parent / "benchmarks"


def benchmark_sources() -> list[Path]:
    """benchmarks/' own Python files: not those of a peer's venv (benchmarks/peers/.venv-infinity)."""
    return [path for path in BENCHMARKS.rglob("*.py") if not any(part.startswith(".") for part in path.parts)]


def benchmark_import_graph() -> dict[str, set[str]]:
    """benchmarks' modules and the benchmarks modules each imports (lazy imports included)."""
    found = {}
    for path in benchmark_sources():
        parts = path.relative_to(BENCHMARKS.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def test_benchmarks_are_a_harness_library_and_scripts_with_no_import_cycle() -> None:
    """Scripts import the harness, the harness imports no script, nothing edits sys.path (scripts run
    as `python -m benchmarks.<name>` from the repository root)."""
    graph = benchmark_import_graph()
    assert find_cycle(graph) is None
    harness = {name for name in graph if name.startswith("benchmarks.harness")}
    assert not {target for name in harness for target in graph[name]} - harness
    assert [path.name for path in benchmark_sources() if "sys.path" in path.read_text()] == []


# Small modules with one job: a module over this many lines has two (split it, don't raise this).
MOST_MODULE_LINES = 300
MOST_FUNCTION_LINES = 60
# Functions allowed past the bound, each with why.
LONG_FUNCTIONS = {
    "inference_tasks.app.celery_conf": "one dict literal: every Celery setting we set, each with its why",
}


def test_no_module_over_300_lines_and_no_function_over_60() -> None:
    too_long = []
    for name, path in modules().items():
        source = path.read_text()
        if (count := len(source.splitlines())) > MOST_MODULE_LINES:
            too_long.append(f"{name}: {count} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MOST_FUNCTION_LINES and f"{name}.{node.name}" not in LONG_FUNCTIONS:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []


def test_lua_lives_in_lua_files_each_one_used() -> None:
    """The Redis scripts are .lua files (inference_tasks/lua/), each opening with its keys and arguments
    and loaded by name somewhere in the package; no Python module holds Lua in a string."""
    sources = {path: path.read_text() for path in PACKAGE.rglob("*.py")}
    assert [str(path) for path, text in sources.items() if "redis.call(" in text] == []
    for script in sorted((PACKAGE / "lua").glob("*.lua")):
        text = script.read_text()
        assert "KEYS[1]" in text.split("redis.call", 1)[0], f"{script.name}: say its KEYS before the code"
        assert any(f'script("{script.stem}")' in text for text in sources.values()), f"{script.name} unused"
