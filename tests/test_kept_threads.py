"""Kept threads (moa_chat.engine.threads): work is handed to a waiting thread rather than to a new one, the
threads are daemons named for their work, a thread with nothing to do leaves, and a fan-out's references
run on them: a second turn starts no thread."""

from __future__ import annotations

import threading

import pytest
from moa_chat.engine import threads
from moa_chat.engine.threads import IDLE_NAME, KeptThreads
from moa_chat.moa import MoAChatCompletions
from moa_chat.providers.loopback_server import Reply
from waiting import wait_until

QUESTION = [{"role": "user", "content": "How do I reverse a list in Python?"}]


def _run(kept: KeptThreads, name: str = "moa-test") -> threading.Thread:
    """Runs one piece of work on `kept` and returns the thread it ran on, once it has ended."""
    ran: list[threading.Thread] = []
    done = threading.Event()

    def work() -> None:
        ran.append(threading.current_thread())
        done.set()

    kept.start(work, name)
    assert done.wait(10)
    return ran[0]


def test_work_runs_on_a_daemon_thread_named_for_it_and_the_thread_waits_for_more() -> None:
    kept = KeptThreads()
    thread = _run(kept, "moa-reference")
    assert thread.daemon
    assert thread is not threading.current_thread()
    wait_until(lambda: kept.waiting == 1, "the thread to wait for work", interval=0.005)
    assert thread.is_alive()
    assert thread.name == IDLE_NAME
    assert kept.alive == 1


def test_the_next_piece_of_work_goes_to_the_waiting_thread_and_starts_none() -> None:
    kept = KeptThreads()
    first = _run(kept)
    wait_until(lambda: kept.waiting == 1, "the thread to wait for work", interval=0.005)
    assert _run(kept, "moa-again") is first
    assert kept.alive == 1  # counted by the pool itself: the process's own thread count moves with other tests


def test_work_handed_out_while_a_thread_is_busy_gets_a_thread_of_its_own() -> None:
    kept = KeptThreads()
    release = threading.Event()
    busy: list[threading.Thread] = []
    kept.start(lambda: (busy.append(threading.current_thread()), release.wait(10)), "moa-busy")
    wait_until(lambda: bool(busy), "the first piece of work to start")
    try:
        assert _run(kept) is not busy[0]
    finally:
        release.set()
    wait_until(lambda: kept.waiting == 2, "both threads to wait for work")


def test_a_thread_with_nothing_to_do_leaves() -> None:
    kept = KeptThreads(idle=0.05)
    thread = _run(kept)
    thread.join(10)
    assert not thread.is_alive()
    assert (kept.waiting, kept.alive) == (0, 0)
    assert _run(kept) is not thread  # and the next piece of work starts a new one


def test_a_thread_that_finds_enough_others_waiting_leaves_at_once() -> None:
    """A burst's threads end with it: at most `most_idle` stay waiting for more."""
    kept = KeptThreads(most_idle=2)
    release = threading.Event()
    started: list[threading.Thread] = []
    for _ in range(5):
        kept.start(lambda: (started.append(threading.current_thread()), release.wait(10)), "moa-burst")
    wait_until(lambda: len(started) == 5, "the five pieces of work to start")
    assert kept.alive == 5
    release.set()
    wait_until(lambda: (kept.waiting, kept.alive) == (2, 2), "two threads to wait and three to leave")
    wait_until(lambda: sum(thread.is_alive() for thread in started) == 2, "three threads to end")


def test_work_that_raises_is_reported_and_the_thread_carries_on(monkeypatch: pytest.MonkeyPatch) -> None:
    reported: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", reported.append)
    kept = KeptThreads()

    def fail() -> None:
        raise ValueError("broken")

    kept.start(fail, "moa-failing")
    wait_until(lambda: kept.waiting == 1, "the thread to wait for work", interval=0.005)
    [report] = reported
    assert isinstance(report.exc_value, ValueError)
    assert report.thread is not None
    assert _run(kept).is_alive()


def test_a_second_turn_asks_its_references_on_the_first_ones_threads(
    wire_config, llm_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reference used to take two thread starts a turn, and each start waited while the requests before it
    were being built: the fan-out's requests left one start after another (bench/fanout.py)."""
    kept = KeptThreads()
    monkeypatch.setattr(threads, "KEPT", kept)  # not the threads earlier tests left at work
    config = wire_config()
    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, Reply(text=model, delay=0.05))
    MoAChatCompletions("wire", config=config).create(messages=QUESTION)
    wait_until(lambda: kept.alive >= 3 and kept.waiting == kept.alive, "the turn's threads to wait for work")
    alive = kept.alive
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    MoAChatCompletions("wire", config=config).create(messages=QUESTION)
    # The turn's own threads: not the test server's, nor the watchdog (it leaves when idle, and comes back).
    started = [name for name in started if name.startswith(("moa-reference", "moa-aggregator"))]
    assert not started, f"a second turn started {started}"
    assert kept.alive == alive
    assert len(llm_server.requests_for("ref-a")) == 2
