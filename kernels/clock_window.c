/* clock_window.c: the host side of the GPU timings (clock_window.h): a set of times' statistics
 * and the SM clock over a timed window from cycle-counter marks. */
#include "clock_window.h"

#include <stdlib.h>

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

void ns_bench_stats(double *t, int n, double *med, double *min, double *max)
{
    if (n > 1) qsort(t, (size_t)n, sizeof *t, cmp_double);
    *min = t[0];
    *max = t[n - 1];
    *med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

double dm_clock_window_mhz(const uint64_t *a, const uint64_t *b, int nb, double *min, double *median)
{
    double v[1024];
    int n = 0;
    for (int i = 0; i < nb && n < 1024; i++) {
        int first = 1; /* a's first mark of this SM only */
        for (int k = 0; k < i && first; k++)
            if (a[3 * k] == a[3 * i]) first = 0;
        if (!first) continue;
        for (int j = 0; j < nb; j++)
            if (b[3 * j] == a[3 * i]) {
                double dt = (double)(int64_t)(b[3 * j + 1] - a[3 * i + 1]);
                double dc = (double)(int64_t)(b[3 * j + 2] - a[3 * i + 2]);
                if (dt >= 2e4 && dc > 0) v[n++] = dc / dt * 1e3;
                break;
            }
    }
    double lo = 0, med = 0, hi = 0;
    if (n) ns_bench_stats(v, n, &med, &lo, &hi);
    if (min) *min = lo;
    if (median) *median = med;
    return hi;
}
