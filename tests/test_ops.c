/* test_ops.c: the operations of src/ops/ and the graph evaluator.
 *
 * Every case of fixtures/ops_cases.json (tests/fixtures/gen_ops.py: one operation as a one-node
 * graph) is read through tnt_opgraph_from_json, written back and read again, run forward against
 * NumPy's output, backward against PyTorch autograd's input gradients, and (for differentiable
 * cases without kinks at the samples) against central finite differences of sum(y * dy).
 * Then graphs of several nodes (shared values, outputs that are also consumed, long chains that
 * reuse gradient memory), random draws keyed on the global sample index, and the errors. */
#include "ops/ops.h"
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

static cJSON *cases;

static int load_cases(void **state) {
    (void)state;
    FILE *f = fopen("fixtures/ops_cases.json", "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *txt = malloc((size_t)n + 1);
    if (fread(txt, 1, (size_t)n, f) != (size_t)n) return -1;
    txt[n] = 0;
    fclose(f);
    cases = cJSON_Parse(txt);
    free(txt);
    return cases ? 0 : -1;
}

static int free_cases(void **state) {
    (void)state;
    cJSON_Delete(cases);
    return 0;
}

typedef struct arr {
    tnt_shape s;
    float *d;
} arr;

static arr read_arr(const cJSON *o) {
    arr a = {0};
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(o, "shape")) a.s.dim[a.s.ndim++] = (int64_t)e->valuedouble;
    int64_t n = tnt_shape_numel(a.s), i = 0;
    a.d = calloc((size_t)n + 1, sizeof(float));
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(o, "data")) a.d[i++] = (float)e->valuedouble;
    return a;
}

/* Runs forward on a plan of g; outputs allocated by the caller. */
typedef struct runner {
    tnt_opgraph *g;
    tnt__opplan *p;
    void *ws;
    int n_in, n_out;
    arr in[8];
    float *out[8];
} runner;

static void runner_init(runner *r, tnt_opgraph *g, int n_in, const arr *in) {
    memset(r, 0, sizeof *r);
    r->g = g, r->n_in = n_in;
    tnt_shape shapes[8];
    for (int i = 0; i < n_in; i++) r->in[i] = in[i], shapes[i] = in[i].s;
    r->p = tnt__opplan_create(g, shapes, true);
    if (!r->p) fail_msg("plan: %s", tnt_last_error());
    r->ws = tnt__alloc(tnt__opplan_workspace(r->p) + 64);
    r->n_out = g->n_outputs;
    for (int k = 0; k < r->n_out; k++)
        r->out[k] = calloc((size_t)tnt_shape_numel(tnt__opplan_shape(r->p, g->outputs[k])) + 1, sizeof(float));
}

static tnt__opstep runner_step(runner *r, float **weights) {
    static const float *ins[8];
    for (int i = 0; i < r->n_in; i++) ins[i] = r->in[i].d;
    return (tnt__opstep){.inputs = ins, .weights = weights, .outputs = r->out, .workspace = r->ws, .training = true,
                         .seed = 7};
}

static void runner_free(runner *r) {
    for (int k = 0; k < r->n_out; k++) free(r->out[k]);
    tnt__free(r->ws);
    tnt__opplan_destroy(r->p);
}

/* sum over outputs of y * dy, in double */
static double loss_of(runner *r, float **dys) {
    tnt__opstep st = runner_step(r, NULL);
    tu_ok(tnt__opplan_forward(r->p, &st));
    double l = 0;
    for (int k = 0; k < r->n_out; k++) {
        int64_t n = tnt_shape_numel(tnt__opplan_shape(r->p, r->g->outputs[k]));
        for (int64_t i = 0; i < n; i++) l += (double)r->out[k][i] * dys[k][i];
    }
    return l;
}

static void test_cases(void **state) {
    (void)state;
    int n_cases = 0, n_grad = 0, n_fd = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        char *txt = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "graph"));
        tnt_opgraph *g = tnt_opgraph_from_json(txt);
        free(txt);
        if (!g) fail_msg("%s: %s", name, tnt_last_error());
        /* written back and read again: the same text */
        char *t1 = tnt_opgraph_to_json(g);
        tnt_opgraph *g2 = tnt_opgraph_from_json(t1);
        assert_non_null(g2);
        char *t2 = tnt_opgraph_to_json(g2);
        if (strcmp(t1, t2) != 0) fail_msg("%s: JSON round trip differs:\n%s\n%s", name, t1, t2);
        free(t1), free(t2);
        tnt_opgraph_free(g2);

        arr in[8];
        int n_in = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "inputs")) in[n_in++] = read_arr(e);
        runner r;
        runner_init(&r, g, n_in, in);
        tnt__opstep st = runner_step(&r, NULL);
        tu_ok(tnt__opplan_forward(r.p, &st));
        int k = 0;
        char what[128];
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "outputs")) {
            arr want = read_arr(e);
            tnt_shape got = tnt__opplan_shape(r.p, g->outputs[k]);
            char a[96], b[96];
            if (!tnt__shape_equal(got, want.s))
                fail_msg("%s: output %d has shape %s, NumPy %s", name, k, tnt_shape_str(got, a, sizeof a),
                         tnt_shape_str(want.s, b, sizeof b));
            snprintf(what, sizeof what, "%s: output %d against NumPy", name, k);
            tu_assert_close(r.out[k], want.d, tnt_shape_numel(want.s), 1e-4, 1e-5, what);
            free(want.d);
            k++;
        }
        const cJSON *grads = cJSON_GetObjectItem(c, "grads");
        if (grads) {
            n_grad++;
            float *dys[8], *dins[8] = {0};
            k = 0;
            cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "dy")) dys[k++] = read_arr(e).d;
            for (int i = 0; i < n_in; i++) { /* garbage: backward overwrites the input gradients */
                dins[i] = malloc(((size_t)tnt_shape_numel(in[i].s) + 1) * sizeof(float));
                for (int64_t j = 0; j <= tnt_shape_numel(in[i].s); j++) dins[i][j] = NAN;
            }
            tu_ok(tnt__opplan_backward(r.p, &st, (const float *const *)dys, dins, NULL));
            const cJSON *diff = cJSON_GetObjectItem(c, "diff");
            bool kinks = strstr(name, "ties") || strstr(name, "zero") || strstr(name, "mod") ||
                         strcmp(name, "stop_gradient") == 0; /* FD sees through stop_gradient, by design */
            for (int i = 0; i < n_in; i++) {
                const cJSON *ge = cJSON_GetArrayItem(grads, i);
                if (!cJSON_IsTrue(cJSON_GetArrayItem(diff, i)) || cJSON_IsNull(ge)) continue;
                arr want = read_arr(ge);
                snprintf(what, sizeof what, "%s: gradient of input %d against PyTorch", name, i);
                tu_assert_close(dins[i], want.d, tnt_shape_numel(want.s), 1e-4, 1e-4, what);
                free(want.d);
                if (kinks) continue;
                /* central differences of sum(y * dy) */
                n_fd++;
                for (int64_t j = 0; j < tnt_shape_numel(in[i].s); j++) {
                    float keep = in[i].d[j];
                    const float h = 2e-3f * fmaxf(1.0f, fabsf(keep));
                    in[i].d[j] = keep + h;
                    double lp = loss_of(&r, dys);
                    in[i].d[j] = keep - h;
                    double lm = loss_of(&r, dys);
                    in[i].d[j] = keep;
                    double fd = (lp - lm) / (2.0 * h);
                    if (fabs(fd - dins[i][j]) > 2e-2 * fmax(1.0, fabs(fd)))
                        fail_msg("%s: input %d element %lld: gradient %g, finite differences %g", name, i, (long long)j,
                                 dins[i][j], fd);
                }
            }
            for (int i = 0; i < n_in; i++) free(dins[i]);
            for (int j = 0; j < k; j++) free(dys[j]);
        }
        for (int i = 0; i < n_in; i++) free(in[i].d);
        runner_free(&r);
        tnt_opgraph_free(g);
        n_cases++;
    }
    assert_true(n_cases >= 127);
    print_message("%d cases, %d gradients against PyTorch, %d against finite differences\n", n_cases, n_grad, n_fd);
}

/* Every operation of the table is checked: a case of fixtures/ops_cases.json names it (random
 * draws: test_random_split), and an operation with a backward has a case with gradients against
 * PyTorch and finite differences, or its gradient is zero almost everywhere (floor, ceil, round,
 * sign, floor_divide): then its backward, run on the case, adds exactly zero. */
static void test_every_operation_covered(void **state) {
    (void)state;
    const tnt__op_def *const families[] = {tnt__ops_unary, tnt__ops_binary, tnt__ops_reduce, tnt__ops_matmul,
                                           tnt__ops_shape, tnt__ops_index,  tnt__ops_scan,   tnt__ops_random};
    const char *random_ops = " random_uniform random_normal dropout ", *zero_grad = " floor ceil round sign floor_divide ";
    int n_ops = 0;
    for (size_t f = 0; f < TNT_ARRAY_LEN(families); f++)
        for (const tnt__op_def *def = families[f]; def->name; def++, n_ops++) {
            char spaced[80];
            snprintf(spaced, sizeof spaced, " %s ", def->name);
            if (strstr(random_ops, spaced)) continue;
            const cJSON *c, *named = NULL, *graded = NULL;
            cJSON_ArrayForEach(c, cases) {
                const cJSON *node = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "graph"), "nodes"), 0);
                if (strcmp(cJSON_GetObjectItem(node, "op")->valuestring, def->name) != 0) continue;
                named = c;
                if (cJSON_GetObjectItem(c, "grads")) graded = c;
            }
            if (!named) fail_msg("operation %s: no case in fixtures/ops_cases.json", def->name);
            if (!def->backward || graded) continue;
            if (!strstr(zero_grad, spaced)) fail_msg("operation %s has a backward but no case with gradients", def->name);
            char *txt = cJSON_PrintUnformatted(cJSON_GetObjectItem(named, "graph"));
            tnt_opgraph *g = tnt_opgraph_from_json(txt);
            free(txt);
            arr in[4];
            int n_in = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, cJSON_GetObjectItem(named, "inputs")) in[n_in++] = read_arr(e);
            runner r;
            runner_init(&r, g, n_in, in);
            tnt__opstep st = runner_step(&r, NULL);
            tu_ok(tnt__opplan_forward(r.p, &st));
            int64_t n_out = tnt_shape_numel(tnt__opplan_shape(r.p, g->outputs[0]));
            float *dy = malloc((size_t)n_out * sizeof(float) + 4), *dx[4];
            tu_fill(dy, n_out, 3);
            for (int i = 0; i < n_in; i++) dx[i] = calloc((size_t)tnt_shape_numel(in[i].s) + 1, sizeof(float));
            tu_ok(tnt__opplan_backward(r.p, &st, (const float *[]){dy}, dx, NULL));
            for (int i = 0; i < n_in; i++) {
                for (int64_t j = 0; j < tnt_shape_numel(in[i].s); j++)
                    if (dx[i][j] != 0) fail_msg("operation %s: gradient %g of input %d, expected 0", def->name, dx[i][j], i);
                free(dx[i]), free(in[i].d);
            }
            free(dy);
            runner_free(&r);
            tnt_opgraph_free(g);
        }
    assert_true(n_ops >= 80);
}

/* y = (x * x + w) * x; z = sum(y, -1) with y also an output: gradients flow into x three ways */
static void test_graph_shared_values(void **state) {
    (void)state;
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 3));
    int w = tnt_opgraph_weight(g, "w", TNT_SHAPE(3), "zeros", true);
    int xx = tnt_opgraph_op(g, "multiply", 2, (int[]){x, x}, NULL);
    int s = tnt_opgraph_op(g, "add", 2, (int[]){xx, w}, NULL);
    int y = tnt_opgraph_op(g, "multiply", 2, (int[]){s, x}, NULL);
    int z = tnt_opgraph_op(g, "sum", 1, (int[]){y}, "{\"axis\": -1}");
    tu_ok(tnt_opgraph_output(g, y));
    tu_ok(tnt_opgraph_output(g, z));
    float xv[6] = {0.5f, -1, 2, 1.5f, 0.25f, -0.75f}, wv[3] = {0.1f, -0.2f, 0.3f};
    runner r;
    runner_init(&r, g, 1, (arr[]){{TNT_SHAPE(2, 3), xv}});
    float *ws[] = {wv};
    tnt__opstep st = runner_step(&r, ws);
    tu_ok(tnt__opplan_forward(r.p, &st));
    float dy[6] = {1, 2, 3, -1, 0.5f, 2}, dz[2] = {0.5f, -2}, dx[6], dw[3];
    tu_ok(tnt__opplan_backward(r.p, &st, (const float *[]){dy, dz}, (float *[]){dx}, (float *[]){dw}));
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 3; j++) {
            float v = xv[b * 3 + j], g_out = dy[b * 3 + j] + dz[b];
            assert_float_equal(r.out[0][b * 3 + j], (v * v + wv[j]) * v, 1e-6);
            assert_float_equal(dx[b * 3 + j], g_out * (3 * v * v + wv[j]), 1e-5);
        }
    for (int j = 0; j < 3; j++) assert_float_equal(dw[j], (dy[j] + dz[0]) * xv[j] + (dy[3 + j] + dz[1]) * xv[3 + j], 1e-5);
    runner_free(&r);
    tnt_opgraph_free(g);
}

/* A chain of 12 operations: the gradient arena holds fewer bytes than all gradients together, and
 * the result still matches finite differences. */
static void test_graph_chain_reuse(void **state) {
    (void)state;
    tnt_opgraph *g = tnt_opgraph_new();
    int v = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 8));
    const char *ops[] = {"tanh", "square", "sin", "sigmoid", "exp", "log1p", "softplus", "cos", "tanh", "silu", "erf", "gelu"};
    for (size_t i = 0; i < TNT_ARRAY_LEN(ops); i++) v = tnt_opgraph_op(g, ops[i], 1, (int[]){v}, NULL);
    v = tnt_opgraph_op(g, "softmax", 1, (int[]){v}, NULL);
    tu_ok(tnt_opgraph_output(g, v));
    float x[32], dy[32], dx[32];
    tu_fill(x, 32, 3), tu_fill(dy, 32, 4);
    runner r;
    runner_init(&r, g, 1, (arr[]){{TNT_SHAPE(4, 8), x}});
    tnt__opstep st = runner_step(&r, NULL);
    tu_ok(tnt__opplan_forward(r.p, &st));
    tu_ok(tnt__opplan_backward(r.p, &st, (const float *[]){dy}, (float *[]){dx}, NULL));
    for (int j = 0; j < 32; j++) {
        float keep = x[j];
        x[j] = keep + 1e-2f;
        double lp = loss_of(&r, (float *[]){dy});
        x[j] = keep - 1e-2f;
        double lm = loss_of(&r, (float *[]){dy});
        x[j] = keep;
        assert_true(fabs((lp - lm) / 2e-2 - dx[j]) < 1e-3);
    }
    runner_free(&r);
    tnt_opgraph_free(g);
}

/* Adds hand their output's gradient to an operand that nothing else reads (no copy): chains of
 * such adds, one ending in a graph output (the caller's gradient buffer), one in a value that is
 * both an output and consumed (the arena); adds and a relu run in place over such operands. The
 * gradients match finite differences, and a second backward gives the same bits (nothing is left
 * over from the first). */
static void test_graph_add_aliases(void **state) {
    (void)state;
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 6)), b = tnt_opgraph_input(g, TNT_SHAPE(6));
    int h = tnt_opgraph_op(g, "tanh", 1, (int[]){x}, NULL);
    int a = tnt_opgraph_op(g, "add", 2, (int[]){h, b}, NULL);      /* h read once: aliased */
    int s = tnt_opgraph_op(g, "subtract", 2, (int[]){a, x}, NULL); /* a read once: aliased */
    int e = tnt_opgraph_op(g, "exp", 1, (int[]){x}, NULL);
    int c = tnt_opgraph_op(g, "add", 2, (int[]){e, s}, NULL);      /* e aliased, s read twice */
    int m = tnt_opgraph_op(g, "multiply", 2, (int[]){s, x}, NULL);
    int t = tnt_opgraph_op(g, "add", 2, (int[]){b, m}, NULL);      /* the second operand aliased */
    int z = tnt_opgraph_op(g, "sum", 1, (int[]){t}, "{\"axis\": -1}");
    int v = tnt_opgraph_op(g, "add", 2, (int[]){x, b}, NULL);
    int rl = tnt_opgraph_op(g, "relu", 1, (int[]){v}, NULL); /* in place over v */
    int rx = tnt_opgraph_op(g, "multiply", 2, (int[]){rl, x}, NULL);
    tu_ok(tnt_opgraph_output(g, c));
    tu_ok(tnt_opgraph_output(g, z));
    tu_ok(tnt_opgraph_output(g, t));
    tu_ok(tnt_opgraph_output(g, rx));
    float xv[18], bv[6], dc[18], dz[3], dt[18], dr[18];
    tu_fill(xv, 18, 5), tu_fill(bv, 6, 6), tu_fill(dc, 18, 7), tu_fill(dz, 3, 8), tu_fill(dt, 18, 9), tu_fill(dr, 18, 10);
    runner r;
    runner_init(&r, g, 2, (arr[]){{TNT_SHAPE(3, 6), xv}, {TNT_SHAPE(6), bv}});
    float *dys[] = {dc, dz, dt, dr}, dx[18], db[6], dx2[18], db2[6];
    tnt__opstep st = runner_step(&r, NULL);
    tu_ok(tnt__opplan_forward(r.p, &st));
    tu_ok(tnt__opplan_backward(r.p, &st, (const float *const *)dys, (float *[]){dx, db}, NULL));
    tu_ok(tnt__opplan_forward(r.p, &st));
    tu_ok(tnt__opplan_backward(r.p, &st, (const float *const *)dys, (float *[]){dx2, db2}, NULL));
    tu_assert_bitwise(dx2, dx, 18, "dx of a second backward");
    tu_assert_bitwise(db2, db, 6, "db of a second backward");
    for (int which = 0; which < 2; which++) {
        float *v = which ? bv : xv, *grad = which ? db : dx;
        for (int j = 0; j < (which ? 6 : 18); j++) {
            float keep = v[j];
            v[j] = keep + 1e-2f;
            double lp = loss_of(&r, dys);
            v[j] = keep - 1e-2f;
            double lm = loss_of(&r, dys);
            v[j] = keep;
            double fd = (lp - lm) / 2e-2;
            if (fabs(fd - grad[j]) > 2e-3 * fmax(1.0, fabs(fd)))
                fail_msg("input %d element %d: gradient %g, finite differences %g", which, j, grad[j], fd);
        }
    }
    runner_free(&r);
    tnt_opgraph_free(g);
}

/* random_uniform, random_normal and dropout draw the same numbers for a sample whatever the split;
 * dropout's gradient is its forward's mask */
static void test_random_split(void **state) {
    (void)state;
    const char *ops[] = {"random_uniform", "random_normal", "dropout"};
    for (int o = 0; o < 3; o++) {
        tnt_opgraph *g = tnt_opgraph_new();
        int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 5));
        int y = tnt_opgraph_op(g, ops[o], 1, (int[]){x}, o == 2 ? "{\"rate\": 0.4}" : "{\"seed\": 3}");
        tu_ok(tnt_opgraph_output(g, y));
        float xs[30], whole[30], parts[30];
        tu_fill(xs, 30, 9);
        for (int part = 0; part < 3; part++) { /* whole batch, then 2 + 4 */
            int64_t off = part == 2 ? 2 : 0, n = part == 0 ? 6 : part == 1 ? 2 : 4;
            runner r;
            runner_init(&r, g, 1, (arr[]){{TNT_SHAPE(n, 5), xs + off * 5}});
            tnt__opstep st = runner_step(&r, NULL);
            st.sample_offset = off;
            tu_ok(tnt__opplan_forward(r.p, &st));
            memcpy((part ? parts : whole) + off * 5, r.out[0], (size_t)(n * 5) * sizeof(float));
            if (o == 2 && part == 0) { /* the gradient: dy / 0.6 where kept, 0 where dropped */
                float dy[30], dx[30];
                tu_fill(dy, 30, 10);
                tu_ok(tnt__opplan_backward(r.p, &st, (const float *[]){dy}, (float *[]){dx}, NULL));
                for (int i = 0; i < 30; i++) assert_float_equal(dx[i], whole[i] != 0 ? dy[i] / 0.6f : 0.0f, 1e-6);
            }
            runner_free(&r);
        }
        tu_assert_bitwise(parts, whole, 30, ops[o]);
        double mean = 0;
        for (int i = 0; i < 30; i++) mean += whole[i] / 30.0;
        if (o == 0) assert_true(mean > 0.3 && mean < 0.7);
        if (o == 2) { /* kept values are x / 0.6, dropped ones 0 */
            int dropped = 0;
            for (int i = 0; i < 30; i++) {
                if (whole[i] == 0) dropped++;
                else assert_float_equal(whole[i], xs[i] / 0.6f, 1e-6);
            }
            assert_true(dropped > 3 && dropped < 24);
        }
        tnt_opgraph_free(g);
    }
}

/* A rank's empty share of a batch: every value of the graph has 0 rows, and nothing fails. */
static void test_empty_batch(void **state) {
    (void)state;
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 3));
    int s = tnt_opgraph_op(g, "sum", 1, (int[]){x}, "{\"axis\": -1}");
    int y = tnt_opgraph_op(g, "multiply", 2, (int[]){s, s}, NULL);
    int z = tnt_opgraph_op(g, "softmax", 1, (int[]){x}, NULL);
    z = tnt_opgraph_op(g, "einsum", 2, (int[]){z, x}, "{\"equation\": \"bi,bj->bij\"}");
    z = tnt_opgraph_op(g, "dropout", 1, (int[]){z}, "{\"rate\": 0.5}");
    tu_ok(tnt_opgraph_output(g, y));
    tu_ok(tnt_opgraph_output(g, z));
    float none[1] = {0}, dy[1] = {0}, dz[1] = {0}, dx[1] = {0};
    runner r;
    runner_init(&r, g, 1, (arr[]){{TNT_SHAPE(0, 3), none}});
    tnt__opstep st = runner_step(&r, NULL);
    tu_ok(tnt__opplan_forward(r.p, &st));
    tu_ok(tnt__opplan_backward(r.p, &st, (const float *[]){dy, dz}, (float *[]){dx}, NULL));
    assert_int_equal(tnt__opplan_shape(r.p, y).dim[0], 0);
    runner_free(&r);
    tnt_opgraph_free(g);
}

static void test_errors(void **state) {
    (void)state;
    tnt_opgraph *g = tnt_opgraph_new();
    int a = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 3));
    int b = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 4));
    int c = tnt_opgraph_op(g, "add", 2, (int[]){a, b}, NULL);
    tu_ok(tnt_opgraph_output(g, c));
    assert_null(tnt__opplan_create(g, (tnt_shape[]){TNT_SHAPE(2, 3), TNT_SHAPE(2, 4)}, false));
    tu_error_contains("operation 0 (add): shapes (2, 3) and (2, 4) do not broadcast");
    assert_int_equal(tnt_opgraph_op(g, "frobnicate", 1, (int[]){a}, NULL), -1);
    tu_error_contains("unknown operation \"frobnicate\"");
    assert_int_equal(tnt_opgraph_op(g, "sum", 1, (int[]){a}, "{\"axis\": \"x\"}"), -1);
    tu_error_contains("attribute \"axis\" is \"x\"");
    assert_int_equal(tnt_opgraph_op(g, "add", 2, (int[]){a, 99}, NULL), -1);
    tu_error_contains("value 99");
    tnt_opgraph_free(g);

    g = tnt_opgraph_new();
    a = tnt_opgraph_input(g, TNT_SHAPE(2, 3));
    c = tnt_opgraph_op(g, "sum", 1, (int[]){a}, "{\"axis\": -3}");
    tu_ok(tnt_opgraph_output(g, c));
    assert_null(tnt__opplan_create(g, (tnt_shape[]){TNT_SHAPE(2, 3)}, false));
    tu_error_contains("axis -3 is out of range for rank 2");
    assert_null(tnt__opplan_create(g, (tnt_shape[]){TNT_SHAPE(2, 4)}, false));
    tu_error_contains("input 0 has shape (2, 4) (the graph expects (2, 3))");
    tnt_opgraph_free(g);

    g = tnt_opgraph_new();
    a = tnt_opgraph_input(g, TNT_SHAPE(2, 3));
    c = tnt_opgraph_op(g, "reshape", 1, (int[]){a}, "{\"shape\": [4, -1]}");
    tu_ok(tnt_opgraph_output(g, c));
    assert_null(tnt__opplan_create(g, (tnt_shape[]){TNT_SHAPE(2, 3)}, false));
    tu_error_contains("cannot reshape (2, 3) (6 values) into (4, None)");
    tnt_opgraph_free(g);

    g = tnt_opgraph_new();
    a = tnt_opgraph_input(g, TNT_SHAPE(2, 3));
    b = tnt_opgraph_input(g, TNT_SHAPE(4, 5));
    c = tnt_opgraph_op(g, "matmul", 2, (int[]){a, b}, NULL);
    tu_ok(tnt_opgraph_output(g, c));
    assert_null(tnt__opplan_create(g, (tnt_shape[]){TNT_SHAPE(2, 3), TNT_SHAPE(4, 5)}, false));
    tu_error_contains("matmul of shapes (2, 3) and (4, 5): inner sizes 3 and 4 differ");
    tnt_opgraph_free(g);

    g = tnt_opgraph_new();
    a = tnt_opgraph_input(g, TNT_SHAPE(3));
    b = tnt_opgraph_input(g, TNT_SHAPE(2));
    c = tnt_opgraph_op(g, "take", 2, (int[]){a, b}, NULL);
    tu_ok(tnt_opgraph_output(g, c));
    runner r;
    float av[3] = {1, 2, 3}, bv[2] = {0, 3};
    runner_init(&r, g, 2, (arr[]){{TNT_SHAPE(3), av}, {TNT_SHAPE(2), bv}});
    tnt__opstep st = runner_step(&r, NULL);
    assert_int_equal(tnt__opplan_forward(r.p, &st), TNT_ERR_ARG);
    tu_error_contains("operation 0 (take): index 3 is out of range for size 3");
    runner_free(&r);
    tnt_opgraph_free(g);

    g = tnt_opgraph_from_json("{\"format\": \"tnt_ops\", \"version\": 1, \"inputs\": [{\"shape\": [2, 2]}], "
                              "\"nodes\": [{\"op\": \"einsum\", \"in\": [0], \"equation\": \"ii->i\"}], \"outputs\": [1]}");
    assert_non_null(g);
    assert_null(tnt__opplan_create(g, (tnt_shape[]){TNT_SHAPE(2, 2)}, false));
    tu_error_contains("label 'i' repeats within an operand");
    tnt_opgraph_free(g);
    /* shapes too large to hold are refused, without overflow */
    g = tnt_opgraph_new();
    a = tnt_opgraph_input(g, TNT_SHAPE(2, 3));
    c = tnt_opgraph_op(g, "tile", 1, (int[]){a}, "{\"repeats\": [1000000000000, 1000000000000]}");
    tu_ok(tnt_opgraph_output(g, c));
    assert_null(tnt__opplan_create(g, (tnt_shape[]){TNT_SHAPE(2, 3)}, false));
    tu_error_contains("tile repeats too large");
    tnt_opgraph_free(g);
    g = tnt_opgraph_new();
    a = tnt_opgraph_input(g, TNT_SHAPE(4096, 4096));
    c = tnt_opgraph_op(g, "einsum", 2, (int[]){a, a}, "{\"equation\": \"ij,kl->ijkl\"}");
    tu_ok(tnt_opgraph_output(g, c));
    assert_null(tnt__opplan_create(g, (tnt_shape[]){TNT_SHAPE(4096, 4096), TNT_SHAPE(4096, 4096)}, false));
    tu_error_contains("more than 2^36 values");
    tnt_opgraph_free(g);

    assert_null(tnt_opgraph_from_json("{\"format\": \"keras\"}"));
    tu_error_contains("\"format\": \"tnt_ops\"");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_every_operation_covered),
        cmocka_unit_test(test_graph_shared_values),
        cmocka_unit_test(test_graph_chain_reuse),
        cmocka_unit_test(test_graph_add_aliases),
        cmocka_unit_test(test_random_split),
        cmocka_unit_test(test_empty_batch),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, load_cases, free_cases);
}
