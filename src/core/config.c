/* config.c: the table of settings and its strict reader (the whole value must parse, numbers
 * are range-checked); the one place the library calls getenv. */
#include "core/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef enum setting_kind {
    SETTING_FLAG,    /* bool field: 1/true/yes or 0/false/no */
    SETTING_INT,     /* int64_t field in [min, max] */
    SETTING_CHOICE,  /* int field: the value of the matching name */
    SETTING_PRESENT, /* bool field: set to true when the variable exists, whatever its value */
    SETTING_STRING,  /* char[max] field: the value, shorter than max */
} setting_kind;

typedef struct choice {
    const char *name; /* matched without regard to case */
    int value;
} choice;

typedef struct setting {
    const char *name;
    setting_kind kind;
    size_t offset; /* of the field in tnt__config */
    int64_t min, max;
    const choice *choices; /* terminated by a NULL name */
} setting;

static const choice log_levels[] = {{"DEBUG", TNT_LOG_DEBUG}, {"INFO", TNT_LOG_INFO},
                                    {"WARNING", TNT_LOG_WARNING}, {"ERROR", TNT_LOG_ERROR}, {NULL, 0}};
static const choice comm_modes[] = {{"thread", TNT_COMM_MODE_THREAD}, {"nonblocking", TNT_COMM_MODE_NONBLOCKING},
                                    {NULL, 0}};
static const choice compressions[] = {{"none", TNT_COMPRESSION_NONE}, {"bf16", TNT_COMPRESSION_BF16}, {NULL, 0}};
static const choice reducers[] = {{"auto", TNT_REDUCER_DEFAULT}, {"flat", TNT_REDUCER_FLAT},
                                  {"node", TNT_REDUCER_NODE}, {"sharded", TNT_REDUCER_SHARDED}, {NULL, 0}};
static const choice cross_algos[] = {{"auto", TNT__CROSS_NODE_AUTO}, {"mpi", TNT__CROSS_NODE_MPI},
                                     {"ring", TNT__CROSS_NODE_RING}, {"halving", TNT__CROSS_NODE_HALVING},
                                     {"doubling", TNT__CROSS_NODE_DOUBLING}, {NULL, 0}};
static const choice thread_levels[] = {{"single", TNT__THREAD_SINGLE}, {"funneled", TNT__THREAD_FUNNELED},
                                       {"serialized", TNT__THREAD_SERIALIZED}, {"multiple", TNT__THREAD_MULTIPLE},
                                       {NULL, 0}};
static const choice cpu_isas[] = {{"all", TNT__ISA_ALL}, {"avx2", TNT__ISA_AVX2}, {"avx512_core", TNT__ISA_AVX512_CORE},
                                  {"avx512_core_bf16", TNT__ISA_AVX512_CORE_BF16},
                                  {"avx512_core_amx", TNT__ISA_AVX512_CORE_AMX}, {NULL, 0}};
static const choice devices[] = {{"auto", TNT__DEVICE_AUTO}, {"cpu", TNT__DEVICE_CPU}, {"gpu", TNT__DEVICE_GPU},
                                 {NULL, 0}};
static const choice gpu_comms[] = {{"auto", TNT__GPU_COMM_AUTO}, {"host", TNT__GPU_COMM_HOST},
                                   {"mpi", TNT__GPU_COMM_HOST}, {"nccl", TNT__GPU_COMM_NCCL}, {NULL, 0}};
static const choice conv_algos[] = {{"heuristic", 0}, {"measure", 1}, {"fastest", 2}, {NULL, 0}};
static const choice tty_answers[] = {{"1", 1}, {"0", 0}, {NULL, 0}};

#define FIELD(f) offsetof(tnt__config, f)
#define FLAG(var, f) {var, SETTING_FLAG, FIELD(f), 0, 0, NULL}
#define INT(var, f, lo, hi) {var, SETTING_INT, FIELD(f), lo, hi, NULL}
#define CHOICE(var, f, choices) {var, SETTING_CHOICE, FIELD(f), 0, 0, choices}
#define PRESENT(var, f) {var, SETTING_PRESENT, FIELD(f), 0, 0, NULL}
#define STRING(var, f) {var, SETTING_STRING, FIELD(f), 0, sizeof(((tnt__config *)0)->f), NULL}
static const setting settings[] = {
    CHOICE("TNT_LOG_LEVEL", log_level, log_levels),
    FLAG("TNT_LOG_ON_ALL_DEVICES", log_on_all_devices),
    FLAG("TNT_OUTPUT_ON_ALL_DEVICES", output_on_all_devices),
    FLAG("TNT_TENSORBOARD_ON_ALL_DEVICES", tensorboard_on_all_devices),
    CHOICE("TNT_STDOUT_TTY", stdout_tty, tty_answers),
    FLAG("TNT_FORCE_MPI", force_mpi),
    INT("TNT_FUSION_THRESHOLD_KB", fusion_threshold_kb, 0, INT32_MAX),
    CHOICE("TNT_COMM_MODE", comm_mode, comm_modes),
    CHOICE("TNT_COMPRESSION", compression, compressions),
    CHOICE("TNT_REDUCER", reducer, reducers),
    FLAG("TNT_NODE_GRADIENTS", node_gradients),
    FLAG("TNT_OVERLAP_OPTIMIZER", overlap_optimizer),
    INT("TNT_NODE_SIZE", node_size, 0, INT32_MAX),
    CHOICE("TNT_CROSS_NODE", cross_node, cross_algos),
    STRING("TNT_TIMELINE", timeline),
    INT("TNT_H5_TIME_LIMIT", h5_time_limit_s, 0, 86400),
    INT("TNT_STALL_CHECK_SECONDS", stall_check_seconds, 0, 1000000),
    INT("TNT_STALL_SHUTDOWN_SECONDS", stall_shutdown_seconds, 0, 1000000),
    INT("TNT_FINALIZE_TIMEOUT_SECONDS", finalize_timeout_seconds, 0, 1000000),
    CHOICE("TNT_MPI_THREAD_LEVEL", mpi_thread_level, thread_levels),
    CHOICE("TNT_MAX_CPU_ISA", max_cpu_isa, cpu_isas),
    CHOICE("TNT_DEVICE", device, devices),
    CHOICE("TNT_GPU_COMM", gpu_comm, gpu_comms),
    INT("TNT_GPU_ORDINAL", gpu_ordinal, 0, 1023),
    STRING("TNT_CUDA_LIBDIR", cuda_libdir),
    STRING("TNT_CUDA_DRIVER", cuda_driver),
    STRING("TNT_NCCL_LIBRARY", nccl_library),
    INT("TNT_GPU_EMULATE", gpu_emulate, 0, 64),
    FLAG("TNT_GPU_TF32", gpu_tf32),
    CHOICE("TNT_GPU_CONV_ALGO", gpu_conv_algo, conv_algos),
    FLAG("TNT_GPU_CONV_BF16", gpu_conv_bf16),
    INT("TNT_GPU_CONV_IM2COL", gpu_conv_im2col, 0, 1 << 20),
    FLAG("TNT_GPU_DEVICE_LOSS", gpu_device_loss),
    INT("TNT_GPU_CONV_DIRECT", gpu_conv_direct, 0, 1 << 20),
    FLAG("TNT_GPU_STAGED_INPUT", gpu_staged_input),
    /* set by mpirun (Open MPI) or another PMI launcher in every rank it starts */
    PRESENT("OMPI_COMM_WORLD_SIZE", under_mpirun),
    PRESENT("PMIX_RANK", under_mpirun),
    PRESENT("PMI_RANK", under_mpirun),
    PRESENT("PMI_SIZE", under_mpirun),
    /* what the launcher says about the world (comm/launcher_env.c) */
    INT("OMPI_COMM_WORLD_SIZE", ompi_size, 1, INT32_MAX),
    INT("OMPI_COMM_WORLD_RANK", ompi_rank, 0, INT32_MAX),
    INT("PMI_SIZE", pmi_size, 1, INT32_MAX),
    INT("PMI_RANK", pmi_rank, 0, INT32_MAX),
    INT("PMIX_RANK", pmix_rank, 0, INT32_MAX),
    PRESENT("SLURM_STEP_ID", slurm_step),
    INT("SLURM_STEP_NUM_TASKS", slurm_step_tasks, 1, INT32_MAX),
    INT("SLURM_PROCID", slurm_procid, 0, INT32_MAX),
};

/* a macro, not a const object: C (and clang) take no object as a static initializer */
#define DEFAULTS                                                                                  \
    {                                                                                             \
        .log_level = TNT_LOG_WARNING, .stdout_tty = -1, .fusion_threshold_kb = 32,                \
        .comm_mode = TNT_COMM_MODE_THREAD, .compression = TNT_COMPRESSION_NONE,                   \
        .reducer = TNT_REDUCER_DEFAULT, .node_gradients = true, .overlap_optimizer = true,        \
        .gpu_conv_bf16 = true, .gpu_staged_input = true, .gpu_device_loss = true,                 \
        .gpu_conv_direct = 32,                                                                    \
        .stall_check_seconds = 60, /* as Horovod */                                               \
        .finalize_timeout_seconds = 10,                                                           \
        .mpi_thread_level = TNT__THREAD_SERIALIZED, .ompi_size = -1, .ompi_rank = -1,             \
        .pmi_size = -1, .pmi_rank = -1, .pmix_rank = -1, .slurm_step_tasks = -1,                  \
        .slurm_procid = -1, .device = TNT__DEVICE_AUTO, .gpu_comm = TNT__GPU_COMM_AUTO,           \
        .gpu_ordinal = -1,                                                                        \
    }
static const tnt__config defaults = DEFAULTS;

static tnt__config current = DEFAULTS;

static tnt_status bad_value(const setting *s, const char *v) {
    char expected[160];
    int len = 0;
    if (s->kind == SETTING_FLAG) {
        len = snprintf(expected, sizeof expected, "1, 0, true, false, yes or no");
    } else if (s->kind == SETTING_STRING) {
        len = snprintf(expected, sizeof expected, "at most %lld characters", (long long)s->max - 1);
    } else if (s->kind == SETTING_INT) {
        len = snprintf(expected, sizeof expected, "an integer from %lld to %lld", (long long)s->min, (long long)s->max);
    } else {
        for (const choice *c = s->choices; c->name && len < (int)sizeof expected; c++)
            len += snprintf(expected + len, sizeof expected - (size_t)len, "%s%s",
                            c == s->choices ? "" : c[1].name ? ", " : " or ", c->name);
    }
    return tnt__error(TNT_ERR_ARG, "%s=%s: expected %s", s->name, v, expected);
}

static bool parse_flag(const char *v, bool *out) {
    static const char *const yes[] = {"1", "true", "yes"}, *const no[] = {"0", "false", "no"};
    for (size_t k = 0; k < TNT_ARRAY_LEN(yes); k++) {
        if (!strcasecmp(v, yes[k])) return *out = true, true;
        if (!strcasecmp(v, no[k])) return *out = false, true;
    }
    return false;
}

static bool parse_int(const char *v, int64_t min, int64_t max, int64_t *out) {
    if (!(*v == '-' || (*v >= '0' && *v <= '9'))) return false; /* no spaces, no '+' */
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < min || x > max) return false;
    *out = x;
    return true;
}

static bool parse_choice(const char *v, const choice *choices, int *out) {
    for (const choice *c = choices; c->name; c++)
        if (!strcasecmp(v, c->name)) return *out = c->value, true;
    return false;
}

tnt_status tnt__config_read(tnt__config *c) {
    tnt__config read = defaults;
    for (size_t i = 0; i < TNT_ARRAY_LEN(settings); i++) {
        const setting *s = &settings[i];
        const char *v = getenv(s->name);
        void *field = (char *)&read + s->offset;
        if (s->kind == SETTING_PRESENT) {
            *(bool *)field |= v != NULL;
            continue;
        }
        if (!v || !*v) continue;
        if (s->kind == SETTING_STRING) {
            if (strlen(v) >= (size_t)s->max) return bad_value(s, v);
            memcpy(field, v, strlen(v) + 1);
            continue;
        }
        bool ok = s->kind == SETTING_FLAG ? parse_flag(v, field)
                  : s->kind == SETTING_INT ? parse_int(v, s->min, s->max, field)
                                           : parse_choice(v, s->choices, field);
        if (!ok) return bad_value(s, v);
    }
    *c = read;
    return TNT_OK;
}

tnt_status tnt__config_load(void) { return tnt__config_read(&current); }

const tnt__config *tnt__config_get(void) { return &current; }
