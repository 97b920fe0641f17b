/* inspect.c: tnt_inspect, what tnt-inspect prints about a Keras file: its format (by content),
 * the Keras version that wrote it, its training configuration, its weights (names and shapes, as
 * stored), every layer or setting this library cannot load (all of them at once, each with its
 * layer's name, not only the first that stops a load), and the summary of the model it loads.
 * HDF5 is read in a child process (h5_guard.c), as every load does: the child writes the
 * attributes and the list of datasets as text into the shared answer. */
#include "io/keras_io.h"

#include "layers/keras_config.h"
#include "layers/regularizer.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_LISTED 4000 /* datasets listed; more are counted */

/* ---- in the child: attributes and datasets as text ------------------------------------------ */

typedef struct facts_job {
    const char *path;      /* an HDF5 file, or (image) the name it has in messages */
    const char *image;     /* a .keras zip's model.weights.h5 in memory, or NULL */
    size_t len;
} facts_job;

typedef struct lister {
    tnt__h5_answer *a;
    int n;
} lister;

static void put(tnt__h5_answer *a, const char *s, size_t n) {
    if (a->len >= a->cap) return;
    if (n > a->cap - a->len - 1) n = a->cap - a->len - 1;
    memcpy(a->data + a->len, s, n);
    a->len += n;
    a->data[a->len] = '\0';
}

static herr_t list_dataset(hid_t g, const char *name, const H5L_info_t *info, void *ctx) {
    lister *l = ctx;
    H5O_info_t oi;
    if (info->type != H5L_TYPE_HARD || H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        oi.type != H5O_TYPE_DATASET)
        return 0;
    if (++l->n > MAX_LISTED) return 0;
    char line[1024];
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT), sp = d >= 0 ? H5Dget_space(d) : -1;
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t dims[32];
    size_t o = (size_t)snprintf(line, sizeof line, "  %s  (", name);
    if (nd >= 0 && nd <= 32 && H5Sget_simple_extent_dims(sp, dims, NULL) >= 0)
        for (int i = 0; i < nd && o < sizeof line; i++)
            o += (size_t)snprintf(line + o, sizeof line - o, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    else if (o < sizeof line) o += (size_t)snprintf(line + o, sizeof line - o, "unreadable");
    if (o < sizeof line) o += (size_t)snprintf(line + o, sizeof line - o, nd == 1 ? ",)\n" : ")\n");
    put(l->a, line, o < sizeof line ? o : sizeof line - 1);
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    return 0;
}

/* A string attribute of f ("" when absent or not a string). */
static void put_attr(hid_t f, const char *name, tnt__h5_answer *a) {
    char **v = NULL;
    int n = 0;
    bool found = false;
    if (H5Aexists(f, name) > 0 && tnt__h5_read_strs(f, name, name, &v, &n, &found) == TNT_OK && n > 0) put(a, v[0], strlen(v[0]));
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
    put(a, "", 0);
    if (a->len < a->cap) a->data[a->len++] = '\0';
}

/* The answer: keras_version, backend, model_config, training_config (each NUL-terminated, empty
 * when absent), the layout ("keras2", "keras3", "none") and the datasets, one line each. */
static tnt_status parse_facts(void *ctx, tnt__h5_answer *a) {
    const facts_job *j = ctx;
    hid_t f = -1;
    tnt_status s = TNT_OK;
    if (j->image) {
        tnt__h5_quiet();
        if ((f = tnt__h5_open_image(j->image, j->len)) < 0)
            s = tnt__error(TNT_ERR_FORMAT, "inspect %s: model.weights.h5 is not a readable HDF5 file", j->path);
    } else {
        s = tnt__h5_open("inspect", j->path, &f);
    }
    if (s != TNT_OK) return s;
    a->len = 0;
    const char *keys[] = {"keras_version", "backend", "model_config", "training_config"};
    for (int i = 0; i < 4; i++) put_attr(f, keys[i], a);
    bool whole = H5Lexists(f, "model_weights", H5P_DEFAULT) > 0;
    hid_t root = whole ? H5Gopen2(f, "model_weights", H5P_DEFAULT) : H5Gopen2(f, "/", H5P_DEFAULT);
    const char *layout = root < 0 ? "none" : tnt__keras3_is_layout(root) ? "keras3"
                         : H5Aexists(root, "layer_names") > 0 || H5Aexists(root, "layer_names0") > 0 ? "keras2" : "none";
    put(a, layout, strlen(layout));
    put(a, "\n", 1);
    lister l = {a, 0};
    if (root >= 0) H5Lvisit(root, H5_INDEX_NAME, H5_ITER_INC, list_dataset, &l);
    if (l.n > MAX_LISTED) {
        char more[64];
        put(a, more, (size_t)snprintf(more, sizeof more, "  ... and %d more\n", l.n - MAX_LISTED));
    }
    if (root >= 0) H5Gclose(root);
    H5Fclose(f);
    if (a->len < a->cap) a->data[a->len++] = '\0';
    return TNT_OK;
}

/* ---- in the caller --------------------------------------------------------------------------- */

/* Every layer entry of config (nested models and their layers included) that this library cannot
 * make, one line each on out; returns how many. */
static int layer_problems(const cJSON *cfg, FILE *out, int depth) {
    const cJSON *c = tnt__kj_item(cfg, "config"), *layers = cJSON_IsArray(c) ? c : tnt__kj_item(c, "layers"), *e;
    int n = 0;
    if (depth > 8 || !cJSON_IsArray(layers)) return 0;
    cJSON_ArrayForEach(e, layers) {
        const cJSON *cls = tnt__kj_item(e, "class_name"), *lc = tnt__kj_item(e, "config"), *nm = tnt__kj_item(lc, "name");
        tnt__kj_ctx k = {cJSON_IsString(nm) ? nm->valuestring : "?", cJSON_IsString(cls) ? cls->valuestring : "?"};
        if (!cJSON_IsString(cls)) continue;
        if (!strcmp(k.cls, "Sequential") || !strcmp(k.cls, "Functional") || !strcmp(k.cls, "Model")) {
            n += layer_problems(e, out, depth + 1);
            continue;
        }
        tnt_shape shape;
        tnt_status s = TNT_OK;
        if (!strcmp(k.cls, "InputLayer") || tnt__kj_has_batch_shape(lc)) s = tnt__kj_batch_shape(lc, &shape, &k);
        const tnt__layer_ops *ops = strcmp(k.cls, "InputLayer") ? tnt__layer_class_find(k.cls) : NULL;
        if (s == TNT_OK && strcmp(k.cls, "InputLayer")) {
            tnt_layer *l = ops ? tnt__layer_from_config(ops, lc, &k) : NULL;
            if (!ops) tnt__error(TNT_ERR_UNSUPPORTED, "layer \"%.64s\": unsupported layer class \"%.64s\"", k.name, k.cls);
            s = l ? TNT_OK : TNT_ERR_UNSUPPORTED;
            tnt_layer_free(l);
        }
        if (s != TNT_OK) {
            fprintf(out, "  %s\n", tnt_last_error());
            n++;
        }
    }
    return n;
}

static const char *next_str(const char **p, const char *end) {
    const char *s = *p;
    size_t n = strnlen(s, (size_t)(end - s));
    *p = s + n + (s + n < end);
    return s;
}

/* The configurations and the weights listing of path, by its kind. */
typedef struct facts {
    char *model_config, *training_config, *version, *backend, *layout, *weights, *meta;
    tnt__h5_answer a;
    char *zip_config, *zip_weights;
} facts;

static void facts_free(facts *f) {
    tnt__h5_answer_free(&f->a);
    free(f->zip_config), free(f->zip_weights), free(f->meta);
}

static tnt_status read_facts(const char *path, tnt__file_kind kind, facts *f) {
    struct stat st;
    tnt_status s = stat(path, &st) == 0 ? TNT_OK : tnt__error(TNT_ERR_IO, "inspect %s: cannot stat", path);
    facts_job j = {.path = path};
    size_t len = 0;
    if (s == TNT_OK && kind == TNT__FILE_ZIP) {
        s = tnt__keras_zip_entry(path, "config.json", &f->zip_config, &len, true);
        if (s == TNT_OK) s = tnt__keras_zip_entry(path, "metadata.json", &f->meta, &len, false);
        if (s == TNT_OK) s = tnt__keras_zip_entry(path, "model.weights.h5", &f->zip_weights, &j.len, false);
        j.image = f->zip_weights;
        if (s == TNT_OK && !j.image) return TNT_OK; /* no weights file (or .npz): nothing to list */
    }
    size_t cap = (size_t)st.st_size + (j.image ? j.len : 0) + 65536 + MAX_LISTED * 160;
    if (s == TNT_OK) s = tnt__h5_answer_new(&f->a, cap, false, "inspect", path);
    if (s == TNT_OK) s = tnt__h5_isolated("inspect", path, parse_facts, &j, &f->a);
    if (s != TNT_OK) return s;
    const char *p = f->a.data, *end = f->a.data + f->a.len;
    f->version = (char *)next_str(&p, end), f->backend = (char *)next_str(&p, end);
    f->model_config = (char *)next_str(&p, end), f->training_config = (char *)next_str(&p, end);
    f->layout = (char *)p;
    char *nl = memchr(f->layout, '\n', (size_t)(end - p));
    if (nl) *nl = '\0', f->weights = nl + 1;
    return TNT_OK;
}

/* A one-line account of a training_config / compile_config object. */
static void print_training(const char *text, FILE *out) {
    cJSON *t = cJSON_Parse(text);
    const cJSON *opt = tnt__kj_item(t, "optimizer_config");
    if (!opt) opt = tnt__kj_item(t, "optimizer");
    const cJSON *cls = tnt__kj_item(opt, "class_name"), *lr = tnt__kj_item(tnt__kj_item(opt, "config"), "learning_rate");
    char *loss = cJSON_PrintUnformatted(tnt__kj_item(t, "loss")), *metrics = cJSON_PrintUnformatted(tnt__kj_item(t, "metrics"));
    if (!t) fprintf(out, "training    (not valid JSON)\n");
    else
        fprintf(out, "training    loss %s, optimizer %s%s%.6g%s, metrics %s\n", loss ? loss : "-",
                cJSON_IsString(cls) ? cls->valuestring : cJSON_IsString(opt) ? opt->valuestring : "-",
                cJSON_IsNumber(lr) ? " (learning_rate " : "", cJSON_IsNumber(lr) ? lr->valuedouble : 0,
                cJSON_IsNumber(lr) ? ")" : "", metrics ? metrics : "-");
    free(loss), free(metrics);
    cJSON_Delete(t);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && n < (64L << 20) && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
        fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0';
    } else {
        free(buf);
        buf = NULL;
    }
    if (f) fclose(f);
    return buf;
}

tnt_status tnt_inspect(const char *path, FILE *out) {
    if (!path || !out) return tnt__error(TNT_ERR_ARG, "inspect: path or out is NULL");
    tnt__file_kind kind = tnt__file_kind_of(path, "inspect");
    if (kind == TNT__FILE_UNKNOWN) return TNT_ERR_FORMAT; /* the error names the first bytes */
    facts f = {0};
    char *json = kind == TNT__FILE_JSON ? read_text(path) : NULL;
    tnt_status s = kind == TNT__FILE_JSON ? (json ? TNT_OK : tnt__error(TNT_ERR_IO, "inspect %s: cannot read it", path))
                                          : read_facts(path, kind, &f);
    if (s != TNT_OK) {
        facts_free(&f);
        return s;
    }
    cJSON *zc = f.zip_config ? cJSON_Parse(f.zip_config) : NULL, *md = f.meta ? cJSON_Parse(f.meta) : NULL;
    const cJSON *zv = tnt__kj_item(md, "keras_version");
    const char *arch = json ? json : f.zip_config ? f.zip_config : f.model_config && *f.model_config ? f.model_config : NULL;
    bool weights_only = !arch;
    fprintf(out, "file        %s\nformat      %s\n", path,
            kind == TNT__FILE_JSON ? "JSON architecture (model.to_json), no weights"
            : kind == TNT__FILE_ZIP ? "Keras 3 .keras zip (config.json, model.weights.h5)"
            : !weights_only ? "Keras whole-model HDF5 (model.save(\"m.h5\"))"
            : !strcmp(f.layout, "keras3") ? "Keras 3 weights file (model.save_weights(\"w.weights.h5\"))"
            : !strcmp(f.layout, "keras2") ? "Keras 2 HDF5 weights (model.save_weights(\"w.h5\"))" : "HDF5, not a Keras file");
    const char *ver = cJSON_IsString(zv) ? zv->valuestring : f.version && *f.version ? f.version : NULL;
    if (!ver && json) {
        cJSON *r = cJSON_Parse(json);
        const cJSON *v = tnt__kj_item(r, "keras_version");
        fprintf(out, "keras       %s\n", cJSON_IsString(v) ? v->valuestring : "(not recorded)");
        cJSON_Delete(r);
    } else {
        fprintf(out, "keras       %s%s%s\n", ver ? ver : "(not recorded)", f.backend && *f.backend ? ", backend " : "",
                f.backend && *f.backend ? f.backend : "");
    }
    const cJSON *cc = tnt__kj_item(zc, "compile_config");
    char *cct = cc ? cJSON_PrintUnformatted(cc) : NULL;
    if (cct || (f.training_config && *f.training_config)) print_training(cct ? cct : f.training_config, out);
    else if (!weights_only) fprintf(out, "training    none (not compiled)\n");
    free(cct);
    int problems = 0;
    if (arch) {
        cJSON *root = cJSON_Parse(arch);
        fprintf(out, "problems:\n");
        problems = root ? layer_problems(root, out, 0) : 0;
        if (!root) {
            fprintf(out, "  the architecture is not valid JSON\n");
            problems++;
        }
        if (!problems) fprintf(out, "  none found in the layers\n");
        cJSON_Delete(root);
    }
    if (f.weights) fprintf(out, "weights     (%s layout)\n%s", f.layout, f.weights);
    tnt_model *m = NULL;
    bool compiled = true;
    if (!weights_only) {
        m = json ? tnt_model_from_json(json) : tnt_load_model(path, true);
        char err[1024];
        snprintf(err, sizeof err, "%s", tnt_last_error());
        if (!m && !json) { /* the model may load without its training configuration */
            compiled = false;
            if ((m = tnt_load_model(path, false))) fprintf(out, "compile     fails: %s\n", err);
        }
        s = m ? TNT_OK : TNT_ERR_FORMAT;
        if (m) tnt_model_summary(m, out);
        fprintf(out, "loads       %s%s\n", m ? (compiled || json ? "yes" : "yes, uncompiled") : "no: ", m ? "" : err);
        if (!m) tnt__error(s, "%s", err);
    } else {
        fprintf(out, "loads       a weights file: no architecture (give it to tnt_load_weights)\n");
        if (strcmp(f.layout, "keras2") && strcmp(f.layout, "keras3"))
            s = tnt__error(TNT_ERR_FORMAT, "inspect %s: an HDF5 file without a Keras model or weights layout", path);
    }
    tnt_model_free(m);
    cJSON_Delete(zc), cJSON_Delete(md);
    free(json);
    facts_free(&f);
    return s;
}
