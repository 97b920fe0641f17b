/* dtype_policy.c: Keras's mixed precision policies, "float32" and "mixed_bfloat16": the global
 * policy new layers take (keras.mixed_precision.set_global_policy), a layer's own, and their
 * Keras config forms both ways (the writers are in io/: a name in Keras 2 JSON, a DTypePolicy
 * object in Keras 3 .keras files).
 *
 * mixed_bfloat16 as Keras defines it: variables float32, computations bf16. Here the layers with
 * a bf16 engine (Dense, Conv1D, Conv2D, DepthwiseConv2D, MultiHeadAttention) run their matrix
 * products on bf16 operands with float32 accumulation and float32 results; their inputs and
 * outputs between layers stay float32, and so do weights, gradients (and their allreduce), the
 * optimizer state, the loss, softmax and normalization statistics. The other layers compute
 * float32 under either policy.
 *
 * A CPU without native bf16 (oneDNN's ISA below avx512_core_bf16): the layers fall back to
 * float32, with one warning per process, rather than run oneDNN's reference bf16 kernels (tens
 * of times slower); the policy itself is kept (configs and files carry it unchanged). */
#include "kernels/bf16.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <stdatomic.h>
#include <stdio.h>

static const char *const names[] = {
    [TNT__POLICY_FLOAT32] = "float32", [TNT__POLICY_MIXED_BF16] = "mixed_bfloat16", [TNT__POLICY_INT8] = "int8",
    [TNT__POLICY_INT16] = "int16",     [TNT__POLICY_INT32] = "int32",               [TNT__POLICY_INT64] = "int64",
    [TNT__POLICY_UINT8] = "uint8",     [TNT__POLICY_UINT16] = "uint16",             [TNT__POLICY_UINT32] = "uint32",
    [TNT__POLICY_UINT64] = "uint64",   [TNT__POLICY_BOOL] = "bool"};
/* The policies a layer may be given through the API (the integer ones come from files). */
#define N_FLOAT_POLICIES 2

static _Atomic int global_policy = TNT__POLICY_FLOAT32;
static atomic_flag warned = ATOMIC_FLAG_INIT;

const char *tnt__dtype_policy_name(tnt__dtype_policy p) {
    return (unsigned)p < TNT_ARRAY_LEN(names) ? names[p] : "?";
}

tnt_status tnt__dtype_policy_parse(const char *name, tnt__dtype_policy *p, const char *who) {
    for (size_t i = 0; name && i < N_FLOAT_POLICIES; i++)
        if (!strcmp(name, names[i])) {
            *p = (tnt__dtype_policy)i;
            return TNT_OK;
        }
    return tnt__error(TNT_ERR_ARG, "%s: dtype policy %s%.64s%s (expected \"float32\" or \"mixed_bfloat16\")", who,
                      name ? "\"" : "", name ? name : "NULL", name ? "\"" : "");
}

tnt__dtype_policy tnt__dtype_policy_global(void) { return (tnt__dtype_policy)atomic_load(&global_policy); }

/* Once per process: this CPU runs mixed_bfloat16 layers in float32. */
static void warn_fallback(void) {
    if (atomic_flag_test_and_set(&warned)) return;
    tnt_log(TNT_LOG_WARNING,
            "mixed_bfloat16: this CPU has no native bf16 (oneDNN ISA %s; needs avx512_bf16 or AMX): layers "
            "compute in float32 instead (same results as the float32 policy; the policy stays in the model's "
            "configuration)", tnt__bf16_isa_name());
}

bool tnt__layer_bf16(const tnt_layer *l) {
    /* the integer policies compute float32 here */
    if (l->dtype_policy != TNT__POLICY_MIXED_BF16) return false;
    if (tnt__bf16_native()) return true;
    warn_fallback();
    return false;
}

tnt_status tnt_mixed_precision_set_global_policy(const char *name) {
    tnt__dtype_policy p = TNT__POLICY_FLOAT32;
    tnt_status s = tnt__dtype_policy_parse(name, &p, "tnt_mixed_precision_set_global_policy");
    if (s != TNT_OK) return s;
    atomic_store(&global_policy, (int)p);
    if (p == TNT__POLICY_MIXED_BF16 && !tnt__bf16_native()) warn_fallback();
    return TNT_OK;
}

const char *tnt_mixed_precision_global_policy(void) { return tnt__dtype_policy_name(tnt__dtype_policy_global()); }

bool tnt_mixed_precision_native(void) { return tnt__bf16_native(); }

tnt_status tnt_layer_set_dtype_policy(tnt_layer *l, const char *name) {
    if (!l) return tnt__error(TNT_ERR_ARG, "tnt_layer_set_dtype_policy: layer is NULL");
    char who[TNT_NAME_MAX + 64];
    snprintf(who, sizeof who, "%s \"%s\"", l->ops->class_name, l->name);
    tnt__dtype_policy p = TNT__POLICY_FLOAT32;
    tnt_status s = tnt__dtype_policy_parse(name, &p, who);
    if (s != TNT_OK) return s;
    if (l->built && p != l->dtype_policy)
        return tnt__error(TNT_ERR_STATE,
                          "%s: dtype policy \"%s\" set after the layer was built (it is \"%s\"); set it before "
                          "adding the layer to a model, as Keras's dtype= argument", who, name,
                          tnt__dtype_policy_name(l->dtype_policy));
    l->dtype_policy = p;
    if (p == TNT__POLICY_MIXED_BF16 && !tnt__bf16_native()) warn_fallback();
    return TNT_OK;
}

const char *tnt_layer_dtype_policy(const tnt_layer *l) { return l ? tnt__dtype_policy_name(l->dtype_policy) : ""; }

/* The name in a config's "dtype": a string, or a policy object's config.name; NULL when absent. */
static tnt_status dtype_name(const cJSON *c, const char **out, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(c, "dtype");
    *out = NULL;
    if (tnt__kj_absent(v)) return TNT_OK;
    const char *name = NULL;
    if (cJSON_IsString(v)) {
        name = v->valuestring;
    } else if (cJSON_IsObject(v)) { /* Keras 3 DTypePolicy (FloatDTypePolicy in 3.2-3.5), tf.keras Policy */
        const cJSON *cls = tnt__kj_item(v, "class_name"), *n = tnt__kj_item(tnt__kj_item(v, "config"), "name");
        if (!cJSON_IsString(cls) || (strcmp(cls->valuestring, "DTypePolicy") && strcmp(cls->valuestring, "FloatDTypePolicy") &&
                                     strcmp(cls->valuestring, "Policy")))
            return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "dtype: class \"%.64s\" (expected DTypePolicy, FloatDTypePolicy or Policy)",
                                 cJSON_IsString(cls) ? cls->valuestring : "(none)");
        if (!cJSON_IsString(n)) return tnt__kj_error(k, TNT_ERR_FORMAT, "dtype: %s without config.name", cls->valuestring);
        name = n->valuestring;
    } else {
        return tnt__kj_error(k, TNT_ERR_FORMAT, "dtype: expected a policy name or a DTypePolicy object");
    }
    *out = name;
    return TNT_OK;
}

static int policy_index(const char *name) {
    for (size_t i = 0; i < TNT_ARRAY_LEN(names); i++)
        if (!strcmp(name, names[i])) return (int)i;
    return -1;
}

tnt_status tnt__kj_dtype_policy(const cJSON *c, tnt__dtype_policy *p, const tnt__kj_ctx *k) {
    const char *name;
    *p = tnt__dtype_policy_global();
    TNT_KJ_S(dtype_name(c, &name, k));
    if (!name) return TNT_OK;
    int i = policy_index(name);
    /* Keras's Embedding casts its inputs to int32 whatever its policy: an integer one keeps them
     * integers (its embeddings then hold integers, which float32 holds exactly up to 2^24) */
    bool embedding = !strcmp(k->cls, "Embedding");
    if (i >= 0 && (i < N_FLOAT_POLICIES || embedding)) {
        *p = (tnt__dtype_policy)i;
        return TNT_OK;
    }
    if (i >= 0)
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "dtype policy \"%s\": Keras computes this layer in integers "
                             "then; an integer dtype is supported on InputLayer and Embedding (ids)", name);
    return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "dtype policy \"%.64s\" (expected \"float32\" or \"mixed_bfloat16\"%s)",
                         name, embedding ? ", or an integer type" : "");
}

tnt_status tnt__kj_input_dtype(const cJSON *c, tnt__dtype_policy *p, const tnt__kj_ctx *k) {
    const char *name;
    *p = TNT__POLICY_FLOAT32;
    TNT_KJ_S(dtype_name(c, &name, k));
    if (!name || !strcmp(name, "float16") || !strcmp(name, "float64") || !strcmp(name, "bfloat16")) return TNT_OK;
    int i = policy_index(name);
    if (i == TNT__POLICY_MIXED_BF16) return TNT_OK; /* an input of a mixed model: float32 values */
    if (i < 0)
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "dtype \"%.64s\" (expected a float or integer type: float32, "
                             "int32, int64, ...)", name);
    *p = (tnt__dtype_policy)i;
    return TNT_OK;
}
