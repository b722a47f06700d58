/* real_nccl.h: the NCCL calls of coll.h's collectives, the one NCCL bootstrap and the one wait of
 * the executor's GPU side, shared by the GPU backend (real_gpu.c) and `dmuon bench comm`'s GPU
 * part (real_bench_gpu.c): one GPU per local rank, a
 * world communicator from rank 0's unique id sent through MPI, and a wait that polls the event,
 * every communicator's asynchronous error and a timeout, aborting every communicator on a
 * failure (the caller then aborts the MPI job: STYLE habit 8). Only with CUDA and NCCL. */
#ifndef DM_REAL_NCCL_H
#define DM_REAL_NCCL_H
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "coll.h"
#include "dm_error.h"

/* Collective c (coll.h's table entry) as its NCCL call on device buffers: `size` elements of
 * dtype (coll.h's convention; in place when send == recv where NCCL allows it), root an index in
 * comm, enqueued on the stream. Returns the ncclResult_t (ncclSuccess is 0). */
int real_nccl_call(const dm_coll *c, const void *send, void *recv, size_t size, dm_dtype dtype, int root,
                   ncclComm_t comm, cudaStream_t stream);

/* This rank's GPU: the one of its index among its node's ranks (made current). -1 with the
 * reason: no usable device ("--backend gpu: no usable CUDA device on this node"), or more ranks
 * on the node than GPUs. Every rank of comm calls it (it counts the node's ranks). */
int real_gpu_select(MPI_Comm comm, int *device, dm_err *err);

/* The world communicator over comm's ranks. Collective over comm (rank 0's ncclGetUniqueId is
 * broadcast; a rank that cannot make one sends zeros and every rank then fails in the init). */
int real_nccl_world(MPI_Comm comm, ncclComm_t *world, dm_err *err);

/* Abort every non-NULL communicator of comms[0..n) and set it to NULL. */
void real_nccl_abort(ncclComm_t *comms, int n);

/* Wait until ev has happened: polls the event, the asynchronous error of every non-NULL
 * communicator of comms[0..n) and the timeout (timeout_s > 0); on a failure aborts all of
 * comms and returns -1 with "WHO: ...: WHAT ..." (who: "rank 0: step 3"; what: what is awaited,
 * e.g. "the end of the step"). */
int real_nccl_wait(cudaEvent_t ev, ncclComm_t *comms, int n, double timeout_s, const char *who, const char *what,
                   dm_err *err);

#endif
