"""A BERT encoder in plain torch, read straight from a model directory's config.json and model.safetensors.

Why: importing sentence-transformers (with transformers and scikit-learn) was ~4.5 s of a torch
worker's ~5.4 s cold start (docs/benchmarks-log.md, "Cold start per runtime"); torch alone is ~1 s. The
models this project serves by default are BERT encoders (all-MiniLM-L6-v2 and most of its kind), whose
forward pass is a few lines: embeddings (word + position + token type, LayerNorm), then per layer
self-attention and a GELU feed-forward block, each with a residual connection and LayerNorm.
Submodules carry transformers' names, so the checkpoint's state dict loads as it is.

Only what this module reproduces exactly is accepted (`unsupported` says why not, and the caller falls
back to sentence-transformers): model_type "bert", absolute positions, GELU (erf), and a
sentence-transformers directory of Transformer, Pooling and optionally Normalize. Held equal to
sentence-transformers' own vectors by tests/worker/test_native_bert.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from inference_tasks.worker.runtimes.pipeline_encoder import (
    NORMALIZE_MODULE,
    POOLING_MODULE,
    TRANSFORMER_MODULE,
    pipeline_config,
    read_json,
)

WEIGHTS_FILE = "model.safetensors"
SUPPORTED_MODULES = ({TRANSFORMER_MODULE, POOLING_MODULE}, {TRANSFORMER_MODULE, POOLING_MODULE, NORMALIZE_MODULE})
# Checkpoint entries the encoder does not use: BERT's pooler head and the position-id buffer.
UNUSED_PREFIXES = ("pooler.", "embeddings.position_ids")


def unsupported(path: Path) -> str | None:
    """Why the model at `path` cannot run on this module (None: it can)."""
    config = read_json(path / "config.json", {})
    if config.get("model_type") != "bert":
        return f"model_type {config.get('model_type')!r} is not 'bert'"
    if config.get("hidden_act", "gelu") != "gelu":
        return f"hidden_act {config.get('hidden_act')!r} is not 'gelu'"
    if config.get("position_embedding_type", "absolute") != "absolute":
        return f"position_embedding_type {config.get('position_embedding_type')!r} is not 'absolute'"
    if not (path / WEIGHTS_FILE).is_file():
        return f"no {WEIGHTS_FILE}"
    if not (path / "tokenizer.json").is_file():
        return "no tokenizer.json"
    try:
        modules = pipeline_config(path)["modules"]
    except ValueError as error:
        return str(error)
    if set(modules) not in SUPPORTED_MODULES or len(modules) != len(set(modules)):
        return f"its modules are {modules}, not Transformer, Pooling and optionally Normalize"
    return None


@dataclass(frozen=True)
class Shape:
    """The encoder's sizes, from config.json (transformers' BertConfig keys)."""

    vocab: int
    hidden: int
    heads: int
    layers: int
    intermediate: int
    positions: int
    token_types: int
    eps: float

    @classmethod
    def of(cls, config: dict[str, Any]) -> Shape:
        return cls(
            int(config["vocab_size"]), int(config["hidden_size"]), int(config["num_attention_heads"]),
            int(config["num_hidden_layers"]), int(config["intermediate_size"]),
            int(config["max_position_embeddings"]), int(config.get("type_vocab_size", 2)),
            float(config.get("layer_norm_eps", 1e-12)),
        )  # fmt: skip


class Linear(nn.Linear):
    """nn.Linear without its random initialisation: `load` assigns every weight from the checkpoint
    (strict), so drawing ~22 M random numbers first was a tenth of a second of every cold start."""

    def reset_parameters(self) -> None:
        pass


class Embedding(nn.Embedding):
    """nn.Embedding without its random initialisation (see Linear)."""

    def reset_parameters(self) -> None:
        pass


class Embeddings(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.word_embeddings = Embedding(shape.vocab, shape.hidden)
        self.position_embeddings = Embedding(shape.positions, shape.hidden)
        self.token_type_embeddings = Embedding(shape.token_types, shape.hidden)
        self.LayerNorm = nn.LayerNorm(shape.hidden, eps=shape.eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        summed = self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
        return self.LayerNorm(summed + self.token_type_embeddings(token_type_ids))


class Projection(nn.Module):
    """transformers' BertSelfOutput and BertOutput: dense, then LayerNorm of it plus the residual."""

    def __init__(self, inputs: int, shape: Shape) -> None:
        super().__init__()
        self.dense = Linear(inputs, shape.hidden)
        self.LayerNorm = nn.LayerNorm(shape.hidden, eps=shape.eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class SelfAttention(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.heads = shape.heads
        self.query = Linear(shape.hidden, shape.hidden)
        self.key = Linear(shape.hidden, shape.hidden)
        self.value = Linear(shape.hidden, shape.hidden)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        batch, length, hidden = x.shape

        def split(projected: torch.Tensor) -> torch.Tensor:
            return projected.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)

        context = functional.scaled_dot_product_attention(
            split(self.query(x)), split(self.key(x)), split(self.value(x)), attn_mask=keep
        )
        return context.transpose(1, 2).reshape(batch, length, hidden)


class Attention(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.self = SelfAttention(shape)
        self.output = Projection(shape.hidden, shape)


class Intermediate(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.dense = Linear(shape.hidden, shape.intermediate)


class Layer(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.attention = Attention(shape)
        self.intermediate = Intermediate(shape)
        self.output = Projection(shape.intermediate, shape)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        attended = self.attention.output(self.attention.self(x, keep), x)
        return self.output(functional.gelu(self.intermediate.dense(attended)), attended)


class Encoder(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer(shape) for _ in range(shape.layers))


class Bert(nn.Module):
    """The encoder: the last hidden states for a padded batch (no pooler)."""

    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.embeddings = Embeddings(shape)
        self.encoder = Encoder(shape)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        keep = attention_mask.bool()[:, None, None, :]  # every query attends to the real tokens only
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.encoder.layer:
            x = layer(x, keep)
        return x


def load(path: Path) -> Bert:
    """The encoder of the model at `path`, its weights as float32, in eval mode (no forward pass run)."""
    from safetensors.torch import load_file

    model = Bert(Shape.of(read_json(path / "config.json", {})))
    weights = {name.removeprefix("bert."): tensor for name, tensor in load_file(path / WEIGHTS_FILE).items()}
    used = {name: tensor.to(torch.float32) for name, tensor in weights.items() if not name.startswith(UNUSED_PREFIXES)}
    model.load_state_dict(used, strict=True, assign=True)  # strict: no parameter keeps its empty memory
    return model.eval().requires_grad_(False)
