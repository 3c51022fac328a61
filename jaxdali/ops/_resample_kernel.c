/* Separable resampling of one (H, W, C) frame with precomputed taps, without the GIL.
 *
 * jaxdali.ops.resample plans the taps (for every output row and column: K input indices and K float32
 * weights); this module only applies them. Every output value is computed in float32 exactly as
 * written: for each pass, acc = 0 + w[0] * x[0] + w[1] * x[1] + ..., in tap order, with no fused
 * multiply-add (built with -ffp-contract=off), then rounded half to even and saturated into the output
 * type. A value therefore depends only on its own taps and the pass order, never on which window of
 * the output is computed, and equals the NumPy/SciPy formulation of the same passes bit for bit.
 *
 * jaxdali.ops._resample_numpy computes the same values in NumPy when this module is not built.
 *
 * Portable C99 for GCC, Clang and MSVC: SSE2 or NEON intrinsics where the target has them, plain loops
 * elsewhere; AVX2 clones (target_clones) only where the loader resolves them (ifunc: x86-64 glibc Linux).
 * Built against the stable ABI (Py_LIMITED_API, Python >= 3.11) by setup.py, which also passes
 * JAXDALI_KERNEL_SOURCE, the SHA-256 of this file: the module exposes it as SOURCE_SHA256 so that a
 * kernel built from another version of this file is detected at import.
 *
 * Pass orders (the caller picks the cheaper one; the values differ in the last float32 bit):
 *   rows first: each output row combines input rows (vertical, contiguous, vectorised), then its
 *               columns are resampled from that one row; nothing larger than a row is kept.
 *   cols first: every input row that some output row reads is resampled along W into a float32 block,
 *               then each output row combines rows of that block.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__) || defined(_M_X64) || defined(_M_AMD64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#define HAVE_SSE2 1
#include <emmintrin.h>
#elif defined(__ARM_NEON) || defined(_M_ARM64)
#define HAVE_NEON 1
#include <arm_neon.h>
#endif

#if defined(_MSC_VER) && !defined(__clang__)
#define restrict __restrict
#endif

#ifndef JAXDALI_KERNEL_SOURCE
#define JAXDALI_KERNEL_SOURCE unknown
#endif
#define STRINGIZE_(x) #x
#define STRINGIZE(x) STRINGIZE_(x)

enum { T_U8, T_U16, T_I16, T_F32 };

static const Py_ssize_t ITEMSIZE[] = {1, 2, 2, 4};

#if defined(__has_attribute)
#if __has_attribute(target_clones) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef VECTOR_CLONES
#define VECTOR_CLONES
#endif

typedef struct {
    const int32_t *index;
    const float *weights;
    Py_ssize_t m;      /* output extent */
    Py_ssize_t k;      /* taps per output */
    Py_ssize_t lo, hi; /* the smallest and largest index: the input range these taps read */
} Taps;

/* acc[i] = (first ? 0 : acc[i]) + w[0] * x_0[i] + ... + w[K-1] * x_{K-1}[i] for n elements of the rows
 * p[0..K-1] of type CTYPE, added in tap order: each element of acc is loaded and stored once per K taps
 * (up to 4), where one pass per tap would load and store it K times. */
#define VERTICAL_K(CTYPE, K)                                                                  \
    do {                                                                                      \
        const CTYPE *x0 = (const CTYPE *)p[0];                                                \
        const CTYPE *x1 = (const CTYPE *)p[(K) > 1 ? 1 : 0];                                  \
        const CTYPE *x2 = (const CTYPE *)p[(K) > 2 ? 2 : 0];                                  \
        const CTYPE *x3 = (const CTYPE *)p[(K) > 3 ? 3 : 0];                                  \
        const float w0 = w[0], w1 = w[(K) > 1 ? 1 : 0], w2 = w[(K) > 2 ? 2 : 0], w3 = w[(K) > 3 ? 3 : 0]; \
        for (Py_ssize_t i = 0; i < n; i++) {                                                  \
            float a = (first ? 0.0f : acc[i]) + w0 * (float)x0[i];                            \
            if ((K) > 1) a = a + w1 * (float)x1[i];                                           \
            if ((K) > 2) a = a + w2 * (float)x2[i];                                           \
            if ((K) > 3) a = a + w3 * (float)x3[i];                                           \
            acc[i] = a;                                                                       \
        }                                                                                     \
    } while (0)

#define VERTICAL_BY_K(CTYPE)                                                                  \
    switch (k) {                                                                              \
    case 1: VERTICAL_K(CTYPE, 1); break;                                                      \
    case 2: VERTICAL_K(CTYPE, 2); break;                                                      \
    case 3: VERTICAL_K(CTYPE, 3); break;                                                      \
    default: VERTICAL_K(CTYPE, 4); break;                                                     \
    }

/* The same loops twice, so that in each copy `first` is a constant the compiler folds. */
#define VERTICAL(CTYPE)                                                                       \
    do {                                                                                      \
        if (first) {                                                                          \
            VERTICAL_BY_K(CTYPE)                                                              \
        } else {                                                                              \
            VERTICAL_BY_K(CTYPE)                                                              \
        }                                                                                     \
    } while (0)

/* The step of a vertical pass for k (1 to 4) taps: see VERTICAL_K. */
VECTOR_CLONES
static void vertical_step(float *restrict acc, const float *w, const void *const *p, int type, Py_ssize_t n,
                          int k, const int first)
{
    switch (type) {
    case T_U8: VERTICAL(uint8_t); break;
    case T_U16: VERTICAL(uint16_t); break;
    case T_I16: VERTICAL(int16_t); break;
    default: VERTICAL(float); break;
    }
}

/* acc = the k taps (weights `w`, rows `index`: row r at base + (r - first_row) * stride + offset bytes)
 * combined over n elements, 4 taps per step. */
static void vertical(float *restrict acc, const int32_t *index, const float *w, Py_ssize_t k, const char *base,
                     Py_ssize_t first_row, Py_ssize_t stride, Py_ssize_t offset, int type, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < k; j += 4) {
        const int step = k - j < 4 ? (int)(k - j) : 4;
        const void *p[4];
        for (int t = 0; t < step; t++) p[t] = base + ((Py_ssize_t)index[j + t] - first_row) * stride + offset;
        vertical_step(acc, w + j, p, type, n, step, j == 0);
    }
}

VECTOR_CLONES
static void to_float(float *restrict dst, const void *restrict src, int type, Py_ssize_t n)
{
    switch (type) {
    case T_U8: for (Py_ssize_t i = 0; i < n; i++) dst[i] = (float)((const uint8_t *)src)[i]; break;
    case T_U16: for (Py_ssize_t i = 0; i < n; i++) dst[i] = (float)((const uint16_t *)src)[i]; break;
    case T_I16: for (Py_ssize_t i = 0; i < n; i++) dst[i] = (float)((const int16_t *)src)[i]; break;
    default: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    }
}

/* Rounds half to even (the default rounding mode) with saturation to [LO, HI]; NaN gives 0. The bounds
 * are integers, so saturating before rounding equals rounding before saturating. */
#define STORE_LOOP(CTYPE, LO, HI)                                                     \
    do {                                                                              \
        CTYPE *y = (CTYPE *)dst;                                                      \
        for (Py_ssize_t i = 0; i < n; i++) {                                          \
            float v = src[i];                                                         \
            v = v > (float)(LO) ? v : (float)(LO); /* the max/min instructions' NaN rule */ \
            v = v < (float)(HI) ? v : (float)(HI);                                    \
            v = (v + 12582912.0f) - 12582912.0f; /* 1.5 * 2^23: rounds to integer */  \
            y[i] = (CTYPE)(int32_t)v;                                                 \
        }                                                                             \
    } while (0)

#if HAVE_SSE2
/* The uint8 case of store, 16 values at a time: max before min, so NaN gives 0 (the scalar rule);
 * the conversion rounds half to even (the default rounding mode). */
static inline Py_ssize_t store_u8_sse2(uint8_t *restrict y, const float *restrict src, Py_ssize_t n)
{
    const __m128 lo = _mm_set1_ps(0.0f), hi = _mm_set1_ps(255.0f);
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(_mm_loadu_ps(src + i), lo), hi));
        __m128i b = _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(_mm_loadu_ps(src + i + 4), lo), hi));
        __m128i c = _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(_mm_loadu_ps(src + i + 8), lo), hi));
        __m128i d = _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(_mm_loadu_ps(src + i + 12), lo), hi));
        _mm_storeu_si128((__m128i *)(y + i), _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d)));
    }
    return i;
}
#endif

VECTOR_CLONES
static void store(void *restrict dst, int type, const float *restrict src, Py_ssize_t n)
{
    switch (type) {
    case T_U8: {
        Py_ssize_t done = 0;
#if HAVE_SSE2
        done = store_u8_sse2((uint8_t *)dst, src, n);
#endif
        dst = (uint8_t *)dst + done, src += done, n -= done;
        STORE_LOOP(uint8_t, 0, 255);
        break;
    }
    case T_U16: STORE_LOOP(uint16_t, 0, 65535); break;
    case T_I16: STORE_LOOP(int16_t, -32768, 32767); break;
    default: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    }
}

/* dst (t->m, C) = the taps applied along the rows of row (n, C). Tap by tap over the whole output row,
 * so consecutive outputs are independent sums (a tap-inner loop would wait on each add). */
static inline void horizontal_c(float *restrict dst, const float *restrict row, const Taps *t, const int c)
{
    const Py_ssize_t k = t->k, m = t->m;
    const int32_t *idx = t->index;
    const float *w = t->weights;
    for (Py_ssize_t x = 0; x < m; x++) {
        const float *p = row + (Py_ssize_t)idx[x * k] * c;
        for (int ch = 0; ch < c; ch++) dst[x * c + ch] = 0.0f + w[x * k] * p[ch];
    }
    for (Py_ssize_t j = 1; j < k; j++) {
        for (Py_ssize_t x = 0; x < m; x++) {
            const float *p = row + (Py_ssize_t)idx[x * k + j] * c;
            const float wj = w[x * k + j];
            for (int ch = 0; ch < c; ch++) dst[x * c + ch] = dst[x * c + ch] + wj * p[ch];
        }
    }
}

/* horizontal_c for 3 or 4 channels: one 4-lane vector holds a pixel's channels, so a tap costs one
 * multiply and one add for all channels. Two output pixels at a time, so that two independent chains
 * of adds are in flight; a tap count the compiler knows (K) unrolls the tap loop. For 3 channels each
 * load reads one float past the pixel and each store writes one float past it (overwritten by the next
 * pixel): row and dst have one float of room. Without SSE2 or NEON, four scalar lanes that the compiler
 * may vectorise. */
#if HAVE_SSE2
typedef __m128 pixel4;
#define PIXEL4_ZERO() _mm_setzero_ps()
#define PIXEL4_MULADD(acc, w, p) _mm_add_ps((acc), _mm_mul_ps(_mm_set1_ps(w), _mm_loadu_ps(p)))
#define PIXEL4_STORE(dst, v) _mm_storeu_ps((dst), (v))
#elif HAVE_NEON
typedef float32x4_t pixel4;
#define PIXEL4_ZERO() vdupq_n_f32(0.0f)
#define PIXEL4_MULADD(acc, w, p) vaddq_f32((acc), vmulq_n_f32(vld1q_f32(p), (w)))
#define PIXEL4_STORE(dst, v) vst1q_f32((dst), (v))
#else
typedef struct { float v[4]; } pixel4;
static inline pixel4 pixel4_muladd(pixel4 acc, float w, const float *p)
{
    for (int ch = 0; ch < 4; ch++) acc.v[ch] = acc.v[ch] + w * p[ch];
    return acc;
}
#define PIXEL4_ZERO() ((pixel4){{0.0f, 0.0f, 0.0f, 0.0f}})
#define PIXEL4_MULADD(acc, w, p) pixel4_muladd((acc), (w), (p))
#define PIXEL4_STORE(dst, value) memcpy((dst), (value).v, sizeof((value).v))
#endif

#define HORIZONTAL_V4(K)                                                                   \
    do {                                                                                   \
        Py_ssize_t x = 0;                                                                  \
        for (; x + 4 <= m; x += 4) {                                                       \
            const int32_t *ia = t->index + x * (K), *ib = ia + (K), *ic = ib + (K), *id = ic + (K); \
            const float *wa = t->weights + x * (K), *wb = wa + (K), *wc = wb + (K), *wd = wc + (K); \
            pixel4 a = PIXEL4_ZERO(), b = PIXEL4_ZERO(), cc = PIXEL4_ZERO(), d = PIXEL4_ZERO(); \
            for (Py_ssize_t j = 0; j < (K); j++) {                                         \
                a = PIXEL4_MULADD(a, wa[j], row + (Py_ssize_t)ia[j] * c);                  \
                b = PIXEL4_MULADD(b, wb[j], row + (Py_ssize_t)ib[j] * c);                  \
                cc = PIXEL4_MULADD(cc, wc[j], row + (Py_ssize_t)ic[j] * c);                \
                d = PIXEL4_MULADD(d, wd[j], row + (Py_ssize_t)id[j] * c);                  \
            }                                                                              \
            PIXEL4_STORE(dst + x * c, a);                                                  \
            PIXEL4_STORE(dst + (x + 1) * c, b);                                            \
            PIXEL4_STORE(dst + (x + 2) * c, cc);                                           \
            PIXEL4_STORE(dst + (x + 3) * c, d);                                            \
        }                                                                                  \
        for (; x < m; x++) {                                                                       \
            const int32_t *ia = t->index + x * (K);                                        \
            const float *wa = t->weights + x * (K);                                        \
            pixel4 a = PIXEL4_ZERO();                                                      \
            for (Py_ssize_t j = 0; j < (K); j++) a = PIXEL4_MULADD(a, wa[j], row + (Py_ssize_t)ia[j] * c); \
            PIXEL4_STORE(dst + x * c, a);                                                  \
        }                                                                                  \
    } while (0)

static inline void horizontal_v4(float *restrict dst, const float *restrict row, const Taps *t, const int c)
{
    const Py_ssize_t k = t->k, m = t->m;
    switch (k) {
    case 2: HORIZONTAL_V4(2); break;
    case 3: HORIZONTAL_V4(3); break;
    case 4: HORIZONTAL_V4(4); break;
    case 5: HORIZONTAL_V4(5); break;
    default: HORIZONTAL_V4(k); break;
    }
}

VECTOR_CLONES
static void horizontal(float *restrict dst, const float *restrict row, const Taps *t, int c)
{
    switch (c) { /* constant channel counts let the compiler unroll the channel loop */
    case 1: horizontal_c(dst, row, t, 1); break;
    case 3: horizontal_v4(dst, row, t, 3); break;
    case 4: horizontal_v4(dst, row, t, 4); break;
    default: horizontal_c(dst, row, t, c); break;
    }
}

typedef struct {
    const char *src;
    int src_type;
    Py_ssize_t h, w, c, src_stride; /* stride of a row in bytes */
    char *out;
    int out_type;
    Py_ssize_t oh, ow, out_stride;
    Taps th, tw; /* m == 0: the axis keeps its extent */
} Frame;

/* Rows first: each output row combines its input rows over the columns the W taps read, then
 * resamples that row along W. */
static void rows_first(const Frame *f, float *buf)
{
    const Py_ssize_t wc = f->w * f->c, owc = f->ow * f->c, item = ITEMSIZE[f->src_type];
    const Py_ssize_t c0 = f->tw.m ? f->tw.lo * f->c : 0, n = f->tw.m ? (f->tw.hi + 1) * f->c - c0 : wc;
    float *vrow = buf, *hrow = buf + wc + 1;
    for (Py_ssize_t y = 0; y < f->oh; y++) {
        if (f->th.m) {
            vertical(vrow + c0, f->th.index + y * f->th.k, f->th.weights + y * f->th.k, f->th.k, f->src, 0,
                     f->src_stride, c0 * item, f->src_type, n);
        } else {
            to_float(vrow + c0, f->src + y * f->src_stride + c0 * item, f->src_type, n);
        }
        if (f->tw.m) {
            horizontal(hrow, vrow, &f->tw, (int)f->c);
            store(f->out + y * f->out_stride, f->out_type, hrow, owc);
        } else {
            store(f->out + y * f->out_stride, f->out_type, vrow, wc);
        }
    }
}

/* Columns first: the input rows the H taps read, each resampled along W (from the columns its taps
 * read) into a block, then each output row combines rows of the block. */
static void cols_first(const Frame *f, float *buf)
{
    const Py_ssize_t wc = f->w * f->c, owc = f->ow * f->c, item = ITEMSIZE[f->src_type];
    const Py_ssize_t c0 = f->tw.lo * f->c, n = (f->tw.hi + 1) * f->c - c0;
    const Py_ssize_t lo = f->th.m ? f->th.lo : 0, rows = f->th.m ? f->th.hi - f->th.lo + 1 : f->h;
    float *in_row = buf, *acc = buf + wc + 1, *block = buf + wc + 1 + owc;
    for (Py_ssize_t r = 0; r < rows; r++) {
        to_float(in_row + c0, f->src + (lo + r) * f->src_stride + c0 * item, f->src_type, n);
        horizontal(block + r * owc, in_row, &f->tw, (int)f->c);
    }
    for (Py_ssize_t y = 0; y < f->oh; y++) {
        if (f->th.m) {
            vertical(acc, f->th.index + y * f->th.k, f->th.weights + y * f->th.k, f->th.k,
                     (const char *)block, lo, owc * (Py_ssize_t)sizeof(float), 0, T_F32, owc);
            store(f->out + y * f->out_stride, f->out_type, acc, owc);
        } else {
            store(f->out + y * f->out_stride, f->out_type, block + y * owc, owc);
        }
    }
}

/* -- argument handling --------------------------------------------------------------------------- */

/* A buffer format without its native or little-endian byte-order prefix (this module's targets are
 * little-endian). */
static const char *without_byte_order(const char *format)
{
    return (*format == '@' || *format == '=' || *format == '<') ? format + 1 : format;
}

static int type_of(const char *format)
{
    if (format == NULL) return T_U8;
    format = without_byte_order(format);
    if (format[0] != '\0' && format[1] != '\0') return -1;
    switch (format[0]) {
    case 'B': return T_U8;
    case 'H': return T_U16;
    case 'h': return T_I16;
    case 'f': return T_F32;
    default: return -1;
    }
}

/* An (a, b, c) buffer of a supported type whose last two axes are contiguous (rows may be strided). */
static int frame_buffer(PyObject *obj, Py_buffer *view, int writable, const char *name, int *type)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    *type = type_of(view->format);
    /* The stride of an axis of length 1 is never used (and NumPy does not normalise it). */
    if (view->ndim != 3 || *type < 0 || view->itemsize != ITEMSIZE[*type] ||
        (view->shape[2] > 1 && view->strides[2] != view->itemsize) ||
        (view->shape[1] > 1 && view->strides[1] != view->itemsize * view->shape[2]) || view->strides[0] < 0) {
        PyErr_Format(PyExc_ValueError,
                     "resample: %s must be an (H, W, C) uint8, uint16, int16 or float32 array with contiguous "
                     "rows (got %d dimensions, format '%s')", name, view->ndim, view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Taps from an (index, weights) pair or None; checks every index against the input extent. */
static int taps_buffers(PyObject *pair, Py_buffer *index, Py_buffer *weights, Taps *t, Py_ssize_t in_len,
                        Py_ssize_t out_len, const char *axis)
{
    memset(t, 0, sizeof(*t));
    if (pair == Py_None) return 0;
    PyObject *idx_obj, *w_obj;
    if (!PyArg_ParseTuple(pair, "OO", &idx_obj, &w_obj)) return -1;
    if (PyObject_GetBuffer(idx_obj, index, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (PyObject_GetBuffer(w_obj, weights, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(index);
        return -1;
    }
    const char *fi = without_byte_order(index->format), *fw = without_byte_order(weights->format);
    if (index->ndim != 2 || weights->ndim != 2 || strcmp(fi, "i") != 0 || index->itemsize != 4 ||
        strcmp(fw, "f") != 0 || index->shape[0] != weights->shape[0] || index->shape[1] != weights->shape[1] ||
        index->shape[0] != out_len || index->shape[1] < 1) {
        PyErr_Format(PyExc_ValueError,
                     "resample: the %s taps must be int32 and float32 arrays of shape (%zd, K >= 1)", axis, out_len);
        goto fail;
    }
    t->index = (const int32_t *)index->buf;
    t->weights = (const float *)weights->buf;
    t->m = index->shape[0];
    t->k = index->shape[1];
    t->lo = in_len;
    t->hi = -1;
    for (Py_ssize_t i = 0; i < t->m * t->k; i++) {
        const Py_ssize_t v = t->index[i];
        if (v < 0 || v >= in_len) {
            PyErr_Format(PyExc_ValueError, "resample: %s tap index %zd is outside the input's %zd", axis, v,
                         in_len);
            goto fail;
        }
        t->lo = v < t->lo ? v : t->lo;
        t->hi = v > t->hi ? v : t->hi;
    }
    return 0;
fail:
    PyBuffer_Release(index);
    PyBuffer_Release(weights);
    return -1;
}

PyDoc_STRVAR(resample_doc,
"resample(src, taps_h, taps_w, out, rows_first)\n--\n\n"
"Resizes the (H, W, C) frame src into out (H', W', C) with separable taps, without the GIL.\n\n"
"taps_h, taps_w: (index, weights) pairs, int32 and float32 arrays of shape (H', K) and (W', K), or\n"
"None for an axis that keeps its extent. rows_first: apply taps_h first (True) or taps_w first.\n"
"src and out are uint8, uint16, int16 or float32 with contiguous rows; integers are rounded half to\n"
"even and saturated.");

static PyObject *resample(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *src_obj, *th_obj, *tw_obj, *out_obj;
    int order;
    if (!PyArg_ParseTuple(args, "OOOOp", &src_obj, &th_obj, &tw_obj, &out_obj, &order)) return NULL;

    Py_buffer src, out, ih = {0}, wh = {0}, iw = {0}, ww = {0};
    Frame f;
    PyObject *result = NULL;
    if (frame_buffer(src_obj, &src, 0, "src", &f.src_type) < 0) return NULL;
    if (frame_buffer(out_obj, &out, 1, "out", &f.out_type) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    f.src = src.buf;
    f.h = src.shape[0], f.w = src.shape[1], f.c = src.shape[2], f.src_stride = src.strides[0];
    f.out = out.buf;
    f.oh = out.shape[0], f.ow = out.shape[1], f.out_stride = out.strides[0];
    if (out.shape[2] != f.c) {
        PyErr_Format(PyExc_ValueError, "resample: out has %zd channels, src %zd", out.shape[2], f.c);
        goto done;
    }
    if (taps_buffers(th_obj, &ih, &wh, &f.th, f.h, f.oh, "H") < 0) goto done;
    if (taps_buffers(tw_obj, &iw, &ww, &f.tw, f.w, f.ow, "W") < 0) goto done;
    if ((!f.th.m && f.oh != f.h) || (!f.tw.m && f.ow != f.w)) {
        PyErr_SetString(PyExc_ValueError, "resample: an axis without taps must keep its extent");
        goto done;
    }
    if (f.oh == 0 || f.ow == 0 || f.c == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int cols = !order && f.tw.m; /* without W taps both orders are the same computation */
    /* Row buffers have one float of room for horizontal_v4 (zeroed: its fourth lane reads it); columns
     * first adds the block of W-resampled rows, every float of which is written before it is read. The
     * buffer is allocated without the GIL: a large block costs page faults. */
    Py_ssize_t rows = f.th.m ? f.th.hi - f.th.lo + 1 : f.h;
    size_t row_floats = (size_t)((f.w + f.ow) * f.c + 2);
    size_t floats = row_floats + (size_t)(cols ? rows * f.ow * f.c : 0);
    float *buf;
    Py_BEGIN_ALLOW_THREADS
    buf = malloc(floats * sizeof(float));
    if (buf != NULL) {
        memset(buf, 0, row_floats * sizeof(float));
        if (cols)
            cols_first(&f, buf);
        else
            rows_first(&f, buf);
        free(buf);
    }
    Py_END_ALLOW_THREADS
    if (buf == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    if (ih.obj) PyBuffer_Release(&ih);
    if (wh.obj) PyBuffer_Release(&wh);
    if (iw.obj) PyBuffer_Release(&iw);
    if (ww.obj) PyBuffer_Release(&ww);
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"resample", resample, METH_VARARGS, resample_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_resample_kernel",
    .m_doc = "The compiled separable resampling kernel of jaxdali.ops.resample.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__resample_kernel(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", STRINGIZE(JAXDALI_KERNEL_SOURCE)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
