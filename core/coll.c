/* coll.c: the collective table (coll.h): one entry per kind with its counts, bus factor, NCCL
 * name, MPI calls, the CPU executor's exact form and the result check. */
#include "config.h"

#include "coll.h"
#include "cluster.h"
#include "costs.h" /* dm_hbm_pass_at_us */

#include <math.h>

#ifdef DM_HAVE_MPI
#include <mpi.h>
#endif

/* ---- MPI calls ----------------------------------------------------------------------------- */

#ifdef DM_HAVE_MPI
#define COMM (*(const MPI_Comm *)c)
#define REQ ((MPI_Request *)q)
static int comm_size(const void *c)
{
    int n = 1;
    MPI_Comm_size(COMM, &n);
    return n;
}
static int mpi_bcast(const float *s, float *r, size_t size, int root, const void *c, void *q)
{
    (void)r; /* in place, in send (MPI broadcasts one buffer) */
    return MPI_Ibcast((void *)s, (int)size, MPI_FLOAT, root, COMM, REQ);
}
static int mpi_reduce(const float *s, float *r, size_t size, int root, const void *c, void *q)
{
    return MPI_Ireduce(s, r, (int)size, MPI_FLOAT, MPI_SUM, root, COMM, REQ);
}
static int mpi_allreduce(const float *s, float *r, size_t size, int root, const void *c, void *q)
{
    (void)root;
    return MPI_Iallreduce(s, r, (int)size, MPI_FLOAT, MPI_SUM, COMM, REQ);
}
static int mpi_allgather(const float *s, float *r, size_t size, int root, const void *c, void *q)
{
    int per = (int)(size / (size_t)comm_size(c));
    (void)root;
    return MPI_Iallgather(s, per, MPI_FLOAT, r, per, MPI_FLOAT, COMM, REQ);
}
static int mpi_reducescatter(const float *s, float *r, size_t size, int root, const void *c, void *q)
{
    (void)root;
    return MPI_Ireduce_scatter_block(s, r, (int)(size / (size_t)comm_size(c)), MPI_FLOAT, MPI_SUM, COMM, REQ);
}
/* the exact forms of the summing kinds: gathers, summed by the caller in rank order */
static int exact_allreduce(const float *s, float *r, size_t size, int root, const void *c, void *q)
{
    (void)root;
    return MPI_Iallgather(s, (int)size, MPI_FLOAT, r, (int)size, MPI_FLOAT, COMM, REQ);
}
static int exact_reduce(const float *s, float *r, size_t size, int root, const void *c, void *q)
{
    return MPI_Igather(s, (int)size, MPI_FLOAT, r, (int)size, MPI_FLOAT, root, COMM, REQ);
}
static int exact_reducescatter(const float *s, float *r, size_t size, int root, const void *c, void *q)
{
    int per = (int)(size / (size_t)comm_size(c));
    (void)root;
    return MPI_Ialltoall(s, per, MPI_FLOAT, r, per, MPI_FLOAT, COMM, REQ);
}
#undef COMM
#undef REQ
#else
#define mpi_bcast NULL
#define mpi_reduce NULL
#define mpi_allreduce NULL
#define mpi_allgather NULL
#define mpi_reducescatter NULL
#define exact_allreduce NULL
#define exact_reduce NULL
#define exact_reducescatter NULL
#endif

/* ---- result checks ------------------------------------------------------------------------- */

double dm_coll_input(int q, size_t g) { return (double)(q + 1) + (double)(g % 7); }

static double sum_over(int n, size_t g)
{
    double s = 0;
    for (int q = 0; q < n; q++) s += dm_coll_input(q, g);
    return s;
}
static double expect_bcast(int r, int n, int root, size_t size, size_t i)
{
    (void)r, (void)n, (void)size;
    return dm_coll_input(root, i);
}
static double expect_reduce(int r, int n, int root, size_t size, size_t i)
{
    (void)size;
    return r == root ? sum_over(n, i) : NAN;
}
static double expect_allreduce(int r, int n, int root, size_t size, size_t i)
{
    (void)r, (void)root, (void)size;
    return sum_over(n, i);
}
static double expect_allgather(int r, int n, int root, size_t size, size_t i)
{
    (void)r, (void)root;
    return dm_coll_input((int)(i / (size / (size_t)n)), i);
}
static double expect_reducescatter(int r, int n, int root, size_t size, size_t i)
{
    (void)root;
    return sum_over(n, (size_t)r * (size / (size_t)n) + i);
}

/* ---- the table ----------------------------------------------------------------------------- */

#define ENTRY(k, nc, mc, root, sum, sd, rd, mul, sub, ex, fm, fe, chk)                                            \
    {.kind = k, .nccl_name = nc, .mpi_name = mc, .rooted = root, .sums = sum, .send_div = sd, .recv_div = rd,      \
     .bus_mul = mul, .bus_sub = sub, .exact = ex, .mpi = fm, .mpi_exact = fe, .expect = chk}
/* send_div/recv_div: 1 the whole size, 0 size / n; busbw factors 1, 2(n-1)/n, (n-1)/n */
static const dm_coll table[] = {
    ENTRY(DM_OP_BROADCAST, "ncclBroadcast", "MPI_Ibcast", 1, 0, 1, 1, 1, 0, DM_COLL_EXACT_NATIVE, mpi_bcast,
          mpi_bcast, expect_bcast),
    ENTRY(DM_OP_REDUCE, "ncclReduce", "MPI_Ireduce", 1, 1, 1, 1, 1, 0, DM_COLL_EXACT_GATHER, mpi_reduce,
          exact_reduce, expect_reduce),
    ENTRY(DM_OP_ALLREDUCE, "ncclAllReduce", "MPI_Iallreduce", 0, 1, 1, 1, 2, 1, DM_COLL_EXACT_ALLGATHER,
          mpi_allreduce, exact_allreduce, expect_allreduce),
    ENTRY(DM_OP_ALLGATHER, "ncclAllGather", "MPI_Iallgather", 0, 0, 0, 1, 1, 1, DM_COLL_EXACT_NATIVE, mpi_allgather,
          mpi_allgather, expect_allgather),
    ENTRY(DM_OP_REDUCESCATTER, "ncclReduceScatter", "MPI_Ireduce_scatter_block", 0, 1, 1, 0, 1, 1,
          DM_COLL_EXACT_ALLTOALL, mpi_reducescatter, exact_reducescatter, expect_reducescatter),
};
#undef ENTRY

const dm_coll *dm_coll_of(dm_op_kind kind)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].kind == kind) return &table[i];
    return NULL;
}

double dm_coll_busbw_factor(const dm_coll *c, int n)
{
    return n <= 1 ? 0 : c->bus_mul * ((double)n - c->bus_sub) / (double)n;
}

/* div 0 means "divided by n" (the split side), else the divisor itself (1) */
static size_t split(size_t size, int div, int n) { return div ? size / (size_t)div : size / (size_t)n; }

size_t dm_coll_send_count(const dm_coll *c, size_t size, int n) { return split(size, c->send_div, n); }
size_t dm_coll_recv_count(const dm_coll *c, size_t size, int n) { return split(size, c->recv_div, n); }

size_t dm_coll_exact_recv(const dm_coll *c, size_t size, int n, int me, int root)
{
    switch (c->exact) {
    case DM_COLL_EXACT_ALLGATHER: return (size_t)n * size;
    case DM_COLL_EXACT_GATHER: return me == root ? (size_t)n * size : 0;
    case DM_COLL_EXACT_ALLTOALL: return size;
    default: return c->kind == DM_OP_BROADCAST ? 0 : dm_coll_recv_count(c, size, n);
    }
}

size_t dm_coll_input_offset(const dm_coll *c, int q, int n, size_t size)
{
    return c->kind == DM_OP_ALLGATHER ? (size_t)q * (size / (size_t)n) : 0;
}

double dm_coll_staging_bytes(dm_op_kind kind, int staged, double bytes, int n)
{
    if (n < 1) n = 1;
    if (!staged) return 0;
    switch (kind) {
    case DM_OP_REDUCESCATTER: return 2.0 * (bytes + bytes / n);
    case DM_OP_ALLGATHER:
    case DM_OP_BROADCAST: return 2.0 * bytes;
    case DM_OP_REDUCE:
    case DM_OP_ALLREDUCE: return 4.0 * bytes;
    default: return 0;
    }
}

double dm_coll_staging_us(const struct dm_cluster *c, dm_op_kind kind, int staged, double bytes, int n_params, int n)
{
    return dm_hbm_pass_at_us(c->gpu, c->staging_efficiency, c->staging_launch_us,
                             dm_coll_staging_copies(kind, staged, n_params, n), dm_coll_staging_bytes(kind, staged, bytes, n));
}

int dm_coll_staging_copies(dm_op_kind kind, int staged, int n_params, int n)
{
    if (!staged) return 0;
    switch (kind) {
    case DM_OP_REDUCESCATTER:
    case DM_OP_REDUCE:
    case DM_OP_ALLREDUCE: return 2 * n_params;
    case DM_OP_ALLGATHER: return n_params * (n > 1 ? 2 : 1);
    case DM_OP_BROADCAST: return n_params;
    default: return 0;
    }
}
