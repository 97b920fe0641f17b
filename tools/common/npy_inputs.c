/* npy_inputs.c: see npy_inputs.h. */
#include "npy_inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool npy_read(const char *prog, const char *path, npy_array *a) {
    *a = (npy_array){0};
    tnt_dataset *ds = tnt_dataset_from_npy(path, NULL);
    int64_t n = ds ? tnt_dataset_cardinality(ds) : 0;
    tnt_shape shape = ds ? tnt_dataset_x_shape(ds) : (tnt_shape){0};
    tnt_dataset_iter *it = NULL;
    tnt_batch b;
    bool ok = ds && n > 0 && (ds = tnt_dataset_batch(ds, n, false)) && (it = tnt_dataset_iter_new(ds, 0)) &&
              tnt_dataset_iter_next(it, &b) == 1;
    if (ok && (a->data = malloc((size_t)tnt_shape_numel(b.x.shape) * sizeof(float) + 1))) {
        memcpy(a->data, b.x.data, (size_t)tnt_shape_numel(b.x.shape) * sizeof(float));
        a->n = n, a->shape = shape;
    } else if (ok) {
        fprintf(stderr, "%s: %s: out of memory\n", prog, path);
        ok = false;
    } else {
        fprintf(stderr, "%s: %s: %s\n", prog, path, n == 0 && ds ? "no samples" : tnt_last_error());
    }
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    return ok;
}

/* The array fits the model's input shape in (-1: any size). */
static bool fits(tnt_shape in, tnt_shape got) {
    bool ok = in.ndim == got.ndim;
    for (int i = 0; ok && i < in.ndim; i++) ok = in.dim[i] < 0 || in.dim[i] == got.dim[i];
    return ok;
}

static void names(const tnt_model *m, char *buf, size_t size) {
    size_t o = 0;
    buf[0] = '\0';
    for (int k = 0; k < tnt_model_num_inputs(m) && o < size; k++)
        o += (size_t)snprintf(buf + o, size - o, "%s%s", k ? ", " : "", tnt_model_io_name(m, false, k));
}

bool npy_pack_inputs(const char *prog, tnt_model *m, int n_specs, char *const *specs, npy_array *out) {
    int n_in = tnt_model_num_inputs(m);
    npy_array arr[8] = {0};
    tnt_shape shapes[8];
    char list[512], a[96], b[96];
    bool ok = true;
    names(m, list, sizeof list);
    *out = (npy_array){0};
    if (n_specs != n_in || n_in > 8) {
        fprintf(stderr, "%s: the model has %d input(s) (%s): give each once with --input NAME=X.npy (%d given)\n", prog,
                n_in, list, n_specs);
        return false;
    }
    for (int k = 0; ok && k < n_in; k++) {
        const char *name = tnt_model_io_name(m, false, k), *spec = NULL;
        size_t len = strlen(name);
        for (int i = 0; i < n_specs; i++)
            if (!strncmp(specs[i], name, len) && specs[i][len] == '=') {
                if (spec) {
                    fprintf(stderr, "%s: --input %s is given twice\n", prog, name);
                    ok = false;
                }
                spec = specs[i] + len + 1;
            }
        if (ok && !spec) {
            fprintf(stderr, "%s: no --input for the model's input \"%s\" (its inputs: %s)\n", prog, name, list);
            ok = false;
        }
        if (!ok || !npy_read(prog, spec, &arr[k])) ok = false;
        else if (!fits(tnt_model_input_shape_at(m, k), arr[k].shape)) {
            fprintf(stderr, "%s: --input %s: samples of shape %s do not fit the model's input %s\n", prog, name,
                    tnt_shape_str(arr[k].shape, a, sizeof a), tnt_shape_str(tnt_model_input_shape_at(m, k), b, sizeof b));
            ok = false;
        } else if (arr[k].n != arr[0].n) {
            fprintf(stderr, "%s: --input %s has %lld samples, %s has %lld\n", prog, name, (long long)arr[k].n,
                    tnt_model_io_name(m, false, 0), (long long)arr[0].n);
            ok = false;
        }
        if (ok) shapes[k] = arr[k].shape;
    }
    if (ok && tnt_model_set_input_shapes(m, n_in, shapes) != TNT_OK) {
        fprintf(stderr, "%s: %s\n", prog, tnt_last_error());
        ok = false;
    }
    int64_t total = 0;
    for (int k = 0; ok && k < n_in; k++) total += tnt_shape_numel(arr[k].shape);
    if (ok && !(out->data = malloc((size_t)(arr[0].n * total) * sizeof(float) + 1))) {
        fprintf(stderr, "%s: out of memory for %lld samples\n", prog, (long long)arr[0].n);
        ok = false;
    }
    for (int64_t i = 0, col = 0; ok && i < arr[0].n; i++, col = 0)
        for (int k = 0; k < n_in; k++) {
            int64_t c = tnt_shape_numel(arr[k].shape);
            memcpy(out->data + i * total + col, arr[k].data + i * c, (size_t)c * sizeof(float));
            col += c;
        }
    if (ok) out->n = arr[0].n, out->shape = TNT_SHAPE(total);
    for (int k = 0; k < n_in; k++) free(arr[k].data);
    return ok;
}
