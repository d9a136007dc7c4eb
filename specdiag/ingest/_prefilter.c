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
#include <stdlib.h>
#include <string.h>

#include "_wording.h"

/* SSE2 (every x86-64): the printable test and the anchor search read 16 bytes a step; elsewhere, and with
   -DSPECDIAG_SCAN_PORTABLE, the same tests run a byte at a time (the portable-build test compares them). */
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SPECDIAG_SCAN_PORTABLE)
#include <emmintrin.h>
#define PF_SSE2 1
#else
#define PF_SSE2 0
#endif

typedef unsigned char u8;

#define KEEP 0
#define INERT 1
#define PREFIXED 2
#define QUIET 3
#define QUIET_FIRST 4
#define UNKNOWN 5
#define UNKNOWN_FIRST 6
#define LMC_UNKNOWN 7
#define MAX_UNKNOWN_TEXT 4096 /* prefilter.MAX_UNKNOWN_TEXT */
#define MAX_QUIET_HEADS 64
#define MAX_QUIET_HEAD 256
#define HELD_WIDTH 40
#define ESC_BLOCK 1
#define RESIDUE_BLOCK 2
#define PLAIN_BLOCK 4
#define DOCKER_TEXT 8
#define MAX_INERT_LINE 4096
#define MAX_QUIET_LINE 65536 /* prefilter.MAX_QUIET_LINE */
#define MAX_PLACES 24
#define MAX_DEPTH 6
#define MAX_PID_DIGITS 18

static const char *const anchors[] = {W_PREFILTER_ANCHORS}; /* catalog/wording.py, through _wording.h */
#define N_ANCHORS (sizeof(anchors) / sizeof(anchors[0]))
static size_t anchor_len[N_ANCHORS];
/* for each byte, the anchors that start with it (a bit each) */
static uint64_t anchor_first[256];
static int tables_ready;
#if PF_SSE2
/* the distinct first two bytes of the anchors, broadcast: a position whose two bytes are none of these
   starts no anchor (every anchor is at least 3 bytes long) */
static __m128i pair_first[N_ANCHORS], pair_second[N_ANCHORS];
static int n_pairs;
#endif

#if PF_SSE2 && (defined(__x86_64__) || defined(__i386__))
#include <tmmintrin.h>
/* SSSE3's byte shuffle, where the CPU has it (asked once, at run time): the first three bytes of every anchor
   in eight buckets, one table per byte and nibble; a position is a candidate when one bucket holds each of its
   three bytes' both nibbles (Hyperscan's "Teddy" literal matcher, reduced to a filter: anchor_at decides).
   About 18 vector operations per 16 bytes whatever the number of anchors, where the pair test above takes four
   per distinct pair (68). */
#define PF_TEDDY 1
/* per fingerprint byte (the literal's first three) and nibble value: the buckets (a bit each) holding it */
typedef struct {
    u8 lo[3][16], hi[3][16];
} teddy_t;
static teddy_t anchor_teddy;
static int teddy_ok;

/* put lit (n bytes) in bucket b (0-7); a byte past a 2-byte literal's end is any byte */
static void teddy_add(teddy_t *t, const u8 *lit, size_t n, int b) {
    for (size_t k = 0; k < 3; k++)
        for (int v = 0; v < 16; v++) {
            t->lo[k][v] |= (u8)((k >= n || (lit[k] & 15) == v) << b);
            t->hi[k][v] |= (u8)((k >= n || (lit[k] >> 4) == v) << b);
        }
}

/* the buckets of each of the 16 positions from s (each with its next two bytes: s[0..18) is read); zero: none */
__attribute__((target("ssse3"))) static inline __m128i teddy_buckets(const u8 *s, const teddy_t *t) {
    const __m128i nibble = _mm_set1_epi8(0x0f);
    __m128i acc = _mm_set1_epi8((char)0xff);
    for (int k = 0; k < 3; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + k));
        __m128i l = _mm_and_si128(x, nibble), h = _mm_and_si128(_mm_srli_epi16(x, 4), nibble);
        __m128i lo = _mm_loadu_si128((const __m128i *)t->lo[k]), hi = _mm_loadu_si128((const __m128i *)t->hi[k]);
        acc = _mm_and_si128(acc, _mm_and_si128(_mm_shuffle_epi8(lo, l), _mm_shuffle_epi8(hi, h)));
    }
    return acc;
}

/* the positions (bits) of teddy_buckets' answer that some bucket holds */
__attribute__((target("ssse3"))) static inline unsigned teddy_hits(__m128i buckets) {
    return ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(buckets, _mm_setzero_si128())) & 0xffffu;
}
#else
#define PF_TEDDY 0
#endif

/* byte classes, one table load per test (the wrapper walks test every byte of a line's head); filled by
   prefilter_tables from the definitions in the comments */
#define C_WORD 1  /* \w over ASCII: [0-9A-Za-z_] */
#define C_TOKEN 2 /* [^\s:()\[\]{}|] over printable ASCII */
static u8 byte_class[256];
static inline int is_digit(u8 c) { return c >= '0' && c <= '9'; }
static inline int is_word(u8 c) { return byte_class[c] & C_WORD; }
static inline int is_token(u8 c) { return byte_class[c] & C_TOKEN; }

static void class_table(void) {
    for (int c = 0; c < 256; c++) {
        int word = is_digit((u8)c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        int token = c > 0x20 && c < 0x7f && !strchr(":()[]{}|", c);
        byte_class[c] = (u8)((word ? C_WORD : 0) | (token ? C_TOKEN : 0));
    }
}

static void prefilter_tables(void) {
    if (tables_ready) return;
    class_table();
#if PF_TEDDY
    __builtin_cpu_init();
    /* SPECDIAG_SCAN_NO_SSSE3=1: the SSE2 searches instead, so that the tests can compare them on this CPU too */
    const char *no = getenv("SPECDIAG_SCAN_NO_SSSE3");
    teddy_ok = __builtin_cpu_supports("ssse3") && !(no && *no && strcmp(no, "0") != 0);
#endif
    for (size_t i = 0; i < N_ANCHORS; i++) {
        anchor_len[i] = strlen(anchors[i]);
        anchor_first[(u8)anchors[i][0]] |= 1ull << i;
#if PF_TEDDY
        teddy_add(&anchor_teddy, (const u8 *)anchors[i], anchor_len[i], (int)(i % 8));
#endif
#if PF_SSE2
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= anchors[j][0] == anchors[i][0] && anchors[j][1] == anchors[i][1];
        if (!seen) {
            pair_first[n_pairs] = _mm_set1_epi8(anchors[i][0]);
            pair_second[n_pairs++] = _mm_set1_epi8(anchors[i][1]);
        }
#endif
    }
    tables_ready = 1;
}


/* which literal search this process runs (the module's SEARCH): "ssse3", "sse2" or "bytes" */
const char *specdiag_literal_search(void) {
    prefilter_tables();
#if PF_TEDDY
    if (teddy_ok) return "ssse3";
#endif
    return PF_SSE2 ? "sse2" : "bytes";
}

/* whether an anchor starts at s[i] */
static inline int anchor_at(const u8 *s, size_t i, size_t n) {
    uint64_t m = anchor_first[s[i]];
    while (m) {
        int a = __builtin_ctzll(m);
        m &= m - 1;
        size_t k = anchor_len[a];
        if (i + k <= n && memcmp(s + i, anchors[a], k) == 0) return 1;
    }
    return 0;
}

#if PF_TEDDY
__attribute__((target("ssse3"))) static int has_anchor_teddy(const u8 *s, size_t n) {
    size_t i = 0;
    for (; i + 18 <= n; i += 16)
        for (unsigned m = teddy_hits(teddy_buckets(s + i, &anchor_teddy)); m; m &= m - 1)
            if (anchor_at(s, i + (size_t)__builtin_ctz(m), n)) return 1;
    for (; i < n; i++)
        if (anchor_at(s, i, n)) return 1;
    return 0;
}
#endif

static int has_anchor(const u8 *s, size_t n) {
    size_t i = 0;
#if PF_TEDDY
    if (teddy_ok) return has_anchor_teddy(s, n);
#endif
#if PF_SSE2
    for (; i + 17 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i)), y = _mm_loadu_si128((const __m128i *)(s + i + 1));
        __m128i hit = _mm_setzero_si128();
        for (int j = 0; j < n_pairs; j++)
            hit = _mm_or_si128(hit, _mm_and_si128(_mm_cmpeq_epi8(x, pair_first[j]), _mm_cmpeq_epi8(y, pair_second[j])));
        for (unsigned m = (unsigned)_mm_movemask_epi8(hit); m; m &= m - 1)
            if (anchor_at(s, i + (size_t)__builtin_ctz(m), n)) return 1;
    }
#endif
    for (; i < n; i++)
        if (anchor_at(s, i, n)) return 1;
    return 0;
}

/* prefilter.printable_utf8: strict UTF-8 (no overlong form, no surrogate, nothing past U+10FFFF) holding no
   C0 or C1 control, DEL, U+2028 or U+2029 */
static int printable_utf8(const u8 *s, size_t m) {
    size_t i = 0;
    while (i < m) {
        u8 c = s[i];
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f) return 0;
            i++;
            continue;
        }
        uint32_t cp;
        size_t k;
        if (c >= 0xc2 && c <= 0xdf) cp = c & 0x1f, k = 1;
        else if (c >= 0xe0 && c <= 0xef) cp = c & 0x0f, k = 2;
        else if (c >= 0xf0 && c <= 0xf4) cp = c & 0x07, k = 3;
        else return 0;
        if (i + k >= m) return 0; /* the sequence runs past the line */
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        if (cp <= 0x9f || cp == 0x2028 || cp == 0x2029) return 0; /* C1 controls, the separators */
        i += k + 1;
    }
    return 1;
}

/* every byte printable ASCII (0x20-0x7e) */
static int all_printable(const u8 *s, size_t m) {
    size_t i = 0;
#if PF_SSE2
    const __m128i below = _mm_set1_epi8(0x1f), above = _mm_set1_epi8(0x7f);
    for (; i + 16 <= m; i += 16) {  /* signed compares: a byte >= 0x80 is negative, so not above 0x1f */
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        if (_mm_movemask_epi8(_mm_and_si128(_mm_cmpgt_epi8(x, below), _mm_cmplt_epi8(x, above))) != 0xffff) return 0;
    }
    if (m >= 16 && i < m) { /* the last bytes: one more load, overlapping the ones already tested */
        __m128i x = _mm_loadu_si128((const __m128i *)(s + m - 16));
        return _mm_movemask_epi8(_mm_and_si128(_mm_cmpgt_epi8(x, below), _mm_cmplt_epi8(x, above))) == 0xffff;
    }
#endif
    for (; i < m; i++)
        if (s[i] < 0x20 || s[i] > 0x7e) return 0;
    return 1;
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
/* prefilter._without_line_end_cr: the length without the CR of a CRLF line end (a line with any other CR is
   left as it is) */
static size_t without_line_end_cr(const u8 *s, size_t n) {
    return n && s[n - 1] == '\r' && !memchr(s, '\r', n - 1) ? n - 1 : n;
}

/* the line without a CRLF end's CR (its callers took it off: without_line_end_cr) */
static long find_in(const u8 *s, size_t from, size_t end, const u8 *lit, size_t k);

/* wrappers.ANSI_BYTES taken off s[0..n) in place (one pass, leftmost: an escape sequence, a lone ESC, colour
 * residue), as json_line does to a docker text; the length left */
static size_t without_ansi(u8 *s, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t k = s[i] == 0x1b ? esc_seq(s, i, n) : s[i] == '[' ? residue(s, i, n) : 0;
        if (k) {
            i += k;
        } else if (s[i] == 0x1b) {
            i++;
        } else {
            s[w++] = s[i++];
        }
    }
    return w;
}

static long cleaned(const u8 *s, size_t n, int flags, u8 *out) {
    if (memchr(s, '\r', n)) return -1;
    size_t w = 0;
    if ((flags & ESC_BLOCK) && memchr(s, 0x1b, n)) {
        if (esc_cut_at_end(s, n)) return -1;
        for (size_t i = 0; i < n;) { /* the text between ESCs is copied a run at a time */
            const u8 *e = memchr(s + i, 0x1b, n - i);
            size_t j = e ? (size_t)(e - s) : n;
            memcpy(out + w, s + i, j - i);
            w += j - i;
            if (j == n) break;
            size_t k = esc_seq(s, j, n);
            i = j + (k ? k : 1);
        }
        return (long)w;
    }
    if (flags & RESIDUE_BLOCK) {
        for (size_t i = 0; i < n;) {
            if (s[i] == '[') {
                size_t k = residue(s, i, n);
                if (k) {
                    /* cleaner.ANSI_RESIDUE's "^[" or "ESC" right before it in the line (never part of an earlier
                       match, which holds neither and ends in 'm'; so copied to out, and taken off again) */
                    if (i >= 2 && s[i - 2] == '^' && s[i - 1] == '[' && w >= 2) w -= 2;
                    else if (i >= 3 && memcmp(s + i - 3, "ESC", 3) == 0 && w >= 3) w -= 3;
                    i += k;
                    continue;
                }
            }
            out[w++] = s[i++];
        }
    } else {
        memcpy(out, s, n);
        w = n;
    }
    if ((flags & DOCKER_TEXT) && (memchr(out, 0x1b, w) || find_in(out, 0, w, (const u8 *)"[0m", 3) >= 0))
        w = without_ansi(out, w);
    return (long)w;
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
    return c == ' ' || c == '>' || ((c == '-' || c == '*' || c == '+' || c == '|') && k + 1 < n && s[k + 1] == ' ');
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

/* prefilter._stern_end: stern's "pod container " (lowercase DNS names, 253 and 63 bytes at most) at pos */
/* prefilter._rank_end: "\[rank\d{1,6}\]: " at pos, its end; -1 without it */
static long rank_end(const u8 *s, size_t pos, size_t n) {
    if (pos + 5 > n || memcmp(s + pos, "[rank", 5) != 0) return -1;
    size_t j = pos + 5;
    while (j < n && j - pos - 5 < 6 && is_digit(s[j])) j++;
    if (j == pos + 5 || j + 3 > n || s[j] != ']' || s[j + 1] != ':' || s[j + 2] != ' ') return -1;
    return (long)(j + 3);
}

static long stern_end(const u8 *s, size_t pos, size_t n) {
    size_t k = pos;
    for (int name = 0; name < 2; name++) {
        size_t most = name ? 63 : 253;
        if (k >= n || s[k] < 'a' || s[k] > 'z') return -1;
        size_t j = k + 1;
        while (j < n && j - k < most &&
               ((s[j] >= 'a' && s[j] <= 'z') || is_digit(s[j]) || s[j] == '-' || (!name && s[j] == '.')))
            j++;
        if (j >= n || s[j] != ' ') return -1;
        k = j + 1;
    }
    return (long)k;
}

/* the places loose wrappers at pos end at (at most 3) */
static int wrapper_ends(const u8 *s, size_t pos, size_t n, size_t out[3]) {
    if (pos >= n) return 0;
    u8 c = s[pos];
    if (is_digit(c)) {
        long e = grep_n_end(s, pos, n);
        if (e < 0) return 0;
        out[0] = (size_t)e;
        return 1;
    }
    if (c == ' ' || c == '>' || ((c == '-' || c == '*' || c == '+' || c == '|') && pos + 1 < n && s[pos + 1] == ' ')) {
        out[0] = indent_end(s, pos, n);
        return 1;
    }
    if (c == '`') { /* a markdown code span's opening backticks (wrappers.code_span), and its space of padding */
        size_t k = pos;
        while (k < n && k - pos < 3 && s[k] == '`') k++;
        out[0] = k;
        if (k < n && s[k] == ' ') {
            out[1] = k + 1;
            return 2;
        }
        return 1;
    }
    if (c == '[') { /* torchrun's "[rankN]: " (wrappers.RANK_PREFIX) */
        long e = rank_end(s, pos, n);
        if (e < 0) return 0;
        out[0] = (size_t)e;
        return 1;
    }
    if (c == '(' || c == '{') return 0;
    int k = 0;
    long e = compose_end(s, pos, n);
    if (e >= 0) out[k++] = (size_t)e;
    e = grep_h_end(s, pos, n);
    if (e >= 0) out[k++] = (size_t)e;
    e = stern_end(s, pos, n);
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

static long find_in(const u8 *s, size_t from, size_t end, const u8 *lit, size_t k);
static inline int is_letter(u8 c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

/* wrappers.JSON_KEYS and JSON_FIRST_KEYS (the differential tests build lines from them) */
static const char *const json_keys[] = {"\"log\"", "\"levelname\"", "\"MESSAGE\"", "\"textPayload\"", "\"line\"",
                                        "\"message\""};
static const char *const json_first_keys[] = {"{\"log\"", "{\"asctime\"", "{\"time\"", "{\"levelname\""};

/* prefilter._json_start: a line starting with '{' that a wrapper may read (JSON of a collector or a logging
 * format, Loki's labels); an application's own JSON line is not one */
static int json_start(const u8 *r, size_t m) {
    if (m < 2 || r[1] == '_' || is_letter(r[1])) return 1;
    for (size_t i = 0; i < sizeof(json_first_keys) / sizeof(json_first_keys[0]); i++) {
        size_t k = strlen(json_first_keys[i]);
        if (m >= k && memcmp(r, json_first_keys[i], k) == 0) return 1;
    }
    for (size_t i = 0; i < sizeof(json_keys) / sizeof(json_keys[0]); i++)
        if (find_in(r, 0, m, (const u8 *)json_keys[i], strlen(json_keys[i])) >= 0) return 1;
    return 0;
}

/* prefilter._LEVEL_WORDS: vLLM's level words with the space after them */
static const char *const level_words[] = {"INFO ", "WARNING ", "ERROR ", "DEBUG ", "CRITICAL ", "WARN "};
#define N_LEVEL_WORDS (sizeof(level_words) / sizeof(level_words[0]))

/* prefilter._foreign_basic: Python logging's default "LEVEL:logger:" with the name right after the colon */
static int foreign_basic(const u8 *r, size_t m) {
    for (size_t i = 0; i < N_LEVEL_WORDS; i++) {
        size_t k = strlen(level_words[i]); /* the word and its colon */
        if (m >= k && memcmp(r, level_words[i], k - 1) == 0 && r[k - 1] == ':')
            return m > k && (r[k] == '_' || is_letter(r[k]));
    }
    return 0;
}

/* prefilter._ray_head: Ray's C++ header at WARNING or worse, ``[YYYY-MM-DD HH:MM:SS,mmm L `` (L one of WEFC) */
static int ray_head(const u8 *r, size_t m) {
    return m > 27 && is_digit(r[1]) && r[24] == ' ' && r[26] == ' ' &&
           (r[25] == 'W' || r[25] == 'E' || r[25] == 'F' || r[25] == 'C');
}

/* prefilter._glog_head: a glog line at WARNING or worse, ``Lmmdd hh:`` (L one of WEF) */
static int glog_head(const u8 *r, size_t m) {
    if (m > 8 && is_digit(r[1]) && is_digit(r[2]) && is_digit(r[3]) && is_digit(r[4]) && r[5] == ' ' && r[8] == ':')
        return 1;
    for (size_t k = 1; k <= 8; k++) /* glog 0.7+: the year before the month ("E20260106 06:43:02") */
        if (k >= m || !is_digit(r[k])) return 0;
    return m > 12 && r[9] == ' ' && r[12] == ':';
}

/* wrappers.bracket_time: "[dddd-dd-ddT", a CI runner's time before the line (Buildkite) */
static int bracket_time(const u8 *r, size_t m) {
    return m > 11 && is_digit(r[1]) && r[5] == '-' && r[11] == 'T';
}

/* prefilter._torch_head: torch's C++ header at ERROR or worse, "[rankN]:" or nothing, then "[E" / "[F" and a space
   or a digit */
static int torch_head(const u8 *r, size_t m) {
    size_t i = 0;
    if (m >= 5 && memcmp(r, "[rank", 5) == 0) {
        i = 5;
        while (i < m && is_digit(r[i])) i++;
        if (i + 1 >= m || r[i] != ']' || r[i + 1] != ':') return 0;
        i += 2;
    }
    return i + 2 < m && r[i] == '[' && (r[i + 1] == 'E' || r[i + 1] == 'F') && (r[i + 2] == ' ' || is_digit(r[i + 2]));
}

static int may_start(const u8 *s, size_t pos, size_t n) {
    if (pos >= n) return 1;
    const u8 *r = s + pos;
    size_t m = n - pos;
    u8 c = r[0];
    if (c == '(' || c == '<') return 1; /* a process prefix, a syslog priority */
    if (c == '{') return json_start(r, m);
    if (c == '[') return lmc_head_prefix(r, m) || ray_head(r, m) || bracket_time(r, m) || torch_head(r, m);
    if (c == '*') return m >= 7 && memcmp(r, "*** SIG", 7) == 0; /* a fatal signal Ray's core reports */
    if (c == 'F' && m >= 18 && memcmp(r, "Fatal Python error", 18) == 0) return 1; /* envelope.FATAL_PYTHON */
    if (c == 'P' && m >= 8 && memcmp(r, "Process ", 8) == 0) return 1;             /* records.MP_BANNER */
    if ((c == 'W' || c == 'E' || c == 'F') && glog_head(r, m)) return 1;         /* envelope.GLOG */
    if (m >= 3 && (memcmp(r, "INF", 3) == 0 || memcmp(r, "WAR", 3) == 0 || memcmp(r, "ERR", 3) == 0 ||
                   memcmp(r, "DEB", 3) == 0 || memcmp(r, "CRI", 3) == 0))
        return !foreign_basic(r, m);
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
        size_t ends[3];
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

/* ---------------------------------------------------------------- quiet records (prefilter._quiet) */

/* a blob of lines ("a\nb\nc", sorted for lookups) as an array of (start, length) */
typedef struct {
    const u8 **at;
    size_t *len;
    size_t n;
} words;

static int words_of(const u8 *blob, size_t n, words *w) {
    size_t count = n ? 1 : 0;
    for (size_t i = 0; i < n; i++) count += blob[i] == '\n';
    w->n = 0;
    w->at = count ? PyMem_Malloc(count * sizeof(*w->at)) : NULL;
    w->len = count ? PyMem_Malloc(count * sizeof(*w->len)) : NULL;
    if (count && (!w->at || !w->len)) return -1;
    size_t from = 0;
    for (size_t i = 0; i <= n && n; i++) {
        if (i == n || blob[i] == '\n') {
            w->at[w->n] = blob + from;
            w->len[w->n++] = i - from;
            from = i + 1;
        }
    }
    return 0;
}

static void words_free(words *w) {
    PyMem_Free(w->at);
    PyMem_Free(w->len);
    w->at = NULL;
    w->len = NULL;
    w->n = 0;
}

/* Blobs split once, not once a block. The blobs change only when QuietPlaces learns a place (a few times an
 * input), yet every block's call passed them again, and once an unknown place brought the catalog's 6,000
 * candidate formats (374 KB) splitting them took 0.18 ms a call: 74 ms of a 420-block log. A slot keeps a
 * blob's lines with a reference to its bytes object (immutable, and alive while referenced, so its identity
 * names its content). Slots change only under the GIL, and a slot in use by a call (users > 0), whose loop
 * runs without the GIL, is never evicted. */
#define WCACHE_SLOTS 24
#define WCACHE_MIN 4096 /* smaller blobs are split each call: cheaper than a slot */
typedef struct {
    PyObject *obj;
    words w;
    int users;
    unsigned long long used;
} wslot;
static wslot wcache[WCACHE_SLOTS];
static unsigned long long wclock;

/* the least recently used slot no call is using, or -1 */
static int wcache_victim(void) {
    int best = -1;
    for (int i = 0; i < WCACHE_SLOTS; i++) {
        if (wcache[i].users) continue;
        if (!wcache[i].obj) return i;
        if (best < 0 || wcache[i].used < wcache[best].used) best = i;
    }
    return best;
}

/* *w: the lines of the blob b; returns its slot (users counted), -1 when split for this call only (free it
 * with words_give), -2 out of memory. GIL held. */
static int words_take(const Py_buffer *b, words *w) {
    PyObject *o = b->obj;
    int cacheable = o && PyBytes_CheckExact(o) && b->len >= WCACHE_MIN;
    if (cacheable)
        for (int i = 0; i < WCACHE_SLOTS; i++)
            if (wcache[i].obj == o) {
                wcache[i].users++;
                wcache[i].used = ++wclock;
                *w = wcache[i].w;
                return i;
            }
    w->at = NULL;
    w->len = NULL;
    w->n = 0;
    if (words_of(b->buf, (size_t)b->len, w) < 0) {
        words_free(w);
        return -2;
    }
    int v = cacheable ? wcache_victim() : -1;
    if (v < 0) return -1;
    if (wcache[v].obj) {
        words_free(&wcache[v].w);
        Py_DECREF(wcache[v].obj);
    }
    Py_INCREF(o);
    wcache[v] = (wslot){o, *w, 1, ++wclock};
    return v;
}

/* the end of a call's use of words_take's answer. GIL held. */
static void words_give(int slot, words *w) {
    if (slot >= 0) wcache[slot].users--;
    else if (slot == -1) words_free(w);
}

/* bytes order, as Python sorts bytes */
static int cmp_bytes(const u8 *a, size_t an, const u8 *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

typedef struct {
    words keys;
    words dispatch[2], needles[2]; /* per project (0: vLLM, 1: LMCache): "word\tneedle\t..." lines, needles */
    words udispatch[2], uneedles[2], ucands[2]; /* per project, QuietPlaces.recognising: words, needles, candidates */
    const u8 *wmask; /* byte w set: a terminal width the reader knows (MAX_QUIET_LINE + 1 bytes) */
    const u8 *year;  /* the year of the reader's last dated line (4 bytes), or NULL */
} quiet_t;

/* the dispatch line of word (its first tab-separated field), or -1 (binary search: the lines are sorted by it) */
static long dispatch_line(const words *w, const u8 *word, size_t n) {
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const u8 *tab = memchr(w->at[mid], '\t', w->len[mid]);
        size_t wl = tab ? (size_t)(tab - w->at[mid]) : w->len[mid];
        int c = cmp_bytes(w->at[mid], wl, word, n);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* the first field of w's line i (up to sep, or the whole line) */
static size_t field_len(const words *w, size_t i, u8 sep) {
    const u8 *t = memchr(w->at[i], sep, w->len[i]);
    return t ? (size_t)(t - w->at[i]) : w->len[i];
}

/* the first of w's lines (sorted) whose first field (up to sep) is key, or w->n */
static size_t lower_bound(const words *w, const u8 *key, size_t n, u8 sep) {
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp_bytes(w->at[mid], field_len(w, mid, sep), key, n) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* prefilter._decimal */
static int decimal(const u8 *v, size_t n) {
    while (n && v[0] == ' ') v++, n--;
    while (n && v[n - 1] == ' ') n--;
    if (n && (v[0] == '+' || v[0] == '-')) v++, n--;
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_digit(v[i])) return 0;
    return 1;
}

/* first occurrence of lit[0..k) inside s[from..end), as an offset, or -1 */
static long find_in(const u8 *s, size_t from, size_t end, const u8 *lit, size_t k) {
    if (k == 0) return (long)from;
    for (size_t i = from; i + k <= end; i++) {
        const u8 *c = memchr(s + i, lit[0], end - k - i + 1);
        if (!c) return -1;
        i = (size_t)(c - s);
        if (memcmp(c, lit, k) == 0) return (long)i;
    }
    return -1;
}

#define MAX_PH 64
/* prefilter.simple_fits: spec is "kinds US lit0 US lit1 ..." (US = 0x1f) */
static int simple_fits(const u8 *spec, size_t sn, const u8 *body, size_t bn) {
    while (bn && body[0] == ' ') body++, bn--;
    while (bn && body[bn - 1] == ' ') bn--;
    const u8 *lit[MAX_PH + 1];
    size_t ll[MAX_PH + 1];
    const u8 *us = memchr(spec, 0x1f, sn);
    if (!us) return 0;
    const u8 *kinds = spec;
    size_t nk = (size_t)(us - spec), nl = 0;
    if (nk > MAX_PH) return 0;
    const u8 *p = us + 1, *end = spec + sn;
    for (;;) {
        const u8 *q = memchr(p, 0x1f, (size_t)(end - p));
        if (nl > MAX_PH) return 0;
        lit[nl] = p;
        ll[nl++] = (size_t)((q ? q : end) - p);
        if (!q) break;
        p = q + 1;
    }
    if (nl != nk + 1 || bn < ll[0] || memcmp(body, lit[0], ll[0]) != 0) return 0;
    if (nk == 0) return bn == ll[0];
    size_t pos = ll[0];
    if (bn < ll[nk] || bn - ll[nk] < pos || memcmp(body + bn - ll[nk], lit[nk], ll[nk]) != 0) return 0;
    size_t stop = bn - ll[nk];
    size_t vs[MAX_PH], ve[MAX_PH];
    int glued[MAX_PH + 1] = {0};
    for (size_t i = 1; i < nk; i++) {
        long j = find_in(body, pos, stop, lit[i], ll[i]);
        if (j < 0) return 0;
        if (ll[i] == 0) glued[i] = 1;
        vs[i - 1] = pos, ve[i - 1] = (size_t)j;
        pos = (size_t)j + ll[i];
    }
    vs[nk - 1] = pos, ve[nk - 1] = stop;
    for (size_t i = 0; i < nk; i++)
        if (kinds[i] == 'd' && !glued[i] && !glued[i + 1] && !decimal(body + vs[i], ve[i] - vs[i])) return 0;
    return 1;
}

/* QuietPlaces.accepts: the key is an any-text place, or one of its simple patterns fits body */
static int accepts(const words *keys, const u8 *key, size_t kn, const u8 *body, size_t bn, int whole) {
    for (size_t i = lower_bound(keys, key, kn, 0x1f); i < keys->n; i++) {
        size_t f = field_len(keys, i, 0x1f);
        if (cmp_bytes(keys->at[i], f, key, kn) != 0) break;
        if (f == keys->len[i]) return 1; /* the key alone: every text */
        if (!whole && simple_fits(keys->at[i] + f + 1, keys->len[i] - f - 1, body, bn)) return 1;
    }
    return 0;
}

/* prefilter._unremarkable: no template of the project dispatched on the first word finds its needle in
 * body[0..n), no needle of those tried on every record is there */
static int unremarkable_by(const u8 *body, size_t n, const words *d, const words *nd) {
    if (n >= 8 && memcmp(body, "[req_id=", 8) == 0) return 0;
    const u8 *sp = memchr(body, ' ', n);
    long line = dispatch_line(d, body, sp ? (size_t)(sp - body) : n);
    if (line >= 0) {
        const u8 *p = d->at[line], *end = p + d->len[line];
        const u8 *t = memchr(p, '\t', (size_t)(end - p));
        while (t) { /* each needle after a tab */
            const u8 *f = t + 1, *nt = f < end ? memchr(f, '\t', (size_t)(end - f)) : NULL;
            size_t fl = (size_t)((nt ? nt : end) - f);
            if (find_in(body, 0, n, f, fl) >= 0) return 0;
            t = nt;
        }
    }
    for (size_t i = 0; i < nd->n; i++)
        if (find_in(body, 0, n, nd->at[i], nd->len[i]) >= 0) return 0;
    return 1;
}

static int unremarkable(const u8 *body, size_t n, const quiet_t *q, int project) {
    return unremarkable_by(body, n, &q->dispatch[project], &q->needles[project]);
}

/* prefilter._suffix_place on r[msg..rn): the suffix's inner span [*in0, *in1) and the message's end *body_end */
static int suffix_place(const u8 *r, size_t rn, size_t msg, size_t *in0, size_t *in1, size_t *body_end) {
    size_t end = rn;
    if (!(end > 0 && r[end - 1] == ')')) {
        while (end > msg && r[end - 1] == ' ') end--;
        if (end <= msg || r[end - 1] != ')') return 0;
    }
    long i = -1;
    for (size_t k = end; k >= msg + 2; k--)
        if (r[k - 2] == ' ' && r[k - 1] == '(') {
            i = (long)(k - 2);
            break;
        }
    if (i < 0) return 0;
    const u8 *ap = memchr(r + i, ':', end - (size_t)i);
    if (!ap) return 0;
    size_t a = (size_t)(ap - r);
    const u8 *bp = memchr(r + a + 1, ':', end - a - 1);
    if (!bp) return 0;
    size_t b = (size_t)(bp - r);
    if (a < 3 || memcmp(r + a - 3, ".py", 3) != 0 || b == a + 1 || b + 2 >= end) return 0;
    for (size_t k = a + 1; k < b; k++)
        if (!is_digit(r[k])) return 0;
    *in0 = (size_t)i + 2, *in1 = end - 1, *body_end = (size_t)i;
    return 1;
}

static int unknown_place(const words *keys, const u8 *key, size_t kn);
static int unrecognisable(const u8 *body, size_t n, u8 level, const quiet_t *q, int project);

/* prefilter._quiet_lmcache: QUIET, LMC_UNKNOWN or 0 */
static int is_quiet_lmcache(const u8 *r, size_t rn, const quiet_t *q, int whole) {
    if (!q->year || rn < 36 || memcmp(r + 24, "] LMCache ", 10) != 0 || memcmp(r + 1, q->year, 4) != 0) return 0;
    const u8 *cp = memchr(r + 34, ':', rn - 34);
    if (!cp) return 0;
    size_t colon = (size_t)(cp - r), lv = colon - 34;
    if (!((lv == 5 && memcmp(r + 34, "DEBUG", 5) == 0) || (lv == 4 && memcmp(r + 34, "INFO", 4) == 0))) return 0;
    size_t msg = colon + 1 < rn && r[colon + 1] == ' ' ? colon + 2 : colon + 1;
    size_t in0, in1, body_end;
    if (!suffix_place(r, rn, msg, &in0, &in1, &body_end)) return 0;
    u8 key[600];
    size_t kn = lv + 1 + (in1 - in0);
    if (kn > sizeof(key)) return 0;
    memcpy(key, r + 34, lv);
    key[lv] = ' ';
    memcpy(key + lv + 1, r + in0, in1 - in0);
    const u8 *body = r + msg;
    size_t bn = body_end - msg;
    if (accepts(&q->keys, key, kn, body, bn, whole) && unremarkable(body, bn, q, 1)) return QUIET;
    return !whole && unknown_place(&q->keys, key, kn) && unrecognisable(body, bn, key[0], q, 1) ? LMC_UNKNOWN : 0;
}

/* _VLLM_REST at r[pos]: "(\d\d)-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?([^\]:\s]+?):(\d+)\] ?" -> the message's
 * start, the month's offset, the file's span and the digits' span; -1 when it does not match */
static long vllm_rest(const u8 *r, size_t n, size_t pos, size_t *file, size_t *file_end, size_t *dig_end) {
    static const char shape[] = "00-00 00:00:00";
    size_t k = sizeof(shape) - 1;
    if (pos + k > n) return -1;
    for (size_t i = 0; i < k; i++)
        if (shape[i] == '0' ? !is_digit(r[pos + i]) : r[pos + i] != (u8)shape[i]) return -1;
    size_t j = pos + k;
    if (j < n && r[j] == '.' && j + 1 < n && is_digit(r[j + 1])) {
        j++;
        while (j < n && is_digit(r[j])) j++;
    }
    if (j >= n || r[j] != ' ') return -1;
    j++;
    if (j < n && r[j] == '[') j++;
    size_t f = j;
    while (j < n && r[j] != ']' && r[j] != ':' && r[j] != ' ') j++;
    if (j == f || j >= n || r[j] != ':') return -1;
    size_t fe = j++;
    size_t d = j;
    while (j < n && is_digit(r[j])) j++;
    if (j == d || j >= n || r[j] != ']') return -1;
    *file = f, *file_end = fe, *dig_end = j;
    j++;
    if (j < n && r[j] == ' ') j++;
    return (long)j;
}

/* ---------------------------------------------------------------- prefilter.FOREIGN_HEADER, by hand */
static inline int is_wordish(u8 c) { return is_word(c) || c == '.' || c == '-'; } /* [\w.-] */
static inline int is_space(u8 c) { return c == ' ' || (c >= '\t' && c <= '\r'); }   /* \s of a bytes pattern */

/* the end of a run of at least lo and at most hi bytes that pred accepts, from h[i]; 0 when the run is shorter
   or longer (every use is followed by a byte pred refuses, so the regex could neither stop earlier nor later) */
static size_t run_of(const u8 *h, size_t m, size_t i, size_t lo, size_t hi, int (*pred)(u8)) {
    size_t j = i;
    while (j < m && pred(h[j])) j++;
    return (j - i >= lo && j - i <= hi) ? j : 0;
}
static int pred_digit(u8 c) { return is_digit(c); }
static int pred_wordish(u8 c) { return is_wordish(c); }
static int pred_word(u8 c) { return is_word(c); }

static int lit_at(const u8 *h, size_t m, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return i + k <= m && memcmp(h + i, lit, k) == 0;
}

/* [\w.-]{1,128}:\d{1,10}:\d{1,10} \[\d{1,5}\] NCCL (?:INFO|WARN|TRACE|ERROR) */
static int nccl_header(const u8 *h, size_t m) {
    size_t i = run_of(h, m, 0, 1, 128, pred_wordish);
    if (!i || !lit_at(h, m, i, ":") || !(i = run_of(h, m, i + 1, 1, 10, pred_digit))) return 0;
    if (!lit_at(h, m, i, ":") || !(i = run_of(h, m, i + 1, 1, 10, pred_digit))) return 0;
    if (!lit_at(h, m, i, " [") || !(i = run_of(h, m, i + 2, 1, 5, pred_digit)) || !lit_at(h, m, i, "] NCCL ")) return 0;
    i += 7;
    return lit_at(h, m, i, "INFO ") || lit_at(h, m, i, "WARN ") || lit_at(h, m, i, "TRACE ") || lit_at(h, m, i, "ERROR ");
}

/* digits at h[i..i+k) */
static int digits_at(const u8 *h, size_t m, size_t i, size_t k) {
    if (i + k > m) return 0;
    for (size_t j = i; j < i + k; j++)
        if (!is_digit(h[j])) return 0;
    return 1;
}

/* \d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{1,9} - [\w.-]{1,128} - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - */
static int logging_header(const u8 *h, size_t m) {
    if (m < 20 || !digits_at(h, m, 0, 4) || h[4] != '-' || !digits_at(h, m, 5, 2) || h[7] != '-' ||
        !digits_at(h, m, 8, 2) || (h[10] != ' ' && h[10] != 'T') || !digits_at(h, m, 11, 2) || h[13] != ':' ||
        !digits_at(h, m, 14, 2) || h[16] != ':' || !digits_at(h, m, 17, 2) || (h[19] != ',' && h[19] != '.'))
        return 0;
    size_t i = run_of(h, m, 20, 1, 9, pred_digit);
    if (!i || !lit_at(h, m, i, " - ") || !(i = run_of(h, m, i + 3, 1, 128, pred_wordish)) || !lit_at(h, m, i, " - "))
        return 0;
    i += 3;
    static const char *const lv[] = {"DEBUG - ", "INFO - ", "WARNING - ", "ERROR - ", "CRITICAL - "};
    for (size_t k = 0; k < sizeof(lv) / sizeof(lv[0]); k++)
        if (lit_at(h, m, i, lv[k])) return 1;
    return 0;
}

/* [IWEF](?:\d{4})?\d{4} \d\d:\d\d:\d\d\.\d{6} {1,8}\d{1,10} [\w.-]{1,128}:\d{1,8}\] */
static int glog_header(const u8 *h, size_t m) {
    if (m < 22 || (h[0] != 'I' && h[0] != 'W' && h[0] != 'E' && h[0] != 'F')) return 0;
    size_t y = digits_at(h, m, 1, 8) && m > 9 && h[9] == ' ' ? 4 : 0; /* glog 0.7+ prints the year */
    if (m < 22 + y || !digits_at(h, m, 1, 4 + y) || h[5 + y] != ' ' || !digits_at(h, m, 6 + y, 2) || h[8 + y] != ':' ||
        !digits_at(h, m, 9 + y, 2) || h[11 + y] != ':' || !digits_at(h, m, 12 + y, 2) || h[14 + y] != '.' ||
        !digits_at(h, m, 15 + y, 6))
        return 0;
    size_t i = 21 + y, j = 21 + y;
    while (j < m && h[j] == ' ') j++;
    if (j - i < 1 || j - i > 8 || !(i = run_of(h, m, j, 1, 10, pred_digit)) || !lit_at(h, m, i, " ")) return 0;
    if (!(i = run_of(h, m, i + 1, 1, 128, pred_wordish)) || !lit_at(h, m, i, ":")) return 0;
    return (i = run_of(h, m, i + 1, 1, 8, pred_digit)) && lit_at(h, m, i, "] ");
}

/* /[^\s:]{1,512}\.py:\d{1,8}: [A-Z]\w{0,64}Warning: */
static int warnings_header(const u8 *h, size_t m) {
    if (m < 1 || h[0] != '/') return 0;
    size_t p = 1;
    while (p < m && h[p] != ':' && !is_space(h[p])) p++;  /* the first ':' or space ends the path */
    if (p >= m || h[p] != ':' || p < 5 || p - 4 > 512 || memcmp(h + p - 3, ".py", 3) != 0) return 0;
    size_t i = run_of(h, m, p + 1, 1, 8, pred_digit);
    if (!i || !lit_at(h, m, i, ": ") || i + 2 >= m || !(h[i + 2] >= 'A' && h[i + 2] <= 'Z')) return 0;
    size_t w = i + 2, e = run_of(h, m, w, 1, (size_t)-1, pred_word);
    return e && e - w >= 8 && e - w <= 72 && memcmp(h + e - 7, "Warning", 7) == 0 && lit_at(h, m, e, ": ");
}

static int foreign_header(const u8 *h, size_t m) {
    return nccl_header(h, m) || logging_header(h, m) || glog_header(h, m) || warnings_header(h, m);
}

/* the length of s[0..n) without its colour residue, as cleaned() would leave it in a residue block */
static size_t without_residue_len(const u8 *s, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        const u8 *b = memchr(s + i, '[', n - i);
        size_t j = b ? (size_t)(b - s) : n;
        w += j - i;
        if (j == n) break;
        size_t k = residue(s, j, n);
        if (k) {
            if (j >= 2 && s[j - 2] == '^' && s[j - 1] == '[' && w >= 2) w -= 2; /* the "^[" before it, counted */
            else if (j >= 3 && memcmp(s + j - 3, "ESC", 3) == 0 && w >= 3) w -= 3; /* or the "ESC" */
            i = j + k;
        } else {
            w++;
            i = j + 1;
        }
    }
    return w;
}

/* prefilter.row_width: a raw row as the reader measures it (escapes counted in an ESC block, residue not in a
 * residue block) */
static size_t row_width(const u8 *s, size_t n, int flags) {
    return (flags & RESIDUE_BLOCK) && !(flags & ESC_BLOCK) ? without_residue_len(s, n) : n;
}

/* prefilter._ends_held: the line after a held record (raw, after[0..an)) cannot be its rest */
static int not_a_rest(const u8 *after, size_t an, int flags, u8 *buf);

/* after_wrap: the width of the wrapper a block's copy took off the line after (prefilter.kinds' wraps) */
static int ends_held(const u8 *after, size_t an, size_t plen, int flags, u8 *buf, const u8 *wmask, size_t after_wrap) {
    an = without_line_end_cr(after, an);
    if (an == 0) return !after_wrap; /* a wrapper with nothing behind it: left to the reader */
    int wide = plen <= MAX_QUIET_LINE ? wmask[plen] : 1; /* past the mask: maybe a terminal width */
    size_t width = row_width(after, an, flags) + after_wrap;
    if (!memchr(after, '\r', an) && (width > plen || (!wide && width != plen))) return 1;
    return not_a_rest(after, an, flags, buf);
}

/* prefilter._not_a_rest: whatever its width, the next line is no held record's rest */
static int not_a_rest(const u8 *after, size_t an, int flags, u8 *buf) {
    size_t hn = an < 600 ? an : 600;
    long len = cleaned(after, hn, flags, buf);
    if (len < 0) return 0;
    const u8 *h = buf;
    size_t m = (size_t)len;
    if (m && h[0] == '(') return peeled(h, m) > 0;
    for (size_t i = 0; i < N_LEVEL_WORDS; i++) {
        size_t k = strlen(level_words[i]);
        if (m >= k && memcmp(h, level_words[i], k) == 0) {
            size_t sp = k - 1;
            return sp + 3 < m && is_digit(h[sp + 1]) && is_digit(h[sp + 2]) && h[sp + 3] == '-';
        }
    }
    return (flags & PLAIN_BLOCK) && foreign_header(h, m);
}

/* whether keys holds key as an unknown place ("key US ?", QuietPlaces.blobs) */
static int unknown_place(const words *keys, const u8 *key, size_t kn) {
    for (size_t i = lower_bound(keys, key, kn, 0x1f); i < keys->n; i++) {
        size_t f = field_len(keys, i, 0x1f);
        if (cmp_bytes(keys->at[i], f, key, kn) != 0) break;
        if (keys->len[i] == f + 2 && keys->at[i][f + 1] == '?') return 1;
    }
    return 0;
}

/* whether a catalog text-search candidate under (level initial, index letter, word) fits msg[0..n): the
 * key's simple patterns, or a bare key (a format the compiled copy cannot check: taken to fit) */
static int candidate_fits(const words *cands, u8 level, u8 table, const u8 *word, size_t wn, const u8 *msg, size_t n) {
    u8 key[2 + MAX_UNKNOWN_TEXT];
    key[0] = level, key[1] = table;
    memcpy(key + 2, word, wn);
    return accepts(cands, key, wn + 2, msg, n, 0);
}

/* prefilter.unrecognisable on a message of printable ASCII, body[0..n), at a level of initial `level`, of
 * project 0 (vLLM) or 1 (LMCache) */
static int unrecognisable(const u8 *body, size_t n, u8 level, const quiet_t *q, int project) {
    if (n > MAX_UNKNOWN_TEXT || !unremarkable_by(body, n, &q->udispatch[project], &q->uneedles[project])) return 0;
    const words *cands = &q->ucands[project];
    size_t a = 0, b = n;
    while (a < b && body[a] == ' ') a++;
    while (b > a && body[b - 1] == ' ') b--;
    if (a == b) return 0;
    const u8 *msg = body + a;
    size_t mn = b - a, w0 = 0;
    while (w0 < mn && msg[w0] != ' ') w0++;
    if (candidate_fits(cands, level, 'f', msg, w0, msg, mn)) return 0;
    for (size_t k = 1; k <= 4; k++)
        if (candidate_fits(cands, level, 'p', msg, k < mn ? k : mn, msg, mn)) return 0;
    size_t i = 0;
    for (int w = 0; w < 16 && i < mn; w++) { /* the first 16 words, as bytes.split(None, 16)[:16] */
        size_t j = i;
        while (j < mn && msg[j] != ' ') j++;
        if (candidate_fits(cands, level, 'i', msg + i, j - i, msg, mn)) return 0;
        i = j;
        while (i < mn && msg[i] == ' ') i++;
    }
    return 1;
}

/* prefilter._quiet: rest (r[0..rn)) of the cleaned line is a quiet record (QUIET), a record nothing recognises
 * (UNKNOWN: printable ASCII, not whole, at an unknown place), or neither (0); width: the row as measured */
static int is_quiet(const u8 *r, size_t rn, size_t width, int flags, const quiet_t *q, const u8 *after,
                    size_t an, int has_after, u8 *buf, int whole, const size_t wrap[2]) {
    const char *level;
    size_t pos;
    if (rn >= 6 && memcmp(r, "DEBUG ", 6) == 0) {
        level = "DEBUG", pos = 6;
    } else if (rn >= 5 && memcmp(r, "INFO ", 5) == 0) {
        level = "INFO", pos = 5;
    } else {
        return 0;
    }
    size_t f, fe, de;
    long msg = vllm_rest(r, rn, pos, &f, &fe, &de);
    if (msg < 0) return 0;
    int month = (r[pos] - '0') * 10 + (r[pos + 1] - '0');
    if (month < 2 || month > 11) return 0;
    u8 key[512];
    size_t lv = strlen(level), kn = lv + 1 + (de - f);
    if (kn > sizeof(key)) return 0;
    memcpy(key, level, lv);
    key[lv] = ' ';
    memcpy(key + lv + 1, r + f, de - f); /* "file:digits" as printed */
    const u8 *body = r + msg;
    size_t bn = rn - (size_t)msg;
    int kind;
    if (accepts(&q->keys, key, kn, body, bn, whole) && unremarkable(body, bn, q, 0)) kind = QUIET;
    else if (!whole && unknown_place(&q->keys, key, kn) && unrecognisable(body, bn, (u8)level[0], q, 0)) kind = UNKNOWN;
    else return 0;
    size_t plen = width + wrap[0]; /* as the reader measures it */
    return plen < HELD_WIDTH || (has_after && ends_held(after, an, plen, flags, buf, q->wmask, wrap[1])) ? kind : 0;
}

/* ---------------------------------------------------------------- one line (prefilter.inert_kind) */

/* the block's distinct quiet heads (prefilter._first_of_head) */
typedef struct {
    u8 text[MAX_QUIET_HEADS][MAX_QUIET_HEAD];
    size_t len[MAX_QUIET_HEADS];
    int n;
} heads_t;

static int first_of_head(heads_t *h, const u8 *head, size_t n) {
    for (int i = 0; i < h->n; i++)
        if (h->len[i] == n && memcmp(h->text[i], head, n) == 0) return 0;
    if (n <= MAX_QUIET_HEAD && h->n < MAX_QUIET_HEADS) {
        memcpy(h->text[h->n], head, n);
        h->len[h->n++] = n;
    }
    return 1;
}

/* prefilter._bar_then_more: a progress bar ("N%|") with text after one of its ']' (records.after_bar may start
   one there); a bar alone ends at its ']' */
static int bar_then_more(const u8 *s, size_t n) {
    const u8 *pct = n >= 2 ? memchr(s, '%', n - 1) : NULL;
    while (pct && pct[1] != '|') pct = memchr(pct + 1, '%', (size_t)(s + n - 1 - (pct + 1)));
    if (!pct) return 0;
    for (size_t i = (size_t)(pct - s) + 2; i + 1 < n; i++)
        if (s[i] == ']' && s[i + 1] != ' ' && s[i + 1] != '\t' && s[i + 1] != '\r') return 1;
    return 0;
}

static int inert_kind(const u8 *raw, size_t n, int flags, u8 *buf, const quiet_t *q, const u8 *after, size_t an,
                      int has_after, u8 *buf2, heads_t *heads, const size_t wrap[2]) {
    n = without_line_end_cr(raw, n);
    if (n == 0) return INERT;
    if (n > MAX_QUIET_LINE * 4) return KEEP; /* even without its colour it is too long */
    const u8 *s = raw;
    size_t m = n;
    /* a printable ASCII line holds no ESC and no CR: cleaning it copies it unchanged, except where the
       block's colour residue is removed (most lines of a log: one pass instead of three and a copy) */
    int ascii = !(flags & (RESIDUE_BLOCK | DOCKER_TEXT)) && n <= MAX_QUIET_LINE && all_printable(raw, n);
    if (!ascii) {
        long len = cleaned(raw, n, flags, buf);
        if (len < 0 || len > MAX_QUIET_LINE) return KEEP;
        s = buf;
        m = (size_t)len;
        ascii = all_printable(s, m);
    }
    if (!ascii && !(q && printable_utf8(s, m))) return KEEP;
    int prefixed = m && s[0] == '(';
    size_t at = prefixed ? peeled(s, m) : 0;
    const u8 *r = s + at;
    size_t rn = m - at;
    int quiet = 0;
    if (q && rn && r[0] == '[') quiet = is_quiet_lmcache(r, rn, q, !ascii);
    else if (q && rn && (r[0] == 'D' || r[0] == 'I'))
        quiet = is_quiet(r, rn, row_width(raw, n, flags), flags, q, after, an, has_after, buf2, !ascii, wrap);
    if (quiet) return first_of_head(heads, s, prefixed ? at : 0) ? quiet + 1 : quiet; /* the *_FIRST kind */
    if (!ascii || m > MAX_INERT_LINE) return KEEP; /* beyond printable ASCII, or long: only a quiet record is counted unread */
    if (rn == 0 || has_anchor(r, rn) || bar_then_more(r, rn)) return KEEP;
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

/* prefilter(buf, off, starts, ends, flags, stop, keys, vllm dispatch, vllm needles, lmcache dispatch, lmcache
 * needles, per project the recognising dispatch words, needles and candidates, widths, year) -> bytes: one kind
 * per line buf[off + starts[i] : off + ends[i]]; the line after each is read up to stop (the block's end); the eleven
 * blobs are QuietPlaces.blobs() (empty: no line is quiet), widths prefilter.width_mask(), year the reader's last
 * dated year (4 bytes; else no LMCache record is quiet) */
#define N_BLOBS 11
PyObject *specdiag_prefilter(PyObject *self, PyObject *args) {
    Py_buffer buf, sv, ev, kb, vd, vn, ld, ln, ud[2], un[2], uc[2], wb, yb, rw = {0}, aw = {0};
    long long off, stop;
    int flags;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Ly*y*iLy*y*y*y*y*y*y*y*y*y*y*y*y*|y*y*:prefilter", &buf, &off, &sv, &ev, &flags,
                          &stop, &kb, &vd, &vn, &ld, &ln, &ud[0], &un[0], &uc[0], &ud[1], &un[1], &uc[1], &wb, &yb,
                          &rw, &aw))
        return NULL;
    prefilter_tables();
    PyObject *out = NULL;
    u8 *tmp = NULL, *tmp2 = NULL;
    heads_t *heads = NULL;
    quiet_t q = {{0}, {{0}, {0}}, {{0}, {0}}, {{0}, {0}}, {{0}, {0}}, {{0}, {0}}, (const u8 *)wb.buf, yb.len == 4 ? (const u8 *)yb.buf : NULL};
    /* the eleven blobs, where their lines go, and the slot each was taken from (-3: not taken yet) */
    const Py_buffer *blob[N_BLOBS] = {&kb, &vd, &vn, &ld, &ln, &ud[0], &un[0], &uc[0], &ud[1], &un[1], &uc[1]};
    words *parsed[N_BLOBS] = {&q.keys, &q.dispatch[0], &q.needles[0], &q.dispatch[1], &q.needles[1], &q.udispatch[0],
                              &q.uneedles[0], &q.ucands[0], &q.udispatch[1], &q.uneedles[1], &q.ucands[1]};
    int slot[N_BLOBS];
    for (int j = 0; j < N_BLOBS; j++) slot[j] = -3;
    const int64_t *st = (const int64_t *)sv.buf, *en = (const int64_t *)ev.buf;
    Py_ssize_t rows = sv.len / 8;
    /* rw / aw: the width of the wrapper a block's copy took off each row and the line after it (none: 0) */
    int wrapped = rw.len > 0;
    if (flags < 0 || sv.itemsize != 8 || ev.itemsize != 8 || ev.len != sv.len || off < 0 || stop < 0 ||
        stop > buf.len || wb.len != MAX_QUIET_LINE + 1 ||
        (wrapped && (rw.itemsize != 8 || aw.itemsize != 8 || rw.len != sv.len || aw.len != sv.len))) {
        PyErr_SetString(PyExc_ValueError, "prefilter: bad columns");
        goto done;
    }
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (st[i] < 0 || en[i] < st[i] || off + en[i] > stop) {
            PyErr_SetString(PyExc_ValueError, "prefilter: a row lies outside the block");
            goto done;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, rows);
    tmp = PyMem_Malloc(MAX_QUIET_LINE * 4 + 16);
    tmp2 = PyMem_Malloc(640);
    heads = PyMem_Calloc(1, sizeof(heads_t));
    int taken_ok = 1;
    for (int j = 0; j < N_BLOBS; j++) {
        slot[j] = words_take(blob[j], parsed[j]);
        taken_ok &= slot[j] != -2;
    }
    if (!out || !tmp || !tmp2 || !heads || !taken_ok) {
        Py_CLEAR(out);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    u8 *k = (u8 *)PyBytes_AS_STRING(out);
    const u8 *b = (const u8 *)buf.buf;
    const quiet_t *qp = q.keys.n ? &q : NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) {
        size_t s0 = (size_t)(off + st[i]), e0 = (size_t)(off + en[i]), nxt = e0 + 1;
        int has_after = nxt < (size_t)stop; /* else the next line is the next block's: unknown */
        size_t an = 0;
        if (has_after && qp) {
            if (i + 1 < rows && (size_t)(off + st[i + 1]) == nxt) { /* the next line is the next row: its end is known */
                an = (size_t)(en[i + 1] - st[i + 1]);
            } else {
                const u8 *nl = memchr(b + nxt, '\n', (size_t)stop - nxt);
                an = (nl ? (size_t)(nl - b) : (size_t)stop) - nxt;
            }
        }
        size_t wrap[2] = {0, 0};
        if (wrapped) {
            int64_t w0 = ((const int64_t *)rw.buf)[i], w1 = ((const int64_t *)aw.buf)[i];
            wrap[0] = w0 > 0 ? (size_t)w0 : 0;
            wrap[1] = w1 > 0 ? (size_t)w1 : 0;
        }
        k[i] = (u8)inert_kind(b + s0, e0 - s0, flags, tmp, qp, has_after ? b + nxt : NULL, an, has_after, tmp2,
                              heads, wrap);
    }
    Py_END_ALLOW_THREADS
done:
    for (int j = 0; j < N_BLOBS; j++) words_give(slot[j], parsed[j]);
    PyMem_Free(tmp);
    PyMem_Free(tmp2);
    PyMem_Free(heads);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&vd);
    PyBuffer_Release(&vn);
    PyBuffer_Release(&ld);
    PyBuffer_Release(&ln);
    for (int p = 0; p < 2; p++) {
        PyBuffer_Release(&ud[p]);
        PyBuffer_Release(&un[p]);
        PyBuffer_Release(&uc[p]);
    }
    PyBuffer_Release(&wb);
    PyBuffer_Release(&yb);
    PyBuffer_Release(&rw);
    PyBuffer_Release(&aw);
    return out;
}

/* ---- find_any: where one of a few literals first occurs in a long span ----------------------------------
 * marks.first_marker's compiled copy. Searching a block once per literal reads it once per literal; here it is
 * read once: per 16 bytes, each literal's first byte and one rarer byte of it (at its own offset) are
 * compared at once, and only a position where both agree is compared whole (Wojciech Muła's SIMD-friendly
 * substring search, for several needles). Linear: each position is compared whole at most once per literal,
 * and the literals are few and short (checked by the caller's wrapper). */
#define FA_SSE2 PF_SSE2
#define FA_MAX_NEEDLES 16
#define FA_MAX_LEN 256

typedef struct {
    const u8 *p;
    size_t n, k; /* length; offset of the second byte compared */
} fa_needle;

/* how common a byte is in log text, roughly: spaces, lowercase letters and digits first */
static int fa_common(u8 c) {
    if (c == ' ') return 4;
    if (c >= 'a' && c <= 'z') return (c == 'e' || c == 't' || c == 'a' || c == 'o' || c == 'i' || c == 'n' ||
                                      c == 's' || c == 'r') ? 3 : 2;
    if (c >= '0' && c <= '9') return 2;
    return 1;
}

static size_t fa_rare_offset(const u8 *p, size_t n) {
    size_t best = n - 1;
    for (size_t i = n - 1; i >= 1; i--)
        if (fa_common(p[i]) < fa_common(p[best])) best = i;
    return best;
}

static long fa_check(const u8 *s, size_t pos, size_t hi, const fa_needle *nd, int nn, unsigned which) {
    for (int j = 0; j < nn; j++)
        if ((which >> j & 1u) && pos + nd[j].n <= hi && memcmp(s + pos, nd[j].p, nd[j].n) == 0) return (long)pos;
    return -1;
}

static long fa_scalar(const u8 *s, size_t i, size_t hi, const fa_needle *nd, int nn) {
    for (; i < hi; i++) {
        unsigned which = 0;
        for (int j = 0; j < nn; j++)
            if (s[i] == nd[j].p[0] && i + nd[j].n <= hi && s[i + nd[j].k] == nd[j].p[nd[j].k]) which |= 1u << j;
        if (which && fa_check(s, i, hi, nd, nn, which) >= 0) return (long)i;
    }
    return -1;
}

#if PF_TEDDY
/* the literals' first three bytes in eight buckets (literal j in bucket j % 8; a 2-byte literal's third byte
   is any byte), as has_anchor_teddy: a candidate position is compared whole with its bucket's literals only */
__attribute__((target("ssse3"))) static long find_any_teddy(const u8 *s, size_t lo, size_t hi, const fa_needle *nd,
                                                             int nn) {
    teddy_t t = {{{0}}, {{0}}};
    for (int j = 0; j < nn; j++) teddy_add(&t, nd[j].p, nd[j].n, j % 8);
    size_t i = lo;
    for (; i + 18 <= hi; i += 16) {
        __m128i buckets = teddy_buckets(s + i, &t);
        unsigned m = teddy_hits(buckets);
        if (!m) continue;
        u8 held[16];
        _mm_storeu_si128((__m128i *)held, buckets);
        for (; m; m &= m - 1) {
            int bit = __builtin_ctz(m);
            unsigned which = 0;
            for (int j = 0; j < nn; j++) which |= (unsigned)(held[bit] >> (j % 8) & 1u) << j;
            if (fa_check(s, i + (size_t)bit, hi, nd, nn, which) >= 0) return (long)(i + (size_t)bit);
        }
    }
    return fa_scalar(s, i, hi, nd, nn);
}
#endif

static long find_any(const u8 *s, size_t lo, size_t hi, const fa_needle *nd, int nn) {
    size_t i = lo;
#if PF_TEDDY
    if (teddy_ok) return find_any_teddy(s, lo, hi, nd, nn);
#endif
#if FA_SSE2
    size_t reach = 16; /* bytes read past a step's start: 16 plus the farthest second-byte offset */
    __m128i first[FA_MAX_NEEDLES], second[FA_MAX_NEEDLES];
    for (int j = 0; j < nn; j++) {
        first[j] = _mm_set1_epi8((char)nd[j].p[0]);
        second[j] = _mm_set1_epi8((char)nd[j].p[nd[j].k]);
        if (16 + nd[j].k > reach) reach = 16 + nd[j].k;
    }
    for (; i + reach <= hi; i += 16) {
        __m128i blk = _mm_loadu_si128((const __m128i *)(s + i));
        unsigned m[FA_MAX_NEEDLES], any = 0;
        for (int j = 0; j < nn; j++) {
            __m128i a = _mm_cmpeq_epi8(blk, first[j]);
            __m128i b = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(s + i + nd[j].k)), second[j]);
            m[j] = (unsigned)_mm_movemask_epi8(_mm_and_si128(a, b));
            any |= m[j];
        }
        while (any) {
            int bit = __builtin_ctz(any);
            unsigned which = 0;
            for (int j = 0; j < nn; j++) which |= (m[j] >> bit & 1u) << j;
            if (fa_check(s, i + (size_t)bit, hi, nd, nn, which) >= 0) return (long)(i + (size_t)bit);
            any &= any - 1;
        }
    }
#endif
    return fa_scalar(s, i, hi, nd, nn);
}

PyObject *specdiag_find_any(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t lo, hi;
    PyObject *lits;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnO!:find_any", &buf, &lo, &hi, &PyTuple_Type, &lits)) return NULL;
    fa_needle nd[FA_MAX_NEEDLES];
    Py_ssize_t nn = PyTuple_GET_SIZE(lits);
    long at = -1;
    if (nn > FA_MAX_NEEDLES) {
        PyErr_SetString(PyExc_ValueError, "find_any: at most 16 literals");
        goto done;
    }
    for (Py_ssize_t j = 0; j < nn; j++) {
        PyObject *x = PyTuple_GET_ITEM(lits, j);
        if (!PyBytes_Check(x) || PyBytes_GET_SIZE(x) < 2 || PyBytes_GET_SIZE(x) > FA_MAX_LEN) {
            PyErr_SetString(PyExc_ValueError, "find_any: literals are bytes of 2 to 256 bytes");
            goto done;
        }
        nd[j].p = (const u8 *)PyBytes_AS_STRING(x);
        nd[j].n = (size_t)PyBytes_GET_SIZE(x);
        nd[j].k = fa_rare_offset(nd[j].p, nd[j].n);
    }
    prefilter_tables();
    if (lo < 0) lo = 0;
    if (hi > buf.len) hi = buf.len;
    if (lo < hi && nn > 0) {
        Py_BEGIN_ALLOW_THREADS
        at = find_any((const u8 *)buf.buf, (size_t)lo, (size_t)hi, nd, (int)nn);
        Py_END_ALLOW_THREADS
    }
done:
    PyBuffer_Release(&buf);
    return PyErr_Occurred() ? NULL : PyLong_FromLong(at);
}

/* ---- iso_fronts: kubectl / docker --timestamps and the CRI format taken off every line of a block --------
 * ahead.iso_fronts' compiled copy: at each line's start, ahead._ISO_FRONT ("\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d
 * (?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? (?:std(?:out|err) [FP] )?"), matched without backtracking (a greedy digit run
 * is followed by a byte no digit is, so giving a digit back never helps; the zone is all or nothing); each
 * line read once. */

/* the length of _ISO_FRONT at s[0..n), or 0 */
static size_t iso_front(const u8 *s, size_t n) {
    static const char shape[] = "0000-00-00T00:00:00";
    size_t j = sizeof(shape) - 1;
    if (n <= j) return 0;
    for (size_t i = 0; i < j; i++)
        if (shape[i] == '0' ? !is_digit(s[i]) : s[i] != (u8)shape[i]) return 0;
    if (j + 1 < n && (s[j] == '.' || s[j] == ',') && is_digit(s[j + 1])) {
        j += 2;
        while (j < n && is_digit(s[j])) j++;
    }
    if (j < n && s[j] == 'Z') {
        j++;
    } else if (j < n && (s[j] == '+' || s[j] == '-')) {
        size_t z = j + 1;
        if (z + 2 <= n && is_digit(s[z]) && is_digit(s[z + 1])) {
            z += 2;
            if (z < n && s[z] == ':') z++;
            if (z + 2 <= n && is_digit(s[z]) && is_digit(s[z + 1])) j = z + 2;
        }
    }
    if (j >= n || s[j] != ' ') return 0;
    j++;
    if (j + 9 <= n && (memcmp(s + j, "stdout ", 7) == 0 || memcmp(s + j, "stderr ", 7) == 0) &&
        (s[j + 7] == 'F' || s[j + 7] == 'P') && s[j + 8] == ' ')
        j += 9;
    return j;
}

/* the lines of s[start..end) (the last may lack its line end) */
static size_t count_lines(const u8 *s, size_t start, size_t end) {
    size_t lines = 0;
    for (size_t i = start; i < end; lines++) {
        const u8 *nl = memchr(s + i, '\n', end - i);
        i = nl ? (size_t)(nl - s) + 1 : end;
    }
    return lines;
}

/* each line's iso_front width into w (one per line), and, with copy, the lines without them: its length */
static size_t take_fronts(const u8 *s, size_t start, size_t end, int64_t *w, u8 *copy) {
    size_t at = 0, li = 0;
    for (size_t i = start; i < end;) {
        const u8 *nl = memchr(s + i, '\n', end - i);
        size_t e = nl ? (size_t)(nl - s) + 1 : end;
        size_t f = iso_front(s + i, e - i);
        if (copy) memcpy(copy + at, s + i + f, e - i - f);
        at += e - i - f;
        w[li++] = (int64_t)f;
        i = e;
    }
    return at;
}

/* the block's bounds clamped to the buffer */
static void clamp_span(Py_ssize_t len, Py_ssize_t *start, Py_ssize_t *end) {
    if (*start < 0) *start = 0;
    if (*end > len) *end = len;
    if (*end < *start) *end = *start;
}

/* iso_fronts(buf, start, end) -> (the block without them, the width taken off each line as int64 bytes) */
PyObject *specdiag_iso_fronts(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nn:iso_fronts", &buf, &start, &end)) return NULL;
    clamp_span(buf.len, &start, &end);
    const u8 *s = (const u8 *)buf.buf;
    size_t lines = count_lines(s, (size_t)start, (size_t)end), at = 0;
    PyObject *copy = PyBytes_FromStringAndSize(NULL, end - start);
    PyObject *widths = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(lines * 8));
    PyObject *out = NULL;
    if (copy && widths) {
        u8 *c = (u8 *)PyBytes_AS_STRING(copy);
        int64_t *w = (int64_t *)PyBytes_AS_STRING(widths);
        Py_BEGIN_ALLOW_THREADS
        at = take_fronts(s, (size_t)start, (size_t)end, w, c);
        Py_END_ALLOW_THREADS
        if (_PyBytes_Resize(&copy, (Py_ssize_t)at) == 0) out = PyTuple_Pack(2, copy, widths);
    }
    Py_XDECREF(copy);
    Py_XDECREF(widths);
    PyBuffer_Release(&buf);
    return out;
}

/* iso_row_wraps(buf, start, end, lines, first) -> (rows, after): for each line number of the int64 column
 * ``lines`` (the block's first line is ``first``), the width iso_fronts takes off that line and off the line
 * after it (0 past the block's last line), as int64 bytes: blocks._iso_row_wraps without the copy */
PyObject *specdiag_iso_row_wraps(PyObject *self, PyObject *args) {
    Py_buffer buf, lv;
    Py_ssize_t start, end;
    long long first;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nny*L:iso_row_wraps", &buf, &start, &end, &lv, &first)) return NULL;
    PyObject *rows = NULL, *after = NULL, *out = NULL;
    int64_t *widths = NULL;
    clamp_span(buf.len, &start, &end);
    const u8 *s = (const u8 *)buf.buf;
    size_t lines = count_lines(s, (size_t)start, (size_t)end);
    const int64_t *ln = (const int64_t *)lv.buf;
    Py_ssize_t n = lv.len / 8;
    if (lv.itemsize != 8) {
        PyErr_SetString(PyExc_ValueError, "iso_row_wraps: lines must be int64");
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (ln[k] < first || (size_t)(ln[k] - first) >= lines) {
            PyErr_SetString(PyExc_ValueError, "iso_row_wraps: a line outside the block");
            goto done;
        }
    }
    widths = PyMem_Malloc((lines + 1) * sizeof(int64_t));
    rows = PyBytes_FromStringAndSize(NULL, n * 8);
    after = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!widths || !rows || !after) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    int64_t *r = (int64_t *)PyBytes_AS_STRING(rows), *a = (int64_t *)PyBytes_AS_STRING(after);
    Py_BEGIN_ALLOW_THREADS
    take_fronts(s, (size_t)start, (size_t)end, widths, NULL);
    widths[lines] = 0; /* after the last line: nothing taken off */
    for (Py_ssize_t k = 0; k < n; k++) {
        size_t at = (size_t)(ln[k] - first);
        r[k] = widths[at];
        a[k] = widths[at + 1];
    }
    Py_END_ALLOW_THREADS
    out = PyTuple_Pack(2, rows, after);
done:
    PyMem_Free(widths);
    Py_XDECREF(rows);
    Py_XDECREF(after);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&lv);
    return out;
}

/* ---- docker_texts: the texts of a block of docker json-file lines ---------------------------------------
 * ahead._docker_unwrapped's compiled copy: every line must be ahead._DOCKER_LINE whole,
 *   {"log":"TEXT(\r)?\n","stream":"std(out|err)","time":"\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)"}
 * TEXT runs of bytes but '"', '\\' and LF, with the escapes \" \t \\ \u001b \u003c \u003e \u0026 between them,
 * which the copy undoes. The pattern is read left to right without backtracking: no escape TEXT allows starts
 * like the "\r" or "\n" that end it, and the time's run of [0-9:.] is followed by a byte it holds not. */

/* the decoded byte of a TEXT escape at s[i] == '\\' (its length in *k), or -1 where TEXT allows none */
static int docker_escape(const u8 *s, size_t i, size_t n, size_t *k) {
    if (i + 1 >= n) return -1;
    u8 c = s[i + 1];
    *k = 2;
    if (c == '"' || c == '\\') return c;
    if (c == 't') return '\t';
    if (c != 'u' || i + 6 > n || s[i + 2] != '0' || s[i + 3] != '0') return -1;
    *k = 6;
    if (s[i + 4] == '1' && s[i + 5] == 'b') return 0x1b;
    if (s[i + 4] == '3' && s[i + 5] == 'c') return '<';
    if (s[i + 4] == '3' && s[i + 5] == 'e') return '>';
    if (s[i + 4] == '2' && s[i + 5] == '6') return '&';
    return -1;
}

/* whether s[i..n) is the tail after TEXT: (\r)?\n","stream":"std(out|err)","time":"<time>"} */
static int docker_tail(const u8 *s, size_t i, size_t n) {
    static const char *const heads[] = {"\\r\\n\",\"stream\":\"stdout\",\"time\":\"", "\\r\\n\",\"stream\":\"stderr\",\"time\":\"",
                                        "\\n\",\"stream\":\"stdout\",\"time\":\"", "\\n\",\"stream\":\"stderr\",\"time\":\""};
    size_t j = 0;
    for (size_t h = 0; h < 4 && !j; h++) {
        size_t k = strlen(heads[h]);
        if (i + k <= n && memcmp(s + i, heads[h], k) == 0) j = i + k;
    }
    if (!j) return 0;
    static const char shape[] = "0000-00-00T";
    for (size_t t = 0; t < sizeof(shape) - 1; t++, j++)
        if (j >= n || (shape[t] == '0' ? !is_digit(s[j]) : s[j] != (u8)shape[t])) return 0;
    size_t run = j;
    while (j < n && (is_digit(s[j]) || s[j] == ':' || s[j] == '.')) j++;
    if (j == run || j >= n) return 0;
    if (s[j] == 'Z') {
        j++;
    } else if (s[j] == '+' || s[j] == '-') {
        if (j + 6 > n || !is_digit(s[j + 1]) || !is_digit(s[j + 2]) || s[j + 3] != ':' || !is_digit(s[j + 4]) ||
            !is_digit(s[j + 5]))
            return 0;
        j += 6;
    } else {
        return 0;
    }
    return j + 2 == n && s[j] == '"' && s[j + 1] == '}';
}

/* one json-file line s[0..n): its decoded TEXT appended at out (the length written), or -1 */
static long docker_text(const u8 *s, size_t n, u8 *out) {
    static const char head[] = "{\"log\":\"";
    if (n < sizeof(head) - 1 || memcmp(s, head, sizeof(head) - 1) != 0) return -1;
    size_t w = 0;
    for (size_t i = sizeof(head) - 1; i < n;) {
        u8 c = s[i];
        if (c == '"' || c == '\n') return -1;
        if (c != '\\') {
            out[w++] = c;
            i++;
            continue;
        }
        size_t k;
        int d = docker_escape(s, i, n, &k);
        if (d >= 0) {
            out[w++] = (u8)d;
            i += k;
            continue;
        }
        return docker_tail(s, i, n) ? (long)w : -1;
    }
    return -1;
}

/* docker_texts(buf, start, end, longest) -> the block's texts, one per line, ending as the block ends; None
 * where a line is not a json-file line or is longer than ``longest`` */
PyObject *specdiag_docker_texts(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end, longest;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnn:docker_texts", &buf, &start, &end, &longest)) return NULL;
    clamp_span(buf.len, &start, &end);
    const u8 *s = (const u8 *)buf.buf;
    PyObject *copy = PyBytes_FromStringAndSize(NULL, end - start);
    long at = 0;
    if (copy) {
        u8 *c = (u8 *)PyBytes_AS_STRING(copy);
        Py_BEGIN_ALLOW_THREADS
        for (size_t i = (size_t)start; i < (size_t)end;) {
            const u8 *nl = memchr(s + i, '\n', (size_t)end - i);
            size_t e = nl ? (size_t)(nl - s) : (size_t)end;
            long got = (Py_ssize_t)(e - i) > longest ? -1 : docker_text(s + i, e - i, c + at);
            if (got < 0) {
                at = -1;
                break;
            }
            at += got;
            if (nl) c[at++] = '\n';
            i = e + 1;
        }
        Py_END_ALLOW_THREADS
    }
    PyObject *out = NULL;
    if (copy && at < 0) {
        out = Py_None;
        Py_INCREF(out);
    } else if (copy && _PyBytes_Resize(&copy, (Py_ssize_t)at) == 0) {
        out = copy;
        copy = NULL;
    }
    Py_XDECREF(copy);
    PyBuffer_Release(&buf);
    return out;
}
