/* regularizer.h: Keras regularizers and constraints on a layer's weights and output
 * (regularizer.c, and their Keras configs in regularizer_config.c).
 *
 * A layer keeps them by Keras key, as its config spells them: "kernel_regularizer",
 * "recurrent_constraint", "activity_regularizer". Key "X_regularizer" (or "X_constraint") acts on
 * the layer's weights named X, X_kernel (recurrent_kernel, depthwise_kernel) or ending in /X
 * (MultiHeadAttention's query/kernel, ...): a key whose weight the layer lacks (bias_regularizer
 * without a bias) does nothing, as in Keras.
 * Semantics (Keras 2): the training loss gains l1 * sum|w| + l2 * sum(w^2) per regularized weight
 * and, per activity regularizer, the same penalty on the layer's output divided by the batch
 * size; constraints project a weight after each optimizer update. */
#ifndef TNT_REGULARIZER_H
#define TNT_REGULARIZER_H

#include "layers/layer.h"

#include <cjson/cJSON.h>

/* a traced layer may constrain each of its weights (TNT_MAX_LAYER_WEIGHTS) */
#define TNT_MAX_LAYER_RULES 40

typedef struct tnt__rule {
    char key[TNT_NAME_MAX];  /* Keras key: "kernel_regularizer", "bias_constraint" */
    bool is_constraint;
    tnt_regularizer_kind reg;
    float l1, l2;            /* the penalty's factors; 0 for a term the kind has not */
    float factor;            /* TNT_REG_ORTHOGONAL's */
    bool columns;            /* TNT_REG_ORTHOGONAL's mode: "columns" (else "rows") */
    tnt_constraint con;
    char weight[TNT_NAME_MAX]; /* non-empty: acts on this weight alone, by its exact name (a traced
                                * layer's add_weight(constraint=...), kept in its config) */
} tnt__rule;

struct tnt__rules {
    int n;
    tnt__rule r[TNT_MAX_LAYER_RULES];
};

/* Sets (or with kind NONE removes) the rule of key (and weight), without checking that the layer's config has
 * the key (ActivityRegularization, whose config spells its penalty l1 and l2). */
tnt_status tnt__layer_set_rule(tnt_layer *l, const tnt__rule *rule);
/* The rule acts on weight w (never true for the activity regularizer). */
bool tnt__rule_applies(const tnt__rule *rule, const tnt__weight *w);

/* l1 * sum|w| + l2 * sum(w^2) over the layer's regularized weights. */
double tnt__layer_weight_penalty(tnt_layer *l);
/* Adds the gradient of that penalty to the trainable weights' gradients. */
void tnt__layer_add_penalty_grads(tnt_layer *l);
/* Each weight an OrthogonalRegularizer acts on has rank 2 (Keras refuses another) and each
 * constraint's axes are the weight's; the error names the layer, the key and the weight. */
tnt_status tnt__layer_check_rules(const tnt_layer *l);
/* Projects each constrained weight (after an optimizer update); fails on an axis the weight lacks. */
tnt_status tnt__layer_apply_constraints(tnt_layer *l);
/* c's kind, axes count and values are valid; the error names layer and key. */
tnt_status tnt__constraint_check(const tnt_constraint *c, const char *layer, const char *key);
/* The activity penalty of output y (n values), not yet divided by the batch; 0 without one. */
double tnt__layer_activity_penalty(const tnt_layer *l, const float *y, int64_t n);
/* dy += scale * d(penalty)/dy: scale is 1 / the global batch size. */
void tnt__layer_add_activity_grad(const tnt_layer *l, const float *y, float *dy, int64_t n, double scale);
bool tnt__layer_has_activity_rule(const tnt_layer *l);
/* h extended by the layer's rules (keys and values): ranks must train under the same ones. */
uint64_t tnt__layer_rules_hash(const tnt_layer *l, uint64_t h);

/* ---- Keras configs (regularizer_config.c) -------------------------------------------------- */

/* key ends in "_regularizer" or "_constraint": read and written here, not by the layer. */
bool tnt__kj_is_rule_key(const char *key);
/* The layer's Keras config (its get_config) has key. */
bool tnt__layer_config_has_key(const tnt_layer *l, const char *key);
/* ops->from_config (on Keras 2's names of a Keras 1 config, tnt__kj_keras1), then a channels_first
 * data_format (tnt_layer_set_data_format) and the layer's non-null regularizer and constraint keys. */
tnt_layer *tnt__layer_from_config(const tnt__layer_ops *ops, const cJSON *config, const struct tnt__kj_ctx *k);
/* A constraint in a Keras config (a name or {"class_name", "config"}) into r->con; r->key names it
 * in errors. */
tnt_status tnt__kj_read_constraint(const cJSON *v, tnt__rule *r, const struct tnt__kj_ctx *k);
/* r in Keras's spelling ({"class_name", "config"}); NULL when out of memory. */
cJSON *tnt__rule_json(const tnt__rule *r);
/* Each rule of rules (NULL: none) in Keras's spelling over the null config has at its key (not the
 * rules of one weight, which their layer writes). */
tnt_status tnt__rules_write(const struct tnt__rules *rules, cJSON *config);
/* ops->get_config, then each rule in Keras's spelling over the null the layer wrote. */
tnt_status tnt__layer_get_config(const tnt_layer *l, cJSON *config);

#endif
