"""The committed table of model shapes (data/model-shapes.yaml), read by one typed loader.

Preflight's tensor-parallel rules and the GPU-memory planner read layers, widths and head
counts from here instead of downloading a config.json: both run before any resource exists.
Base and -Instruct checkpoints of one size share a shape, so either id finds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

SHAPES_FILE = Path(__file__).resolve().parents[2] / "data" / "model-shapes.yaml"
_INSTRUCT_SUFFIX = "-instruct"


@dataclass(frozen=True)
class ModelShape:
    model: str                      # Hugging Face id as the table spells it
    architecture: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    parameters: int                 # counted from the shape (see parameter_count)
    card_parameters_billions: float
    source: str

    @property
    def kv_bytes_per_token(self) -> int:
        """bf16 K and V of every layer for one token, before tensor parallelism."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


def parameter_count(*, layers: int, hidden_size: int, attention_heads: int, kv_heads: int,
                    intermediate_size: int, vocab_size: int, tie_word_embeddings: bool) -> int:
    """Parameters of a Qwen2ForCausalLM (transformers' modeling_qwen2.py): q/k/v projections
    with bias, o_proj without, a SwiGLU MLP of three matrices, two RMSNorms a layer, one final
    norm, the embedding, and an LM head unless it is tied to the embedding."""
    head_dim = hidden_size // attention_heads
    kv_width = kv_heads * head_dim
    attention = (hidden_size * hidden_size + hidden_size          # q_proj + bias
                 + 2 * (hidden_size * kv_width + kv_width)        # k_proj, v_proj + bias
                 + hidden_size * hidden_size)                     # o_proj
    mlp = 3 * hidden_size * intermediate_size
    per_layer = attention + mlp + 2 * hidden_size
    embedding = vocab_size * hidden_size
    head = 0 if tie_word_embeddings else vocab_size * hidden_size
    return layers * per_layer + hidden_size + embedding + head


def _key(model: str) -> str:
    key = model.strip().lower()
    return key[: -len(_INSTRUCT_SUFFIX)] if key.endswith(_INSTRUCT_SUFFIX) else key


@lru_cache(maxsize=4)
def load_model_shapes(path: Path | None = None) -> dict[str, ModelShape]:
    """Every shape of the table, keyed by the lower-case Hugging Face id (as written there)."""
    document = yaml.safe_load((path or SHAPES_FILE).read_text(encoding="utf-8"))
    source = f"{document['source']} (read {document['read']})"
    shapes: dict[str, ModelShape] = {}
    for model, row in document["models"].items():
        dimensions = {name: int(row[name]) for name in (
            "layers", "hidden_size", "attention_heads", "kv_heads", "intermediate_size", "vocab_size")}
        tied = bool(row["tie_word_embeddings"])
        shapes[model.lower()] = ModelShape(
            model=model, architecture=str(row["architecture"]), **dimensions,
            head_dim=dimensions["hidden_size"] // dimensions["attention_heads"],
            tie_word_embeddings=tied,
            max_position_embeddings=int(row["max_position_embeddings"]),
            parameters=parameter_count(**dimensions, tie_word_embeddings=tied),
            card_parameters_billions=float(row["card_parameters_billions"]),
            source=source)
    return shapes


def shape_for(model: str) -> ModelShape | None:
    """The shape of `model` ("Qwen/Qwen2.5-7B" and "Qwen/Qwen2.5-7B-Instruct" alike), or None."""
    wanted = _key(model)
    for key, shape in load_model_shapes().items():
        if _key(key) == wanted:
            return shape
    return None
