"""Canary for upstream internals: a hash of the source of every Celery, kombu, billiard and pytest-celery
function this project copies, overrides or leans on. A version bump that changes any of them fails here,
naming the override to re-check (docs/upstream.md says how). Update a hash only after re-checking."""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Callable

# "module:qualified.name" -> (first 16 hex of the sha256 of its source, which of our overrides depends on it)
PINNED: dict[str, tuple[str, str]] = {
    "kombu.transport.redis:Channel._brpop_read": (
        "c42518699709f2df",
        "transport.Channel._brpop_read (called for remote-control reply queues; ours reads a take's reply)",
    ),
    "kombu.transport.redis:Channel._brpop_start": (
        "06723d707ddf2240",
        "transport.Channel._brpop_start (sends the take instead; sets _in_poll and _brpop_sent_at as it does)",
    ),
    "kombu.transport.redis:Transport.register_with_event_loop": (
        "4b835642e4a99425",
        "transport.Transport.register_with_event_loop (kombu's, then the hub kept for broker/wakeup.py's reader)",
    ),
    "kombu.transport.redis:MultiChannelPoller._register_BRPOP": (
        "85724582464a615f",
        "transport.Channel._brpop_start (called when _in_poll is not set; the reply read on readable)",
    ),
    "kombu.transport.redis:MultiChannelPoller.maybe_check_brpop_health": (
        "0dc592e46353a0fc",
        "transport.Channel._brpop_start (_brpop_sent_at and brpop_timeout bound the wait for a take's reply)",
    ),
    "kombu.transport.redis:Channel._do_restore_message": (
        "8b430df94e45b5b0",
        "lua/take.lua (the record [message, exchange, routing key] it restores from)",
    ),
    "kombu.transport.virtual.base:Channel._lookup": (
        "82b0e60149b5e172",
        "lua/take.lua (the anonymous exchange routes a restored message to the routing key's queue)",
    ),
    "kombu.transport.redis:Channel._get": (
        "be26a9f1eb4cf8da",
        "transport.Channel.basic_get (its read, plus screening)",
    ),
    "kombu.transport.virtual.base:Channel.basic_get": (
        "ba4884c15b6bed6d",
        "transport.Channel.basic_get (reproduced: the Message, its bookkeeping unless no_ack, None when empty)",
    ),
    "kombu.transport.virtual.base:Channel.basic_consume": (
        "0fec962694938b61",
        "transport.Channel.basic_consume and deliver (what kombu's per-queue callback does, reproduced)",
    ),
    "kombu.transport.redis:Channel.basic_consume": (
        "34e0da85e689ff98",
        "transport.Channel.basic_consume (calls it; queues_in_turn replaces the cycle it updates)",
    ),
    "kombu.transport.redis:Channel._basic_cancel": (
        "f799ede5037500a9",
        "transport.Channel.deliver and queues_in_turn (active_queues is updated when the cancel runs)",
    ),
    "kombu.transport.virtual.base:Transport._reject_inbound_message": (
        "0fd42f24d40a132d",
        "transport.Channel.deliver (a message for a queue no longer consumed is requeued)",
    ),
    "kombu.transport.redis:Channel._q_for_pri": (
        "f3997660680dd00f",
        "bindings.StockBindings._q_for_pri (a priority's list name, ours; transport.Channel's take reads it)",
    ),
    "kombu.transport.redis:Channel.get_table": (
        "a4ba78a2265370f2",
        "bindings.StockBindings.get_table (reimplemented: members in kombu's form or our legacy ':' form)",
    ),
    "kombu.transport.virtual.base:Channel.queue_bind": (
        "5ada1cddb9e6d6e6",
        "bindings.StockBindings.queue_bind (calls it, then removes the binding's legacy ':' member)",
    ),
    "kombu.transport.virtual.exchange:DirectExchange.lookup": (
        "9a6fdb857eda39b2",
        "bindings.StockBindings.get_table (its rows unpack as routing key, pattern, queue)",
    ),
    "kombu.utils.scheduling:round_robin_cycle": ("99510a5cb38a5090", "transport.Channel.queues_in_turn"),
    "kombu.utils.scheduling:priority_cycle": ("c93a25e1bb5ff12d", "transport.Channel.queues_in_turn"),
    "kombu.transport.redis:Channel.maybe_reauth": (
        "5ffb6d2e81d7864d",
        "transport.Channel._brpop_read (called once a take's reply is read, as kombu's read flushes re-auth)",
    ),
    "kombu.connection:Connection.switch": (
        "2b1f8abee4fecb28",
        "redis_access/failover.py (a switch re-parses the next URL's scheme into kombu's own transport)",
    ),
    "kombu.connection:Connection.maybe_switch_next": (
        "4224624771e9d4cf",
        "redis_access/failover.NeverSwitch (kombu switches only while its cycle is truthy)",
    ),
    "kombu.connection:Connection.__init__": (
        "e9c58f881d0ae418",
        "redis_access/failover.NeverSwitch (the cycle is built from the alternates; one entry consumed at once)",
    ),
    "kombu.transport.redis:Channel._create_client": (
        "dae92bc4075dafb9",
        "transport.Channel.conn_or_acquire (one client per pool: the client kombu builds, kept)",
    ),
    "kombu.transport.redis:Channel.conn_or_acquire": (
        "25883caca6c4121e",
        "transport.Channel.conn_or_acquire (calls it once per pool)",
    ),
    "kombu.transport.redis:QoS.append": (
        "35c655f6ecc62fe6",
        "qos.QoS.append (retries while full) and _record_unacked (kombu's append, plain pipeline)",
    ),
    "kombu.transport.virtual.base:QoS.append": ("b388f0cd6485c28a", "qos.QoS._record_unacked (local record)"),
    "kombu.transport.redis:QoS.ack": ("1bc15a4ddf541af6", "qos.QoS.ack (Redis' part deferred and batched)"),
    "kombu.transport.redis:QoS._remove_from_indices": (
        "980a109d54ad9136",
        "qos.QoS.remove_records (writes what kombu's ack removes: the record and its index entry)",
    ),
    "kombu.transport.redis:Channel.close": ("101e9b9cdad44b88", "transport.Channel.close (pending acks first)"),
    "kombu.transport.redis:Channel._connparams": (
        "e9a4295085a8fb90",
        "transport.Channel.close (a transport that let go of its connection has no client to read)",
    ),
    "kombu.transport.virtual.base:Channel.close": (
        "26368e1cadfc4ff9",
        "transport.Channel.close (what is restored: only messages not acked locally)",
    ),
    "celery.worker.consumer.consumer:Consumer.create_task_handler": (
        "292c5a681f10ade7",
        "qos.QoS.ack (Celery acks on the event loop, via call_soon); worker/celery_ext/consumer.py (wraps the handler: "
        "which errors Celery catches itself)",
    ),
    "celery.worker.consumer.consumer:Consumer.start": (
        "53bd1abe3456722d",
        "worker/celery_ext/consumer.py Consumer.start (wraps: a NOPERM raised out of it, not a connection error Celery "
        "retries, stops the worker as MissingRedisGrant)",
    ),
    "celery.worker.consumer.gossip:Gossip.get_consumers": (
        "c7fe75ae136aed9f",
        "ops/acl.py gossip() and EVENT_QUEUES (gossip's receiver: routing key worker.#, a celeryev.<uuid> queue)",
    ),
    "kombu.transport.redis:Channel._get_publish_topic": (
        "69b3d67dff46b941",
        "ops/acl.py gossip() and events_and_control() (the pub/sub names the grants spell literally)",
    ),
    "billiard.pool:Pool.apply_async": (
        "aa125dcd2057ea67",
        "pool.apply_async (the job is in _cache before send_job pickles it; a failure raises to the caller)",
    ),
    "celery.concurrency.asynpool:AsynPool._create_write_handlers": (
        "f5f9b8dc805bea71",
        "pool.apply_async (send_job pickles the job inside apply_async)",
    ),
    "celery.worker.worker:WorkController._process_task_sem": (
        "2b2de9af8a8dc818",
        "pool._not_sent (the semaphore slot taken per job, given back when a job is not sent)",
    ),
    "celery.worker.request:create_request_cls": (
        "871f30fe1cfee4bf",
        "request.GuardedRequest (Celery subclasses task.Request; error_callback is its on_failure)",
    ),
    "celery.worker.state:task_ready": ("ad25f2985520adf2", "request.refuse_message (forgets a refused Request)"),
    "billiard.pool:Worker._do_exit": (
        "4dcc35c9d032e551",
        "signals.end_an_exiting_child_promptly (os._exit past the DEATH message and the 1 s wait for TERM)",
    ),
    "celery.concurrency.prefork:process_initializer": (
        "15a8b226f8e00eee",
        "signals.ignore_term_in_children (Celery resets a child's signals, then sends worker_process_init)",
    ),
    "kombu.transport.virtual.base:Transport._deliver": (
        "799e242f3ec53863",
        "transport.Channel.deliver (reproduced: the consumer's callback, or a requeue without one)",
    ),
    "kombu.transport.virtual.base:Message.__init__": (
        "c90d08ccfa2e3e9a",
        "transport.ScreenedMessage (the payload it is given is the envelope it keeps)",
    ),
    "kombu.transport.redis:QoS.reject": ("747a02434344d1a6", "qos.QoS.reject (a refused requeue stays unacked)"),
    "kombu.transport.redis:QoS.restore_by_tag": (
        "58e161d81b6fe18d",
        "qos.QoS.reject (what a requeue writes); qos.QoS.restore_by_tag (what it raises on a bad record)",
    ),
    "kombu.transport.redis:QoS.restore_visible": (
        "d4a4a40a3eaf9f23",
        "leases.py (the sweep that returns expired messages)",
    ),
    "kombu.transport.virtual.base:QoS.ack": (
        "0714292b916fecb2",
        "qos.QoS.reject and leave_for_sweep (forget a message locally)",
    ),
    "kombu.transport.virtual.base:QoS.get": ("b99aaf41bc131b9b", "qos.QoS.holds (KeyError: not delivered)"),
    "kombu.transport.virtual.base:QoS.can_consume_max_estimate": (
        "936d3958266c68d3",
        "qos.QoS.held_count (the prefetch window less what is delivered and not acked)",
    ),
    "celery.concurrency.asynpool:AsynPool.flush": (
        "a7671d710b578e35",
        "pool.LastTaskAwareAsynPool.flush (keeps jobs in a pipe)",
    ),
    "celery.concurrency.asynpool:AsynPool.on_job_ready": (
        "89e682c38efd28a1",
        "pool.on_job_ready (no job to a leaving child)",
    ),
    "celery.concurrency.asynpool:AsynPool._join_exited_workers": (
        "c9b857c8a7980f66",
        "pool.register_with_event_loop (billiard's reaping calls on_process_down once per exited child)",
    ),
    "celery.concurrency.asynpool:AsynPool._create_process_handlers": (
        "77e644289366a15d",
        "pool.register_with_event_loop (Celery sets on_process_down there; we wrap it to count exits)",
    ),
    "celery.concurrency.asynpool:AsynPool.register_with_event_loop": (
        "d4b2530818da7355",
        "pool.register_with_event_loop",
    ),
    "billiard.pool:Pool.terminate_job": ("253a1e66a42f9317", "pool.terminate_job (TERM becomes SIGKILL)"),
    "billiard.pool:Pool.maintain_pool": ("3b0ca04517609293", "pool._replace_when_gone (reaps a leaving child)"),
    "billiard.pool:Worker.workloop": (
        "ce4a856cce2b9e10",
        "recycling.RecyclingWorker (the loop reads self.maxtasks and self.wait_for_job once, then calls it "
        "before each job; a sys.exit there ends the loop through its finally)",
    ),
    "billiard.pool:Worker.after_fork": (
        "2210e993814bfebb",
        "recycling.RecyclingWorker.on_loop_start (after_fork runs worker_process_init first)",
    ),
    "billiard.pool:Worker.__call__": (
        "7ac3400e5a1cd31d",
        "recycling.RecyclingWorker (order: _make_child_methods, after_fork, on_loop_start, workloop; "
        "sys.exit patched to keep the exit code for _do_exit)",
    ),
    "billiard.pool:Worker._make_child_methods": (
        "77aa0671e34149a7",
        "recycling.RecyclingWorker.on_loop_start (wraps the wait_for_job this sets before the hook runs)",
    ),
    "celery.concurrency.asynpool:Worker.on_loop_start": (
        "6ac575c063cd7a2a",
        "recycling.RecyclingWorker.on_loop_start (calls it: WORKER_UP)",
    ),
    "celery.worker.strategy:default": ("7d90575ada5eb1dc", "strategy.strategy (wraps Celery's default strategy)"),
    "celery.app.trace:build_tracer": (
        "b2945aec38e1872e",
        "batch_job.run_batch and result_backend (Reject out of mark_as_done); worker/celery_ext/request.py "
        "GuardedTask.before_start (called inside the tracer's try: its InvalidInput is the task's FAILURE)",
    ),
    "celery.worker.request:Request.on_failure": (
        "21736ec661cd60d7",
        "result_backend (Reject with requeue is requeued)",
    ),
    "celery.worker.request:Request.terminate": (
        "5ee69325b498e311",
        "pool.terminate_job; request.GuardedRequest.terminate (calls it, then ends a batched task's job)",
    ),
    "celery.worker.request:Request.cancel": (
        "5078dd292fc6769d",
        "request.GuardedRequest.cancel (calls it, then ends a batched task's job)",
    ),
    "celery.concurrency.prefork:TaskPool._get_info": (
        "22514681e3ca36b5",
        "control._children (the pids its public `info` lists)",
    ),
    "celery.backends.base:Backend.store_result": ("2e526cc38f605e82", "result_backend.ResultBackend.store_result"),
    "celery.backends.base:BaseKeyValueStoreBackend._store_result": (
        "c0214af4c66e2999",
        "result_backend.ResultStore._store_result (its read-then-write, redone as one Lua script)",
    ),
    "celery.backends.base:Backend._get_result_meta": (
        "11e2894927939e70",
        "result_backend.ResultStore._encoded_state (the meta it builds)",
    ),
    "celery.backends.redis:RedisBackend._set": (
        "93cac55f65fd7b4a",
        "result_backend (SET with lifetime and PUBLISH: in the Lua script, and reproduced for big values)",
    ),
    "celery.backends.redis:RedisBackend.set": (
        "807be0ea0213ba59",
        "result_backend.ResultStore._encoded_state (size limit, ensure)",
    ),
    "celery.backends.redis:RedisBackend._set_with_state": (
        "382faab236b68f16",
        "result_backend.ResultStore._encoded_state (FAILURE's lifetime)",
    ),
    "celery.worker.consumer.consumer:Consumer.on_send_event_buffered": (
        "0429cadc8bf9dc54",
        "worker/celery_ext/task_events.py (replaced by a timer)",
    ),
    "celery.worker.consumer.events:Events.start": (
        "5dafa048a5f8bb39",
        "worker/celery_ext/task_events.py (the dispatcher it builds, its on_send_buffered hook)",
    ),
    "celery.events.dispatcher:EventDispatcher.send": (
        "eb70b87b4c68ed01",
        "worker/celery_ext/task_events.py (buffer_limit, on_send_buffered)",
    ),
    "celery.events.dispatcher:EventDispatcher.flush": (
        "4e9a6b4ec6a95ddb",
        "worker/celery_ext/task_events.py (publishes a buffer as one task.multi)",
    ),
    "kombu.transport.redis:SentinelChannel._sentinel_managed_pool": (
        "bde54a2d6e93ac13",
        "transport.SentinelChannel (the screening channel on kombu's Sentinel pool)",
    ),
    "kombu.transport.redis:SentinelChannel._get_pool": ("6abc6e5c81e1880c", "transport.SentinelChannel"),
    "celery.backends.redis:SentinelBackend._params_from_url": (
        "8a087ec5d320ea5c",
        "result_backend.SentinelResultBackend (how REDIS_URL's sentinels are read)",
    ),
    "celery.backends.redis:SentinelBackend._get_sentinel_instance": (
        "2856638a7bfaef7f",
        "result_backend.SentinelResultBackend",
    ),
    "celery.backends.redis:SentinelBackend._get_pool": ("eba0a0422c5ac546", "result_backend.SentinelResultBackend"),
    "celery.bin.celery:celery.callback": (
        "f635735d53b276e9",
        "ops/worker_launch.py (the context the umbrella's callback builds for -A: app, user options, NO_COLOR)",
    ),
    "celery.bin.celery:main": (
        "0204581f5c96a470",
        "ops/worker_launch.py (auto_envvar_prefix CELERY, so CELERY_WORKER)",
    ),
    "celery.__main__:main": ("c04d81b70332eb03", "ops/worker_launch.py (maybe_patch_concurrency before the command)"),
    "celery.bin.worker:worker.callback": (
        "20bbae1a8e3509c3",
        "ops/worker_launch.py (reads ctx.obj.app, no_color, quiet; --detach re-runs `python -m celery`)",
    ),
    "celery.bin.base:CLIContext.__init__": ("46469f35cb413f14", "ops/worker_launch.py (the context object it builds)"),
    "kombu.transport.redis:Channel._receive_one": (
        "d59b8751d89757dc",
        "celery_ext/mingle.py (an empty pub/sub payload is dropped unread: counting listeners costs them nothing)",
    ),
    "kombu.pidbox:Mailbox._get_exchange": ("e52b72e2622aef14", "keys.CONTROL_BROADCAST_CHANNEL (<namespace>.pidbox)"),
    "celery.worker.consumer.mingle:Mingle.__init__": (
        "1b4339cd4174241e",
        "consumer.Consumer.__init__ (without_mingle from worker_options turns the step off)",
    ),
    "celery.worker.consumer.mingle:Mingle.send_hello": (
        "4320ff9fff025ca8",
        "celery_ext/mingle.py (the fixed one-second wait it saves a worker with nobody to answer)",
    ),
    "celery.worker.consumer.consumer:Consumer.__init__": (
        "c27ca6ec2d4bbfe4",
        "consumer.Consumer.__init__ (worker_options reach the blueprint's steps)",
    ),
    "pytest_celery.api.base:CeleryTestNode": ("4304263deaa8883f", "tests/support/celery_nodes.py (what a node reads)"),
    "pytest_celery.api.worker:CeleryTestWorker": ("c9cf1a8271146d2d", "tests/support/celery_nodes.py (worker node)"),
    "pytest_celery.api.setup:CeleryTestSetup.ready": ("769d164bdb52008e", "tests/support/celery_nodes.py (readiness)"),
}


def resolve(target: str) -> object:
    module_name, qualified = target.split(":")
    obj: object = importlib.import_module(module_name)
    for part in qualified.split("."):
        obj = getattr(obj, part)
    return obj


def fingerprint(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def drifted(pins: dict[str, tuple[str, str]], source_of: Callable[[str], str]) -> list[str]:
    """One line per pinned function whose source no longer hashes to its pin, naming our override."""
    return [
        f"{target} changed (pinned {pin}, now {fingerprint(source_of(target))}): re-check {override}"
        for target, (pin, override) in pins.items()
        if fingerprint(source_of(target)) != pin
    ]


def upstream_source(target: str) -> str:
    return inspect.getsource(resolve(target))  # type: ignore[arg-type]


def test_no_upstream_function_we_lean_on_has_changed():
    """Every pinned upstream source hashes as recorded (celery 5.7.0, kombu 5.7.0, billiard 4.3.2,
    pytest-celery 1.3.0, as pyproject.toml pins them)."""
    assert drifted(PINNED, upstream_source) == []


def test_the_canary_names_the_override_when_an_upstream_source_changes():
    """Fed a changed source, the check fails and says which of our overrides to re-check."""
    target = "kombu.transport.redis:QoS.append"

    def changed(name: str) -> str:
        source = upstream_source(name)
        return source + "\n# a patch release touched this\n" if name == target else source

    [line] = drifted(PINNED, changed)
    assert line.startswith(f"{target} changed") and "qos.QoS.append" in line
