"""A LangGraph store on twinmem: ``create_agent(..., store=TwinmemStore())`` or
``graph.compile(store=TwinmemStore())`` keeps a graph's long-term memory in the service,
where every other framework reads it too. ``pip install 'twinmem[langgraph]'``.

Mapping (LangGraph → twinmem):

* A namespace tuple is one twinmem namespace, its labels joined by ``:``:
  ``("user", "42")`` is ``user:42``. A character twinmem does not allow in a namespace
  (anything but letters, digits, ``_``, ``-``, ``@``) is written ``.xx`` per UTF-8 byte;
  LangGraph labels never hold a period, so the mapping is one-to-one both ways.
* An item is a memory whose explicit ``key`` is the item's key and whose
  ``metadata["langgraph"]`` is the item's value. Its content, what recall embeds and
  ranks, is the text at the first of ``index_fields`` the value holds (default: the
  ``content``, ``text``, ``memory`` or ``data`` string), else the value as JSON; of a
  text past the service's 8,000 characters, its start, cut at a sentence or word boundary
  (the value is kept whole: a value is at most the service's 16 KiB of metadata).
  Putting a key that exists writes a new version of that memory; ``value=None``
  deletes it (soft: its history stays). A token that may write but not read the
  namespace (a drop box) sees no item there, so each of its puts saves a new memory
  with the key, which supersedes the one it put before under that key (in the
  ``supersede`` conflict mode, the default); its deletes are refused
  (``PermissionDenied``), as it cannot find what they would delete. It sees others'
  public memories but may not change them: a put under a key a public memory of
  another writer holds is refused (``PermissionDenied`` naming the key). A key held by
  another writer's shared or private memory it cannot see at all, so its put saves a
  second active memory with that key beside it (readers' ``get`` answers the newest);
  give a drop box keys of its own (a prefix, say) where that matters.
* Memories written by anything else (another framework, the HTTP API) are items too:
  key = their explicit key, else their memory id; value = ``{"content", "category",
  "memory_id"}``. Putting such an item back writes a new version of that memory (it
  keeps no key; its other metadata stays).
* ``search`` with a ``query`` is twinmem's recall (semantic + lexical + graph + decay)
  over every namespace under the prefix (a query past the service's 4,000 characters is
  cut to its start, at a sentence or word boundary); without one, the items of all
  those namespaces together, newest first. ``filter`` compares the items' values as LangGraph's in-memory store does
  (equality, ``$eq $ne $gt $gte $lt $lte``), applied here after recall, so a query
  with a filter looks at up to 100 candidates. ``SearchItem.score`` is recall's score.
* A value is kept as JSON, as LangGraph's SQLite store keeps it: a ``datetime``, ``date``,
  ``time`` or ``UUID`` in it comes back as its ISO 8601 text; anything else JSON cannot
  hold is refused (``TypeError`` naming it).
* ``list_namespaces`` lists the namespaces that hold items (as LangGraph's SQLite and
  Postgres stores, not one whose items were all deleted).
* ``ttl`` (minutes) becomes the memory's ``expire_at``, counted from the write; reads do
  not extend it (``refresh_ttl`` is accepted and ignored).
* Items never replace one another: different keys are different subjects to the
  service. A memory without a key, saved later through another framework, can: "Switch
  my theme to black" supersedes the item "I like a blue theme", which then leaves
  ``get`` and ``search`` as it leaves recall (its history stays readable through the
  client). ``conflicts="off"`` keeps the store's own puts out of that judgement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from uuid import UUID

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from twinmem_client import calls
from twinmem_client.async_client import AsyncTwinmemClient
from twinmem_client.client import TwinmemClient
from twinmem_client.errors import NotFound, PermissionDenied
from twinmem_client.limits import MAX_CONTENT_CHARS, fit_query, is_blank
from twinmem_client.models import Memory
from twinmem_client.steps import Step, arun, run

VALUE_KEY = "langgraph"
DEFAULT_INDEX_FIELDS = ("content", "text", "memory", "data")
MAX_RECALL = 100  # the service's top_k bound
PAGE = 500
NO_READ_GRANT = "no read grant"  # how the service's 403 for a caller without ``r`` begins

_SAFE = re.compile(r"[A-Za-z0-9_\-@]")
_ESCAPED = re.compile(r"(?:\.[0-9a-f]{2})+")


def to_namespace(path: tuple[str, ...]) -> str:
    """The twinmem namespace of a LangGraph namespace tuple."""
    labels = []
    for label in path:
        labels.append("".join(c if _SAFE.fullmatch(c) else "".join(f".{b:02x}" for b in c.encode()) for c in label))
    name = ":".join(labels)
    if not 1 <= len(name) <= 128:
        raise InvalidNamespaceError(f"namespace {path!r} is {len(name)} characters as a twinmem namespace (1-128)")
    return name


def from_namespace(name: str) -> tuple[str, ...] | None:
    """The LangGraph namespace tuple of a twinmem namespace, or None for one no tuple maps to."""
    path = []
    for label in name.split(":"):
        try:
            decoded = _ESCAPED.sub(lambda m: bytes.fromhex(m.group().replace(".", "")).decode(), label)
        except UnicodeDecodeError:
            return None
        path.append(decoded)
    found = tuple(path)
    return found if all(found) and to_namespace(found) == name else None


def _matches(condition: MatchCondition, path: tuple[str, ...]) -> bool:
    pattern = tuple(condition.path)
    if len(path) < len(pattern):
        return False
    part = path[: len(pattern)] if condition.match_type == "prefix" else path[len(path) - len(pattern) :]
    return all(want in ("*", have) for want, have in zip(pattern, part, strict=True))


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, Mapping) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_compare(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if value is None:
        return False
    if op == "$gt":
        return float(value) > float(operand)
    if op == "$gte":
        return float(value) >= float(operand)
    if op == "$lt":
        return float(value) < float(operand)
    if op == "$lte":
        return float(value) <= float(operand)
    raise ValueError(f"unsupported filter operator {op!r}")


def _plain(value: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``value`` as JSON holds it, as LangGraph's SQLite store writes values (orjson):
    a datetime, date or time becomes its ISO 8601 text, a UUID its text; anything else
    JSON cannot hold is refused with what and where it is."""

    def plain(item: Any) -> Any:
        if isinstance(item, datetime | date | time):
            return item.isoformat()
        if isinstance(item, UUID):
            return str(item)
        raise TypeError(f"the value put under {key!r} holds a {type(item).__name__}, which JSON cannot hold")

    loaded: dict[str, Any] = json.loads(json.dumps(dict(value), ensure_ascii=False, default=plain))
    return loaded


def _value(memory: Memory) -> dict[str, Any]:
    stored = memory.metadata.get(VALUE_KEY)
    if isinstance(stored, dict):
        return stored
    return {"content": memory.content, "category": memory.category, "memory_id": memory.memory_id}


def _item(memory: Memory, path: tuple[str, ...]) -> Item:
    return Item(
        value=_value(memory),
        key=memory.key or memory.memory_id,
        namespace=path,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
    )


def _search_item(memory: Memory, path: tuple[str, ...], score: float | None) -> SearchItem:
    return SearchItem(path, memory.key or memory.memory_id, _value(memory), memory.created_at, memory.updated_at, score)


class TwinmemStore(BaseStore):
    """A ``BaseStore`` whose items live in a twinmem service.

    ``client`` / ``aclient``: the clients ``batch`` and ``abatch`` use. One not given is
    made like the other (same URL, token, timeout and retries), or from ``base_url`` and
    ``token`` when neither is. ``index_fields``: where in a value the
    text to embed is (dotted paths). ``category``, ``source`` and ``conflicts``: what
    every put saves with (``conflicts=None`` is the namespace's configured mode).
    """

    supports_ttl = True

    def __init__(
        self,
        client: TwinmemClient | None = None,
        *,
        aclient: AsyncTwinmemClient | None = None,
        base_url: str | None = None,
        token: str | None = None,
        index_fields: Sequence[str] = DEFAULT_INDEX_FIELDS,
        category: str = "fact",
        source: str = "user_input",
        conflicts: str | None = None,
    ) -> None:
        if client is None:
            client = TwinmemClient.like(aclient) if aclient is not None else TwinmemClient(base_url, token=token)
        self.client = client
        self.aclient = aclient or AsyncTwinmemClient.like(client)
        self.index_fields = tuple(index_fields)
        self.category = category
        self.source = source
        self.conflicts = conflicts

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run(self.client, self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await arun(self.aclient, self._batch(list(ops)))

    def close(self) -> None:
        self.client.close()

    async def aclose(self) -> None:
        await self.aclient.aclose()

    # --- one implementation for both: steps (see twinmem_client.steps) ---------------

    def _batch(self, ops: list[Op]) -> Step[list[Result]]:
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append((yield from self._get(op)))
            elif isinstance(op, PutOp):
                yield from self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list_namespaces(op)))
            else:
                raise ValueError(f"unknown operation {op!r}")
        return results

    def _find(self, namespace: str, key: str) -> Step[list[Memory] | None]:
        """The active memories ``key`` names, newest first; None where the caller may not
        read ``namespace`` (a drop box: ``w`` without ``r``), which sees no memory there
        but public ones, not even those it wrote."""
        found: list[Memory] = yield calls.by_key(namespace, key)
        if found:
            return found
        try:  # a memory written without a key answers to its id
            memory: Memory = yield calls.get(namespace, key)
        except NotFound:
            return []
        except PermissionDenied as exc:
            # The service answers an id it does not show a caller without ``r`` with
            # 403 "no read grant on namespace …" (not 404: nobody learns what exists).
            if not exc.detail.startswith(NO_READ_GRANT):
                raise
            return None
        return [memory] if memory.status == "active" and memory.key is None else []

    def _get(self, op: GetOp) -> Step[Item | None]:
        if not op.namespace:
            return None
        found = yield from self._find(to_namespace(op.namespace), op.key)
        return _item(found[0], op.namespace) if found else None

    def _text(self, value: Mapping[str, Any], index: Any) -> str:
        for path in index if isinstance(index, list) else self.index_fields:
            here: Any = value
            for part in str(path).split("."):
                here = here.get(part) if isinstance(here, Mapping) else None
            if isinstance(here, str) and not is_blank(here):
                return here
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

    def _put(self, op: PutOp) -> Step[None]:
        namespace = to_namespace(op.namespace)
        found = yield from self._find(namespace, op.key)
        if op.value is None:
            if found is None:  # a delete that cannot find what it deletes must not pass for done
                raise PermissionDenied(
                    403, f"cannot delete {op.key!r} in {namespace!r}: a token without read there cannot find it"
                )
            for memory in found:
                yield calls.delete(namespace, memory.memory_id, False, None)
            return None
        value = _plain(op.value, op.key)
        # Recall embeds the text's start where it is longer than a memory's content may be
        # (as it takes a long query's); the value is kept whole in the metadata.
        content = fit_query(self._text(value, op.index), MAX_CONTENT_CHARS)
        expire_at = datetime.now(UTC) + timedelta(minutes=op.ttl) if op.ttl is not None else None
        if found:  # the memory of that key, or the keyless one of that id: a new version of it
            metadata = {**found[0].metadata, VALUE_KEY: value}  # what others wrote there stays
            changes: dict[str, Any] = {"content": content, "metadata": metadata}
            changes |= {"expire_at": expire_at} if expire_at else {"clear_expire_at": True}
            try:
                yield calls.update(namespace, found[0].memory_id, {**changes, "reason": "langgraph put"})
            except NotFound:
                yield from self._refuse_unwritable(namespace, op.key, found[0])
                raise
            for extra in found[1:]:
                yield calls.delete(namespace, extra.memory_id, False, None)
            return None
        fields: dict[str, Any] = {"key": op.key, "metadata": {VALUE_KEY: value}, "category": self.category}
        fields |= {"source": self.source}
        fields |= {"expire_at": expire_at, "conflicts": self.conflicts}
        yield calls.save(namespace, content, fields)
        return None

    def _refuse_unwritable(self, namespace: str, key: str, memory: Memory) -> Step[None]:
        """Raise ``PermissionDenied`` when ``memory``, which a put found and could not
        update (404), is still there: one this caller sees but may not change (a drop box
        sees others' public memories). One gone meanwhile raises nothing here."""
        try:
            current: Memory = yield calls.get(namespace, memory.memory_id)
        except (NotFound, PermissionDenied):
            return None
        if current.status == "active":
            raise PermissionDenied(
                403,
                f"cannot put {key!r} in {namespace!r}: the memory holding that key ({memory.memory_id}) "
                "is another writer's public memory; a token without read there changes only what it wrote",
            )
        return None

    def _namespaces(self, prefix: tuple[str, ...]) -> Step[list[tuple[str, tuple[str, ...]]]]:
        """The twinmem namespaces under a LangGraph prefix, with their tuples."""
        text = to_namespace(prefix) if prefix else ""
        names: list[str] = yield calls.namespaces(text, 10000)
        out = []
        for name in names:
            path = from_namespace(name)
            if path is not None and path[: len(prefix)] == tuple(prefix):
                out.append((name, path))
        return out

    def _search(self, op: SearchOp) -> Step[list[SearchItem]]:
        spaces = yield from self._namespaces(tuple(op.namespace_prefix))
        if not spaces or op.limit <= 0:
            return []
        paths = dict(spaces)
        want = op.offset + op.limit
        kept: list[SearchItem] = []
        if op.query and not is_blank(op.query):  # a blank query asks for nothing: the newest, as without one
            top_k = MAX_RECALL if op.filter else min(MAX_RECALL, want)
            hits = yield calls.recall(None, list(paths), fit_query(op.query), {"top_k": top_k})
            for hit in hits:
                if not op.filter or _compare(_value(hit.memory), op.filter):
                    kept.append(_search_item(hit.memory, paths[hit.memory.namespace], hit.score))
            return kept[op.offset : want]
        for name, path in spaces:  # each namespace's newest ``want``, then all of them by time
            here: list[SearchItem] = []
            cursor: str | None = None
            while len(here) < want:
                # No more than is wanted; a filter may pass few of a page, so then whole pages.
                size = PAGE if op.filter else min(PAGE, want - len(here))
                page = yield calls.list_page(name, {"limit": size, "cursor": cursor})
                for memory in page.memories:
                    if not op.filter or _compare(_value(memory), op.filter):
                        here.append(_search_item(memory, path, None))
                cursor = page.next_cursor
                if cursor is None:
                    break
            kept += here[:want]
        kept.sort(key=lambda item: item.created_at, reverse=True)  # stable: a namespace's own order holds
        return kept[op.offset : want]

    def _list_namespaces(self, op: ListNamespacesOp) -> Step[list[tuple[str, ...]]]:
        spaces = yield from self._namespaces(())
        # Each path the answer may hold (cut to ``max_depth``), with the namespaces that give it.
        candidates: dict[tuple[str, ...], list[str]] = {}
        for name, path in spaces:
            if all(_matches(c, path) for c in op.match_conditions or ()):
                shown = path[: op.max_depth] if op.max_depth is not None else path
                candidates.setdefault(shown, []).append(name)
        # The service lists a namespace while it holds memories of any status (deleted ones
        # can be restored); a store's namespace is one that holds items. Probed in the
        # answer's order, each path until one of its namespaces holds one, and only until
        # the page asked for is full.
        want = op.offset + op.limit
        paths: list[tuple[str, ...]] = []
        for shown in sorted(candidates):
            if len(paths) >= want:
                break
            for name in candidates[shown]:
                page = yield calls.list_page(name, {"limit": 1})
                if page.memories:
                    paths.append(shown)
                    break
        return paths[op.offset : want]
