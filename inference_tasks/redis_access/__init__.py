"""Producer-safe Redis access, imported by producers, the CLI and workers alike: the keys we own, one
client per process and URL, queue state (depths, unacked, dead letters, recent failures) and how a
full Redis is recognised. Nothing here imports Celery's worker, kombu's transport or worker code.
"""
