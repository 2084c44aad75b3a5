"""How a worker's settings ask a runtime to load a model, as one value every runtime's loader takes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inference_tasks.config import Settings


@dataclass(frozen=True)
class LoadOptions:
    """The runtime that runs a model and what that runtime reads of the settings: the model cache
    (exports, INFERENCE_MODEL_CACHE), the OpenVINO precision and the torch engine."""

    runtime: str = "torch"
    cache: Path | None = None
    precision: str = "auto"
    torch_engine: str = "auto"
    # OpenVINO: the one-text static shapes to compile beside the dynamic model (the auto runtime asks for
    # openvino_encoder.SHAPE_BUCKETS; an explicit INFERENCE_BACKEND=openvino worker compiles none).
    shape_buckets: tuple[int, ...] = ()

    @classmethod
    def of(cls, settings: Settings) -> LoadOptions:
        """The options of the model `settings` serve (its runtime: the catalogue entry's, else INFERENCE_BACKEND)."""
        return cls(settings.model_backend, settings.model_cache_dir, settings.openvino_precision, settings.torch_engine)
