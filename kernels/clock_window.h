/* clock_window.h: the host side of the GPU timings, plain C, built into every build and tested
 * without a GPU: a set of times' median, minimum and maximum (every bench's rows), and the SM
 * clock over a timed window from cycle-counter marks (kernels/ns_elem.cu marks each SM right
 * before a row's timed calls and right after them: SM id, global timer in ns, that SM's cycle
 * counter; this turns the two sets of marks into the clock the row held, ns_time_last_mhz). */
#ifndef DM_CLOCK_WINDOW_H
#define DM_CLOCK_WINDOW_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Median, minimum and maximum of n > 0 times (t is sorted in place). */
void ns_bench_stats(double *t, int n, double *med, double *min, double *max);

/* The marks a[3 i + 0..2] (i < nb: SM id, ns, cycles) before and b[3 j + 0..2] (j < nb) after:
 * for each SM marked in both (a's first mark of it, b's first), its cycles over its nanoseconds
 * in MHz, windows under 20 us left out. Returns the largest over those SMs (taken when an idle
 * SM's counter was thought to stop, traces/kernels/rowclock-2026-12-06/h100-b; on an H100 the SMs
 * then agreed within 1.3%, h100-c, so it is the one clock of the window), 0 when none; *min and
 * *median, when not NULL, the smallest and the median (0 when none). At most 1024 SMs are read. */
double dm_clock_window_mhz(const uint64_t *a, const uint64_t *b, int nb, double *min, double *median);

#ifdef __cplusplus
}
#endif
#endif
