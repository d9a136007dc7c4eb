/* The compiled scanner behind specdiag.ingest.scan.scan_block.
 *
 * Implements exactly the grammar of the pure-Python reference in scan.py (see docs/scanner.md); the
 * differential test (tests/test_scan_differential.py) requires identical results. The line loop runs
 * without the GIL on a read-only buffer view; Python objects are built only at the end.
 *
 * Returns (lines, prefixes: list[bytes], counts: bytes (int64, prefix x template), columns: list[bytes])
 * where the columns follow scan.SCHEMA in order. scan.assemble() turns that into a ScanResult.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_wording.h" /* W_*: the scanned messages' literals, written once in specdiag/catalog/wording.py */

/* SSE2 is part of every x86-64 (and x86 with -msse2): the line classifier and the colour-removing copy read
   16 bytes per step with it. Elsewhere (aarch64, MSVC) the same functions run a byte loop over tables. */
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SPECDIAG_SCAN_PORTABLE)
#include <emmintrin.h>
#define HAVE_SSE2 1
#else
#define HAVE_SSE2 0
#endif
/* the word-at-a-time helpers read a byte's position from its bit: little-endian only (else byte loops).
   -DSPECDIAG_SCAN_PORTABLE turns both off: how the tests check the byte loops on an x86-64 machine. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && \
    !defined(SPECDIAG_SCAN_PORTABLE)
#define HAVE_SWAR 1
#else
#define HAVE_SWAR 0
#endif
#if defined(__GNUC__) || defined(__clang__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))
#else
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#define NOINLINE
#endif

#define MAX_HOT_LINE 16384
#define MAX_PREFIX_DEPTH 4
#define MAX_PREFIXES 256
#define MAX_DIGITS 18
#define NTPL 7
#define MAX_POSITIONS 1024
#define NA INT64_MIN
#define HASH_SLOTS 1024 /* > 2 * MAX_PREFIXES: open addressing never fills */
#define ENVELOPE_LEN 40
#define MAX_EVENTS 32 /* ESC / CR positions kept per line (ColoredFormatter lines hold 4-8) */

typedef unsigned char u8;

enum { T_STORE, T_RETRIEVE, T_LOOKUP, T_ACCESS, T_5XX, T_STATS, T_SPEC };

/* columns, in scan.SCHEMA order */
enum {
    L_LINE, L_START, L_END, L_PROC, L_HASH, L_TOTAL, L_COMPUTED, L_HIT, L_NEED, L_BELOW,
    R_LINE, R_START, R_END, R_PROC, R_GOT, R_REQUIRED, R_TOTAL,
    S_LINE, S_START, S_END, S_PROC, S_STORED, S_TOTAL,
    F_LINE, F_START, F_END, F_TID,
    X_LINE, X_START, X_END,
    V_LINE, V_START, V_END, V_PROC, V_ENGINE, V_NENGINES, V_PROMPT, V_GEN, V_RUNNING, V_WAITING, V_PREEMPT, V_KV, V_KVDEV, V_PREFIX,
    V_EXT, V_STAMP,
    P_LINE, P_START, P_END, P_PROC, P_MAL, P_ACCEPTED, P_DRAFTED, P_RATE, P_OFF, P_N, P_STAMP,
    Q_RATE,
    NCOLS
};

typedef struct {
    char *p;
    size_t len, cap;
} vec;

typedef struct {
    vec col[NCOLS];
    int oom;
    vec arena; /* prefix bytes */
    size_t pre_off[MAX_PREFIXES], pre_len[MAX_PREFIXES];
    int npre;
    uint16_t slots[HASH_SLOTS]; /* prefix index + 1, 0 = empty */
    int64_t counts[MAX_PREFIXES][NTPL];
    char decimal_point; /* the C library's, for strtod/snprintf under the current LC_NUMERIC */
    int64_t npos;       /* rates in the positions column so far */
    double pos_tmp[MAX_POSITIONS];
    uint16_t ev[MAX_EVENTS]; /* the line's ESC / CR offsets (classify) */
    int nev;
    u8 scratch[MAX_HOT_LINE + 16]; /* + one 16-byte store past the end (clean_esc_wide) */
} state;

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

/* zlib.crc32(rid) << 32 | zlib.adler32(rid): scan.rid_hash */
static uint64_t rid_hash(const u8 *s, size_t n) {
    uint32_t c = 0xFFFFFFFFu, a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        c = crc_table[(c ^ s[i]) & 0xFF] ^ (c >> 8);
        a += s[i];
        if (a >= 65521u) a -= 65521u;
        b += a;
        if (b >= 65521u) b -= 65521u;
    }
    return ((uint64_t)(c ^ 0xFFFFFFFFu) << 32) | ((uint64_t)b << 16) | a;
}

/* room for need bytes (doubling): the rare branch of vec_put, kept out of line */
static NOINLINE int vec_grow(state *st, vec *v, size_t need) {
    size_t c = v->cap ? v->cap * 2 : 4096;
    while (c < need) c *= 2;
    char *q = realloc(v->p, c);
    if (!q) {
        st->oom = 1;
        return -1;
    }
    v->p = q;
    v->cap = c;
    return 0;
}

static inline int vec_put(state *st, vec *v, const void *x, size_t n) {
    if (UNLIKELY(v->len + n > v->cap) && vec_grow(st, v, v->len + n) < 0) return -1;
    memcpy(v->p + v->len, x, n);
    v->len += n;
    return 0;
}

static void put_i64(state *st, int col, int64_t x) { vec_put(st, &st->col[col], &x, 8); }
static void put_u64(state *st, int col, uint64_t x) { vec_put(st, &st->col[col], &x, 8); }
static void put_u32(state *st, int col, uint32_t x) { vec_put(st, &st->col[col], &x, 4); }
static void put_u8(state *st, int col, u8 x) { vec_put(st, &st->col[col], &x, 1); }
/* where a row is: every table starts with line, start, end (consecutive columns from `first`) */
static void put_where(state *st, int first, int64_t lineno, int64_t start, int64_t end) {
    put_i64(st, first, lineno);
    put_i64(st, first + 1, start);
    put_i64(st, first + 2, end);
}
/* ... and the hot tables go on with the row's process */
static void put_head(state *st, int first, int64_t lineno, int64_t start, int64_t end, int proc) {
    put_where(st, first, lineno, start, end);
    put_u32(st, first + 3, (uint32_t)proc);
}
static void put_flag(state *st, int64_t lineno, int64_t start, int64_t end, int tid) {
    put_where(st, F_LINE, lineno, start, end);
    put_u8(st, F_TID, (u8)tid);
}
static void put_f64(state *st, int col, double x) { vec_put(st, &st->col[col], &x, 8); }

/* the NaN Python's float("nan") is (a quiet NaN, sign clear): the columns compare bit for bit */
static double nan_value(void) {
    const uint64_t bits = 0x7ff8000000000000ULL;
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

static inline int is_digit(u8 c) { return c >= '0' && c <= '9'; }
static inline int is_alpha(u8 c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

/* -------------------------------------------------------------------------------- steps 1-3: one pass */

/* What a raw line holds besides printable ASCII, found in one pass (classify) so that steps 1-3 read each
   byte once and most lines are parsed where they lie, without a copy. F_RARE: a byte that no cleaning
   removes (< 0x20 or >= 0x80, other than ESC and CR), so the cleaned line is not printable, or a raw line
   over MAX_HOT_LINE: the line is rare whatever else it holds. The positions of its ESC and CR bytes go to
   st->ev (F_MANY: more than MAX_EVENTS, not all kept), so that the copy which removes colour jumps from
   one to the next instead of searching the line again. */
enum { F_ESC = 1, F_CR = 2, F_MANY = 4, F_RARE = 8 };

enum { C_PLAIN, C_NL, C_ESC, C_CR, C_BAD }; /* byte classes of the portable classifier */
static u8 byte_class[256];
static u8 esc_body[256]; /* [0-9;?]: the bytes between "ESC [" and a colour sequence's final letter */
/* LMCache's envelope as five 8-byte words: its literal bytes, which bytes are literal, which are digits */
static uint64_t env_lit[5], env_litmask[5], env_digmask[5];

static void tables_init(void) {
    static const char pat[] = "[dddd-dd-dd dd:dd:dd,ddd] LMCache INFO: ";
    for (int c = 0; c < 256; c++) {
        byte_class[c] = (c < 0x20 || c >= 0x80) ? C_BAD : C_PLAIN;
        esc_body[c] = is_digit((u8)c) || c == ';' || c == '?';
    }
    byte_class['\n'] = C_NL;
    byte_class[0x1b] = C_ESC;
    byte_class['\r'] = C_CR;
    for (int w = 0; w < 5; w++) {
        u8 lit[8], lm[8], dm[8];
        for (int b = 0; b < 8; b++) {
            char c = pat[8 * w + b];
            lit[b] = c == 'd' ? 0 : (u8)c;
            lm[b] = c == 'd' ? 0 : 0xff;
            dm[b] = c == 'd' ? 0x80 : 0;
        }
        memcpy(&env_lit[w], lit, 8);
        memcpy(&env_litmask[w], lm, 8);
        memcpy(&env_digmask[w], dm, 8);
    }
}

/* an ESC or CR at offset at of the line */
static inline unsigned event(state *st, unsigned f, size_t at, int is_cr) {
    if (LIKELY(st->nev < MAX_EVENTS)) st->ev[st->nev++] = (uint16_t)at;
    else f |= F_MANY;
    return f | (is_cr ? F_CR : F_ESC);
}

/* The raw line at p (the block ends at e): returns its end (its '\n', or e) and sets *flags. */
static const u8 *classify(state *st, const u8 *p, const u8 *e, unsigned *flags) {
    const int too_long = (size_t)(e - p) > MAX_HOT_LINE; /* unless a newline comes first */
    const u8 *limit = too_long ? p + MAX_HOT_LINE + 1 : e, *q = p;
    unsigned f = 0;
    st->nev = 0;
#if HAVE_SSE2
    const __m128i ctl = _mm_set1_epi8(0x20), nl = _mm_set1_epi8('\n'), esc = _mm_set1_epi8(0x1b),
                  cr = _mm_set1_epi8('\r');
    while (q + 16 <= limit) {
        __m128i x = _mm_loadu_si128((const __m128i *)q);
        /* signed compare: the bytes below 0x20 and those from 0x80 (negative) */
        unsigned sp = (unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(x, ctl));
        if (LIKELY(!sp)) {
            q += 16;
            continue;
        }
        unsigned end = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, nl));
        unsigned below = end ? (1u << __builtin_ctz(end)) - 1 : 0xffffu; /* the bytes of this line */
        unsigned ec = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, esc), _mm_cmpeq_epi8(x, cr)));
        if ((sp & ~ec & below) & ~end) { /* a byte no cleaning removes */
            q += __builtin_ctz(sp & ~ec & below & ~end);
            goto rare;
        }
        for (ec &= below; ec; ec &= ec - 1) {
            unsigned t = (unsigned)__builtin_ctz(ec);
            f = event(st, f, (size_t)(q - p) + t, q[t] == '\r');
        }
        if (end) {
            *flags = f;
            return q + __builtin_ctz(end);
        }
        q += 16;
    }
#endif
    for (; q < limit; q++) {
        switch (byte_class[*q]) {
        case C_NL: *flags = f; return q;
        case C_ESC: f = event(st, f, (size_t)(q - p), 0); break;
        case C_CR: f = event(st, f, (size_t)(q - p), 1); break;
        case C_BAD: goto rare;
        default: break;
        }
    }
    if (!too_long) { /* the block's last line, without a newline */
        *flags = f;
        return e;
    }
rare:
    *flags = f | F_RARE;
    {
        const u8 *nlp = q < e ? memchr(q, '\n', (size_t)(e - q)) : NULL;
        return nlp ? nlp : e;
    }
}

/* Length of an ESC-less colour residue "[N(;N)*m" (N: 1-3 digits) at s[j] == '[', else 0. */
static size_t residue_len(const u8 *s, size_t j, size_t n) {
    size_t k = j + 1;
    for (;;) {
        size_t d = 0;
        while (k < n && is_digit(s[k])) k++, d++;
        if (d < 1 || d > 3 || k >= n) return 0;
        if (s[k] == 'm') return k + 1 - j;
        if (s[k] != ';') return 0;
        k++;
    }
}

/* a line without ESC that holds a residue is cleaned by a copy; one without is parsed in place */
static int has_residue(const u8 *raw, size_t n) {
    const u8 *p = raw, *e = raw + n;
    while (p < e && (p = memchr(p, '[', (size_t)(e - p))) != NULL) {
        if (residue_len(raw, (size_t)(p - raw), n)) return 1;
        p++;
    }
    return 0;
}

/* Where a line goes on after the ESC at raw[j]: past its "ESC [ [0-9;?]* letter" colour sequence, or,
   for a stray ESC, past the ESC alone (it is dropped). One definition for the three cleaners below. */
static inline size_t esc_skip(const u8 *raw, size_t j, size_t n) {
    size_t k = j + 1;
    if (k < n && raw[k] == '[') {
        k++;
        while (k < n && esc_body[raw[k]]) k++;
        if (k < n && is_alpha(raw[k])) return k + 1;
    }
    return j + 1;
}

/* Colour sequences (ESC lines) or their residue (lines without ESC), then CRs; returns the length.
   The portable cleaner: every line that is not cleaned by clean_esc_wide. */
static size_t clean(const u8 *raw, size_t n, u8 *out) {
    size_t o = 0, i = 0;
    if (memchr(raw, 0x1b, n)) {
        while (i < n) {
            const u8 *e = memchr(raw + i, 0x1b, n - i);
            size_t j = e ? (size_t)(e - raw) : n;
            memcpy(out + o, raw + i, j - i);
            o += j - i;
            if (!e) break;
            i = esc_skip(raw, j, n);
        }
    } else {
        while (i < n) {
            const u8 *e = memchr(raw + i, '[', n - i);
            size_t j = e ? (size_t)(e - raw) : n;
            memcpy(out + o, raw + i, j - i);
            o += j - i;
            if (!e) break;
            size_t k = residue_len(raw, j, n);
            if (k) {
                i = j + k;
            } else {
                out[o++] = '[';
                i = j + 1;
            }
        }
    }
    if (memchr(out, '\r', o)) {
        size_t w = 0;
        for (size_t r = 0; r < o; r++)
            if (out[r] != '\r') out[w++] = out[r];
        o = w;
    }
    return o;
}

#if HAVE_SSE2
/* raw[0..len) to out, 16 bytes a step: may read and write up to 15 bytes past len (the callers' slack) */
static inline void copy_wide(u8 *out, const u8 *raw, size_t len) {
    for (size_t c = 0; c < len; c += 16) _mm_storeu_si128((__m128i *)(out + c), _mm_loadu_si128((const __m128i *)(raw + c)));
}

/* clean() from the ESC and CR positions classify kept (all of them): the segments between are copied
   whole. raw[n .. n + 16) must be readable and out must have 16 bytes of room past n. A sequence is matched
   on the raw bytes, so a CR inside one breaks it as in the reference (which removes CRs afterwards). */
static size_t clean_events(const state *st, const u8 *raw, size_t n, u8 *out) {
    size_t i = 0, o = 0;
    for (int e = 0; e < st->nev; e++) {
        size_t j = st->ev[e];
        if (j < i) continue; /* not reached: a sequence holds no ESC or CR */
        copy_wide(out + o, raw + i, j - i);
        o += j - i;
        i = raw[j] == '\r' ? j + 1 : esc_skip(raw, j, n);
    }
    copy_wide(out + o, raw + i, n - i);
    return o + (n - i);
}

/* clean() of a line holding ESC, 16 bytes a step: raw[n .. n + 16) must be readable (the caller checks that
   the block goes on) and out must have 16 bytes of room past n. CRs are dropped on the way: the sequences
   are still matched on the raw bytes, so a CR inside one breaks it as in the reference (which removes CRs
   after the sequences). */
static size_t clean_esc_wide(const u8 *raw, size_t n, u8 *out, int has_cr) {
    const __m128i esc = _mm_set1_epi8(0x1b), cr = _mm_set1_epi8(has_cr ? '\r' : 0x1b);
    size_t i = 0, o = 0;
    for (;;) {
        __m128i x = _mm_loadu_si128((const __m128i *)(raw + i));
        _mm_storeu_si128((__m128i *)(out + o), x);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, esc), _mm_cmpeq_epi8(x, cr)));
        size_t t = m ? (size_t)__builtin_ctz(m) : 16;
        if (i + t >= n) return o + (n - i);
        i += t;
        o += t;
        if (!m) continue;
        if (raw[i] == '\r') {
            i++;
            continue;
        }
        i = esc_skip(raw, i, n);
    }
}
#endif

/* Step 1: a CR anywhere but as the line's last byte (CRLF's) may end a record inside the line (a record
   after a progress bar's CR), which only the Python path splits: the line is rare. The CR positions are
   those classify kept; past MAX_EVENTS the line is searched. */
static int inner_cr(const state *st, const u8 *raw, size_t len, unsigned flags) {
    if (!(flags & F_CR) || len < 2) return 0;
    if (flags & F_MANY) return memchr(raw, '\r', len - 1) != NULL;
    for (int e = 0; e < st->nev; e++) {
        size_t j = st->ev[e];
        if (j + 1 < len && raw[j] == '\r') return 1;
    }
    return 0;
}

/* Steps 1-3: the cleaned line in *s (the raw bytes themselves when cleaning would change nothing) and its
   length, or -1 when the line is rare. */
static long cleaned(state *st, const u8 *raw, size_t len, unsigned flags, const u8 *block_end, const u8 **s) {
    if ((flags & F_RARE) || inner_cr(st, raw, len, flags)) return -1;
    if (flags & F_ESC) {
        *s = st->scratch;
#if HAVE_SSE2
        if (LIKELY((size_t)(block_end - raw) >= len + 16))
            return (long)(flags & F_MANY ? clean_esc_wide(raw, len, st->scratch, flags & F_CR)
                                         : clean_events(st, raw, len, st->scratch));
#else
        (void)block_end;
#endif
        return (long)clean(raw, len, st->scratch);
    }
    if ((flags & F_CR) || has_residue(raw, len)) {
        *s = st->scratch;
        return (long)clean(raw, len, st->scratch);
    }
    *s = raw;
    return (long)len;
}

/* 0x80 in each byte of x that is an ASCII digit. x holds ASCII bytes only (< 0x80: a cleaned line), so no
   byte borrows from or carries into its neighbour. */
static inline uint64_t digit_bytes(uint64_t x) {
    const uint64_t hi = 0x8080808080808080ULL;
    return ((x | hi) - 0x3030303030303030ULL) & ~(x + 0x4646464646464646ULL) & hi;
}

/* -------------------------------------------------------------------------------- parsing helpers */

/* s[0..n) == lit[0..n) for a literal of constant length (inlined: 8-byte words, the last one overlapping,
   instead of a call to memcmp per literal) */
static inline int same_bytes(const u8 *s, const char *lit, size_t n) {
    uint64_t a, b;
    if (n < 8) {
        for (size_t i = 0; i < n; i++)
            if (s[i] != (u8)lit[i]) return 0;
        return 1;
    }
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&a, s + i, 8);
        memcpy(&b, lit + i, 8);
        if (a != b) return 0;
    }
    memcpy(&a, s + n - 8, 8);
    memcpy(&b, lit + n - 8, 8);
    return a == b;
}

static inline int starts(const u8 *s, size_t pos, size_t end, const char *lit, size_t len) {
    return pos + len <= end && same_bytes(s + pos, lit, len);
}
#define STARTS(s, pos, end, lit) starts((s), (pos), (end), (lit), sizeof(lit) - 1)
#define LEN(lit) (sizeof(lit) - 1)

/* digits at pos (1..MAX_DIGITS before end) -> value, *pos advanced; -1 = reject */
static int number(const u8 *s, size_t *pos, size_t end, int64_t *v) {
    size_t p = *pos;
    int64_t x = 0;
    while (p < end && is_digit(s[p])) {
        if (p - *pos >= MAX_DIGITS) return -1;
        x = x * 10 + (s[p] - '0');
        p++;
    }
    if (p == *pos) return -1;
    *v = x;
    *pos = p;
    return 0;
}

static const u8 *find_byte(const u8 *s, size_t from, size_t end, u8 c) {
    return from < end ? memchr(s + from, c, end - from) : NULL;
}

/* first occurrence of lit[0..len) lying wholly inside s[from..end) (memmem is not portable) */
static const u8 *find_lit(const u8 *s, size_t from, size_t end, const char *lit, size_t len) {
    while (from + len <= end) {
        const u8 *c = memchr(s + from, lit[0], end - from - len + 1);
        if (!c) return NULL;
        if (memcmp(c, lit, len) == 0) return c;
        from = (size_t)(c - s) + 1;
    }
    return NULL;
}

/* scan.peel_prefixes: end of the (Name pid=N[, ip=X]) chain, or -1 */
static long peel(const u8 *s, size_t n) {
    size_t pos = 0;
    int depth = 0;
    while (pos < n && s[pos] == '(') {
        if (++depth > MAX_PREFIX_DEPTH) return -1;
        const u8 *c = find_byte(s, pos, n, ')');
        if (!c) return -1;
        size_t close = (size_t)(c - s);
        if (find_byte(s, pos + 1, close, '(')) return -1;
        const u8 *p = find_lit(s, pos + 1, close, " pid=", 5);
        if (!p) return -1;
        size_t d = (size_t)(p - s) + 5;
        int64_t pid;
        if (number(s, &d, close, &pid) < 0) return -1;
        if (d != close && !STARTS(s, d, n, ", ip=")) return -1;
        pos = close + 1;
        if (pos < n && s[pos] == ' ') pos++;
    }
    return (long)pos;
}

/* scan._ENVELOPE at pos: "[dddd-dd-dd dd:dd:dd,ddd] LMCache INFO: " (five words, each its literal bytes and
   its digits) or the same with "DEBUG: ", one byte longer -> the envelope's length, or 0 */
static size_t envelope(const u8 *s, size_t pos, size_t n) {
    if (pos + ENVELOPE_LEN > n || s[pos] != '[') return 0;
    for (int w = 0; w < 4; w++) {
        uint64_t x;
        memcpy(&x, s + pos + 8 * (size_t)w, 8);
        if (((x ^ env_lit[w]) & env_litmask[w]) | ((digit_bytes(x) & env_digmask[w]) ^ env_digmask[w])) return 0;
    }
    uint64_t x;
    memcpy(&x, s + pos + 32, 8);
    if (x == env_lit[4]) return ENVELOPE_LEN; /* the last word is all literal: "e INFO: " */
    return STARTS(s, pos + 32, n, "e DEBUG: ") ? ENVELOPE_LEN + 1 : 0;
}

/* the last " (" starting at or after msg (scan.suffix_start's rfind): where its space is, or -1 */
static long last_open_paren(const u8 *s, size_t msg, size_t n) {
    size_t k = n; /* s[k..n) is searched */
#if HAVE_SWAR
    const uint64_t low = 0x7f7f7f7f7f7f7f7fULL, paren = 0x2828282828282828ULL;
    while (k >= msg + 8) {
        uint64_t x;
        memcpy(&x, s + k - 8, 8);
        uint64_t y = x ^ paren;
        uint64_t z = ~(((y & low) + low) | y | low); /* 0x80 in exactly the bytes that are '(' */
        while (z) {
            int bit = 63 - __builtin_clzll(z);
            size_t at = k - 8 + (size_t)(bit >> 3);
            if (at > msg && s[at - 1] == ' ') return (long)(at - 1);
            z &= ~(1ULL << bit);
        }
        k -= 8;
    }
#endif
    while (k > msg + 1) {
        k--;
        if (s[k] == '(' && s[k - 1] == ' ') return (long)(k - 1);
    }
    return -1;
}

/* scan.suffix_start: where " (file.py:N:logger)" starts at or after msg, or -1 */
static long suffix_start(const u8 *s, size_t msg, size_t n) {
    if (n <= msg || s[n - 1] != ')') return -1;
    long i = last_open_paren(s, msg, n);
    if (i < 0) return -1;
    const u8 *ap = find_byte(s, (size_t)i, n, ':');
    if (!ap) return -1;
    size_t a = (size_t)(ap - s);
    const u8 *bp = find_byte(s, a + 1, n, ':');
    if (!bp) return -1;
    size_t b = (size_t)(bp - s);
    if (a < (size_t)i + 5 || memcmp(s + a - 3, ".py", 3) != 0 || b == a + 1 || b + 2 >= n) return -1;
    for (size_t k = a + 1; k < b; k++)
        if (!is_digit(s[k])) return -1;
    return i;
}

/* scan._req_tag: skip "[req_id=...] "; -1 = reject */
static long req_tag(const u8 *s, size_t pos, size_t end) {
    if (!STARTS(s, pos, end, W_TAG_OPEN)) return (long)pos;
    const u8 *c = find_byte(s, pos + LEN(W_TAG_OPEN), end, W_TAG_CLOSE[0]);
    if (!c) return -1;
    size_t k = (size_t)(c - s) + 1;
    return STARTS(s, k, end, " ") ? (long)(k + 1) : -1;
}

#define EXPECT(lit)                                     \
    do {                                                \
        if (!STARTS(s, pos, end, lit)) return -1;       \
        pos += sizeof(lit) - 1;                         \
    } while (0)

static int parse_store(const u8 *s, size_t msg, size_t end, int64_t *stored, int64_t *total) {
    long t = req_tag(s, msg, end);
    if (t < 0) return -1;
    size_t pos = (size_t)t;
    EXPECT(W_STORED);
    if (number(s, &pos, end, stored) < 0) return -1;
    EXPECT(W_OUT_OF_TOTAL);
    if (number(s, &pos, end, total) < 0) return -1;
    EXPECT(W_TOKENS);
    return 0;
}

static int parse_retrieve(const u8 *s, size_t msg, size_t end, int64_t *got, int64_t *required, int64_t *total) {
    long t = req_tag(s, msg, end);
    if (t < 0) return -1;
    size_t pos = (size_t)t;
    EXPECT(W_RETRIEVED);
    if (number(s, &pos, end, got) < 0) return -1;
    EXPECT(W_OUT_OF);
    int legacy = STARTS(s, pos, end, W_LEGACY_TOTAL);
    if (legacy) pos += LEN(W_LEGACY_TOTAL);
    if (number(s, &pos, end, required) < 0) return -1;
    if (!legacy && STARTS(s, pos, end, W_REQUIRED_FROM)) {
        pos += LEN(W_REQUIRED_FROM);
        if (number(s, &pos, end, total) < 0) return -1;
        EXPECT(W_TOTAL_TOKENS_CLOSE);
    } else if (STARTS(s, pos, end, W_OUT_OF_TOTAL)) {
        pos += LEN(W_OUT_OF_TOTAL);
        if (number(s, &pos, end, total) < 0) return -1;
        EXPECT(W_TOKENS);
    } else {
        return -1;
    }
    return 0;
}

typedef struct {
    size_t rid, rid_len;
    int64_t total, computed, hit, need;
    u8 below;
} lookup_t;

/* scan._need_to_load: the optional ", [but ]need to load: [-]N" tail */
static int need_to_load(const u8 *s, size_t pos, size_t end, lookup_t *L) {
    L->need = NA;
    L->below = 0;
    if (!STARTS(s, pos, end, W_SEP)) return 0;
    size_t q = pos + LEN(W_SEP);
    u8 below = 0;
    if (STARTS(s, q, end, W_BELOW_MIN)) below = 1, q += LEN(W_BELOW_MIN);
    if (!STARTS(s, q, end, W_NEED)) return 0;
    q += LEN(W_NEED);
    int neg = STARTS(s, q, end, "-");
    q += neg;
    size_t p = q;
    while (p < end && is_digit(s[p])) p++;
    if (p == q) return 0;
    if (p - q > MAX_DIGITS) return -1;
    int64_t v = 0;
    for (size_t k = q; k < p; k++) v = v * 10 + (s[k] - '0');
    L->need = neg ? -v : v;
    L->below = below;
    return 0;
}

static int parse_lookup(const u8 *s, size_t msg, size_t end, lookup_t *L) {
    size_t pos = msg;
    EXPECT(W_REQID);
    const u8 *spp = find_byte(s, pos, end, ' ');
    if (!spp) return -1;
    size_t sp = (size_t)(spp - s);
    if (sp < pos + 2 || s[sp - 1] != ',') return -1;
    L->rid = pos;
    L->rid_len = sp - 1 - pos;
    pos = sp;
    EXPECT(W_TOTAL_TOKENS);
    if (number(s, &pos, end, &L->total) < 0) return -1;
    EXPECT(W_SEP);
    L->computed = NA;
    if (STARTS(s, pos, end, W_COMPUTED)) {
        pos += LEN(W_COMPUTED);
        if (number(s, &pos, end, &L->computed) < 0) return -1;
        EXPECT(W_SEP);
    }
    EXPECT(W_HIT);
    if (STARTS(s, pos, end, W_NO_HIT)) {
        L->hit = NA;
        pos += LEN(W_NO_HIT);
    } else if (number(s, &pos, end, &L->hit) < 0) {
        return -1;
    }
    return need_to_load(s, pos, end, L);
}

/* scan.parse_access: the status code, or -1 */
static int parse_access(const u8 *s, size_t pos, size_t end) {
    EXPECT("INFO: ");
    while (pos < end && s[pos] == ' ') pos++;
    const u8 *spp = find_byte(s, pos, end, ' ');
    if (!spp || (size_t)(spp - s) <= pos) return -1;
    pos = (size_t)(spp - s);
    EXPECT(" - \"");
    const u8 *q = find_byte(s, pos, end, '"');
    if (!q) return -1;
    pos = (size_t)(q - s);
    EXPECT("\" ");
    if (pos + 4 > end || !is_digit(s[pos]) || !is_digit(s[pos + 1]) || !is_digit(s[pos + 2]) || s[pos + 3] != ' ')
        return -1;
    if (s[pos] < '1' || s[pos] > '5') return -1;
    return (s[pos] - '0') * 100 + (s[pos + 1] - '0') * 10 + (s[pos + 2] - '0');
}

/* -------------------------------------------------------------------------------- vLLM stats lines */

/* scan.TERMINAL_WIDTHS: a vLLM line this long may be a terminal-cut row the records path joins */
static int terminal_width(size_t n) {
    switch (n) {
    case 80: case 100: case 120: case 132: case 140: case 150: case 160: case 180: case 200: case 220: case 240:
    case 250:
        return 1;
    default:
        return 0;
    }
}

/* scan.vllm_head: "INFO MM-DD HH:MM:SS[.f{1,9}] [file:N] " at pos -> message start, or -1 */
static long vllm_head(const u8 *s, size_t pos, size_t n) {
    static const char pat[] = "INFO dd-dd dd:dd:dd";
    const size_t plen = sizeof(pat) - 1;
    if (pos + plen > n) return -1;
    for (size_t i = 0; i < plen; i++) {
        u8 c = s[pos + i];
        if (pat[i] == 'd' ? !is_digit(c) : c != (u8)pat[i]) return -1;
    }
    pos += plen;
    if (pos < n && s[pos] == '.') {
        size_t q = pos + 1;
        while (q < n && is_digit(s[q])) q++;
        if (q == pos + 1 || q - pos - 1 > 9) return -1;
        pos = q;
    }
    if (!STARTS(s, pos, n, " [")) return -1;
    pos += 2;
    size_t f = pos;
    while (pos < n && s[pos] != ':' && s[pos] != ']' && s[pos] != ' ') pos++;
    if (pos == f || pos >= n || s[pos] != ':') return -1;
    pos++;
    int64_t src_line;
    if (number(s, &pos, n, &src_line) < 0) return -1;
    if (!STARTS(s, pos, n, "] ")) return -1;
    return (long)(pos + 2);
}

/* the digits s[p..q) as Python's float() reads them: strtod on a NUL-terminated copy is correctly rounded */
static double to_double(const state *st, const u8 *s, size_t p, size_t q) {
    char buf[2 * MAX_DIGITS + 2];
    memcpy(buf, s + p, q - p);
    buf[q - p] = 0;
    char *dot = memchr(buf, '.', q - p);
    if (dot) *dot = st->decimal_point;
    return strtod(buf, NULL);
}

/* 10^k for k <= 22: every one is exactly a double */
static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
/* the fast paths below rely on one IEEE double division being correctly rounded: not so where the
   compiler evaluates in x87 extended precision (then every value goes through strtod) */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
#define EXACT_DIVISION 1
#else
#define EXACT_DIVISION 0
#endif

/* A printed decimal: its value, and its digits as an integer mantissa over 10^frac when that is exact */
typedef struct {
    double v;
    int64_t mant; /* the digits as an integer (< 10^15), -1 when nan or longer */
    int frac;
} dec_t;

/* scan._decimal: "nan" or D{1,18}[.D{1,18}] -> its value (NaN for nan); -1 = reject.
   The value is float(text), exactly: with at most 15 significant digits (mantissa < 2^53) and an exact
   power of ten, one IEEE division is the correctly rounded result (Clinger's fast path, the one strtod
   takes itself); anything longer goes through strtod. */
static int decimal_ex(const state *st, const u8 *s, size_t *pos, size_t end, dec_t *d) {
    size_t p = *pos;
    if (STARTS(s, p, end, "nan")) {
        d->v = nan_value();
        d->mant = -1;
        *pos = p + 3;
        return 0;
    }
    size_t q = p;
    int64_t m = 0;
    while (q < end && is_digit(s[q])) {
        if (q - p >= MAX_DIGITS) return -1;
        m = m * 10 + (s[q++] - '0');
    }
    if (q == p) return -1;
    size_t ndig = q - p;
    int frac = 0;
    if (q < end && s[q] == '.') {
        size_t r = q + 1;
        while (r < end && is_digit(s[r]) && r - q <= MAX_DIGITS) {
            if (ndig + (r - q - 1) < MAX_DIGITS) m = m * 10 + (s[r] - '0');
            r++;
        }
        if (r == q + 1 || (r < end && is_digit(s[r])) || r - q - 1 > MAX_DIGITS) return -1;
        frac = (int)(r - q - 1);
        ndig += (size_t)frac;
        q = r;
    }
    if (EXACT_DIVISION && ndig <= 15) { /* m < 10^15 < 2^53, frac <= 15 */
        d->v = (double)m / POW10[frac];
        d->mant = m;
        d->frac = frac;
    } else {
        d->v = to_double(st, s, p, q);
        d->mant = -1;
    }
    *pos = q;
    return 0;
}

static int decimal(const state *st, const u8 *s, size_t *pos, size_t end, double *v) {
    dec_t d;
    if (decimal_ex(st, s, pos, end, &d) < 0) return -1;
    *v = d.v;
    return 0;
}

/* scan._count: int(float(digits)) below 1e18, else NA (metrics.parse._count of the parsed float);
   up to 15 digits the float is the integer itself */
static int count(const state *st, const u8 *s, size_t *pos, size_t end, int64_t *v) {
    size_t p = *pos, q = p;
    int64_t m = 0;
    while (q < end && is_digit(s[q])) {
        if (q - p >= MAX_DIGITS) return -1;
        m = m * 10 + (s[q++] - '0');
    }
    if (q == p) return -1;
    if (q - p <= 15) {
        *v = m;
    } else {
        double x = to_double(st, s, p, q);
        *v = x < 1e18 ? (int64_t)x : NA;
    }
    *pos = q;
    return 0;
}

/* Python's round(x, 6) for a finite x below 1e16: the correctly rounded 6-decimal text (ties to even, as
   dtoa's mode 3), read back */
static double round6(double x) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%.6f", x);
    return strtod(buf, NULL);
}

/* scan._percent: "X%" -> round(X / 100, 6), NaN stays.
   Fast and exact when X was printed with at most 4 decimals (vLLM prints 1) and X < 10^10: then
   X / 100 has at most 6 decimals, the double x = fl(fl(X) / 100) lies within 3 ulp (< 10^-7 for x < 10^8)
   of it, so the 6-decimal number nearest x is mant * 10^(4 - frac) / 10^6 exactly, and that integer over
   10^6 is one correctly rounded division. Everything else goes through printf/strtod. */
static int percent(const state *st, const u8 *s, size_t *pos, size_t end, double *v) {
    dec_t d;
    if (decimal_ex(st, s, pos, end, &d) < 0 || !STARTS(s, *pos, end, "%")) return -1;
    *pos += 1;
    *v = d.v;
    if (d.v != d.v) return 0;
    if (d.mant >= 0 && d.frac <= 4 && d.v < 1e10) {
        int64_t r = d.mant;
        for (int k = d.frac; k < 4; k++) r *= 10;
        *v = (double)r / 1e6;
    } else {
        *v = round6(d.v / 100.0);
    }
    return 0;
}

typedef struct {
    int64_t engine, n_engines, running, waiting, preempt;
    double prompt, gen, kv, prefix, ext;
    u8 dev;
} stats_t;

#define NUM(fn, out)                                         \
    do {                                                     \
        if (fn(st, s, &pos, end, (out)) < 0) return -1;      \
    } while (0)

/* the stats and SpecDecoding literals as scan.py composes them (S_*), from the one wording */
#define S_PROMPT W_KEY_END W_PROMPT_TPS W_KEY_END
#define S_GEN W_PER_SECOND W_SEP W_GEN_TPS W_KEY_END
#define S_RUNNING W_PER_SECOND W_SEP W_RUNNING W_KEY_END
#define S_WAITING W_REQS W_SEP W_WAITING W_KEY_END
#define S_AFTER_WAITING W_REQS W_SEP
#define S_PREEMPTIONS W_PREEMPTIONS W_KEY_END
#define S_KV_USAGE W_KV_USAGE W_KEY_END
#define S_PREFIX_HIT W_SEP W_PREFIX_HIT W_KEY_END
#define S_EXT_HIT W_SEP W_EXT_HIT W_KEY_END
#define S_SPEC W_SPEC W_KEY_END
#define S_SPEC_OLD S_SPEC W_SPEC_RATE W_KEY_END
#define S_SPEC_NEW S_SPEC W_SPEC_MEAN_LENGTH W_KEY_END
#define S_MEAN_LENGTH W_SEP W_SPEC_MEAN_LENGTH W_KEY_END
#define S_ACCEPTED_TPS W_SEP W_SPEC_ACCEPTED_TPS W_KEY_END
#define S_DRAFTED_TPS W_PER_SECOND W_SEP W_SPEC_DRAFTED_TPS W_KEY_END
#define S_ACCEPTED_AFTER_TPS W_PER_SECOND W_SEP W_SPEC_ACCEPTED W_KEY_END
#define S_ACCEPTED W_SEP W_SPEC_ACCEPTED W_KEY_END
#define S_DRAFTED W_TOKENS W_SEP W_SPEC_DRAFTED W_KEY_END
#define S_PER_POSITION W_TOKENS W_SEP W_SPEC_PER_POSITION W_KEY_END
#define S_AVG_RATE W_SEP W_SPEC_AVG_RATE W_KEY_END

/* scan.parse_stats */
static int parse_stats(const state *st, const u8 *s, size_t msg, size_t end, stats_t *V) {
    size_t pos = msg;
    V->n_engines = NA;
    if (STARTS(s, pos, end, W_ENGINE)) {
        pos += LEN(W_ENGINE);
        if (number(s, &pos, end, &V->engine) < 0) return -1;
    } else {
        if (number(s, &pos, end, &V->n_engines) < 0) return -1;
        EXPECT(W_ENGINES_AGGREGATED);
        V->engine = NA;
    }
    EXPECT(S_PROMPT);
    NUM(decimal, &V->prompt);
    EXPECT(S_GEN);
    NUM(decimal, &V->gen);
    EXPECT(S_RUNNING);
    NUM(count, &V->running);
    EXPECT(S_WAITING);
    NUM(count, &V->waiting);
    EXPECT(S_AFTER_WAITING);
    V->preempt = NA;
    if (STARTS(s, pos, end, S_PREEMPTIONS)) {
        pos += LEN(S_PREEMPTIONS);
        NUM(count, &V->preempt);
        EXPECT(W_SEP);
    }
    if (STARTS(s, pos, end, W_KV_DEVICE_GPU)) { /* scan.KV_DEVICES */
        V->dev = 0;
        pos += LEN(W_KV_DEVICE_GPU);
    } else if (STARTS(s, pos, end, W_KV_DEVICE_CPU)) {
        V->dev = 1;
        pos += LEN(W_KV_DEVICE_CPU);
    } else {
        return -1;
    }
    EXPECT(S_KV_USAGE);
    NUM(percent, &V->kv);
    V->prefix = V->ext = nan_value();
    if (STARTS(s, pos, end, S_PREFIX_HIT)) {
        pos += LEN(S_PREFIX_HIT);
        NUM(percent, &V->prefix);
    }
    if (STARTS(s, pos, end, S_EXT_HIT)) {
        pos += LEN(S_EXT_HIT);
        NUM(percent, &V->ext);
    }
    return pos == end ? 0 : -1;
}

typedef struct {
    double mal, rate;
    int64_t accepted, drafted, npos;
} spec_t;

/* scan._positions: 1..MAX_POSITIONS rates into st->pos_tmp, up to ", Avg Draft acceptance rate: " or the end */
static int positions(state *st, const u8 *s, size_t *at, size_t end, int avg_follows, int64_t *npos) {
    size_t pos = *at;
    *npos = 0;
    for (;;) {
        if (*npos >= MAX_POSITIONS) return -1;
        NUM(decimal, &st->pos_tmp[*npos]);
        ++*npos;
        if (avg_follows ? STARTS(s, pos, end, S_AVG_RATE) : pos == end) break;
        EXPECT(W_SEP);
    }
    *at = pos;
    return 0;
}

/* scan.parse_spec: both shapes; the per-position rates go to st->pos_tmp */
static int parse_spec(state *st, const u8 *s, size_t msg, size_t end, spec_t *P) {
    size_t pos = msg;
    double ignored;
    if (STARTS(s, pos, end, S_SPEC_OLD)) { /* 0.8.5 - 0.10.1 */
        pos += LEN(S_SPEC_OLD);
        NUM(percent, &P->rate);
        EXPECT(S_MEAN_LENGTH);
        NUM(decimal, &P->mal);
        EXPECT(S_ACCEPTED);
        NUM(count, &P->accepted);
        EXPECT(S_DRAFTED);
        NUM(count, &P->drafted);
        EXPECT(S_PER_POSITION);
        if (positions(st, s, &pos, end, 0, &P->npos) < 0) return -1;
    } else { /* 0.10.2 - 0.32.0 */
        EXPECT(S_SPEC_NEW);
        NUM(decimal, &P->mal);
        EXPECT(S_ACCEPTED_TPS);
        NUM(decimal, &ignored);
        EXPECT(S_DRAFTED_TPS);
        NUM(decimal, &ignored);
        EXPECT(S_ACCEPTED_AFTER_TPS);
        NUM(count, &P->accepted);
        EXPECT(S_DRAFTED);
        NUM(count, &P->drafted);
        EXPECT(S_PER_POSITION);
        if (positions(st, s, &pos, end, 1, &P->npos) < 0) return -1;
        pos += LEN(S_AVG_RATE);
        NUM(percent, &P->rate);
    }
    if (pos != end) return -1;
    if (P->rate != P->rate && P->accepted != NA && P->drafted != NA && P->drafted)
        P->rate = (double)P->accepted / (double)P->drafted;
    return 0;
}

/* -------------------------------------------------------------------------------- prefixes */

/* index of the prefix bytes (registered on first sight), or -1 when MAX_PREFIXES are taken */
static int proc_index(state *st, const u8 *p, size_t n) {
    /* the length and the first and last 8 bytes pick the slot (pids and ranks sit at the end) */
    uint64_t x = n, y = 0;
    if (n >= 8) {
        memcpy(&y, p, 8);
        x ^= y * 0x9E3779B97F4A7C15ULL;
        memcpy(&y, p + n - 8, 8);
    } else if (n) {
        memcpy(&y, p, n);
    }
    x = (x ^ y) * 0xC2B2AE3D27D4EB4FULL;
    uint32_t h = (uint32_t)(x >> 32);
    for (uint32_t k = h % HASH_SLOTS;; k = (k + 1) % HASH_SLOTS) {
        int slot = st->slots[k];
        if (slot == 0) break;
        int i = slot - 1;
        if (st->pre_len[i] == n && (n == 0 || memcmp(st->arena.p + st->pre_off[i], p, n) == 0)) return i;
    }
    if (st->npre >= MAX_PREFIXES) return -1;
    int i = st->npre++;
    st->pre_off[i] = st->arena.len;
    st->pre_len[i] = n;
    if (n) vec_put(st, &st->arena, p, n);
    uint32_t k = h % HASH_SLOTS;
    while (st->slots[k]) k = (k + 1) % HASH_SLOTS;
    st->slots[k] = (uint16_t)(i + 1);
    return i;
}

/* -------------------------------------------------------------------------------- one line */

static int scan_lmcache(state *st, const u8 *s, size_t n, size_t pre, size_t msg, int64_t lineno, int64_t start,
                        int64_t end) {
    long stop_l = suffix_start(s, msg, n);
    if (stop_l < 0) return 0;
    size_t stop = (size_t)stop_l;
    if (STARTS(s, msg, n, W_REQID)) {
        lookup_t L;
        if (parse_lookup(s, msg, stop, &L) < 0) return 0;
        int proc = proc_index(st, s, pre);
        if (proc < 0) return 0;
        put_head(st, L_LINE, lineno, start, end, proc);
        put_u64(st, L_HASH, rid_hash(s + L.rid, L.rid_len));
        put_i64(st, L_TOTAL, L.total);
        put_i64(st, L_COMPUTED, L.computed);
        put_i64(st, L_HIT, L.hit);
        put_i64(st, L_NEED, L.need);
        put_u8(st, L_BELOW, L.below);
        st->counts[proc][T_LOOKUP]++;
        return 1;
    }
    long tagged = msg < n && s[msg] == W_TAG_OPEN[0] ? req_tag(s, msg, stop) : (long)msg;
    if (tagged < 0) return 0;
    if (STARTS(s, (size_t)tagged, n, W_STORED)) {
        int64_t stored, total;
        if (parse_store(s, msg, stop, &stored, &total) < 0) return 0;
        int proc = proc_index(st, s, pre);
        if (proc < 0) return 0;
        put_head(st, S_LINE, lineno, start, end, proc);
        put_i64(st, S_STORED, stored);
        put_i64(st, S_TOTAL, total);
        st->counts[proc][T_STORE]++;
        return 1;
    }
    int64_t got, required, total;
    if (parse_retrieve(s, msg, stop, &got, &required, &total) < 0) return 0;
    int proc = proc_index(st, s, pre);
    if (proc < 0) return 0;
    put_head(st, R_LINE, lineno, start, end, proc);
    put_i64(st, R_GOT, got);
    put_i64(st, R_REQUIRED, required);
    put_i64(st, R_TOTAL, total);
    st->counts[proc][T_RETRIEVE]++;
    if (got < required) {
        put_flag(st, lineno, start, end, T_RETRIEVE);
    }
    return 1;
}

/* scan.stamp_value: vLLM's "MM-DD hh:mm:ss" (digits checked by vllm_head) as the number MMDDhhmmss */
static int64_t stamp_of(const u8 *p) {
    static const int at[10] = {0, 1, 3, 4, 6, 7, 9, 10, 12, 13};
    int64_t v = 0;
    for (int i = 0; i < 10; i++) v = v * 10 + (p[at[i]] - '0');
    return v;
}

/* scan._scan_vllm: the stats or SpecDecoding line after the prefixes (raw_len: the line before cleaning) */
static int scan_vllm(state *st, const u8 *s, size_t n, size_t pre, size_t raw_len, int64_t lineno, int64_t start,
                     int64_t end) {
    if (terminal_width(raw_len) || terminal_width(n)) return 0;
    long msg_l = vllm_head(s, pre, n);
    if (msg_l < 0) return 0;
    size_t msg = (size_t)msg_l;
    int64_t stamp = stamp_of(s + pre + 5);
    if (STARTS(s, msg, n, S_SPEC)) {
        spec_t P;
        if (parse_spec(st, s, msg, n, &P) < 0) return 0;
        int proc = proc_index(st, s, pre);
        if (proc < 0) return 0;
        put_head(st, P_LINE, lineno, start, end, proc);
        put_f64(st, P_MAL, P.mal);
        put_i64(st, P_ACCEPTED, P.accepted);
        put_i64(st, P_DRAFTED, P.drafted);
        put_f64(st, P_RATE, P.rate);
        put_i64(st, P_OFF, st->npos);
        put_i64(st, P_N, P.npos);
        put_i64(st, P_STAMP, stamp);
        vec_put(st, &st->col[Q_RATE], st->pos_tmp, (size_t)P.npos * sizeof(double));
        st->npos += P.npos;
        st->counts[proc][T_SPEC]++;
        return 1;
    }
    stats_t V;
    if (parse_stats(st, s, msg, n, &V) < 0) return 0;
    int proc = proc_index(st, s, pre);
    if (proc < 0) return 0;
    put_head(st, V_LINE, lineno, start, end, proc);
    put_i64(st, V_ENGINE, V.engine);
    put_i64(st, V_NENGINES, V.n_engines);
    put_f64(st, V_PROMPT, V.prompt);
    put_f64(st, V_GEN, V.gen);
    put_i64(st, V_RUNNING, V.running);
    put_i64(st, V_WAITING, V.waiting);
    put_i64(st, V_PREEMPT, V.preempt);
    put_f64(st, V_KV, V.kv);
    put_u8(st, V_KVDEV, V.dev);
    put_f64(st, V_PREFIX, V.prefix);
    put_f64(st, V_EXT, V.ext);
    put_i64(st, V_STAMP, stamp);
    st->counts[proc][T_STATS]++;
    return 1;
}

/* 1 = a hot line (recorded), 0 = rare */
static int scan_line(state *st, const u8 *raw, size_t len, unsigned flags, const u8 *block_end, int64_t lineno,
                     int64_t start, int64_t end) {
    const u8 *s;
    long cl = cleaned(st, raw, len, flags, block_end, &s);
    if (cl < 0) return 0;
    size_t n = (size_t)cl;
    long pre = peel(s, n);
    if (pre < 0) return 0;
    size_t env = envelope(s, (size_t)pre, n);
    if (env) return scan_lmcache(st, s, n, (size_t)pre, (size_t)pre + env, lineno, start, end);
    if (STARTS(s, (size_t)pre, n, "INFO ")) return scan_vllm(st, s, n, (size_t)pre, len, lineno, start, end);
    int status = parse_access(s, (size_t)pre, n);
    if (status < 0) return 0;
    int proc = proc_index(st, s, (size_t)pre);
    if (proc < 0) return 0;
    if (status >= 500) {
        st->counts[proc][T_5XX]++;
        put_flag(st, lineno, start, end, T_5XX);
    } else {
        st->counts[proc][T_ACCESS]++;
    }
    return 1;
}

static int64_t scan_all(state *st, const u8 *block, size_t n, int64_t base) {
    int64_t lineno = base;
    size_t pos = 0;
    const u8 *block_end = block + n;
    while (pos < n && !st->oom) {
        unsigned flags;
        size_t end = (size_t)(classify(st, block + pos, block_end, &flags) - block);
        lineno++;
        if (!scan_line(st, block + pos, end - pos, flags, block_end, lineno, (int64_t)pos, (int64_t)end)) {
            put_where(st, X_LINE, lineno, (int64_t)pos, (int64_t)end);
        }
        pos = end + 1;
    }
    return lineno - base;
}

/* -------------------------------------------------------------------------------- Python glue */

static void state_free(state *st) {
    for (int i = 0; i < NCOLS; i++) free(st->col[i].p);
    free(st->arena.p);
    free(st);
}

/* One state is kept between calls (taken and given back with the GIL held), so a block's columns reuse the
   capacity the previous block grew instead of growing from nothing by realloc again; a state whose buffers
   grew past SPARE_MAX (one huge block) is freed instead of kept. Concurrent scans take fresh ones. */
#define SPARE_MAX ((size_t)64 << 20)
static state *spare;

static state *state_take(void) {
    state *st = spare;
    if (!st) return calloc(1, sizeof(state));
    spare = NULL;
    for (int i = 0; i < NCOLS; i++) st->col[i].len = 0;
    st->arena.len = 0;
    memset(st->counts, 0, (size_t)st->npre * sizeof(st->counts[0]));
    memset(st->slots, 0, sizeof(st->slots));
    st->npre = 0;
    st->npos = 0;
    st->oom = 0;
    return st;
}

static void state_give(state *st) {
    size_t held = st->arena.cap;
    for (int i = 0; i < NCOLS; i++) held += st->col[i].cap;
    if (spare || st->oom || held > SPARE_MAX) {
        state_free(st);
        return;
    }
    spare = st;
}

static PyObject *build_result(state *st, int64_t lines) {
    PyObject *prefixes = PyList_New(st->npre);
    PyObject *cols = PyList_New(NCOLS);
    PyObject *counts = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)st->npre * NTPL * 8);
    if (!prefixes || !cols || !counts) goto fail;
    for (int i = 0; i < st->npre; i++) {
        PyObject *b = PyBytes_FromStringAndSize(st->arena.p ? st->arena.p + st->pre_off[i] : "",
                                                (Py_ssize_t)st->pre_len[i]);
        if (!b) goto fail;
        PyList_SET_ITEM(prefixes, i, b);
    }
    if (st->npre) memcpy(PyBytes_AS_STRING(counts), st->counts, (size_t)st->npre * NTPL * 8);
    for (int i = 0; i < NCOLS; i++) {
        PyObject *b = PyBytes_FromStringAndSize(st->col[i].p ? st->col[i].p : "", (Py_ssize_t)st->col[i].len);
        if (!b) goto fail;
        PyList_SET_ITEM(cols, i, b);
    }
    return Py_BuildValue("(LNNN)", (long long)lines, prefixes, counts, cols);
fail:
    Py_XDECREF(prefixes);
    Py_XDECREF(cols);
    Py_XDECREF(counts);
    return NULL;
}

static PyObject *py_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long base;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*L:scan", &view, &base)) return NULL;
    state *st = state_take();
    if (!st) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    const char *dp = localeconv()->decimal_point;
    st->decimal_point = dp && dp[0] ? dp[0] : '.';
    int64_t lines;
    Py_BEGIN_ALLOW_THREADS
    lines = scan_all(st, (const u8 *)view.buf, (size_t)view.len, (int64_t)base);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *res = st->oom ? PyErr_NoMemory() : build_result(st, lines);
    state_give(st);
    return res;
}

/* pack(buf, base, starts, ends, lo, hi) -> bytes: buf[base + starts[i] : base + ends[i]] for i in lo..hi-1,
 * concatenated (scan.pack_rows is the reference): what a rule keeps of many rows' lines is one object, not
 * one bytes object per row. starts/ends are the int64 columns of a ScanResult; every span is checked. */
static PyObject *py_pack(PyObject *self, PyObject *args) {
    Py_buffer buf, sv, ev;
    long long base, lo, hi;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Ly*y*LL:pack", &buf, &base, &sv, &ev, &lo, &hi)) return NULL;
    PyObject *out = NULL;
    const int64_t *st = (const int64_t *)sv.buf, *en = (const int64_t *)ev.buf;
    int64_t n_rows = sv.len / 8, total = 0;
    if (sv.itemsize != 8 || ev.itemsize != 8 || ev.len != sv.len || lo < 0 || hi < lo || hi > n_rows || base < 0) {
        PyErr_SetString(PyExc_ValueError, "pack: bad columns or row range");
        goto done;
    }
    for (int64_t i = lo; i < hi; i++) {
        if (st[i] < 0 || en[i] < st[i] || base + en[i] > (int64_t)buf.len) {
            PyErr_SetString(PyExc_ValueError, "pack: a row lies outside the buffer");
            goto done;
        }
        total += en[i] - st[i];
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out) {
        char *w = PyBytes_AS_STRING(out);
        const char *b = (const char *)buf.buf + base;
        for (int64_t i = lo; i < hi; i++) {
            memcpy(w, b + st[i], (size_t)(en[i] - st[i]));
            w += en[i] - st[i];
        }
    }
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    return out;
}

/* shift(column, base): add base to every int64 of a writable buffer, in place. ScanResult.shifted numbers a
 * block's rows once the lines before it are known (a block scanned ahead on another thread or process), so
 * nothing counts line breaks ahead of the scan; the pure-Python reference is a map of add. */
static PyObject *py_shift(PyObject *self, PyObject *args) {
    Py_buffer v;
    long long base;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*L:shift", &v, &base)) return NULL;
    if (v.itemsize != 8 || v.len % 8) {
        PyBuffer_Release(&v);
        PyErr_SetString(PyExc_ValueError, "shift: an int64 column is required");
        return NULL;
    }
    int64_t *p = (int64_t *)v.buf;
    for (Py_ssize_t i = 0, n = v.len / 8; i < n; i++) p[i] = (int64_t)((uint64_t)p[i] + (uint64_t)base);
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
}

/* in _prefilter.c: which rare lines can never make a record (prefilter.py is the reference) */
PyObject *specdiag_prefilter(PyObject *self, PyObject *args);
/* in _prefilter.c: the lowest offset where one of a few literals occurs (marks.first_marker) */
PyObject *specdiag_find_any(PyObject *self, PyObject *args);
const char *specdiag_literal_search(void);
PyObject *specdiag_iso_fronts(PyObject *self, PyObject *args);
PyObject *specdiag_docker_texts(PyObject *self, PyObject *args);
PyObject *specdiag_iso_row_wraps(PyObject *self, PyObject *args);

static PyMethodDef methods[] = {
    {"scan", py_scan, METH_VARARGS, "scan(block, base_line) -> (lines, prefixes, counts, columns)"},
    {"pack", py_pack, METH_VARARGS, "pack(buf, base, starts, ends, lo, hi) -> the rows' bytes, concatenated"},
    {"shift", py_shift, METH_VARARGS, "shift(column, base): base added to every int64 of the column, in place"},
    {"prefilter", specdiag_prefilter, METH_VARARGS,
     "prefilter(buf, off, starts, ends, flags) -> one kind byte per line (see prefilter.py)"},
    {"docker_texts", specdiag_docker_texts, METH_VARARGS,
     "docker_texts(buf, start, end, longest) -> the texts of a block of docker json-file lines, or None"},
    {"iso_fronts", specdiag_iso_fronts, METH_VARARGS,
     "iso_fronts(buf, start, end) -> (the block without each line's timestamp and CRI tag, int64 widths taken)"},
    {"iso_row_wraps", specdiag_iso_row_wraps, METH_VARARGS,
     "iso_row_wraps(buf, start, end, lines, first) -> int64 widths iso_fronts takes off each line and the next"},
    {"find_any", specdiag_find_any, METH_VARARGS,
     "find_any(buf, lo, hi, literals) -> the lowest offset in buf[lo:hi] where one of the literals starts, or -1"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "Compiled scanner (see scan.py).", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scan(void) {
    crc_init();
    tables_init();
    PyObject *m = PyModule_Create(&module);
    /* which line loop this build runs (the benchmark and the tests report and check it) */
    if (m && (PyModule_AddStringConstant(m, "LOOP", HAVE_SSE2 ? "sse2" : HAVE_SWAR ? "words" : "bytes") < 0 ||
              PyModule_AddStringConstant(m, "SEARCH", specdiag_literal_search()) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
