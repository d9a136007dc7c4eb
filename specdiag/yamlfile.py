"""Reading a YAML mapping safely (``yaml.safe_load``) with one-line errors, for every config file specdiag reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_mapping(path: str | Path, what: str = "settings") -> dict[str, Any]:
    """The top-level mapping of a YAML file; ``{}`` for an empty file. Raises ValueError with a one-line reason."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as e:
        raise ValueError(f"{path}: cannot read ({e.strerror or e})") from e
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of {what} at the top level, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}
