"""Which deployments a fleet root holds: one input group per pod folder.

A root's immediate sub-folders that contain log files are one deployment each (id: the folder's path
relative to the root, as in ``logs/<pod>/``); log files lying directly in a root form one more group
(merged streams: ``kubectl logs --prefix`` pods inside them become deployments of their own while read).
"""

from __future__ import annotations

import os

from specdiag.deployments import InputGroup
from specdiag.ingest.remote import is_url, list_pods
from specdiag.ingest.sources import InputError, is_probably_log


def discover(roots: list[str]) -> list[InputGroup]:
    """Input groups for the roots, in a stable order. Raises InputError for a missing root."""
    groups: list[InputGroup] = []
    for root in roots:
        if is_url(root):
            groups.extend(_remote_groups(root, len(roots)))
            continue
        if not os.path.isdir(root):
            if os.path.isfile(root):
                groups.append(InputGroup(os.path.basename(root), (root,)))
                continue
            raise InputError(f"{root}: no such folder")
        loose: list[str] = []
        for name in sorted(os.listdir(root)):
            full = os.path.join(root, name)
            if name.startswith("."):
                continue
            if os.path.isdir(full) and not os.path.islink(full) and _holds_logs(full):
                groups.append(InputGroup(_rel_id(root, name, len(roots)), (full,)))
            elif os.path.isfile(full) and is_probably_log(full):
                loose.append(full)
        if loose:
            groups.append(InputGroup(_rel_id(root, ".", len(roots)), tuple(loose)))
    if not groups:
        raise InputError(f"{', '.join(roots)}: no log files found")
    return groups


def _remote_groups(url: str, n_roots: int) -> list[InputGroup]:
    pods, loose = list_pods(url)
    base = url.rstrip("/").rsplit("/", 1)[-1] if n_roots > 1 else ""
    groups = [InputGroup(f"{base}/{name}" if base else name, (pod_url,)) for name, pod_url in pods]
    if loose:
        groups.append(InputGroup(base or url, tuple(loose)))
    return groups


def _rel_id(root: str, name: str, n_roots: int) -> str:
    base = os.path.basename(os.path.normpath(root)) if n_roots > 1 else ""
    if name == ".":
        return base or os.path.basename(os.path.normpath(root)) or root
    return f"{base}/{name}" if base else name


def _holds_logs(folder: str) -> bool:
    for _dirpath, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(is_probably_log(os.path.join(_dirpath, f)) for f in files):
            return True
    return False
