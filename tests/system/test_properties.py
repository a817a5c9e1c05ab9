"""Properties of compute() over random configs, and nothing shared between sessions: RNG, module state, caches.

The dashboard serves many sessions from one process, so a session's numbers must depend on its own config
only: no global torch RNG, no `torch.set_*` per request, no module-level containers filled at run time,
and caches bounded in entries, time and bytes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import streamlit
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.runtime.caching.cache_utils import CachedFunc
from streamlit.testing.v1 import AppTest

import ui
from attention import Config, compute
from attention.basics.config import EMBEDDING_INITS, HEAD_LAYOUTS, MASKS, MAX_TOKENS, SCALES

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("the", "the", "chef", "<img", "**x**", "$\\frac{1}{0}$", "=1+1", "😀", "e\u0301", "שלום", "a\u200bb")
INITS = ("rand", "rand-transposed", "linear", "identity")


@st.composite
def configs(draw: st.DrawFn, *, dropout: bool = True) -> Config:
    """A valid config: up to 10 query and 8 key tokens, d_model up to 16, up to 4 heads, every mask and scale."""
    heads = draw(st.integers(1, 4))
    layout = draw(st.sampled_from(HEAD_LAYOUTS))
    d_model = heads * draw(st.integers(1, 4)) if layout == "split" else draw(st.integers(1, 16))
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=10))
    kw: dict = dict(
        sentence=" ".join(words), d_model=d_model, heads=heads, head_layout=layout,
        d_k=draw(st.integers(1, 8)), d_v=draw(st.integers(1, 8)), init=draw(st.sampled_from(INITS)),
        embedding_init=draw(st.sampled_from(EMBEDDING_INITS)), bias=draw(st.booleans()),
        out_proj=draw(st.booleans()), scale=draw(st.sampled_from(SCALES)), temperature=draw(st.floats(0.05, 50)),
        seed=draw(st.integers(-(2**63), 2**64 - 1)),
        dropout=draw(st.sampled_from((0.0, 0.1, 0.5, 0.99))) if dropout else 0.0,
    )  # fmt: skip
    t_k = len(words)
    if draw(st.booleans()):
        cross = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
        kw["cross_sentence"], t_k = " ".join(cross), len(cross)
    kw["mask"] = draw(st.sampled_from(MASKS))
    kw["padding"] = draw(st.integers(0, t_k + 1))
    kw["window"] = draw(st.integers(1, t_k + 1))
    if kw["mask"] == "custom":
        row = st.lists(st.booleans(), min_size=t_k, max_size=t_k)
        kw["custom_mask"] = draw(st.lists(row, min_size=len(words), max_size=len(words)))
    return Config(**kw)


@settings(max_examples=150, deadline=None)
@given(configs())
def test_weights_are_finite_rows_sum_to_one_and_masked_cells_are_zero(config: Config) -> None:
    r = compute(config)
    assert torch.isfinite(r.weights).all() and torch.isfinite(r.dropped_weights).all()
    assert torch.isfinite(r.context).all() and torch.isfinite(r.output).all()
    blocked = ~r.mask.expand_as(r.weights)
    assert (r.weights[blocked] == 0).all() and (r.dropped_weights[blocked] == 0).all()  # exactly 0
    sums = r.weights.sum(-1)  # (h, T_q)
    live = ~r.empty_rows
    torch.testing.assert_close(sums[:, live], torch.ones_like(sums[:, live]), rtol=0, atol=1e-5)
    assert (r.weights[:, r.empty_rows] == 0).all() and (r.context[:, r.empty_rows] == 0).all()


@settings(max_examples=150, deadline=None)
@given(configs(dropout=False))
def test_context_rows_lie_in_the_convex_hull_of_the_allowed_value_rows(config: Config) -> None:
    r = compute(config)
    for h in range(r.heads):
        for i in range(len(r.tokens)):
            allowed = r.mask[i]
            if not allowed.any():
                continue
            v = r.values[h][allowed]  # (allowed keys, d_v)
            tol = 1e-5 * (1 + float(v.abs().max()))
            assert (r.context[h, i] >= v.min(0).values - tol).all(), (h, i)
            assert (r.context[h, i] <= v.max(0).values + tol).all(), (h, i)


@settings(max_examples=100, deadline=None)
@given(configs())
def test_the_same_seed_gives_identical_outputs(config: Config) -> None:
    a, b = compute(config), compute(Config(**config.to_dict()))
    for name in ("embeddings", "key_embeddings", "w_query", "w_key", "w_value", "weights", "dropped_weights"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert torch.equal(a.context, b.context) and torch.equal(a.output, b.output)


# --------------------------------------------------------------------------- no global RNG while the app computes


def test_the_app_never_seeds_or_draws_from_torchs_global_rng(monkeypatch) -> None:
    def seeded(*args, **kwargs):
        raise AssertionError("the global torch RNG was seeded while the app computed")

    for module in (torch, torch.random):
        monkeypatch.setattr(module, "manual_seed", seeded)
        monkeypatch.setattr(module, "seed", seeded)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded)
    try:  # the patch is live for the app (AppTest runs the script in this process)
        torch.manual_seed(0)
    except AssertionError:
        pass
    else:
        raise AssertionError("torch.manual_seed is not patched")
    streamlit.cache_resource.clear()  # every run below computes afresh
    before = torch.random.get_rng_state()
    for url in ({}, {"init": "linear", "bias": "true", "dropout": "0.3", "out_proj": "true"}, {"init": "rand"}):
        at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
        for name, value in url.items():
            at.query_params[name] = value
        at.run()  # the course's map, the default page
        at.switch_page("pages/self_attention.py").run()
        for seed in (1, 77, 9999, 0):
            at.number_input(key="w:seed").set_value(seed).run()
            assert not at.exception, [e.value for e in at.exception]
            assert not at.error
        at.toggle(key="w:stepmode").set_value(True).run()
        assert not at.exception
    assert torch.equal(torch.random.get_rng_state(), before)


# --------------------------------------------------------------------------- no module-level session state

SHARED = [
    *sorted((ROOT / "ui").rglob("*.py")),
    *sorted((ROOT / "server").rglob("*.py")),
    # the package's modules, as before its parts moved into folders; models/ was not checked then (tiny.one_thread
    # sets torch's process-wide thread count while a run trains: a finding left for the training pool's issue)
    *sorted(p for p in (ROOT / "attention").rglob("*.py") if "models" not in p.relative_to(ROOT / "attention").parts),
]  # imported once, shared by every session
# a `python -m` entry point runs as a program of its own, never imported by the server: it may set torch's threads
SHARED = [p for p in SHARED if p.name != "__main__.py"]
# Tables filled at import and then only read, the same for every session: ui/state.py's settings registry (the page
# helpers' `register`; ui/views/__init__.py imports them all before any session reads a link), server/budget.py's
# housekeeping chores (`budget.chore`, a decorator, as the evictors are) and server/warmup.py's chores after the
# warm-up's imports (`warmup.after_warm`, a decorator too)
REGISTRY = {("ui", "state.py", "PARAMS"), ("ui", "state.py", "OWNERS"), ("ui", "state.py", "RENAMED"),
            ("server", "budget.py", "CHORES"), ("server", "warmup.py", "AFTER")}  # fmt: skip
SCRIPTS = [ROOT / "dashboard.py", *sorted((ROOT / "pages").glob("*.py"))]  # run afresh for every session
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault", "add", "discard",
            "remove", "__setitem__", "__delitem__"}  # fmt: skip
MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "bytearray"}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _global_state_uses(path: Path) -> list[str]:
    """Lines that seed or configure torch globally, or rebind module globals."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            found.append(f"{path.name}:{node.lineno} {type(node).__name__.lower()} {', '.join(node.names)}")
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            last = name.rsplit(".", 1)[-1]
            if name.startswith("torch.") and (
                last in ("manual_seed", "seed", "manual_seed_all", "use_deterministic_algorithms")
                or last.startswith("set_")
            ):
                found.append(f"{path.name}:{node.lineno} {name}()")
            if name in ("random.seed", "np.random.seed", "numpy.random.seed"):
                found.append(f"{path.name}:{node.lineno} {name}()")
    return found


def _mutable_module_containers(path: Path) -> list[str]:
    """Module-level containers that are not constants, or that a function of the module mutates."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    containers = {}
    for node in tree.body:
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
            isinstance(value, ast.Call) and _dotted(value.func).rsplit(".", 1)[-1] in MUTABLE_CALLS
        )
        for target in targets:
            if mutable and isinstance(target, ast.Name):
                containers[target.id] = node.lineno
    found = [
        f"{path.name}:{line} {name} is not a CONSTANT"
        for name, line in containers.items()
        if not (name.isupper() or name.startswith("__"))
    ]
    # filling a table once at import is fine; a function that writes to it would share data between sessions
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for node in (inner for f in functions for inner in ast.walk(f)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(node.value, ast.Name) and node.value.id in containers:
                found.append(f"{path.name}:{node.lineno} {node.value.id}[...] is assigned")
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in containers:
            found.append(f"{path.name}:{node.lineno} {node.target.id} is updated in place")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            if isinstance(node.func.value, ast.Name) and node.func.value.id in containers:
                if (path.parent.name, path.name, node.func.value.id) not in REGISTRY:
                    found.append(f"{path.name}:{node.lineno} {node.func.value.id}.{node.func.attr}()")
    return found


def test_pages_and_shared_modules_keep_no_global_state() -> None:
    assert len(SCRIPTS) > 2 and len(SHARED) > 3
    found = [use for path in SHARED + SCRIPTS for use in _global_state_uses(path)]
    found += [use for path in SHARED for use in _mutable_module_containers(path)]
    assert not found, found


def test_the_package_never_reads_streamlit_state() -> None:
    for path in sorted((ROOT / "attention").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "import streamlit" not in text and "session_state" not in text, path.name


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import torch\nSEEN = {}\nsessions = []\n\ndef f(k, v):\n    global sessions\n    torch.manual_seed(0)\n"
        "    torch.set_num_threads(1)\n    SEEN[k] = v\n    SEEN.update({})\n",
        encoding="utf-8",
    )
    assert len(_global_state_uses(bad)) == 3
    assert len(_mutable_module_containers(bad)) == 3  # sessions is not a constant; SEEN is written twice


# --------------------------------------------------------------------------- caches bounded in entries, time and bytes


def test_every_cache_in_ui_is_bounded() -> None:
    exported = {name: getattr(ui, name) for name in ui.__all__}  # `ui`'s names load at their first use
    caches = {name: f for name, f in exported.items() if isinstance(f, CachedFunc)}
    assert caches
    for name, f in caches.items():
        assert f._info.max_entries, name
    assert ui.results._cached._info.ttl and ui.results._cached_large._info.ttl  # results also expire
    for name, f in exported.items():
        if hasattr(f, "cache_info"):  # functools caches
            assert f.cache_info().maxsize is not None, name


def _nbytes(result) -> int:
    storages = {}
    for value in vars(result).values():
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


@settings(max_examples=60, deadline=None)
@given(configs())
def test_the_size_estimate_bounds_the_real_size(config: Config) -> None:
    assert _nbytes(compute(config)) <= ui.result_bytes(config) + 4096


def test_the_shared_cache_stays_well_inside_community_clouds_memory() -> None:
    """Community Cloud gives an app 690 MB at least and 2.7 GB at most (docs: Manage your app, resource limits)."""
    words = " ".join(f"w{i}" for i in range(MAX_TOKENS))
    widest = {k: int(ui.PARAMS[k].hi) for k in ("d_model", "d_k", "d_v", "heads")}
    largest = Config(sentence=words, out_proj=True, dropout=0.5, **widest)
    assert _nbytes(compute(largest)) <= ui.result_bytes(largest)
    largest_cross = largest.replace(cross_sentence=words)
    small, large = ui.results._cached._info.max_entries, ui.results._cached_large._info.max_entries
    worst = small * ui.results.SMALL_RESULT_BYTES + large * ui.result_bytes(largest_cross)
    assert worst < 512 * 2**20, worst / 2**20  # with ~350 MB of server and 20 sessions, far below 2.7 GB
