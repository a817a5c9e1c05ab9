"""The shipped atlases (attention/lessons/atlas/shipped_atlases.pt): both models' corpus and repeated-token atlases
and SmolLM2's circuit scores on them, read instead of computed; equal to what the models compute now; never used
for another corpus, setting or model file, and never for an installed model that is not the official one."""

from __future__ import annotations

import pytest
import torch

from attention.lessons import atlas
from attention.lessons.atlas import runs, shipped
from attention.models import package
from harness.fixtures import one_thread  # noqa: F401  (fixtures, one_thread autouse)

PAIRS = [(m, s) for m in atlas.MODELS for s in shipped.SOURCES]


def assert_same(got: atlas.Atlas, want: atlas.Atlas) -> None:
    """Two atlases equal: every score within float32's sums over a few hundred tokens, the rest exactly."""
    assert (got.model, got.source, got.drop_first, got.group) == (want.model, want.source, want.drop_first, want.group)
    assert (got.texts, got.tokens, got.counts) == (want.texts, want.tokens, want.counts)
    assert list(got.scores) == list(want.scores)
    for k in want.scores:
        torch.testing.assert_close(got.scores[k], want.scores[k], atol=2e-5, rtol=1e-5, equal_nan=True, msg=k)


@pytest.fixture
def fresh(monkeypatch):
    """No installed model checked yet in this process (each test checks again)."""
    shipped._verified.cache_clear()
    shipped.read.cache_clear()
    yield
    shipped._verified.cache_clear()
    shipped.read.cache_clear()


def test_the_file_is_small_and_holds_every_atlas_that_never_changes(fresh) -> None:
    assert shipped.SHIPPED.stat().st_size < 64_000
    for model, source in PAIRS:
        pair = shipped.shipped_atlases(model, source, atlas.corpus())
        assert pair is not None, "regenerate it: python -m attention.lessons.atlas"
        kept, dropped = pair
        assert (kept.drop_first, dropped.drop_first) == (False, True)
        assert kept.layers * kept.heads == {"smollm2": 30 * 9, "minilm": 6 * 12}[model]
        assert kept.texts == (len(atlas.corpus()) if source == "corpus" else len(atlas.REPEAT_SEEDS))
    assert shipped.shipped_atlases("minilm", "text", atlas.corpus()) is None  # a learner's text is computed


def test_model_atlases_reads_them_without_running_a_model(fresh, monkeypatch) -> None:
    def no_model(model: str):
        raise AssertionError(f"{model} was run")

    monkeypatch.setattr(runs, "runner", no_model)
    for model, source in PAIRS:
        kept, dropped = atlas.model_atlases(model, source)
        assert kept.source == source and kept.scores["previous_token"].shape == (kept.layers, kept.heads)
    for source in shipped.SOURCES:  # SmolLM2's circuit scores too
        circuits = atlas.circuit_scores(source)
        assert set(circuits) == set(atlas.CIRCUIT_SCORES) and circuits["copying"].shape == (30, 9)
        assert -1 <= float(circuits["copying"].min()) and float(circuits["copying"].max()) <= 1
    with pytest.raises(AssertionError, match="minilm was run"):
        atlas.model_atlases("minilm", "text", "the cat saw the cat")


@pytest.mark.parametrize(
    "change",
    ["model file", "corpus", "setting", "scores"],
)
def test_an_entry_for_anything_else_is_not_used(tmp_path, fresh, monkeypatch, change: str) -> None:
    path = tmp_path / "atlases.pt"
    data = shipped.read()
    entry = data["models"]["minilm"]["repeated"]
    shipped.save({("minilm", "repeated"): entry, ("minilm", "corpus"): data["models"]["minilm"]["corpus"]}, path)
    assert shipped.shipped_atlases("minilm", "repeated", atlas.corpus(), path) is not None
    texts = atlas.corpus()
    if change == "model file":  # another model (or another release) under the same name
        from attention.models.minilm import reader

        monkeypatch.setitem(reader.SHA256, "model.safetensors", "0" * 64)
    elif change == "corpus":
        texts = (*texts[:-1], (texts[-1][0], texts[-1][1] + " Edited."))
    elif change == "setting":
        monkeypatch.setattr(shipped, "REPEAT_LENGTH", atlas.REPEAT_LENGTH + 1)
    else:
        monkeypatch.setattr(shipped, "ENCODER_SCORES", (*atlas.ENCODER_SCORES, "new_score"))
    source = "corpus" if change == "corpus" else "repeated"
    assert shipped.shipped_atlases("minilm", source, texts, path) is None


def test_a_missing_or_broken_file_means_computing_them(tmp_path, fresh) -> None:
    assert shipped.shipped_atlases("minilm", "repeated", atlas.corpus(), tmp_path / "missing.pt") is None
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a torch file")
    assert shipped.shipped_atlases("minilm", "repeated", atlas.corpus(), broken) is None


def test_an_installed_model_that_is_not_the_official_one_gets_no_shipped_numbers(fresh, monkeypatch) -> None:
    monkeypatch.setattr(package.Once, "loaded", False)  # no model read in this process: its files are checked
    monkeypatch.setattr(package, "sha256", lambda path: "f" * 64)  # every installed file reads as altered
    with pytest.raises(package.ModelFileError, match="is not the official"):
        shipped.shipped_atlases("minilm", "repeated", atlas.corpus())
    with pytest.raises(package.ModelFileError, match="is not the official"):
        atlas.model_atlases("minilm", "corpus")


def test_a_model_read_once_is_checked_once(fresh, monkeypatch) -> None:
    calls = []
    real = package.sha256
    monkeypatch.setattr(package, "sha256", lambda path: calls.append(path) or real(path))
    from attention.models import minilm

    monkeypatch.setattr(package.Once, "loaded", False)
    for _ in range(3):
        assert shipped.shipped_atlases("minilm", "repeated", atlas.corpus()) is not None
    assert len(calls) == len(minilm.SHA256)  # model.safetensors and tokenizer.json, once


@pytest.mark.thorough  # both models over the corpus and the probe: a minute or two on one thread
@pytest.mark.parametrize(("model", "source"), PAIRS)
def test_the_shipped_atlases_equal_the_ones_the_models_compute_now(fresh, model: str, source: str) -> None:
    computed = atlas.model_atlases(model, source, shipped=False)
    pair = shipped.shipped_atlases(model, source, atlas.corpus())
    assert pair is not None, "regenerate it: python -m attention.lessons.atlas"
    for got, want in zip(pair, computed, strict=True):
        assert_same(got, want)
    if model == "smollm2":
        got, want = shipped.shipped_circuits(source, atlas.corpus()), atlas.circuit_scores(source, shipped=False)
        assert got is not None and list(got) == list(want)
        for k in want:
            torch.testing.assert_close(got[k], want[k], atol=1e-4, rtol=1e-4, msg=k)
