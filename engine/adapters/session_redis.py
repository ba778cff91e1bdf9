"""Sessions in Redis: server mode, shared by every API process that points at it.

Each method that reads and changes is one Lua script, so it is atomic against every
other client of the server (two processes never both claim a generation). Keys, all
under ``[sessions] redis_prefix``:

* ``P:ref:<ref>`` → the open generation of a session (``<ref>`` is the JSON of
  namespace, agent and session id); it carries a native TTL of the session's time to
  live, refreshed by every append, so Redis itself lets go of an idle session;
* ``P:g:<gen>`` (hash: the record), ``P:g:<gen>:m`` / ``:t`` (the window's messages
  and their token counts, oldest first), ``P:g:<gen>:c`` (candidates for promotion);
  these outlive the deadline until the generation is promoted, or, with
  ``redis_keep_days`` above 0, until Redis drops them that long after it;
* ``P:due`` (sorted set: generation → when it falls due: its deadline, or the end of a
  promotion's claim, a close's included; 0 for a generation closed by an older release,
  which left it ``closed`` and due at once) and ``P:ns:<namespace>`` (a set of its generations).

Times are the caller's ``now`` in Unix milliseconds, not the server's clock, so a
deadline means the same in every process and in tests with a frozen clock. The key
layout assumes one Redis server (not Redis Cluster: the scripts build key names).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from engine.errors import StoreError
from engine.session_records import (
    Candidate,
    Claimed,
    Message,
    SessionInfo,
    SessionRef,
    SessionState,
    candidate_from_json,
    candidate_to_json,
    message_from_json,
    message_to_json,
)

_APPEND = """
local p, refname, now, newgen = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local ttl, maxtok, keep = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local nm, nc = tonumber(ARGV[13]), tonumber(ARGV[14])
local default_ttl, default_maxtok = tonumber(ARGV[15]), tonumber(ARGV[16])
local refkey = p .. ':ref:' .. refname
local gen = redis.call('GET', refkey)
if gen then
  local st = redis.call('HMGET', p .. ':g:' .. gen, 'state', 'deadline')
  if st[1] ~= 'open' or tonumber(st[2]) == nil or tonumber(st[2]) <= now then gen = false end
end
if not gen then
  gen = newgen
  redis.call('HSET', p .. ':g:' .. gen, 'ns', ARGV[8], 'agent', ARGV[9], 'sid', ARGV[10], 'state', 'open',
             'created', now, 'tokens', 0, 'appended', 0, 'reach', ARGV[11], 'vis', ARGV[12], 'ref', refname)
  redis.call('SADD', p .. ':ns:' .. ARGV[8], gen)
end
local g = p .. ':g:' .. gen
-- Settings not given ('' from the caller): the generation's own (none yet on a new one), else the defaults.
if not ttl then ttl = tonumber(redis.call('HGET', g, 'ttl')) or default_ttl end
if not maxtok then maxtok = tonumber(redis.call('HGET', g, 'maxtok')) or default_maxtok end
local total = tonumber(redis.call('HGET', g, 'tokens'))
local i = 17
for n = 1, nm do
  redis.call('RPUSH', g .. ':m', ARGV[i])
  redis.call('RPUSH', g .. ':t', ARGV[i + 1])
  total = total + tonumber(ARGV[i + 1])
  i = i + 2
end
for n = 1, nc do
  redis.call('RPUSH', g .. ':c', ARGV[i])
  i = i + 1
end
local len = redis.call('LLEN', g .. ':m')
while total > maxtok and len > 1 do
  total = total - tonumber(redis.call('LPOP', g .. ':t'))
  redis.call('LPOP', g .. ':m')
  len = len - 1
end
local deadline = now + ttl
redis.call('HSET', g, 'updated', now, 'deadline', deadline, 'ttl', ttl, 'maxtok', maxtok, 'tokens', total)
redis.call('HINCRBY', g, 'appended', nm)
redis.call('ZADD', p .. ':due', deadline, gen)
redis.call('SET', refkey, gen, 'PX', math.max(ttl, 1))
for _, key in ipairs({g, g .. ':m', g .. ':t', g .. ':c'}) do
  if keep > 0 then redis.call('PEXPIRE', key, ttl + keep) else redis.call('PERSIST', key) end
end
return {gen, redis.call('HGETALL', g), len}
"""

_WINDOW = """
local p, refname, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local gen = redis.call('GET', p .. ':ref:' .. refname)
if not gen then return false end
local g = p .. ':g:' .. gen
local st = redis.call('HMGET', g, 'state', 'deadline')
if st[1] ~= 'open' or tonumber(st[2]) == nil or tonumber(st[2]) <= now then return false end
return {gen, redis.call('HGETALL', g), redis.call('LRANGE', g .. ':m', 0, -1)}
"""

_CLOSE = """
local p, refname, now, stale = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local refkey = p .. ':ref:' .. refname
local gen = redis.call('GET', refkey)
if not gen then return false end
local g = p .. ':g:' .. gen
local st = redis.call('HMGET', g, 'state', 'deadline', 'ns')
if st[1] ~= 'open' or tonumber(st[2]) == nil or tonumber(st[2]) <= now then return false end
redis.call('HSET', g, 'state', 'promoting', 'updated', now, 'deadline', now + stale, 'closed', now)
redis.call('ZADD', p .. ':due', now + stale, gen)
redis.call('DEL', refkey)
redis.call('SREM', p .. ':ns:' .. st[3], gen)
return {gen, redis.call('HGETALL', g), redis.call('LRANGE', g .. ':c', 0, -1), redis.call('LLEN', g .. ':m')}
"""

_CLAIM = """
local p, gen, now, stale = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local g = p .. ':g:' .. gen
local st = redis.call('HMGET', g, 'state', 'deadline', 'ref', 'ns')
if not st[1] then
  redis.call('ZREM', p .. ':due', gen)
  return false
end
if (st[1] == 'open' or st[1] == 'promoting') and tonumber(st[2]) > now then return false end
redis.call('HSET', g, 'state', 'promoting', 'deadline', now + stale)
redis.call('ZADD', p .. ':due', now + stale, gen)
local refkey = p .. ':ref:' .. st[3]
if redis.call('GET', refkey) == gen then redis.call('DEL', refkey) end
redis.call('SREM', p .. ':ns:' .. st[4], gen)
return {redis.call('HGETALL', g), redis.call('LRANGE', g .. ':c', 0, -1), redis.call('LLEN', g .. ':m')}
"""

_FINISH = """
local p, gen = ARGV[1], ARGV[2]
local g = p .. ':g:' .. gen
local ns = redis.call('HGET', g, 'ns')
if ns then redis.call('SREM', p .. ':ns:' .. ns, gen) end
redis.call('DEL', g, g .. ':m', g .. ':t', g .. ':c')
redis.call('ZREM', p .. ':due', gen)
return 1
"""


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _time(ms: str | int) -> datetime:
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)


def _ref_name(ref: SessionRef) -> str:
    return json.dumps([ref.namespace, ref.agent, ref.session_id], ensure_ascii=False, separators=(",", ":"))


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return {flat[n]: flat[n + 1] for n in range(0, len(flat), 2)}


def _claimed(generation: str, record: Sequence[str], bodies: Sequence[str], count: int) -> Claimed:
    """A claim as a script returns it: the record (flat pairs), the candidates, the messages' count."""
    info = _info(generation, _pairs(record), int(count))
    return Claimed(info, tuple(candidate_from_json(body) for body in bodies))


def _info(generation: str, record: dict[str, str], messages: int) -> SessionInfo:
    return SessionInfo(
        ref=SessionRef(record["ns"], record["agent"], record["sid"]),
        generation=generation,
        state=SessionState(record["state"]),
        created_at=_time(record["created"]),
        updated_at=_time(record["updated"]),
        expires_at=_time(record["deadline"]),
        max_tokens=int(record["maxtok"]),
        expire_after_seconds=int(record["ttl"]) / 1000,
        tokens=int(record["tokens"]),
        messages=messages,
        appended=int(record["appended"]),
        reach=record["reach"],
        visibility=record["vis"],
        # A generation an older release closed is left "closed", and records no time of it.
        closed_at=_time(record["closed"]) if "closed" in record else _legacy_closed(record),
    )


def _legacy_closed(record: dict[str, str]) -> datetime | None:
    return _time(record["updated"]) if record["state"] == "closed" else None


class RedisSessionStore:
    def __init__(self, url: str, *, prefix: str = "twinmem", keep_seconds: float = 0.0) -> None:
        self._url = url
        self._prefix = prefix
        self._keep_ms = int(keep_seconds * 1000)
        self._client: Any = None
        self._scripts: dict[str, Callable[..., Any]] = {}

    def open(self) -> None:
        import redis

        try:
            client = redis.Redis.from_url(self._url, decode_responses=True)
            client.ping()
        except (redis.RedisError, ValueError) as exc:
            raise StoreError(f"could not reach Redis at {self._url}: {exc}") from exc
        self._client = client
        self._scripts = {
            name: client.register_script(source)
            for name, source in (
                ("append", _APPEND),
                ("window", _WINDOW),
                ("close", _CLOSE),
                ("claim", _CLAIM),
                ("finish", _FINISH),
            )
        }

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def health(self) -> str:
        import redis

        client = self._client
        if client is None:
            return "closed"
        try:
            client.ping()
        except redis.RedisError as exc:
            return f"unreachable: {exc}"
        return "ok"

    def _run(self, name: str, *args: object) -> Any:
        import redis

        if self._client is None:
            raise StoreError("the session store is not open")
        try:
            return self._scripts[name](args=[self._prefix, *args])
        except redis.RedisError as exc:
            raise StoreError(f"Redis session {name} failed: {exc}") from exc

    def append(
        self,
        ref: SessionRef,
        messages: Sequence[Message],
        candidates: Sequence[Candidate],
        *,
        now: datetime,
        expire_after_seconds: float | None,
        max_tokens: int | None,
        default_expire_after_seconds: float,
        default_max_tokens: int,
        reach: str,
        visibility: str,
        new_generation: str,
    ) -> SessionInfo:
        # A setting not given goes as '' (no number): the script keeps the generation's own.
        args: list[object] = [
            _ref_name(ref),
            _ms(now),
            new_generation,
            "" if expire_after_seconds is None else int(expire_after_seconds * 1000),
            "" if max_tokens is None else max_tokens,
            self._keep_ms,
            ref.namespace,
            ref.agent,
            ref.session_id,
            reach,
            visibility,
            len(messages),
            len(candidates),
            int(default_expire_after_seconds * 1000),
            default_max_tokens,
        ]
        for message in messages:
            args += [message_to_json(message), message.tokens]
        args += [candidate_to_json(candidate) for candidate in candidates]
        # The generation as the script left it, read in the script: a second read could
        # find it closed and promoted by another process in between (and nothing there).
        generation, record, count = self._run("append", *args)
        return _info(str(generation), _pairs(record), int(count))

    def window(self, ref: SessionRef, now: datetime) -> tuple[SessionInfo, list[Message]] | None:
        found = self._run("window", _ref_name(ref), _ms(now))
        if not found:
            return None
        generation, record, bodies = found
        return _info(str(generation), _pairs(record), len(bodies)), [message_from_json(body) for body in bodies]

    def sessions(
        self,
        namespace: str,
        agent: str | None,
        now: datetime,
        *,
        limit: int | None = None,
        after: tuple[datetime, str] | None = None,
    ) -> list[SessionInfo]:
        """Reads every generation of the namespace's set, then pages in process (a set
        keeps no order): the answer is bounded by ``limit``, the work is not."""
        import redis

        if self._client is None:
            raise StoreError("the session store is not open")
        try:
            generations = sorted(self._client.smembers(f"{self._prefix}:ns:{namespace}"))
            pipe = self._client.pipeline(transaction=False)
            for generation in generations:
                pipe.hgetall(f"{self._prefix}:g:{generation}")
                pipe.llen(f"{self._prefix}:g:{generation}:m")
            replies = pipe.execute()
        except redis.RedisError as exc:
            raise StoreError(f"Redis session listing failed: {exc}") from exc
        now_ms, found = _ms(now), []
        for number, generation in enumerate(generations):
            record, count = replies[2 * number], replies[2 * number + 1]
            if not record or record.get("state") != "open" or int(record["deadline"]) <= now_ms:
                continue
            if agent is not None and record["agent"] != agent:
                continue
            found.append(_info(generation, record, int(count)))
        found.sort(key=lambda info: (info.created_at, info.generation))
        if after is not None:
            position = (round(after[0].timestamp() * 1000), after[1])
            found = [i for i in found if (round(i.created_at.timestamp() * 1000), i.generation) > position]
        return found if limit is None else found[:limit]

    def close_session(self, ref: SessionRef, now: datetime, stale_after_seconds: float) -> Claimed | None:
        found = self._run("close", _ref_name(ref), _ms(now), int(stale_after_seconds * 1000))
        if not found:
            return None
        generation, *claimed = found
        return _claimed(str(generation), *claimed)

    def due(self, now: datetime, limit: int) -> list[str]:
        import redis

        if self._client is None:
            raise StoreError("the session store is not open")
        try:
            found = self._client.zrangebyscore(f"{self._prefix}:due", "-inf", _ms(now), start=0, num=limit)
        except redis.RedisError as exc:
            raise StoreError(f"Redis session listing failed: {exc}") from exc
        return [str(generation) for generation in found]

    def claim(self, generation: str, now: datetime, stale_after_seconds: float) -> Claimed | None:
        found = self._run("claim", generation, _ms(now), int(stale_after_seconds * 1000))
        if not found:
            return None
        return _claimed(generation, *found)

    def finish(self, generation: str) -> None:
        self._run("finish", generation)
