/* aiokafka_lite_native._v2: the v2 record decoding loop of aiokafka_lite.records.v2_records and
 * the record encoder of aiokafka_lite.records.batch_builder in C (append_record: see below).
 *
 * decode_records(data, count, base_offset, base_timestamp, log_append_time, cls, topic,
 *                partition, timestamp_type, min_offset) -> list | None
 *
 * Returns the same list the pure-Python decode_records returns, or None when it cannot decide
 * alone: any malformed or unusual input (a truncated field, a bad length, a varint past int64,
 * an offset overflow, a header key that is not UTF-8, data that is not exact bytes, ...). The
 * Python wrapper then runs the pure-Python decoder on the same input, which raises the one
 * canonical CorruptRecordException: both paths raise the same error by construction, and this
 * function never raises anything but MemoryError-class failures of the C API itself.
 *
 * Every read is bounds-checked against the end of the current record (itself <= the end of the
 * data) before it happens.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static PyObject *empty_tuple;

/* zig-zag varint at *i, below `end`; 0 on success, -1 when Python must decide */
static inline int
rd_varint(const uint8_t *p, Py_ssize_t end, Py_ssize_t *i, int64_t *out)
{
    Py_ssize_t j = *i;
    if (j < end && p[j] < 0x80) { /* one byte: the common case */
        uint64_t u = p[j];
        *out = (int64_t)((u >> 1) ^ (~(u & 1) + 1));
        *i = j + 1;
        return 0;
    }
    uint64_t u = 0;
    int shift = 0;
    for (;;) {
        if (j >= end)
            return -1;
        uint8_t b = p[j++];
        if (shift == 63 && (b & 0x7F) > 1)
            return -1; /* the value needs more than 64 bits */
        u |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 63)
            return -1;
    }
    *out = (int64_t)((u >> 1) ^ (~(u & 1) + 1));
    *i = j;
    return 0;
}

#include <structmember.h>

/* The fields a consumer record gets, in SET order. */
#define NFIELDS 11
static PyObject *field_names[NFIELDS];
/* For the last class seen: each field's slot offset when the class stores it in a plain slot
 * (a member descriptor of an object slot, generic setattr), else 0 (set through setattr). */
static PyObject *cached_cls;
static Py_ssize_t cached_offsets[NFIELDS];

static int
slot_offsets(PyObject *cls)
{
    if (cls == cached_cls)
        return 0;
    PyTypeObject *tp = (PyTypeObject *)cls;
    for (int f = 0; f < NFIELDS; f++) {
        cached_offsets[f] = 0;
        if (tp->tp_setattro != PyObject_GenericSetAttr)
            continue;
        PyObject *d = PyObject_GetAttr(cls, field_names[f]);
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset > 0)
                cached_offsets[f] = m->offset;
        }
        Py_DECREF(d);
    }
    Py_XSETREF(cached_cls, Py_NewRef(cls));
    return 0;
}

/* set field f of a fresh instance, stealing `val` */
static inline int
set_field(PyObject *obj, int f, PyObject *val)
{
    if (val == NULL)
        return -1;
    Py_ssize_t off = cached_offsets[f];
    if (off) {
        PyObject **slot = (PyObject **)((char *)obj + off);
        Py_XSETREF(*slot, val);
        return 0;
    }
    int rc = PyObject_SetAttr(obj, field_names[f], val);
    Py_DECREF(val);
    return rc;
}

#define BAIL goto bail
#define FAIL goto fail
#define SET(obj, f, val)                                                                       \
    do {                                                                                       \
        if (set_field((obj), (f), (val)) < 0)                                                  \
            FAIL;                                                                              \
    } while (0)

static PyObject *
decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "decode_records takes 10 positional arguments");
        return NULL;
    }
    PyObject *data = args[0], *cls = args[5], *topic = args[6], *partition = args[7],
             *timestamp_type = args[8];
    if (!PyBytes_CheckExact(data) || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2])
        || !PyLong_CheckExact(args[3]))
        Py_RETURN_NONE;
    int overflow = 0;
    long long count = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (overflow || count < 0)
        Py_RETURN_NONE;
    long long base_offset = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (overflow)
        Py_RETURN_NONE;
    long long base_ts = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (overflow)
        Py_RETURN_NONE;
    int has_lat = args[4] != Py_None;
    long long lat = 0;
    if (has_lat) {
        if (!PyLong_CheckExact(args[4]))
            Py_RETURN_NONE;
        lat = PyLong_AsLongLongAndOverflow(args[4], &overflow);
        if (overflow)
            Py_RETURN_NONE;
    }
    int objects = cls != Py_None;
    long long min_offset = 0;
    if (objects) {
        if (!PyType_Check(cls) || !PyLong_CheckExact(args[9]))
            Py_RETURN_NONE;
        if (slot_offsets(cls) < 0)
            return NULL;
        min_offset = PyLong_AsLongLongAndOverflow(args[9], &overflow);
        if (overflow)
            Py_RETURN_NONE;
    }
    if (PyErr_Occurred())
        return NULL;

    const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(data);
    Py_ssize_t end = PyBytes_GET_SIZE(data);
    if (count > end / 7)
        Py_RETURN_NONE;
    PyObject *out = PyList_New((Py_ssize_t)count);
    if (out == NULL)
        return NULL;
    Py_ssize_t k = 0, i = 0;
    PyObject *key = NULL, *value = NULL, *headers = NULL, *item = NULL;
    for (long long r = 0; r < count; r++) {
        int64_t n, v;
        if (rd_varint(p, end, &i, &n) < 0 || n < 6 || n > end - i)
            BAIL;
        Py_ssize_t rec_end = i + (Py_ssize_t)n;
        i += 1; /* attributes */
        if (rd_varint(p, rec_end, &i, &v) < 0)
            BAIL;
        long long ts, offset;
        if (__builtin_add_overflow(base_ts, (long long)v, &ts))
            BAIL;
        if (rd_varint(p, rec_end, &i, &v) < 0)
            BAIL;
        if (__builtin_add_overflow(base_offset, (long long)v, &offset))
            BAIL;
        /* key */
        int64_t ksize, vsize;
        /* null is the one-byte varint 1 only (the Python decoder's rule) */
        Py_ssize_t len_at = i;
        if (rd_varint(p, rec_end, &i, &ksize) < 0 || ksize < -1 || ksize > rec_end - i
            || (ksize == -1 && i - len_at != 1))
            BAIL;
        /* value: read its length before making any object */
        Py_ssize_t key_at = i;
        if (ksize > 0)
            i += (Py_ssize_t)ksize;
        len_at = i;
        if (rd_varint(p, rec_end, &i, &vsize) < 0 || vsize < -1 || vsize > rec_end - i
            || (vsize == -1 && i - len_at != 1))
            BAIL;
        Py_ssize_t value_at = i;
        if (vsize > 0)
            i += (Py_ssize_t)vsize;
        /* headers */
        int64_t hcount;
        if (rd_varint(p, rec_end, &i, &hcount) < 0 || hcount < 0 || hcount > (rec_end - i) / 2)
            BAIL;
        if (hcount == 0 && objects) {
            headers = empty_tuple;
            Py_INCREF(headers);
        }
        else {
            headers = objects ? PyTuple_New((Py_ssize_t)hcount) : PyList_New((Py_ssize_t)hcount);
            if (headers == NULL)
                FAIL;
            for (int64_t h = 0; h < hcount; h++) {
                int64_t hk, hv;
                if (rd_varint(p, rec_end, &i, &hk) < 0 || hk < 0 || hk > rec_end - i)
                    BAIL;
                PyObject *hkey = PyUnicode_DecodeUTF8((const char *)p + i, (Py_ssize_t)hk, NULL);
                if (hkey == NULL) {
                    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                        PyErr_Clear();
                        BAIL;
                    }
                    FAIL;
                }
                i += (Py_ssize_t)hk;
                if (rd_varint(p, rec_end, &i, &hv) < 0 || hv < -1 || hv > rec_end - i) {
                    Py_DECREF(hkey);
                    BAIL;
                }
                PyObject *hval;
                if (hv == -1) {
                    hval = Py_None;
                    Py_INCREF(hval);
                }
                else {
                    hval = PyBytes_FromStringAndSize((const char *)p + i, (Py_ssize_t)hv);
                    i += (Py_ssize_t)hv;
                }
                PyObject *pair = hval ? PyTuple_Pack(2, hkey, hval) : NULL;
                Py_DECREF(hkey);
                Py_XDECREF(hval);
                if (pair == NULL)
                    FAIL;
                if (objects)
                    PyTuple_SET_ITEM(headers, (Py_ssize_t)h, pair);
                else
                    PyList_SET_ITEM(headers, (Py_ssize_t)h, pair);
            }
        }
        if (i != rec_end)
            BAIL;
        if (has_lat)
            ts = lat;
        if (objects && offset < min_offset) {
            Py_CLEAR(headers);
            continue;
        }
        if (ksize < 0) {
            key = Py_None;
            Py_INCREF(key);
        }
        else if ((key = PyBytes_FromStringAndSize((const char *)p + key_at, (Py_ssize_t)ksize))
                 == NULL)
            FAIL;
        if (vsize < 0) {
            value = Py_None;
            Py_INCREF(value);
        }
        else if ((value = PyBytes_FromStringAndSize((const char *)p + value_at,
                                                    (Py_ssize_t)vsize))
                 == NULL)
            FAIL;
        if (!objects) {
            item = PyTuple_New(5);
            if (item == NULL)
                FAIL;
            PyObject *o = PyLong_FromLongLong(offset), *t = PyLong_FromLongLong(ts);
            if (o == NULL || t == NULL) {
                Py_XDECREF(o);
                Py_XDECREF(t);
                FAIL;
            }
            PyTuple_SET_ITEM(item, 0, o);
            PyTuple_SET_ITEM(item, 1, t);
            PyTuple_SET_ITEM(item, 2, key);
            PyTuple_SET_ITEM(item, 3, value);
            PyTuple_SET_ITEM(item, 4, headers);
            key = value = headers = NULL;
        }
        else {
            item = PyBaseObject_Type.tp_new((PyTypeObject *)cls, empty_tuple, NULL);
            if (item == NULL)
                FAIL;
            Py_INCREF(topic);
            SET(item, 0, topic);
            Py_INCREF(partition);
            SET(item, 1, partition);
            SET(item, 2, PyLong_FromLongLong(offset));
            SET(item, 3, PyLong_FromLongLong(ts));
            Py_INCREF(timestamp_type);
            SET(item, 4, timestamp_type);
            PyObject *kv = key;
            key = NULL;
            SET(item, 5, kv);
            kv = value;
            value = NULL;
            SET(item, 6, kv);
            Py_INCREF(Py_None);
            SET(item, 7, Py_None);
            SET(item, 8, PyLong_FromLongLong(ksize));
            SET(item, 9, PyLong_FromLongLong(vsize));
            kv = headers;
            headers = NULL;
            SET(item, 10, kv);
        }
        PyList_SET_ITEM(out, k, item);
        item = NULL;
        k++;
    }
    if (i != end)
        BAIL;
    if (k < count && PyList_SetSlice(out, k, (Py_ssize_t)count, NULL) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
bail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(item);
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(item);
    Py_DECREF(out);
    return NULL;
}

/* unsigned varint of u at p; returns its length (p may be NULL: length only) */
static inline Py_ssize_t
put_uvarint(uint8_t *p, uint64_t u)
{
    Py_ssize_t n = 0;
    while (u >= 0x80) {
        if (p)
            p[n] = (uint8_t)((u & 0x7F) | 0x80);
        n++;
        u >>= 7;
    }
    if (p)
        p[n] = (uint8_t)u;
    return n + 1;
}

static inline uint64_t
zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* append_record(buf, count, delta, key, value, tail, limit) -> True | None | NotImplemented
 *
 * One v2 record appended to the bytearray `buf` (the Python builder's encoding, byte for
 * byte): True when appended, None when it does not fit in `limit` bytes (the first record,
 * count 0, always fits), NotImplemented when the Python builder must encode it (a key or
 * value that is not bytes-like, a delta beyond int64). `tail` is the encoded header count
 * and headers (None: no headers). Nothing is written unless it returns True. */
/* One record into `buf` (the Python builder's encoding, byte for byte): key/value NULL for a
 * null one; tail = the encoded header count and headers. Returns its size in bytes, 0 when it
 * does not fit in `limit` (count 0 always fits), -1 with an exception set. */
static Py_ssize_t
encode_record(PyObject *buf, long long count, long long delta, const char *kp, Py_ssize_t kl,
              const char *vp, Py_ssize_t vl, const char *tp, Py_ssize_t tn, long long limit)
{
    /* attributes, timestampDelta, offsetDelta, key, value, headers */
    Py_ssize_t kn = kp == NULL ? 1 : put_uvarint(NULL, zigzag(kl)) + kl;
    Py_ssize_t vn = vp == NULL ? 1 : put_uvarint(NULL, zigzag(vl)) + vl;
    Py_ssize_t rl = 1 + put_uvarint(NULL, zigzag(delta)) + put_uvarint(NULL, zigzag(count)) + kn
                    + vn + tn;
    Py_ssize_t total = put_uvarint(NULL, zigzag(rl)) + rl;
    Py_ssize_t old = PyByteArray_GET_SIZE(buf);
    if (count && (long long)old + total > limit)
        return 0;
    if (PyByteArray_Resize(buf, old + total) < 0)
        return -1;
    uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(buf) + old;
    p += put_uvarint(p, zigzag(rl));
    *p++ = 0;
    p += put_uvarint(p, zigzag(delta));
    p += put_uvarint(p, zigzag(count));
    if (kp == NULL)
        *p++ = 1;
    else {
        p += put_uvarint(p, zigzag(kl));
        memcpy(p, kp, kl);
        p += kl;
    }
    if (vp == NULL)
        *p++ = 1;
    else {
        p += put_uvarint(p, zigzag(vl));
        memcpy(p, vp, vl);
        p += vl;
    }
    memcpy(p, tp, tn);
    return total;
}

static PyObject *
append_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "append_record takes 7 positional arguments");
        return NULL;
    }
    PyObject *buf = args[0], *key = args[3], *value = args[4], *tail = args[5];
    if (!PyByteArray_CheckExact(buf)) {
        PyErr_SetString(PyExc_TypeError, "append_record needs a bytearray");
        return NULL;
    }
    int overflow = 0;
    long long count = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (overflow || count < 0)
        Py_RETURN_NOTIMPLEMENTED;
    long long delta = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (overflow)
        Py_RETURN_NOTIMPLEMENTED;
    long long limit = PyLong_AsLongLongAndOverflow(args[6], &overflow);
    if (overflow)
        Py_RETURN_NOTIMPLEMENTED;
    if (PyErr_Occurred())
        return NULL;
    Py_buffer kb = {0}, vb = {0};
    const char *tp = "\0";
    Py_ssize_t tn = 1;
    if (tail != Py_None) {
        if (!PyBytes_CheckExact(tail)) {
            PyErr_SetString(PyExc_TypeError, "append_record: tail must be bytes");
            return NULL;
        }
        tp = PyBytes_AS_STRING(tail);
        tn = PyBytes_GET_SIZE(tail);
    }
    /* not bytes-like (a str, ...): the Python builder decides, raising its own TypeError */
    if (key != Py_None && PyObject_GetBuffer(key, &kb, PyBUF_SIMPLE) < 0)
        goto defer;
    if (value != Py_None && PyObject_GetBuffer(value, &vb, PyBUF_SIMPLE) < 0) {
        if (key != Py_None)
            PyBuffer_Release(&kb);
        goto defer;
    }
    Py_ssize_t size = encode_record(buf, count, delta, key == Py_None ? NULL : kb.buf, kb.len,
                                    value == Py_None ? NULL : vb.buf, vb.len, tp, tn, limit);
    if (key != Py_None)
        PyBuffer_Release(&kb);
    if (value != Py_None)
        PyBuffer_Release(&vb);
    if (size < 0)
        return NULL;
    if (size == 0)
        Py_RETURN_NONE;
    Py_RETURN_TRUE;
defer:
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_BufferError))
        return NULL;
    PyErr_Clear();
    Py_RETURN_NOTIMPLEMENTED;
}


/* ---- decode_columns: records straight into Arrow column buffers ------------------------------
 *
 * decode_columns(bufs, data, count, base_offset, base_timestamp, log_append_time,
 *                timestamp_type, min_offset, limit) -> (appended, left_out) | None
 *
 * Appends the records at or after min_offset (at most `limit` of them) of an uncompressed v2
 * records section to the bytearrays of `bufs` (aiokafka_lite.records.columns.ColumnBuffers:
 * 9 buffers, or 16 with the headers' ones; the layout is described there) without a Python
 * object per record. `left_out` is the offset of the first record the limit left out, else -1.
 * The whole section is checked as decode_records checks it, whatever the limit. Returns None,
 * with every buffer as it was, when the pure-Python code must decide (the same rule as
 * decode_records: malformed or unusual input, a timestamp whose microseconds overflow int64, a
 * column past 2 GiB). */
#define NB_MAX 16
#define NB_PLAIN 9

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE static inline
#endif

/* A buffer is written past its logical size, inside its allocation (`cap` bytes from ob_start,
 * the trailing NUL excluded), and given its final size once at the end (col_finish): one
 * reallocation per doubling of the allocation, never one per call, and no shrink-and-regrow
 * copy between the batches of one getmany_arrow() call. Buffers with exports (a memoryview) are
 * left to the Python path, whose `+=` raises BufferError. */
typedef struct {
    PyObject *ba;
    uint8_t *p;      /* ob_start (NULL: nothing allocated) */
    Py_ssize_t len;  /* bytes written */
    Py_ssize_t cap;  /* bytes writable from ob_start */
    Py_ssize_t orig; /* size on entry, for the rollback */
    uint8_t last;    /* a bitmap's last byte on entry */
} Col;

ALWAYS_INLINE Py_ssize_t
col_capacity(PyObject *ba)
{
    PyByteArrayObject *b = (PyByteArrayObject *)ba;
    return b->ob_alloc ? b->ob_alloc - (b->ob_start - b->ob_bytes) - 1 : 0;
}

static int
col_grow(Col *c, Py_ssize_t need)
{
    Py_ssize_t grow = 2 * c->cap;
    if (grow < need)
        grow = need;
    Py_SET_SIZE(c->ba, c->len); /* every byte written so far is kept by the reallocation */
    if (PyByteArray_Resize(c->ba, grow) < 0)
        return -1;
    c->cap = col_capacity(c->ba);
    c->p = (uint8_t *)((PyByteArrayObject *)c->ba)->ob_start;
    return 0;
}

ALWAYS_INLINE int
col_reserve(Col *c, Py_ssize_t extra)
{
    Py_ssize_t need = c->len + extra;
    if (need <= c->cap)
        return 0;
    return col_grow(c, need);
}

ALWAYS_INLINE uint8_t *
col_ptr(Col *c)
{
    return c->p;
}

/* the logical size set to `len` (inside the allocation: no reallocation) */
static void
col_finish(Col *c, Py_ssize_t len)
{
    Py_SET_SIZE(c->ba, len);
    if (c->cap)
        col_ptr(c)[len] = 0;
}

ALWAYS_INLINE int
col_put(Col *c, const void *src, Py_ssize_t n)
{
    if (col_reserve(c, n) < 0)
        return -1;
    memcpy(col_ptr(c) + c->len, src, (size_t)n);
    c->len += n;
    return 0;
}

ALWAYS_INLINE int
col_i32(Col *c, int32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return col_put(c, b, 4);
}

ALWAYS_INLINE int
col_i64(Col *c, int64_t v)
{
    uint64_t u = (uint64_t)v;
    uint8_t b[8];
    for (int k = 0; k < 8; k++)
        b[k] = (uint8_t)(u >> (8 * k));
    return col_put(c, b, 8);
}

/* bit `idx` of a validity bitmap (bytes past the bitmap's length are zeroed first) */
ALWAYS_INLINE int
col_bit(Col *c, Py_ssize_t idx, int valid)
{
    Py_ssize_t byte = idx >> 3;
    if (byte >= c->len) {
        Py_ssize_t add = byte + 1 - c->len;
        if (col_reserve(c, add) < 0)
            return -1;
        memset(col_ptr(c) + c->len, 0, (size_t)add);
        c->len = byte + 1;
    }
    if (valid)
        col_ptr(c)[byte] |= (uint8_t)(1u << (idx & 7));
    return 0;
}

/* a binary value: validity bit, end offset, bytes (size -1: null) */
ALWAYS_INLINE int
col_binary(Col *valid, Col *offsets, Col *bytes, Py_ssize_t idx, const uint8_t *p,
           int64_t size, int has_valid)
{
    if (has_valid && col_bit(valid, idx, size >= 0) < 0)
        return -1;
    if (size > 0 && col_put(bytes, p, (Py_ssize_t)size) < 0)
        return -1;
    if (bytes->len > INT32_MAX)
        return 1;
    return col_i32(offsets, (int32_t)bytes->len);
}

static const int col_is_bitmap[NB_MAX] = {1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0};

static PyObject *
decode_columns_in(PyObject *const *args, Py_ssize_t nargs, const uint8_t *p, Py_ssize_t end);

/* `data`: bytes, or a C-contiguous memoryview of bytes (a batch's records section read in
 * place, without the copy into bytes) */
static PyObject *
decode_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "decode_columns takes 9 positional arguments");
        return NULL;
    }
    PyObject *data = args[1];
    if (PyBytes_CheckExact(data))
        return decode_columns_in(args, nargs, (const uint8_t *)PyBytes_AS_STRING(data),
                                 PyBytes_GET_SIZE(data));
    if (!PyMemoryView_Check(data))
        return decode_columns_in(args, nargs, NULL, 0); /* None: the pure path decides */
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_BufferError))
            return NULL;
        PyErr_Clear(); /* not plain contiguous bytes */
        return decode_columns_in(args, nargs, NULL, 0);
    }
    PyObject *out = decode_columns_in(args, nargs, (const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *
decode_columns_in(PyObject *const *args, Py_ssize_t nargs, const uint8_t *p, Py_ssize_t end)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "decode_columns takes 9 positional arguments");
        return NULL;
    }
    PyObject *bufs = args[0];
    if (!PyList_CheckExact(bufs)
        || (PyList_GET_SIZE(bufs) != NB_PLAIN && PyList_GET_SIZE(bufs) != NB_MAX)) {
        PyErr_SetString(PyExc_TypeError, "decode_columns needs a list of 9 or 16 bytearrays");
        return NULL;
    }
    int nb = (int)PyList_GET_SIZE(bufs), with_headers = nb == NB_MAX, exported = 0;
    Col col[NB_MAX];
    for (int b = 0; b < nb; b++) {
        PyObject *ba = PyList_GET_ITEM(bufs, b);
        if (!PyByteArray_CheckExact(ba)) {
            PyErr_SetString(PyExc_TypeError, "decode_columns needs a list of bytearrays");
            return NULL;
        }
        col[b].ba = ba;
        col[b].len = col[b].orig = PyByteArray_GET_SIZE(ba);
        col[b].cap = col_capacity(ba);
        col[b].p = (uint8_t *)((PyByteArrayObject *)ba)->ob_start;
        col[b].last = col[b].len ? col_ptr(&col[b])[col[b].len - 1] : 0;
        if (((PyByteArrayObject *)ba)->ob_exports > 0)
            exported = 1;
    }
    if (p == NULL || exported)
        Py_RETURN_NONE;
    for (int a = 2; a < 9; a++)
        if (!(PyLong_CheckExact(args[a]) || (a == 5 && args[a] == Py_None)))
            Py_RETURN_NONE;
    int overflow = 0, o2 = 0;
    long long count = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    o2 |= overflow;
    long long base_offset = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    o2 |= overflow;
    long long base_ts = PyLong_AsLongLongAndOverflow(args[4], &overflow);
    o2 |= overflow;
    int has_lat = args[5] != Py_None;
    long long lat = 0;
    if (has_lat) {
        lat = PyLong_AsLongLongAndOverflow(args[5], &overflow);
        o2 |= overflow;
    }
    long long ts_type = PyLong_AsLongLongAndOverflow(args[6], &overflow);
    o2 |= overflow;
    long long min_offset = PyLong_AsLongLongAndOverflow(args[7], &overflow);
    o2 |= overflow;
    long long limit = PyLong_AsLongLongAndOverflow(args[8], &overflow);
    o2 |= overflow;
    if (PyErr_Occurred())
        return NULL;
    if (o2 || count < 0 || ts_type < INT32_MIN || ts_type > INT32_MAX)
        Py_RETURN_NONE;
    if (count > end / 7)
        Py_RETURN_NONE;
    /* room for the whole section up front: one resize per buffer, not one per growth step */
    {
        Py_ssize_t c = (Py_ssize_t)count;
        Py_ssize_t room[NB_PLAIN] = {c / 8 + 1, 4 * c, end, c / 8 + 1, 4 * c, end, 8 * c, 8 * c, 4 * c};
        for (int b = 0; b < NB_PLAIN; b++)
            if (col_reserve(&col[b], room[b]) < 0)
                goto fail;
    }
    Py_ssize_t n = col[6].len >> 3; /* rows already in the buffers */
    Py_ssize_t hn = with_headers ? (col[11].len >> 2) - 1 : 0; /* headers already */
    long long appended = 0, left_out = -1;
    Py_ssize_t i = 0;
    int rc;
    for (long long r = 0; r < count; r++) {
        int64_t len, v;
        if (rd_varint(p, end, &i, &len) < 0 || len < 6 || len > end - i)
            goto bail;
        Py_ssize_t rec_end = i + (Py_ssize_t)len;
        i += 1; /* attributes */
        if (rd_varint(p, rec_end, &i, &v) < 0)
            goto bail;
        long long ts, offset;
        if (__builtin_add_overflow(base_ts, (long long)v, &ts))
            goto bail;
        if (rd_varint(p, rec_end, &i, &v) < 0)
            goto bail;
        if (__builtin_add_overflow(base_offset, (long long)v, &offset))
            goto bail;
        int64_t ksize, vsize;
        Py_ssize_t len_at = i;
        if (rd_varint(p, rec_end, &i, &ksize) < 0 || ksize < -1 || ksize > rec_end - i
            || (ksize == -1 && i - len_at != 1))
            goto bail;
        Py_ssize_t key_at = i;
        if (ksize > 0)
            i += (Py_ssize_t)ksize;
        len_at = i;
        if (rd_varint(p, rec_end, &i, &vsize) < 0 || vsize < -1 || vsize > rec_end - i
            || (vsize == -1 && i - len_at != 1))
            goto bail;
        Py_ssize_t value_at = i;
        if (vsize > 0)
            i += (Py_ssize_t)vsize;
        if (has_lat)
            ts = lat;
        int keep = offset >= min_offset;
        if (keep && appended >= limit) {
            if (left_out < 0)
                left_out = offset;
            keep = 0;
        }
        long long ts_us = 0;
        if (keep && __builtin_mul_overflow(ts, 1000LL, &ts_us))
            goto bail;
        int64_t hcount;
        if (rd_varint(p, rec_end, &i, &hcount) < 0 || hcount < 0 || hcount > (rec_end - i) / 2)
            goto bail;
        int store_h = keep && with_headers;
        if (store_h && col_bit(&col[9], n, hcount > 0) < 0)
            goto fail;
        for (int64_t h = 0; h < hcount; h++) {
            int64_t hk, hv;
            if (rd_varint(p, rec_end, &i, &hk) < 0 || hk < 0 || hk > rec_end - i)
                goto bail;
            PyObject *hkey = PyUnicode_DecodeUTF8((const char *)p + i, (Py_ssize_t)hk, NULL);
            if (hkey == NULL) {
                if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    PyErr_Clear();
                    goto bail;
                }
                goto fail;
            }
            Py_DECREF(hkey);
            Py_ssize_t hk_at = i;
            i += (Py_ssize_t)hk;
            if (rd_varint(p, rec_end, &i, &hv) < 0 || hv < -1 || hv > rec_end - i)
                goto bail;
            if (store_h) {
                if ((rc = col_binary(NULL, &col[11], &col[12], 0, p + hk_at, hk, 0)) != 0
                    || (rc = col_binary(&col[13], &col[14], &col[15], hn, p + i, hv, 1)) != 0) {
                    if (rc > 0)
                        goto bail;
                    goto fail;
                }
                hn++;
            }
            if (hv > 0)
                i += (Py_ssize_t)hv;
        }
        if (i != rec_end)
            goto bail;
        if (!keep)
            continue;
        if (store_h) {
            if (col[12].len > INT32_MAX || hn > INT32_MAX)
                goto bail;
            if (col_i32(&col[10], (int32_t)hn) < 0)
                goto fail;
        }
        if ((rc = col_binary(&col[0], &col[1], &col[2], n, p + key_at, ksize, 1)) != 0
            || (rc = col_binary(&col[3], &col[4], &col[5], n, p + value_at, vsize, 1)) != 0) {
            if (rc > 0)
                goto bail;
            goto fail;
        }
        if (col_i64(&col[6], offset) < 0 || col_i64(&col[7], ts_us) < 0
            || col_i32(&col[8], (int32_t)ts_type) < 0)
            goto fail;
        n++;
        appended++;
    }
    if (i != end)
        goto bail;
    for (int b = 0; b < nb; b++)
        col_finish(&col[b], col[b].len);
    return Py_BuildValue("(LL)", appended, left_out);
bail:
    for (int b = 0; b < nb; b++) {
        col_finish(&col[b], col[b].orig);
        if (col_is_bitmap[b] && col[b].orig)
            col_ptr(&col[b])[col[b].orig - 1] = col[b].last;
    }
    Py_RETURN_NONE;
fail:
    for (int b = 0; b < nb; b++) {
        col_finish(&col[b], col[b].orig);
        if (col_is_bitmap[b] && col[b].orig)
            col_ptr(&col[b])[col[b].orig - 1] = col[b].last;
    }
    return NULL;
}


/* ---- append_columns: v2 records from Arrow column buffers -------------------------------------
 *
 * append_columns(buf, count, base_ts, limit, rows, start, end, ts, ts_const, key, value)
 *     -> (next, state, max_ts, last_ts)
 *
 * Appends rows start .. end-1 (rows: None, or an int64 buffer of row numbers to take in that
 * order) to the builder's bytearray `buf`, the record encoding of append_record byte for byte
 * (no headers). ts: None (every row stamped ts_const) or an int64 buffer of epoch ms. key,
 * value: None (all null) or (validity buffer or None, int32 offsets, data, array offset) of an
 * Arrow binary array. `next` is the first position not appended; state 0: all appended, 1: the
 * batch is full (a record did not fit in `limit`), 2: the row at `next` needs the Python
 * builder (the batch's first record, a timestamp out of range or a delta past int64). max_ts
 * and last_ts: the builder's, after the appended rows (base_ts-relative fields unchanged). */
typedef struct {
    Py_buffer valid, offsets, data;
    int has, has_valid;
    Py_ssize_t off;
} BinCol;

static int
bincol_open(BinCol *c, PyObject *spec)
{
    memset(c, 0, sizeof(*c));
    if (spec == Py_None)
        return 0;
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 4) {
        PyErr_SetString(PyExc_TypeError, "append_columns: a column is (validity, offsets, data, offset)");
        return -1;
    }
    PyObject *v = PyTuple_GET_ITEM(spec, 0);
    c->off = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 3));
    if (c->off < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "append_columns: negative array offset");
        return -1;
    }
    if (v != Py_None) {
        if (PyObject_GetBuffer(v, &c->valid, PyBUF_SIMPLE) < 0)
            return -1;
        c->has_valid = 1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(spec, 1), &c->offsets, PyBUF_SIMPLE) < 0) {
        if (c->has_valid)
            PyBuffer_Release(&c->valid);
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(spec, 2), &c->data, PyBUF_SIMPLE) < 0) {
        if (c->has_valid)
            PyBuffer_Release(&c->valid);
        PyBuffer_Release(&c->offsets);
        return -1;
    }
    c->has = 1;
    return 0;
}

static void
bincol_close(BinCol *c)
{
    if (!c->has)
        return;
    if (c->has_valid)
        PyBuffer_Release(&c->valid);
    PyBuffer_Release(&c->offsets);
    PyBuffer_Release(&c->data);
    c->has = 0;
}

/* row r's bytes: 0 (p, n set; n -1 for null), -1 when the buffers do not hold it */
static inline int
bincol_get(const BinCol *c, int64_t r, const uint8_t **p, Py_ssize_t *n)
{
    if (!c->has) {
        *n = -1;
        return 0;
    }
    int64_t k = c->off + r;
    if (c->has_valid) {
        if ((k >> 3) >= c->valid.len)
            return -1;
        if (!(((const uint8_t *)c->valid.buf)[k >> 3] & (1u << (k & 7)))) {
            *n = -1;
            return 0;
        }
    }
    if ((k + 2) * 4 > c->offsets.len)
        return -1;
    int32_t a, b;
    memcpy(&a, (const char *)c->offsets.buf + k * 4, 4);
    memcpy(&b, (const char *)c->offsets.buf + k * 4 + 4, 4);
    if (a < 0 || b < a || b > c->data.len)
        return -1;
    *p = (const uint8_t *)c->data.buf + a;
    *n = b - a;
    return 0;
}

static PyObject *
append_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "append_columns takes 11 positional arguments");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyByteArray_CheckExact(buf)) {
        PyErr_SetString(PyExc_TypeError, "append_columns needs a bytearray");
        return NULL;
    }
    long long count = PyLong_AsLongLong(args[1]), base_ts = PyLong_AsLongLong(args[2]),
              limit = PyLong_AsLongLong(args[3]), start = PyLong_AsLongLong(args[5]),
              end = PyLong_AsLongLong(args[6]), ts_const = PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer rows = {0}, tsb = {0};
    BinCol key, value;
    int have_rows = 0, have_ts = 0;
    PyObject *result = NULL;
    memset(&key, 0, sizeof key);
    memset(&value, 0, sizeof value);
    if (args[4] != Py_None) {
        if (PyObject_GetBuffer(args[4], &rows, PyBUF_SIMPLE) < 0)
            return NULL;
        have_rows = 1;
    }
    if (args[7] != Py_None) {
        if (PyObject_GetBuffer(args[7], &tsb, PyBUF_SIMPLE) < 0)
            goto out;
        have_ts = 1;
    }
    if (bincol_open(&key, args[9]) < 0 || bincol_open(&value, args[10]) < 0)
        goto out;
    if (start < 0 || end < start || (have_rows && end * 8 > rows.len)) {
        PyErr_SetString(PyExc_ValueError, "append_columns: rows out of range");
        goto out;
    }
    int state = 0;
    long long i = start;
    long long max_ts = LLONG_MIN;
    long long last_ts = LLONG_MIN;
    for (; i < end; i++) {
        int64_t r = i;
        if (have_rows)
            memcpy(&r, (const char *)rows.buf + i * 8, 8);
        if (r < 0) {
            PyErr_SetString(PyExc_ValueError, "append_columns: a negative row number");
            goto out;
        }
        long long ts = ts_const;
        if (have_ts) {
            if ((r + 1) * 8 > tsb.len) {
                PyErr_SetString(PyExc_ValueError, "append_columns: the timestamps are too short");
                goto out;
            }
            memcpy(&ts, (const char *)tsb.buf + r * 8, 8);
        }
        long long delta;
        if (count == 0 || ts >= LLONG_MAX - 8191 || __builtin_sub_overflow(ts, base_ts, &delta)) {
            state = 2;
            break;
        }
        const uint8_t *kp = NULL, *vp = NULL;
        Py_ssize_t kn, vn;
        if (bincol_get(&key, r, &kp, &kn) < 0 || bincol_get(&value, r, &vp, &vn) < 0) {
            PyErr_SetString(PyExc_ValueError, "append_columns: a row past the column's buffers");
            goto out;
        }
        Py_ssize_t kl = kn < 0 ? 1 : put_uvarint(NULL, zigzag(kn)) + kn;
        Py_ssize_t vl = vn < 0 ? 1 : put_uvarint(NULL, zigzag(vn)) + vn;
        Py_ssize_t rl = 1 + put_uvarint(NULL, zigzag(delta)) + put_uvarint(NULL, zigzag(count))
                        + kl + vl + 1;
        Py_ssize_t total = put_uvarint(NULL, zigzag(rl)) + rl;
        Py_ssize_t old = PyByteArray_GET_SIZE(buf);
        if ((long long)old + total > limit) {
            state = 1;
            break;
        }
        if (PyByteArray_Resize(buf, old + total) < 0)
            goto out;
        uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(buf) + old;
        p += put_uvarint(p, zigzag(rl));
        *p++ = 0;
        p += put_uvarint(p, zigzag(delta));
        p += put_uvarint(p, zigzag(count));
        if (kn < 0)
            *p++ = 1;
        else {
            p += put_uvarint(p, zigzag(kn));
            if (kn)
                memcpy(p, kp, (size_t)kn);
            p += kn;
        }
        if (vn < 0)
            *p++ = 1;
        else {
            p += put_uvarint(p, zigzag(vn));
            if (vn)
                memcpy(p, vp, (size_t)vn);
            p += vn;
        }
        *p = 0; /* no headers */
        count++;
        if (ts > max_ts)
            max_ts = ts;
        last_ts = ts;
    }
    result = Py_BuildValue("(LiLL)", i, state, max_ts, last_ts);
out:
    if (have_rows)
        PyBuffer_Release(&rows);
    if (have_ts)
        PyBuffer_Release(&tsb);
    bincol_close(&key);
    bincol_close(&value);
    return result;
}


/* key_hashes(key, n, parts) -> bytes: toPositive(murmur2(key)) % parts of rows 0 .. n-1 of an
 * Arrow binary column (the (validity, offsets, data, offset) tuple of append_columns) as n
 * int32, -1 for a null key: the Java client's keyed partition index, for send_arrow(). */
static PyObject *
key_hashes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "key_hashes takes 3 positional arguments");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    long parts = PyLong_AsLong(args[2]);
    if (parts < 1 && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "key_hashes: no partitions");
    if (n < 0 || parts < 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "key_hashes: negative row count");
        return NULL;
    }
    BinCol key;
    if (bincol_open(&key, args[0]) < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 4);
    if (out == NULL) {
        bincol_close(&key);
        return NULL;
    }
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    const uint32_t m = 0x5bd1e995u;
    for (Py_ssize_t r = 0; r < n; r++) {
        const uint8_t *p = NULL;
        Py_ssize_t len;
        if (bincol_get(&key, r, &p, &len) < 0) {
            PyErr_SetString(PyExc_ValueError, "key_hashes: a row past the column's buffers");
            Py_DECREF(out);
            bincol_close(&key);
            return NULL;
        }
        int32_t v = -1;
        if (len >= 0) {
            uint32_t h = 0x9747b28cu ^ (uint32_t)len;
            Py_ssize_t n4 = len >> 2;
            for (Py_ssize_t i = 0; i < n4; i++) {
                uint32_t k = (uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8)
                             | ((uint32_t)p[4 * i + 2] << 16) | ((uint32_t)p[4 * i + 3] << 24);
                k *= m;
                k ^= k >> 24;
                k *= m;
                h *= m;
                h ^= k;
            }
            Py_ssize_t base = len & ~(Py_ssize_t)3;
            switch (len & 3) {
            case 3:
                h ^= (uint32_t)p[base + 2] << 16;
                /* fall through */
            case 2:
                h ^= (uint32_t)p[base + 1] << 8;
                /* fall through */
            case 1:
                h ^= (uint32_t)p[base];
                h *= m;
            }
            h ^= h >> 13;
            h *= m;
            h ^= h >> 15;
            v = (int32_t)((h & 0x7fffffffu) % (uint32_t)parts);
        }
        memcpy(o + 4 * r, &v, 4);
    }
    bincol_close(&key);
    return out;
}

/* ---- batch_appender: the public BatchBuilder.append() in C ----------------------------------
 *
 * batch_appender(builder, meta_cls, slow) -> appender
 *
 * `appender(*, timestamp=None, key=None, value=None, headers=None)` is
 * aiokafka_lite.producer.user_batch.BatchBuilder.append without serializers: None once closed
 * (`appender.closed`, set when a record does not fit), else the record appended to `builder`
 * (a RecordBatchBuilder: its slots _buf, _count, _base_ts, _max_ts, _last_ts, _limit are read
 * and written as its append() does) and its metadata `meta_cls((offset delta, timestamp,
 * size))`. The common record (bytes or None key and value, no headers, the batch's first record
 * or a timestamp 0..8191 ms after it, the builder not built) is encoded here; any other goes to
 * `slow(builder, timestamp, key, value, headers)` (the Python path: its checks and errors),
 * whose None closes the appender too. */
enum { BA_BUF, BA_COUNT, BA_BASE, BA_MAX, BA_LAST, BA_LIMIT, BA_N };
static const char *ba_names[BA_N] = {"_buf", "_count", "_base_ts", "_max_ts", "_last_ts", "_limit"};
static PyObject *kw_timestamp, *kw_key, *kw_value, *kw_headers;

typedef struct {
    PyObject_HEAD
    PyObject *builder;
    PyTypeObject *meta;
    PyObject *slow;
    PyTypeObject *cls; /* type(builder) when made: another type (built) goes to `slow` */
    Py_ssize_t off[BA_N];
    char closed;
    vectorcallfunc vectorcall;
} Appender;

static inline PyObject **
ba_slot(Appender *a, int f)
{
    return (PyObject **)((char *)a->builder + a->off[f]);
}

static int
ba_kwarg(PyObject *name, PyObject *val, PyObject **ts, PyObject **key, PyObject **value,
         PyObject **headers)
{
    PyObject *names[4] = {kw_timestamp, kw_key, kw_value, kw_headers};
    PyObject **outs[4] = {ts, key, value, headers};
    for (int k = 0; k < 4; k++)
        if (name == names[k]) {
            *outs[k] = val;
            return 0;
        }
    for (int k = 0; k < 4; k++)
        if (PyUnicode_Check(name) && PyUnicode_Compare(name, names[k]) == 0) {
            *outs[k] = val;
            return 0;
        }
    PyErr_Format(PyExc_TypeError, "append() got an unexpected keyword argument '%S'", name);
    return -1;
}

static PyObject *
appender_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Appender *a = (Appender *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs) {
        PyErr_Format(PyExc_TypeError, "append() takes keyword arguments only (%zd positional given)",
                     nargs);
        return NULL;
    }
    PyObject *ts = Py_None, *key = Py_None, *value = Py_None, *headers = Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++)
        if (ba_kwarg(PyTuple_GET_ITEM(kwnames, k), args[k], &ts, &key, &value, &headers) < 0)
            return NULL;
    if (a->closed)
        Py_RETURN_NONE;
    PyObject *tsobj;
    if (ts == Py_None) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        tsobj = PyLong_FromLongLong((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
    }
    else
        tsobj = PyNumber_Long(ts); /* int(timestamp), as the Python path */
    if (tsobj == NULL)
        return NULL;
    PyObject *result = NULL;
    int fast = Py_TYPE(a->builder) == a->cls && (key == Py_None || PyBytes_CheckExact(key))
               && (value == Py_None || PyBytes_CheckExact(value))
               && (headers == Py_None
                   || ((PyTuple_CheckExact(headers) || PyList_CheckExact(headers))
                       && Py_SIZE(headers) == 0));
    for (int f = 0; fast && f < BA_N; f++)
        fast = *ba_slot(a, f) != NULL;
    long long t = 0, count = 0, base = 0, delta = 0, limit = 0, max_ts = 0;
    int overflow = 0;
    if (fast) {
        t = PyLong_AsLongLongAndOverflow(tsobj, &overflow);
        fast = !overflow;
        count = PyLong_AsLongLongAndOverflow(*ba_slot(a, BA_COUNT), &overflow);
        fast = fast && !overflow && count >= 0 && count < INT32_MAX;
        limit = PyLong_AsLongLongAndOverflow(*ba_slot(a, BA_LIMIT), &overflow);
        fast = fast && !overflow && PyByteArray_CheckExact(*ba_slot(a, BA_BUF));
        if (PyErr_Occurred())
            goto done;
    }
    if (fast && count) {
        base = PyLong_AsLongLongAndOverflow(*ba_slot(a, BA_BASE), &overflow);
        fast = !overflow && !__builtin_sub_overflow(t, base, &delta) && delta >= 0 && delta < 8192;
        max_ts = PyLong_AsLongLongAndOverflow(*ba_slot(a, BA_MAX), &overflow);
        fast = fast && !overflow;
        if (PyErr_Occurred())
            goto done;
    }
    else if (fast) /* the first record: _check_timestamp's range */
        fast = t < LLONG_MAX - 8191;
    if (!fast) {
        result = PyObject_CallFunctionObjArgs(a->slow, a->builder, tsobj, key, value, headers, NULL);
        if (result == Py_None)
            a->closed = 1;
        goto done;
    }
    Py_ssize_t size = encode_record(
        *ba_slot(a, BA_BUF), count, delta, key == Py_None ? NULL : PyBytes_AS_STRING(key),
        key == Py_None ? 0 : PyBytes_GET_SIZE(key), value == Py_None ? NULL : PyBytes_AS_STRING(value),
        value == Py_None ? 0 : PyBytes_GET_SIZE(value), "\0", 1, limit);
    if (size < 0)
        goto done;
    if (size == 0) {
        a->closed = 1;
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *idx = Py_NewRef(*ba_slot(a, BA_COUNT)), *next = PyLong_FromLongLong(count + 1);
    PyObject *nbytes = PyLong_FromSsize_t(size);
    result = a->meta->tp_alloc(a->meta, 3);
    if (next == NULL || nbytes == NULL || result == NULL) {
        Py_DECREF(idx);
        Py_XDECREF(next);
        Py_XDECREF(nbytes);
        Py_CLEAR(result);
        goto done; /* the record is in the buffer but not counted: as a failed Python append */
    }
    Py_SETREF(*ba_slot(a, BA_COUNT), next);
    Py_SETREF(*ba_slot(a, BA_LAST), Py_NewRef(tsobj));
    if (!count) {
        Py_SETREF(*ba_slot(a, BA_BASE), Py_NewRef(tsobj));
        Py_SETREF(*ba_slot(a, BA_MAX), Py_NewRef(tsobj));
    }
    else if (t > max_ts)
        Py_SETREF(*ba_slot(a, BA_MAX), Py_NewRef(tsobj));
    PyTuple_SET_ITEM(result, 0, idx);
    PyTuple_SET_ITEM(result, 1, Py_NewRef(tsobj));
    PyTuple_SET_ITEM(result, 2, nbytes);
done:
    Py_DECREF(tsobj);
    return result;
}

static int
appender_traverse(Appender *a, visitproc visit, void *arg)
{
    Py_VISIT(a->builder);
    Py_VISIT(a->meta);
    Py_VISIT(a->slow);
    Py_VISIT(a->cls);
    return 0;
}

static int
appender_clear(Appender *a)
{
    Py_CLEAR(a->builder);
    Py_CLEAR(a->meta);
    Py_CLEAR(a->slow);
    Py_CLEAR(a->cls);
    return 0;
}

static void
appender_dealloc(Appender *a)
{
    PyObject_GC_UnTrack(a);
    appender_clear(a);
    PyObject_GC_Del(a);
}

static PyMemberDef appender_members[] = {
    {"closed", T_BOOL, offsetof(Appender, closed), 0, "True once no record is taken any more."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aiokafka_lite_native._v2.BatchAppender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "BatchBuilder.append() in C (see batch_appender).",
    .tp_vectorcall_offset = offsetof(Appender, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = (traverseproc)appender_traverse,
    .tp_clear = (inquiry)appender_clear,
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_members = appender_members,
};

static PyObject *
batch_appender(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "batch_appender takes 3 positional arguments");
        return NULL;
    }
    PyObject *builder = args[0], *meta = args[1], *slow = args[2];
    if (!PyType_Check(meta) || ((PyTypeObject *)meta)->tp_base != &PyTuple_Type
        || ((PyTypeObject *)meta)->tp_basicsize != PyTuple_Type.tp_basicsize
        || !PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError,
                        "batch_appender needs a tuple subclass without fields and a callable");
        return NULL;
    }
    PyTypeObject *cls = Py_TYPE(builder);
    Py_ssize_t off[BA_N];
    for (int f = 0; f < BA_N; f++) {
        PyObject *d = PyObject_GetAttrString((PyObject *)cls, ba_names[f]);
        if (d == NULL)
            return NULL;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type)
                 && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX
                 && ((PyMemberDescrObject *)d)->d_member->offset > 0;
        off[f] = ok ? ((PyMemberDescrObject *)d)->d_member->offset : 0;
        Py_DECREF(d);
        if (!ok || cls->tp_setattro != PyObject_GenericSetAttr) {
            PyErr_Format(PyExc_TypeError, "batch_appender: %s is not a slot", ba_names[f]);
            return NULL;
        }
    }
    Appender *a = PyObject_GC_New(Appender, &AppenderType);
    if (a == NULL)
        return NULL;
    a->builder = Py_NewRef(builder);
    a->meta = (PyTypeObject *)Py_NewRef(meta);
    a->slow = Py_NewRef(slow);
    a->cls = (PyTypeObject *)Py_NewRef(cls);
    memcpy(a->off, off, sizeof(off));
    a->closed = 0;
    a->vectorcall = appender_call;
    PyObject_GC_Track(a);
    return (PyObject *)a;
}

static PyMethodDef methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "decode_records(data, count, base_offset, base_timestamp, log_append_time, cls, topic, "
     "partition, timestamp_type, min_offset) -> list | None: the records of an uncompressed v2 "
     "records section, or None when the pure-Python decoder must decide (malformed input)."},
    {"append_record", (PyCFunction)(void (*)(void))append_record, METH_FASTCALL,
     "append_record(buf, count, delta, key, value, tail, limit) -> True | None | "
     "NotImplemented: one v2 record appended to a bytearray (see the C source)."},
    {"decode_columns", (PyCFunction)(void (*)(void))decode_columns, METH_FASTCALL,
     "decode_columns(bufs, data, count, base_offset, base_timestamp, log_append_time, "
     "timestamp_type, min_offset, limit) -> (appended, left_out) | None: records appended to "
     "Arrow column buffers (see the C source)."},
    {"append_columns", (PyCFunction)(void (*)(void))append_columns, METH_FASTCALL,
     "append_columns(buf, count, base_ts, limit, rows, start, end, ts, ts_const, key, value) "
     "-> (next, state, max_ts, last_ts): v2 records from Arrow buffers (see the C source)."},
    {"key_hashes", (PyCFunction)(void (*)(void))key_hashes, METH_FASTCALL,
     "key_hashes(key, n, parts) -> bytes: positive murmur2 of each key of an Arrow binary column "
     "modulo parts, as int32 (-1: null)."},
    {"batch_appender", (PyCFunction)(void (*)(void))batch_appender, METH_FASTCALL,
     "batch_appender(builder, meta_cls, slow) -> BatchBuilder.append in C (see the C source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_v2", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__v2(void)
{
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL)
        return NULL;
    static const char *names[NFIELDS] = {"topic", "partition", "offset", "timestamp",
        "timestamp_type", "key", "value", "checksum", "serialized_key_size",
        "serialized_value_size", "headers"};
    for (int f = 0; f < NFIELDS; f++)
        if ((field_names[f] = PyUnicode_InternFromString(names[f])) == NULL)
            return NULL;
    if ((kw_timestamp = PyUnicode_InternFromString("timestamp")) == NULL
        || (kw_key = PyUnicode_InternFromString("key")) == NULL
        || (kw_value = PyUnicode_InternFromString("value")) == NULL
        || (kw_headers = PyUnicode_InternFromString("headers")) == NULL)
        return NULL;
    if (PyType_Ready(&AppenderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    /* decode_columns reads a memoryview in place (older builds took bytes only) */
    if (m != NULL && PyModule_AddIntConstant(m, "TAKES_VIEWS", 1) < 0)
        Py_CLEAR(m);
    return m;
}
