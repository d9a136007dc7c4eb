"""The wording of the messages the scanner reads natively, written once.

A busy server's log is mostly LMCache's store (S1), retrieve (R4) and scheduler lookup (L1) lines and, on a
metric-dense server, vLLM's stats (V_STATS) and SpecDecoding (V_SPEC) lines, so several readers parse them:
the scanner's pure-Python reference (``ingest/scan.py``), its no-compiler fallback (``ingest/scan_fast.py``),
the compiled scanner (``ingest/_scan.c``, through ``_wording.h``, which ``setup.py`` writes from this file when
it builds the extension), the events templates the per-line path matches (``events/lmcache.py``,
``events/vllm.py``), the metric lines' key/value parser (``metrics/parse.py``), and the look-backs and the
repro parser that search raw lines for them. Each takes the literals from here, so a release that rewords
one of these messages is one edit here; the differential tests (``tests/test_scan_differential.py``) hold
the readers to the same decisions, and ``tests/test_wording.py`` fails when one of them spells a literal
itself.

The formats are the catalog's (``lmc.*`` entries of ``v1/cache_engine.py`` and
``integration/vllm/vllm_v1_adapter.py``, ``vll.*`` of ``v1/spec_decode/metrics.py``; vLLM builds its stats line
from parts at run time); these are the pieces between their placeholders. Each is a plain string
assignment, which ``setup.py`` reads with ``ast`` (the package is not importable while it is built);
``BYTES``, ``REGEX`` and ``BYTES_REGEX`` hold the same literals as bytes, as escaped pattern text and as
escaped bytes pattern text.
"""

import re
from collections.abc import Callable
from typing import Any

# ---- the optional "[req_id=ID] " tag before a store or a retrieve message (0.3.15+; the id holds no "]")
TAG_OPEN = "[req_id="
TAG_CLOSE = "]"

# ---- S1, v1/cache_engine.py: "Stored N out of total M tokens. size: …"
STORED = "Stored "
OUT_OF_TOTAL = " out of total "
TOKENS = " tokens"

# ---- R4, v1/cache_engine.py: "Retrieved R out of Q required tokens (from T total tokens). size: …" (0.3.9+),
#      or "Retrieved R out of [total ]Q out of total T tokens" (0.3.3–0.3.5, and the layerwise line)
RETRIEVED = "Retrieved "
OUT_OF = " out of "
LEGACY_TOTAL = "total "
REQUIRED_FROM = " required tokens (from "
TOTAL_TOKENS_CLOSE = " total tokens)"

# ---- L1, integration/vllm/vllm_v1_adapter.py: "Reqid: ID, Total tokens N, [Inference Engine computed
#      tokens: C, ]LMCache hit tokens: H|None[, [but ]need to load: [-]L]" (computed tokens 0.3.15+)
REQID = "Reqid: "
TOTAL_TOKENS = " Total tokens "
SEP = ", "
COMPUTED = "Inference Engine computed tokens: "
HIT = "LMCache hit tokens: "
NO_HIT = "None"
BELOW_MIN = "but "
NEED = "need to load: "



# ---- vLLM's periodic stats line (V_STATS), v1/metrics/loggers.py (0.8.5 :111 to 0.32.0 :335): "Engine NNN: Avg
#      prompt throughput: X tokens/s, Avg generation throughput: X tokens/s, Running: N reqs, Waiting: N reqs,
#      [Preemptions: N, ]GPU|CPU KV cache usage: X%[, Prefix cache hit rate: X%][, External prefix cache hit rate:
#      X%]", or "N Engines Aggregated: …"; each key is followed by KEY_END
ENGINE = "Engine "
ENGINES_AGGREGATED = " Engines Aggregated"
KEY_END = ": "
PROMPT_TPS = "Avg prompt throughput"
GEN_TPS = "Avg generation throughput"
PER_SECOND = " tokens/s"
RUNNING = "Running"
WAITING = "Waiting"
REQS = " reqs"
PREEMPTIONS = "Preemptions"
KV_DEVICE_GPU = "GPU"
KV_DEVICE_CPU = "CPU"  # vLLM's CPU backend (0.30+)
KV_USAGE = " KV cache usage"
PREFIX_HIT = "Prefix cache hit rate"
EXT_HIT = "External prefix cache hit rate"

# ---- the SpecDecoding line (V_SPEC), v1/spec_decode/metrics.py: "SpecDecoding metrics: Mean acceptance length: X,
#      Accepted throughput: X tokens/s, Drafted throughput: X tokens/s, Accepted: N tokens, Drafted: N tokens,
#      Per-position acceptance rate: X, X, …, Avg Draft acceptance rate: X%" (0.10.2–0.32.0), or "SpecDecoding
#      metrics: Draft acceptance rate: X%, Mean acceptance length: X, Accepted: N tokens, Drafted: N tokens,
#      Per-position acceptance rate: X, X, …" (0.8.5–0.10.1); "Speculative metrics: …" before that
SPEC = "SpecDecoding metrics"
SPEC_OLD = "Speculative metrics"
SPEC_MEAN_LENGTH = "Mean acceptance length"
SPEC_ACCEPTED_TPS = "Accepted throughput"
SPEC_DRAFTED_TPS = "Drafted throughput"
SPEC_ACCEPTED = "Accepted"
SPEC_DRAFTED = "Drafted"
SPEC_PER_POSITION = "Per-position acceptance rate"
SPEC_AVG_RATE = "Avg Draft acceptance rate"
SPEC_RATE = "Draft acceptance rate"

# ---- what makes the prefilter read a line that no other test of its keeps: any of these anywhere in it (a process
# prefix, a traceback's lines, an exception, StopIteration and StopAsyncIteration by their ``Iteration``, a version
# line, a JSON or kubectl or journald wrapper, CUDACHECK's exit, pydantic's reason, apache-tvm-ffi's segfault
# banner, NCCL's WARN lines by ``CL WARN `` so that its INFO flood's ``NCCL`` starts no candidate, the shell's ``Killed``, NCCL's reasons as torch relays them under ``Last error:``, each anchored
# past its first letters, whose trigram other lines start often: ``Proxy``, ``Dup``). Both copies read this one tuple: ``prefilter.ANCHORS`` and ``_prefilter.c`` (``W_PREFILTER_ANCHORS``)
PREFILTER_ANCHORS = ("LMCache", "lmcache", "vllm", "vLLM", "VLLM", "pid=", "Traceback", 'File "', "Error", "Exception",
                     "Exit", "Interrupt", "During handling", "The above exception", "version", '"log"', '"levelname"',
                     "[pod/", "]: ", "Iteration", "Cuda error", "Value error, ", "Assertion error, ",
                     "Segfault encountered", "Memory access fault", "HSA_STATUS_ERROR", "api_server.py: error: ",
                     "CUDA error (", "] Assertion `", "there is an exception of", "CL WARN ", "Killed",
                     "tStartConnect", "oxy Call to rank", "uplicate GPU detected", "OfResources", "-lcuda",
                     "-l:libcuda", "OfflineMode", "ptxas fatal")
# ---- a line of raw text (no envelope) that the reader keeps for any of these words in it (``records``: besides
# exception lines, LMCache's banner and version lines); each is one of PREFILTER_ANCHORS (a test holds it)
KEPT_TEXT_WORDS = ("Error", "Cuda error", "Value error, ", "Assertion error, ", "Memory access fault", "HSA_STATUS_ERROR",
                   "CUDA error (", "] Assertion `", "there is an exception of", "CL WARN ", "Killed",
                   "tStartConnect", "oxy Call to rank", "uplicate GPU detected", "OfResources", "-lcuda",
                   "-l:libcuda", "OfflineMode", "ptxas fatal")


class _Forms:
    """Every literal above in one other form, by name (``BYTES.STORED == b"Stored "``)."""

    def __init__(self, source: dict, form: Callable[[str], Any]) -> None:
        for name, value in source.items():
            if name.isupper() and isinstance(value, str):
                setattr(self, name, form(value))
            elif name.isupper() and isinstance(value, tuple):
                setattr(self, name, tuple(form(v) for v in value))

    def __getattr__(self, name: str) -> Any:  # for type checkers: every literal has its form here
        raise AttributeError(name)


#: the literals as bytes, what the scanners compare raw lines with
BYTES = _Forms(dict(globals()), lambda text: text.encode("ascii"))
#: the literals escaped for a ``str`` pattern, what the events templates and the repro parser build theirs from
REGEX = _Forms(dict(globals()), re.escape)
#: the literals escaped for a ``bytes`` pattern, what the no-compiler scanner (``scan_fast``) builds its from
BYTES_REGEX = _Forms(dict(globals()), lambda text: re.escape(text.encode("ascii")))
