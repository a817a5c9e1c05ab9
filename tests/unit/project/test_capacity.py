"""benchmarks/capacity.py: the room's size from measured figures. Its arithmetic on figures the test chooses, and its
reading of what deploy/ promises (so a changed limit there changes the table)."""

from __future__ import annotations

from benchmarks import capacity


def load(rest: float, per: float, cores: float, n: int = 30) -> dict:
    return {"sessions": n, "think_s": 5.0, "latency_p95_ms": 300, "cpu_cores_busy_moving": {"server": cores},
            "rss_mib": {"1 sessions loaded": rest, f"{n} sessions loaded": rest + per * (n - 1)}}  # fmt: skip


def test_the_deploy_files_are_read() -> None:
    d = capacity.deploy_figures()
    assert d["memory_limit_mib"] == 690 and d["cpu_limit"] == 1 and d["max_replicas"] >= 3
    assert d["conn_per_replica"] > 0 and d["conn_per_address"] > 0


def test_a_replica_takes_learners_until_memory_or_cpu_runs_out() -> None:
    deploy = {"memory_limit_mib": 690.0, "cpu_request": 0.5, "cpu_limit": 1.0, "max_replicas": 30,
              "conn_per_replica": 900, "conn_per_address": 500}  # fmt: skip
    # memory: 690 * 0.94 - 190.7 (200 MB) - 400 = 57.9 MiB left, 2 MiB a learner: 28; CPU: 0.8 / 0.01 = 80
    learner = capacity.learner_figures(load(400, 2.0, 0.3))
    assert round(learner["per_learner_mib"], 6) == 2.0 and round(learner["per_learner_cores"], 6) == 0.01
    text = capacity.table(learner, deploy, None, node_cpu=4, node_gib=16)
    assert "**28 learners a replica** (memory binds)" in text
    assert "| 300 | 11 | 12 | 2 |" in text  # 8 replicas a node (CPU request 0.5 of 4)
    assert "| 10,000 | 358 | 359 | 45 | over the autoscaler's maxReplicas 30" in text
    assert "per address" in text.split("| 1,000 |")[1].splitlines()[0]
    # a heavier learner's CPU binds instead: 0.8 / 0.1 = 8, and a full replica (0.8 of a core) packs 5 to a node
    text = capacity.table(capacity.learner_figures(load(300, 0.5, 3.0)), deploy, None, node_cpu=4, node_gib=16)
    assert "**8 learners a replica** (CPU binds)" in text and "| 40 | 5 | 6 | 2 |" in text
