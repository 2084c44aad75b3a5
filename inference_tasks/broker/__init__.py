"""Everything that talks to Redis as broker and result store: the screening transport, message
envelopes, leases, Sidekiq/ActiveJob replies, the result backend, queue state and the keys we own.
"""
