/* util.c: see util.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void die_oom(void) {
    fputs("tarantella: out of memory\n", stderr);
    exit(1);
}

char *xstrdup(const char *s) {
    char *d = strdup(s);
    if (!d) die_oom();
    return d;
}

char *xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int rc = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (rc < 0) die_oom();
    return s;
}

void sv_push_owned(strv *a, char *s) {
    if (a->n + 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        char **v = realloc(a->v, cap * sizeof *v);
        if (!v) die_oom();
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}
void sv_push(strv *a, const char *s) { sv_push_owned(a, xstrdup(s)); }

void sv_remove(strv *a, size_t i) {
    free(a->v[i]);
    memmove(a->v + i, a->v + i + 1, (a->n - i) * sizeof *a->v); /* moves the NULL too */
    a->n--;
}

void sv_free(strv *a) {
    for (size_t i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    *a = (strv){0};
}

void sv_split_words(strv *a, const char *s) {
    while (*s) {
        while (*s && isspace((unsigned char)*s)) s++;
        const char *b = s;
        while (*s && !isspace((unsigned char)*s)) s++;
        if (s > b) {
            char *w = strndup(b, (size_t)(s - b));
            if (!w) die_oom();
            sv_push_owned(a, w);
        }
    }
}

void shell_quote(FILE *out, const char *s) {
    bool safe = *s != '\0';
    for (const char *p = s; *p && safe; p++)
        safe = isalnum((unsigned char)*p) || strchr("_@%+=:,./-", *p);
    if (safe) {
        fputs(s, out);
        return;
    }
    fputc('\'', out);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') fputs("'\\''", out);
        else fputc(*p, out);
    }
    fputc('\'', out);
}

char *shell_quoted(const char *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die_oom();
    shell_quote(f, s);
    if (fclose(f) != 0) die_oom();
    return buf;
}

bool parse_long(const char *s, long min, long max, long *out) {
    if (!*s || isspace((unsigned char)*s)) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}
