/* real_bench.c: `dmuon bench comm` (real.h), the collective benchmark in nccl-tests' style: every
 * collective of the table (core/coll.h: counts, bus factor, NCCL and MPI calls, result check)
 * over sizes from min to max bytes on all ranks, through NCCL on GPUs (CUDA events on the
 * stream, real_nccl.h's bootstrap and wait: real_bench_gpu.h's calls, from the GPU plug-in of
 * gpu_api.h) or MPI on CPUs (wall clock). Per size: warm-up, a
 * timed loop, then a separate correctness pass (the table's rank-dependent inputs, every output
 * element checked: #wrong). Every wait polls with the timeout, as the executor's. A table for
 * people, a CSV for the cost model, and per collective a least-squares fit (GSL) of time =
 * latency + bus bytes / bus bandwidth, the form of core/collcost.h. bf16 elements on GPUs,
 * float on CPUs. Command-line parsing lives in cli/cmd_bench.c. */
#include "config.h"

#include <gsl/gsl_fit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "outfile.h"
#include "program.h"
#include "real.h"
#include "real_priv.h"

#include "gpu_api.h"
#include "real_bench_gpu.h"

#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
#define BENCH_GPU 1 /* the default backend: this build has a GPU plug-in with NCCL */
#else
#define BENCH_GPU 0
#endif

static const dm_op_kind kinds[] = {DM_OP_BROADCAST, DM_OP_REDUCE, DM_OP_ALLREDUCE, DM_OP_ALLGATHER,
                                   DM_OP_REDUCESCATTER};
#define N_KINDS 5

typedef struct bench {
    const real_bench_opts *o;
    MPI_Comm comm;
    int rank, n, gpu;
    size_t elt;
    void *send, *recv;        /* device (GPU) or host buffers of max_count elements */
    const real_bench_gpu_ops *g; /* GPUs: the plug-in's calls and their state */
    real_bench_gpu *gs;
} bench;

void real_bench_opts_default(real_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gpu = BENCH_GPU;
    o->min_bytes = 1024;
    o->max_bytes = (int64_t)1 << 30;
    o->step_factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->timeout_s = 300;
}

/* MPI: poll the request like the CPU executor, giving up after the timeout. */
static int mpi_wait(bench *b, MPI_Request *req, const char *what, dm_err *err)
{
    double t0 = dm_clock_us();
    for (;;) {
        int flag = 0;
        MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (flag) return 0;
        if (dm_clock_us() - t0 > b->o->timeout_s * 1e6)
            return dm_err_set(err, "rank %d: no progress for %.0f s (--timeout) waiting for %s", b->rank,
                              b->o->timeout_s, what);
        struct timespec nap = {0, 20000};
        nanosleep(&nap, NULL);
    }
}

/* One call of collective c of `size` elements, root 0 (enqueued on GPUs; done on CPUs). */
static int launch(bench *b, const dm_coll *c, size_t size, dm_err *err)
{
    if (b->gpu) return b->g->launch(b->gs, c, b->send, b->recv, size, err);
    MPI_Request req;
    int r = c->mpi(b->send, b->recv, size, 0, &b->comm, &req);
    if (r != MPI_SUCCESS) return dm_err_set(err, "rank %d: %s: MPI error %d", b->rank, c->mpi_name, r);
    return mpi_wait(b, &req, c->mpi_name, err);
}

/* GPUs: wait for what the stream holds (polling NCCL and the timeout). */
static int gpu_done(bench *b, const char *what, dm_err *err)
{
    return b->gpu ? b->g->done(b->gs, b->o->timeout_s, what, NULL, err) : 0;
}

/* Mean time per call in microseconds over iters calls (after warmup). */
static int time_coll(bench *b, const dm_coll *c, size_t size, int iters, double *us, dm_err *err)
{
    for (int i = 0; i < b->o->warmup; i++)
        if (launch(b, c, size, err)) return -1;
    if (gpu_done(b, "the warm-up", err)) return -1;
    MPI_Barrier(b->comm);
    if (b->gpu) {
        b->g->mark(b->gs);
        for (int i = 0; i < iters; i++)
            if (launch(b, c, size, err)) return -1;
        if (b->g->done(b->gs, b->o->timeout_s, "the timed calls", us, err)) return -1;
        *us /= iters;
        return 0;
    }
    double t0 = dm_clock_us();
    for (int i = 0; i < iters; i++)
        if (launch(b, c, size, err)) return -1;
    *us = (dm_clock_us() - t0) / iters;
    return 0;
}

/* The correctness pass: the table's inputs in, every output element against its check. */
static int fill_and_check(bench *b, const dm_coll *c, size_t size, long *wrong, dm_err *err)
{
    size_t nin = dm_coll_send_count(c, size, b->n), nout = dm_coll_recv_count(c, size, b->n);
    size_t off = dm_coll_input_offset(c, b->rank, b->n, size);
    float *h = malloc((size ? size : 1) * sizeof *h);
    if (!h) return dm_err_set(err, "rank %d: out of memory", b->rank);
    for (size_t i = 0; i < nin; i++) h[i] = (float)dm_coll_input(b->rank, off + i);
    if (c->kind == DM_OP_BROADCAST && b->rank != 0) /* the result must come from the root */
        memset(h, 0, nin * sizeof *h);
    if (b->gpu) {
        uint16_t *hb = (uint16_t *)h; /* float -> bf16 by truncation: exact for small integers */
        for (size_t i = 0; i < nin; i++) {
            uint32_t u;
            memcpy(&u, &h[i], 4);
            hb[i] = (uint16_t)(u >> 16);
        }
        if (b->g->copy(b->send, hb, nin * 2, 1) || b->g->zero(b->recv, size * 2)) {
            free(h);
            return dm_err_set(err, "rank %d: a copy to the GPU failed", b->rank);
        }
    } else {
        memcpy(b->send, h, nin * sizeof *h);
        memset(b->recv, 0, size * sizeof *h);
    }
    if (launch(b, c, size, err) || gpu_done(b, "the correctness pass", err)) {
        free(h);
        return -1;
    }
    /* MPI broadcasts in place; NCCL's (out of place here) lands in recv */
    const void *res = c->kind == DM_OP_BROADCAST && !b->gpu ? b->send : b->recv;
    if (b->gpu) {
        uint16_t *hb = (uint16_t *)h;
        if (b->g->copy(hb, res, nout * 2, 0)) {
            free(h);
            return dm_err_set(err, "rank %d: a copy from the GPU failed", b->rank);
        }
        for (size_t i = nout; i-- > 0;) { /* widen in place, from the end */
            uint32_t u = (uint32_t)hb[i] << 16;
            memcpy(&h[i], &u, 4);
        }
        res = h;
    }
    const float *o = res;
    long bad = 0;
    for (size_t i = 0; i < nout; i++) {
        double want = c->expect(b->rank, b->n, 0, size, i);
        if (!isnan(want) && o[i] != (float)want) bad++;
    }
    free(h);
    MPI_Allreduce(&bad, wrong, 1, MPI_LONG, MPI_SUM, b->comm);
    return 0;
}

/* Buffers and (GPUs) the device, NCCL and the stream; -1 on this rank's failure. */
static int bench_setup(bench *b, size_t max_count, dm_err *err)
{
    if (!b->gpu) {
        b->send = malloc(max_count * b->elt);
        b->recv = malloc(max_count * b->elt);
        if (!b->send || !b->recv)
            return dm_err_set(err, "rank %d: out of memory for %zu-byte buffers", b->rank, max_count * b->elt);
        return 0;
    }
    const dm_gpu_api *api = dm_gpu_side(err);
    if (!api) return -1;
    if (!(b->g = api->bench_comm))
        return dm_err_set(err, "the GPU side of this build has no NCCL (configure found none); use --backend cpu");
    return b->g->open(b->comm, b->rank, max_count * b->elt, &b->gs, &b->send, &b->recv, err);
}

static void bench_free(bench *b)
{
    if (b->gpu) {
        if (b->g) b->g->close(b->gs, b->send, b->recv);
        return;
    }
    free(b->send);
    free(b->recv);
}

int real_bench_comm(const real_bench_opts *o, FILE *out, dm_err *err)
{
    bench b;
    memset(&b, 0, sizeof b);
    b.o = o;
    b.comm = MPI_COMM_WORLD;
    MPI_Comm_rank(b.comm, &b.rank);
    MPI_Comm_size(b.comm, &b.n);
    b.gpu = o->gpu;
    b.elt = b.gpu ? 2 : 4;
    int n = b.n, rank = b.rank, status = -1;
    dm_out *csv = NULL;
    size_t max_count = (size_t)(o->max_bytes / (int64_t)b.elt);
    max_count = (max_count + (size_t)n - 1) / (size_t)n * (size_t)n;
    if (real_agree(b.comm, bench_setup(&b, max_count, err), err) < 0) goto done;
    if (b.gpu && real_agree(b.comm, b.g->world(b.gs, b.comm, err), err) < 0) goto done;
    int bad = 0;
    if (o->csv_path && rank == 0) {
        if (!(csv = dm_out_open(o->csv_path, err))) bad = 1;
        else
            fprintf(dm_out_file(csv), "# dmuon-comm-1 backend=%s ranks=%d dtype=%s\n"
                    "coll,bytes,count,ranks,time_us,algbw_GBps,busbw_GBps,wrong\n", b.gpu ? "gpu" : "cpu", n,
                    b.gpu ? "bf16" : "fp32");
    }
    if (real_agree(b.comm, bad ? -1 : 0, err) < 0) goto done;
    if (rank == 0)
        fprintf(out, "# dmuon bench comm: %d rank%s, backend %s (%s), %ld warm-up + %ld timed calls per size\n", n,
                n == 1 ? "" : "s",
                b.gpu ? "gpu" : "cpu", b.gpu ? "NCCL, bf16" : "MPI, float", o->warmup, o->iters);
    double fit_x[N_KINDS][64], fit_y[N_KINDS][64];
    int nfit[N_KINDS] = {0};
    long total_wrong = 0;
    for (int ki = 0; ki < N_KINDS; ki++) {
        const dm_coll *c = dm_coll_of(kinds[ki]);
        if (rank == 0)
            fprintf(out, "#\n# %-14s %12s %12s %10s %10s %10s %7s\n", dm_op_kind_name(c->kind), "size(B)",
                    "count(elts)", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
        for (int64_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= o->step_factor) {
            size_t count = (size_t)(bytes / (int64_t)b.elt);
            count = count / (size_t)n * (size_t)n;
            if (!count) continue;
            double sz = (double)count * (double)b.elt, us = 0;
            long wrong = 0;
            int it = sz >= (1 << 28) ? (int)(o->iters < 5 ? o->iters : 5) : (int)o->iters;
            if (time_coll(&b, c, count, it, &us, err) || fill_and_check(&b, c, count, &wrong, err)) {
                status = -2; /* this rank's failure: the caller aborts (the others may be waiting) */
                goto done;
            }
            /* the slowest rank's time, as nccl-tests reports */
            double mx = us, f = dm_coll_busbw_factor(c, n);
            MPI_Allreduce(&us, &mx, 1, MPI_DOUBLE, MPI_MAX, b.comm);
            double algbw = sz / (mx * 1e-6) / 1e9, busbw = algbw * f;
            total_wrong += wrong;
            if (rank == 0) fprintf(out, "  %-14s %12.0f %12zu %10.2f %10.2f %10.2f %7ld\n", "", sz, count, mx, algbw,
                                   busbw, wrong);
            if (csv)
                fprintf(dm_out_file(csv), "%s,%.0f,%zu,%d,%.3f,%.4f,%.4f,%ld\n", dm_op_kind_name(c->kind), sz, count,
                        n, mx, algbw, busbw, wrong);
            if (nfit[ki] < 64) {
                fit_x[ki][nfit[ki]] = sz * f;
                fit_y[ki][nfit[ki]++] = mx;
            }
        }
    }
    if (rank == 0) {
        /* time = latency + bus_bytes / bus_bandwidth, least squares over the sizes */
        fprintf(out, "#\n# fit: time_us = latency_us + bus_bytes / bus_Bps (GSL least squares over the sizes above)\n");
        fprintf(out, "# %-14s %12s %14s %8s\n", "collective", "latency_us", "bus_GBps", "points");
        for (int ki = 0; ki < N_KINDS && n > 1; ki++) {
            double c0, c1, cov00, cov01, cov11, sumsq;
            if (nfit[ki] < 2) continue;
            gsl_fit_linear(fit_x[ki], 1, fit_y[ki], 1, (size_t)nfit[ki], &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
            fprintf(out, "  %-14s %12.2f %14.2f %8d\n", dm_op_kind_name(kinds[ki]), c0, c1 > 0 ? 1e-3 / c1 : INFINITY,
                    nfit[ki]);
            if (c0 < 0 || !(c1 > 0)) /* a line through noisy small sizes: not a latency a model can use */
                fprintf(stderr, "dmuon bench comm: warning: the %s fit has a %s (%.2f us, %.3g us per byte): the times do "
                        "not follow latency + bytes / bandwidth over these sizes (noise, or too few large sizes); "
                        "use a wider --min-bytes/--max-bytes range or more --iters\n",
                        dm_op_kind_name(kinds[ki]), c0 < 0 ? "negative latency" : "non-positive slope", c0, c1);
        }
        fprintf(out, "# %ld wrong elements in total\n", total_wrong);
        fflush(out);
    }
    bad = 0;
    if (csv) {
        dm_out *cf = csv;
        csv = NULL;
        if (dm_out_commit(cf, err) < 0) bad = 1;
    }
    if (real_agree(b.comm, bad ? -1 : 0, err) < 0) goto done;
    status = total_wrong == 0 ? 0 : 1;
done:
    dm_out_abort(csv);
    bench_free(&b);
    return status;
}
