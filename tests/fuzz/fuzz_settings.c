/* fuzz_settings.c: libFuzzer target for the settings reader (src/core/config.c: the TNT_*
 * variables and what a launcher tells its ranks). The input is lines NAME=VALUE, set in the
 * environment (only names of the settings' families: TNT_, OMPI_, PMI, SLURM_, so the fuzzer
 * cannot change how this process itself runs); the read either succeeds or fails with a message
 * "NAME=VALUE: expected ..." naming one of the variables set, and a failed read leaves the
 * process's settings as they were. Every variable set is removed again after each input. */
#include "fuzz.h"

#include "core/config.h"
#include "tarantella.h"

#include <stdlib.h>
#include <string.h>

#define MAX_VARS 16

static bool settings_family(const char *name) {
    static const char *const prefixes[] = {"TNT_", "OMPI_", "PMI", "SLURM_"};
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++)
        if (!strncmp(name, prefixes[k], strlen(prefixes[k]))) return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *names[MAX_VARS];
    int n = 0;
    for (char *line = text, *next; line && n < MAX_VARS; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char *eq = strchr(line, '=');
        if (!eq || eq == line) continue;
        *eq = '\0';
        if (!settings_family(line) || setenv(line, eq + 1, 1) != 0) continue;
        names[n++] = line;
    }
    tnt__config before = *tnt__config_get(), read;
    if (tnt__config_read(&read) != TNT_OK) {
        const char *msg = tnt_last_error();
        bool named = false;
        for (int i = 0; i < n && !named; i++) {
            size_t len = strlen(names[i]);
            named = !strncmp(msg, names[i], len) && msg[len] == '=';
        }
        FUZZ_CHECK(named && (strstr(msg, ": expected ") || strlen(msg) > 200)); /* a long value may cut it */
        FUZZ_CHECK(tnt__config_load() != TNT_OK);
        FUZZ_CHECK(!memcmp(&before, tnt__config_get(), sizeof before)); /* unchanged */
    } else {
        /* the values read are those of the table's ranges */
        FUZZ_CHECK(read.fusion_threshold_kb >= 0 && read.h5_time_limit_s >= 0 && read.h5_time_limit_s <= 86400);
        FUZZ_CHECK(read.gpu_emulate >= 0 && read.gpu_emulate <= 64);
        FUZZ_CHECK(memchr(read.timeline, '\0', sizeof read.timeline));
    }
    for (int i = 0; i < n; i++) unsetenv(names[i]);
    free(text);
    return 0;
}
