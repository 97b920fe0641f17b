/* util.h: the launcher's small helpers (tools/tarantella.c and its modules): strings that end
 * the program when out of memory, argv vectors, shell quoting for --dry-run lines, number parsing. */
#ifndef TNT_LAUNCHER_UTIL_H
#define TNT_LAUNCHER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Prints "out of memory" and exits 1: the launcher is a program, it may. */
void die_oom(void);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable, NULL-terminated vector of owned strings (argv lists, host names). */
typedef struct { char **v; size_t n, cap; } strv;

/* Takes ownership of s. */
void sv_push_owned(strv *a, char *s);
/* Pushes a copy of s. */
void sv_push(strv *a, const char *s);
void sv_remove(strv *a, size_t i);
void sv_free(strv *a);
/* Splits on whitespace; used for --interpreter and the rsh agent, which are command prefixes. */
void sv_split_words(strv *a, const char *s);

/* Appends s to out, single-quoted for a POSIX shell when it holds anything unsafe, so the
 * --dry-run line can be pasted into a shell as is. */
void shell_quote(FILE *out, const char *s);
/* shell_quote into a new string, owned by the caller. */
char *shell_quoted(const char *s);

/* Full-string decimal parse within [min, max]; false on anything else. */
bool parse_long(const char *s, long min, long max, long *out);

/* The part of path p after its last '/' (inside p). */
const char *base_name(const char *p);

#endif
