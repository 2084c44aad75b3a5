"""The files under deploy/rails, loaded and run inside a real Rails app (Debian's Rails 6.1, SQLite, a real
Sidekiq process as ActiveJob's adapter, the client as the built gem) against the real worker: an Article
saved in Rails ends with its embedding in its row."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import UTC, datetime

import numpy as np
import pytest

from tests.support.local import clean_env
from tests.support.programs import missing
from tests.support.ruby_runner import RUBY_DIR, need, ruby
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RAILS_ENV = RUBY_DIR.parent / "rails_app" / "config" / "environment.rb"
REPLY_TIMEOUT_S = 120


def need_rails() -> None:
    """Rails, ActiveRecord and SQLite for Ruby, from Debian (scripts/setup.sh installs them)."""
    need("ruby")
    check = subprocess.run(
        ["ruby", "-e", 'require "rails"; require "active_record"; require "sqlite3"'], capture_output=True, text=True
    )
    if check.returncode != 0:
        missing("Rails for Ruby is not installed (apt-get install ruby-railties ruby-activerecord ruby-sqlite3)")


def test_an_article_saved_in_rails_gets_its_embedding_through_the_shipped_model_initializer_and_job(
    inference_worker, installed_gem, tmp_path
):
    """The installed gem, deploy/rails's initializer builds INFERENCE, Article's after_commit enqueues an
    embed with an ActiveJob reply, the Python worker embeds, a real Sidekiq process running the Rails
    app performs EmbeddingReadyJob (an ApplicationJob) through ActiveJob's adapter, and the article's
    row holds its 384-float embedding; a blank title ends in the job's failure branch (logged with the
    worker's reason). Prints the save-to-row latency."""
    need_rails()
    database = tmp_path / "app.sqlite3"
    rails_log = tmp_path / "rails.log"
    env = {"DATABASE_URL": f"sqlite3:{database}", "RAILS_LOG": str(rails_log), **installed_gem}
    sidekiq_log = tmp_path / "sidekiq.log"
    with open(sidekiq_log, "wb") as log:
        sidekiq = subprocess.Popen(
            [need("sidekiq"), "-r", str(RAILS_ENV), "-q", "default", "-c", "2"],
            env=clean_env(REDIS_URL=inference_worker.redis_url, **env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        saved = ruby("rails_articles.rb", inference_worker.redis_url, **env)

        def row_of(article_id: int) -> tuple[str | None, str]:
            assert sidekiq.poll() is None, sidekiq_log.read_text()
            with sqlite3.connect(database) as db:
                return db.execute("SELECT embedding, updated_at FROM articles WHERE id = ?", (article_id,)).fetchone()

        embedding, updated_at = wait_until(
            lambda: (row := row_of(saved["good"]))[0] and row, REPLY_TIMEOUT_S, "the article's embedding"
        )
        failure = f"embedding failed for article {saved['bad']}"
        wait_until(lambda: failure in rails_log.read_text(), REPLY_TIMEOUT_S, "the job's failure branch")
        bad_embedding, _ = row_of(saved["bad"])
    finally:
        sidekiq.terminate()
        sidekiq.wait(timeout=30)
    vector = json.loads(embedding)
    assert len(vector) == 384 and abs(np.linalg.norm(vector) - 1.0) < 1e-4
    log = rails_log.read_text()
    assert "texts[0] is empty or blank" in log
    # ActiveJob itself ran both replies (its own log lines), wrapped by its Sidekiq adapter.
    assert log.count("Performed EmbeddingReadyJob") >= 2, log[-3000:]
    assert "from Sidekiq(default)" in log
    assert bad_embedding is None
    done = datetime.fromisoformat(updated_at).replace(tzinfo=UTC).timestamp()
    print(f"\n[rails] article saved -> embedding in its row: {done - saved['good_created_at']:.2f} s")
