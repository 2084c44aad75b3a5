"""The task specs (inference_tasks/contract/): binding a call to names, parsing it through each argument's
rule, and the one description holding docs/tasks.md, the Python client and the Ruby client to it."""

from __future__ import annotations

import inspect
import json
import re
import subprocess

import pytest

from inference_tasks import client
from inference_tasks.config import Settings
from inference_tasks.contract import markdown
from inference_tasks.contract.spec import Argument, TaskSpec
from inference_tasks.contract.specs import EMBED, EMBED_CORPUS, RERANK, SPECS
from inference_tasks.routing import EMBED_CHUNKS_TASK, EMBED_SPARSE_TASK, EMBED_TASK, RERANK_TASK
from inference_tasks.validation import InvalidInput
from tests.support.localstack import REPO_ROOT
from tests.support.ruby_runner import GEM_SOURCE, need

SETTINGS = Settings()


def test_a_call_binds_by_position_then_keyword_with_defaults_filled():
    call = EMBED.bind([["a"], False], {"dimensions": 64})
    assert call == {
        "texts": ["a"], "normalize": False, "encoding": "json", "model": None, "prompt_name": None, "prompt": None,
        "dimensions": 64, "truncate": True, "cache": True,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("args", "kwargs", "said"),
    [
        ([["a"], True, "json", "more"], {}, "inference.embed: too many positional arguments; it takes texts, "
         "normalize, encoding (by position or keyword) and model, prompt_name, prompt, dimensions, truncate, cache "
         "(by keyword only)"),
        ([["a"]], {"texts": ["b"]}, "inference.embed: multiple values for argument 'texts'; it takes"),
        ([["a"]], {"normalise": True, "b": 1}, "inference.embed: unknown argument(s) 'b', 'normalise'; accepted: "
         "texts, normalize, encoding, model, prompt_name, prompt, dimensions, truncate, cache"),
    ],
    ids=["too-many", "twice", "unknown"],
)  # fmt: skip
def test_a_call_the_task_cannot_take_fails_naming_what_it_takes(args, kwargs, said):
    with pytest.raises(InvalidInput) as raised:
        EMBED.bind(args, kwargs)
    assert str(raised.value).startswith(said), str(raised.value)


def test_parse_puts_each_value_through_its_rule():
    """Checked values come back (an encoding's old alias as its one name); a bad one fails naming it."""
    assert EMBED.parse([["a"]], {"encoding": "f32le-base64"}, SETTINGS)["encoding"] == "f32-base64"
    assert RERANK.parse(["q", ["d"]], {"top_n": None}, SETTINGS)["top_n"] is None
    with pytest.raises(InvalidInput, match=re.escape("inference.rerank: top_n must be an integer from 1 to")):
        RERANK.parse(["q", ["d"]], {"top_n": 0}, SETTINGS)
    with pytest.raises(InvalidInput, match=re.escape("inference.embed: normalize must be true or false, got a string")):
        EMBED.parse([["a"], "yes"], {}, SETTINGS)
    corpus_encoding = "inference.embed_corpus: encoding must be one of 'json', 'f32-base64'"
    with pytest.raises(InvalidInput, match=re.escape(corpus_encoding)):
        EMBED_CORPUS.parse([], {"source_key": "k", "encoding": "int8"}, SETTINGS)


def test_a_spec_with_a_positional_argument_after_a_keyword_only_one_is_refused():
    rule = EMBED.arguments[0].rule
    with pytest.raises(ValueError, match="by position must come first"):
        TaskSpec("t", (Argument("a", "int", rule, "", positional=False), Argument("b", "int", rule, "")))


def test_docs_tasks_md_holds_the_argument_tables_the_specs_render():
    """docs/tasks.md's argument tables are the specs' own rendering (regenerate with
    `python -m inference_tasks.contract.markdown`); a new argument or default shows up as a difference."""
    page = (REPO_ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    start, end = page.find(markdown.BEGIN), page.find(markdown.END)
    assert start != -1 and end != -1, "docs/tasks.md lost its argument-table markers"
    assert page[start : end + len(markdown.END)] == markdown.tables()


# The Python client's functions: the task each sends, its own parameters that never reach the task.
PYTHON_CLIENT = {
    client.embed: EMBED_TASK,
    client.rerank: RERANK_TASK,
    client.embed_sparse: EMBED_SPARSE_TASK,
    client.embed_chunks: EMBED_CHUNKS_TASK,
}
PYTHON_CLIENT_ONLY = {"app", "timeout", "max_queue_depth", "form"}


@pytest.mark.parametrize("function", PYTHON_CLIENT, ids=lambda function: function.__name__)
def test_the_python_client_offers_every_argument_of_its_task_with_its_default(function):
    """Each blocking call takes exactly its task's arguments (plus its own), and a default it sets itself
    is the task's (None means "the task's default": it is not sent)."""
    spec = SPECS[PYTHON_CLIENT[function]]
    parameters = inspect.signature(function).parameters
    assert set(parameters) - PYTHON_CLIENT_ONLY == set(spec.names)
    for argument in spec.arguments:
        default = parameters[argument.name].default
        if default not in (inspect.Parameter.empty, None):
            assert default == argument.default, f"{function.__name__}({argument.name}={default!r})"


# The Ruby client's enqueue methods: the task each sends, its parameters named differently from the task's
# arguments, and the task's arguments it does not offer (with why).
RUBY_CLIENT = {
    "enqueue_embed": ("inference.embed", {}, set()),
    "enqueue_rerank": ("inference.rerank", {}, set()),
    "enqueue_embed_chunks": ("inference.embed_chunks", {}, set()),
    "enqueue_embed_sparse": ("inference.embed_sparse", {}, set()),
    "enqueue_classify": ("inference.classify", {}, {"classifier", "classifier_version"}),  # enqueue_classify_with
    "enqueue_classify_with": ("inference.classify", {"version": "classifier_version"}, {"labels"}),  # zero-shot: above
    "enqueue_train_classifier": ("inference.train_classifier", {}, set()),
    "enqueue_embed_corpus": ("inference.embed_corpus", {}, {"texts"}),  # a corpus travels in a Redis list
}
RUBY_CLIENT_ONLY = {"options", "queue"}
RUBY_PARAMETERS = """
require "json"
require "inference_tasks/client"
client = InferenceTasks::Client
names = %w[{methods}]
puts JSON.generate(names.to_h {{ |name| [name, client.instance_method(name).parameters.map {{ |_, n| n.to_s }}] }})
"""


def ruby_parameters() -> dict[str, list[str]]:
    """Each enqueue method's parameter names, as Ruby itself reports them (Method#parameters)."""
    script = RUBY_PARAMETERS.format(methods=" ".join(RUBY_CLIENT))
    done = subprocess.run(
        [need("ruby"), "-I", str(GEM_SOURCE / "lib"), "-e", script], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.external
def test_the_ruby_client_offers_every_argument_of_its_task():
    """Each enqueue method takes its task's arguments by their names (or the renames listed here), and a
    task argument it leaves out is listed with why: a new argument in a spec fails here until the Ruby
    client offers it."""
    found = ruby_parameters()
    for method, (task, renamed, left_out) in RUBY_CLIENT.items():
        offered = {renamed.get(name, name) for name in found[method]} - RUBY_CLIENT_ONLY
        assert offered == set(SPECS[task].names) - left_out, method


@pytest.mark.external
def test_the_client_checks_fail_on_a_planted_difference():
    """The comparison above is not vacuous: a spec with one more argument disagrees with the Ruby client."""
    found = ruby_parameters()
    extra = Argument("threshold", "float", EMBED.arguments[1].rule, "", positional=False)
    grown = TaskSpec(EMBED_TASK, (*EMBED.arguments, extra))
    assert set(found["enqueue_embed"]) - RUBY_CLIENT_ONLY != set(grown.names)
