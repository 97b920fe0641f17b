/* fuzz_util.c: temp files and failure reports for the fuzz targets (fuzz.h). */
#include "fuzz.h"

#include "core/config.h"
#include "tarantella.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char temp_path[64];

static void remove_temp(void) { unlink(temp_path); }

const char *fuzz_temp_file(const uint8_t *data, size_t size, const char *suffix) {
    if (!temp_path[0]) {
        /* the settings (TNT_H5_TIME_LIMIT: make fuzz and the replay tests bound each HDF5 parse)
         * are read by tnt_init, which the targets do not call: the loaders kept the default
         * 60 s, past libFuzzer's -timeout */
        if (tnt__config_load() != TNT_OK) fuzz_fail("read the TNT_* settings", __FILE__, __LINE__);
        snprintf(temp_path, sizeof temp_path, "/tmp/tnt_fuzz_XXXXXX%s", suffix);
        int fd = mkstemps(temp_path, (int)strlen(suffix));
        if (fd < 0) fuzz_fail("mkstemps", __FILE__, __LINE__);
        close(fd);
        atexit(remove_temp);
    }
    FILE *f = fopen(temp_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) fuzz_fail("write the temp file", __FILE__, __LINE__);
    return temp_path;
}

void fuzz_fail(const char *what, const char *file, int line) {
    fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", file, line, what, tnt_last_error());
    abort();
}
