/* slurm.h: a Slurm allocation as the launcher's hosts (slurm.c): the compressed node lists Slurm
 * writes (SLURM_JOB_NODELIST "node[01-04,07]") and its tasks per node ("2(x3),1"), apart from
 * tarantella.c's main so that the unit test and the fuzz target call them too. */
#ifndef TNT_LAUNCHER_SLURM_H
#define TNT_LAUNCHER_SLURM_H

#include <stdbool.h>
#include <stddef.h>

#include "hostfile.h"

/* At most this many hosts from one node list (a list of a few bytes can name billions). */
#define SLURM_MAX_HOSTS 65536

/* Expands a Slurm node list into h (appended, in order): items separated by ',' outside
 * brackets; each item is text with bracket groups of numbers and ranges ("a[1-3,7]b[01-02]" is
 * the product, left group slowest); a range's lower bound gives the width, its zeros the padding
 * ("[08-10]": 08 09 10). Every name must pass host_name_problem and be unique. Returns 0, or 1
 * with a message naming the list (shown up to 80 characters) and what is wrong in err. */
int slurm_nodelist_expand(const char *list, hostlist *h, char *err, size_t err_size);

/* Parses tasks per node ("2(x3),1": 2 tasks on each of 3 nodes, then 1) into tasks[0, n_nodes);
 * the counts must cover exactly n_nodes nodes. Returns 0, or 1 with a message in err. */
int slurm_tasks_per_node(const char *spec, size_t n_nodes, long *tasks, char *err, size_t err_size);

/* The allocation the launcher runs in, from Slurm's variables (NULL: unset). */
typedef struct slurm_env {
    const char *job_id;          /* SLURM_JOB_ID (or SLURM_JOBID) */
    const char *nodelist;        /* SLURM_JOB_NODELIST (or SLURM_NODELIST) */
    const char *tasks_per_node;  /* SLURM_TASKS_PER_NODE, e.g. "2(x3),1" */
    const char *ntasks_per_node; /* SLURM_NTASKS_PER_NODE: one number, given with --ntasks-per-node */
} slurm_env;

/* Reads the variables above from the environment. True inside an allocation (job id and node
 * list both set). */
bool slurm_env_read(slurm_env *e);

/* The allocation's hosts into h with their task counts as slots (SLURM_NTASKS_PER_NODE, else
 * SLURM_TASKS_PER_NODE, else none given). Returns 0, or 1 with a message naming the variable. */
int slurm_hosts(const slurm_env *e, hostlist *h, char *err, size_t err_size);

#endif
