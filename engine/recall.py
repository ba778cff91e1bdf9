"""The recall path, answered from the fast network; the store is read once, for the hits.

A recall is a frozen ``RecallQuery``. Under the fast network's read hold:

1. semantic candidates: HNSW neighbours, kept where the caller's sight and the filter
   let them through (``FastNetwork.passes``, vectorised). How many pass is first
   estimated on a sample of the namespaces' rows (``_passing_estimate``), and the
   search planned from it (``_plan_search``): at most ``EXACT_DIRECT`` (a small
   namespace, a narrow filter) and the filtered set is scanned exactly at once;
   otherwise one plain search asks for at least ``pool``, or as many as that share says
   are needed for ``top_k`` to pass (``_enough``), up to ``[recall]
   max_widened_candidates``. Where that would be wider, or its neighbours hold too few
   that pass, the filtered set is searched in HNSW keeping only what passes
   (``VectorIndex.search_among``, priced by the share seen among those neighbours), or
   scanned where that is estimated to cost less; where none passed, one search as wide
   as allowed comes first when it costs less than the scan (``_after_short_search``).
   A "how" query ranks twice, the second time narrowed to procedures (``_first_of``):
   where too few of the whole ranking's search neighbours are procedures for the
   narrowed search planned to find ``top_k``, that search is skipped, as if it had come
   back short. A query narrowed to one category whose plan ended in the filtered search
   or the scan, over more than ``EXACT_DIRECT`` rows, has that category's own HNSW index
   built in the background (engine/category_indexes.py); once it is there, such a query
   searches it first, where that is priced no higher than the plan
   (``_category_search``), and goes on with the plan only where its neighbours held
   fewer than ``top_k`` that pass. A query with a focus (the prompt context's latest
   message: ``RecallQuery.focus``) searches the focus's vector the same way; its
   neighbours join, and every candidate's cosine becomes the weighted mean of its
   cosines to the two (``[fusion] focus``), here and for what the other channels add
   (not for the legacy index's candidates during a model change: the focus has no
   vector of the previous model, so theirs stay their cosine to the query);
   A query with an other phrasing (``RecallQuery.phrasing``: "where does the user live?"
   also read as "where do I live?", engine/persons.py) has no search of its own: every
   candidate's cosine, here and for what the other channels add, is the larger of its
   cosines to the query and to that phrasing (not the legacy index's candidates, as for
   the focus);
2. during a model change, the legacy index's neighbours likewise;
3. the lexical channel: BM25 per namespace (``FastNetwork.lexical``), its top
   ``pool`` among what passes join, every candidate scored relative to the best;
4. the graph channel: entity postings of the entities the query names (graph 1) and
   of those the strongest candidates mention (``scoring.GRAPH_NEIGHBOUR``), bounded;
5. the context channel (``[fusion] context`` above 0): the memories linked ``NEXT``
   (``engine.episodes``), either way, to one of the ``CONTEXT_SEEDS`` strongest
   candidates by the other signals join with the seed's score relative to the best;
6. fusion, vectorised over the candidates (the same sum as ``scoring.fuse``), with
   the semantic signal scaled over the candidates' cosines (``scoring.semantic_scale``,
   taken before the context channel), each cosine read less ``[fusion] centring``
   times how typical of its namespace the memory is (``FastNetwork.typicality``:
   chatter near the middle of everything is every query's neighbour), and the time
   signal (``[fusion] time``) when the query names a time (``TimeWindow``s). A
   query's times are needed here, after the channels above and before the context
   channel (whose seeds are ranked by the fused score): reading them is begun before
   (``TimeExpressions.begin``; ``MemoryService.recall`` begins it before it embeds the
   query), so that a worker process reads them while the channels run
   (engine/adapters/time_worker.py; where its answer is not in ``ANSWER_WAIT_S`` after
   the channels, the recall lets go of the network, waits for it, and runs the channels
   again); read in this thread they are read here, after the channels, because a parse
   leaves the CPU's caches cold for what runs after it.

Then, in rank order, the top ``top_k`` ids are read from the store in one
``get_many_and_seq``, which applies the caller's scope and the filter again (defence
in depth) and brings the store's newest change seq with the records: where the
ranking was made without a change up to it (another process wrote since the network
last caught up), the recall catches up and ranks again, once; so no store read comes before the ranking,
and a recall is one round trip to a server store. The read guard drops what the
current rules refuse (its findings kept per memory in the fast network), and
``scoring.fuse`` ranks and explains the records as read. Only when the store or the
guard turns hits away is the next slice of the ranking read (``get_many``).
Contradiction flags come from the fast network's links, each kept only when the
caller sees its other end.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from engine import guard as guards
from engine import scoring
from engine.config import Config, FusionWeights
from engine.conflicts import CONTRADICTS
from engine.episodes import NEXT
from engine.fast_network import ROUGH_MIN_ROWS, FastNetwork, Floats, Rows
from engine.index_keeper import IndexKeeper
from engine.ports import Embedder, Matrix, Store, TimeExpressions, TimesReading, Vector
from engine.records import Memory, MemoryFilter, Scope, Status, TimesRead, TimeWindow

# The graph channel's bounds.
GRAPH_SEEDS = 5
GRAPH_KEYS = 12
GRAPH_PER_ENTITY = 20
# The context channel's seeds: the strongest candidates whose NEXT neighbours join.
CONTEXT_SEEDS = 5

# The namespaces a recall looks into holding at most this many memories are scanned
# exactly instead of searched: one small matrix product beats HNSW over every namespace.
EXACT_DIRECT = 2048
# Where a plain search's neighbours hold too few that pass the filter, the semantic
# channel either scans what passes or searches HNSW keeping only that
# (``VectorIndex.search_among``), whichever is estimated to cost less. Measured by
# benchmarks/plan_costs.py at 100k memories of 512 dimensions (USE) on two cores: both
# mask sight and filter over the rows of the namespaces looked into, about
# MASK_US_PER_ROW a row; the scan then takes about SCAN_US_PER_ROW a passing row (float16
# vectors widened by numpy, one product), or ROUGH_SCAN_US_PER_ROW where the network has
# rough cosines (``RoughCosines``: torch's half-precision product on one thread, the kept
# rows computed again exactly); the filtered search about LOOKUP_US_PER_ROW a passing
# row (its handle, kept by ``FastNetwork.handles``, gathered and masked), and a plain
# search's time (below) plus FILTERED_US divided by the share of the index that passes
# (it walks past the rest: 4 ms at 30%, 7 ms at 8%, 30 ms at 1%). A plain search of k
# neighbours takes about SEARCH_US + SEARCH_US_PER_NEIGHBOUR × k (about 0.5 ms for 100,
# 6.5 ms for 2,500): it is made first only where it costs less than going to one of those
# at once.
MASK_US_PER_ROW = 0.012
SCAN_US_PER_ROW = 0.9
ROUGH_SCAN_US_PER_ROW = 0.35
LOOKUP_US_PER_ROW = 0.05
FILTERED_US = 260.0
SEARCH_US = 200.0
SEARCH_US_PER_NEIGHBOUR = 2.5
# How many rows of the namespaces looked into a semantic search samples to estimate how
# many pass the caller's sight and filter (about 40 µs).
PASSING_SAMPLE = 1024
# The lexical channel checks sight and filter on its LEXICAL_LOOK × pool best-scored
# rows first, and on every matching row only when too few of those pass.
LEXICAL_LOOK = 4
# How long a recall, holding the network still once its channels have run, waits for the
# times its query names to come from the worker reading them (usually they are in); past
# that it lets go, waits, and runs the channels again (engine/adapters/time_worker.py).
ANSWER_WAIT_S = 0.005

IsBlocked = Callable[[Memory], bool]


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """One recall, decided before any candidate is looked at."""

    text: str
    vector: Vector
    sight: Scope  # what the caller sees of the namespaces it named
    flt: MemoryFilter
    top_k: int
    pool: int  # candidates each channel contributes
    now: datetime
    terms: tuple[str, ...]  # engine.text.terms of the query
    entity_keys: frozenset[str]  # keys of the entities the query names
    # The times the query names (engine/adapters/time_expressions.py). None: not read yet;
    # the recaller takes them from ``reading`` (or begins reading them itself) and waits for
    # them once the candidate channels have run (``Recaller._ranking``).
    windows: tuple[TimeWindow, ...] | None = ()
    # Their reading, begun (``Recaller.begin_windows``), where ``windows`` is None.
    reading: TimesReading | None = None
    # Whether the model reads the query (``ReadsText``): when not, its vector says nothing,
    # and the semantic signal gets weight 0 (its neighbours still fill the candidates, so
    # top_k is filled, ranked by the other signals).
    read_by_model: bool = True
    # A part of the query to weigh more (the prompt context's latest message), embedded,
    # and its weight beside the whole query's vector (``[fusion] focus``).
    focus: Vector | None = None
    focus_weight: float = 0.0
    # The query in the other grammatical person (engine/persons.py), embedded: each
    # candidate's cosine to the query is the larger of its cosines to the two. Likewise
    # the focus and ``focus_phrasing``.
    phrasing: Vector | None = None
    focus_phrasing: Vector | None = None


@dataclass(frozen=True, slots=True)
class RecallResult:
    hits: list[scoring.Hit]
    candidates: int
    exact_scan: bool
    # For each hit with CONTRADICTS links: the ids of the memories it clashes with.
    contradicts: dict[str, list[str]] = field(default_factory=dict)
    windows: tuple[TimeWindow, ...] = ()  # the times the query named, as they were read
    read_by_model: bool = True  # False: ranked without the semantic signal (RecallQuery)
    # The query in the other person (engine/persons.py), where it was read that way too:
    # embedded where the model reads the query, its words searched where it names the user.
    phrasing: str | None = None


@dataclass(slots=True)
class _Pool:
    """Candidate rows and their signals, filled channel by channel."""

    cosine: dict[int, float] = field(default_factory=dict)
    lexical: dict[int, float] = field(default_factory=dict)
    graph: dict[int, float] = field(default_factory=dict)
    context: dict[int, float] = field(default_factory=dict)
    next_to: dict[int, int] = field(default_factory=dict)  # row -> the seed its context came from
    exact: bool = False
    # The plain HNSW search the semantic channel made first, if any: how many neighbours it
    # asked for, and the rows among them that passed (what a narrower ranking of the same
    # vector plans from: ``_first_of``).
    searched: tuple[int, Rows] | None = None
    # Cosines to the semantic signal (``scoring.semantic_scale``), set once the semantic,
    # lexical and graph channels are in (before the context channel ranks its seeds).
    scale: scoring.SemanticScale = scoring.UNSCALED
    # Each row's typicality (``FastNetwork.typicality``), taken once where ``[fusion]
    # centring`` is above 0, as the scores read it (``Recaller._read_cosines``).
    typicality: dict[int, float] = field(default_factory=dict)

    def rows(self) -> list[int]:
        return list(self.cosine)


@dataclass(frozen=True, slots=True)
class Ranking:
    """The candidates of one recall, best first, before the store confirms them."""

    rows: list[int]
    pool: _Pool
    names: Sequence[str]  # the network's memory id of each row (rows are never reused)
    query: RecallQuery  # what was ranked, its windows read
    current_to: int  # the change seq the index and the network had both applied when it began

    def first_ids(self, count: int) -> list[str]:
        """The memory ids of the best ``count`` rows."""
        return [self.names[row] for row in self.rows[:count]]


class Recaller:
    """Runs ``RecallQuery``s over the keeper's fast network, index and the store."""

    def __init__(
        self,
        config: Config,
        store: Store,
        keeper: IndexKeeper,
        embedder: Embedder,
        is_blocked: IsBlocked,
        times: TimeExpressions | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._keeper = keeper
        self._embedder = embedder
        self._is_blocked = is_blocked  # the blocked-sources hook of the read guard
        self._times = times  # reads a query's windows where it leaves them unread (None), for the time signal

    def recall(self, query: RecallQuery, *, first_category: str | None = None) -> RecallResult:
        """``first_category``: where ``query``'s namespaces hold a memory of it, the
        query's best of that category come first, then its other hits ("how do I …":
        procedures first). Both rankings are the fast network's, and the store is read
        once for the two.

        The network is not checked against the store before it ranks: the read of the
        hits brings the store's newest change seq with it (``Store.get_many_and_seq``,
        one round trip to a server), and only where the ranking was made without a
        change up to that seq (another process wrote) does the recall catch up and rank
        again, once."""
        keeper = self._keeper
        for attempt in range(2):
            net = keeper.network
            ranking = self._ranking(net, query)
            query = ranking.query  # with its windows read: a second ranking takes them as read
            ahead = None
            if first_category is not None and net.holds_category(query.sight.namespaces, first_category):
                ahead = self._narrowed(net, ranking, first_category)
            # The top of both rankings in one read, under the wider filter; the narrower
            # one is checked again on what comes back (the store checked everything else).
            wanted = list(
                dict.fromkeys([*(ahead.first_ids(query.top_k) if ahead else ()), *ranking.first_ids(query.top_k)])
            )
            memories, seq = self._store.get_many_and_seq(query.sight, wanted, query.flt, query.now)
            # Against what the network held when it ranked, not now: another thread may
            # have caught it up since, after this ranking was made without the change.
            if attempt or seq <= ranking.current_to:
                break
            keeper.catch_up()
        read = {memory.memory_id: memory for memory in memories}
        if ahead is None:
            hits = self._final(query, ranking, read, set(wanted))
        else:
            hits = self._first_of(query, ranking, ahead, read, set(wanted))
        net = keeper.network
        with net.reading():
            asked = MemoryFilter(statuses=query.flt.statuses, include_expired=query.flt.include_expired)
            linked = self._contradicting(net, query, asked, hits)
        flagged = self._contradictions(net, query, asked, linked, hits)
        windows = query.windows or ()
        return RecallResult(hits, len(ranking.rows), ranking.pool.exact, flagged, windows, query.read_by_model)

    def _narrowed(self, net: FastNetwork, ranking: Ranking, category: str) -> Ranking:
        """``ranking``'s query ranked again, narrowed to ``category``."""
        query = ranking.query
        if query.flt.categories:
            raise ValueError("a query with a category filter has no category to put first")
        only = replace(query, flt=replace(query.flt, categories=(category,)))
        # The narrower ranking's search plan starts from what the wider one's search saw.
        return self._ranking(net, only, seen=ranking.pool.searched)

    def _first_of(
        self, query: RecallQuery, ranking: Ranking, ahead: Ranking, read: dict[str, Memory], asked: set[str]
    ) -> list[scoring.Hit]:
        """The hits of ``ahead`` (``query`` narrowed to a category), then ``query``'s own
        others, to ``top_k``, from what one read of the top of both returned (``read``, of
        the ids ``asked``)."""
        category = ahead.query.flt.categories[0]
        first = self._final(ahead.query, ahead, {mid: m for mid, m in read.items() if m.category == category}, asked)
        taken = {hit.memory.memory_id for hit in first}
        rest = [hit for hit in self._final(query, ranking, read, asked) if hit.memory.memory_id not in taken]
        return (first + rest)[: query.top_k]

    def rank(self, query: RecallQuery) -> Ranking:
        """Every candidate, best first, from the fast network alone, made current first
        (one store read: the change seq): what the final read then confirms."""
        keeper = self._keeper
        keeper.ensure_current()
        return self._ranking(keeper.network, query)

    def _ranking(self, net: FastNetwork, query: RecallQuery, *, seen: tuple[int, Rows] | None = None) -> Ranking:
        """``rank`` on the network as it is (the caller made it current). ``seen``: a plain
        search of the same vector, under a wider filter (``_semantic``)."""
        reading = None if query.windows is not None else query.reading or self.begin_windows(query.text, query.now)
        try:
            while True:
                with net.reading():
                    current_to = min(self._keeper.index.applied_seq, net.applied_seq)
                    pool = self._candidates(net, query, seen)
                    if reading is None or reading.ready(ANSWER_WAIT_S):
                        if reading is not None:
                            query, reading = replace(query, windows=reading(), reading=None), None
                        return self._rank_pool(net, query, pool, current_to)
                # Not in yet: waited for without holding the network still (every recall
                # and change waits for that hold), then the channels run again.
                query, reading = replace(query, windows=reading(), reading=None), None
        finally:  # a channel failed: the answer is taken all the same, so the reader is free
            if reading is not None:
                reading()

    def _rank_pool(self, net: FastNetwork, query: RecallQuery, pool: _Pool, current_to: int) -> Ranking:
        """The ranking of the candidates ``pool`` holds (the caller holds the network still)."""
        cosines = self._read_cosines(net, query, pool, np.asarray(pool.rows(), dtype=np.int64))
        pool.scale = scoring.semantic_scale(cosines, self._embedder.similarity_floor)
        self._context(net, query, pool)
        rows = np.asarray(pool.rows(), dtype=np.int64)
        order = self._ranked(net, query, pool, rows)
        return Ranking(rows[order].tolist(), pool, net.ids, query, current_to)

    def _candidates(self, net: FastNetwork, query: RecallQuery, seen: tuple[int, Rows] | None) -> _Pool:
        pool = self._semantic(net, query, seen=seen)
        if query.phrasing is not None and pool.cosine:
            # The query's neighbours, read again as the larger of their cosines to it and
            # to its other phrasing (no search of its own: what it would add, the lexical
            # channel finds by the same words).
            rows = np.fromiter(pool.cosine, dtype=np.int64, count=len(pool.cosine))
            written = np.fromiter(pool.cosine.values(), np.float64, len(rows))
            larger = _or_phrased(net, written, query.phrasing, rows)
            pool.cosine = dict(zip(rows.tolist(), larger.tolist(), strict=True))
        if query.focus is not None:
            self._focused(net, query, pool)
        self._legacy(net, query, pool)
        self._lexical(net, query, pool)
        self._graph(net, query, pool)
        return pool

    def begin_windows(self, text: str, now: datetime) -> TimesReading:
        """Begin reading the times ``text`` names (``TimeExpressions.begin``); the answer
        is taken once the candidates are found. Read in this thread, they are read only
        then: the parsers (dateparser above all) leave the CPU's caches cold for what runs
        after them (benchmarks/RESULTS.md, "A time-naming question costs more than its
        parse"). Only the fused scores read the windows: none are read without a time
        signal (``[fusion] time`` 0, or no parser)."""
        if self._times is None or self._config.fusion.time <= 0:
            return TimesRead()  # no time signal: none read
        return self._times.begin(text, now)

    def nearest(
        self,
        net: FastNetwork,
        vector: Vector,
        sight: Scope,
        flt: MemoryFilter,
        now: datetime,
        *,
        pool: int,
        want: int = 1,
    ) -> tuple[Rows, Floats]:
        """The semantic channel alone, for the write path's dedup and conflict candidates
        and consolidation's merge partners: the ``pool`` (or, widened, more) rows most
        similar to ``vector`` in ``sight`` that pass ``flt``, with their cosines (HNSW's,
        or float16 ones from an exact scan), the search planned for ``want`` of them to
        pass (as a recall plans for its ``top_k``). No store read; the caller holds
        ``net.reading()`` and the index is current."""
        found = self._semantic(net, RecallQuery("", vector, sight, flt, want, pool, now, (), frozenset()))
        count = len(found.cosine)
        rows = np.fromiter(found.cosine, dtype=np.int64, count=count)
        return rows, np.fromiter(found.cosine.values(), dtype=np.float64, count=count)

    def nearest_many(
        self,
        net: FastNetwork,
        vectors: Matrix,
        sight: Scope,
        flt: MemoryFilter,
        now: datetime,
        *,
        pool: int,
        want: int = 1,
    ) -> list[tuple[Rows, Floats]]:
        """``nearest`` for each row of ``vectors``, the same answers, with the first HNSW
        search of every row made in one call (``VectorIndex.search_many``); a row whose
        neighbours hold fewer than ``want`` that pass the filter widens alone, as
        ``nearest`` would."""
        size = len(self._keeper.index)
        query = RecallQuery("", vectors[0], sight, flt, want, pool, now, (), frozenset())
        plan = self._plan(net, query, net.rows_in(sight.namespaces), size)
        k = plan.k
        if len(vectors) < 2 or plan.how is not _How.SEARCH or k <= 0:
            return [self.nearest(net, vector, sight, flt, now, pool=pool, want=want) for vector in vectors]
        found: list[tuple[Rows, Floats]] = []
        passing = self._passing_each(net, query, self._keeper.index.search_many(vectors, k))
        for vector, (rows, cosines) in zip(vectors, passing, strict=True):
            if len(rows) >= want or k >= size:
                found.append((rows, cosines))  # where ``_semantic``'s first search stops
            else:  # searched, and too few passed: as ``nearest`` goes on from there
                found.append(self.nearest(net, vector, sight, flt, now, pool=pool, want=want))
        return found

    # --- channels --------------------------------------------------------------------

    def _semantic(self, net: FastNetwork, query: RecallQuery, *, seen: tuple[int, Rows] | None = None) -> _Pool:
        """``seen``: (k, rows) of a plain search of ``query.vector`` for k neighbours, of
        which ``rows`` passed a filter wider than ``query``'s (a "how" query's whole
        ranking, before the one narrowed to procedures). Where the share of those that pass
        ``query``'s filter says the planned search would find fewer than ``top_k``, that
        search is not made: what follows a short search follows at once
        (``_after_short_search``)."""
        index = self._keeper.index
        size = len(index)
        pool = _Pool()
        # A category filter narrows the rows looked into first (kept lists, no mask).
        inside = net.rows_in(query.sight.namespaces, query.flt.categories)
        plan = self._plan(net, query, inside, size)
        found = self._in_category_index(net, query, plan)
        if found is not None:
            pool.cosine = dict(zip(found[0].tolist(), found[1].tolist(), strict=True))
            return pool
        how = plan.how
        k = plan.k
        if how is _How.SEARCH and seen is not None:
            searched, rows = seen
            passed = int(net.passes(query.sight, query.flt, query.now, rows).sum())
            if passed * k < query.top_k * searched and searched < size:
                how, k = _after_short_search(plan, searched, passed)
        while how is _How.SEARCH:
            handles, similarities = index.search_handles(query.vector, k)
            rows, cosines = self._passing_rows(net, query, net.rows_of_handles(index, handles), similarities)
            if pool.searched is None:
                pool.searched = (k, rows)
            if len(rows) >= query.top_k or k >= size:
                break
            # The filter went against the query's neighbours: one wider search at most.
            how, k = _after_short_search(plan, k, len(rows))
        if how is _How.FILTERED:
            rows, cosines = self._filtered(net, query, inside)
        elif how is _How.SCAN:
            pool.exact = len(net.rows_in(query.sight.namespaces)) > EXACT_DIRECT
            rows, cosines = net.nearest(query.vector, query.sight, query.flt, query.now, query.pool)
        category = _narrowed_to(query, plan)
        if how is not _How.SEARCH and category is not None:
            net.ask_category_index(category)  # the next such recall searches it
        pool.cosine = dict(zip(rows.tolist(), cosines.tolist(), strict=True))
        return pool

    def _focused(self, net: FastNetwork, query: RecallQuery, pool: _Pool) -> None:
        """The focus's own nearest memories join the candidates, and every candidate's
        cosine becomes its similarity to query and focus together (``_similarities``)."""
        assert query.focus is not None
        near = self._semantic(net, replace(query, vector=query.focus, focus=None, phrasing=None, focus_phrasing=None))
        rows = np.asarray(list(dict.fromkeys([*pool.cosine, *near.cosine])), dtype=np.int64)

        def cosines(found: dict[int, float], computed: Callable[[Rows], Floats]) -> Floats:
            """The cosines a search found, the rest computed (rows the other search found)."""
            known = np.asarray([found.get(row, np.nan) for row in rows.tolist()], np.float64)
            lacking = np.flatnonzero(np.isnan(known))
            if len(lacking):
                known[lacking] = computed(rows[lacking])
            return known

        focus = query.focus
        whole = cosines(pool.cosine, lambda lacking: self._whole(net, query, lacking))
        focused = _or_phrased(
            net, cosines(near.cosine, lambda lacking: net.cosines(focus, lacking)), query.focus_phrasing, rows
        )
        blended = _blend(whole, focused, query.focus_weight)
        pool.cosine = dict(zip(rows.tolist(), blended.tolist(), strict=True))

    def _similarities(self, net: FastNetwork, query: RecallQuery, rows: Rows) -> Floats:
        """Each row's cosine to the query (``_whole``), blended with its cosine to the
        focus where the query has one."""
        cosines = self._whole(net, query, rows)
        if query.focus is None:
            return cosines
        focused = _or_phrased(net, net.cosines(query.focus, rows), query.focus_phrasing, rows)
        return _blend(cosines, focused, query.focus_weight)

    @staticmethod
    def _whole(net: FastNetwork, query: RecallQuery, rows: Rows) -> Floats:
        """Each row's cosine to the query: the larger of its cosines to the query and to
        its other phrasing, where it has one."""
        return _or_phrased(net, net.cosines(query.vector, rows), query.phrasing, rows)

    def _in_category_index(self, net: FastNetwork, query: RecallQuery, plan: _Plan) -> tuple[Rows, Floats] | None:
        """The semantic candidates of a query narrowed to one category, from that
        category's own index (``FastNetwork.category_index``), where it has one and a
        search of it is estimated to cost no more than the plan; None where it has none,
        or its neighbours held fewer than ``top_k`` that pass (the plan goes on). As with
        the plain search, the candidates are those of its neighbours that pass: the pool,
        where the namespaces looked into hold the category, or about twice ``top_k``
        where they hold a small share of it (the scan would have kept the pool)."""
        category = _narrowed_to(query, plan)
        index = None if category is None else net.category_index(category)
        if index is None:
            return None
        limit = min(self._config.recall.max_widened_candidates, len(index))
        k = _category_search(len(index), plan.passing, query.pool, query.top_k, limit, plan.cost_us)
        if k == 0:
            return None
        similar = index.search(query.vector, k)
        rows, cosines = self._passing(net, query, similar)
        if len(rows) < query.top_k and k < len(index):
            return None
        return rows, cosines

    def _plan(self, net: FastNetwork, query: RecallQuery, inside: Rows, size: int) -> _Plan:
        """How the semantic channel of ``query`` looks among ``inside`` (``_plan_search``)."""
        passing = len(inside)
        if passing > EXACT_DIRECT:
            passing = _passing_estimate(net, query, inside)
        limit = min(self._config.recall.max_widened_candidates, size)
        scan = _scan_cost(len(inside), passing, rough=net.scans_rough)
        return _plan_search(max(size, passing), passing, min(query.pool, size), query.top_k, limit, scan, len(inside))

    def _filtered(self, net: FastNetwork, query: RecallQuery, inside: Rows) -> tuple[Rows, Floats]:
        """The ``pool`` nearest of the rows of ``inside`` that pass, from one HNSW search
        that keeps only those (the whole set's mask is taken first, vectorised)."""
        allowed = inside[net.passes(query.sight, query.flt, query.now, inside)]
        index = self._keeper.index
        similar = index.search_among(query.vector, query.pool, net.handles(index, allowed))
        return self._passing(net, query, similar)

    def _passing(
        self, net: FastNetwork, query: RecallQuery, similar: Sequence[tuple[str, float]]
    ) -> tuple[Rows, Floats]:
        """The rows of a search's (id, similarity) pairs that the caller sees and the
        filter passes, with their similarities."""
        rows = net.live_rows([memory_id for memory_id, _ in similar])
        return self._passing_rows(net, query, rows, np.asarray([sim for _, sim in similar], np.float64))

    def _passing_rows(
        self, net: FastNetwork, query: RecallQuery, rows: Rows, similarities: Floats
    ) -> tuple[Rows, Floats]:
        """``_passing`` of a search's answer already turned into rows (NONE: none held)."""
        held = rows >= 0
        rows, similarities = rows[held], similarities[held]
        keep = net.passes(query.sight, query.flt, query.now, rows)
        return rows[keep], similarities[keep]

    def _passing_each(
        self, net: FastNetwork, query: RecallQuery, answers: Sequence[Sequence[tuple[str, float]]]
    ) -> list[tuple[Rows, Floats]]:
        """``_passing`` of each of ``answers`` (one search's (id, similarity) pairs per
        vector), with the rows and masks of all of them taken at once."""
        ids = [memory_id for similar in answers for memory_id, _ in similar]
        sims = np.fromiter((sim for similar in answers for _, sim in similar), dtype=np.float64, count=len(ids))
        rows = net.live_rows(ids)
        ok = rows >= 0
        ok[ok] = net.passes(query.sight, query.flt, query.now, rows[ok])
        sizes = np.fromiter(map(len, answers), dtype=np.int64, count=len(answers))
        ends = np.cumsum(sizes)
        starts = ends - sizes
        return [
            (rows[start:end][ok[start:end]], sims[start:end][ok[start:end]])
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True)
        ]

    def _legacy(self, net: FastNetwork, query: RecallQuery, pool: _Pool) -> None:
        vector = self._keeper.legacy_query(query.text)
        if vector is None:
            return
        found = self._keeper.legacy_similar(vector, query.pool)
        rows, cosines = self._passing(net, query, found)
        if len(rows) < query.pool and len(found) == query.pool:
            # The nearest of the whole legacy index were mostly other namespaces' (or failed
            # the filter), and more wait there: search again among those that pass, or a
            # memory not re-embedded yet is missing from its own namespace's recall.
            inside = net.rows_in(query.sight.namespaces, query.flt.categories)
            passing = inside[net.passes(query.sight, query.flt, query.now, inside)]
            found = self._keeper.legacy_similar(vector, query.pool, [net.ids[row] for row in passing.tolist()])
            rows, cosines = self._passing(net, query, found)
        for row, cosine in zip(rows.tolist(), cosines.tolist(), strict=True):
            pool.cosine.setdefault(row, cosine)

    def _lexical(self, net: FastNetwork, query: RecallQuery, pool: _Pool) -> None:
        rows, scores = self._best_passing(net, query)
        if not len(rows):
            return
        # Scores are shares of the query's ceiling (``FastNetwork.lexical``).
        best = max(float(scores.max()), self._config.fusion.lexical_reference)
        pool.lexical = {int(row): max(0.0, float(score) / best) for row, score in zip(rows, scores, strict=True)}
        self._join(net, query, pool, pool.lexical)

    def _best_passing(self, net: FastNetwork, query: RecallQuery) -> tuple[Rows, Floats]:
        """The ``pool`` best-scored lexical matches that the caller sees and the filter
        passes. The ``LEXICAL_LOOK`` × ``pool`` best are asked for first: when at least
        ``pool`` of them pass, no other match can outscore the ones kept, so the other
        matches (most of a large namespace, for a common word), though summed by the
        scorer, are never gathered, scaled or checked."""
        want = query.pool
        look = LEXICAL_LOOK * want
        namespaces = query.sight.namespaces
        rows, scores = net.lexical(namespaces, query.terms, top=look)
        if len(rows) == look:  # fewer would be every match
            keep = net.passes(query.sight, query.flt, query.now, rows)
            if int(keep.sum()) >= want:
                return scoring.best_of(rows[keep], scores[keep], want)
            rows, scores = net.lexical(namespaces, query.terms)
        keep = net.passes(query.sight, query.flt, query.now, rows)
        return scoring.best_of(rows[keep], scores[keep], want)

    def _graph(self, net: FastNetwork, query: RecallQuery, pool: _Pool) -> None:
        """One or two hops, bounded: memories that mention an entity the query names
        join with graph 1; those sharing an entity with one of the ``GRAPH_SEEDS``
        strongest candidates with ``GRAPH_NEIGHBOUR``; at most ``GRAPH_KEYS`` entity
        lookups of ``GRAPH_PER_ENTITY`` memories each."""
        seeds = heapq.nlargest(GRAPH_SEEDS, pool.cosine.items(), key=lambda item: item[1])
        holders: dict[str, set[int]] = {}  # entity key -> the seeds that mention it
        for row, _ in seeds:
            for key in net.entity_keys_of(row) - query.entity_keys:
                holders.setdefault(key, set()).add(row)
        lookups = [(key, scoring.GRAPH_QUERY_ENTITY) for key in sorted(query.entity_keys)]
        lookups += [(key, scoring.GRAPH_NEIGHBOUR) for key in sorted(holders)]
        graph: dict[int, float] = {}
        lookups = lookups[:GRAPH_KEYS]
        found = [net.by_entity(query.sight.namespaces, key) for key, _ in lookups]
        if not any(len(rows) for rows in found):
            return
        # Sight and filter checked once for every lookup's rows, then split back.
        every = np.concatenate(found)
        passing = np.split(
            net.passes(query.sight, query.flt, query.now, every), np.cumsum([len(r) for r in found])[:-1]
        )
        for (key, weight), rows, ok in zip(lookups, found, passing, strict=True):
            for row in net.newest(rows[ok], GRAPH_PER_ENTITY).tolist():
                if holders.get(key) == {row}:
                    continue  # a seed is not its own neighbour
                graph[row] = max(weight, graph.get(row, 0.0))
        if graph:
            pool.graph = graph
            self._join(net, query, pool, graph)

    def _context(self, net: FastNetwork, query: RecallQuery, pool: _Pool) -> None:
        """One hop along ``NEXT``, either way, from the ``CONTEXT_SEEDS`` strongest
        candidates by every other signal: each neighbour the caller sees and the filter
        passes gets the seed's score relative to the best (the strongest seed's, where
        several lend it), bounded by 1 and weighted by ``[fusion] context``."""
        if self._config.fusion.context <= 0 or not pool.cosine:
            return
        rows = np.asarray(pool.rows(), dtype=np.int64)
        if not net.any_linked(rows):
            return  # no seed can have a neighbour: no need to score the candidates for seeds
        score = self._scores(net, query, pool, rows, context=False)
        take = min(CONTEXT_SEEDS, len(rows))
        top = np.argpartition(-score, take - 1)[:take]
        best = float(score[top].max())
        if best <= 0.0:
            return
        seeds, others = net.neighbours(rows[top], NEXT)
        if not len(others):
            return
        keep = net.passes(query.sight, query.flt, query.now, others)
        strength = dict(zip(rows[top].tolist(), (score[top] / best).tolist(), strict=True))
        for seed, other in zip(seeds[keep].tolist(), others[keep].tolist(), strict=True):
            if strength[seed] > pool.context.get(other, 0.0):
                pool.context[other] = strength[seed]
                pool.next_to[other] = seed
        self._join(net, query, pool, pool.context)

    def _join(self, net: FastNetwork, query: RecallQuery, pool: _Pool, rows: dict[int, float]) -> None:
        """Rows another channel found join the candidates with their exact cosine
        (0 for a memory without a vector of the current model)."""
        extra = [row for row in rows if row not in pool.cosine]
        if extra:
            cosines = self._similarities(net, query, np.asarray(extra, dtype=np.int64))
            pool.cosine.update(zip(extra, cosines.tolist(), strict=True))

    # --- ranking and the one read -----------------------------------------------------

    def _ranked(self, net: FastNetwork, query: RecallQuery, pool: _Pool, rows: Rows) -> Rows:
        """Positions of ``rows`` by fused score, best first, ties by memory id (as ``scoring.fuse``)."""
        if not len(rows):
            return np.zeros(0, np.int64)
        score = self._scores(net, query, pool, rows, context=True)
        order = np.argsort(-score, kind="stable")
        ranked = score[order]
        tied = np.flatnonzero(ranked[1:] == ranked[:-1])
        if len(tied):  # ties: by memory id, looked up for the tied rows only
            names = [""] * len(rows)
            for n in order[np.union1d(tied, tied + 1)].tolist():
                names[n] = net.id_of(int(rows[n]))
            order = np.lexsort((np.asarray(names, dtype=np.str_), -score))
        return np.asarray(order, dtype=np.int64)

    def _scores(self, net: FastNetwork, query: RecallQuery, pool: _Pool, rows: Rows, *, context: bool) -> Floats:
        """The fused score of ``rows``, summed in ``scoring.fuse``'s order (so the two agree
        to the bit); without the context signal when ``context`` is false."""
        weights = self._weights(query)
        listed = rows.tolist()
        cosine = self._read_cosines(net, query, pool, rows)
        lexical = scoring.shaped(_column(pool.lexical, listed), weights.lexical_power)
        graph = _column(pool.graph, listed)
        semantic = scoring.shaped(pool.scale.values(cosine), weights.semantic_power)
        decay = net.decayed(rows, query.now, self._config.scoring)
        score: Floats = (
            weights.semantic * semantic + weights.lexical * lexical + weights.graph * graph + weights.decay * decay
        )
        if context:
            score = score + weights.context * _column(pool.context, listed)
        if query.windows:
            score = score + weights.time * scoring.time_fit(net.created_of(rows), query.windows)
        return score

    def _read_cosines(self, net: FastNetwork, query: RecallQuery, pool: _Pool, rows: Rows) -> Floats:
        """The cosines of ``rows`` as the semantic signal reads them (``scoring.read_cosines``):
        less ``[fusion] centring`` times their typicality, which is kept in ``pool`` (for
        the explanation of the hits)."""
        listed = rows.tolist()
        cosines = np.fromiter(map(pool.cosine.__getitem__, listed), np.float64, len(listed))
        centring = self._weights(query).centring
        if centring <= 0:
            return cosines
        known = pool.typicality
        missing = [row for row in listed if row not in known]
        if missing:  # each row's typicality taken once, so every reading of it agrees to the bit
            found = net.typicality(np.asarray(missing, dtype=np.int64))
            known.update(zip(missing, found.tolist(), strict=True))
        typicality = np.fromiter(map(known.__getitem__, listed), np.float64, len(listed))
        return scoring.read_cosines(cosines, typicality, centring)

    def _weights(self, query: RecallQuery) -> FusionWeights:
        weights = self._config.fusion
        return weights if query.read_by_model else replace(weights, semantic=0.0)

    def _final(
        self,
        query: RecallQuery,
        ranking: Ranking,
        read: dict[str, Memory] | None = None,
        asked: set[str] | None = None,
    ) -> list[scoring.Hit]:
        """Read the best ``top_k`` from the store (scope and filter applied again there),
        guard and explain them; read the next slice only if some were turned away.
        ``read``: what a read made already returned of the ids ``asked`` of it (those
        it lacks, the store refused), so only the others are read."""
        ranked, pool = ranking.rows, ranking.pool
        read, asked = dict(read or {}), set(asked or ())
        hits: list[scoring.Hit] = []
        start = 0
        while start < len(ranked) and len(hits) < query.top_k:
            want = query.top_k - len(hits)
            rows = ranked[start : start + want]
            chunk = [ranking.names[row] for row in rows]
            start += want
            unread = [memory_id for memory_id in chunk if memory_id not in asked]
            if unread:
                read.update((m.memory_id, m) for m in self._store.get_many(query.sight, unread, query.flt, query.now))
                asked.update(unread)
            candidates = [
                scoring.Candidate(
                    read[memory_id],
                    pool.cosine[row],
                    pool.lexical.get(row, 0.0),
                    pool.graph.get(row, 0.0),
                    pool.context.get(row, 0.0),
                    ranking.names[pool.next_to[row]] if row in pool.next_to else None,
                    pool.typicality.get(row, 0.0),
                )
                for memory_id, row in zip(chunk, rows, strict=True)
                if memory_id in read
            ]
            fused = scoring.fuse(
                candidates,
                now=query.now,
                weights=self._weights(query),
                scoring=self._config.scoring,
                scale=pool.scale,
                windows=query.windows or (),
            )
            hits += self._guarded(fused, want, dict(zip(chunk, rows, strict=True)))
        return hits

    def _guarded(self, hits: list[scoring.Hit], want: int, row_of: dict[str, int]) -> list[scoring.Hit]:
        """The read guard (``guard.check_read``), after fusion and before top_k, so top_k
        is still filled: the first ``want`` hits the current rules let through (``_readable``)."""
        net = self._keeper.network
        passed: list[scoring.Hit] = []
        for hit in hits:
            if self._readable(net, row_of[hit.memory.memory_id], hit.memory):
                passed.append(hit)
                if len(passed) == want:
                    break
        return passed

    def _readable(self, net: FastNetwork, row: int, memory: Memory) -> bool:
        """Whether the read guard lets ``memory`` (at ``row``) into recall. What the rules
        find in a text is kept in the fast network, so a memory's regexes run once."""
        findings = net.findings(row, memory.digest)
        if not findings:
            findings = guards.read_findings(memory.content)
            net.keep_findings(row, memory.digest, findings)
        return (
            guards.read_refusal(memory, findings, is_blocked=self._is_blocked, was_released=self._was_released) is None
        )

    def _was_released(self, memory: Memory) -> bool:
        """Whether ``memory``, active now, was quarantined in an earlier version with the
        content and metadata it has now: only a namespace admin releases one, and what an
        admin released is shown (the read guard
        asks this only of a memory that steers the agent, by its content or a procedure's step)."""
        if memory.version == 1:
            return False  # never changed, so never released: no history to read
        versions = self._store.versions(Scope.whole([memory.namespace]), memory.memory_id)
        held = [version.record for version in versions if version.record.status is Status.QUARANTINED]
        # The release covers the text and steps reviewed, not an edit made since.
        return bool(held) and (held[-1].content, held[-1].metadata) == (memory.content, memory.metadata)

    def _contradicting(
        self, net: FastNetwork, query: RecallQuery, asked: MemoryFilter, hits: Sequence[scoring.Hit]
    ) -> dict[str, dict[str, int]]:
        """For each hit with ``CONTRADICTS`` links, the memories at their other ends that the
        caller sees with a status the query asks for (``asked``; by default active: a move
        that a later one superseded no longer clashes with anything), oldest link first,
        each with its row."""
        linked: dict[str, dict[str, int]] = {}
        for hit in hits:
            row = net.row_of(hit.memory.memory_id)
            if row is None:
                continue
            links = sorted(net.links(row, CONTRADICTS), key=lambda link: link.created)
            others = np.asarray([link.dst if link.src == row else link.src for link in links], dtype=np.int64)
            if not len(others):
                continue
            kept = others[net.passes(query.sight, asked, query.now, others)]
            if len(kept):
                linked[hit.memory.memory_id] = {net.id_of(other): other for other in kept.tolist()}
        return linked

    def _contradictions(
        self,
        net: FastNetwork,
        query: RecallQuery,
        asked: MemoryFilter,
        linked: dict[str, dict[str, int]],
        hits: Sequence[scoring.Hit],
    ) -> dict[str, list[str]]:
        """``linked`` (``_contradicting``) less what the read guard leaves out of recall (a
        quarantined memory, one that reads as an injection): a hit names no memory that
        recall would not show the caller. The store is read only for the other ends that
        are no hits: a hit passed the query's filter and the read guard already."""
        shown = {hit.memory.memory_id for hit in hits}
        wanted = list(
            dict.fromkeys(memory_id for others in linked.values() for memory_id in others if memory_id not in shown)
        )
        if not wanted:
            return {hit: list(others) for hit, others in linked.items()}
        read = {memory.memory_id: memory for memory in self._store.get_many(query.sight, wanted, asked, query.now)}
        for others in linked.values():
            for memory_id, row in others.items():
                memory = read.get(memory_id)
                if memory is not None and memory_id not in shown and self._readable(net, row, memory):
                    shown.add(memory_id)
        flagged = {hit: [memory_id for memory_id in others if memory_id in shown] for hit, others in linked.items()}
        return {hit: others for hit, others in flagged.items() if others}


def _column(signal: dict[int, float], rows: list[int]) -> Floats:
    """A channel's signal for each of ``rows``, 0 where it gave none."""
    return np.fromiter(map(signal.get, rows, itertools.repeat(0.0)), np.float64, len(rows))


def _or_phrased(net: FastNetwork, cosines: Floats, phrasing: Vector | None, rows: Rows) -> Floats:
    """``cosines`` of ``rows`` to a text, each the larger of it and the row's cosine to
    that text's other phrasing, where it has one (``RecallQuery.phrasing``)."""
    if phrasing is None:
        return cosines
    larger: Floats = np.maximum(cosines, net.cosines(phrasing, rows))
    return larger


def _blend(whole: Floats, focus: Floats, weight: float) -> Floats:
    """Similarity to a query and its focus together: a weighted mean of the two cosines."""
    blended: Floats = (whole + weight * focus) / (1.0 + weight)
    return blended


def _passing_estimate(net: FastNetwork, query: RecallQuery, inside: Rows) -> int:
    """How many of ``inside`` the caller sees and the filter passes, from every
    ``len(inside) // PASSING_SAMPLE``-th row (rows are in the order they were written, so
    the sample spans every age); one in the sample stands for that many rows."""
    step = max(1, len(inside) // PASSING_SAMPLE)
    sample = inside[::step]
    passed = int(net.passes(query.sight, query.flt, query.now, sample).sum())
    return passed * len(inside) // len(sample)


class _How(enum.Enum):
    SCAN = "scan"  # the exact scan of what passes (``FastNetwork.nearest``)
    FILTERED = "filtered"  # one HNSW search that keeps only what passes (``VectorIndex.search_among``)
    SEARCH = "search"  # a plain HNSW search of ``k``


@dataclass(frozen=True, slots=True)
class _Plan:
    how: _How
    k: int = 0  # SEARCH: its size
    scan_us: float = 0.0  # SEARCH: what scanning what passes is estimated to cost
    pool: int = 0  # SEARCH: the pool a filtered search would ask for
    limit: int = 0  # SEARCH: the widest plain search
    mask_us: float = 0.0  # SEARCH: what masking the rows looked into costs a filtered search
    passing: int = 0  # about how many rows pass
    cost_us: float = 0.0  # what the plan is estimated to cost, if its first step finds enough


def _plan_search(size: int, passing: int, pool: int, want: int, limit: int, scan_us: float, masked: int) -> _Plan:
    """How the semantic channel finds ``want`` of about ``passing`` rows that pass, among
    ``masked`` rows of the namespaces looked into, in an index of ``size`` (every
    namespace's: a search walks them all); scanning what passes costs about ``scan_us``
    (``_scan_cost``):

    * SCAN where at most ``EXACT_DIRECT`` pass (a small namespace, a narrow filter):
      scanning those costs less than any search;
    * else one plain SEARCH of at least ``pool``, as many as the share that passes says
      are needed for ``want`` to pass (``_enough``), when that is at most ``limit`` and
      costs less than what would follow it;
    * where that search would be too wide or too dear, FILTERED, or SCAN where scanning
      what passes costs less (``_filtered_cost``); where its neighbours hold too few
      that pass, ``_after_short_search`` decides.
    """
    if passing <= EXACT_DIRECT:
        return _Plan(_How.SCAN, passing=passing, cost_us=scan_us)
    scan, filtered = scan_us, _filtered_cost(size, passing, pool, masked)
    first = max(pool, _enough(size, passing, want))
    if first <= limit and _search_cost(first) < min(scan, filtered):
        mask = MASK_US_PER_ROW * masked
        return _Plan(_How.SEARCH, first, scan, pool, limit, mask, passing, _search_cost(first))
    return _Plan(_How.FILTERED if filtered < scan else _How.SCAN, passing=passing, cost_us=min(scan, filtered))


def _narrowed_to(query: RecallQuery, plan: _Plan) -> str | None:
    """The one category ``query`` is narrowed to, where more than ``EXACT_DIRECT`` of its
    rows pass (a category's own index could serve it); else None."""
    if len(query.flt.categories) != 1 or plan.passing <= EXACT_DIRECT:
        return None
    return query.flt.categories[0]


def _category_search(indexed: int, passing: int, pool: int, want: int, limit: int, planned_us: float) -> int:
    """How many neighbours to ask of a category's own index of ``indexed`` memories
    (every namespace's), about ``passing`` of which pass, for ``want`` of them: at least
    ``pool`` (all it holds, where fewer), as many as that share says (``_enough``); 0
    where that is wider than ``limit`` or costs more than the plan (``planned_us``).
    Priced as a plain search of the whole index (an upper bound: its graph is smaller,
    and every neighbour it returns is of the category, where the whole index's may all
    be of others)."""
    k = max(min(pool, indexed), _enough(indexed, passing, want))
    return k if k <= limit and _search_cost(k) <= planned_us else 0


def _after_short_search(plan: _Plan, searched: int, passed: int) -> tuple[_How, int]:
    """What follows a plain search of ``searched`` neighbours of which only ``passed``
    passed: the filtered search priced by the share seen among those neighbours (it
    walks the graph from them), or the scan; where none passed, one search as wide as
    ``plan.limit`` first when that costs less than the scan. None passing means the
    filter goes against the query's meaning: a filtered search would walk far before it
    kept anything (at 1M memories, slower than scanning 80,000), while a wider plain
    search still finds a common category's memories (a fifth of a million) for far less
    than scanning them."""
    if passed == 0:
        if searched < plan.limit and _search_cost(plan.limit) < plan.scan_us:
            return _How.SEARCH, plan.limit
        return _How.SCAN, 0
    filtered = _search_cost(plan.pool) + FILTERED_US * searched / passed + plan.mask_us
    filtered += LOOKUP_US_PER_ROW * plan.passing  # the passing rows' handles (as ``_filtered_cost``)
    return (_How.FILTERED if filtered < plan.scan_us else _How.SCAN), 0


def _search_cost(k: int) -> float:
    """Microseconds a plain search of ``k`` neighbours is estimated to take."""
    return SEARCH_US + SEARCH_US_PER_NEIGHBOUR * k


def _filtered_cost(size: int, passing: int, k: int, masked: int) -> float:
    """Microseconds a search for ``k`` among ``passing`` of ``size`` is estimated to take,
    ``masked`` rows masked to find those."""
    return (
        _search_cost(k) + FILTERED_US * size / max(passing, 1) + LOOKUP_US_PER_ROW * passing + MASK_US_PER_ROW * masked
    )


def _scan_cost(masked: int, passing: int, *, rough: bool) -> float:
    """Microseconds the exact scan of ``passing`` rows, ``masked`` rows masked to find
    them, is estimated to take, with rough cosines first (where the network has them:
    past ``ROUGH_MIN_ROWS``) or without."""
    per_row = ROUGH_SCAN_US_PER_ROW if rough and passing >= ROUGH_MIN_ROWS else SCAN_US_PER_ROW
    return MASK_US_PER_ROW * masked + per_row * passing


def _enough(searched: int, passed: int, want: int) -> int:
    """How many neighbours a search must return for ``want`` of them to pass, going by
    the share of ``searched`` that ``passed`` (twice that, for the share's noise; one in
    ``searched`` where none did)."""
    return math.ceil(2 * want * searched / max(passed, 1))
