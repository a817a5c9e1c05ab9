"""The Real model page in AppTest: the model view and the four panels hold the model's own numbers, the controls
and gallery buttons move the head, the toy swaps the weights, and the page draws with the network refused."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention.models import interpret, minilm
from harness.charts import heatmaps, open_page, set_widget

ROOT = Path(__file__).resolve().parents[2]
PANELS = ("Omega = Q Kᵀ", "Softmax weights", "Context vectors")


def page(**params: str) -> AppTest:
    return open_page("real_model", **params)


act = set_widget
drawn = heatmaps


def texts(at: AppTest) -> str:
    parts = [e.value for e in (*at.info, *at.warning, *at.error, *at.caption, *at.markdown)]
    return "\n".join(str(p) for p in parts)


@pytest.fixture(scope="module")
def run() -> minilm.ModelRun:
    return minilm.forward(minilm.load(), minilm.DEFAULT_SENTENCE)


def weights(at: AppTest) -> torch.Tensor:
    return drawn(at)["Softmax weights"][0]


def test_defaults_draw_the_model_view_and_the_four_panels_of_layer_3_head_1(run) -> None:
    at = page()
    charts = drawn(at)
    t = len(run.tokens)
    for h in range(12):
        title = f"h{h} ◆" if h == 1 else f"h{h}"
        stacked, rows, cols = charts[title]
        assert rows[: t + 1] == [f"L0 {i + 1} {s}" for i, s in enumerate(run.tokens)] + [""]
        assert stacked.shape == (6 * (t + 1) - 1, t) and cols == [str(i + 1) for i in range(t)]
        for layer in range(6):
            block = stacked[layer * (t + 1) : layer * (t + 1) + t]
            torch.testing.assert_close(block, run.weights[layer, h], atol=1e-6, rtol=0)
    x, rows, _ = charts["Hidden states entering layer 3"]
    torch.testing.assert_close(x, run.hidden_states[3], atol=1e-6, rtol=0)
    assert rows == [f"{i + 1} {s}" for i, s in enumerate(run.tokens)]
    for title in PANELS:
        assert charts[title][1] == rows
    torch.testing.assert_close(weights(at), run.weights[3, 1], atol=1e-6, rtol=0)
    torch.testing.assert_close(charts["Context vectors"][0], run.context[3, 1], atol=1e-6, rtol=0)
    assert "[CLS]" in at.get("html")[0].proto.body and "didn" in at.get("html")[0].proto.body
    assert "Following token 2: the" in texts(at)


@pytest.mark.parametrize(("kind", "key", "value", "layer", "head"), [
    ("selectbox", "w:layer", 0, 0, 1), ("selectbox", "w:head", 11, 3, 11), ("selectbox", "w:layer", 5, 5, 1),
])  # fmt: skip
def test_changing_layer_or_head_draws_that_head(run, kind, key, value, layer, head) -> None:
    at = act(page(), kind, key, value)
    torch.testing.assert_close(weights(at), run.weights[layer, head], atol=1e-6, rtol=0)
    assert not torch.allclose(weights(at), run.weights[3, 1])
    torch.testing.assert_close(drawn(at)[f"Hidden states entering layer {layer}"][0], run.hidden_states[layer])


def test_the_toy_toggle_swaps_in_random_weights_of_the_same_shape(run) -> None:
    at = act(page(), "toggle", "w:toy", True)
    toy = weights(at)
    assert toy.shape == run.weights[3, 1].shape and not torch.allclose(toy, run.weights[3, 1], atol=1e-3)
    torch.testing.assert_close(toy.sum(dim=-1), torch.ones(toy.shape[0]))
    torch.testing.assert_close(drawn(at)["Hidden states entering layer 3"][0], run.hidden_states[3])
    other = act(at, "number_input", "w:seed", 7)
    assert not torch.allclose(weights(other), toy)
    back = act(other, "toggle", "w:toy", False)
    torch.testing.assert_close(weights(back), run.weights[3, 1], atol=1e-6, rtol=0)


@pytest.mark.parametrize("behaviour", interpret.BEHAVIOURS)
def test_a_gallery_button_moves_to_the_best_head(run, behaviour) -> None:
    layer, head = interpret.best_heads(minilm.head_scores(run))[behaviour]
    at = page()
    at.button(key=f"rm:best:{behaviour}").click().run()
    assert not at.exception
    assert at.selectbox(key="w:layer").value == layer and at.selectbox(key="w:head").value == head
    torch.testing.assert_close(weights(at), run.weights[layer, head], atol=1e-6, rtol=0)


def test_the_gallery_draws_every_heads_score() -> None:
    at = page()
    scores = minilm.head_scores(minilm.forward(minilm.load(), minilm.DEFAULT_SENTENCE))
    torch.testing.assert_close(drawn(at)["Score: previous token"][0], scores.previous_token)
    at.segmented_control(key="w:behaviour").set_value("coreference").run()
    torch.testing.assert_close(
        drawn(at)["Score: coreference (a pronoun → its likely antecedent)"][0], scores.coreference
    )
    assert "coreference: from “it” to “animal”" in texts(at)


def test_a_sentence_without_the_coreference_pair_says_the_score_needs_it() -> None:
    at = page(sentence="The cat sat on the mat.")
    assert "coreference score needs a pronoun" in texts(at)
    assert at.button(key="rm:best:sink") and not [b for b in at.button if b.key == "rm:best:coreference"]


def test_the_coreference_score_reads_any_pronoun_on_the_users_sentence() -> None:
    """Issue 23: the score knew only "it" -> "animal"; any pronoun and its likely antecedent now."""
    at = page(sentence="My sister said she would bring the cake.")
    assert "coreference: from “she” to “sister”" in texts(at)
    assert [b for b in at.button if b.key == "rm:best:coreference"]


def test_norm_based_attention_and_rollout_are_the_packages(run) -> None:
    at = page()
    norms = minilm.norm_based(minilm.load(), run, 3)
    torch.testing.assert_close(drawn(at)["‖α·f(x)‖, layer 3 head 1"][0], norms.norms[1])
    torch.testing.assert_close(drawn(at)["Rollout through layer 3"][0], interpret.rollout(run.weights).rollout[3])
    assert f"{float(norms.norm_share[1].mean()):.0%}" in texts(at)


def test_a_long_sentence_is_cut_with_a_note_and_no_model_view() -> None:
    at = page(sentence="word " * 600)
    assert "the first 510 subword tokens" in texts(at)
    assert "The model view is drawn for up to 64 tokens" in texts(at)
    assert weights(at).shape == (512, 512)


def test_an_empty_sentence_is_a_clear_message() -> None:
    at = act(page(), "text_area", "w:sentence", "   ")
    assert any("sentence is empty" in e.value for e in at.error)


def test_the_page_draws_the_model_view_with_every_non_loopback_connection_refused(monkeypatch) -> None:
    connect = socket.socket.connect
    tried = []

    def loopback_only(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
            tried.append(address)
            raise OSError(f"network refused by the test: {address}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(OSError("refused")))
    minilm._load.cache_clear()  # the model is read from disk under the block, not taken from an earlier test
    at = page()
    assert len([t for t in drawn(at) if t.startswith("h")]) == 12
    assert not at.error and tried == []


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_other_pages_never_import_the_models_readers() -> None:
    code = (
        "import sys; from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({str(ROOT / 'dashboard.py')!r}, default_timeout=60); at.run()\n"
        "at.switch_page('pages/multi_head.py').run(); assert not at.exception\n"
        "print(sorted(m for m in ('safetensors', 'tokenizers', 'ui.views.model') if m in sys.modules))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- one model run per sentence, shared


def test_sessions_asking_at_once_share_one_run_and_heads_never_run_the_model_again(monkeypatch) -> None:
    import ui.views.model

    sentence = "Four visitors ask for this one sentence at the same moment."
    reads, started = [], threading.Event()
    read = minilm.read

    def slow_read(*args, **kwargs):
        reads.append(args[1])
        started.set()
        time.sleep(0.5)  # the others ask while this one is being made
        return read(*args, **kwargs)

    monkeypatch.setattr(minilm, "read", slow_read)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(ui.views.model.run(sentence)[1])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert reads == [sentence] and len(got) == 4 and all(r is got[0] for r in got)
    monkeypatch.setattr(minilm, "read", lambda *a, **k: pytest.fail("the model ran again"))
    monkeypatch.setattr(minilm, "forward", lambda *a, **k: pytest.fail("the model ran again"))
    reading = ui.views.model.run(sentence)[1]
    result = ui.views.model.head_result(reading, 2, 7)
    full = read(minilm.load(), sentence, weights_upto=512)
    torch.testing.assert_close(result.weights[0], full.weights[2, 7], atol=1e-6, rtol=0)
    assert ui.views.model.head_result(reading, 2, 7) is result


def test_a_stopped_maker_leaves_the_run_to_a_session_waiting_for_it() -> None:
    from server.shared import Shared

    shared = Shared(10, lambda v: 1)
    entered, go = threading.Event(), threading.Event()

    class Stopped(BaseException):  # as Streamlit's StopException: not an error of the input
        pass

    def stopped():
        entered.set()
        go.wait(10)
        raise Stopped

    def first():
        with pytest.raises(Stopped):
            shared.get("k", stopped)

    t = threading.Thread(target=first)
    t.start()
    entered.wait(10)
    waiter: list = []
    w = threading.Thread(target=lambda: waiter.append(shared.get("k", lambda: "made by the waiter")))
    w.start()
    time.sleep(0.2)
    go.set()
    t.join(10)
    w.join(10)
    assert waiter == ["made by the waiter"] and shared.made == 1


def test_an_input_error_reaches_every_waiter_and_is_not_kept() -> None:
    from server.shared import Shared

    shared = Shared(10, lambda v: 1)
    with pytest.raises(ValueError, match="empty"):
        shared.get("k", lambda: (_ for _ in ()).throw(ValueError("empty")))
    assert shared.get("k", lambda: 5) == 5 and shared.made == 1


def test_kept_readings_are_bounded_by_bytes_the_newest_always_kept() -> None:
    from server.shared import Shared

    shared = Shared(100, lambda v: v)
    for size in (40, 40, 30, 250):
        shared.get(f"k{size}-{len(shared.kept)}", lambda s=size: s)
    assert list(shared.kept.values()) == [250]
    shared.get("a", lambda: 60)
    shared.get("b", lambda: 30)
    assert list(shared.kept.values()) == [60, 30]


def test_a_reading_is_what_forward_gives_without_the_weights_of_a_long_sentence() -> None:
    model = minilm.load()
    sentence = "It was the animal that was too tired to cross the street. " * 12
    full = minilm.forward(model, sentence)
    reading = minilm.read(model, sentence)
    assert len(reading.tokens) > 64 and reading.weights is None
    assert torch.equal(reading.hidden_states, full.hidden_states)
    torch.testing.assert_close(reading.rollout, interpret.rollout(full.weights).rollout, atol=1e-6, rtol=1e-5)
    for name, values in minilm.head_scores(full).scores().items():
        torch.testing.assert_close(reading.scores.scores()[name], values, atol=1e-7, rtol=1e-6)
    whole = sum(v.nbytes for v in vars(full).values() if isinstance(v, torch.Tensor))
    bound = minilm.reading_bytes(len(reading.tokens))  # the coreference scores counted, found or not
    assert reading.nbytes <= bound <= reading.nbytes + 4 * 6 * 12 and bound < whole / 4
    norms = minilm.norm_based(model, reading, 4, head=3)
    torch.testing.assert_close(norms.norms[0], minilm.norm_based(model, full, 4).norms[3], atol=1e-6, rtol=0)


def test_a_long_text_is_tokenized_only_as_far_as_the_model_reads() -> None:
    model = minilm.load()
    words = ["the", "naïve", "animal's", "street,", "東京", "x" * 150, "(tired)"]
    text = " ".join(words[i % len(words)] for i in range(1500))
    whole = model.tokenizer.encode(text)
    e = minilm.encode(model, text)
    assert e.ids == tuple(whole.ids) and e.truncated and len(e.ids) == minilm.MAX_TOKENS
    huge = minilm.encode(model, "a" * (8 << 20) + " cat")  # one 8 MiB word: one [UNK], the rest dropped
    assert huge.tokens == ("[CLS]", "[UNK]", "cat", "[SEP]") and not huge.truncated
