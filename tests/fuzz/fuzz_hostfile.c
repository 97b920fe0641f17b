/* fuzz_hostfile.c: libFuzzer target for the launcher's hostfile reader (tools/launcher/). A file
 * is read, with hosts that pass the host-name check, unique, with slots from 0 (not given) to
 * 100000, or rejected with a message naming the file and a line. */
#include "fuzz.h"

#include "launcher/hostfile.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f) return 0; /* fmemopen refuses size 0 */
    hostlist h = {0};
    char err[512] = "";
    int rc = hostfile_read(f, "hf", &h, err, sizeof err);
    fclose(f);
    if (rc) {
        FUZZ_CHECK(rc == 1 && strstr(err, "hostfile 'hf'"));
    } else {
        FUZZ_CHECK(h.n >= 1);
        for (size_t i = 0; i < h.n; i++) {
            FUZZ_CHECK(!host_name_problem(h.names[i]));
            FUZZ_CHECK(h.slots[i] >= 0 && h.slots[i] <= 100000);
            for (size_t k = 0; k < i; k++) FUZZ_CHECK(strcasecmp(h.names[i], h.names[k]));
        }
    }
    hostlist_free(&h);
    return 0;
}
