"""One declaration per setting (attention/basics/params.py): everything that shows or reads a setting agrees with it."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

import ui
from attention import Config
from attention.basics.config import SETTINGS
from attention.basics.params import Param, flag
from attention.io.cli import toy
from attention.models import smollm2, tiny


def test_every_config_field_is_declared_with_a_label_and_a_help_sentence() -> None:
    assert list(SETTINGS) == [f.name for f in dataclasses.fields(Config)]
    for name, p in SETTINGS.items():
        assert p.label and p.help.endswith("."), name
        assert not re.search(r"\b00\d\b|tutorial \d", p.help), f"{name}: name tutorials by their titles"
        assert p.default == getattr(Config(), name), name


def test_a_setting_used_only_with_another_names_a_value_that_exists() -> None:
    for name, p in SETTINGS.items():
        if p.when is not None:
            other, value = p.when
            assert SETTINGS[other].kind == "choice" and value in SETTINGS[other].choices, name


def parser_actions() -> dict[str, argparse.Action]:
    # the first flag of each dest: --sentence, not --sentence-file
    actions: dict[str, argparse.Action] = {}
    for a in toy.parser()._actions:
        actions.setdefault(a.dest, a)
    return actions


def test_the_command_line_has_one_flag_per_setting_typed_by_its_declaration() -> None:
    actions = parser_actions()
    for name, p in SETTINGS.items():
        action = actions[name]
        assert flag(name) in action.option_strings
        if p.kind == "choice":
            assert tuple(action.choices) == p.choices, name
        if p.kind in ("int", "float"):
            assert action.type is (int if p.kind == "int" else float), name
        if p.when is not None:
            assert f"implies {flag(p.when[0])} {p.when[1]}" in action.help, name


@pytest.mark.parametrize("name", [n for n, p in SETTINGS.items() if p.when and p.kind in ("int", "float")])
def test_a_flag_given_alone_implies_the_value_it_is_used_with(name: str) -> None:
    value = "2" if SETTINGS[name].kind == "int" else "2.5"
    config = toy.build_config(toy.parser().parse_args([flag(name), value]))
    other, wanted = SETTINGS[name].when
    assert getattr(config, other) == wanted
    assert getattr(config, name) == (2 if SETTINGS[name].kind == "int" else 2.5)


def test_the_dashboard_offers_each_declared_setting_under_its_field_name_within_the_packages_bounds() -> None:
    offered = {name: p for name, p in SETTINGS.items() if p.dashboard is not None}
    assert offered and set(offered) <= set(ui.PARAMS)
    for name, p in offered.items():
        control = ui.PARAMS[name]
        assert control.label == p.label and control.help == p.help
        if p.kind in ("int", "float"):
            assert p.within(control.lo) and p.within(control.hi), name
            assert control.default is None and p.optional or control.lo <= control.default <= control.hi, name
        if p.kind == "choice":
            assert set(control.choices) <= set(p.choices) and control.default in control.choices, name
    starts = {name: p.start for name, p in offered.items() if p.kind in ("int", "float", "bool", "choice")}
    assert "kv_heads" in starts and starts["kv_heads"] is None  # one K/V head per query head unless a page says
    Config(**starts)  # the dashboard's starting values are a config the package accepts


def test_the_config_built_from_the_dashboard_reads_every_offered_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {"d_k": 5, "d_v": 7, "heads": 2, "seed": 9, "mask": "window", "window": 2, "scale": "temperature",
              "temperature": 3.0, "init": "linear", "bias": True, "out_proj": True, "dropout": 0.25,
              "head_layout": "independent", "d_model": 12, "padding": 1}  # fmt: skip
    monkeypatch.setattr(ui.results, "get", lambda name: values.get(name, ui.PARAMS[name].default))
    config = ui.config_from_state()
    assert {name: getattr(config, name) for name in values} == values
    assert config.sentence == ui.PARAMS["sentence"].default and config.cross_sentence is None


@pytest.mark.parametrize(
    ("param", "value", "message"),
    [
        (Param("int", "n", "N.", lo=1, hi=8), 9, "n must be between 1 and 8, got 9"),
        (Param("int", "n", "N.", lo=0), -1, "n must be 0 or more, got -1"),
        (Param("int", "n", "N.", lo=1), 0, "n must be at least 1, got 0"),
        (Param("int", "n", "N.", lo=1), 1.5, "n must be a whole number, got 1.5"),
        (Param("int", "n", "N.", lo=1), True, "n must be a whole number, got True"),
        (Param("float", "n", "N.", lo=0.5, hi=2.0), float("nan"), "n must be a number from 0.5 to 2, got nan"),
        (Param("float", "n", "N.", lo=0, hi=1, below_hi=True, rule="a probability in [0, 1)"), 1.0,
         "n must be a probability in [0, 1), got 1.0"),
        (Param("choice", "n", "N.", choices=("a", "b")), "c", "n must be one of a, b; got 'c'"),
        (Param("bool", "n", "N."), 1, "n must be true or false, got 1"),
        (Param("int", "n", "N.", lo=1), None, "n must be given"),
    ],
)  # fmt: skip
def test_a_declaration_says_what_it_accepts(param: Param, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        param.check("n", value)


def test_given_biases_are_used_and_checked() -> None:
    w = [[1.0, 0.0], [0.0, 1.0]]
    config = Config.from_embeddings([[1.0, 2.0], [3.0, 4.0]], d_k=2, d_v=2, init="given", bias=True,
                                    w_query=w, w_key=w, w_value=w, b_query=[1.0, -1.0], b_value=[0.5, 0.5])  # fmt: skip
    from attention import compute

    r = compute(config)
    assert r.queries[0].tolist() == [[2.0, 1.0], [4.0, 3.0]]
    assert r.keys[0].tolist() == [[1.0, 2.0], [3.0, 4.0]]  # no b_key given: zeros
    assert r.values[0].tolist() == [[1.5, 2.5], [3.5, 4.5]]
    with pytest.raises(ValueError, match="b_query has 3 numbers but must have 2"):
        config.replace(b_query=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="bias is off"):
        config.replace(bias=False)
    with pytest.raises(ValueError, match="init is not 'given'"):
        Config(b_query=[1.0])


# --------------------------------------------------------------------------- the registry the pages fill


def test_every_page_registers_its_own_settings_and_state_names_none() -> None:
    """ui/state.py holds no page's settings: each page registers its own (ui/settings.py for the toy pages, ui/views/
    for the others), every parameter has one owner, and `import ui` has filled the registry."""
    from ui import state

    assert set(state.OWNERS) == set(ui.PARAMS)
    owners = set(state.OWNERS.values())
    assert {"attention", "view", "compare", "llm", "model", "chat", "atlas", "watch_it_learn", "poll", "course",
            "inventory", "position"} <= owners  # fmt: skip
    assert {n for n, o in state.OWNERS.items() if o == "chat"} == {"chat_" + n for n in smollm2.SETTINGS}
    assert {n for n, o in state.OWNERS.items() if o == "watch_it_learn"} == {"train_" + n for n in tiny.SETTINGS}
    assert state.OWNERS["lesson"] == "course" and state.OWNERS["check_pre"] == "inventory"
    assert state.OWNERS["room"] == "poll" and state.OWNERS["shuffle"] == "position"
    assert not ui.PARAMS["present"].linked and not ui.PARAMS["host"].linked and ui.PARAMS["room"].linked
    long = {n: c.long for n, c in ui.PARAMS.items() if c.long}
    assert long == {
        "sentence": "the sentence",
        "cross_sentence": "the key/value sentence",
        "custom_mask": "the custom mask",
        "chat_prompt": "the prompt",
        "atlas_text": "the atlas's text",
    }
    assert "Param(" not in Path(state.__file__).read_text()  # it declares nothing itself


def test_a_url_key_is_declared_by_one_page(monkeypatch: pytest.MonkeyPatch) -> None:
    from ui import state

    monkeypatch.setattr(state, "PARAMS", dict(state.PARAMS))
    monkeypatch.setattr(state, "OWNERS", dict(state.OWNERS))
    taken = Param("int", "Layer", "Another page's layer.", default=0, lo=0, hi=3)
    with pytest.raises(ValueError, match="URL key 'chat_layer' of lesson_x is chat's already"):
        state.register("lesson_x", {"layer": taken}, prefix="chat_")
    added = state.register("lesson_x", {"depth": taken}, prefix="x_", long={"depth": "the depth"})
    assert added["x_depth"] == state.Control("int", 0, 0, 3, label="Layer", help="Another page's layer.",
                                             long="the depth")  # fmt: skip
    state.register("lesson_x", {"depth": taken}, prefix="x_")  # the same page again (a reload): replaced
    assert state.PARAMS["x_depth"].long == "" and state.OWNERS["x_depth"] == "lesson_x"
