"""The metrics of several workers, read from their files (service.metrics), in this process:
the files of a worker that has died, removed by whichever scrape comes first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.mmap_dict import MmapedDict, mmap_key

from service import metrics


def dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def gauge_file(directory: Path, pid: int) -> Path:
    path = directory / f"gauge_livesum_{pid}.db"
    values = MmapedDict(str(path))  # type: ignore[no-untyped-call]
    key = mmap_key("pe_cache_bytes", "pe_cache_bytes", [], [], "Bytes held.")
    values.write_value(key, 42.0, 0.0)  # type: ignore[no-untyped-call]
    values.close()  # type: ignore[no-untyped-call]
    return path


def test_a_dead_workers_gauges_are_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    path = gauge_file(tmp_path, dead_pid())
    group = metrics._Group(lambda: None)
    assert not [sample for family in group.collect() for sample in family.samples]
    assert not path.exists()


def test_a_file_another_scrape_removed_first_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two scrapes at once (two workers, or two requests to one) both see a dead worker's
    file; the second finds it gone. That was a 500."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    gone = str(tmp_path / f"gauge_livesum_{dead_pid()}.db")
    group = metrics._Group(lambda: None)
    monkeypatch.setattr("service.metrics.glob.glob", lambda pattern: [gone])
    assert list(group.collect()) == []


def test_a_live_workers_gauges_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    path = gauge_file(tmp_path, os.getpid())
    samples = [s for family in metrics._Group(lambda: None).collect() for s in family.samples]
    assert [(s.name, s.value) for s in samples] == [("pe_cache_bytes", 42.0)]
    assert path.exists()
