/* The Rice decoder of tile-compressed FITS images (RICE_1), without the GIL (jaxdali.ops.readers.fits_tiles).
 *
 * decode_tiles(data, begins, lengths, counts, out, bytepix, blocksize) decodes the tiles of one buffer (tile
 * k: `lengths[k]` bytes from `begins[k]`, `counts[k]` pixels; int64 arrays, checked by the caller) one after
 * the other into `out`, in one call without the GIL. A tile is: the first pixel as a big-endian bytepix-byte
 * number, then blocks of `blocksize` pixels, each an option code of 3/4/5 bits (bytepix 1/2/4): 0 means
 * every difference of the block is zero, the largest value means the differences follow as raw
 * 8/16/32-bit numbers, any other value fs + 1 means each difference is a unary count of zeros closed
 * by a one bit, then fs low bits. Differences are zig-zag mapped (even: d / 2, odd: ~(d / 2)) and added
 * to the previous pixel, wrapping around at the pixel width. `out` (a writable buffer of native
 * unsigned bytepix-byte integers) receives the pixels. Returns -1, or the index of the first tile whose
 * data ran out. fits_tiles' NumPy decoder is the reference and the fallback
 * where this module is not built; the two give the same pixels.
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

typedef struct {
    const uint8_t *buf;
    int64_t size, pos;  /* bytes, and the next byte to load */
    uint64_t bits;      /* the loaded bits not read yet: the low `count` bits */
    int count;
} BitReader;

/* Loads bytes until at least n (<= 32) bits are loaded; 0 if the data ends first. */
static int fill(BitReader *r, int n)
{
    while (r->count < n) {
        if (r->pos >= r->size) return 0;
        r->bits = (r->bits << 8) | r->buf[r->pos++];
        r->count += 8;
    }
    return 1;
}

/* The next n (<= 32) bits as a number; 0 in *ok if the data ends first. */
static uint64_t take(BitReader *r, int n, int *ok)
{
    if (!fill(r, n)) {
        *ok = 0;
        return 0;
    }
    r->count -= n;
    uint64_t v = (r->bits >> r->count) & ((((uint64_t)1) << n) - 1);
    r->bits &= (((uint64_t)1) << r->count) - 1;
    return v;
}

/* The number of zero bits before the next one bit, which is consumed too; -1 if the data ends first. */
static int64_t zeros(BitReader *r)
{
    int64_t n = 0;
    for (;;) {
        if (r->count == 0 && !fill(r, 1)) return -1;
        r->count--;
        if ((r->bits >> r->count) & 1) {
            r->bits &= (((uint64_t)1) << r->count) - 1;
            return n;
        }
        n++;
    }
}

static int64_t decode_tile(const uint8_t *buf, int64_t size, int bytepix, int64_t blocksize, uint8_t *out,
                           int64_t count)
{
    int fsbits = bytepix == 1 ? 3 : bytepix == 2 ? 4 : 5;
    int fsmax = bytepix == 1 ? 6 : bytepix == 2 ? 14 : 25;
    int bbits = 8 * bytepix;
    uint64_t mask = bytepix == 4 ? 0xFFFFFFFFu : ((((uint64_t)1) << bbits) - 1);
    if (size < bytepix) return 0;
    uint64_t last = 0;
    for (int k = 0; k < bytepix; k++) last = (last << 8) | buf[k];
    BitReader r = {buf, size, bytepix, 0, 0};
    int ok = 1;
    for (int64_t i = 0; i < count;) {
        int64_t stop = i + blocksize < count ? i + blocksize : count;
        int64_t fs = (int64_t)take(&r, fsbits, &ok) - 1;
        if (!ok) return i;
        for (; i < stop; i++) {
            uint64_t d = 0;
            if (fs == fsmax) {
                d = take(&r, bbits, &ok);
                if (!ok) return i;
            } else if (fs >= 0) {
                int64_t z = zeros(&r);
                uint64_t low = take(&r, (int)fs, &ok);
                if (z < 0 || !ok) return i;
                d = ((uint64_t)z << fs) | low;
            }
            uint64_t diff = (d & 1) ? ~(d >> 1) : (d >> 1);
            last = (last + diff) & mask;
            if (bytepix == 1) out[i] = (uint8_t)last;
            else if (bytepix == 2) ((uint16_t *)out)[i] = (uint16_t)last;
            else ((uint32_t *)out)[i] = (uint32_t)last;
        }
    }
    return -1;
}

static PyObject *decode_tiles(PyObject *self, PyObject *args)
{
    Py_buffer data, begins, lengths, counts, out;
    int bytepix;
    Py_ssize_t blocksize;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*in", &data, &begins, &lengths, &counts, &out, &bytepix, &blocksize))
        return NULL;
    int64_t n = counts.len / (Py_ssize_t)sizeof(int64_t), total = 0, failed = -1;
    const int64_t *b = (const int64_t *)begins.buf, *l = (const int64_t *)lengths.buf, *c = (const int64_t *)counts.buf;
    for (int64_t k = 0; k < n; k++) total += c[k];
    int valid = (bytepix == 1 || bytepix == 2 || bytepix == 4) && blocksize >= 1 &&
                begins.len == counts.len && lengths.len == counts.len && total * bytepix == out.len;
    if (valid) {
        Py_BEGIN_ALLOW_THREADS
        uint8_t *dst = (uint8_t *)out.buf;
        for (int64_t k = 0; k < n && failed < 0; k++) {
            if (decode_tile((const uint8_t *)data.buf + b[k], l[k], bytepix, blocksize, dst, c[k]) >= 0) failed = k;
            dst += c[k] * bytepix;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&begins);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&out);
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "decode_tiles: bytepix must be 1, 2 or 4, blocksize >= 1, the index "
                                          "arrays of one length and out the size of all the tiles' pixels");
        return NULL;
    }
    return PyLong_FromLongLong(failed);
}

static PyMethodDef methods[] = {
    {"decode_tiles", decode_tiles, METH_VARARGS,
     "decode_tiles(data, begins, lengths, counts, out, bytepix, blocksize) -> -1, or the first tile that ran out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rice_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__rice_kernel(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "SOURCE_SHA256", STRINGIZE(JAXDALI_KERNEL_SOURCE)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
