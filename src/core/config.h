/* config.h: the process's settings, read from the environment once, by tnt_init, and handed down
 * from there: no other file of the library reads the environment. A setting is a field here and
 * one entry in the table of config.c. README.md lists them all. */
#ifndef TNT_CONFIG_H
#define TNT_CONFIG_H

#include "core/core.h"

/* MPI's thread levels, in MPI's order (core has no mpi.h; comm/world.c maps them) */
typedef enum tnt__thread_level {
    TNT__THREAD_SINGLE,
    TNT__THREAD_FUNNELED,
    TNT__THREAD_SERIALIZED,
    TNT__THREAD_MULTIPLE,
} tnt__thread_level;

/* TNT_MAX_CPU_ISA: the highest instruction set the library's kernels (oneDNN's and its own) use */
typedef enum tnt__cpu_isa {
    TNT__ISA_ALL, /* what the CPU has (or ONEDNN_MAX_CPU_ISA allows) */
    TNT__ISA_AVX2,
    TNT__ISA_AVX512_CORE,
    TNT__ISA_AVX512_CORE_BF16,
    TNT__ISA_AVX512_CORE_AMX,
} tnt__cpu_isa;

/* TNT_DEVICE: where models run */
typedef enum tnt__device_choice {
    TNT__DEVICE_CPU,
    TNT__DEVICE_AUTO, /* the default: the GPU when one is usable, else the CPU with one INFO line saying why */
    TNT__DEVICE_GPU, /* the GPU, or an error naming why not */
} tnt__device_choice;

/* TNT_GPU_COMM: how gradients of GPU ranks reach each other */
typedef enum tnt__gpu_comm {
    TNT__GPU_COMM_AUTO, /* NCCL where it loaded, else host staging */
    TNT__GPU_COMM_HOST, /* staged through pinned host memory and the MPI reducer ("mpi" too) */
    TNT__GPU_COMM_NCCL,
} tnt__gpu_comm;

/* TNT_CROSS_NODE: the node-aware reducer's cross-node allreduce (comm/cross_node.h's order) */
typedef enum tnt__cross_node {
    TNT__CROSS_NODE_AUTO,     /* by message size and node count: ring, halving or doubling */
    TNT__CROSS_NODE_MPI,      /* MPI_Allreduce, the MPI library's algorithm */
    TNT__CROSS_NODE_RING,     /* ring reduce-scatter + allgather */
    TNT__CROSS_NODE_HALVING,  /* recursive halving + doubling (Rabenseifner) */
    TNT__CROSS_NODE_DOUBLING, /* recursive doubling */
} tnt__cross_node;

typedef struct tnt__config {
    int log_level;                   /* TNT_LOG_LEVEL: a tnt_log_level */
    bool log_on_all_devices;         /* TNT_LOG_ON_ALL_DEVICES */
    bool output_on_all_devices;      /* TNT_OUTPUT_ON_ALL_DEVICES: fit/evaluate output */
    bool tensorboard_on_all_devices; /* TNT_TENSORBOARD_ON_ALL_DEVICES */
    int stdout_tty;                  /* TNT_STDOUT_TTY: 1 or 0 (the launcher tells), -1 unset */
    bool force_mpi;                  /* TNT_FORCE_MPI: start MPI without a launcher */
    bool under_mpirun;               /* OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or PMI_SIZE is set */
    int mpi_thread_level;            /* TNT_MPI_THREAD_LEVEL: a tnt__thread_level to ask MPI_Init_thread for */
    /* What an MPI launcher tells the processes it starts (comm/launcher_env.c); -1: not set */
    int64_t ompi_size, ompi_rank;    /* OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK (Open MPI's mpirun) */
    int64_t pmi_size, pmi_rank;      /* PMI_SIZE, PMI_RANK (MPICH's Hydra, Intel MPI, srun --mpi=pmi2) */
    int64_t pmix_rank;               /* PMIX_RANK (srun --mpi=pmix, prterun) */
    bool slurm_step;                 /* SLURM_STEP_ID is set: srun started this process */
    int64_t slurm_step_tasks, slurm_procid; /* SLURM_STEP_NUM_TASKS, SLURM_PROCID */
    int64_t fusion_threshold_kb;     /* TNT_FUSION_THRESHOLD_KB */
    int comm_mode;                   /* TNT_COMM_MODE: a tnt_comm_mode, never the default */
    int compression;                 /* TNT_COMPRESSION: a tnt_compression, never the default */
    int reducer;                     /* TNT_REDUCER: a tnt_reducer_kind; the default (auto): sharded
                                      * on the CPU, node on a GPU (resolved by tnt__prepare_parallel) */
    bool node_gradients;             /* TNT_NODE_GRADIENTS: node-aware reducers compute large Dense
                                      * kernel gradients once per node (comm.h); default on */
    bool overlap_optimizer;          /* TNT_OVERLAP_OPTIMIZER: the sharded optimizer updates each
                                      * slice on the comm thread, overlapping backward; default on */
    int64_t node_size;               /* TNT_NODE_SIZE: ranks per node for the node-aware reducer
                                      * (consecutive ranks; for tests); 0: those sharing memory */
    int cross_node;                  /* TNT_CROSS_NODE: a tnt__cross_node */
    char timeline[1024];             /* TNT_TIMELINE: trace file of the run (core/timeline.h); "": none */
    int64_t h5_time_limit_s;         /* TNT_H5_TIME_LIMIT: seconds an HDF5 parse may take; 0 = by size */
    int64_t stall_check_seconds;     /* TNT_STALL_CHECK_SECONDS: 0 = no stall warnings */
    int64_t stall_shutdown_seconds;  /* TNT_STALL_SHUTDOWN_SECONDS: 0 = never abort a stall */
    int64_t finalize_timeout_seconds; /* TNT_FINALIZE_TIMEOUT_SECONDS: see comm/world.c; 0 = wait */
    int max_cpu_isa;                 /* TNT_MAX_CPU_ISA: a tnt__cpu_isa */
    int device;                      /* TNT_DEVICE: a tnt__device_choice */
    int gpu_comm;                    /* TNT_GPU_COMM: a tnt__gpu_comm */
    int64_t gpu_ordinal;             /* TNT_GPU_ORDINAL: the device to use; -1: local rank % devices */
    char cuda_libdir[2048];          /* TNT_CUDA_LIBDIR: colon list of folders with cuBLAS, cuDNN, NCCL */
    char cuda_driver[1024];          /* TNT_CUDA_DRIVER: path of the driver library instead of
                                      * libcuda.so.1 (tests: a fake or absent driver) */
    char nccl_library[1024];         /* TNT_NCCL_LIBRARY: path of NCCL instead of libnccl.so.2 by
                                      * TNT_CUDA_LIBDIR and the normal search (tests: a fake or none) */
    int64_t gpu_emulate;             /* TNT_GPU_EMULATE: N > 0 emulated devices (host memory, host
                                      * kernels) instead of the real backend; 0: none */
    bool gpu_tf32;                   /* TNT_GPU_TF32: TF32 tensor cores for float32 GEMMs */
    bool gpu_conv_bf16;              /* TNT_GPU_CONV_BF16 (default 1): Conv2D's cuDNN bf16 path
                                      * under mixed_bfloat16; 0 keeps such a layer off the GPU */
    int64_t gpu_conv_im2col;         /* TNT_GPU_CONV_IM2COL: float32 Conv2D layers of at most this
                                      * many taps (kh kw C) run as im2col GEMMs on the device, not
                                      * cuDNN; 0 (default, until measured on a GPU): none */
    bool gpu_device_loss;            /* TNT_GPU_DEVICE_LOSS (default 1): the built-in losses' gradients
                                      * on the device, no host work between forward and backward
                                      * (training/device_loss.c); 0: on the host, as before */
    int64_t gpu_conv_direct;         /* TNT_GPU_CONV_DIRECT: float32 Conv2D layers of at most this
                                      * many taps (kh kw C / groups) run as the direct kernels of
                                      * conv.cu (before im2col); default 32: a first layer on 1 to 3
                                      * channels (LeNet-5's 5x5x1, 3x3x3) */
    bool gpu_staged_input;           /* TNT_GPU_STAGED_INPUT (default 1): the batch goes up on the
                                      * copy stream, overlapping the step before; 0: on the compute
                                      * stream, after it */
    int gpu_conv_algo;               /* TNT_GPU_CONV_ALGO: 1 (measure) times cuDNN's deterministic
                                      * convolution algorithms once per shape, 2 (fastest) every one
                                      * (not bitwise repeatable), 0 (heuristic) takes cuDNN's guess */
} tnt__config;

/* Reads every setting into *c (defaults for those unset or empty). A bad value gives
 * TNT_ERR_ARG naming the variable, its value and what was expected; *c is then untouched. */
tnt_status tnt__config_read(tnt__config *c);
/* Reads the process's settings (tnt_init); on failure they stay as they were. */
tnt_status tnt__config_load(void);
/* The process's settings: the defaults until tnt_init has read them. */
const tnt__config *tnt__config_get(void);

#endif
