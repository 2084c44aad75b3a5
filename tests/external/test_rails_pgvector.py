"""deploy/rails in a real Rails app (Debian's Rails 6.1 and ruby-pg, the gem as built and installed, a real Sidekiq
process as ActiveJob's adapter) on a real PostgreSQL 16 with pgvector 0.6.2 (the pgserver wheel's binaries, on a
private port, removed after), against the real worker: the shipped migration, model, job and backfill, end to end.

The tests share one database and run in file order: articles saved (embedded through replies) and searched,
a failed embed, a backfill killed and run again over rows that predate the column, a model change.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from inference_tasks.config.catalogue import BUILTIN_DEFAULT
from inference_tasks.worker.cache.identity import model_digest
from inference_tasks.worker.runtimes.model_files import resolve_model_path
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.postgres import Postgres, running_postgres
from tests.support.programs import missing
from tests.support.ruby_runner import RUBY_DIR, need
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RAILS_ENV = RUBY_DIR.parent / "rails_app" / "config" / "environment.rb"
SCRIPT = RUBY_DIR / "rails_pgvector.rb"
REPLY_TIMEOUT_S = 180
ARTICLES = 200
BACKFILLED = 96
DATA = REPO_ROOT / "data"
# Every store counted by the database, not by log lines: a row whose mark is cleared as its vector is written.
STORES_TRIGGER = """
CREATE TABLE embedding_stores (article_id bigint, task_id text, title text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION count_store() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO embedding_stores (article_id, task_id, title) VALUES (NEW.id, OLD.embedding_task_id, NEW.title);
RETURN NEW; END $$;
CREATE TRIGGER count_store AFTER UPDATE ON articles FOR EACH ROW
WHEN (OLD.embedding_task_id IS NOT NULL AND NEW.embedding_task_id IS NULL AND NEW.embedding IS NOT NULL)
EXECUTE FUNCTION count_store();
"""
IDENTITY_ALIAS = BUILTIN_DEFAULT  # the default model's catalogue alias, as results name it


def need_rails_on_postgres() -> None:
    """Rails, ActiveRecord and ruby-pg for Ruby, from Debian (scripts/setup.sh installs them)."""
    need("ruby")
    loads = 'require "rails"; require "active_record"; require "pg"'
    check = subprocess.run(["ruby", "-e", loads], capture_output=True)
    if check.returncode != 0:
        missing("Rails on PostgreSQL for Ruby is missing (apt-get install ruby-railties ruby-activerecord ruby-pg)")


def tickets() -> list[str]:
    return [json.loads(line)["text"] for line in (DATA / "support_tickets.jsonl").read_text().splitlines()]


def paraphrase_queries() -> list[dict]:
    rows = [json.loads(line) for line in (DATA / "hybrid_queries.jsonl").read_text().splitlines()]
    return [row for row in rows if row["kind"] == "paraphrase"]


def relevant(title: str, query: dict) -> bool:
    return any(phrase.lower() in title.lower() for phrase in query["relevant_if_contains"])


def article_titles() -> list[str]:
    """200 tickets: every one a paraphrase query is after, then others in file order."""
    all_tickets, queries = tickets(), paraphrase_queries()
    wanted = [title for title in all_tickets if any(relevant(title, query) for query in queries)]
    rest = [title for title in all_tickets if title not in wanted]
    return (wanted + rest)[:ARTICLES]


@dataclass
class RailsApp:
    postgres: Postgres
    env: dict[str, str]
    log: Path
    sidekiq: subprocess.Popen
    last_output: str = ""  # what the last `run` printed: the backfill's log lines

    def run(self, command: str, payload: dict | None = None, **env: str) -> dict:
        done = subprocess.run(
            [need("ruby"), str(SCRIPT), command, json.dumps(payload or {})], env=clean_env(**self.env, **env),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        self.last_output = done.stdout
        return json.loads(done.stdout.strip().splitlines()[-1])

    def sql(self, query: str) -> list[list[str]]:
        assert self.sidekiq.poll() is None, self.log.read_text()[-3000:]
        return self.postgres.psql(query, "app")

    def stores(self, ids: list[int] | None = None) -> Counter[int]:
        """How many times each article's vector was stored, counted by the database (STORES_TRIGGER)."""
        where = f" WHERE article_id IN ({','.join(map(str, ids))})" if ids else ""
        rows = self.sql(f"SELECT article_id, count(*) FROM embedding_stores{where} GROUP BY article_id")
        return Counter({int(article): int(count) for article, count in rows})

    def verify(self, ids: list[int]) -> dict[int, dict]:
        """Per row: stores counted by the database, whether it holds a vector, its mark, and the cosine of its
        vector to the worker's embedding of its current title (None for no vector or a refused title)."""
        return {int(article): row for article, row in self.run("verify", {"ids": ids}).items()}

    def wait_for_vectors(self, ids: list[int], what: str) -> None:
        listed = ",".join(map(str, ids))
        query = (f"SELECT count(*) FROM articles WHERE id IN ({listed}) AND embedding_task_id IS NULL"
                 " AND embedding IS NOT NULL")  # fmt: skip
        wait_until(lambda: int(self.sql(query)[0][0]) == len(ids), REPLY_TIMEOUT_S, what,
                   details=lambda: self.log.read_text()[-3000:])  # fmt: skip


@pytest.fixture(scope="module")
def rails_app(inference_worker, installed_gem, tmp_path_factory) -> Iterator[RailsApp]:
    """The Rails app on a fresh PostgreSQL database, the shipped migration run, and a Sidekiq process
    performing its ActiveJob replies."""
    need_rails_on_postgres()
    workdir = tmp_path_factory.mktemp("rails-pgvector")
    log = workdir / "rails.log"
    with running_postgres() as postgres:
        postgres.psql("CREATE DATABASE app")
        env = {"DATABASE_URL": postgres.url("app"), "RAILS_LOG": str(log), "REDIS_URL": inference_worker.redis_url,
               **installed_gem}  # fmt: skip
        sidekiq_log = workdir / "sidekiq.log"
        with open(sidekiq_log, "wb") as output:
            sidekiq = subprocess.Popen(
                [need("sidekiq"), "-r", str(RAILS_ENV), "-q", "default", "-c", "4"],
                env=clean_env(**env), stdout=output, stderr=subprocess.STDOUT,
            )  # fmt: skip
        app = RailsApp(postgres, env, log, sidekiq)
        try:
            columns = app.run("setup")["columns"]
            assert columns["embedding"] == "vector(384)", columns
            postgres.psql(STORES_TRIGGER, "app")
            yield app
        finally:
            sidekiq.terminate()
            sidekiq.wait(timeout=30)


def test_articles_saved_in_rails_are_embedded_through_replies_and_found_by_meaning(rails_app):
    """200 articles saved: each after_commit pushes an embed with an ActiveJob reply, Sidekiq performs
    EmbeddingReadyJob, every row holds a unit 384-float vector and the identity of the model that made it
    (alias@revision, the revision a digest of the model's files). Article.semantic_search (one blocking
    embed, `<=>` on the HNSW index) puts a relevant ticket first for the paraphrase queries as often as an
    exact cosine ranking of the same vectors does (hit@1 printed), and the query's plan can use the index."""
    titles = article_titles()
    created = rails_app.run("create", {"titles": titles})
    ids = created["ids"]
    rails_app.wait_for_vectors(ids, "200 articles' embeddings")
    rows = rails_app.sql("SELECT id, title, embedding_model, embedding::text, vector_norm(embedding), "
                         "extract(epoch from updated_at) FROM articles ORDER BY id")  # fmt: skip
    revision = model_digest(Path(resolve_model_path("all-MiniLM-L6-v2")))[:12]
    assert {row[2] for row in rows} == {f"{IDENTITY_ALIAS}@{revision}"}
    assert all(abs(float(row[4]) - 1.0) < 1e-4 for row in rows)
    assert rails_app.stores(ids) == Counter(ids)
    log = rails_app.log.read_text()
    assert log.count("Performed EmbeddingReadyJob") >= ARTICLES and "from Sidekiq(default)" in log

    queries = paraphrase_queries()
    answer = rails_app.run("search", {"queries": [query["query"] for query in queries], "limit": 5})
    assert "index_articles_on_embedding_cosine" in answer["plan"], answer["plan"]
    title_of = {int(row[0]): row[1] for row in rows}
    hit_at_1 = {}
    for how in ("index", "exact"):
        for found in answer[how]:
            distances = [distance for _, distance in found]
            assert len(found) == 5 and distances == sorted(distances), found
        hits = [relevant(title_of[found[0][0]], query) for query, found in zip(queries, answer[how], strict=True)]
        hit_at_1[how] = sum(hits) / len(queries)
    done = max(float(row[5]) for row in rows)
    took = done - min(created["created_at"])
    print(f"\n[rails pgvector] {ARTICLES} articles saved -> all vectors in rows: {took:.2f} s;"
          f" paraphrase hit@1 {hit_at_1['index']:.3f} on the HNSW index, {hit_at_1['exact']:.3f} exact"
          f" ({len(queries)} queries)")  # fmt: skip
    # 0.80 with torch here; a runtime another host picks (int8, bf16) may flip a close call, never ten of them.
    assert hit_at_1["index"] >= hit_at_1["exact"] - 1 / len(queries) and hit_at_1["index"] >= 0.7


LONG_TITLE = "refund " * 2858  # 20,006 characters: over the worker's 20,000 per text
NBSP_TITLE = "\u00a0\u00a0\u2003"  # blank to the worker (Python's str.strip), not to Ruby's String#strip


def same_text(row: dict) -> bool:
    """The row's vector is the worker's embedding of its current title (cosine to it ~1; another title's is < 0.95)."""
    return row["cosine"] is not None and row["cosine"] > 0.999


def test_a_refused_title_clears_the_old_vector_and_logs_why(rails_app):
    """Two embedded articles edited to titles the worker refuses: one of only non-breaking spaces, refused in the
    gem by the worker's own blank rule before anything is pushed; one over the worker's text limit, refused by the
    worker, whose reply clears the row. Neither keeps its old title's vector, and the log names the row, the task
    and the reason."""
    ids = rails_app.run("create", {"titles": ["Refund my order", "The app crashes at login"]})["ids"]
    rails_app.wait_for_vectors(ids, "two articles' embeddings")
    blank, long = ids
    marks = rails_app.run("edit", {"titles": {str(blank): NBSP_TITLE, str(long): LONG_TITLE}})["marks"]
    assert marks[str(blank)] is None, marks  # refused in the gem: no mark, nothing pushed
    refused = f"articles: task {marks[str(long)]} refused {long}: "
    wait_until(lambda: refused in rails_app.log.read_text(), REPLY_TIMEOUT_S, "the worker's refusal, settled")
    log = rails_app.log.read_text()
    assert f"articles: not embedding {blank}: its text is empty or blank; its vector is cleared" in log
    assert "has 20006 characters, more than the limit of 20000" in log.split(refused)[1].splitlines()[0]
    assert f"cleared: {long}" in log.split(refused)[1].splitlines()[0]
    rows = rails_app.verify(ids)
    assert [(rows[i]["vector"], rows[i]["task"]) for i in ids] == [(False, None), (False, None)], rows
    assert rails_app.stores(ids) == Counter(ids)  # the first titles' stores only


def test_a_reply_faster_than_the_commit_is_stored(rails_app):
    """A client standing in for the queue settles each reply on another connection before its push returns: a
    new article and an edited one each end with their current title's vector, stored once. The push came after
    the mark's transaction committed (no transaction was open on the pushing connection)."""
    (edited,) = rails_app.run("create", {"titles": ["The checkout page is blank"]})["ids"]
    rails_app.wait_for_vectors([edited], "the article to edit")
    before = rails_app.stores([edited])
    answer = rails_app.run("instant", {"title": "Where is my parcel?", "edit_id": edited,
                                       "edit_title": "How do I change my billing address?"})  # fmt: skip
    ids = [answer["created"], edited]
    assert [push["transaction_open"] for push in answer["pushes"]] == [False, False], answer
    assert [push["stored"] for push in answer["pushes"]] == [[ids[0]], [ids[1]]], answer
    rows = rails_app.verify(ids)
    assert all(same_text(rows[i]) for i in ids), rows
    assert rails_app.stores(ids) - before == Counter(ids)


def test_a_late_reply_waits_for_an_open_edit_and_is_superseded(rails_app):
    """A reply for an article's first title arrives while an edit's transaction holds the row (forced: the reply
    is seen waiting on the row lock before the edit commits). Once the edit commits, the late reply finds the new
    mark and stores nothing; the edit's own reply stores the new title's vector, once."""
    answer = rails_app.run("late", {"old": "My card was charged twice", "new": "Please delete my account"})
    article = answer["id"]
    assert answer["late"]["stored"] == [] and answer["late"]["superseded"] == [article], answer
    row = rails_app.verify([article])[article]
    assert same_text(row) and row["stores"] == 1, row


def test_one_reply_twice_and_two_copies_at_once_store_once(rails_app):
    """One reply settled twice stores once; two copies of another settled at once (the second seen waiting on
    the first's row lock) store once. Counted by the database."""
    answer = rails_app.run("twice", {"titles": ["Invoice is missing", "Password reset email never came"]})
    first, second = answer["ids"]
    assert [done["stored"] for done in answer["sequential"]] == [[first], []], answer
    assert [done["stored"] for done in answer["concurrent"]] == [[second], []], answer
    rows = rails_app.verify([first, second])
    assert all(same_text(row) and row["stores"] == 1 for row in rows.values()), rows


def insert_unembedded(rails_app: RailsApp, titles: list[str]) -> list[int]:
    """Rows as they were before the embedding column: inserted in SQL, so no after_commit asks for them."""
    values = ",".join("('" + title.replace("'", "''") + "', now(), now())" for title in titles)
    rows = rails_app.sql(f"INSERT INTO articles (title, created_at, updated_at) VALUES {values} RETURNING id")
    return [int(row[0]) for row in rows]


def test_an_edit_during_a_full_queue_wait_keeps_its_own_text(rails_app):
    """A backfill's push of a batch meets a full queue just as one of the batch's rows is edited (its own request
    pushed through the real queue). The backfill claims the batch again, reading the texts anew: the edited row,
    now waiting on its own request, drops out, and ends with its new title's vector, stored once; the others too."""
    ids = insert_unembedded(rails_app, [f"{title} (edit race)" for title in tickets()[100:108]])
    edited = ids[5]
    report = rails_app.run("backfill", {"batch_size": 4, "edit": {"id": edited, "title": "I want to cancel my plan"}})
    assert report["waits"] == 1 and report["enqueued"] == len(ids) - 1, report
    rails_app.wait_for_vectors(ids, "the batch's embeddings")
    rows = rails_app.verify(ids)
    assert all(same_text(rows[i]) and rows[i]["stores"] == 1 for i in ids), rows
    assert rails_app.sql(f"SELECT title FROM articles WHERE id = {edited}") == [["I want to cancel my plan"]]


def test_a_batch_the_worker_refuses_costs_only_the_bad_row(rails_app):
    """A batch pushed with one text over the worker's limit (unscreened, as a gem that did not know the limit
    would) fails whole; its reply asks for the rows again one per task: the good rows are stored once with their
    own titles' vectors, the bad one is cleared and the log names it and why."""
    ids = insert_unembedded(rails_app, ["Shipping was slow", LONG_TITLE, "Wrong size delivered", "Coupon rejected"])
    claim = rails_app.run("push", {"ids": ids})
    good = [ids[0], *ids[2:]]
    rails_app.wait_for_vectors(good, "the split batch's good rows")
    log = rails_app.log.read_text()
    assert f"articles: task {claim['task_id']} refused (" in log and "one task each" in log
    wait_until(lambda: re.search(rf"refused {ids[1]}: .*cleared: {ids[1]}", rails_app.log.read_text()),
               REPLY_TIMEOUT_S, "the bad row's own refusal")  # fmt: skip
    rows = rails_app.verify(ids)
    assert all(same_text(rows[i]) and rows[i]["stores"] == 1 for i in good), rows
    assert (rows[ids[1]]["vector"], rows[ids[1]]["task"]) == (False, None), rows


def test_the_backfill_screens_refused_texts_and_caps_its_batch_size(rails_app):
    """Rows whose titles the worker would refuse (only non-breaking spaces; over its text limit) are skipped by
    the backfill with the reason logged, so their batch-mates are embedded; a batch_size over the fleet's
    per-task limit (worker_info: 256 texts) is capped to it."""
    ids = insert_unembedded(rails_app, ["Late delivery again", NBSP_TITLE, LONG_TITLE, "Cannot upload a photo"])
    report = rails_app.run("backfill", {"batch_size": 1000})
    assert report["batch_size"] == 256 and report["skipped"] >= 2 and report["enqueued"] == 2, report
    out = rails_app.last_output  # the backfill logs to its own output
    assert "batch_size 1000 is more than the 256 texts a task of minilm may carry" in out, out[-3000:]
    good = [ids[0], ids[3]]
    rails_app.wait_for_vectors(good, "the screened batch's good rows")
    rows = rails_app.verify(ids)
    assert all(same_text(rows[i]) and rows[i]["stores"] == 1 for i in good), rows
    assert not rows[ids[1]]["vector"] and not rows[ids[2]]["vector"], rows
    assert f"skipped articles {ids[1]}: its text is empty or blank" in out, out[-3000:]
    assert f"skipped articles {ids[2]}: its text has 20006 characters" in out, out[-3000:]


def test_a_mark_older_than_requeue_after_is_asked_again_though_the_row_has_a_vector(rails_app):
    """An edit whose push was lost (its mark an hour old, the row still holding the old title's vector of the
    serving model): the backfill asks for it again, and the row ends with its current title's vector."""
    (article,) = rails_app.sql("SELECT id FROM articles WHERE embedding IS NOT NULL ORDER BY id DESC LIMIT 1")[0]
    rails_app.sql(f"UPDATE articles SET title = 'My discount code expired', embedding_task_id = 'lost',"
                  f" embedding_requested_at = now() - interval '1 hour' WHERE id = {article}")  # fmt: skip
    before = rails_app.stores([int(article)])
    report = rails_app.run("backfill", {"batch_size": 16})
    assert report["enqueued"] == 1 and report["due"] - report["skipped"] == 1, report
    rails_app.wait_for_vectors([int(article)], "the re-asked row's embedding")
    row = rails_app.verify([int(article)])[int(article)]
    assert same_text(row) and row["stores"] == before[int(article)] + 1, row


def test_the_backfills_first_call_waits_on_a_full_queue(rails_app, inference_worker):
    """The backfill's probe of the serving model meets a full queue (the worker frozen, the queue filled to
    max_queue_depth): it waits like a push does, and runs to the end once the worker goes on."""
    env = clean_env(**rails_app.env, INFERENCE_MAX_QUEUE_DEPTH="2")
    os.killpg(inference_worker.process.pid, signal.SIGSTOP)
    backfill = None
    try:
        rails_app.run("fill", {}, INFERENCE_MAX_QUEUE_DEPTH="2")
        backfill = subprocess.Popen([need("ruby"), str(SCRIPT), "backfill", "{}"], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=env, text=True)  # fmt: skip
        lines = read_until(backfill, "pushing again in")
        assert "the serving model's probe: queue" in lines[-1], lines
    finally:
        os.killpg(inference_worker.process.pid, signal.SIGCONT)
    assert backfill is not None and backfill.stdout is not None
    rest = backfill.stdout.read()
    assert backfill.wait(timeout=120) == 0, rest
    report = json.loads(rest.strip().splitlines()[-1])
    assert report["waits"] >= 1 and report["identity"].startswith(f"{IDENTITY_ALIAS}@"), report


def test_a_backfill_killed_midway_and_run_again_embeds_every_row_once(rails_app, inference_worker):
    """96 rows that predate the column, backfilled in batches of 4 through a queue that may hold 2 waiting tasks
    (the client's max_queue_depth). Once the backfill knows the serving model, the worker is frozen (SIGSTOP):
    the queue fills, the backfill waits on QueueFull, and is killed (SIGKILL) there. The worker goes on and the
    backfill runs again to the end: every row ends with its vector stored exactly once (counted by the database),
    the rows the first run pushed left to their tasks."""
    titles = [f"{title} (archive copy {n})" for n, title in enumerate(tickets()[:BACKFILLED])]
    ids = insert_unembedded(rails_app, titles)
    env = clean_env(**rails_app.env, INFERENCE_MAX_QUEUE_DEPTH="2")
    payload = json.dumps({"batch_size": 4, "pause": True})
    first = subprocess.Popen([need("ruby"), str(SCRIPT), "backfill", payload], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)  # fmt: skip
    assert first.stdin is not None and first.stdout is not None
    lines = []
    try:
        lines += read_until(first, "probed")
        os.killpg(inference_worker.process.pid, signal.SIGSTOP)
        try:
            first.stdin.write("go\n")
            first.stdin.flush()
            lines += read_until(first, "pushing again in")  # a push refused: the queue is full
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            os.killpg(inference_worker.process.pid, signal.SIGCONT)
    finally:
        if first.poll() is None:
            first.kill()
    progress = [json.loads(line)["progress"] for line in lines if line.startswith('{"progress"')]
    pushed = progress[-1]["enqueued"] if progress else 0
    assert 1 <= pushed < BACKFILLED and "max_queue_depth=2" in lines[-1], lines
    second = rails_app.run("backfill", {"batch_size": 4}, INFERENCE_MAX_QUEUE_DEPTH="2")
    # The first run's rows are stored by now or still out, and left to their tasks: only the others are asked for
    # (the batch refused at the kill too: its marks were expired before the wait).
    assert second["enqueued"] == BACKFILLED - pushed == second["due"] - second["skipped"], (pushed, second)
    rails_app.wait_for_vectors(ids, "the backfilled rows' embeddings")
    assert rails_app.stores(ids) == Counter(ids)
    print(
        f"\n[rails pgvector] backfill of {BACKFILLED}: killed waiting on a full queue after {pushed} rows,"
        f" the second run pushed {second['enqueued']} ({second['waiting']} still out); every row stored once"
    )


def read_until(process: subprocess.Popen, word: str) -> list[str]:
    """The lines `process` prints up to the first holding `word`; fails if it exits first."""
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if word in line:
            return lines
    raise AssertionError(f"the backfill ended before printing {word!r}:\n{''.join(lines)[-3000:]}")


def test_a_model_change_makes_rows_stale_and_the_backfill_embeds_them_again(rails_app):
    """Rows whose identity is another revision's (as a model upgrade leaves them) are stale: semantic_search no
    longer compares them, and the backfill embeds exactly those again under the serving model's identity."""
    rows = rails_app.sql("SELECT id, embedding_model FROM articles WHERE embedding IS NOT NULL ORDER BY id LIMIT 40")
    ids, identity = [int(row[0]) for row in rows], rows[0][1]
    listed = ",".join(map(str, ids))
    rails_app.sql(f"UPDATE articles SET embedding_model = '{IDENTITY_ALIAS}@000000000000' WHERE id IN ({listed})")
    titles = dict(rails_app.sql(f"SELECT id, title FROM articles WHERE id IN ({listed})"))
    found = rails_app.run("search", {"queries": [titles[str(ids[0])]], "limit": 5})["exact"][0]
    assert ids[0] not in [article for article, _ in found] and len(found) == 5
    before = rails_app.stores(ids)
    report = rails_app.run("backfill", {"batch_size": 16})
    assert report["identity"] == identity and report["enqueued"] == len(ids), report
    rails_app.wait_for_vectors(ids, "the stale rows' new embeddings")
    assert rails_app.stores(ids) - before == Counter(ids)
    assert rails_app.sql(f"SELECT DISTINCT embedding_model FROM articles WHERE id IN ({listed})") == [[identity]]
