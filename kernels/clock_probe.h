/* clock_probe.h: the SM clock along a run, read on the GPU (clock_probe.cu: a one-thread
 * sampler kernel on a stream of its own, globaltimer and clock64 every period). A diagnostic of
 * the executor (DMUON_CLOCK_TRACE, real/real_gpu.c); one sampler per process. */
#ifndef DM_CLOCK_PROBE_H
#define DM_CLOCK_PROBE_H
#ifdef __cplusplus
extern "C" {
#endif
#include "dm_error.h"

/* Start the sampler (no-op when running): a read every period_us, for at most max_s seconds. */
int cp_start(double period_us, double max_s, dm_err *err);
/* Enqueue on `stream` (a cudaStream_t) a marker that records the global timer (a step's start). */
int cp_mark(void *stream, dm_err *err);
/* Stop the sampler and write path: a header placing the global timer on CLOCK_REALTIME, the
 * marks, then t_ns,cycles,mhz per read (mhz: over the interval since the read before). */
int cp_stop_write(const char *path, dm_err *err);
#ifdef __cplusplus
}
#endif
#endif
