"""The experiments' numbers: the √d_k sweep, the pitfalls and their invariants, A/B diffs, soft lookup, mask export."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
import torch.nn.functional as F

from attention import Config, compute, tokenize
from attention.io import export
from attention.io.cli.main import main
from attention.lessons import compare, pitfalls, scaling, soft_lookup

OCTAVES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SEEDS = range(32)


@pytest.fixture(scope="module")
def sweep() -> scaling.ScalingSweep:
    return scaling.scaling_sweep(seeds=SEEDS, tokens=6)


def at_octaves(sweep: scaling.ScalingSweep, metric: str, variant: str) -> list[float]:
    mean = sweep.band(metric, variant)[0]
    return [float(mean[sweep.d_ks.tolist().index(d)]) for d in OCTAVES]


# --------------------------------------------------------------------------- why divide by sqrt(d_k)


def test_the_sweep_covers_1_to_512_on_a_log_grid(sweep: scaling.ScalingSweep) -> None:
    d = sweep.d_ks.tolist()
    assert d[0] == 1 and d[-1] == 512 and d == sorted(set(d))
    assert set(OCTAVES) <= set(d)
    for metric in ("spread", "entropy", "top"):
        assert getattr(sweep, metric).shape == (2, len(d), len(SEEDS))


def test_unscaled_entropy_falls_as_d_k_grows(sweep: scaling.ScalingSweep) -> None:
    entropy = at_octaves(sweep, "entropy", "unscaled")
    assert all(a > b for a, b in zip(entropy, entropy[1:], strict=False)), entropy
    assert entropy[0] > 0.8 * sweep.max_entropy  # d_k = 1: close to uniform
    assert entropy[-1] < 0.1 * sweep.max_entropy  # d_k = 512: nearly one-hot
    top = at_octaves(sweep, "top", "unscaled")
    assert all(a < b for a, b in zip(top, top[1:], strict=False)), top
    assert top[-1] > 0.95


def test_scaled_entropy_stays_within_a_band(sweep: scaling.ScalingSweep) -> None:
    mean = sweep.band("entropy", "scaled")[0]
    assert float(mean.min()) > 0.8 * sweep.max_entropy
    assert float(mean.max() - mean.min()) < 0.15
    top = sweep.band("top", "scaled")[0]
    assert float(top.max()) < 0.5 and float(top.max() - top.min()) < 0.1


def test_score_spread_grows_like_sqrt_d_k_unless_scaled(sweep: scaling.ScalingSweep) -> None:
    root = sweep.d_ks.float().sqrt()
    torch.testing.assert_close(sweep.band("spread", "unscaled")[0] / root, torch.ones(len(root)), atol=0.15, rtol=0)
    torch.testing.assert_close(sweep.band("spread", "scaled")[0], torch.ones(len(root)), atol=0.15, rtol=0)
    # the scaled scores are the unscaled ones divided by sqrt(d_k), seed by seed
    torch.testing.assert_close(sweep.spread[1], sweep.spread[0] / root[:, None])


def test_the_band_holds_the_mean_between_its_percentiles(sweep: scaling.ScalingSweep) -> None:
    for metric in ("spread", "entropy", "top"):
        for variant in scaling.VARIANTS:
            mean, lo, hi = sweep.band(metric, variant)
            assert bool((lo <= hi).all())
            assert bool((lo <= mean + 1e-6).all() and (mean <= hi + 1e-6).all())


def test_a_width_gives_the_same_numbers_in_any_grid() -> None:
    alone = scaling.scaling_sweep([24], seeds=range(5, 9), tokens=7)
    grid = scaling.scaling_sweep([1, 24, 300], seeds=range(5, 9), tokens=7)
    for metric in ("spread", "entropy", "top"):
        # the same numbers drawn; only the order of the float sums differs (one block against three)
        torch.testing.assert_close(getattr(alone, metric)[:, 0], getattr(grid, metric)[:, 1])


def test_each_seed_has_its_own_generator_and_the_global_one_is_untouched() -> None:
    state = torch.get_rng_state()
    many = scaling.scaling_sweep(seeds=[3, 4, 5], tokens=4)
    one = scaling.scaling_sweep(seeds=[4], tokens=4)
    assert torch.equal(torch.get_rng_state(), state)
    torch.testing.assert_close(many.entropy[:, :, 1], one.entropy[:, :, 0], rtol=0, atol=0)
    again = scaling.scaling_sweep(seeds=[3, 4, 5], tokens=4)
    assert torch.equal(many.entropy, again.entropy)


def test_the_sweep_matches_a_direct_softmax() -> None:
    d_k, seed, t = 16, 11, 5
    s = scaling.scaling_sweep([d_k], seeds=[seed], tokens=t, temperature=2.0)
    draw = torch.randn(d_k, 2, t, generator=torch.Generator().manual_seed(seed))
    q, k = draw[:, 0].T, draw[:, 1].T  # (T, d_k)
    for v, factor in enumerate((2.0, 2.0 * math.sqrt(d_k))):
        w = torch.softmax(q @ k.T / factor, dim=-1)
        entropy = -(w * w.log()).sum(-1).mean()
        torch.testing.assert_close(s.entropy[v, 0, 0], entropy)
        torch.testing.assert_close(s.top[v, 0, 0], w.amax(-1).mean())
        torch.testing.assert_close(s.spread[v, 0, 0], (q @ k.T / factor).std())


@pytest.mark.parametrize(
    "kwargs",
    [{"tokens": 1}, {"seeds": []}, {"d_ks": [0, 4]}, {"d_ks": []}, {"temperature": 0.0}, {"temperature": math.nan}],
)
def test_the_sweep_refuses_settings_that_say_nothing(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        scaling.scaling_sweep(**kwargs)


def test_row_stats_of_uniform_and_one_hot_rows() -> None:
    entropy, top = scaling.row_stats(torch.tensor([[0.25] * 4, [0.0, 1.0, 0.0, 0.0]]))
    torch.testing.assert_close(entropy, torch.tensor([math.log(4), 0.0]))
    torch.testing.assert_close(top, torch.tensor([0.25, 1.0]))
    # a query with every key blocked has no distribution, so it is left out of the mean
    weights = torch.tensor([[0.5, 0.5], [0.0, 0.0]])
    mask = torch.tensor([[True, True], [False, False]])
    assert scaling.mean_row_stats(weights, mask) == pytest.approx((math.log(2), 0.5))


# --------------------------------------------------------------------------- invariants and pitfalls

EXPECTED_BROKEN = {
    "Correct": (),
    "Softmax over the wrong dimension": ("rows sum to 1",),
    "No scaling": (),
    "All-positive weights (torch.rand)": (),
    "Masking after the softmax": ("rows sum to 1",),
    "Masking with 0 instead of −∞": ("masked weights are 0",),
    "Every head's queries with every head's keys": ("shapes",),
    "Forgetting the output projection": ("shapes",),
}


@pytest.mark.parametrize("mask", ["none", "causal", "padding", "window", "custom"])
def test_correct_weights_keep_every_invariant(mask: str) -> None:
    custom = [[True, False, False, False], [False, False, False, False], [True, True, True, False], [True] * 4]
    r = compute(Config(sentence="a b c d", mask=mask, padding=4, window=2, custom_mask=custom, heads=3))
    assert pitfalls.invariants(r.weights, r.mask, (3, 4, 4)) == dict.fromkeys(pitfalls.INVARIANTS, True)


def test_invariants_catch_each_kind_of_breakage() -> None:
    mask = torch.tensor([[True, False], [True, True]])
    good = torch.tensor([[[1.0, 0.0], [0.3, 0.7]]])  # (1, 2, 2)
    assert all(pitfalls.invariants(good, mask, (1, 2, 2)).values())
    assert not pitfalls.invariants(good, mask, (2, 2))["shapes"]
    assert not pitfalls.invariants(good * 0.9, mask, (1, 2, 2))["rows sum to 1"]
    leaky = torch.tensor([[[0.9, 0.1], [0.3, 0.7]]])
    assert pitfalls.invariants(leaky, mask, (1, 2, 2)) == {
        "rows sum to 1": True,
        "masked weights are 0": False,
        "shapes": True,
    }
    nan = torch.tensor([[[1.0, math.nan], [0.3, 0.7]]])
    assert not any(list(pitfalls.invariants(nan, mask, (1, 2, 2)).values())[:2])


CONFIGS = [
    Config(),
    Config(heads=2, seed=7, mask="causal"),
    Config(sentence="the cat sat on the mat today", heads=3, d_k=5, d_v=4, mask="window", window=2),
    Config(heads=4, d_k=64, d_v=8, seed=1, bias=True),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"h{c.heads}-{c.mask}-dk{c.d_k}")
def test_each_pitfall_breaks_exactly_the_invariants_it_should(config: Config) -> None:
    versions = pitfalls.pitfalls(config)
    assert {p.name: p.broken for p in versions} == EXPECTED_BROKEN
    assert versions[0].name == "Correct"
    for p in versions:
        assert p.what_goes_wrong and "\n" not in p.what_goes_wrong and p.code
        assert set(p.invariants) == set(pitfalls.INVARIANTS)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"h{c.heads}-{c.mask}-dk{c.d_k}")
def test_the_correct_version_is_pytorchs_attention(config: Config) -> None:
    used = pitfalls.pitfall_config(config)
    r = compute(used)
    correct = pitfalls.pitfalls(config)[0]
    sdpa = F.scaled_dot_product_attention(r.queries, r.keys, r.values, attn_mask=r.mask)  # (h, T, d_v)
    torch.testing.assert_close(correct.context, sdpa)
    torch.testing.assert_close(correct.output, r.output)
    assert r.w_out is not None and correct.output.shape == (len(used.tokens), used.width)


def test_the_pitfalls_are_the_mistakes_they_name() -> None:
    config = Config(heads=2, seed=3, d_k=8)
    r = compute(pitfalls.pitfall_config(config))
    p = {v.name: v for v in pitfalls.pitfalls(config)}
    blocked = ~r.mask
    # over the queries: every column with an allowed query sums to 1
    torch.testing.assert_close(p["Softmax over the wrong dimension"].weights.sum(-2), torch.ones(2, 6))
    # no scaling is PyTorch's attention with scale 1
    plain = F.scaled_dot_product_attention(r.queries, r.keys, r.values, attn_mask=r.mask, scale=1.0)
    torch.testing.assert_close(p["No scaling"].context, plain)
    # masking after the softmax keeps the unmasked softmax's numbers where allowed
    after = p["Masking after the softmax"].weights
    torch.testing.assert_close(after[:, r.mask], torch.softmax(r.scaled, -1)[:, r.mask])
    sums = after.sum(-1)  # (h, T): what the blocked keys had is lost, never given back
    assert bool((sums <= 1 + 1e-6).all()) and float(sums.min()) < 0.5
    # a score of 0 keeps a share of the weight
    assert bool((p["Masking with 0 instead of −∞"].weights[:, blocked] > 0).all())
    # head a's queries against head a's keys is the correct head a; a against b is something else
    every = p["Every head's queries with every head's keys"]
    assert every.weights.shape == (2, 2, 6, 6) and every.output.shape == (6, 2 * 2 * 28)
    for a in range(2):
        torch.testing.assert_close(every.weights[a, a], r.weights[a])
    assert not torch.allclose(every.head_weights(0), r.weights[0])
    forgot = p["Forgetting the output projection"]
    torch.testing.assert_close(forgot.output, r.concat)
    assert forgot.shown == "output" and forgot.matrix("output", 0).shape == (6, 56)


def test_all_positive_weights_saturate_and_the_page_says_by_how_much() -> None:
    """Issue 23's numbers, computed: omega's spread with torch.rand weights grows like d_k (3.5, 23, 57, 155, 595 at
    d_k 1, 8, 24, 64, 256 on the Raschka inputs); with the normal init the scaled scores stay near unit spread."""
    positive = pitfalls.saturation(Config())
    assert positive.d_ks == (1, 8, 24, 64, 256)
    assert [round(x, 1) for x in positive.spread] == [3.5, 23.4, 57.3, 154.8, 595.5]
    assert positive.entropy[2] == pytest.approx(0.365, abs=1e-3) and positive.entropy[-1] < 0.14
    assert positive.top[-1] > 0.9 and positive.max_entropy == pytest.approx(math.log(6))
    spreads = torch.tensor(positive.spread)
    assert bool((spreads[1:] / spreads[:-1] > 2).all())  # each step of d_k (x3 to x8) more than doubles it
    normal = pitfalls.saturation(Config(), init="normal")
    assert all(0.5 < x < 1.5 for x in normal.scaled_spread)
    assert all(n > p for n, p in zip(normal.entropy, positive.entropy, strict=True))
    p = {v.name: v for v in pitfalls.pitfalls(Config(init="normal", draws="stable"))}
    lesson = p["All-positive weights (torch.rand)"]
    assert "3.5, 23, 57, 155, 595 at d_k 1, 8, 24, 64, 256" in lesson.what_goes_wrong
    assert lesson.mean_largest_weight > p["Correct"].mean_largest_weight + 0.2
    r = compute(pitfalls.pitfall_config(Config(init="rand-transposed")))
    torch.testing.assert_close(lesson.weights, r.weights)  # the tutorial's weights on the same inputs


def test_forgetting_the_output_projection_passes_every_check_when_the_widths_agree() -> None:
    # split layout: h * d_v = d_model, so only the numbers tell
    config = Config(heads=4, head_layout="split", init="linear")
    p = pitfalls.pitfalls(config)[-1]
    correct = pitfalls.pitfalls(config)[0]
    assert p.broken == () and p.output.shape == correct.output.shape
    assert not torch.allclose(p.output, correct.output)


def test_a_mask_that_blocks_whole_columns_makes_the_wrong_dimension_nan() -> None:
    p = {v.name: v for v in pitfalls.pitfalls(Config(mask="padding", padding=2))}
    assert p["Softmax over the wrong dimension"].broken == ("rows sum to 1", "masked weights are 0")
    assert all(math.isnan(x) for x in p["Softmax over the wrong dimension"].row_sum_range)
    assert p["Correct"].broken == ()


def test_pitfall_config_needs_a_mask_that_blocks_something() -> None:
    assert pitfalls.pitfall_config(Config()).mask == "causal"
    assert pitfalls.pitfall_config(Config(mask="padding", padding=0)).mask == "causal"
    kept = pitfalls.pitfall_config(Config(mask="window", window=2, dropout=0.5))
    assert (kept.mask, kept.window, kept.dropout, kept.out_proj) == ("window", 2, 0.0, True)


# --------------------------------------------------------------------------- compare A/B


def test_diff_of_a_setting_with_itself_is_zero() -> None:
    r = compute(Config())
    d = compare.diff(r, r)
    assert d.changed == {} and d.largest == 0.0
    assert not bool(d.omega.any()) and not bool(d.weights.any()) and not bool(d.context.any())
    assert d.summary(r.tokens, r.key_tokens) == "A and B are the same setting; every weight is the same."


def test_diff_finds_the_largest_weight_change_and_its_tokens() -> None:
    a, b = compute(Config(seed=1)), compute(Config(seed=2))
    d = compare.diff(a, b)
    assert d.changed == {"seed": (1, 2)}
    change = b.weights[0] - a.weights[0]
    torch.testing.assert_close(d.weights, change)
    torch.testing.assert_close(d.omega, b.omega[0] - a.omega[0])
    assert d.largest == pytest.approx(float(change.abs().max()))
    assert abs(d.after - d.before) == pytest.approx(d.largest)
    assert (d.before, d.after) == (float(a.weights[0, d.query, d.key]), float(b.weights[0, d.query, d.key]))
    line = d.summary(a.tokens, a.key_tokens)
    assert line.startswith("B changes seed 1 → 2. Largest weight change: ")
    assert f"“{a.tokens[d.query]}” → key “{a.key_tokens[d.key]}”" in line
    assert f"({d.after - d.before:+.3f})" in line


def test_diff_ignores_settings_that_do_nothing() -> None:
    a, b = Config(window=2, padding=1), Config(window=5, padding=3, temperature=9.0)
    assert compare.changed_fields(a, b) == {}
    assert compare.changed_fields(a.replace(mask="window"), b) == {"mask": ("window", "none"), "window": (2, 5)}


def test_stable_draws_change_only_what_the_learner_changed() -> None:
    """Issue 23: "1 head vs 4" moved head 1's weights (0.601 -> 0.972) only through the order of draws."""
    a = Config(init="normal", draws="stable")
    d = compare.diff(compute(a), compute(a.replace(heads=4)))
    assert d.also == () and d.largest == 0.0
    assert d.summary(a.tokens, a.tokens) == "B changes heads 1 → 4; every weight is the same."
    for init in ("rand-transposed", "rand", "linear"):  # every init the pages offer, drawn stably
        s = Config(init=init, draws="stable")
        assert compare.diff(compute(s.replace(heads=2)), compute(s.replace(heads=8))).largest == 0.0


@pytest.mark.parametrize(
    ("a", "b", "words"),
    [
        (Config(), Config(heads=4), "head 1's W_key and W_value were redrawn because heads changed"),
        (Config(init="rand"), Config(init="rand", d_k=8), "because d_k changed"),
        (Config(init="normal"), Config(init="normal", d_model=8), "every weight was redrawn because d_model changed"),
        (Config(init="normal", head_layout="split"), Config(init="normal", head_layout="split", heads=4),
         "head 1 keeps its first 4 columns"),
        (Config(init="normal", out_proj=True), Config(init="normal", out_proj=True, heads=2), "W_out was redrawn"),
    ],
)  # fmt: skip
def test_compare_says_what_else_changed_when_stability_is_impossible(a: Config, b: Config, words: str) -> None:
    d = compare.diff(compute(a), compute(b))
    assert any(words in note for note in d.also), d.also
    assert words in d.summary(a.tokens, a.tokens)


def test_nothing_else_changed_is_said_when_nothing_else_did() -> None:
    assert compare.redrawn(Config(), Config(seed=5)) == ()  # a new seed is new numbers: that is the change
    assert compare.redrawn(Config(init="linear"), Config(init="linear", heads=3)) == ()  # one module a head
    assert compare.redrawn(Config(init="identity"), Config(init="identity", heads=2)) == ()
    assert compare.redrawn(Config(), Config(mask="causal")) == ()


def test_diff_across_shapes() -> None:
    a = compute(Config(heads=1))
    b = compute(Config(heads=4, d_v=5))
    d = compare.diff(a, b, 0, 3)
    assert d.changed == {"d_v": (28, 5), "heads": (1, 4)}
    assert d.context is None  # widths differ
    torch.testing.assert_close(d.weights, b.weights[3] - a.weights[0])
    other = compute(Config(sentence="only three words"))
    far = compare.diff(a, other)
    assert far.weights is None and far.omega is None and far.largest == 0.0
    assert "token counts differ" in far.summary(a.tokens, a.key_tokens)


# --------------------------------------------------------------------------- soft lookup


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_the_soft_lookup_adds_up_to_the_context(mask: str) -> None:
    r = compute(Config(mask=mask, heads=2, seed=9))
    for i in range(len(r.tokens)):
        look = soft_lookup.soft_lookup(r, 1, i)
        torch.testing.assert_close(look.weighted.sum(0), look.context)
        torch.testing.assert_close(look.context, r.context[1, i])
        torch.testing.assert_close(look.weights.sum(), torch.tensor(1.0))
        assert look.allowed.tolist() == r.mask[i].tolist()
        assert not bool(look.weights[~look.allowed].any())
        torch.testing.assert_close(look.weighted[0], look.weights[0] * r.values[1, 0])


# --------------------------------------------------------------------------- mask export


MASK_CONFIGS = [
    Config(),
    Config(sentence="the cat sat on the mat", seed=7, d_k=8, heads=2, bias=True),
    Config(sentence="-dash first and *stars*", d_model=8, d_v=3, scale="temperature", temperature=2.5),
]


@pytest.mark.parametrize("config", MASK_CONFIGS, ids=["default", "repeated-words", "dash-and-temperature"])
def test_the_exported_mask_runs_on_the_command_line(config, tmp_path, capsys) -> None:
    t = len(config.tokens)
    mask = [[(i + j) % 3 != 1 or i == j for j in range(t)] for i in range(t)]
    config = config.replace(mask="custom", custom_mask=mask)
    path = tmp_path / "mask.json"
    path.write_text(export.mask_json(torch.tensor(mask), config.tokens, config=config), encoding="utf-8")
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["mask"] == mask and saved["tokens"] == list(config.tokens) and saved["sentence"] == config.sentence

    assert main([*export.cli_args(config, str(path)), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = compute(config)
    assert out["config"]["custom_mask"] == mask
    for h in range(config.heads):
        torch.testing.assert_close(torch.tensor(out["heads"][h]["weights"]), want.weights[h])
    torch.testing.assert_close(torch.tensor(out["output"]), want.output)


def test_cli_args_name_only_what_differs_from_the_defaults() -> None:
    assert export.cli_args(Config(), "m.json") == ["--custom-mask", "m.json"]
    args = export.cli_args(Config(seed=5, out_proj=True, mask="window", window=2), "m.json")
    assert args == ["--out-proj", "--seed=5", "--custom-mask", "m.json"]
    with pytest.raises(ValueError, match="matrix"):
        export.cli_args(Config(sentence="a", embeddings=[[1.0, 2.0]], d_model=2))


# Text that bash, zsh, PowerShell or cmd.exe would act on if it reached a command line unquoted, or quoted for
# another shell (shlex.join quotes for POSIX shells only: cmd.exe runs `& calc.exe &` inside its quotes).
SHELL_TEXT = [
    "a & calc.exe & b",
    "%PATH% and %USERNAME%",
    'say "hi" now',
    "up^arrow ^& x",
    "wow! !x! bang",
    "$(touch pwned) and `touch pwned2` ${HOME}",
    "a; rm -rf x | cat > y < z",
    "line one\nline two\r\nthree",
    "naïve café 日本語 😀 \u202eevil",
    "-dash --seed=9 first 'single' (paren) {brace} *star ?q #hash",
]
SAFE_ARGUMENT = re.compile(r"[A-Za-z0-9._=/-]+")


@pytest.mark.parametrize("text", SHELL_TEXT)
def test_the_command_line_holds_no_user_text_and_reads_it_back(text: str, tmp_path, capsys, monkeypatch) -> None:
    cross = text[::-1] + " x"  # cross-attention: both sentences travel in the file
    t_q, t_k = len(tokenize(text)), len(tokenize(cross))
    mask = [[(i + j) % 2 == 0 for j in range(t_k)] for i in range(t_q)]
    config = Config(sentence=text, cross_sentence=cross, d_k=8, seed=4, heads=2, scale="temperature",
                    temperature=0.5, mask="custom", custom_mask=mask)  # fmt: skip
    args = export.cli_args(config)
    assert all(SAFE_ARGUMENT.fullmatch(a) for a in args), args
    assert args[:4] == ["--sentence-file", "mask.json", "--cross-sentence-file", "mask.json"]
    monkeypatch.chdir(tmp_path)  # the command names mask.json in the folder it runs in
    (tmp_path / "mask.json").write_text(export.mask_json(config.custom_mask, config=config), encoding="utf-8")
    assert main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["sentence"] == text and out["tokens"] == list(config.tokens)
    torch.testing.assert_close(torch.tensor(out["heads"][1]["weights"]), compute(config).weights[1])


def test_sentence_files_read_text_json_strings_and_objects(tmp_path, capsys) -> None:
    (tmp_path / "s.txt").write_text("the cat & the hat", encoding="utf-8")
    (tmp_path / "s.json").write_text(json.dumps("a b"), encoding="utf-8")
    (tmp_path / "o.json").write_text(json.dumps({"cross_sentence": "p q r"}), encoding="utf-8")
    argv = ["--sentence-file", str(tmp_path / "s.txt"), "--cross-sentence-file", str(tmp_path / "o.json")]
    assert main([*argv, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == ["the", "cat", "&", "the", "hat"] and out["key_tokens"] == ["p", "q", "r"]
    assert main(["--sentence-file", str(tmp_path / "s.json"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == ["a", "b"]
    for path, why in (("o.json", 'without a "sentence" entry'), ("missing.json", "cannot read")):
        assert main(["--sentence-file", str(tmp_path / path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, err


def test_cli_args_refuse_a_value_a_shell_would_change() -> None:
    # Config validates every choice, so an unsafe value can only come from a config built around its checks
    config = Config(seed=3)
    object.__setattr__(config, "init", "rand & calc")
    with pytest.raises(ValueError, match="shell"):
        export.cli_args(config)
