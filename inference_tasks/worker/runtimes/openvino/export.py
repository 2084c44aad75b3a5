"""`inference-tasks export-model --backend openvino`: export the configured model to OpenVINO IR, once,
offline, into the model cache, where workers with INFERENCE_BACKEND=openvino read it.

Done as a deploy step (setup.sh, an image build) rather than by a worker at start: converting
traces the model with a torch forward pass, which must never run in a worker's main process (it
forks afterwards), and a step that can fail belongs before the deploy, not in every restart.
Idempotent: an existing complete export of the same model files is kept (`--force` redoes it);
the export is written beside its final place and renamed into it, so a crash never leaves a
half export that a worker would load.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.export_files import MANIFEST_FILE, Export, export_served_model, write_export
from inference_tasks.worker.runtimes.openvino.export_paths import (
    FRAMEWORK_WEIGHTS,
    IR_FILE,
    export_path,
    int8_export_path,
    is_exported,
    quantized_by,
)
from inference_tasks.worker.runtimes.openvino.int8_recipe import Int8Recipe, recipe_digest

if TYPE_CHECKING:
    from inference_tasks.config import Settings

# Token sequences of two lengths, so the traced graph keeps batch and sequence dimensions dynamic.
EXAMPLE_TEXTS = ["an example", "a second, somewhat longer example text"]
# Texts per int8 calibration batch (_quantize): the corpus's texts in its own order, padded per batch as served.
CALIBRATION_BATCH = 8


def export_openvino(settings: Settings, force: bool = False) -> Export:
    """The OpenVINO export of the served model (INFERENCE_MODEL) under settings.model_cache_dir, made if missing."""

    def convert(model: str, source: Path, staging: Path) -> dict[str, Any]:
        _convert(source, staging / IR_FILE)
        return {
            "model": model,
            "alias": settings.served_model.alias,
            "source": str(source),
            "backend": "openvino",
            "openvino": _openvino_version(),
        }

    ignore = shutil.ignore_patterns(*FRAMEWORK_WEIGHTS)
    return export_served_model(settings, export_path, is_exported, convert, ignore, force)


def export_openvino_int8(settings: Settings, force: bool = False) -> Export:
    """The int8 export of the served model: the full-precision export (made first if missing) quantized
    by NNCF's post-training static quantization, calibrated on the package's calibration corpus.

    Static: every scale is fixed here, so a text's vector never depends on its batch-mates (dynamic
    int8 rescales per batch). Deterministic: the same corpus in the same order gives the same scales.
    An export quantized by another recipe (an older release's) is redone, so an upgrade's export-model
    serves the current recipe. `force` redoes the quantization only.
    """
    from inference_tasks.worker.runtimes.model_files import resolve_model_path

    base = export_openvino(settings)
    model = settings.served_model.source
    target = int8_export_path(model, resolve_model_path(model), settings.model_cache_dir)
    recipe = Int8Recipe()
    if is_exported(target) and quantized_by(target) == recipe_digest(recipe) and not force:
        return Export(target, False, 0.0)
    return quantize_export(base.path, target, recipe)


def quantize_export(base: Path, target: Path, recipe: Int8Recipe) -> Export:
    """The full-precision export at `base` quantized by NNCF with `recipe` into a complete export at `target`."""

    def quantize(staging: Path) -> dict[str, Any]:
        calibration = _quantize(base, staging / IR_FILE, recipe)
        return {
            **json.loads((base / MANIFEST_FILE).read_text()),
            "precision": "int8",
            "quantized_from": str(base),
            "nncf": _nncf_version(),
            "calibration": calibration,
        }

    return write_export(target, base, shutil.ignore_patterns("openvino", MANIFEST_FILE), quantize)


def _quantize(export: Path, ir_file: Path, recipe: Int8Recipe) -> dict[str, Any]:
    """Quantize the IR at `export` into `ir_file`; what it was calibrated on, for the manifest."""
    import nncf
    import openvino
    from transformers import AutoTokenizer

    from inference_tasks.ml.corpus import corpus_digest, corpus_texts
    from inference_tasks.worker.runtimes.pipeline_encoder import pipeline_config

    core = openvino.Core()
    model = core.read_model(export / IR_FILE)
    inputs = [port.get_any_name() for port in model.inputs]
    tokenizer = AutoTokenizer.from_pretrained(str(export), local_files_only=True)
    max_length = pipeline_config(export)["max_seq_length"] or tokenizer.model_max_length
    texts = corpus_texts() + list(recipe.extra_calibration)
    batches = []
    for start in range(0, len(texts), CALIBRATION_BATCH):
        tokens = tokenizer(
            [text.strip() for text in texts[start : start + CALIBRATION_BATCH]],
            padding=True, truncation="longest_first", max_length=max_length, return_tensors="np",
        )  # fmt: skip
        batches.append({name: tokens[name] for name in inputs})
    quantized = nncf.quantize(
        model,
        nncf.Dataset(batches),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(batches),
        ignored_scope=nncf.IgnoredScope(patterns=list(recipe.kept_in_float), validate=False),
        advanced_parameters=_advanced_parameters(recipe),
        **({} if recipe.preset is None else {"preset": getattr(nncf.QuantizationPreset, recipe.preset)}),
    )  # fmt: skip
    ir_file.parent.mkdir(parents=True, exist_ok=True)
    openvino.save_model(quantized, ir_file, compress_to_fp16=False)
    return {
        "texts": len(texts), "batches": len(batches), "corpus": corpus_digest(), "recipe": recipe_digest(recipe),
        "kept_in_float": recipe.kept_in_float,
        **({} if recipe.smooth_quant_alpha is None else {"smooth_quant_alpha": recipe.smooth_quant_alpha}),
        **({"extra_calibration_texts": len(recipe.extra_calibration)} if recipe.extra_calibration else {}),
        **({} if recipe.activation_ranges is None else {"activation_ranges": recipe.activation_ranges}),
        **({} if recipe.preset is None else {"preset": recipe.preset}),
    }  # fmt: skip


def _advanced_parameters(recipe: Int8Recipe) -> Any:
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters
    from nncf.quantization.range_estimator import RangeEstimatorParametersSet

    changed: dict[str, Any] = {}
    if recipe.smooth_quant_alpha is not None:
        changed["smooth_quant_alphas"] = AdvancedSmoothQuantParameters(matmul=recipe.smooth_quant_alpha)
    if recipe.activation_ranges is not None:
        changed["activations_range_estimator_params"] = getattr(RangeEstimatorParametersSet, recipe.activation_ranges)
    return AdvancedQuantizationParameters(**changed)


def _nncf_version() -> str:
    import nncf

    return str(nncf.__version__)


def _convert(source: Path, ir_file: Path) -> None:
    import openvino
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    model = AutoModel.from_pretrained(str(source), local_files_only=True).eval()
    example = tokenizer(EXAMPLE_TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        converted = openvino.convert_model(model, example_input=dict(example))
    converted.outputs[0].get_tensor().set_names({"last_hidden_state"})
    ir_file.parent.mkdir(parents=True, exist_ok=True)
    # Full-precision weights: the precision is chosen when each child compiles (INFERENCE_OPENVINO_PRECISION).
    openvino.save_model(converted, ir_file, compress_to_fp16=False)


def _openvino_version() -> str:
    import openvino

    return openvino.__version__
