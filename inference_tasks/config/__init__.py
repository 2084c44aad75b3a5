"""Configuration: Settings read once from the environment (settings.py), its defaults (defaults.py) and
checks (checks.py), and the model catalogue (catalogue.py). `from inference_tasks.config import Settings`
is the public way in.
"""

from inference_tasks.config.checks import ConfigError
from inference_tasks.config.settings import Settings, load_settings

__all__ = ["ConfigError", "Settings", "load_settings"]
