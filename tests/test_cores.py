"""The cores the service counts: within a container's CPU limit, not the node's count."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service import cores

CPUS = len(os.sched_getaffinity(0))


@pytest.fixture
def cgroup(tmp_path: Path) -> tuple[Path, tuple[Path, Path]]:
    return tmp_path / "cpu.max", (tmp_path / "cfs_quota_us", tmp_path / "cfs_period_us")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max 100000\n", None),
        ("150000 100000\n", 1.5),
        ("50000 100000", 0.5),
        ("junk", None),
        ("100000 0", None),
    ],
)
def test_cgroup_v2_quota(
    cgroup: tuple[Path, tuple[Path, Path]], text: str, expected: float | None
) -> None:
    v2, v1 = cgroup
    v2.write_text(text)
    assert cores.quota(v2, v1) == expected


def test_cgroup_v1_quota(cgroup: tuple[Path, tuple[Path, Path]]) -> None:
    v2, (quota, period) = cgroup
    quota.write_text("-1\n")
    period.write_text("100000\n")
    assert cores.quota(v2, (quota, period)) is None  # unlimited
    quota.write_text("250000\n")
    assert cores.quota(v2, (quota, period)) == 2.5


def test_a_limit_below_the_cpus_is_rounded_up(cgroup: tuple[Path, tuple[Path, Path]]) -> None:
    v2, v1 = cgroup
    v2.write_text("50000 100000")  # half a CPU: one core, not none
    assert cores.available(v2, v1) == 1
    v2.write_text(f"{(CPUS + 3) * 100000} 100000")  # over the CPUs: the CPUs
    assert cores.available(v2, v1) == CPUS


def test_no_cgroup_is_every_cpu_of_the_process(cgroup: tuple[Path, tuple[Path, Path]]) -> None:
    assert cores.available(*cgroup) == CPUS
