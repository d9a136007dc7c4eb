"""``specdiag.digests``: the fingerprints are the SHA-1 hashlib gives, without loading OpenSSL."""

from __future__ import annotations

import hashlib

import pytest

from specdiag.digests import sha1_hex


@pytest.mark.parametrize("text", ["", "KV001|Num retrieved tokens: 49664", "é\u2028\U0001f600", "lone \udc80 surrogate"])
@pytest.mark.parametrize("errors", ["replace", "surrogateescape"])
def test_the_digest_is_hashlibs_sha1_of_the_text_encoded_the_same_way(text: str, errors: str) -> None:
    assert sha1_hex(text, errors) == hashlib.sha1(text.encode("utf-8", errors)).hexdigest()
