/* clock.h: the monotonic wall clock the project times its own host-side work with (the
 * executor's host timeline and timeouts, the simulator's speed line, bench work's idle between
 * kernels). GPU work is timed by CUDA events, never by this. */
#ifndef DM_CLOCK_H
#define DM_CLOCK_H
#include <time.h>

/* Microseconds of CLOCK_MONOTONIC (an arbitrary origin: differences only). */
static inline double dm_clock_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

#endif
