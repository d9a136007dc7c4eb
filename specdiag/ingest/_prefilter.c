/* The compiled prefilter behind specdiag.ingest.prefilter.kinds: which rare lines can never make a record.
 *
 * Implements exactly the reference in prefilter.py (inert_kind and the helpers it names); the differential
 * test (tests/test_prefilter.py) requires byte-identical kinds. Every loop here moves forward over the
 * line, and the wrapper places are bounded (MAX_PLACES), so a line costs linear time whatever it holds.
 * Runs without the GIL on read-only buffer views.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

typedef unsigned char u8;

#define KEEP 0
#define INERT 1
#define PREFIXED 2
#define ESC_BLOCK 1
#define RESIDUE_BLOCK 2
#define MAX_INERT_LINE 4096
#define MAX_PLACES 24
#define MAX_DEPTH 6
#define MAX_PID_DIGITS 18

static const char *const anchors[] = {
    "LMCache", "lmcache", "vllm", "vLLM", "VLLM", "pid=", "Traceback", "File \"", "Error",
    "Exception", "Exit", "Interrupt", "During handling", "The above exception", "version",
    "\"log\"", "\"levelname\"", "[pod/", "]: ",
};
#define N_ANCHORS (sizeof(anchors) / sizeof(anchors[0]))
static size_t anchor_len[N_ANCHORS];
/* for each byte, the anchors that start with it (a bit each) */
static uint32_t anchor_first[256];
static int tables_ready;

static void prefilter_tables(void) {
    if (tables_ready) return;
    for (size_t i = 0; i < N_ANCHORS; i++) {
        anchor_len[i] = strlen(anchors[i]);
        anchor_first[(u8)anchors[i][0]] |= 1u << i;
    }
    tables_ready = 1;
}

static inline int is_digit(u8 c) { return c >= '0' && c <= '9'; }
static inline int is_word(u8 c) { return is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
/* [^\s:()\[\]{}|] over printable ASCII */
static inline int is_token(u8 c) {
    return c > 0x20 && c < 0x7f && c != ':' && c != '(' && c != ')' && c != '[' && c != ']' && c != '{' &&
           c != '}' && c != '|';
}

static int has_anchor(const u8 *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t m = anchor_first[s[i]];
        while (m) {
            int a = __builtin_ctz(m);
            m &= m - 1;
            size_t k = anchor_len[a];
            if (i + k <= n && memcmp(s + i, anchors[a], k) == 0) return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- cleaning (prefilter._cleaned) */

/* "ESC [ [0-9;?]* letter" at s[i] == ESC: its length, or 0 */
static size_t esc_seq(const u8 *s, size_t i, size_t n) {
    if (i + 1 >= n || s[i + 1] != '[') return 0;
    size_t j = i + 2;
    while (j < n && (is_digit(s[j]) || s[j] == ';' || s[j] == '?')) j++;
    if (j < n && ((s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= 'a' && s[j] <= 'z'))) return j + 1 - i;
    return 0;
}

/* "\[\d{1,3}(;\d{1,3})*m" at s[i] == '[': its length, or 0 */
static size_t residue(const u8 *s, size_t i, size_t n) {
    size_t j = i + 1;
    for (;;) {
        size_t d = j;
        while (j < n && j - d < 3 && is_digit(s[j])) j++;
        if (j == d) return 0;
        if (j < n && is_digit(s[j])) return 0; /* a fourth digit: \d{1,3} then ';' or 'm' cannot follow */
        if (j < n && s[j] == 'm') return j + 1 - i;
        if (j < n && s[j] == ';') {
            j++;
            continue;
        }
        return 0;
    }
}

/* an escape cut by the line's end: ESC_CUT "\x1b(\[[0-9;?]{0,16})?" matching to the end from the last ESC
 * of the last 18 bytes */
static int esc_cut_at_end(const u8 *s, size_t n) {
    size_t lo = n > 18 ? n - 18 : 0;
    for (size_t i = n; i > lo; i--) {
        if (s[i - 1] != 0x1b) continue;
        size_t j = i; /* after ESC */
        if (j == n) return 1;
        if (s[j] != '[') return 0;
        j++;
        size_t k = j;
        while (k < n && (is_digit(s[k]) || s[k] == ';' || s[k] == '?')) k++;
        return k == n && k - j <= 16;
    }
    return 0;
}

/* the cleaned line into out (room for n bytes); its length, or -1 where the line is kept unread */
static long cleaned(const u8 *s, size_t n, int flags, u8 *out) {
    if (memchr(s, '\r', n)) return -1;
    size_t w = 0;
    if ((flags & ESC_BLOCK) && memchr(s, 0x1b, n)) {
        if (esc_cut_at_end(s, n)) return -1;
        for (size_t i = 0; i < n;) {
            if (s[i] == 0x1b) {
                size_t k = esc_seq(s, i, n);
                i += k ? k : 1;
                continue;
            }
            out[w++] = s[i++];
        }
        return (long)w;
    }
    if (flags & RESIDUE_BLOCK) {
        for (size_t i = 0; i < n;) {
            if (s[i] == '[') {
                size_t k = residue(s, i, n);
                if (k) {
                    i += k;
                    continue;
                }
            }
            out[w++] = s[i++];
        }
        return (long)w;
    }
    memcpy(out, s, n);
    return (long)n;
}

/* ---------------------------------------------------------------- process prefixes (prefilter._peeled) */

/* _PREFIX "\((?P<proc>[^()]*?) pid=(\d{1,18})(?:, ip=([^)]*))?\)\s?" at s[pos] == '(': its end, or -1 */
static long one_prefix(const u8 *s, size_t pos, size_t n) {
    /* the lazy name stops at the first " pid=" from which the rest matches; the name holds no parenthesis */
    for (size_t i = pos + 1; i + 5 <= n; i++) {
        if (s[i] == '(' || s[i] == ')') return -1;
        if (memcmp(s + i, " pid=", 5) != 0) continue;
        size_t j = i + 5, d = j;
        while (j < n && j - d < MAX_PID_DIGITS && is_digit(s[j])) j++;
        if (j > d) {
            /* \d{1,18} backtracks: any shorter run that ends the prefix also matches (only the full run can,
             * as a digit is neither ')' nor ',') */
            size_t k = j;
            if (k < n && s[k] == ')') return (long)(k + 1 < n && s[k + 1] == ' ' ? k + 2 : k + 1);
            if (k + 5 <= n && memcmp(s + k, ", ip=", 5) == 0) {
                size_t q = k + 5;
                while (q < n && s[q] != ')') q++; /* [^)]* then \) : the first ')' */
                if (q < n) return (long)(q + 1 < n && s[q + 1] == ' ' ? q + 2 : q + 1);
            }
        }
    }
    return -1;
}

static size_t peeled(const u8 *s, size_t n) {
    size_t pos = 0;
    while (pos < n && s[pos] == '(') {
        long e = one_prefix(s, pos, n);
        if (e < 0) break;
        pos = (size_t)e;
    }
    return pos;
}

/* ---------------------------------------------------------------- wrapper places (prefilter._places) */

static long grep_n_end(const u8 *s, size_t pos, size_t n) {
    size_t j = pos;
    while (j < n && is_digit(s[j])) j++;
    if (j - pos > 9 || j >= n) return -1;
    u8 c = s[j];
    if (c == ':' || c == '-') return (long)(j + 1);
    size_t most = 0, k;
    if (c == ' ') {
        k = j, most = 4;
    } else if ((c == '.' || c == ')') && j + 1 < n && s[j + 1] == ' ') {
        k = j + 1, most = 3;
    } else {
        return -1;
    }
    size_t from = k;
    while (k < n && k - from < most && s[k] == ' ') k++;
    return (long)k;
}

static inline int indent_byte(const u8 *s, size_t k, size_t n) {
    u8 c = s[k];
    return c == ' ' || c == '>' || ((c == '-' || c == '*' || c == '+') && k + 1 < n && s[k + 1] == ' ');
}

static size_t indent_end(const u8 *s, size_t pos, size_t n) {
    size_t k = pos;
    while (k < n && indent_byte(s, k, n)) k++;
    return k;
}

static long compose_end(const u8 *s, size_t pos, size_t n) {
    if (!is_word(s[pos]) || s[pos] == '_') return -1;
    size_t k = pos + 1;
    while (k < n && (is_word(s[k]) || s[k] == '.' || s[k] == '-')) k++;
    while (k < n && s[k] == ' ') k++;
    if (k >= n || s[k] != '|') return -1;
    k++;
    return (long)(k < n && s[k] == ' ' ? k + 1 : k);
}

static long grep_h_end(const u8 *s, size_t pos, size_t n) {
    if (!is_token(s[pos])) return -1;
    for (size_t i = pos + 1; i < n; i++) {
        u8 c = s[i];
        if (c == ':' || c == '-') {
            size_t j = i + 1;
            while (j < n && j - i <= 9 && is_digit(s[j])) j++;
            if (i + 1 < j && j <= i + 10 && j < n && s[j] == c) return (long)(j + 1);
            if (c == ':') return (long)(i + 1);
        }
        if (!is_token(c)) return -1;
    }
    return -1;
}

/* the places loose wrappers at pos end at (at most 2) */
static int wrapper_ends(const u8 *s, size_t pos, size_t n, size_t out[2]) {
    if (pos >= n) return 0;
    u8 c = s[pos];
    if (is_digit(c)) {
        long e = grep_n_end(s, pos, n);
        if (e < 0) return 0;
        out[0] = (size_t)e;
        return 1;
    }
    if (c == ' ' || c == '>' || ((c == '-' || c == '*' || c == '+') && pos + 1 < n && s[pos + 1] == ' ')) {
        out[0] = indent_end(s, pos, n);
        return 1;
    }
    if (c == '(' || c == '{' || c == '[') return 0;
    int k = 0;
    long e = compose_end(s, pos, n);
    if (e >= 0) out[k++] = (size_t)e;
    e = grep_h_end(s, pos, n);
    if (e >= 0) out[k++] = (size_t)e;
    return k;
}

/* ---------------------------------------------------------------- what may start at a place (prefilter._may_start) */

static int journald_head(const u8 *r, size_t n) {
    u8 c = r[0];
    if (is_digit(c) || c == '[' || c == ']' || c == '(' || c == ')' || c == '{' || c == '}' || c == ' ') return 0;
    size_t k = 1;
    while (k < n && k < 12 && r[k] != ' ') k++;
    if (k >= n || r[k] != ' ') return 0;
    while (k < n && r[k] == ' ') k++;
    size_t j = k;
    while (j < n && j - k < 2 && is_digit(r[j])) j++;
    return j > k && j + 1 < n && r[j] == ' ' && is_digit(r[j + 1]);
}

static int warning_name(const u8 *r, size_t n) {
    size_t k = 0;
    while (k < n && (is_word(r[k]) || r[k] == '.')) k++;
    return k >= 7 && memcmp(r + k - 7, "Warning", 7) == 0 && (k == n || r[k] == ':');
}

/* r[0..m) is a prefix of LMCache's header "[0000-00-00 00:00:00,000] LMCache " ('0': any digit) */
static int lmc_head_prefix(const u8 *r, size_t m) {
    static const char head[] = "[0000-00-00 00:00:00,000] LMCache ";
    if (m > sizeof(head) - 1) return 0;
    for (size_t i = 0; i < m; i++)
        if (head[i] == '0' ? !is_digit(r[i]) : r[i] != (u8)head[i]) return 0;
    return 1;
}

static int may_start(const u8 *s, size_t pos, size_t n) {
    if (pos >= n) return 1;
    const u8 *r = s + pos;
    size_t m = n - pos;
    u8 c = r[0];
    if (c == '(' || c == '{') return 1;
    if (c == '[') return lmc_head_prefix(r, m);
    if (m >= 3 && (memcmp(r, "INF", 3) == 0 || memcmp(r, "WAR", 3) == 0 || memcmp(r, "ERR", 3) == 0 ||
                   memcmp(r, "DEB", 3) == 0 || memcmp(r, "CRI", 3) == 0))
        return 1;
    if (is_digit(c)) return m > 10 && r[4] == '-' && r[10] == 'T';
    return journald_head(r, m);
}

/* every place a wrapper could end at, breadth first; -1 when there are more than MAX_PLACES */
static int places(const u8 *s, size_t n, size_t *seen) {
    int nseen = 1, head = 0;
    int depth[MAX_PLACES];
    seen[0] = 0;
    depth[0] = 0;
    while (head < nseen) {
        size_t pos = seen[head];
        int d = depth[head++];
        if (d >= MAX_DEPTH) continue;
        size_t ends[2];
        int k = wrapper_ends(s, pos, n, ends);
        for (int i = 0; i < k; i++) {
            int dup = 0;
            for (int j = 0; j < nseen; j++) dup |= seen[j] == ends[i];
            if (dup) continue;
            if (nseen >= MAX_PLACES) return -1;
            seen[nseen] = ends[i];
            depth[nseen++] = d + 1;
        }
    }
    return nseen;
}

/* ---------------------------------------------------------------- one line (prefilter.inert_kind) */

static int inert_kind(const u8 *raw, size_t n, int flags, u8 *buf) {
    if (n == 0) return INERT;
    if (n > MAX_INERT_LINE * 4) return KEEP; /* even without its colour it is too long */
    long len = cleaned(raw, n, flags, buf);
    if (len < 0 || len > MAX_INERT_LINE) return KEEP;
    const u8 *s = buf;
    size_t m = (size_t)len;
    for (size_t i = 0; i < m; i++)
        if (s[i] < 0x20 || s[i] > 0x7e) return KEEP;
    int prefixed = m && s[0] == '(';
    size_t at = prefixed ? peeled(s, m) : 0;
    const u8 *r = s + at;
    size_t rn = m - at;
    if (rn == 0 || has_anchor(r, rn)) return KEEP;
    if (prefixed || r[0] == '[') {
        if (may_start(r, 0, rn)) return KEEP;
    } else {
        size_t seen[MAX_PLACES];
        int np = places(r, rn, seen);
        if (np < 0) return KEEP;
        for (int i = 0; i < np; i++)
            if (may_start(r, seen[i], rn)) return KEEP;
    }
    /* a wrapper is only stripped before a record: with none, the line is read whole */
    if (warning_name(r, rn)) return KEEP;
    return prefixed ? PREFIXED : INERT;
}

/* prefilter(buf, off, starts, ends, flags) -> bytes: one kind per line buf[off + starts[i] : off + ends[i]] */
PyObject *specdiag_prefilter(PyObject *self, PyObject *args) {
    Py_buffer buf, sv, ev;
    long long off;
    int flags;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Ly*y*i:prefilter", &buf, &off, &sv, &ev, &flags)) return NULL;
    prefilter_tables();
    PyObject *out = NULL;
    u8 *tmp = NULL;
    const int64_t *st = (const int64_t *)sv.buf, *en = (const int64_t *)ev.buf;
    Py_ssize_t rows = sv.len / 8;
    if (sv.itemsize != 8 || ev.itemsize != 8 || ev.len != sv.len || off < 0) {
        PyErr_SetString(PyExc_ValueError, "prefilter: bad columns");
        goto done;
    }
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (st[i] < 0 || en[i] < st[i] || off + en[i] > (int64_t)buf.len) {
            PyErr_SetString(PyExc_ValueError, "prefilter: a row lies outside the buffer");
            goto done;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, rows);
    tmp = PyMem_Malloc(MAX_INERT_LINE * 4 + 16);
    if (!out || !tmp) {
        Py_CLEAR(out);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    u8 *k = (u8 *)PyBytes_AS_STRING(out);
    const u8 *b = (const u8 *)buf.buf + off;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) k[i] = (u8)inert_kind(b + st[i], (size_t)(en[i] - st[i]), flags, tmp);
    Py_END_ALLOW_THREADS
done:
    PyMem_Free(tmp);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    return out;
}
