"""Generating text one token at a time: each step one model run over the new token, reading the KV cache; the
next token drawn from softmax(logits / temperature) over the top k, seeded."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .decoder import Cache, Run, run_bytes, run_ids
from .reader import Model
from .tokens import display

NEXT_SHOWN = 10  # the most probable next tokens kept after every generated step (a page shows 5)


@dataclass(eq=False)
class Generation:
    """Tokens generated after a prompt, one model step each, at a temperature and top-k: the KV cache grown by
    one token a step, and of every step what a page draws (the new token's row of attention in every layer and
    head, its most probable next tokens). Step n (1-based) drew tokens[n - 1] from the logits before it, seeded
    by n - 1, so the same prompt and settings give the same tokens. Only the last step's logits are kept: they
    draw the next token. Grown by `generate_next`; never shrunk (a page showing n tokens reads the first n)."""

    prompt_length: int  # the prompt's tokens, before the first generated one
    temperature: float
    top_k: int
    cache: Cache  # the prompt's and every generated token's keys and values: prompt_length + len(tokens)
    logits: torch.Tensor  # (V,) the last token's: what the next token is drawn from
    tokens: list[int] = field(default_factory=list)
    rows: list[torch.Tensor] = field(default_factory=list)  # step n: (L, h, prompt_length + n) its row of weights
    next_ids: list[torch.Tensor] = field(default_factory=list)  # step n: (NEXT_SHOWN,) most probable next tokens
    next_probabilities: list[torch.Tensor] = field(default_factory=list)  # step n: (NEXT_SHOWN,) theirs

    @classmethod
    def after(cls, run: Run, temperature: float, top_k: int) -> Generation:
        """No token generated yet after a prompt's run (its cache is shared: steps never write into it)."""
        return cls(run.t_k, temperature, top_k, run.cache.copy(), run.logits[-1])

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        """Bytes held: the cache, the last logits and the kept rows and next tokens (4 or 8 bytes a number)."""
        tensors = [*self.cache.keys, *self.cache.values, self.logits, *self.rows, *self.next_ids,
                   *self.next_probabilities]  # fmt: skip
        return sum(t.numel() * t.element_size() for t in tensors)


def generation_step_bytes(model: Model, generation: Generation) -> int:
    """An upper bound of the memory `generate_next` takes: one step's run after the cache (`run_bytes`), and on the
    process's first step (or the first after the packed copy was let go) the packing of the layers (`pack_bytes`,
    about 100 MB: under a crowd, unasked for, it took the server past its limit), as `run_bytes` counts it for a
    one-token run. Hold the packed copy from this sizing to the step (`packed.pinned`)."""
    return run_bytes(model, 1, generation.cache.length)


def generate_next(model: Model, generation: Generation) -> int:
    """One model step: the next token drawn from the last logits, run through the model reading the cache, which
    grows by its key and value; returns the bytes the generation grew by (at the first step all of it: until then
    its cache and logits were the prompt run's)."""
    n = len(generation.tokens)
    before = generation.nbytes if n else 0
    token = choose(generation.logits, generation.temperature, generation.top_k, seed=n)
    run = run_ids(model, (token,), generation.cache)  # a copy of the cache with one more position
    probabilities = next_token_probabilities(run.logits[-1], generation.temperature, generation.top_k)
    top = probabilities.topk(NEXT_SHOWN)
    generation.cache, generation.logits = run.cache, run.logits[-1]
    generation.rows.append(run.weights[:, :, 0].clone())  # (L, h, T_k): the one query's row, apart from the Run
    generation.next_ids.append(top.indices)
    generation.next_probabilities.append(top.values)
    generation.tokens.append(token)  # last: a reader seeing n tokens finds the rest of step n already there
    return generation.nbytes - before


# next-token prediction ---------------------------------------------------------------------------------


def next_token_probabilities(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """softmax(logits / temperature) over the top_k largest logits (the rest 0): (V,) -> (V,).

    temperature 0 is greedy (all the probability on the largest logit). Any positive temperature is safe, down to
    the smallest float (5e-324): the logits are shifted by their maximum first, so the largest scaled logit is 0
    and the others at most 0 (-inf where the division overflows), in float64, where such a temperature is not 0."""
    if not temperature >= 0:  # a NaN too
        raise ValueError(f"temperature must be at least 0; got {temperature}")
    logits = logits.float()
    if temperature == 0:
        return F.one_hot(logits.argmax(), logits.shape[-1]).float()
    if top_k is not None and 0 < top_k < logits.shape[-1]:  # the same k for any temperature > 0: order is kept
        kth = logits.topk(top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    scaled = (logits.double() - logits.max()) / temperature  # (V,) <= 0, the largest exactly 0
    return torch.softmax(scaled, dim=-1).float()


def choose(logits: torch.Tensor, temperature: float, top_k: int | None, seed: int) -> int:
    """The next token drawn from `next_token_probabilities`, seeded (the same link gives the same text); the most
    probable at temperature 0."""
    probabilities = next_token_probabilities(logits, temperature, top_k)
    g = torch.Generator().manual_seed(seed)
    return int(torch.multinomial(probabilities, 1, generator=g))


def top_tokens(model: Model, probabilities: torch.Tensor, k: int = 5) -> list[tuple[int, str, float]]:
    """The k most probable next tokens: (id, text, probability), most probable first."""
    values, ids = probabilities.topk(k)
    return [(int(i), display(model.vocabulary[int(i)]), float(v)) for v, i in zip(values, ids, strict=True)]


def largest_changes(
    before: torch.Tensor, after: torch.Tensor, k: int = 10, n: int = 3
) -> list[tuple[int, float, float]]:
    """The n tokens whose probability changed most among the k most probable before or after (a head switched
    off): (V,), (V,) -> [(id, before, after)], the largest change first."""
    ids = torch.cat((before.topk(k).indices, after.topk(k).indices)).unique()  # (<= 2k,)
    change = (after[ids] - before[ids]).abs()
    order = change.argsort(descending=True, stable=True)[:n]
    return [(int(ids[i]), float(before[ids[i]]), float(after[ids[i]])) for i in order]
