"""The loaded catalog: entries, their indexes, and message matching.

Loaded once (``specdiag.catalog.catalog()``) from the gzip JSONL the generator wrote. Three text indexes
make dispatch O(1) per message: by the first literal word (``first``), by the first characters of a
format that starts with a word glued to a placeholder (``prefix``), and, for formats that start with a
placeholder, by the first whole word of their first literal (``inner``, looked up for the first
``INNER_TOKENS`` tokens of the message). A location index answers ``file:line`` first. Candidates of each
list are sorted most specific first, so the first that fits is that list's best.
"""

from __future__ import annotations

import json
from array import array
from pathlib import Path

from specdiag.catalog.entry import Entry
from specdiag.catalog.pattern import Pattern, compile_fmt, fits, render

DATA = Path(__file__).with_name("messages.jsonl")
PREFIX_CHARS = 4
INNER_TOKENS = 16
#: (file, line) places whose entries are kept once asked (cleared past it: bounded whatever a log holds)
MAX_PLACES = 65_536
MIN_LITERAL = 4  # non-space characters a format's longest literal needs before its text alone can match
#: literal characters (a row's weight) a format needs before a line printed at a file no catalogued release has
#: is taken for its message (moved there in a newer build): ``Failed to load %s`` fits too many other lines
ELSEWHERE_MIN_WEIGHT = 24
#: the modules of a source tree that no serving process runs (LMCache's ``tools/controller_benchmark``; vLLM's
#: ``benchmarks/`` is its ``vllm bench`` command, whose lines users do paste): a line whose place is not known is never
#: taken for theirs by its text (``Error in %s: %s`` of the controller benchmark fitted a lookup server's error of a
#: release before the catalog, LMCache #651)
NOT_SERVING = ("tools/",)
PROJECTS = {"lmc": "lmcache", "vll": "vllm"}

class Cand:
    """A matchable entry: how specific its format is (``rank``, what the indexes sort by) and its pattern,
    compiled on first use: a log meets few of the ten thousand formats, so loading compiles none."""

    __slots__ = ("entry", "rank", "_pattern")

    def __init__(self, entry: Entry, weight: int, typed: int) -> None:
        self.entry = entry
        #: most specific first: more literal text, then more typed placeholders, then the newer release
        self.rank = (weight, typed, entry.newest())
        self._pattern: Pattern | None = None

    @property
    def pattern(self) -> Pattern:
        if self._pattern is None:
            self._pattern = compile_fmt(self.entry.fmt or "")
        return self._pattern


def dispatch(fmt: str) -> dict:
    """What the loader needs of a format without compiling it, stored in the data by the generator:
    ``w`` literal characters, ``t`` typed placeholders, and ``ix`` = [table, key] of the text index it
    is filed under (absent: its text says too little, it is found by location only)."""
    p = compile_fmt(fmt)
    out: dict = {"w": p.weight, "t": p.typed}
    key = index_key(p)
    if key is not None:
        out["ix"] = list(key)
    return out


def index_key(p: Pattern) -> tuple[str, str] | None:
    """The text index a pattern is filed under and its key: ``first`` (its first literal word),
    ``prefix`` (the first characters of a word glued to a placeholder) or ``inner`` (the first whole word
    of a later literal, for a format that starts with a placeholder); None below ``MIN_LITERAL``."""
    if p.longest < MIN_LITERAL:
        return None
    lits = p.lits
    if lits[0]:
        word = lits[0].split(None, 1)[0]
        if len(lits) == 1 or len(word) < len(lits[0]):
            return "first", word
        return "prefix", word[:PREFIX_CHARS]
    for i, lit in enumerate(lits[1:], 1):
        parts = lit.split()
        lo = 0 if lit[:1].isspace() else 1  # a word glued to the placeholder before it is not whole
        hi = len(parts) - (0 if lit[-1:].isspace() or i == len(lits) - 1 else 1)
        if lo < hi:
            return "inner", parts[lo]
    return None


def found_by_its_text(p: Pattern) -> bool:
    """Whether ``Catalog._text`` finds this format for every text it fits: it is filed under its first
    literal's first word (``first``) or first characters (``prefix``), which such a text starts with. A
    format that starts with a placeholder is filed under a later word, looked for only among a text's first
    ``INNER_TOKENS`` tokens, which a long value can push out."""
    key = index_key(p)
    return key is not None and key[0] in ("first", "prefix")


def build_index(rows: list[dict]) -> dict:
    """What loading needs without reading the rows: each row's id, the rows of each file's basename, the
    lines each row prints at in some release (comma-joined: a place's rows are found without decoding the
    others of its file), and the three text indexes (project → key → rows, most specific first). The generator stores it beside the
    rows (``write_data``), so a process reads only the rows it meets; a file without it is indexed here."""
    base: dict[str, list[int]] = {}
    tables: dict[str, dict[str, dict[str, list[int]]]] = {t: {p: {} for p in PROJECTS.values()}
                                                         for t in ("first", "prefix", "inner")}
    rank = []
    for i, row in enumerate(rows):
        base.setdefault(_basename(row["module"]), []).append(i)
        rank.append((row.get("w", 0), row.get("t", 0), row["runs"][-1][1]))
        ix = row.get("ix")
        if row.get("fmt") is not None and ix is not None:
            tables[ix[0]][PROJECTS[row["id"][:3]]].setdefault(ix[1], []).append(i)
    for index in tables.values():
        for table in index.values():
            for cands in table.values():
                cands.sort(key=lambda i: rank[i], reverse=True)  # stable: row order among equals
    lines = [",".join(map(str, sorted({run[2] for run in r["runs"]}))) for r in rows]
    return {"ids": [r["id"] for r in rows], "base": base, "lines": lines, **tables}


#: the levels whose records the prefilter may count unread (``prefilter.QUIET_LEVELS`` is this tuple)
TEXT_CANDIDATE_LEVELS = ("DEBUG", "INFO")
#: the letter of each text index in a text candidate's key
_TABLE_LETTER = {"first": b"f", "prefix": b"p", "inner": b"i"}


def candidate_key(level: bytes, table: str, word: bytes) -> bytes:
    """A text candidate's key (``build_text_candidates``): the level's initial (``D``/``I``), the letter of the
    index (``first``, ``prefix``, ``inner``), the word it is filed under; the prefilter makes the same keys of
    a text's words (``prefilter.unrecognisable``)."""
    return level[:1] + _TABLE_LETTER[table] + word


def build_text_candidates(rows: list[dict]) -> dict[str, list[str]]:
    """Per project, every DEBUG or INFO format that ``match``'s text search can find, as one line each:
    its key (the level's initial, the index's letter, the word it is filed under: ``candidate_key``)
    then, unit-separated (0x1f), its kinds and literals when it is a simple pattern the prefilter can check
    (one line, ``%s`` and ``%d`` only, printable ASCII literals: ``prefilter.simple_fits`` fits exactly what
    ``fits`` does), else the key alone (a text reaching it is taken as recognised). Keys beyond ASCII are
    left out: the prefilter checks only texts of printable ASCII. Sorted, as the compiled copy looks them
    up. Stored beside the index (``write_data``), so no process compiles these 4,000 formats (≈ 190 ms)."""
    out: dict[str, list[str]] = {p: [] for p in PROJECTS.values()}
    for row in rows:
        ix, fmt = row.get("ix"), row.get("fmt")
        if fmt is None or ix is None or row["level"] not in TEXT_CANDIDATE_LEVELS or not ix[1].isascii():
            continue
        key = candidate_key(row["level"].encode(), ix[0], ix[1].encode()).decode()
        p = compile_fmt(fmt)
        simple = (p.head is None and p.flat is None and not set(p.kinds) - {"s", "d"} and len(p.kinds) <= 64
                  and all(x.isascii() and x.isprintable() for x in p.lits))
        out[PROJECTS[row["id"][:3]]].append("\x1f".join((key, p.kinds, *p.lits)) if simple else key)
    return {project: sorted(lines) for project, lines in out.items()}


class Catalog:
    """Every catalogued message of both projects, with lookup by id, location, format text and message.

    Rows are kept as the data file's JSON text and made into entries when first asked (a log meets a few
    hundred of the ten thousand); the index says where each one is filed."""

    def __init__(self, header: dict, rows: list[bytes] | list[dict], index: dict | None = None,
                 text_raw: bytes | None = None) -> None:
        self.header = header
        #: the data file's text-candidates line, decoded when first asked (``text_candidate_lines``)
        self._text_raw = text_raw
        self._text_candidates: dict[str, list[str]] | None = None
        self.releases: dict[str, list[str]] = header["releases"]
        self._rows = rows
        if index is None:
            index = build_index([r if isinstance(r, dict) else json.loads(r) for r in rows])
        if len(index["ids"]) != len(rows):
            raise ValueError(f"catalog index names {len(index['ids'])} rows, the data has {len(rows)}")
        self._built: list[Entry | None] = [None] * len(rows)
        self._cands: list[Cand | None] = [None] * len(rows)
        self._ids: dict[str, int] = {x: i for i, x in enumerate(index["ids"])}
        #: basename -> its rows; ``(basename, line)`` -> entries printing there, filled as asked
        self._by_base: dict[str, list[int]] = index["base"]
        #: each row's printed lines as the index spells them ("350,372"), made a set when its file is asked
        self._lines: list[str] = index["lines"]
        self._line_sets: dict[int, frozenset[str]] = {}
        #: (printed file, line, project, level) -> (its entries, their candidates), filled as asked
        self._places: dict[tuple, tuple[list[Entry], list[Cand]]] = {}
        self._at: dict[tuple[str, int], list[Entry]] = {}
        self._first: dict[str, dict[str, list[int]]] = index["first"]
        self._prefix: dict[str, dict[str, list[int]]] = index["prefix"]
        self._inner: dict[str, dict[str, list[int]]] = index["inner"]
        self._all: list[Entry] | None = None

    def _entry(self, i: int) -> Entry:
        """Row ``i`` as an entry (made once), with its candidate when it has a format."""
        e = self._built[i]
        if e is None:
            row = self._rows[i]
            row = row if isinstance(row, dict) else json.loads(row)
            project = PROJECTS[row["id"][:3]]
            runs = array("I", [n for run in row["runs"] for n in run])
            e = self._built[i] = Entry(row["id"], project, row["module"], row["level"], row["fmt"],
                                       row.get("family"), runs, self.releases[project], row.get("expr"))
            if e.fmt is not None:
                self._cands[i] = Cand(e, row["w"], row["t"])
        return e

    def _cand(self, i: int) -> Cand | None:
        if self._built[i] is None:
            self._entry(i)
        return self._cands[i]

    def pattern_of(self, entry: Entry) -> Pattern | None:
        """The compiled pattern the catalog matches ``entry``'s messages with (None: no format)."""
        i = self._ids.get(entry.id)
        c = None if i is None else self._cand(i)
        return None if c is None else c.pattern

    @property
    def entries(self) -> list[Entry]:
        """Every entry, in the data's order (makes them all: for the docs, coverage and tests)."""
        if self._all is None:
            self._all = [self._entry(i) for i in range(len(self._rows))]
        return self._all

    def by_id(self, entry_id: str) -> Entry | None:
        """The entry with this stable id, or None."""
        i = self._ids.get(entry_id)
        return None if i is None else self._entry(i)

    def at(self, base: str, line: int, project: str | None = None) -> list[Entry]:
        """Entries that print at ``base:line`` (a file's basename) in at least one release, of ``project`` if given.

        The version fingerprint reads ``entry.lines`` of each to learn which releases print there.
        """
        here = self._printing_at(base, line)
        return here if project is None else [e for e in here if e.project == project]

    def modules_named(self, base: str) -> frozenset[str]:
        """The catalogued modules (``v1/engine/core.py``) of every entry of files with this basename."""
        return frozenset(self._entry(i).module for i in self._by_base.get(base, ()))

    def _printing_at(self, base: str, line: int) -> list[Entry]:
        """The entries of file ``base`` that print at ``line`` in some release: found among that file's
        entries on first ask and kept (a log prints from few places, so few are ever asked)."""
        key = (base, line)
        here = self._at.get(key)
        if here is None:
            if len(self._at) >= MAX_PLACES:
                self._at.clear()
            here = self._at[key] = [self._entry(i) for i in self._rows_at(base, line)]
        return here

    def _rows_at(self, base: str, line: int) -> list[int]:
        """The rows of file ``base`` that print at ``line``: read off the index's line lists, so the file's
        other rows stay undecoded (a log that prints from 130 places of 130 files decoded 4,000 rows)."""
        want, sets, out = str(line), self._line_sets, []
        for i in self._by_base.get(base, ()):
            s = sets.get(i)
            if s is None:
                s = sets[i] = frozenset(self._lines[i].split(","))
            if want in s:
                out.append(i)
        return out

    def find_format(self, project: str, fmt_substring: str) -> list[Entry]:
        """Entries of ``project`` whose format contains this literal text (to point templates at entries)."""
        return [e for e in self.entries if e.project == project and e.fmt is not None and fmt_substring in e.fmt]

    def sample(self, entry: Entry) -> str:
        """The message rendered with typed sample values; empty for an entry without a format."""
        p = self.pattern_of(entry)
        return "" if p is None else render(entry.fmt or "", p)

    def values(self, entry: Entry, message: str) -> list[str] | None:
        """The placeholder texts of ``message`` when it is this entry's message, else None."""
        p = self.pattern_of(entry)
        return None if p is None else fits(p, message.strip())

    def match(self, message: str, *, project: str | None = None, file: str | None = None,
              line: int | None = None, level: str | None = None) -> Entry | None:
        """The entry that printed ``message`` (the text after the envelope), or None.

        With ``file`` and ``line``: the entries at that location (any release) whose format fits the
        text, best first; then a text match within that file; then the location alone when only one
        entry was ever there; then the text alone. Without them: the text alone.
        """
        msg = message.strip()
        if file and line is not None:
            base = file.replace("\\", "/").rsplit("/", 1)[-1]
            here, cands = self._located(base, file, line, project, level)
            got = self._best(cands, msg)
            if got is not None:
                return got
            got = self._text(msg, project, level, base) if base in self._by_base else None  # a file the catalog knows
            if got is not None:
                return got
            if here and len({(e.fmt, e.level) for e in here}) == 1:
                return here[-1]  # one message ever printed there (its copies in moved modules are one)
            opaque = [e for e in here if e.fmt is None]
            if opaque and len({e.level for e in opaque}) == 1:
                return opaque[-1]  # no format there fits the text: the one message whose text is a variable
            if base not in self._by_base:  # a file no catalogued release has: a message moved there, if specific
                return self._text(msg, project, level, None, ELSEWHERE_MIN_WEIGHT)
        return self._text(msg, project, level, None)

    def simple_pattern_here(self, entry: Entry, file: str, line: int, *, project: str | None,
                            level: str | None) -> tuple[tuple[str, ...], str] | None:
        """``entry``'s literals and placeholder kinds when ``match`` recognises any text it fits at
        ``file:line``, and its format is simple enough to check without the catalog (one line, placeholders
        of kinds ``s`` and ``d`` only); else None.

        Either ``entry`` is one of the messages printed there (``match`` tries each of them on the text), or
        its text is found wherever it is printed: a format that starts with a literal is filed under that
        literal's first word or characters, which every text it fits starts with, so ``match``'s text
        search finds it (or a better entry) at any place. That is what keeps a release newer than the
        catalog, whose lines moved, from reading every DEBUG record of a place only to count it."""
        base = file.replace("\\", "/").rsplit("/", 1)[-1]
        p = self.pattern_of(entry)
        if p is None or project is not None and entry.project != project or level is not None and entry.level != level:
            return None
        here, _ = self._located(base, file, line, project, level)
        if entry not in here and not found_by_its_text(p):
            return None
        if p.head is not None or p.flat is not None or set(p.kinds) - {"s", "d"} or any("\n" in x for x in p.lits):
            return None
        return p.lits, p.kinds

    def nothing_printed_at(self, file: str, line: int, *, project: str | None, level: str | None) -> bool:
        """Whether no catalogued release prints a message of ``project`` at this ``level`` at ``file:line``:
        ``match`` then finds an entry for a text there only through its text indexes (``text_keys``)."""
        base = file.replace("\\", "/").rsplit("/", 1)[-1]
        return not self._located(base, file, line, project, level)[0]

    def text_candidate_lines(self, project: str) -> list[str]:
        """The stored ``build_text_candidates`` lines of ``project`` (built from the rows where the data file
        has none): what the prefilter checks a text nothing else recognises against."""
        if self._text_candidates is None:
            self._text_candidates = (json.loads(self._text_raw)["text_candidates"] if self._text_raw is not None
                                     else build_text_candidates([r if isinstance(r, dict) else json.loads(r)
                                                                 for r in self._rows]))
        return self._text_candidates.get(project, [])

    def one_message_at(self, file: str, line: int, *, project: str | None, level: str | None) -> bool:
        """Whether exactly one message (format and level) was ever printed at ``file:line`` at this level:
        ``match`` then returns an entry for any text there."""
        base = file.replace("\\", "/").rsplit("/", 1)[-1]
        here, _ = self._located(base, file, line, project, level)
        return bool(here) and len({(e.fmt, e.level) for e in here}) == 1

    def _located(self, base: str, file: str, line: int, project: str | None,
                 level: str | None) -> tuple[list[Entry], list[Cand]]:
        """The matchable candidates ever at ``file:line`` (same basename; a longer printed path must agree
        with the module), of that project and level; kept per place, as a log prints from few places and
        repeats them (a DEBUG line of an internal loop, a million times)."""
        key = (file, line, project, level)
        got = self._places.get(key)
        if got is None:
            if len(self._places) >= MAX_PLACES:
                self._places.clear()
            here = self._entries_at(base, file, line, project, level)
            got = self._places[key] = (here, [c for c in (self._cand(self._ids[e.id]) for e in here) if c is not None])
        return got

    def _entries_at(self, base: str, file: str, line: int, project: str | None, level: str | None) -> list[Entry]:
        here = self._printing_at(base, line)
        if project is not None or level is not None:
            here = [e for e in here if (project is None or e.project == project) and (level is None or e.level == level)]
        tail = file.replace("\\", "/")
        if "/" in tail and "…" not in tail and "..." not in tail:
            for root in ("/vllm/", "/lmcache/"):
                tail = tail.rsplit(root, 1)[-1]
            tail = tail.removeprefix("vllm/").removeprefix("lmcache/")
            agree = [e for e in here if e.module.endswith(tail) or tail.endswith(e.module)]
            here = agree or here
        return here

    @staticmethod
    def _best(cands: list[Cand], msg: str) -> Entry | None:
        """The most specific candidate that fits (more literal text, then newer release)."""
        best: Cand | None = None
        for c in cands:
            if (best is None or c.rank > best.rank) and fits(c.pattern, msg) is not None:
                best = c
        return None if best is None else best.entry

    def _text(self, msg: str, project: str | None, level: str | None, base: str | None,
              min_weight: int = 0) -> Entry | None:
        """Text-only matching through the indexes; ``base`` keeps only entries of that file, ``min_weight`` only
        formats with that much literal text."""
        best: Cand | None = None
        projects = [project] if project else list(self._first)
        head = msg[:4096].split(None, INNER_TOKENS)[:INNER_TOKENS]
        first = head[0] if head else ""
        for proj in projects:
            lists = [self._first[proj].get(first)]
            lists += [self._prefix[proj].get(msg[:k]) for k in range(1, PREFIX_CHARS + 1)]
            inner = self._inner[proj]
            lists += [inner.get(w) for w in head]
            for cands in lists:
                if not cands:
                    continue
                for i in cands:
                    c = self._cand(i)
                    if c is None:
                        continue
                    if (best is not None and c.rank <= best.rank) or c.rank[0] < min_weight:
                        break  # sorted: nothing later in this list beats the best so far, or is specific enough
                    e = c.entry
                    if (level is None or e.level == level) and (_basename(e.module) == base if base is not None
                                                                 else not e.module.startswith(NOT_SERVING)) \
                            and fits(c.pattern, msg) is not None:
                        best = c
                        break
        return None if best is None else best.entry


def _basename(module: str) -> str:
    return module.rsplit("/", 1)[-1]


def load(path: Path = DATA) -> Catalog:
    """Read the shipped data file (JSONL: a header line, the index line, the text candidates' line, then one
    entry per line; a file without the index or the candidates is indexed from its rows).
    The rows stay JSON text until asked for (``Catalog._entry``). The file is stored uncompressed: inflating
    its 3 MB took 16 ms of every run's start; reading its 4.3 MB takes 1-2 ms (the wheel and git compress it)."""
    lines = path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    rows = [ln for ln in lines[1:] if ln.strip()]
    index = text_raw = None
    if rows and rows[0].startswith(b'{"index":'):
        index = json.loads(rows[0])["index"]
        rows = rows[1:]
    if rows and rows[0].startswith(b'{"text_candidates":'):
        text_raw, rows = rows[0], rows[1:]
    return Catalog(header, rows, index, text_raw)


def write_data(path: Path, header: dict, rows: list[dict]) -> None:
    """Deterministic JSONL: the header, the index of ``rows`` (``build_index``), their text candidates
    (``build_text_candidates``), the rows."""
    out = [json.dumps(header, sort_keys=True, separators=(",", ":")),
           json.dumps({"index": build_index(rows)}, separators=(",", ":"), ensure_ascii=False),
           json.dumps({"text_candidates": build_text_candidates(rows)}, separators=(",", ":"), ensure_ascii=False)]
    out += [json.dumps(row, separators=(",", ":"), ensure_ascii=False) for row in rows]
    path.write_bytes(("\n".join(out) + "\n").encode())
