"""Fake lmcache so the pre-flight check passes in the cleanup tests."""
