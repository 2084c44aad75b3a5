"""The operator tools' pure parts: the doctor's verdicts, bulk input and resume."""

from __future__ import annotations

import json

import pytest

from inference_tasks.ops import bulk, doctor


def worker_reply(host: str, profile: str, threads_per_child: list[int], cores: int = 8) -> dict:
    return {
        "host": host,
        "cores": cores,
        "profile": profile,
        "main": {"pid": 1, "os_threads": 3, "rss_bytes": 0},
        "children": [
            {"pid": 10 + i, "slot": i, "os_threads": n + 2, "rss_bytes": 0, "compute_threads": n}
            for i, n in enumerate(threads_per_child)
        ],
    }


def test_pinned_children_filling_the_cores_are_ok():
    [host] = doctor.host_verdicts({"inference@a": worker_reply("a", "inference", [1] * 8)})
    assert (host.verdict, host.compute_threads, host.cores) == (doctor.OK, 8, 8)
    assert host.fixes == []


def test_unpinned_children_are_oversubscribed_and_told_to_pin():
    [host] = doctor.host_verdicts({"inference@a": worker_reply("a", "inference", [8] * 8)})
    assert (host.verdict, host.compute_threads) == (doctor.OVERSUBSCRIBED, 64)
    assert any("INFERENCE_PIN_THREADS=true" in fix for fix in host.fixes)


def test_workers_on_one_host_add_up_and_hosts_are_judged_apart():
    """A trainer with every core next to a full inference worker oversubscribes its host; another host is fine."""
    replies = {
        "inference@a": worker_reply("a", "inference", [1] * 8),
        "trainer@a": worker_reply("a", "trainer", [8]),
        "inference@b": worker_reply("b", "inference", [1] * 8),
    }
    verdicts = {host.host: host for host in doctor.host_verdicts(replies)}
    assert verdicts["a"].verdict == doctor.OVERSUBSCRIBED and verdicts["a"].compute_threads == 16
    assert not any("PIN_THREADS" in fix for fix in verdicts["a"].fixes)  # pinning is not the fix here
    assert any("INFERENCE_TRAINER_THREADS" in fix for fix in verdicts["a"].fixes)
    assert verdicts["b"].verdict == doctor.OK
    check = doctor.worker_check(replies, list(verdicts.values()))
    assert not check.ok and "a" in check.detail


def test_no_worker_answering_is_a_problem():
    assert not doctor.worker_check({}, []).ok


def test_redis_checks_want_aof_and_no_eviction():
    good = doctor.redis_checks(True, "", {"redis_version": "7.0", "aof_enabled": 1}, {"maxmemory-policy": "noeviction"})
    assert all(check.ok for check in good)
    bad = doctor.redis_checks(True, "", {"aof_enabled": 0}, {"maxmemory-policy": "allkeys-lru", "maxmemory": "1000000"})
    assert [check.ok for check in bad] == [True, False, False]
    assert "appendonly yes" in bad[1].fix and "noeviction" in bad[2].fix
    [down] = doctor.redis_checks(False, "Connection refused", {}, None)
    assert not down.ok and "Connection refused" in down.detail


def test_bulk_reads_text_and_jsonl_keeping_line_numbers(tmp_path):
    plain = tmp_path / "a.txt"
    plain.write_text("first\n\n  \nsecond\r\n")
    assert [(item.line, item.text) for item in bulk.read_items(plain, 100)] == [(1, "first"), (4, "second")]
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text('"plain string"\n{"text": "with id", "id": 7}\n')
    assert [(item.line, item.text, item.id) for item in bulk.read_items(jsonl, 100)] == [
        (1, "plain string", None),
        (2, "with id", 7),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [('{"text": ""}\n', "b.jsonl:1: expected a non-empty string"), ("{oops\n", "b.jsonl:1: not JSON"),
     ('"' + "x" * 101 + '"\n', "b.jsonl:1: 101 characters")],
)  # fmt: skip
def test_bulk_refuses_a_bad_line_naming_it(tmp_path, content, message):
    path = tmp_path / "b.jsonl"
    path.write_text(content)
    with pytest.raises(bulk.BulkInputError, match=message):
        bulk.read_items(path, 100)


def test_resume_drops_a_torn_line_and_refuses_another_inputs_output(tmp_path):
    items = [bulk.Item(line, f"text {line}") for line in (1, 2, 4)]
    output = tmp_path / "out.jsonl"
    output.write_text(json.dumps({"line": 1}) + "\n" + json.dumps({"line": 2}) + "\n" + '{"line": 4, "emb')
    assert bulk.completed_lines(output, items) == 2
    assert output.read_text().count("\n") == 2 and output.read_text().endswith("\n")
    with pytest.raises(bulk.BulkInputError, match="another input"):
        bulk.completed_lines(output, [bulk.Item(5, "x"), bulk.Item(6, "y")])


def test_a_child_that_has_not_reported_yet_is_not_taken_for_ok():
    reply = worker_reply("a", "inference", [1, 0], cores=2)
    check = doctor.worker_check({"inference@a": reply}, doctor.host_verdicts({"inference@a": reply}))
    assert not check.ok and "still starting" in check.detail and "slot 1" in check.detail
