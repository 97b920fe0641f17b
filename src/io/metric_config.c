/* metric_config.c: compiled metrics in a file's training_config as Keras writes them: the name
 * given to compile when it says everything, else the metric object Keras serializes
 * ({"class_name": "Precision", "config": {"name": "precision", "thresholds": 0.3}}), so that a
 * metric with its own name or parameters loads back as it was compiled. */
#include "io/metric_config.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Keras's metric classes per kind, and the config key of the kind's parameter (NULL: none). */
static const struct { int kind; const char *cls, *param; } CLASSES[] = {
    {TNT__METRIC_SPARSE_CATEGORICAL_ACCURACY, "SparseCategoricalAccuracy", NULL},
    {TNT__METRIC_CATEGORICAL_ACCURACY, "CategoricalAccuracy", NULL},
    {TNT__METRIC_BINARY_ACCURACY, "BinaryAccuracy", "threshold"},
    {TNT__METRIC_SPARSE_TOP_K, "SparseTopKCategoricalAccuracy", "k"},
    {TNT__METRIC_TOP_K, "TopKCategoricalAccuracy", "k"},
    {TNT__METRIC_MSE, "MeanSquaredError", NULL},
    {TNT__METRIC_MAE, "MeanAbsoluteError", NULL},
    {TNT__METRIC_SPARSE_CE, "SparseCategoricalCrossentropy", NULL},
    {TNT__METRIC_CE, "CategoricalCrossentropy", NULL},
    {TNT__METRIC_BCE, "BinaryCrossentropy", NULL},
    {TNT__METRIC_KLD, "KLDivergence", NULL},
    {TNT__METRIC_HINGE, "Hinge", NULL},
    {TNT__METRIC_SQUARED_HINGE, "SquaredHinge", NULL},
    {TNT__METRIC_CATEGORICAL_HINGE, "CategoricalHinge", NULL},
    {TNT__METRIC_LOGCOSH, "LogCoshError", NULL},
    {TNT__METRIC_POISSON, "Poisson", NULL},
    {TNT__METRIC_MAPE, "MeanAbsolutePercentageError", NULL},
    {TNT__METRIC_MSLE, "MeanSquaredLogarithmicError", NULL},
    {TNT__METRIC_COSINE, "CosineSimilarity", NULL},
    {TNT__METRIC_RMSE, "RootMeanSquaredError", NULL},
    {TNT__METRIC_EQUAL, "Accuracy", NULL},
    {TNT__METRIC_TP, "TruePositives", "thresholds"},
    {TNT__METRIC_FP, "FalsePositives", "thresholds"},
    {TNT__METRIC_TN, "TrueNegatives", "thresholds"},
    {TNT__METRIC_FN, "FalseNegatives", "thresholds"},
    {TNT__METRIC_PRECISION, "Precision", "thresholds"},
    {TNT__METRIC_RECALL, "Recall", "thresholds"},
    {TNT__METRIC_AUC, "AUC", "num_thresholds"},
    {TNT__METRIC_PR_AUC, "AUC", "num_thresholds"},
    {TNT__METRIC_PRECISION_AT_RECALL, "PrecisionAtRecall", "recall"},
    {TNT__METRIC_RECALL_AT_PRECISION, "RecallAtPrecision", "precision"},
    {TNT__METRIC_SENSITIVITY_AT_SPECIFICITY, "SensitivityAtSpecificity", "specificity"},
    {TNT__METRIC_SPECIFICITY_AT_SENSITIVITY, "SpecificityAtSensitivity", "sensitivity"},
};

/* The spec keys of the kinds whose class name does not say them */
static const char *spec_key(int kind) {
    switch (kind) {
    case TNT__METRIC_EQUAL: return "equal_accuracy";
    case TNT__METRIC_PR_AUC: return "pr_auc";
    default: return NULL;
    }
}

/* The name alone gives mt back: it names mt's kind, whose parameters are their defaults. */
static bool says_all(const tnt__metric *mt, const char *name) {
    int kind = mt->kind;
    if (tnt__metric_kind_of(name) != kind) return false;
    bool top_k = kind == TNT__METRIC_SPARSE_TOP_K || kind == TNT__METRIC_TOP_K;
    bool curve = kind >= TNT__METRIC_AUC && kind <= TNT__METRIC_SPECIFICITY_AT_SENSITIVITY;
    bool at_target = kind >= TNT__METRIC_PRECISION_AT_RECALL;
    return !at_target && mt->k == (top_k ? 5 : 0) && mt->num_thresholds == (curve ? TNT__AUC_MAX_THRESHOLDS : 0) &&
           fabsf(mt->threshold - 0.5f) < 1e-7f;
}

cJSON *tnt__metric_config(const tnt__metric *mt, const char *name) {
    int c = -1;
    for (size_t i = 0; i < sizeof CLASSES / sizeof CLASSES[0]; i++)
        if (CLASSES[i].kind == mt->kind) c = (int)i;
    if (c < 0 || says_all(mt, name)) return cJSON_CreateString(name);
    cJSON *o = cJSON_CreateObject(), *cfg = NULL;
    bool ok = o && cJSON_AddStringToObject(o, "class_name", CLASSES[c].cls) && (cfg = cJSON_AddObjectToObject(o, "config")) &&
              cJSON_AddStringToObject(cfg, "name", name) && cJSON_AddStringToObject(cfg, "dtype", "float32");
    const char *param = CLASSES[c].param;
    double v = mt->kind == TNT__METRIC_SPARSE_TOP_K || mt->kind == TNT__METRIC_TOP_K ? mt->k
               : mt->kind == TNT__METRIC_AUC || mt->kind == TNT__METRIC_PR_AUC    ? mt->num_thresholds
                                                                                  : (double)mt->threshold;
    if (ok && param) ok = cJSON_AddNumberToObject(cfg, param, v) != NULL;
    if (ok && (mt->kind == TNT__METRIC_AUC || mt->kind == TNT__METRIC_PR_AUC))
        ok = cJSON_AddStringToObject(cfg, "curve", mt->kind == TNT__METRIC_PR_AUC ? "PR" : "ROC") &&
             cJSON_AddStringToObject(cfg, "summation_method", "interpolation") && cJSON_AddFalseToObject(cfg, "multi_label");
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

tnt_status tnt__metric_spec_from_config(const cJSON *x, char *out, size_t size, const char *path) {
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(x, "class_name");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(x, "config");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cfg, "name");
    if (!cJSON_IsString(cn))
        return tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config: a metric object has no class_name", path);
    int c = -1;
    for (size_t i = 0; i < sizeof CLASSES / sizeof CLASSES[0] && c < 0; i++)
        if (!strcmp(CLASSES[i].cls, cn->valuestring)) c = (int)i;
    const cJSON *curve = cJSON_GetObjectItemCaseSensitive(cfg, "curve");
    if (c >= 0 && CLASSES[c].kind == TNT__METRIC_AUC && cJSON_IsString(curve) && !strcmp(curve->valuestring, "PR"))
        c++; /* the PR curve's AUC, next in the table */
    const char *key = c >= 0 && spec_key(CLASSES[c].kind) ? spec_key(CLASSES[c].kind) : cn->valuestring;
    char param[48] = "";
    const cJSON *p = c >= 0 && CLASSES[c].param ? cJSON_GetObjectItemCaseSensitive(cfg, CLASSES[c].param) : NULL;
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0); /* thresholds=[t] */
    if (cJSON_IsArray(p))
        return tnt__error(TNT_ERR_UNSUPPORTED, "load_model %s: training_config: metric %s with %d %s (one is supported)",
                          path, cn->valuestring, cJSON_GetArraySize(p), CLASSES[c].param);
    if (cJSON_IsNumber(p)) snprintf(param, sizeof param, ":%.9g", p->valuedouble);
    int n = cJSON_IsString(name) ? snprintf(out, size, "%s=%s%s", name->valuestring, key, param)
                                 : snprintf(out, size, "%s%s", key, param);
    if (n < 0 || (size_t)n >= size)
        return tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config: metric %s: name too long", path, cn->valuestring);
    return TNT_OK;
}
