/* scale_sim.c: one data-parallel training step of a profiled model on many ranks simulated by
 * SimGrid's SMPI (smpirun; built with smpicc, see bench/scale/README.md), the compute of every
 * layer charged as its measured time (profile_model --table), so that 256 ranks cost seconds.
 *
 *   scale_sim --table FILE --reducer flat|node|sharded|lib-flat [--steps N] [--threshold-kb K]
 *             [--compute-scale X] [--sum-gbps B] [--cross auto|mpi|ring|halving|doubling]
 *   scale_sim --allreduce FLOATS [--sum-gbps B]: one allreduce over all ranks, as the modelled
 *             reducers charge it (bench/scale/validate.py sets it against a real one)
 *
 * The step is the library's, event for event (src/training/parallel.c, src/model/plan.c):
 * forward, the loss and the rest, the step agreement (a 24-byte allreduce), backward layer by
 * layer in reverse with each gradient bucket handed to the reduction as soon as its layers are
 * done (the library's own bucket plan, tnt__reducer_new), the wait for the last bucket, the
 * step-end agreement, the optimizer. Where the reductions run:
 *  - lib-flat: the library's flat reducer itself (nonblocking engine, MPI_Iallreduce of real
 *    buffers; SMPI grants MPI_THREAD_SINGLE, so the comm thread cannot run). Memory: every rank
 *    holds the gradients twice, so only small rank counts (validation).
 *  - flat, node, sharded: the comm thread of the default engine is modelled by a second SMPI
 *    rank on the same host (world rank 2k + 1 serves compute rank 2k), which runs what
 *    reducer_flat.c / reducer_node.c run on the comm thread, bucket by bucket: the arrival
 *    barrier over all ranks, then flat: MPI_Allreduce over all ranks; node: the slice sum over
 *    the node's buffers, charged as memory traffic at --sum-gbps per rank (SMPI has no
 *    shared-memory model), then the allreduce of the slice among the ranks of the same local
 *    index (MPI_Comm_split_type by host, as the library): the library's own cross-node
 *    allreduce (comm/cross_node.c, --cross as TNT_CROSS_NODE) or, --cross mpi, MPI_Allreduce;
 *    node: one more barrier at the end. SMPI does not charge the additions (neither inside its
 *    collectives nor MPI_Reduce_local): each allreduce is followed by its reduction traffic, 12
 *    bytes per float each rank adds (MPI: (q-1)/q of the buffer), at the same rate. Buffers come from SMPI_SHARED_MALLOC and the allreduce adds nothing (a no-op
 *    operation): values do not matter here, and 256 ranks fit in memory. sharded: the
 *    optimizer's time divides by the ranks of the node, and its weight exchange is a barrier
 *    of the node.
 * Prints on world rank 0: "scale_sim: MODEL REDUCER ranks P nodes N step S compute C exposed E". */
#include "comm/comm.h"
#include "comm/cross_node.h"

#include <mpi.h>
#include <smpi/smpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct profile {
    char model[64];
    long batch;
    double step, optimizer;
    int64_t params;
    int nodes;
    double *fwd, *bwd;
    int64_t *grad_end;
} profile;

static int fail(const char *what, const char *detail) {
    fprintf(stderr, "scale_sim: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
}

static bool read_profile(const char *path, profile *p) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[512], key[64];
    int node = -1;
    memset(p, 0, sizeof *p);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%63s", key) != 1) continue;
        if (!strcmp(key, "model")) sscanf(line, "%*s %63s", p->model);
        else if (!strcmp(key, "batch")) sscanf(line, "%*s %ld", &p->batch);
        else if (!strcmp(key, "step")) sscanf(line, "%*s %lf", &p->step);
        else if (!strcmp(key, "optimizer")) sscanf(line, "%*s %lf", &p->optimizer);
        else if (!strcmp(key, "params")) sscanf(line, "%*s %lld", (long long *)&p->params);
        else if (!strcmp(key, "nodes")) {
            sscanf(line, "%*s %d", &p->nodes);
            if (p->nodes < 1 || p->nodes > 1000000) break;
            p->fwd = calloc((size_t)p->nodes, sizeof *p->fwd);
            p->bwd = calloc((size_t)p->nodes, sizeof *p->bwd);
            p->grad_end = calloc((size_t)p->nodes, sizeof *p->grad_end);
            if (!p->fwd || !p->bwd || !p->grad_end) break;
        } else if (p->grad_end) {
            long long end;
            int i;
            double fw, bw;
            if (sscanf(line, "%d %lf %lf %lld", &i, &fw, &bw, &end) == 4 && i == node + 1 && i < p->nodes)
                p->fwd[i] = fw, p->bwd[i] = bw, p->grad_end[i] = end, node = i;
        }
    }
    fclose(f);
    return p->grad_end && node == p->nodes - 1 && p->params > 0 && p->step > 0;
}

/* the additions SMPI leaves out: values need not be summed here (see the top) */
static void no_sum(void *in, void *inout, int *len, MPI_Datatype *type) { (void)in, (void)inout, (void)len, (void)type; }

static struct {
    const char *reducer;
    double scale, sum_bps;
    int steps;
    int64_t threshold_kb;
    tnt__cross_algo cross; /* node, sharded: the cross-node stage (TNT_CROSS_NODE) */
} opt = {"node", 1.0, 2.0e9, 2, 32, TNT__CROSS_AUTO};

static profile prof;
static tnt__reducer *plan_only; /* the library's bucket plan (MPI not started: no reduction) */
static int n_buckets;
static MPI_Op noop;

static void charge(double seconds) {
    if (seconds > 0) smpi_execute_benched(seconds); /* at the host's speed (smpi_execute: smpi/host-speed) */
}

/* Memory traffic of summing or adding bytes at the per-rank rate. */
static void charge_traffic(double bytes) { charge(bytes / opt.sum_bps); }

/* The compute rank's step (compute_comm: the compute ranks; partner: its comm rank or -1 when
 * the library's reducer runs here; local: the compute ranks of its host). Returns the step's
 * seconds and, in exposed, the wait for the reduction after backward. */
static double step(MPI_Comm compute_comm, int partner, MPI_Comm local, tnt__reducer *lib, double *exposed) {
    int p_local;
    MPI_Comm_size(local, &p_local);
    bool sharded = !strcmp(opt.reducer, "sharded");
    double layers = 0, fwd = 0;
    for (int i = 0; i < prof.nodes; i++) layers += prof.fwd[i] + prof.bwd[i], fwd += prof.fwd[i];
    double rest = prof.step - layers - prof.optimizer; /* loss, data, framework */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    charge(opt.scale * fwd);
    charge(opt.scale * (rest > 0 ? rest : 0));
    int64_t counts[3] = {1, prof.batch, 0};
    MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_INT64_T, MPI_SUM, compute_comm); /* the step agreement */
    if (lib) tnt__reducer_begin_step(lib);
    MPI_Request *sent = calloc((size_t)n_buckets + 1, sizeof *sent);
    int started = 0;
    for (int i = prof.nodes - 1; i >= 0; i--) {
        charge(opt.scale * prof.bwd[i]);
        if (lib) {
            tnt__reducer_ready(lib, prof.grad_end[i]);
            continue;
        }
        int64_t b, e;
        while (started < n_buckets && (tnt__reducer_bucket(plan_only, started, &b, &e), e <= prof.grad_end[i])) {
            MPI_Isend(NULL, 0, MPI_BYTE, partner, started, MPI_COMM_WORLD, &sent[started]);
            started++;
        }
    }
    double t1 = MPI_Wtime();
    if (lib) {
        if (tnt__reducer_finish_step(lib) != TNT_OK) fail("the library's reducer", tnt_last_error());
    } else {
        while (started < n_buckets) MPI_Isend(NULL, 0, MPI_BYTE, partner, started, MPI_COMM_WORLD, &sent[started]), started++;
        MPI_Recv(NULL, 0, MPI_BYTE, partner, n_buckets, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Waitall(started, sent, MPI_STATUSES_IGNORE);
    }
    *exposed = MPI_Wtime() - t1;
    free(sent);
    int64_t outcome = 0;
    MPI_Allreduce(MPI_IN_PLACE, &outcome, 1, MPI_INT64_T, MPI_SUM, compute_comm); /* the step-end agreement */
    charge(opt.scale * prof.optimizer / (sharded ? p_local : 1));
    if (sharded) MPI_Barrier(local); /* the weight exchange within the node */
    return MPI_Wtime() - t0;
}

/* The comm rank: what the comm thread runs for one step (see the top). */
static void comm_step(MPI_Comm comms, MPI_Comm local, MPI_Comm cross, float *grads, int partner) {
    bool flat = !strcmp(opt.reducer, "flat");
    int p, me, nodes, world;
    MPI_Comm_size(local, &p);
    MPI_Comm_rank(local, &me);
    MPI_Comm_size(cross, &nodes);
    MPI_Comm_size(comms, &world);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n_buckets; i++) {
        MPI_Recv(NULL, 0, MPI_BYTE, partner, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Barrier(comms); /* tnt__wait_arrival: every rank has finished bucket i */
        int64_t b, e;
        tnt__reducer_bucket(plan_only, i, &b, &e);
        if (flat) {
            MPI_Allreduce(MPI_IN_PLACE, grads + b, (int)(e - b), MPI_FLOAT, noop, comms);
            charge_traffic(12.0 * (double)(e - b) * (world - 1) / world);
            continue;
        }
        /* reducer_node.c's slice(): local rank me's share of the bucket, cut at 16 floats */
        int64_t len = e - b, s = me == 0 ? b : (b + len * me / p) & ~(int64_t)15;
        int64_t t = me + 1 == p ? e : (b + len * (me + 1) / p) & ~(int64_t)15;
        s = s < b ? b : s > e ? e : s, t = t < b ? b : t > e ? e : t;
        charge_traffic(4.0 * (double)(p + 1) * (double)(t - s)); /* p buffers read, the sum written */
        if (nodes > 1 && t > s) { /* reducer_node.c's cross_allreduce: ours, or MPI's */
            tnt__cross_algo algo = tnt__cross_choose(opt.cross, 4 * (t - s), nodes);
            tnt__cross_allreduce(grads + s, t - s, MPI_FLOAT, noop, cross, algo);
            int64_t added = algo == TNT__CROSS_MPI ? (t - s) * (nodes - 1) / nodes : tnt__cross_combined(algo, t - s, nodes);
            charge_traffic(12.0 * (double)added);
        }
    }
    if (!flat) MPI_Barrier(comms); /* node_finish: the last bucket's slices are summed */
    MPI_Send(NULL, 0, MPI_BYTE, partner, n_buckets, MPI_COMM_WORLD);
}

/* The modelled allreduce of n floats over all ranks, best of 5: "scale_sim: allreduce ...". */
static int allreduce_only(int64_t n) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    float *x = SMPI_SHARED_MALLOC((size_t)n * sizeof(float));
    MPI_Op_create(no_sum, 1, &noop);
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, noop, MPI_COMM_WORLD);
        charge_traffic(12.0 * (double)n * (size - 1) / size);
        double dt = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        best = dt < best ? dt : best;
    }
    if (rank == 0) printf("scale_sim: allreduce ranks %d bytes %lld seconds %.6e\n", size, (long long)n * 4, best);
    MPI_Op_free(&noop);
    SMPI_SHARED_FREE(x);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv) {
    const char *table = NULL;
    int64_t allreduce_floats = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--table")) table = argv[i + 1];
        else if (!strcmp(argv[i], "--reducer")) opt.reducer = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) opt.steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threshold-kb")) opt.threshold_kb = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--compute-scale")) opt.scale = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--sum-gbps")) opt.sum_bps = 1e9 * atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--allreduce")) allreduce_floats = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--cross")) {
            static const char *const names[] = {"auto", "mpi", "ring", "halving", "doubling"};
            int k = 0;
            while (k < 5 && strcmp(argv[i + 1], names[k])) k++;
            if (k == 5) table = NULL, i = argc, allreduce_floats = 0; /* usage */
            else opt.cross = (tnt__cross_algo)k;
        }
        else table = NULL, i = argc, allreduce_floats = 0; /* unknown: usage */
    }
    if (allreduce_floats > 0 && allreduce_floats <= INT32_MAX) {
        if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
        return allreduce_only(allreduce_floats);
    }
    bool lib = !strcmp(opt.reducer, "lib-flat");
    bool known = lib || !strcmp(opt.reducer, "flat") || !strcmp(opt.reducer, "node") || !strcmp(opt.reducer, "sharded");
    if (lib ? tnt_init(&argc, &argv) != TNT_OK : MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    if (!table || !known || opt.steps < 1 || opt.scale <= 0 || opt.sum_bps <= 0 || opt.threshold_kb < 0)
        return fail("usage: scale_sim --table FILE --reducer flat|node|sharded|lib-flat [--steps N] "
                    "[--threshold-kb K] [--compute-scale X] [--sum-gbps B] [--cross auto|mpi|ring|halving|doubling]", NULL);
    if (!read_profile(table, &prof)) return fail("cannot read the profile table", table);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!lib && size % 2) return fail("the modelled reducers need an even number of SMPI ranks (compute, comm)", NULL);
    /* the library's plan: buckets of the gradient buffer in backward order (parallel.c's ends) */
    int64_t *ends = calloc((size_t)prof.nodes, sizeof *ends);
    int k = 0;
    for (int i = prof.nodes - 1; i >= 0; i--)
        if (prof.grad_end[i] > (k ? ends[k - 1] : 0)) ends[k++] = prof.grad_end[i];
    bool compute = lib || rank % 2 == 0;
    float *grads = lib       ? calloc((size_t)prof.params, sizeof(float))
                   : compute ? NULL /* only the comm ranks reduce */
                             : SMPI_SHARED_MALLOC((size_t)prof.params * sizeof(float));
    tnt__reducer *r = NULL;
    if (lib) {
        r = tnt__reducer_new(grads, prof.params, ends, k, (size_t)opt.threshold_kb * 1024, TNT_COMM_MODE_NONBLOCKING,
                             TNT_COMPRESSION_NONE, TNT_REDUCER_FLAT, 0);
        plan_only = r;
    } else {
        /* tnt_init is not called: the reducer is made inactive, as a plan */
        plan_only = tnt__reducer_new(grads, prof.params, ends, k, (size_t)opt.threshold_kb * 1024,
                                     TNT_COMM_MODE_NONBLOCKING, TNT_COMPRESSION_NONE, TNT_REDUCER_FLAT, 0);
    }
    free(ends);
    if (!plan_only) return fail("cannot plan the buckets", tnt_last_error());
    n_buckets = tnt__reducer_num_buckets(plan_only);
    MPI_Op_create(no_sum, 1, &noop);
    MPI_Comm role, local, cross;
    MPI_Comm_split(MPI_COMM_WORLD, compute ? 0 : 1, rank, &role);
    MPI_Comm_split_type(role, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    int me, p, nodes, ranks;
    MPI_Comm_rank(local, &me);
    MPI_Comm_size(local, &p);
    MPI_Comm_split(role, me, rank, &cross);
    MPI_Comm_size(cross, &nodes);
    MPI_Comm_size(role, &ranks);
    double worst = 0, exposed = 0;
    for (int s = 0; s < opt.steps; s++) {
        double dt = 0, ex = 0;
        if (compute) dt = step(role, lib ? -1 : rank + 1, local, r, &ex);
        else comm_step(role, local, cross, grads, rank - 1);
        double both[2] = {dt, ex};
        MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); /* the slowest rank's step */
        if (s == opt.steps - 1) worst = both[0], exposed = both[1];
    }
    if (rank == 0) {
        double compute_s = prof.step * opt.scale; /* one rank's step: the speed-ups' baseline */
        printf("scale_sim: %s %s ranks %d nodes %d buckets %d step %.6f compute %.6f exposed %.6f\n", prof.model,
               opt.reducer, ranks, nodes, n_buckets, worst, compute_s, exposed);
        fflush(stdout);
    }
    MPI_Comm_free(&cross), MPI_Comm_free(&local), MPI_Comm_free(&role);
    MPI_Op_free(&noop);
    tnt__reducer_free(plan_only);
    if (lib) free(grads), tnt_finalize();
    else {
        if (grads) SMPI_SHARED_FREE(grads);
        MPI_Finalize();
    }
    return 0;
}
