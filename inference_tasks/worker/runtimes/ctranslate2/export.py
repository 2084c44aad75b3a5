"""`inference-tasks export-model --backend ctranslate2`: convert the configured model to CTranslate2's
format with int8 weights, once, offline, into the model cache.

CTranslate2's own converter reads the model through transformers (a torch load, no forward pass) and
writes model.bin; the export directory keeps the model's tokenizer and sentence-transformers configs
beside it, so tokenizing and pooling are the same as on every other runtime (pipeline_encoder.py).
Converters exist for BERT-family encoders (BERT, DistilBERT, XLM-RoBERTa...); another architecture
fails here with CTranslate2's own message, and the auto runtime then chooses among the others.
"""

from __future__ import annotations

import shutil
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.ctranslate2.export_paths import COMPUTE_TYPE, MODEL_DIR, export_path, is_exported
from inference_tasks.worker.runtimes.export_files import Export, export_served_model
from inference_tasks.worker.runtimes.model_files import WEIGHT_FILES

if TYPE_CHECKING:
    from inference_tasks.config import Settings


def export_ctranslate2(settings: Settings, force: bool = False) -> Export:
    """The CTranslate2 export of the served model (INFERENCE_MODEL) under settings.model_cache_dir, made if missing."""

    def convert(model: str, source: Path, staging: Path) -> dict[str, Any]:
        from ctranslate2.converters import TransformersConverter

        TransformersConverter(str(source)).convert(str(staging / MODEL_DIR), quantization=COMPUTE_TYPE, force=True)
        return {
            "model": model,
            "alias": settings.served_model.alias,
            "source": str(source),
            "backend": "ctranslate2",
            "compute_type": COMPUTE_TYPE,
            "ctranslate2": metadata.version("ctranslate2"),
        }

    ignore = shutil.ignore_patterns(*WEIGHT_FILES)
    return export_served_model(settings, export_path, is_exported, convert, ignore, force)
