"""What the tests and the benchmarks share: the live server and Chromium (live_server), Redis (redis_server), page
openers and chart readers for AppTest (charts), fixtures, oracles, the exported script's check (scripts), the command
line's bounded run (bounded), hypothesis strategies, and the vendored axe-core and the Kubernetes checkers' pins.

Tests import it through pytest's pythonpath, benchmarks by running from the checkout's root
(`python -m benchmarks.<name>`). It imports the product and nothing of tests/ or benchmarks/; the product never
imports it (tests/unit/project/test_layers.py)."""
