/* real_work.h: the program facts both backends need: the CPU backend's initial weights (the
 * activations, targets and token ids of the workload are wk_plan.h's), matrix names, a static
 * reading of the program (what each all-gather moves, from its payload; where each rank first
 * updates each parameter; where each collective sits in each rank's list), the data-hazard
 * check and the GPU memory estimate. */
#ifndef DM_REAL_WORK_H
#define DM_REAL_WORK_H
#include <stdint.h>

#include "arena.h"
#include "holds.h"
#include "memory.h"
#include "dm_error.h"
#include "model.h"
#include "program.h"
#include "wk_plan.h"

/* Initial weights (CPU backend; wk_hash_uniform of WK_H_WEIGHT): uniform / sqrt(in) for 2-D,
 * 1 + 0.1 uniform for 1-D. */
void real_fill_weights(uint64_t seed, const dm_matrix *mx, int one_d, float *W);

/* "layers.3.mlp.up_proj.weight" for matrix mx of model m into buf. */
void real_matrix_name_into(const dm_model *m, const dm_matrix *mx, char *buf, size_t len);

typedef dm_range real_range; /* elements [lo, hi) of one param (core/holds.h) */

/* Static facts of a program, the same on every rank. They follow each rank's list in order,
 * tracking which part of each gradient it holds reduced (reduce to it, all-reduce: all;
 * reduce-scatter: its shard of the flat buffer) and which part of each param it updates
 * (muon-update: its reduce-scatter shard when the gradient came that way, else all; adamw:
 * what it holds reduced). An all-gather moves, from each member, what that member holds of
 * its payload (program.h): its reduced gradient ranges (gradients) or its update ranges
 * (weights), each element taken from the lowest member that has it, in slots of the largest
 * member's count (so shards of one flat buffer for adamw/FSDP, whole matrices for muon-rr). */
typedef struct real_facts {
    int nranks, n_colls;
    int64_t n_params;
    int *coll_pos;      /* [rank * n_colls + coll]: index of the op with that collective, -1 */
    int *first_upd;     /* [rank * n_params + p]: first muon-update/adamw op on p, INT_MAX */
    real_range **ag;    /* [coll]: all-gathers only: [member * op.n_params + a] contributions */
    int64_t *ag_slot;   /* [coll]: elements per member in an all-gather's buffer */
} real_facts;

/* Fill *f (owned by the caller, real_facts_free) for the matrices mx[0..n_params) of the
 * model (all roles, dm_model_matrices order). Rejects params out of range, bad groups, and
 * payloads this executor does not move (a broadcast of gradients, a reduction of weights). */
int real_facts_build(const dm_program *p, const dm_matrix *mx, int64_t n_params, real_facts *f,
                     dm_err *err);
void real_facts_free(real_facts *f);
/* Did rank j write an update of param p before its op of collective c? */
int real_src_updated_before(const real_facts *f, int j, int coll, int64_t p);
/* Member index of rank r in group g of p, -1 if not a member. */
int real_group_index(const dm_program *p, int g, int r);
/* Data hazards of rank r's list as the GPU runs it (buffers updated in place): every op that
 * reads or writes a parameter's weights, gradient, forward residual or NS output must be
 * ordered (dependencies and stream order, transitively) after the last op that wrote it, and
 * a write after every read since that write. Collectives read and write their payload
 * (broadcast: the root reads, the others write; an all-gather reads this member's part and
 * writes the others'). -1 with the first hazard named: ranks, op ids, kinds, the buffer and the
 * parameter. */
int real_check_hazards(const dm_program *p, int r, const dm_matrix *mx, int64_t n_params, dm_err *err);

/* The device memory one rank of the GPU backend (real_gpu.c) needs for a program, in bytes, by
 * what holds it; and the element counts the backend sizes its shared buffers with (so the
 * estimate and the allocation are one computation). It is core/memory.h's dm_mem_estimate, the
 * estimate plan, sim, scale and validate print, given what this backend lays out exactly
 * (dm_mem_exact: its arenas, all-gather slots, staging, activations and scratch). NS plans and
 * the runtime (CUDA context, cuBLAS, NCCL) are approximations: about 4 buffers per plan, 1.5 GiB. */
typedef struct real_mem_est {
    double weights_grads;     /* bf16 working weights and gradients, every matrix (the arenas'
                                 layout, dm_arena_layout) */
    double activations;       /* bf16, every layer: its input activations (one per slot) and the
                                 residuals forward keeps for backward (wk_plan.h: the workload's
                                 kept_bytes, routed rows padded to whole experts) */
    double scratch;           /* shared by the layers: the cost-only outputs (input gradients,
                                 dx, the combine), the attention buffers and pointer arrays, the
                                 reductions' fp32 workspace, the index maps (int32) */
    double state;             /* fp32 master weights, Muon momentum, AdamW moments (updated here) */
    double state_next;        /* the second buffer of the state updated here (ping-pong: the
                                 updates write it, a kept step makes it the committed one) */
    double comm;              /* collective packing buffers, one per stream: the largest
                                 collective that is staged (dm_op.staged, core/arena.h) */
    double ns;                /* NS plans (approximate) */
    double runtime;           /* CUDA, cuBLAS and NCCL (approximate) */
    double total;
    int64_t total_elems, max_size, max_coll; /* elements */
} real_mem_est;

/* 1 when the GPU backend stages collective op of p, whose params lie in its arenas as `fit` and
 * `span` say (dm_arena_fit_of): the program marks it (dm_op.staged, core/arena.h) or the arenas
 * do not allow it in place (a program marked by another layout). */
int real_staged(const dm_program *p, const dm_op *op, dm_arena_fit fit, int64_t span);

/* Fill *e for rank r of p running on model m with T tokens per rank (the program's seq_len). */
int real_gpu_mem_estimate(const dm_model *m, const dm_program *p, int r, int64_t T, real_mem_est *e, dm_err *err);

/* The scratch part of an estimate for the layers' plans w (bytes). */
double real_scratch_bytes(const wk_plan *w);

#endif
