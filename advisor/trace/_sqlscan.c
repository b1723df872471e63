/* SQLite table scanner: the numeric columns of one rowid table, read straight from the
 * file's b-tree pages (https://www.sqlite.org/fileformat2.html) by several threads, without
 * SQLite's virtual machine or an Arrow batch per slice in between.
 *
 * It is an accelerator, not a second reader: for anything outside the common layout of an
 * Nsight Systems export (a record spilling onto overflow pages, text or blobs in a column
 * read, a column that mixes integers and reals, rowids with holes, a page that is not what
 * the b-tree says it is, any offset out of bounds) it raises Unsupported and the caller reads
 * the table through SQLite, whose results (or errors) are the reference.
 * tests/trace/test_sqlscan.py compares the two on every Nsight fixture and on hand-built
 * databases.
 *
 * scan(path, root, columns, kinds, filter_column, ids, first_rowid, capacity, threads)
 *     -> (arrays, seen, rows)
 *   path          the database file, opened read-only and read with pread (runs of up to
 *                 RUN_PAGES consecutive leaf pages at once; a mapping would count the file's
 *                 pages in the process's resident size)
 *   root          the table's root page (sqlite_master.rootpage)
 *   columns       tuple of int: per output column, its index in the record (the table's
 *                 column order); a record that ends before an index (a column added later)
 *                 gives NULL there
 *   kinds         bytes, per column, how its values are stored: 'q' native int64 (a real:
 *                 the native double's bits; NULL: NULL_BITS, a quiet NaN's bits, so a real
 *                 column needs no conversion); 'i' native int32 (NULL: INT32_MIN; an integer
 *                 outside int32 sets SEEN_WIDE, one equal to INT32_MIN SEEN_SENTINEL, a real
 *                 SEEN_REAL, and the value stored is then meaningless); 'f' native float
 *                 (integers and reals rounded to nearest, NULL: NaN; an integer beyond
 *                 2^53 sets SEEN_WIDE)
 *   filter_column -1, or the record index of an integer column: only rows whose value is
 *                 one of ``ids`` are kept (SQL's ``column IN (ids)``; NULL is never kept)
 *   ids           bytes: native int64 values, sorted ascending (ignored without a filter)
 *   first_rowid   the table's smallest rowid; without a filter row r goes to r - first_rowid
 *   capacity      without a filter: largest rowid - smallest + 1 (the rows written must fill
 *                 it exactly: rowids without holes). With a filter: the same span (one pass:
 *                 each thread writes the rows it keeps from the slot of its first kept row's
 *                 rowid on, rowids rising, and the runs are then moved together), or 0 (two
 *                 passes: a first one counts each run's rows, each then written in place; for
 *                 a span too large to allocate)
 *   threads       1..16: the leaf pages are split into that many runs, one per thread
 *   arrays        list of bytearray, one per column, its values stored as ``kinds`` says
 *   seen          bytes, per column: SEEN_INT | SEEN_REAL | SEEN_NULL for the values read,
 *                 SEEN_SENTINEL when an integer equal to the column's NULL value was read
 *                 (then NULL cannot be told apart), SEEN_WIDE (see kinds)
 *   rows          the rows in the arrays
 * The GIL is released while the threads scan. Every read from the mapping is checked against
 * the page or the file where it is made.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_COLUMNS 64
#define MAX_INDEX 255 /* the last record index a column may have */
#define MAX_THREADS 16
#define MAX_DEPTH 40
#define RUN_PAGES 64 /* pages read at once */
#define SEEN_INT 1
#define SEEN_REAL 2
#define SEEN_NULL 4
#define SEEN_SENTINEL 8
#define SEEN_WIDE 16
#define NULL_BITS ((int64_t)0x7FF8DEADBEEF0001LL)

static PyObject *Unsupported;

typedef struct {
    int fd; /* read with pread, not mapped: the file's pages never count as this process's */
    uint64_t size;
    uint32_t page_size; /* bytes per page */
    uint32_t usable;    /* page_size less the reserved bytes at each page's end */
    uint32_t pages;     /* whole pages in the file */
} Db;

typedef struct {
    const Db *db;
    const uint32_t *leaves;
    size_t nleaves;
    int ncols;
    const char *kinds;
    int maxcol; /* largest record index read (columns and filter) */
    const signed char *want; /* record index -> output column, -1: none */
    int filter;
    const int64_t *ids;
    size_t nids;
    int filtered;
    /* without a filter: the shared arrays; slot = rowid - first */
    char **dest;
    int64_t first, capacity;
    int64_t first_slot, last_slot;
    /* with a filter and a capacity (``by_rowid``): the kept rows from first_slot on (the
       slot of the first kept row's rowid); else a first pass counts the rows each thread
       keeps (``counting``), the second writes them from ``offset`` on */
    int by_rowid;
    int counting;
    size_t offset;
    size_t rows;
    unsigned char seen[MAX_COLUMNS];
    const char *error;
} Work;

static uint32_t be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* SQLite's varint at p (nothing read at or past end): its length in bytes, 0 if cut. */
static int varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        if (p + i >= end) return 0;
        v = (v << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    if (p + 8 >= end) return 0;
    *out = (v << 8) | p[8];
    return 9;
}

/* Pages first .. first + count - 1 into buf; 0 when they are not all in the file. */
static int read_pages(const Db *db, uint32_t first, uint32_t count, uint8_t *buf) {
    if (first < 1 || count < 1 || (uint64_t)first + count - 1 > db->pages) return 0;
    size_t want = (size_t)count * db->page_size, got = 0;
    off_t at = (off_t)(first - 1) * db->page_size;
    while (got < want) {
        ssize_t r = pread(db->fd, buf + got, want - got, at + (off_t)got);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

/* Page n read into buf, and its b-tree header's offset (page 1 holds the file header). */
static const uint8_t *page_at(const Db *db, uint32_t n, uint8_t *buf, uint32_t *header) {
    if (!read_pages(db, n, 1, buf)) return NULL;
    *header = n == 1 ? 100 : 0;
    return buf;
}

/* Bytes a value of serial type t takes; -1 for the reserved types 10 and 11. */
static int64_t content_size(uint64_t t) {
    static const int sizes[10] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0};
    if (t < 10) return sizes[t];
    if (t < 12) return -1;
    return (int64_t)((t - 12) / 2);
}

/* Decode a value of serial type t (0..9) at p: SEEN_NULL, SEEN_INT or SEEN_REAL. */
static int decode(uint64_t t, const uint8_t *p, int64_t *out) {
    int64_t v = 0;
    switch (t) {
    case 0:
        *out = NULL_BITS;
        return SEEN_NULL;
    case 8:
        *out = 0;
        return SEEN_INT;
    case 9:
        *out = 1;
        return SEEN_INT;
    case 7: {
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = (bits << 8) | p[i];
        memcpy(out, &bits, 8);
        return SEEN_REAL;
    }
    default: {
        int n = (int)content_size(t);
        v = (int8_t)p[0]; /* sign from the first byte, then the rest big-endian */
        for (int i = 1; i < n; i++) v = (int64_t)((uint64_t)v << 8 | p[i]);
        *out = v;
        return SEEN_INT;
    }
    }
}

static int kept(const Work *w, int64_t v) {
    size_t lo = 0, hi = w->nids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->ids[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo < w->nids && w->ids[lo] == v;
}

static size_t width(char kind) { return kind == 'q' ? 8 : 4; }

/* Store value v (what decode saw: s) at ``slot`` of a column of ``kind``. */
static void put(char kind, char *to, size_t slot, int64_t v, int s, unsigned char *seen) {
    *seen |= (unsigned char)s;
    if (kind == 'q') {
        if (s == SEEN_INT && v == NULL_BITS) *seen |= SEEN_SENTINEL;
        ((int64_t *)to)[slot] = v;
    } else if (kind == 'i') {
        int32_t x = INT32_MIN;
        if (s == SEEN_INT) {
            if (v < INT32_MIN || v > INT32_MAX) *seen |= SEEN_WIDE;
            else if (v == INT32_MIN) *seen |= SEEN_SENTINEL;
            else x = (int32_t)v;
        }
        ((int32_t *)to)[slot] = x;
    } else {
        float f = NAN;
        if (s == SEEN_INT) {
            /* beyond 2^53 SQLite's read (via float64 where NULLs make it so) may round
               differently: the caller reads those again at 64 bits */
            if (v > ((int64_t)1 << 53) || v < -((int64_t)1 << 53)) *seen |= SEEN_WIDE;
            f = (float)v;
        } else if (s == SEEN_REAL) {
            double d;
            memcpy(&d, &v, 8);
            f = (float)d;
        }
        ((float *)to)[slot] = f;
    }
}

/* Whether a b-tree page's header and free space hold together, as SQLite checks them when
 * it loads a page (btreeInitPage, btreeComputeFreeSpace): at most (page size - 8) / 6 cells,
 * the cell content area after the cell pointers, the freeblocks in ascending order inside the
 * page, and the free bytes they and the gaps make neither more than the page nor fewer than
 * its header and pointers take. (What SQLite calls a malformed page is declined, not read.) */
static int page_ok(const Db *db, const uint8_t *page, uint32_t h, uint32_t cells, int interior) {
    uint32_t usable = db->usable;
    if (cells > (db->page_size - 8) / 6) return 0;
    uint32_t first_cell = h + 8 + (interior ? 4 : 0) + 2 * cells, last_cell = usable - 4;
    uint32_t top = be16(page + h + 5);
    if (top == 0) top = 65536;
    uint32_t free_bytes = page[h + 7] + top;
    uint32_t pc = be16(page + h + 1);
    if (pc > 0) {
        uint32_t next, size;
        if (pc < top) return 0;
        for (;;) {
            if (pc > last_cell) return 0;
            next = be16(page + pc);
            size = be16(page + pc + 2);
            free_bytes += size;
            if (next <= pc + size + 3) break;
            pc = next;
        }
        if (next > 0 || pc + size > usable) return 0;
    }
    return free_bytes <= usable && free_bytes >= first_cell;
}

/* One leaf page's rows into the arrays; 0 with w->error set when it cannot. */
static int leaf(Work *w, const uint8_t *page, uint32_t n) {
    const Db *db = w->db;
    uint32_t h = n == 1 ? 100 : 0;
    const uint8_t *end = page + db->usable;
    if (page[h] != 0x0D) return (w->error = "not a table leaf page", 0);
    uint32_t cells = be16(page + h + 3);
    if (h + 8 + 2 * (uint64_t)cells > db->usable || !page_ok(db, page, h, cells, 0))
        return (w->error = "malformed page", 0);
    const uint64_t local_max = db->usable - 35; /* larger payloads spill onto overflow pages */
    int64_t vals[MAX_COLUMNS];
    for (uint32_t i = 0; i < cells; i++) {
        uint32_t off = be16(page + h + 8 + 2 * i);
        if (off < h + 8 + 2 * cells || off > db->usable - 4) return (w->error = "cell offset", 0);
        const uint8_t *p = page + off;
        uint64_t size, rowid_bits;
        int k = varint(p, end, &size);
        if (!k) return (w->error = "cell", 0);
        p += k;
        k = varint(p, end, &rowid_bits);
        if (!k) return (w->error = "cell", 0);
        p += k;
        if (size > local_max) return (w->error = "record on overflow pages", 0);
        if (size > (uint64_t)(end - p)) return (w->error = "record past its page", 0);
        const uint8_t *rec_end = p + size;
        uint64_t hsize;
        k = varint(p, rec_end, &hsize);
        if (!k || hsize < (uint64_t)k || hsize > size) return (w->error = "record header", 0);
        const uint8_t *types = p + k, *types_end = p + hsize, *body = p + hsize;
        int64_t filter_value = NULL_BITS;
        int filter_seen = SEEN_NULL;
        for (int c = 0; c < w->ncols; c++) vals[c] = NULL_BITS;
        unsigned char row_seen[MAX_COLUMNS] = {0};
        int last = w->counting ? w->filter : w->maxcol;
        for (int j = 0; j <= last && types < types_end; j++) {
            uint64_t t;
            k = varint(types, types_end, &t);
            if (!k) return (w->error = "record header", 0);
            types += k;
            int64_t len = content_size(t);
            if (len < 0) return (w->error = "reserved serial type", 0);
            if ((uint64_t)len > (uint64_t)(rec_end - body)) return (w->error = "value past record", 0);
            int at = w->want[j];
            if (at >= 0 || j == w->filter) {
                if (t >= 12) return (w->error = "text or blob in a numeric column", 0);
                int64_t v;
                int s = decode(t, body, &v);
                if (j == w->filter) {
                    filter_value = v;
                    filter_seen = s;
                }
                if (at >= 0) {
                    vals[at] = v;
                    row_seen[at] = (unsigned char)s;
                }
            }
            body += len;
        }
        /* a header read to its end must account for the whole record, as SQLite requires */
        if (types == types_end && body != rec_end) return (w->error = "record sizes", 0);
        if (w->filter >= 0) {
            if (filter_seen == SEEN_REAL) return (w->error = "real in the filter column", 0);
            if (filter_seen == SEEN_NULL || !kept(w, filter_value)) continue;
        }
        if (w->counting) {
            w->rows++;
            continue;
        }
        int64_t rowid = (int64_t)rowid_bits;
        size_t slot;
        if (w->filtered && !w->by_rowid) {
            if (w->offset + w->rows >= (size_t)w->capacity) return (w->error = "rows changed", 0);
            slot = w->offset + w->rows;
        } else { /* by rowid: the row's slot s = rowid - first */
            if (rowid < w->first) return (w->error = "rowid out of range", 0);
            uint64_t distance = (uint64_t)rowid - (uint64_t)w->first; /* (no signed overflow) */
            if (distance >= (uint64_t)w->capacity) return (w->error = "rowid out of range", 0);
            int64_t s = (int64_t)distance;
            if (w->rows && w->by_rowid && s <= w->last_slot)
                return (w->error = "rowids out of order", 0);
            if (w->rows && !w->by_rowid && s != w->last_slot + 1)
                return (w->error = "rowids with holes", 0);
            if (!w->rows) w->first_slot = s;
            w->last_slot = s;
            /* without a filter each row at its own slot; with one, the kept rows one after
               another from the first one's slot: with rowids rising, the k-th lies at or
               before its own rowid's slot, so no thread's run reaches the next's */
            slot = w->by_rowid ? (size_t)w->first_slot + w->rows : (size_t)s;
        }
        for (int c = 0; c < w->ncols; c++) {
            int s = row_seen[c] ? row_seen[c] : SEEN_NULL;
            put(w->kinds[c], w->dest[c], slot, vals[c], s, &w->seen[c]);
        }
        w->rows++;
    }
    return 1;
}

static void *work(void *arg) {
    Work *w = arg;
    size_t size = w->db->page_size;
    uint8_t *buf = malloc(RUN_PAGES * size);
    if (!buf) {
        w->error = "out of memory";
        return NULL;
    }
    for (size_t i = 0; i < w->nleaves && !w->error;) {
        /* a run of consecutive page numbers is one read */
        size_t k = 1;
        while (k < RUN_PAGES && i + k < w->nleaves && w->leaves[i + k] == w->leaves[i] + k) k++;
        if (!read_pages(w->db, w->leaves[i], (uint32_t)k, buf)) {
            w->error = "page number out of range";
            break;
        }
        for (size_t j = 0; j < k && !w->error; j++) leaf(w, buf + j * size, w->leaves[i + j]);
        i += k;
    }
    free(buf);
    return NULL;
}

/* The works on n threads (this one among them; one that cannot start runs here too). */
static void run(Work *works, int n) {
    pthread_t tids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 1; t < n; t++) started[t] = pthread_create(&tids[t], NULL, work, &works[t]) == 0;
    work(&works[0]);
    for (int t = 1; t < n; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else work(&works[t]);
    }
}

/* run() without the GIL; 0 with Unsupported set when a work failed. */
static int run_released(Work *works, int n) {
    Py_BEGIN_ALLOW_THREADS
    run(works, n);
    Py_END_ALLOW_THREADS
    for (int t = 0; t < n; t++) {
        if (works[t].error) {
            PyErr_SetString(Unsupported, works[t].error);
            return 0;
        }
    }
    return 1;
}

/* The table's leaf pages in key order (interior pages walked level by level). */
static uint32_t *leaf_pages(const Db *db, uint32_t root, size_t *count, const char **error) {
    size_t n = 1, visited = 0;
    uint8_t *buf = malloc(db->page_size);
    uint32_t *level = malloc(sizeof(uint32_t));
    if (!level || !buf) {
        free(level);
        free(buf);
        return (*error = "out of memory", NULL);
    }
    level[0] = root;
    for (int depth = 0; depth < MAX_DEPTH; depth++) {
        uint32_t h;
        const uint8_t *page = page_at(db, level[0], buf, &h);
        if (!page) break;
        if (page[h] == 0x0D) {
            free(buf);
            *count = n;
            return level;
        }
        if (page[h] != 0x05) break;
        size_t total = 0; /* the next level's pages */
        for (size_t i = 0; i < n; i++) {
            page = page_at(db, level[i], buf, &h);
            if (!page || page[h] != 0x05) goto bad;
            total += be16(page + h + 3) + 1;
        }
        visited += total;
        if (visited > db->pages) goto bad; /* (a cycle) */
        uint32_t *next = malloc(total * sizeof(uint32_t));
        if (!next) {
            free(level);
            free(buf);
            return (*error = "out of memory", NULL);
        }
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            page = page_at(db, level[i], buf, &h);
            if (!page) {
                free(next);
                goto bad;
            }
            uint32_t cells = be16(page + h + 3);
            if (h + 12 + 2 * (uint64_t)cells > db->usable || !page_ok(db, page, h, cells, 1)) {
                free(next);
                goto bad;
            }
            for (uint32_t c = 0; c < cells; c++) {
                uint32_t off = be16(page + h + 12 + 2 * c);
                if (off < h + 12 || off + 4 > db->usable) {
                    free(next);
                    goto bad;
                }
                next[at++] = be32(page + off);
            }
            next[at++] = be32(page + h + 8);
        }
        free(level);
        level = next;
        n = total;
    }
bad:
    free(level);
    free(buf);
    *error = "not a table b-tree";
    return NULL;
}

static int open_db(const char *path, Db *db, const char **error) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return (*error = "cannot open", 0);
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 512) {
        close(fd);
        return (*error = "not a database file", 0);
    }
    uint8_t b[100];
    if (pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b) {
        close(fd);
        return (*error = "not a database file", 0);
    }
    uint32_t page_size = be16(b + 16);
    if (page_size == 1) page_size = 65536;
    db->fd = fd;
    db->size = (uint64_t)st.st_size;
    if (memcmp(b, "SQLite format 3", 16) != 0 || page_size < 512 || page_size > 65536 ||
        (page_size & (page_size - 1)) || page_size - b[20] < 480) {
        close(fd);
        db->fd = -1;
        return (*error = "not a database file", 0);
    }
    db->page_size = page_size;
    db->usable = page_size - b[20];
    db->pages = (uint32_t)(db->size / page_size);
    return 1;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    unsigned long root;
    PyObject *columns;
    const char *kinds;
    Py_ssize_t nkinds;
    int filter, threads;
    Py_buffer ids;
    long long first, capacity;
    if (!PyArg_ParseTuple(args, "skO!y#iy*LLi", &path, &root, &PyTuple_Type, &columns, &kinds,
                          &nkinds, &filter, &ids, &first, &capacity, &threads))
        return NULL;
    PyObject *result = NULL, *arrays = NULL;
    uint32_t *leaves = NULL;
    Db db = {.fd = -1};
    Work works[MAX_THREADS];
    memset(works, 0, sizeof works);
    signed char want[MAX_INDEX + 1];
    memset(want, -1, sizeof want);
    Py_ssize_t ncols = PyTuple_GET_SIZE(columns);
    const char *error = NULL;
    int maxcol = filter;
    if (ncols < 1 || ncols > MAX_COLUMNS || nkinds != ncols || threads < 1 || threads > MAX_THREADS ||
        filter < -1 || filter > MAX_INDEX || ids.len % 8 || root < 1 || root > UINT32_MAX ||
        (filter < 0 && capacity < 0)) {
        PyErr_SetString(PyExc_ValueError, "scan: bad arguments");
        goto done;
    }
    for (Py_ssize_t c = 0; c < ncols; c++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(columns, c));
        if (v == -1 && PyErr_Occurred()) goto done;
        if (v < 0 || v > MAX_INDEX || want[v] != -1) {
            PyErr_SetString(PyExc_ValueError, "scan: bad column index");
            goto done;
        }
        if (kinds[c] != 'q' && kinds[c] != 'i' && kinds[c] != 'f') {
            PyErr_SetString(PyExc_ValueError, "scan: bad column kind");
            goto done;
        }
        want[v] = (signed char)c;
        if (v > maxcol) maxcol = (int)v;
    }
    int filtered = filter >= 0;
    if (!open_db(path, &db, &error)) {
        PyErr_SetString(Unsupported, error);
        goto done;
    }
    size_t nleaves = 0;
    arrays = PyList_New(ncols);
    if (!arrays) goto done;
    Py_BEGIN_ALLOW_THREADS
    leaves = leaf_pages(&db, (uint32_t)root, &nleaves, &error);
    Py_END_ALLOW_THREADS
    if (!leaves) {
        PyErr_SetString(Unsupported, error);
        goto done;
    }
    int n = threads;
    if ((size_t)n > nleaves) n = (int)(nleaves ? nleaves : 1);
    for (int t = 0; t < n; t++) {
        Work *w = &works[t];
        size_t lo = nleaves * t / n, hi = nleaves * (t + 1) / n;
        w->db = &db;
        w->leaves = leaves + lo;
        w->nleaves = hi - lo;
        w->ncols = (int)ncols;
        w->kinds = kinds;
        w->maxcol = maxcol;
        w->want = want;
        w->filter = filter;
        w->ids = (const int64_t *)ids.buf;
        w->nids = (size_t)ids.len / 8;
        w->filtered = filtered;
        w->first = first;
        w->by_rowid = filtered && capacity > 0;
        w->counting = filtered && capacity <= 0;
    }
    size_t rows = 0;
    if (filtered && capacity <= 0) { /* the rows each thread keeps, then where they go */
        if (!run_released(works, n)) goto done;
        for (int t = 0; t < n; t++) {
            works[t].offset = rows;
            rows += works[t].rows;
            works[t].rows = 0;
            works[t].counting = 0;
        }
        capacity = (long long)rows;
    }
    char *dest[MAX_COLUMNS];
    for (Py_ssize_t c = 0; c < ncols; c++) {
        Py_ssize_t bytes = (Py_ssize_t)(capacity * (long long)width(kinds[c]));
        PyObject *a = PyByteArray_FromStringAndSize(NULL, bytes);
        if (!a) goto done;
        PyList_SET_ITEM(arrays, c, a);
        dest[c] = PyByteArray_AS_STRING(a);
    }
    for (int t = 0; t < n; t++) {
        works[t].dest = dest;
        works[t].capacity = capacity;
    }
    if (!run_released(works, n)) goto done;
    unsigned char seen[MAX_COLUMNS] = {0};
    size_t written = 0;
    int64_t reached = -1; /* (by rowid: the last slot of the runs before) */
    for (int t = 0; t < n; t++) {
        Work *w = &works[t];
        if (!filtered && w->rows && (int64_t)written != w->first_slot) {
            PyErr_SetString(Unsupported, "rowids with holes");
            goto done;
        }
        if (w->by_rowid && w->rows) {
            if (w->first_slot <= reached) {
                PyErr_SetString(Unsupported, "rowids out of order");
                goto done;
            }
            reached = w->last_slot;
            if ((int64_t)written != w->first_slot) /* (the run moved down to the rows before) */
                for (Py_ssize_t c = 0; c < ncols; c++) {
                    size_t bytes = width(kinds[c]);
                    memmove(dest[c] + written * bytes, dest[c] + (size_t)w->first_slot * bytes,
                            w->rows * bytes);
                }
        }
        written += w->rows;
        for (Py_ssize_t c = 0; c < ncols; c++) seen[c] |= w->seen[c];
    }
    if (works[0].by_rowid) { /* the arrays cut to the rows kept */
        for (Py_ssize_t c = 0; c < ncols; c++)
            if (PyByteArray_Resize(PyList_GET_ITEM(arrays, c),
                                   (Py_ssize_t)(written * width(kinds[c]))) < 0)
                goto done;
        capacity = (long long)written;
    }
    if ((int64_t)written != capacity) {
        PyErr_SetString(Unsupported, filtered ? "rows changed" : "rowids with holes");
        goto done;
    }
    rows = written;
    result = Py_BuildValue("Oy#n", arrays, (const char *)seen, (Py_ssize_t)ncols, (Py_ssize_t)rows);
done:
    free(leaves);
    if (db.fd >= 0) close(db.fd);
    Py_XDECREF(arrays);
    PyBuffer_Release(&ids);
    return result;
}

static PyMethodDef METHODS[] = {
    {"scan", scan, METH_VARARGS, "Numeric columns of one SQLite rowid table (see the module doc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    "_sqlscan",
    "Numeric columns of an SQLite table read from its pages (advisor/trace/_sqlscan.c).",
    -1,
    METHODS,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__sqlscan(void) {
    PyObject *m = PyModule_Create(&MODULE);
    if (!m) return NULL;
    Unsupported = PyErr_NewException("advisor.trace._sqlscan.Unsupported", PyExc_ValueError, NULL);
    if (!Unsupported || PyModule_AddObject(m, "Unsupported", Unsupported) < 0) {
        Py_XDECREF(Unsupported);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(Unsupported);
    PyModule_AddIntConstant(m, "SEEN_INT", SEEN_INT);
    PyModule_AddIntConstant(m, "SEEN_REAL", SEEN_REAL);
    PyModule_AddIntConstant(m, "SEEN_NULL", SEEN_NULL);
    PyModule_AddIntConstant(m, "SEEN_SENTINEL", SEEN_SENTINEL);
    PyModule_AddIntConstant(m, "SEEN_WIDE", SEEN_WIDE);
    PyModule_AddIntConstant(m, "MAX_COLUMNS", MAX_COLUMNS);
    PyModule_AddIntConstant(m, "MAX_INDEX", MAX_INDEX);
    PyModule_AddObject(m, "NULL_BITS", PyLong_FromLongLong(NULL_BITS));
    return m;
}
