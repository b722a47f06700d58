/* real_priv.h: the executor's engine state (real_exec.c) and the one table of operations each
 * backend fills (real_cpu.c, real_gpu.c), in the shape of redis' ae.c with its ae_epoll.c and
 * ae_kqueue.c: the engine owns everything a step program means for every backend (set-up
 * checks, groups, the step frame, the agreement, phases, traces, checkpoints through the state
 * accessors); a backend owns its buffers and runs the ops. Backends never call each other. Not a
 * public header. */
#ifndef DM_REAL_PRIV_H
#define DM_REAL_PRIV_H
#include <mpi.h>
#include <stdint.h>

#include "clock.h"
#include "real.h"
#include "wk_plan.h"
#include "real_work.h"
#include "trace.h"

/* One matrix's state on this rank, whatever the backend: checkpoints (real_ckpt.c) and
 * real_exec_weights read and write it only through the real_param_* accessors below. */
typedef struct real_pinfo {
    int64_t size;             /* elements */
    int64_t own_lo, own_hi;   /* the range this rank updated in the last committed step (before
                                 any step: where it holds fp32 master weights, the initial ones) */
    int has_mom, has_adam;    /* Muon momentum / AdamW moments held here (over ex->st[i] alone:
                                 get/put take whole arrays, zeros outside it) */
} real_pinfo;

/* What a backend's step reports for this rank. */
typedef struct real_step_local {
    double loss;              /* this rank's part of the loss (its tokens) */
    int64_t bad_local;        /* first non-finite param of this rank's own gradient, -1 */
    int64_t bad_reduced;      /* first non-finite param of a reduced gradient it read, -1 */
    double step_us;           /* the step's length if the backend measures it (GPU events); 0:
                                 the engine's wall clock from the start to the agreement */
} real_step_local;

/* A backend. Every function gets the engine; the backend's state is ex->bs. */
typedef struct real_backend_ops {
    const char *name;         /* "cpu", "gpu" */
    /* Checks before any buffer or communicator (a device, memory): -1 and err; the engine
     * agrees and every rank fails with the lowest failing rank's message. Every rank calls it
     * (it may use ex->comm, e.g. to count the ranks of a node). NULL: none. */
    int (*precheck)(real_exec *ex, dm_err *err);
    /* State, buffers, communicators; may be collective over ex->comm (all ranks call it). */
    int (*create)(real_exec *ex, dm_err *err);
    void (*destroy)(real_exec *ex); /* ex->bs may be NULL (a failed create) */
    /* Before the step's barrier: reset the step's state. */
    int (*step_begin)(real_exec *ex, dm_err *err);
    /* After the barrier (t0_us: the engine's clock at the step's start): run every op of this
     * rank's list, record each op's start and duration (us from the start) in ex->op_t0 and
     * ex->op_dur, fill *out. -1 on a failure of this rank (timeout, a program the data cannot
     * follow): the engine then calls abort and the caller aborts the job. */
    int (*step_run)(real_exec *ex, double t0_us, real_step_local *out, dm_err *err);
    /* After the agreement: commit the step's updates (kept) or leave the committed state as it
     * was (skipped). */
    int (*step_end)(real_exec *ex, int kept, dm_err *err);
    void (*abort)(real_exec *ex); /* a failed step: give up the communicators (NULL: nothing) */
    /* Device memory (NULL: none): the estimate, the used memory at its peak, what this run added. */
    void (*memory)(const real_exec *ex, double *est, double *peak_used, double *run);
    /* State access between steps (see real_param_* below). */
    void (*param_info)(const real_exec *ex, int64_t i, real_pinfo *pi);
    int (*param_weights)(real_exec *ex, int64_t i, int64_t lo, int64_t hi, float *dst, dm_err *err);
    int (*param_get)(real_exec *ex, int64_t i, float *W, float *mom, float *m1, float *m2, dm_err *err);
    int (*param_put)(real_exec *ex, int64_t i, const float *W, const float *mom, const float *m1, const float *m2,
                     int64_t own_lo, int64_t own_hi, dm_err *err);
} real_backend_ops;

extern const real_backend_ops real_backend_cpu;
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
extern const real_backend_ops real_backend_gpu;
#endif

struct real_exec {
    const dm_model *model;
    const dm_program *prog;
    real_opts o;
    ns_coeffs coeffs;         /* o.muon.ns.coeffs points here */
    MPI_Comm comm;
    int rank, nranks;
    int *gidx;                /* per program group: this rank's member index, -1 */
    dm_matrix *mx;            /* the model's matrices, all roles (the program's param ids) */
    int64_t n_mx;
    real_facts facts;
    dm_range *st;             /* per matrix: the range this rank keeps optimizer state over
                                 (core/holds.h's dm_state_ranges; empty: none) */
    unsigned char *need;      /* per matrix: 1 Muon momentum, | 2 AdamW moments (the same rule) */
    wk_plan wl;               /* every layer's kernels bound to buffers (both backends run these) */
    int64_t n_tokens_global;
    int64_t adam_t;           /* AdamW steps committed */
    int step;                 /* steps attempted (or loaded) */
    double *op_t0, *op_dur;   /* last step: each op's start and duration, us from its start */
    double *op_h0, *op_h1;    /* last step: when the host began and finished issuing each op, us
                                 from the step's start (the GPU backend; -1 where not measured) */
    dm_trace_event *ev;       /* per op, for the phase ruler */
    char name_buf[256];
    char info[512];           /* the backend's set-up, for the caller to print */
    const real_backend_ops *be;
    void *bs;                 /* the backend's state */
};

/* The params op works on: its list, or every matrix of its layer when a forward/backward names
 * none. *list is op->params or a new array the caller frees when *owned. -1 on allocation. */
int real_op_params(const real_exec *ex, const dm_op *op, int64_t **list, int *n, int *owned, dm_err *err);

/* The state accessors (dispatch to the backend). param_weights: this rank's weights [lo, hi) of
 * matrix i into dst (host floats): the fp32 master over the range it owns, elsewhere the working
 * copy the next step starts from. get/put: everything a checkpoint holds for matrix i as host
 * arrays of `size` floats (NULL: not held); put also sets the owned range. Between steps. */
void real_param_info(const real_exec *ex, int64_t i, real_pinfo *pi);
int real_param_weights(real_exec *ex, int64_t i, int64_t lo, int64_t hi, float *dst, dm_err *err);
int real_param_get(real_exec *ex, int64_t i, float *W, float *mom, float *m1, float *m2, dm_err *err);
int real_param_put(real_exec *ex, int64_t i, const float *W, const float *mom, const float *m1, const float *m2,
                   int64_t own_lo, int64_t own_hi, dm_err *err);

/* Collective over comm: -1 on every rank when any rank's rc < 0, every rank then holding the
 * lowest failing rank's message (so rank 0 can print the cause). */
int real_agree(MPI_Comm comm, int rc, dm_err *err);

/* This rank's index among comm's ranks on its node, and their number. Collective over comm. */
int real_local_rank(MPI_Comm comm, int *nlocal);

#endif
