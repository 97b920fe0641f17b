/* h5_legacy.c: weights of Keras 1 files, and of files trained on Theano, converted to the layout of
 * this library (Keras 2's) as they are read, as Keras 2's own loader converts them
 * (preprocess_weights_for_loading in keras/engine/saving.py, Keras 2.2.4):
 *   - a Keras 1 file is one whose weights group has no keras_version attribute (Keras 2 and 3
 *     always write one); for it
 *       LSTM: 12 arrays W_i U_i b_i W_c U_c b_c W_f U_f b_f W_o U_o b_o, concatenated along their
 *             last axis into kernel, recurrent_kernel and bias in Keras 2's gate order i f c o;
 *       GRU: 9 arrays (z, r, h) concatenated likewise;
 *       Bidirectional: each half converted as its layer (by the count: 12 per LSTM, 9 per GRU);
 *       Conv1D: kernel (k, 1, in, filters) -> (k, in, filters), and Keras 1.1's
 *             (filters, in, k, 1) transposed (2, 3, 1, 0) first;
 *       Conv2D channels_first (Theano dim_ordering): (filters, in, kh, kw) -> (kh, kw, in, filters);
 *       Conv3D channels_first: (filters, in, kd, kh, kw) -> (kd, kh, kw, in, filters);
 *   - whatever the version, a file whose backend attribute is "theano" has its convolution kernels
 *     (Conv1D, Conv2D, Conv3D, Conv2DTranspose, ConvLSTM2D's two) flipped along every axis but
 *     the last two (Theano convolves, TensorFlow and oneDNN correlate: Keras's convert_kernel);
 *   - a 4-D convolution kernel whose shape still differs is transposed (3, 2, 0, 1) when that
 *     makes it fit, as Keras does last. */
#include "io/h5.h"
#include "io/keras_io.h"

#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARRAYS 32
#define MAX_RANK 8

typedef struct arr {
    int nd;
    int64_t dim[MAX_RANK];
    float *v;
} arr;

static int64_t numel(const arr *a) {
    int64_t n = 1;
    for (int i = 0; i < a->nd; i++) n *= a->dim[i];
    return n;
}

static void arr_str(const arr *a, char *buf, size_t size) {
    size_t o = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < a->nd && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)a->dim[i]);
    if (o < size) snprintf(buf + o, size - o, a->nd == 1 ? ",)" : ")");
}

static bool same_shape(const arr *a, tnt_shape s) {
    if (a->nd != s.ndim) return false;
    for (int i = 0; i < a->nd; i++)
        if (a->dim[i] != s.dim[i]) return false;
    return true;
}

static bool has_dims(const arr *a, int nd, const int64_t *dims) {
    if (a->nd != nd) return false;
    for (int i = 0; i < nd; i++)
        if (a->dim[i] != dims[i]) return false;
    return true;
}

/* out = a transposed by perm (out axis i is a's axis perm[i]); a's buffer is replaced. */
static tnt_status transpose(arr *a, const int *perm) {
    int64_t n = numel(a), in_stride[MAX_RANK], odim[MAX_RANK];
    float *o = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!o) return tnt__error(TNT_ERR_NOMEM, "load_weights: out of memory converting legacy weights");
    in_stride[a->nd - 1] = 1;
    for (int i = a->nd - 2; i >= 0; i--) in_stride[i] = in_stride[i + 1] * a->dim[i + 1];
    for (int i = 0; i < a->nd; i++) odim[i] = a->dim[perm[i]];
    int64_t idx[MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t src = 0;
        for (int i = 0; i < a->nd; i++) src += idx[i] * in_stride[perm[i]];
        o[k] = a->v[src];
        for (int i = a->nd - 1; i >= 0 && ++idx[i] == odim[i]; i--) idx[i] = 0;
    }
    free(a->v);
    a->v = o;
    memcpy(a->dim, odim, sizeof odim);
    return TNT_OK;
}

/* Keras's convert_kernel: reversed along every axis but the last two, in place. */
static void flip_kernel(arr *a) {
    if (a->nd < 3) return;
    int64_t inner = a->dim[a->nd - 2] * a->dim[a->nd - 1], outer = numel(a) / (inner ? inner : 1);
    /* the leading axes all reversed: the row-major index of the leading position is reversed too */
    for (int64_t i = 0, j = outer - 1; i < j; i++, j--)
        for (int64_t k = 0; k < inner; k++) {
            float t = a->v[i * inner + k];
            a->v[i * inner + k] = a->v[j * inner + k];
            a->v[j * inner + k] = t;
        }
}

/* groups of the n arrays in a, taken in the order idx[0..k) and joined along their last axis, into
 * out (which takes the buffers). */
static tnt_status concat_last(arr *a, const int *idx, int k, arr *out) {
    *out = a[idx[0]];
    out->v = NULL;
    int64_t rows = numel(&a[idx[0]]) / a[idx[0]].dim[a[idx[0]].nd - 1], total = 0;
    for (int i = 0; i < k; i++) {
        const arr *p = &a[idx[i]];
        if (p->nd != out->nd || numel(p) / p->dim[p->nd - 1] != rows)
            return tnt__error(TNT_ERR_SHAPE, "load_weights: Keras 1 recurrent weights of unequal shapes");
        total += p->dim[p->nd - 1];
    }
    float *o = malloc((size_t)TNT_MAX(rows * total, 1) * sizeof(float));
    if (!o) return tnt__error(TNT_ERR_NOMEM, "load_weights: out of memory converting legacy weights");
    for (int64_t r = 0, at = 0; r < rows; r++)
        for (int i = 0; i < k; i++) {
            const arr *p = &a[idx[i]];
            int64_t w = p->dim[p->nd - 1];
            memcpy(o + at, p->v + r * w, (size_t)w * sizeof(float));
            at += w;
        }
    out->v = o;
    out->dim[out->nd - 1] = total;
    return TNT_OK;
}

/* Keras 1's LSTM (12 arrays, gates i c f o) or GRU (9, z r h) at a[0..), into 3 arrays at a[0..3). */
static tnt_status join_gates(arr *a, int n) {
    static const int lstm[3][4] = {{0, 6, 3, 9}, {1, 7, 4, 10}, {2, 8, 5, 11}}, gru[3][3] = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
    arr out[3] = {{0}};
    tnt_status s = TNT_OK;
    for (int i = 0; i < 3 && s == TNT_OK; i++) s = concat_last(a, n == 12 ? lstm[i] : gru[i], n == 12 ? 4 : 3, &out[i]);
    if (s != TNT_OK) {
        for (int i = 0; i < 3; i++) free(out[i].v);
        return s;
    }
    for (int i = 0; i < n; i++) free(a[i].v), a[i] = (arr){0};
    memcpy(a, out, sizeof out);
    return TNT_OK;
}

static bool is_conv(const char *cls) {
    return !strcmp(cls, "Conv1D") || !strcmp(cls, "Conv2D") || !strcmp(cls, "Conv3D") ||
           !strcmp(cls, "Conv2DTranspose") || !strcmp(cls, "ConvLSTM2D");
}

bool tnt__h5_legacy_applies(const tnt__entry *e, bool keras1, bool theano) {
    if (!e->layer) return false;
    const char *cls = e->layer->ops->class_name;
    return (theano && is_conv(cls)) ||
           (keras1 && (!strcmp(cls, "LSTM") || !strcmp(cls, "GRU") || !strcmp(cls, "Bidirectional") ||
                       !strcmp(cls, "Conv1D") || !strcmp(cls, "Conv2D") || !strcmp(cls, "Conv3D")));
}

/* The arrays a[0 .. *n) of layer l, converted in place (*n may shrink). */
static tnt_status convert(const tnt_layer *l, const tnt__entry *e, arr *a, int *n, bool keras1, bool theano) {
    const char *cls = l->ops->class_name;
    tnt_status s = TNT_OK;
    if (keras1 && (!strcmp(cls, "LSTM") || !strcmp(cls, "GRU")) && (*n == 12 || *n == 9) && e->n == 3) {
        if ((s = join_gates(a, *n)) == TNT_OK) *n = 3;
    } else if (keras1 && !strcmp(cls, "Bidirectional") && (*n == 24 || *n == 18) && e->n == 6) {
        int half = *n / 2;
        if ((s = join_gates(a, half)) != TNT_OK || (s = join_gates(a + half, half)) != TNT_OK) return s;
        memcpy(a + 3, a + half, 3 * sizeof *a); /* half >= 9: no overlap */
        for (int i = half; i < half + 3; i++) a[i] = (arr){0};
        *n = 6;
    }
    if (s != TNT_OK || *n < 1 || e->n < 1) return s;
    tnt_shape want = e->w[0]->shape;
    if (keras1 && !strcmp(cls, "Conv1D") && a[0].nd == 4 && want.ndim == 3) {
        const int64_t k = want.dim[0], in = want.dim[1], f = want.dim[2];
        if (has_dims(&a[0], 4, (int64_t[]){f, in, k, 1}) && (s = transpose(&a[0], (int[]){2, 3, 1, 0})) != TNT_OK)
            return s;
        if (has_dims(&a[0], 4, (int64_t[]){k, 1, in, f})) { /* drop the axis of 1: the same memory */
            a[0].nd = 3;
            a[0].dim[1] = in, a[0].dim[2] = f;
        }
    }
    if (keras1 && l->channels_first && !strcmp(cls, "Conv2D") && a[0].nd == 4)
        s = transpose(&a[0], (int[]){2, 3, 1, 0});
    if (keras1 && l->channels_first && !strcmp(cls, "Conv3D") && a[0].nd == 5)
        s = transpose(&a[0], (int[]){2, 3, 4, 1, 0});
    if (s != TNT_OK) return s;
    if (theano && is_conv(cls)) {
        flip_kernel(&a[0]);
        if (!strcmp(cls, "ConvLSTM2D") && *n > 1) flip_kernel(&a[1]);
    }
    if (is_conv(cls) && a[0].nd == 4 && !same_shape(&a[0], want)) {
        arr t = a[0];
        int64_t d[4] = {t.dim[3], t.dim[2], t.dim[0], t.dim[1]};
        if (want.ndim == 4 && !memcmp(d, want.dim, sizeof d)) s = transpose(&a[0], (int[]){3, 2, 0, 1});
        if (s == TNT_OK && !strcmp(cls, "ConvLSTM2D") && *n > 1 && a[1].nd == 4 && !same_shape(&a[1], e->w[1]->shape))
            s = transpose(&a[1], (int[]){3, 2, 0, 1});
    }
    return s;
}

tnt_status tnt__h5_legacy_read_entry(const tnt_model *m, hid_t g, const char *gname, char *const *names, int n_names,
                                     const tnt__entry *e, bool keras1, bool theano, const char *path, float *params,
                                     float *state) {
    arr a[MAX_ARRAYS] = {{0}};
    int n = n_names;
    tnt_status s = TNT_OK;
    if (n > MAX_ARRAYS)
        return tnt__error(TNT_ERR_FORMAT, "load_weights %s: group \"%s\" lists %d weights (at most %d in a legacy "
                          "Keras file)", path, gname, n, MAX_ARRAYS);
    for (int j = 0; j < n && s == TNT_OK; j++) {
        hid_t d = H5Oexists_by_name(g, names[j], H5P_DEFAULT) > 0 ? H5Dopen2(g, names[j], H5P_DEFAULT) : -1;
        hid_t space = d >= 0 ? H5Dget_space(d) : -1;
        int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
        hsize_t dims[MAX_RANK];
        if (d < 0) s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: dataset %s/%s is missing", path, gname, names[j]);
        else if (nd < 0 || nd > MAX_RANK || H5Sget_simple_extent_dims(space, dims, NULL) < 0)
            s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: dataset %s/%s is unreadable or has more than %d axes",
                           path, gname, names[j], MAX_RANK);
        else {
            a[j].nd = nd;
            for (int i = 0; i < nd; i++) a[j].dim[i] = (int64_t)dims[i];
            int64_t k = numel(&a[j]);
            if (!(a[j].v = malloc((size_t)(k ? k : 1) * sizeof(float))))
                s = tnt__error(TNT_ERR_NOMEM, "load_weights %s: out of memory", path);
            else if (k && tnt__h5_dread(d, H5T_NATIVE_FLOAT, a[j].v) < 0)
                s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: cannot read dataset %s/%s (%s)", path, gname,
                               names[j], tnt__h5_read_failure());
        }
        if (space >= 0) H5Sclose(space);
        if (d >= 0) H5Dclose(d);
    }
    if (s == TNT_OK) s = convert(e->layer, e, a, &n, keras1, theano);
    if (s == TNT_OK && n != e->n)
        s = tnt__error(TNT_ERR_SHAPE, "load_weights %s: weight count mismatch for layer \"%s\" (\"%s\" in the file, "
                       "Keras %s): the layer has %d weight(s), the file %d", path, e->name, gname,
                       keras1 ? "1" : "2 on Theano", e->n, n_names);
    for (int j = 0; j < n && s == TNT_OK; j++) {
        const tnt__weight *w = e->w[j];
        if (!same_shape(&a[j], w->shape)) {
            char fs[128], ms[128];
            arr want = {.nd = w->shape.ndim};
            memcpy(want.dim, w->shape.dim, sizeof(int64_t) * (size_t)w->shape.ndim);
            arr_str(&a[j], fs, sizeof fs);
            arr_str(&want, ms, sizeof ms);
            s = tnt__error(TNT_ERR_SHAPE, "load_weights %s: shape mismatch in layer \"%s\" for weight \"%s\" (group "
                           "\"%s\", a Keras %s file, converted as Keras 2 does): the file gives %s, the model %s",
                           path, e->name, w->name, gname, keras1 ? "1" : "2 Theano", fs, ms);
        } else {
            memcpy(tnt__weight_destination(m, w, params, state), a[j].v, (size_t)numel(&a[j]) * sizeof(float));
        }
    }
    for (int j = 0; j < MAX_ARRAYS; j++) free(a[j].v);
    return s;
}
