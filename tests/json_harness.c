/* json_harness.c: see json_harness.h. */
#include "json_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *summary_of(const tnt_model *m) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    tu_ok(tnt_model_summary(m, f));
    fclose(f);
    return buf;
}

char *to_json(const tnt_model *m) {
    char *s = NULL;
    tu_ok(tnt_model_to_json(m, &s));
    assert_non_null(s);
    return s;
}

char *round_trip(tnt_model *m) {
    assert_non_null(m);
    char *a = to_json(m);
    tnt_model *r = tnt_model_from_json(a);
    if (!r) fail_msg("from_json failed: %s\nJSON: %s", tnt_last_error(), a);
    char *b = to_json(r);
    if (strcmp(a, b)) fail_msg("round trip differs:\n%s\n%s", a, b);
    char *sa = summary_of(m), *sb = summary_of(r);
    if (strcmp(sa, sb)) fail_msg("summaries differ:\n%s\n%s", sa, sb);
    assert_int_equal(tnt_model_count_params(m), tnt_model_count_params(r));
    assert_int_equal(tnt_model_num_layers(m), tnt_model_num_layers(r));
    /* clone_model: the same architecture again */
    tnt_model *c = tnt_clone_model(m);
    if (!c) fail_msg("clone_model failed: %s", tnt_last_error());
    char *cj = to_json(c);
    assert_string_equal(a, cj);
    free(cj);
    tnt_model_free(c);
    free(sa);
    free(sb);
    free(b);
    tnt_model_free(r);
    tnt_model_free(m);
    return a;
}

tnt_model *seq1(tnt_shape in, tnt_layer *layer) {
    tnt_model *m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_input_layer(in, NULL)));
    tu_ok(tnt_model_add(m, layer));
    return m;
}

void check_layer(tnt_shape in, tnt_layer *layer, const char *cls, const char *needle) {
    char *j = round_trip(seq1(in, layer));
    char want[96];
    snprintf(want, sizeof want, "\"class_name\":\"%s\"", cls);
    if (!strstr(j, want)) fail_msg("%s missing in %s", want, j);
    if (needle && !strstr(j, needle)) fail_msg("%s missing in %s", needle, j);
    free(j);
}

void expect_error(const char *json, const char *const *needles) {
    tnt_model *m = tnt_model_from_json(json);
    if (m) {
        tnt_model_free(m);
        fail_msg("from_json accepted %s", json);
    }
    for (; *needles; needles++) tu_error_contains(*needles);
}

tnt_model *seq_from_layer_json(const char *batch_input_shape, const char *layer) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": "
             "\"InputLayer\", \"config\": {\"batch_input_shape\": %s, \"name\": \"in\"}}, %s]}}",
             batch_input_shape, layer);
    return tnt_model_from_json(json);
}
