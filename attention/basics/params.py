"""One declaration per setting: its kind, bounds or choices, label and help, kept beside its Config field.

    d_k: int = setting(24, "int", "d_k (query/key width per head)", "Width of each query and key ...",
                       lo=1, hi=MAX_DIM, dashboard=(1, 256))

`setting` returns a dataclass field whose metadata holds a `Param`. Everything else reads these:
the Config's validation (`Param.check`), the command line (`attention.io.cli.toy.parser`: the flag is the field
name with dashes), the dashboard's URL, session state and widgets (`ui.state`, `ui.widgets`: the URL key is
the field name), and the settings comment of the "Code" export. Adding a setting is one `setting(...)`
line beside its field, plus its math and its tests (README, "Adding a parameter").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

# int, float: a number within lo..hi; choice: one of choices; bool; text: a sentence;
# matrix: rows of numbers (a JSON file on the command line); vector: a list of numbers; mask: rows of true/false
_UNSET = object()  # no dashboard default of its own: it starts from the package's

KINDS = ("int", "float", "choice", "bool", "text", "matrix", "vector", "mask")


@dataclass(frozen=True)
class Param:
    """How one setting is typed, bounded, named and explained, everywhere it appears."""

    kind: str
    label: str  # a widget's label: short
    help: str  # one sentence a learner understands (tutorials named by their titles)
    default: Any = None
    choices: tuple[str, ...] = ()
    lo: float | None = None  # the package's bounds: the Config refuses values outside them
    hi: float | None = None
    below_hi: bool = False  # hi itself is excluded (a probability below 1)
    rule: str = ""  # the bounds in words, when a formula says them better than two numbers
    optional: bool = False  # None is allowed (it means: derive it, or leave it out)
    # (setting, value): this one is used only when that setting has that value. On the command line giving it alone
    # implies that value (--temperature 2 implies --scale temperature); in the sidebar it shows only then.
    when: tuple[str, str] | None = None
    # What the dashboard offers: a (lo, hi) range narrower than the package's, or a subset of the choices;
    # True for everything the package allows; None when the setting is no dashboard control.
    dashboard: tuple | bool | None = None
    dashboard_default: Any = _UNSET  # the dashboard's starting value, when it differs from `default`
    metavar: str = ""  # the command line's placeholder

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {self.kind!r}")
        if self.kind == "choice" and not self.choices:
            raise ValueError("a choice setting needs its choices")

    @property
    def start(self) -> Any:
        """The value the dashboard starts from."""
        return self.default if self.dashboard_default is _UNSET else self.dashboard_default

    def bounds(self) -> str:
        """What the package accepts, in words: 'between 1 and 4096', 'one of none, causal', 'true or false'."""
        if self.rule:
            return self.rule
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.kind in ("int", "float"):
            fmt = (lambda x: str(int(x))) if self.kind == "int" else (lambda x: f"{x:g}")
            if self.lo is not None and self.hi is not None and self.kind == "float":
                return f"a number from {fmt(self.lo)} to {fmt(self.hi)}"
            if self.lo is not None and self.hi is not None:
                return f"between {fmt(self.lo)} and {fmt(self.hi)}"
            if self.lo is not None:
                return "0 or more" if self.lo == 0 else f"at least {fmt(self.lo)}"
        return f"a {self.kind}"

    def check(self, name: str, value: Any) -> None:
        """ValueError, naming the setting and what it accepts, when a scalar value is of the wrong type or bounds.

        Matrices, vectors and masks are checked by the Config, which also knows their shapes.
        """
        if value is None:
            if self.optional or self.kind in ("matrix", "vector", "mask"):
                return
            raise ValueError(f"{name} must be given ({self.bounds()})")
        if self.kind == "choice":
            if value not in self.choices:
                raise ValueError(f"{name} must be one of {', '.join(self.choices)}; got {value!r}")
        elif self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
        elif self.kind == "text":
            if not isinstance(value, str):
                raise ValueError(f"{name} must be text")
        elif self.kind in ("int", "float"):
            whole = self.kind == "int"
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
                raise ValueError(f"{name} must be a {'whole number' if whole else 'number'}, got {value!r}")
            if not self.within(value):
                raise ValueError(f"{name} must be {self.bounds()}, got {value!r}")

    def within(self, value: float) -> bool:
        """Whether a number lies within the package's bounds (a NaN never does)."""
        if not isinstance(value, int) and not math.isfinite(value):
            return False
        if self.lo is not None and value < self.lo:
            return False
        if self.hi is not None and (value >= self.hi if self.below_hi else value > self.hi):
            return False
        return True


def setting(default: Any, kind: str, label: str, help: str, **param: Any) -> Any:
    """A Config field with its declaration: `d_k: int = setting(24, "int", "d_k", "Width of ...", lo=1, ...)`."""
    declared = Param(kind, label, help, default=default, **param)
    return dataclasses.field(default=default, metadata={"param": declared})


def declarations(cls: type) -> dict[str, Param]:
    """Every declared setting of a dataclass, in field order: {field name: Param}."""
    return {f.name: f.metadata["param"] for f in dataclasses.fields(cls) if "param" in f.metadata}


def flag(name: str) -> str:
    """The command-line flag of a setting: `d_k` is `--d-k`."""
    return "--" + name.replace("_", "-")
