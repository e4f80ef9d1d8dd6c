"""Single flight on the event loop: identical work asked for at once runs once, its
failure is everyone's, a waiter that leaves does not cancel it for the others, and the last
one to leave does."""

from __future__ import annotations

import asyncio

import pytest

from service.flight import SingleFlight


def test_concurrent_requests_for_one_key_share_one_run() -> None:
    runs: list[str] = []

    async def work() -> str:
        runs.append("run")
        await asyncio.sleep(0.05)
        return "picture"

    async def main() -> list[str]:
        flights: SingleFlight[str] = SingleFlight()
        results = await asyncio.gather(*(flights.run("k", work) for _ in range(8)))
        assert len(flights) == 0  # landed: the next request runs it again
        return results

    assert asyncio.run(main()) == ["picture"] * 8
    assert runs == ["run"]


def test_a_failure_is_shared_and_the_next_request_runs_again() -> None:
    runs: list[str] = []

    async def work() -> str:
        runs.append("run")
        await asyncio.sleep(0.01)
        raise ValueError("cannot draw")

    async def main() -> None:
        flights: SingleFlight[str] = SingleFlight()
        results = await asyncio.gather(
            *(flights.run("k", work) for _ in range(3)), return_exceptions=True
        )
        assert all(isinstance(r, ValueError) for r in results)
        with pytest.raises(ValueError, match="cannot draw"):
            await flights.run("k", work)

    asyncio.run(main())
    assert runs == ["run", "run"]


def test_a_waiter_that_leaves_does_not_cancel_the_work_for_others() -> None:
    async def work() -> str:
        await asyncio.sleep(0.1)
        return "picture"

    async def main() -> str:
        flights: SingleFlight[str] = SingleFlight()
        first = asyncio.ensure_future(flights.run("k", work))
        second = asyncio.ensure_future(flights.run("k", work))
        await asyncio.sleep(0.01)
        first.cancel()
        return await second

    assert asyncio.run(main()) == "picture"


def test_the_last_waiter_to_leave_cancels_the_work() -> None:
    finished: list[str] = []

    async def work() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            finished.append("cancelled")
            raise
        return "picture"

    async def main() -> None:
        flights: SingleFlight[str] = SingleFlight()
        waiters = [asyncio.ensure_future(flights.run("k", work)) for _ in range(2)]
        await asyncio.sleep(0.01)
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        await asyncio.sleep(0.01)
        assert len(flights) == 0

    asyncio.run(main())
    assert finished == ["cancelled"]
