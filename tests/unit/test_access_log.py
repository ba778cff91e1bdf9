from __future__ import annotations

import logging

import pytest

from api.cli import SecretsOutOfAccessLog, redacted_target


@pytest.mark.parametrize(
    ("target", "logged"),
    [
        ("/v1/memories?namespace=default&token=s3cr3t", "/v1/memories?namespace=default&token=[redacted]"),
        # A name sent percent-encoded is the same parameter to the server, which refuses it
        # (422) after uvicorn logged it; and a JSON web token or a password by its short name.
        ("/v1/memories?t%6Fken=s3cr3t", "/v1/memories?t%6Fken=[redacted]"),
        ("/v1/memories?access%5Ftoken=s3cr3t", "/v1/memories?access%5Ftoken=[redacted]"),
        ("/v1/memories?jwt=eyJhbGciOi&pwd=hunter2", "/v1/memories?jwt=[redacted]&pwd=[redacted]"),
        ("/v1/memories?namespace=default&limit=5", "/v1/memories?namespace=default&limit=5"),
        ("/v1/memories", "/v1/memories"),
    ],
)
def test_an_access_line_keeps_credentials_given_in_the_url_out(target: str, logged: str) -> None:
    assert redacted_target(target) == logged
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", target, "1.1", 422),
        None,
    )
    assert SecretsOutOfAccessLog().filter(record)
    assert record.getMessage() == f'127.0.0.1:5 - "GET {logged} HTTP/1.1" 422'
