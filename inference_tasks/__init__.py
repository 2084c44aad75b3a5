"""inference_tasks: Celery workers that embed and classify texts, with native threads pinned per child.

The app is re-exported here so `celery -A inference_tasks worker` works. Importing this package
must stay light and side-effect free: producers, Flower and the CLI import it, so it imports no
torch and connects no worker hook. The hooks (signals.py) are connected only in a process that
runs this project's worker: Celery's worker imports the app's `include` modules, signals.py
first, before it sends `worker_init`.
"""

from inference_tasks.app import app, create_app
from inference_tasks.config import Settings

celery = app

__all__ = ["Settings", "app", "celery", "create_app"]
