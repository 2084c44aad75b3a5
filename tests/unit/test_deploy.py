"""deploy/ validated as far as this machine can: systemd-analyze on the units, YAML parsed, and the
operational facts (grace period > longest task, exec-form commands, threads x children <= CPUs,
AOF Redis, KEDA pointed at the inference queue) checked in every compose and Kubernetes file."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from inference_tasks.config import Settings
from inference_tasks.config.tenants import load_tenants
from inference_tasks.routing import INFERENCE_QUEUE
from tests.support.programs import need_program

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
LONGEST_TASK_S = Settings().time_limit_s
KUBERNETES_FILES = sorted((DEPLOY / "kubernetes").glob("*.yaml"))


def kubernetes_objects() -> list[dict]:
    return [doc for path in KUBERNETES_FILES for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_kind(kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in kubernetes_objects() if doc["kind"] == kind}


def cpu_count(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


@pytest.mark.parametrize("unit", sorted((DEPLOY / "systemd").glob("*.service")), ids=lambda path: path.name)
@pytest.mark.external
def test_systemd_units_verify(unit, tmp_path):
    """systemd-analyze verify, with the install paths pointed at this checkout (it checks they exist);
    a template unit (inference-worker@.service) as its instance for the multilingual model."""
    venv_bin = Path(os.environ.get("VIRTUAL_ENV", Path(__file__).resolve().parents[2] / ".venv")) / "bin"
    text = unit.read_text().replace("/opt/inference_tasks/.venv/bin", str(venv_bin))
    text = text.replace("/opt/inference_tasks", str(tmp_path)).replace(
        "/etc/inference_tasks/inference.env", "/dev/null"
    )
    text = re.sub(r"^(User|Group)=.*$", r"\1=root", text, flags=re.MULTILINE)
    copy = tmp_path / unit.name.replace("@.", "@multilingual.")
    copy.write_text(text)
    analyze = need_program("systemd-analyze", "systemd")
    verified = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, cwd=tmp_path)
    problems = [line for line in verified.stderr.splitlines() if copy.name in line]
    assert verified.returncode == 0 and not problems, verified.stderr
    if "flower" not in unit.name:  # a unit that runs tasks waits for the longest one on stop
        stop_s = int(re.search(r"^TimeoutStopSec=(\d+)$", unit.read_text(), re.MULTILINE).group(1))
        assert stop_s > LONGEST_TASK_S


def test_every_kubernetes_object_is_well_formed():
    objects = kubernetes_objects()
    assert {doc["kind"] for doc in objects} >= {"Deployment", "Service", "ScaledObject", "ConfigMap", "Secret"}
    for doc in objects:
        assert doc["apiVersion"] and doc["metadata"]["name"], doc
        if doc["kind"] == "Deployment":
            selector = doc["spec"]["selector"]["matchLabels"]
            assert selector.items() <= doc["spec"]["template"]["metadata"]["labels"].items(), doc["metadata"]["name"]


def served_queue(container: dict) -> str:
    """The queue a worker container's model is served on: `--model <alias>` -> inference.<alias>."""
    command = container["command"]
    return f"{INFERENCE_QUEUE}.{command[command.index('--model') + 1]}" if "--model" in command else INFERENCE_QUEUE


def test_kubernetes_workers_stop_gracefully_and_fit_their_cpus():
    deployments = by_kind("Deployment")
    pools = [name for name in deployments if name.startswith("inference-worker")]
    assert {"inference-worker", "inference-worker-multilingual"} <= set(pools), pools
    for name in (*pools, "inference-trainer"):
        spec = deployments[name]["spec"]["template"]["spec"]
        assert spec["terminationGracePeriodSeconds"] > LONGEST_TASK_S, name
        [container] = spec["containers"]
        assert container["command"][0] == "inference-tasks", "exec form, no shell: TERM must reach Celery"
        assert cpu_count(container["resources"]["limits"]["cpu"]) == cpu_count(
            container["resources"]["requests"]["cpu"]
        )
        sized_from = {env["name"]: env["valueFrom"]["resourceFieldRef"]["resource"] for env in container["env"]}
        assert "limits.cpu" in sized_from.values(), f"{name}: children/threads must follow the CPU limit"
    for deployment in deployments.values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            # Exec form: a list of strings, our CLI or Celery first, never a shell that would swallow TERM.
            command = container.get("command") or container.get("args")
            assert isinstance(command, list) and command, deployment["metadata"]["name"]
            assert all(isinstance(part, str) for part in command), command
            assert command[0] in ("inference-tasks", "celery"), command


def test_every_worker_is_probed_locally_and_systemd_waits_for_ready():
    """Kubernetes: each worker and trainer container has exec probes through `inference-tasks probe`
    (startup and readiness --ready, liveness --live), never a broadcast; systemd: each worker unit is
    active only once its node probes ready, within a start timeout that allows the model load."""
    for name, deployment in by_kind("Deployment").items():
        if not (name.startswith("inference-worker") or name == "inference-trainer"):
            continue
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        commands = {
            probe: container[probe]["exec"]["command"] for probe in ("startupProbe", "readinessProbe", "livenessProbe")
        }
        assert commands["startupProbe"] == commands["readinessProbe"] == ["inference-tasks", "probe", "--ready"], name
        assert commands["livenessProbe"][:3] == ["inference-tasks", "probe", "--live"], name
        assert container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"] >= 60
    for unit in ("inference-worker.service", "inference-worker@.service", "inference-trainer.service"):
        text = (DEPLOY / "systemd" / unit).read_text()
        assert re.search(r"^ExecStartPost=\S+/inference-tasks probe --ready --node \S+ --wait \d+$", text, re.M), unit
        assert re.search(r"^TimeoutStartSec=\d+$", text, re.M), unit


def test_keda_scales_each_model_pool_on_its_own_queue():
    """One ScaledObject per worker pool, each reading the list of the model its pool serves (the
    default model's `inference`, another's `inference.<alias>`)."""
    deployments = by_kind("Deployment")
    scaled_objects = by_kind("ScaledObject").values()
    targets = {scaled["spec"]["scaleTargetRef"]["name"] for scaled in scaled_objects}
    assert targets == {name for name in deployments if name.startswith("inference-worker")}
    for scaled in scaled_objects:
        [container] = deployments[scaled["spec"]["scaleTargetRef"]["name"]]["spec"]["template"]["spec"]["containers"]
        [trigger] = scaled["spec"]["triggers"]
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["listName"] == served_queue(container)
        assert int(trigger["metadata"]["listLength"]) > 0
        assert trigger["authenticationRef"]["name"] in by_kind("TriggerAuthentication")


def test_every_kubernetes_worker_reads_the_catalogue_the_config_names():
    """INFERENCE_MODELS_FILE points into the mounted models ConfigMap, which names every pool's model."""
    import tomllib

    config = by_kind("ConfigMap")
    path = config["inference-tasks-config"]["data"]["INFERENCE_MODELS_FILE"]
    catalogue = tomllib.loads(config["inference-tasks-models"]["data"]["models.toml"])
    known = {"minilm", "multilingual", *catalogue.get("models", {})}
    for name, deployment in by_kind("Deployment").items():
        spec = deployment["spec"]["template"]["spec"]
        if not name.startswith(("inference-worker", "inference-trainer")):
            continue
        [container] = spec["containers"]
        mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
        assert str(Path(path).parent) in mounts, name
        assert served_queue(container).removeprefix(f"{INFERENCE_QUEUE}.") in {*known, INFERENCE_QUEUE}, name


def memory_bytes(quantity: str) -> int:
    units = {"kb": 2**10, "mb": 2**20, "gb": 2**30, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * factor
    return int(quantity)


def test_redis_everywhere_keeps_its_queue_and_has_a_memory_ceiling():
    """AOF, noeviction (never evict a queued task), and a maxmemory at which Redis refuses writes; in
    Kubernetes below the container's memory limit, leaving room for the AOF rewrite's fork."""
    [statefulset] = by_kind("StatefulSet").values()
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for command in (container["args"], compose["services"]["redis"]["command"]):
        joined = " ".join(command)
        assert "--appendonly yes" in joined and "--maxmemory-policy noeviction" in joined
        assert memory_bytes(command[command.index("--maxmemory") + 1]) >= 256 * 2**20
    maxmemory = memory_bytes(container["args"][container["args"].index("--maxmemory") + 1])
    assert maxmemory <= 0.8 * memory_bytes(container["resources"]["limits"]["memory"])


def test_compose_gives_the_worker_a_cache_of_its_own_that_evicts():
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    joined = " ".join(services["cache"]["command"])
    assert "--maxmemory-policy allkeys-lru" in joined and "--maxmemory 512mb" in joined
    url = services["worker"]["environment"]["INFERENCE_CACHE_URL"]
    assert url.startswith("redis://cache:") and services["worker"]["environment"]["REDIS_URL"].startswith(
        "redis://redis:"
    )
    assert services["worker"]["depends_on"]["cache"]["condition"] == "service_healthy"


def test_compose_file_parses_and_stops_gracefully():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) >= {"redis", "worker", "worker-multilingual", "trainer", "flower", "metrics"}
    for name in ("worker", "worker-multilingual", "trainer"):
        service = services[name]
        assert int(service["stop_grace_period"].rstrip("s")) > LONGEST_TASK_S
        assert service["command"][0] == "inference-tasks", "exec form, no shell"
    for name in ("worker", "worker-multilingual"):
        assert int(services[name]["environment"]["INFERENCE_CONCURRENCY"]) <= services[name]["cpus"]
    assert int(services["trainer"]["environment"]["INFERENCE_TRAINER_THREADS"]) <= services["trainer"]["cpus"]
    assert "INFERENCE_FLOWER_BASIC_AUTH" in services["flower"]["environment"], "Flower on 0.0.0.0 needs auth"


def test_the_gateway_is_deployed_with_tenants_probes_and_a_service(tmp_path):
    """Kubernetes: the gateway's Deployment reads its tenants file from a Secret mounted where
    INFERENCE_GATEWAY_TENANTS_FILE says, the file (the same as deploy/gateway-tenants.toml) loads with limits
    on models the gateway serves; it is live on /health/live and ready on /health, serves models the worker
    pools run, and has a Service; compose: a tenants file required, loopback port."""
    deployment = by_kind("Deployment")["inference-gateway"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["inference-tasks", "gateway"] and "0.0.0.0" in container["command"]
    env = {item["name"]: item for item in container["env"]}
    tenants_path = Path(env["INFERENCE_GATEWAY_TENANTS_FILE"]["value"])
    [mount] = [mount for mount in container["volumeMounts"] if mount["mountPath"] == str(tenants_path.parent)]
    [volume] = [
        volume for volume in deployment["spec"]["template"]["spec"]["volumes"] if volume["name"] == mount["name"]
    ]
    text = by_kind("Secret")[volume["secret"]["secretName"]]["stringData"][tenants_path.name]
    example = (DEPLOY / "gateway-tenants.toml").read_text()
    assert [line for line in text.splitlines() if line] == [
        line for line in example.splitlines() if line and not line.startswith("#")
    ]
    (tmp_path / "tenants.toml").write_text(text)
    tenants = load_tenants(tmp_path / "tenants.toml", ())
    served = env["INFERENCE_GATEWAY_MODELS"]["value"].split(",")
    limited = {tenant.name: tenant for tenant in tenants.by_key_digest.values()}
    assert limited and all(tenant.limited and set(tenant.models or ()) <= set(served) for tenant in limited.values())
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    pools = {
        served_queue(container)
        for name, pool in by_kind("Deployment").items()
        if name.startswith("inference-worker")
        for container in pool["spec"]["template"]["spec"]["containers"]
    }
    catalogue_default = "minilm"  # config.yaml's default, served on the bare `inference` queue too
    for alias in env["INFERENCE_GATEWAY_MODELS"]["value"].split(","):
        assert f"{INFERENCE_QUEUE}.{alias}" in pools or alias == catalogue_default, alias
    assert by_kind("Service")["inference-gateway"]["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    gateway = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["gateway"]
    assert gateway["command"][:2] == ["inference-tasks", "gateway"] and gateway["ports"][0].startswith("127.0.0.1:")
    assert gateway["environment"]["INFERENCE_GATEWAY_TENANTS_FILE"] == "/etc/inference_gateway/tenants.toml"
    assert any(
        ":?" in volume and volume.endswith(":/etc/inference_gateway/tenants.toml:ro") for volume in gateway["volumes"]
    )
