"""The emulator's clock held: emulated time stands still, steps on by advance(), and goes on from where
it stood once released (no jump either way), which is what lets a test read a brief state surely."""

from __future__ import annotations

import time

import pytest

from aca_gpu.emulator.timing import Clock


def test_a_held_clock_stands_still_steps_on_and_resumes_where_it_stood() -> None:
    clock = Clock(0.002)
    with clock.held():
        start = clock.now()
        time.sleep(0.05)
        assert clock.now() == start
        clock.advance(300)  # emulated seconds
        assert clock.now() == pytest.approx(start + 0.6)
        assert clock.emulated(clock.now() - start) == pytest.approx(300)
    resumed = clock.now()
    assert start + 0.6 <= resumed < start + 0.6 + 0.04  # from where it stood, not from the wall clock
    time.sleep(0.02)
    assert clock.now() > resumed  # and it runs again


def test_advance_needs_a_held_clock_and_a_clock_is_held_once() -> None:
    clock = Clock(0.002)
    with pytest.raises(RuntimeError):
        clock.advance(1)
    with clock.held(), pytest.raises(RuntimeError), clock.held():
        pass
    assert clock.held_at is None
