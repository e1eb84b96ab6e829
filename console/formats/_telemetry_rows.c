/* Compiled fast path for the cold ingest of telemetry.jsonl (FORMATS §2).
 *
 * decode_block(block) reads a block of complete telemetry lines (separated by '\n', the
 * last one without its newline) and returns (rows, ats, declined): one tuple per record
 * holding the fields the reducer folds, in ROW_FIELDS order, the record's time as seconds
 * since the epoch (None when it has none), and None, or the (start, end) byte offsets of
 * the first line it leaves to msgspec; the rows are those of the lines before it. Empty
 * lines are skipped, as the line-by-line reader skips them.
 *
 * It reads only the plain form that writers emit: one JSON object per line, ASCII strings
 * without escapes, numbers and null as values of the known fields, and timestamps written
 * as YYYY-MM-DDTHH:MM:SS[.ffffff][Z|+00:00]. It stops at any other line (a bad record, an
 * escape, a non-ASCII byte, another UTC offset, a duplicate key...): the caller reads that
 * line with msgspec, which reports it if it is broken, and calls again after it. So this
 * file never decides what a broken record is; it only has to agree with the msgspec reader
 * on the records it accepts, which tests/test_telemetry_rows.py checks value by value.
 *
 * Why it exists: msgspec builds a Struct with twenty fields, a datetime and a string
 * for each of ten values per line; the fold needs thirteen values, most of them the same
 * few ids over and over. Here the repeated ids are shared per block and the unused fields
 * are checked but never built, which makes a cold ingest about twice as fast.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

/* Row layout; must match ROW_FIELDS in console/formats/telemetry.py (checked at import). */
enum {
    R_EVENT, R_ITERATION, R_ATTEMPT, R_PHASE, R_MONOTONIC, R_SOURCE_KIND, R_REFERENCE,
    R_OPERATION, R_CATEGORY, R_DURATION, R_STATUS, R_EXIT_STATUS, R_FAILURE_TYPE, ROW_SIZE
};
static const char *const row_fields[ROW_SIZE] = {
    "event", "iteration_id", "attempt_id", "phase", "monotonic_seconds", "source_kind",
    "reference", "operation_id", "category", "duration_seconds", "status", "exit_status",
    "failure_type",
};

/* How a known key's value is read. */
enum kind {
    K_EVENT,      /* one of the five event names */
    K_ID,         /* a string (not null); repeated, so shared */
    K_TEXT,       /* a string or null; repeated, so shared */
    K_UNIQUE,     /* a string or null, built fresh (references, operation ids) */
    K_CHECKED,    /* a string or null that the fold does not use: checked, not built */
    K_FLOAT,      /* a number or null */
    K_INT,        /* an integer or null */
    K_TIMESTAMP,  /* an RFC 3339 time or null */
};

typedef struct {
    const char *name;
    int slot; /* row index, or -1 */
    enum kind kind;
} Field;

/* Every field of TelemetryRecord. */
static const Field fields[] = {
    {"action", -1, K_CHECKED},
    {"attempt_id", R_ATTEMPT, K_ID},
    {"campaign_id", -1, K_CHECKED},
    {"category", R_CATEGORY, K_TEXT},
    {"duration_seconds", R_DURATION, K_FLOAT},
    {"event", R_EVENT, K_EVENT},
    {"exit_status", R_EXIT_STATUS, K_INT},
    {"failure_type", R_FAILURE_TYPE, K_TEXT},
    {"iteration_id", R_ITERATION, K_ID},
    {"marker_id", -1, K_CHECKED},
    {"measurement", -1, K_CHECKED},
    {"monotonic_seconds", R_MONOTONIC, K_FLOAT},
    {"operation_id", R_OPERATION, K_UNIQUE},
    {"phase", R_PHASE, K_TEXT},
    {"reference", R_REFERENCE, K_UNIQUE},
    {"schema_version", -1, K_CHECKED},
    {"source", -1, K_CHECKED},
    {"source_kind", R_SOURCE_KIND, K_TEXT},
    {"status", R_STATUS, K_TEXT},
    {"timestamp", -1, K_TIMESTAMP},
};
#define N_FIELDS ((int)(sizeof(fields) / sizeof(fields[0])))

static const char *const event_names[] = {
    "phase_started", "phase_completed", "source_read", "sandbox_operation_started",
    "sandbox_operation_completed",
};
#define N_EVENTS 5

static PyObject *event_objects[N_EVENTS];
static PyObject *default_iteration; /* "unknown", TelemetryRecord's default */
static PyObject *default_attempt;   /* "attempt" */

/* memcmp(a, b, n) == 0 for the short keys and ids of a record, without a library call. */
static inline int same_bytes(const char *a, const char *b, Py_ssize_t n) {
    while (n >= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) {
            return 0;
        }
        a += 8;
        b += 8;
        n -= 8;
    }
    while (n-- > 0) {
        if (*a++ != *b++) {
            return 0;
        }
    }
    return 1;
}

/* A block's shared strings: open addressing over (bytes, length) -> str. Ids repeat on
 * every line; building each once per block is what keeps the rows cheap. */
#define CACHE_BITS 8
#define CACHE_SLOTS (1 << CACHE_BITS)
#define CACHE_LIMIT 192
typedef struct {
    const char *bytes;
    Py_ssize_t len;
    PyObject *str;
} CacheEntry;

typedef struct {
    CacheEntry slots[CACHE_SLOTS];
    int used;
} Cache;

/* A hash of a string from its length and its first and last eight bytes: ids that differ
 * (episode-0001, episode-0002) differ there, and a collision only costs a probe. The
 * slot comes from the top bits of the last product, which depend on every input bit. */
static inline uint32_t quick_hash(const char *bytes, Py_ssize_t len) {
    uint64_t head = 0, tail = 0;
    if (len >= 8) {
        memcpy(&head, bytes, 8);
        memcpy(&tail, bytes + len - 8, 8);
    } else {
        memcpy(&head, bytes, (size_t)len);
    }
    uint64_t h = head * UINT64_C(0x9E3779B97F4A7C15) + (tail ^ (uint64_t)len);
    h = (h ^ (h >> 31)) * UINT64_C(0xBF58476D1CE4E5B9);
    return (uint32_t)(h >> (64 - CACHE_BITS));
}

static void cache_clear(Cache *cache) {
    for (int i = 0; i < CACHE_SLOTS; i++) {
        Py_XDECREF(cache->slots[i].str);
    }
}

static PyObject *ascii_string(const char *bytes, Py_ssize_t len) {
    PyObject *str = PyUnicode_New(len, 127);
    if (str != NULL) {
        memcpy(PyUnicode_DATA(str), bytes, (size_t)len);
    }
    return str;
}

/* A new reference to the shared str of these bytes. */
static PyObject *cache_get(Cache *cache, const char *bytes, Py_ssize_t len) {
    uint32_t hash = quick_hash(bytes, len);
    for (uint32_t probe = 0; probe < CACHE_SLOTS; probe++) {
        CacheEntry *entry = &cache->slots[(hash + probe) & (CACHE_SLOTS - 1)];
        if (entry->str == NULL) {
            PyObject *str = ascii_string(bytes, len);
            if (str == NULL || cache->used >= CACHE_LIMIT) {
                return str; /* full: still correct, just not shared */
            }
            entry->bytes = bytes;
            entry->len = len;
            entry->str = str;
            cache->used++;
            Py_INCREF(str);
            return str;
        }
        if (entry->len == len && same_bytes(entry->bytes, bytes, len)) {
            Py_INCREF(entry->str);
            return entry->str;
        }
    }
    return ascii_string(bytes, len);
}

/* Parsing.  Every reader returns 0 when the input is outside the plain form (the caller
 * then gives the block to msgspec), 1 on success, -1 with a Python exception set. */

typedef struct {
    const char *p;
    const char *end; /* end of the current line */
} Cursor;

static inline void skip_space(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) {
        c->p++;
    }
}

/* Eight bytes at a time ("SWAR"): a word's bit 7 of byte k is set in
 * zero_bytes(w) when byte k of w is zero, and in below(w, n) when byte k < n (n <= 128),
 * for the lowest such byte at least; a higher flag can be a false one only above a true
 * one, so the lowest flag is always right. Little-endian only (byte 0 in the low bits). */
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
#define HAVE_SWAR 1
static inline uint64_t zero_bytes(uint64_t w) { return (w - ONES) & ~w & HIGHS; }
static inline uint64_t bytes_below(uint64_t w, unsigned n) { return (w - ONES * n) & ~w & HIGHS; }
#endif

static inline int plain_char(unsigned char ch) { return ch >= 0x20 && ch < 0x80 && ch != '\\'; }

/* A string without escapes, ASCII only; start and len get its contents. A backslash
 * declines the line, so the first quote is the closing one. */
static int read_string(Cursor *c, const char **start, Py_ssize_t *len) {
    if (c->p >= c->end || *c->p != '"') {
        return 0;
    }
    const char *s = c->p + 1;
    const char *p = s;
#ifdef HAVE_SWAR
    while (c->end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t quote = zero_bytes(w ^ (ONES * '"'));
        uint64_t bad = (w & HIGHS) | zero_bytes(w ^ (ONES * '\\')) | bytes_below(w, 0x20);
        if (quote) {
            if (bad & ((quote & (0 - quote)) - 1)) {
                return 0; /* a bad byte before the quote */
            }
            p += __builtin_ctzll(quote) >> 3;
            goto closed;
        }
        if (bad) {
            return 0;
        }
        p += 8;
    }
#endif
    for (; p < c->end && *p != '"'; p++) {
        if (!plain_char((unsigned char)*p)) {
            return 0;
        }
    }
    if (p >= c->end) {
        return 0;
    }
#ifdef HAVE_SWAR
closed:
#endif
    *start = s;
    *len = p - s;
    c->p = p + 1;
    return 1;
}

static int read_literal(Cursor *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

typedef struct {
    const char *start;
    Py_ssize_t len;
    int negative;
    int has_fraction;
    int has_exponent;
    int digits;          /* significant-or-not digits of the mantissa, integer and fraction */
    int fraction_digits;
    uint64_t mantissa;   /* valid when digits <= 19 */
} Number;

/* A JSON number (RFC 8259 grammar). */
static int read_number(Cursor *c, Number *n) {
    memset(n, 0, sizeof(*n));
    n->start = c->p;
    if (c->p < c->end && *c->p == '-') {
        n->negative = 1;
        c->p++;
    }
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') {
        return 0;
    }
    if (*c->p == '0') {
        c->p++;
        n->digits = 1;
    } else {
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (n->digits < 19) {
                n->mantissa = n->mantissa * 10 + (uint64_t)(*c->p - '0');
            }
            n->digits++;
            c->p++;
        }
    }
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        n->has_fraction = 1;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') {
            return 0;
        }
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (n->digits < 19) {
                n->mantissa = n->mantissa * 10 + (uint64_t)(*c->p - '0');
            }
            n->digits++;
            n->fraction_digits++;
            c->p++;
        }
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        n->has_exponent = 1;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) {
            c->p++;
        }
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') {
            return 0;
        }
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            c->p++;
        }
    }
    n->len = c->p - n->start;
    return 1;
}

static const double powers_of_ten[] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* Python's own correctly rounded conversion; an overflow to infinity is left to msgspec. */
static int text_to_double(const char *text, double *out) {
    double value = PyOS_string_to_double(text, NULL, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (!isfinite(value)) {
        return 0;
    }
    *out = value;
    return 1;
}

#ifdef __SIZEOF_INT128__
static const uint64_t powers_of_ten_u64[] = {
    UINT64_C(1), UINT64_C(10), UINT64_C(100), UINT64_C(1000), UINT64_C(10000), UINT64_C(100000),
    UINT64_C(1000000), UINT64_C(10000000), UINT64_C(100000000), UINT64_C(1000000000),
    UINT64_C(10000000000), UINT64_C(100000000000), UINT64_C(1000000000000), UINT64_C(10000000000000),
    UINT64_C(100000000000000), UINT64_C(1000000000000000), UINT64_C(10000000000000000),
    UINT64_C(100000000000000000), UINT64_C(1000000000000000000), UINT64_C(10000000000000000000),
};

/* mantissa / 10^k rounded to the nearest double (ties to even), for 0 < mantissa and
 * k <= 19, in integers: the shortest repr of a float (what json.dumps writes for
 * time.monotonic()) has 17 digits, past the exact-division case below. The mantissa is
 * shifted to fill 127 bits, so the quotient has at least 63 bits: 53 to keep, the rest
 * and the division's remainder to round with. */
static double rounded_quotient(uint64_t mantissa, int k) {
    typedef unsigned __int128 u128;
    int shift_in = 127 - (64 - __builtin_clzll(mantissa));
    u128 numerator = (u128)mantissa << shift_in;
    u128 denominator = powers_of_ten_u64[k];
    u128 quotient = numerator / denominator;
    int inexact = numerator % denominator != 0;
    uint64_t high = (uint64_t)(quotient >> 64);
    int bits = high ? 128 - __builtin_clzll(high) : 64 - __builtin_clzll((uint64_t)quotient);
    int drop = bits - 53;
    uint64_t kept = (uint64_t)(quotient >> drop);
    u128 rest = quotient & (((u128)1 << drop) - 1);
    u128 half = (u128)1 << (drop - 1);
    if (rest > half || (rest == half && (inexact || (kept & 1)))) {
        kept++;
        if (kept == UINT64_C(1) << 53) {
            kept >>= 1;
            drop++;
        }
    }
    return ldexp((double)kept, drop - shift_in);
}
#endif

/* The number as a correctly rounded double. */
static int number_to_double(const Number *n, double *out) {
    if (!n->has_exponent && n->digits <= 19) {
        double value;
        if (n->mantissa < (UINT64_C(1) << 53) && n->fraction_digits <= 22) {
            /* Both operands exact (mantissa < 2^53, power <= 1e22): one IEEE division
             * rounds correctly. */
            value = (double)n->mantissa / powers_of_ten[n->fraction_digits];
            /* An integer literal is converted as an integer: "-0" is 0.0, "-0.0" is -0.0. */
            *out = n->negative && (n->has_fraction || n->mantissa != 0) ? -value : value;
            return 1;
        }
#ifdef __SIZEOF_INT128__
        if (n->fraction_digits <= 19) {
            value = rounded_quotient(n->mantissa, n->fraction_digits);
            *out = n->negative ? -value : value;
            return 1;
        }
#endif
    }
    char text[41];
    if (n->len >= (Py_ssize_t)sizeof(text)) {
        return 0;
    }
    memcpy(text, n->start, (size_t)n->len);
    text[n->len] = '\0';
    return text_to_double(text, out);
}

static int digits_at(const char *s, int count, int *out) {
    int value = 0;
    for (int i = 0; i < count; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }
        value = value * 10 + (s[i] - '0');
    }
    *out = value;
    return 1;
}

/* Days from 1970-01-01 to a proleptic Gregorian date (year >= 1970). */
static int64_t days_from_civil(int year, int month, int day) {
    year -= month <= 2;
    const int64_t era = year / 400;
    const int64_t yoe = year - era * 400;
    const int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* YYYY-MM-DDTHH:MM:SS[.f{1,6}][Z|+00:00] as seconds since the epoch. Naive times are UTC,
 * as the reader takes them. The result is total microseconds / 1e6, the same division
 * datetime.timestamp() performs, so the doubles are identical. */
static int parse_timestamp(const char *s, Py_ssize_t len, double *out) {
    int year, month, day, hour, minute, second, micro = 0;
    if (len < 19 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':') {
        return 0;
    }
    if (!digits_at(s, 4, &year) || !digits_at(s + 5, 2, &month) || !digits_at(s + 8, 2, &day) ||
        !digits_at(s + 11, 2, &hour) || !digits_at(s + 14, 2, &minute) || !digits_at(s + 17, 2, &second)) {
        return 0;
    }
    /* Years are bounded so that the microsecond count stays exact in a double. */
    if (year < 1970 || year > 2200 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 ||
        second > 59) {
        return 0;
    }
    static const int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (day > month_days[month - 1] + (month == 2 && leap)) {
        return 0;
    }
    Py_ssize_t i = 19;
    if (i < len && s[i] == '.') {
        int count = 0;
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (++count > 6) {
                return 0;
            }
            micro = micro * 10 + (s[i] - '0');
            i++;
        }
        if (count == 0) {
            return 0;
        }
        for (; count < 6; count++) {
            micro *= 10;
        }
    }
    if (i < len) {
        if (len - i == 1 && s[i] == 'Z') {
            i += 1;
        } else if (len - i == 6 && memcmp(s + i, "+00:00", 6) == 0) {
            i += 6;
        } else {
            return 0;
        }
    }
    int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
    *out = (double)(seconds * 1000000 + micro) / 1e6;
    return 1;
}

/* Any JSON value, checked and not built (an unknown key's value). */
static int skip_value(Cursor *c, int depth) {
    const char *s;
    Py_ssize_t n;
    Number number;
    if (c->p >= c->end || depth > 32) {
        return 0;
    }
    switch (*c->p) {
    case '"':
        return read_string(c, &s, &n);
    case 't':
        return read_literal(c, "true");
    case 'f':
        return read_literal(c, "false");
    case 'n':
        return read_literal(c, "null");
    case '[':
    case '{': {
        const char close = *c->p == '[' ? ']' : '}';
        c->p++;
        skip_space(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 1;
        }
        for (;;) {
            skip_space(c);
            if (close == '}') { /* an object member: its key first */
                if (!read_string(c, &s, &n)) {
                    return 0;
                }
                skip_space(c);
                if (c->p >= c->end || *c->p != ':') {
                    return 0;
                }
                c->p++;
                skip_space(c);
            }
            if (!skip_value(c, depth + 1)) {
                return 0;
            }
            skip_space(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (c->p < c->end && *c->p == close) {
                c->p++;
                return 1;
            }
            return 0;
        }
    }
    default:
        return read_number(c, &number);
    }
}

static Py_ssize_t field_lengths[N_FIELDS];

/* The index of a known key, or -1 (keys out of table order, or unknown keys). */
static int find_field(const char *key, Py_ssize_t len) {
    for (int i = 0; i < N_FIELDS; i++) {
        if (field_lengths[i] == len && same_bytes(fields[i].name, key, len)) {
            return i;
        }
    }
    return -1;
}

/* The known field whose quoted name starts at the cursor, compared in place and tried in
 * table order from `from`: writers sort their keys as the table is, so the next key is
 * almost always one of the next few fields. On a match the cursor moves past the name;
 * -1 leaves it where it was (an unknown key, or keys in another order). */
static int match_field_at(Cursor *c, int from) {
    const char *p = c->p;
    if (p >= c->end || *p != '"') {
        return -1;
    }
    for (int i = from; i < N_FIELDS; i++) {
        Py_ssize_t n = field_lengths[i];
        if (c->end - p > n + 1 && p[n + 1] == '"' && same_bytes(p + 1, fields[i].name, n)) {
            c->p = p + n + 2;
            return i;
        }
    }
    return -1;
}

/* One known field's value into row[slot] (a new reference) or *at. */
static int read_field(Cursor *c, const Field *field, Cache *cache, PyObject **row, PyObject **at) {
    const char *s;
    Py_ssize_t n;
    if (c->p < c->end && *c->p == 'n') {
        if (!read_literal(c, "null") || field->kind == K_EVENT || field->kind == K_ID) {
            return 0; /* required strings: msgspec rejects null */
        }
        if (field->slot >= 0) {
            Py_INCREF(Py_None);
            row[field->slot] = Py_None;
        }
        return 1;
    }
    switch (field->kind) {
    case K_EVENT:
        if (!read_string(c, &s, &n)) {
            return 0;
        }
        for (int i = 0; i < N_EVENTS; i++) {
            if (PyUnicode_GET_LENGTH(event_objects[i]) == n && same_bytes(event_names[i], s, n)) {
                Py_INCREF(event_objects[i]);
                row[field->slot] = event_objects[i];
                return 1;
            }
        }
        return 0;
    case K_ID:
    case K_TEXT:
    case K_UNIQUE:
        if (!read_string(c, &s, &n)) {
            return 0;
        }
        row[field->slot] = field->kind == K_UNIQUE ? ascii_string(s, n) : cache_get(cache, s, n);
        return row[field->slot] == NULL ? -1 : 1;
    case K_CHECKED:
        return read_string(c, &s, &n);
    case K_FLOAT: {
        Number number;
        double value;
        if (!read_number(c, &number) || !number_to_double(&number, &value)) {
            return 0;
        }
        row[field->slot] = PyFloat_FromDouble(value);
        return row[field->slot] == NULL ? -1 : 1;
    }
    case K_INT: {
        Number number;
        if (!read_number(c, &number) || number.has_fraction || number.has_exponent || number.digits > 18) {
            return 0;
        }
        long long value = (long long)number.mantissa;
        row[field->slot] = PyLong_FromLongLong(number.negative ? -value : value);
        return row[field->slot] == NULL ? -1 : 1;
    }
    case K_TIMESTAMP: {
        double value;
        if (!read_string(c, &s, &n) || !parse_timestamp(s, n, &value)) {
            return 0;
        }
        *at = PyFloat_FromDouble(value);
        return *at == NULL ? -1 : 1;
    }
    }
    return 0;
}

/* One line into a row tuple and its time; same return convention. */
static int read_line(Cursor *c, Cache *cache, PyObject **row_out, PyObject **at_out) {
    PyObject *row[ROW_SIZE] = {NULL};
    PyObject *at = NULL;
    uint32_t seen = 0;
    int hint = 0;
    int status = 0;

    skip_space(c);
    if (c->p >= c->end || *c->p != '{') {
        goto done;
    }
    c->p++;
    skip_space(c);
    if (c->p < c->end && *c->p == '}') {
        goto done; /* {} has no event: not a record */
    }
    for (;;) {
        skip_space(c);
        int index = match_field_at(c, hint);
        if (index == -1) {
            const char *key;
            Py_ssize_t key_len;
            if (!read_string(c, &key, &key_len)) {
                goto done;
            }
            index = find_field(key, key_len);
        }
        skip_space(c);
        if (c->p >= c->end || *c->p != ':') {
            goto done;
        }
        c->p++;
        skip_space(c);
        if (index < 0) {
            if (!skip_value(c, 0)) {
                goto done;
            }
        } else {
            if (seen & (1u << index)) {
                goto done; /* a duplicate key: leave it to msgspec */
            }
            seen |= 1u << index;
            hint = index + 1;
            status = read_field(c, &fields[index], cache, row, &at);
            if (status != 1) {
                goto done;
            }
            status = 0;
        }
        skip_space(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            break;
        }
        goto done;
    }
    skip_space(c);
    if (c->p != c->end || row[R_EVENT] == NULL) {
        goto done;
    }
    /* A phase marker without its phase is a broken record (TelemetryRecord.__post_init__). */
    if ((row[R_PHASE] == NULL || row[R_PHASE] == Py_None) &&
        (row[R_EVENT] == event_objects[0] || row[R_EVENT] == event_objects[1])) {
        goto done;
    }
    PyObject *tuple = PyTuple_New(ROW_SIZE);
    if (tuple == NULL) {
        status = -1;
        goto done;
    }
    for (int i = 0; i < ROW_SIZE; i++) {
        PyObject *value = row[i];
        if (value == NULL) {
            value = i == R_ITERATION ? default_iteration : i == R_ATTEMPT ? default_attempt : Py_None;
            Py_INCREF(value);
        }
        PyTuple_SET_ITEM(tuple, i, value);
        row[i] = NULL;
    }
    if (at == NULL) {
        Py_INCREF(Py_None);
        at = Py_None;
    }
    *row_out = tuple;
    *at_out = at;
    return 1;

done:
    for (int i = 0; i < ROW_SIZE; i++) {
        Py_XDECREF(row[i]);
    }
    Py_XDECREF(at);
    return status;
}

static PyObject *decode_block(PyObject *Py_UNUSED(module), PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *rows = PyList_New(0);
    PyObject *ats = PyList_New(0);
    PyObject *result = NULL;
    Cache cache;
    memset(&cache, 0, sizeof(cache));
    if (rows == NULL || ats == NULL) {
        goto finally;
    }
    const char *p = (const char *)view.buf;
    const char *end = p + view.len;
    while (p <= end) {
        const char *newline = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = newline != NULL ? newline : end;
        if (line_end > p) {
            Cursor cursor = {p, line_end};
            PyObject *row = NULL, *at = NULL;
            int status = read_line(&cursor, &cache, &row, &at);
            if (status < 0) {
                goto finally;
            }
            if (status == 0) { /* outside the plain form: msgspec reads this line */
                const char *base = (const char *)view.buf;
                result = Py_BuildValue("OO(nn)", rows, ats, (Py_ssize_t)(p - base), (Py_ssize_t)(line_end - base));
                goto finally;
            }
            int failed = PyList_Append(rows, row) < 0 || PyList_Append(ats, at) < 0;
            Py_DECREF(row);
            Py_DECREF(at);
            if (failed) {
                goto finally;
            }
        }
        if (newline == NULL) {
            break;
        }
        p = newline + 1;
    }
    result = PyTuple_Pack(3, rows, ats, Py_None);

finally:
    cache_clear(&cache);
    Py_XDECREF(rows);
    Py_XDECREF(ats);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_block", decode_block, METH_O,
     "decode_block(block) -> (rows, ats, declined)\n\n"
     "Rows and times of a block of telemetry lines up to the first line not in the plain form\n"
     "this decoder reads; declined is None, or that line's (start, end) byte offsets."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_telemetry_rows", "Compiled fast path for telemetry.jsonl rows.", -1, methods,
};

PyMODINIT_FUNC PyInit__telemetry_rows(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    for (int i = 0; i < N_FIELDS; i++) {
        field_lengths[i] = (Py_ssize_t)strlen(fields[i].name);
    }
    for (int i = 0; i < N_EVENTS; i++) {
        event_objects[i] = PyUnicode_InternFromString(event_names[i]);
        if (event_objects[i] == NULL) {
            goto fail;
        }
    }
    default_iteration = PyUnicode_InternFromString("unknown");
    default_attempt = PyUnicode_InternFromString("attempt");
    PyObject *names = PyTuple_New(ROW_SIZE);
    if (default_iteration == NULL || default_attempt == NULL || names == NULL) {
        Py_XDECREF(names);
        goto fail;
    }
    for (int i = 0; i < ROW_SIZE; i++) {
        PyObject *name = PyUnicode_FromString(row_fields[i]);
        if (name == NULL) {
            Py_DECREF(names);
            goto fail;
        }
        PyTuple_SET_ITEM(names, i, name);
    }
    int added = PyModule_AddObjectRef(module, "ROW_FIELDS", names);
    Py_DECREF(names);
    if (added < 0) {
        goto fail;
    }
    return module;

fail:
    Py_DECREF(module);
    return NULL;
}
