"""A worker's life: the one context built at start, Celery's signal hooks, child records and recycling,
remote control, readiness state and the checks run before serving."""
