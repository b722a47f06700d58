/* tap.h: a minimal TAP producer for the unit tests (one header, static inline helpers).
 * Each test program calls tap_plan(n) or tap_done() at the end, and ok()/ok_near() per check.
 * Exit status is 0 when every check passed, 1 otherwise; skip a whole program with tap_skip_all. */
#ifndef DM_TAP_H
#define DM_TAP_H
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n_run_, tap_n_fail_;

/* (format-checked: a wrong argument is a compiler warning) */
__attribute__((format(printf, 4, 5))) static inline int tap_ok_(int cond, const char *file, int line,
                                                               const char *fmt, ...)
{
    va_list ap;
    tap_n_run_++;
    if (!cond) tap_n_fail_++;
    printf("%sok %d - ", cond ? "" : "not ", tap_n_run_);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond) printf("#   failed at %s:%d\n", file, line);
    fflush(stdout);
    return cond;
}
#define ok(cond, ...) tap_ok_(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
/* |got - want| <= tol * max(1, |want|) */
#define ok_near(got, want, tol, ...)                                                        \
    tap_ok_(fabs((double)(got) - (double)(want)) <=                                         \
                (tol) * fmax(1.0, fabs((double)(want))), __FILE__, __LINE__, __VA_ARGS__)

__attribute__((format(printf, 1, 2))) static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static inline int tap_done(void)
{
    printf("1..%d\n", tap_n_run_);
    return tap_n_fail_ ? 1 : 0;
}

/* Writes `text` to `path`; a failed write is a failed check named by `what`. Returns 0 when written. */
static inline int tap_write_file(const char *what, const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    int bad = !f;
    if (f) {
        bad = fputs(text, f) < 0;
        bad |= fclose(f) != 0;
    }
    if (!bad) return 0;
    tap_ok_(0, __FILE__, __LINE__, "%s: cannot write %s", what, path);
    return -1;
}

static inline int tap_skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    return 0;
}
#endif
