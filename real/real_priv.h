/* real_priv.h: the executor's state shared by its backends (real_cpu.c holds the common
 * setup and the CPU backend; real_gpu.c the GPU backend). Not a public header. */
#ifndef DM_REAL_PRIV_H
#define DM_REAL_PRIV_H
#include <mpi.h>
#include <stdint.h>

#include "real.h"
#include "real_work.h"

typedef struct rparam {
    int64_t rows, cols, size; /* size: elements (rows * cols, or rows for 1-D) */
    int one_d, muon;
    float *W, *Wn;            /* committed weights; staged (latest on this rank) */
    float *G;                 /* gradient: local after backward, reduced after collectives */
    float *X, *Y, *R;         /* tokens (T x in), targets and residual (T x out) */
    float *mom, *mom_n;       /* Muon momentum, committed and staged */
    float *m1, *m2, *m1n, *m2n; /* AdamW moments */
    float *O;                 /* NS output */
    double loss;
    int64_t gr_lo, gr_hi;     /* reduced-gradient range this step */
    int64_t rs_lo, rs_hi;     /* the part a reduce-scatter gave this rank this step */
    int64_t up_lo, up_hi;     /* range this rank updated this step */
    int64_t own_lo, own_hi;   /* range this rank updated in the last committed step */
    int ns_done, applied;
} rparam;

typedef struct pending {
    int op;
    MPI_Request req;
    float *send, *recv;
} pending;

struct real_exec {
    const dm_model *model;
    const dm_program *prog;
    real_opts o;
    ns_coeffs coeffs;
    MPI_Comm comm;
    int rank, nranks;
    MPI_Comm *gcomm;          /* per program group; MPI_COMM_NULL when not a member */
    int *gidx;                /* per group: this rank's index, -1 */
    dm_matrix *mx;
    int64_t n_mx;
    rparam *p;
    real_facts facts;
    int *prev_stream, *prev_coll; /* per op of this rank */
    int64_t n_tokens_global;
    int64_t adam_t;           /* AdamW steps committed */
    int step;                 /* steps attempted */
    float *scratch;           /* input gradient / chunk gradient */
    size_t scratch_n;
    /* per-step */
    unsigned char *state;     /* 0 not started, 1 posted, 2 done */
    pending *pend;
    int n_pend;
    int64_t bad_param;        /* first non-finite gradient seen in a reduced gradient */
    int64_t bad_local;        /* ... in this rank's own gradient (where it came from) */
    char name_buf[256];
    char info[512];           /* the backend's set-up, for the caller to print */
    double *op_t0, *op_dur;   /* last step: each op's start and duration, us from its start */
    struct real_gpu *gpu;     /* the GPU backend's state, NULL on the CPU backend */
};


/* The stall fault injection of real_opts (a no-op unless this rank and step are named). */
void real_maybe_stall(const real_exec *ex);

/* One matrix's state on this rank, whatever the backend (real_cpu.c dispatches to real_gpu.c):
 * checkpoints (real_ckpt.c) and real_exec_weights read and write it only through these. */
typedef struct real_pinfo {
    int64_t size;             /* elements */
    int64_t own_lo, own_hi;   /* the range this rank updated in the last committed step */
    int has_mom, has_adam;    /* Muon momentum / AdamW moments held here */
} real_pinfo;
void real_param_info(const real_exec *ex, int64_t i, real_pinfo *pi);
/* This rank's weights [lo, hi) of matrix i into dst (host floats): the fp32 master on the range
 * it owns, elsewhere the working copy the next step starts from. Synchronous. */
int real_param_weights(real_exec *ex, int64_t i, int64_t lo, int64_t hi, float *dst, dm_err *err);
/* Everything a checkpoint holds for matrix i, as host arrays of `size` floats (NULL: not held);
 * put also sets the owned range. Between steps only. */
int real_param_get(real_exec *ex, int64_t i, float *W, float *mom, float *m1, float *m2, dm_err *err);
int real_param_put(real_exec *ex, int64_t i, const float *W, const float *mom, const float *m1, const float *m2,
                   int64_t own_lo, int64_t own_hi, dm_err *err);

/* GPU backend (real_gpu.c; only with CUDA and NCCL). Called from real_exec_create/step/...
 * after the common setup; create returns -1 on a local failure (no device, out of memory, a
 * program whose buffers cannot fit). */
struct real_gpu;
int real_gpu_create(real_exec *ex, dm_err *err);
int real_gpu_step(real_exec *ex, real_step_stats *st, dm_err *err);
void real_gpu_destroy(real_exec *ex);
void real_gpu_param_info(const real_exec *ex, int64_t i, real_pinfo *pi);
int real_gpu_param_weights(real_exec *ex, int64_t i, int64_t lo, int64_t hi, float *dst, dm_err *err);
int real_gpu_param_get(real_exec *ex, int64_t i, float *W, float *mom, float *m1, float *m2, dm_err *err);
int real_gpu_param_put(real_exec *ex, int64_t i, const float *W, const float *mom, const float *m1, const float *m2,
                       int64_t own_lo, int64_t own_hi, dm_err *err);

#endif
