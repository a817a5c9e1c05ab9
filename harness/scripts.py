"""The exported "Code" script run in a fresh namespace, and the check that it reproduces `compute` (shared by the
export, preset, position and model tests)."""

from __future__ import annotations

import contextlib
import io
import json

import torch

from attention import Config, compute
from attention.io.script import script


def exec_script(config: Config) -> dict:
    """Run script(config) in a fresh namespace and return what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script(config), "<attention script>", "exec"), {"__name__": "__main__"})
    return json.loads(out.getvalue())


def assert_reproduces(printed: dict, config: Config) -> None:
    r = compute(config)
    torch.testing.assert_close(torch.tensor(printed["weights"]), r.weights, atol=1e-5, rtol=1e-5)
    # float32 sums in another order differ by a few ulps of the largest term, not of the (possibly cancelled) result
    size = max(1.0, float(r.output.abs().max()), float(r.concat.abs().max()))
    torch.testing.assert_close(torch.tensor(printed["output"]), r.output, atol=1e-5 * size, rtol=1e-5)
