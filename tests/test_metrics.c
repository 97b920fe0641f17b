/* test_metrics.c: metric name parsing (Keras names, aliases, ":K", errors) and hand-checked
 * per-batch sums for each metric, including argmax and top-k ties. */
#include "testutil.h"

#include "core/core.h"
#include "objectives/loss.h"
#include "objectives/metrics.h"

#include <math.h>
#include <string.h>

static void test_parse(void **state) {
    (void)state;
    tnt__metric m[8];
    assert_int_equal(tnt__metrics_parse(NULL, TNT_MEAN_SQUARED_ERROR, m, 8), 0);
    assert_int_equal(tnt__metrics_parse("", TNT_MEAN_SQUARED_ERROR, m, 8), 0);
    assert_int_equal(tnt__metrics_parse("  ", TNT_MEAN_SQUARED_ERROR, m, 8), 0);

    assert_int_equal(tnt__metrics_parse("accuracy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, m, 8), 1);
    assert_string_equal(m[0].name, "accuracy");
    assert_int_equal(m[0].kind, TNT__METRIC_ACCURACY);

    int n = tnt__metrics_parse(" acc , mse,mean_absolute_error ,  top_k_categorical_accuracy,"
                               "top_k_categorical_accuracy:3, SparseCategoricalAccuracy ",
                               TNT_MEAN_SQUARED_ERROR, m, 8);
    assert_int_equal(n, -1); /* sparse metric with one label per output */
    tu_error_contains("\"SparseCategoricalAccuracy\" needs integer class labels");
    tu_error_contains("use categorical_accuracy or accuracy");

    n = tnt__metrics_parse(" acc , mse,mean_absolute_error ,  top_k_categorical_accuracy,"
                           "top_k_categorical_accuracy:3, CategoricalAccuracy,binary_accuracy,ce",
                           TNT_MEAN_SQUARED_ERROR, m, 8);
    assert_int_equal(n, 8);
    const char *names[] = {"acc", "mse", "mean_absolute_error", "top_k_categorical_accuracy",
                           "top_k_categorical_accuracy:3", "CategoricalAccuracy", "binary_accuracy", "ce"};
    const int kinds[] = {TNT__METRIC_ACCURACY, TNT__METRIC_MSE, TNT__METRIC_MAE, TNT__METRIC_TOP_K,
                         TNT__METRIC_TOP_K, TNT__METRIC_CATEGORICAL_ACCURACY, TNT__METRIC_BINARY_ACCURACY,
                         TNT__METRIC_CROSSENTROPY};
    for (int i = 0; i < 8; i++) {
        assert_string_equal(m[i].name, names[i]);
        assert_int_equal(m[i].kind, kinds[i]);
    }
    assert_int_equal(m[3].k, 5);
    assert_int_equal(m[4].k, 3);

    n = tnt__metrics_parse("sparse_top_k_categorical_accuracy:1,sparse_categorical_accuracy,crossentropy",
                           TNT_SPARSE_CATEGORICAL_CROSSENTROPY, m, 8);
    assert_int_equal(n, 3);
    assert_int_equal(m[0].kind, TNT__METRIC_SPARSE_TOP_K);
    assert_int_equal(m[0].k, 1);
    assert_false(m[1].weighted);

    /* "~": Keras's weighted_metrics, with a log name and an output */
    n = tnt__metrics_parse("mae,~weighted_mae=mae@1,~mse", TNT_MEAN_SQUARED_ERROR, m, 8);
    assert_int_equal(n, 3);
    assert_false(m[0].weighted);
    assert_true(m[1].weighted);
    assert_string_equal(m[1].name, "weighted_mae");
    assert_int_equal(m[1].output, 1);
    assert_int_equal(m[1].kind, TNT__METRIC_MAE);
    assert_true(m[2].weighted);
    assert_string_equal(m[2].name, "mse");
}

static void test_parse_errors(void **state) {
    (void)state;
    tnt__metric m[4];
    assert_int_equal(tnt__metrics_parse("accuracy,bogus", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, m, 4), -1);
    tu_error_contains("unknown metric \"bogus\"");
    tu_error_contains("sparse_top_k_categorical_accuracy[:K]");
    assert_int_equal(tnt__metrics_parse("accuracy,,mse", TNT_MEAN_SQUARED_ERROR, m, 4), -1);
    tu_error_contains("entry 2 is empty");
    assert_int_equal(tnt__metrics_parse("mse,", TNT_MEAN_SQUARED_ERROR, m, 4), -1);
    tu_error_contains("entry 2 is empty");
    assert_int_equal(tnt__metrics_parse("accuracy:3", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, m, 4), -1);
    tu_error_contains("only applies to the top-k metrics");
    assert_int_equal(tnt__metrics_parse("top_k_categorical_accuracy:0", TNT_CATEGORICAL_CROSSENTROPY, m, 4), -1);
    tu_error_contains("k \"0\" is not valid");
    assert_int_equal(tnt__metrics_parse("top_k_categorical_accuracy:x", TNT_CATEGORICAL_CROSSENTROPY, m, 4), -1);
    tu_error_contains("k \"x\"");
    assert_int_equal(tnt__metrics_parse("top_k_categorical_accuracy:", TNT_CATEGORICAL_CROSSENTROPY, m, 4), -1);
    assert_int_equal(tnt__metrics_parse("mse,mse", TNT_MEAN_SQUARED_ERROR, m, 4), -1);
    tu_error_contains("\"mse\" is listed twice");
    assert_int_equal(tnt__metrics_parse("mse,mae,acc,ce,binary_accuracy", TNT_MEAN_SQUARED_ERROR, m, 4), -1);
    tu_error_contains("more than 4 metrics");
    assert_int_equal(tnt__metrics_parse("categorical_accuracy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, m, 4), -1);
    tu_error_contains("use sparse_categorical_accuracy or accuracy");
    assert_int_equal(tnt__metrics_parse("top_k_categorical_accuracy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, m, 4), -1);
    tu_error_contains("use sparse_top_k_categorical_accuracy");
    assert_int_equal(tnt__metrics_parse("sparse_categorical_accuracy", TNT_CATEGORICAL_CROSSENTROPY, m, 4), -1);
    tu_error_contains("loss categorical_crossentropy");
    assert_int_equal(tnt__metrics_parse("a_metric_name_that_is_far_too_long_for_the_log_key_buffer",
                                        TNT_MEAN_SQUARED_ERROR, m, 4),
                     -1);
    tu_error_contains("longer than 47 characters");
}

/* "accuracy" and "crossentropy" resolve as Keras's compile_utils does: by output size and label
 * layout. */
static void test_resolve(void **state) {
    (void)state;
    tnt__metric m[2];
    assert_int_equal(tnt__metrics_parse("accuracy,ce", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, m, 2), 2);
    assert_int_equal(tnt__metric_resolve(&m[0], 10), TNT__METRIC_SPARSE_CATEGORICAL_ACCURACY);
    assert_int_equal(tnt__metric_resolve(&m[1], 10), TNT__METRIC_SPARSE_CE);
    assert_int_equal(tnt__metrics_parse("accuracy,ce", TNT_CATEGORICAL_CROSSENTROPY, m, 2), 2);
    assert_int_equal(tnt__metric_resolve(&m[0], 10), TNT__METRIC_CATEGORICAL_ACCURACY);
    assert_int_equal(tnt__metric_resolve(&m[1], 10), TNT__METRIC_CE);
    assert_int_equal(tnt__metrics_parse("accuracy,ce", TNT_BINARY_CROSSENTROPY, m, 2), 2);
    assert_int_equal(tnt__metric_resolve(&m[0], 1), TNT__METRIC_BINARY_ACCURACY);
    assert_int_equal(tnt__metric_resolve(&m[1], 1), TNT__METRIC_BCE);
    /* Keras: binary only when the output has one unit; multi-label BCE gets categorical */
    assert_int_equal(tnt__metric_resolve(&m[0], 3), TNT__METRIC_CATEGORICAL_ACCURACY);
    assert_int_equal(tnt__metrics_parse("accuracy", TNT_MEAN_SQUARED_ERROR, m, 2), 1);
    assert_int_equal(tnt__metric_resolve(&m[0], 1), TNT__METRIC_BINARY_ACCURACY);
    assert_string_equal(tnt__metric_kind_name(TNT__METRIC_SPARSE_TOP_K), "sparse_top_k_categorical_accuracy");
}

static double update(const char *spec, tnt_loss_kind loss, int64_t n, int64_t c, const float *p, const float *y) {
    tnt__metric m;
    assert_int_equal(tnt__metrics_parse(spec, loss, &m, 1), 1);
    double sum = 0, count = 0;
    tu_ok(tnt__metric_update(&m, n, c, p, y, &sum, &count));
    assert_float_equal(count, (double)n, 0);
    return sum;
}

static void test_accuracy(void **state) {
    (void)state;
    /* ties go to the first maximum, as tf.argmax */
    const float p[4 * 3] = {0.3f, 0.3f, 0.4f, /* argmax 2 */
                            0.5f, 0.5f, 0.0f, /* tie: argmax 0 */
                            0.5f, 0.5f, 0.0f, /* tie: argmax 0 */
                            -1.0f, 5.0f, 2.0f /* logits work the same */};
    const float ys[4] = {2, 0, 1, 1};
    assert_float_equal(update("accuracy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 4, 3, p, ys), 3.0, 0);
    assert_float_equal(update("sparse_categorical_accuracy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 4, 3, p, ys), 3.0,
                       0);
    /* a non-integer label never matches (the argmax is compared as a float) */
    const float yf[1] = {2.5f};
    assert_float_equal(update("acc", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 3, p, yf), 0.0, 0);

    /* categorical: argmax of the one-hot (or soft) label */
    const float yc[4 * 3] = {0, 0, 1, 1, 0, 0, 0, 1, 0, 0.2f, 0.7f, 0.1f};
    assert_float_equal(update("categorical_accuracy", TNT_CATEGORICAL_CROSSENTROPY, 4, 3, p, yc), 3.0, 0);
    assert_float_equal(update("accuracy", TNT_CATEGORICAL_CROSSENTROPY, 4, 3, p, yc), 3.0, 0);

    /* binary: pred > 0.5 (0.5 itself is 0), mean over the outputs of each sample */
    const float pb[2 * 3] = {0.5f, 0.51f, 0.2f, 0.9f, 0.1f, 0.6f};
    const float yb[2 * 3] = {0, 1, 0, 1, 1, 1};
    assert_float_equal(update("binary_accuracy", TNT_BINARY_CROSSENTROPY, 2, 3, pb, yb), 1.0 + 2.0 / 3.0, 1e-15);
    /* one output: accuracy resolves to binary */
    const float p1[3] = {0.7f, 0.2f, 0.5f}, y1[3] = {1, 1, 0};
    assert_float_equal(update("accuracy", TNT_BINARY_CROSSENTROPY, 3, 1, p1, y1), 2.0, 0);

    /* sums accumulate across batches */
    tnt__metric m;
    assert_int_equal(tnt__metrics_parse("accuracy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, &m, 1), 1);
    double sum = 0, count = 0;
    tu_ok(tnt__metric_update(&m, 2, 3, p, ys, &sum, &count));
    tu_ok(tnt__metric_update(&m, 2, 3, p + 6, ys + 2, &sum, &count));
    assert_float_equal(sum, 3.0, 0);
    assert_float_equal(count, 4.0, 0);
    tu_ok(tnt__metric_update(&m, 0, 3, NULL, NULL, &sum, &count));
    assert_float_equal(count, 4.0, 0);
}

static void test_top_k(void **state) {
    (void)state;
    const float p[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    const float y3 = 3, y2 = 2, y1 = 1;
    assert_float_equal(update("sparse_top_k_categorical_accuracy:2", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 4, p, &y3),
                       1.0, 0);
    assert_float_equal(update("sparse_top_k_categorical_accuracy:2", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 4, p, &y2),
                       1.0, 0);
    assert_float_equal(update("sparse_top_k_categorical_accuracy:2", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 4, p, &y1),
                       0.0, 0);
    /* default k = 5 >= 4 classes: always in */
    assert_float_equal(update("sparse_top_k_categorical_accuracy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 4, p, &y1),
                       1.0, 0);

    /* ties straddling the boundary all count as in (tf.math.in_top_k) */
    const float t[4] = {0.5f, 0.5f, 0.5f, 0.1f};
    const float l[6] = {0, 1, 2, 3, 2.7f /* cast to int32: 2 */, 7 /* out of range */};
    double hits = 0;
    for (int i = 0; i < 6; i++)
        hits += update("sparse_top_k_categorical_accuracy:1", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 4, t, &l[i]);
    assert_float_equal(hits, 4.0, 0);
    const float neg = -1;
    assert_float_equal(update("sparse_top_k_categorical_accuracy:4", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 4, t, &neg),
                       0.0, 0);
    /* a non-finite score at the label never counts */
    const float pn[3] = {NAN, 0.1f, 0.2f}, l0 = 0;
    assert_float_equal(update("sparse_top_k_categorical_accuracy:3", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 3, pn, &l0),
                       0.0, 0);

    /* dense labels: the label is the argmax of y */
    const float pd[2 * 4] = {0.1f, 0.2f, 0.3f, 0.4f, 0.4f, 0.3f, 0.2f, 0.1f};
    const float yd[2 * 4] = {0, 0, 1, 0, 0, 0, 1, 0};
    assert_float_equal(update("top_k_categorical_accuracy:2", TNT_CATEGORICAL_CROSSENTROPY, 2, 4, pd, yd), 1.0, 0);
    assert_float_equal(update("top_k_categorical_accuracy:3", TNT_CATEGORICAL_CROSSENTROPY, 2, 4, pd, yd), 2.0, 0);
}

static void test_regression_and_ce(void **state) {
    (void)state;
    const float p[2 * 2] = {1, 2, 0, -1}, y[2 * 2] = {0, 0, 0, 1};
    assert_float_equal(update("mse", TNT_MEAN_SQUARED_ERROR, 2, 2, p, y), 2.5 + 2.0, 1e-12);
    assert_float_equal(update("mean_absolute_error", TNT_MEAN_SQUARED_ERROR, 2, 2, p, y), 1.5 + 1.0, 1e-12);

    /* cross-entropy metrics are the losses on probabilities (Keras's from_logits=False) */
    const float pr[2 * 3] = {0.2f, 0.3f, 0.5f, 0.6f, 0.3f, 0.1f};
    const float ys[2] = {2, 0};
    double want;
    tu_ok(tnt__loss_compute(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, false, 2, 3, pr, ys, 1.0, NULL, &want));
    assert_float_equal(want, -log(0.5) - log(0.6), 1e-6);
    assert_float_equal(update("ce", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 2, 3, pr, ys), want, 0);
    assert_float_equal(update("sparse_categorical_crossentropy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, 2, 3, pr, ys),
                       want, 0);
    const float yb[3] = {1, 0, 1}, pb[3] = {0.8f, 0.4f, 0.5f};
    tu_ok(tnt__loss_compute(TNT_BINARY_CROSSENTROPY, false, 3, 1, pb, yb, 1.0, NULL, &want));
    assert_float_equal(update("crossentropy", TNT_BINARY_CROSSENTROPY, 3, 1, pb, yb), want, 0);

    /* a bad label in a cross-entropy metric is reported with the metric's name */
    tnt__metric m;
    assert_int_equal(tnt__metrics_parse("ce", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, &m, 1), 1);
    double sum = 0, count = 0;
    const float bad[2] = {3, 0};
    assert_int_equal(tnt__metric_update(&m, 2, 3, pr, bad, &sum, &count), TNT_ERR_ARG);
    tu_error_contains("metric \"ce\": ");
    tu_error_contains("label 3 of sample 0");
    assert_float_equal(count, 0.0, 0);
    assert_int_equal(tnt__metric_update(&m, 2, 0, pr, bad, &sum, &count), TNT_ERR_SHAPE);
    assert_int_equal(tnt__metric_update(&m, 2, 3, NULL, bad, &sum, &count), TNT_ERR_ARG);
}

/* "name=spec", ":threshold", "@output", and the confusion family's hand-counted sums */
static void test_names_thresholds_outputs_and_confusion(void **state) {
    (void)state;
    tnt__metric m[4];
    assert_int_equal(tnt__metrics_parse("recall_lo=recall:0.25, mae@1, mae@0, precision", TNT_LOSS_NONE, m, 4), 4);
    assert_string_equal(m[0].name, "recall_lo");
    assert_int_equal(m[0].kind, TNT__METRIC_RECALL);
    assert_float_equal(m[0].threshold, 0.25f, 0);
    assert_int_equal(m[1].output, 1);
    assert_int_equal(m[2].output, 0);
    assert_int_equal(m[3].output, -1);
    assert_true(tnt__metric_on_output(&m[1], 1) && !tnt__metric_on_output(&m[1], 0));
    assert_int_equal(tnt__metrics_parse("mae@1,mae", TNT_LOSS_NONE, m, 4), -1); /* the same log name twice */
    tu_error_contains("listed twice");
    assert_int_equal(tnt__metrics_parse("precision:1.5", TNT_LOSS_NONE, m, 4), -1);
    tu_error_contains("threshold");
    assert_int_equal(tnt__metrics_parse("mae@x", TNT_LOSS_NONE, m, 4), -1);
    tu_error_contains("output index");
    assert_int_equal(tnt__metric_check_loss(&m[0], TNT_MEAN_SQUARED_ERROR), TNT_OK);
    /* pred > threshold is positive, a label that is not 0 is positive; every value counts */
    const float p[6] = {0.9f, 0.2f, 0.6f, 0.4f, 0.7f, 0.1f}, y[6] = {1, 1, 0, 0, 1, 0};
    double want[] = {2, 1, 2, 1, 2.0 / 3.0, 2.0 / 3.0}; /* TP FP TN FN precision recall at 0.5 */
    const char *specs[] = {"true_positives", "false_positives", "true_negatives", "false_negatives", "precision",
                           "recall"};
    for (int i = 0; i < 6; i++) {
        tnt__metric one;
        double sum = 0, count = 0;
        assert_int_equal(tnt__metrics_parse(specs[i], TNT_BINARY_CROSSENTROPY, &one, 1), 1);
        tu_ok(tnt__metric_update(&one, 2, 3, p, y, &sum, &count));
        assert_float_equal(tnt__metric_value(&one, sum, count), want[i], 1e-12);
    }
    tnt__metric pr;
    assert_int_equal(tnt__metrics_parse("precision:0.95", TNT_BINARY_CROSSENTROPY, &pr, 1), 1);
    double sum = 0, count = 0;
    tu_ok(tnt__metric_update(&pr, 2, 3, p, y, &sum, &count));
    assert_float_equal(tnt__metric_value(&pr, sum, count), 0.0, 0); /* no positive prediction: 0, not NaN */
}

/* AUC and the *At* family from hand-counted curves: 4 values, labels 1 0 1 0, predictions 0.9 0.8
 * 0.3 0.1 on 3 thresholds (AUC: -eps, 0.5, 1 + eps; the others: 0, 0.5, 1) */
static void test_curves(void **state) {
    (void)state;
    const float p[4] = {0.9f, 0.8f, 0.3f, 0.1f}, y[4] = {1, 0, 1, 0};
    struct { const char *spec; double want; } cases[] = {
        /* ROC points (fpr, tpr): (1, 1), (0.5, 0.5), (0, 0): trapezoids 0.375 + 0.125 */
        {"auc:3", 0.5},
        /* at 0.5 recall 0.5 with precision 0.5; at 0 recall 1 with precision 0.5 */
        {"precision_at_recall:0.5", 0.5},
        {"recall_at_precision:0.5", 1.0},
        /* specificity at 0: 0 (every value positive), at 0.5: 0.5, at 1: 1 (recall 0) */
        {"sensitivity_at_specificity:0.5", 0.5},
        {"specificity_at_sensitivity:0.9", 0.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tnt__metric m;
        assert_int_equal(tnt__metrics_parse(cases[i].spec, TNT_BINARY_CROSSENTROPY, &m, 1), 1);
        if (!strncmp(cases[i].spec, "auc", 3)) assert_int_equal(m.num_thresholds, 3);
        else m.num_thresholds = 3;
        double curve[TNT__CURVE_SIZE] = {0};
        tu_ok(tnt__curve_update(&m, 1, 4, p, y, 1.0, curve));
        if (fabs(tnt__curve_value(&m, curve) - cases[i].want) > 1e-12)
            fail_msg("%s: %g, expected %g", cases[i].spec, tnt__curve_value(&m, curve), cases[i].want);
    }
    tnt__metric m;
    assert_int_equal(tnt__metrics_parse("precision_at_recall", TNT_BINARY_CROSSENTROPY, &m, 1), -1);
    tu_error_contains("target");
    assert_int_equal(tnt__metrics_parse("auc:1", TNT_BINARY_CROSSENTROPY, &m, 1), -1);
    tu_error_contains("num_thresholds");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_resolve),      cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_top_k),        cmocka_unit_test(test_regression_and_ce),
        cmocka_unit_test(test_names_thresholds_outputs_and_confusion),
        cmocka_unit_test(test_curves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
