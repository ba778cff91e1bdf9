"""Other tools' memory, read into twinmem's import entries.

Each reader turns one tool's documented export shape into the entries that
``engine.portability.import_entries`` checks and writes, so every format gets
the same all-or-nothing import, per-line report and idempotence. Ids come from
the source where it has them (mem0's UUIDs) and are otherwise derived from the
item itself, so importing the same file twice changes nothing.

* ``mem0``: the output of ``Memory.get_all()`` (``{"results": [...]}``, or the
  bare list older versions return). Each item becomes a ``fact``; mem0's
  ``user_id`` / ``agent_id`` / ``run_id`` / ``hash`` stay in ``metadata.mem0``,
  ``agent_id`` is also the actor and ``run_id`` the session.
* ``langchain``: a chat message history as ``messages_to_dict`` writes it (a list
  of ``{"type": "human" | "ai" | "tool" | ..., "data": {"content": ...}}``), the
  on-disk format of ``FileChatMessageHistory``. Each message becomes an
  ``event`` of the session, its role in ``metadata.role``, consecutive messages
  linked by ``NEXT`` edges; a message longer than a memory may be is kept as parts,
  in order (``metadata.part`` / ``parts``). System messages are left out. Messages are kept as
  they were said, not distilled into facts: that is what a session does, once
  the chat is appended to one and closed (the report's note says so).
* ``csv`` / ``jsonl``: a table, one memory a row, with a mapping of twinmem
  fields to column names (``content=text,created_at=ts``). Columns that are not
  mapped go into ``metadata``.

For JSON documents (mem0, LangChain) the "line" of an error is the item's
position in the list, counted from 1.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from engine import guard
from engine.codec import from_iso, memory_to_dict
from engine.config import Config
from engine.errors import InvalidInput
from engine.owners import OWNERS, namespace_of, too_long
from engine.portability import FORMAT, Entry, ImportReport, derived_id, import_entries, is_memory_id, read_export
from engine.records import DEFAULT_NAMESPACE, Memory, Source, Status, Visibility, utcnow
from engine.service import MemoryService
from engine.text import parts as text_parts

FORMATS = ("twinmem", "mem0", "langchain", "csv", "jsonl")
# twinmem fields a CSV/JSONL column can fill.
MAPPABLE = (
    "memory_id",
    "content",
    "category",
    "entities",
    "importance",
    "base_score",
    "actor",
    "session_id",
    "visibility",
    "created_at",
    "updated_at",
    "expire_at",
    "key",
)
LANGCHAIN_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}


@dataclass(frozen=True, slots=True)
class Foreign:
    """What a reader made of a file: entries to import and notes for the report."""

    entries: list[Entry]
    notes: list[str]


def parse_mapping(text: str | None) -> dict[str, str]:
    """``"content=text,created_at=ts"`` → ``{"content": "text", "created_at": "ts"}``."""
    mapping: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        target, sep, column = part.partition("=")
        target, column = target.strip(), column.strip()
        if not sep or not target or not column:
            raise InvalidInput(f"mapping {part.strip()!r} must read field=column", field="map")
        if target not in MAPPABLE:
            raise InvalidInput(f"cannot map to {target!r}; mappable fields: {', '.join(MAPPABLE)}", field="map")
        mapping[target] = column
    return mapping


class _Builder:
    """Makes export-shaped entries from loose fields, with twinmem's defaults."""

    def __init__(self, config: Config, namespace: str, now: datetime) -> None:
        self.config = config
        self.namespace = namespace
        self.now = now

    def entry(
        self,
        line: int,
        *,
        memory_id: str,
        content: Any,
        category: str = "fact",
        created_at: datetime | None = None,
        updated_at: datetime | None = None,
        edges: Iterable[tuple[str, str]] = (),
        namespace: str | None = None,
        **fields: Any,
    ) -> Entry:
        if not isinstance(content, str) or not content.strip():
            return Entry(line, error="no text to remember (empty or missing content)")
        importance = _or(fields.pop("importance", None), self.config.scoring.initial_score(Source.IMPORT))
        created = created_at or self.now
        memory = Memory(
            memory_id=memory_id,
            namespace=namespace or self.namespace,
            content=content.strip(),
            category=category,
            base_score=_or(fields.pop("base_score", None), importance),  # as a save's (MemoryService)
            importance=importance,
            source=Source.IMPORT,
            created_at=created,
            updated_at=max(created, updated_at or created),
            last_accessed_at=created,
            status=fields.pop("status", Status.ACTIVE),
            **fields,
        )
        record = memory_to_dict(memory)
        return Entry(
            line,
            data={
                "kind": "memory",
                "memory": record,
                "edges": [{"kind": kind, "to": to, "created_at": record["created_at"]} for kind, to in edges],
            },
        )


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _when(value: Any, what: str) -> datetime | None:
    """An ISO 8601 time (no timezone: UTC) or Unix seconds; ``None`` for empty."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _from_seconds(value, what)
    if isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            pass
        else:
            return _from_seconds(seconds, what)
        try:
            return from_iso(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError as exc:
            if "out of range" in str(exc):
                raise ValueError(f"{what} {value!r}: {exc}") from exc
    raise ValueError(f"{what} {value!r} is neither an ISO 8601 time nor Unix seconds")


def _from_seconds(seconds: float, what: str) -> datetime:
    """Unix seconds as a UTC time; ``ValueError`` for NaN, infinities and times outside the
    years 1..9999 (``1e18``, ``1e300``), which ``fromtimestamp`` reports in three ways."""
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValueError(
            f"{what} {seconds!r} is not a time twinmem can keep (Unix seconds within the years 1..9999)"
        ) from exc


# --- mem0 ------------------------------------------------------------------------------


def _mem0_id(item: dict[str, Any], name: str) -> str | None:
    """A mem0 memory's identifier ``name`` as the ``/mem0`` routes read a request's:
    stripped; None where it is missing or blank."""
    value = item.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    return value.strip() or None


def _mem0_owner(item: dict[str, Any]) -> str | None:
    """The namespace the ``/mem0`` routes give a mem0 memory's identifiers (``user:alex``),
    or None for one that names none."""
    for name in OWNERS:
        value = _mem0_id(item, name)
        if value is not None:
            namespace = namespace_of(name, value)
            problem = too_long(name, namespace)
            if problem:
                raise ValueError(problem)
            return namespace
    return None


def read_mem0(raw: bytes | str, *, config: Config, namespace: str | None, now: datetime) -> Foreign:
    """mem0's ``get_all()`` output. Into ``namespace`` when given; otherwise each memory
    into the namespace its identifiers map to, as the ``/mem0`` routes map a request's
    (``default`` for one without any), with ``agent_id``, ``actor_id`` and ``role`` in its
    metadata where a ``/mem0`` add keeps them, so those routes list and narrow it alike."""
    document = _json_document(raw)
    items = document.get("results") if isinstance(document, dict) else document
    if not isinstance(items, list):
        raise InvalidInput('a mem0 export is the output of get_all(): {"results": [...]} or a list', field="body")
    notes = []
    if isinstance(document, dict) and document.get("relations"):
        notes.append(f"{len(document['relations'])} mem0 graph relations were not imported (memories only)")
    build = _Builder(config, namespace or DEFAULT_NAMESPACE, now)
    entries: list[Entry] = []
    for position, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            entries.append(Entry(position, error="a mem0 memory must be an object"))
            continue
        try:
            owner = namespace or _mem0_owner(item)
            source_id = str(item.get("id") or "")
            if not source_id:
                raise ValueError("a mem0 memory without an id")
            created = _when(item.get("created_at"), "created_at")
            updated = _when(item.get("updated_at"), "updated_at")
            expire = _when(item.get("expiration_date"), "expiration_date")
            origin = {
                name: item[name]
                for name in ("id", "hash", "user_id", "agent_id", "run_id", "actor_id", "role", "categories")
                if item.get(name) is not None
            }
            metadata = dict(item.get("metadata") or {})
            # Stripped, as a /mem0 request's identifiers are, so its agent_id and run_id narrow to them.
            agent, run = _mem0_id(item, "agent_id"), _mem0_id(item, "run_id")
            metadata.update({name: item[name] for name in ("actor_id", "role") if name in origin})
            if agent is not None:
                metadata["agent_id"] = agent
            metadata["mem0"] = origin
            entries.append(
                build.entry(
                    position,
                    memory_id=source_id if is_memory_id(source_id) else derived_id("mem0", source_id),
                    namespace=owner,
                    content=item.get("memory"),
                    created_at=created,
                    updated_at=updated,
                    expire_at=expire,
                    actor=agent,
                    session_id=run,
                    metadata=metadata,
                )
            )
        except (ValueError, TypeError) as exc:
            entries.append(Entry(position, error=str(exc)))
    return Foreign(entries, notes)


# --- LangChain ---------------------------------------------------------------------------


def read_langchain(raw: bytes | str, *, config: Config, namespace: str, now: datetime, session_id: str) -> Foreign:
    document = _json_document(raw)
    messages = document.get("messages") if isinstance(document, dict) else document
    if not isinstance(messages, list):
        raise InvalidInput("a LangChain history is a list of messages as messages_to_dict writes them", field="body")
    build = _Builder(config, namespace, now)
    notes = [
        "each message is saved as an event, not distilled into facts: to distil a chat, append it to a session "
        "(POST /v1/sessions/{id}/messages) and close it"
    ]
    kept: list[tuple[int, str, str, dict[str, Any], dict[str, Any]]] = []
    entries: list[Entry] = []
    for position, message in enumerate(messages, start=1):
        if not isinstance(message, dict) or not isinstance(message.get("data"), dict):
            entries.append(Entry(position, error='a message must be {"type": ..., "data": {"content": ...}}'))
            continue
        kind, data = str(message.get("type", "")), message["data"]
        role = data.get("role") if kind == "chat" else LANGCHAIN_ROLES.get(kind)
        if kind == "system":
            notes.append(f"message {position}: a system message, left out")
            continue
        if not isinstance(role, str):
            entries.append(Entry(position, error=f"unknown message type {kind!r}"))
            continue
        text = _message_text(data.get("content"))
        if not text:
            notes.append(f"message {position}: no text (tool calls or media only), left out")
            continue
        origin = {name: data[name] for name in ("id", "name", "tool_call_id") if data.get(name)}
        origin["type"] = kind
        kept.append((position, role, text, origin, data))
    # A message longer than a memory may be is kept as parts, in order (one past the bound
    # failed its line, and so the whole history); one that fits keeps the id it always had.
    cap = config.limits.max_content_chars
    policy = config.guard.policy_for(namespace)
    # id, position, text, actor, metadata, status
    said: list[tuple[str, int, str, str | None, dict[str, Any], Status]] = []
    for position, role, text, origin, data in kept:
        actor = data.get("name") if role == "assistant" else None
        metadata = {"role": role, "position": position, "langchain": origin}
        status = Status.ACTIVE
        pieces = [text]
        if len(text) > cap:
            # The write guard reads the whole message before it is cut, as it reads each
            # part after: a card number, a key or an order cut in two is in neither part
            # whole, and went in unredacted (the whole message too long, nothing went in).
            whole = guard.check_write(text, Source.IMPORT, policy)
            if whole.action is guard.Action.REJECTED:
                entries.append(Entry(position, error=f"the write guard refused it: {'; '.join(whole.reasons)}"))
                continue
            if whole.content != text:
                notes.append(f"message {position}: redacted before it was cut into parts")
            if whole.action is guard.Action.QUARANTINED:
                status = Status.QUARANTINED
                notes.append(f"message {position}: quarantined by the write guard, every part of it")
            pieces = text_parts(whole.content, cap)
        if not pieces:
            notes.append(f"message {position}: no text (invisible characters only), left out")
            continue
        if len(pieces) == 1:
            memory_id = derived_id("langchain", session_id, str(position), text)
            said.append((memory_id, position, pieces[0], actor, metadata, status))
            continue
        notes.append(f"message {position}: {len(text)} characters, kept as {len(pieces)} parts (at most {cap} each)")
        for number, piece in enumerate(pieces, start=1):
            memory_id = derived_id("langchain", session_id, f"{position}.{number}", piece)
            part = {**metadata, "part": number, "parts": len(pieces)}
            said.append((memory_id, position, piece, actor, part, status))
    for index, (memory_id, position, text, actor, metadata, status) in enumerate(said):
        following = [("NEXT", said[index + 1][0])] if index + 1 < len(said) else []
        entries.append(
            build.entry(
                position,
                memory_id=memory_id,
                content=text,
                category="event",
                session_id=session_id,
                actor=actor,
                metadata=metadata,
                edges=following,
                status=status,
            )
        )
    entries.sort(key=lambda entry: entry.line)
    return Foreign(entries, notes)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [
            block if isinstance(block, str) else block.get("text", "")
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        ]
        return "\n".join(part for part in parts if isinstance(part, str) and part).strip()
    return ""


# --- CSV and JSON Lines tables -------------------------------------------------------------


def read_table(
    raw: bytes | str,
    *,
    kind: str,
    mapping: Mapping[str, str],
    config: Config,
    namespace: str,
    now: datetime,
) -> Foreign:
    text = _utf8(raw) if isinstance(raw, bytes) else raw
    rows: Iterator[tuple[int, Any]]
    if kind == "csv":
        rows = _csv_rows(text, mapping)
    else:
        rows = _jsonl_rows(text)
    build = _Builder(config, namespace, now)
    entries, notes = [], []
    for line, row in rows:
        if isinstance(row, Exception) or not isinstance(row, dict):
            entries.append(Entry(line, error=str(row) if isinstance(row, Exception) else "a row must be an object"))
            continue
        try:
            entry = _table_entry(build, line, row, mapping, kind)
        except (ValueError, TypeError, OverflowError) as exc:
            entries.append(Entry(line, error=str(exc)))
            continue
        entries.append(entry)
        expires = entry.data["memory"]["expire_at"] if entry.data is not None else None
        if expires is not None and from_iso(expires) <= now:
            # Unix seconds meant as a time to live (86400) land in 1970: said, not silently hidden.
            notes.append(
                f"line {line}: expire_at {expires} has passed (a number is Unix seconds), so the memory is "
                "out of recall and lists from the start (include_expired=true lists it; PATCH it with "
                "clear_expire_at to keep it)"
            )
    return Foreign(entries, notes)


def _utf8(raw: bytes) -> str:
    """The file as text; a file that is not UTF-8 is refused, naming the first bad line."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InvalidInput(
            f"line {line} is not valid UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start}); "
            "save the file as UTF-8 and import it again",
            field="body",
        ) from exc


def _csv_rows(text: str, mapping: Mapping[str, str]) -> Iterator[tuple[int, Any]]:
    """(line, row as a dict of column to value) of a CSV; a row that cannot be read, or
    whose values do not fit the header's columns one to one, comes as a ``ValueError``
    (an unquoted line break splits a row in two; a value without a column would be lost)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        columns = next(reader, [])
    except csv.Error as exc:
        raise InvalidInput(f"the CSV's header line cannot be read: {exc}", field="body") from exc
    twice = sorted({column for column in columns if columns.count(column) > 1})
    if twice:
        raise InvalidInput(
            f"column {twice[0]!r} appears twice in the CSV's header: name each column once", field="body"
        )
    absent = [column for column in mapping.values() if column not in columns]
    if absent:
        raise InvalidInput(f"the CSV has no column(s) {', '.join(absent)}; it has {', '.join(columns)}", field="map")
    while True:
        line = reader.line_num + 1  # where the next row starts
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # a field over the reader's limit, say
            yield line, ValueError(f"the CSV row cannot be read: {exc}")
            continue
        if not values:
            continue  # a blank line, as csv.DictReader skips it
        if len(values) != len(columns):
            held = f"{len(values)} value{'s' if len(values) != 1 else ''}"
            named = f"{len(columns)} column{'s' if len(columns) != 1 else ''}"
            yield line, ValueError(f"the row holds {held}, but the header names {named} (a line break not in quotes?)")
            continue
        yield line, dict(zip(columns, values, strict=True))


def _jsonl_rows(text: str) -> Iterator[tuple[int, Any]]:
    # Lines end at "\n" alone (a "\r" before it is whitespace to JSON): ``splitlines`` would
    # also split inside a string at U+2028, U+0085 or a form feed, which JSON leaves as is.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, ValueError(f"not JSON ({exc.msg} at column {exc.colno})")
        except RecursionError:
            yield number, ValueError("JSON nested too deeply to read")


def _table_entry(build: _Builder, line: int, row: dict[str, Any], mapping: Mapping[str, str], kind: str) -> Entry:
    columns = {target: mapping.get(target, target) for target in MAPPABLE}
    used = {column for target, column in columns.items() if column in row}

    def value(target: str) -> Any:
        got = row.get(columns[target])
        return None if got == "" else got

    if value("content") is None:
        return Entry(line, error=f"no content: column {columns['content']!r} is missing or empty")
    fields: dict[str, Any] = {}
    for name in ("importance", "base_score"):
        if value(name) is not None:
            number = float(value(name))
            if not 0.0 <= number <= 1.0:
                raise ValueError(f"{name} must be within 0..1, got {value(name)!r}")
            fields[name] = number
    for name in ("actor", "session_id", "key"):
        if value(name) is not None:
            fields[name] = str(value(name))
    if value("visibility") is not None:
        fields["visibility"] = Visibility(str(value("visibility")))
    entities = value("entities")
    if entities is not None:
        if isinstance(entities, str):
            names = entities.split(";")
        elif isinstance(entities, list) and all(isinstance(name, str) for name in entities):
            names = entities
        else:
            raise ValueError(f"entities must be a list of names or one string of names split by ';', got {entities!r}")
        fields["entities"] = tuple(name.strip() for name in names if name.strip())
    fields["expire_at"] = _when(value("expire_at"), "expire_at")
    fields["metadata"] = {column: got for column, got in row.items() if column not in used and column is not None}
    given_id = value("memory_id")
    if given_id is not None:
        memory_id = str(given_id) if is_memory_id(str(given_id)) else derived_id(kind, str(given_id))
    else:
        memory_id = derived_id(kind, json.dumps(row, sort_keys=True, ensure_ascii=False, default=str))
    return build.entry(
        line,
        memory_id=memory_id,
        content=str(value("content")),
        category=str(value("category") or "fact"),
        created_at=_when(value("created_at"), "created_at"),
        updated_at=_when(value("updated_at"), "updated_at"),
        **fields,
    )


def _json_document(raw: bytes | str) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the file is not one JSON document: {exc}", field="body") from exc
    except RecursionError as exc:
        raise InvalidInput("the file's JSON is nested too deeply to read", field="body") from exc


# --- one entry point for every format ---------------------------------------------------------


def run_import(
    service: MemoryService,
    source: IO[bytes],
    *,
    format_name: str = "twinmem",
    namespace: str | None = None,
    mapping: Mapping[str, str] | None = None,
    session_id: str | None = None,
    actor: str | None = None,
    owner: str | None = None,
    now: datetime | None = None,
) -> ImportReport:
    """Import a file of any of ``FORMATS`` into the service: all of it, or nothing.

    A twinmem export is read line by line; other formats are read whole. Other
    tools' memories go to ``namespace`` (when not given, mem0's to the namespace of their
    identifiers, as the ``/mem0`` routes map them, the others to ``default``). ``actor``
    is recorded as the writer of the import; ``owner``: see ``import_entries``.
    """
    now = now or utcnow()
    if format_name == "twinmem":
        return import_entries(
            service, read_export(source), format_name=FORMAT, namespace=namespace, actor=actor, owner=owner, now=now
        )
    if format_name not in FORMATS:
        raise InvalidInput(f"unknown format {format_name!r}; one of {', '.join(FORMATS)}", field="format")
    target = namespace or DEFAULT_NAMESPACE
    raw = source.read()
    config = service.config
    into: str | None = target
    if format_name == "mem0":
        foreign = read_mem0(raw, config=config, namespace=namespace, now=now)
        into = namespace  # without one, each memory stays in the namespace its identifiers gave it
    elif format_name == "langchain":
        session = session_id or "langchain-" + hashlib.sha256(raw).hexdigest()[:12]
        foreign = read_langchain(raw, config=config, namespace=target, now=now, session_id=session)
        if session_id is None:
            # Named by the content, so the history grown by a message is another session:
            # without this id, importing it again stores every message it had once more.
            foreign.notes.append(
                f"no session_id given: the messages went into session {session}, named by this file's content; "
                f"to import this history again after it grew, pass session_id={session}, or its messages are "
                "stored twice"
            )
    else:
        foreign = read_table(raw, kind=format_name, mapping=mapping or {}, config=config, namespace=target, now=now)
    return import_entries(
        service,
        foreign.entries,
        format_name=format_name,
        namespace=into,
        actor=actor,
        owner=owner,
        notes=foreign.notes,
        now=now,
    )
