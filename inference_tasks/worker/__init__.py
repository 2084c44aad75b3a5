"""The worker process: lifecycle hooks, thread pinning, the model holder, the prefork pool, recycling and
remote control. Imported only by a process running this project's worker (app.TASK_MODULES pulls
in worker.signals); producers, Flower and the CLI never import it.
"""
