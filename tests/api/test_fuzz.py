"""Schema-driven fuzzing (schemathesis) of every endpoint in the OpenAPI document, in both
auth modes (tokens mode as an admin and as an agent with one namespace), against a real
server on a real SQLite file: no answer is a 5xx.

The short form runs with the suite (a few examples per operation, well under a minute); the
long form (``-m long``, FUZZ_EXAMPLES to change its size) tries many more.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck

from tests.api.conftest import LiveServer, start_server
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow

ROOT_TOKEN = "root-token-for-the-fuzz-tests"
AGENT_TOKEN = "agent-token-for-the-fuzz-tests"
SHORT_EXAMPLES = 8
LONG_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))


# The caller each server is fuzzed as: local mode, an admin token, and an agent's token
# that may read and write one namespace only (most operations then answer 403 or 404).
CALLERS = {"local": None, "tokens-admin": ROOT_TOKEN, "tokens-agent": AGENT_TOKEN}


@pytest.fixture(scope="module", params=sorted(CALLERS))
def fuzzed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    auth: dict[str, Any] = {"mode": "local"}
    if CALLERS[request.param] is not None:
        auth = {
            "mode": "tokens",
            "tokens": [
                {"agent": "root", "token": ROOT_TOKEN, "grants": ["*:a"]},
                {"agent": "agent", "token": AGENT_TOKEN, "grants": ["default:rw"]},
            ],
        }
    live = start_server(tmp_path_factory.mktemp("fuzz") / "data", HashingEmbedder(), auth=auth)
    live.app.state.fuzz_token = CALLERS[request.param]
    with requests.post(live.url + "/v1/memory/save", json={"content": "A memory to find"}, headers=_headers(live)):
        pass
    yield live
    live.stop()


def _headers(live: LiveServer) -> dict[str, str]:
    token = live.app.state.fuzz_token
    return {"Authorization": f"Bearer {token}"} if token else {}


def _operations(live: LiveServer) -> list[schemathesis.APIOperation]:
    schema = schemathesis.openapi.from_url(live.url + "/schema/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def _fuzz(live: LiveServer, examples: int) -> dict[str, int]:
    """Every operation with ``examples`` generated requests; returns how many each got.
    (schemathesis' own pytest integration does not run under this pytest, so the cases
    are drawn with hypothesis directly.)"""
    sent: dict[str, int] = {}
    failures: list[str] = []
    with requests.Session() as session:
        for operation in _operations(live):

            @hypothesis.given(case=operation.as_strategy())
            @hypothesis.settings(
                max_examples=examples,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
            )
            def run(case: schemathesis.Case) -> None:
                response = case.call(base_url=live.url, session=session, headers=_headers(live), timeout=60)
                sent[case.operation.label] = sent.get(case.operation.label, 0) + 1
                if response.status_code >= 500:
                    failures.append(f"{case.method} {case.formatted_path}: {response.status_code} {response.text}")

            run()
    assert failures == []
    return sent


def test_no_endpoint_answers_5xx(fuzzed: LiveServer) -> None:
    sent = _fuzz(fuzzed, SHORT_EXAMPLES)
    assert {"POST /v1/memory/save", "POST /v1/memory/recall", "POST /v1/import"} <= set(sent)
    assert all(count >= 1 for count in sent.values())


@pytest.mark.long
def test_no_endpoint_answers_5xx_long(fuzzed: LiveServer) -> None:
    sent = _fuzz(fuzzed, LONG_EXAMPLES)
    caller = next(name for name, token in CALLERS.items() if token == fuzzed.app.state.fuzz_token)
    print(f"{caller}: {sum(sent.values())} requests over {len(sent)} operations, none answered 5xx")
