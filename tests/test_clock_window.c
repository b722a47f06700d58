/* test_clock_window.c: the SM clock over a timed window from cycle-counter marks
 * (kernels/clock_window.c, what `bench kernels` writes as a row's clock): marks built by hand
 * for SMs at known clocks. Pairing by SM id whatever the block order; an SM marked twice
 * before counts once; the largest over the SMs is the clock, the smallest and the median beside
 * it; an SM marked on one side only, a window under 20 us and a counter that went back are left
 * out; no pair gives 0. */
#include <stdint.h>

#include "clock_window.h"
#include "tap.h"

/* One mark: SM id, time (ns), cycles. */
static void mark(uint64_t *m, int i, uint64_t sm, uint64_t t, uint64_t c)
{
    m[3 * i] = sm, m[3 * i + 1] = t, m[3 * i + 2] = c;
}

int main(void)
{
    uint64_t a[3 * 8], b[3 * 8];
    double lo, med;
    /* four SMs over a 10 ms window: 1980, 1800, 1500 and 1900 MHz of counted cycles; the after
     * marks in another block order */
    const double mhz[4] = {1980, 1800, 1500, 1900};
    for (int i = 0; i < 4; i++) {
        uint64_t t0 = 1000000 + 1000 * (uint64_t)i, c0 = 5000000 * (uint64_t)(i + 1);
        mark(a, i, 10 + (uint64_t)i, t0, c0);
        mark(b, 3 - i, 10 + (uint64_t)i, t0 + 10000000, c0 + (uint64_t)(mhz[i] * 1e-3 * 10000000));
    }
    double f = dm_clock_window_mhz(a, b, 4, &lo, &med);
    ok_near(f, 1980, 1e-9, "the largest over the SMs: %.3f", f);
    ok_near(lo, 1500, 1e-9, "the smallest: %.3f", lo);
    ok_near(med, 0.5 * (1800 + 1900), 1e-9, "the median of four: %.3f", med);
    /* an SM marked twice before (two blocks on it): its first mark only */
    mark(a, 4, 10, 1000000 + 5000000, 0); /* a later mark of SM 10 with a cycle count that would read 4x faster */
    mark(b, 4, 99, 20000000, 1);        /* an SM marked after only */
    f = dm_clock_window_mhz(a, b, 5, &lo, &med);
    ok_near(f, 1980, 1e-9, "a second mark of one SM and an SM marked on one side are left out: %.3f", f);
    ok_near(med, 1850, 1e-9, "the median still over four SMs: %.3f", med);
    /* a window under 20 us, and a counter that went back */
    uint64_t c[6], d[6];
    mark(c, 0, 1, 100, 1000), mark(d, 0, 1, 100 + 19999, 1000 + 39000);
    mark(c, 1, 2, 100, 5000), mark(d, 1, 2, 100 + 50000, 4000);
    ok(dm_clock_window_mhz(c, d, 2, &lo, &med) == 0 && lo == 0 && med == 0, "no SM with a window of 20 us or more and counted cycles: 0");
    mark(d, 0, 1, 100 + 20000, 1000 + 36000);
    ok_near(dm_clock_window_mhz(c, d, 2, NULL, NULL), 1800, 1e-9, "20 us is enough (NULL min and median)");
    ok(dm_clock_window_mhz(a, b, 0, &lo, &med) == 0, "no marks: 0");
    return tap_done();
}
