/* dm_error.c: error records and checked allocation (the single place allocation failures are
 * reported, so fault injection can hook here). */
#include "dm_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dm_err_set(dm_err *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void *dm_malloc(size_t n, dm_err *err)
{
    void *p = malloc(n ? n : 1);
    if (!p) dm_err_set(err, "out of memory (%zu bytes)", n);
    return p;
}

void *dm_calloc(size_t n, size_t size, dm_err *err)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) dm_err_set(err, "out of memory (%zu x %zu bytes)", n, size);
    return p;
}

void *dm_realloc(void *p, size_t n, dm_err *err)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) dm_err_set(err, "out of memory (%zu bytes)", n);
    return q;
}

char *dm_strdup(const char *s, dm_err *err)
{
    size_t n = strlen(s) + 1;
    char *p = dm_malloc(n, err);
    if (p) memcpy(p, s, n);
    return p;
}
