"""Downloads: what Streamlit keeps for a session never holds a Result, every export is made from a small recipe
when clicked and bounded in size, a heavy one never waits behind another, and what is too big comes with the
command line that writes it instead.
"""

from __future__ import annotations

import gc
import gzip
import json
import sys
import threading
import types
from pathlib import Path

import pytest
import torch
from streamlit.elements.widgets import button as button_module
from streamlit.testing.v1 import AppTest

import ui
from attention import Config, Result, compute, presets
from attention.io import export
from attention.io.cli.main import main
from server import media

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "the cat sat on the mat while the dog slept"
KEPT_MAX_BYTES = 256 << 10  # what one session may keep: its parameters, labels and recipes, not matrices


def open_page(path: str, monkeypatch: pytest.MonkeyPatch, **params: str) -> tuple[AppTest, list]:
    """The dashboard on a page, and every callable its download buttons were handed (run when clicked)."""
    handed: list = []
    real = button_module.marshall_file

    def record(coordinates, data, *args, **kw):  # AppTest has no media store: note what a server would keep
        if callable(data):
            handed.append(data)
        return real(coordinates, data, *args, **kw)

    monkeypatch.setattr(button_module, "marshall_file", record)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=120)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()  # the course's map, the default page
    handed.clear()
    at.switch_page(f"pages/{path}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at, handed


def session_state(at: AppTest):
    """Streamlit's SessionState behind AppTest: values, widget metadata (callbacks, their args, serdes)."""
    return object.__getattribute__(object.__getattribute__(at.session_state, "_state"), "_state")


def shared(namespace: dict) -> bool:
    """Whether a function's globals are an imported module's (shared by every session; its caches are bounded),
    not a page's: Streamlit runs a page in a new namespace each run, which its functions keep alive."""
    module = sys.modules.get(namespace.get("__name__", ""))
    return module is not None and vars(module) is namespace


def kept(roots: list) -> list:
    """Everything a per-session reference keeps alive: modules, classes and imported modules' globals are
    shared by every session, so they are not followed; a function's closure, defaults and a page's globals are."""
    seen: set[int] = set()
    found, stack = [], list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type)):
            continue
        seen.add(id(obj))
        found.append(obj)
        if isinstance(obj, types.FunctionType):
            cells = [c.cell_contents for c in obj.__closure__ or () if c.cell_contents is not None]
            stack += [*cells, *(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()]
            if not shared(obj.__globals__):
                stack.append(obj.__globals__)
        else:
            stack += gc.get_referents(obj)
    return found


PAGES = [
    pytest.param("self_attention", {"heads": "2"}, id="self_attention"),
    pytest.param("masks", {"mask": "custom", "heads": "2"}, id="masks"),
    pytest.param("multi_head", {"heads": "3"}, id="multi_head"),
    pytest.param("cross_attention", {"heads": "2"}, id="cross_attention"),
    pytest.param("tutorials", {"preset": "chef-multi-head"}, id="tutorials"),
    pytest.param("soft_lookup", {}, id="soft_lookup"),
    pytest.param("mask_editor", {}, id="mask_editor"),
    pytest.param("pitfalls", {}, id="pitfalls"),
    pytest.param("scaling", {}, id="scaling"),
    pytest.param("compare", {}, id="compare"),
]


@pytest.mark.parametrize("path, params", PAGES)
def test_what_a_session_keeps_holds_no_result(path: str, params: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    at, handed = open_page(path, monkeypatch, sentence=SENTENCE, **params)
    objects = kept([session_state(at), *handed])
    big = [type(o).__name__ for o in objects if isinstance(o, (Result, torch.Tensor))]
    assert big == []
    assert sum(sys.getsizeof(o) for o in objects) < KEPT_MAX_BYTES


def test_a_click_makes_the_file_from_the_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    at, handed = open_page("self_attention", monkeypatch, sentence=SENTENCE, heads="2", head="1", mask="causal")
    names = ("d_model", "d_k", "d_v", "seed", "padding", "window", "init", "draws")
    defaults = {name: ui.PARAMS[name].default for name in names}
    result = compute(Config(sentence=SENTENCE, heads=2, mask="causal", **defaults))  # the page's config
    ui.results._cached.clear()  # the click recomputes it through the cache
    csv, json_file = handed  # embeddings.csv (the picker's first choice), result.json
    m, rows, cols = ui.matrix_of(result, "embeddings", 1)
    assert csv() == export.matrix_csv(m, rows, cols)
    assert json.loads(json_file()) == json.loads(export.to_json(result))
    picked = at.selectbox(key="sa:dl:which").set_value("weights").run()
    assert not picked.exception
    m, rows, cols = ui.matrix_of(result, "weights", 1)  # the head shown: head 2
    assert handed[-2]() == export.matrix_csv(m, rows, cols)


CONFIGS = [
    Config(sentence=SENTENCE),
    Config(sentence=SENTENCE, heads=4, mask="causal", dropout=0.3, bias=True, out_proj=True),
    Config(sentence=SENTENCE, cross_sentence="and it was served with wine", heads=2, mask="padding", padding=2),
    Config(sentence=SENTENCE, mask="custom", custom_mask=[[(i + j) % 3 > 0 for j in range(10)] for i in range(10)]),
    Config(sentence=" ".join(f"w{i}" for i in range(64)), heads=2, d_model=32, head_layout="split", scale="none"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
def test_a_recipe_gives_back_its_config_and_the_json_size_is_estimated(config: Config) -> None:
    recipe = ui.exports._Recipe.of(config)
    assert recipe.config() == config
    assert sys.getsizeof(recipe.mask) < 4 * len(config.tokens) ** 2 + 100
    actual = len(export.to_json(compute(config)))
    assert 0.8 <= ui.json_size(compute(config)) / actual <= 1.3


def test_a_recipe_keeps_a_custom_mask_as_text_and_refuses_big_given_matrices() -> None:
    t = 512
    config = Config(sentence=" ".join(f"w{i}" for i in range(t)), mask="custom", custom_mask=[[True] * t] * t)
    recipe = ui.exports._Recipe.of(config)
    assert recipe.config() == config
    assert len(recipe.mask) == t * (t + 1) - 1 and all(value is not config.custom_mask for _, value in recipe.fields)
    assert ui.exports._Recipe.of(Config.from_embeddings([[0.5] * 128] * 64)) is None
    preset = presets.PRESETS["chef-multi-head"].config  # given embeddings, a few dozen numbers
    assert ui.exports._Recipe.of(preset).config() == preset


def test_the_gzipped_json_is_the_json(tmp_path: Path) -> None:
    recipe = ui.exports._Recipe.of(CONFIGS[1])
    packed = ui.export_file("json.gz", recipe)
    assert gzip.decompress(packed).decode() == export.to_json(compute(CONFIGS[1]))


def test_a_heavy_export_waits_for_the_one_being_made(monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = ui.exports._Recipe.of(CONFIGS[1])
    answers: dict[str, object] = {}
    m, rows, cols = ui.matrix_of(compute(CONFIGS[1]), "omega", 0)
    want = export.matrix_csv(m, rows, cols)

    def ask() -> None:
        answers["light"] = ui.export_file("omega", recipe, 0)  # a light one is made at once
        answers["omega"] = ui.export_file("omega", recipe, 0, heavy=True)

    with media.EXPORT_LOCK:  # another heavy export is being made
        other = threading.Thread(target=ask)
        other.start()
        other.join(timeout=2)
        assert other.is_alive() and answers == {"light": want}  # the heavy one waits
    other.join(timeout=30)
    assert answers["omega"] == want and not media.EXPORT_LOCK.locked()

    monkeypatch.setattr(media, "EXPORT_WAIT_S", 0.2)  # a wait that runs out: the note, in each format
    with media.EXPORT_LOCK:
        late = {what: ui.export_file(what, recipe, 0, heavy=True) for what in ("omega", "json", "json.gz")}
    assert late["omega"] == ui.exports.BUSY + "\n"
    assert json.loads(late["json"]) == {"busy": ui.exports.BUSY}
    assert json.loads(gzip.decompress(late["json.gz"])) == {"busy": ui.exports.BUSY}
    assert not media.EXPORT_LOCK.locked()


def test_a_served_download_outlives_other_sessions_runs_for_keep_s(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.runtime.media_file_manager import MediaFileManager
    from streamlit.runtime.media_file_storage import MediaFileKind
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    storage = MemoryMediaFileStorage("/media")
    manager = MediaFileManager(storage)
    assert media._keep(storage) and media._keep(storage)  # installed once, the same object
    placeholder = manager.add_deferred(lambda: "a,b\n1,2\n", "text/csv", "coords", "x.csv")
    url = manager.execute_deferred(placeholder)  # a click: the file is made, referenced by no session
    file_id = url.rsplit("/", 1)[1].split(".")[0]
    picture = manager.add(b"\x89PNG", "image/png", "coords2")  # an image: Streamlit's own rules
    manager.clear_session_refs()
    for _ in range(5):  # five script runs of other sessions end
        manager.remove_orphaned_files()
    assert storage.get_file(file_id).content == b"a,b\n1,2\n"  # Streamlit alone drops it after two
    assert storage.get_file(file_id).kind == MediaFileKind.DOWNLOADABLE
    with pytest.raises(Exception, match="Bad filename"):
        storage.get_file(picture.rsplit("/", 1)[1].split(".")[0])
    monkeypatch.setattr(media, "KEEP_S", 0.0)
    storage.sweep()
    with pytest.raises(Exception, match="Bad filename"):
        storage.get_file(file_id)


def test_kept_downloads_are_bounded_in_bytes_the_newest_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.runtime.media_file_manager import MediaFileManager
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    storage = MemoryMediaFileStorage("/media")
    manager = MediaFileManager(storage)
    media._keep(storage)
    monkeypatch.setattr(media, "KEEP_BYTES", 2500)
    ids = []
    for i in range(3):
        url = manager.execute_deferred(manager.add_deferred(lambda i=i: bytes([i]) * 1000, "x/y", f"c{i}", "f"))
        ids.append(url.rsplit("/", 1)[1].split(".")[0])
        manager.remove_orphaned_files()
        manager.remove_orphaned_files()
    assert list(storage._kept) == ids[1:]  # 3000 bytes kept would be over 2500: the oldest went
    with pytest.raises(Exception, match="Bad filename"):
        storage.get_file(ids[0])


def test_too_big_is_not_offered_and_the_note_gives_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ui.exports, "JSON_MAX_BYTES", 10_000)  # as the largest settings are against the real bounds
    monkeypatch.setattr(ui.exports, "CSV_MAX_CELLS", 50)
    at, handed = open_page("self_attention", monkeypatch, sentence=SENTENCE, mask="causal", heads="2")
    disabled = {b.label for b in at.button if b.disabled}
    assert {"embeddings.csv", "result.json"} <= disabled
    captions = " ".join(c.value for c in at.caption)
    assert "too big to download here" in captions and "command line" in captions
    (command,) = [c.value for c in at.code if c.value.startswith("python -m attention")]
    assert "--format json" in command and ui.exports.INPUTS_FILE in command
    assert [b.label for b in at.get("download_button")] == [ui.exports.INPUTS_FILE]
    assert len(handed) == 1  # only the inputs file is offered


@pytest.mark.parametrize("config", CONFIGS[1:4], ids=range(3))
def test_the_command_line_in_the_note_writes_the_same_numbers(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    command = ui.command_line(config)
    assert command[:3] == ["python", "-m", "attention"] and command[-2:] == ["--format", "json"]
    (tmp_path / ui.exports.INPUTS_FILE).write_text(ui.export_file("inputs", ui.exports._Recipe.of(config)))
    monkeypatch.chdir(tmp_path)
    assert main(command[3:]) == 0
    written, want = json.loads(capsys.readouterr().out), json.loads(export.to_json(compute(config)))
    assert written["output"] == want["output"]
    for name in ("omega", "weights", "dropped_weights", "context", "mask"):
        assert [h[name] for h in written["heads"]] == [h[name] for h in want["heads"]]


def test_a_preset_is_named_on_the_command_line() -> None:
    name = "spelled-out-multi-head"  # its JSON is 296 MB: never offered here
    assert ui.command_line(presets.PRESETS[name].config)[3:] == ["--preset", name, "--format", "json"]
