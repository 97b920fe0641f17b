/* fuzz_launcher_args.c: libFuzzer target for the launcher's command line (parse_args of
 * tools/tarantella.c, compiled in here with its main renamed: the reader is static there). The
 * input is the arguments after argv[0], separated by newlines. Any command line ends in a usage
 * error (exit code 2, message on stderr), --help/--version (0), or options whose values are in
 * their documented ranges and a PROGRAM after "--". */
#define main tarantella_launcher_main
#include "../../tools/tarantella.c"
#undef main

#include "fuzz.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 2] = {"tarantella"};
    int argc = 1;
    for (char *arg = text; arg && argc < MAX_ARGS + 1;) {
        char *next = strchr(arg, '\n');
        if (next) *next++ = '\0';
        argv[argc++] = arg;
        arg = next;
    }
    argv[argc] = NULL;
    options o;
    int rc = parse_args(argc, argv, &o);
    FUZZ_CHECK(rc == CONTINUE || rc == 0 || rc == EXIT_USAGE);
    if (rc == CONTINUE) {
        FUZZ_CHECK(o.prog > argv + 1 && o.prog < argv + argc && !strcmp(o.prog[-1], "--"));
        FUZZ_CHECK(o.n == -1 || (o.n >= 1 && o.n <= 1000000));
        FUZZ_CHECK(o.npn == -1 || (o.npn >= 1 && o.npn <= 100000));
        FUZZ_CHECK(o.fusion_kb >= -1 && o.max_restarts >= 0 && o.max_restarts <= 1000000);
        FUZZ_CHECK(!o.force || o.cleanup);
        for (size_t k = 0; k < o.xvars.n; k++) FUZZ_CHECK(strchr(o.xvars.v[k], '='));
    }
    sv_free(&o.xvars);
    free(text);
    return 0;
}
