"""TwinmemStore against a real service, checked against LangGraph's own InMemoryStore:
the same operations on both give the same answers (search ranking aside, which is
twinmem's recall)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp
from langgraph.store.memory import InMemoryStore

from tests.api.conftest import ROOT_TOKEN, LiveServer
from twinmem_client import AsyncTwinmemClient, PermissionDenied, TwinmemClient
from twinmem_client.langgraph import PAGE, TwinmemStore, from_namespace, to_namespace

pytestmark = pytest.mark.slow


@pytest.fixture
def store(live: LiveServer) -> Iterator[TwinmemStore]:
    store = TwinmemStore(base_url=live.url, conflicts="off")
    yield store
    store.close()


def test_namespace_mapping_is_one_to_one() -> None:
    assert to_namespace(("user", "42")) == "user:42"
    for path in [("user", "42"), ("a:b", "c"), ("小明", "偏好"), ("x y", "@-_"), ("2e", "q")]:
        assert from_namespace(to_namespace(path)) == path
    assert to_namespace(("a:b",)) != to_namespace(("a", "b"))
    assert from_namespace("user.name") is None  # a twinmem namespace no tuple maps to
    with pytest.raises(InvalidNamespaceError):
        to_namespace(("x" * 129,))


def test_put_get_update_delete_round_trip(store: TwinmemStore, tag: str) -> None:
    ns = ("users", tag, "profile")
    reference = InMemoryStore()
    for target in (store, reference):
        target.put(ns, "name", {"content": "The user's name is Xiao Ming", "confidence": 0.9})
        target.put(ns, "empty", {"nested": {"list": [1, 2, {"deep": True}]}})
    for key in ("name", "empty", "missing"):
        mine, theirs = store.get(ns, key), reference.get(ns, key)
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert (mine.key, mine.namespace, mine.value) == (theirs.key, theirs.namespace, theirs.value)
    first = store.get(ns, "name")
    assert first is not None and first.created_at.tzinfo is not None
    store.put(ns, "name", {"content": "The user's name is Xiao Hong"})
    second = store.get(ns, "name")
    assert second is not None and second.value == {"content": "The user's name is Xiao Hong"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    with TwinmemClient(store.client.base_url) as client:  # one memory, two versions
        (memory,) = client.by_key("name", namespace=to_namespace(ns))
        assert memory.version == 2 and memory.content == "The user's name is Xiao Hong"
    store.delete(ns, "name")
    assert store.get(ns, "name") is None
    store.delete(ns, "name")  # deleting what is gone is no error, as in LangGraph's stores


def test_equal_values_under_two_keys_stay_two_items(store: TwinmemStore, tag: str) -> None:
    ns = ("notes", tag)
    store.put(ns, "a", {"content": "Water the plants on Sunday"})
    store.put(ns, "b", {"content": "Water the plants on Sunday"})
    assert {item.key for item in store.search(ns)} == {"a", "b"}
    store.delete(ns, "a")
    assert store.get(ns, "b") is not None


def test_search_by_query_filter_and_offset(store: TwinmemStore, tag: str) -> None:
    ns = ("users", tag)
    store.put((*ns, "prefs"), "colour", {"content": "Favourite colour is blue", "kind": "preference", "weight": 3})
    store.put((*ns, "prefs"), "food", {"content": "Loves spicy Sichuan food", "kind": "preference", "weight": 1})
    store.put((*ns, "facts"), "pet", {"content": "Has a cat called Miso", "kind": "fact", "weight": 2})
    store.put(("elsewhere", tag), "colour", {"content": "Favourite colour is red", "kind": "preference"})

    hits = store.search(ns, query="any suggestions for cool-toned colours?")
    assert hits[0].key == "colour" and hits[0].namespace == (*ns, "prefs")
    assert all(h.score is not None for h in hits) and [h.score for h in hits] == sorted(
        (h.score for h in hits if h.score is not None), reverse=True
    )
    assert {h.namespace[:2] for h in hits} == {ns}  # the prefix holds: nothing from ("elsewhere", ...)
    prefs = store.search(ns, query="colour", filter={"kind": "preference"})
    assert {h.key for h in prefs} == {"colour", "food"}
    heavy = store.search(ns, query="anything", filter={"weight": {"$gte": 2}})
    assert {h.key for h in heavy} == {"colour", "pet"}
    assert store.search(ns, query="anything", filter={"kind": {"$ne": "preference"}})[0].key == "pet"
    everything = store.search(ns, query="colour food pet", limit=3)
    assert [h.key for h in store.search(ns, query="colour food pet", limit=2, offset=1)] == [
        h.key for h in everything[1:3]
    ]


def test_search_without_query_matches_the_in_memory_store(store: TwinmemStore, tag: str) -> None:
    reference = InMemoryStore()
    items = [
        (("docs", tag, "a"), "1", {"content": "first report", "status": "draft", "pages": 3}),
        (("docs", tag, "a"), "2", {"content": "second report", "status": "final", "pages": 10}),
        (("docs", tag, "b"), "3", {"content": "third memo", "status": "final", "pages": 1}),
    ]
    for target in (store, reference):
        for ns, key, value in items:
            target.put(ns, key, value)
    for prefix, flt in [
        (("docs", tag), None),
        (("docs", tag), {"status": "final"}),
        (("docs", tag), {"pages": {"$gt": 2}}),
        (("docs", tag, "b"), None),
        (("docs", tag, "c"), None),
    ]:
        mine = {(h.namespace, h.key) for h in store.search(prefix, filter=flt)}
        theirs = {(h.namespace, h.key) for h in reference.search(prefix, filter=flt)}
        assert mine == theirs, (prefix, flt)
    assert len(store.search(("docs", tag), limit=2)) == 2
    assert len(store.search(("docs", tag), limit=2, offset=2)) == 1


def test_list_namespaces_matches_the_in_memory_store(store: TwinmemStore, tag: str) -> None:
    reference = InMemoryStore()
    spaces = [(tag, "users", "a", "v1"), (tag, "users", "b", "v2"), (tag, "docs", "a", "v1"), (tag, "cache")]
    for target in (store, reference):
        for ns in spaces:
            target.put(ns, "k", {"content": "x " + "/".join(ns)})
    for kwargs in [
        {"prefix": (tag,)},
        {"prefix": (tag, "users")},
        {"prefix": (tag, "*", "a")},
        {"prefix": (tag,), "suffix": ("v1",)},
        {"prefix": (tag,), "max_depth": 2},
        {"prefix": (tag,), "limit": 2, "offset": 1},
        {"prefix": (tag, "nothing")},
    ]:
        assert store.list_namespaces(**kwargs) == reference.list_namespaces(**kwargs), kwargs  # type: ignore[arg-type]
    conditions = (MatchCondition("prefix", (tag, "*")), MatchCondition("suffix", ("a", "*")))
    (mine,) = store.batch([ListNamespacesOp(conditions)])
    (theirs,) = reference.batch([ListNamespacesOp(conditions)])
    assert mine == theirs == [(tag, "docs", "a", "v1"), (tag, "users", "a", "v1")]


def test_batch_keeps_order_and_refuses_bad_namespaces(store: TwinmemStore, tag: str) -> None:
    ns = ("batch", tag)
    results = store.batch(
        [
            PutOp(ns, "k", {"content": "Meeting moved to Thursday"}),
            GetOp(ns, "k"),
            PutOp(ns, "k", None),
            GetOp(ns, "k"),
        ]
    )
    assert results[0] is None and results[2] is None
    assert results[1] is not None and results[1].value == {"content": "Meeting moved to Thursday"}  # type: ignore[union-attr]
    assert results[3] is None
    for bad in [("a.b",), ("",)]:
        with pytest.raises(InvalidNamespaceError):
            store.batch([GetOp(bad, "k")])
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {"content": "reserved root"})


def test_async_batch(live: LiveServer, tag: str) -> None:
    async def scenario() -> None:
        store = TwinmemStore(base_url=live.url)
        ns = ("async", tag)
        await store.aput(ns, "tea", {"content": "Drinks green tea every morning"})
        item = await store.aget(ns, "tea")
        assert item is not None and item.value["content"] == "Drinks green tea every morning"
        hits = await store.asearch(ns, query="what does the user drink?")
        assert [h.key for h in hits] == ["tea"]
        assert await store.alist_namespaces(prefix=("async", tag)) == [ns]
        await store.adelete(ns, "tea")
        assert await store.aget(ns, "tea") is None
        await store.aclose()
        store.close()

    asyncio.run(scenario())


def test_ttl_expires_the_item(store: TwinmemStore, tag: str) -> None:
    ns = ("ttl", tag)
    put_at = time.monotonic()
    # 3 s: a loaded machine answers the put and the first get well within it (0.6 s was not).
    store.put(ns, "short", {"content": "A one-time code for the door"}, ttl=0.05)
    store.put(ns, "long", {"content": "The door code changes monthly"}, ttl=60)
    assert store.get(ns, "short") is not None
    time.sleep(max(0.0, put_at + 3.5 - time.monotonic()))
    assert store.get(ns, "short") is None
    assert store.get(ns, "long") is not None


def test_memories_written_elsewhere_are_items(store: TwinmemStore, tag: str) -> None:
    with TwinmemClient(store.client.base_url, namespace=f"user:{tag}") as client:
        saved = client.save("The user prefers window seats", category="preference")
    hits = store.search(("user", tag), query="seat preference on flights")
    assert [(h.key, h.value["content"]) for h in hits] == [(saved.memory_id, "The user prefers window seats")]
    item = store.get(("user", tag), saved.memory_id)
    assert item is not None and item.value["category"] == "preference"


def test_items_never_replace_each_other_but_a_newer_memory_can(live: LiveServer, tag: str) -> None:
    store = TwinmemStore(base_url=live.url, category="preference")
    ns = ("user", tag)
    store.put(ns, "theme-1", {"content": "I like a blue theme"})
    store.put(ns, "theme-2", {"content": "I like a green theme"})  # another key: another subject
    assert store.get(ns, "theme-1") is not None and store.get(ns, "theme-2") is not None
    with TwinmemClient(live.url, namespace=to_namespace(ns)) as client:
        update = client.save("Switch my theme to black", category="preference")
    assert len(update.superseded) == 2
    assert store.get(ns, "theme-1") is None and store.get(ns, "theme-2") is None
    hits = store.search(ns, query="which theme does the user want?")
    assert [h.value["content"] for h in hits] == ["Switch my theme to black"]
    store.close()


def test_a_search_query_longer_than_the_service_takes_is_cut(store: TwinmemStore, tag: str) -> None:
    ns = ("tickets", tag)
    store.put(ns, "printer", {"content": "The printer on floor 3 jams often"})
    query = "What do we know about this ticket? " + "The printer on floor 3 is jammed again. " * 110
    assert len(query) > 4000
    assert [h.key for h in store.search(ns, query=query)] == ["printer"]


def test_a_value_whose_text_is_longer_than_a_memory_is_put_whole(store: TwinmemStore, tag: str) -> None:
    """A user's long message put as an item's content (the README's graph does that) failed
    the graph's run with the service's 422 on content; recall embeds the text's start, as it
    takes a long query's, and the item keeps its value whole."""
    ns = ("notes", tag)
    text = "Deploy steps: build the image, push it, roll the canary. " * 160
    assert len(text) > 8000
    store.put(ns, "runbook", {"content": text, "owner": "ops"})
    item = store.get(ns, "runbook")
    assert item is not None and item.value == {"content": text, "owner": "ops"}
    assert [hit.key for hit in store.search(ns, query="how do we deploy?")] == ["runbook"]
    store.put(ns, "runbook", {"content": text + " Then watch the dashboards.", "owner": "ops"})
    updated = store.get(ns, "runbook")
    assert updated is not None and updated.value["content"].endswith("Then watch the dashboards.")


def test_async_calls_use_the_given_clients_token(
    secured: LiveServer, tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TWINMEM_TOKEN", raising=False)
    ns = ("user", tag)
    with_client = TwinmemStore(client=TwinmemClient(secured.url, token=ROOT_TOKEN, timeout=7.0))
    with_aclient = TwinmemStore(aclient=AsyncTwinmemClient(secured.url, token=ROOT_TOKEN))
    assert with_client.aclient.timeout == 7.0
    with_client.put(ns, "drink", {"content": "Drinks green tea"})

    async def scenario() -> None:
        item = await with_client.aget(ns, "drink")  # before: 401, the async client had no token
        assert item is not None and item.value["content"] == "Drinks green tea"
        await with_client.aclose()
        await with_aclient.aclose()

    asyncio.run(scenario())
    item = with_aclient.get(ns, "drink")  # and the other way round
    assert item is not None and item.value["content"] == "Drinks green tea"
    with_client.close()
    with_aclient.close()


def test_one_store_serves_several_event_loops(store: TwinmemStore, tag: str) -> None:
    ns = ("loops", tag)
    store.put(ns, "tea", {"content": "Drinks green tea every morning"})
    for _ in range(2):  # before: the second asyncio.run raised RuntimeError "Event loop is closed"
        item = asyncio.run(store.aget(ns, "tea"))
        assert item is not None and item.value["content"] == "Drinks green tea every morning"
    asyncio.run(store.aclose())


def test_putting_back_an_item_written_elsewhere_writes_a_new_version_of_it(store: TwinmemStore, tag: str) -> None:
    with TwinmemClient(store.client.base_url, namespace=f"user:{tag}") as client:
        saved = client.save("The user is allergic to peanuts", category="fact", metadata={"via": "autogen"})
        (item,) = store.search(("user", tag))
        assert item.key == saved.memory_id
        store.put(("user", tag), item.key, {**item.value, "reviewed": True})
        (again,) = store.search(("user", tag))  # before: two items with that key, the original still active
        assert (again.key, again.value["reviewed"]) == (saved.memory_id, True)
        (memory,) = client.list(status=["active", "superseded"]).memories
        assert (memory.memory_id, memory.version, memory.key) == (saved.memory_id, 2, None)
        assert memory.metadata["via"] == "autogen" and memory.content == "The user is allergic to peanuts"


def test_a_write_only_token_puts_items(secured: LiveServer, tag: str) -> None:
    with TwinmemClient(secured.url, token=ROOT_TOKEN) as admin:
        dropper = admin.create_token(f"dropper-{tag}", [f"drop:{tag}:w"])["token"]
        store = TwinmemStore(base_url=secured.url, token=dropper)
        ns = ("drop", tag)
        store.put(ns, "report-1", {"content": "Nightly backup finished"})  # before: 403 from the lookup
        store.put(ns, "report-1", {"content": "Nightly backup finished in 12 minutes"})
        store.put(ns, "0190c2a4-0000-7000-8000-000000000000", {"content": "A key shaped like a memory id"})
        assert store.get(ns, "report-1") is None  # it may not read, not even what it wrote
        (memory,) = admin.by_key("report-1", namespace=f"drop:{tag}")  # the second superseded the first
        assert memory.content == "Nightly backup finished in 12 minutes"
        with pytest.raises(PermissionDenied, match="cannot find it"):
            store.delete(ns, "report-1")  # never a silent no-op
        store.close()


def test_a_write_only_token_may_not_put_over_a_public_memory(secured: LiveServer, tag: str) -> None:
    with TwinmemClient(secured.url, token=ROOT_TOKEN, namespace=f"drop:{tag}") as admin:
        dropper = admin.create_token(f"dropper-{tag}", [f"drop:{tag}:w"])["token"]
        notice = admin.save("Backups run at 02:00", key="schedule", visibility="public")
        store = TwinmemStore(base_url=secured.url, token=dropper)
        with pytest.raises(PermissionDenied, match=r"cannot put 'schedule'.*public"):  # before: NotFound, 404
            store.put(("drop", tag), "schedule", {"content": "Backups run at 03:00"})
        assert [m.memory_id for m in admin.by_key("schedule")] == [notice.memory_id]  # unchanged
        assert admin.get(notice.memory_id).content == "Backups run at 02:00"
        store.close()


def test_search_without_a_query_is_newest_first_across_namespaces(store: TwinmemStore, tag: str) -> None:
    for ns, key in [(("feed", tag, "a"), "1"), (("feed", tag, "b"), "2"), (("feed", tag, "a"), "3")]:
        store.put(ns, key, {"content": f"entry {key}"})
    assert [h.key for h in store.search(("feed", tag))] == ["3", "2", "1"]  # before: namespace by namespace
    assert [h.key for h in store.search(("feed", tag), limit=2)] == ["3", "2"]
    assert [h.key for h in store.search(("feed", tag), limit=1, offset=1)] == ["2"]


class CountingTransport(httpx.HTTPTransport):
    """A real transport that keeps the query of each listing it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.listings: list[dict[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/memories":
            self.listings.append(dict(request.url.params))
        return super().handle_request(request)


def test_listing_asks_for_no_more_than_the_answer_needs(live: LiveServer, tag: str) -> None:
    transport = CountingTransport()
    store = TwinmemStore(TwinmemClient(live.url, transport=transport), conflicts="off")
    for n in range(6):
        store.put((tag, "team", f"member{n}"), "note", {"content": f"note {n}"})
        store.put((tag, "team", f"member{n}"), "more", {"content": f"more {n}"})
    transport.listings.clear()
    assert [h.key for h in store.search((tag,), limit=1)] == ["more"]
    assert [m["limit"] for m in transport.listings] == ["1"] * 6  # before: six of 500 each
    transport.listings.clear()
    assert [h.value["content"] for h in store.search((tag,), limit=2, offset=1)] == ["note 5", "more 4"]
    assert {m["limit"] for m in transport.listings} == {"3"}
    transport.listings.clear()
    assert store.list_namespaces(prefix=(tag,), max_depth=2) == [(tag, "team")]
    assert len(transport.listings) == 1  # before: one per namespace, six
    transport.listings.clear()
    assert store.list_namespaces(prefix=(tag,), limit=2) == [(tag, "team", "member0"), (tag, "team", "member1")]
    assert len(transport.listings) == 2
    store.close()


def test_a_namespace_whose_items_are_all_deleted_is_no_longer_listed(store: TwinmemStore, tag: str) -> None:
    # As LangGraph's SQLite and Postgres stores, which list the namespaces of the rows there
    # are (InMemoryStore keeps an emptied namespace's entry, and lists it).
    store.put((tag, "kept"), "k", {"content": "stays"})
    store.put((tag, "emptied"), "k", {"content": "goes"})
    store.delete((tag, "emptied"), "k")
    assert store.list_namespaces(prefix=(tag,)) == [(tag, "kept")]  # before: the emptied one too


def test_a_value_holding_times_is_kept_as_json(store: TwinmemStore, tag: str) -> None:
    ns = ("times", tag)
    when = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    ticket = uuid.UUID("0190c2a4-0000-7000-8000-000000000000")
    store.put(ns, "meeting", {"content": "Standup moved", "at": when, "day": when.date(), "ticket": ticket})
    item = store.get(ns, "meeting")  # before: TypeError from the JSON encoder
    assert item is not None
    assert item.value == {
        "content": "Standup moved",
        "at": "2026-01-05T09:30:00+00:00",
        "day": "2026-01-05",
        "ticket": str(ticket),
    }
    with pytest.raises(TypeError, match="'odd' holds a object"):
        store.put(ns, "odd", {"content": "x", "thing": object()})


def test_a_filtered_listing_reads_whole_pages_and_a_blank_query_lists(live: LiveServer, tag: str) -> None:
    transport = CountingTransport()
    store = TwinmemStore(TwinmemClient(live.url, transport=transport), conflicts="off")
    for n in range(5):
        store.put((tag,), f"k{n}", {"content": f"entry {n}", "kind": "y" if n == 1 else "x"})
    transport.listings.clear()
    assert [h.key for h in store.search((tag,), filter={"kind": "y"}, limit=1)] == ["k1"]
    assert [m["limit"] for m in transport.listings] == [str(PAGE)]  # a filter passes few: not one memory a page
    assert [h.key for h in store.search((tag,), query=" \u200b ", limit=2)] == ["k4", "k3"]  # blank: the newest
    store.close()
