/* device_choice.c: which device this rank computes on, decided once in tnt_init from TNT_DEVICE:
 * auto (the default: the GPU when the backend is usable, else the CPU with one INFO line saying
 * why), cpu, or gpu (the GPU, or an error that says why not). Each rank takes the GPU of its local rank (the ranks sharing its memory, or
 * TNT_NODE_SIZE's groups) modulo the GPUs it sees, or TNT_GPU_ORDINAL; several ranks may share a
 * GPU. Every rank decides alike: when one rank cannot use a GPU under auto, all run on the CPU. */
#include "comm/comm.h"
#include "core/config.h"
#include "gpu/gpu.h"

#include <mpi.h>
#include <stdio.h>

static struct {
    bool chosen;
    char status[384]; /* tnt_gpu_status() */
    int shared_by;    /* ranks of this node on this rank's GPU (itself included; 0: no GPU) */
} choice;

/* This rank's index among the ranks of its node and their number (0 and 1 without MPI). */
static tnt_status local_rank(int *out, int *size) {
    *out = 0, *size = 1;
    if (!tnt__world_active()) return TNT_OK;
    const int rank = tnt__world_rank();
    const int64_t group = tnt__config_get()->node_size;
    MPI_Comm local;
    int rc = group > 0 ? MPI_Comm_split(MPI_COMM_WORLD, (int)(rank / group), rank, &local)
                       : MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS) return tnt__error(TNT_ERR_MPI, "MPI_Comm_split_type (the ranks of this node) failed: %d", rc);
    MPI_Comm_rank(local, out);
    MPI_Comm_size(local, size);
    MPI_Comm_free(&local);
    return TNT_OK;
}

/* This rank's own choice; *why gets the reason it stays on the CPU (else ""). */
static tnt_status choose_locally(const tnt__config *c, int local, int local_size, const char **why) {
    static char reason[320];
    *why = "";
    const char *unavailable;
    if (!tnt__gpu_available(&unavailable)) {
        snprintf(reason, sizeof reason, "%s", unavailable);
        *why = reason;
        if (c->device == TNT__DEVICE_GPU)
            return tnt__error(TNT_ERR_UNSUPPORTED, "TNT_DEVICE=gpu: no usable GPU: %s", unavailable);
        return TNT_OK;
    }
    const int count = tnt__gpu_device_count();
    if (c->gpu_ordinal >= count)
        return tnt__error(TNT_ERR_ARG, "TNT_GPU_ORDINAL=%lld: this node has %d GPU%s (0 to %d)",
                          (long long)c->gpu_ordinal, count, count == 1 ? "" : "s", count - 1);
    const int ordinal = c->gpu_ordinal >= 0 ? (int)c->gpu_ordinal : local % count;
    tnt_status s = tnt__gpu_open(ordinal);
    /* the node's ranks on this GPU: all (one ordinal for all), else those equal modulo count */
    choice.shared_by = c->gpu_ordinal >= 0 ? local_size : local_size / count + (ordinal < local_size % count);
    if (s == TNT_OK) return TNT_OK;
    if (c->device == TNT__DEVICE_GPU) return tnt__error_prefix(s, "TNT_DEVICE=gpu: ");
    /* auto: a GPU that loads but does not open (out of memory, busy) leaves the CPU, said loudly */
    snprintf(reason, sizeof reason, "%s", tnt_last_error());
    *why = reason;
    tnt_log(TNT_LOG_WARNING, "TNT_DEVICE=auto: GPU %d did not open, running on the CPU: %s", ordinal, reason);
    return TNT_OK;
}

tnt_status tnt__device_choose(void) {
    const tnt__config *c = tnt__config_get();
    if (c->device == TNT__DEVICE_CPU) { /* no collective, nothing loaded */
        snprintf(choice.status, sizeof choice.status, "cpu: TNT_DEVICE=cpu");
        choice.chosen = true;
        return TNT_OK;
    }
    int local = 0, local_size = 1;
    const char *why = "";
    /* every rank has the same environment (as for every setting): all take part below, or none */
    tnt_status s = local_rank(&local, &local_size);
    if (s == TNT_OK) s = choose_locally(c, local, local_size, &why);
    /* every rank fails alike, and under auto every rank takes the CPU if one must */
    int64_t on_cpu = s == TNT_OK && !tnt__gpu_is_open();
    if (tnt__world_active()) s = tnt__agree(s, &on_cpu, 1);
    if (s != TNT_OK) {
        tnt__gpu_close();
        return s;
    }
    if (tnt__gpu_is_open() && on_cpu > 0) {
        tnt__gpu_close();
        static char others[96];
        snprintf(others, sizeof others, "%lld of %d ranks cannot use a GPU", (long long)on_cpu, tnt__world_size());
        why = others;
    }
    if (tnt__gpu_is_open()) {
        snprintf(choice.status, sizeof choice.status, "gpu %d: %s", tnt__gpu_ordinal(), tnt__gpu_device_name());
        tnt_log(TNT_LOG_INFO, "device: %s", choice.status);
    } else {
        snprintf(choice.status, sizeof choice.status, "cpu: %s", why);
        if (c->device == TNT__DEVICE_AUTO) tnt_log(TNT_LOG_INFO, "TNT_DEVICE=auto: running on the CPU: %s", why);
    }
    choice.chosen = true;
    return TNT_OK;
}

void tnt__device_release(void) {
    tnt__gpu_close();
    choice.chosen = false;
    choice.shared_by = 0;
}

int tnt__device_shared_by(void) { return !tnt__gpu_is_open() ? 0 : choice.shared_by > 0 ? choice.shared_by : -1; }

/* Before tnt_init (the launcher asks without starting MPI) the settings are read here, and the
 * status says what the backend offers. */
static bool settings_read(void) {
    return choice.chosen || tnt__config_load() == TNT_OK;
}

const char *tnt_gpu_status(void) {
    if (choice.chosen) return choice.status;
    static char before[384];
    const char *why = "";
    if (!settings_read()) snprintf(before, sizeof before, "cpu: %s", tnt_last_error());
    else if (!tnt__gpu_available(&why)) snprintf(before, sizeof before, "cpu: %s", why);
    else snprintf(before, sizeof before, "gpus: %d found, tnt_init chooses one", tnt__gpu_device_count());
    return before;
}

int tnt_gpu_device_count(void) { return settings_read() ? tnt__gpu_device_count() : 0; }

void tnt_gpu_set_tf32(bool enabled) { tnt__gpu_set_tf32(enabled); }

bool tnt_gpu_tf32_enabled(void) { return settings_read() && tnt__gpu_tf32(); }
