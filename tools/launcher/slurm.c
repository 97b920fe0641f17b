/* slurm.c: Slurm node lists and tasks per node (see slurm.h). The parser reads each byte once
 * with bounds on every number, width and count, so that any input ends in a list or an error. */
#include "slurm.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DIGITS 9 /* numbers in brackets: up to 999999999 */
#define MAX_NAME 253 /* RFC 1123, as host_name_problem */

static int problem(char *err, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return 1;
}

/* s as messages show it: printable, at most 80 characters */
static const char *shown(const char *s, char *buf, size_t size) {
    size_t i = 0;
    for (; s[i] && i + 4 < size && i < 80; i++) buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
    strcpy(buf + i, s[i] ? "..." : "");
    return buf;
}

/* One bracket group: its ranges, each [lo, hi] printed with width digits. */
typedef struct range {
    long lo, hi;
    int width;
} range;
typedef struct group {
    const char *prefix; /* text before the bracket (not terminated) */
    size_t prefix_len;
    range *ranges;
    size_t n_ranges;
    long count; /* numbers in all its ranges */
} group;

typedef struct item {
    group *groups;
    size_t n_groups;
    const char *suffix; /* text after the last bracket */
    size_t suffix_len;
} item;

static void item_free(item *it) {
    for (size_t g = 0; g < it->n_groups; g++) free(it->groups[g].ranges);
    free(it->groups);
    *it = (item){0};
}

/* Reads a number of 1 to MAX_DIGITS digits at *p; its digit count in *width. */
static bool read_number(const char **p, long *v, int *width) {
    const char *s = *p;
    int n = 0;
    long x = 0;
    while (isdigit((unsigned char)s[n]) && n <= MAX_DIGITS) x = x * 10 + (s[n] - '0'), n++;
    if (n == 0 || n > MAX_DIGITS) return false;
    *p = s + n, *v = x, *width = n;
    return true;
}

/* Parses "[...]" at *p (just after '['), up to and over the ']'. */
static int parse_group(const char **p, group *g, const char *list, char *err, size_t size) {
    char b[96];
    const char *s = *p;
    for (;;) {
        range r;
        int w_hi;
        if (!read_number(&s, &r.lo, &r.width))
        {
            char c[96];
            return problem(err, size, "Slurm node list '%s': expected a number of 1 to %d digits in brackets at '%s'",
                           shown(list, b, sizeof b), MAX_DIGITS, shown(s, c, sizeof c));
        }
        r.hi = r.lo;
        if (*s == '-') {
            s++;
            if (!read_number(&s, &r.hi, &w_hi))
                return problem(err, size, "Slurm node list '%s': expected the upper bound of a range after '-'",
                               shown(list, b, sizeof b));
            if (r.hi < r.lo)
                return problem(err, size, "Slurm node list '%s': range %ld-%ld runs backwards",
                               shown(list, b, sizeof b), r.lo, r.hi);
        }
        if (r.hi - r.lo + 1 > SLURM_MAX_HOSTS || g->count + (r.hi - r.lo + 1) > SLURM_MAX_HOSTS)
            return problem(err, size, "Slurm node list '%s': more than %d hosts", shown(list, b, sizeof b),
                           SLURM_MAX_HOSTS);
        range *nr = realloc(g->ranges, (g->n_ranges + 1) * sizeof *nr);
        if (!nr) return problem(err, size, "Slurm node list: out of memory");
        g->ranges = nr;
        g->ranges[g->n_ranges++] = r;
        g->count += r.hi - r.lo + 1;
        if (*s == ',') { s++; continue; }
        if (*s == ']') { *p = s + 1; return 0; }
        if (!*s) return problem(err, size, "Slurm node list '%s': '[' without ']'", shown(list, b, sizeof b));
        return problem(err, size, "Slurm node list '%s': unexpected '%c' in brackets (expected digits, '-', ',' or ']')",
                       shown(list, b, sizeof b), isprint((unsigned char)*s) ? *s : '?');
    }
}

/* Parses one item from *p up to a ',' outside brackets or the end. */
static int parse_item(const char **p, item *it, const char *list, char *err, size_t size) {
    char b[96];
    const char *s = *p, *text = s;
    for (;;) {
        if (*s == '[') {
            group *ng = realloc(it->groups, (it->n_groups + 1) * sizeof *ng);
            if (!ng) return problem(err, size, "Slurm node list: out of memory");
            it->groups = ng;
            group *g = &it->groups[it->n_groups++];
            *g = (group){.prefix = text, .prefix_len = (size_t)(s - text)};
            s++;
            if (parse_group(&s, g, list, err, size)) return 1;
            text = s;
        } else if (*s == ']') {
            return problem(err, size, "Slurm node list '%s': ']' without '['", shown(list, b, sizeof b));
        } else if (*s == ',' || !*s) {
            it->suffix = text, it->suffix_len = (size_t)(s - text);
            if (it->n_groups == 0 && it->suffix_len == 0)
                return problem(err, size, "Slurm node list '%s': an empty name (two commas, or one at the start or end)",
                               shown(list, b, sizeof b));
            *p = s;
            return 0;
        } else {
            s++;
        }
    }
}

/* Appends the names of it (the product of its groups, the first group slowest). */
static int expand_item(const item *it, hostlist *h, const char *list, char *err, size_t size) {
    char b[96], name[MAX_NAME + 2];
    long total = 1;
    for (size_t g = 0; g < it->n_groups; g++) {
        total *= it->groups[g].count;
        if (total + (long)h->n > SLURM_MAX_HOSTS)
            return problem(err, size, "Slurm node list '%s': more than %d hosts", shown(list, b, sizeof b),
                           SLURM_MAX_HOSTS);
    }
    if (it->n_groups > 64)
        return problem(err, size, "Slurm node list '%s': more than 64 bracket groups in a name", shown(list, b, sizeof b));
    for (long k = 0; k < total; k++) {
        /* k as digits of mixed radix, the last group fastest */
        long rest = k, index[64];
        for (size_t g = it->n_groups; g-- > 0;) index[g] = rest % it->groups[g].count, rest /= it->groups[g].count;
        size_t len = 0;
        bool too_long = false;
        for (size_t g = 0; g < it->n_groups && !too_long; g++) {
            const group *gr = &it->groups[g];
            long i = index[g], v = 0;
            int width = 1;
            for (size_t r = 0; r < gr->n_ranges; r++) {
                long c = gr->ranges[r].hi - gr->ranges[r].lo + 1;
                if (i < c) { v = gr->ranges[r].lo + i, width = gr->ranges[r].width; break; }
                i -= c;
            }
            int n = snprintf(name + len, sizeof name - len, "%.*s%0*ld", (int)gr->prefix_len, gr->prefix, width, v);
            if (n < 0 || (size_t)n >= sizeof name - len) too_long = true;
            else len += (size_t)n;
        }
        if (!too_long) {
            int n = snprintf(name + len, sizeof name - len, "%.*s", (int)it->suffix_len, it->suffix);
            too_long = n < 0 || (size_t)n >= sizeof name - len;
        }
        if (too_long)
            return problem(err, size, "Slurm node list '%s': a host name longer than %d characters",
                           shown(list, b, sizeof b), MAX_NAME);
        const char *why = host_name_problem(name);
        if (why) {
            char c[96];
            return problem(err, size, "Slurm node list '%s': invalid host name '%s': %s", shown(list, b, sizeof b),
                           shown(name, c, sizeof c), why);
        }
        if (!hostlist_add(h, name, 0, 0)) return problem(err, size, "Slurm node list: out of memory");
    }
    return 0;
}

static int by_name(const void *a, const void *b) { return strcasecmp(*(char *const *)a, *(char *const *)b); }

int slurm_nodelist_expand(const char *list, hostlist *h, char *err, size_t err_size) {
    char b[96];
    if (!list || !*list) return problem(err, err_size, "Slurm node list is empty");
    size_t first = h->n;
    const char *p = list;
    for (;;) {
        item it = {0};
        int rc = parse_item(&p, &it, list, err, err_size);
        if (!rc) rc = expand_item(&it, h, list, err, err_size);
        item_free(&it);
        if (rc) return 1;
        if (!*p) break;
        p++; /* ',' */
    }
    /* unique names, as in a hostfile: sorted copies of the pointers, neighbours compared */
    size_t n = h->n - first;
    char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) return problem(err, err_size, "Slurm node list: out of memory");
    memcpy(sorted, h->names + first, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_name);
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++)
        if (!strcasecmp(sorted[i - 1], sorted[i]))
            rc = problem(err, err_size, "Slurm node list '%s': host '%s' is listed twice", shown(list, b, sizeof b),
                         sorted[i]);
    free(sorted);
    return rc;
}

int slurm_tasks_per_node(const char *spec, size_t n_nodes, long *tasks, char *err, size_t err_size) {
    char b[96];
    if (!spec || !*spec) return problem(err, err_size, "Slurm tasks per node: empty (expected e.g. '2(x3),1')");
    const char *s = spec;
    size_t filled = 0;
    for (;;) {
        long count, repeat = 1;
        int w;
        if (!read_number(&s, &count, &w) || count < 1 || count > 100000)
            return problem(err, err_size, "Slurm tasks per node '%s': expected a count from 1 to 100000, "
                           "optionally followed by '(xN)', in a list separated by ','", shown(spec, b, sizeof b));
        if (s[0] == '(' && s[1] == 'x') {
            s += 2;
            if (!read_number(&s, &repeat, &w) || repeat < 1 || *s != ')')
                return problem(err, err_size, "Slurm tasks per node '%s': expected '(xN)' with N >= 1 after %ld",
                               shown(spec, b, sizeof b), count);
            s++;
        }
        if ((size_t)repeat > n_nodes - filled)
            return problem(err, err_size, "Slurm tasks per node '%s': counts for more than the %zu node%s of the list",
                           shown(spec, b, sizeof b), n_nodes, n_nodes == 1 ? "" : "s");
        for (long k = 0; k < repeat; k++) tasks[filled++] = count;
        if (!*s) break;
        if (*s != ',')
            return problem(err, err_size, "Slurm tasks per node '%s': unexpected '%c' (expected ',' or the end)",
                           shown(spec, b, sizeof b), isprint((unsigned char)*s) ? *s : '?');
        s++;
    }
    if (filled != n_nodes)
        return problem(err, err_size, "Slurm tasks per node '%s': counts for %zu node%s, the node list has %zu",
                       shown(spec, b, sizeof b), filled, filled == 1 ? "" : "s", n_nodes);
    return 0;
}

/* The value of a, else of b (b may be NULL); NULL when both are unset or empty. */
static const char *env2(const char *a, const char *b) {
    const char *v = getenv(a);
    if ((!v || !*v) && b) v = getenv(b);
    return v && *v ? v : NULL;
}

bool slurm_env_read(slurm_env *e) {
    e->job_id = env2("SLURM_JOB_ID", "SLURM_JOBID");
    e->nodelist = env2("SLURM_JOB_NODELIST", "SLURM_NODELIST");
    e->tasks_per_node = env2("SLURM_TASKS_PER_NODE", NULL);
    e->ntasks_per_node = env2("SLURM_NTASKS_PER_NODE", NULL);
    return e->job_id && e->nodelist;
}

int slurm_hosts(const slurm_env *e, hostlist *h, char *err, size_t err_size) {
    char msg[512];
    if (slurm_nodelist_expand(e->nodelist, h, msg, sizeof msg))
        return problem(err, err_size, "SLURM_JOB_NODELIST=%s: %s", e->nodelist, msg);
    if (e->ntasks_per_node) {
        char *end;
        long v = strtol(e->ntasks_per_node, &end, 10);
        if (!isdigit((unsigned char)e->ntasks_per_node[0]) || *end || v < 1 || v > 100000)
            return problem(err, err_size, "SLURM_NTASKS_PER_NODE=%.80s: expected a count from 1 to 100000",
                           e->ntasks_per_node);
        for (size_t i = 0; i < h->n; i++) h->slots[i] = v;
    } else if (e->tasks_per_node) {
        if (slurm_tasks_per_node(e->tasks_per_node, h->n, h->slots, msg, sizeof msg))
            return problem(err, err_size, "SLURM_TASKS_PER_NODE=%.80s: %s", e->tasks_per_node, msg);
    }
    return 0;
}
