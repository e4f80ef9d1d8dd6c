"""The runtime's lanes: small CPU work never waits behind large work."""

from __future__ import annotations

import threading

import anyio
import pytest

from service.metrics import Telemetry
from service.runtime import QUICK_ELEMENTS, Runtime
from service.settings import Settings


def runtime() -> Runtime:
    return Runtime(Settings(), Telemetry(lambda: None))


@pytest.mark.parametrize(
    ("elements", "lane"),
    [
        pytest.param(1, "quick", id="one-row"),
        pytest.param(QUICK_ELEMENTS, "quick", id="at-the-bound"),
        pytest.param(QUICK_ELEMENTS + 1, "cpu", id="large"),
    ],
)
def test_work_takes_the_lane_of_its_size(elements: int, lane: str) -> None:
    async def main() -> str:
        rt = runtime()

        def which() -> str:
            return "quick" if rt.quick.borrowed_tokens else "cpu"

        return await rt.compute(elements, which)

    assert anyio.run(main) == lane


def test_small_work_is_done_while_large_work_holds_every_cpu_slot() -> None:
    release = threading.Event()

    async def main() -> int:
        rt = runtime()
        async with anyio.create_task_group() as tasks:
            for _ in range(int(rt.cpu.total_tokens)):
                tasks.start_soon(rt.compute, QUICK_ELEMENTS * 8, release.wait)
            await anyio.sleep(0.1)
            assert rt.cpu.available_tokens == 0  # every large slot is busy
            with anyio.fail_after(10):  # in the CPU lane it would wait for ever
                answer = await rt.compute(48, sum, [1, 2, 3])
            release.set()
        return answer

    assert anyio.run(main) == 6
