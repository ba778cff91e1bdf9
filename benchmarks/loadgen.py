"""The load generator of ``load.py``: a separate process that drives a running twinmem
over HTTP with mixed traffic for a bounded time, then reads back what it wrote.

    .venv/bin/python benchmarks/loadgen.py --base http://127.0.0.1:8420 --concurrency 8 \
        --duration 30 --out step.json
    .venv/bin/python benchmarks/loadgen.py --base http://127.0.0.1:8420 --verify step-*.json

``--concurrency`` asyncio workers share one httpx client (one connection each) and, until
``--duration`` seconds have passed, each sends one request at a time, chosen by ``Mix``:
80% recall, 15% save, 5% update or delete (half each) of a memory that worker itself created
in this run (a save when it has none yet; only its creator touches a memory, so what it
acknowledged is what the store must hold). Requests of the first ``--warmup`` seconds are
sent but not timed. Every acknowledged write is kept (``Ack``), and after the timed window
each is read back through the API (``verify``): a save's or update's acknowledged version
must be in the memory's history with the acknowledged content, a memory whose last
acknowledged write is a delete must answer 404, and one its creator did not delete must
still be readable. ``--verify`` re-checks the acknowledgements of earlier runs (after a
restart of the server, say). Results go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synthetic  # noqa: E402
from latency import NAMESPACE, summarize  # noqa: E402

RECALL, SAVE, UPDATE, DELETE = "recall", "save", "update", "delete"
# An update or delete that failed: the memory's state is not known, and its creator leaves it alone.
UNANSWERED = "unanswered"
OPERATIONS = (RECALL, SAVE, UPDATE, DELETE)
# Answers an operation acknowledges with; anything else is an error of the run.
EXPECTED_STATUS = {RECALL: {200}, SAVE: {200, 201}, UPDATE: {200}, DELETE: {200}}
ERROR_BODIES_KEPT = 20
READBACK_CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class Mix:
    """Shares of recall, save, and update-or-delete (split evenly between the two)."""

    recall: float = 0.80
    save: float = 0.15
    change: float = 0.05

    def __post_init__(self) -> None:
        shares = (self.recall, self.save, self.change)
        if min(shares) < 0 or abs(sum(shares) - 1.0) > 1e-9:
            raise ValueError(f"the mix's shares must be non-negative and add up to 1, not {shares}")

    def pick(self, rng: random.Random, *, can_change: bool) -> str:
        """The next operation; an update or delete needs a memory of one's own to change,
        so without one it is a save."""
        draw = rng.random()
        if draw < self.recall:
            return RECALL
        if draw < self.recall + self.save or not can_change:
            return SAVE
        return UPDATE if rng.random() < 0.5 else DELETE


@dataclass(frozen=True, slots=True)
class Ack:
    """A write the service acknowledged: ``memory_id`` is at ``version`` with ``content``
    (None for a delete). ``owned``: the memory was created by the worker that sent this, the
    only one that updates or deletes it, so its last ack is its expected state."""

    op: str
    memory_id: str
    version: int
    content: str | None
    owned: bool
    worker: int
    seq: int


@dataclass(slots=True)
class Expected:
    versions: dict[int, str] = field(default_factory=dict)  # version -> acknowledged content
    gone: bool | None = None  # True: deleted, False: must be readable, None: not known (another's memory)


def expectations(acks: Iterable[Ack]) -> dict[str, Expected]:
    """What the store must show for each memory written, from the acknowledgements in the
    order each worker received them (``seq``)."""
    found: dict[str, Expected] = {}
    for ack in sorted(acks, key=lambda a: (a.worker, a.seq)):
        expected = found.setdefault(ack.memory_id, Expected())
        if ack.op == DELETE:
            expected.gone = True
            continue
        if ack.op == UNANSWERED:
            expected.gone = None
            continue
        assert ack.content is not None
        expected.versions[ack.version] = ack.content
        if ack.owned:
            expected.gone = False
    return found


@dataclass(frozen=True, slots=True)
class Readback:
    """What the API answered for one memory: ``GET /v1/memory/{id}``'s status, and the
    versions of ``GET /v1/memory/{id}/history`` (None when it did not answer 200)."""

    status: int
    history: Mapping[int, str] | None


def verify(expected: Mapping[str, Expected], found: Mapping[str, Readback]) -> list[str]:
    """Every acknowledged write the read-back contradicts, one line each (empty: all present)."""
    problems: list[str] = []
    for memory_id, want in expected.items():
        got = found.get(memory_id)
        if got is None:
            problems.append(f"{memory_id}: not read back")
            continue
        if want.gone is True and got.status != 404:
            problems.append(f"{memory_id}: acknowledged as deleted, but GET answers {got.status}")
        if want.gone is False and got.status != 200:
            problems.append(f"{memory_id}: acknowledged and never deleted, but GET answers {got.status}")
        if got.history is None:
            if want.versions:
                problems.append(f"{memory_id}: acknowledged versions {sorted(want.versions)}, but no history")
            continue
        for version, content in sorted(want.versions.items()):
            if version not in got.history:
                problems.append(f"{memory_id}: acknowledged version {version} is not in its history")
            elif got.history[version] != content:
                problems.append(
                    f"{memory_id}: version {version} holds {got.history[version]!r}, acknowledged {content!r}"
                )
    return problems


def step_summary(records: Sequence[tuple[str, int, float, bool]], elapsed: float) -> dict[str, Any]:
    """Throughput and latency of the timed requests: ``records`` are (operation, status,
    seconds, timed); an untimed (warm-up) request counts for nothing here."""
    timed = [(op, status, seconds) for op, status, seconds, counted in records if counted]
    by_op: dict[str, Any] = {}
    for op in OPERATIONS:
        mine = [seconds for o, _, seconds in timed if o == op]
        by_op[op] = summarize(mine)
    errors = sum(1 for op, status, _ in timed if status not in EXPECTED_STATUS[op])
    return {
        "requests": len(timed),
        "seconds": round(elapsed, 3),
        "requests_per_s": round(len(timed) / elapsed, 2) if elapsed > 0 else None,
        "share": {
            op: round(sum(1 for o, _, _ in timed if o == op) / len(timed), 4) if timed else 0 for op in OPERATIONS
        },
        "overall": summarize([seconds for _, _, seconds in timed]),
        "by_operation": by_op,
        "status": {op: dict(Counter(str(s) for o, s, _ in timed if o == op)) for op in OPERATIONS},
        "errors": errors,
    }


# --- the load -------------------------------------------------------------------------------


class Load:
    def __init__(self, client: httpx.AsyncClient, args: argparse.Namespace) -> None:
        self.client = client
        self.args = args
        self.mix = Mix(*args.mix)
        self.namespace = args.namespace
        # One stream of new memories and one of questions for the whole process, so no two
        # workers save the same sentence (the service would fold the second into the first).
        self.contents: Iterator[synthetic.SyntheticMemory] = synthetic.memories(args.seed)
        self.queries = synthetic.queries(2000, seed=args.seed + 1)
        self.records: list[tuple[str, int, float, bool]] = []
        self.acks: list[Ack] = []
        self.error_bodies: list[dict[str, Any]] = []
        self.seq = itertools.count()

    async def worker(self, number: int, started: float, warm_until: float, deadline: float) -> None:
        rng = random.Random(self.args.seed * 1000 + number)
        own: list[tuple[str, str]] = []  # (memory_id, content) this worker created and has not deleted
        while (now := time.perf_counter()) < deadline:
            op = self.mix.pick(rng, can_change=bool(own))
            request, target = self._request(op, rng, own)
            began = time.perf_counter()
            try:
                response = await self.client.send(request)
                status, body = response.status_code, response.text
            except httpx.HTTPError as exc:
                status, body = 0, f"{type(exc).__name__}: {exc}"
            seconds = time.perf_counter() - began
            self.records.append((op, status, seconds, began >= warm_until))
            if status not in EXPECTED_STATUS[op]:
                if len(self.error_bodies) < ERROR_BODIES_KEPT:
                    self.error_bodies.append({"op": op, "status": status, "body": body[:1000], "at_s": now - started})
                if op in (UPDATE, DELETE):
                    memory_id, _ = own.pop(target)
                    self.acks.append(Ack(UNANSWERED, memory_id, 0, None, True, number, next(self.seq)))
                continue
            if op != RECALL:
                self._acknowledged(op, number, json.loads(body), own, target)

    def _request(self, op: str, rng: random.Random, own: list[tuple[str, str]]) -> tuple[httpx.Request, int]:
        ns = self.namespace
        if op == RECALL:
            body = {"query": rng.choice(self.queries), "top_k": self.args.top_k, "namespace": ns}
            return self.client.build_request("POST", "/v1/memory/recall", json=body), -1
        if op == SAVE:
            item = next(self.contents)
            body = {
                "content": item.content,
                "category": item.category,
                "entities": list(item.entities),
                "namespace": ns,
            }
            return self.client.build_request("POST", "/v1/memory/save", json=body), -1
        target = rng.randrange(len(own))
        memory_id, content = own[target]
        if op == UPDATE:
            body = {"namespace": ns, "content": f"{content} (revised {next(self.seq)})"}
            return self.client.build_request("PATCH", f"/v1/memory/{memory_id}", json=body), target
        return self.client.build_request("DELETE", f"/v1/memory/{memory_id}", params={"namespace": ns}), target

    def _acknowledged(
        self, op: str, worker: int, body: dict[str, Any], own: list[tuple[str, str]], target: int
    ) -> None:
        seq = next(self.seq)
        if op == SAVE:
            memory = body["memory"]
            created = bool(body["created"])
            self.acks.append(Ack(op, body["memory_id"], body["version"], memory["content"], created, worker, seq))
            if created:
                own.append((body["memory_id"], memory["content"]))
        elif op == UPDATE:
            self.acks.append(Ack(op, body["memory_id"], body["version"], body["content"], True, worker, seq))
            own[target] = (body["memory_id"], body["content"])
        else:
            self.acks.append(Ack(op, body["memory_id"], body["version"], None, True, worker, seq))
            own.pop(target)


async def readback(client: httpx.AsyncClient, namespace: str, ids: Sequence[str]) -> dict[str, Readback]:
    found: dict[str, Readback] = {}
    gate = asyncio.Semaphore(READBACK_CONCURRENCY)

    async def one(memory_id: str) -> None:
        async with gate:
            current = await client.get(f"/v1/memory/{memory_id}", params={"namespace": namespace})
            history = await client.get(f"/v1/memory/{memory_id}/history", params={"namespace": namespace})
        versions = None
        if history.status_code == 200:
            versions = {v["version"]: v["memory"]["content"] for v in history.json()["versions"]}
        found[memory_id] = Readback(current.status_code, versions)

    await asyncio.gather(*(one(memory_id) for memory_id in ids))
    return found


async def check(client: httpx.AsyncClient, namespace: str, acks: Sequence[Ack]) -> dict[str, Any]:
    expected = expectations(acks)
    started = time.perf_counter()
    problems = verify(expected, await readback(client, namespace, list(expected)))
    return {
        "acknowledged": dict(Counter(ack.op for ack in acks)),
        "memories_checked": len(expected),
        "deleted": sum(1 for e in expected.values() if e.gone is True),
        "problems": len(problems),
        "problem_lines": problems[:50],
        "seconds": round(time.perf_counter() - started, 2),
    }


def _client(args: argparse.Namespace, connections: int) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(base_url=args.base, headers=headers, timeout=args.timeout, limits=limits)


def _cpu_seconds(server: psutil.Process | None) -> tuple[float, float | None]:
    """CPU seconds used so far by this process and by the server (None: not watched)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    times = server.cpu_times() if server is not None else None
    return usage.ru_utime + usage.ru_stime, None if times is None else times.user + times.system


async def _profile(args: argparse.Namespace) -> asyncio.subprocess.Process:
    """py-spy sampling the server's running threads through the timed window (it reads the
    process's memory without stopping it: ``--nonblocking``)."""
    if not args.server_pid:
        raise SystemExit("--profile-out needs --server-pid")
    command = [
        args.py_spy, "record", "--pid", str(args.server_pid), "--rate", "100", "--duration",
        str(max(1, round(args.duration))), "--format", "raw", "--nonblocking", "--output", args.profile_out,
    ]  # fmt: skip
    return await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )


async def run_load(args: argparse.Namespace) -> dict[str, Any]:
    server = psutil.Process(args.server_pid) if args.server_pid else None
    async with _client(args, args.concurrency) as client:
        load = Load(client, args)
        started = time.perf_counter()
        warm_until = started + args.warmup
        deadline = warm_until + args.duration
        work = asyncio.gather(*(load.worker(n, started, warm_until, deadline) for n in range(args.concurrency)))
        await asyncio.sleep(args.warmup)
        cpu_before = _cpu_seconds(server)
        profiler = await _profile(args) if args.profile_out else None
        await work
        # In-flight requests finish after the deadline: the window is until the last one does.
        elapsed = time.perf_counter() - warm_until
        cpu_after = _cpu_seconds(server)
        if profiler is not None and await profiler.wait() != 0:
            raise RuntimeError(f"py-spy failed on the server (exit {profiler.returncode})")
        server_cpu = None if cpu_before[1] is None or cpu_after[1] is None else cpu_after[1] - cpu_before[1]
        result = {
            "concurrency": args.concurrency,
            "warmup_s": args.warmup,
            "duration_s": args.duration,
            "mix": asdict(load.mix),
            **step_summary(load.records, elapsed),
            "warmup_requests": sum(1 for *_, timed in load.records if not timed),
            "error_bodies": load.error_bodies,
            # CPU used in the timed window, in seconds: the two share the machine's cores
            "generator_cpu_s": round(cpu_after[0] - cpu_before[0], 2),
            "server_cpu_s": None if server_cpu is None else round(server_cpu, 2),
            "load_average_after": os.getloadavg(),
        }
    # New connections for the read-back: the server closes the ones left idle meanwhile (its
    # keep-alive timeout), and a request sent on one as it closes would fail for that alone.
    async with _client(args, READBACK_CONCURRENCY) as client:
        result["verification"] = await check(client, args.namespace, load.acks)
    result["acks"] = [asdict(ack) for ack in load.acks]
    return result


async def run_verify(args: argparse.Namespace) -> dict[str, Any]:
    acks = [Ack(**ack) for path in args.verify for ack in json.loads(Path(path).read_text())["acks"]]
    async with _client(args, READBACK_CONCURRENCY) as client:
        return await check(client, args.namespace, acks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the service, e.g. http://127.0.0.1:8420")
    parser.add_argument("--token", default=os.environ.get("BENCH_TWINMEM_TOKEN"), help="bearer token (tokens mode)")
    parser.add_argument("--namespace", default=NAMESPACE)
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight at once")
    parser.add_argument("--duration", type=float, default=30.0, help="timed seconds")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load before the timed window")
    parser.add_argument("--mix", type=float, nargs=3, default=(0.80, 0.15, 0.05), help="recall, save, change")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server-pid", type=int, help="the server process, to report the CPU time it used")
    parser.add_argument("--profile-out", help="sample the server with py-spy in the window; collapsed stacks here")
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy executable")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a request counts as failed")
    parser.add_argument("--verify", nargs="+", help="only re-check the acks in these result files")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = asyncio.run(run_verify(args) if args.verify else run_load(args))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
