/* real.h: the real executor: runs a step program (program.h) on MPI ranks with the proxy
 * workload of DESIGN.md. One engine (real_exec.c: set-up checks, groups, the step frame, the
 * agreement, phases, traces, checkpoints) and two backends behind one table of operations
 * (real_priv.h): CPU (MPI collectives, the reference math of wk_ref.h and ns_ref.h; real_cpu.c)
 * and GPU (NCCL, CUDA streams, the work kernels of wk_cuda.h, ns_cuda.h kernels; real_gpu.c).
 *
 * What each op does to data (the executor's reading of the program contract):
 *   forward  (layer L; params P, which must be every matrix of L when given): the kernels of L's
 *            work (program.h's works[op.work], core/workload.h; an op without work runs the
 *            model's expansion of L at this run's tokens, and a work that is not that expansion
 *            is refused at set-up), bound by kernels/wk_plan.h: per slot one input activation
 *            X (T_s x width, a counter hash of global rows: q, k and v read one X, gate and up
 *            one X), per projection Y = X W^T and the least-squares residual R = Y - target
 *            (targets hashed on the fly), loss += |R|^2 / (2 N out) (N: the stream's rows over
 *            all ranks); attention products as batched GEMMs at the sequence length (cost only);
 *            MoE: the dispatch gathers each expert's balanced ceil(T top_k / E) rows, one batched
 *            GEMM per expert entry; embeddings gather their token ids' rows; 1-D parameters and
 *            tables scale their slot elementwise (R = x w - target). R is kept for backward.
 *   backward (same): per projection G = R^T X / (N out) (the weight gradient) and the input
 *            gradient R W (computed for its cost, then discarded); the recomputed scores and
 *            the four gradient products of attention (cost only); per 1-D parameter or table
 *            the reduction over the tokens; per embedding its gradient zeroed and the tokens'
 *            rows added (onto a tied head's part when a later layer wrote one); the combine
 *            of the routed rows (cost only).
 *   all-reduce, reduce (root), reduce-scatter: sum of the gradients of P over the group.
 *   broadcast (root): the weights of P from the root.
 *   all-gather: what its payload says (program.h): gradients (muon-fsdp) or weights (adamw/ZeRO,
 *            muon-rr).
 *   Buffers of a collective: the params of P concatenated in list order (float elements);
 *   reduce-scatter/all-gather split it into |group| equal shards (the last padded), member i
 *   (in ascending rank order) holding shard i.
 *   ns:      Muon momentum (buf = mu buf + g; u = g + mu buf) and NS(u) with op.algo and op.iters
 *            iterations (the coefficient set must have as many), for every param of P; needs the
 *            param's fully reduced gradient on this rank.
 *   muon-update: W = W (1 - lr wd) - lr scale NS(u), scale = scale_coef sqrt(max(rows, cols)).
 *   adamw:   AdamW on the part of each param of P whose reduced gradient this rank holds.
 *   wait:    nothing.
 * Sums are computed in ascending rank order on every rank (gather, then add), so all ranks get
 * bit-identical results and a one-rank run that accumulates the same token chunks in the same
 * order (grad_chunks = ranks) reproduces a distributed run bit for bit (CPU backend; except a
 * tied head's gradient, which sums its two parts in another order).
 *
 * A step is transactional: updates and optimizer state go to staged copies (CPU) or second
 * buffers (GPU, ping-pong) that are committed at the end of the step only if no rank saw a
 * non-finite gradient, local (after the backward) or reduced (where ns and adamw read it);
 * otherwise the step is skipped and the first bad parameter named on every rank, the rank whose
 * own gradient was bad first, else the rank that saw it reduced. */
#ifndef DM_REAL_H
#define DM_REAL_H
#include <stdint.h>
#include <stdio.h>

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
    int grad_chunk_group;     /* > 1: every weight gradient sums its chunks in groups of this
                                 many first, then the groups in order (the order of
                                 HSDP's two-stage reduce: a one-rank run with grad_chunks = ranks
                                 and this = the shard size reproduces it); default 0 (plain) */
    int64_t token_offset;     /* global index of this run's rank 0's first token; default 0 */
    uint64_t seed;            /* data, targets and initial weights; default 1 */
    double timeout_s;         /* give up on a collective after this long; default 300 */
    int input_grad;           /* compute the input-gradient GEMM (cost only); default 1 */
    const char *autotune_path;/* GPU: the kernels' autotune cache for NS plan configurations
                                 (borrowed); NULL or "": ns_config_default; default the source
                                 tree's traces/kernels/autotune_h200.tsv when it is there */
    ns_muon_params muon;      /* lr, momentum, ... and NS coefficients (borrowed pointer; NULL:
                                 ns_coeffs_default) */
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

/* Per-step measurements on one rank (times in microseconds), cut by the phase ruler
 * (core/phases.h: dm_phases_rank over this rank's ops) as the simulator's and compare's. */
typedef struct real_step_stats {
    double loss;              /* global loss (sum over params, all ranks' tokens) */
    double step_us;           /* the step: CPU: wall time to the end-of-step agreement; GPU: the
                                 compute stream's events from the step's start to its end */
    double forward_us, backward_us, optimizer_us, ns_us;  /* busy time per kind, this rank */
    double exposed_comm_us;   /* step minus the union of the compute ops' intervals */
    double opt_window_us;     /* from the end of the last gradient collective to the end of the
                                 last optimizer op on this rank (0 if it has none) */
    int skipped;              /* 1 when the step was skipped (non-finite gradient) */
    int64_t bad_param;        /* the first non-finite parameter, -1 if none */
    int bad_rank;
} real_step_stats;

typedef struct real_exec real_exec;

/* Set up an executor on the ranks of comm (its size must be prog->nranks; comm is duplicated).
 * Collective over comm. Before anything the program says happens, every rank validates it
 * (dm_program_validate), checks its data hazards, NS iterations (against the coefficient set)
 * and the fault-injection targets (ranks and params that exist), and dm_program_hash against
 * rank 0's; all refuse together, every rank with the lowest failing rank's reason. model and
 * prog are borrowed and must outlive the executor; prog's params are matrix ids of
 * dm_model_matrices(model, -1). *out owned by the caller. */
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

/* Device memory of the run, the largest over the ranks (GPU backend; zeros on the CPU): the
 * estimate it was sized by (real_gpu_mem_estimate), the device's used memory at its peak
 * (cudaMemGetInfo: total minus the lowest free memory seen after the buffers and after each
 * step, the CUDA context included) and what this run added to it (the free memory before the
 * buffers minus that lowest). Collective. */
typedef struct real_mem_report {
    double est_bytes, peak_used_bytes, run_bytes;
} real_mem_report;
int real_exec_memory(real_exec *ex, real_mem_report *out);

/* The mean forward and backward op time per layer of stack `stack` (model.h's index) over this
 * rank's ops of the last step (us), and how many layers had both. -1 (err) when none had. */
int real_exec_layer_means(const real_exec *ex, int stack, double *fwd_us, double *bwd_us, int *n_layers, dm_err *err);
/* The decoder stack a per-layer comparison means: the stack named "layers" (or ending in
 * ".layers"), else the one with the most layers on the main stream. */
int real_main_stack(const dm_model *m);

/* One line on the backend's set-up (device, NCCL, NS plans), for the caller to print. */
const char *real_exec_info(const real_exec *ex);

int64_t real_exec_n_matrices(const real_exec *ex);
const dm_matrix *real_exec_matrices(const real_exec *ex); /* borrowed */
/* Name of matrix id for messages, e.g. "layers.3.mlp.up_proj.weight" (static buffer). */
const char *real_matrix_name(const real_exec *ex, int64_t id);

/* The last step's ops as a trace (trace.h, source "real-gpu" or "real-cpu"): starts and durations measured on
 * each rank from its step start (the ranks start a step together after a barrier); a
 * collective's traced start is the latest member's arrival, the same on every member, and
 * wait_us how long the op held its stream before that. Collective; on rank 0 *out receives
 * the trace (owned by the caller, dm_trace_free), elsewhere NULL. */
struct dm_trace;
int real_exec_trace(real_exec *ex, struct dm_trace **out, dm_err *err);

void real_exec_destroy(real_exec *ex); /* NULL ok; collective (frees communicators) */

/* Checkpoints (real_ckpt.c; both backends, one file format): save this rank's master weights,
 * momentum and AdamW state under DIR/step-K/ and then DIR/latest (every file atomically through
 * outfile.h; a failed save removes what it wrote, so no step folder is left half or empty);
 * load the latest one, checking it is of this program, ranks, tokens, seed, learning rates,
 * NS coefficients and gradient chunks (a difference is named) and every rank file's checksum,
 * rank and plan hash before anything is installed. Collective; all ranks fail together. After
 * a load the next step is the checkpoint's. */
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

/* Rank 0's *p to every rank of comm, as JSON (each rank reads it back, so every rank holds
 * what a file of it holds). Collective; *p (rank 0's, borrowed) is replaced on the other ranks
 * by a program they own. -1 on this rank's failure (the caller aborts: the others may wait). */
int real_share_program(dm_program **p, MPI_Comm comm, dm_err *err);

/* One step as the run's table shows it: the slowest rank's time per part, NS min and max over
 * ranks (us). Collective (gathers to rank 0); filled on rank 0 only. */
typedef struct real_step_row {
    double loss, step_us, forward_us, backward_us, optimizer_us, opt_window_us, exposed_comm_us;
    double ns_min_us, ns_max_us;
    int skipped;
} real_step_row;
int real_exec_step_row(real_exec *ex, const real_step_stats *st, real_step_row *row, dm_err *err);

/* The last step's trace to path (CSV when it ends in .csv, else Chrome JSON). Collective; rank 0
 * writes. */
int real_exec_write_trace(real_exec *ex, const char *path, dm_err *err);

/* The backend `--backend auto` means: GPU when this build has it and every rank of comm sees a
 * device, else CPU. Collective. */
real_backend real_backend_auto(MPI_Comm comm);

/* A run of steps on a created executor (real_run.c; `dmuon run`'s loop): up to `steps` in all,
 * a checkpoint after every `every`-th step and the last, then the weights files and the trace.
 * row() is called on rank 0 after each step (for the caller to print). Collective. */
typedef struct real_run_spec {
    long steps, every;        /* steps in all (from the executor's steps done: a loaded checkpoint) */
    const char *ckpt_dir;     /* NULL: no checkpoints */
    const char *save_weights, *check_weights, *trace_path; /* NULL: none */
} real_run_spec;
typedef struct real_run_result {
    long first_step;          /* the steps done before (a loaded checkpoint's), else 0 */
    long kept;                /* steps not skipped */
    int counted;              /* steps in the means: all but the first (unless it is the only one) */
    real_step_row mean;       /* rank 0: the means of the rows counted */
    double check_rel;         /* --check-weights: the largest relative Frobenius error ... */
    int64_t check_worst;      /* ... and its matrix (-1: every matrix bit-identical) */
} real_run_result;
typedef void (*real_run_row_fn)(void *ctx, long step, const real_step_stats *st, const real_step_row *row);
/* 0; -1 with err when the ranks failed together (a checkpoint, the weights, the trace: every rank
 * holds the cause); -2 with err on this rank's failure inside a step (a timeout): the caller
 * prints it and aborts the job. */
int real_exec_run(real_exec *ex, const real_run_spec *spec, real_run_row_fn row, void *ctx, real_run_result *res,
                  dm_err *err);
/* The run's CSV (`dmuon run --csv`; read by regress and validate): a '#' line naming the run, the
 * header, and one row per step (times in ms). */
void real_row_csv_header(FILE *f, const dm_program *p, const char *backend, int64_t tokens);
void real_row_csv(FILE *f, long step, const real_step_row *w);

/* `dmuon bench comm` (real_bench.c): every collective of the table (core/coll.h) over sizes
 * min_bytes .. max_bytes (x step_factor), warm-up, timed loop, a separate correctness pass,
 * through NCCL (gpu) or MPI (cpu). Collective over MPI_COMM_WORLD; rank 0 prints the table to
 * out and writes csv_path (NULL: none). Waits poll with the timeout (and NCCL's async errors),
 * as the executor's. Returns 0; 1 when an element was wrong; -1 with err when the ranks failed
 * together (every rank holds the lowest failing rank's message); -2 with err on this rank's
 * failure inside a collective (a timeout): the caller aborts the job. */
typedef struct real_bench_opts {
    int gpu;                  /* 1: NCCL in bf16; 0: MPI in float */
    int64_t min_bytes, max_bytes;
    long step_factor, iters, warmup;
    double timeout_s;
    const char *csv_path;
} real_bench_opts;
void real_bench_opts_default(real_bench_opts *o);
int real_bench_comm(const real_bench_opts *o, FILE *out, dm_err *err);

#endif
