/* devices.c: the device each rank of a launch takes (see devices.h). */
#include "devices.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <tarantella.h>

#include "util.h"

bool devices_plan(const char *device, const char *source, const char *ordinal, device_plan *p) {
    *p = (device_plan){.ordinal = -1};
    if (ordinal && *ordinal && !parse_long(ordinal, 0, 1023, &p->ordinal)) {
        snprintf(p->why, sizeof p->why, "invalid TNT_GPU_ORDINAL '%s' (%s): expected an integer from 0 to 1023",
                 ordinal, source);
        return false;
    }
    if (!device || !*device) device = "auto"; /* the library's default (core/config.c) */
    if (!strcasecmp(device, "cpu")) {
        snprintf(p->why, sizeof p->why, "%s", !strcmp(source, "--no-gpu") ? "--no-gpu" : "TNT_DEVICE=cpu");
        return true;
    }
    if (strcasecmp(device, "auto") && strcasecmp(device, "gpu")) {
        snprintf(p->why, sizeof p->why, "invalid TNT_DEVICE '%s' (%s): expected auto, cpu or gpu", device, source);
        return false;
    }
    p->gpus = tnt_gpu_device_count();
    if (p->gpus > 0) {
        p->gpu = true;
        if (p->ordinal >= p->gpus) {
            snprintf(p->why, sizeof p->why, "TNT_GPU_ORDINAL=%ld: this host has %d GPU%s", p->ordinal, p->gpus,
                     p->gpus == 1 ? "" : "s");
            return false;
        }
        return true;
    }
    const char *status = tnt_gpu_status(); /* "cpu: <why>" */
    const char *why = strncmp(status, "cpu: ", 5) ? status : status + 5;
    if (!strcasecmp(device, "gpu"))
        snprintf(p->why, sizeof p->why, "TNT_DEVICE=gpu: tnt_init will stop every rank: %s", why);
    else
        snprintf(p->why, sizeof p->why, "%s", why);
    return true;
}

void devices_note_sharing(FILE *out, const device_plan *p, long ranks_per_node) {
    if (!p->gpu || ranks_per_node < 2) return;
    if (p->ordinal >= 0)
        fprintf(out, "tarantella: the %ld ranks of a node share GPU %ld (TNT_GPU_ORDINAL)\n", ranks_per_node, p->ordinal);
    else if (ranks_per_node > p->gpus)
        fprintf(out, "tarantella: %ld ranks per node share the %d GPU%s of this host (each takes local rank %% %d)\n",
                ranks_per_node, p->gpus, p->gpus == 1 ? "" : "s", p->gpus);
}

void devices_print(FILE *out, const device_plan *p, long n, size_t n_hosts, char *const *hosts, const long *slots) {
    size_t host = 0;
    long local = 0;
    for (long r = 0; r < n; r++, local++) {
        while (host + 1 < n_hosts && local >= slots[host]) host++, local = 0;
        fprintf(out, "rank %ld on %s (local rank %ld): ", r, n_hosts ? hosts[host] : "localhost", local);
        if (!p->gpu) fprintf(out, "cpu (%s)\n", p->why);
        else fprintf(out, "gpu %ld\n", p->ordinal >= 0 ? p->ordinal : local % p->gpus);
    }
}
