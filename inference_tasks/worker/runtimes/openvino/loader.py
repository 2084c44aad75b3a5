"""Loading a dense encoder on OpenVINO: the export of the served model, in the precision measured fastest
on this host (or the one INFERENCE_OPENVINO_PRECISION names), read but never compiled (safe before a fork)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference_tasks.worker.runtimes.model_files import resolve_model_path

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

# What the worker's main process imports for this runtime (tokenizers: runtimes/json_tokenizer.py).
IMPORTS = ("openvino", "tokenizers")


def load_dense_encoder(source: str, device: str, options: LoadOptions) -> DenseEncoder:
    from inference_tasks.worker.runtimes.openvino.export_paths import served_export_path
    from inference_tasks.worker.runtimes.openvino.openvino_encoder import OpenVinoEncoder
    from inference_tasks.worker.runtimes.openvino.precision_choice import served_precision

    if options.cache is None:
        raise ValueError("the OpenVINO backend needs the model cache directory (INFERENCE_MODEL_CACHE)")
    path = resolve_model_path(source)
    choice = served_precision(options.precision, source, path, options.cache)
    encoder = OpenVinoEncoder(
        source, served_export_path(source, path, options.cache, choice.precision), choice.precision
    )
    encoder.precision_choice = choice.as_dict()
    return encoder
