"""Configs computed at once in many threads get exactly the numbers each gets alone (no shared RNG)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from attention import Config, compute

CONFIGS = (
    Config(init="linear", embedding_init="randn", heads=2, dropout=0.5, bias=True, out_proj=True, seed=1),
    Config(sentence="the chef prepared a delicious meal", init="rand", dropout=0.3, mask="causal", seed=2),
    Config(
        cross_sentence="and it was served with wine",
        cross_embedding_init="rand",
        head_layout="split",
        heads=4,
        init="rand-transposed",
        dropout=0.2,
        out_proj=True,
        seed=2**63 + 5,
    ),
    Config(embedding_init="rand", init="linear", head_layout="split", heads=8, d_out=32, dropout=0.7, seed=-9),
)
FIELDS = ("embeddings", "key_embeddings", "w_query", "w_key", "w_value", "weights", "dropped_weights", "output")


def test_parallel_threads_reproduce_each_single_threaded_result() -> None:
    alone = [compute(c) for c in CONFIGS]
    jobs = [i % len(CONFIGS) for i in range(200)]  # 4 threads x 50 calls each, configs interleaved
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda i: (i, compute(CONFIGS[i])), jobs))
    assert len(results) == 200
    for i, result in results:
        for name in FIELDS:
            assert torch.equal(getattr(result, name), getattr(alone[i], name)), (i, name)


def test_every_config_draws_dropout_so_a_shared_generator_would_show() -> None:
    for config in CONFIGS:
        r = compute(config)
        assert (r.dropped_weights != r.weights).any(), config
