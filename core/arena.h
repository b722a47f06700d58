/* arena.h: where the GPU executor keeps each parameter's bf16 weights and gradients (two arenas,
 * one layout) and, from that, which collectives run in place on the arenas and which are staged
 * (packed into a collective buffer around the call and unpacked). One rule for the scheduler,
 * which marks every collective op of a program (dm_op.staged, dm_arena_mark), the simulator and
 * the calibration, which price the copies of staged ops only (core/coll.h), and the executor
 * (real/real_gpu.c coll_op), which runs them as marked.
 *
 * The layout: units are the groups of one tensor in one layer (consecutive matrix ids: what a
 * kernel of count c or an expert batch spans), each starting at a multiple of 8 elements (16
 * bytes: cuBLAS's and the 16-byte kernels' alignment), its matrices back to back in id order.
 * The groups go in the order the program's collectives first touch them: reduce, broadcast and
 * all-reduce of every rank in list order, then reduce-scatter and all-gather, then the groups no
 * collective moves. So a bucket's parameters lie back to back, at most an alignment gap apart,
 * where the parameter ids interleave (a layer's Muon matrices and its norms and biases) or the
 * buckets do not follow id order. */
#ifndef DM_ARENA_H
#define DM_ARENA_H
#include <stdint.h>

#include "dm_error.h"
#include "model.h"
#include "program.h"

/* The layout of mx[0..n) (dm_model_matrices) for program p (NULL: id order). off[i] (may be
 * NULL) gets matrix i's offset in elements; returns the arena's elements, or -1 on an
 * allocation failure (err). */
int64_t dm_arena_layout(const dm_model *m, const dm_matrix *mx, int64_t n, const dm_program *p, int64_t *off,
                        dm_err *err);

/* How a collective's params lie in arenas laid out at off[]: DM_ARENA_EXACT when each starts where
 * the one before ends (the packed flat range of the params is the arena's range from *start,
 * *span elements); DM_ARENA_SPAN when each starts there or at the next multiple of 8 (alignment
 * gaps, kept zero, between: *start and *span cover the arena from the first param's start to the
 * last one's end, gaps included); DM_ARENA_SCATTERED otherwise. */
typedef enum { DM_ARENA_SCATTERED, DM_ARENA_SPAN, DM_ARENA_EXACT } dm_arena_fit;
dm_arena_fit dm_arena_fit_of(const dm_model *m, const dm_matrix *mx, const int64_t *off, const dm_op *op,
                             int64_t *start, int64_t *span);

/* 1 when the executor runs op (a collective over n ranks, its params at off[]) in place:
 *   reduce, broadcast, all-reduce: params exact, or across gaps when the op is not a part
 *     (op->parts > 1: a flat range of the packed params, which other ranks' reduce-scatters
 *     and all-gathers share, so it needs the packed indexing);
 *   reduce-scatter: params exact and their elements a multiple of n (NCCL's in-place form:
 *     rank k's shard is [k T/n, (k+1) T/n) of the bucket), or across gaps on one rank (the
 *     shard is the whole);
 *   all-gather: one rank, params exact or across gaps (on several ranks what each contributes
 *     is not in general the flat shard NCCL's in-place form would take).
 * 0: staged. dm_arena_fits_in_place: the same from op's fit and span (dm_arena_fit_of). */
int dm_arena_in_place(const dm_model *m, const dm_matrix *mx, const int64_t *off, const dm_op *op, int n);
int dm_arena_fits_in_place(const dm_op *op, dm_arena_fit f, int64_t span, int n);

/* Lay out p's arenas and set dm_op.staged on every collective op of every rank (0 elsewhere).
 * DM_COLL_STAGE=1 in the environment stages every collective (for A/B timing of the copies; the
 * simulator then prices them too). Returns 0, or -1 with err. */
int dm_arena_mark(const dm_model *m, dm_program *p, dm_err *err);

#endif
