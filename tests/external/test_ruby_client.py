"""Ruby -> Redis -> Python prefork worker -> Ruby (and Sidekiq): the Rails path, with real processes."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from tests.support.local import clean_env, redis_client
from tests.support.ruby_runner import RUBY_DIR, need, ruby
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker


@pytest.fixture
def ruby_worker(inference_worker, trainer_worker):
    """The session's inference worker, with the trainer on the same Redis for the training calls."""
    return inference_worker


def test_results_come_back_to_rails_as_sidekiq_jobs(ruby_worker, tmp_path):
    """reply_to sidekiq: after success and after failure the worker pushes a job that a real Sidekiq
    process runs; the embedding arrives whole with the caller's context, and the result backend keeps
    only a stub naming the reply job (the embedding is in Redis once, not twice)."""
    redis = redis_client(ruby_worker.redis_url)
    sidekiq_log = tmp_path / "sidekiq.log"
    with open(sidekiq_log, "wb") as log:
        sidekiq = subprocess.Popen(
            [need("sidekiq"), "-r", str(RUBY_DIR / "reply_job.rb"), "-q", "replies", "-c", "2"],
            env=clean_env(REDIS_URL=ruby_worker.redis_url),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        ids = ruby("enqueue_with_reply.rb", ruby_worker.redis_url)
        replies = {}

        def both_replied() -> bool:
            assert sidekiq.poll() is None, sidekiq_log.read_text()
            for name, task_id in ids.items():
                raw = redis.get(f"test:sidekiq-reply:{task_id}")
                if raw:
                    replies[name] = json.loads(raw)
            return len(replies) == 2

        wait_until(both_replied, 120, "both Sidekiq reply jobs", poll_s=0.2, details=sidekiq_log.read_text)
    finally:
        sidekiq.terminate()
        sidekiq.wait(timeout=30)
    good, bad = replies["good"], replies["bad"]
    stored = ruby_worker.app.AsyncResult(ids["good"]).get(timeout=30)
    assert good["state"] == "SUCCESS" and good["task"] == "inference.embed" and good["error"] is None
    assert stored == {"delivered_in_reply": {"class": "EmbeddingReadyJob", "queue": "replies", "format": "sidekiq"}}
    assert good["result"]["model"] == "all-MiniLM-L6-v2"
    assert len(good["result"]["embeddings"]) == 1 and len(good["result"]["embeddings"][0]) == 384
    assert abs(np.linalg.norm(good["result"]["embeddings"][0]) - 1.0) < 1e-4
    assert good["context"] == {"record_id": 42}
    assert bad["state"] == "FAILURE" and bad["result"] is None
    assert bad["error"]["type"] == "InvalidInput"
    assert "texts must be a list of strings, got a string" in bad["error"]["message"]


def test_malformed_messages_from_a_ruby_producer_do_not_stop_the_worker(ruby_worker):
    """Raw garbage pushed by Ruby between valid client calls: every valid task completes."""
    report = ruby("push_malformed.rb", ruby_worker.redis_url)
    assert report["dims"] == [384] * 8
    assert ruby_worker.process.poll() is None
    assert "refused a message" in ruby_worker.log()
