/* broker.commitlog._native: the per-message loops of the commit-log codec, compiled.
 *
 * codec.py is the definition of the record format and stays the reference: every function here is a
 * fast path that handles the common case and hands anything else back to the Python code, which then
 * decides (raises the precise error, writes the blank marker, takes the rare field types). So this file
 * never produces an error message or a verdict the Python core would not produce; tests compare both
 * paths on the same inputs (tests/unit/broker/test_native_codec.py).
 *
 * CRC32 is ISA-L's crc32_gzip_refl (zlib's CRC32: same polynomial, same running seed), taken from the
 * isal package that codec.py already uses, through set_crc32(address). Until it is set, every function
 * here refuses to run (RuntimeError), so no record is ever written or accepted without the real CRC.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Layout of codec.py (all integers big-endian). */
#define MESSAGE_MAGIC 0x4D514D31u
#define HEADER_SIZE 52
#define RECORD_CRC_FROM 12
#define BLANK_SIZE 8
#define MIN_MESSAGE_SIZE (HEADER_SIZE + 2)
#define MAX_MSG_ID_BYTES 255
#define MAX_TOPIC_BYTES 255
#define MAX_KEYS_BYTES 0xFFFF
#define MAX_PROPERTIES_BYTES 0x7FFF
#define ID_PREFIX_CHARS 16
#define ID_CHARS (ID_PREFIX_CHARS + 16)

typedef uint32_t (*crc32_fn_t)(uint32_t crc, const unsigned char *buf, uint64_t len);
static crc32_fn_t crc32_fn = NULL;

static inline uint32_t get_u32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline uint16_t get_u16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline int64_t get_i64(const unsigned char *p) {
    return (int64_t)(((uint64_t)get_u32(p) << 32) | (uint64_t)get_u32(p + 4));
}
static inline void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
static inline void put_u16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}
static inline void put_i64(unsigned char *p, int64_t v) {
    put_u32(p, (uint32_t)((uint64_t)v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

/* The preamble of the fast paths: the CRC is set and ``name`` got ``want`` arguments. */
static int ready(const char *name, Py_ssize_t nargs, Py_ssize_t want) {
    if (crc32_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_native: set_crc32 was not called");
        return 0;
    }
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", name, want, nargs);
        return 0;
    }
    return 1;
}

static PyObject *set_crc32(PyObject *self, PyObject *arg) {
    void *address = PyLong_AsVoidPtr(arg);
    if (address == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "_native: null CRC32 address");
        return NULL;
    }
    crc32_fn = (crc32_fn_t)address;
    Py_RETURN_NONE;
}

static PyObject *crc32(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    /* crc32(data, value=0): only for the tests that check set_crc32 took zlib's CRC32. */
    if (!ready("crc32", nargs, nargs == 2 ? 2 : 1))
        return NULL;
    unsigned long value = 0;
    if (nargs == 2) {
        value = PyLong_AsUnsignedLongMask(args[1]);
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = crc32_fn((uint32_t)value, (const unsigned char *)view.buf, (uint64_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* skip_messages(buf, pos, end, base_offset, seg_rel_end, verify_crc, strict, max_messages, count, last)
 *   -> (pos, count, last)
 *
 * Walks scan_units' message branch over consecutive messages that pass every one of its checks and
 * stops at the first unit that does not (any other magic, a failed check, a unit past ``end``, the
 * message limit, or fewer than HEADER_SIZE bytes of buffer). scan_units then looks at that unit itself
 * (its ``window`` only decides how a unit past ``end`` is named, so it is not needed here).
 */
static PyObject *skip_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!ready("skip_messages", nargs, 10))
        return NULL;
    long long pos = PyLong_AsLongLong(args[1]);
    const long long end = PyLong_AsLongLong(args[2]);
    const long long base = PyLong_AsLongLong(args[3]);
    const long long seg_rel_end = PyLong_AsLongLong(args[4]);
    const int verify_crc = PyObject_IsTrue(args[5]);
    const int strict = PyObject_IsTrue(args[6]);
    const long long max_messages = PyLong_AsLongLong(args[7]);
    long long count = PyLong_AsLongLong(args[8]);
    long long last = PyLong_AsLongLong(args[9]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    const long long length = (long long)view.len;
    const long long limit = end - BLANK_SIZE;
    if (pos < 0)
        pos = length; /* never read before the buffer: hand the case back untouched */

    /* CRC checks are the heavy walk (recovery, replicated batches): other threads may run meanwhile. */
    PyThreadState *released = verify_crc ? PyEval_SaveThread() : NULL;
    while (pos <= limit && count != max_messages && pos + HEADER_SIZE <= length) {
        const unsigned char *p = data + pos;
        if (get_u32(p + 4) != MESSAGE_MAGIC)
            break;
        const long long size = get_u32(p);
        const long long stop = pos + size;
        const long long body_start = stop - (long long)get_u32(p + 40);
        if (size < MIN_MESSAGE_SIZE || stop + BLANK_SIZE > seg_rel_end || get_i64(p + 16) != base + pos ||
            body_start < pos + MIN_MESSAGE_SIZE || stop > end)
            break; /* stop > end: torn, or cut by the window; scan_units tells which */
        if (strict) {
            const long long n_id = get_u16(p + 44), n_topic = get_u16(p + 46);
            if (pos + HEADER_SIZE + n_id + n_topic + get_u16(p + 48) + get_u16(p + 50) != body_start ||
                n_id == 0 || n_topic == 0)
                break;
        }
        if (stop > length)
            break;
        if (verify_crc) {
            const uint32_t body_crc = crc32_fn(0, data + body_start, (uint64_t)(stop - body_start));
            if (body_crc != get_u32(p + 12) ||
                crc32_fn(body_crc, p + RECORD_CRC_FROM, (uint64_t)(body_start - pos - RECORD_CRC_FROM)) !=
                    get_u32(p + 8))
                break;
        }
        last = pos;
        count++;
        pos = stop;
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    PyBuffer_Release(&view);
    return Py_BuildValue("(LLL)", pos, count, last);
}

/* --- encoding ----------------------------------------------------------------------------------- */
typedef struct {
    PyObject *topic, *body, *msg_id, *keys, *properties, *born_ts; /* new references (or NULL) */
    PyObject *props_bytes;                                            /* new reference or NULL */
    const char *id, *topic_b, *keys_b;
    Py_ssize_t n_id, n_topic, n_keys, n_props, n_body;
    int64_t born;
    int generated_id;
    Py_ssize_t size;
} Entry;

static PyObject *s_topic, *s_body, *s_msg_id, *s_keys, *s_properties, *s_born_ts;

static void entry_clear(Entry *e) {
    Py_XDECREF(e->topic);
    Py_XDECREF(e->body);
    Py_XDECREF(e->msg_id);
    Py_XDECREF(e->keys);
    Py_XDECREF(e->properties);
    Py_XDECREF(e->born_ts);
    Py_XDECREF(e->props_bytes);
}

/* Fill ``e`` from ``draft``. 1: the fast path takes it; 0: hand it back to Python; -1: a real error. */
static int entry_load(Entry *e, PyObject *draft, int64_t store_ts, PyObject *encode_properties) {
    memset(e, 0, sizeof(*e));
    if (!(e->topic = PyObject_GetAttr(draft, s_topic)) || !(e->body = PyObject_GetAttr(draft, s_body)) ||
        !(e->msg_id = PyObject_GetAttr(draft, s_msg_id)) || !(e->keys = PyObject_GetAttr(draft, s_keys)) ||
        !(e->properties = PyObject_GetAttr(draft, s_properties)) ||
        !(e->born_ts = PyObject_GetAttr(draft, s_born_ts)))
        return -1;
    if (!PyUnicode_Check(e->topic) || !PyBytes_CheckExact(e->body) || !PyUnicode_Check(e->keys))
        return 0;
    if ((e->topic_b = PyUnicode_AsUTF8AndSize(e->topic, &e->n_topic)) == NULL ||
        (e->keys_b = PyUnicode_AsUTF8AndSize(e->keys, &e->n_keys)) == NULL) {
        PyErr_Clear(); /* e.g. a lone surrogate: encode_message raises the clear error */
        return 0;
    }
    e->n_body = PyBytes_GET_SIZE(e->body);
    /* msgId: the draft's own when it is a non-empty str (``draft.msg_id or generated``), else generated. */
    if (e->msg_id == Py_None || (PyUnicode_Check(e->msg_id) && PyUnicode_GET_LENGTH(e->msg_id) == 0)) {
        e->generated_id = 1;
        e->n_id = ID_CHARS;
    } else if (PyUnicode_Check(e->msg_id) && PyUnicode_IS_ASCII(e->msg_id)) {
        e->id = PyUnicode_AsUTF8AndSize(e->msg_id, &e->n_id);
        if (e->id == NULL)
            return -1;
    } else {
        return 0;
    }
    if (e->born_ts == Py_None) {
        e->born = store_ts;
    } else if (PyLong_CheckExact(e->born_ts)) {
        int overflow = 0;
        e->born = PyLong_AsLongLongAndOverflow(e->born_ts, &overflow);
        if (overflow || (e->born == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
    } else {
        return 0;
    }
    if (e->properties != Py_None) {
        if (!PyDict_Check(e->properties))
            return 0;
        if (PyDict_GET_SIZE(e->properties) != 0) {
            /* One definition of the properties text and its checks: codec.encode_properties. */
            e->props_bytes = PyObject_CallOneArg(encode_properties, e->properties);
            if (e->props_bytes == NULL || !PyBytes_CheckExact(e->props_bytes)) {
                PyErr_Clear();
                return 0;
            }
            e->n_props = PyBytes_GET_SIZE(e->props_bytes);
        }
    }
    e->size = HEADER_SIZE + e->n_id + e->n_topic + e->n_keys + e->n_props + e->n_body;
    return 1;
}

static inline void hex16(char *out, uint64_t v) {
    static const char digits[] = "0123456789ABCDEF";
    for (int i = 15; i >= 0; i--) {
        out[i] = digits[v & 0xF];
        v >>= 4;
    }
}

/* encode_run(drafts, index, pos, seg_end, store_ts, max_message_size, id_prefix, next_id, result_type,
 *            results, encode_properties) -> (data, done, ids_used)
 *
 * Encodes drafts[index:] back to back from global offset ``pos`` for as long as each one is a plain
 * draft within every bound of encode_message and fits before ``seg_end`` by codec.fits. ``data`` holds
 * the ``done`` records; ``result_type(offset, size, msg_id, store_ts)`` tuples are appended to
 * ``results``. Generated msgIds are ``id_prefix`` + 16 hex digits of next_id, next_id + 1, ... The
 * first draft it does not take (a bound, a field type, the segment end) is left to the Python path.
 */
static PyObject *encode_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!ready("encode_run", nargs, 11))
        return NULL;
    PyObject *drafts = args[0], *results = args[9], *encode_properties = args[10];
    PyTypeObject *result_type = (PyTypeObject *)args[8];
    if (!PyList_Check(drafts) || !PyList_Check(results) || !PyType_Check(args[8]) ||
        !PyType_IsSubtype(result_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "encode_run: drafts and results must be lists, result_type a tuple type");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[1]);
    long long pos = PyLong_AsLongLong(args[2]);
    long long seg_end = PyLong_AsLongLong(args[3]);
    long long store_ts = PyLong_AsLongLong(args[4]);
    long long max_size = PyLong_AsLongLong(args[5]);
    unsigned long long next_id = PyLong_AsUnsignedLongLong(args[7]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t prefix_len;
    const char *prefix = PyUnicode_Check(args[6]) ? PyUnicode_AsUTF8AndSize(args[6], &prefix_len) : NULL;
    if (prefix == NULL || prefix_len != ID_PREFIX_CHARS) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "encode_run: id_prefix must be 16 ASCII characters");
        return NULL;
    }
    const Py_ssize_t n = PyList_GET_SIZE(drafts) - index;
    if (index < 0 || n < 0) {
        PyErr_SetString(PyExc_IndexError, "encode_run: index out of range");
        return NULL;
    }
    Entry *entries = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(Entry));
    if (entries == NULL)
        return PyErr_NoMemory();

    /* Pass 1: which drafts the fast path takes, and the run's total size. */
    PyObject *out = NULL;
    Py_ssize_t done = 0, total = 0;
    long long at = pos;
    for (; done < n; done++) {
        Entry *e = &entries[done];
        int loaded = entry_load(e, PyList_GET_ITEM(drafts, index + done), store_ts, encode_properties);
        if (loaded < 0) {
            done++; /* so the cleanup below releases this entry too */
            goto fail;
        }
        if (loaded == 0 || e->n_id > MAX_MSG_ID_BYTES || e->n_id == 0 || e->n_topic == 0 ||
            e->n_topic > MAX_TOPIC_BYTES || e->n_keys > MAX_KEYS_BYTES || e->n_props > MAX_PROPERTIES_BYTES ||
            e->size > max_size || at < 0 || e->size + BLANK_SIZE > seg_end - at) {
            entry_clear(e);
            break;
        }
        at += e->size;
        total += e->size;
    }

    /* Pass 2: the bytes, the CRCs, the ids and the results. */
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto fail;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    unsigned long long ids_used = 0;
    at = pos;
    for (Py_ssize_t i = 0; i < done; i++) {
        Entry *e = &entries[i];
        unsigned char *r = w;
        PyObject *msg_id;
        unsigned char *q = r + HEADER_SIZE;
        if (e->generated_id) {
            msg_id = PyUnicode_New(ID_CHARS, 127);
            if (msg_id == NULL)
                goto fail;
            char *chars = (char *)PyUnicode_DATA(msg_id);
            memcpy(chars, prefix, ID_PREFIX_CHARS);
            hex16(chars + ID_PREFIX_CHARS, next_id + ids_used++);
            memcpy(q, chars, ID_CHARS);
        } else {
            msg_id = Py_NewRef(e->msg_id);
            memcpy(q, e->id, (size_t)e->n_id);
        }
        q += e->n_id;
        memcpy(q, e->topic_b, (size_t)e->n_topic);
        q += e->n_topic;
        memcpy(q, e->keys_b, (size_t)e->n_keys);
        q += e->n_keys;
        if (e->n_props) {
            memcpy(q, PyBytes_AS_STRING(e->props_bytes), (size_t)e->n_props);
            q += e->n_props;
        }
        memcpy(q, PyBytes_AS_STRING(e->body), (size_t)e->n_body);
        const uint32_t body_crc = crc32_fn(0, q, (uint64_t)e->n_body);
        put_u32(r, (uint32_t)e->size);
        put_u32(r + 4, MESSAGE_MAGIC);
        put_u32(r + 12, body_crc);
        put_i64(r + 16, at);
        put_i64(r + 24, store_ts);
        put_i64(r + 32, e->born);
        put_u32(r + 40, (uint32_t)e->n_body);
        put_u16(r + 44, (uint16_t)e->n_id);
        put_u16(r + 46, (uint16_t)e->n_topic);
        put_u16(r + 48, (uint16_t)e->n_keys);
        put_u16(r + 50, (uint16_t)e->n_props);
        put_u32(r + 8, crc32_fn(body_crc, r + RECORD_CRC_FROM, (uint64_t)(q - r - RECORD_CRC_FROM)));

        PyObject *result = result_type->tp_alloc(result_type, 4);
        if (result == NULL) {
            Py_DECREF(msg_id);
            goto fail;
        }
        PyTuple_SET_ITEM(result, 0, PyLong_FromLongLong(at));
        PyTuple_SET_ITEM(result, 1, PyLong_FromSsize_t(e->size));
        PyTuple_SET_ITEM(result, 2, msg_id);
        PyTuple_SET_ITEM(result, 3, PyLong_FromLongLong(store_ts));
        if (PyTuple_GET_ITEM(result, 0) == NULL || PyTuple_GET_ITEM(result, 1) == NULL ||
            PyTuple_GET_ITEM(result, 3) == NULL || PyList_Append(results, result) < 0) {
            Py_DECREF(result);
            goto fail;
        }
        Py_DECREF(result);
        at += e->size;
        w += e->size;
    }
    for (Py_ssize_t i = 0; i < done; i++)
        entry_clear(&entries[i]);
    PyMem_Free(entries);
    PyObject *ret = Py_BuildValue("(NnK)", out, done, ids_used);
    return ret;

fail:
    for (Py_ssize_t i = 0; i < done; i++)
        entry_clear(&entries[i]);
    PyMem_Free(entries);
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"set_crc32", set_crc32, METH_O, "Use the zlib-compatible CRC32 function at this address."},
    {"crc32", (PyCFunction)(void (*)(void))crc32, METH_FASTCALL, "crc32(data, value=0) with that function."},
    {"skip_messages", (PyCFunction)(void (*)(void))skip_messages, METH_FASTCALL,
     "Walk consecutive valid messages (scan_units' fast path)."},
    {"encode_run", (PyCFunction)(void (*)(void))encode_run, METH_FASTCALL,
     "Encode plain drafts back to back (append_batch's fast path)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    if (!(s_topic = PyUnicode_InternFromString("topic")) || !(s_body = PyUnicode_InternFromString("body")) ||
        !(s_msg_id = PyUnicode_InternFromString("msg_id")) || !(s_keys = PyUnicode_InternFromString("keys")) ||
        !(s_properties = PyUnicode_InternFromString("properties")) ||
        !(s_born_ts = PyUnicode_InternFromString("born_ts")))
        return NULL;
    return PyModule_Create(&module);
}
