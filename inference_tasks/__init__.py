"""inference_tasks: Celery workers that embed and classify texts, with native threads pinned per child.

The app is re-exported here so `celery -A inference_tasks worker` works. Importing this package
must stay light (no torch): producers, Flower and the CLI import it.
"""

from inference_tasks import signals  # noqa: F401 - connects the worker lifecycle hooks
from inference_tasks.app import app, create_app
from inference_tasks.config import Settings

celery = app

__all__ = ["Settings", "app", "celery", "create_app"]
