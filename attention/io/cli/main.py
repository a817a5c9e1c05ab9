"""`python -m attention`: the command line's entry point. `--train` runs the tiny model's training
(`io.cli.tiny`), `--atlas` every head of a real model scored (`io.cli.atlas`), `--model smollm2` the chat
model (`io.cli.smollm2`), `--model tiny` the tiny model's circuits (`io.cli.tiny_circuits`), everything else the toy
computation (`io.cli.toy`, with `--model minilm`); each has flags of its own.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from . import toy
from .common import OUT_OF_MEMORY, fail


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on argv (sys.argv[1:] when None); returns the exit status: 0, or 2 for bad input.

    Whatever a library raises for memory (MemoryError, torch's "can't allocate memory") or tokenizers raises
    from its Rust side (a PanicException, not an Exception) is one line with status 2 too, never a traceback."""
    try:
        return _main(argv)
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    except RuntimeError as exc:
        return fail(OUT_OF_MEMORY if "alloc" in str(exc) else f"cannot compute this config: {exc}")
    except BrokenPipeError:  # the reader left: __main__ ends quietly
        raise
    except Exception as exc:  # noqa: BLE001  one line, whatever went wrong (tokenizers' errors are Exception)
        return fail(f"{type(exc).__name__}: {exc}")
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":  # KeyboardInterrupt, SystemExit: as they are
            raise
        return fail(f"the tokenizer failed: {exc}")


def _main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a == "--train" or a.startswith("--train=") for a in argv):  # the tiny model's training: flags of its own
        from . import tiny

        return tiny.main(argv)
    if "--atlas" in argv:  # every head of a real model scored: flags of its own
        from . import atlas

        return atlas.main(argv)
    if _model(argv, "smollm2"):
        from . import smollm2  # the chat model: flags of its own (--generate, --temperature)

        return smollm2.main(argv)
    if _model(argv, "tiny"):
        from . import tiny_circuits  # the tiny model trained live, its circuits: flags of its own

        return tiny_circuits.main(argv)
    return toy.run(argv)


def _model(argv: Sequence[str], name: str) -> bool:
    """Whether argv asks for `--model name` (or `--model=name`)."""
    return f"--model={name}" in argv or any(a == "--model" and b == name for a, b in zip(argv, argv[1:], strict=False))
