"""Every preset reproduces the numbers its tutorial printed, at the printed precision."""

from __future__ import annotations

import pytest
import torch

from attention import compute, presets

NAMES = (
    "raschka-self-attention",
    "raschka-multi-head",
    "raschka-cross-attention",
    "spelled-out-multi-head",
    "math-notes",
    "chef-unweighted",
    "chef-self-attention",
    "chef-causal",
    "chef-multi-head",
    "chef-cross-attention",
    "integer-example",
)


def test_the_presets_are_exactly_the_issues_eleven() -> None:
    assert tuple(presets.PRESETS) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_preset_reproduces_its_printed_numbers(name: str) -> None:
    preset = presets.get(name)
    outcomes = presets.verify(preset)
    assert outcomes, f"{name} checks nothing"
    for o in outcomes:
        computed = o.computed if isinstance(o.computed, tuple) else torch.round(o.computed, decimals=6).tolist()
        assert o.ok, (
            f"{name}: {o.check.label} ({o.check.tensor}{list(o.check.index)}): computed {computed}, "
            f"expected {o.check.expected}, max error {o.max_error:.3g} > tolerance {o.tolerance:.3g}"
        )


@pytest.mark.parametrize("name", NAMES)
def test_preset_has_its_source_and_a_description(name: str) -> None:
    preset = presets.get(name)
    assert preset.source.seed_file[:3] in {"000", "001", "002", "003", "004"}
    assert preset.source.title and len(preset.description) > 40


@pytest.mark.parametrize(
    ("name", "phrases"),
    [
        ("raschka-multi-head", ("every head's query", "dim 0", "cannot be reproduced")),
        ("chef-cross-attention", ("0.59", "0.50")),
        ("chef-multi-head", ("qkv_bias", "False")),
    ],
)
def test_corrections_say_where_the_tutorial_is_wrong(name: str, phrases: tuple[str, ...]) -> None:
    corrections = presets.get(name).corrections
    for phrase in phrases:
        assert phrase in corrections, f"{name}'s corrections do not mention {phrase!r}: {corrections!r}"


def test_chef_cross_attention_uses_the_050_embedding_for_and() -> None:
    config = presets.get("chef-cross-attention").config
    assert config.key_tokens[0] == "and" and config.cross_embeddings[0][0] == 0.50


def test_a_wrong_number_fails_verification() -> None:
    preset = presets.get("chef-self-attention")
    check = preset.checks[0]
    wrong = presets.Check(check.label, check.tensor, check.index, ((0.0, 0.0),) * 12)
    assert not presets.verify_check(compute(preset.config), wrong).ok


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown preset 'nope'; known presets: raschka-self-attention"):
        presets.get("nope")
