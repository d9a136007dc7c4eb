"""Inputs behind fsspec URLs (``s3://``, ``gs://``, ``az://``, …): listed and streamed in ranges, never downloaded.

Needs fsspec and the backend for the scheme (``pip install fsspec s3fs`` for S3). Credentials come
from the backend's usual chain (environment, profile, instance role) and are never printed: errors name
the URL and the kind of failure only.
"""

from __future__ import annotations

import io
import os
from typing import Any

from specdiag.ingest.sources import InputError, Source, is_probably_log

#: bytes fetched per range request: big enough for throughput, small enough for flat memory
BLOCK = 4 * 1024 * 1024


def is_url(path: str) -> bool:
    scheme, sep, _rest = path.partition("://")
    return bool(sep) and scheme.isascii() and scheme.replace("+", "").isalnum() and scheme != "file"


def filesystem(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError as e:
        raise InputError(f"{url}: remote inputs need fsspec and its backend (pip install fsspec s3fs, or gcsfs / adlfs for other schemes)") from e
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:
        scheme = url.split("://", 1)[0]
        raise InputError(f"{url}: no fsspec backend for {scheme}:// is installed ({type(e).__name__})") from e


class RemoteSource(Source):
    """A remote object read through the filesystem's buffered, range-requesting file object."""

    def __init__(self, fs: Any, rpath: str, display: str) -> None:
        super().__init__(display, display)
        self._fs = fs
        self._rpath = rpath

    def _open_raw(self):
        try:
            fh = self._fs.open(self._rpath, "rb", block_size=BLOCK, cache_type="readahead")
            # a BufferedReader gives ``peek``: compression is detected without consuming (as for local files)
            return fh if hasattr(fh, "peek") else io.BufferedReader(fh, buffer_size=BLOCK)
        except FileNotFoundError as e:
            raise InputError(f"{self.display}: no such object") from e
        except Exception as e:  # noqa: BLE001 - backend errors vary; name the kind, never the credentials
            raise InputError(f"{self.display}: cannot read ({type(e).__name__})") from e


def _url(fs: Any, rpath: str) -> str:
    return fs.unstrip_protocol(rpath)


def expand_remote(url: str) -> list[Source]:
    """The log objects at or under ``url`` (sorted), as Sources."""
    fs, path = filesystem(url)
    try:
        if fs.isdir(path):
            found = sorted(p for p in fs.find(path) if is_probably_log(p) and not os.path.basename(p).startswith("."))
            if not found:
                raise InputError(f"{url}: no log objects under it")
            return [RemoteSource(fs, p, _url(fs, p)) for p in found]
        if fs.exists(path):
            return [RemoteSource(fs, path, url)]
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{url}: cannot list ({type(e).__name__})") from e
    raise InputError(f"{url}: no such object or prefix")


def list_pods(url: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(pod name, pod URL) for each sub-prefix of ``url`` holding logs, and the log objects directly in it."""
    fs, path = filesystem(url)
    try:
        entries = fs.ls(path, detail=True)
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{url}: cannot list ({type(e).__name__})") from e
    pods, loose = [], []
    for entry in sorted(entries, key=lambda e: e["name"]):
        name = os.path.basename(entry["name"].rstrip("/"))
        if name.startswith("."):
            continue
        if entry.get("type") == "directory":
            pods.append((name, _url(fs, entry["name"])))
        elif is_probably_log(entry["name"]):
            loose.append(_url(fs, entry["name"]))
    return pods, loose
