/* keras_zip.c: Keras 3 .keras files (model.save("m.keras") / keras.saving.load_model), as
 * keras/src/saving/saving_lib.py writes them: a zip archive of
 *   metadata.json      {"keras_version": "3.x.y", "date_saved": "..."}
 *   config.json        {"module", "class_name", "config", "registered_name", "build_config",
 *                       "compile_config": {"optimizer", "loss", "metrics", ...} (compiled only)}
 *   model.weights.h5   the Keras 3 weights layout (keras3_weights.c), optimizer variables under
 *                      optimizer/vars (or model.weights.npz: not read here)
 * Archives are read with libzip. An entry's declared size is checked before anything is
 * allocated: at most MAX_ENTRY bytes, and no more than deflate can expand its compressed size
 * (1032:1), so a zip bomb is refused before it is inflated. */
#include "core/atomic_file.h"
#include "io/keras_io.h"
#include "io/save_check.h"

#include "comm/comm.h"
#include "optimizers/optimizer.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zip.h>

#define MAX_CONFIG ((zip_uint64_t)64 << 20)
#define MAX_WEIGHTS ((zip_uint64_t)16 << 30)
#define DEFLATE_MAX_RATIO 1032
/* the Keras version whose layout is written */
#define KERAS3_VERSION "3.3.3"

tnt__file_kind tnt__file_kind_of(const char *path, const char *who) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        tnt__error(TNT_ERR_IO, "%s %s: %s", who, path, strerror(errno));
        return TNT__FILE_UNKNOWN;
    }
    unsigned char b[8] = {0};
    size_t n = fread(b, 1, sizeof b, f), skip = 0;
    fclose(f);
    while (skip < n && (b[skip] == ' ' || b[skip] == '\n' || b[skip] == '\r' || b[skip] == '\t')) skip++;
    if (n >= 4 && !memcmp(b, "PK\3\4", 4)) return TNT__FILE_ZIP;
    if (n == 8 && !memcmp(b, "\211HDF\r\n\032\n", 8)) return TNT__FILE_HDF5;
    if (skip < n && b[skip] == '{') return TNT__FILE_JSON;
    char hex[3 * sizeof b + 1] = "";
    for (size_t i = 0; i < n; i++) snprintf(hex + 3 * i, 4, "%02x ", b[i]);
    tnt__error(TNT_ERR_FORMAT,
               "%s %s: unknown file format (first bytes %s%s): expected a Keras .keras zip (50 4b 03 04), an HDF5 "
               ".h5 file (89 48 44 46 ...) or a JSON architecture ('{')",
               who, path, n ? hex : "none: the file is empty", n ? "" : "");
    return TNT__FILE_UNKNOWN;
}

/* ---- reading ---------------------------------------------------------------------------------- */

/* Entry name of archive z, read whole into *buf (NUL-terminated) after checking its declared
 * size; *found false (and TNT_OK) when the archive has no such entry and !required. */
static tnt_status read_entry(zip_t *z, const char *name, zip_uint64_t limit, const char *path, char **buf,
                             size_t *len, bool required) {
    *buf = NULL, *len = 0;
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(z, name, 0, &st) != 0)
        return required ? tnt__error(TNT_ERR_FORMAT, "load_model %s: the archive has no %s: not a Keras .keras file", path, name)
                        : TNT_OK;
    if (!(st.valid & ZIP_STAT_SIZE) || st.size > limit)
        return tnt__error(TNT_ERR_FORMAT, "load_model %s: %s declares %llu bytes (at most %llu accepted)", path, name,
                          (unsigned long long)st.size, (unsigned long long)limit);
    if ((st.valid & ZIP_STAT_COMP_SIZE) && st.comp_method != ZIP_CM_STORE &&
        st.size / DEFLATE_MAX_RATIO > st.comp_size)
        return tnt__error(TNT_ERR_FORMAT, "load_model %s: %s declares %llu bytes from %llu compressed (more than "
                          "deflate's %d:1): a corrupt archive or a zip bomb", path, name, (unsigned long long)st.size,
                          (unsigned long long)st.comp_size, DEFLATE_MAX_RATIO);
    zip_file_t *zf = zip_fopen_index(z, st.index, 0);
    if (!zf) return tnt__error(TNT_ERR_FORMAT, "load_model %s: cannot open %s: %s", path, name, zip_strerror(z));
    char *b = malloc((size_t)st.size + 1);
    tnt_status s = b ? TNT_OK : tnt__error(TNT_ERR_NOMEM, "load_model %s: out of memory for %s", path, name);
    zip_uint64_t got = 0;
    while (s == TNT_OK && got < st.size) {
        zip_int64_t r = zip_fread(zf, b + got, st.size - got);
        if (r <= 0) s = tnt__error(TNT_ERR_FORMAT, "load_model %s: %s is truncated or corrupt (%llu of %llu bytes read%s%s)",
                                   path, name, (unsigned long long)got, (unsigned long long)st.size, r < 0 ? ": " : "",
                                   r < 0 ? zip_file_strerror(zf) : "");
        else got += (zip_uint64_t)r;
    }
    /* libzip checks the CRC only when a read meets the end of the data: one read past the
     * declared size must find it (found by fuzz_zip: a damaged entry read exactly to its size
     * went through unchecked) */
    char past;
    zip_int64_t end = s == TNT_OK ? zip_fread(zf, &past, 1) : 0;
    if (zip_fclose(zf) != 0 && s == TNT_OK) end = -1;
    if (s == TNT_OK && end != 0)
        s = tnt__error(TNT_ERR_FORMAT, "load_model %s: %s %s (corrupt archive)", path, name,
                       end < 0 ? "fails its checksum" : "holds more bytes than it declares");
    if (s != TNT_OK) {
        free(b);
        return s;
    }
    b[st.size] = '\0';
    *buf = b, *len = (size_t)st.size;
    return TNT_OK;
}

tnt_status tnt__keras_zip_entry(const char *path, const char *name, char **buf, size_t *len, bool required) {
    int err = 0;
    *buf = NULL, *len = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!z) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        tnt_status s = tnt__error(TNT_ERR_FORMAT, "%s: not a readable zip archive (truncated or corrupt?): %s", path,
                                  zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return s;
    }
    tnt_status s = read_entry(z, name, strcmp(name, "model.weights.h5") ? MAX_CONFIG : MAX_WEIGHTS, path, buf, len, required);
    zip_discard(z);
    return s;
}

/* An HDF5 file opened on an image in memory (read-only). */
hid_t tnt__h5_open_image(const void *image, size_t len) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1;
    if (fapl >= 0 && H5Pset_fapl_core(fapl, 1 << 20, 0) >= 0 && H5Pset_file_image(fapl, (void *)image, len) >= 0)
        f = H5Fopen("model.weights.h5", H5F_ACC_RDONLY, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    return f;
}

/* model.weights.h5 is parsed in a child process (h5_guard.c), as every HDF5 file we load: its
 * answer is the iteration count (-1: none), the learning rate (8 bytes), params, state, then
 * (compiled) the optimizer's slots, each laid out as m->params. */
typedef struct zip_job {
    tnt_model *m;
    const char *path;
    const char *image;
    size_t len;
    bool compiled;
} zip_job;

static size_t answer_bytes(const tnt_model *m, bool compiled) {
    size_t np = (size_t)m->n_params * sizeof(float), ns = (size_t)m->n_state * sizeof(float);
    return 2 * sizeof(int64_t) + np + ns + (compiled ? (size_t)tnt__optimizer_num_slots(m->optimizer) * np : 0);
}

static tnt_status parse_weights_image(void *ctx, tnt__h5_answer *a) {
    const zip_job *j = ctx;
    tnt_model *m = j->m;
    int64_t *it = (int64_t *)a->data;
    float *lr = (float *)(it + 1), *params = (float *)(it + 2), *state = params + m->n_params;
    *it = -1;
    a->len = answer_bytes(m, j->compiled);
    char where[4096];
    snprintf(where, sizeof where, "load_model %s: model.weights.h5", j->path);
    tnt__h5_quiet();
    hid_t f = tnt__h5_open_image(j->image, j->len);
    tnt_status s = TNT_OK;
    if (f < 0) s = tnt__error(TNT_ERR_FORMAT, "%s is not a readable HDF5 file", where);
    else if (!tnt__keras3_is_layout(f)) s = tnt__error(TNT_ERR_FORMAT, "%s has no \"layers\" group (not the Keras 3 layout)", where);
    if (s == TNT_OK) s = tnt__keras3_read_weights(m, f, where, params, state);
    if (s == TNT_OK && j->compiled) {
        hid_t g = H5Lexists(f, "optimizer", H5P_DEFAULT) > 0 ? H5Gopen2(f, "optimizer", H5P_DEFAULT) : -1;
        if (g >= 0) s = tnt__keras3_read_optimizer(m, g, where, it, lr, state + m->n_state);
        else tnt_log(TNT_LOG_WARNING, "%s: no optimizer variables: the optimizer starts afresh", where);
        if (g >= 0) H5Gclose(g);
    }
    if (f >= 0) H5Fclose(f);
    return s;
}

/* Weights (and, when compiled, optimizer variables) of m from the archive's model.weights.h5. */
static tnt_status load_state(tnt_model *m, zip_t *z, const char *path, bool compiled) {
    if (zip_name_locate(z, "model.weights.npz", 0) >= 0 && zip_name_locate(z, "model.weights.h5", 0) < 0)
        return tnt__error(TNT_ERR_UNSUPPORTED, "load_model %s: weights saved as model.weights.npz are not supported "
                          "(save with the default weights_format=\"h5\")", path);
    zip_job j = {.m = m, .path = path, .compiled = compiled};
    char *image;
    tnt_status s = read_entry(z, "model.weights.h5", MAX_WEIGHTS, path, &image, &j.len, true);
    if (s == TNT_OK) s = tnt__model_setup_weights(m);
    int slots = s == TNT_OK && compiled ? tnt__optimizer_num_slots(m->optimizer) : 0;
    for (int k = 0; k < slots && s == TNT_OK; k++)
        if (!tnt__optimizer_slot(m->optimizer, k))
            s = tnt__error(TNT_ERR_STATE, "load_model %s: the optimizer's slots are not allocated", path);
    j.image = image;
    tnt__h5_answer a = {0};
    if (s == TNT_OK) s = tnt__h5_answer_new(&a, answer_bytes(m, compiled), true, "load_model", path);
    if (s == TNT_OK) s = tnt__h5_isolated("load_model", path, parse_weights_image, &j, &a);
    if (s == TNT_OK && a.len != answer_bytes(m, compiled))
        s = tnt__error(TNT_ERR_FORMAT, "load_model %s: the reader handed back %zu bytes of weights and slots", path, a.len);
    if (s == TNT_OK) { /* all read and checked: only now the model changes */
        size_t np = (size_t)m->n_params * sizeof(float), ns = (size_t)m->n_state * sizeof(float);
        int64_t it;
        float lr;
        memcpy(&it, a.data, sizeof it);
        memcpy(&lr, a.data + sizeof it, sizeof lr);
        const char *weights = a.data + 2 * sizeof(int64_t);
        memcpy(m->params, weights, np);
        memcpy(m->state, weights + np, ns);
        if (it >= 0) { /* -1: no optimizer state that fits */
            for (int k = 0; k < slots; k++) memcpy(tnt__optimizer_slot(m->optimizer, k), weights + np + ns + (size_t)k * np, np);
            s = tnt__optimizer_set_iterations(m->optimizer, it);
            if (s == TNT_OK) tnt_optimizer_set_lr(m->optimizer, lr);
        }
    }
    tnt__h5_answer_free(&a);
    free(image);
    return s;
}

tnt_model *tnt__keras_zip_load(const char *path, bool compile) {
    int err = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!z) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        tnt__error(TNT_ERR_FORMAT, "load_model %s: not a readable zip archive (truncated or corrupt?): %s", path,
                   zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return NULL;
    }
    char *text = NULL, *meta = NULL;
    size_t len;
    cJSON *cfg = NULL, *md = NULL;
    tnt_model *m = NULL;
    tnt_status s = read_entry(z, "config.json", MAX_CONFIG, path, &text, &len, true);
    if (s == TNT_OK) s = read_entry(z, "metadata.json", MAX_CONFIG, path, &meta, &len, false);
    if (s == TNT_OK && meta) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(md = cJSON_Parse(meta), "keras_version");
        tnt_log(TNT_LOG_DEBUG, "load_model %s: written by Keras %s", path, cJSON_IsString(v) ? v->valuestring : "(unknown)");
    }
    if (s == TNT_OK && !cJSON_IsObject(cfg = cJSON_Parse(text)))
        s = tnt__error(TNT_ERR_FORMAT, "load_model %s: config.json is not a JSON object", path);
    if (s == TNT_OK && !(m = tnt_model_from_json(text)))
        s = tnt__error_prefix(TNT_ERR_FORMAT, "load_model %s: config.json: ", path);
    const cJSON *cc = s == TNT_OK ? cJSON_GetObjectItemCaseSensitive(cfg, "compile_config") : NULL;
    bool compiled = compile && cJSON_IsObject(cc);
    if (compiled) s = tnt__compile_from_config(m, cc, path);
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(md, "tnt_seed");
    if (s == TNT_OK && compiled && cJSON_IsString(seed)) s = tnt_model_set_seed(m, strtoull(seed->valuestring, NULL, 10));
    if (s == TNT_OK) s = load_state(m, z, path, compiled);
    cJSON_Delete(cfg), cJSON_Delete(md);
    free(text), free(meta);
    zip_discard(z);
    if (s != TNT_OK) {
        tnt_model_free(m);
        return NULL;
    }
    return m;
}

/* ---- writing ---------------------------------------------------------------------------------- */

/* hard_sigmoid means relu6(x + 3) / 6 in Keras 3 (our hard_sigmoid_v3) and clip(0.2x + 0.5) in
 * Keras 2, which Keras 3 has no name for: a Keras 2 one is written hard_sigmoid_keras2, which the
 * reader (tnt__kj_keras3_names) takes back and Keras 3 refuses rather than compute the other. */
static bool activations_to_keras3(cJSON *cfg) {
    static const char *const keys[] = {"activation", "recurrent_activation"};
    for (size_t i = 0; i < TNT_ARRAY_LEN(keys); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, keys[i]);
        const char *name = !cJSON_IsString(v)                         ? NULL
                           : !strcmp(v->valuestring, "hard_sigmoid_v3") ? "hard_sigmoid"
                           : !strcmp(v->valuestring, "hard_sigmoid")    ? "hard_sigmoid_keras2"
                                                                        : NULL;
        cJSON *n = name ? cJSON_CreateString(name) : NULL;
        if (name && (!n || !cJSON_ReplaceItemInObjectCaseSensitive(cfg, keys[i], n))) {
            cJSON_Delete(n);
            return false;
        }
    }
    return true;
}

/* Keras 3 writes initializers, regularizers and constraints as {"module": "keras.initializers",
 * "class_name", "config", "registered_name": null}; Keras 3.3 (the version these files claim)
 * names Orthogonal and Identity OrthogonalInitializer and IdentityInitializer, their first
 * exported names then (3.8+ reads both). */
static bool objects_to_keras3(cJSON *cfg) {
    cJSON *e;
    cJSON_ArrayForEach(e, cfg) {
        const char *key = e->string;
        size_t n = key ? strlen(key) : 0;
        const char *mod = (n > 12 && !strcmp(key + n - 12, "_initializer")) || (key && !strcmp(key, "initializer"))
                              ? "keras.initializers"
                          : n > 12 && !strcmp(key + n - 12, "_regularizer") ? "keras.regularizers"
                          : n > 11 && !strcmp(key + n - 11, "_constraint")  ? "keras.constraints"
                                                                            : NULL;
        cJSON *cls = mod && cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "class_name") : NULL;
        if (!cJSON_IsString(cls) || cJSON_GetObjectItemCaseSensitive(e, "module")) continue;
        const char *name = !strcmp(cls->valuestring, "Orthogonal") ? "OrthogonalInitializer"
                           : !strcmp(cls->valuestring, "Identity") ? "IdentityInitializer"
                                                                   : cls->valuestring;
        cJSON *o = cJSON_CreateObject(), *c = cJSON_DetachItemFromObjectCaseSensitive(e, "config");
        bool ok = o && cJSON_AddStringToObject(o, "module", mod) && cJSON_AddStringToObject(o, "class_name", name);
        if (ok) cJSON_AddItemToObject(o, "config", c ? c : cJSON_CreateObject()), c = NULL;
        ok = ok && cJSON_AddNullToObject(o, "registered_name") && cJSON_ReplaceItemInObjectCaseSensitive(cfg, key, o);
        if (!ok) {
            cJSON_Delete(o), cJSON_Delete(c);
            return false;
        }
        e = o;
    }
    return true;
}

/* Keras 3 writes a layer's dtype as a DTypePolicy object, {"module": "keras", "class_name":
 * "DTypePolicy", "config": {"name": "mixed_bfloat16"}, "registered_name": null}: the policy names
 * of the Keras 2 JSON become those, in every layer config of the tree (nested models, wrappers'
 * inner layers); InputLayer keeps its plain dtype, as Keras 3 does. Activations take their Keras
 * 3 names (activations_to_keras3). */
static bool layer_configs_to_keras3(cJSON *node) {
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(node, "class_name");
    cJSON *cfg = cJSON_GetObjectItemCaseSensitive(node, "config");
    cJSON *dt = cJSON_IsObject(cfg) ? cJSON_GetObjectItemCaseSensitive(cfg, "dtype") : NULL;
    if (cJSON_IsString(cls) && cJSON_IsObject(cfg) && (!activations_to_keras3(cfg) || !objects_to_keras3(cfg)))
        return false;
    if (cJSON_IsString(cls) && strcmp(cls->valuestring, "InputLayer") && cJSON_IsString(dt)) {
        cJSON *o = cJSON_CreateObject(), *oc = NULL;
        if (!o || !cJSON_AddStringToObject(o, "module", "keras") || !cJSON_AddStringToObject(o, "class_name", "DTypePolicy") ||
            !(oc = cJSON_AddObjectToObject(o, "config")) || !cJSON_AddStringToObject(oc, "name", dt->valuestring) ||
            !cJSON_AddNullToObject(o, "registered_name") || !cJSON_ReplaceItemInObjectCaseSensitive(cfg, "dtype", o)) {
            cJSON_Delete(o);
            return false;
        }
    }
    /* KerasHub's class: Keras 3 finds it by its registered name (keras_hub registers its layers) */
    if (cJSON_IsString(cls) && !strcmp(cls->valuestring, "PositionEmbedding") && cJSON_IsObject(cfg) &&
        !cJSON_GetObjectItemCaseSensitive(cfg, "tnt_ops") &&
        !cJSON_GetObjectItemCaseSensitive(node, "module") &&
        (!cJSON_AddStringToObject(node, "module", "keras_hub.src.layers.modeling.position_embedding") ||
         !cJSON_AddStringToObject(node, "registered_name", "keras_hub>PositionEmbedding")))
        return false;
    cJSON *child;
    cJSON_ArrayForEach(child, node)
        if ((cJSON_IsObject(child) || cJSON_IsArray(child)) && !layer_configs_to_keras3(child)) return false;
    return true;
}

/* config.json: the architecture in the Keras 3 envelope, with compile_config when compiled. */
static tnt_status make_config(tnt_model *m, char **out) {
    *out = NULL;
    char *json;
    tnt_status s = tnt_model_to_json(m, &json);
    if (s != TNT_OK) return s;
    cJSON *arch = cJSON_Parse(json), *root = cJSON_CreateObject(), *tc = NULL;
    free(json);
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(arch, "class_name");
    cJSON *config = cJSON_DetachItemFromObjectCaseSensitive(arch, "config");
    bool ok = root && cJSON_IsString(cls) && config && cJSON_AddStringToObject(root, "module", "keras") &&
              cJSON_AddStringToObject(root, "class_name", cls->valuestring);
    ok = ok && layer_configs_to_keras3(config);
    if (ok) cJSON_AddItemToObject(root, "config", config), config = NULL;
    ok = ok && cJSON_AddStringToObject(root, "registered_name", cls->valuestring);
    if (ok && m->compiled && m->optimizer) {
        if ((s = tnt__training_config(m, &tc)) != TNT_OK) ok = false;
        else { /* Keras 3's compile_config: the optimizer under "optimizer" */
            cJSON_DeleteItemFromObjectCaseSensitive(tc, "tnt_seed"); /* Keras 3 compiles with every key: in metadata */
            cJSON *opt = cJSON_DetachItemFromObjectCaseSensitive(tc, "optimizer_config");
            ok = opt && cJSON_AddItemToObject(tc, "optimizer", opt) && cJSON_AddFalseToObject(tc, "run_eagerly") &&
                 cJSON_AddNumberToObject(tc, "steps_per_execution", 1) && cJSON_AddFalseToObject(tc, "jit_compile");
            if (ok) cJSON_AddItemToObject(root, "compile_config", tc), tc = NULL;
        }
    }
    if (ok) *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(arch), cJSON_Delete(root), cJSON_Delete(config), cJSON_Delete(tc);
    if (s != TNT_OK) return s;
    return *out ? TNT_OK : tnt__error(TNT_ERR_NOMEM, "config.json: out of memory");
}

/* model.weights.h5, made in memory (HDF5's core driver, no backing store) as h5_weights.c does. */
static tnt_status make_weights(tnt_model *m, const char *path, void **image, size_t *size) {
    *image = NULL, *size = 0;
    tnt__h5_quiet();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1;
    if (fapl >= 0 && H5Pset_fapl_core(fapl, 1 << 20, 0) >= 0) f = H5Fcreate("model.weights.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (f < 0) return tnt__error(TNT_ERR_IO, "%s: HDF5 cannot make model.weights.h5 in memory", path);
    tnt_status s = tnt__keras3_write_weights(m, f, path);
    if (s == TNT_OK && m->compiled && m->optimizer) {
        hid_t g = H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        s = g >= 0 ? tnt__keras3_write_optimizer(m, g, path) : tnt__error(TNT_ERR_IO, "%s: cannot create group optimizer", path);
        if (g >= 0) H5Gclose(g);
    }
    if (s == TNT_OK) {
        ssize_t k = H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0 ? H5Fget_file_image(f, NULL, 0) : -1;
        if (k > 0 && (*image = malloc((size_t)k)) && H5Fget_file_image(f, *image, (size_t)k) == k) *size = (size_t)k;
        else s = tnt__error(TNT_ERR_IO, "%s: cannot get the HDF5 file image", path);
    }
    H5Fclose(f);
    if (s != TNT_OK) free(*image), *image = NULL;
    return s;
}

typedef struct zip_parts {
    const char *path;
    char *metadata, *config;
    void *weights;
    size_t weights_len;
} zip_parts;

static tnt_status add_entry(zip_t *z, const char *name, const void *data, size_t len, const char *path) {
    zip_source_t *src = zip_source_buffer(z, data, len, 0);
    zip_int64_t i = src ? zip_file_add(z, name, src, ZIP_FL_ENC_UTF_8) : -1;
    if (i < 0) {
        zip_source_free(src);
        return tnt__error(TNT_ERR_IO, "save_model %s: cannot add %s to the archive: %s", path, name, zip_strerror(z));
    }
    /* Keras (zipfile's default) stores entries uncompressed */
    zip_set_file_compression(z, (zip_uint64_t)i, ZIP_CM_STORE, 0);
    return TNT_OK;
}

static tnt_status write_zip(const char *tmp, void *ctx) {
    const zip_parts *p = ctx;
    int err = 0;
    zip_t *z = zip_open(tmp, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!z) return tnt__error(TNT_ERR_IO, "save_model %s: cannot create the archive (libzip error %d)", p->path, err);
    tnt_status s = add_entry(z, "metadata.json", p->metadata, strlen(p->metadata), p->path);
    if (s == TNT_OK) s = add_entry(z, "config.json", p->config, strlen(p->config), p->path);
    if (s == TNT_OK) s = add_entry(z, "model.weights.h5", p->weights, p->weights_len, p->path);
    if (s != TNT_OK) {
        zip_discard(z);
        return s;
    }
    if (zip_close(z) != 0) {
        s = tnt__error(TNT_ERR_IO, "save_model %s: cannot write the archive: %s", p->path, zip_strerror(z));
        zip_discard(z);
    }
    return s;
}

tnt_status tnt__keras_zip_save(tnt_model *m, const char *path, const tnt_save_opts *opts) {
    tnt_status s = tnt__model_setup_weights(m);
    bool writer = tnt__world_rank() == 0 || (opts && opts->save_all_devices);
    if (s == TNT_OK && writer) s = tnt__check_save_names(m, "save_model", path);
    if (s == TNT_OK && writer && opts && opts->check_only) s = tnt__check_save_path(path, false, "save_model");
    else if (s == TNT_OK && writer) {
        zip_parts p = {.path = path};
        char date[32], meta[192], seed[48] = "";
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", localtime(&now));
        if (m->compiled) /* Tarantella's compile seed, which Keras 3's compile_config cannot carry */
            snprintf(seed, sizeof seed, ", \"tnt_seed\": \"%llu\"", (unsigned long long)m->seed);
        snprintf(meta, sizeof meta, "{\"keras_version\": \"%s\", \"date_saved\": \"%s\"%s}", KERAS3_VERSION, date,
                 seed);
        p.metadata = meta;
        s = make_config(m, &p.config);
        if (s == TNT_OK) s = make_weights(m, path, &p.weights, &p.weights_len);
        if (s == TNT_OK) s = tnt__atomic_write_path(path, write_zip, &p);
        if (s != TNT_OK && !strstr(tnt_last_error(), path)) tnt__error_prefix(s, "save_model %s: ", path);
        free(p.config), free(p.weights);
    }
    return tnt__agree(s, NULL, 0);
}
