"""Moving memory in and out: the twinmem export format (JSON Lines) and its importer.

An export of one namespace is a text file, one JSON object a line::

    {"kind": "header", "format": "twinmem-export", "format_version": 1, ...counts, model, time}
    {"kind": "memory", "memory": {...every field of the record...}, "edges": [...],
     "versions": [...]?, "vector": {...}?}
    ...
    {"kind": "end", "counts": {...}}

The schema is ``engine/schemas/export.schema.json``. The end line makes a cut
file detectable: an import refuses a file without it. Memory lines come newest
first; every status is exported (superseded, archived, quarantined and
soft-deleted memories too, each with its status).

Import is all-or-nothing: every line is read and checked first, and every
problem is reported with its line number; only a file without a single problem
is written, in one store transaction, under the service's write lock like every
other write (what the check assumed of the store is checked again under it). Ids are kept, so importing the same file
again changes nothing (a memory whose id is already in the target namespace is
left as stored), except that a later export with versions brings forward a memory
an older one imported, where the target has not changed it since (``_onward``).
An id that belongs to a memory of *another* namespace (a copy
of a namespace into another one on the same deployment) is mapped to a new id,
derived from the target namespace and the old id, so that the mapping is the
same on every run; the report lists each mapping, and edges follow it.

Vectors travel as base64 little-endian float32 with their model's name and
dimension. A vector of the importing service's own model is kept; a memory
without one, or with one of another model, is re-embedded (and its record then
names the model that made its vector).

Other tools' data comes in through ``engine.importers``, which turns it into the
same entries, so the same checks, ids and report apply.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from engine import limits, text
from engine.codec import as_utc, memory_from_dict, memory_to_dict, to_iso
from engine.errors import GuardRejected, InvalidInput
from engine.ports import Edge, ImportedRecord, Vector
from engine.records import Memory, MemoryFilter, Scope, Status, Version, sight_of, utcnow
from engine.service import NAMESPACE_PATTERN, MemoryService

FORMAT = "twinmem-export"
# How far ahead of this machine's clock an imported time may be (another machine's clock).
CLOCK_SKEW = timedelta(minutes=5)
FORMAT_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("schemas") / "export.schema.json"
MEDIA_TYPE = "application/x-ndjson"
DEPLOYMENT_FILE = "deployment_id"

EXPORT_PAGE = 500
# filtered_ids needs a limit; this one fits every backend's integer type.
COUNT_LIMIT = 2**31 - 1
EMBED_BATCH = 1024
ALL_STATUSES = tuple(Status)
# Every memory of the namespace, expired or not.
EVERYTHING = MemoryFilter(statuses=ALL_STATUSES, include_expired=True)
# The fields of an exported record: exactly what ``memory_to_dict`` writes.
RECORD_FIELDS = frozenset(
    (
        "memory_id namespace content category entities importance base_score source actor session_id "
        "visibility created_at updated_at last_accessed_at access_count expire_at status embedding_model "
        "embedding_version version key metadata"
    ).split()
)
_TIME_FIELDS = ("created_at", "updated_at", "last_accessed_at", "expire_at")
# What a version records as the memory said it (a change of these makes a version; use
# counters and times do not): the latest version of a line must say what its memory says.
# Not its status: an import before this rule stored memories the guard quarantined with
# a history that says otherwise, and their exports must still import.
_VERSIONED = ("content", "category", "entities", "key", "visibility")
_EDGE_KIND_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ_")
QUARANTINED_ON_IMPORT = "quarantined on import"
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A vector shorter than this has no direction to keep (cosines are of unit vectors).
MIN_VECTOR_NORM = 1e-6
# A vector whose length is further than this from 1 is scaled to unit length on import.
UNIT_TOLERANCE = 1e-3
# uuid5 namespace for ids that an import derives (mapped ids, other tools' records).
ID_NAMESPACE = uuid.UUID("5b0c6f1e-6a43-4d5e-9d1e-7a1f3c2b8e90")


def deployment_id(data_dir: str | Path) -> str:
    """The id of this deployment's data directory, made on first use and kept in it."""
    path = Path(data_dir) / DEPLOYMENT_FILE
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    made = str(uuid.uuid4())
    try:
        # O_EXCL: if two processes race, the first file wins and both read it.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(made + "\n")
    return made


def derived_id(*parts: str) -> str:
    """A memory id that is the same every time for the same parts (idempotent imports)."""
    return str(uuid.uuid5(ID_NAMESPACE, "\x1f".join(parts)))


# --- export ------------------------------------------------------------------------------


def encode_vector(vector: Vector, model: str, version: str, text: str) -> dict[str, Any]:
    """The vector object of an export line; ``text`` is what it embeds (``text_sha256``)."""
    data = np.ascontiguousarray(vector, dtype="<f4")
    return {
        "model": model,
        "version": version,
        "dim": int(data.shape[0]),
        "dtype": "float32",
        "encoding": "base64",
        "data": base64.b64encode(data.tobytes()).decode("ascii"),
        "text_sha256": text_sha256(text),
    }


def text_sha256(text: str) -> str:
    """sha256 of the text exactly as written (UTF-8): what an exported vector embeds."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def decode_vector(data: Any) -> tuple[str, Vector, str | None]:
    """(model, unit vector, ``text_sha256`` or None) of an exported vector object;
    ``ValueError`` says what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("vector must be an object")
    model, dim, payload, digest = data.get("model"), data.get("dim"), data.get("data"), data.get("text_sha256")
    if not isinstance(model, str) or not model:
        raise ValueError("vector.model must name the model")
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ValueError("vector.dim must be a positive integer")
    if data.get("dtype", "float32") != "float32" or data.get("encoding", "base64") != "base64":
        raise ValueError("vector must be base64 float32")
    if not isinstance(payload, str):
        raise ValueError("vector.data must be a base64 string")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"vector.data is not base64: {exc}") from exc
    if len(raw) != 4 * dim:
        raise ValueError(f"vector.data holds {len(raw)} bytes, dim {dim} needs {4 * dim}")
    if digest is not None and not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
        raise ValueError("vector.text_sha256 must be 64 lower-case hex digits")
    vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(vector)):
        raise ValueError("vector holds a NaN or infinity")
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if norm < MIN_VECTOR_NORM:
        raise ValueError("vector has no direction: its length is 0")
    if abs(norm - 1.0) > UNIT_TOLERANCE:  # as exported, a unit vector is kept bit for bit
        vector = (vector.astype(np.float64) / norm).astype(np.float32)
    return model, vector, digest


@dataclass(frozen=True, slots=True)
class Export:
    """A prepared export: the header is known (and the namespace checked) before any line is sent."""

    header: dict[str, Any]
    lines: Iterator[bytes]

    def chunks(self) -> Iterator[bytes]:
        """The whole file: the header line, then the rest, a page of memories per chunk."""
        yield _line(self.header)
        yield from self.lines


def open_export(
    service: MemoryService,
    namespace: str,
    *,
    versions: bool = False,
    vectors: bool = False,
    source_deployment: str = "",
    now: datetime | None = None,
    scope: Scope | None = None,
) -> Export:
    """Prepare the export of ``namespace``: what ``scope`` (the caller's) sees of it, or
    all of it without one. Raises ``InvalidInput`` for a bad namespace. Links to
    memories out of sight are left out with them."""
    if not NAMESPACE_PATTERN.fullmatch(namespace):
        raise InvalidInput(f"namespace {namespace!r} must be 1-128 letters, digits or _ . : @ -", field="namespace")
    now = now or utcnow()
    store = service.store
    sight = sight_of([namespace], scope)
    present = {status.value: store.filtered_ids(sight, _only(status), now, COUNT_LIMIT) for status in ALL_STATUSES}
    by_status = {status: len(ids) for status, ids in present.items()}
    embedder = service.embedder
    header = {
        "kind": "header",
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "deployment_id": source_deployment,
        "namespace": namespace,
        "exported_at": to_iso(now),
        "embedding": {"model": embedder.name, "version": embedder.version, "dim": embedder.dim},
        "includes": {"versions": versions, "vectors": vectors},
        # Counted as the export starts; the end line counts what was written.
        "counts": {"memories": sum(by_status.values()), "by_status": by_status},
    }
    listed = {memory_id for ids in present.values() for memory_id in ids}
    return Export(header, _memory_lines(service, sight, listed, versions=versions, vectors=vectors, now=now))


def _only(status: Status) -> MemoryFilter:
    return MemoryFilter(statuses=(status,), include_expired=True)


def _memory_lines(
    service: MemoryService, sight: Scope, listed: set[str], *, versions: bool, vectors: bool, now: datetime
) -> Iterator[bytes]:
    """The memory lines and the end line. ``listed`` holds the ids the namespace had as the
    export began (and gains each one written): the pages are read one after the other while
    writes go on, and a link to a memory saved after its page was read (a session's ``NEXT``
    from an older memory of it) is left out with that memory, so the file's own import never
    finds a link to a memory that is nowhere."""
    store = service.store
    counts = Counter[str]()
    # The SUPERSEDES links (src, dst) written so far on the lines of active memories.
    replacing: set[tuple[str, str]] = set()
    # The memories written, and those the written lines link to: a memory purged (or taken
    # out of sight) after a line linking to it went out, before its own page was read, is
    # in the second alone, and the end line names it for the import.
    written: set[str] = set()
    linked: set[str] = set()
    cursor: str | None = None
    while True:
        page = store.list_page(sight, EVERYTHING, now, limit=EXPORT_PAGE, cursor=cursor)
        found: dict[str, Vector] = {}
        if vectors:
            for model in {memory.embedding_model for memory in page.items}:
                ids = [m.memory_id for m in page.items if m.embedding_model == model]
                found.update(store.vectors(ids, model))
        chunk: list[bytes] = []
        listed.update(memory.memory_id for memory in page.items)
        # The page's links and histories, a call each (not one per memory: over Bolt each
        # call is a round trip). Without versions only a superseded memory's history may
        # be needed (``_as_it_began``).
        links_of = store.edges_of(sight, [memory.memory_id for memory in page.items])
        wanted = [m.memory_id for m in page.items if versions or m.status is Status.SUPERSEDED]
        histories = store.versions_of(sight, wanted) if wanted else {}
        for current in page.items:
            links = links_of.get(current.memory_id, [])
            memory, history = _as_it_began(current, links, histories.get(current.memory_id, []), replacing, now)
            item: dict[str, Any] = {"kind": "memory", "memory": memory_to_dict(memory)}
            edges = sorted(
                (edge for edge in links if edge.src == memory.memory_id and edge.dst in listed),
                key=lambda edge: (edge.kind, edge.dst, edge.created_at),
            )
            item["edges"] = [{"kind": e.kind, "to": e.dst, "created_at": to_iso(e.created_at)} for e in edges]
            if memory.status is Status.ACTIVE:
                replacing.update((e.src, e.dst) for e in edges if e.kind == "SUPERSEDES")
            if versions:
                history = history if history is not None else histories.get(memory.memory_id, [])
                item["versions"] = [_version_to_dict(v) for v in history]
                counts["versions"] += len(item["versions"])
            # The stored vector embeds the current text, in the current model.
            same = (memory.content, memory.embedding_model) == (current.content, current.embedding_model)
            vector = found.get(memory.memory_id) if same else None
            if vector is not None:
                item["vector"] = encode_vector(vector, memory.embedding_model, memory.embedding_version, memory.content)
                counts["vectors"] += 1
            counts["memories"] += 1
            counts["edges"] += len(edges)
            written.add(memory.memory_id)
            linked.update(edge.dst for edge in edges)
            chunk.append(_line(item))
        if chunk:
            yield b"".join(chunk)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    end: dict[str, Any] = {
        "kind": "end",
        "counts": {name: counts[name] for name in ("memories", "versions", "vectors", "edges")},
    }
    if linked - written:
        end["gone"] = sorted(linked - written)
    yield _line(end)


def _as_it_began(
    memory: Memory, links: list[Edge], history: list[Version], replacing: set[tuple[str, str]], now: datetime
) -> tuple[Memory, list[Version] | None]:
    """``memory`` as the export writes it, with its versions (``history``) where they were needed.

    A memory superseded after the export began, where no line the file already holds of an
    active memory supersedes it (its successor saved after its page was read, or one read
    while it was deleted and restored since), would be out of recall in the copy with
    nothing in its place. It is written as it was when the export began (its last version
    by then, and the versions up to it), which a later export brings forward. Every other
    memory is written as its page found it. ``replacing``: the ``SUPERSEDES`` links (src,
    dst) the file's lines of active memories hold so far (the newer memory's line comes
    first, newest first; one read later leaves both recalled in the copy, never neither)."""
    if memory.status is not Status.SUPERSEDED or any(
        link.kind == "SUPERSEDES" and link.dst == memory.memory_id and (link.src, link.dst) in replacing
        for link in links
    ):
        return memory, None
    began = [version for version in history if version.changed_at <= now]
    if not began or len(began) == len(history) or began[-1].record.status is Status.SUPERSEDED:
        return memory, history  # unchanged since the export began, or superseded before: as stored
    return began[-1].record, began


def _version_to_dict(version: Version) -> dict[str, Any]:
    record = memory_to_dict(version.record)
    # A version's metadata in the order of its keys, nested ones too, as a memory's is
    # stored: the stores keep a version as it was written, in whatever order its writer
    # gave, so that otherwise a re-export after an import would differ in that order.
    record["metadata"] = json.loads(json.dumps(record["metadata"], ensure_ascii=False, sort_keys=True))
    return {
        "version": version.version,
        "changed_at": to_iso(version.changed_at),
        "changed_by": version.changed_by,
        "reason": version.reason,
        "record": record,
    }


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# --- import --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LineError:
    line: int
    message: str
    memory_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "memory_id": self.memory_id, "error": self.message}


@dataclass(slots=True)
class ImportReport:
    """What an import did, or, when ``errors`` is not empty, why it wrote nothing."""

    format: str
    lines: int = 0
    memories: int = 0
    inserted: int = 0
    unchanged: int = 0
    vectors_kept: int = 0
    reembedded: int = 0
    # Memories whose vector was made from another text than the file's (edited since):
    # re-embedded rather than kept.
    stale_vectors: list[str] = field(default_factory=list)
    edges: int = 0
    # The write guard, as on a save: memories stored redacted, and stored quarantined.
    redacted: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    remapped: dict[str, str] = field(default_factory=dict)
    # Memories already stored at a version the file's history holds, unchanged here since,
    # brought forward to the file's record (``_onward``).
    updated: int = 0
    # Of the memories left as stored (``unchanged``), those whose stored record is not the
    # file's: another version, text or status (an edited file, or the memory changed since;
    # ``notes`` says which, where the file carries the memory's history).
    differing: list[str] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    # The memories the import inserted or brought forward: what its audit entry names.
    stored: list[str] = field(default_factory=list)

    @property
    def written(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "written": self.written,
            "lines": self.lines,
            "memories": self.memories,
            "inserted": self.inserted,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "vectors_kept": self.vectors_kept,
            "reembedded": self.reembedded,
            "stale_vectors": self.stale_vectors,
            "edges": self.edges,
            "redacted": self.redacted,
            "quarantined": self.quarantined,
            "namespaces": self.namespaces,
            "remapped": self.remapped,
            "differing": self.differing,
            "errors": [error.as_dict() for error in self.errors],
            "notes": self.notes,
        }


@dataclass(slots=True)
class Entry:
    """One memory read from a file, not yet checked against the store.

    ``data`` has the shape of an export's memory line (``memory``, ``edges``,
    optional ``versions`` and ``vector``); ``error`` is set instead when the
    line could not be read at all.
    """

    line: int
    data: dict[str, Any] | None = None
    error: str | None = None
    # The end line's ``gone``: memories the file links to that went while it was exported
    # (``data`` and ``error`` are None on the entry that carries them).
    gone: frozenset[str] | None = None


def read_export(lines: Iterable[bytes | str]) -> Iterator[Entry]:
    """Entries of a twinmem export; header, end line and truncation problems come out as errors."""
    header_seen = end_seen = False
    memories = 0
    number = 0
    blank = True  # no line but blank ones: the file is empty
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            blank = False
            memories += header_seen  # a damaged memory line, as below
            yield Entry(number, error=f"not valid UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start})")
            continue
        if not text.strip():
            continue
        blank = False
        if end_seen:
            yield Entry(number, error="a line after the end line")
            continue
        try:
            item = json.loads(text)
        except json.JSONDecodeError as exc:
            memories += header_seen  # most likely a damaged memory line: no second error from the end count
            yield Entry(number, error=f"not JSON ({exc.msg} at column {exc.colno})")
            continue
        except RecursionError:
            memories += header_seen
            yield Entry(number, error="JSON nested too deeply to read")
            continue
        kind = item.get("kind") if isinstance(item, dict) else None
        if not header_seen:
            header_seen = True
            problem = _header_problem(item)
            if problem:
                yield Entry(number, error=problem)
                if kind != "header":
                    # Not a header at all: read the line as data anyway, so its own problems show.
                    yield from _memory_entry(number, item, kind)
                    memories += kind == "memory"
            continue
        if kind == "end":
            end_seen = True
            counts = item.get("counts") if isinstance(item, dict) else None
            expected = counts.get("memories") if isinstance(counts, dict) else None
            if expected != memories:
                yield Entry(number, error=f"the end line counts {expected!r} memories, the file holds {memories}")
            gone = item.get("gone", []) if isinstance(item, dict) else []
            if not isinstance(gone, list) or not all(isinstance(g, str) and is_memory_id(g) for g in gone):
                yield Entry(number, error="the end line's gone must be a list of memory ids")
            elif gone:
                yield Entry(number, gone=frozenset(gone))
            continue
        memories += kind == "memory"
        yield from _memory_entry(number, item, kind)
    if not header_seen:
        yield Entry(
            max(number, 1),
            error="the file is empty: no header line"
            if blank
            else "no header line: not a twinmem export, or one whose header is damaged",
        )
    elif not end_seen:
        yield Entry(number, error=f"the file ends at line {number} without its end line: it is truncated")


def _header_problem(item: Any) -> str | None:
    if not isinstance(item, dict) or item.get("kind") != "header" or item.get("format") != FORMAT:
        return f"line 1 is not a {FORMAT} header (other tools' data: choose its format, e.g. mem0, langchain, csv)"
    version = item.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:  # not True, not 1.0
        return f"format_version {item.get('format_version')!r} is not supported; this twinmem reads {FORMAT_VERSION}"
    return None


def _memory_entry(number: int, item: Any, kind: Any) -> Iterator[Entry]:
    if kind == "header":
        yield Entry(number, error="a second header line")
    elif kind != "memory":
        yield Entry(number, error=f"unknown line kind {kind!r} (expected 'memory' or 'end')")
    else:
        yield Entry(number, data=item)


@dataclass(slots=True)
class _Planned:
    line: int
    memory: Memory
    versions: list[Version]
    vector: tuple[str, Vector] | None
    edges: list[tuple[str, str, datetime]]  # (kind, to, created_at)
    original_id: str
    stale_vector: bool = False  # the file's vector embeds another text (``text_sha256``)
    file_version: int = 0  # the version the file gives the memory (before a quarantine version)


def import_entries(
    service: MemoryService,
    entries: Iterable[Entry],
    *,
    format_name: str = FORMAT,
    namespace: str | None = None,
    actor: str | None = None,
    owner: str | None = None,
    notes: Iterable[str] = (),
    now: datetime | None = None,
) -> ImportReport:
    """Check every entry, then write all of them in one transaction, or nothing.

    ``namespace`` puts every memory into that namespace (versions and edges
    follow); otherwise each memory goes to the namespace its record names.
    ``owner``, when given, is an importer who is not an admin of the namespace:
    every imported memory and version is recorded as its (``actor``, ``changed_by``),
    so it cannot plant memories, private ones above all, in another agent's name;
    every id becomes one derived from the namespace, the owner and the file's id
    (reported in ``remapped``), so the import reveals nothing about which ids exist
    elsewhere; and a link may only point to a memory in the same file.
    """
    report = ImportReport(format_name)
    now = now or utcnow()
    if namespace is not None and not NAMESPACE_PATTERN.fullmatch(namespace):
        raise InvalidInput(f"namespace {namespace!r} must be 1-128 letters, digits or _ . : @ -", field="namespace")
    planned: list[_Planned] = []
    seen: dict[str, int] = {}
    gone: set[str] = set()
    for entry in entries:
        report.lines = max(report.lines, entry.line)
        if entry.gone is not None:
            gone.update(entry.gone)
            continue
        if entry.error is not None or entry.data is None:
            report.errors.append(LineError(entry.line, entry.error or "unreadable line"))
            continue
        report.memories += 1
        try:
            item = _guarded(service, _plan_entry(service, entry, namespace, owner), report, now, actor)
        except (ValueError, GuardRejected) as exc:
            record = entry.data.get("memory") if isinstance(entry.data, dict) else None
            memory_id = record.get("memory_id") if isinstance(record, dict) else None
            report.errors.append(LineError(entry.line, str(exc), memory_id if isinstance(memory_id, str) else None))
            continue
        if item.memory.last_accessed_at > now:
            # A use time orders nothing (decay alone reads it, and none before it): one of a
            # machine whose clock runs ahead is taken as now, not a reason to refuse the file.
            report.notes.append(
                f"memory {item.original_id}: last_accessed_at {to_iso(item.memory.last_accessed_at)} is in the "
                f"future; stored as {to_iso(now)}"
            )
            item.memory = item.memory.evolve(last_accessed_at=now)
        late = _in_the_future(item, now + CLOCK_SKEW)
        if late:
            report.errors.append(LineError(entry.line, late, item.original_id))
            continue
        if item.original_id in seen:
            report.errors.append(
                LineError(entry.line, f"memory id repeats line {seen[item.original_id]}", item.original_id)
            )
            continue
        seen[item.original_id] = entry.line
        planned.append(item)
    report.notes.extend(notes)
    _without_gone_links(service, planned, gone, report, now, stored_too=owner is None)
    if owner is not None:
        _owned(service, planned, owner, report, now)
    if report.errors:
        return report
    fresh, kept = _resolve_ids(service, planned, report, now)
    if report.errors:
        return report
    onward, left, why, shifts = _onward(service, kept, now, admin=owner is None)
    linking = [*fresh, *(item for item, _ in onward)]
    _check_edges(service, planned, linking, report, now)
    if report.errors:
        return report
    records = _with_links_from_kept(_embed(service, fresh, onward, report), left)

    def still_valid() -> bool:
        # Under the write lock: a link target deleted since the check above fails its line.
        _check_edges(service, planned, linking, report, now)
        return not report.errors

    reinstated: list[tuple[Memory, str]] = []
    stored_ids = service.write_imported(records, actor=actor, still_valid=still_valid, reinstated=reinstated)
    if stored_ids is None:
        return report
    report.notes.extend(
        f"memory {memory.memory_id} made {'active again' if memory.status is Status.ACTIVE else memory.status.value} "
        f"({reason})"
        for memory, reason in reinstated
    )
    stored = set(stored_ids)
    report.stored = list(dict.fromkeys(stored_ids))
    brought = {item.memory.memory_id for item, _ in onward} & stored
    report.inserted = len(stored - brought)
    report.updated = len(brought)
    report.unchanged = len(planned) - len(stored)
    report.edges = sum(len(record.edges) for record in records if record.memory.memory_id in stored)
    report.namespaces = sorted({item.memory.namespace for item in planned})
    report.differing = _differing(service, kept, now, shifts)
    for item, _ in kept:
        if item.original_id in report.differing and item.original_id in why:
            report.notes.append(f"memory {item.original_id} left as stored: {why[item.original_id]}")
    return report


def _guarded(
    service: MemoryService, item: _Planned, report: ImportReport, now: datetime, actor: str | None
) -> _Planned:
    """The write guard over an imported memory and its history, as over a save: what the
    policy refuses fails the line; redacted text is what is stored (and embedded anew:
    the carried vector is of the text before); a memory the guard or a block on its
    writer quarantines is stored quarantined, in a version of its own after the file's
    history (so that the latest version says what the memory says, as an export needs)."""
    original = item.memory
    memory, _ = service.guard_record(original)
    # Redacted whatever else the guard did (text both injected and holding PII is
    # redacted, then quarantined), as a save reports it.
    if (memory.content, memory.entities, memory.metadata) != (original.content, original.entities, original.metadata):
        report.redacted.append(item.original_id)
    if memory.content != original.content:
        item.vector = None
    if memory.status is Status.QUARANTINED and original.status is not Status.QUARANTINED:
        report.quarantined.append(item.original_id)
    item.memory = memory
    # The history is stored and exported too: its texts are redacted or refused alike
    # (a version that says what the record says is guarded once, with the record).
    guarded = {_said(original): memory}
    item.versions = [replace(v, record=_redacted(service, v.record, guarded)) for v in item.versions]
    last = item.versions[-1] if item.versions else None
    if last is not None and memory.status is Status.QUARANTINED and last.record.status is not Status.QUARANTINED:
        # Quarantined here (by the guard), or in the file without its history saying so
        # (a file of an import before this rule, or one made up): the history says it
        # too, since it is what keeps a rollback from taking it out (``rollback.held``).
        at = max(now, last.changed_at, memory.updated_at)
        memory = memory.evolve(version=memory.version + 1, updated_at=at)
        item.versions.append(Version(memory.memory_id, memory.version, memory, at, actor, QUARANTINED_ON_IMPORT))
        item.memory = memory
    return item


def _in_the_future(item: _Planned, later: datetime) -> str | None:
    """What of a memory's times is later than ``later`` (this machine's clock and the skew
    allowed to another's), as a save refuses a ``created_at`` in the future: time order
    decides a replacement, so a memory dated in 2999 would have every later save that
    replaces it stored superseded, and hide it. ``expire_at`` may be any time, and a
    ``last_accessed_at`` ahead is taken as the import's time (``import_entries``)."""
    memory = item.memory
    times = [
        ("created_at", memory.created_at),
        ("updated_at", memory.updated_at),
        *((f"version {v.version}'s changed_at", v.changed_at) for v in item.versions),
        *((f"version {v.version}'s created_at", v.record.created_at) for v in item.versions),
        *((f"the {kind} link's created_at", at) for kind, _, at in item.edges),
    ]
    late = [f"{name} {to_iso(at)}" for name, at in times if at > later]
    if not late:
        return None
    clock = to_iso(later - CLOCK_SKEW)
    return f"a time in the memory's history is in the future: {', '.join(late)} (this machine's clock reads {clock})"


def _said(record: Memory) -> str:
    return json.dumps([record.namespace, record.content, record.entities, record.metadata], sort_keys=True)


def _redacted(service: MemoryService, record: Memory, guarded: dict[str, Memory]) -> Memory:
    said = _said(record)
    if said not in guarded:
        guarded[said] = service.guard_record(record)[0]
    clean = guarded[said]
    return record.evolve(content=clean.content, entities=clean.entities, metadata=clean.metadata)


def _plan_entry(service: MemoryService, entry: Entry, namespace: str | None, owner: str | None) -> _Planned:
    data = entry.data
    if not isinstance(data, dict):
        raise ValueError("a memory line must be a JSON object")
    unknown = set(data) - {"kind", "memory", "edges", "versions", "vector"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} on a memory line")
    memory = _record(service, data.get("memory"), "memory")
    original_id = memory.memory_id
    if namespace is not None:
        memory = memory.evolve(namespace=namespace)
    if owner is not None:
        memory = memory.evolve(actor=owner)
    versions: list[Version] = []
    raw_versions = data.get("versions")
    if raw_versions is not None:
        if not isinstance(raw_versions, list) or not raw_versions:
            raise ValueError("versions must be a non-empty list")
        for position, raw in enumerate(raw_versions):
            versions.append(_version(service, raw, f"versions[{position}]", memory, original_id))
        numbers = [v.version for v in versions]
        if numbers != sorted(set(numbers)) or numbers[-1] != memory.version:
            raise ValueError(
                f"versions must be increasing and end at the memory's version {memory.version}, got {numbers}"
            )
        last = versions[-1].record
        differ = [name for name in _VERSIONED if getattr(last, name) != getattr(memory, name)]
        if differ:
            raise ValueError(
                f"versions[{len(versions) - 1}] is version {memory.version} but its {', '.join(differ)} "
                "differ from the memory's"
            )
        if owner is not None:
            versions = [replace(v, changed_by=owner, record=v.record.evolve(actor=owner)) for v in versions]
    vector: tuple[str, Vector] | None = None
    stale = False
    if data.get("vector") is not None:
        model, values, digest = decode_vector(data["vector"])
        stale = digest is not None and digest != text_sha256(memory.content)
        vector = None if stale else (model, values)
    edges: list[tuple[str, str, datetime]] = []
    raw_edges = data.get("edges", [])
    if not isinstance(raw_edges, list):
        raise ValueError("edges must be a list")
    for position, raw in enumerate(raw_edges):
        if not isinstance(raw, dict) or set(raw) != {"kind", "to", "created_at"}:
            raise ValueError(f"edges[{position}] must be an object with kind, to and created_at")
        kind, to = raw["kind"], raw["to"]
        if not isinstance(kind, str) or not kind or not set(kind) <= _EDGE_KIND_CHARS:
            raise ValueError(f"edges[{position}].kind must be an upper-case name such as SUPERSEDES")
        if not isinstance(to, str) or not is_memory_id(to):
            raise ValueError(f"edges[{position}].to must be a memory id")
        if to == original_id:
            raise ValueError(f"edges[{position}] links the memory to itself")
        if any((kind, to) == (known, target) for known, target, _ in edges):
            raise ValueError(f"edges[{position}] repeats a {kind} link to {to}")
        edges.append((kind, to, _time(raw["created_at"], f"edges[{position}].created_at")))
    return _Planned(entry.line, memory, versions, vector, edges, original_id, stale, memory.version)


def _record(service: MemoryService, data: Any, where: str) -> Memory:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be an object with the record's fields")
    missing = RECORD_FIELDS - set(data)
    if missing:
        raise ValueError(f"{where} lacks {', '.join(sorted(missing))}")
    unknown = set(data) - RECORD_FIELDS
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {', '.join(sorted(unknown))}")
    for name in _TIME_FIELDS:
        if data[name] is not None:
            _time(data[name], f"{where}.{name}")
    if not isinstance(data["memory_id"], str) or not is_memory_id(data["memory_id"]):
        raise ValueError(f"{where}.memory_id must be a UUID in its usual lower-case form, got {data['memory_id']!r}")
    for name in ("content", "category", "namespace", "embedding_model", "embedding_version"):
        if not isinstance(data[name], str):
            raise ValueError(f"{where}.{name} must be a string")
    for name in ("actor", "session_id", "key"):
        if data[name] is not None and not isinstance(data[name], str):
            raise ValueError(f"{where}.{name} must be a string or null")
    if not isinstance(data["entities"], list) or not all(isinstance(e, str) for e in data["entities"]):
        raise ValueError(f"{where}.entities must be a list of strings")
    if any(len(name) > limits.MAX_NAME_CHARS for name in data["entities"]):
        raise ValueError(f"{where}.entities: a name holds at most {limits.MAX_NAME_CHARS} characters")
    if data["key"] is not None and not 0 < len(data["key"]) <= limits.MAX_NAME_CHARS:
        raise ValueError(f"{where}.key holds 1-{limits.MAX_NAME_CHARS} characters, got {len(data['key'])}")
    if not isinstance(data["metadata"], dict):
        raise ValueError(f"{where}.metadata must be an object")
    for name in ("importance", "base_score"):
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{where}.{name} must be a number within 0..1, got {value!r}")
    for name, least in (("access_count", 0), ("version", 1)):
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= limits.MAX_COUNTER:
            raise ValueError(f"{where}.{name} must be an integer within {least}..{limits.MAX_COUNTER}, got {value!r}")
    try:
        memory = memory_from_dict(data)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{where}: {exc}") from exc
    if not NAMESPACE_PATTERN.fullmatch(memory.namespace):
        raise ValueError(f"{where}.namespace {memory.namespace!r} must be 1-128 letters, digits or _ . : @ -")
    config = service.config
    if text.is_blank(memory.content):
        raise ValueError(f"{where}.content must not be empty")
    if len(memory.content) > config.limits.max_content_chars:
        raise ValueError(
            f"{where}.content holds {len(memory.content)} characters, at most {config.limits.max_content_chars}"
        )
    if memory.category not in config.categories:
        raise ValueError(
            f"{where}.category {memory.category!r} is not configured here ({', '.join(config.categories)})"
        )
    if len(memory.entities) > config.limits.max_entities:
        raise ValueError(f"{where}.entities: at most {config.limits.max_entities} are allowed")
    problem = limits.metadata_problem(memory.metadata, config.limits)
    if problem:
        raise ValueError(f"{where}: {problem}")
    return memory


def _version(service: MemoryService, raw: Any, where: str, memory: Memory, original_id: str) -> Version:
    if not isinstance(raw, dict) or set(raw) != {"version", "changed_at", "changed_by", "reason", "record"}:
        raise ValueError(f"{where} must hold version, changed_at, changed_by, reason and record")
    record = _record(service, raw["record"], f"{where}.record")
    if record.memory_id != original_id:
        raise ValueError(f"{where}.record belongs to another memory ({record.memory_id})")
    if raw["version"] != record.version:
        raise ValueError(f"{where}.version {raw['version']!r} differs from its record's {record.version}")
    if raw["changed_by"] is not None and not isinstance(raw["changed_by"], str):
        raise ValueError(f"{where}.changed_by must be a string or null")
    if not isinstance(raw["reason"], str):
        raise ValueError(f"{where}.reason must be a string")
    record = record.evolve(namespace=memory.namespace)
    changed_at = _time(raw["changed_at"], f"{where}.changed_at")
    return Version(original_id, record.version, record, changed_at, raw["changed_by"], raw["reason"])


def _time(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be an ISO 8601 string")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{where} {value!r} is not an ISO 8601 time") from exc
    try:
        return as_utc(moment)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from exc


def is_memory_id(text: str) -> bool:
    """A UUID in its usual lower-case, hyphenated form."""
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def _owned(service: MemoryService, planned: list[_Planned], owner: str, report: ImportReport, now: datetime) -> None:
    """Make the file the ``owner``'s (see ``import_entries``): ids of its own, links within
    the file. (A history dated in the future, which a later rollback could bring back, is
    refused for every import: ``_in_the_future``.)

    An id the owner already holds in that namespace (its own export, imported again) is
    kept, so that re-importing it changes nothing; every other id becomes one derived
    from the namespace, the owner and the file's id, whether or not it exists elsewhere.
    """
    mine: set[tuple[str, str]] = set()
    by_namespace: dict[str, list[str]] = {}
    for item in planned:
        by_namespace.setdefault(item.memory.namespace, []).append(item.original_id)
    for namespace, ids in by_namespace.items():
        own = Scope(own=(namespace,), agent=owner)
        mine |= {(namespace, m.memory_id) for m in service.store.get_many(own, ids, EVERYTHING, now)}
    renamed = {
        (item.memory.namespace, item.original_id): (
            item.original_id
            if (item.memory.namespace, item.original_id) in mine
            else derived_id("owned", item.memory.namespace, owner, item.original_id)
        )
        for item in planned
    }
    for item in planned:
        namespace, new = item.memory.namespace, renamed[(item.memory.namespace, item.original_id)]
        outside = [to for _, to, _ in item.edges if (namespace, to) not in renamed]
        if outside:
            report.errors.append(
                LineError(
                    item.line,
                    f"links to memories outside the file ({', '.join(outside)}) need an admin of {namespace!r}",
                    item.original_id,
                )
            )
        item.edges = [(kind, renamed.get((namespace, to), to), at) for kind, to, at in item.edges]
        item.memory = item.memory.evolve(memory_id=new)
        item.versions = [replace(v, memory_id=new, record=v.record.evolve(memory_id=new)) for v in item.versions]
        if new != item.original_id:
            report.remapped[item.original_id] = new
        item.original_id = new  # from here on the file's id is this one (a re-import finds it unchanged)


def _resolve_ids(
    service: MemoryService, planned: list[_Planned], report: ImportReport, now: datetime
) -> tuple[list[_Planned], list[tuple[_Planned, str]]]:
    """Map ids that another namespace holds; return the entries not yet stored in their
    namespace, and those stored there already, each with the id it is stored under."""
    original = _stored_where(service, [(item.memory.namespace, item.original_id) for item in planned], now)
    mapping: dict[tuple[str, str], str] = {}
    for item in planned:
        key = (item.memory.namespace, item.original_id)
        if original.get(key) is False:
            mapping[key] = derived_id("mapped", *key)
    mapped = _stored_where(service, [(ns, new) for (ns, _), new in mapping.items()], now)
    fresh: list[_Planned] = []
    kept: list[tuple[_Planned, str]] = []  # left as stored, by the id stored under
    for item in planned:
        key = (item.memory.namespace, item.original_id)
        new = mapping.get(key)
        item.edges = [(kind, mapping.get((key[0], to), to), at) for kind, to, at in item.edges]
        if new is None:
            if key not in original:
                fresh.append(item)
            else:
                kept.append((item, item.original_id))
            continue
        report.remapped[item.original_id] = new
        state = mapped.get((key[0], new))
        if state is True:
            kept.append((item, new))
        elif state is False:
            report.errors.append(
                LineError(item.line, f"id {item.original_id} and its mapped id {new} are both taken", item.original_id)
            )
        elif state is None:
            item.memory = item.memory.evolve(memory_id=new)
            item.versions = [
                Version(new, v.version, v.record.evolve(memory_id=new), v.changed_at, v.changed_by, v.reason)
                for v in item.versions
            ]
            fresh.append(item)
    return fresh, kept


# What a version holds of a record that only a change with a version of its own alters:
# not use (``access_count``, ``last_accessed_at``, the reinforced ``base_score``) nor the
# vector in use (``embedding_model``, ``embedding_version``: a re-embedding), which change
# without one.
_AS_OF_A_VERSION = tuple(
    sorted(RECORD_FIELDS - {"access_count", "last_accessed_at", "base_score", "embedding_model", "embedding_version"})
)


def _as_of_a_version(record: Memory) -> dict[str, Any]:
    data = memory_to_dict(record)
    return {name: data[name] for name in _AS_OF_A_VERSION}


def _onward(
    service: MemoryService, kept: list[tuple[_Planned, str]], now: datetime, *, admin: bool
) -> tuple[list[tuple[_Planned, Memory]], list[tuple[_Planned, str]], dict[str, str], dict[str, int]]:
    """Split ``kept`` (stored already, under the id beside each) into the memories to
    bring forward, each with its stored record, and those left as stored, with why each
    of those carrying a history is left, and how many versions imports here added to
    each history read for it (``_added_here``; both by the file's id).

    A memory is brought forward when the file carries its history, the file's record is
    a later version than the stored one, and the stored record is exactly the file's at
    its version: the target has not changed it since the file's source exported it
    before (an older export of the same namespace, imported earlier). A memory the
    target changed since (its record is not the file's at that version), or whose
    stored version is not in the file's history (the file is the older one), is left
    as stored, as is every memory of a file without histories. A memory the write guard
    quarantined on its import here has a version of this target's in its history
    (``QUARANTINED_ON_IMPORT``): read past it, the rest is the file's, and the file's later
    versions follow it, numbered after it (before, such a memory was never brought
    forward: an edit at home that took out what the guard held stayed out of recall
    here for good). Without ``admin`` (an
    importer who is not an admin of the namespace), a quarantined memory the file would
    release is left as stored too: only an admin may release one (``MemoryService.update``)."""
    by_namespace: dict[str, list[tuple[_Planned, str]]] = {}
    for item, stored_id in kept:
        if item.versions:
            by_namespace.setdefault(item.memory.namespace, []).append((item, stored_id))
    onward: dict[int, tuple[_Planned, Memory]] = {}
    why: dict[str, str] = {}
    shifts: dict[str, int] = {}
    for namespace, items in by_namespace.items():
        ids = [stored_id for _, stored_id in items]
        whole = Scope.whole([namespace])
        stored = {m.memory_id: m for m in service.store.get_many(whole, ids, EVERYTHING, now)}
        for item, stored_id in items:
            there = stored.get(stored_id)
            if there is None:
                continue
            # The file's version the stored record is: its own number, less the versions an
            # import here added to its history (``QUARANTINED_ON_IMPORT``), read only where
            # the record is not simply the file's at its number.
            added = 0
            if not _stored_as(item, there.version, there, stored_id):
                added = _added_here(service.store.versions(whole, stored_id), item)
                shifts[item.original_id] = added
            at = there.version - added
            changed = (
                f"its stored version {there.version} is not what the file's version {at} says "
                "(changed here since the file's source had it, or the file was edited)"
            )
            if at in (item.file_version, item.memory.version):
                why[item.original_id] = changed  # reported only where it differs (``_differing``)
                continue
            if at > item.memory.version:
                why[item.original_id] = f"it is stored at version {at}, later than the file's {item.memory.version}"
                continue
            if not any(v.version == at for v in item.versions):
                why[item.original_id] = f"the file's history has no version {at}, the stored one"
                continue
            if not (_held_as(item, at, there) if added else _stored_as(item, at, there, stored_id)):
                why[item.original_id] = changed
                continue
            if not admin and there.status is Status.QUARANTINED and item.memory.status is not Status.QUARANTINED:
                why[item.original_id] = "it is quarantined, and only a namespace admin may release it"
                continue
            if added:
                # The file's later versions follow the ones added here, numbered after them.
                item.versions = [
                    v
                    if v.version <= at
                    else replace(v, version=v.version + added, record=v.record.evolve(version=v.version + added))
                    for v in item.versions
                ]
                item.memory = item.memory.evolve(version=item.memory.version + added)
            if stored_id != item.memory.memory_id:  # an id mapped away from another namespace's
                item.memory = item.memory.evolve(memory_id=stored_id)
                item.versions = [
                    replace(v, memory_id=stored_id, record=v.record.evolve(memory_id=stored_id)) for v in item.versions
                ]
            onward[id(item)] = (item, there)
    return (
        [onward[id(item)] for item, _ in kept if id(item) in onward],
        [(item, stored_id) for item, stored_id in kept if id(item) not in onward],
        why,
        shifts,
    )


def _stored_as(item: _Planned, version: int, there: Memory, stored_id: str) -> bool:
    """Whether the stored record ``there`` is exactly the file's at ``version``."""
    then = next((v.record for v in item.versions if v.version == version), None)
    return then is not None and _as_of_a_version(then.evolve(memory_id=stored_id)) == _as_of_a_version(there)


def _held_as(item: _Planned, version: int, there: Memory) -> bool:
    """Whether the stored record ``there``, whose history has versions an import here added,
    is the file's at ``version`` but for those: its number, and where it is quarantined on
    import still, that status and the time of it."""
    then = next((v.record for v in item.versions if v.version == version), None)
    if then is None:
        return False
    expected = then.evolve(memory_id=there.memory_id, version=there.version)
    if there.status is Status.QUARANTINED and then.status is not Status.QUARANTINED:
        expected = expected.evolve(status=Status.QUARANTINED, updated_at=there.updated_at)
    return _as_of_a_version(expected) == _as_of_a_version(there)


def _added_here(stored: list[Version], item: _Planned) -> int:
    """How many versions imports here added to a memory's history (``QUARANTINED_ON_IMPORT``:
    the write guard quarantined it on arrival) where the rest of it is the file's, number
    for number after them, with the same times and reasons; 0 where it is not so."""
    file = {v.version: v for v in item.versions}
    added = 0
    for version in stored:
        theirs = file.get(version.version - added)
        if theirs is not None and (theirs.changed_at, theirs.reason) == (version.changed_at, version.reason):
            continue
        if version.reason != QUARANTINED_ON_IMPORT:
            return 0
        added += 1
    return added


def _differing(
    service: MemoryService, kept: list[tuple[_Planned, str]], now: datetime, shifts: dict[str, int]
) -> list[str]:
    """The file's ids of ``kept`` (already stored in their namespace under the id given
    beside each, left as stored) whose stored record is another version, or says
    something else, than the file's. ``shifts``: by the file's id, the versions an import
    here added to a memory's history (``_added_here``), which its numbers count too."""
    by_namespace: dict[str, list[tuple[_Planned, str]]] = {}
    for item, stored_id in kept:
        by_namespace.setdefault(item.memory.namespace, []).append((item, stored_id))
    differing: list[str] = []
    for namespace, items in by_namespace.items():
        ids = [stored_id for _, stored_id in items]
        stored = {m.memory_id: m for m in service.store.get_many(Scope.whole([namespace]), ids, EVERYTHING, now)}
        for item, stored_id in items:
            there = stored.get(stored_id)
            said = (item.memory.status, *(getattr(item.memory, name) for name in _VERSIONED))
            # The file's version, or the one a quarantine on import adds (now, or not by an
            # import before that rule: either way the file was imported as it is); for one
            # brought forward past versions added here, its number already counts them
            # (``_onward``): held again on the way, the stored version is that one.
            if there is not None and (
                (
                    there.version != item.memory.version
                    and there.version - shifts.get(item.original_id, 0) not in (item.file_version, item.memory.version)
                )
                or (there.status, *(getattr(there, name) for name in _VERSIONED)) != said
            ):
                differing.append(item.original_id)
    return differing


def _stored_where(service: MemoryService, keys: list[tuple[str, str]], now: datetime) -> dict[tuple[str, str], bool]:
    """For each (namespace, id) whose id exists: True when it is in that namespace, False when in another."""
    store = service.store
    taken = store.index_status([memory_id for _, memory_id in keys])
    by_namespace: dict[str, list[str]] = {}
    for namespace, memory_id in keys:
        if memory_id in taken:
            by_namespace.setdefault(namespace, []).append(memory_id)
    here = {
        (namespace, memory.memory_id)
        for namespace, ids in by_namespace.items()
        for memory in store.get_many(Scope.whole([namespace]), ids, EVERYTHING, now)
    }
    return {key: key in here for key in keys if key[1] in taken}


def _without_gone_links(
    service: MemoryService,
    planned: list[_Planned],
    gone: set[str],
    report: ImportReport,
    now: datetime,
    *,
    stored_too: bool,
) -> None:
    """Leave out the links to memories the export's end line says went while it was written
    (purged, or out of sight), each with a note: the memory is nowhere to link to, and the
    rest of the file is whole. A memory the file holds after all keeps its links; so does
    one the target namespace holds (``stored_too``: an admin's import, whose links may point
    to stored memories): one taken out of the exporter's sight may be there, and the link to
    it is as good as any other link to a stored memory."""
    missing = gone - {item.original_id for item in planned}
    if not missing:
        return
    wanted: dict[str, set[str]] = {}
    for item in planned:
        for _, to, _ in item.edges:
            if to in missing:
                wanted.setdefault(item.memory.namespace, set()).add(to)
    stored: set[tuple[str, str]] = set()
    if stored_too:
        stored = {
            (ns, memory.memory_id)
            for ns, ids in wanted.items()
            for memory in service.store.get_many(Scope.whole([ns]), sorted(ids), EVERYTHING, now)
        }
    for item in planned:
        namespace = item.memory.namespace
        left_out = [(kind, to) for kind, to, _ in item.edges if to in missing and (namespace, to) not in stored]
        if left_out:
            item.edges = [edge for edge in item.edges if (edge[0], edge[1]) not in left_out]
            report.notes.extend(
                f"memory {item.original_id}: its {kind} link to {to} left out: that memory was purged or taken"
                " out of sight while the file was exported"
                for kind, to in left_out
            )


def _check_edges(
    service: MemoryService, planned: list[_Planned], fresh: list[_Planned], report: ImportReport, now: datetime
) -> None:
    in_file = {(item.memory.namespace, item.memory.memory_id) for item in planned}
    wanted: dict[str, set[str]] = {}
    for item in fresh:
        for _, to, _ in item.edges:
            if (item.memory.namespace, to) not in in_file:
                wanted.setdefault(item.memory.namespace, set()).add(to)
    stored = {
        (ns, memory.memory_id)
        for ns, ids in wanted.items()
        for memory in service.store.get_many(Scope.whole([ns]), sorted(ids), EVERYTHING, now)
    }
    for item in fresh:
        for kind, to, _ in item.edges:
            key = (item.memory.namespace, to)
            if key not in in_file and key not in stored:
                report.errors.append(
                    LineError(
                        item.line,
                        f"edge {kind} points to {to}, which is neither in the file nor in namespace {key[0]!r}",
                        item.original_id,
                    )
                )


def _with_links_from_kept(records: list[ImportedRecord], kept: list[tuple[_Planned, str]]) -> list[ImportedRecord]:
    """The file's links from memories left as stored to memories this import adds, each
    written with the memory it points to: a stored memory's line is left as stored, links
    included, so without this a history imported again after it grew lost the ``NEXT``
    from its last stored message to the first new one (and a memory brought back lost the
    ``SUPERSEDES`` that says which one replaced it); so are its links to a memory brought
    forward. Links between memories left as stored stay as they are."""
    incoming: dict[tuple[str, str], list[Edge]] = {}
    for item, stored_id in kept:
        namespace = item.memory.namespace
        for kind, to, at in item.edges:
            incoming.setdefault((namespace, to), []).append(Edge(namespace, stored_id, to, kind, at))
    return [
        replace(record, edges=(*record.edges, *incoming[(record.memory.namespace, record.memory.memory_id)]))
        if (record.memory.namespace, record.memory.memory_id) in incoming
        else record
        for record in records
    ]


def _embed(
    service: MemoryService, fresh: list[_Planned], onward: list[tuple[_Planned, Memory]], report: ImportReport
) -> list[ImportedRecord]:
    """The records to write: ``fresh`` ones, each with its vector (the file's, when of this
    service's model, else embedded here), then those brought forward, each over the
    record stored (``forward_from``), with a vector only when its text is not the stored
    one's (else the stored vector is kept, and the record names the stored model)."""
    embedder = service.embedder
    moved = [item for item, there in onward if item.memory.content != there.content]
    wanted = [*fresh, *moved]
    vectors: dict[int, Vector] = {}
    todo: list[int] = []
    for position, item in enumerate(wanted):
        if item.vector is not None and item.vector[0] == embedder.name and item.vector[1].shape[0] == embedder.dim:
            vectors[position] = item.vector[1]
        else:
            todo.append(position)
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start : start + EMBED_BATCH]
        matrix = embedder.embed_documents([wanted[p].memory.content for p in batch])
        for position, row in zip(batch, matrix, strict=True):
            vectors[position] = row
            item = wanted[position]
            if (item.memory.embedding_model, item.memory.embedding_version) != (embedder.name, embedder.version):
                item.memory = item.memory.evolve(embedding_model=embedder.name, embedding_version=embedder.version)
    report.vectors_kept = len(wanted) - len(todo)
    report.reembedded = len(todo)
    report.stale_vectors = [item.original_id for item in wanted if item.stale_vector]
    by_item = {id(item): vectors[position] for position, item in enumerate(wanted)}

    def record(item: _Planned, forward_from: int | None) -> ImportedRecord:
        return ImportedRecord(
            memory=item.memory,
            versions=tuple(item.versions),
            vector=by_item.get(id(item)),
            edges=tuple(
                Edge(item.memory.namespace, item.memory.memory_id, to, kind, at) for kind, to, at in item.edges
            ),
            forward_from=forward_from,
        )

    return [*(record(item, None) for item in fresh), *(record(item, there.version) for item, there in onward)]
