"""specdiag: diagnose vLLM / LMCache / speculative-decoding incidents from their logs."""

__version__ = "0.1.0"
