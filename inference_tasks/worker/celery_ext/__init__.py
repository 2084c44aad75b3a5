"""Our extensions of Celery's prefork pool, task request and consumer (each override pinned and listed in
docs/upstream.md)."""
