/* Baseline and progressive 8-bit JPEG decoding with libjpeg-turbo, called directly, without the GIL
 * (jaxdali.ops.jpeg_direct).
 *
 * The pixels are those of nvImageCodec's libjpeg-turbo extension, which jaxdali otherwise calls: the same
 * library settings (islow or ifast IDCT, fancy chroma upsampling, RGB or BGR out), and a window is
 * decoded as that extension decodes a region: one more column on each side where the image has one
 * (so the window's edge columns are upsampled from their real neighbours), the columns aligned by
 * jpeg_crop_scanline, the rows above skipped by jpeg_skip_scanlines. Each row is written once, straight
 * into the caller's buffer, where nvImageCodec copies each row out of a row buffer and then copies the
 * whole image again.
 *
 * jpeg_size(data) -> (height, width, EXIF orientation), or None where the frame is not one this module
 * decodes (not a JPEG; arithmetic-coded, lossless or hierarchical; not 8-bit; not 1 or 3 components; a
 * height left to a DNL marker). Reads the markers only; the orientation (1 when there is none) follows
 * jaxdali.ops.decoders._jpeg_orientation's rules.
 *
 * decode(data, out, y, x, h, w, window, bgr, fast_idct) decodes rows y .. y+h-1, columns x .. x+w-1
 * (window=True; else the whole image, y = x = 0) into `out`, a C-contiguous (h, W, 3) uint8 buffer with
 * W >= w + 33 where `window` (room for the column alignment), and returns the column of `out` where
 * column x landed (row r of the window is out[r, off:off + w]). It returns -1, having written anything or
 * nothing, whenever libjpeg-turbo warns or fails, a progressive image has more scans than nvImageCodec
 * allows (NVIMGCODEC_MAX_JPEG_SCANS, default 256), or the image is one the module does not decode
 * (CMYK/YCCK): the caller then decodes with nvImageCodec, which reports such images as it always does.
 * The rows below a window are skipped and the decoding finished as nvImageCodec does (libjpeg-turbo
 * reads no data for rows skipped to the end of the image).
 *
 * Built against the stable ABI (Py_LIMITED_API, Python >= 3.11) by setup.py, which also passes
 * JAXDALI_KERNEL_SOURCE, the SHA-256 of this file, exposed as SOURCE_SHA256.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#ifndef LIBJPEG_TURBO_VERSION_NUMBER
#error "libjpeg-turbo is required (jpeg_crop_scanline, jpeg_skip_scanlines); IJG libjpeg decodes other pixels"
#endif

#ifndef JAXDALI_KERNEL_SOURCE
#define JAXDALI_KERNEL_SOURCE unknown
#endif
#define STRINGIZE_(x) #x
#define STRINGIZE(x) STRINGIZE_(x)

/* Columns of `out` beyond the window's width: up to 32 for the alignment (4 x 8 pixel iMCUs) and one for
 * the extra column on the right. */
#define ALIGN_ROOM 33

static int max_scans = 256;

typedef struct {
    struct jpeg_error_mgr pub;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
} Failure;

static void bail(j_common_ptr cinfo)
{
    longjmp(((Failure *)cinfo->err)->jump, 1);
}

/* Warnings (level -1: corrupt or truncated data) end the decoding; trace messages are ignored. */
static void on_message(j_common_ptr cinfo, int level)
{
    if (level < 0) bail(cinfo);
}

static void quiet(j_common_ptr cinfo) { (void)cinfo; }

static void count_scans(j_common_ptr cinfo)
{
    if (((j_decompress_ptr)cinfo)->input_scan_number > max_scans) bail(cinfo);
}

static int be16(const uint8_t *p) { return (p[0] << 8) | p[1]; }

/* The frame header's height and width, or 0 where this module does not decode the frame. */
static int frame_size(const uint8_t *p, Py_ssize_t n, int *height, int *width)
{
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8) return 0;
    Py_ssize_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xFF) return 0;
        int marker = p[i + 1];
        if (marker == 0xFF) { i++; continue; } /* fill byte */
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) { i += 2; continue; } /* no length */
        if (marker == 0xD9 || marker == 0xDA) return 0; /* EOI or SOS before any frame header */
        int len = be16(p + i + 2);
        if (len < 2 || i + 2 + len > n) return 0;
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
            /* SOF0 baseline, SOF1 extended sequential, SOF2 progressive, all Huffman-coded */
            if (marker > 0xC2 || len < 8) return 0;
            const uint8_t *f = p + i + 4;
            int precision = f[0], h = be16(f + 1), w = be16(f + 3), comps = f[5];
            if (precision != 8 || h == 0 || w == 0 || (comps != 1 && comps != 3)) return 0;
            *height = h, *width = w;
            return 1;
        }
        i += 2 + len;
    }
    return 0;
}

/* Whether `size` bytes at `at` lie inside the `n` bytes of data (offsets may come from the file). */
static int inside(Py_ssize_t n, uint64_t at, Py_ssize_t size) { return at + (uint64_t)size <= (uint64_t)n; }

static unsigned read16(const uint8_t *p, int little) { return little ? (unsigned)(p[0] | (p[1] << 8)) : (unsigned)be16(p); }

static uint32_t read32(const uint8_t *p, int little)
{
    return little ? (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24)
                  : ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* The orientation tag (0x0112) of the first IFD of the TIFF structure at `base`, 1 when absent or
 * unreadable: decoders._tiff_orientation's rules. */
static int tiff_orientation(const uint8_t *p, Py_ssize_t n, uint64_t base)
{
    if (!inside(n, base, 2)) return 1;
    int little;
    if (p[base] == 'I' && p[base + 1] == 'I') little = 1;
    else if (p[base] == 'M' && p[base + 1] == 'M') little = 0;
    else return 1;
    if (!inside(n, base + 2, 2) || read16(p + base + 2, little) != 42 || !inside(n, base + 4, 4)) return 1;
    uint64_t ifd = base + read32(p + base + 4, little);
    if (!inside(n, ifd, 2)) return 1;
    unsigned count = read16(p + ifd, little);
    for (unsigned k = 0; k < count && k < 512; k++) {
        uint64_t entry = ifd + 2 + 12 * (uint64_t)k;
        if (!inside(n, entry, 4)) return 1;
        if (read16(p + entry, little) != 0x0112) continue;
        int wide = read16(p + entry + 2, little) == 4;
        if (!inside(n, entry + 8, wide ? 4 : 2)) return 1;
        uint32_t value = wide ? read32(p + entry + 8, little) : read16(p + entry + 8, little);
        return value >= 1 && value <= 8 ? (int)value : 1;
    }
    return 1;
}

/* The EXIF orientation of a JPEG (its first APP1 "Exif" segment before the first scan), 1 when it has
 * none: decoders._jpeg_orientation's rules. */
static int exif_orientation(const uint8_t *p, Py_ssize_t n)
{
    Py_ssize_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xFF) return 1;
        int marker = p[i + 1];
        if (marker == 0xFF) { i++; continue; }
        if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) { i += 2; continue; }
        if (marker == 0xDA || marker == 0xD9) return 1;
        if (marker == 0xE1 && i + 10 <= n && memcmp(p + i + 4, "Exif\0\0", 6) == 0)
            return tiff_orientation(p, n, (uint64_t)(i + 10));
        i += 2 + be16(p + i + 2);
    }
    return 1;
}

static PyObject *jpeg_size(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    int h = 0, w = 0;
    int found = frame_size(data.buf, data.len, &h, &w);
    int orientation = found ? exif_orientation(data.buf, data.len) : 1;
    PyBuffer_Release(&data);
    if (!found) Py_RETURN_NONE;
    return Py_BuildValue("(iii)", h, w, orientation);
}

typedef struct {
    const uint8_t *data;
    Py_ssize_t size;
    uint8_t *out;
    Py_ssize_t out_rows, out_stride, out_width; /* rows, bytes per row, pixels per row */
    int y, x, h, w, window, bgr, fast_idct;
} Request;

/* The decoding proper (no Python calls): the column offset of the window in `out`, or -1. */
static int run(const Request *r)
{
    struct jpeg_decompress_struct cinfo;
    Failure failure;
    /* volatile: read after a longjmp */
    volatile int created = 0;
    cinfo.err = jpeg_std_error(&failure.pub);
    failure.pub.error_exit = bail;
    failure.pub.emit_message = on_message;
    failure.pub.output_message = quiet;
    if (setjmp(failure.jump)) {
        if (created) jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    created = 1;
    failure.progress.progress_monitor = count_scans;
    cinfo.progress = &failure.progress;
    jpeg_mem_src(&cinfo, r->data, (unsigned long)r->size);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.data_precision != 8 || (cinfo.num_components != 1 && cinfo.num_components != 3) ||
        cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK || cinfo.arith_code)
        bail((j_common_ptr)&cinfo);
    cinfo.out_color_space = r->bgr ? JCS_EXT_BGR : JCS_RGB;
    cinfo.do_fancy_upsampling = TRUE;
    cinfo.dct_method = r->fast_idct ? JDCT_IFAST : JDCT_ISLOW;
    jpeg_start_decompress(&cinfo);
    int image_h = (int)cinfo.output_height, image_w = (int)cinfo.output_width;
    int y = r->y, x = r->x, h = r->h, w = r->w, off = 0;
    if (!r->window) {
        y = 0, x = 0, h = image_h, w = image_w;
    }
    if (cinfo.output_components != 3 || y < 0 || x < 0 || h < 1 || w < 1 || y + h > image_h || x + w > image_w ||
        h > r->out_rows)
        bail((j_common_ptr)&cinfo);
    if (r->window) {
        int left = x > 0, right = x + w < image_w;
        JDIMENSION first = (JDIMENSION)(x - left), width = (JDIMENSION)(w + left + right);
        jpeg_crop_scanline(&cinfo, &first, &width);
        off = x - (int)first;
        if (y > 0 && jpeg_skip_scanlines(&cinfo, (JDIMENSION)y) != (JDIMENSION)y) bail((j_common_ptr)&cinfo);
    }
    if ((Py_ssize_t)cinfo.output_width > r->out_width) bail((j_common_ptr)&cinfo);
    JSAMPROW rows[16];
    int done = 0;
    while (done < h) {
        int want = h - done < 16 ? h - done : 16;
        for (int k = 0; k < want; k++) rows[k] = r->out + (Py_ssize_t)(done + k) * r->out_stride;
        JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)want);
        if (got == 0) bail((j_common_ptr)&cinfo);
        done += (int)got;
    }
    JDIMENSION left_over = cinfo.output_height - cinfo.output_scanline;
    if (left_over && jpeg_skip_scanlines(&cinfo, left_over) != left_over) bail((j_common_ptr)&cinfo);
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return off;
}

static PyObject *decode(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data_obj, *out_obj;
    Request r;
    if (!PyArg_ParseTuple(args, "OOiiiippp", &data_obj, &out_obj, &r.y, &r.x, &r.h, &r.w, &r.window, &r.bgr,
                          &r.fast_idct))
        return NULL;
    Py_buffer data, out;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_ND) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    int off = -1;
    if (out.ndim != 3 || out.shape[2] != 3 || out.itemsize != 1 || (r.window && out.shape[1] < (Py_ssize_t)r.w + ALIGN_ROOM)) {
        PyErr_SetString(PyExc_ValueError, "decode: out must be a C-contiguous (h, W, 3) uint8 buffer, W >= w + 33");
        PyBuffer_Release(&out);
        PyBuffer_Release(&data);
        return NULL;
    }
    r.data = data.buf, r.size = data.len, r.out = out.buf;
    r.out_rows = out.shape[0], r.out_width = out.shape[1], r.out_stride = out.shape[1] * 3;
    Py_BEGIN_ALLOW_THREADS
    off = run(&r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&data);
    return PyLong_FromLong(off);
}

static PyMethodDef methods[] = {
    {"jpeg_size", jpeg_size, METH_O,
     "jpeg_size(data) -> (height, width, EXIF orientation) of a JPEG this module decodes, else None (markers only)"},
    {"decode", decode, METH_VARARGS,
     "decode(data, out, y, x, h, w, window, bgr, fast_idct) -> column of out where the window "
     "starts, or -1 (decode with nvImageCodec instead)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jpeg_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__jpeg_kernel(void)
{
    const char *env = getenv("NVIMGCODEC_MAX_JPEG_SCANS");
    if (env && atoi(env) > 0) max_scans = atoi(env);
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "SOURCE_SHA256", STRINGIZE(JAXDALI_KERNEL_SOURCE)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
