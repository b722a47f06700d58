/* memory.h: the device memory one rank of the GPU executor needs for a step program: the one
 * estimate of its peak, by what holds it, for every strategy. `plan`, `sim`, `scale` and
 * `validate` print it and say when it does not fit on the cluster's GPU (dm_gpu.mem_bytes);
 * the executor sizes its buffers from the element counts below and refuses to start when the
 * total exceeds the device's free memory. (sim/sim_mem.h estimates the simulator's own host
 * memory while it plans and simulates: another thing.)
 *
 * Parts, in bytes, as the GPU backend holds them (bf16: 2 bytes, fp32: 4):
 *   weights_grads  bf16 working weights and gradients of EVERY matrix (two arenas, whatever
 *                  the strategy): 2 x 2 x total_elems (the parameters' elements; the arenas'
 *                  alignment gaps, under 8 elements per tensor and layer, left out)
 *   activations    what forward keeps for backward, summed over the layers: dm_layer_work's
 *                  kept_bytes (each layer's input slots, each projection's residual, each
 *                  vector and table output), at the program's tokens and seq_len
 *   scratch        transient buffers, allocated once and reused by every layer, bf16: the input
 *                  gradient (max_dx elements: the largest m x n of a dgrad kernel, x batch for
 *                  experts), the layer passes' scratch (max_ew elements: activations, rotary
 *                  embeddings, residual adds, core/workload.h dm_pass_scratch), and the attention buffers as the executor sizes them, each at
 *                  its own largest over the step's product groups (core/workload.h
 *                  dm_attn_geom_elems): the scores S and their gradient dS (max_attn_scores
 *                  elements each), and Q, K, V, dO and the one output buffer of O, dQ, dK, dV
 *                  (2 x max_attn_operands elements together);
 *                  2 x (max_dx + max_ew + 2 max_attn_scores + 2 max_attn_operands)
 *   state          per matrix, over the range this rank's updates touch (core/holds.h's
 *                  dm_state_ranges: the whole matrix where it runs NS, its shard of an AdamW or
 *                  FSDP update, nothing where it updates none): fp32 master weights, Muon
 *                  momentum (matrices it runs NS on), two AdamW moments (tensors it runs AdamW
 *                  on); and the fp32 gradient scratch of the largest matrix (4 x max_size), and
 *                  a second one where the rank's optimizer ops run on both compute streams
 *                  (dm_mem_lo_scratch)
 *                  Each array of each matrix is its own cudaMalloc and counts what one takes
 *                  (dm_mem_alloc_bytes)
 *   state_next     the second (ping-pong) buffer of each state array, over the same range
 *   ns             NS plans of this rank as the executor makes them, one per distinct (rows, cols,
 *                  count, algorithm) of each orientation of an NS op's matrices: input, output and
 *                  two iterates of count x r x c, and count x min(r, c)^2 buffers, six for Gram and
 *                  two for direct, all in 2 bytes, each a cudaMalloc (dm_mem_alloc_bytes), and
 *                  the plan's 32 MiB cuBLASLt workspace (NS_PLAN_WS_BYTES, kernels/ns_cuda.h)
 *   comm           one packing buffer per stream that runs collectives (DM_STREAM_COLL_COUNT) of the largest staged
 *                  collective (dm_op.staged, core/arena.h: the others run in place on the
 *                  arenas; 1 element when none is staged), bf16: 2 x DM_STREAM_COLL_COUNT x
 *                  max_coll. A collective's elements are its
 *                  params' rounded up to a multiple of its group size; an all-gather's are its
 *                  members' largest contribution (what each holds of the payload: the reduced
 *                  gradient, whole or its reduce-scatter shard; the weights it updates, whole or
 *                  its shard) times the group size, or the caller's ag_slot; the members
 *                  walked as dm_mem_peak walks its ranks (sampled past DM_MEM_PEAK_EXACT)
 *   runtime        CUDA context, cuBLAS and NCCL workspaces and what else the executor holds
 *                  beyond the buffers above: 2 GiB, measured: the executor's peak less this
 *                  estimate's other parts, on the 101 one-H200 runs of traces/validate/h200-37
 *                  and h200-38, was 1.5 GiB plus 0.52 (median; 0.29-0.62) under adamw and dmuon
 *                  and plus 0.13 (-0.09-0.23) under muon-ddp, where it is what is not found
 *                  (traces/validate/replay-check-2026-12-04g/memory.txt; a candidate, not
 *                  measured: the NCCL communicators, two for muon-ddp's one-rank plans and three
 *                  for adamw's and dmuon's, real/real_gpu.c init_nccl)
 *   total          their sum
 * Per rank only state, state_next and ns differ. */
#ifndef DM_MEMORY_H
#define DM_MEMORY_H

/* The words every message of a run refused or stopped for want of memory carries (the GPU
 * backend's failed allocation, the CPU backend's check before it allocates), so that `dmuon
 * validate` reports such a case as not fitting rather than as a failed run. */
#define DM_NOFIT_WORDS "does not fit in memory"

/* How far under the executor's measured peak the estimate has come out: -8.3% to -0.3% on the 101
 * one-H200 runs of traces/validate/h200-37 and h200-38 before it counted what each allocation
 * takes (dm_mem_alloc_bytes), each NS plan's workspace and the runtime as measured; -0.6% to
 * +2.1% since (median 0.0%; adamw -0.6..+0.2, dmuon -0.3..+0.2, muon-ddp +0.3..+2.1); the
 * "# GPU memory" lines of their run.log against `dmuon sim --program` of the programs they ran
 * (traces/validate/replay-check-2026-12-04g/memory.txt). A plan that fits by less than this is
 * reported as tight. */
#define DM_MEM_EST_MARGIN 0.02

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "dm_error.h"
#include "model.h"
#include "program.h"

#define DM_MEM_RUNTIME_BYTES (2.0 * 1073741824.0)

typedef struct dm_mem_est {
    int rank;                   /* the rank estimated (dm_mem_peak: the one needing the most) */
    double weights_grads, activations, scratch, state, state_next, ns, comm, runtime, total; /* bytes */
    int64_t total_elems;        /* elements of every matrix */
    int64_t max_size;           /* elements of the largest matrix */
    int64_t max_dx;             /* elements of the largest input gradient */
    int64_t max_ew;             /* elements of the layer passes' scratch (workload.h dm_pass_scratch) */
    int64_t max_attn_scores;    /* elements of the largest product group's scores (and of dS) */
    int64_t max_attn_operands;  /* half the elements of the Q, K, V, dO and output buffers */
    int64_t max_coll;           /* elements of the largest collective buffer */
} dm_mem_est;

/* What the GPU executor knows exactly about its own buffers, put in place of this estimate's
 * reading of the program (real/real_work.c real_gpu_mem_estimate: the executor sizes its
 * allocations with this same function). Every field may be left empty (NULL, 0). */
typedef struct dm_mem_exact {
    const int64_t *ag_slot;      /* elements per member of each all-gather's buffer, by collective
                                    id, as the executor lays them out (empty: the members'
                                    contributions as above, an upper bound of it) */
    const unsigned char *staged; /* per collective id: 1 when the executor stages it (empty:
                                    dm_op.staged; the executor also stages a collective of a
                                    program marked for another layout, real_staged) */
    int64_t arena_elems;         /* elements of one arena as laid out, alignment gaps included
                                    (empty: the params' total) */
    double activations, scratch; /* bytes as allocated (empty: the workload's counts above) */
} dm_mem_exact;

/* Rank r of program p on model m (the one it was planned for: its matrices are the params; the
 * program's tokens and seq_len give the activations). x: the executor's exact sizes (NULL for
 * plan, sim, scale and validate). Fails on a rank out of range, a param the model does not
 * have, or tokens the model refuses (dm_workload_check). */
int dm_mem_estimate(const dm_model *m, const dm_program *p, int r, const dm_mem_exact *x, dm_mem_est *e, dm_err *err);

/* The same for every rank: *e is the rank that needs the most (the lowest on ties). Ranks that
 * share one op list (dm_rank_prog.share) need the same, except where the list cuts flat buffers
 * by member (reduce-scatter) or reduces to a root: their state ranges then differ by where their
 * shards fall, a few elements per parameter. Such ranks are all estimated up to
 * DM_MEM_PEAK_EXACT ranks; past it every (ranks / DM_MEM_PEAK_EXACT)-th of a run of one list and
 * its last (DeepSeek-V3 under muon-fsdp at 1024 ranks: 3.4 s, about what the estimate took before
 * the state followed the ranges, where every rank would take 11.6 s). */
#define DM_MEM_PEAK_EXACT 64
int dm_mem_peak(const dm_model *m, const dm_program *p, const dm_mem_exact *x, dm_mem_est *e, dm_err *err);

/* The device memory one cudaMalloc of `bytes` takes, measured on the H200 (tools/alloc_probe.py,
 * traces/device/allocprobe-2026-12-04) and taken for every GPU: over 1 MiB, the bytes rounded up
 * to whole 2 MiB pages (11534336 bytes, one fp32 state array of a 1408 x 2048 expert, take 12
 * MiB); up to 1 MiB, the next power of two, at least 32 KiB. The executor allocates each fp32
 * state array of each matrix apart (real/real_gpu.c), so a model of many matrices a little over
 * whole pages pays the rest of a page per array: the estimate was 4-6 GiB under the measured
 * peak on Moonlight-16B-A3B-6L before it counted this, 0.1 GiB on Llama-3.2-3B, whose arrays
 * are whole pages. */
double dm_mem_alloc_bytes(double bytes);

struct dm_range;
/* Elements of the GPU executor's second fp32 gradient scratch on a rank whose list runs
 * optimizer ops on both compute streams (--publish: a published layer's AdamW on compute-lo,
 * beside the rank's other optimizer ops on compute; they would share the one scratch at once):
 * the largest state range (st: core/holds.h's dm_state_ranges, by param id) over the params of
 * its compute-lo AdamW ops. 0 when its optimizer ops run on one stream; -1 when an NS or a Muon
 * update runs on compute-lo beside optimizer ops on compute (the NS plans' buffers are one
 * stream's: the executor refuses that). The one rule of the estimate and the executor. */
int64_t dm_mem_lo_scratch(const dm_rank_prog *rp, const struct dm_range *st);

/* 1 when e->total fits in the GPU's memory. */
int dm_mem_fits(const dm_mem_est *e, const dm_gpu *gpu);

/* One line for people: "peak 23.4 GiB per rank (rank 0: weights+grads 1.8, activations 12.1,
 * ...): fits on A800-SXM4-80GB (80.0 GiB)" or "...: does not fit on GPU A800-SXM4-80GB: needs
 * 2712.3 GiB of 80.0". Returns buf. */
const char *dm_mem_describe(const dm_mem_est *e, const dm_gpu *gpu, char *buf, size_t size);

#endif
