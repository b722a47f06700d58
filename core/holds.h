/* holds.h: what one rank holds of each parameter as its step program runs: which part of each
 * gradient it holds reduced, the reduce-scatter shard or part it was given, the part of the
 * weights it updates; and from that the one rule of where it keeps optimizer state (fp32
 * master weights, Muon momentum, AdamW moments and the second buffer of each). Read by the
 * executors' program facts (real/real_work.c), both backends' allocations (real/real_cpu.c,
 * real/real_gpu.c) and the memory estimate (core/memory.c), so that what is allocated, what is
 * updated and what is estimated are one computation. */
#ifndef DM_HOLDS_H
#define DM_HOLDS_H

#include <stdint.h>

#include "dm_error.h"
#include "program.h"

/* Elements [lo, hi) of one param; empty when hi <= lo. */
typedef struct dm_range {
    int64_t lo, hi;
} dm_range;

/* The flat shard [lo, hi) of member k of n over total elements: [k ceil(total/n), (k+1)
 * ceil(total/n)) clipped to total (the reduce-scatter layout; a part's, program.h). */
void dm_flat_shard(int64_t total, int n, int k, int64_t *lo, int64_t *hi);

/* Rank r's index among group g's members (ascending ranks), -1 when not a member. */
int dm_group_index(const dm_group *g, int r);

/* What a rank holds of each param (arrays of the model's params, borrowed): red, the part of
 * its gradient it holds reduced (reduce to it, all-reduce, a gradient all-gather: all; a
 * reduce-scatter: its shard of the flat buffer; a part reduced to it or all-reduced: that
 * part); rs, the shard a reduce-scatter gave it (a part reduced to it: none, the update is
 * whole); upd, what its last update of the param wrote (muon-update: its reduce-scatter shard
 * when the gradient came that way, else all; adamw: what it holds reduced); part, the part of
 * the weights a part broadcast brought it (HSDP). */
typedef struct dm_hold {
    dm_range *red, *rs, *upd, *part;
} dm_hold;

/* Apply op of rank r (its params' sizes in sz, elements) to *h. A collective op of a group
 * without r, or a program error the callers check (params, groups), leaves *h as it was. */
void dm_hold_op(const dm_program *p, const int64_t *sz, int r, const dm_op *op, dm_hold *h);

/* The state rule: for each of the n params (sizes sz, elements) the range st[q] that rank r's
 * update ops ever touch in the step program: the whole matrix where it runs ns (the momentum
 * and the NS input are whole), the hull of every muon-update's and adamw's range otherwise (an
 * adamw or FSDP shard), empty where it updates nothing. need[q] (may be NULL): 1 when it runs
 * ns on q (Muon momentum), | 2 when adamw (AdamW moments). The executors keep every state
 * array and its second buffer over st[q] alone; the memory estimate counts that. st and need
 * have n entries, owned by the caller. -1 (err set) on a param or collective the program
 * cannot have, in the ops the rule reads (those that change what r holds, and the updates). */
int dm_state_ranges(const dm_program *p, const int64_t *sz, int64_t n, int r, dm_range *st, unsigned char *need,
                    dm_err *err);

/* The same rule for many ranks in turn without clearing n-sized arrays for each (the memory
 * estimate walks every distinct list): dm_state_walk_rank sets st and need as dm_state_ranges
 * would, and lists in touched[0 .. n_touched) the params where either is not empty, each once
 * (every other param's st is empty and need 0). */
typedef struct dm_state_walk {
    int64_t n;
    dm_range *scratch;     /* the hold ranges, 4 n, zero between walks */
    dm_range *st;          /* n */
    unsigned char *need;   /* n */
    int64_t *touched, n_touched;
} dm_state_walk;
int dm_state_walk_init(dm_state_walk *w, int64_t n, dm_err *err);
void dm_state_walk_free(dm_state_walk *w);
int dm_state_walk_rank(dm_state_walk *w, const dm_program *p, const int64_t *sz, int r, dm_err *err);

#endif
