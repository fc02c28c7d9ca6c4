"""Signature helpers: what senders compute is what the server accepts, and every defect is named."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from oomrl.errors import SignatureError
from oomrl.webhook.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, signature, verify

SECRET = "s3cret-s3cret-s3cret"
BODY = b'{"alert_id": "a1"}'


def test_signature_is_hmac_of_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert signature(BODY, SECRET, 1700000000) == "sha256=" + expected


def test_sign_then_verify_round_trips() -> None:
    headers = sign(BODY, SECRET, timestamp=1700000000)
    assert (
        verify(BODY, SECRET, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], now=1700000100)
        == 1700000000
    )


def test_sign_defaults_to_now() -> None:
    before = int(time.time())
    headers = sign(BODY, SECRET)
    stamp = verify(BODY, SECRET, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER])
    assert before <= stamp <= int(time.time())


@pytest.mark.parametrize(
    ("stamp", "sig", "message"),
    [
        (None, "sha256=00", "missing X-OOMRL-Timestamp"),
        ("1700000000", None, "missing X-OOMRL-Signature"),
        ("17e8", "sha256=00", "unix seconds"),
        ("-5", "sha256=00", "unix seconds"),
        ("²", "sha256=00", "unix seconds"),  # a digit to str.isdigit(), not to int()
        ("１７００００００００", "sha256=00", "unix seconds"),
        ("1699999000", "sha256=00", "stale"),
        ("1700000400", "sha256=00", "stale"),
        ("1700000000", "md5=00", "must start with"),
        ("1700000000", "sha256=" + "0" * 64, "does not match"),
        ("1700000000", "sha256=é", "does not match"),
    ],
)
def test_verify_names_each_defect(stamp: str | None, sig: str | None, message: str) -> None:
    with pytest.raises(SignatureError, match=message):
        verify(BODY, SECRET, stamp, sig, now=1700000000)


def test_signature_binds_body_timestamp_and_secret() -> None:
    headers = sign(BODY, SECRET, timestamp=1700000000)
    with pytest.raises(SignatureError):
        verify(
            BODY + b" ",
            SECRET,
            headers[TIMESTAMP_HEADER],
            headers[SIGNATURE_HEADER],
            now=1700000000,
        )
    with pytest.raises(SignatureError):
        verify(BODY, SECRET, "1700000001", headers[SIGNATURE_HEADER], now=1700000000)
    with pytest.raises(SignatureError):
        verify(
            BODY, SECRET + "x", headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], now=1700000000
        )


def test_tolerance_is_configurable() -> None:
    headers = sign(BODY, SECRET, timestamp=1700000000)
    verify(
        BODY,
        SECRET,
        headers[TIMESTAMP_HEADER],
        headers[SIGNATURE_HEADER],
        now=1700000900,
        tolerance_s=1000,
    )
    with pytest.raises(SignatureError, match="limit 10 s"):
        verify(
            BODY,
            SECRET,
            headers[TIMESTAMP_HEADER],
            headers[SIGNATURE_HEADER],
            now=1700000011,
            tolerance_s=10,
        )
