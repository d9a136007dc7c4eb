"""specdiag: diagnose vLLM / LMCache / speculative-decoding incidents from their logs."""

__version__ = "0.1.0"
#: the distribution name (pyproject.toml; not published on PyPI, where "specdiag" is an unrelated project)
DISTRIBUTION = "specdiag-vllm"
