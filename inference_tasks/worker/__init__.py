"""The worker process, in layers (each imports only the layers above it in this list; tests/unit/test_layout.py
holds the order): host/ (what the machine offers: cores, threads, GPUs), runtimes/ (one folder per
runtime that runs models, and the capabilities a loaded model offers), kinds/ (what each catalogue kind
does: load, warm up, share a pass, guard tasks; the model holder), lifecycle/ (the worker context,
signal hooks, recycling, remote control),
celery_ext/ (our extensions of Celery's pool, request and consumer), batching/ (micro-batching) and
tasks/ (the public tasks). Imported only by a process running this project's worker
(app.TASK_MODULES pulls in worker.lifecycle.signals); producers, Flower and the CLI never import it.
"""
