"""Logic written once for the sync and the async client: a *step* is a generator that
yields ``Call``s and is sent back each answer (or thrown the ``ClientError`` it raised);
``run`` drives one with a ``TwinmemClient``, ``arun`` with an ``AsyncTwinmemClient``.

    def remembered(key: str) -> Step[bool]:
        found = yield calls.by_key("user:42", key)
        return bool(found)

    run(client, remembered("theme"))          # or: await arun(aclient, remembered("theme"))
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from twinmem_client.async_client import AsyncTwinmemClient
from twinmem_client.calls import Call
from twinmem_client.client import TwinmemClient
from twinmem_client.errors import ClientError

T = TypeVar("T")
Step = Generator[Call[Any], Any, T]


def run(client: TwinmemClient, step: Step[T]) -> T:
    try:
        call = next(step)
        while True:
            try:
                answer = client.send(call)
            except ClientError as exc:
                call = step.throw(exc)
            else:
                call = step.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result


async def arun(client: AsyncTwinmemClient, step: Step[T]) -> T:
    try:
        call = next(step)
        while True:
            try:
                answer = await client.send(call)
            except ClientError as exc:
                call = step.throw(exc)
            else:
                call = step.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result
