"""The worker process that reads the times a query names (engine/adapters/time_worker.py):
its answers are the inline reader's, and whatever becomes of it, a text is still read."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.adapters import time_worker
from engine.adapters.time_expressions import LibraryTimeExpressions
from engine.adapters.time_worker import WorkerTimeExpressions
from engine.errors import EmbedderError
from engine.ports import TimeExpressions
from engine.records import MemoryDraft
from tests.integration.conftest import OpenService

NOW = datetime(2026, 5, 14, 15, 30, tzinfo=UTC)
TEXTS = [
    "what did I say last week",
    "in May we moved to the coast",
    "What should Lucas do before Friday?",
    "what happened on July 11, 2024",
    "I moved here 3 years ago. We met in March 2021.",
    "上周我们去了哪里",
    "三天前的会议",
    "去年 and last month",
    "May I ask something?",
    "I have 3 cats",
]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def inline() -> LibraryTimeExpressions:
    return LibraryTimeExpressions()


@pytest.fixture
def times(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(time_worker, "RESTART_PAUSE_S", 0.0)
    reader = WorkerTimeExpressions()
    reader.load(chinese=True)
    yield reader
    reader.close()


def _ready(times: WorkerTimeExpressions) -> int:
    """Start the worker where none runs, wait until it is ready, and return its process id."""
    assert times.start(60.0), "the worker did not start"
    pid = times.worker_pid
    assert pid is not None
    return pid


def _not_here(times: WorkerTimeExpressions, monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on a text read in this process fails the test."""

    def refuse(text: str, now: datetime) -> Any:
        raise AssertionError(f"read in the request: {text!r}")

    monkeypatch.setattr(times._inline, "windows", refuse)


# A process that starts a worker, prints its id once it is ready, and sleeps.
_STARTS_A_WORKER = f"""
import sys, time
from datetime import datetime, UTC
sys.path.insert(0, {str(ROOT)!r})
from engine.adapters.time_worker import WorkerTimeExpressions
times = WorkerTimeExpressions()
times.begin("yesterday", datetime.now(UTC))()
while times._worker is None or not times._worker.ready.is_set():
    time.sleep(0.01)
print(times.worker_pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int, deadline_s: float = 10.0) -> bool:
    """Whether process ``pid`` exits (or is left a zombie) within the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def test_it_is_a_time_expressions_port() -> None:
    assert isinstance(WorkerTimeExpressions(), TimeExpressions)


def test_the_workers_answers_are_the_inline_readers(
    times: WorkerTimeExpressions, inline: LibraryTimeExpressions, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = {text: inline.windows(text, NOW) for text in TEXTS}
    assert sum(1 for windows in expected.values() if windows) >= 7  # most of them name a time
    pid = _ready(times)
    _not_here(times, monkeypatch)
    for text in TEXTS:
        assert times.begin(text, NOW)() == expected[text], text
    assert times.worker_pid == pid  # one worker read them all


def test_a_text_that_names_no_time_is_answered_without_a_worker(times: WorkerTimeExpressions) -> None:
    assert times.begin("what is my favourite tea", NOW)() == ()
    assert times.begin("tell me about the garden", NOW)() == ()
    assert times.worker_pid is None


def test_a_text_that_comes_while_the_worker_is_busy_is_read_here(
    times: WorkerTimeExpressions, inline: LibraryTimeExpressions
) -> None:
    _ready(times)
    first = times.begin("what did I say last week", NOW)
    second = times.begin("what happened on July 11, 2024", NOW)  # the worker holds the first
    assert not isinstance(second, time_worker._Answer)
    assert second() == inline.windows("what happened on July 11, 2024", NOW)
    assert first() == inline.windows("what did I say last week", NOW)
    assert isinstance(times.begin("in May we moved", NOW), time_worker._Answer)  # free again (its answer is
    # not taken: the fixture's close ends the worker all the same)


def test_a_killed_worker_is_replaced_and_its_text_read_here(
    times: WorkerTimeExpressions, inline: LibraryTimeExpressions
) -> None:
    pid = _ready(times)
    answer = times.begin("What should Lucas do before Friday?", NOW)
    os.kill(pid, signal.SIGKILL)
    assert answer() == inline.windows("What should Lucas do before Friday?", NOW)
    assert times.worker_pid is None
    again = _ready(times)
    assert again != pid
    assert times.begin("三天前的会议", NOW)() == inline.windows("三天前的会议", NOW)


def test_a_worker_that_does_not_answer_in_time_is_stopped(
    times: WorkerTimeExpressions, inline: LibraryTimeExpressions, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time_worker, "REPLY_WAIT_S", 0.3)
    pid = _ready(times)
    os.kill(pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        assert times.begin("what did I say last week", NOW)() == inline.windows("what did I say last week", NOW)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # were it not killed: the fixture's close then ends it
    assert time.monotonic() - started < 5.0
    assert _gone(pid)


def test_an_answer_never_taken_frees_the_worker_after_a_while(
    times: WorkerTimeExpressions, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time_worker, "STUCK_S", 0.2)
    pid = _ready(times)
    times.begin("what did I say last week", NOW)  # its request went away without the answer
    assert not isinstance(times.begin("in May we moved", NOW), time_worker._Answer)  # busy
    time.sleep(0.3)
    times.begin("in May we moved", NOW)()  # finds it stuck: stopped, and read here
    assert _gone(pid)
    assert _ready(times) != pid


def test_close_ends_the_worker_and_starts_no_other(times: WorkerTimeExpressions) -> None:
    pid = _ready(times)
    times.close()
    assert _gone(pid)
    assert times.begin("what did I say last week", NOW)()  # read here
    assert times.worker_pid is None


def test_the_worker_exits_when_the_process_that_started_it_dies(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", _STARTS_A_WORKER], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert not _gone(pid, 0.2)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()  # type: ignore[union-attr]
    assert _gone(pid)


def test_a_recall_reads_its_times_in_the_worker(
    open_svc: OpenService, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = open_svc()
    times = service.times
    assert isinstance(times, WorkerTimeExpressions)  # the default
    service.save(MemoryDraft("we repainted the garden shed", namespace="n", created_at=clock() - timedelta(days=1)))
    _ready(times)
    _not_here(times, monkeypatch)
    result = service.recall("what did we do yesterday in the garden", namespaces=["n"], reinforce=False)
    (window,) = result.windows
    yesterday = (clock() - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert (window.start, window.end) == (yesterday, yesterday + timedelta(days=1))
    assert result.hits[0].breakdown.time is not None and result.hits[0].breakdown.time.value == 1.0


def test_a_recall_that_fails_before_ranking_leaves_the_worker_free(
    open_svc: OpenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = open_svc()
    times = service.times
    assert isinstance(times, WorkerTimeExpressions)
    _ready(times)

    def broken(text: str) -> Any:
        raise EmbedderError("the model is gone")

    with monkeypatch.context() as patched:
        patched.setattr(service.embedder, "embed_query", broken)
        with pytest.raises(EmbedderError):
            service.recall("what did we do yesterday", namespaces=["n"])
    assert isinstance(times.begin("what happened last week", NOW), time_worker._Answer)  # not held by the failed one


def test_an_answer_to_an_earlier_text_is_skipped(times: WorkerTimeExpressions, inline: LibraryTimeExpressions) -> None:
    _ready(times)
    worker = times._worker
    assert worker is not None
    first = worker.send("what did I say last week", NOW)
    second = worker.send("what happened on July 11, 2024", NOW)  # the first one's answer never taken
    assert worker.receive(10.0, seq=second) == inline.windows("what happened on July 11, 2024", NOW)
    assert second == first + 1


def test_a_slow_request_never_takes_the_answer_meant_for_another(
    times: WorkerTimeExpressions, inline: LibraryTimeExpressions, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time_worker, "STUCK_S", 0.2)
    _ready(times)
    slow = times.begin("what did I say last week", NOW)  # its request stalls past STUCK_S
    time.sleep(0.3)
    times.begin("in May we moved", NOW)()  # stops the worker as stuck, reads here
    _ready(times)  # a new worker (it may reuse the old one's descriptor numbers)
    other = times.begin("what happened on July 11, 2024", NOW)
    assert slow() == inline.windows("what did I say last week", NOW)  # its own, read here
    assert other() == inline.windows("what happened on July 11, 2024", NOW)


def test_a_worker_that_stops_answering_does_not_hold_up_other_recalls(
    open_svc: OpenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time_worker, "REPLY_WAIT_S", 1.5)
    service = open_svc()
    times = service.times
    assert isinstance(times, WorkerTimeExpressions)
    service.save(MemoryDraft("we repainted the garden shed", namespace="n"))
    pid = _ready(times)
    os.kill(pid, signal.SIGSTOP)
    done: dict[str, float] = {}

    def recall(query: str) -> None:
        service.recall(query, namespaces=["n"], reinforce=False)
        done[query] = time.monotonic()

    try:
        waiting = threading.Thread(target=recall, args=("what did we do last week",))
        waiting.start()
        time.sleep(0.2)  # it has run its channels and waits for its times
        recall("the garden shed")  # names no time, and does not wait for the other's
        waiting.join(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert done["the garden shed"] < done["what did we do last week"]


def test_close_does_not_wait_for_a_worker_stopped_while_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time_worker, "START_WAIT_S", 20.0)
    times = WorkerTimeExpressions()
    times.load(chinese=False)
    times.begin("what did I say last week", NOW)()  # starts the worker (this one is read here)
    worker = times._worker
    assert worker is not None
    os.kill(worker.process.pid, signal.SIGSTOP)  # long before it has loaded dateparser
    try:
        deadline = time.monotonic() + 5.0
        while not worker._io.locked() and time.monotonic() < deadline:
            time.sleep(0.01)  # until its start is awaited
        assert worker._io.locked() and not worker.ready.is_set()
        started = time.monotonic()
        times.close()
        assert time.monotonic() - started < 3.0  # not the start's wait
        assert _gone(worker.process.pid, 1.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.process.pid, signal.SIGKILL)


def test_close_does_not_wait_for_an_answer_awaited_from_a_stopped_worker(
    times: WorkerTimeExpressions, inline: LibraryTimeExpressions, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time_worker, "REPLY_WAIT_S", 20.0)
    pid = _ready(times)
    worker = times._worker
    assert worker is not None
    os.kill(pid, signal.SIGSTOP)
    answer = times.begin("what did I say last week", NOW)
    got: list[Any] = []
    waiting = threading.Thread(target=lambda: got.append(answer()))
    try:
        waiting.start()
        deadline = time.monotonic() + 5.0
        while not worker._io.locked() and time.monotonic() < deadline:
            time.sleep(0.01)  # until the answer is awaited
        assert worker._io.locked()
        started = time.monotonic()
        times.close()
        waiting.join(timeout=5.0)
        assert time.monotonic() - started < 3.0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert got == [inline.windows("what did I say last week", NOW)]  # read in the request after all
    assert _gone(pid, 1.0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_stopped_worker_dies_with_the_process_that_started_it() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _STARTS_A_WORKER], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pid = None
    try:
        pid = int(parent.stdout.readline())
        os.kill(pid, signal.SIGSTOP)  # reads no end of input now
        parent.kill()
        parent.wait()
        assert _gone(pid, 5.0)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_worker_outlives_the_thread_that_started_it(
    times: WorkerTimeExpressions, inline: LibraryTimeExpressions, monkeypatch: pytest.MonkeyPatch
) -> None:
    starter = threading.Thread(target=times.start)  # a request's thread, which ends
    starter.start()
    starter.join()
    pid = times.worker_pid
    assert pid is not None
    assert not _gone(pid, 0.5)
    _not_here(times, monkeypatch)
    assert times.begin("what did I say last week", NOW)() == inline.windows("what did I say last week", NOW)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_worker_whose_parent_is_gone_before_it_starts_exits() -> None:
    # Told that another process started it (as a worker whose parent died before it
    # asked for the death signal is now another's child), it sees so and exits.
    worker = subprocess.Popen(
        [sys.executable, "-m", "engine.adapters.time_worker", str(os.getppid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert worker.wait(timeout=10.0) == 0  # without reading its input
    finally:
        worker.kill()
        worker.wait()
        for pipe in (worker.stdin, worker.stdout):
            assert pipe is not None
            pipe.close()


def test_a_text_sent_after_close_shut_the_workers_input_is_read_here_and_written_nowhere(
    times: WorkerTimeExpressions, inline: LibraryTimeExpressions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A request takes the worker; before it sends, close shuts the worker's input and
    # waits for it to exit (not yet killed), and another file gets the input's
    # descriptor number. The text must be read in the request, and that file untouched.
    _ready(times)
    worker = times._worker
    assert worker is not None
    number = worker._out
    opened: list[int] = []
    take = times._take

    def take_then_close() -> Any:
        taken = take()
        assert taken is worker
        with monkeypatch.context() as patched:
            patched.setattr(worker, "kill", lambda: None)  # close's first step alone: its input closed
            worker.close()
        for i in range(1024):  # the lowest free numbers first, until the input's is another file's
            opened.append(os.open(tmp_path / f"file-{i}", os.O_RDWR | os.O_CREAT))
            if opened[-1] == number:
                break
        return taken

    monkeypatch.setattr(times, "_take", take_then_close)
    try:
        assert times.begin("what did I say last week", NOW)() == inline.windows("what did I say last week", NOW)
        assert opened and opened[-1] == number
        assert os.fstat(number).st_size == 0
    finally:
        for fd in opened:
            os.close(fd)
    assert times.worker_pid is None  # stopped: another starts at the next text
