"""The mask editor's "Take it to the command line": the command it shows is inert in every shell (bash,
PowerShell, cmd.exe) whatever the sentence, and run beside the downloaded mask.json it gives the page's weights.

A link sets the sentence, so a crafted one must not make the shown command run anything when pasted: the
sentence travels in mask.json, and the command holds only flags, numbers, choices and the file's name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from attention import Config, compute
from attention.io.cli.main import main

W = {"init": "normal", "draws": "stable"}  # the dashboard's weights (issue 23)
ROOT = Path(__file__).resolve().parents[2]
# Nothing here means anything to bash, zsh, PowerShell or cmd.exe: no quotes, &, |, <, >, ^, %, !, $, `, ;,
# parentheses, braces, wildcards, # or line breaks.
INERT = re.compile(r"[A-Za-z0-9 ._=/-]+")
SENTENCES = [
    "a & calc.exe & b",
    "%PATH% then %USERNAME%",
    'say "hi" & "calc.exe"',
    "up^arrow ^& calc",
    "wow! !x! bang",
    "$(touch pwned) and `touch pwned2` ${HOME}",
    "a; touch pwned3 | cat > y < z",
    "line one\nline two\r\ntouch pwned4",
    "naïve café 日本語 😀 \u202eevil",
    "-dash --seed=9 first 'single' (paren) {brace} *star ?q #hash",
]


@pytest.fixture
def downloads(monkeypatch) -> dict[str, bytes]:
    """What the page's download buttons hold, by file id (the last part of the button's URL)."""
    files: dict[str, bytes] = {}
    load = MemoryMediaFileStorage.load_and_get_id

    def keep(self, data, mimetype, kind, filename=None):
        file_id = load(self, data, mimetype, kind, filename)
        files[file_id] = data if isinstance(data, bytes) else data.encode()
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    return files


def editor(sentence: str, **params: str) -> AppTest:
    """The mask editor opened from a link holding this sentence."""
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
    at.query_params["sentence"] = sentence
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    at.switch_page("pages/mask_editor.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def saved(at: AppTest, downloads: dict[str, bytes], folder: Path) -> dict:
    """Save the page's mask.json into folder, as a person would, and return what it holds."""
    url = at.get("download_button")[0].proto.url
    (folder / "mask.json").write_bytes(downloads[Path(url).stem])
    return json.loads((folder / "mask.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("sentence", SENTENCES)
def test_the_shown_command_is_inert_and_reproduces_the_page(sentence: str, downloads, tmp_path, monkeypatch,
                                                             capsys) -> None:  # fmt: skip
    at = editor(sentence, seed="5", d_k="8", mask="custom")
    command = at.code[0].value
    assert INERT.fullmatch(command), command
    assert command.startswith("python -m attention ") and "--sentence-file mask.json" in command
    data = saved(at, downloads, tmp_path)
    assert data["sentence"] == sentence

    monkeypatch.chdir(tmp_path)  # the command is run where mask.json was saved
    assert main([*command.split()[3:], "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    page = compute(Config(sentence=sentence, seed=5, d_k=8, mask="custom", custom_mask=data["mask"], **W))
    assert out["tokens"] == list(page.tokens)
    torch.testing.assert_close(torch.tensor(out["heads"][0]["weights"]), page.weights[0])


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_the_shown_command_runs_as_it_is_in_a_real_shell(downloads, tmp_path) -> None:
    sentence = 'a & touch p1 & "x" %PATH% ^& !x! $(touch p2) `touch p3`; touch p4 | cat > p5\ntouch p6'  # all at once
    at = editor(sentence, heads="2", mask="custom")
    command = at.code[0].value
    data = saved(at, downloads, tmp_path)
    # pasted into /bin/sh as shown, with `python` meaning this interpreter
    p = subprocess.run(["/bin/sh", "-c", command.replace("python", sys.executable, 1) + " --format json"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["mask.json"]  # nothing else was run
    out = json.loads(p.stdout)
    page = compute(Config(sentence=sentence, heads=2, mask="custom", custom_mask=data["mask"], **W))
    torch.testing.assert_close(torch.tensor(out["heads"][1]["weights"]), page.weights[1])
