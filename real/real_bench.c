/* real_bench.c: `dmuon bench comm`, the collective benchmark (nccl-tests style): broadcast,
 * reduce, all-reduce, all-gather and reduce-scatter over sizes from 1 KiB to 1 GiB on all
 * ranks, through NCCL on GPUs (CUDA events on the stream) or MPI on CPUs (wall clock). Per
 * size: warm-up, a timed loop, then a separate correctness pass (rank-dependent inputs, every
 * element checked: #wrong). A table for people, a CSV for the cost model, and per collective
 * a least-squares fit (GSL) of time = latency + bus bytes / bus bandwidth, the form of
 * core/collcost.h. Sizes are the nccl-tests "size" of collcost.h; bf16 elements on GPUs,
 * float on CPUs. */
#include "config.h"

#include <getopt.h>
#include <gsl/gsl_fit.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collcost.h"
#include "opts.h"
#include "outfile.h"
#include "program.h"
#include "real.h"

#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>
#define BENCH_GPU 1
#else
#define BENCH_GPU 0
#endif

static const dm_op_kind kinds[] = {DM_OP_BROADCAST, DM_OP_REDUCE, DM_OP_ALLREDUCE, DM_OP_ALLGATHER,
                                   DM_OP_REDUCESCATTER};
#define N_KINDS 5

typedef struct bench {
    int rank, n, gpu;
    size_t elt;
    void *send, *recv;        /* device (GPU) or host buffers of max_bytes */
#if BENCH_GPU
    ncclComm_t comm;
    cudaStream_t st;
    cudaEvent_t e0, e1;
#endif
} bench;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* count: elements of the collective's "size" (the gathered output / scattered input) */
static int launch(bench *b, dm_op_kind k, size_t count)
{
    size_t per = count / (size_t)b->n;
#if BENCH_GPU
    if (b->gpu) {
        ncclResult_t r = ncclSuccess;
        ncclDataType_t t = ncclBfloat16;
        char *s = b->send, *d = b->recv;
        switch (k) {
        case DM_OP_BROADCAST: r = ncclBroadcast(s, d, count, t, 0, b->comm, b->st); break;
        case DM_OP_REDUCE: r = ncclReduce(s, d, count, t, ncclSum, 0, b->comm, b->st); break;
        case DM_OP_ALLREDUCE: r = ncclAllReduce(s, d, count, t, ncclSum, b->comm, b->st); break;
        case DM_OP_ALLGATHER: r = ncclAllGather(s, d, per, t, b->comm, b->st); break;
        case DM_OP_REDUCESCATTER: r = ncclReduceScatter(s, d, per, t, ncclSum, b->comm, b->st); break;
        default: break;
        }
        return r == ncclSuccess ? 0 : -1;
    }
#endif
    int c = (int)count, p = (int)per;
    switch (k) {
    case DM_OP_BROADCAST: return MPI_Bcast(b->send, c, MPI_FLOAT, 0, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
    case DM_OP_REDUCE: return MPI_Reduce(b->send, b->recv, c, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
    case DM_OP_ALLREDUCE: return MPI_Allreduce(b->send, b->recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
    case DM_OP_ALLGATHER: return MPI_Allgather(b->send, p, MPI_FLOAT, b->recv, p, MPI_FLOAT, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
    case DM_OP_REDUCESCATTER:
        return MPI_Reduce_scatter_block(b->send, b->recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
    default: return -1;
    }
}

/* Mean time per call in microseconds over iters calls (after warmup). */
static int time_coll(bench *b, dm_op_kind k, size_t count, int warmup, int iters, double *us)
{
    for (int i = 0; i < warmup; i++)
        if (launch(b, k, count)) return -1;
#if BENCH_GPU
    if (b->gpu) {
        cudaStreamSynchronize(b->st);
        MPI_Barrier(MPI_COMM_WORLD);
        cudaEventRecord(b->e0, b->st);
        for (int i = 0; i < iters; i++)
            if (launch(b, k, count)) return -1;
        cudaEventRecord(b->e1, b->st);
        if (cudaEventSynchronize(b->e1) != cudaSuccess) return -1;
        float ms = 0;
        cudaEventElapsedTime(&ms, b->e0, b->e1);
        *us = ms * 1e3 / iters;
        return 0;
    }
#endif
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    for (int i = 0; i < iters; i++)
        if (launch(b, k, count)) return -1;
    *us = (now_s() - t0) * 1e6 / iters;
    return 0;
}

/* Small integers are exact in bf16 and float: input element i of rank r is (r + 1) + (i % 7),
 * sums stay below 256 for up to 16 ranks. */
static double in_val(int r, size_t i) { return (double)(r + 1) + (double)(i % 7); }

static int fill_and_check(bench *b, dm_op_kind k, size_t count, long *wrong)
{
    size_t per = count / (size_t)b->n, nin = k == DM_OP_ALLGATHER ? per : count;
    size_t nout = k == DM_OP_REDUCESCATTER ? per : count;
    float *h = malloc((count ? count : 1) * sizeof *h);
    if (!h) return -1;
    for (size_t i = 0; i < nin; i++) h[i] = (float)in_val(b->rank, k == DM_OP_ALLGATHER ? b->rank * per + i : i);
#if BENCH_GPU
    if (b->gpu) {
        uint16_t *hb = (uint16_t *)h; /* float -> bf16 by truncation: exact for small integers */
        for (size_t i = 0; i < nin; i++) {
            uint32_t u;
            memcpy(&u, &h[i], 4);
            hb[i] = (uint16_t)(u >> 16);
        }
        cudaMemcpy(b->send, hb, nin * 2, cudaMemcpyHostToDevice);
        cudaMemset(b->recv, 0, count * 2);
        if (k == DM_OP_BROADCAST && b->rank != 0) cudaMemset(b->send, 0, count * 2);
    } else
#endif
    {
        memcpy(b->send, h, nin * sizeof *h);
        memset(b->recv, 0, count * sizeof *h);
        if (k == DM_OP_BROADCAST && b->rank != 0) memset(b->send, 0, count * sizeof *h);
    }
    if (launch(b, k, count)) {
        free(h);
        return -1;
    }
    /* MPI broadcasts in place; NCCL's (out of place here) lands in recv */
    const void *res = k == DM_OP_BROADCAST && !b->gpu ? b->send : b->recv;
#if BENCH_GPU
    if (b->gpu) {
        cudaStreamSynchronize(b->st);
        uint16_t *hb = (uint16_t *)h;
        cudaMemcpy(hb, res, nout * 2, cudaMemcpyDeviceToHost);
        for (size_t i = nout; i-- > 0;) { /* widen in place, from the end */
            uint32_t u = (uint32_t)hb[i] << 16;
            memcpy(&h[i], &u, 4);
        }
        res = h;
    }
#endif
    const float *o = res;
    *wrong = 0;
    if (k == DM_OP_REDUCE && b->rank != 0) nout = 0;
    for (size_t i = 0; i < nout; i++) {
        double want;
        size_t gi = k == DM_OP_REDUCESCATTER ? b->rank * per + i : i;
        if (k == DM_OP_BROADCAST) want = in_val(0, i);
        else if (k == DM_OP_ALLGATHER) want = in_val((int)(i / per), i);
        else {
            want = 0;
            for (int r = 0; r < b->n; r++) want += in_val(r, gi);
        }
        if (o[i] != (float)want) (*wrong)++;
    }
    free(h);
    long all = 0;
    MPI_Allreduce(wrong, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    *wrong = all;
    return 0;
}

static void say(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int rank, const char *fmt, ...)
{
    if (rank) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

int real_bench_comm(int argc, char **argv)
{
    int inited = 0, rank = 0, n = 1;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int64_t min_b = 1024, max_b = (int64_t)1 << 30;
    long factor = 2, iters = 20, warmup = 5;
    const char *csv_path = NULL, *backend = BENCH_GPU ? "gpu" : "cpu";
    static const struct option lo[] = {{"min-bytes", required_argument, NULL, 'b'}, {"max-bytes", required_argument, NULL, 'e'},
                                       {"step-factor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'},
                                       {"warmup", required_argument, NULL, 'w'},      {"csv", required_argument, NULL, 'c'},
                                       {"backend", required_argument, NULL, 'k'},     {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int c, bad = 0;
    opterr = rank == 0;
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "b:e:f:n:w:c:h", lo, NULL)) != -1) {
        switch (c) {
        case 'b': bad = opt_parse_size("bench comm", "--min-bytes", optarg, 4, (int64_t)1 << 34, &min_b); break;
        case 'e': bad = opt_parse_size("bench comm", "--max-bytes", optarg, 4, (int64_t)1 << 34, &max_b); break;
        case 'f': bad = opt_parse_long("bench comm", "--step-factor", optarg, 2, 1024, &factor); break;
        case 'n': bad = opt_parse_long("bench comm", "--iters", optarg, 1, 100000, &iters); break;
        case 'w': bad = opt_parse_long("bench comm", "--warmup", optarg, 0, 100000, &warmup); break;
        case 'c': csv_path = optarg; break;
        case 'k':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu")) {
                if (!rank) opt_usage_error("bench comm", "--backend: expected cpu or gpu, got '%s'", optarg);
                bad = 1;
            }
            backend = optarg;
            break;
        case 'h':
            say(rank, "Usage: mpirun -np N dmuon bench comm [OPTIONS]\n"
                      "Time broadcast, reduce, all-reduce, all-gather and reduce-scatter over all ranks\n"
                      "(nccl-tests columns), check every result, and fit latency and bus bandwidth.\n\n"
                      "  --backend B        gpu (NCCL, bf16) or cpu (MPI, float) (default %s)\n"
                      "  --min-bytes S      smallest size (default 1K)\n"
                      "  --max-bytes S      largest size (default 1G)\n"
                      "  --step-factor F    size multiplier (default 2)\n"
                      "  --iters N          timed calls per size (default 20)\n"
                      "  --warmup N         untimed calls first (default 5)\n"
                      "  --csv FILE         the rows as CSV (for the cost model's fit)\n",
                BENCH_GPU ? "gpu" : "cpu");
            MPI_Finalize();
            return 0;
        default: bad = 1;
        }
    }
    if (bad || min_b > max_b) {
        if (!bad && !rank) opt_usage_error("bench comm", "--min-bytes is above --max-bytes");
        MPI_Finalize();
        return 2;
    }
    bench b;
    memset(&b, 0, sizeof b);
    b.rank = rank;
    b.n = n;
    b.gpu = !strcmp(backend, "gpu");
    b.elt = b.gpu ? 2 : 4;
    int status = 1;
    dm_out *csv = NULL;
    dm_err err = {{0}};
    size_t max_count = (size_t)(max_b / (int64_t)b.elt);
    max_count = (max_count + (size_t)n - 1) / (size_t)n * (size_t)n;
    int fail = 0;
    if (b.gpu) {
#if BENCH_GPU
        MPI_Comm node;
        int lr = 0, ndev = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &lr);
        MPI_Comm_free(&node);
        ncclUniqueId id;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || lr >= ndev || cudaSetDevice(lr) != cudaSuccess ||
            cudaMalloc(&b.send, max_count * b.elt) != cudaSuccess || cudaMalloc(&b.recv, max_count * b.elt) != cudaSuccess ||
            cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking) != cudaSuccess ||
            cudaEventCreate(&b.e0) != cudaSuccess || cudaEventCreate(&b.e1) != cudaSuccess) {
            fprintf(stderr, "dmuon bench comm: rank %d: no usable GPU (local rank %d of %d GPUs) or out of memory\n",
                    rank, lr, ndev);
            fail = 1;
        }
        int any = 0;
        MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) goto done;
        if (rank == 0) ncclGetUniqueId(&id);
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (ncclCommInitRank(&b.comm, n, id, rank) != ncclSuccess) {
            fprintf(stderr, "dmuon bench comm: rank %d: ncclCommInitRank failed\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
#else
        say(rank, "dmuon bench comm: the GPU backend is not in this build (needs CUDA and NCCL); use --backend cpu\n");
        goto done;
#endif
    } else {
        b.send = malloc(max_count * b.elt);
        b.recv = malloc(max_count * b.elt);
        fail = !b.send || !b.recv;
        int any = 0;
        MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            say(rank, "dmuon bench comm: out of memory for %lld-byte buffers\n", (long long)max_b);
            goto done;
        }
    }
    if (csv_path && rank == 0) {
        if (!(csv = dm_out_open(csv_path, &err))) {
            fprintf(stderr, "dmuon bench comm: %s\n", err.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(dm_out_file(csv), "# dmuon-comm-1 backend=%s ranks=%d dtype=%s\ncoll,bytes,count,ranks,time_us,algbw_GBps,busbw_GBps,wrong\n",
                backend, n, b.gpu ? "bf16" : "fp32");
    }
    say(rank, "# dmuon bench comm: %d ranks, backend %s (%s), %ld warm-up + %ld timed calls per size\n", n, backend,
        b.gpu ? "NCCL, bf16" : "MPI, float", warmup, iters);
    double fit_x[N_KINDS][64], fit_y[N_KINDS][64];
    int nfit[N_KINDS] = {0};
    long total_wrong = 0;
    for (int ki = 0; ki < N_KINDS; ki++) {
        dm_op_kind k = kinds[ki];
        say(rank, "#\n# %-14s %12s %12s %10s %10s %10s %7s\n", dm_op_kind_name(k), "size(B)", "count(elts)", "time(us)",
            "algbw(GB/s)", "busbw(GB/s)", "#wrong");
        for (int64_t bytes = min_b; bytes <= max_b; bytes *= factor) {
            size_t count = (size_t)(bytes / (int64_t)b.elt);
            count = count / (size_t)n * (size_t)n;
            if (!count) continue;
            double sz = (double)count * (double)b.elt, us = 0;
            long wrong = 0;
            int it = sz >= (1 << 28) ? (int)(iters < 5 ? iters : 5) : (int)iters;
            if (time_coll(&b, k, count, (int)warmup, it, &us) || fill_and_check(&b, k, count, &wrong)) {
                fprintf(stderr, "dmuon bench comm: rank %d: %s of %.0f bytes failed\n", rank, dm_op_kind_name(k), sz);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            /* the slowest rank's time, as nccl-tests reports */
            double mx = us;
            MPI_Allreduce(&us, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            double algbw = sz / (mx * 1e-6) / 1e9, busbw = algbw * collcost_busbw_factor(k, n);
            total_wrong += wrong;
            say(rank, "  %-14s %12.0f %12zu %10.2f %10.2f %10.2f %7ld\n", "", sz, count, mx, algbw, busbw, wrong);
            if (csv)
                fprintf(dm_out_file(csv), "%s,%.0f,%zu,%d,%.3f,%.4f,%.4f,%ld\n", dm_op_kind_name(k), sz, count, n, mx,
                        algbw, busbw, wrong);
            if (nfit[ki] < 64) {
                fit_x[ki][nfit[ki]] = sz * collcost_busbw_factor(k, n);
                fit_y[ki][nfit[ki]++] = mx;
            }
        }
    }
    /* time = latency + bus_bytes / bus_bandwidth, least squares over the sizes */
    say(rank, "#\n# fit: time_us = latency_us + bus_bytes / bus_Bps (GSL least squares over the sizes above)\n");
    say(rank, "# %-14s %12s %14s %8s\n", "collective", "latency_us", "bus_GBps", "points");
    for (int ki = 0; ki < N_KINDS && n > 1; ki++) {
        double c0, c1, cov00, cov01, cov11, sumsq;
        if (nfit[ki] < 2) continue;
        gsl_fit_linear(fit_x[ki], 1, fit_y[ki], 1, (size_t)nfit[ki], &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
        say(rank, "  %-14s %12.2f %14.2f %8d\n", dm_op_kind_name(kinds[ki]), c0, c1 > 0 ? 1e-3 / c1 : INFINITY, nfit[ki]);
    }
    say(rank, "# %ld wrong elements in total\n", total_wrong);
    if (csv) {
        if (dm_out_commit(csv, &err) < 0) fprintf(stderr, "dmuon bench comm: %s\n", err.msg), total_wrong = -1;
        csv = NULL;
    }
    status = total_wrong == 0 ? 0 : 1;
done:
    dm_out_abort(csv);
#if BENCH_GPU
    if (b.gpu) {
        if (b.comm) ncclCommDestroy(b.comm);
        cudaFree(b.send);
        cudaFree(b.recv);
        b.send = b.recv = NULL;
    }
#endif
    if (!b.gpu) free(b.send), free(b.recv);
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
