"""specdiag: diagnose vLLM / LMCache / speculative-decoding incidents from their logs."""

__version__ = "0.1.0"
#: the distribution name on PyPI (``pip install specdiag-vllm``); "specdiag" there is an unrelated project
DISTRIBUTION = "specdiag-vllm"
