/* devices.h: the device each rank of a launch takes, as tnt_init will choose it (comm/device_choice.c):
 * the CPU under TNT_DEVICE=cpu (--no-gpu; also the library's default), else GPU local_rank % GPUs
 * of its host, or TNT_GPU_ORDINAL. The launcher counts the GPUs of the host it runs on (through
 * tnt_gpu_device_count) and takes the other hosts to have as many, as the original Tarantella does. */
#ifndef TNT_LAUNCHER_DEVICES_H
#define TNT_LAUNCHER_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct device_plan {
    bool gpu;       /* the ranks use GPUs */
    int gpus;       /* GPUs of this host (0 when not counted or none) */
    long ordinal;   /* TNT_GPU_ORDINAL, -1 when not set */
    char why[512];  /* why the ranks run on the CPU (when !gpu) */
} device_plan;

/* device: the TNT_DEVICE the ranks will see (NULL: not set, the library's default) and `source`,
 * where it comes from ("--no-gpu", "-x", "the environment"); ordinal: TNT_GPU_ORDINAL or NULL.
 * Returns false, with the message in p->why, for a value tnt_init would refuse. */
bool devices_plan(const char *device, const char *source, const char *ordinal, device_plan *p);

/* A note on stderr when ranks of a node will share GPUs (they may: host staging works for them). */
void devices_note_sharing(FILE *out, const device_plan *p, long ranks_per_node);

/* One line per rank: "rank 2 on nodeB (local rank 0): gpu 0" or "rank 0 on localhost: cpu (--no-gpu)";
 * ranks fill the hosts in order, slots[i] on host i, as mpirun places them. */
void devices_print(FILE *out, const device_plan *p, long n, size_t n_hosts, char *const *hosts, const long *slots);

#endif
