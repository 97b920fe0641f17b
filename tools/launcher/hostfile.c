/* hostfile.c: the launcher's hostfile reader and host-name check (see hostfile.h). */
#include "hostfile.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Open MPI 4.1's mpirun keeps the first label of a host name (the whole name with
 * orte_keep_fqdn_hostnames) in a fixed buffer: from 57 characters on it dies with "stack
 * smashing detected" (measured with --host NAME:1). */
#define MPIRUN_MAX_LABEL 56

void hostlist_free(hostlist *h) {
    for (size_t i = 0; i < h->n; i++) free(h->names[i]);
    free(h->names), free(h->slots), free(h->lines);
    *h = (hostlist){0};
}

bool hostlist_add(hostlist *h, const char *name, long slots, int line) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 8;
        char **nv = realloc(h->names, cap * sizeof *nv);
        if (nv) h->names = nv;
        long *sv = realloc(h->slots, cap * sizeof *sv);
        if (sv) h->slots = sv;
        int *lv = realloc(h->lines, cap * sizeof *lv);
        if (lv) h->lines = lv;
        if (!nv || !sv || !lv) return false;
        h->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return false;
    h->names[h->n] = copy, h->slots[h->n] = slots, h->lines[h->n] = line;
    h->n++;
    return true;
}

const char *host_name_problem(const char *name) {
    unsigned char addr[16];
    if (inet_pton(AF_INET, name, addr) == 1) return NULL;
    if (strchr(name, ':'))
        return inet_pton(AF_INET6, name, addr) == 1
                   ? "an IPv6 address, which Open MPI's mpirun cannot take in its host list (use the host's name)"
                   : "':' is not allowed (mpirun reads it as a slot count)";
    size_t len = strlen(name);
    if (len == 0) return "the name is empty";
    if (len > 253) return "longer than 253 characters (RFC 1123)";
    bool first = true;
    for (const char *label = name;; first = false) {
        size_t n = strcspn(label, ".");
        if (n == 0) return "an empty label (two dots, or a dot at the start or end)";
        if (n > 63) return "a label longer than 63 characters (RFC 1123)";
        if (first && n > MPIRUN_MAX_LABEL)
            return "its first label is longer than 56 characters, which crashes Open MPI 4.1's mpirun";
        if (label[0] == '-' || label[n - 1] == '-') return "a label starts or ends with '-' (RFC 1123)";
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)label[i]) && label[i] != '-')
                return "only letters, digits, '-' and '.' are allowed (RFC 1123)";
        if (!label[n]) return NULL;
        label += n + 1;
    }
}

static int problem(char *err, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return 1;
}

/* A value from the file as messages show it: printable, at most 80 characters. */
static const char *shown(const char *s, char *buf, size_t size) {
    size_t i = 0;
    for (; s[i] && i + 4 < size && i < 80; i++) buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
    strcpy(buf + i, s[i] ? "..." : "");
    return buf;
}

/* Full-string decimal in [1, 100000]. */
static bool parse_slots(const char *s, long *out) {
    if (!isdigit((unsigned char)*s)) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > 100000) return false;
    *out = v;
    return true;
}

int hostfile_read(FILE *f, const char *file, hostlist *h, char *err, size_t err_size) {
    char *line = NULL, *save = NULL, a[96], b[96];
    size_t cap = 0;
    int rc = 0;
    for (int lineno = 1; getline(&line, &cap, f) >= 0; lineno++) {
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *name = strtok_r(line, " \t\r\n", &save);
        if (!name) continue;
        const char *why = host_name_problem(name);
        if (why) {
            rc = problem(err, err_size, "hostfile '%s' line %d: invalid host name '%s': %s", file, lineno,
                         shown(name, a, sizeof a), why);
            break;
        }
        long slots = 0;
        for (char *tok; rc == 0 && (tok = strtok_r(NULL, " \t\r\n", &save));) {
            long v;
            if (!strncmp(tok, "slots=", 6) && parse_slots(tok + 6, &v)) slots = v;
            else if (strncmp(tok, "max_slots=", 10) || !parse_slots(tok + 10, &v))
                rc = problem(err, err_size, "hostfile '%s' line %d: unexpected '%s' after host '%s' (expected "
                             "slots=K with K from 1 to 100000)", file, lineno, shown(tok, a, sizeof a), name);
        }
        if (rc) break;
        /* Hosts must be unique (as in Tarantella): a repeated name would silently double the
         * ranks on that host and break the threads-per-rank split. */
        for (size_t k = 0; k < h->n && rc == 0; k++)
            if (!strcasecmp(h->names[k], name))
                rc = problem(err, err_size, "hostfile '%s' line %d: duplicate host '%s' (already on line %d); "
                             "host names must be unique", file, lineno, shown(name, b, sizeof b), h->lines[k]);
        if (rc) break;
        if (!hostlist_add(h, name, slots, lineno)) {
            rc = problem(err, err_size, "hostfile '%s': out of memory", file);
            break;
        }
    }
    if (rc == 0 && ferror(f)) rc = problem(err, err_size, "cannot read hostfile '%s': %s", file, strerror(errno));
    else if (rc == 0 && h->n == 0)
        rc = problem(err, err_size, "hostfile '%s' lists no hosts (only empty or comment lines)", file);
    free(line);
    return rc;
}
