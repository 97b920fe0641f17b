/* cpu_check.c: the library and its programs are compiled for x86-64-v3 (AVX2, FMA, BMI2; Intel
 * Haswell (2013) and AMD Excavator/Zen (2015) on), unless built with TNT_NATIVE. On an older CPU
 * the first AVX2 instruction would end the process with SIGILL and no word of why. This file alone
 * is compiled for the plain x86-64 baseline (CMakeLists.txt), and its constructor runs before any
 * code of the library or of the program that links it: on such a CPU it says what is missing and
 * how to build for that CPU, and exits with status 1. */
#include "core/core.h"

#include <stdio.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(TNT_BUILD_X86_64_V3)
__attribute__((constructor(101))) static void tnt__cpu_check(void) {
    __builtin_cpu_init();
    /* "avx" also asks that the OS saves the AVX registers (XSAVE), as AVX2 needs too */
    const struct {
        const char *name;
        bool ok;
    } needed[] = {{"AVX", __builtin_cpu_supports("avx")}, {"AVX2", __builtin_cpu_supports("avx2")},
                  {"FMA", __builtin_cpu_supports("fma")}, {"BMI2", __builtin_cpu_supports("bmi2")}};
    char missing[64] = "";
    size_t len = 0;
    for (size_t i = 0; i < TNT_ARRAY_LEN(needed); i++)
        if (!needed[i].ok)
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%s", len ? ", " : "", needed[i].name);
    if (!len) return;
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "tarantella: this CPU lacks %s: the library was built for x86-64-v3 CPUs (AVX2, FMA, "
                     "BMI2: Intel Haswell, AMD Excavator or Zen, and later). Build it on this machine with "
                     "`make build CMAKE_FLAGS=-DTNT_NATIVE=ON` to run here.\n",
                     missing);
    if (write(2, msg, (size_t)n) < 0) { /* nothing more to say */
    }
    _exit(1);
}
#endif

/* Referenced from tnt_init, so that a program linking the static library keeps this file (and
 * its constructor). */
void tnt__cpu_check_linked(void) {}
