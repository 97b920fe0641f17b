/* dist.h: the data-parallel runtime on MPI: the world (ranks, collectives with errors checked),
 * configuration fingerprints, and the gradient reducer that allreduces fused buckets of the flat
 * gradient buffer while backward goes on. */
#ifndef TNT_DIST_H
#define TNT_DIST_H

#include "core/core.h"

/* World: MPI starts when start_mpi (tnt_init: the program runs under mpirun, or TNT_FORCE_MPI).
 * Otherwise, or with one rank, every collective below is a no-op that returns TNT_OK. */
tnt_status tnt__world_init(int *argc, char ***argv, bool start_mpi);
void tnt__world_finalize(void);
int tnt__world_rank(void);
int tnt__world_size(void);
bool tnt__world_active(void); /* MPI is initialized and size > 1 */
/* The thread level MPI provided (a tnt__thread_level; MULTIPLE without MPI), its name, and
 * whether it allows the comm-thread engine (MPI_THREAD_SERIALIZED or more; below, the gradient
 * allreduces run in the nonblocking engine from the main thread). */
int tnt__world_thread_level(void);
const char *tnt__thread_level_name(int level);
bool tnt__world_comm_thread_ok(void);
/* The MPI library in one line (MPI_Get_library_version up to its first ',' or newline), e.g.
 * "Open MPI v4.1.4" or "MPICH Version:	4.0.2"; "" when MPI cannot say. */
void tnt__world_library(char *buf, size_t size);

/* The device of this rank (comm/device_choice.c): chosen in tnt_init from TNT_DEVICE, with the same
 * outcome on every rank (an error on all, or the CPU on all when one cannot use a GPU under auto);
 * released by tnt_finalize. */
tnt_status tnt__device_choose(void);
void tnt__device_release(void);
/* Ranks of this node that tnt_init put on this rank's GPU, itself included (0: no GPU open; -1:
 * the GPU was opened outside tnt_init's choice, by a model compiled for the GPU under
 * TNT_DEVICE=cpu, and who else uses it is not known). */
int tnt__device_shared_by(void);

/* How GPU ranks sum their gradients (comm/gpu_comm.c): NCCL on the device, or staged through the
 * host and the MPI reducer. The inputs of one rank's choice: */
typedef struct tnt__gpu_comm_inputs {
    int setting;        /* TNT_GPU_COMM: a tnt__gpu_comm */
    int ranks;          /* ranks that train together */
    bool nccl;          /* tnt__gpu_nccl_available */
    const char *nccl_why; /* its reason when not */
    int shared_by;      /* tnt__device_shared_by (1 for the emulated device's stand-in) */
} tnt__gpu_comm_inputs;
/* This rank's choice: TNT__GPU_COMM_NCCL or TNT__GPU_COMM_HOST; for host, why gets the reason in a
 * phrase ("TNT_GPU_COMM=mpi", "no libnccl.so.2", "2 ranks share this GPU (NCCL takes one rank
 * per GPU)"; "" for a single rank, which sums nothing). Pure: the tests call it directly. */
int tnt__gpu_comm_choose(const tnt__gpu_comm_inputs *in, char *why, size_t size);
/* Collective over every rank: each one's choice, agreed (NCCL only when every rank can), then the
 * communicator made once per process (rank 0's id broadcast). Returns the choice in *comm; a
 * fallback from NCCL is said in one line (a WARNING when TNT_GPU_COMM=nccl asked for it, else
 * INFO) naming why. Errors only when MPI or ncclCommInitRank fail. */
tnt_status tnt__gpu_comm_open(int *comm);

/* In-place sums across ranks (double / int64 / float). */
tnt_status tnt__allreduce_sum_f64(double *x, int64_t n);
tnt_status tnt__allreduce_sum_i64(int64_t *x, int64_t n);
tnt_status tnt__allreduce_sum_f32(float *x, int64_t n);
/* Broadcast of n floats from the master. */
tnt_status tnt__bcast_f32(float *x, int64_t n);
tnt_status tnt__barrier(void);
/* Gathers variable-length float arrays at the master (all=false) or on every rank (all=true).
 * counts/displs are filled for every rank (size entries, in floats); *out receives a new buffer
 * of the total (NULL on non-receiving ranks). */
tnt_status tnt__gatherv_f32(const float *x, int64_t n, bool all, float **out, int64_t *counts, int64_t *displs);

/* Every rank passes k named 64-bit fingerprints of its configuration; when any rank differs,
 * every rank returns TNT_ERR_MPI with a message naming the component, the rank and both values.
 * Never hangs: all ranks take part in the same collective. */
tnt_status tnt__check_same(const char *who, const char *const *names, const uint64_t *values, int k);

/* Agreement after a step that only some ranks may have failed: sums[k] are summed across ranks
 * in the same collective. When any rank's local status is not TNT_OK, every rank returns that
 * status with the message of the lowest failing rank ("rank 1: ..."). */
tnt_status tnt__agree(tnt_status local, int64_t *sums, int k);

/* Where training is (epoch and step from 1; phase a string literal), for the stall inspector's
 * account of a rank that stopped arriving at collectives (TNT_STALL_CHECK_SECONDS). */
void tnt__comm_set_position(int64_t epoch, int64_t step, const char *phase);

/* FNV-1a, for fingerprints */
uint64_t tnt__fnv1a(uint64_t h, const void *data, size_t len);

/* ---- gradient reducer ------------------------------------------------------------------------
 * Buckets are contiguous slices [begin, end) of the flat gradient buffer (backward order), cut at
 * layer boundaries once a bucket holds at least threshold bytes (0: one bucket per layer).
 * Every rank computes the same plan and issues the same allreduces in the same order. A step:
 * begin_step; start each bucket as backward completes it (ready: by prefix, or start_bucket);
 * wait_bucket where one sum is needed early; finish_step. The implementation behind these calls
 * (comm/reducer.h) is the flat allreduce or the node-aware reduction. */
typedef struct tnt__reducer tnt__reducer;

/* layer_end[i] (n_layers entries, in backward order) is the gradient prefix complete after the
 * i-th layer with weights has finished backward. */
tnt__reducer *tnt__reducer_new(float *grads, int64_t n, const int64_t *layer_end, int n_layers,
                               size_t threshold_bytes, tnt_comm_mode mode, tnt_compression compression,
                               tnt_reducer_kind kind, int n_slots);
void tnt__reducer_free(tnt__reducer *r);
void tnt__reducer_begin_step(tnt__reducer *r);
/* Sharded reducers: update(ctx, begin, end) applies the optimizer to [begin, end) of the flat
 * buffers (TNT_OK, or a status whose error it has logged). Set before a step's first bucket
 * starts (NULL: none), it runs on the comm thread for each slice this rank owns as soon as the
 * slice holds its sum, so the update overlaps the rest of backward (PyTorch's
 * ZeroRedundancyOptimizer with overlap_with_ddp). */
typedef tnt_status (*tnt__slice_update)(void *ctx, int64_t begin, int64_t end);
void tnt__reducer_set_update(tnt__reducer *r, tnt__slice_update update, void *ctx);
bool tnt__reducer_updates(const tnt__reducer *r); /* the step set an update (tests) */
/* Set before a step's first bucket starts, the same on every rank: frozen[0 .. 2n) are ascending
 * [begin, end) ranges whose gradients nobody reads (frozen layers' weights). A bucket inside one
 * is not summed (its ranks still meet at its arrival, so the stall inspector sees them). */
void tnt__reducer_set_frozen(tnt__reducer *r, const int64_t *frozen, int n);
/* Backward has finished writing grads[0, prefix): start every bucket inside it. */
void tnt__reducer_ready(tnt__reducer *r, int64_t prefix);
/* Starts bucket i, the next in plan order (the caller staged its gradients itself). */
void tnt__reducer_start_bucket(tnt__reducer *r, int i);
/* Waits until bucket i (started) holds the sum of every rank's gradients. */
tnt_status tnt__reducer_wait_bucket(tnt__reducer *r, int i);
/* Starts what is left and waits for all buckets of the step. Node-aware, sharded: the caller
 * meets every rank (the step's agreement) before the next step's backward writes gradients. */
tnt_status tnt__reducer_finish_step(tnt__reducer *r);
/* Bucket i's slice [*begin, *end) of the gradient buffer. */
void tnt__reducer_bucket(const tnt__reducer *r, int i, int64_t *begin, int64_t *end);
int tnt__reducer_num_buckets(const tnt__reducer *r);
/* The reduction that runs, after the fallbacks (flat without the comm thread, with one rank per
 * node or nodes of different sizes). */
tnt_reducer_kind tnt__reducer_kind(const tnt__reducer *r);
/* Where backward must write the gradients: the grads given (flat) or this rank's buffer in the
 * node's shared-memory window (node-aware), n floats. */
float *tnt__reducer_grads(const tnt__reducer *r);
/* Sharded: this rank's slice [*begin, *end) of bucket i, whose sum it holds after finish_step
 * (the rest of its buffer does not hold sums); not sharded: the whole bucket. */
void tnt__reducer_owned(const tnt__reducer *r, int i, int64_t *begin, int64_t *end);
/* Node-aware, not sharded: with land false (the caller adds nothing to the gradients after the
 * reduction) the sums stay in the node's shared buffer, read from tnt__reducer_sums, instead of
 * being copied into every rank's buffer. Every rank must set the same; default true. */
void tnt__reducer_set_land(tnt__reducer *r, bool land);
/* Where the summed gradients are after finish_step (n floats; sharded: valid on owned slices). */
const float *tnt__reducer_sums(const tnt__reducer *r);
/* Copies the last step's summed gradients, whole, into to (n floats): after a fit, once every
 * rank has finished it (sharded, the slices come from their owners' buffers). */
void tnt__reducer_copy_sums(const tnt__reducer *r, float *to);
/* Sharded: the node's one copy of the weights (n floats) in shared memory; NULL else. A fit may
 * keep the model's weights there; share_weights then only meets the node's ranks. */
float *tnt__reducer_weights(const tnt__reducer *r);
/* Sharded: storage for optimizer slot k (n floats), once per node in shared memory; NULL else. */
float *tnt__reducer_slot(const tnt__reducer *r, int k);
/* Sharded, after each rank updated its owned slices of params: every rank of the node gets the
 * others' slices (through shared memory; one barrier). */
tnt_status tnt__reducer_share_weights(tnt__reducer *r, float *params);
/* A barrier of every rank that also orders the node's shared-memory writes before it against
 * the reads after it. */
tnt_status tnt__reducer_sync(tnt__reducer *r, const char *what);
/* Node-computed kernel gradients (node-aware reducers, reducer_node_dw.c): a kernel gradient of
 * the form x^T · dpre (Dense) at [offset, offset + in * units) of the flat gradients is computed
 * once per node: backward stashes each rank's x and dpre rows in the node's shared memory, and
 * the rank that owns a slice of the bucket computes that slice over every rank's rows in place
 * of summing the node's buffers (no per-rank gradient, no sum). cap_rows: rows a rank's stash
 * holds. Setup is collective over the world, between steps, with the same list on every rank
 * (n < 0: this rank could not make its list; every rank then fails); a no-op for a flat
 * reducer. */
typedef struct tnt__node_dw_kernel {
    int64_t offset, in, units, cap_rows;
} tnt__node_dw_kernel;
tnt_status tnt__reducer_node_dw_setup(tnt__reducer *r, const tnt__node_dw_kernel *kernels, int n);
/* The registered kernel whose gradient starts at offset; -1: none. */
int tnt__reducer_node_dw_find(const tnt__reducer *r, int64_t offset);
/* Kernel k's stash of this rank: x (cap_rows, ldx) and dpre (cap_rows, lddpre). */
void tnt__reducer_node_dw_stash(const tnt__reducer *r, int k, float **x, int64_t *ldx, float **dpre, int64_t *lddpre,
                                int64_t *cap_rows);
/* Backward stashed kernel k's rows this step (before the bucket holding it starts). */
void tnt__reducer_node_dw_stashed(tnt__reducer *r, int k, int64_t rows);
/* A rank with no samples this step (no backward): every kernel stashed with no rows. */
void tnt__reducer_node_dw_stash_none(tnt__reducer *r);
/* The engine the reducer runs (after the fallbacks: collective layers, thread level). */
tnt_comm_mode tnt__reducer_mode(const tnt__reducer *r);
/* Statistics since creation: seconds inside allreduce calls, and seconds the compute thread
 * waited in finish_step (the part not hidden behind backward). */
void tnt__reducer_stats(const tnt__reducer *r, double *comm_seconds, double *exposed_seconds, int64_t *steps);

#endif
