/* The field table of a batch of protobuf messages, without the GIL (jaxdali.ops.readers.protowire).
 *
 * parse_fields walks every message of the batch once, field by field, and writes one row per field
 * into caller-owned arrays: message index, field number, wire type, varint value, and (start, length)
 * of the payload in the batch buffer. These are the rows protowire's NumPy parser builds; the NumPy
 * parser stays the reference (and the fallback where this module is not built), and it also writes the
 * error message of a malformed batch: this module only says which message is malformed first.
 *
 * Built against the stable ABI (Py_LIMITED_API, Python >= 3.11) by setup.py, which also passes
 * JAXDALI_KERNEL_SOURCE, the SHA-256 of this file, exposed as SOURCE_SHA256 so that a module built from
 * another version of this file is detected at import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#ifndef JAXDALI_KERNEL_SOURCE
#define JAXDALI_KERNEL_SOURCE unknown
#endif
#define STRINGIZE_(x) #x
#define STRINGIZE(x) STRINGIZE_(x)

enum { VARINT = 0, FIXED64 = 1, LENGTH_DELIMITED = 2, FIXED32 = 5 };

typedef struct {
    int64_t *msg, *number, *start, *length;
    uint8_t *wire;
    uint64_t *value;
    int64_t capacity;
} Rows;

/* Reads the varint at *pos, which must end before limit (and within 10 bytes); 0 if it does not. */
static int read_varint(const uint8_t *buf, int64_t *pos, int64_t limit, uint64_t *out)
{
    uint64_t v = 0;
    for (int k = 0; k < 10 && *pos < limit; k++) {
        uint8_t b = buf[(*pos)++];
        v |= (uint64_t)(b & 0x7F) << (7 * k);
        if (b < 0x80) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* Rows of message m (buf[pos:limit]); -1 if it is malformed, else the number of rows it has (written
 * from row `row` on while they fit in the capacity). */
static int64_t parse_message(const uint8_t *buf, int64_t pos, int64_t limit, int64_t m, int64_t row, Rows *r)
{
    int64_t count = 0;
    while (pos < limit) {
        uint64_t key, value = 0, length = 0;
        if (!read_varint(buf, &pos, limit, &key)) return -1;
        uint8_t wire = (uint8_t)(key & 7);
        int64_t number = (int64_t)(key >> 3);
        if (number == 0) return -1;
        switch (wire) {
        case VARINT:
            if (!read_varint(buf, &pos, limit, &value)) return -1;
            break;
        case LENGTH_DELIMITED:
            if (!read_varint(buf, &pos, limit, &length)) return -1;
            break;
        case FIXED64:
            length = 8;
            break;
        case FIXED32:
            length = 4;
            break;
        default:
            return -1;
        }
        if (length > (uint64_t)(limit - pos)) return -1;
        if (row + count < r->capacity) {
            int64_t i = row + count;
            r->msg[i] = m;
            r->number[i] = number;
            r->wire[i] = wire;
            r->value[i] = value;
            r->start[i] = pos;
            r->length[i] = (int64_t)length;
        }
        pos += (int64_t)length;
        count++;
    }
    return count;
}

static int get_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t itemsize, Py_ssize_t count,
                      const char *name)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != itemsize || (count >= 0 && view->len != count * itemsize)) {
        PyErr_Format(PyExc_ValueError, "parse_fields: %s must hold %zd items of %zd bytes", name, count, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(parse_fields_doc,
"parse_fields(buf, starts, ends, msg, number, wire, value, start, length) -> int\n\n"
"Parses the messages buf[starts[i]:ends[i]] (int64 starts and ends) into the row arrays msg, number,\n"
"start, length (int64), wire (uint8) and value (uint64), all of one length, the capacity. Returns the\n"
"number of rows, which may exceed the capacity (then call again with arrays that large), or -1 - i\n"
"where message i is the first malformed one (nothing is then meant to be used).");

static PyObject *parse_fields(PyObject *self, PyObject *args)
{
    PyObject *objs[9];
    static const char *names[9] = {"buf", "starts", "ends", "msg", "number", "wire", "value", "start", "length"};
    static const Py_ssize_t sizes[9] = {1, 8, 8, 8, 8, 1, 8, 8, 8};
    Py_buffer views[9];
    int got = 0;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6],
                          &objs[7], &objs[8]))
        return NULL;
    Py_ssize_t n = -1, capacity = -1;
    for (; got < 9; got++) {
        Py_ssize_t count = got == 0 ? -1 : got < 3 ? n : capacity;
        if (get_buffer(objs[got], &views[got], got >= 3, sizes[got], count, names[got]) < 0) goto done;
        if (got == 1) n = views[1].len / 8;
        if (got == 3) capacity = views[3].len / 8;
    }
    const uint8_t *buf = views[0].buf;
    const int64_t *starts = views[1].buf, *ends = views[2].buf;
    Rows r = {views[3].buf, views[4].buf, views[7].buf, views[8].buf, views[5].buf, views[6].buf, capacity};
    int64_t rows = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (starts[i] < 0 || ends[i] < starts[i] || ends[i] > (int64_t)views[0].len) {
            PyErr_Format(PyExc_ValueError, "parse_fields: message %zd spans [%lld, %lld), outside the buffer of %zd "
                         "bytes", i, (long long)starts[i], (long long)ends[i], views[0].len);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t count = parse_message(buf, starts[i], ends[i], i, rows, &r);
        if (count < 0) {
            rows = -1 - i;
            break;
        }
        rows += count;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(rows);
done:
    while (got-- > 0) PyBuffer_Release(&views[got]);
    return result;
}

static PyMethodDef methods[] = {
    {"parse_fields", parse_fields, METH_VARARGS, parse_fields_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_protowire_kernel",
    .m_doc = "The compiled protobuf field parser of jaxdali.ops.readers.protowire.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__protowire_kernel(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", STRINGIZE(JAXDALI_KERNEL_SOURCE)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
