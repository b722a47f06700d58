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

/* Allocation helpers: on failure they set err ("out of memory") and return NULL. dm_realloc
 * leaves p allocated (and owned by the caller) when it fails. */
void *dm_malloc(size_t n, dm_err *err);
void *dm_calloc(size_t n, size_t size, dm_err *err);
void *dm_realloc(void *p, size_t n, dm_err *err);
char *dm_strdup(const char *s, dm_err *err);

/* Large arrays (DM_HUGE_MIN bytes and more: a simulation of thousands of ranks holds arrays of
 * millions of ops) are advised to the kernel as transparent huge pages (madvise MADV_HUGEPAGE on
 * the 2 MiB-aligned part), so that first touching them costs one fault per 2 MiB, not per 4 KiB
 * (traces/scale/README.md, hugepages: page faults were a third of a 4096-GPU plan's time).
 * dm_malloc, dm_calloc and dm_realloc do it (after the allocation: fresh pages are not touched
 * before, and calloc clears only memory it reused); only advice (a kernel without THP, or with
 * THP "never", runs as before). */
#define DM_HUGE_PAGE ((size_t)2 << 20)
#define DM_HUGE_MIN ((size_t)4 << 20)
void dm_advise_huge(void *p, size_t n);

/* Allocation fault injection, in the style of SQLite's test builds, compiled into every build
 * (one predictable branch per allocation while disarmed).
 *
 * Environment: DM_FAIL_ALLOC=N makes the N-th call (counting from 1) of dm_malloc, dm_calloc,
 * dm_realloc or dm_strdup in the process fail as if memory were exhausted; DM_FAIL_ALLOC=N+
 * makes that call and every later one fail. The variable is read once, at program start. When
 * an injected failure happens, one line "dmuon: injected allocation failure N" goes to stderr,
 * so a sweep over N knows to stop once a run no longer prints it.
 *
 * In-process (tests): dm_fault_alloc_arm(n, sticky) starts counting from zero and fails the
 * n-th call (and every later one when sticky); n <= 0 disarms. Messages are not printed. */
void dm_fault_alloc_arm(long n, int sticky);
long dm_fault_alloc_calls(void); /* calls counted since arming */
int dm_fault_alloc_fired(void);  /* 1 once an injected failure has happened since arming */

#endif
