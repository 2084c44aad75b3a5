"""Redis Sentinel: a real primary, replica and three sentinels; a worker on REDIS_URL=sentinel://...;
the primary killed with SIGKILL under load. Nothing is lost; the operator tools and the Ruby client
follow the promoted primary."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.failover import run_failover
from tests.support.local import clean_env, running_flower
from tests.support.localstack import REPO_ROOT
from tests.support.operator_tools import exporter, flower_api, scrape
from tests.support.ruby_runner import ruby

pytestmark = pytest.mark.worker


def after_failover(cluster, url: str, workdir) -> dict:
    """status and the exporter (Python, our own Redis clients) and the Ruby client, on the new primary."""
    env = clean_env(REDIS_URL=url, INFERENCE_REDIS_SENTINEL_MASTER=cluster.master_name)
    status = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "status"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    with exporter(url, extra_env={"INFERENCE_REDIS_SENTINEL_MASTER": cluster.master_name}) as port:
        metrics = scrape(port)
    ports = ",".join(str(port) for port, _ in cluster.sentinels)
    from_ruby = ruby("sentinel_embed.rb", url, SENTINEL_PORTS=ports, SENTINEL_MASTER=cluster.master_name)
    # The bulk CLI (producer, results read and deleted) and Flower (its API asks the workers).
    source, output = workdir / "texts.txt", workdir / "vectors.jsonl"
    source.write_text("after the failover\nfrom the bulk CLI\n")
    bulk = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "embed", str(source), "-o", str(output)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    with running_flower([], url, INFERENCE_REDIS_SENTINEL_MASTER=cluster.master_name,
                        FLOWER_UNAUTHENTICATED_API="true") as (_, port):  # fmt: skip
        flower_workers = flower_api(port, "/api/workers?refresh=1")
    return {
        "bulk_rc": bulk.returncode,
        "bulk_err": bulk.stderr[-2000:],
        "bulk_lines": len(output.read_text().splitlines()) if output.exists() else 0,
        "flower_workers": sorted(flower_workers),
        "status_rc": status.returncode,
        "status_out": status.stdout + status.stderr,
        "exporter_redis_up": metrics[("inference_redis_up", ())],
        "exporter_workers": metrics[("inference_workers", ())],
        "ruby": from_ruby,
    }


# Long: the chaos soak's quick run (tests/worker/test_chaos.py) covers this fault in the default suite.
@pytest.mark.long
@pytest.mark.timeout(400)
@pytest.mark.external
def test_killing_the_primary_under_load_loses_nothing(tmp_path):
    report = run_failover(
        tmp_path, before=40, after=40, rate=20.0, then=lambda cluster, url: after_failover(cluster, url, tmp_path)
    )
    print(
        f"\n[failover] promotion {report['promotion_s']:.2f} s, results flowing again after "
        f"{report['flowing_again_s']:.2f} s, {report['lost']} lost, {report['run_twice']} run twice, "
        f"{report['send_errors']} sends retried"
    )
    assert report["new_primary_port"] == report["ruby"]["primary_port"] != report["old_primary_port"]
    assert report["stuck_producers"] == 0
    assert report["promotion_s"] is not None and report["promotion_s"] < 30
    assert report["flowing_again_s"] is not None
    # Only the asynchronous-replication window may lose a task: a push the old primary acknowledged
    # in the instant around the kill, before any promotion (seen in two of 11 CI runs). Anything the
    # worker received, anything sent earlier, or anything sent to the promoted primary must complete.
    assert report["lost"] == report["lost_in_replication_window"] <= 2, (
        report["lost_ids"],
        report["lost_pushed_s_after_kill"],
    )
    assert report["run_twice_sent_after_kill"] == 0
    assert report["status_rc"] == 0 and "inference" in report["status_out"], report["status_out"]
    assert report["exporter_redis_up"] == 1 and report["exporter_workers"] == 1
    assert (report["ruby"]["dim"], report["ruby"]["count"]) == (384, 1)
    assert report["bulk_rc"] == 0 and report["bulk_lines"] == 2, report["bulk_err"]
    assert any(name.startswith("failover@") for name in report["flower_workers"]), report["flower_workers"]
