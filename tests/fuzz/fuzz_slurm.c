/* fuzz_slurm.c: libFuzzer target for the launcher's Slurm reader (tools/launcher/slurm.c). The
 * input's first line is a node list, the rest tasks per node. A list expands to 1 to 65536 unique
 * hosts that pass the host-name check, or is rejected with a message naming it; task counts cover
 * exactly the nodes, each from 1 to 100000, or are rejected. Nothing may crash, leak or take
 * long (every loop is bounded by the input or the host limit). */
#include "fuzz.h"

#include "launcher/slurm.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *tasks = strchr(text, '\n');
    if (tasks) *tasks++ = '\0';
    hostlist h = {0};
    char err[512] = "";
    int rc = slurm_nodelist_expand(text, &h, err, sizeof err);
    if (rc) {
        FUZZ_CHECK(rc == 1 && strstr(err, "Slurm node list"));
    } else {
        FUZZ_CHECK(h.n >= 1 && h.n <= SLURM_MAX_HOSTS);
        for (size_t i = 0; i < h.n; i++) FUZZ_CHECK(!host_name_problem(h.names[i]));
        for (size_t i = 1; i < h.n && i < 256; i++) FUZZ_CHECK(strcasecmp(h.names[i], h.names[i - 1]));
        if (tasks) {
            long *t = malloc(h.n * sizeof *t);
            if (t) {
                err[0] = '\0';
                rc = slurm_tasks_per_node(tasks, h.n, t, err, sizeof err);
                if (rc) FUZZ_CHECK(rc == 1 && strstr(err, "Slurm tasks per node"));
                else
                    for (size_t i = 0; i < h.n; i++) FUZZ_CHECK(t[i] >= 1 && t[i] <= 100000);
                free(t);
            }
        }
    }
    hostlist_free(&h);
    free(text);
    return 0;
}
