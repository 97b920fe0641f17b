/* test_json.c: Keras 2 JSON architecture (tnt_model_to_json, tnt_model_from_json,
 * tnt_clone_model): every layer class round trips (config -> JSON -> config gives the same
 * string), Sequential and Functional models keep their summaries and parameter counts, Keras
 * 2.11 JSON written in Keras's format (tests/fixtures/keras_*.json) loads with the expected
 * parameter counts and shapes, errors name what is wrong, and a deterministic mutation fuzzer
 * throws corrupted JSON at the reader. */
#include "json_harness.h"
#include "layers/layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void test_layer_round_trips(void **state) {
    (void)state;
    check_layer(TNT_SHAPE(5), tnt_dense(7, &(tnt_layer_opts){.activation = TNT_ACT_RELU, .no_bias = true,
                                                            .kernel_initializer = TNT_INIT_HE_NORMAL}),
                "Dense", "\"units\":7,\"activation\":\"relu\",\"use_bias\":false,\"kernel_initializer\":{\"class_name\":"
                "\"HeNormal\",\"config\":{\"seed\":null}},\"bias_initializer\":{\"class_name\":\"Zeros\",\"config\":{}}");
    check_layer(TNT_SHAPE(8, 8, 3),
                tnt_conv2d(4, 3, 2, &(tnt_layer_opts){.strides = {2, 1}, .padding = TNT_PADDING_SAME,
                                                      .activation = TNT_ACT_TANH}),
                "Conv2D", "\"filters\":4,\"kernel_size\":[3,2],\"strides\":[2,1],\"padding\":\"same\",\"data_format\":"
                "\"channels_last\",\"dilation_rate\":[1,1],\"groups\":1,\"activation\":\"tanh\"");
    check_layer(TNT_SHAPE(9, 9, 2), tnt_conv2d(3, 3, 3, &(tnt_layer_opts){.dilation = {2, 2}}), "Conv2D",
                "\"dilation_rate\":[2,2]");
    check_layer(TNT_SHAPE(10, 3),
                tnt_conv1d(4, 3, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL, .dilation = {2}}), "Conv1D",
                "\"kernel_size\":[3],\"strides\":[1],\"padding\":\"causal\"");
    check_layer(TNT_SHAPE(8, 8, 3),
                tnt_depthwise_conv2d(3, 3, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}), "DepthwiseConv2D",
                "\"depth_multiplier\":2,\"depthwise_initializer\"");
    check_layer(TNT_SHAPE(8, 8, 3),
                tnt_separable_conv2d(5, 3, 3, 2, &(tnt_layer_opts){.strides = {2, 2}, .activation = TNT_ACT_RELU}),
                "SeparableConv2D", "\"pointwise_initializer\"");
    check_layer(TNT_SHAPE(8, 8, 3),
                tnt_separable_conv2d(4, 3, 3, 0, &(tnt_layer_opts){.kernel_initializer = TNT_INIT_HE_UNIFORM}),
                "SeparableConv2D", "\"depth_multiplier\":1,\"depthwise_initializer\":{\"class_name\":\"HeUniform\"");
    check_layer(TNT_SHAPE(6, 6, 2),
                tnt_max_pooling2d(2, 2, &(tnt_layer_opts){.strides = {1, 1}, .padding = TNT_PADDING_SAME}),
                "MaxPooling2D", "\"pool_size\":[2,2],\"padding\":\"same\",\"strides\":[1,1]");
    check_layer(TNT_SHAPE(6, 6, 2), tnt_average_pooling2d(3, 3, NULL), "AveragePooling2D", "\"strides\":[3,3]");
    check_layer(TNT_SHAPE(7, 2), tnt_max_pooling1d(2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}),
                "MaxPooling1D", "\"pool_size\":[2]");
    check_layer(TNT_SHAPE(4, 4, 3), tnt_global_average_pooling2d(NULL), "GlobalAveragePooling2D", "\"keepdims\":false");
    check_layer(TNT_SHAPE(4, 4, 3), tnt_global_max_pooling2d("gmp"), "GlobalMaxPooling2D", "\"name\":\"gmp\"");
    check_layer(TNT_SHAPE(5, 3), tnt_global_average_pooling1d(NULL), "GlobalAveragePooling1D", NULL);
    check_layer(TNT_SHAPE(4, 4, 1), tnt_zero_padding2d(1, 2, 3, 4, NULL), "ZeroPadding2D", "\"padding\":[[1,2],[3,4]]");
    check_layer(TNT_SHAPE(6, 6, 1), tnt_cropping2d(1, 0, 2, 1, NULL), "Cropping2D", "\"cropping\":[[1,0],[2,1]]");
    check_layer(TNT_SHAPE(3, 3, 2), tnt_upsampling2d(2, 3, NULL, NULL), "UpSampling2D",
                "\"size\":[2,3],\"data_format\":\"channels_last\",\"interpolation\":\"nearest\"");
    check_layer(TNT_SHAPE(3, 3, 2), tnt_flatten(NULL), "Flatten", "\"data_format\":\"channels_last\"");
    check_layer(TNT_SHAPE(4, 4, 2), tnt_reshape(TNT_SHAPE(-1, 4), NULL), "Reshape", "\"target_shape\":[-1,4]");
    check_layer(TNT_SHAPE(3, 4, 5), tnt_permute(3, (int[]){3, 1, 2}, NULL), "Permute", "\"dims\":[3,1,2]");
    check_layer(TNT_SHAPE(5), tnt_repeat_vector(3, NULL), "RepeatVector", "\"n\":3");
    check_layer(TNT_SHAPE(5), tnt_dropout(0.25f, 7, NULL), "Dropout", "\"rate\":0.25,\"noise_shape\":null,\"seed\":7");
    check_layer(TNT_SHAPE(5), tnt_dropout(0.1f, 0, NULL), "Dropout", "\"rate\":0.1,\"noise_shape\":null,\"seed\":null");
    check_layer(TNT_SHAPE(5), tnt_activation_layer(TNT_ACT_GELU, NULL), "Activation", "\"activation\":\"gelu\"");
    check_layer(TNT_SHAPE(4, 4, 3), tnt_batch_normalization(0.9f, 1e-5f, NULL), "BatchNormalization",
                "\"axis\":[3],\"momentum\":0.9,\"epsilon\":1e-05,\"center\":true");
    check_layer(TNT_SHAPE(6), tnt_sync_batch_normalization(0, 0, NULL), "SyncBatchNormalization",
                "\"axis\":[1],\"momentum\":0.99,\"epsilon\":0.001");
    check_layer(TNT_SHAPE(3, 6), tnt_layer_normalization(1e-6f, NULL), "LayerNormalization",
                "\"axis\":[2],\"epsilon\":1e-06");
    check_layer(TNT_SHAPE(6), tnt_embedding(100, 8, true, NULL), "Embedding",
                "\"input_dim\":100,\"output_dim\":8,\"embeddings_initializer\":{\"class_name\":\"RandomUniform\","
                "\"config\":{\"minval\":-0.05,\"maxval\":0.05,\"seed\":null}}");
}

/* Merge layers, Concatenate and MultiHeadAttention (several inputs): Functional models. */
static tnt_model *merge_model(tnt_layer *layer, int n) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in[3];
    for (int k = 0; k < n; k++) in[k] = tnt_graph_input(g, TNT_SHAPE(4, 6), NULL);
    tnt_ktensor y = tnt_call_n(g, layer, n, in);
    tnt_model *m = tnt_functional(g, n, in, 1, &y, "merge");
    if (!m) fail_msg("functional: %s", tnt_last_error());
    tnt_graph_free(g);
    return m;
}

static void test_multi_input_round_trips(void **state) {
    (void)state;
    struct {
        tnt_layer *l;
        int n;
        const char *cls;
    } cases[] = {
        {tnt_add(NULL), 3, "Add"},         {tnt_subtract(NULL), 2, "Subtract"}, {tnt_multiply(NULL), 2, "Multiply"},
        {tnt_average(NULL), 3, "Average"}, {tnt_maximum(NULL), 2, "Maximum"},   {tnt_minimum(NULL), 2, "Minimum"},
        {tnt_concatenate(1, NULL), 3, "Concatenate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *j = round_trip(merge_model(cases[i].l, cases[i].n));
        char want[64];
        snprintf(want, sizeof want, "\"class_name\":\"%s\"", cases[i].cls);
        if (!strstr(j, want)) fail_msg("%s missing in %s", want, j);
        free(j);
    }
    /* MultiHeadAttention: self-attention with a causal mask, then cross-attention with a key and
     * an attention mask; masks from an Embedding with mask_zero reach it too */
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ids = tnt_graph_input(g, TNT_SHAPE(5), "ids");
    tnt_ktensor mem = tnt_graph_input(g, TNT_SHAPE(7, 6), "memory");
    tnt_ktensor keys = tnt_graph_input(g, TNT_SHAPE(7, 3), "keys");
    tnt_ktensor am = tnt_graph_input(g, TNT_SHAPE(5, 7), "mask");
    tnt_ktensor x = tnt_call(g, tnt_embedding(50, 8, true, "emb"), ids);
    tnt_ktensor none = {-1};
    tnt_ktensor a = tnt_call_attention(g, tnt_multi_head_attention(2, 4, &(tnt_attention_opts){.name = "self"}), x, x,
                                       none, none, true);
    tnt_ktensor b = tnt_call_attention(g,
                                       tnt_multi_head_attention(3, 2, &(tnt_attention_opts){.value_dim = 5,
                                                                                            .output_dim = 9,
                                                                                            .dropout = 0.1f,
                                                                                            .no_bias = true}),
                                       a, mem, keys, am, false);
    tnt_model *m = tnt_functional(g, 4, (tnt_ktensor[]){ids, mem, keys, am}, 1, &b, "attn");
    if (!m) fail_msg("functional: %s", tnt_last_error());
    tnt_graph_free(g);
    char *j = round_trip(m);
    if (!strstr(j, "[[[\"emb\",0,0,{\"value\":[\"emb\",0,0],\"use_causal_mask\":true}]]]"))
        fail_msg("self-attention node missing: %s", j);
    if (!strstr(j, "{\"value\":[\"memory\",0,0],\"key\":[\"keys\",0,0],\"attention_mask\":[\"mask\",0,0]}"))
        fail_msg("cross-attention node missing: %s", j);
    if (!strstr(j, "\"num_heads\":3,\"key_dim\":2,\"value_dim\":5,\"dropout\":0.1,\"use_bias\":false,"
                   "\"output_shape\":9"))
        fail_msg("MultiHeadAttention config: %s", j);
    free(j);
}

/* A small CNN as Sequential, with and without an InputLayer. */
static void test_sequential_model(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("cnn");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(28, 28, 1), "image")));
    tu_ok(tnt_model_add(m, tnt_conv2d(8, 3, 3, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_batch_normalization(0, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(16, 3, 3, &(tnt_layer_opts){.activation = TNT_ACT_RELU, .padding = TNT_PADDING_SAME})));
    tu_ok(tnt_model_add(m, tnt_global_average_pooling2d(NULL)));
    tu_ok(tnt_model_add(m, tnt_dropout(0.5f, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    int64_t params = tnt_model_count_params(m);
    char *j = round_trip(m);
    assert_non_null(strstr(j, "{\"class_name\":\"Sequential\",\"config\":{\"name\":\"cnn\",\"layers\":[{\"class_name\":"
                              "\"InputLayer\",\"config\":{\"batch_input_shape\":[null,28,28,1],\"dtype\":\"float32\","
                              "\"sparse\":false,\"ragged\":false,\"name\":\"image\"}}"));
    assert_non_null(strstr(j, "\"keras_version\":\"2.11.0\",\"backend\":\"tensorflow\"}"));
    tnt_model *r = tnt_model_from_json(j);
    assert_non_null(r);
    assert_int_equal(tnt_model_count_params(r), params);
    tnt_model_free(r);
    free(j);

    /* built with tnt_model_build: the first layer carries batch_input_shape, as Keras */
    m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_dense(4, &(tnt_layer_opts){.name = "d0"})));
    tu_ok(tnt_model_add(m, tnt_dense(2, NULL)));
    tu_ok(tnt_model_build(m, TNT_SHAPE(3)));
    j = round_trip(m);
    assert_non_null(strstr(j, "\"name\":\"d0\",\"trainable\":true,\"batch_input_shape\":[null,3],\"dtype\":\"float32\""));
    free(j);
}

/* Branches, Add, Concatenate and a layer shared by two branches. */
static void test_functional_model(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(16, 16, 3), "image");
    tnt_ktensor aux = tnt_graph_input(g, TNT_SHAPE(5), "aux");
    tnt_ktensor x = tnt_call(g, tnt_conv2d(8, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .name = "stem"}), in);
    tnt_ktensor b1 = tnt_call(g, tnt_conv2d(8, 1, 1, NULL), x);
    tnt_ktensor b2 = tnt_call(g, tnt_depthwise_conv2d(3, 3, 1, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}), x);
    tnt_ktensor s = tnt_call_n(g, tnt_add(NULL), 3, (tnt_ktensor[]){x, b1, b2});
    tnt_ktensor r = tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), s);
    tnt_ktensor p = tnt_call(g, tnt_global_max_pooling2d(NULL), r);
    tnt_layer *shared = tnt_dense(8, &(tnt_layer_opts){.name = "shared", .activation = TNT_ACT_SWISH});
    tnt_ktensor h1 = tnt_call(g, shared, p);
    tnt_ktensor h2 = tnt_call(g, shared, tnt_call(g, tnt_dense(8, NULL), aux));
    tnt_ktensor c = tnt_call2(g, tnt_concatenate(-1, NULL), h1, h2);
    tnt_ktensor o1 = tnt_call(g, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = "cls"}), c);
    tnt_ktensor o2 = tnt_call(g, tnt_dense(1, &(tnt_layer_opts){.name = "reg"}), h2);
    tnt_model *m = tnt_functional(g, 2, (tnt_ktensor[]){in, aux}, 2, (tnt_ktensor[]){o1, o2}, "branches");
    if (!m) fail_msg("functional: %s", tnt_last_error());
    tnt_graph_free(g);
    char *j = round_trip(m);
    assert_non_null(strstr(j, "{\"class_name\":\"Functional\",\"config\":{\"name\":\"branches\",\"layers\":[{\"class_name\":"
                              "\"InputLayer\",\"config\":{\"batch_input_shape\":[null,16,16,3],\"dtype\":\"float32\","
                              "\"sparse\":false,\"ragged\":false,\"name\":\"image\"},\"name\":\"image\",\"inbound_nodes\":[]}"));
    /* the shared layer: two inbound nodes; Concatenate reads both calls */
    assert_non_null(strstr(j, "\"name\":\"shared\",\"inbound_nodes\":[[[\"global_max_pooling2d"));
    assert_non_null(strstr(j, "[[[\"shared\",0,0,{}],[\"shared\",1,0,{}]]]"));
    assert_non_null(strstr(j, "\"input_layers\":[[\"image\",0,0],[\"aux\",0,0]],\"output_layers\":[[\"cls\",0,0],[\"reg\",0,0]]"));
    free(j);
}

/* Keras 2.11's JSON, written in its format by hand (tests/fixtures/keras_*.json). */
static tnt_model *load_fixture(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "fixtures/%s", name);
    char *s = read_text(path);
    tnt_model *m = tnt_model_from_json(s);
    if (!m) fail_msg("%s: %s", name, tnt_last_error());
    free(s);
    return m;
}

static void assert_shape(tnt_shape got, tnt_shape want) {
    char a[96], b[96];
    if (got.ndim != want.ndim || memcmp(got.dim, want.dim, sizeof(int64_t) * (size_t)want.ndim))
        fail_msg("shape %s, expected %s", tnt_shape_str(got, a, sizeof a), tnt_shape_str(want, b, sizeof b));
}

static void test_keras_fixtures(void **state) {
    (void)state;
    /* the Keras MNIST convnet example: 34,826 parameters */
    tnt_model *m = load_fixture("keras_cnn.json");
    assert_int_equal(tnt_model_count_params(m), 34826);
    assert_shape(tnt_model_input_shape(m), TNT_SHAPE(28, 28, 1));
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(10));
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(m, "conv2d_1")), "Conv2D");
    assert_shape(tnt_model_get_layer(m, "max_pooling2d_1")->out_shape, TNT_SHAPE(5, 5, 64));
    /* it trains and predicts */
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.001f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(2, 28, 28, 1)), *y = NULL;
    tu_fill(x->data, 2 * 28 * 28, 3);
    tu_ok(tnt_predict_on_batch(m, x, &y));
    assert_shape(y->shape, TNT_SHAPE(2, 10));
    tnt_tensor_free(x);
    tnt_tensor_free(y);
    tnt_model_free(m);

    /* the functional API guide's MNIST model: 55,050 parameters */
    m = load_fixture("keras_mlp_functional.json");
    assert_int_equal(tnt_model_count_params(m), 55050);
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(10));
    tnt_model_free(m);

    /* a transformer block: Embedding, MultiHeadAttention with kwargs, residual Adds */
    m = load_fixture("keras_transformer.json");
    assert_int_equal(tnt_model_count_params(m), 40610);
    assert_shape(tnt_model_input_shape(m), TNT_SHAPE(16));
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(2));
    assert_shape(tnt_model_get_layer(m, "multi_head_attention")->out_shape, TNT_SHAPE(16, 32));
    tnt_model_free(m);

    /* older files: class "Model", a shared layer with two inbound nodes, unknown keys */
    m = load_fixture("keras_siamese_model.json");
    assert_int_equal(tnt_model_num_inputs(m), 2);
    assert_int_equal(tnt_model_count_params(m), 8 * 10 + 8 + 16 + 1);
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(1));
    tnt_model_free(m);

    /* nested models: a Sequential encoder shared by two inputs (Keras numbers its calls from 1),
     * and a Sequential inside a Sequential; their layers join the outer (Functional) model */
    m = load_fixture("keras_nested.json");
    assert_int_equal(tnt_model_count_params(m), 8 * 4 + 4 + 4 * 2 + 2 + 2 + 1);
    assert_int_equal(tnt_model_num_inputs(m), 2);
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(1));
    assert_non_null(tnt_model_get_layer(m, "enc_2"));
    char *j = round_trip(m);
    free(j);
    m = load_fixture("keras_nested_sequential.json");
    assert_int_equal(tnt_model_count_params(m), 8 * 3 + 3 + 3 + 1);
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(1));
    tnt_model_free(m);

    /* the old bare-list Sequential form with batch_input_shape on the first layer */
    m = load_fixture("keras_legacy_sequential.json");
    assert_int_equal(tnt_model_count_params(m), 8 * 16 + 16 + 16 * 4 + 4);
    assert_shape(tnt_model_input_shape(m), TNT_SHAPE(8));
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(4));
    tnt_model_free(m);
}

static const char *const seq_head = "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [";
static const char *const input_5 = "{\"class_name\": \"InputLayer\", \"config\": {\"batch_input_shape\": [null, 5], "
                                   "\"dtype\": \"float32\", \"name\": \"in\"}}";

static void expect_layer_error(const char *layer, const char *const *needles) {
    char json[1024];
    snprintf(json, sizeof json, "%s%s, %s]}}", seq_head, input_5, layer);
    expect_error(json, needles);
}

static tnt_status id_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l, (void)user;
    *out = in;
    return TNT_OK;
}
static tnt_status id_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)l, (void)training, (void)user;
    memcpy(y, x, (size_t)batch * 5 * sizeof(float));
    return TNT_OK;
}

static void test_errors(void **state) {
    (void)state;
    /* syntax error: line 3, column 25 (the '}' after '[') */
    expect_error("{\n  \"class_name\": \"Sequential\",\n  \"config\": {\"layers\": [}\n}",
                 (const char *const[]){"syntax error", "line 3, column 25", NULL});
    expect_error("{\"class_name\": \"Sequential\"", (const char *const[]){"line 1, column 28", NULL});
    expect_error("", (const char *const[]){"line 1, column 1", NULL});
    /* unknown layer class: names the layer and the class */
    expect_layer_error("{\"class_name\": \"TokenShuffle\", \"config\": {\"name\": \"pos_emb\"}}",
                       (const char *const[]){"unsupported layer class", "\"TokenShuffle\"", "\"pos_emb\"", NULL});
    /* missing required key */
    expect_layer_error("{\"class_name\": \"Dense\", \"config\": {\"name\": \"head\", \"activation\": \"relu\"}}",
                       (const char *const[]){"\"head\"", "Dense", "missing required key \"units\"", NULL});
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\"}}",
                 (const char *const[]){"missing required key \"layers\"", NULL});
    expect_error("{\"config\": {}}", (const char *const[]){"missing required key \"class_name\"", NULL});
    /* bad activation, bad initializer, an unsupported regularizer */
    expect_layer_error("{\"class_name\": \"Dense\", \"config\": {\"name\": \"head\", \"units\": 3, \"activation\": "
                       "\"swoosh\"}}",
                       (const char *const[]){"\"head\"", "unsupported activation \"swoosh\"", NULL});
    expect_layer_error("{\"class_name\": \"Dense\", \"config\": {\"name\": \"head\", \"units\": 3, \"kernel_initializer\": "
                       "{\"class_name\": \"Ident\", \"config\": {\"gain\": 1.0}}}}",
                       (const char *const[]){"\"head\"", "unsupported initializer \"Ident\"", NULL});
    expect_layer_error("{\"class_name\": \"Dense\", \"config\": {\"name\": \"head\", \"units\": 3, \"kernel_regularizer\": "
                       "{\"class_name\": \"SparsityRegularizer\", \"config\": {\"factor\": 0.01}}}}",
                       (const char *const[]){"\"head\"", "regularizer \"SparsityRegularizer\"", NULL});
    expect_layer_error("{\"class_name\": \"Dense\", \"config\": {\"name\": \"head\", \"units\": \"three\"}}",
                       (const char *const[]){"\"units\": expected an integer", NULL});
    expect_layer_error("{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c\", \"filters\": 3, \"kernel_size\": [3, 3],"
                       " \"data_format\": \"channels_middle\"}}",
                       (const char *const[]){"\"c\"", "data_format \"channels_middle\" (expected \"channels_last\" or "
                                             "\"channels_first\")", NULL});
    expect_layer_error("{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 3, \"data_format\": "
                       "\"channels_first\"}}",
                       (const char *const[]){"\"d\"", "data_format \"channels_first\" (this class has no data_format)",
                                             NULL});
    /* shape errors from the model name the layer */
    expect_layer_error("{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c\", \"filters\": 3, \"kernel_size\": [3, 3]}}",
                       (const char *const[]){"Conv2D", "\"c\"", NULL});
    /* sizes, strides and rates of 0 or below: named, never read as the default 1 */
    expect_layer_error("{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c0\", \"filters\": 3, \"kernel_size\": 3, "
                       "\"strides\": [0, 0]}}",
                       (const char *const[]){"\"c0\"", "Conv2D", "key \"strides\": value 0 (expected >= 1)", NULL});
    expect_layer_error("{\"class_name\": \"Conv1D\", \"config\": {\"name\": \"c1\", \"filters\": 3, \"kernel_size\": 3, "
                       "\"dilation_rate\": [0]}}",
                       (const char *const[]){"\"c1\"", "key \"dilation_rate\": value 0", NULL});
    expect_layer_error("{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c2\", \"filters\": 3, \"kernel_size\": [3, -2]}}",
                       (const char *const[]){"\"c2\"", "key \"kernel_size\": value -2", NULL});
    expect_layer_error("{\"class_name\": \"MaxPooling2D\", \"config\": {\"name\": \"p\", \"pool_size\": [2, 0]}}",
                       (const char *const[]){"\"p\"", "MaxPooling2D", "key \"pool_size\": value 0", NULL});
    expect_layer_error("{\"class_name\": \"MaxPooling1D\", \"config\": {\"name\": \"p1\", \"strides\": -1}}",
                       (const char *const[]){"\"p1\"", "key \"strides\": value -1", NULL});
    /* nested models */
    expect_layer_error("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"inner\", \"layers\": []}}",
                       (const char *const[]){"nested model \"inner\"", "no layers", NULL});
    /* Functional: unknown inbound layer */
    expect_error("{\"class_name\": \"Functional\", \"config\": {\"name\": \"f\", \"layers\": [{\"class_name\": \"InputLayer\", "
                 "\"config\": {\"batch_input_shape\": [null, 4], \"name\": \"x\"}, \"name\": \"x\", \"inbound_nodes\": []}, "
                 "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2}, \"name\": \"d\", \"inbound_nodes\": "
                 "[[[\"y\", 0, 0, {}]]]}], \"input_layers\": [[\"x\", 0, 0]], \"output_layers\": [[\"d\", 0, 0]]}}",
                 (const char *const[]){"\"d\"", "unknown layer \"y\"", NULL});
    expect_error("{\"class_name\": \"Functional\", \"config\": {\"name\": \"f\", \"layers\": [{\"class_name\": \"InputLayer\", "
                 "\"config\": {\"batch_input_shape\": [null, 4], \"name\": \"x\"}, \"name\": \"x\", \"inbound_nodes\": []}, "
                 "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2}, \"name\": \"d\", \"inbound_nodes\": "
                 "[[[\"d\", 0, 0, {}]]]}], \"input_layers\": [[\"x\", 0, 0]], \"output_layers\": [[\"d\", 0, 0]]}}",
                 (const char *const[]){"never produced", NULL});
    /* a None dimension is accepted, but no weight may depend on it (Flatten, then Dense) */
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"InputLayer\", "
                 "\"config\": {\"batch_input_shape\": [null, null, 4], \"name\": \"x\"}}, {\"class_name\": \"Flatten\", "
                 "\"config\": {\"name\": \"f\"}}, {\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2}}]}}",
                 (const char *const[]){"layer \"d\" (Dense)", "kernel", "cannot depend on a variable (None) input dimension", NULL});

    /* a custom layer: to_json writes its class; from_json refuses it by name */
    tnt_custom_layer_def def = {.class_name = "Scale", .build = id_build, .forward = id_forward};
    tnt_model *m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(5), NULL)));
    tu_ok(tnt_model_add(m, tnt_custom_layer(&def, "my_scale")));
    char *j = to_json(m);
    assert_non_null(strstr(j, "{\"class_name\":\"Scale\",\"config\":{\"name\":\"my_scale\",\"trainable\":true,"
                              "\"dtype\":\"float32\"}}"));
    expect_error(j, (const char *const[]){"unsupported layer class \"Scale\"", "\"my_scale\"", NULL});
    assert_null(tnt_clone_model(m));
    tu_error_contains("clone_model");
    free(j);
    tnt_model_free(m);
    assert_null(tnt_model_from_json(NULL));
    assert_int_equal(tnt_model_to_json(NULL, &j), TNT_ERR_ARG);
}

/* Keras's leniency: 1 / 0 for booleans, Keras 3's {"class_name": "__tuple__", "items": [...]} or a
 * list for tuples, a null dtype, Keras 3's batch_shape, class aliases, and unknown keys ignored. */
static void test_leniency(void **state) {
    (void)state;
    const char *json =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": {\"class_name\": \"__tuple__\", "
        "\"items\": [null, 6, 6, 2]}, \"dtype\": null, \"name\": \"in\"}},"
        "{\"class_name\": \"Convolution2D\", \"config\": {\"name\": \"c\", \"filters\": 4, \"dtype\": null, "
        "\"kernel_size\": {\"class_name\": \"__tuple__\", \"items\": [3, 3]}, \"strides\": [1, 1], "
        "\"use_bias\": 1, \"some_future_key\": {\"a\": [1, 2]}}},"
        "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"f\", \"dtype\": null}},"
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 3, \"use_bias\": 0}}]}}";
    tnt_model *m = tnt_model_from_json(json);
    if (!m) fail_msg("from_json failed: %s", tnt_last_error());
    assert_int_equal(tnt_model_count_params(m), 3 * 3 * 2 * 4 + 4 + 4 * 4 * 4 * 3); /* Dense without bias */
    assert_shape(tnt_model_input_shape(m), TNT_SHAPE(6, 6, 2));
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(m, "c")), "Conv2D");
    tnt_model_free(m);
    /* a number that is not 1 or 0 is no boolean; 1 means true where only false is supported */
    expect_layer_error("{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 3, \"use_bias\": 2}}",
                       (const char *const[]){"\"d\"", "(Dense)", "\"use_bias\": expected true or false", NULL});
    expect_layer_error("{\"class_name\": \"GlobalAveragePooling1D\", \"config\": {\"name\": \"g\", \"keepdims\": 1}}",
                       (const char *const[]){"\"g\"", "keepdims true (only false is supported)", NULL});
    /* a tuple of the wrong length names the key */
    expect_layer_error("{\"class_name\": \"Reshape\", \"config\": {\"name\": \"r\", \"target_shape\": "
                       "{\"class_name\": \"__tuple__\", \"items\": []}}}",
                       (const char *const[]){"\"r\"", "(Reshape)", "\"target_shape\": expected a list of 1 to", NULL});
}

/* Deterministic mutation fuzzing of the fixtures: byte flips, truncations, insertions and
 * deletions; the reader must fail cleanly or return a model, never crash (run under ASan). */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_fuzz(void **state) {
    (void)state;
    const char *files[] = {"keras_cnn.json", "keras_mlp_functional.json", "keras_transformer.json",
                           "keras_siamese_model.json", "keras_legacy_sequential.json", "keras_nested.json"};
    static const char tokens[] = "{}[],:\"0123456789-.eEnulltruefalse \n\\";
    int loaded = 0;
    for (int it = 0; it < 2000; it++) {
        char path[128];
        snprintf(path, sizeof path, "fixtures/%s", files[it % 6]);
        char *src = read_text(path);
        size_t n = strlen(src);
        char *s = malloc(n * 2 + 64);
        assert_non_null(s);
        memcpy(s, src, n + 1);
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits; e++) {
            size_t len = strlen(s);
            size_t pos = len ? rnd() % len : 0;
            switch (rnd() % 5) {
            case 0: s[pos] = (char)(1 + rnd() % 255); break;                      /* random byte */
            case 1: s[pos] = tokens[rnd() % (sizeof tokens - 1)]; break;          /* JSON token byte */
            case 2: s[pos] = '\0'; break;                                         /* truncation */
            case 3: /* insertion */
                if (len + 2 < n * 2 + 64) {
                    memmove(s + pos + 1, s + pos, len - pos + 1);
                    s[pos] = tokens[rnd() % (sizeof tokens - 1)];
                }
                break;
            default: /* deletion of a short run */
                {
                    size_t k = 1 + rnd() % 8;
                    if (k > len - pos) k = len - pos;
                    memmove(s + pos, s + pos + k, len - pos - k + 1);
                }
            }
        }
        tnt_model *m = tnt_model_from_json(s);
        if (m) {
            loaded++;
            char *j = NULL;
            if (tnt_model_to_json(m, &j) == TNT_OK) free(j);
            tnt_model_free(m);
        } else {
            assert_true(tnt_last_error()[0] != '\0');
        }
        free(s);
        free(src);
    }
    printf("fuzz: 2000 mutated inputs, %d still loaded\n", loaded);
}

int main(void) {
    tnt_init(NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_round_trips),
        cmocka_unit_test(test_multi_input_round_trips),
        cmocka_unit_test(test_sequential_model),
        cmocka_unit_test(test_functional_model),
        cmocka_unit_test(test_keras_fixtures),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_leniency),
        cmocka_unit_test(test_fuzz),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}
