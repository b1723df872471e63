/* Kineto event scanner: one pass over a JSON array of trace events (the bytes msgspec
 * would decode as list[Event] in kineto/schema.py), validating the JSON and emitting columns
 * for the events whose category the caller wants, without a Python object per event.
 *
 * It is an accelerator, not a second reader: for anything outside the common layout (a type
 * kineto's structs would reject or convert in another way, escapes in keys or categories,
 * strings where numbers are expected, duplicate keys, deep nesting, invalid JSON) it returns
 * None and the caller decodes the same bytes with msgspec, whose results (or errors) are the
 * reference. tests/trace/test_kineto_scan.py compares the two on every Kineto fixture.
 *
 * scan(buffer, categories, modes, start=0, stop=-1, keep=None)
 *     -> None | (rows, columns, names, closed_at)
 *   buffer      bytes-like, of single bytes, C-contiguous (an mmap of the trace, or a chunk
 *               of it); asked for read access only and never written
 *   start       offset of the array's '[' or of the ',' before an event (0 <= start <= len)
 *   stop        offset of the ',' after the region's last event (start <= stop <= len), or
 *               -1: the array's end; nothing at or past stop is read
 *   categories  tuple of str: the wanted values of "cat"; a row's cat code is the index
 *   modes       str, one letter per category: 'k', 'c', 'a' read the args fields of
 *               kineto's KernelArgs, CopyArgs, ApiArgs (the others stay NaN), 'r' return
 *               the span of the raw args (for the caller to decode), '-' args not looked at
 *               (MODES in _kscan_contract.h, generated from kineto/contract.py, as the keys
 *               read and the columns returned are)
 *   keep        callable(raw name) -> bool, asked once per distinct name of an 'r'
 *               category's rows: only kept names make rows (cpu_op: the GEMM ops)
 *   rows        events kept: "ph" == "X", "cat" wanted, "ts" a number
 *   columns     dict of column name -> a read-only buffer (native arrays, `rows` items
 *               each; a Column owning the scan's array, empty bytes for no rows):
 *                 cat int8; name int32 (index into names); start, dur int64 (ns, converted as
 *                 kineto.decode._times does from microseconds); pid, tid and the args fields
 *                 device, stream, correlation, registers, smem, graph_node, bytes, grid_x..z,
 *                 block_x..z float64 (NaN: absent or null); args_off, args_len int64 (the raw
 *                 args of 'r' categories: offset into buffer and length, 0: no args)
 *   names       list of bytes: the distinct raw (still JSON-escaped) names of the rows
 *   closed_at   offset after the array's closing ']' (the document's tail follows), or -1
 *               when the region ended at stop
 * Bad arguments raise ValueError or TypeError. The GIL is released while scanning a
 * read-only buffer (spans of one file can be scanned by threads); a writable one is scanned
 * holding it. Every read is checked against the region's end where it is made (none relies
 * on an earlier pass over the same bytes); a scan holds at most KSCAN_MAX_NAMES distinct
 * names and nests at most MAX_DEPTH containers (the module's MAX_NAMES and MAX_DEPTH), else
 * it declines. The module's CONTRACT is the contract's digest (the reader uses no build of
 * another contract). Tested by tests/trace/test_kscan_safety.py, and under AddressSanitizer
 * and UndefinedBehaviorSanitizer by tests/sanitize/run.sh.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif
#include <locale.h>

#include "_kscan_contract.h"

typedef unsigned char uc;
static locale_t C_LOCALE; /* numbers are parsed as JSON has them, whatever LC_NUMERIC says */

enum { T_NONE = 0, T_STR, T_NUM, T_NULL, T_BOOL, T_OBJ, T_ARR };
/* containers a value inside an event may nest, counted from the event's members (the
 * events array and the event object are not counted; "args": {...} is depth 1) */
#define MAX_DEPTH 256
#define MAX_CATS 16
/* distinct names of one scan (their codes are int32); the sanitizer build lowers it so
 * that the bound can be reached in a test (tests/sanitize/run.sh) */
#ifndef KSCAN_MAX_NAMES
#define KSCAN_MAX_NAMES INT32_MAX
#endif

typedef struct {
    const uc *s;    /* first byte of the value (the quote of a string) */
    Py_ssize_t n;   /* bytes in the value */
    int type;
    int esc;        /* a string with escapes */
    int isint;      /* a number without fraction or exponent */
} Val;

static uc STR_STOP[256]; /* '"', '\\' and control characters end the fast string loop */
static uc IS_WS[256];

static void init_tables(void) {
    for (int i = 0; i < 0x20; i++) STR_STOP[i] = 1;
    STR_STOP['"'] = STR_STOP['\\'] = 1;
    IS_WS[' '] = IS_WS['\n'] = IS_WS['\r'] = IS_WS['\t'] = 1;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* the first '"', '\\' or control character at or after p (16 bytes at a time) */
static inline const uc *string_stop(const uc *p, const uc *end) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i ctl = _mm_set1_epi8(0x1f);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, slash)),
                                 _mm_cmpeq_epi8(_mm_max_epu8(x, ctl), ctl));
        int mask = _mm_movemask_epi8(m);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
    while (p < end && !STR_STOP[*p]) p++;
    return p;
}

/* the first byte at or after p that is not JSON whitespace (runs 16 bytes at a time) */
static inline const uc *ws_run_end(const uc *p, const uc *end) {
    const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n');
    const __m128i cr = _mm_set1_epi8('\r'), tab = _mm_set1_epi8('\t');
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, sp), _mm_cmpeq_epi8(x, nl)),
                                 _mm_or_si128(_mm_cmpeq_epi8(x, cr), _mm_cmpeq_epi8(x, tab)));
        unsigned other = ~(unsigned)_mm_movemask_epi8(m) & 0xFFFFu;
        if (other) return p + __builtin_ctz(other);
        p += 16;
    }
    while (p < end && IS_WS[*p]) p++;
    return p;
}
#else
static inline const uc *string_stop(const uc *p, const uc *end) {
    while (p < end && !STR_STOP[*p]) p++;
    return p;
}

static inline const uc *ws_run_end(const uc *p, const uc *end) {
    while (p < end && IS_WS[*p]) p++;
    return p;
}
#endif

/* whitespace: mostly none or one space (", ", ": "); Kineto's indentation comes in runs */
#define SKIP_WS(p, end)                                                      \
    do {                                                                     \
        if ((p) < (end) && IS_WS[*(p)]) {                                    \
            (p)++;                                                           \
            if ((p) < (end) && IS_WS[*(p)]) (p) = ws_run_end((p) + 1, (end)); \
        }                                                                    \
    } while (0)
#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')

static int hexval(uc c) {
    return IS_DIGIT(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* the UTF-16 code unit of the 4 hex digits at p (checked by hexval before) */
static unsigned hex4(const uc *p) {
    unsigned u = 0;
    for (int i = 0; i < 4; i++) {
        uc c = p[i];
        u = u * 16 + (unsigned)(IS_DIGIT(c) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return u;
}

/* p at the 'u' of an escape with 4 hex digits after it: the bytes the escape takes (5, or
 * 11 for a surrogate pair), 0 for a surrogate without its other half (msgspec rejects
 * those, in every string, read or skipped) */
static Py_ssize_t unicode_escape(const uc *p, const uc *end) {
    unsigned u = hex4(p + 1);
    if (u >= 0xDC00 && u <= 0xDFFF) return 0; /* a low surrogate first */
    if (u < 0xD800 || u > 0xDBFF) return 5;
    if (end - p < 11 || p[5] != '\\' || p[6] != 'u' || !hexval(p[7]) || !hexval(p[8]) ||
        !hexval(p[9]) || !hexval(p[10]))
        return 0;
    unsigned low = hex4(p + 7);
    return low >= 0xDC00 && low <= 0xDFFF ? 11 : 0;
}

/* *pp at the opening quote; on success *pp is after the closing quote */
static inline int scan_string(const uc **pp, const uc *end, int *esc) {
    const uc *p = *pp + 1;
    int e = 0;
    for (;;) {
        p = string_stop(p, end);
        if (p >= end) return -1;
        uc ch = *p;
        if (ch == '"') break;
        if (ch != '\\') return -1; /* raw control character */
        e = 1;
        if (++p >= end) return -1;
        ch = *p;
        if (ch == 'u') {
            if (end - p < 5 || !hexval(p[1]) || !hexval(p[2]) || !hexval(p[3]) || !hexval(p[4]))
                return -1;
            Py_ssize_t n = unicode_escape(p, end);
            if (!n) return -1;
            p += n;
        } else if (ch == '"' || ch == '\\' || ch == '/' || ch == 'b' || ch == 'f' || ch == 'n' ||
                   ch == 'r' || ch == 't') {
            p++;
        } else {
            return -1;
        }
    }
    *pp = p + 1;
    *esc = e;
    return 0;
}

static inline int scan_number(const uc **pp, const uc *end, int *isint) {
    const uc *p = *pp;
    int integer = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && IS_DIGIT(*p)) p++;
    } else {
        return -1;
    }
    if (p < end && *p == '.') {
        integer = 0;
        if (++p >= end || !IS_DIGIT(*p)) return -1;
        while (p < end && IS_DIGIT(*p)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        integer = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !IS_DIGIT(*p)) return -1;
        while (p < end && IS_DIGIT(*p)) p++;
    }
    *pp = p;
    *isint = integer;
    return 0;
}


static inline int literal(const uc **pp, const uc *end, const char *word, Py_ssize_t n) {
    if (end - *pp < n || memcmp(*pp, word, (size_t)n)) return -1;
    *pp += n;
    return 0;
}

/* *pp at '{' or '[' (before end), a container inside `outer` others: validates it and
 * everything in it (iteratively: one loop, a bit per open container saying whether it is
 * an object); -1 past MAX_DEPTH containers in all */
static int skip_container(const uc **pp, const uc *end, int outer) {
    uint64_t stack[MAX_DEPTH / 64];
    int top = -1, esc, isint;
    const uc *p = *pp;
    if (outer < 0 || outer >= MAX_DEPTH) return -1;
open:
    if (++top >= MAX_DEPTH - outer) return -1;
    if (*p == '{') {
        stack[top >> 6] |= (uint64_t)1 << (top & 63);
        p++;
        SKIP_WS(p, end);
        if (p < end && *p == '}') {
            p++;
            goto after;
        }
        goto key;
    }
    stack[top >> 6] &= ~((uint64_t)1 << (top & 63));
    p++;
    SKIP_WS(p, end);
    if (p < end && *p == ']') {
        p++;
        goto after;
    }
value:
    if (p >= end) return -1;
    switch (*p) {
    case '"':
        if (scan_string(&p, end, &esc)) return -1;
        break;
    case '{':
    case '[':
        goto open;
    case 't':
        if (literal(&p, end, "true", 4)) return -1;
        break;
    case 'f':
        if (literal(&p, end, "false", 5)) return -1;
        break;
    case 'n':
        if (literal(&p, end, "null", 4)) return -1;
        break;
    default:
        if (scan_number(&p, end, &isint)) return -1;
    }
    goto next;
key:
    if (p >= end || *p != '"' || scan_string(&p, end, &esc)) return -1;
    SKIP_WS(p, end);
    if (p >= end || *p != ':') return -1;
    p++;
    SKIP_WS(p, end);
    goto value;
next:
    SKIP_WS(p, end);
    if (p >= end) return -1;
    {
        int obj = (int)((stack[top >> 6] >> (top & 63)) & 1);
        if (*p == ',') {
            p++;
            SKIP_WS(p, end);
            if (obj) goto key;
            goto value;
        }
        if (*p != (obj ? '}' : ']')) return -1;
        p++;
    }
after:
    if (--top < 0) {
        *pp = p;
        return 0;
    }
    goto next;
}


/* *pp at a value inside `outer` containers (see skip_container) */
static int skip_value(const uc **pp, const uc *end, Val *v, int outer) {
    const uc *p = *pp;
    if (p >= end) return -1;
    v->s = p;
    v->esc = 0;
    v->isint = 0;
    switch (*p) {
    case '"':
        v->type = T_STR;
        if (scan_string(&p, end, &v->esc)) return -1;
        break;
    case '{':
        v->type = T_OBJ;
        if (skip_container(&p, end, outer)) return -1;
        break;
    case '[':
        v->type = T_ARR;
        if (skip_container(&p, end, outer)) return -1;
        break;
    case 't':
        v->type = T_BOOL;
        if (literal(&p, end, "true", 4)) return -1;
        break;
    case 'f':
        v->type = T_BOOL;
        if (literal(&p, end, "false", 5)) return -1;
        break;
    case 'n':
        v->type = T_NULL;
        if (literal(&p, end, "null", 4)) return -1;
        break;
    default:
        v->type = T_NUM;
        if (scan_number(&p, end, &v->isint)) return -1;
    }
    v->n = p - v->s;
    *pp = p;
    return 0;
}

/* --- the keys read ------------------------------------------------------------------- */

/* the keys read, the modes and the columns returned: _kscan_contract.h (generated from
 * advisor/trace/kineto/schema.py). What this file relies on in their order: */
_Static_assert(K_CAT == K_PH + 1 && K_NAME == K_PH + 2, "ph, cat, name: the text keys");
_Static_assert(K_TID == K_PID + 1 && K_TS == K_TID + 1 && K_DUR == K_TS + 1,
               "pid, tid (ids) then ts, dur (times)");
_Static_assert(A_GRID >= N_NUM_ARGS && A_BLOCK >= N_NUM_ARGS, "grid, block: after the numbers");
_Static_assert(N_ARGS <= 32, "a bit per args field in an unsigned");
_Static_assert(F_GRID_Y == F_GRID_X + 1 && F_GRID_Z == F_GRID_X + 2 &&
               F_BLOCK_Y == F_BLOCK_X + 1 && F_BLOCK_Z == F_BLOCK_X + 2, "the x, y, z columns");

static Py_ssize_t KEY_LEN[N_KEYS], ARG_KEY_LEN[N_ARGS];

static int key_index(const uc *s, Py_ssize_t n, const char **keys, const Py_ssize_t *lens,
                     int count) {
    for (int i = 0; i < count; i++) {
        if (lens[i] == n && s[0] == (uc)keys[i][0] && !memcmp(s, keys[i], (size_t)n)) return i;
    }
    return -1;
}

/* --- numbers -------------------------------------------------------------------------- */

/* a JSON number as the double msgspec + numpy would give (exact integers up to 15 digits;
 * otherwise the C library's correctly rounded conversion) */
static int to_double(const Val *v, double *out) {
    if (v->isint && v->n <= 16) {
        const uc *p = v->s, *e = v->s + v->n;
        int neg = *p == '-';
        if (neg) p++;
        if (e - p <= 15) {
            int64_t x = 0;
            for (; p < e; p++) x = x * 10 + (*p - '0');
            *out = (double)(neg ? -x : x);
            return 0;
        }
    }
    char buf[80];
    if (v->n >= (Py_ssize_t)sizeof(buf)) return -1;
    memcpy(buf, v->s, (size_t)v->n);
    buf[v->n] = 0;
    char *endp = NULL;
    double x = strtod_l(buf, &endp, C_LOCALE);
    if (endp != buf + v->n || !isfinite(x)) return -1;
    *out = x;
    return 0;
}

/* microseconds -> integer ns as kineto.decode._ns / _times compute them from the double:
 * start = floor(ts) * 1000 + round((ts - floor(ts)) * 1000), dur = round(dur * 1000) (round
 * half to even). For plain decimals with at most 3 fraction digits below 2^43 us (start) or
 * 2^33 us (dur) that double formula is exact, so the digits are used directly. */
static int to_ns(const Val *v, int is_dur, int64_t *out) {
    const uc *p = v->s, *e = v->s + v->n;
    if (*p != '-') {
        int64_t ip = 0, f = 0;
        int nd = 0, fd = 0;
        while (p < e && IS_DIGIT(*p)) {
            ip = ip * 10 + (*p++ - '0');
            if (++nd > 13) goto slow;
        }
        if (p < e && *p == '.') {
            p++;
            while (p < e && IS_DIGIT(*p)) {
                if (fd == 3) goto slow;
                f = f * 10 + (*p++ - '0');
                fd++;
            }
        }
        if (p != e || ip >= (is_dur ? (INT64_C(1) << 33) : (INT64_C(1) << 43))) goto slow;
        for (; fd < 3; fd++) f *= 10;
        *out = ip * 1000 + f;
        return 0;
    }
slow: {
    double x;
    if (to_double(v, &x) || fabs(x) > 9.0e15) return -1; /* int64 ns */
    if (is_dur) {
        *out = (int64_t)nearbyint(x * 1000.0);
    } else {
        double w = floor(x);
        *out = (int64_t)w * 1000 + (int64_t)nearbyint((x - w) * 1000.0);
    }
    return 0;
}
}

/* --- output columns ------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t rows, cap;
    Py_ssize_t hint; /* rows to reserve first (see scan), so that few regrowths copy */
    int8_t *cat;
    int32_t *name;
    int64_t *ints[N_INT_COLS];
    double *floats[N_F_COLS];
    /* names: open addressing over (pointer, length) into the buffer */
    Py_ssize_t nnames, hcap;
    const uc **hptr;
    Py_ssize_t *hlen;
    int32_t *hcode;
    const uc **nptr; /* by code */
    Py_ssize_t *nlen;
    signed char *nkeep; /* by code: the keep callback's answer (-1: not asked yet) */
    PyObject *keep;     /* callable(raw name bytes) -> bool, for the 'r' categories' rows */
    int failed;         /* the callback raised */
} Out;

static void out_free(Out *o) {
    free(o->cat);
    free(o->name);
    for (int i = 0; i < N_INT_COLS; i++) free(o->ints[i]);
    for (int i = 0; i < N_F_COLS; i++) free(o->floats[i]);
    free(o->hptr);
    free(o->hlen);
    free(o->hcode);
    free(o->nptr);
    free(o->nlen);
    free(o->nkeep);
}

#define GROW(ptr, n, type)                                      \
    do {                                                        \
        void *_q = realloc((ptr), (size_t)(n) * sizeof(type)); \
        if (!_q) return -1;                                     \
        (ptr) = _q;                                             \
    } while (0)

static int out_reserve(Out *o) {
    if (o->rows < o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap * 2 : (o->hint > 4096 ? o->hint : 4096);
    GROW(o->cat, cap, int8_t);
    GROW(o->name, cap, int32_t);
    for (int i = 0; i < N_INT_COLS; i++) GROW(o->ints[i], cap, int64_t);
    for (int i = 0; i < N_F_COLS; i++) GROW(o->floats[i], cap, double);
    o->cap = cap;
    return 0;
}

/* a hash of the length, the first 32 and the last 8 bytes (names differing elsewhere only
 * share a slot chain; equality is decided by memcmp) */
static uint64_t hash_bytes(const uc *s, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    if (n >= 8) {
        Py_ssize_t words = n / 8 < 4 ? n / 8 : 4;
        for (Py_ssize_t i = 0; i < words; i++) {
            uint64_t x;
            memcpy(&x, s + 8 * i, 8);
            h = (h ^ x) * 0xFF51AFD7ED558CCDULL;
            h ^= h >> 29;
        }
        uint64_t x;
        memcpy(&x, s + n - 8, 8);
        h = (h ^ x) * 0xC4CEB9FE1A85EC53ULL;
    } else {
        for (Py_ssize_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001B3ULL;
    }
    return h ^ (h >> 32);
}

static int name_rehash(Out *o, Py_ssize_t cap) {
    GROW(o->nptr, cap, const uc *);
    GROW(o->nlen, cap, Py_ssize_t);
    GROW(o->nkeep, cap, signed char);
    const uc **ptr = calloc((size_t)cap, sizeof(*ptr));
    Py_ssize_t *len = calloc((size_t)cap, sizeof(*len));
    int32_t *code = calloc((size_t)cap, sizeof(*code));
    if (!ptr || !len || !code) {
        free(ptr);
        free(len);
        free(code);
        return -1;
    }
    for (Py_ssize_t c = 0; c < o->nnames; c++) {
        Py_ssize_t i = (Py_ssize_t)(hash_bytes(o->nptr[c], o->nlen[c]) & (uint64_t)(cap - 1));
        while (ptr[i]) i = (i + 1) & (cap - 1);
        ptr[i] = o->nptr[c];
        len[i] = o->nlen[c];
        code[i] = (int32_t)c;
    }
    free(o->hptr);
    free(o->hlen);
    free(o->hcode);
    o->hptr = ptr;
    o->hlen = len;
    o->hcode = code;
    o->hcap = cap;
    return 0;
}

/* the code of the name s[0:n] (a new one for a name not seen before); -1 when out of
 * memory or past KSCAN_MAX_NAMES names (the scan declines) */
static int32_t name_code(Out *o, const uc *s, Py_ssize_t n) {
    if (2 * (o->nnames + 1) > o->hcap && name_rehash(o, o->hcap ? o->hcap * 2 : 1024))
        return -1;
    Py_ssize_t mask = o->hcap - 1;
    Py_ssize_t i = (Py_ssize_t)(hash_bytes(s, n) & (uint64_t)mask);
    while (o->hptr[i]) {
        if (o->hlen[i] == n && !memcmp(o->hptr[i], s, (size_t)n)) return o->hcode[i];
        i = (i + 1) & mask;
    }
    if (o->nnames >= KSCAN_MAX_NAMES) return -1; /* (before a code past the bound is made) */
    int32_t c = (int32_t)o->nnames++;
    o->hptr[i] = s;
    o->hlen[i] = n;
    o->hcode[i] = c;
    o->nptr[c] = s;
    o->nlen[c] = n;
    o->nkeep[c] = -1;
    return c;
}

/* whether rows named `code` are kept (the keep callback, asked once per name, with the GIL) */
static int name_kept(Out *o, int32_t code) {
    if (!o->keep) return 1;
    if (o->nkeep[code] < 0) {
        PyGILState_STATE g = PyGILState_Ensure();
        PyObject *b = PyBytes_FromStringAndSize((const char *)o->nptr[code], o->nlen[code]);
        PyObject *r = b ? PyObject_CallOneArg(o->keep, b) : NULL;
        int t = r ? PyObject_IsTrue(r) : -1;
        Py_XDECREF(b);
        Py_XDECREF(r);
        if (t < 0) {
            o->failed = 1; /* the exception is raised when the scan returns */
            t = 0;
        }
        PyGILState_Release(g);
        o->nkeep[code] = (signed char)t;
    }
    return o->nkeep[code];
}

/* --- validation helpers --------------------------------------------------------------- */

/* true when s[0:n] is ASCII or valid UTF-8 (msgspec decodes every event's ph, cat and name
 * into str, which rejects invalid UTF-8) */
static int valid_utf8(const uc *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uc c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int k;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; }
        else return 0;
        if (i + k >= n) return 0;
        for (int j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

static int has_high(const uc *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    uint64_t acc = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        acc |= x;
    }
    for (; i < n; i++) acc |= s[i];
    return (acc & 0x8080808080808080ULL) != 0;
}

/* a string where kineto.decode._num expects a number (PyTorch <= 1.10 wrote "tid":
 * "1890023" and "tid": "stream 7"): plain digits are the number; where _num does not count
 * values of the wrong type (pid, tid), a string holding a character no Python float literal
 * can hold is NaN; anything else is declined (msgspec decides, and counts) */
static int num_string(const Val *v, double *out, int counted) {
    if (v->esc) return -1;
    if (has_high(v->s, v->n) && !valid_utf8(v->s + 1, v->n - 2)) return -1; /* (msgspec: str) */
    const uc *p = v->s + 1, *e = v->s + v->n - 1;
    if (p >= e) {
        *out = NAN; /* float("") fails */
        return counted ? -1 : 0;
    }
    const uc *q = p + (*p == '-');
    int digits = q < e && e - q <= 15;
    for (const uc *c = q; c < e && digits; c++) digits = *c >= '0' && *c <= '9';
    if (digits) {
        int64_t x = 0;
        for (; q < e; q++) x = x * 10 + (*q - '0');
        *out = (double)(*p == '-' ? -x : x);
        return 0;
    }
    if (counted) return -1;
    static const char maybe[] = "0123456789.+-eE_ \t\n\rinfatyINFATY";
    for (const uc *c = p; c < e; c++) {
        if (!memchr(maybe, *c, sizeof(maybe) - 1)) {
            *out = NAN;
            return 0;
        }
    }
    return -1;
}

/* a value msgspec decodes into a Python object (Event's pid, tid, ts, dur; the items of the
 * args fields read): what it rejects there, the scanner declines. Text must be UTF-8; a
 * number written with a fraction or exponent must fit a double (1e309 does not; an integer
 * of any size is a Python int). */
static int decoded_ok(const Val *v) {
    if (v->type == T_STR) return !has_high(v->s, v->n) || valid_utf8(v->s + 1, v->n - 2);
    if (v->type != T_NUM || v->isint) return 1;
    if (v->n < 300 && !memchr(v->s, 'e', (size_t)v->n) && !memchr(v->s, 'E', (size_t)v->n))
        return 1; /* (fewer than 300 digits and no exponent: below 1e300) */
    char buf[400];
    if (v->n >= (Py_ssize_t)sizeof(buf)) return 0; /* (declined: msgspec decides) */
    memcpy(buf, v->s, (size_t)v->n);
    buf[v->n] = 0;
    return isfinite(strtod_l(buf, NULL, C_LOCALE));
}

/* a numeric field as kineto.decode._num reads it: number -> value, null/absent -> NaN,
 * text as num_string; anything else -> declined. ``counted``: the field's values of the
 * wrong type are counted in a warning (the args fields): the scanner declines those, msgspec
 * counts */
static int num_field(const Val *v, double *out, int counted) {
    if (v->type == T_NONE || v->type == T_NULL) {
        *out = NAN;
        return 0;
    }
    if (v->type == T_STR) return num_string(v, out, counted);
    if (v->type != T_NUM) return -1;
    return to_double(v, out);
}

/* grid/block (an args member: its items are inside two containers) as kineto.decode._xyz
 * reads it: null or absent -> NaN; a list of one to three numbers -> them (NaN after a
 * shorter list); anything else (kineto.decode._xyz counts it as malformed) -> declined. The
 * list is parsed again here, every read checked against its end (nothing relies on the
 * validation before). */
static int xyz_field(const Val *v, double out[3]) {
    out[0] = out[1] = out[2] = NAN;
    if (v->type == T_NONE || v->type == T_NULL) return 0;
    if (v->type != T_ARR || v->n < 2) return -1;
    const uc *p = v->s + 1, *end = v->s + v->n;
    SKIP_WS(p, end);
    if (p < end && *p == ']') return -1; /* (an empty list) */
    for (int i = 0;; i++) {
        Val item;
        if (i == 3 || skip_value(&p, end, &item, 2)) return -1; /* (a fourth item) */
        if (item.type != T_NUM || to_double(&item, &out[i])) return -1;
        SKIP_WS(p, end);
        if (p >= end) return -1;
        if (*p == ']') return p + 1 == end ? 0 : -1;
        if (*p != ',') return -1;
        p++;
        SKIP_WS(p, end);
    }
}

/* an object member's key at *pp ('"'), then ':': the key's index in keys (-1: another
 * key), or -2 for invalid JSON or an escaped key (which might name a field); *pp is left at
 * the value */
static inline int member_key(const uc **pp, const uc *end, const char **keys,
                             const Py_ssize_t *lens, int count) {
    const uc *p = *pp, *s = p;
    int esc;
    if (p >= end || *p != '"' || scan_string(&p, end, &esc) || esc) return -2;
    Py_ssize_t n = p - s - 2;
    SKIP_WS(p, end);
    if (p >= end || *p != ':') return -2;
    p++;
    SKIP_WS(p, end);
    *pp = p;
    return key_index(s + 1, n, keys, lens, count);
}

/* after an object member's value: 1 at the next member (past ','), 0 past the closing '}',
 * -1 for invalid JSON */
static inline int member_next(const uc **pp, const uc *end) {
    const uc *p = *pp;
    SKIP_WS(p, end);
    if (p >= end) return -1;
    if (*p == ',') {
        p++;
        SKIP_WS(p, end);
        *pp = p;
        return 1;
    }
    if (*p != '}') return -1;
    *pp = p + 1;
    return 0;
}

/* *pp at the args object's '{': validates it and records the fields read */
static int parse_args(const uc **pp, const uc *end, Val found[N_ARGS]) {
    for (int i = 0; i < N_ARGS; i++) found[i].type = T_NONE;
    if (*pp >= end || **pp != '{') return -1;
    const uc *p = *pp + 1;
    SKIP_WS(p, end);
    if (p < end && *p == '}') {
        *pp = p + 1;
        return 0;
    }
    for (int more = 1; more;) {
        Val v;
        int k = member_key(&p, end, ARG_KEYS, ARG_KEY_LEN, N_ARGS);
        if (k == -2 || skip_value(&p, end, &v, 1)) return -1;
        if (k >= 0) {
            if (found[k].type != T_NONE) return -1; /* duplicate */
            found[k] = v;
        }
        if ((more = member_next(&p, end)) < 0) return -1;
    }
    *pp = p;
    return 0;
}

/* --- one event ---------------------------------------------------------------------- */

typedef struct {
    const uc *cats[MAX_CATS];
    Py_ssize_t catlen[MAX_CATS];
    int ncats;
    /* per category: its args fields are read (args_read), or the span of its args is
     * returned for the caller to decode (args_raw), or args are not looked at */
    unsigned args_read[MAX_CATS]; /* a bit per ARG_KEYS field read */
    int args_raw[MAX_CATS];
} Want;

static int cat_code(const Want *w, const Val *cat) {
    if (cat->type != T_STR || cat->esc) return -1;
    for (int i = 0; i < w->ncats; i++)
        if (cat->n - 2 == w->catlen[i] && !memcmp(cat->s + 1, w->cats[i], (size_t)w->catlen[i]))
            return i;
    return -1;
}

static int emit(Out *o, const Want *w, int code, const Val ev[N_KEYS], Val a[N_ARGS],
                int args_done, const uc *base) {
    int32_t nc = name_code(o, ev[K_NAME].s + 1, ev[K_NAME].n - 2);
    if (nc < 0) return -1;
    if (w->args_raw[code] && !name_kept(o, nc)) return o->failed ? -1 : 0;
    if (out_reserve(o)) return -1;
    Py_ssize_t r = o->rows;
    int64_t start, dur = 0;
    if (to_ns(&ev[K_TS], 0, &start)) return -1;
    if (ev[K_DUR].type == T_NUM && to_ns(&ev[K_DUR], 1, &dur)) return -1;
    double pid, tid;
    if (num_field(&ev[K_PID], &pid, 0) || num_field(&ev[K_TID], &tid, 0)) return -1;
    int64_t args_off = 0, args_len = 0;
    if (w->args_read[code]) {
        if (!args_done) {
            const Val *args = &ev[K_ARGS];
            if (args->type == T_OBJ) {
                const uc *q = args->s, *args_end = args->s + args->n;
                if (parse_args(&q, args_end, a) || q != args_end) return -1;
            } else if (args->type == T_NONE) {
                for (int i = 0; i < N_ARGS; i++) a[i].type = T_NONE;
            } else {
                return -1; /* decoded as a struct by kineto: rejected there */
            }
        }
    } else {
        for (int i = 0; i < N_ARGS; i++) a[i].type = T_NONE;
        if (w->args_raw[code] && ev[K_ARGS].type != T_NONE) {
            args_off = ev[K_ARGS].s - base;
            args_len = ev[K_ARGS].n;
        }
    }
    for (int i = 0; i < N_ARGS; i++)
        if (!(w->args_read[code] & BIT(i))) a[i].type = T_NONE; /* not in its struct */
    double num[N_NUM_ARGS];
    for (int i = 0; i < N_NUM_ARGS; i++)
        if (num_field(&a[i], &num[i], 1)) return -1;
    double grid[3], block[3];
    if (xyz_field(&a[A_GRID], grid) || xyz_field(&a[A_BLOCK], block)) return -1;

    o->cat[r] = (int8_t)code;
    o->name[r] = nc;
    o->ints[C_START][r] = start;
    o->ints[C_DUR][r] = dur;
    o->ints[C_ARGS_OFF][r] = args_off;
    o->ints[C_ARGS_LEN][r] = args_len;
    o->floats[F_PID][r] = pid;
    o->floats[F_TID][r] = tid;
    for (int i = 0; i < N_NUM_ARGS; i++) o->floats[F_FIRST_ARG + i][r] = num[i];
    for (int i = 0; i < 3; i++) {
        o->floats[F_GRID_X + i][r] = grid[i];
        o->floats[F_BLOCK_X + i][r] = block[i];
    }
    o->rows = r + 1;
    return 0;
}

/* *pp at an event's '{': validates the whole event and emits it when kept (ph "X", a
 * wanted cat, ts a number) */
static int event(const uc **pp, const uc *end, Out *o, const Want *w, const uc *base) {
    Val ev[N_KEYS], a[N_ARGS];
    int code = -1, args_done = 0;
    for (int i = 0; i < N_KEYS; i++) ev[i].type = T_NONE;
    const uc *p = *pp + 1;
    SKIP_WS(p, end);
    if (p < end && *p == '}') {
        p++;
    } else {
        for (int more = 1; more;) {
            Val v;
            int k = member_key(&p, end, KEYS, KEY_LEN, N_KEYS);
            if (k == -2) return -1;
            Val *dst = &v;
            if (k >= 0) {
                if (ev[k].type != T_NONE) return -1; /* duplicate */
                dst = &ev[k];
            }
            if (k == K_ARGS && code >= 0 && w->args_read[code] && p < end && *p == '{') {
                /* the category came first (as Kineto writes it): read args in this pass */
                dst->s = p;
                if (parse_args(&p, end, a)) return -1;
                dst->type = T_OBJ;
                dst->n = p - dst->s;
                args_done = 1;
            } else if (skip_value(&p, end, dst, 0)) {
                return -1;
            }
            if (k == K_CAT) code = cat_code(w, dst);
            if ((more = member_next(&p, end)) < 0) return -1;
        }
    }
    *pp = p;
    /* the fields kineto.Event types: ph, cat, name str; pid, tid int|float|str|None;
     * ts, dur float|None */
    for (int k = K_PH; k <= K_NAME; k++) {
        if (ev[k].type == T_NONE) continue;
        if (ev[k].type != T_STR) return -1;
        if (has_high(ev[k].s, ev[k].n) && !valid_utf8(ev[k].s + 1, ev[k].n - 2)) return -1;
    }
    if ((ev[K_PH].type == T_STR && ev[K_PH].esc) || (ev[K_CAT].type == T_STR && ev[K_CAT].esc))
        return -1;
    for (int k = K_PID; k <= K_TID; k++)
        if (ev[k].type == T_BOOL || ev[k].type == T_OBJ || ev[k].type == T_ARR) return -1;
    for (int k = K_PID; k <= K_DUR; k++)
        if (!decoded_ok(&ev[k])) return -1; /* (every event's: msgspec decodes them all) */
    for (int k = K_TS; k <= K_DUR; k++)
        if (ev[k].type != T_NONE && ev[k].type != T_NUM && ev[k].type != T_NULL) return -1;
    const Val *ph = &ev[K_PH];
    if (code < 0 || ph->type != T_STR || ph->n != 3 || ph->s[1] != 'X' || ev[K_TS].type != T_NUM)
        return 0; /* not kept */
    if (ev[K_NAME].type == T_NONE) return -1; /* (msgspec's default name ""; rare) */
    return emit(o, w, code, ev, a, args_done, base);
}

/* A column handed to Python without a copy: the scan's own malloc'd array, exposed through
 * the buffer protocol (read-only) and freed with the object (np.frombuffer keeps it alive).
 * Copying every column into a bytes object cost ~8% of a scan (the copy, and the kernel
 * zeroing the fresh pages it was written to). */
typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t len;
} Column;

static int column_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Column *c = (Column *)self;
    return PyBuffer_FillInfo(view, self, c->data, c->len, 1, flags);
}

static void column_dealloc(PyObject *self) {
    free(((Column *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs COLUMN_BUFFER = {.bf_getbuffer = column_getbuffer};

static PyTypeObject COLUMN_TYPE = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_kscan.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = column_dealloc,
    .tp_as_buffer = &COLUMN_BUFFER,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One column of a scan: a read-only buffer of native values.",
};

/* a Column owning *ptr (rows items of `size` bytes; *ptr is NULL afterwards), or empty
 * bytes where there are no rows; NULL with an exception set */
static PyObject *take_column(void **ptr, Py_ssize_t rows, size_t size) {
    if (rows == 0 || *ptr == NULL) return PyBytes_FromStringAndSize(NULL, 0);
    Column *c = PyObject_New(Column, &COLUMN_TYPE);
    if (!c) return NULL;
    void *fit = realloc(*ptr, (size_t)rows * size); /* (the unused capacity back) */
    c->data = fit ? fit : *ptr;
    c->len = rows * (Py_ssize_t)size;
    *ptr = NULL;
    return (PyObject *)c;
}

static PyObject *build_result(Out *o, Py_ssize_t closed) {
    PyObject *cols = PyDict_New(), *names = NULL, *res = NULL;
    if (!cols) return NULL;
#define PUT(key, ptr, size)                                                  \
    do {                                                                     \
        void *_p = (ptr);                                                    \
        PyObject *_b = take_column(&_p, o->rows, (size));                    \
        (ptr) = _p;                                                          \
        if (!_b || PyDict_SetItemString(cols, (key), _b)) {                  \
            Py_XDECREF(_b);                                                  \
            goto fail;                                                       \
        }                                                                    \
        Py_DECREF(_b);                                                       \
    } while (0)
    PUT(CAT_COLUMN, o->cat, sizeof(int8_t));
    PUT(NAME_COLUMN, o->name, sizeof(int32_t));
    for (int i = 0; i < N_INT_COLS; i++) PUT(INT_COLS[i], o->ints[i], sizeof(int64_t));
    for (int i = 0; i < N_F_COLS; i++) PUT(F_COLS[i], o->floats[i], sizeof(double));
#undef PUT
    names = PyList_New(o->nnames);
    if (!names) goto fail;
    for (Py_ssize_t i = 0; i < o->nnames; i++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)o->nptr[i], o->nlen[i]);
        if (!b) goto fail;
        PyList_SET_ITEM(names, i, b);
    }
    res = Py_BuildValue("(nOOn)", o->rows, cols, names, closed);
fail:
    Py_XDECREF(cols);
    Py_XDECREF(names);
    return res;
}

/* the events of base[start:end] (0 <= start <= end: checked by the caller; nothing at or
 * past end is read): base[start] is the array's '[' or the ',' before an event; the region
 * ends at end when `cut` (end is then the ',' after an event) or where the array closes.
 * Returns -1 for invalid JSON (or anything left to msgspec), else the offset after the
 * closing ']' or, when the region ends at the cut, -2. */
static Py_ssize_t scan_region(const uc *base, Py_ssize_t start, Py_ssize_t stop, int cut,
                              Out *o, const Want *w) {
    const uc *p = base + start, *end = base + stop;
    if (p >= end || (*p != '[' && *p != ',')) return -1;
    int first = *p == '[';
    p++;
    SKIP_WS(p, end);
    if (first && p < end && *p == ']') return p + 1 - base;
    for (;;) {
        if (p >= end || *p != '{' || event(&p, end, o, w, base)) return -1;
        SKIP_WS(p, end);
        if (p >= end) return cut ? -2 : -1;
        if (*p == ',') {
            p++;
            SKIP_WS(p, end);
            continue;
        }
        if (*p == ']') return p + 1 - base;
        return -1;
    }
}

/* the buffer as the scanner reads it: bytes (items of one byte), C-contiguous (the "y*"
 * format asks for that) */
static int byte_buffer(const Py_buffer *buf) {
    if (buf->itemsize == 1) return 0;
    PyErr_SetString(PyExc_TypeError, "buffer: a bytes-like object of single bytes");
    return -1;
}

static PyObject *scan(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"buffer", "categories", "modes", "start", "stop", "keep", NULL};
    Py_buffer buf;
    PyObject *cats, *keep = Py_None;
    const char *modes;
    Py_ssize_t nmodes, ncats, start = 0, stop = -1;
    (void)self;
    /* "y*": a bytes-like object, asked for read access only (PyBUF_SIMPLE): nothing is
     * ever written into it */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O!s#|nnO", kwlist, &buf, &PyTuple_Type,
                                     &cats, &modes, &nmodes, &start, &stop, &keep))
        return NULL;
    if (byte_buffer(&buf)) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    ncats = PyTuple_GET_SIZE(cats);
    const char *bad = NULL;
    if (ncats > MAX_CATS || nmodes != ncats)
        bad = "at most 16 categories, with a mode letter each";
    else if (strspn(modes, MODE_LETTERS) != (size_t)nmodes)
        bad = MODES_PROBLEM;
    else if (start < 0 || start > buf.len)
        bad = "start: an offset in the buffer (0 <= start <= len(buffer))";
    else if (stop < -1 || stop > buf.len || (stop >= 0 && stop < start))
        bad = "stop: -1 (the buffer's end) or an offset with start <= stop <= len(buffer)";
    else if (keep != Py_None && !PyCallable_Check(keep))
        bad = "keep: a callable or None";
    if (bad) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, bad);
        return NULL;
    }
    Want w;
    memset(&w, 0, sizeof(w));
    w.ncats = (int)ncats;
    for (int i = 0; i < w.ncats; i++) {
        PyObject *c = PyTuple_GET_ITEM(cats, i);
        Py_ssize_t n;
        const char *s = PyUnicode_Check(c) ? PyUnicode_AsUTF8AndSize(c, &n) : NULL;
        if (!s) {
            PyBuffer_Release(&buf);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "categories: str");
            return NULL;
        }
        w.cats[i] = (const uc *)s;
        w.catlen[i] = n;
        int k = 0; /* (modes[i] is one of MODE_LETTERS, the letters of MODES: checked above) */
        while (k < N_MODES - 1 && MODES[k].letter != modes[i]) k++;
        w.args_read[i] = MODES[k].args;
        w.args_raw[i] = MODES[k].raw;
    }
    Out o;
    memset(&o, 0, sizeof(o));
    o.keep = keep == Py_None ? NULL : keep;
    /* a kept event takes a few hundred bytes of the trace (440 on the H200 training
     * capture): reserving a row per 256 bytes of the region at once spares most of the
     * copies that doubling from 4096 rows makes (5% of a scan of 64 MB regions); the
     * pages not written are never touched, and the columns are trimmed to their rows */
    o.hint = ((stop >= 0 ? stop : buf.len) - start) / 256;
    Py_ssize_t closed;
    int cut = stop >= 0;
    if (buf.readonly) {
        /* the GIL is released over read-only memory (bytes, a read-only map) only */
        Py_BEGIN_ALLOW_THREADS
        closed = scan_region(buf.buf, start, cut ? stop : buf.len, cut, &o, &w);
        Py_END_ALLOW_THREADS
    } else {
        /* a writable buffer (bytearray) is scanned holding the GIL: no other thread of this
         * interpreter can change it meanwhile (and no read relies on it staying the same) */
        closed = scan_region(buf.buf, start, cut ? stop : buf.len, cut, &o, &w);
    }
    PyObject *res = NULL;
    if (o.failed) {
        res = NULL; /* the keep callback's exception */
    } else if (closed == -1) {
        res = Py_NewRef(Py_None);
    } else {
        res = build_result(&o, closed == -2 ? -1 : closed);
    }
    out_free(&o);
    PyBuffer_Release(&buf);
    return res;
}

static PyMethodDef METHODS[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_VARARGS | METH_KEYWORDS,
     "scan(buffer, categories, modes, start=0, stop=-1, keep=None) -> None | (rows, columns, "
     "names, closed_at): see the module source."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_kscan",
    .m_doc = "Kineto trace event scanner (optional accelerator).",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__kscan(void) {
    init_tables();
    if (PyType_Ready(&COLUMN_TYPE) < 0) return NULL;
    C_LOCALE = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!C_LOCALE) return PyErr_NoMemory();
    for (int i = 0; i < N_KEYS; i++) KEY_LEN[i] = (Py_ssize_t)strlen(KEYS[i]);
    for (int i = 0; i < N_ARGS; i++) ARG_KEY_LEN[i] = (Py_ssize_t)strlen(ARG_KEYS[i]);
    PyObject *m = PyModule_Create(&MODULE);
    if (!m) return NULL;
    PyObject *cats = PyTuple_New(N_SCAN_CATEGORIES);
    for (int i = 0; cats && i < N_SCAN_CATEGORIES; i++) {
        PyObject *cat = PyUnicode_FromString(SCAN_CATEGORIES[i]);
        if (!cat) Py_CLEAR(cats);
        else PyTuple_SET_ITEM(cats, i, cat);
    }
    int failed = !cats || PyModule_AddObjectRef(m, "SCAN_CATEGORIES", cats) < 0 ||
                 PyModule_AddIntConstant(m, "MAX_DEPTH", MAX_DEPTH) ||
                 PyModule_AddIntConstant(m, "MAX_NAMES", KSCAN_MAX_NAMES) ||
                 PyModule_AddStringConstant(m, "SCAN_MODES", SCAN_MODES) ||
                 PyModule_AddStringConstant(m, "CONTRACT", KSCAN_CONTRACT);
    Py_XDECREF(cats);
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
