"""SHA-1 hex digests of short texts (finding fingerprints), without loading OpenSSL.

``hashlib`` loads OpenSSL's ``libcrypto`` on import: 7.5 ms of every run's start on the 2-vCPU machine,
for a handful of 40-byte digests. CPython's own SHA-1 (``_sha1``, built into every build of 3.10–3.13 unless
it was configured out) gives the same digest for 0.6 ms; ``hashlib`` stays the fallback.
"""

from __future__ import annotations

try:
    from _sha1 import sha1 as _sha1
except ImportError:  # pragma: no cover - a build without CPython's own SHA-1
    from hashlib import sha1 as _sha1


def sha1_hex(text: str, errors: str = "replace") -> str:
    """The SHA-1 of ``text`` in UTF-8 (unencodable characters by ``errors``), as hex."""
    return _sha1(text.encode("utf-8", errors)).hexdigest()


__all__ = ["sha1_hex"]
