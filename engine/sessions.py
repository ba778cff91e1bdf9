"""Short-term session memory, and the bridge that promotes it into long-term memory.

A session is one agent's conversation in one namespace: a rolling window of messages
bounded by a token budget (the oldest roll out) and a time to live refreshed by every
append. Its messages pass the extraction rules as they arrive (``engine/extraction.py``);
what the rules keep waits in the session as candidates, so a message that rolls out
of the window is not lost to promotion.

Promotion happens when the agent closes the session or its time runs out, whichever
comes first: the session's generation is claimed (atomically: one promoter even with
several processes), its candidates are saved through the normal write path
(``MemoryService.save_batch``: the write guard, dedup and conflicts, unchanged) as
``source = user_input`` memories carrying the session id, linked in order by ``NEXT``
edges as every save of a session's memories is (``engine.episodes``), and only then
is the generation forgotten. A crash in between leaves the claim to go stale and be
taken again; candidates already stored are recognised by their content digest and
session and skipped, so promotion is idempotent. Expired sessions are promoted at
start-up (an expiry while the service was down) and by a background sweep.

Where promotion cannot write: a candidate the write guard refuses is dropped and
reported, a blocked writer's candidates are stored quarantined (as blocking it left
what it wrote before) and reported, and a failing backend leaves the claim for the
next sweep, so nothing is lost silently.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import math
import re
import sys
import threading
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from engine import conflicts, extraction, limits, procedures, text
from engine.codec import decode_cursor, encode_cursor, from_iso, to_iso
from engine.config import SessionsConfig
from engine.errors import BackendError, GuardRejected, InvalidInput, NotFound
from engine.ports import SessionStore, TokenCounter
from engine.procedures import PROCEDURE
from engine.prompt_context import PromptContext, Shares, assemble
from engine.records import (
    Memory,
    MemoryDraft,
    MemoryFilter,
    Reach,
    Scope,
    Source,
    Status,
    Visibility,
    content_digest,
)
from engine.security import AuditEvent, listed_ids
from engine.service import MemoryService, SaveResult
from engine.session_records import (
    SESSION_ID_PATTERN,
    Candidate,
    Claimed,
    Message,
    Role,
    SessionInfo,
    SessionPage,
    SessionRef,
)

log = logging.getLogger(__name__)

# A promotion that has not finished this long after its claim is taken again.
CLAIM_STALE_SECONDS = 300.0
SWEEP_BATCH = 100
MAX_NAME_CHARS = 200
# A listing of open sessions pages as the memories' listing does: 50 by default, at most 500.
SESSIONS_PAGE = 50
MAX_SESSIONS_PAGE = 500


class SessionNotFound(NotFound):
    def __init__(self, ref: SessionRef) -> None:
        super().__init__(f"session {ref.session_id!r} not found in namespace {ref.namespace!r} (or it expired)")
        self.session_id = ref.session_id
        self.namespace = ref.namespace


@dataclass(frozen=True, slots=True)
class MessageDraft:
    """A message as a client sends it; ``at`` defaults to now."""

    role: Role
    content: str
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Window:
    info: SessionInfo
    messages: list[Message]  # oldest first, within the budget asked for
    tokens: int
    left_out: int  # messages of the window the budget left out (the oldest)


@dataclass(slots=True)
class Promotion:
    """What promoting one session generation did."""

    ref: SessionRef
    generation: str
    reason: str  # "closed" (a close's, or one the sweep finished after it was cut off) or "expired"
    messages: int  # appended over the session's life
    candidates: int
    created: list[str] = field(default_factory=list)
    deduplicated: list[str] = field(default_factory=list)
    already_promoted: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    dropped: list[dict[str, str]] = field(default_factory=list)
    # Of ``created``, those stored quarantined: by the write guard, or as a blocked writer's.
    quarantined: list[str] = field(default_factory=list)
    linked: int = 0  # NEXT links made: between its memories, and to a later part of the session


def fit_newest(messages: Sequence[Message], budget: int, *, newest_alone: bool = False) -> tuple[list[Message], int]:
    """The newest messages whose tokens add up to at most ``budget``, oldest first,
    and their tokens. A message that does not fit ends the window: no gaps.
    ``newest_alone``: the newest message is kept, alone, even where it is larger than
    ``budget`` (the session's own budget: the store keeps such a message as the window)."""
    kept: list[Message] = []
    used = 0
    for message in reversed(messages):
        if used + message.tokens > budget and not (newest_alone and not kept):
            break
        kept.append(message)
        used += message.tokens
    kept.reverse()
    return kept, used


# The speaker tags the conflict rules read (engine.conflicts: "<Bart>: …", as transcripts write them).
_TAG_CHARS = re.compile(r"[<>\s]+")
_MAX_TAG = 40
_TAG_DIGEST = 8
_DIGEST_END = re.compile(rf"#[0-9a-f]{{{_TAG_DIGEST}}}$")


def spoken_by(candidate: Candidate, prefix: str | None = None) -> Candidate:
    """``candidate`` as its ``speaker`` said it: ``<name>: …``, a speaker's line to the
    conflict rules, so that in a group conversation what one speaker says of themselves is
    theirs. Before, every "I" was the same user's: Bob's "I live in Paris" superseded
    Alice's "I live in Berlin". The promotion tags only a run that holds more than one
    voice: a one-to-one chat whose client names the user is the user's own lines (tagged,
    that user's "I moved to Munich" no longer replaced their "I live in Berlin", nor was a
    repeat of a memory saved without a name folded into it). Unchanged without a speaker.
    ``prefix``: the tag the session gives the speaker (``_session_prefixes``), if not its own."""
    if candidate.speaker is None:
        return candidate
    prefix = prefix or _prefix(candidate.speaker)
    said = None if candidate.said is None else prefix + candidate.said
    return dataclasses.replace(candidate, content=prefix + candidate.content, said=said)


# Role words the write guard reads at the start of a line ("<developer>: …"), beside the
# conflict rules' own (engine.conflicts.is_role).
_GUARD_ROLES = frozenset({"developer", "system"})


def _prefix(name: str, *, distinct: bool = False) -> str:
    """The tag of ``name`` as a line starts with it: written as a tag can hold it (no ``<``,
    ``>`` or line breaks, at most 40 characters; the metadata keeps the name whole). A name
    the tag cannot hold as it is ends its tag with a digest of the whole name: cut to the
    same 40 characters, or to none, two speakers were one voice, and one's "I live in Paris"
    superseded the other's "I live in Berlin". So does a role word ("System", "user",
    "assistant"), so that the speaker is read as a person: "<System>: …" was quarantined
    as a forged system message, and "<user>" and "<me>" were both read as the user.
    ``distinct``: given a digest all the same (``_session_prefixes``)."""
    tag = _TAG_CHARS.sub(" ", name).strip()[:_MAX_TAG].strip()
    # The conflict rules read a tag as NFKC folds it, without case: a name that NFKC
    # changes ("Ｂｏｂ"), or that ends as a digest does ("System#1a2b3c4d", the tag "System"
    # is given), is given its own, or it was the voice of the speaker whose tag it spells.
    read = unicodedata.normalize("NFKC", tag).casefold()
    if (
        distinct
        or tag != name
        or conflicts.is_role(tag)
        or read in _GUARD_ROLES
        or unicodedata.normalize("NFKC", tag) != tag
        or _DIGEST_END.search(read)
    ):
        digest = hashlib.sha256(name.encode()).hexdigest()[:_TAG_DIGEST]
        tag = f"{tag[: _MAX_TAG - _TAG_DIGEST - 1].strip() or 'speaker'}#{digest}"
    return f"<{tag}>: "


def _longest_prefix(name: str) -> str:
    """The longest tag ``name`` can take before a line: its own, or the one with a digest
    ``_session_prefixes`` gives a later voice that reads like an earlier one."""
    return max(_prefix(name), _prefix(name, distinct=True), key=len)


def _session_prefixes(names: Iterable[str], fits: Callable[[str, str], bool]) -> dict[str, str]:
    """The tag of each of a session's speakers, ``names`` in the order they first spoke
    (those its memories stored hold first): the conflict rules read a tag NFKC-folded and
    without case, so "Sam" and "sam" were one voice, and one's "I live in Faro" superseded
    the other's "I live in Bern". The first name read so keeps its tag; a later one is given
    a digest, unless ``fits(name, prefix)`` says a line of theirs would then run past the
    content cap: an append counts the digest's room (``_longest_prefix``), but one made
    before it did let such a line through with the name's own tag, and its save would fail
    at every retry of the promotion, so it keeps that tag, as before. The same name is the
    same tag throughout."""
    prefixes: dict[str, str] = {}
    owners: dict[str, str] = {}
    for name in names:
        if name in prefixes:
            continue
        prefix = _prefix(name)
        owner = owners.setdefault(unicodedata.normalize("NFKC", prefix).casefold(), name)
        if owner != name and fits(name, distinct := _prefix(name, distinct=True)):
            prefix = distinct
        prefixes[name] = prefix
    return prefixes


class Sessions:
    def __init__(
        self,
        config: SessionsConfig,
        store: SessionStore,
        service: MemoryService,
        counter: TokenCounter,
        *,
        clock: Callable[[], datetime] | None = None,
        extract: Callable[[Role, str, datetime], list[Candidate]] = extraction.extract,
    ) -> None:
        self.config = config
        self.store = store
        self.service = service
        self.counter = counter
        self._clock = clock or service.now
        self._extract = extract
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------

    def start(self, *, background: bool = True) -> list[Promotion]:
        """Promote what expired while the service was down; then sweep in the background
        every ``sweep_every_seconds`` (unless 0 or ``background`` is False)."""
        promoted = self.sweep()
        if background and self.config.sweep_every_seconds > 0:
            self._stop.clear()
            self._sweeper = threading.Thread(target=self._sweep_forever, name="twinmem-session-sweep", daemon=True)
            self._sweeper.start()
        return promoted

    def stop(self) -> None:
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout=30)
            self._sweeper = None
        self.store.close()

    def _sweep_forever(self) -> None:
        while not self._stop.wait(self.config.sweep_every_seconds):
            try:
                self.sweep()
            except BackendError as exc:  # the store or Redis is away: the next sweep tries again
                log.warning("session sweep failed, will retry: %s", exc)

    # --- the window ------------------------------------------------------------------

    def append(
        self,
        ref: SessionRef,
        drafts: Sequence[MessageDraft],
        *,
        reach: Reach,
        max_tokens: int | None = None,
        expire_after_seconds: float | None = None,
        visibility: Visibility | None = None,
    ) -> SessionInfo:
        """Add messages to the session's window (a new session when it has none open).
        ``visibility``: of the memories these messages' promotion writes; left out, the
        session's own, which its first append sets (shared unless that one gives one)."""
        self._check_ref(ref)
        if not drafts:
            raise InvalidInput("at least one message is required", field="messages")
        if len(drafts) > self.config.max_messages_per_append:
            raise InvalidInput(
                f"at most {self.config.max_messages_per_append} messages per append, got {len(drafts)}",
                field="messages",
            )
        if max_tokens is not None and max_tokens < 1:
            raise InvalidInput("max_tokens must be at least 1", field="max_tokens")
        if expire_after_seconds is not None and expire_after_seconds <= 0:
            raise InvalidInput("expire_after_seconds must be positive", field="expire_after_seconds")
        # A blocked writer's messages would only be dropped at the promotion (reported to a
        # close, logged for an expiry): refused now, and nothing is opened.
        self.service.refuse_blocked(ref.agent, ref.session_id)
        now = self._clock()
        for number, draft in enumerate(drafts):
            self._check_message(draft, f"messages[{number}].", now)
        counts = self.counter.count_many([draft.content for draft in drafts])
        messages = [
            Message(
                role=draft.role,
                content=draft.content,
                at=draft.at or now,
                tokens=tokens,
                name=draft.name,
                metadata=dict(draft.metadata),
            )
            for draft, tokens in zip(drafts, counts, strict=True)
        ]
        cap = self.service.config.limits.max_content_chars
        candidates: list[Candidate] = []
        for number, message in enumerate(messages):
            for found in self._extract(message.role, message.content, message.at):
                if message.name:
                    found = dataclasses.replace(found, speaker=message.name)
                    # The speaker's tag may carry a sentence past the cap: refused here,
                    # not at the promotion, whose every retry would fail on it. As said
                    # too: one the guard flags is stored so (``_draft``), and was dropped.
                    # The longest tag the name can be given counts: a voice that reads
                    # like another's gets a digest at the promotion, and a line with no
                    # room for it kept the bare tag, one voice with the other again.
                    # It counts so for a lone speaker too: which of two such voices spoke
                    # first is told only at the promotion (two appends at once may each see
                    # none). The refusal says how long the sentence may be with this name:
                    # "holds 8004 characters, at most 8000" of a 7,990-character sentence read
                    # as a miscount.
                    tag = _longest_prefix(message.name)
                    sentence = max(len(found.content), len(found.said or ""))
                    if len(tag) + sentence > cap:
                        raise InvalidInput(
                            f"a sentence of this message is too long: this sentence holds {sentence} "
                            f"characters; with the speaker's name {message.name!r} at most {cap - len(tag)} "
                            f"are allowed ({cap}, the content cap, less {len(tag)} for the longest tag the "
                            f"name can be given, {tag!r}: a name that reads like another speaker's gets a "
                            "digest): shorten it or the name",
                            field=f"messages[{number}].content",
                        )
                    self._check_speaker(ref.namespace, found, number)
                candidates.append(found)
        if visibility is not None:
            # Each append's own: before, the first append's held for the whole run, and a
            # later append asking for private had its messages promoted shared.
            candidates = [dataclasses.replace(c, visibility=visibility.value) for c in candidates]
        # Settings not given are the session's own, or the defaults for a new one: the
        # store decides which in the append's own atomic step, so a concurrent first
        # append without settings cannot reset the ones this one gives (or the reverse).
        return self.store.append(
            ref,
            messages,
            candidates,
            now=now,
            expire_after_seconds=expire_after_seconds,
            max_tokens=max_tokens,
            default_expire_after_seconds=self.config.expire_after_seconds,
            default_max_tokens=self.config.max_tokens,
            reach=reach.value,
            visibility=(visibility or Visibility.SHARED).value,
            new_generation=uuid.uuid4().hex,
        )

    def window(self, ref: SessionRef, *, max_tokens: int | None = None) -> Window:
        """The session's window, newest last, trimmed to ``max_tokens`` (default: the session's)."""
        self._check_ref(ref)
        if max_tokens is not None and max_tokens < 0:
            raise InvalidInput("max_tokens must not be negative", field="max_tokens")
        found = self.store.window(ref, self._clock())
        if found is None:
            raise SessionNotFound(ref)
        info, messages = found
        if max_tokens is None:  # as stored: within the session's budget, or one message larger alone
            kept, used = fit_newest(messages, info.max_tokens, newest_alone=True)
        else:
            kept, used = fit_newest(messages, max_tokens)
        return Window(info, kept, used, len(messages) - len(kept))

    def sessions(
        self, namespace: str, agent: str | None, *, limit: int = SESSIONS_PAGE, cursor: str | None = None
    ) -> SessionPage:
        """One page of the open sessions of ``namespace``, oldest first: ``agent``'s, or
        everyone's for None (admins). ``cursor``: a page's ``next_cursor``, to go on after it
        (a session opened since then is on a later page; one closed since then is not)."""
        self.service.check_namespace(namespace)
        if not 1 <= limit <= MAX_SESSIONS_PAGE:
            raise InvalidInput(f"limit must be within 1..{MAX_SESSIONS_PAGE}, got {limit}", field="limit")
        after = None
        if cursor is not None:
            created_at, generation = decode_cursor(cursor)
            after = (from_iso(created_at), generation)
        found = self.store.sessions(namespace, agent, self._clock(), limit=limit + 1, after=after)
        items = tuple(found[:limit])
        next_cursor = None
        if len(found) > limit:
            last = items[-1]
            next_cursor = encode_cursor(to_iso(last.created_at), last.generation)
        return SessionPage(items, next_cursor)

    # --- prompt context --------------------------------------------------------------

    def context(
        self,
        ref: SessionRef,
        *,
        scope: Scope | None,
        budget: int | None = None,
        shares: Shares | None = None,
        query: str | None = None,
    ) -> PromptContext:
        """What to put in the prompt for the next turn: the window, the long-term memories
        most relevant to ``query`` (default: the latest ``context_query_messages`` user
        messages, joined) and the procedures that match it, within ``budget`` tokens split
        by ``shares`` (``engine/prompt_context.py``); "how" is read in the latest alone.
        Where the default query joins several messages, the latest is also the recalls'
        focus (``[fusion] focus``, unless 0), weighed more than the ones before it.
        Long-term memories are recalled with the caller's ``scope``, so the context holds
        nothing the caller could not recall itself."""
        self._check_ref(ref)
        budget = self.config.context_budget_tokens if budget is None else budget
        if budget < 1:
            raise InvalidInput("budget_tokens must be at least 1", field="budget_tokens")
        if query is not None and text.is_blank(query):
            # As recall refuses it: a context with no memories would read as "nothing matched".
            raise InvalidInput("query must not be empty", field="query")
        cfg = self.config
        shares = shares or Shares(cfg.context_window_share, cfg.context_memories_share, cfg.context_procedures_share)
        parts = (shares.window, shares.memories, shares.procedures)
        if min(parts) < 0 or not 0 < sum(parts) < math.inf:
            raise InvalidInput(
                "shares must not be negative nor all 0, and their sum must be a finite number", field="split"
            )
        found = self.store.window(ref, self._clock())
        if found is None:
            raise SessionNotFound(ref)
        messages = found[1]
        limit = self.service.config.limits.max_query_chars
        if query is None:
            # A message that says nothing (stored before such were refused) asks nothing.
            said = [m for m in messages if m.role is Role.USER and not text.is_blank(m.content)] or [
                m for m in messages if not text.is_blank(m.content)
            ]
            latest = said[-1].content if said else None
            joined = said[-cfg.context_query_messages :]
            # Who says it, where one named speaker says all of it and a memory of the
            # namespace may name them: a namespace that holds several people's memories
            # ("Bart went to the zoo", "Lisa …") leans to the speaker's. Else nothing.
            names = {m.name for m in joined}
            one_user = len(names) == 1 and all(m.role is Role.USER for m in joined)  # not a fallback's
            speaker = names.pop() if one_user else None
            said_by = f"{speaker}: " if speaker and self.service.names_speaker(speaker, [ref.namespace]) else ""
            said_by = said_by if len(said_by) <= limit // 2 else ""  # a name as long as the query says nothing
            # The newest text, where they run past the limit.
            query = said_by + " ".join(m.content for m in joined)[-(limit - len(said_by)) :]
            # The latest message weighs more than the ones before it ([fusion] focus).
            focus = latest[-limit:] if latest and len(joined) > 1 else None  # ``said`` holds no blank one
        else:
            latest, focus = query, None
        query = query[:limit] if query and not text.is_blank(query) else None
        memories: list[Memory] = []
        steps: list[Memory] = []
        how = query is not None and latest is not None and procedures.asks_how(latest)
        if focus is not None and (query is None or not self.service.weighs_focus(query, focus)):
            focus = None  # the recall would not weigh it
        if query is not None:
            # Query, focus and the query's other phrasing embedded once, for both recalls.
            recall = functools.partial(
                self.service.recall,
                query,
                namespaces=[ref.namespace],
                scope=scope,
                focus=focus,
                vectors=self.service.query_vectors(query, [ref.namespace], focus),
            )
            if cfg.context_procedures and shares.procedures > 0 and PROCEDURE in self.service.config.categories:
                found_steps = recall(top_k=cfg.context_procedures, flt=MemoryFilter(categories=(PROCEDURE,)))
                steps = [hit.memory for hit in found_steps.hits]
                # The times the query names, read once: the second recall takes them as read.
                recall = functools.partial(recall, windows=found_steps.windows)
            if cfg.context_memories and shares.memories > 0:
                hits = recall(top_k=cfg.context_memories)
                memories = [hit.memory for hit in hits.hits if hit.memory.category != PROCEDURE]
        return assemble(
            self.counter,
            budget=budget,
            shares=shares,
            window=messages,
            memories=memories,
            procedures=steps,
            query=query,
            procedures_first=how,
            focus=focus,
        )

    # --- promotion -------------------------------------------------------------------

    def close(self, ref: SessionRef) -> Promotion:
        """Close the session and promote it now."""
        self._check_ref(ref)
        # Closed and claimed at once: a sweep (here or in another process) cannot take it first.
        claimed = self.store.close_session(ref, self._clock(), CLAIM_STALE_SECONDS)
        if claimed is None:
            raise SessionNotFound(ref)
        return self._promote_claimed(claimed, "closed")

    def sweep(self) -> list[Promotion]:
        """Promote every generation that is due: expired, closed but not promoted, or
        claimed by a promotion that never finished. A generation whose promotion fails
        for any reason but the backend's (a bug) is logged and left claimed, to be tried
        again once its claim is stale; the others are promoted all the same, and a start
        never fails on one of them. A backend error ends the sweep (the next one retries)."""
        done: list[Promotion] = []
        while True:
            due = self.store.due(self._clock(), SWEEP_BATCH)
            progressed = False
            for generation in due:
                try:
                    promotion = self._promote(generation)
                except BackendError:
                    raise
                except Exception:
                    log.exception("promoting session generation %s failed; it is tried again later", generation)
                    continue
                if promotion is not None:
                    self._audit_sweep(promotion)
                    done.append(promotion)
                    progressed = True
            if len(due) < SWEEP_BATCH or not progressed:
                return done

    def _audit_sweep(self, promotion: Promotion) -> None:
        """Audit a promotion no request made (a close is audited as its request is): the
        memories it wrote, as actor ``twinmem``, as a block's pass finished at start is."""
        security = self.service.security
        if security is None:
            return
        ref = promotion.ref
        detail = f"session {ref.session_id!r} of {ref.agent!r} promoted by the sweep ({promotion.reason})"
        if promotion.reason == "closed":
            detail = (
                f"session {ref.session_id!r} of {ref.agent!r} closed, its promotion cut off and finished by the sweep"
            )
        # A promotion taken again names what its first attempt stored too: a promoter that
        # died mid-way (a close killed with its process) wrote no entry, and those memories
        # were in none.
        # Counted once each: a repeat the first attempt folded into an earlier line's memory
        # is that memory again ("3 stored" named two).
        if earlier := dict.fromkeys(promotion.already_promoted):
            detail += f", {len(earlier)} stored by an earlier attempt"
        # At most ``AUDIT_MAX_IDS``, the rest counted, as a request's entry: a session's
        # memories have no bound, and every listing that held the entry held them all.
        every = [*promotion.already_promoted, *promotion.created, *promotion.deduplicated]
        ids, said = listed_ids(every, detail)
        event = AuditEvent(
            "twinmem", "session", "ok", self._clock(), uuid.uuid4().hex, (ref.namespace,), ids, detail=said
        )
        try:
            security.append_audit(event)
        except Exception:
            # The promotion is written: a fault of the audit store (locked by another
            # process, a full disk) must not leave the sweep, which would leave the sessions
            # due after this one unpromoted, stop the background sweeper, or fail a start.
            log.exception("the audit entry of %s failed: %s", detail, ", ".join(dict.fromkeys(every)))

    def _promote(self, generation: str) -> Promotion | None:
        claimed = self.store.claim(generation, self._clock(), CLAIM_STALE_SECONDS)
        if claimed is None:
            return None
        # A close cut off mid-promotion (killed with its process) is finished here: a close
        # still, not an expiry, as its entry and log said of a session closed long before.
        return self._promote_claimed(claimed, "expired" if claimed.info.closed_at is None else "closed")

    def _promote_claimed(self, claimed: Claimed, reason: str) -> Promotion:
        promotion = self._write(claimed, reason)
        self.store.finish(claimed.info.generation)
        log.info(
            "session %s of %s in %s promoted (%s): %d created (%d quarantined), %d deduplicated, %d dropped",
            claimed.info.ref.session_id,
            claimed.info.ref.agent,
            claimed.info.ref.namespace,
            reason,
            len(promotion.created),
            len(promotion.quarantined),
            len(promotion.deduplicated),
            len(promotion.dropped),
        )
        return promotion

    def _write(self, claimed: Claimed, reason: str) -> Promotion:
        info = claimed.info
        ref = info.ref
        promotion = Promotion(ref, info.generation, reason, info.appended, len(claimed.candidates))
        scope = Scope.of({ref.namespace: Reach(info.reach)}, ref.agent)
        now = self._clock()
        drafts: list[tuple[Candidate, MemoryDraft]] = []
        earlier = _Earlier(self.service, info, claimed.candidates, now)
        # Named speakers are told apart only where there is more than one voice to tell apart,
        # in the session, not only in this run: after a close and reopen, Sam alone was the
        # user's untagged lines, whose "I moved to Faro" left "<Sam>: I live in Bern" active,
        # and "sam"'s move in the next run superseded Sam's.
        voices = {candidate.speaker for candidate in claimed.candidates} | earlier.voices
        one_voice = len(voices) == 1
        cap = self.service.config.limits.max_content_chars
        longest: dict[str, int] = {}
        for candidate in claimed.candidates:
            if candidate.speaker is not None:
                line = max(len(candidate.content), len(candidate.said or ""))
                longest[candidate.speaker] = max(longest.get(candidate.speaker, 0), line)
        prefixes = _session_prefixes(
            [*earlier.speakers, *(c.speaker for c in claimed.candidates if c.speaker is not None)],
            lambda name, prefix: len(prefix) + longest.get(name, 0) <= cap,
        )
        for position, candidate in enumerate(claimed.candidates):
            if earlier.handled(position, candidate):
                stored = earlier.memory_of(position, candidate)
                if stored is not None:
                    promotion.already_promoted.append(stored.memory_id)
                continue
            prefix = None if one_voice or candidate.speaker is None else prefixes[candidate.speaker]
            drafts.append((candidate, self._draft(ref, info, position, candidate, now, prefix=prefix)))
        # In batches the service takes (``[limits] max_batch``): a session's candidates are
        # not bounded, and a promotion cut short by a crash finds what it saved already
        # (``_Earlier``).
        size = self.service.config.limits.max_batch
        results: list[SaveResult] = []
        for start in range(0, len(drafts), size):
            results += self._save(drafts[start : start + size], ref, scope, promotion)
        for result in results:
            (promotion.created if result.created else promotion.deduplicated).append(result.memory.memory_id)
            promotion.superseded.extend(result.superseded)
            if result.created and result.memory.status is Status.QUARANTINED:
                promotion.quarantined.append(result.memory.memory_id)
        # The save links each new memory NEXT from the session's previous one, and the last
        # one to a later part of the session promoted first (engine.episodes).
        promotion.linked = sum(
            (result.follows is not None) + (result.precedes is not None) for result in results if result.created
        )
        return promotion

    def _draft(
        self,
        ref: SessionRef,
        info: SessionInfo,
        position: int,
        candidate: Candidate,
        now: datetime,
        *,
        prefix: str | None,
    ) -> MemoryDraft:
        # The guard judges what was said when the rules left out an explicit request, so
        # "remember that …" cannot carry an injection past it. ``prefix``: the speaker's tag
        # (``_session_prefixes``), none where the run is one voice.
        line = candidate if prefix is None else spoken_by(candidate, prefix)
        content = line.content
        if line.said is not None and self._guard_flags(ref.namespace, line.said):
            content = line.said
        return MemoryDraft(
            content=content,
            namespace=ref.namespace,
            category=candidate.category,
            source=Source.USER_INPUT,
            actor=ref.agent,
            session_id=ref.session_id,
            visibility=Visibility(candidate.visibility or info.visibility),
            created_at=min(candidate.at, now),
            metadata={
                "promoted_from": "session",
                "rule": candidate.rule,
                "generation": info.generation,
                "candidate": content_digest(candidate.content),  # as the session holds it (``_Earlier``)
                "position": position,
                **({"speaker": candidate.speaker} if candidate.speaker is not None else {}),
            },
        )

    def _check_speaker(self, namespace: str, candidate: Candidate, number: int) -> None:
        """Refuse a name the write guard acts on where it tags ``candidate``: an instruction
        to the model ("Ignore previous instructions") had every line of its speaker stored
        quarantined, and personal data (an e-mail address) redacted made two speakers one
        voice (a ``pii = "reject"`` namespace dropped their lines)."""
        from engine import guard

        def refused(finding: guard.Finding) -> InvalidInput:
            return InvalidInput(
                f"the write guard reads the name {candidate.speaker!r} as {finding.rule} ({finding.kind}): "
                "its speaker's lines would be stored with it quarantined or redacted; give the speaker's "
                "own name (or none)",
                field=f"messages[{number}].name",
            )

        policy = self.service.config.guard.policy_for(namespace)
        # The name is kept whole in the metadata too (``speaker``), which the guard reads
        # as it reads the content: "<|im_start|>system", tagged without its "<", passed
        # the check of the line and had every line of its speaker stored quarantined.
        whole = guard.check_write(candidate.speaker or "", Source.USER_INPUT, policy)
        if whole.action is not guard.Action.ALLOWED and whole.findings:
            raise refused(whole.findings[0])
        tagged = spoken_by(candidate)
        tag = len(_prefix(candidate.speaker or ""))
        for line in (tagged.content, tagged.said):
            if line is None:
                continue
            verdict = guard.check_memory(line, Source.USER_INPUT, (), {}, policy).verdict
            if verdict.action is guard.Action.ALLOWED:
                continue
            for finding in verdict.findings:
                if finding.start < tag:
                    raise refused(finding)

    def _guard_flags(self, namespace: str, text: str) -> bool:
        from engine import guard

        verdict = guard.check_memory(text, Source.USER_INPUT, (), {}, self.service.config.guard.policy_for(namespace))
        return verdict.refused is not None or verdict.verdict.action is guard.Action.QUARANTINED

    def _save(
        self,
        drafts: Sequence[tuple[Candidate, MemoryDraft]],
        ref: SessionRef,
        scope: Scope,
        promotion: Promotion,
    ) -> list[SaveResult]:
        """Save the drafts in one batch; when the guard refuses one or the write path finds
        one invalid, save them one by one and report those refused. A blocked writer's
        drafts are stored quarantined, as blocking it left what it wrote before (its
        messages were accepted before the block): they were all dropped, and a sweep's
        promotion only logged that."""
        batch = [draft for _, draft in drafts]
        save = functools.partial(self.service.save_batch, actor=ref.agent, scope=scope, quarantine_blocked=True)
        try:
            return save(batch)
        except (GuardRejected, InvalidInput):
            pass
        results: list[SaveResult] = []
        for candidate, draft in drafts:
            try:
                results += save([draft])
            # A candidate the write path finds invalid (a plugged extractor's, longer than
            # [limits] max_content_chars) is dropped: it failed the whole promotion at every retry.
            except (GuardRejected, InvalidInput) as exc:
                promotion.dropped.append({"content": candidate.content, "reason": str(exc)})
        return results

    # --- validation ------------------------------------------------------------------

    def _check_ref(self, ref: SessionRef) -> None:
        self.service.check_namespace(ref.namespace)
        if not SESSION_ID_PATTERN.fullmatch(ref.session_id):
            raise InvalidInput(
                f"session_id {ref.session_id!r} must be 1-200 letters, digits or _ . : @ -", field="session_id"
            )

    def _check_message(self, draft: MessageDraft, where: str, now: datetime) -> None:
        if text.is_blank(draft.content):
            raise InvalidInput("a message's content must not be empty", field=where + "content")
        cap = self.service.config.limits.max_content_chars
        if len(draft.content) > cap:
            raise InvalidInput(
                f"a message holds {len(draft.content)} characters, at most {cap} are allowed", field=where + "content"
            )
        if draft.name is not None:
            if not 0 < len(draft.name) <= MAX_NAME_CHARS:
                raise InvalidInput(f"name holds 1-{MAX_NAME_CHARS} characters", field=where + "name")
            if text.is_blank(draft.name):
                raise InvalidInput(
                    "a name must not be blank (whitespace or invisible marks only)", field=where + "name"
                )
            if any(unicodedata.category(char) == "Cc" for char in draft.name):
                raise InvalidInput(
                    "a name must not hold control characters (NUL, tabs, line breaks)", field=where + "name"
                )
        problem = limits.metadata_problem(draft.metadata, self.service.config.limits)
        if problem:
            raise InvalidInput(problem, field=where + "metadata")
        if draft.at is not None and draft.at > now + timedelta(minutes=5):
            raise InvalidInput("a message's time must not be in the future", field=where + "at")


def _stored_order(memory: Memory) -> tuple[datetime, int, str]:
    """The order a session's promotions stored ``memory`` in: one promotion stores its
    memories at one time, so in the order of their candidates (``position``). By id after
    the time, who spoke first in a run was drawn by chance: "sam", Sam's folded form, took
    the plain tag in the session's next run as often as not, and "<sam>: I moved to Faro"
    superseded "<Sam>: I live in Bern"."""
    position = memory.metadata.get("position")
    at = position if isinstance(position, int) and not isinstance(position, bool) else sys.maxsize
    return memory.created_at, at, memory.memory_id


class _Earlier:
    """How far an earlier, interrupted promotion of one session run (generation) got,
    read once from the session's memories (the fast network's session postings, then
    one store read of them), so that each candidate is handled once.

    Each memory a promotion stores names its run and its candidate (metadata
    ``generation``, ``position`` in the run's candidates, and ``candidate``, the
    candidate's content digest, so one the guard redacted is found too), and candidates
    are saved in order. So every candidate up to
    the last one the first attempt stored was handled then, whatever became of it:
    stored (and perhaps superseded by a later one or quarantined since), folded into an
    earlier memory (which a later candidate may then have superseded), or dropped.
    Those are skipped; saved again, an old fact came back active and superseded the
    newer one (a crash probe and a review found both ways). The candidates after it are
    saved: one the first attempt reached but that left no memory of its own (folded) is
    folded again, one more reinforcement; so is a later candidate that repeats an
    earlier one's text ("I live in Berlin", "I moved to Paris", "I live in Berlin"):
    found by its text alone, it was skipped, and Paris stayed. Memories a release before
    positions were recorded stored are found by their candidate's digest, the first
    position of that text; those of a release before runs were recorded count where
    active and of the candidate's content (or its words as said), as they did then."""

    def __init__(
        self, service: MemoryService, info: SessionInfo, candidates: Sequence[Candidate], now: datetime
    ) -> None:
        ref = info.ref
        service.keeper.ensure_current()
        ids = service.keeper.network.session_ids(ref.namespace, ref.session_id)
        every = MemoryFilter(statuses=tuple(Status), include_expired=True)
        mine = [
            m for m in service.store.get_many(Scope.whole([ref.namespace]), ids, every, now) if m.actor == ref.agent
        ]
        self._digests = [content_digest(candidate.content) for candidate in candidates]
        self._of_run: dict[str, Memory] = {}
        self._at: dict[int, Memory] = {}  # by the position of its candidate
        self._before_runs: dict[str, Memory] = {}  # active, stored by a release before runs were recorded
        # Who spoke in what the session stored, in the order they did (``_session_prefixes``).
        self.speakers: list[str] = []
        # Whose lines a promotion of the session stored: each speaker, None for unnamed lines.
        self.voices: set[str | None] = set()
        for memory in sorted(mine, key=_stored_order):
            speaker = memory.metadata.get("speaker")
            if isinstance(speaker, str) and speaker:
                self.speakers.append(speaker)
                self.voices.add(speaker)
            elif "generation" in memory.metadata:
                self.voices.add(None)
            if memory.metadata.get("generation") == info.generation:
                key = memory.metadata.get("candidate") or content_digest(memory.content)
                self._of_run.setdefault(str(key), memory)
                position = memory.metadata.get("position")
                # Trusted only where it names a candidate of this run whose digest the
                # memory holds: a memory saved into the session or imported with a
                # position of its own (a huge number, another candidate's) hid the
                # candidates after it.
                if (
                    isinstance(position, int)
                    and not isinstance(position, bool)
                    and 0 <= position < len(candidates)
                    and key == self._digests[position]
                ):
                    self._at.setdefault(position, memory)
            elif "generation" not in memory.metadata and memory.status is Status.ACTIVE:
                self._before_runs.setdefault(content_digest(memory.content), memory)
        first: dict[str, int] = {}
        for position, digest in enumerate(self._digests):
            first.setdefault(digest, position)
        by_text = (first[key] for key in self._of_run if key in first)
        self._reached = max(self._at, default=-1) if self._at else max(by_text, default=-1)

    def handled(self, position: int, candidate: Candidate) -> bool:
        """Whether the first attempt handled the candidate at ``position``."""
        return position <= self._reached or self.memory_of(position, candidate) is not None

    def memory_of(self, position: int, candidate: Candidate) -> Memory | None:
        """The memory the first attempt stored for the candidate at ``position`` (where it
        stored none, that of its text it was folded into; or the one a release before
        runs were recorded stored), if any."""
        digest = self._digests[position]
        found = None
        if not (self._at and position > self._reached):  # a later repeat of an earlier one's text is new
            found = self._at.get(position) or self._of_run.get(digest)
        found = found or self._before_runs.get(digest)
        if found is None and candidate.said:
            found = self._before_runs.get(content_digest(candidate.said))
        return found
