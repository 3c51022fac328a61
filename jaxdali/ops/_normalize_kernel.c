/* The normalisation of crop_mirror_normalize and normalize on the host, without the GIL
 * (jaxdali.ops.image_kernels.normalize_into).
 *
 * normalize(src, dst, offset, factor) writes dst[y, x, c] = ((float)src[y, x, c] - offset[c]) * factor[c]
 * for an (H, W, C) uint8 `src` and a float32 `dst` of the same shape, each with any strides (dst is
 * typically a transposed view of a CHW output, its W axis reversed for a mirrored sample). The two
 * float32 operations are NumPy's and XLA's, in the same order (built with -ffp-contract=off: never fused
 * into one multiply-add), so the results are the same bits as jaxdali's NumPy and device paths.
 * `offset` and `factor` are C-contiguous float32 arrays of C values.
 *
 * Built against the stable ABI (Py_LIMITED_API, Python >= 3.11) by setup.py, which also passes
 * JAXDALI_KERNEL_SOURCE, the SHA-256 of this file, exposed as SOURCE_SHA256 so that a module built from
 * another version of this file is detected at import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#ifndef JAXDALI_KERNEL_SOURCE
#define JAXDALI_KERNEL_SOURCE unknown
#endif
#define STRINGIZE_(x) #x
#define STRINGIZE(x) STRINGIZE_(x)

typedef struct {
    const uint8_t *src;
    float *dst;
    Py_ssize_t h, w, c;
    Py_ssize_t sy, sx, sc; /* src strides, bytes */
    Py_ssize_t dy, dx, dc; /* dst strides, float32 elements */
    const float *offset, *factor;
} Job;

/* Three channels written to three planes (a CHW output seen in HWC order): each plane's row is
 * written forwards, while the source pixels are read at a stride of sx (negative for a mirrored row). */
static void planar3(const Job *j)
{
    const float o0 = j->offset[0], o1 = j->offset[1], o2 = j->offset[2];
    const float f0 = j->factor[0], f1 = j->factor[1], f2 = j->factor[2];
    for (Py_ssize_t y = 0; y < j->h; y++) {
        const uint8_t *s = j->src + y * j->sy;
        float *d0 = j->dst + y * j->dy, *d1 = d0 + j->dc, *d2 = d1 + j->dc;
        const Py_ssize_t sx = j->sx, sc = j->sc;
        for (Py_ssize_t x = 0; x < j->w; x++) {
            const uint8_t *p = s + x * sx;
            d0[x] = ((float)p[0] - o0) * f0;
            d1[x] = ((float)p[sc] - o1) * f1;
            d2[x] = ((float)p[2 * sc] - o2) * f2;
        }
    }
}

/* Interleaved pixels on both sides (an HWC output): a row is W * C values written forwards. */
static void interleaved(const Job *j)
{
    const Py_ssize_t c = j->c;
    for (Py_ssize_t y = 0; y < j->h; y++) {
        const uint8_t *s = j->src + y * j->sy;
        float *d = j->dst + y * j->dy;
        for (Py_ssize_t x = 0; x < j->w; x++) {
            const uint8_t *p = s + x * j->sx;
            for (Py_ssize_t ch = 0; ch < c; ch++) d[x * c + ch] = ((float)p[ch] - j->offset[ch]) * j->factor[ch];
        }
    }
}

static void any_strides(const Job *j)
{
    for (Py_ssize_t y = 0; y < j->h; y++)
        for (Py_ssize_t x = 0; x < j->w; x++)
            for (Py_ssize_t ch = 0; ch < j->c; ch++)
                j->dst[y * j->dy + x * j->dx + ch * j->dc] =
                    ((float)j->src[y * j->sy + x * j->sx + ch * j->sc] - j->offset[ch]) * j->factor[ch];
}

static void run(Job *j)
{
    if (j->dx < 0) { /* a mirrored destination: walk it forwards, and the source backwards */
        j->dst += (j->w - 1) * j->dx;
        j->dx = -j->dx;
        j->src += (j->w - 1) * j->sx;
        j->sx = -j->sx;
    }
    if (j->c == 3 && j->dx == 1)
        planar3(j);
    else if (j->dc == 1 && j->dx == j->c && j->sc == 1)
        interleaved(j);
    else
        any_strides(j);
}

static int is_format(const Py_buffer *view, char code)
{
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    return f[0] == code && f[1] == '\0';
}

static PyObject *normalize(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *dst_obj, *offset_obj, *factor_obj;
    Py_buffer src, dst, offset, factor;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &src_obj, &dst_obj, &offset_obj, &factor_obj)) return NULL;
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_RECORDS_RO) < 0) return NULL;
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_RECORDS) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    if (PyObject_GetBuffer(offset_obj, &offset, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        return NULL;
    }
    if (PyObject_GetBuffer(factor_obj, &factor, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        PyBuffer_Release(&offset);
        return NULL;
    }
    int valid = src.ndim == 3 && dst.ndim == 3 && is_format(&src, 'B') && is_format(&dst, 'f') &&
                is_format(&offset, 'f') && is_format(&factor, 'f');
    for (int k = 0; valid && k < 3; k++) valid = src.shape[k] == dst.shape[k] && dst.strides[k] % 4 == 0;
    valid = valid && offset.len == 4 * src.shape[2] && factor.len == 4 * src.shape[2];
    if (valid) {
        Job j = {(const uint8_t *)src.buf, (float *)dst.buf, src.shape[0], src.shape[1], src.shape[2],
                 src.strides[0], src.strides[1], src.strides[2],
                 dst.strides[0] / 4, dst.strides[1] / 4, dst.strides[2] / 4,
                 (const float *)offset.buf, (const float *)factor.buf};
        if (j.h > 0 && j.w > 0 && j.c > 0) {
            Py_BEGIN_ALLOW_THREADS
            run(&j);
            Py_END_ALLOW_THREADS
        }
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&offset);
    PyBuffer_Release(&factor);
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "normalize: src must be an (H, W, C) uint8 array, dst a float32 array of "
                                          "its shape, offset and factor float32 arrays of C values");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"normalize", normalize, METH_VARARGS,
     "normalize(src, dst, offset, factor): dst[y, x, c] = (src[y, x, c] - offset[c]) * factor[c] in float32"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_normalize_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__normalize_kernel(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "SOURCE_SHA256", STRINGIZE(JAXDALI_KERNEL_SOURCE)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
