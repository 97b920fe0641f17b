/* compile_config.c: a model's compile settings as Keras files keep them, both ways: Keras 2's
 * training_config ({"loss", "metrics", "weighted_metrics", "loss_weights", "optimizer_config"})
 * of a whole-model .h5, and Keras 3's compile_config ({"optimizer", "loss", "loss_weights",
 * "metrics", ...}) of a .keras zip's config.json. */
#include "io/keras_io.h"
#include "io/metric_config.h"
#include "layers/keras_config.h"

#include "model/model.h"
#include "objectives/loss.h"
#include "objectives/traced_loss.h"
#include "optimizers/optimizer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        if (!(x)) goto nomem;                                                                                  \
    } while (0)

/* Keras's loss class names */
static const char *loss_class(tnt_loss_kind k) {
    switch (k) {
    case TNT_SPARSE_CATEGORICAL_CROSSENTROPY: return "SparseCategoricalCrossentropy";
    case TNT_CATEGORICAL_CROSSENTROPY: return "CategoricalCrossentropy";
    case TNT_BINARY_CROSSENTROPY: return "BinaryCrossentropy";
    case TNT_MEAN_SQUARED_ERROR: return "MeanSquaredError";
    case TNT_MEAN_ABSOLUTE_ERROR: return "MeanAbsoluteError";
    case TNT_KL_DIVERGENCE: return "KLDivergence";
    case TNT_HINGE: return "Hinge";
    case TNT_SQUARED_HINGE: return "SquaredHinge";
    case TNT_CATEGORICAL_HINGE: return "CategoricalHinge";
    case TNT_HUBER: return "Huber";
    case TNT_LOG_COSH: return "LogCosh";
    case TNT_POISSON: return "Poisson";
    case TNT_MEAN_ABSOLUTE_PERCENTAGE_ERROR: return "MeanAbsolutePercentageError";
    case TNT_MEAN_SQUARED_LOGARITHMIC_ERROR: return "MeanSquaredLogarithmicError";
    case TNT_COSINE_SIMILARITY: return "CosineSimilarity";
    default: return "";
    }
}

/* The name compile was given for metric i: a weighted metric that a plain one of its output shares
 * the name with is logged as "weighted_<name>" (Keras's rule), but Keras keeps the name given. */
static const char *given_name(const tnt_model *m, int i) {
    const tnt__metric *w = &m->metrics[i];
    const char *prefix = "weighted_";
    if (!w->weighted || strncmp(w->name, prefix, strlen(prefix))) return w->name;
    const char *base = w->name + strlen(prefix);
    for (int j = 0; j < m->n_metrics; j++) {
        const tnt__metric *p = &m->metrics[j];
        if (!p->weighted && !strcmp(p->name, base) && (p->output < 0 || w->output < 0 || p->output == w->output))
            return base;
    }
    return w->name;
}

tnt_status tnt__training_config(const tnt_model *m, cJSON **out) {
    *out = NULL;
    const tnt_optimizer *o = m->optimizer;
    cJSON *tc = cJSON_CreateObject();
    CK(tc);
    const tnt__loss_opts *lo = m->loss_opts;
    bool traced = false;
    for (int k = 0; k < m->n_outputs; k++) traced |= m->traced_loss[k] != NULL;
    if (traced) { /* the user's loss: its name as Keras writes it, and the graphs where Keras does not look */
        cJSON *l = m->n_outputs > 1 ? cJSON_AddArrayToObject(tc, "loss") : NULL, *gs = cJSON_AddArrayToObject(tc, "tnt_loss_graphs");
        CK(gs && (l || m->n_outputs == 1));
        for (int k = 0; k < m->n_outputs; k++) {
            const tnt__traced_loss *t = m->traced_loss[k];
            const char *name = t ? tnt__traced_loss_name(t) : tnt_loss_name(m->output_loss[k]);
            if (l) CK(cJSON_AddItemToArray(l, cJSON_CreateString(name)));
            else CK(cJSON_AddStringToObject(tc, "loss", name));
            cJSON *g = t ? cJSON_Parse(tnt__traced_loss_json(t)) : cJSON_CreateNull();
            CK(g && cJSON_AddItemToArray(gs, g));
        }
    } else if (m->mixed_losses) { /* Keras keeps a list of losses as given: one name per output */
        cJSON *l = cJSON_AddArrayToObject(tc, "loss");
        CK(l);
        for (int k = 0; k < m->n_outputs; k++) CK(cJSON_AddItemToArray(l, cJSON_CreateString(tnt_loss_name(m->output_loss[k]))));
    } else if (!m->from_logits && !lo) {
        CK(cJSON_AddStringToObject(tc, "loss", tnt_loss_name(m->loss)));
    } else {
        cJSON *l = cJSON_AddObjectToObject(tc, "loss"), *c;
        CK(l && cJSON_AddStringToObject(l, "class_name", loss_class(m->loss)) && (c = cJSON_AddObjectToObject(l, "config")));
        CK(cJSON_AddStringToObject(c, "reduction", "auto") && cJSON_AddStringToObject(c, "name", tnt_loss_name(m->loss)));
        bool ce = m->loss == TNT_CATEGORICAL_CROSSENTROPY || m->loss == TNT_BINARY_CROSSENTROPY;
        if (ce || m->loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY)
            CK(cJSON_AddBoolToObject(c, "from_logits", m->from_logits));
        if (m->loss == TNT_HUBER) CK(cJSON_AddNumberToObject(c, "delta", tnt__kj_f(lo && lo->huber_delta ? lo->huber_delta : 1.0f)));
        /* Keras's SparseCategoricalCrossentropy has no label_smoothing: ours goes in when set */
        if (ce || (lo && lo->label_smoothing != 0))
            CK(cJSON_AddNumberToObject(c, "label_smoothing", tnt__kj_f(lo ? lo->label_smoothing : 0)));
        if (ce) CK(cJSON_AddNumberToObject(c, "axis", -1));
        if (m->loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY) {
            if (lo && lo->has_ignore_class) CK(cJSON_AddNumberToObject(c, "ignore_class", lo->ignore_class));
            else CK(cJSON_AddNullToObject(c, "ignore_class"));
        }
    }
    bool per_output = false, any_weighted = false;
    for (int i = 0; i < m->n_metrics; i++) per_output |= m->metrics[i].output >= 0, any_weighted |= m->metrics[i].weighted;
    char seed[24]; /* Tarantella's compile seed (weights and dropout), as text: 64 bits; Keras reads no such key */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->seed);
    CK(cJSON_AddStringToObject(tc, "tnt_seed", seed));
    for (int weighted = 0; weighted < 2; weighted++) { /* "metrics", then "weighted_metrics" */
        const char *key = weighted ? "weighted_metrics" : "metrics";
        if (weighted && !any_weighted) {
            CK(cJSON_AddNullToObject(tc, key));
            break;
        }
        cJSON *met = cJSON_AddArrayToObject(tc, key);
        CK(met);
        if (per_output) { /* Keras's list of lists, one per output */
            for (int k = 0; k < m->n_outputs; k++) {
                cJSON *l = cJSON_CreateArray();
                CK(l && cJSON_AddItemToArray(met, l));
                for (int i = 0; i < m->n_metrics; i++)
                    if (tnt__metric_on_output(&m->metrics[i], k) && !m->traced_metric[i] && !m->state_metric[i] &&
                        m->metrics[i].weighted == (weighted != 0))
                        CK(cJSON_AddItemToArray(l, tnt__metric_config(&m->metrics[i], given_name(m, i))));
            }
        } else { /* the user's metrics stay out: a compile from the file could not make them */
            for (int i = 0; i < m->n_metrics; i++)
                if (!m->traced_metric[i] && !m->state_metric[i] && m->metrics[i].weighted == (weighted != 0))
                    CK(cJSON_AddItemToArray(met, tnt__metric_config(&m->metrics[i], given_name(m, i))));
        }
    }
    if (m->has_loss_weights) { /* as Keras keeps a list given to compile */
        cJSON *lw = cJSON_AddArrayToObject(tc, "loss_weights");
        CK(lw);
        for (int k = 0; k < m->n_outputs; k++) CK(cJSON_AddItemToArray(lw, cJSON_CreateNumber(tnt__kj_f(m->loss_weights[k]))));
    } else {
        CK(cJSON_AddNullToObject(tc, "loss_weights"));
    }
    cJSON *oc = cJSON_AddObjectToObject(tc, "optimizer_config"), *c;
    CK(oc && cJSON_AddStringToObject(oc, "class_name", o->name) && (c = cJSON_AddObjectToObject(oc, "config")));
    /* Keras 2.11+ get_config: the base optimizer's keys, then the optimizer's own */
    CK(cJSON_AddStringToObject(c, "name", o->name));
    if (o->weight_decay != 0) CK(cJSON_AddNumberToObject(c, "weight_decay", tnt__kj_f(o->weight_decay)));
    else CK(cJSON_AddNullToObject(c, "weight_decay"));
    CK(cJSON_AddNullToObject(c, "clipnorm") && cJSON_AddNullToObject(c, "global_clipnorm"));
    if (o->clipvalue != 0) CK(cJSON_AddNumberToObject(c, "clipvalue", tnt__kj_f(o->clipvalue)));
    else CK(cJSON_AddNullToObject(c, "clipvalue"));
    CK(cJSON_AddFalseToObject(c, "use_ema") &&
       cJSON_AddNumberToObject(c, "ema_momentum", 0.99) && cJSON_AddNullToObject(c, "ema_overwrite_frequency") &&
       cJSON_AddFalseToObject(c, "jit_compile") && cJSON_AddFalseToObject(c, "is_legacy_optimizer"));
    CK(cJSON_AddNumberToObject(c, "learning_rate", tnt__kj_f(tnt_optimizer_get_lr(o))));
    switch (o->kind) {
    case TNT__OPT_SGD:
        CK(cJSON_AddNumberToObject(c, "momentum", tnt__kj_f(o->momentum)) && cJSON_AddBoolToObject(c, "nesterov", o->nesterov));
        break;
    case TNT__OPT_ADAM:
    case TNT__OPT_ADAMAX:
    case TNT__OPT_NADAM:
        CK(cJSON_AddNumberToObject(c, "beta_1", tnt__kj_f(o->beta_1)) && cJSON_AddNumberToObject(c, "beta_2", tnt__kj_f(o->beta_2)) &&
           cJSON_AddNumberToObject(c, "epsilon", tnt__kj_f(o->epsilon)));
        if (o->kind == TNT__OPT_ADAM) CK(cJSON_AddBoolToObject(c, "amsgrad", o->amsgrad));
        break;
    case TNT__OPT_RMSPROP:
        CK(cJSON_AddNumberToObject(c, "rho", tnt__kj_f(o->rho)) && cJSON_AddNumberToObject(c, "momentum", tnt__kj_f(o->momentum)) &&
           cJSON_AddNumberToObject(c, "epsilon", tnt__kj_f(o->epsilon)) && cJSON_AddBoolToObject(c, "centered", o->centered));
        break;
    case TNT__OPT_ADAGRAD:
        CK(cJSON_AddNumberToObject(c, "initial_accumulator_value", tnt__kj_f(o->initial_accumulator_value)) &&
           cJSON_AddNumberToObject(c, "epsilon", tnt__kj_f(o->epsilon)));
        break;
    case TNT__OPT_ADADELTA:
        CK(cJSON_AddNumberToObject(c, "rho", tnt__kj_f(o->rho)) && cJSON_AddNumberToObject(c, "epsilon", tnt__kj_f(o->epsilon)));
        break;
    }
    *out = tc;
    return TNT_OK;
nomem:
    cJSON_Delete(tc);
    return tnt__error(TNT_ERR_NOMEM, "training_config: out of memory");
}

static double num(const cJSON *o, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : 0;
}
static bool flag(const cJSON *o, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key)); }

/* Appends the metric names of a (possibly nested per output) Keras metrics list to buf. */
static tnt_status metric_names(const cJSON *a, char *buf, size_t size, const char *path, int output) {
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        const char *name = NULL;
        char spec[160];
        if (cJSON_IsArray(x)) {
            tnt_status s = metric_names(x, buf, size, path, output);
            if (s != TNT_OK) return s;
            continue;
        }
        if (cJSON_IsString(x)) name = x->valuestring;
        else if (cJSON_IsObject(x)) { /* a serialized metric object: its class, name and parameters */
            tnt_status s = tnt__metric_spec_from_config(x, spec, sizeof spec, path);
            if (s != TNT_OK) return s;
            name = spec;
        }
        if (!name) return tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config: a metric is neither a name nor a config", path);
        if (strlen(buf) + strlen(name) + 2 > size) return tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config: too many metrics", path);
        if (*buf) strcat(buf, ",");
        strcat(buf, name);
        if (output >= 0) snprintf(buf + strlen(buf), size - strlen(buf), "@%d", output);
    }
    return TNT_OK;
}

/* Keras's metrics: a list for every output, or per output a list of lists (output order) or a
 * dict by output name; the per-output ones become "name@K". */
static tnt_status metrics_of(const tnt_model *m, const cJSON *met, char *buf, size_t size, const char *path) {
    bool per_output = cJSON_IsObject(met) || (cJSON_IsArray(met) && m->n_outputs > 1 &&
                                              cJSON_GetArraySize(met) == m->n_outputs);
    if (cJSON_IsArray(met) && per_output) {
        const cJSON *x;
        cJSON_ArrayForEach(x, met) per_output &= cJSON_IsArray(x) || cJSON_IsNull(x);
    }
    if (!per_output) return cJSON_IsArray(met) ? metric_names(met, buf, size, path, -1) : TNT_OK;
    for (int k = 0; k < m->n_outputs; k++) {
        const cJSON *x = cJSON_IsArray(met) ? cJSON_GetArrayItem(met, k)
                                            : cJSON_GetObjectItemCaseSensitive(met, tnt__model_output_name(m, k));
        if (!x || cJSON_IsNull(x)) continue;
        cJSON *one = NULL;
        if (!cJSON_IsArray(x)) { /* a single metric for this output */
            if (!(one = cJSON_CreateArray()) || !cJSON_AddItemReferenceToArray(one, (cJSON *)x)) {
                cJSON_Delete(one);
                return tnt__error(TNT_ERR_NOMEM, "load_model %s: out of memory", path);
            }
            x = one;
        }
        tnt_status s = metric_names(x, buf, size, path, k);
        cJSON_Delete(one);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

/* Keras's weighted_metrics (names, each "name" or "name@K") after the plain ones, marked "~"; one
 * that a plain metric of its output shares the name with is logged "weighted_<name>", as Keras. */
static tnt_status add_weighted(char *buf, size_t size, const char *weighted, const char *path) {
    char plain[2048];
    snprintf(plain, sizeof plain, ",%s,", buf);
    for (const char *p = weighted; *p;) {
        size_t len = strcspn(p, ",");
        char entry[256], name[256], key[264];
        snprintf(entry, sizeof entry, "%.*s", (int)len, p);
        p += len + (p[len] == ',');
        const char *at = strchr(entry, '@');
        snprintf(name, sizeof name, "%.*s", (int)(at ? at - entry : (long)strlen(entry)), entry);
        snprintf(key, sizeof key, ",%s,", entry);
        bool clash = strstr(plain, key) != NULL;
        if (at && !clash) { /* a plain metric for every output has the name too */
            snprintf(key, sizeof key, ",%s,", name);
            clash = strstr(plain, key) != NULL;
        }
        size_t used = strlen(buf);
        int n = clash ? snprintf(buf + used, size - used, "%s~weighted_%s=%s%s", used ? "," : "", name, name, at ? at : "")
                      : snprintf(buf + used, size - used, "%s~%s", used ? "," : "", entry);
        if (n < 0 || (size_t)n >= size - used)
            return tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config: too many metrics", path);
    }
    return TNT_OK;
}

/* Keras's loss_weights (null, a list in output order, a dict by output name, or one number for a
 * one-output model) into w and co; tnt_compile checks the count and the values. */
static tnt_status loss_weights(const tnt_model *m, const cJSON *lw, const char *path, float *w, tnt_compile_opts *co) {
    if (!lw || cJSON_IsNull(lw)) return TNT_OK;
    int n = 0;
    for (int k = 0; k < m->n_outputs; k++) w[k] = 1.0f; /* Keras: an output a dict leaves out weighs 1 */
    const cJSON *x;
    if (cJSON_IsNumber(lw)) {
        w[n++] = (float)lw->valuedouble;
    } else if (cJSON_IsArray(lw)) {
        cJSON_ArrayForEach(x, lw) {
            if (!cJSON_IsNumber(x))
                return tnt__error(TNT_ERR_FORMAT, "load_model %s: loss_weights[%d] is not a number", path, n);
            if (n < TNT_MAX_IO) w[n] = (float)x->valuedouble; /* tnt_compile refuses a count that differs */
            n++;
        }
    } else if (cJSON_IsObject(lw)) {
        n = m->n_outputs;
        cJSON_ArrayForEach(x, lw) {
            int k = 0;
            while (k < m->n_outputs && strcmp(x->string, tnt__model_output_name(m, k))) k++;
            if (k == m->n_outputs) {
                char names[256] = "";
                for (int j = 0; j < m->n_outputs; j++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "",
                             tnt__model_output_name(m, j));
                return tnt__error(TNT_ERR_ARG, "load_model %s: loss_weights names \"%s\", which is not an output of "
                                  "model \"%s\" (its outputs: %s)", path, x->string, m->name, names);
            }
            if (!cJSON_IsNumber(x))
                return tnt__error(TNT_ERR_FORMAT, "load_model %s: loss_weights[\"%s\"] is not a number", path, x->string);
            w[k] = (float)x->valuedouble;
        }
    } else {
        return tnt__error(TNT_ERR_FORMAT, "load_model %s: loss_weights is neither a list, a dict nor a number", path);
    }
    co->loss_weights = w;
    co->n_loss_weights = n;
    return TNT_OK;
}

/* Compiles m as a Keras 2 training_config ("optimizer_config") or a Keras 3 compile_config
 * ("optimizer": a config, or a name such as "adam") says. */
/* A training_config with the user's loss graphs ("tnt_loss_graphs", one per output or null): compiled
 * with a stand-in loss on those outputs, then their graphs set (tnt-train runs them too). */
static tnt_status compile_with_graphs(tnt_model *m, const cJSON *tc, const cJSON *graphs, const char *path) {
    if (cJSON_GetArraySize(graphs) != m->n_outputs)
        return tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config has %d loss graphs for %d outputs", path,
                          cJSON_GetArraySize(graphs), m->n_outputs);
    cJSON *tc2 = cJSON_Duplicate(tc, true), *names = cJSON_CreateArray();
    tnt_status s = TNT_OK;
    if (!tc2 || !names) {
        s = tnt__error(TNT_ERR_NOMEM, "load_model %s: out of memory", path);
        goto done;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(tc2, "tnt_loss_graphs");
    const cJSON *loss = cJSON_GetObjectItemCaseSensitive(tc, "loss");
    for (int k = 0; k < m->n_outputs; k++) {
        const cJSON *g = cJSON_GetArrayItem(graphs, k), *given = cJSON_IsArray(loss) ? cJSON_GetArrayItem(loss, k) : loss;
        const char *name = !cJSON_IsNull(g) ? "mean_squared_error" : cJSON_IsString(given) ? given->valuestring : "";
        cJSON_AddItemToArray(names, cJSON_CreateString(name));
    }
    cJSON_ReplaceItemInObjectCaseSensitive(tc2, "loss", names);
    names = NULL;
    if ((s = tnt__compile_from_config(m, tc2, path)) != TNT_OK) goto done;
    for (int k = 0; k < m->n_outputs && s == TNT_OK; k++) {
        const cJSON *g = cJSON_GetArrayItem(graphs, k);
        if (cJSON_IsNull(g)) continue;
        char *txt = cJSON_PrintUnformatted(g);
        s = txt ? tnt_model_set_loss_graph(m, k, txt) : tnt__error(TNT_ERR_NOMEM, "load_model %s: out of memory", path);
        free(txt);
        if (s != TNT_OK) tnt__error_prefix(s, "load_model %s: training_config: ", path);
    }
done:
    cJSON_Delete(tc2);
    cJSON_Delete(names);
    return s;
}

tnt_status tnt__compile_from_config(tnt_model *m, const cJSON *tc, const char *path) {
    const cJSON *graphs = cJSON_GetObjectItemCaseSensitive(tc, "tnt_loss_graphs");
    if (cJSON_IsArray(graphs)) return compile_with_graphs(m, tc, graphs, path);
    tnt_status s = TNT_OK;
    cJSON *no_config = NULL; /* an optimizer given by name: its defaults */
    tnt_compile_opts co = {0};
    float weights[TNT_MAX_IO];
    if ((s = loss_weights(m, cJSON_GetObjectItemCaseSensitive(tc, "loss_weights"), path, weights, &co)) != TNT_OK)
        goto done;
    const cJSON *loss = cJSON_GetObjectItemCaseSensitive(tc, "loss");
    const cJSON *lcfg = NULL;
    const char *lname = NULL;
    if (cJSON_IsObject(loss)) {
        const cJSON *cn = cJSON_GetObjectItemCaseSensitive(loss, "class_name");
        lname = cJSON_IsString(cn) ? cn->valuestring : NULL;
        lcfg = cJSON_GetObjectItemCaseSensitive(loss, "config");
    } else if (cJSON_IsString(loss)) {
        lname = loss->valuestring;
    }
    tnt_loss_kind per_output[TNT_MAX_IO];
    if (cJSON_IsArray(loss) || (cJSON_IsObject(loss) && !cJSON_GetObjectItemCaseSensitive(loss, "class_name"))) {
        /* a loss per output: a list in output order, or a dict by output name (names only) */
        int n = cJSON_GetArraySize(loss);
        if (n != m->n_outputs) {
            s = tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config has %d losses for %d outputs", path, n,
                           m->n_outputs);
            goto done;
        }
        for (int k = 0; k < n; k++) {
            const cJSON *e = cJSON_IsArray(loss) ? cJSON_GetArrayItem(loss, k)
                                                 : cJSON_GetObjectItemCaseSensitive(loss, tnt__model_output_name(m, k));
            if (cJSON_IsObject(e)) { /* a loss object, as Keras serializes one: its class, its options */
                const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(e, "config");
                e = cJSON_GetObjectItemCaseSensitive(e, "class_name");
                if (cJSON_IsObject(cfg) && !lcfg) lcfg = cfg; /* the library has one set of options for all */
            }
            int kk = cJSON_IsString(e) ? tnt_loss_from_name(e->valuestring) : -1;
            if (kk < 0) {
                s = cJSON_IsString(e) ? tnt__error_prefix(TNT_ERR_UNSUPPORTED, "load_model %s: training_config: ", path)
                                      : tnt__error(TNT_ERR_UNSUPPORTED, "load_model %s: training_config: loss of output "
                                                   "%d is not a loss name", path, k);
                goto done;
            }
            per_output[k] = (tnt_loss_kind)kk;
        }
        co.output_losses = per_output;
        co.n_output_losses = n;
        lname = tnt_loss_name(per_output[0]);
    }
    int lk = lname ? tnt_loss_from_name(lname) : -1;
    if (lk < 0) {
        s = lname ? tnt__error_prefix(TNT_ERR_UNSUPPORTED, "load_model %s: training_config: ", path)
                  : tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config has no loss name", path);
        goto done;
    }
    co.loss = (tnt_loss_kind)lk;
    if (lcfg) {
        co.from_logits = flag(lcfg, "from_logits");
        co.label_smoothing = (float)num(lcfg, "label_smoothing");
        const cJSON *ic = cJSON_GetObjectItemCaseSensitive(lcfg, "ignore_class");
        if (cJSON_IsNumber(ic)) co.has_ignore_class = true, co.ignore_class = ic->valueint;
        if (co.loss == TNT_HUBER) co.huber_delta = (float)num(lcfg, "delta");
    }
    char metrics[2048] = "", weighted[1024] = "";
    const cJSON *met = cJSON_GetObjectItemCaseSensitive(tc, "metrics");
    if (met && (s = metrics_of(m, met, metrics, sizeof metrics, path)) != TNT_OK) goto done;
    const cJSON *wmet = cJSON_GetObjectItemCaseSensitive(tc, "weighted_metrics");
    if (wmet && (s = metrics_of(m, wmet, weighted, sizeof weighted, path)) != TNT_OK) goto done;
    if ((s = add_weighted(metrics, sizeof metrics, weighted, path)) != TNT_OK) goto done;
    co.metrics = metrics;
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(tc, "tnt_seed");
    if (cJSON_IsString(seed)) co.seed = strtoull(seed->valuestring, NULL, 10);

    const cJSON *oc = cJSON_GetObjectItemCaseSensitive(tc, "optimizer_config");
    if (!oc) oc = cJSON_GetObjectItemCaseSensitive(tc, "optimizer");
    const cJSON *ocn = cJSON_IsString(oc) ? oc : cJSON_GetObjectItemCaseSensitive(oc, "class_name");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(oc, "config");
    if (cJSON_IsString(oc) && (no_config = cJSON_CreateObject())) c = no_config;
    if (!cJSON_IsString(ocn) || !cJSON_IsObject(c)) {
        s = tnt__error(TNT_ERR_FORMAT, "load_model %s: the training configuration has no optimizer with class_name and config", path);
        goto done;
    }
    /* Keras 2.0-2.2 wrote the rate as "lr", Keras 2.3+ and tf.keras as "learning_rate" */
    const char *lr_key = cJSON_GetObjectItemCaseSensitive(c, "learning_rate") ? "learning_rate" : "lr";
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(c, lr_key);
    if (lr && !cJSON_IsNumber(lr)) {
        s = tnt__error(TNT_ERR_UNSUPPORTED, "load_model %s: the optimizer's learning_rate is not a number (a "
                                            "learning-rate schedule?): not supported",
                       path);
        goto done;
    }
    if (num(c, "decay") != 0) /* the time-based decay of Keras <= 2.3's optimizers */
        tnt_log(TNT_LOG_WARNING, "load_model %s: the optimizer's decay %g is not supported and is ignored "
                "(set a learning-rate schedule instead)", path, num(c, "decay"));
    tnt_optimizer_opts oo = {
        .learning_rate = (float)num(c, lr_key),
        .momentum = (float)num(c, "momentum"),
        .nesterov = flag(c, "nesterov"),
        .beta_1 = (float)num(c, "beta_1"),
        .beta_2 = (float)num(c, "beta_2"),
        .epsilon = (float)num(c, "epsilon"),
        .rho = (float)num(c, "rho"),
        .amsgrad = flag(c, "amsgrad"),
        .centered = flag(c, "centered"),
        .initial_accumulator_value = (float)num(c, "initial_accumulator_value"),
        .weight_decay = (float)num(c, "weight_decay"),
        .clipvalue = (float)num(c, "clipvalue"),
    };
    co.optimizer = tnt_optimizer_new(ocn->valuestring, &oo);
    if (!co.optimizer) {
        s = tnt__error_prefix(TNT_ERR_UNSUPPORTED, "load_model %s: training_config: ", path);
        goto done;
    }
    /* a learning rate of exactly 0 means the default to tnt_optimizer_new */
    if (cJSON_IsNumber(lr) && lr->valuedouble == 0) tnt_optimizer_set_lr(co.optimizer, 0);
    s = tnt_compile(m, &co); /* consumes the optimizer */
    if (s != TNT_OK) tnt__error_prefix(s, "load_model %s: ", path);
done:
    cJSON_Delete(no_config);
    return s;
}

