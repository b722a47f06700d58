/* real_nccl.c: the GPU side's NCCL calls of the collectives, its one NCCL bootstrap and wait (real_nccl.h). */
#include "config.h"

#include "real_nccl.h"

#include <string.h>
#include <time.h>

#include "real_priv.h"

int real_gpu_select(MPI_Comm comm, int *device, dm_err *err)
{
    int nlocal = 1, lr = real_local_rank(comm, &nlocal), rank = 0, ndev = 0;
    MPI_Comm_rank(comm, &rank);
    cudaError_t de = cudaGetDeviceCount(&ndev);
    if (de != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        return dm_err_set(err, "--backend gpu: no usable CUDA device on this node (%s); use --backend cpu",
                          de != cudaSuccess ? cudaGetErrorString(de) : "0 devices");
    }
    if (lr >= ndev)
        return dm_err_set(err, "--backend gpu: %d ranks on this node but only %d GPU(s): one rank per GPU (rank %d "
                          "is local rank %d)", nlocal, ndev, rank, lr);
    cudaError_t e = cudaSetDevice(lr);
    if (e != cudaSuccess) return dm_err_set(err, "rank %d: cudaSetDevice(%d): %s", rank, lr, cudaGetErrorString(e));
    *device = lr;
    return 0;
}

static ncclDataType_t nccl_type(dm_dtype t)
{
    return t == DM_DT_FP32 ? ncclFloat : t == DM_DT_FP16 ? ncclHalf : ncclBfloat16;
}

int real_nccl_call(const dm_coll *c, const void *s, void *r, size_t size, dm_dtype t, int root, ncclComm_t comm,
                   cudaStream_t st)
{
    int n = 1;
    ncclCommCount(comm, &n);
    switch (c->kind) {
    case DM_OP_BROADCAST: return (int)ncclBroadcast(s, r, size, nccl_type(t), root, comm, st);
    case DM_OP_REDUCE: return (int)ncclReduce(s, r, size, nccl_type(t), ncclSum, root, comm, st);
    case DM_OP_ALLREDUCE: return (int)ncclAllReduce(s, r, size, nccl_type(t), ncclSum, comm, st);
    case DM_OP_ALLGATHER: return (int)ncclAllGather(s, r, size / (size_t)n, nccl_type(t), comm, st);
    case DM_OP_REDUCESCATTER: return (int)ncclReduceScatter(s, r, size / (size_t)n, nccl_type(t), ncclSum, comm, st);
    default: return (int)ncclInvalidArgument;
    }
}

int real_nccl_world(MPI_Comm comm, ncclComm_t *world, dm_err *err)
{
    int rank = 0, n = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (rank == 0) r = ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    if (r != ncclSuccess) return dm_err_set(err, "rank %d: ncclGetUniqueId: %s", rank, ncclGetErrorString(r));
    r = ncclCommInitRank(world, n, id, rank);
    if (r != ncclSuccess) {
        *world = NULL;
        return dm_err_set(err, "rank %d: ncclCommInitRank: %s", rank, ncclGetErrorString(r));
    }
    return 0;
}

void real_nccl_abort(ncclComm_t *comms, int n)
{
    for (int i = 0; i < n; i++)
        if (comms[i]) ncclCommAbort(comms[i]), comms[i] = NULL;
}

static double now_s(void) { return dm_clock_us() * 1e-6; }

int real_nccl_wait(cudaEvent_t ev, ncclComm_t *comms, int n, double timeout_s, const char *who, const char *what,
                   dm_err *err)
{
    double t0 = now_s();
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotReady) {
            real_nccl_abort(comms, n);
            return dm_err_set(err, "%s: %s: %s", who, what, cudaGetErrorString(e));
        }
        for (int i = 0; i < n; i++) {
            ncclResult_t ar = ncclSuccess;
            if (comms[i] && ncclCommGetAsyncError(comms[i], &ar) == ncclSuccess && ar != ncclSuccess &&
                ar != ncclInProgress) {
                real_nccl_abort(comms, n);
                return dm_err_set(err, "%s: NCCL error while waiting for %s: %s", who, what, ncclGetErrorString(ar));
            }
        }
        if (timeout_s > 0 && now_s() - t0 > timeout_s) {
            real_nccl_abort(comms, n);
            return dm_err_set(err, "%s: no progress for %.0f s (--timeout) waiting for %s; communicators aborted", who,
                              timeout_s, what);
        }
        struct timespec nap = {0, 50000};
        nanosleep(&nap, NULL);
    }
}
