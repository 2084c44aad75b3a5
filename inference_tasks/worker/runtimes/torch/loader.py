"""Loading models on torch: a dense encoder (the native BERT encoder where it applies, else
sentence-transformers), a cross-encoder's pair scorer and a SPLADE sparse encoder, each loaded but never run."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from inference_tasks.worker.runtimes.model_files import resolve_model_path

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder, PairScorer, SparseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

logger = logging.getLogger(__name__)

# What the worker's main process imports for this runtime (sentence-transformers only when a model the
# native encoder does not take is loaded: it brings transformers and scikit-learn, ~4 s of a cold start).
IMPORTS = ("torch", "tokenizers")


def load_dense_encoder(source: str, device: str, options: LoadOptions) -> DenseEncoder:
    """A BERT model runs on this project's own encoder (native_bert.py: no sentence-transformers import,
    ~4 s less of a cold start) unless INFERENCE_TORCH_ENGINE=sentence-transformers; a model it does not
    take falls back to sentence-transformers, and the reason is logged."""
    from inference_tasks.worker.runtimes.torch.sentence_transformer_encoder import SentenceTransformerEncoder

    path = resolve_model_path(source)
    if options.torch_engine == "auto":
        from inference_tasks.worker.runtimes.torch import native_bert

        if (reason := native_bert.unsupported(path)) is None:
            from inference_tasks.worker.runtimes.torch.native_bert_encoder import NativeBertEncoder

            return NativeBertEncoder(source, path, device)
        logger.info("model %s runs on sentence-transformers, not the native BERT encoder: %s", source, reason)
    return SentenceTransformerEncoder(source, path, device)


def load_pair_scorer(source: str, device: str) -> PairScorer:
    """A sentence-transformers CrossEncoder (catalogue kind "cross-encoder")."""
    from inference_tasks.worker.runtimes.torch.cross_encoder_scorer import CrossEncoderScorer

    return CrossEncoderScorer(source, resolve_model_path(source), device)


def load_sparse_encoder(source: str, device: str) -> SparseEncoder:
    """A sentence-transformers SparseEncoder, SPLADE (catalogue kind "sparse")."""
    from inference_tasks.worker.runtimes.torch.sparse_encoder import SpladeEncoder

    return SpladeEncoder(source, resolve_model_path(source), device)
