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
 * normalize_batch(srcs, dst, offset, factor, mirror) does the same for a batch in one call (one GIL
 * release): srcs is a sequence of B (H, W, C) uint8 arrays, dst a (B, H, W, C) float32 array (any
 * strides), mirror None or B int32 flags (non-zero: the sample's W axis is written reversed).
 *
 * Where the source pixels are contiguous (the usual HWC image or crop) the rows take loops the compiler
 * vectorises: a mirrored row is normalised forwards into a scratch row, then written reversed. AVX2
 * clones (target_clones) where the loader resolves them (ifunc: x86-64 glibc Linux).
 *
 * Built against the stable ABI (Py_LIMITED_API, Python >= 3.11) by setup.py, which also passes
 * JAXDALI_KERNEL_SOURCE, the SHA-256 of this file, exposed as SOURCE_SHA256 so that a module built from
 * another version of this file is detected at import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_attribute)
#if __has_attribute(target_clones) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef VECTOR_CLONES
#define VECTOR_CLONES
#endif

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

/* Scratch for the fast paths of one frame width: a float row of W * C values, and the coefficients
 * tiled along a row (offset then factor, W * C each). */
typedef struct {
    float *row, *tiled;
    Py_ssize_t w, c;
} Scratch;

static int scratch_fit(Scratch *s, const Job *j)
{
    if (s->row != NULL && s->w == j->w && s->c == j->c) return 0;
    free(s->row);
    s->w = j->w, s->c = j->c;
    const size_t n = (size_t)(j->w * j->c);
    s->row = malloc(3 * n * sizeof(float));
    if (s->row == NULL) return -1;
    s->tiled = s->row + n;
    for (size_t i = 0; i < n; i++) {
        s->tiled[i] = j->offset[i % (size_t)j->c];
        s->tiled[n + i] = j->factor[i % (size_t)j->c];
    }
    return 0;
}

/* planar3 for contiguous source pixels (sx == 3, sc == 1) and contiguous plane rows (dx == 1, or -1:
 * mirrored). */
VECTOR_CLONES
static void planar3_contiguous(const Job *j, float *restrict t)
{
    const float o0 = j->offset[0], o1 = j->offset[1], o2 = j->offset[2];
    const float f0 = j->factor[0], f1 = j->factor[1], f2 = j->factor[2];
    const Py_ssize_t w = j->w;
    float *restrict t0 = t, *restrict t1 = t + w, *restrict t2 = t + 2 * w;
    for (Py_ssize_t y = 0; y < j->h; y++) {
        const uint8_t *restrict s = j->src + y * j->sy;
        float *d0 = j->dst + y * j->dy;
        if (j->dx == 1) {
            float *restrict e0 = d0, *restrict e1 = d0 + j->dc, *restrict e2 = d0 + 2 * j->dc;
            for (Py_ssize_t x = 0; x < w; x++) {
                e0[x] = ((float)s[3 * x] - o0) * f0;
                e1[x] = ((float)s[3 * x + 1] - o1) * f1;
                e2[x] = ((float)s[3 * x + 2] - o2) * f2;
            }
        } else {
            for (Py_ssize_t x = 0; x < w; x++) {
                t0[x] = ((float)s[3 * x] - o0) * f0;
                t1[x] = ((float)s[3 * x + 1] - o1) * f1;
                t2[x] = ((float)s[3 * x + 2] - o2) * f2;
            }
            float *restrict e0 = d0 - (w - 1), *restrict e1 = e0 + j->dc, *restrict e2 = e1 + j->dc;
            for (Py_ssize_t x = 0; x < w; x++) e0[x] = t0[w - 1 - x];
            for (Py_ssize_t x = 0; x < w; x++) e1[x] = t1[w - 1 - x];
            for (Py_ssize_t x = 0; x < w; x++) e2[x] = t2[w - 1 - x];
        }
    }
}

/* interleaved for contiguous source pixels (sx == C, sc == 1) and contiguous destination pixels (dc == 1,
 * dx == C, or -C: mirrored): a row is W * C values against the tiled coefficients. */
VECTOR_CLONES
static void interleaved_contiguous(const Job *j, const Scratch *sc)
{
    const Py_ssize_t c = j->c, n = j->w * c;
    const float *restrict ot = sc->tiled, *restrict ft = sc->tiled + n;
    float *restrict t = sc->row;
    for (Py_ssize_t y = 0; y < j->h; y++) {
        const uint8_t *restrict s = j->src + y * j->sy;
        float *d = j->dst + y * j->dy;
        float *restrict out = j->dx == c ? d : t; /* a mirrored row goes through the scratch row */
        if (c == 3) { /* constant coefficients, the three channels of a pixel side by side */
            const float o0 = j->offset[0], o1 = j->offset[1], o2 = j->offset[2];
            const float f0 = j->factor[0], f1 = j->factor[1], f2 = j->factor[2];
            for (Py_ssize_t x = 0; x < j->w; x++) {
                out[3 * x] = ((float)s[3 * x] - o0) * f0;
                out[3 * x + 1] = ((float)s[3 * x + 1] - o1) * f1;
                out[3 * x + 2] = ((float)s[3 * x + 2] - o2) * f2;
            }
        } else {
            for (Py_ssize_t i = 0; i < n; i++) out[i] = ((float)s[i] - ot[i]) * ft[i];
        }
        if (j->dx != c) {
            float *restrict e = d - (j->w - 1) * c;
            const float *restrict last = t + (j->w - 1) * c;
            if (c == 3) /* a constant pixel size: plain moves instead of a copy call per pixel */
                for (Py_ssize_t x = 0; x < j->w; x++) {
                    e[3 * x] = last[-3 * x], e[3 * x + 1] = last[-3 * x + 1], e[3 * x + 2] = last[-3 * x + 2];
                }
            else
                for (Py_ssize_t x = 0; x < j->w; x++) memcpy(e + x * c, last - x * c, (size_t)c * sizeof(float));
        }
    }
}

/* One frame: a fast path where the source pixels are contiguous, the general walk otherwise. Returns -1
 * when scratch memory could not be had. */
static int run_fast(Job *j, Scratch *scratch)
{
    if (j->sc == 1 && j->sx == j->c) {
        const int planar = j->c == 3 && (j->dx == 1 || j->dx == -1);
        const int pixels = j->dc == 1 && (j->dx == j->c || j->dx == -j->c);
        if (planar || pixels) {
            if (scratch_fit(scratch, j) < 0) return -1;
            if (planar)
                planar3_contiguous(j, scratch->row);
            else
                interleaved_contiguous(j, scratch);
            return 0;
        }
    }
    run(j);
    return 0;
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
            Scratch scratch = {NULL, NULL, 0, 0};
            int failed;
            Py_BEGIN_ALLOW_THREADS
            failed = run_fast(&j, &scratch);
            Py_END_ALLOW_THREADS
            free(scratch.row);
            if (failed) valid = -1;
        }
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&offset);
    PyBuffer_Release(&factor);
    if (valid < 0) return PyErr_NoMemory();
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "normalize: src must be an (H, W, C) uint8 array, dst a float32 array of "
                                          "its shape, offset and factor float32 arrays of C values");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *normalize_batch(PyObject *self, PyObject *args)
{
    PyObject *srcs_obj, *dst_obj, *offset_obj, *factor_obj, *mirror_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO", &srcs_obj, &dst_obj, &offset_obj, &factor_obj, &mirror_obj)) return NULL;
    const Py_ssize_t n = PySequence_Size(srcs_obj);
    if (n < 0) return NULL;
    Py_buffer dst = {0}, offset = {0}, factor = {0}, mirror = {0};
    Py_buffer *views = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Py_buffer));
    Job *jobs = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Job));
    Py_ssize_t acquired = 0;
    PyObject *result = NULL;
    const char *error = "normalize_batch: srcs must hold B (H, W, C) uint8 arrays, dst be a (B, H, W, C) float32 "
                        "array, offset and factor float32 arrays of C values, mirror None or B int32 flags";
    if (views == NULL || jobs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_RECORDS) < 0 ||
        PyObject_GetBuffer(offset_obj, &offset, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0 ||
        PyObject_GetBuffer(factor_obj, &factor, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0 ||
        (mirror_obj != Py_None && PyObject_GetBuffer(mirror_obj, &mirror, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0))
        goto done;
    int valid = dst.ndim == 4 && dst.shape[0] == n && is_format(&dst, 'f') && is_format(&offset, 'f') &&
                is_format(&factor, 'f') && offset.len == 4 * dst.shape[3] && factor.len == 4 * dst.shape[3] &&
                (mirror_obj == Py_None || (is_format(&mirror, 'i') && mirror.len == 4 * n));
    for (int k = 0; valid && k < 4; k++) valid = dst.strides[k] % 4 == 0;
    for (; valid && acquired < n; acquired++) {
        Py_buffer *v = &views[acquired];
        PyObject *item = PySequence_GetItem(srcs_obj, acquired);
        const int got = item != NULL ? PyObject_GetBuffer(item, v, PyBUF_RECORDS_RO) : -1;
        Py_XDECREF(item);
        if (got < 0) goto done;
        valid = v->ndim == 3 && is_format(v, 'B');
        for (int k = 0; valid && k < 3; k++) valid = v->shape[k] == dst.shape[k + 1];
        if (!valid) {
            acquired++;
            break;
        }
        Job *j = &jobs[acquired];
        *j = (Job){(const uint8_t *)v->buf, (float *)((char *)dst.buf + acquired * dst.strides[0]), v->shape[0],
                   v->shape[1], v->shape[2], v->strides[0], v->strides[1], v->strides[2], dst.strides[1] / 4,
                   dst.strides[2] / 4, dst.strides[3] / 4, (const float *)offset.buf, (const float *)factor.buf};
        if (mirror_obj != Py_None && ((const int32_t *)mirror.buf)[acquired]) {
            j->dst += (j->w - 1) * j->dx;
            j->dx = -j->dx;
        }
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, error);
        goto done;
    }
    int failed = 0;
    if (dst.shape[1] > 0 && dst.shape[2] > 0 && dst.shape[3] > 0) {
        Scratch scratch = {NULL, NULL, 0, 0};
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t b = 0; b < n && !failed; b++) failed = run_fast(&jobs[b], &scratch);
        Py_END_ALLOW_THREADS
        free(scratch.row);
    }
    result = failed ? PyErr_NoMemory() : Py_NewRef(Py_None);
done:
    for (Py_ssize_t b = 0; b < acquired; b++)
        if (views[b].obj != NULL) PyBuffer_Release(&views[b]);
    if (dst.obj) PyBuffer_Release(&dst);
    if (offset.obj) PyBuffer_Release(&offset);
    if (factor.obj) PyBuffer_Release(&factor);
    if (mirror.obj) PyBuffer_Release(&mirror);
    PyMem_Free(views);
    PyMem_Free(jobs);
    return result;
}

static PyMethodDef methods[] = {
    {"normalize", normalize, METH_VARARGS,
     "normalize(src, dst, offset, factor): dst[y, x, c] = (src[y, x, c] - offset[c]) * factor[c] in float32"},
    {"normalize_batch", normalize_batch, METH_VARARGS,
     "normalize_batch(srcs, dst, offset, factor, mirror): normalize(srcs[b], dst[b] (W reversed where mirror[b]), "
     "offset, factor) for every sample b, in one call"},
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
