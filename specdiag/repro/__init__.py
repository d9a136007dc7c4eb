"""`specdiag repro`: differential-diagnosis experiments on real vLLM + LMCache servers.

Pipeline (one module per step, so each can be tested without vLLM):

* ``plan``        — toggles, presets and YAML plans expanded into a matrix of cells;
* ``materialise`` — one cell's vLLM argument list, environment and LMCache YAML (what ``--dry-run`` prints);
* ``server``      — start a server in its own session, wait for health, tear down the whole process tree;
* ``workload``    — the deterministic HTTP clients that provoke each symptom;
* ``backends``    — device specifics (CUDA: user model; CPU: tiny offline model + LMCache CPU connector) and Redis;
* ``executors``   — run cells locally one after another, or as Ray tasks;
* ``verdict``     — per-cell symptom counts and the differential across toggles.

Nothing here imports vLLM, torch or Rich at module import time: the CLI must stay fast.
"""
