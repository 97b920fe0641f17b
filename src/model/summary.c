/* summary.c: tnt_model_summary, Keras's model.summary() table: each layer with its output shape
 * (the list of them for a layer with several outputs), its parameters and, in a Functional
 * model, the tensors each call reads ("lstm[0][1]": the layer, its call, the output). */
#include "model/model.h"

#include <stdio.h>

/* 1234567 -> "1,234,567" */
static char *with_commas(int64_t v, char *buf, size_t size) {
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%lld", (long long)v), j = 0;
    for (int i = 0; i < len && (size_t)j + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[j++] = ',';
        buf[j++] = raw[i];
    }
    buf[j] = '\0';
    return buf;
}

/* Keras's "Connected to" entry of tensor t: "conv2d[0][0]", the producer layer and its call
 * index; a model input names its InputLayer. */
static void producer_name(const tnt_model *m, int t, char *buf, size_t size) {
    int index, i = tnt__tensor_producer(m, t, &index);
    if (i < 0) {
        snprintf(buf, size, "?");
        return;
    }
    const tnt__node *n = &m->nodes[i];
    int call = 0;
    for (int k = 0; k < i; k++) call += m->nodes[k].layer == n->layer;
    snprintf(buf, size, "%s[%d][%d]", n->layer->name, call, index);
}

tnt_status tnt_model_summary(const tnt_model *m, FILE *out) {
    if (!m) return tnt__error(TNT_ERR_ARG, "summary: model is NULL");
    if (!out) out = stdout;
    const char *rule = tnt__model_keras_functional(m) ? "__________________________________________________________________________________________________"
                                     : "_________________________________________________________________";
    const char *dbl = tnt__model_keras_functional(m) ? "=================================================================================================="
                                    : "=================================================================";
    fprintf(out, "Model: \"%s\"\n%s\n", m->name, rule);
    fprintf(out, " %-28s%-26s%-10s%s\n%s\n", "Layer (type)", "Output Shape", "Param #",
            tnt__model_keras_functional(m) ? " Connected to" : "", dbl);
    int64_t total = 0, trainable = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const tnt_layer *l = m->layers[i];
        char col[320], shape[160], n[32];
        int64_t params = 0;
        for (int j = 0; j < l->n_weights; j++) {
            int64_t k = tnt_shape_numel(l->weights[j].shape);
            params += k;
            if (l->weights[j].trainable && !l->frozen) trainable += k; /* Keras: a frozen layer's are not */
        }
        total += params;
        char scope[160]; /* a nested model's layer: "inner/dense" */
        tnt__scope_path(m, tnt__layer_scope(m, l), scope, sizeof scope);
        snprintf(col, sizeof col, "%s%s%s (%s)", scope, *scope ? "/" : "", l->name, l->ops->class_name);
        int first = 0; /* the output of its first call, None where it varies */
        while (first < m->n_nodes && m->nodes[first].layer != l) first++;
        if (l->built && first < m->n_nodes && l->n_outputs > 1) { /* Keras: the list of output shapes */
            size_t len = (size_t)snprintf(shape, sizeof shape, "[");
            for (int k = 0; k < l->n_outputs && len < sizeof shape; k++) {
                char one[64];
                tnt_shape_str(tnt__shape_with_batch(-1, tnt__model_tensor_decl(m, m->nodes[first].out + k)), one, sizeof one);
                len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%s", k ? ", " : "", one);
            }
            if (len < sizeof shape) snprintf(shape + len, sizeof shape - len, "]");
        } else if (l->built && first < m->n_nodes)
            tnt_shape_str(tnt__shape_with_batch(-1, tnt__model_tensor_decl(m, m->nodes[first].out)), shape, sizeof shape);
        else if (l->built) tnt_shape_str(tnt__shape_with_batch(-1, l->out_shape), shape, sizeof shape);
        else snprintf(shape, sizeof shape, "multiple");
        fprintf(out, " %-28s%-25s %-10s", col, shape, with_commas(params, n, sizeof n));
        if (tnt__model_keras_functional(m)) { /* every input of every call: "[]" for an InputLayer */
            bool first = true;
            for (int k = 0; k < m->n_nodes; k++) {
                const tnt__node *nd = &m->nodes[k];
                if (nd->layer != l || tnt__is_input_layer(l)) continue;
                for (int j = 0; j < nd->n_in; j++) {
                    char pn[TNT_NAME_MAX + 24];
                    producer_name(m, nd->in[j], pn, sizeof pn);
                    fprintf(out, "%s%s", first ? " " : ",\n" "                                                                  ", pn);
                    first = false;
                }
            }
            if (first) fprintf(out, " []");
        }
        fprintf(out, "\n%s\n", i + 1 < m->n_layers ? "" : dbl);
    }
    char n[32];
    fprintf(out, "Total params: %s\n", with_commas(total, n, sizeof n));
    fprintf(out, "Trainable params: %s\n", with_commas(trainable, n, sizeof n));
    fprintf(out, "Non-trainable params: %s\n%s\n", with_commas(total - trainable, n, sizeof n), rule);
    return TNT_OK;
}
