"""Where the Watch it learn page trains: worker processes cost about 150 MB each (torch imported), so a server
under a memory limit (the hosted copy's 690 MB) trains in its own process, one run at a time."""

from __future__ import annotations

from server import budget, memory, training


def test_memory_limit_reads_the_first_file_that_sets_one(tmp_path):
    unlimited = tmp_path / "v1_root"
    unlimited.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    v2_max = tmp_path / "v2_max"
    v2_max.write_text("max\n")
    limited = tmp_path / "limited"
    limited.write_text("723517440\n")
    files = [str(tmp_path / "missing"), str(unlimited), str(v2_max), str(limited)]
    assert budget.memory_limit(files) == 723517440
    assert budget.memory_limit(files[:3]) is None


def test_cgroup_files_follow_the_process_own_cgroup(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("12:memory:/room/replica1\n0::/user.slice\n")
    files = memory._cgroup_limit_files(str(proc), "/cg")
    assert files[:2] == ["/cg/memory/room/replica1/memory.limit_in_bytes", "/cg/user.slice/memory.max"]


def test_limited_server_trains_in_threads_one_at_a_time():
    assert training.train_in_processes(limit=690 * 2**20, env="") is False
    assert training.train_in_processes(limit=None, env="") is True
    assert training.train_in_processes(limit=64 * 2**30, env="") is True
    assert training.train_in_processes(limit=690 * 2**20, env="process") is True
    assert training.train_in_processes(limit=None, env="thread") is False
    service = training.Service(processes=False)
    try:
        assert service.workers == 1
    finally:
        service.shutdown()
