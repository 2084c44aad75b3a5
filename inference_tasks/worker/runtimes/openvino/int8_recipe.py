"""How `export-model` quantizes a model to int8 (export.py), and the digest that names that recipe in
an int8 export's manifest: export-model quantizes again when the digest differs (an upgrade changed
the recipe), and a worker serving an int8 export of another recipe says so (precision_choice.py,
`doctor`). Read by the export command and by the worker."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from inference_tasks.ml.corpus import corpus_digest

# A BERT block's matrix products by their nodes' names in an export (NNCF ignored-scope patterns, matched
# against a whole name; BERT-family names). benchmarks/ times each role by the same patterns.
QUERY_KEY_VALUE = r".*attention\.self\.(query|key|value).*"
ATTENTION_OUTPUT = r".*attention\.output\.dense.*"
FFN_UP = r".*intermediate\.dense.*"
FFN_DOWN = r".*layer\.\d+\.output\.dense.*"
# Kept out of int8, in the runtime's float precision: each layer's feed-forward down-projection
# (`encoder.layer.N.output.dense`; quantized, short texts lose the most) and each attention output
# projection (`attention.output.dense`; quantized, long runs of one repeated token do). Figures:
# docs/benchmarks-log.md, "int8 recipes". A model whose layers are named otherwise is quantized whole there
# (validate=False) and must pass the gate on its own.
KEPT_IN_FLOAT = (FFN_DOWN, ATTENTION_OUTPUT)
# Calibrated on after the package's corpus, so the activation scales also cover long runs of one token.
# No word here is in the gate's repetitive texts (held_out.REPEATED_TOKENS): the gate tests others.
REPEATED_TOKEN_CALIBRATION = ("help " * 90, "asdf " * 150, "z " * 300, "!" * 300, "yes " * 120, "order " * 60)


@dataclass(frozen=True)
class Int8Recipe:
    """How NNCF quantizes an export: the layers kept in the runtime's float precision (name patterns),
    SmoothQuant's alpha for MatMuls (None: NNCF's default for transformers, 0.95; -1: off), the texts
    calibrated on after the corpus, the activation range estimator and the preset. The default is what
    `export-model` builds; benchmarks/int8_recipes.py times others against it on a host."""

    kept_in_float: tuple[str, ...] = KEPT_IN_FLOAT
    smooth_quant_alpha: float | None = None
    # Texts calibrated on after the package's corpus (its scales then cover them too).
    extra_calibration: tuple[str, ...] = REPEATED_TOKEN_CALIBRATION
    # How activation ranges are estimated from the calibration statistics: a RangeEstimatorParametersSet
    # name (MINMAX: the global extremes), or None for NNCF's default.
    activation_ranges: str | None = None
    # NNCF's quantization preset: a QuantizationPreset name (PERFORMANCE: symmetric activations, no zero
    # point to compensate in each int8 product; MIXED: asymmetric), or None for NNCF's default (MIXED for
    # transformers).
    preset: str | None = None


# Knobs added to the recipe after its digest first shipped: each counts only when set, so an export made
# before it (by NNCF's default, what None asks for) keeps its digest and is not quantized again for nothing.
LATER_FIELDS = ("preset",)


def recipe_digest(recipe: Int8Recipe) -> str:
    """A short digest of everything that decides an int8 export's scales: the recipe and the corpus."""
    fields = {name: value for name, value in asdict(recipe).items() if name not in LATER_FIELDS or value is not None}
    text = json.dumps({**fields, "corpus": corpus_digest()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
