/* real_bench_gpu.c: `dmuon bench comm`'s GPU part (real_bench_gpu.h) on CUDA and NCCL; in the GPU
 * plug-in. */
#include "config.h"

#include "real_bench_gpu.h"

#include <stdio.h>
#include <stdlib.h>

#include "real_nccl.h"

struct real_bench_gpu {
    int rank, dev;
    ncclComm_t nccl;
    cudaStream_t st;
    cudaEvent_t e0, e1;
};

static int g_open(MPI_Comm comm, int rank, size_t bytes, real_bench_gpu **out, void **send, void **recv, dm_err *err)
{
    real_bench_gpu *g = calloc(1, sizeof *g);
    *out = g;
    *send = *recv = NULL;
    if (!g) return dm_err_set(err, "rank %d: out of memory", rank);
    g->rank = rank;
    if (real_gpu_select(comm, &g->dev, err) < 0) return -1;
    if (cudaMalloc(send, bytes) != cudaSuccess || cudaMalloc(recv, bytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&g->e0) != cudaSuccess || cudaEventCreate(&g->e1) != cudaSuccess)
        return dm_err_set(err, "rank %d: out of GPU memory for %zu-byte buffers on GPU %d", rank, bytes, g->dev);
    return 0;
}

static int g_world(real_bench_gpu *g, MPI_Comm comm, dm_err *err) { return real_nccl_world(comm, &g->nccl, err); }

static int g_launch(real_bench_gpu *g, const dm_coll *c, const void *send, void *recv, size_t size, dm_err *err)
{
    int r = real_nccl_call(c, send, recv, size, DM_DT_BF16, 0, g->nccl, g->st);
    return r == ncclSuccess ? 0
                            : dm_err_set(err, "rank %d: %s: %s", g->rank, c->nccl_name,
                                         ncclGetErrorString((ncclResult_t)r));
}

static void g_mark(real_bench_gpu *g) { cudaEventRecord(g->e0, g->st); }

static int g_done(real_bench_gpu *g, double timeout_s, const char *what, double *us, dm_err *err)
{
    char who[32];
    snprintf(who, sizeof who, "rank %d", g->rank);
    if (cudaEventRecord(g->e1, g->st) != cudaSuccess) return dm_err_set(err, "rank %d: cudaEventRecord failed", g->rank);
    if (real_nccl_wait(g->e1, &g->nccl, 1, timeout_s, who, what, err) < 0) return -1;
    if (us) {
        float ms = 0;
        cudaEventElapsedTime(&ms, g->e0, g->e1);
        *us = ms * 1e3;
    }
    return 0;
}

static int g_copy(void *dst, const void *src, size_t bytes, int to_device)
{
    return cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost) == cudaSuccess
               ? 0
               : -1;
}

static int g_zero(void *dst, size_t bytes) { return cudaMemset(dst, 0, bytes) == cudaSuccess ? 0 : -1; }

static void g_close(real_bench_gpu *g, void *send, void *recv)
{
    if (g && g->nccl) ncclCommDestroy(g->nccl);
    cudaFree(send);
    cudaFree(recv);
    free(g);
}

const real_bench_gpu_ops real_bench_gpu_cuda = {g_open, g_world, g_launch, g_mark, g_done, g_copy, g_zero, g_close};
