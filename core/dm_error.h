/* dm_error.h: the error record every library call fills on failure.
 * Library functions return 0 on success and -1 on failure, with a one-line message in *err
 * (file:line:col: what was expected, when the error is about input). Only main() exits. */
#ifndef DM_ERROR_H
#define DM_ERROR_H
#include <stddef.h>

typedef struct dm_err {
    char msg[1024];
} dm_err;

/* printf-style; err may be NULL. Always returns -1 so callers can `return dm_err_set(...)`. */
int dm_err_set(dm_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocation helpers: on failure they set err ("out of memory") and return NULL. */
void *dm_malloc(size_t n, dm_err *err);
void *dm_calloc(size_t n, size_t size, dm_err *err);
void *dm_realloc(void *p, size_t n, dm_err *err);
char *dm_strdup(const char *s, dm_err *err);

#endif
