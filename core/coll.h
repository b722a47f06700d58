/* coll.h: the one table of collective kinds, after nccl-tests' testColl. Per kind: its name, the
 * byte-count convention (program.h's nccl-tests "size" and the elements each rank sends and
 * receives), the bus-bandwidth factor, the NCCL call's name, the MPI call, the form the CPU executor
 * runs to sum in rank order, and the result check (the value every output element must have for
 * the table's rank-dependent inputs). The cost model (collcost_busbw_factor), `dmuon bench comm`
 * and both executor backends read it: a new collective kind is an entry here (and its op kind).
 *
 * Conventions: `size` is the collective's size in elements (program.h: bytes / element size;
 * all-gather: the gathered output; reduce-scatter: the input before scattering), a multiple of
 * the rank count n where the collective splits it. Ranks and roots are indices in the
 * communicator (0..n-1). The calls take the communicator by address (an MPI_Comm variable, a
 * ncclComm_t) and the CUDA stream as void *, so this header needs neither mpi.h nor nccl.h;
 * the MPI ones are NULL in a build without MPI. The NCCL calls themselves live with the GPU
 * backend (real_nccl.h's real_nccl_call, by kind), so that this table and everything that reads
 * it need no CUDA library. */
#ifndef DM_COLL_H
#define DM_COLL_H
#include <stddef.h>

#include "program.h"

/* How the CPU executor gets the sum in ascending rank order on every member (bit-identical
 * results on every rank count): the native call when it moves data only, else a gather of every
 * member's contribution, summed by the member itself. */
typedef enum {
    DM_COLL_EXACT_NATIVE,    /* the MPI call itself (broadcast, all-gather) */
    DM_COLL_EXACT_ALLGATHER, /* every member gathers every member's whole buffer (all-reduce) */
    DM_COLL_EXACT_GATHER,    /* the root gathers every member's whole buffer (reduce) */
    DM_COLL_EXACT_ALLTOALL   /* member k gathers every member's shard k (reduce-scatter) */
} dm_coll_exact;

typedef struct dm_coll {
    dm_op_kind kind;
    const char *nccl_name, *mpi_name; /* "ncclAllReduce", "MPI_Iallreduce" */
    int rooted;                       /* broadcast, reduce */
    int sums;                         /* reduce, all-reduce, reduce-scatter */
    int send_div, recv_div;           /* a rank sends / receives: 1 the whole size, 0 size / n */
    double bus_mul, bus_sub;          /* busbw = algbw x bus_mul (n - bus_sub) / n (nccl-tests) */
    dm_coll_exact exact;
    /* The MPI call on host floats, non-blocking: posts and fills *(MPI_Request *)req. Returns the
     * MPI error code (MPI_SUCCESS is 0). */
    int (*mpi)(const float *send, float *recv, size_t size, int root, const void *comm, void *req);
    /* The CPU executor's form (exact): posts it; recv holds dm_coll_exact_recv elements. */
    int (*mpi_exact)(const float *send, float *recv, size_t size, int root, const void *comm, void *req);
    /* Output element i on rank r when every rank q's input element j is dm_coll_input(q, j +
     * dm_coll_input_offset(c, q, n, size)); NAN where rank r has no output (reduce off the root). */
    double (*expect)(int r, int n, int root, size_t size, size_t i);
} dm_coll;

/* The entry of a collective kind; NULL for a kind that is not one. */
const dm_coll *dm_coll_of(dm_op_kind kind);

/* nccl-tests' bus-bandwidth factor (busbw = algbw x factor); 0 for one rank. */
double dm_coll_busbw_factor(const dm_coll *c, int n);
/* HBM bytes the GPU executor copies on the GPU itself around the NCCL call of a collective of
 * `bytes` over n ranks that it stages (dm_op.staged, core/arena.h: packed into its collective
 * buffer; read and write counted; the busiest member's): a reduce-scatter packs the whole
 * tensor and unpacks its shard, an all-gather copies its shard in and the others' out, a
 * broadcast packs (root) or unpacks, a reduce or all-reduce packs and unpacks (root). 0 for an op
 * that runs in place on the arenas (staged 0: the arenas follow the program's buckets). The
 * simulator adds them to the collective at the HBM roofline. */
double dm_coll_staging_bytes(dm_op_kind kind, int staged, double bytes, int n);
/* The copies those are made of: one per parameter of the op each way it is copied (0 when not
 * staged). The executor copies an all-gather's others' pieces out one peer at a time (n - 1
 * copies per parameter): that loop is not carried to scale here (it would be one copy per
 * parameter in a gather kernel). */
int dm_coll_staging_copies(dm_op_kind kind, int staged, int n_params, int n);
/* Their time on cluster c's GPU: each copy's launch and the bytes at c's calibrated staging rate
 * (staging_launch_us, staging_efficiency of HBM bandwidth: fitted on collectives that ran with
 * no compute beside them, valid/calib.c) where it has one, else the HBM roofline with the
 * launch floor. The one rule of the simulator and the calibration. */
struct dm_cluster;
double dm_coll_staging_us(const struct dm_cluster *c, dm_op_kind kind, int staged, double bytes, int n_params, int n);
/* Elements a rank sends / receives in the native call. */
size_t dm_coll_send_count(const dm_coll *c, size_t size, int n);
size_t dm_coll_recv_count(const dm_coll *c, size_t size, int n);
/* Receive elements of the exact (CPU executor) form on member me: n x size (all-gather form,
 * the root of a gather), n x size/n (all-to-all), the native count otherwise (0 off the root). */
size_t dm_coll_exact_recv(const dm_coll *c, size_t size, int n, int me, int root);

/* The check's inputs: small integers, exact in bf16 and fp32 and in their sums over up to 16
 * ranks: rank q's element at global index g is (q + 1) + (g mod 7). A rank's input element j has
 * global index j plus its offset (all-gather: its shard's start; else 0). */
double dm_coll_input(int q, size_t g);
size_t dm_coll_input_offset(const dm_coll *c, int q, int n, size_t size);

#endif
