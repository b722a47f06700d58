/* clock_window.c: the SM clock over a timed window from cycle-counter marks (clock_window.h). */
#include "clock_window.h"

#include <stdlib.h>

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
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
    if (min) *min = 0;
    if (median) *median = 0;
    if (!n) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    if (min) *min = v[0];
    if (median) *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return v[n - 1];
}
