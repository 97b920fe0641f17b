/* cross_bench.c: the node-aware reducer's cross-node allreduce (src/comm/cross_node.c) against
 * MPI_Allreduce on a real MPI, best of REPS per size and algorithm (bench/scale/README.md):
 *
 *   mpicc -O2 -std=c11 -Isrc bench/scale/cross_bench.c src/comm/cross_node.c -o /tmp/cross_bench
 *   mpirun -np 4 /tmp/cross_bench
 *
 * Prints one line per size: microseconds per allreduce for mpi, ring, halving, doubling, auto. */
#include "comm/cross_node.h"

#include <stdio.h>
#include <stdlib.h>

enum { REPS = 15 };

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static const tnt__cross_algo algos[] = {TNT__CROSS_MPI, TNT__CROSS_RING, TNT__CROSS_HALVING, TNT__CROSS_DOUBLING,
                                            TNT__CROSS_AUTO};
    if (rank == 0) printf("cross_bench: %d ranks; microseconds per allreduce, best of %d\n%10s %9s %9s %9s %9s %9s\n",
                          size, REPS, "bytes", "mpi", "ring", "halving", "doubling", "auto");
    for (long n = 2048; n <= (4L << 20); n *= 4) {
        float *x = calloc((size_t)n, sizeof(float));
        double best[5];
        for (int a = 0; a < 5; a++) {
            best[a] = 1e30;
            for (int r = 0; r < REPS; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t = MPI_Wtime();
                tnt__cross_allreduce(x, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, algos[a]);
                t = MPI_Wtime() - t;
                MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                best[a] = t < best[a] ? t : best[a];
            }
        }
        if (rank == 0)
            printf("%10ld %9.1f %9.1f %9.1f %9.1f %9.1f\n", n * 4, 1e6 * best[0], 1e6 * best[1], 1e6 * best[2],
                   1e6 * best[3], 1e6 * best[4]);
        free(x);
    }
    MPI_Finalize();
    return 0;
}
