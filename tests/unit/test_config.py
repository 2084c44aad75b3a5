"""Settings: defaults, parsing from an environment mapping, and refusals with named variables."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from inference_tasks.config import Settings
from inference_tasks.config.checks import ConfigError
from inference_tasks.config.defaults import DEFAULT_MAX_TASKS_PER_CHILD, DEFAULT_MODEL, DEFAULT_REDIS_URL
from inference_tasks.cores import available_cores
from inference_tasks.redis_access.connections import new_redis


def test_settings_built_by_hand_probe_no_hardware_and_read_no_environment(monkeypatch):
    """Only from_env reads the environment and the cores: Settings() gives one child and one trainer
    thread whatever the host, and XDG_CACHE_HOME counts only when from_env reads it."""
    monkeypatch.setenv("XDG_CACHE_HOME", "/elsewhere")
    by_hand = Settings()
    assert (by_hand.concurrency, by_hand.trainer_threads) == (1, 1)
    assert by_hand.model_cache_dir == Path.home() / ".cache" / "inference_tasks"
    read = Settings.from_env({"XDG_CACHE_HOME": "/var/cache"})
    assert read.model_cache_dir == Path("/var/cache/inference_tasks")
    assert (read.concurrency, read.trainer_threads) == (available_cores(), available_cores())
    assert Settings.from_env({"XDG_CACHE_HOME": "/x", "INFERENCE_MODEL_CACHE": "/srv"}).model_cache_dir == Path("/srv")


def test_defaults_without_any_environment():
    """An empty environment gives the documented local defaults."""
    settings = Settings.from_env({})
    assert settings.redis_url == DEFAULT_REDIS_URL == "redis://127.0.0.1:6379/0"
    assert settings.model is None and settings.models_file is None
    assert settings.served_model.alias == "minilm" and settings.served_model.source == DEFAULT_MODEL
    assert settings.concurrency == available_cores()
    assert settings.pin_threads is True
    assert settings.max_tasks_per_child == DEFAULT_MAX_TASKS_PER_CHILD >= 100
    assert settings.preload_model is True
    assert 0 < settings.max_tasks_per_child_jitter < 1


def test_every_setting_is_read_from_its_variable():
    """REDIS_URL and INFERENCE_* variables are parsed into typed fields."""
    settings = Settings.from_env(
        {
            "REDIS_URL": "rediss://:pw@redis.internal:6380/2",
            "INFERENCE_MODEL": "/models/minilm",
            "INFERENCE_CONCURRENCY": "6",
            "INFERENCE_PIN_THREADS": "off",
            "INFERENCE_MAX_TASKS_PER_CHILD": "250",
            "INFERENCE_MAX_MEMORY_PER_CHILD_MB": "900",
            "INFERENCE_MAX_BATCH_TEXTS": "32",
            "INFERENCE_MAX_TEXT_CHARS": "500",
            "INFERENCE_RESULT_EXPIRES_S": "60",
            "INFERENCE_PROC_ALIVE_TIMEOUT_S": "12.5",
            "INFERENCE_REDIS_TLS_CERT_REQS": "none",
            "INFERENCE_PRELOAD_MODEL": "no",
            "INFERENCE_MAX_TASKS_PER_CHILD_JITTER": "0.5",
            "INFERENCE_MICROBATCH_MAX_TEXTS": "0",
            "INFERENCE_MICROBATCH_WAIT_MS": "2.5",
        }
    )
    assert (settings.microbatch_max_texts, settings.microbatch_wait_ms) == (0, 2.5)
    assert settings.preload_model is False
    assert settings.max_tasks_per_child_jitter == 0.5
    assert settings.redis_url == "rediss://:pw@redis.internal:6380/2"
    assert settings.model == "/models/minilm"
    assert settings.concurrency == 6
    assert settings.pin_threads is False
    assert (settings.max_tasks_per_child, settings.max_memory_per_child_mb) == (250, 900)
    assert (settings.max_batch_texts, settings.max_text_chars) == (32, 500)
    assert settings.result_expires_s == 60
    assert settings.proc_alive_timeout_s == 12.5
    assert settings.redis_tls_cert_reqs == "none"


def test_empty_variables_keep_defaults():
    """INFERENCE_CONCURRENCY= (set but empty, as compose files often do) means the default."""
    assert Settings.from_env({"INFERENCE_CONCURRENCY": ""}).concurrency == available_cores()


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"INFERENCE_CONCURRENCY": "two"}, "INFERENCE_CONCURRENCY='two' is not a number"),
        ({"INFERENCE_CONCURRENCY": "0"}, "INFERENCE_CONCURRENCY must be at least 1"),
        ({"INFERENCE_PIN_THREADS": "maybe"}, "INFERENCE_PIN_THREADS='maybe' is not a boolean"),
        ({"REDIS_URL": "amqp://guest@localhost//"}, "REDIS_URL must be redis://, rediss://, unix:// or sentinel://"),
        ({"REDIS_URL": "sentinel://127.0.0.1:26379"}, "set INFERENCE_REDIS_SENTINEL_MASTER"),
        (
            {"REDIS_URL": "sentinel://127.0.0.1:26379;redis://10.0.0.2:6379", "INFERENCE_REDIS_SENTINEL_MASTER": "m"},
            "'redis://10.0.0.2:6379' is not sentinel://host:port",
        ),
        (
            {"INFERENCE_SIDEKIQ_REDIS_URL": "sentinel://127.0.0.1:26379"},
            "set INFERENCE_SIDEKIQ_REDIS_SENTINEL_MASTER",
        ),
        ({"INFERENCE_RESULT_REDIS_URL": "memcached://10.0.0.3"}, "INFERENCE_RESULT_REDIS_URL must be redis://"),
        ({"INFERENCE_RESULT_REDIS_URL": "sentinel://127.0.0.1:26379"}, "set INFERENCE_RESULT_REDIS_SENTINEL_MASTER"),
        (
            {
                "INFERENCE_RESULT_REDIS_URL": "sentinel://10.0.0.3:26379;10.0.0.4",
                "INFERENCE_REDIS_SENTINEL_MASTER": "m",
            },
            "INFERENCE_RESULT_REDIS_URL: '10.0.0.4' is not sentinel://host:port",
        ),
        ({"INFERENCE_REDIS_SENTINEL_TLS": "true"}, "INFERENCE_REDIS_SENTINEL_TLS=true needs a sentinel:// URL"),
        ({"INFERENCE_DEVICE": "gpu"}, "INFERENCE_DEVICE must be cpu, cuda, cuda:N or auto, got 'gpu'"),
        ({"INFERENCE_DEVICE": "cuda:x"}, "INFERENCE_DEVICE must be cpu, cuda, cuda:N or auto"),
        ({"INFERENCE_CUDA_DTYPE": "int8"}, "INFERENCE_CUDA_DTYPE must be one of"),
        ({"INFERENCE_TORCH_ENGINE": "onnx"}, "INFERENCE_TORCH_ENGINE must be one of ('auto', 'sentence-transformers')"),
        ({"INFERENCE_CHILDREN_PER_GPU": "0"}, "INFERENCE_CHILDREN_PER_GPU must be at least 1"),
        ({"INFERENCE_REDIS_TLS_CERT_REQS": "strict"}, "INFERENCE_REDIS_TLS_CERT_REQS must be one of"),
        ({"INFERENCE_SOFT_TIME_LIMIT_S": "400"}, "INFERENCE_SOFT_TIME_LIMIT_S (400) must be below"),
        ({"INFERENCE_LEASE_RENEW_INTERVAL_S": "10"}, "must be at most a third of INFERENCE_VISIBILITY_TIMEOUT_S"),
        ({"INFERENCE_MAX_REDELIVERIES": "-1"}, "INFERENCE_MAX_REDELIVERIES must be 0 or more"),
        ({"INFERENCE_MAX_TASKS_PER_CHILD": "-1"}, "INFERENCE_MAX_TASKS_PER_CHILD must be 0 (never recycle) or more"),
        ({"INFERENCE_MAX_TASKS_PER_CHILD_JITTER": "1"}, "INFERENCE_MAX_TASKS_PER_CHILD_JITTER must be from 0"),
        ({"INFERENCE_MICROBATCH_MAX_TEXTS": "-1"}, "INFERENCE_MICROBATCH_MAX_TEXTS must be 0 (off) or more"),
        ({"INFERENCE_MICROBATCH_WAIT_MS": "5000"}, "INFERENCE_MICROBATCH_WAIT_MS must be from 0 to 1000"),
        ({"INFERENCE_MEASURE_ROUNDS": "0"}, "INFERENCE_MEASURE_ROUNDS must be from 1 to 50, got 0"),
        ({"INFERENCE_MEASURE_ROUNDS": "many"}, "INFERENCE_MEASURE_ROUNDS"),
    ],
)
def test_bad_values_are_refused_naming_the_variable(environ, message):
    """A setting that cannot work stops the process at start, saying which variable is wrong."""
    with pytest.raises(ConfigError) as raised:
        Settings.from_env(environ)
    assert message in str(raised.value)


@pytest.mark.parametrize("url", ["sentinel://10.0.0.1:26379;sentinel://10.0.0.2", "sentinel://:26379"])
def test_a_sentinel_client_refuses_an_address_without_host_or_port(url):
    """A client built straight from a sentinel:// URL (not through Settings) refuses a part with no host
    or no port as a configuration error naming it, instead of handing redis-py a None address."""
    with pytest.raises(ConfigError, match="is not sentinel://host:port"):
        new_redis(url, None, "mymaster", False, "required")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
        ("rediss://app:hunter2@cache:6380/1", "rediss://app:***@cache:6380/1"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_redacted_url_never_contains_the_password(url, shown):
    """The URL shown in logs and worker_info hides the password and keeps the rest."""
    assert Settings(redis_url=url).redacted_redis_url == shown


def test_every_setting_is_read_from_its_variable_and_documented():
    """The variable table is derived from the Settings fields; docs/configuration.md lists each one."""
    from dataclasses import fields

    from inference_tasks.config.settings import _ENV_FIELDS

    documented = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    names = [item.name for item in fields(Settings) if item.name != "redis_url"]
    assert sorted(_ENV_FIELDS) == sorted(names)
    variables = [f"INFERENCE_{name.upper()}" for name in names]
    missing = [variable for variable in variables if f"`{variable}`" not in documented]
    assert missing == []
    assert Settings.from_env({"INFERENCE_SIDEKIQ_REDIS_URL": "redis://elsewhere:6379/1"}).sidekiq_redis_url == (
        "redis://elsewhere:6379/1"
    )
    assert Settings.from_env({"INFERENCE_PIN_THREADS": "off"}).pin_threads is False


def test_a_sentinel_url_names_every_sentinel_and_hides_the_password():
    settings = Settings.from_env(
        {
            "REDIS_URL": "sentinel://:s3cret@10.0.0.1:26379;sentinel://10.0.0.2:26379/2",
            "INFERENCE_REDIS_SENTINEL_MASTER": "inference-primary",
        }
    )
    assert settings.uses_sentinel and settings.redis_sentinel_master == "inference-primary"
    # The database, given once on the last part, goes on every part: kombu and Celery read the first.
    assert settings.redacted_redis_url == "sentinel://:***@10.0.0.1:26379/2;sentinel://10.0.0.2:26379/2"
    from inference_tasks.app import create_app

    conf = create_app(settings).conf
    assert conf.broker_transport == "inference_tasks.broker.transport:SentinelTransport"
    assert conf.broker_transport_options["master_name"] == "inference-primary"
    assert conf.result_backend.startswith("inference_tasks.broker.result_backend:SentinelResultBackend+sentinel://")
    assert conf.result_backend_transport_options == {"master_name": "inference-primary"}
    from kombu import Connection

    assert Connection(conf.broker_url).virtual_host == "2"
    app = create_app(settings)
    assert app.backend.connparams["db"] == 2


def test_task_events_can_be_turned_off_for_producers_and_workers_alike():
    from inference_tasks.app import create_app

    on = create_app(Settings.from_env({})).conf
    off = create_app(Settings.from_env({"INFERENCE_TASK_EVENTS": "false"})).conf
    assert (on.worker_send_task_events, on.task_send_sent_event) == (True, True)
    assert (off.worker_send_task_events, off.task_send_sent_event) == (False, False)


def test_results_can_live_on_a_redis_of_their_own_plain_tls_or_sentinel():
    """INFERENCE_RESULT_REDIS_URL moves the result backend (its class, TLS and Sentinel options follow
    that URL's scheme) and nothing of the broker; unset, results stay on REDIS_URL."""
    from inference_tasks.app import celery_conf

    shared = celery_conf(Settings.from_env({"REDIS_URL": "redis://broker:6379/0"}))
    assert shared["result_backend"] == "inference_tasks.broker.result_backend:ResultBackend+redis://broker:6379/0"
    assert not Settings.from_env({"REDIS_URL": "redis://broker:6379/0"}).results_apart

    tls = Settings.from_env(
        {
            "REDIS_URL": "redis://broker:6379/0",
            "INFERENCE_RESULT_REDIS_URL": "rediss://:pw@results:6380/2",
            "INFERENCE_REDIS_TLS_CA_FILE": "/etc/ca.pem",
        }
    )
    conf = celery_conf(tls)
    assert tls.results_apart and tls.redacted_results_url == "rediss://:***@results:6380/2"
    assert conf["broker_url"] == "redis://broker:6379/0" and "broker_use_ssl" not in conf
    assert conf["result_backend"] == "inference_tasks.broker.result_backend:ResultBackend+rediss://:pw@results:6380/2"
    assert conf["redis_backend_use_ssl"] == {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": "/etc/ca.pem"}

    sentinel = Settings.from_env(
        {
            "REDIS_URL": "rediss://broker:6380/0",
            "INFERENCE_RESULT_REDIS_URL": "sentinel://10.0.0.3:26379;sentinel://10.0.0.4:26379/1",
            "INFERENCE_RESULT_REDIS_SENTINEL_MASTER": "results-primary",
        }
    )
    conf = celery_conf(sentinel)
    assert conf["broker_transport"] == "inference_tasks.broker.transport:Transport" and "broker_use_ssl" in conf
    assert conf["result_backend"].startswith("inference_tasks.broker.result_backend:SentinelResultBackend+sentinel://")
    assert conf["result_backend_transport_options"] == {"master_name": "results-primary"}
    assert "redis_backend_use_ssl" not in conf


def test_sentinel_over_tls_reaches_the_sentinels_and_the_primaries_over_tls():
    """INFERENCE_REDIS_SENTINEL_TLS: kombu's and Celery's Sentinel get TLS keywords for the sentinels
    (sentinel_kwargs) and TLS for the primary (broker_use_ssl, redis_backend_use_ssl)."""
    from inference_tasks.app import celery_conf

    settings = Settings.from_env(
        {
            "REDIS_URL": "sentinel://10.0.0.1:26379;sentinel://10.0.0.2:26379/0",
            "INFERENCE_REDIS_SENTINEL_MASTER": "inference-primary",
            "INFERENCE_REDIS_SENTINEL_TLS": "true",
            "INFERENCE_REDIS_TLS_CA_FILE": "/etc/ca.pem",
        }
    )
    conf = celery_conf(settings)
    tls = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": "/etc/ca.pem"}
    assert conf["broker_use_ssl"] == tls and conf["redis_backend_use_ssl"] == tls
    for options in (conf["broker_transport_options"], conf["result_backend_transport_options"]):
        assert options["master_name"] == "inference-primary"
        assert options["sentinel_kwargs"] == {"ssl": True, "socket_timeout": 1.0, "socket_connect_timeout": 1.0, **tls}
    plain = celery_conf(
        Settings.from_env({"REDIS_URL": "sentinel://10.0.0.1:26379", "INFERENCE_REDIS_SENTINEL_MASTER": "m"})
    )
    assert "broker_use_ssl" not in plain and "sentinel_kwargs" not in plain["broker_transport_options"]
