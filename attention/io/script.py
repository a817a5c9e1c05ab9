"""The standalone PyTorch script of a config, for the dashboard's Code panel and `--format script`.

`script(config)` writes the plain PyTorch that reproduces `compute(config)`: the inputs and weights
(`attention.io.script_inputs`), then queries, keys and values, the scores, position, mask, softmax, the
context and the output, each step only in the form this config uses.
"""

from __future__ import annotations

import math

import torch

from ..basics import masks, position
from ..basics.config import Config
from .script_inputs import Steps, literal, num, vector


def script(config: Config) -> str:
    """A standalone PyTorch script (torch, math and json only) that reproduces `compute(config)`.

    It draws the inputs and weights from a seeded `torch.Generator` in the package's order, embeds given
    matrices as literals, writes out only the steps this config uses (grouped-query heads, keys of another
    width, position encodings, score biases and bottom-right causal masks included), and prints the softmax
    weights (h, T_q, T_k) and the output (T_q, d_out) as JSON. User text appears only inside string literals.
    """
    return "\n".join(_Script(config).lines) + "\n"


class _Script(Steps):
    """Builds the script line by line: the steps of `Steps`, then the attention, the mask and the output."""

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        c = self.c
        self.mask_tensor = self._mask()  # (T_q, T_k), built once: a custom one can be 512 x 512
        self.bias_blocks = c.score_bias is not None and any(x == -math.inf for row in c.score_bias for x in row)
        allowed = self.mask_tensor
        if self.bias_blocks:
            allowed = allowed & (torch.tensor(c.score_bias) > -math.inf)
        self.empty_rows = bool((~allowed.any(dim=-1)).any())  # a query that sees no key at all
        self.rule = self._mask_rule()
        self.header()
        self.inputs()
        self.weights()
        self.key_inputs()
        self.position_inputs()
        self.attention()
        self.output()

    def attention(self) -> None:
        c = self.c
        self.section("queries, keys, values: one set per head")
        if c.init == "normal":
            self.emit(
                "m = float(x.double().pow(2).sum(-1).mean() * x_kv.double().pow(2).sum(-1).mean())",
                "sigma = m**-0.25 if m > 0 else 1.0  # then q . k / sqrt(d_k) has variance about 1 on these inputs",
                "W_query, W_key, W_value = W_query * sigma, W_key * sigma, W_value * sigma",
            )
        for p in self.projections:
            bias = f" + {p.bias}" if self._has_bias(p) else ""
            if self.split:
                self.emit(
                    f"{p.out} = ({p.x} @ {p.name}{bias}).view(-1, {p.heads}, {p.d}).transpose(0, 1)"
                    f"  # ({p.heads}, {p.t}, {p.d})"
                )
            else:
                self.emit(f"{p.out} = {p.x} @ {p.name}{bias}  # ({p.heads}, {p.t}, {p.d})")
        if self.grouped:
            self.emit(
                "keys = keys.repeat_interleave(h // h_kv, dim=0)  # (h, T_k, d_k): each K/V head serves its group",
                "values = values.repeat_interleave(h // h_kv, dim=0)  # (h, T_k, d_v)",
            )
        if c.position == "rope":
            self.rope()
        self.emit("")
        steps = (
            "scores",
            "scaling" * (c.scale != "none"),
            "ALiBi" * (c.position == "alibi"),
            "score bias" * (c.score_bias is not None),
            "mask" * self._masks(),
            "softmax",
            "dropout" * (c.dropout > 0),
        )
        self.section(", ".join(s for s in steps if s))
        self.emit("omega = queries @ keys.transpose(-2, -1)  # (h, T_q, T_k) unnormalised scores")
        if c.scale == "sqrt":
            self.emit("scaled = omega / math.sqrt(d_k)  # (h, T_q, T_k)")
        elif c.scale == "temperature":
            self.emit(f"scaled = omega / {num(c.temperature)}  # (h, T_q, T_k) divided by the temperature")
        else:
            self.emit("scaled = omega  # unscaled")
        if c.position == "alibi":
            self.alibi()
        if c.score_bias is not None:
            self.emit(
                f"score_bias = torch.tensor({literal(c.score_bias)})  # (T_q, T_k) given, added to the scores",
                "scaled = scaled + score_bias",
            )
        scores = self.mask()
        self.emit(f"weights = torch.softmax({scores}, dim=-1)  # (h, T_q, T_k), each row sums to 1")
        if scores != "scaled" and self.empty_rows:
            self.emit(
                "weights = weights.masked_fill(~mask.any(dim=-1)[:, None], 0.0)  # a row with no key: zeros, not NaN"
            )
        if c.dropout > 0:
            self.emit(
                f"keep = torch.rand(weights.shape, generator=g) >= {num(c.dropout)}  # dropout, as nn.Dropout trains",
                f"dropped = weights * keep / (1 - {num(c.dropout)})  # (h, T_q, T_k)",
                "context = dropped @ values  # (h, T_q, d_v)",
            )
        else:
            self.emit("context = weights @ values  # (h, T_q, d_v)")
        self.emit("")

    def rope(self) -> None:
        """RoPE in Llama's rotate-half form: pair (i, i + d_k/2) of every query and key turned by position x theta_i."""
        c = self.c
        t_q, t_k = len(c.tokens), len(c.key_tokens)
        self.emit(
            "",
            "# RoPE: every query and key rotated by its position (pairs i and i + d_k/2, Llama's rotate-half form)",
            f"theta = 1.0 / ({num(c.rope_base)} ** (torch.arange(0, d_k, 2, dtype=torch.int64).float() / d_k))"
            "  # (d_k/2,)",
            f"angles = torch.arange({self.positions}).float()[:, None] * theta  # (P, d_k/2): position x theta_i",
            "",
            "",
            "def rope(v, angles):",
            '    """v (..., T, d_k) turned pair by pair: v * cos + rotate_half(v) * sin."""',
            "    angles = torch.cat((angles, angles), dim=-1)  # (T, d_k)",
            "    v1, v2 = v.chunk(2, dim=-1)",
            "    return v * angles.cos() + torch.cat((-v2, v1), dim=-1) * angles.sin()",
            "",
            "",
            f"queries = rope(queries, angles[{self._query_rows(t_q)}])  # (h, T_q, d_k)",
            f"keys = rope(keys, angles[:{t_k}])  # (h, T_k, d_k)",
        )

    def alibi(self) -> None:
        """ALiBi: -slope_h x |i - j| added to the scaled scores, one slope a head (Press et al.)."""
        c = self.c
        slopes = position.alibi_slopes(c.heads).tolist()
        t_q, t_k = len(c.tokens), len(c.key_tokens)
        self.emit(
            f"slopes = torch.tensor({vector(slopes)})  # (h,) ALiBi's geometric slopes (Press et al.)",
            f"distance = (torch.arange({self._query_range(t_q)})[:, None] - torch.arange({t_k})[None, :]).abs()"
            "  # (T_q, T_k) |i - j|",
            "scaled = scaled + slopes[:, None, None] * -distance  # (h, T_q, T_k): farther keys, lower scores",
        )

    def mask(self) -> str:
        """Emit the mask (True = may attend) and return the expression the softmax takes.

        A custom mask that some rule gives (causal, padding, window, every key, no key) is written as that
        rule, so a 512-token causal mask is one line, not a quarter of a million literals. A score bias's -inf
        entries block as the mask does.
        """
        t_q, t_k = len(self.c.tokens), len(self.c.key_tokens)
        kind, n = self.rule
        if kind == "none":
            if self.c.mask == "custom":
                self.emit("# the custom mask lets every query see every key: nothing to mask")
            if not self.bias_blocks:
                return "scaled"
            self.emit('mask = score_bias > float("-inf")  # (T_q, T_k): a -inf in the score bias blocks')
            return 'scaled.masked_fill(~mask, float("-inf"))'
        if self.c.mask == "custom" and kind not in ("custom", "blocked"):
            self.emit(f"# the custom mask is exactly the {kind} mask, so it is written as that rule")
        shift = masks.offset(t_q, t_k, self.c.causal_align) if self.c.mask != "custom" else 0
        if kind == "causal":
            tril, how = (f"tril(diagonal={shift})", "causal, bottom-right aligned") if shift else ("tril()", "causal")
            self.emit(
                f"mask = torch.ones({t_q}, {t_k}, dtype=torch.bool).{tril}  # (T_q, T_k) {how}, True = may attend"
            )
        elif kind == "padding":
            self.emit(
                f"mask = torch.ones({t_q}, {t_k}, dtype=torch.bool)  # (T_q, T_k), True = may attend",
                f"mask[:, {max(t_k - n, 0)}:] = False  # the last {n} keys are padding",
            )
        elif kind == "window":
            at = f"torch.arange({t_q})[:, None]" + (f" + {shift}" if shift else "")
            self.emit(
                f"i, j = {at}, torch.arange({t_k})[None, :]" + ("  # bottom-right aligned" if shift else ""),
                f"mask = (j <= i) & (j > i - {n})  # (T_q, T_k) query i sees keys i-{n - 1} .. i",
            )
        elif kind == "blocked":
            self.emit(f"mask = torch.zeros({t_q}, {t_k}, dtype=torch.bool)  # (T_q, T_k): every key blocked")
        else:
            # no rule gives it: one string of 0/1 per query, at most T_q * (T_k + 8) characters
            rows = "".join(f'    "{"".join("1" if x else "0" for x in row)}",\n' for row in self.mask_tensor.tolist())
            self.emit(
                f"mask_rows = [\n{rows}]  # row i: 1 where query i may attend to key j",
                'mask = torch.tensor([[c == "1" for c in row] for row in mask_rows])  # (T_q, T_k), True = may attend',
            )
        if self.bias_blocks:
            self.emit('mask = mask & (score_bias > float("-inf"))  # a -inf in the score bias blocks too')
        return 'scaled.masked_fill(~mask, float("-inf"))'

    def output(self) -> None:
        c = self.c
        self.section("heads side by side" + (", then the output projection" if c.out_proj else ""))
        self.emit("concat = context.transpose(0, 1).reshape(context.shape[1], -1)  # (T_q, h * d_v)")
        if c.out_proj:
            drawn = c.init in ("rand", "rand-transposed", "linear")
            b_out = " + b_out" if c.out_bias and (drawn or (c.init == "given" and c.b_out is not None)) else ""
            self.emit(f"output = concat @ W_out{b_out}  # (T_q, {self.d_o})")
        else:
            self.emit("output = concat")
        self.emit('print(json.dumps({"weights": weights.tolist(), "output": output.tolist()}))')

    # the mask's rule ---------------------------------------------------------------------------

    def _masks(self) -> bool:
        """Whether the mask (or a score bias's -inf) blocks anything that the script must write out."""
        return self.rule[0] != "none" or self.bias_blocks

    def _mask_rule(self) -> tuple[str, int]:
        """The simplest rule that gives this config's mask, and its number: ("none" | "blocked" | "causal",
        0), ("padding", n), ("window", w), or ("custom", 0) when no rule does."""
        c = self.c
        if c.mask == "none" or (c.mask == "padding" and c.padding == 0):
            return "none", 0
        if c.mask != "custom":
            return c.mask, {"padding": c.padding, "window": c.window}.get(c.mask, 0)
        m = self.mask_tensor  # (T_q, T_k)
        if bool(m.all()):
            return "none", 0
        if not bool(m.any()):
            return "blocked", 0
        t_q, t_k = m.shape
        n, w = t_k - int(m[0].sum()), int(m.sum(dim=-1).max())  # the only padding and window that could fit
        for kind, number, rule in (
            ("causal", 0, masks.causal(t_q, t_k)),
            ("padding", n, masks.padding(t_q, t_k, n)),
            ("window", w, masks.window(t_q, t_k, w)),
        ):
            if torch.equal(m, rule):
                return kind, number
        return "custom", 0

    def _mask(self) -> torch.Tensor:
        c = self.c
        return masks.build(
            c.mask, len(c.tokens), len(c.key_tokens), n_padding=c.padding, width=c.window, custom=c.custom_mask,
            align=c.causal_align,
        )  # fmt: skip  # (T_q, T_k)
