/* dm_error.c: error records and checked allocation (the single place allocation failures are
 * reported, so fault injection hooks here; see dm_error.h). */
#include "dm_error.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* ---- fault injection --------------------------------------------------------------------- */

static int fault_armed;      /* the one branch every allocation pays */
static long fault_at;        /* fail the fault_at-th call (1-based) */
static int fault_sticky;     /* ... and every later one */
static int fault_verbose;    /* print a line when a failure is injected (environment mode) */
static long fault_calls;
static int fault_fired;

void dm_fault_alloc_arm(long n, int sticky)
{
    fault_at = n;
    fault_sticky = sticky != 0;
    fault_calls = 0;
    fault_fired = 0;
    fault_verbose = 0;
    fault_armed = n > 0;
}

long dm_fault_alloc_calls(void) { return fault_calls; }
int dm_fault_alloc_fired(void) { return fault_fired; }

/* Read DM_FAIL_ALLOC before main() runs, so no allocation is missed and none pays for it. */
__attribute__((constructor)) static void fault_from_env(void)
{
    const char *s = getenv("DM_FAIL_ALLOC");
    if (!s || !*s) return;
    char *end;
    long n = strtol(s, &end, 10);
    int sticky = *end == '+';
    if (sticky) end++;
    if (*end || n <= 0) {
        fprintf(stderr, "dmuon: ignoring DM_FAIL_ALLOC='%s' (expected N or N+, N >= 1)\n", s);
        return;
    }
    dm_fault_alloc_arm(n, sticky);
    fault_verbose = 1;
}

/* Called only while armed: 1 when this call must fail. */
static int fault_hit(void)
{
    long k = ++fault_calls;
    if (k == fault_at || (fault_sticky && k > fault_at)) {
        if (fault_verbose && !fault_fired)
            fprintf(stderr, "dmuon: injected allocation failure %ld\n", k);
        fault_fired = 1;
        return 1;
    }
    return 0;
}

#define FAULT() (__builtin_expect(fault_armed, 0) && fault_hit())

/* ---- allocation -------------------------------------------------------------------------- */

void dm_advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t H = DM_HUGE_PAGE;
    if (!p || n < DM_HUGE_MIN) return;
    uintptr_t a = ((uintptr_t)p + H - 1) & ~(H - 1), e = ((uintptr_t)p + n) & ~(H - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* advice: a refusal changes nothing */
#else
    (void)p, (void)n;
#endif
}

void *dm_malloc(size_t n, dm_err *err)
{
    void *p = FAULT() ? NULL : malloc(n ? n : 1);
    if (!p) dm_err_set(err, "out of memory (%zu bytes)", n);
    dm_advise_huge(p, n);
    return p;
}

void *dm_calloc(size_t n, size_t size, dm_err *err)
{
    /* (calloc clears only memory it reused: fresh pages are advised before their first touch) */
    void *p = FAULT() ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p) dm_err_set(err, "out of memory (%zu x %zu bytes)", n, size);
    else if (n && size && n <= SIZE_MAX / size) dm_advise_huge(p, n * size);
    return p;
}

void *dm_realloc(void *p, size_t n, dm_err *err)
{
    void *q = FAULT() ? NULL : realloc(p, n ? n : 1);
    if (!q) dm_err_set(err, "out of memory (%zu bytes)", n);
    dm_advise_huge(q, n);
    return q;
}

char *dm_strdup(const char *s, dm_err *err)
{
    size_t n = strlen(s) + 1;
    char *p = dm_malloc(n, err);
    if (p) memcpy(p, s, n);
    return p;
}
