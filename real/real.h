/* real.h: the real executor: runs a step program (program.h) on MPI ranks with the proxy
 * workload of DESIGN.md. Backends: CPU (MPI collectives, reference kernels from ns_ref.h) and
 * GPU (NCCL, CUDA streams, cuBLAS, ns_cuda.h kernels; real_gpu.c).
 *
 * What each op does to data (the executor's reading of the program contract):
 *   forward  (params P, or every matrix of `layer` when P is empty): for each p, with this
 *            rank's tokens X_p (T x in) and targets Y_p (T x out): R_p = X_p W_p^T - Y_p and
 *            loss_p = ||R_p||^2 / (2 N out), N = tokens over all ranks. 1-D params: R = X*w - Y.
 *   backward (same params): G_p = R_p^T X_p / (N out) (the weight gradient), plus the input
 *            gradient R_p W_p (computed for its cost, then discarded).
 *   all-reduce, reduce (root), reduce-scatter: sum of the gradients of P over the group.
 *   broadcast (root): the weights of P from the root.
 *   all-gather: gradients when some member consumes a gradient of P (ns, muon-update, adamw)
 *            after it in its list (muon-fsdp), otherwise weights (adamw/ZeRO, muon-rr).
 *   Buffers of a collective: the params of P concatenated in list order (float elements);
 *   reduce-scatter/all-gather split it into |group| equal shards (the last padded), member i
 *   (in ascending rank order) holding shard i.
 *   ns:      Muon momentum (buf = mu buf + g; u = g + mu buf) and NS(u) with op.algo, for every
 *            param of P; needs the param's fully reduced gradient on this rank.
 *   muon-update: W = W (1 - lr wd) - lr scale NS(u), scale = scale_coef sqrt(max(rows, cols)).
 *   adamw:   AdamW on the part of each param of P whose reduced gradient this rank holds.
 *   wait:    nothing.
 * Sums are computed in ascending rank order on every rank (gather, then add), so all ranks get
 * bit-identical results and a one-rank run that accumulates the same token chunks in the same
 * order (grad_chunks = ranks) reproduces a distributed run bit for bit.
 *
 * A step is transactional: updates and optimizer state go to staged copies that are committed
 * at the end of the step only if no rank saw a non-finite gradient, local (after the backward)
 * or reduced (where ns and adamw read it); otherwise the step is skipped and the first bad
 * parameter named on every rank, the rank whose own gradient was bad first, else the rank
 * that saw it reduced. The GPU backend updates in place and rolls back from copies taken as
 * the step modifies them (same outcome). */
#ifndef DM_REAL_H
#define DM_REAL_H
#include <stdint.h>

#include <mpi.h>

#include "dm_error.h"
#include "model.h"
#include "ns_ref.h"
#include "program.h"

typedef enum { REAL_BACKEND_CPU = 0, REAL_BACKEND_GPU = 1 } real_backend;

typedef struct real_opts {
    real_backend backend;     /* default CPU */
    int64_t tokens;           /* tokens per rank per step (T); default 64 */
    int grad_chunks;          /* backward sums the weight gradient over this many token chunks
                                 in order (1 = one GEMM); default 1 */
    int64_t token_offset;     /* global index of this run's rank 0's first token; default 0 */
    uint64_t seed;            /* data, targets and initial weights; default 1 */
    double timeout_s;         /* give up on a collective after this long; default 300 */
    int input_grad;           /* compute the input-gradient GEMM (cost only); default 1 */
    const char *autotune_path;/* GPU: the kernels' autotune cache for NS plan configurations
                                 (borrowed); NULL: ns_config_default */
    ns_muon_params muon;      /* lr, momentum, ... and NS coefficients (borrowed pointer) */
    ns_adamw_params adamw;
    /* Fault injection for tests: at step inject_step (0-based, -1 off) rank inject_rank
     * writes NaN into its local gradient of matrix inject_param after the backward. */
    int inject_step, inject_rank;
    int64_t inject_param;
    /* ... and at step overflow_step (-1 off) every rank writes 3e38 (finite) into its local
     * gradient of matrix overflow_param: only the sum over 2 or more ranks overflows, so only
     * the check of the reduced gradient can see it. */
    int overflow_step;
    int64_t overflow_param;
    /* ... and at step stall_step (-1 off) rank stall_rank sleeps stall_s seconds after the
     * step's barrier, before its first op: a peer that stops answering (tests --timeout). */
    int stall_step, stall_rank;
    double stall_s;
} real_opts;

void real_opts_default(real_opts *o);

/* Per-step measurements on one rank (times in microseconds). */
typedef struct real_step_stats {
    double loss;              /* global loss (sum over params, all ranks' tokens) */
    double step_us;           /* wall time of the step (slowest rank after the final check) */
    double forward_us, backward_us, optimizer_us, ns_us;  /* busy time per kind, this rank */
    double comm_exposed_us;   /* time this rank had nothing to run while collectives were due */
    double opt_window_us;     /* from the end of the last gradient collective to the end of the
                                 last update on this rank (0 if it has none) */
    int skipped;              /* 1 when the step was skipped (non-finite gradient) */
    int64_t bad_param;        /* the first non-finite parameter, -1 if none */
    int bad_rank;
} real_step_stats;

typedef struct real_exec real_exec;

/* Set up an executor on the ranks of comm (its size must be prog->nranks; comm is duplicated).
 * Collective over comm. Every rank checks dm_program_hash against rank 0's first and all
 * refuse together on a mismatch. model and prog are borrowed and must outlive the executor;
 * prog's params are matrix ids of dm_model_matrices(model, -1). *out owned by the caller. */
int real_exec_create(const dm_model *model, const dm_program *prog, MPI_Comm comm,
                     const real_opts *o, real_exec **out, dm_err *err);

/* Run one step of the program. Collective. On a failure of this rank (a program the data
 * cannot follow, a timeout) returns -1: the caller should MPI_Abort, as other ranks may be
 * waiting in a collective. */
int real_exec_step(real_exec *ex, real_step_stats *st, dm_err *err);

/* The authoritative weights after the steps run so far: for every matrix the copy of the rank
 * that last updated it (replicated updates are checked to agree bit for bit). Collective; on
 * rank 0 *out receives n_matrices arrays (rows x cols floats) owned by the caller
 * (real_weights_free); other ranks get NULL. */
int real_exec_weights(real_exec *ex, float ***out, dm_err *err);
void real_weights_free(float **w, int64_t n);

/* One line on the backend's set-up (device, NCCL, NS plans), for the caller to print. */
const char *real_exec_info(const real_exec *ex);

int64_t real_exec_n_matrices(const real_exec *ex);
const dm_matrix *real_exec_matrices(const real_exec *ex); /* borrowed */
/* Name of matrix id for messages, e.g. "layers.3.mlp.up_proj.weight" (static buffer). */
const char *real_matrix_name(const real_exec *ex, int64_t id);

/* The last step's ops as a trace (trace.h, source "real"): starts and durations measured on
 * each rank from its step start (the ranks start a step together after a barrier); a
 * collective's traced start is the latest member's arrival, the same on every member, and
 * wait_us how long the op held its stream before that. Collective; on rank 0 *out receives
 * the trace (owned by the caller, dm_trace_free), elsewhere NULL. */
struct dm_trace;
int real_exec_trace(real_exec *ex, struct dm_trace **out, dm_err *err);

void real_exec_destroy(real_exec *ex); /* NULL ok; collective (frees communicators) */

/* Checkpoints (real_ckpt.c; both backends, one file format): save this rank's master weights,
 * momentum and AdamW state under DIR/step-K/ and then DIR/latest (every file atomically: temporary file, fsync,
 * rename); load the latest one, checking it is of this program, ranks, tokens and seed.
 * Collective; all ranks fail together. After a load the next step is the checkpoint's. */
int real_exec_save(real_exec *ex, const char *dir, dm_err *err);
int real_exec_load(real_exec *ex, const char *dir, dm_err *err);
int real_exec_steps_done(const real_exec *ex); /* steps run (or loaded) so far */

/* Weights files (`dmuon run --save-weights/--check-weights`): n matrices of rows x cols floats
 * (real_exec_weights' layout) written atomically; compare reads one and returns the largest
 * relative Frobenius error over matrices of w against it (*worst: that matrix, -1 if none), or
 * -1 with err naming the file and what did not match. Sizes are ex's (1-D params: rows). */
int real_weights_write(const char *path, const real_exec *ex, float *const *w, dm_err *err);
int real_weights_compare(const char *path, const real_exec *ex, float *const *w, double *max_rel, int64_t *worst,
                         dm_err *err);

/* `dmuon bench comm` (real_bench.c): argv[0] is "comm"; returns the exit status. Calls
 * MPI_Init if needed and MPI_Finalize. */
int real_bench_comm(int argc, char **argv);

#endif
