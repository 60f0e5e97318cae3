"""``utils.trace.counting``/``count``: the steps of a method count what they meet into the counters of the block
that encloses them (GEAR's round loop, an expansion's initial triples) instead of a counters argument."""

from __future__ import annotations

import threading

from gear_repro.utils.trace import count, counting


def test_count_goes_to_the_innermost_block_in_first_count_order() -> None:
    outer_dict: dict[str, int] = {"already": 1}
    with counting(outer_dict) as outer:
        count("b")
        with counting() as inner:  # an expansion's counters stay apart from the agent's
            count("x", 2)
            count("empty", 0)  # created at 0, as bump creates it
        count("a", 3)
        count("b")
    assert outer is outer_dict and list(outer.items()) == [("already", 1), ("b", 2), ("a", 3)]
    assert list(inner.items()) == [("x", 2), ("empty", 0)]


def test_outside_every_block_nothing_is_kept_and_blocks_restore() -> None:
    count("lost")  # a step called on its own: no error, nothing kept
    with counting() as first:
        pass
    count("lost")
    assert first == {}


def test_each_thread_counts_into_its_own_block() -> None:
    got: dict[int, dict[str, int]] = {}
    barrier = threading.Barrier(3)

    def question(n: int) -> None:
        with counting() as c:
            barrier.wait()  # the three blocks are open at once
            for _ in range(n + 1):
                count("calls")
            barrier.wait()
        got[n] = dict(c)

    threads = [threading.Thread(target=question, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {0: {"calls": 1}, 1: {"calls": 2}, 2: {"calls": 3}}
