"""The model-shape table: every row is self-consistent and agrees with its model card."""

from __future__ import annotations

import pytest
import yaml

from jobs.plan.model_shapes import SHAPES_FILE, load_model_shapes, parameter_count, shape_for

SIZES = ("0.5B", "1.5B", "3B", "7B", "14B", "32B", "72B")


def test_table_covers_qwen25_half_to_72b():
    models = {shape.model for shape in load_model_shapes().values()}
    assert {f"Qwen/Qwen2.5-{size}-Instruct" for size in SIZES} <= models


@pytest.mark.parametrize("shape", list(load_model_shapes().values()), ids=lambda s: s.model)
def test_counted_parameters_match_the_model_card(shape):
    # A mistyped width or layer count moves the count by far more than the card's rounding.
    assert shape.parameters / 1e9 == pytest.approx(shape.card_parameters_billions, rel=0.01)


@pytest.mark.parametrize("shape", list(load_model_shapes().values()), ids=lambda s: s.model)
def test_heads_are_consistent(shape):
    assert shape.hidden_size % shape.attention_heads == 0
    assert shape.attention_heads % shape.kv_heads == 0


def test_qwen25_7b_count_is_exact():
    # 7,615,616,512: the count the 7B model card rounds to 7.61B (6.53B non-embedding).
    assert shape_for("Qwen/Qwen2.5-7B-Instruct").parameters == 7_615_616_512
    assert parameter_count(layers=28, hidden_size=3584, attention_heads=28, kv_heads=4,
                           intermediate_size=18944, vocab_size=152064,
                           tie_word_embeddings=False) == 7_615_616_512


def test_base_and_instruct_share_a_shape_and_lookup_ignores_case():
    assert shape_for("Qwen/Qwen2.5-32B") is shape_for("qwen/qwen2.5-32b-instruct")
    assert shape_for("Qwen/Qwen2.5-32B").kv_heads == 8
    assert shape_for("Qwen/Qwen2.5-32B").kv_bytes_per_token == 256 * 1024  # grpo-frameworks.md


def test_unknown_model_has_no_shape():
    assert shape_for("meta-llama/Llama-3.1-8B") is None


def test_every_row_names_its_source():
    document = yaml.safe_load(SHAPES_FILE.read_text())
    assert document["source"] and document["read"]
    assert all(shape.source for shape in load_model_shapes().values())
