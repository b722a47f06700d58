/* calib_nccl.c: measure NCCL collectives among the GPUs of one machine (one process, one thread,
 * ncclCommInitAll), to calibrate a one-node cluster preset (h200x2): the latency term (time of
 * the smallest message) and the bus bandwidth (nccl-tests busbw of the largest). Not part of the
 * build (it needs a GPU); build and run it by hand:
 *   gcc -O2 -std=gnu11 -o calib_nccl sim/calib_nccl.c -I/usr/local/cuda/include \
 *       -L/usr/local/cuda/targets/x86_64-linux/lib -lnccl -lcudart && ./calib_nccl
 * Output: one line per (collective, size): the nccl-tests table columns (size in bytes with the
 * nccl-tests convention of core/collcost.h, time in us, algbw and busbw in GB/s), 20 timed
 * iterations after 5 warm-up ones, times from CUDA events on every GPU (the slowest counts). */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_CHECK(x)                                                                            \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));  \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)
#define NCCL_CHECK(x)                                                                            \
    do {                                                                                         \
        ncclResult_t r_ = (x);                                                                   \
        if (r_ != ncclSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_));  \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

enum { AR, BC, RD, AG, RS, N_OPS };
static const char *names[N_OPS] = {"all-reduce", "broadcast", "reduce", "all-gather", "reduce-scatter"};

#define MAXG 8
static int n;
static ncclComm_t comm[MAXG];
static cudaStream_t st[MAXG];
static void *sendb[MAXG], *recvb[MAXG];

/* bytes: the nccl-tests size (all-gather: output; reduce-scatter: input); bf16 elements. */
static void launch(int op, size_t bytes)
{
    size_t cnt = bytes / 2, part = cnt / (size_t)n;
    NCCL_CHECK(ncclGroupStart());
    for (int g = 0; g < n; g++) {
        switch (op) {
        case AR: NCCL_CHECK(ncclAllReduce(sendb[g], recvb[g], cnt, ncclBfloat16, ncclSum, comm[g], st[g])); break;
        case BC: NCCL_CHECK(ncclBroadcast(sendb[g], recvb[g], cnt, ncclBfloat16, 0, comm[g], st[g])); break;
        case RD: NCCL_CHECK(ncclReduce(sendb[g], recvb[g], cnt, ncclBfloat16, ncclSum, 0, comm[g], st[g])); break;
        case AG: NCCL_CHECK(ncclAllGather(sendb[g], recvb[g], part, ncclBfloat16, comm[g], st[g])); break;
        case RS: NCCL_CHECK(ncclReduceScatter(sendb[g], recvb[g], part, ncclBfloat16, ncclSum, comm[g], st[g])); break;
        }
    }
    NCCL_CHECK(ncclGroupEnd());
}

static double factor(int op)
{
    return op == AR ? 2.0 * (n - 1) / n : (op == AG || op == RS) ? (double)(n - 1) / n : 1.0;
}

int main(void)
{
    int devs[MAXG];
    CUDA_CHECK(cudaGetDeviceCount(&n));
    if (n > MAXG) n = MAXG;
    if (n < 2) {
        printf("# calib_nccl: %d GPU, nothing to measure\n", n);
        return 0;
    }
    const size_t max_bytes = (size_t)1 << 30;
    for (int g = 0; g < n; g++) {
        devs[g] = g;
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaStreamCreate(&st[g]));
        CUDA_CHECK(cudaMalloc(&sendb[g], max_bytes));
        CUDA_CHECK(cudaMalloc(&recvb[g], max_bytes));
        CUDA_CHECK(cudaMemset(sendb[g], 0, max_bytes));
    }
    NCCL_CHECK(ncclCommInitAll(comm, n, devs));
    int ver;
    ncclGetVersion(&ver);
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# calib_nccl: %d x %s, NCCL %d, bf16, 5 warm-up + 20 timed iterations\n", n, prop.name, ver);
    printf("# %-14s %12s %12s %10s %10s\n", "collective", "size_B", "time_us", "algbw_GBs", "busbw_GBs");
    for (int op = 0; op < N_OPS; op++) {
        for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
            cudaEvent_t a[MAXG], b[MAXG];
            for (int i = 0; i < 5; i++) launch(op, bytes);
            for (int g = 0; g < n; g++) {
                CUDA_CHECK(cudaSetDevice(g));
                CUDA_CHECK(cudaEventCreate(&a[g]));
                CUDA_CHECK(cudaEventCreate(&b[g]));
                CUDA_CHECK(cudaEventRecord(a[g], st[g]));
            }
            for (int i = 0; i < 20; i++) launch(op, bytes);
            double worst = 0;
            for (int g = 0; g < n; g++) {
                CUDA_CHECK(cudaSetDevice(g));
                CUDA_CHECK(cudaEventRecord(b[g], st[g]));
            }
            for (int g = 0; g < n; g++) {
                float ms;
                CUDA_CHECK(cudaSetDevice(g));
                CUDA_CHECK(cudaEventSynchronize(b[g]));
                CUDA_CHECK(cudaEventElapsedTime(&ms, a[g], b[g]));
                if (ms > worst) worst = ms;
                cudaEventDestroy(a[g]);
                cudaEventDestroy(b[g]);
            }
            double us = worst * 1e3 / 20, algbw = bytes / (us * 1e-6) / 1e9;
            printf("  %-14s %12zu %12.3f %10.2f %10.2f\n", names[op], bytes, us, algbw, algbw * factor(op));
            fflush(stdout);
        }
    }
    for (int g = 0; g < n; g++) ncclCommDestroy(comm[g]);
    return 0;
}
