"""Redis as Celery's broker and result store: the screening transport and its QoS, message envelopes
and their bounds, dead-lettering, leases, Sidekiq/ActiveJob replies and the result backend.

Celery loads the transport and the result backend by name (app.py) in every process that sends or
reads tasks; the rest runs in workers. Producer-side Redis helpers are in redis_access/.
"""
