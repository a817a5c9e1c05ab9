"""attention.basics.views: tensor shapes along the way, and preset checks value by value."""

import dataclasses

import pytest
import torch

from attention import Config, compute, presets
from attention.basics import views


def test_shape_steps_independent_layout_uses_the_configs_numbers():
    result = compute(Config(d_model=16, d_k=24, d_v=28, heads=3))
    steps = {(s.tensor, s.dims): s.shape for s in views.shape_steps(result)}
    assert steps[("x", "(T, d_model)")] == (6, 16)
    assert steps[("Q", "(h, T, d_k)")] == (3, 6, 24)
    assert steps[("V", "(h, T, d_v)")] == (3, 6, 28)
    assert steps[("omega", "(h, T, T)")] == (3, 6, 6)
    assert steps[("context", "(h, T, d_v)")] == (3, 6, 28)
    assert steps[("concat", "(T, h·d_v)")] == (6, 84)
    assert not any(s.tensor == "output" for s in views.shape_steps(result))


def test_shape_steps_split_layout_shows_view_transpose_and_projection():
    result = compute(Config(d_model=12, heads=4, head_layout="split", out_proj=True))
    steps = views.shape_steps(result)
    shapes = [s.shape for s in steps]
    assert (6, 12) in shapes  # x @ W_q before the split
    assert (6, 4, 3) in shapes  # viewed into heads
    assert (4, 6, 3) in shapes  # transposed
    assert steps[-1].tensor == "output"
    assert steps[-1].shape == tuple(result.output.shape) == (6, 12)


def test_shape_steps_cross_attention_names_both_lengths():
    result = compute(Config(cross_sentence="and it was served with wine tonight"))
    steps = {s.tensor: s for s in views.shape_steps(result)}
    assert steps["x_kv"].shape == (7, 16)
    assert steps["omega"].dims == "(h, T_q, T_k)"
    assert steps["omega"].shape == (1, 6, 7)


@pytest.mark.parametrize("name", list(presets.PRESETS))
def test_every_value_of_every_preset_matches(name):
    preset = presets.PRESETS[name]
    for outcome in presets.verify(preset):
        values = views.check_values(outcome)
        if outcome.check.shape_only:
            assert values == []
            continue
        assert len(values) == torch.tensor(outcome.check.expected).numel()
        assert all(v.ok for v in values), [v for v in values if not v.ok][:3]
        assert all(v.ok for v in values) == outcome.ok


def test_check_values_flags_the_one_wrong_number():
    preset = presets.PRESETS["raschka-self-attention"]
    check = preset.checks[2]  # omega_2, six numbers
    wrong = dataclasses.replace(check, expected=(8.5808, -7.6597, 3.2558, 1.0395, 11.1476, -0.4800))
    outcome = presets.verify_check(compute(preset.config), wrong)
    values = views.check_values(outcome)
    assert not outcome.ok
    assert [v.ok for v in values] == [True, True, True, True, False, True]
    assert values[4].index == (4,)
    assert values[4].error == pytest.approx(0.001, abs=1e-4)


def test_where_and_computed_text():
    checks = presets.PRESETS["raschka-multi-head"].checks
    assert views.where(checks[0]) == "embeddings[:, 2]"
    assert views.where(presets.PRESETS["raschka-self-attention"].checks[1]) == "omega[0, 1, 4]"
    assert views.where(presets.PRESETS["raschka-multi-head"].checks[2]) == "keys"
    assert views.computed_text(presets.Check("x", "omega", (), 1.0), 11.146612) == "11.146612"
    assert views.computed_text(presets.Check("x", "omega", (), 1.0, decimals=None, significant=5), 0.000123) == (
        "1.230000e-04"
    )


def test_printed_text_follows_the_printed_precision():
    assert views.printed_text(presets.Check("x", "omega", (), 1.0), 11.1466) == "11.1466"
    assert views.printed_text(presets.Check("x", "omega", (), 1.0, decimals=0), 4.0) == "4"
    assert views.printed_text(presets.Check("x", "omega", (), 1.0, decimals=None, significant=5), 1.2298e-04) == (
        "1.2298e-04"
    )
