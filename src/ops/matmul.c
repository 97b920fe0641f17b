/* matmul.c: matmul (NumPy's: batched, batch axes broadcast, 1-D operands promoted) and einsum
 * (two operands or one), both on the GEMM of kernels/matmul.h.
 *
 * matmul: when b has no batch axes, a's batch folds into the rows (one GEMM, also for dB =
 * a^T · dC); otherwise one GEMM per output matrix, operands found by their broadcast strides.
 * einsum: each operand is permuted into [batch, free, contracted] (its labels found nowhere else
 * summed on the way), one GEMM per batch gives [batch, left, right], which is added into the
 * output in its label order; an output label found in no operand is broadcast. The gradient of an
 * operand is the einsum of the output gradient with the other operand into its labels, the same
 * executor. Repeated labels within one operand (diagonals) are refused. */
#include "kernels/matmul.h"
#include "kernels/sgemm.h"
#include "ops/ops.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* ---- matmul ---- */

typedef struct mm_geom {
    tnt_shape batch;               /* broadcast batch axes */
    int64_t m, n, k, nb;
    int64_t sa[TNT_MAX_DIMS], sb[TNT_MAX_DIMS]; /* batch strides in matrices (0: broadcast) */
    bool fold;                     /* b has no batch axes: a's batch folds into m */
} mm_geom;

static tnt_status mm_geometry(const tnt__opnode *n, tnt_shape a, tnt_shape b, mm_geom *g, tnt_shape *out) {
    char sa[96], sb[96];
    if (a.ndim == 0 || b.ndim == 0)
        return tnt__op_error(n, TNT_ERR_SHAPE, "matmul of shapes %s and %s: scalars cannot be multiplied as matrices",
                             tnt_shape_str(a, sa, sizeof sa), tnt_shape_str(b, sb, sizeof sb));
    tnt_shape a2 = a, b2 = b;
    if (a.ndim == 1) a2 = (tnt_shape){2, {1, a.dim[0]}};
    if (b.ndim == 1) b2 = (tnt_shape){2, {b.dim[0], 1}};
    g->m = a2.dim[a2.ndim - 2], g->k = a2.dim[a2.ndim - 1], g->n = b2.dim[b2.ndim - 1];
    if (b2.dim[b2.ndim - 2] != g->k)
        return tnt__op_error(n, TNT_ERR_SHAPE, "matmul of shapes %s and %s: inner sizes %lld and %lld differ",
                             tnt_shape_str(a, sa, sizeof sa), tnt_shape_str(b, sb, sizeof sb), (long long)g->k,
                             (long long)b2.dim[b2.ndim - 2]);
    tnt_shape ab = {.ndim = a2.ndim - 2}, bb = {.ndim = b2.ndim - 2};
    memcpy(ab.dim, a2.dim, sizeof(int64_t) * (size_t)ab.ndim);
    memcpy(bb.dim, b2.dim, sizeof(int64_t) * (size_t)bb.ndim);
    tnt_status s = tnt__broadcast(n, ab, bb, &g->batch);
    if (s != TNT_OK) return tnt__op_error(n, TNT_ERR_SHAPE, "matmul of shapes %s and %s: batch axes do not broadcast",
                                          tnt_shape_str(a, sa, sizeof sa), tnt_shape_str(b, sb, sizeof sb));
    tnt__bstrides(ab, g->batch, g->sa);
    tnt__bstrides(bb, g->batch, g->sb);
    g->nb = tnt_shape_numel(g->batch);
    g->fold = bb.ndim == 0;
    if (out) {
        *out = g->batch;
        if (a.ndim > 1) out->dim[out->ndim++] = g->m;
        if (b.ndim > 1) out->dim[out->ndim++] = g->n;
    }
    return TNT_OK;
}

static tnt_status infer_matmul(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    mm_geom g;
    out[0].dt = TNT__F32;
    return mm_geometry(n, in[0].s, in[1].s, &g, &out[0].s);
}

/* Offsets (in matrices) of a and b for output matrix t. */
static void mm_offsets(const mm_geom *g, int64_t t, int64_t *oa, int64_t *ob) {
    *oa = *ob = 0;
    for (int d = g->batch.ndim - 1; d >= 0; d--) {
        int64_t i = t % g->batch.dim[d];
        t /= g->batch.dim[d];
        *oa += i * g->sa[d], *ob += i * g->sb[d];
    }
}

static tnt_status forward_matmul(tnt__opctx *c) {
    mm_geom g;
    mm_geometry(c->node, c->in[0].s, c->in[1].s, &g, NULL);
    const float *A = c->in[0].d, *B = c->in[1].d;
    float *C = c->out[0].d;
    if (g.fold) return tnt__sgemm(false, false, g.nb * g.m, g.n, g.k, A, g.k, B, g.n, 0.0f, C, g.n);
    for (int64_t t = 0; t < g.nb; t++) {
        int64_t oa, ob;
        mm_offsets(&g, t, &oa, &ob);
        tnt_status s = tnt__sgemm(false, false, g.m, g.n, g.k, A + oa * g.m * g.k, g.k, B + ob * g.k * g.n, g.n, 0.0f,
                                  C + t * g.m * g.n, g.n);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

static tnt_status backward_matmul(tnt__opctx *c) {
    mm_geom g;
    mm_geometry(c->node, c->in[0].s, c->in[1].s, &g, NULL);
    const float *A = c->in[0].d, *B = c->in[1].d, *G = c->dout[0];
    float *DA = c->din[0], *DB = c->din[1];
    const bool over_a = c->din_overwrite && c->din_overwrite[0], over_b = c->din_overwrite && c->din_overwrite[1];
    tnt_status s = TNT_OK;
    if (g.fold) { /* one GEMM covers each gradient: overwriting is beta 0 */
        if (DA) s = tnt__sgemm(false, true, g.nb * g.m, g.k, g.n, G, g.n, B, g.n, over_a ? 0.0f : 1.0f, DA, g.k);
        /* dB = A^T · dC as Dense's weight gradient (kernels/sgemm.h: pitches that 4K-alias padded) */
        if (s == TNT_OK && DB) s = tnt__sgemm_tn(g.k, g.n, g.nb * g.m, A, G, over_b ? 0.0f : 1.0f, DB);
        return s;
    }
    /* per output matrix, a broadcast operand's gradient sums several products: zero it first */
    if (DA && over_a) memset(DA, 0, (size_t)tnt_shape_numel(c->in[0].s) * sizeof(float));
    if (DB && over_b) memset(DB, 0, (size_t)tnt_shape_numel(c->in[1].s) * sizeof(float));
    for (int64_t t = 0; s == TNT_OK && t < g.nb; t++) {
        int64_t oa, ob;
        mm_offsets(&g, t, &oa, &ob);
        const float *Gt = G + t * g.m * g.n;
        if (DA) s = tnt__sgemm(false, true, g.m, g.k, g.n, Gt, g.n, B + ob * g.k * g.n, g.n, 1.0f, DA + oa * g.m * g.k, g.k);
        if (s == TNT_OK && DB)
            s = tnt__sgemm(true, false, g.k, g.n, g.m, A + oa * g.m * g.k, g.k, Gt, g.n, 1.0f, DB + ob * g.k * g.n, g.n);
    }
    return s;
}

/* ---- einsum ---- */

#define MAX_LABELS 16

typedef struct eq_parts {
    int n_ops;
    char op[2][MAX_LABELS + 1];
    char out[MAX_LABELS + 1];
} eq_parts;

/* Expands "..." of an operand of rank r with labels A, B, ... (right-aligned: the ellipsis of a
 * lower rank takes the last ones). */
static tnt_status expand(const tnt__opnode *n, const char *spec, int len, int rank, int ell_max, char *out) {
    const char *dots = NULL;
    int explicit = 0;
    for (int i = 0; i < len; i++) {
        if (spec[i] == '.') {
            if (dots || i + 2 >= len || spec[i + 1] != '.' || spec[i + 2] != '.')
                return tnt__op_error(n, TNT_ERR_ARG, "equation \"%s\": a stray '.'", n->a.eq);
            dots = spec + i;
            i += 2;
            continue;
        }
        if (!((spec[i] >= 'a' && spec[i] <= 'z') || (spec[i] >= 'A' && spec[i] <= 'Z')))
            return tnt__op_error(n, TNT_ERR_ARG, "equation \"%s\": '%c' is not a letter", n->a.eq, spec[i]);
        explicit++;
    }
    int n_ell = dots ? (rank >= 0 ? rank - explicit : ell_max) : 0;
    if (n_ell < 0 || explicit + n_ell > MAX_LABELS)
        return tnt__op_error(n, TNT_ERR_SHAPE, "equation \"%s\": an operand of rank %d has %d labels", n->a.eq, rank,
                             explicit);
    int o = 0;
    for (int i = 0; i < len; i++) {
        if (spec[i] == '.') {
            for (int e = 0; e < n_ell; e++) out[o++] = (char)('0' + (ell_max - n_ell) + e); /* digits: ellipsis axes */
            i += 2;
            continue;
        }
        out[o++] = spec[i];
    }
    out[o] = 0;
    return TNT_OK;
}

static tnt_status eq_parse(const tnt__opnode *n, const tnt__ten *in, int n_in, eq_parts *p) {
    const char *eq = n->a.eq, *arrow = strstr(eq, "->"), *comma = strchr(eq, ',');
    int lhs_len = arrow ? (int)(arrow - eq) : (int)strlen(eq);
    p->n_ops = comma && comma - eq < lhs_len ? 2 : 1;
    if (p->n_ops != n_in)
        return tnt__op_error(n, TNT_ERR_ARG, "equation \"%s\" names %d operands, %d given", eq, p->n_ops, n_in);
    const char *spec[2] = {eq, comma ? comma + 1 : NULL};
    int len[2] = {p->n_ops == 2 ? (int)(comma - eq) : lhs_len, p->n_ops == 2 ? lhs_len - (int)(comma - eq) - 1 : 0};
    int ell_max = 0;
    for (int k = 0; k < p->n_ops; k++) { /* how many axes each ellipsis stands for */
        int letters = 0;
        for (int i = 0; i < len[k]; i++) letters += spec[k][i] != '.';
        if (memchr(spec[k], '.', (size_t)len[k])) ell_max = TNT_MAX(ell_max, in[k].s.ndim - letters);
    }
    for (int k = 0; k < p->n_ops; k++) { /* re-expand right-aligned to the longest ellipsis */
        tnt_status s = expand(n, spec[k], len[k], in[k].s.ndim, ell_max, p->op[k]);
        if (s != TNT_OK) return s;
        if ((int)strlen(p->op[k]) != in[k].s.ndim) {
            char b[96];
            return tnt__op_error(n, TNT_ERR_SHAPE, "equation \"%s\": operand %d has shape %s but %d labels", eq, k,
                                 tnt_shape_str(in[k].s, b, sizeof b), (int)strlen(p->op[k]));
        }
        for (const char *q = p->op[k]; *q; q++)
            if (strchr(q + 1, *q))
                return tnt__op_error(n, TNT_ERR_UNSUPPORTED, "equation \"%s\": label '%c' repeats within an operand "
                                     "(diagonals are not supported)", eq, *q);
    }
    if (arrow) {
        tnt_status s = expand(n, arrow + 2, (int)strlen(arrow + 2), -1, ell_max, p->out);
        if (s != TNT_OK) return s;
    } else { /* NumPy's implicit output: the ellipsis, then the labels seen once, sorted */
        int o = 0;
        for (int e = 0; e < ell_max; e++) p->out[o++] = (char)('0' + e);
        for (char ch = 'A'; ch <= 'z'; ch++) {
            int seen = 0;
            for (int k = 0; k < p->n_ops; k++) seen += strchr(p->op[k], ch) != NULL;
            if (seen == 1 && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) {
                if (o == MAX_LABELS) return tnt__op_error(n, TNT_ERR_SHAPE, "equation \"%s\": too many labels", eq);
                p->out[o++] = ch;
            }
        }
        p->out[o] = 0;
    }
    for (const char *q = p->out; *q; q++)
        if (!strchr(p->op[0], *q) && !(p->n_ops == 2 && strchr(p->op[1], *q)))
            return tnt__op_error(n, TNT_ERR_ARG, "equation \"%s\": output label '%c' is in no operand", eq, *q);
    return TNT_OK;
}

static int64_t label_size(char ch, const char *const *labels, const tnt_shape *shapes, int n) {
    for (int k = 0; k < n; k++) {
        const char *q = strchr(labels[k], ch);
        if (q) return shapes[k].dim[q - labels[k]];
    }
    return 1;
}

static tnt_status infer_einsum(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    eq_parts p;
    tnt_status s = eq_parse(n, in, n->n_in, &p);
    if (s != TNT_OK) return s;
    const char *labels[2] = {p.op[0], p.op[1]};
    tnt_shape shapes[2] = {in[0].s, n->n_in > 1 ? in[1].s : in[0].s};
    for (int k = 0; k < p.n_ops; k++)
        for (int d = 0; labels[k][d]; d++) {
            int64_t want = label_size(labels[k][d], labels, shapes, p.n_ops);
            if (shapes[k].dim[d] != want) {
                char a[96], b[96];
                return tnt__op_error(n, TNT_ERR_SHAPE, "equation \"%s\": shapes %s and %s disagree on label '%c' "
                                     "(%lld against %lld)", n->a.eq, tnt_shape_str(in[0].s, a, sizeof a),
                                     tnt_shape_str(shapes[1], b, sizeof b), labels[k][d], (long long)shapes[k].dim[d],
                                     (long long)want);
            }
        }
    out[0].dt = TNT__F32;
    out[0].s.ndim = (int)strlen(p.out);
    if (out[0].s.ndim > TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "the output has rank above %d", TNT_MAX_DIMS);
    for (int d = 0; d < out[0].s.ndim; d++) out[0].s.dim[d] = label_size(p.out[d], labels, shapes, p.n_ops);
    return TNT_OK;
}

/* Operand x with labels lx laid out as the labels of order: x itself when that is its own layout,
 * else permuted (and summed over labels order lacks) into dst. */
static const float *gather(const char *lx, tnt_shape sx, const float *x, const char *order, float *dst, int64_t dst_n) {
    if (!strcmp(lx, order)) return x;
    int64_t xst[MAX_LABELS], dst_st[MAX_LABELS], acc = 1;
    int nord = (int)strlen(order);
    int64_t ost[MAX_LABELS];
    for (int i = nord - 1; i >= 0; i--) {
        ost[i] = acc;
        const char *q = strchr(lx, order[i]);
        acc *= q ? sx.dim[q - lx] : 1;
    }
    memset(dst, 0, (size_t)dst_n * sizeof(float));
    tnt__strides(sx, xst);
    for (int d = 0; d < sx.ndim; d++) {
        const char *q = strchr(order, lx[d]);
        dst_st[d] = q ? ost[q - order] : 0;
    }
    tnt__strided_add(sx, dst, dst_st, x, xst);
    return dst;
}

/* out (labels lo, shape so) += einsum of x (lx) and optional y (ly). */
/* How the GEMM sees an operand in place: per batch index, a matrix of rows g1 by columns g2, when
 * the operand holds exactly the batch, g1 and g2 labels, g1 and g2 each consecutive and in order,
 * and one of the two groups last (stride 1): g2 last is the plain layout, g1 last the transposed
 * one. ld is the row pitch of the stored matrix, bst the stride of each batch label. */
typedef struct mview {
    bool ok, trans;
    int64_t ld;
    int64_t bst[MAX_LABELS];
} mview;

static int group_at(const char *l, const char *g) {
    if (!g[0]) return -1;
    const char *q = strchr(l, g[0]);
    return q && !strncmp(q, g, strlen(g)) ? (int)(q - l) : -2;
}

static mview matrix_view(const char *l, tnt_shape s, const char *batch, const char *g1, const char *g2, int64_t cols) {
    mview v = {0};
    int n = (int)strlen(l), n1 = (int)strlen(g1), n2 = (int)strlen(g2);
    if (n != (int)strlen(batch) + n1 + n2) return v; /* labels to sum first */
    int p1 = group_at(l, g1), p2 = group_at(l, g2);
    if (p1 == -2 || p2 == -2) return v;
    int64_t st[MAX_LABELS];
    tnt__strides(s, st);
    bool end1 = p1 >= 0 && p1 + n1 == n, end2 = p2 >= 0 && p2 + n2 == n;
    if (end2 || (p2 < 0 && (end1 || p1 < 0))) { /* rows g1 (pitch: its last label's stride), columns last */
        v.ld = p1 >= 0 ? st[p1 + n1 - 1] : cols; /* one row: any pitch >= the columns */
        if (p2 < 0 && p1 >= 0) v.ld = 1;          /* one column: the rows are the stride-1 axis */
    } else if (end1 && p2 >= 0) {        /* stored as g2 by g1 */
        v.trans = true;
        v.ld = st[p2 + n2 - 1];
    } else {
        return v;
    }
    for (int i = 0; batch[i]; i++) v.bst[i] = st[strchr(l, batch[i]) - l];
    v.ok = v.ld >= 1;
    return v;
}

/* out (labels lo, shape so) += einsum of x (lx) and optional y (ly); overwrite: out = instead. */
static tnt_status einsum_into(tnt__scratch *sc, const char *lx, tnt_shape sx, const float *x, const char *ly,
                              tnt_shape sy, const float *y, const char *lo, tnt_shape so, float *out, bool overwrite) {
    char batch[MAX_LABELS + 1] = "", left[MAX_LABELS + 1] = "", right[MAX_LABELS + 1] = "", con[MAX_LABELS + 1] = "";
    const char *labels[3] = {lx, ly ? ly : "", lo};
    tnt_shape shapes[3] = {sx, sy, so};
    int nb = 0, nl = 0, nr = 0, nc = 0;
    int64_t B = 1, L = 1, R = 1, K = 1, bsize[MAX_LABELS];
    for (const char *q = lx; *q; q++) {
        bool in_y = ly && strchr(ly, *q), in_o = strchr(lo, *q) != NULL;
        int64_t sz = label_size(*q, labels, shapes, 3);
        if (in_y && in_o) bsize[nb] = sz, batch[nb++] = *q, B *= sz;
        else if (in_o) left[nl++] = *q, L *= sz;
        else if (in_y) con[nc++] = *q, K *= sz;
    }
    for (const char *q = ly ? ly : ""; *q; q++)
        if (strchr(lo, *q) && !strchr(lx, *q)) right[nr++] = *q, R *= label_size(*q, labels, shapes, 3);
    batch[nb] = left[nl] = right[nr] = con[nc] = 0;
    char ordx[3 * MAX_LABELS + 1], ordy[3 * MAX_LABELS + 1], ordc[3 * MAX_LABELS + 1];
    snprintf(ordx, sizeof ordx, "%s%s%s", batch, left, con);
    snprintf(ordy, sizeof ordy, "%s%s%s", batch, con, right);
    snprintf(ordc, sizeof ordc, "%s%s%s", batch, left, right);
    if (overwrite && !y) memset(out, 0, (size_t)tnt_shape_numel(so) * sizeof(float));
    if (!y) { /* one operand: permute and sum into the output's order, then add */
        float *Xs = strcmp(lx, ordx) ? tnt__scratch_get(sc, (size_t)(B * L * K) * sizeof(float)) : NULL;
        if (strcmp(lx, ordx) && !Xs) return TNT_ERR_NOMEM;
        const float *X = gather(lx, sx, x, ordx, Xs, B * L * K);
        int64_t cst[MAX_LABELS], ost[TNT_MAX_DIMS], acc = 1, st_of[MAX_LABELS];
        for (int i = (int)strlen(ordc) - 1; i >= 0; i--) st_of[i] = acc, acc *= label_size(ordc[i], labels, shapes, 3);
        for (int d = 0; d < so.ndim; d++) {
            const char *q = strchr(ordc, lo[d]);
            cst[d] = q ? st_of[q - ordc] : 0;
        }
        tnt__strides(so, ost);
        tnt__strided_add(so, out, ost, X, cst);
        return TNT_OK;
    }
    /* each operand in place when the GEMM can read it so, else gathered into [batch, rows, cols] */
    mview vx = matrix_view(lx, sx, batch, left, con, K), vy = matrix_view(ly, sy, batch, con, right, R),
          vc = matrix_view(lo, so, batch, left, right, R);
    const float *X = x, *Y = y;
    if (!vx.ok) {
        float *Xs = tnt__scratch_get(sc, (size_t)(B * L * K) * sizeof(float));
        if (!Xs) return TNT_ERR_NOMEM;
        X = gather(lx, sx, x, ordx, Xs, B * L * K);
        vx = (mview){.ok = true, .ld = K};
        for (int i = nb - 1; i >= 0; i--) vx.bst[i] = i == nb - 1 ? L * K : vx.bst[i + 1] * bsize[i + 1];
    }
    if (!vy.ok) {
        float *Ys = tnt__scratch_get(sc, (size_t)(B * K * R) * sizeof(float));
        if (!Ys) return TNT_ERR_NOMEM;
        Y = gather(ly, sy, y, ordy, Ys, B * K * R);
        vy = (mview){.ok = true, .ld = R};
        for (int i = nb - 1; i >= 0; i--) vy.bst[i] = i == nb - 1 ? K * R : vy.bst[i + 1] * bsize[i + 1];
    }
    float *C = out;
    /* written in place, the GEMM covers every element of out once: no zeroing to overwrite */
    if (overwrite && !(vc.ok && !vc.trans)) memset(out, 0, (size_t)tnt_shape_numel(so) * sizeof(float));
    if (!vc.ok || vc.trans) { /* the product into scratch, added to out in its label order below */
        if (!(C = tnt__scratch_get(sc, (size_t)(B * L * R) * sizeof(float)))) return TNT_ERR_NOMEM;
        vc = (mview){.ok = true, .ld = R};
        for (int i = nb - 1; i >= 0; i--) vc.bst[i] = i == nb - 1 ? L * R : vc.bst[i + 1] * bsize[i + 1];
    }
    bool direct = C == out;
    for (int64_t b = 0; b < B; b++) {
        int64_t ox = 0, oy = 0, oc = 0, rest = b;
        for (int i = nb - 1; i >= 0; i--) {
            int64_t k = rest % bsize[i];
            rest /= bsize[i];
            ox += k * vx.bst[i], oy += k * vy.bst[i], oc += k * vc.bst[i];
        }
        tnt_status s = tnt__sgemm(vx.trans, vy.trans, L, R, K, X + ox, vx.ld, Y + oy, vy.ld,
                                  direct && !overwrite ? 1.0f : 0.0f, C + oc, vc.ld);
        if (s != TNT_OK) return s;
    }
    if (direct) return TNT_OK;
    /* C [batch, left, right] into out: strides of C per output axis, 0 for labels it lacks */
    int64_t cst[MAX_LABELS], ost[TNT_MAX_DIMS], acc = 1, st_of[MAX_LABELS];
    for (int i = (int)strlen(ordc) - 1; i >= 0; i--) st_of[i] = acc, acc *= label_size(ordc[i], labels, shapes, 3);
    for (int d = 0; d < so.ndim; d++) {
        const char *q = strchr(ordc, lo[d]);
        cst[d] = q ? st_of[q - ordc] : 0;
    }
    tnt__strides(so, ost);
    tnt__strided_add(so, out, ost, C, cst);
    return TNT_OK;
}

static tnt_status forward_einsum(tnt__opctx *c) {
    eq_parts p;
    tnt_status s = eq_parse(c->node, c->in, c->n_in, &p);
    if (s != TNT_OK) return s;
    bool two = p.n_ops == 2;
    return einsum_into(c->scratch, p.op[0], c->in[0].s, c->in[0].d, two ? p.op[1] : NULL, two ? c->in[1].s : c->in[0].s,
                       two ? c->in[1].d : NULL, p.out, c->out[0].s, c->out[0].d, true);
}

static tnt_status backward_einsum(tnt__opctx *c) {
    eq_parts p;
    tnt_status s = eq_parse(c->node, c->in, c->n_in, &p);
    if (s != TNT_OK) return s;
    const tnt__ten *g = &(tnt__ten){.s = c->out[0].s, .d = (float *)c->dout[0]};
    /* din_overwrite has one entry per input: an einsum of one operand has no [1] */
    const bool over0 = c->din_overwrite && c->din_overwrite[0],
               over1 = c->n_in > 1 && c->din_overwrite && c->din_overwrite[1];
    if (p.n_ops == 1)
        return einsum_into(c->scratch, p.out, g->s, g->d, NULL, g->s, NULL, p.op[0], c->in[0].s, c->din[0], over0);
    if (c->din[0])
        s = einsum_into(c->scratch, p.out, g->s, g->d, p.op[1], c->in[1].s, c->in[1].d, p.op[0], c->in[0].s, c->din[0],
                        over0);
    if (s == TNT_OK && c->din[1])
        s = einsum_into(c->scratch, p.op[0], c->in[0].s, c->in[0].d, p.out, g->s, g->d, p.op[1], c->in[1].s, c->din[1],
                        over1);
    return s;
}

static tnt_status parse_einsum(tnt__opnode *n, const cJSON *attrs) {
    const cJSON *eq = cJSON_GetObjectItemCaseSensitive(attrs, "equation");
    if (!cJSON_IsString(eq) || strlen(eq->valuestring) >= sizeof n->a.eq)
        return tnt__error(TNT_ERR_ARG, "attribute \"equation\" is missing or longer than %d characters",
                          (int)sizeof n->a.eq - 1);
    int j = 0;
    for (const char *q = eq->valuestring; *q; q++)
        if (*q != ' ') n->a.eq[j++] = *q;
    n->a.eq[j] = 0;
    return TNT_OK;
}

const tnt__op_def tnt__ops_matmul[] = {
    {"matmul", 2, 2, NULL, infer_matmul, forward_matmul, backward_matmul},
    {"einsum", 1, 2, parse_einsum, infer_einsum, forward_einsum, backward_einsum},
    {0}};
