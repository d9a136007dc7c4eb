"""Fake vLLM package for the repro cleanup tests (see api_server.py)."""
