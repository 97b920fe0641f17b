/* hostfile.h: the launcher's hostfile reader and host-name check (tools/tarantella.c), apart from
 * its main so that the fuzz target tests/fuzz/fuzz_hostfile.c calls them too. */
#ifndef TNT_LAUNCHER_HOSTFILE_H
#define TNT_LAUNCHER_HOSTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct hostlist {
    size_t n;
    char **names; /* owned */
    long *slots;  /* slots[i] <= 0: not given */
    int *lines;   /* the hostfile line of each host (0: not from a file) */
    size_t cap;   /* entries allocated (grown by doubling: a Slurm list adds up to 65536) */
} hostlist;

void hostlist_free(hostlist *h);
/* Appends a copy of name; false when out of memory. */
bool hostlist_add(hostlist *h, const char *name, long slots, int line);

/* NULL when name can go into mpirun's host list, else why not (a static string): RFC 1123 names
 * (labels of 1 to 63 letters, digits and '-', not starting or ending with '-', 253 characters in
 * all) or IPv4 addresses; IPv6 addresses and first labels longer than mpirun takes are refused. */
const char *host_name_problem(const char *name);

/* Reads a hostfile from f (file names it in messages): one host per line, optional "slots=K"
 * (and Open MPI's "max_slots=K", ignored), '#' starts a comment, names unique. Returns 0, or 1
 * with a message naming the file, the line and the value in err. */
int hostfile_read(FILE *f, const char *file, hostlist *h, char *err, size_t err_size);

#endif
