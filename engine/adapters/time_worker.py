"""The times a query names, read in a worker process beside the recall that asked.

dateparser reads an English sentence that names a date in 1–3 ms of pure Python, under
the interpreter's lock: read in the request's own thread, that time is added to the
recall (it set the p95 of the questions that name a time), and a thread beside the
request would only take turns with it for the lock. A worker process reads it on another
core while the request embeds the query and runs the candidate channels: ``begin``
sends the text (about 45 µs there and back here) and its answer is taken once the
candidates are found, by when it is usually read.

* Its answers are the inline reader's: the worker runs ``LibraryTimeExpressions`` itself.
* A text the inline reader would hand to no parser (``may_name_time``: most queries) is
  answered ``()`` at once, without the worker.
* One worker, started (in the background) at the first text that may name a time. That
  text is read in the request's thread, as is every text that comes while the worker is
  starting, busy with another request's, or gone.
* A worker that does not answer within ``REPLY_WAIT_S``, or whose pipe breaks, is
  killed and the text read in the thread; another starts at the next text, at most
  one start per ``RESTART_PAUSE_S``. An answer not taken for ``STUCK_S`` (its request
  is gone without it) frees the worker the same way.
* The worker exits when its input closes: at ``close``, or when this process dies. It
  runs in a session of its own, so a terminal's Ctrl-C reaches only the server, which
  closes it. A worker stopped (SIGSTOP) reads no end of input and, in its own session,
  gets no hangup: on Linux the kernel kills it when this process dies (``_die_with``),
  so it is started from a thread that lasts as long as this process (``_launch``).
  ``close`` never waits on a worker stopped or slow: where a thread awaits its start or
  an answer, it is killed at once, and that thread reads the end.

Frames on the worker's stdin and stdout: a 4-byte big-endian length, then a pickle (the
two ends are one program). Library output on stdout goes to stderr in the worker.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from datetime import datetime
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from engine.adapters.time_expressions import MAX_CHARS, LibraryTimeExpressions
from engine.ports import TimesReading
from engine.records import TimesRead, TimeWindow

log = logging.getLogger(__name__)

REPLY_WAIT_S = 2.0  # a hostile text costs a few hundred ms at most (time_expressions.MAX_RUNS)
START_WAIT_S = 60.0  # import and load, about 0.7 s here
RESTART_PAUSE_S = 5.0
STUCK_S = 10.0
IO_WAIT_S = 0.1  # close: longer than a send or a look for an answer in hand, far shorter than a wait for one
_HEADER = struct.Struct(">I")
_MAX_FRAME = 1 << 24
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class WorkerTimeExpressions:
    """``engine.ports.TimeExpressions`` that reads in a worker process (module docstring)."""

    name = LibraryTimeExpressions.name

    def __init__(self, inline: LibraryTimeExpressions | None = None) -> None:
        self._inline = inline or LibraryTimeExpressions()
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._busy_since: float | None = None  # a text sent, its answer not taken yet
        self._next_start = 0.0
        self._chinese = False
        self._closed = False

    def load(self, *, chinese: bool = True) -> None:
        """Load dateparser here (``may_name_time``'s vocabulary, and the fallback); a
        worker started from now on loads JioNLP too where ``chinese`` (here, JioNLP is
        loaded only where a Chinese text must be read in the request)."""
        self._chinese = chinese
        self._inline.load(chinese=False)

    def windows(self, text: str, now: datetime) -> tuple[TimeWindow, ...]:
        return self._inline.windows(text, now)

    def begin(self, text: str, now: datetime) -> TimesReading:
        text = text[:MAX_CHARS]
        if not self._inline.may_name_time(text):
            return TimesRead()  # names no time (not read again to say so)
        worker = self._take()
        if worker is None:
            return self._inline.begin(text, now)
        try:
            seq = worker.send(text, now)
        except Exception as error:  # noqa: BLE001 (logged by _lost; the text is read here)
            self._lost(worker, f"its input failed: {error!r}")
            return self._inline.begin(text, now)
        return _Answer(self, worker, seq, text, now)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()

    def start(self, wait_s: float = START_WAIT_S) -> bool:
        """Start the worker where none runs (else it starts at the first text that may
        name a time) and wait up to ``wait_s`` until it is ready: whether it is."""
        with self._lock:
            if self._worker is None and not self._closed:
                self._next_start = 0.0
                self._start_locked()
            worker = self._worker
        return worker is not None and worker.ready.wait(wait_s)

    @property
    def worker_pid(self) -> int | None:
        """The worker's process id, while one runs (tests)."""
        worker = self._worker
        return worker.process.pid if worker is not None else None

    # --- the worker's turns ------------------------------------------------------------

    def _take(self) -> _Worker | None:
        """The worker, marked busy, where one is ready and free; else None (and one
        started where none runs)."""
        gone: _Worker | None = None
        with self._lock:
            worker = self._worker
            if self._closed:
                return None
            if worker is None or worker.exited():
                if worker is not None:
                    log.warning("the time-parsing worker exited (code %s); starting another", worker.process.poll())
                    self._worker, gone = None, worker
                self._start_locked()
                worker = None
            elif not worker.ready.is_set():
                worker = None
            elif self._busy_since is None:
                self._busy_since = time.monotonic()
                return worker
            elif time.monotonic() - self._busy_since < STUCK_S:
                worker = None
        if gone is not None:
            gone.kill()  # its pipes
        elif worker is not None:
            self._lost(worker, f"an answer was not taken in {STUCK_S:g} s")
        return None

    def _start_locked(self) -> None:
        if time.monotonic() < self._next_start:
            return
        self._next_start = time.monotonic() + RESTART_PAUSE_S
        try:
            worker = _Worker(self._chinese)
        except Exception:
            log.warning("the time-parsing worker could not start; times are read in the request", exc_info=True)
            return
        self._worker = worker
        self._busy_since = None
        threading.Thread(target=self._await_ready, args=(worker,), name="time-worker-start", daemon=True).start()

    def _await_ready(self, worker: _Worker) -> None:
        try:
            worker.receive(START_WAIT_S, seq=0)
        except Exception as error:  # noqa: BLE001 (logged by _lost: the worker is stopped, not left unready)
            self._lost(worker, f"it did not start: {error!r}")
            return
        worker.ready.set()

    def _answer(self, worker: _Worker, seq: int, text: str, now: datetime) -> tuple[TimeWindow, ...]:
        try:
            reply = worker.receive(REPLY_WAIT_S, seq=seq)
        except Exception as error:  # noqa: BLE001 (a broken pipe, a timeout, a frame that does not read: logged by _lost)
            self._lost(worker, f"no answer: {error!r}")
            return self._inline.windows(text, now)
        with self._lock:
            if self._worker is worker:
                self._busy_since = None
        if not isinstance(reply, tuple):  # it failed on this text and said so (its stderr has why)
            return self._inline.windows(text, now)
        return reply

    def _lost(self, worker: _Worker, why: str) -> None:
        """Stop ``worker`` (another starts at the next text); the text in hand is read here."""
        with self._lock:
            closed = self._closed
            if self._worker is worker:
                self._worker = None
                self._busy_since = None
        if not closed:
            log.warning("the time-parsing worker (pid %s) is stopped: %s", worker.process.pid, why)
        worker.kill()


class _Answer:
    """What ``begin`` returns where the worker reads: the answer to text number ``seq``,
    taken once."""

    __slots__ = ("_now", "_owner", "_seq", "_text", "_windows", "_worker")

    def __init__(self, owner: WorkerTimeExpressions, worker: _Worker, seq: int, text: str, now: datetime) -> None:
        self._owner, self._worker, self._seq, self._text, self._now = owner, worker, seq, text, now
        self._windows: tuple[TimeWindow, ...] | None = None

    def ready(self, wait: float) -> bool:
        return self._windows is not None or self._worker.answered_within(wait)

    def __call__(self) -> tuple[TimeWindow, ...]:
        if self._windows is None:
            self._windows = self._owner._answer(self._worker, self._seq, self._text, self._now)
        return self._windows


class _Worker:
    """The process and its two pipes. Each text sent is numbered, and its answer carries
    the number: an answer to an earlier text (one its request left untaken) is skipped.
    The pipes are read, written and closed under one lock; once killed the worker touches
    them no more, and once ``close`` has closed its input nothing is written there: a
    closed descriptor's number is soon another file's (the database's, say)."""

    def __init__(self, chinese: bool) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where ``engine`` is imported from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self.process = _launch([sys.executable, "-m", "engine.adapters.time_worker", str(os.getpid())], env)
        assert self.process.stdin is not None and self.process.stdout is not None
        self._out = self.process.stdin.fileno()
        self._in = self.process.stdout.fileno()
        self.ready = threading.Event()
        self._io = threading.Lock()
        self._killed = False
        self._input_closed = False  # by close: its descriptor number may be another file's now
        self._sent = 0
        _write(self._out, ("load", chinese))

    def exited(self) -> bool:
        return self.process.poll() is not None

    def send(self, text: str, now: datetime) -> int:
        """Send a text; its number."""
        with self._io:
            if self._killed or self._input_closed:
                raise EOFError("the worker is stopped")
            self._sent += 1
            _write(self._out, (self._sent, text, now))
            return self._sent

    def answered_within(self, wait: float) -> bool:
        """Whether its output holds something to read (an answer, or its end) within ``wait`` s."""
        with self._io:
            return self._killed or bool(select.select([self._in], [], [], wait)[0])

    def receive(self, wait: float, *, seq: int) -> Any:
        """The answer to text ``seq`` (0: the "ready" after loading), within ``wait`` s."""
        deadline = time.monotonic() + wait
        with self._io:
            while True:
                if self._killed:
                    raise EOFError("the worker is stopped")
                number, answer = _read(self._in, deadline)
                if number == seq:
                    return answer
                if number > seq:
                    raise OSError(f"answer {number} came for text {seq}")

    def close(self) -> None:
        """Close its input (it exits), wait a second, then kill it. Where another thread
        is reading or writing its pipes (awaiting its start or an answer: a worker stopped
        or slow holds that thread up to ``START_WAIT_S``), it is killed at once instead,
        and that thread reads the end of its output: close never waits for it."""
        if self._io.acquire(timeout=IO_WAIT_S):
            try:
                assert self.process.stdin is not None
                self._input_closed = True  # before the descriptor is closed: send writes to it no more
                if not self._killed:
                    self.process.stdin.close()
            except OSError:
                pass
            finally:
                self._io.release()
            try:
                self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def kill(self) -> None:
        """Kill it (a thread reading its output then reads the end), then close its pipes
        once no thread uses them."""
        self._killed = True
        if self.process.poll() is None:
            self.process.kill()
            try:
                self.process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                log.warning("the time-parsing worker (pid %s) did not exit when killed", self.process.pid)
        with self._io:
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass


_Launch = tuple[list[str], dict[str, str], Future[subprocess.Popen[bytes]]]
_launcher: tuple[int, SimpleQueue[_Launch]] | None = None  # this process's id, and its launcher's queue
_launcher_lock = threading.Lock()


def _launch(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start the worker from a thread that lasts as long as this process. Linux sends a
    child its parent-death signal when the thread that started it ends, not the process:
    started from a request's thread (a pool's, which ends when idle), the worker would be
    killed with that thread."""
    global _launcher
    with _launcher_lock:
        if _launcher is None or _launcher[0] != os.getpid():  # none yet, or inherited by a fork without its thread
            requests: SimpleQueue[_Launch] = SimpleQueue()
            threading.Thread(target=_serve_launches, args=(requests,), name="time-worker-launcher", daemon=True).start()
            _launcher = (os.getpid(), requests)
        queue = _launcher[1]
    started: Future[subprocess.Popen[bytes]] = Future()
    queue.put((command, env, started))
    return started.result()


def _serve_launches(requests: SimpleQueue[_Launch]) -> None:
    while True:
        command, env, started = requests.get()
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0, start_new_session=True
            )
        except BaseException as error:  # noqa: BLE001 (raised in the thread that asked)
            started.set_exception(error)
        else:
            started.set_result(process)


def _die_with(parent: int) -> bool:
    """Have the kernel kill this worker when ``parent`` (the process that started it)
    dies, on Linux: stopped (SIGSTOP), it reads no end of input, and in a session of its
    own it gets no hangup. Whether the parent still lives: where it died before the
    request was made, this process already belongs to another. Elsewhere, only that."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            log.warning("the worker will outlive its parent: prctl failed (%s)", os.strerror(ctypes.get_errno()))
    return os.getppid() == parent


def _write(fd: int, message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, deadline: float | None) -> Any:
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size, deadline))
    if size > _MAX_FRAME:
        raise OSError(f"a frame of {size} bytes")
    return pickle.loads(_read_exactly(fd, size, deadline))  # the other end is this module


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    got = bytearray()
    while len(got) < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"nothing within the wait ({len(got)} of {size} bytes read)")
        chunk = os.read(fd, size - len(got))
        if not chunk:
            raise EOFError("the pipe closed")
        got += chunk
    return bytes(got)


def main(parent: int | None = None) -> int:
    """The worker: ("load", chinese) first, answered (0, "ready"); then (seq, text, now),
    each answered (seq, its windows), None where reading failed; until its input closes,
    or ``parent`` (the process id that started it) dies."""
    if parent is not None and not _die_with(parent):
        return 0  # its parent is gone already
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.dup(1)
    os.dup2(2, 1)  # what a library prints is no frame
    times = LibraryTimeExpressions()
    try:
        _, chinese = _read(0, None)
        times.load(chinese=bool(chinese))
        _write(out, (0, "ready"))
        while True:
            seq, text, now = _read(0, None)
            try:
                answer: tuple[TimeWindow, ...] | None = times.windows(text, now)
            except Exception:
                log.exception("reading the times of a text failed")
                answer = None
            _write(out, (seq, answer))
    except (EOFError, BrokenPipeError):
        return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else None))
