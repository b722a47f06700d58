/* real_bench_gpu.h: `dmuon bench comm`'s GPU part (real_bench.c runs it through these calls): the
 * device, its buffers, the NCCL communicator, the stream and its two events. It lives in the GPU
 * plug-in (gpu_api.h's bench_comm), so real_bench.c needs no CUDA library. Element type bf16. */
#ifndef DM_REAL_BENCH_GPU_H
#define DM_REAL_BENCH_GPU_H
#include <mpi.h>
#include <stddef.h>

#include "coll.h"
#include "dm_error.h"

typedef struct real_bench_gpu real_bench_gpu; /* the plug-in's state */

typedef struct real_bench_gpu_ops {
    /* This rank's GPU (real_nccl.h's real_gpu_select: every rank of comm calls it), two device
     * buffers of `bytes` each (*send, *recv), the stream and events; -1 with the reason. */
    int (*open)(MPI_Comm comm, int rank, size_t bytes, real_bench_gpu **g, void **send, void **recv, dm_err *err);
    /* The world NCCL communicator over comm (collective over comm). */
    int (*world)(real_bench_gpu *g, MPI_Comm comm, dm_err *err);
    /* One collective of `size` bf16 elements, root 0, enqueued on the stream. */
    int (*launch)(real_bench_gpu *g, const dm_coll *c, const void *send, void *recv, size_t size, dm_err *err);
    /* Start of the timed calls: the first event on the stream. */
    void (*mark)(real_bench_gpu *g);
    /* Wait for what the stream holds (the second event; NCCL errors and the timeout polled);
     * *us (when not NULL) the time from mark to here in microseconds. */
    int (*done)(real_bench_gpu *g, double timeout_s, const char *what, double *us, dm_err *err);
    /* Host <-> device copies (to_device 1: dst on the device) and a zeroed device buffer. */
    int (*copy)(void *dst, const void *src, size_t bytes, int to_device);
    int (*zero)(void *dst, size_t bytes);
    void (*close)(real_bench_gpu *g, void *send, void *recv); /* g may be NULL */
} real_bench_gpu_ops;

extern const real_bench_gpu_ops real_bench_gpu_cuda;

#endif
