/* autotune.h: pick the fastest correct NS variant per (shape, batch, algorithm, dtype) on the
 * GPU at hand, and remember it on disk.
 *
 * Candidates: for each algorithm asked for (direct in bf16, Gram in fp16), a coordinate search:
 * the block count of X X^T (1 = a full cuBLAS GEMM, k = the recursive lower-block scheme of
 * ns_cuda.h), then that of the m x m products, then (small problems only) cuBLASLt heuristic
 * indices other than the first; last, the winner's GEMMs one by one over cuBLASLt's heuristic
 * list (ns_plan_tune_gemms), kept when the whole plan is then faster. Then our own kernels
 * (ns_config.kernel: the symmetric-product kernel, the fused NS) where they take the shape, each
 * timed and gated like the rest; the fastest correct candidate of all wins. A plan's input and output are in its iteration dtype (bf16 for
 * direct, fp16 for Gram). Each is timed with CUDA events on graph replays after warm-up (median of `reps`),
 * on random input (never zeros). The correctness gate runs every candidate once on the same
 * input with a poisoned output and rejects it when its output has a non-finite value or
 * differs from the reference variant's (direct, full GEMMs, heuristic 0) by more than
 * AT_GATE_REL in relative Frobenius norm; the reference itself must be finite. (The reference's
 * own error against float64 is what tests/test_ns_gpu.c checks.)
 *
 * The cache is a text file, one line per tuned key, every line carrying the GPU name and the
 * CUDA runtime and cuBLASLt versions it was measured under; lines of another GPU or version are
 * kept in the file but never returned. Written atomically (temporary file, rename). */
#ifndef DM_AUTOTUNE_H
#define DM_AUTOTUNE_H
#include <stdint.h>

#include "dm_error.h"
#include "ns_cuda.h"

#define AT_GATE_REL 5e-2
#define AT_MAX_CANDS 64

typedef struct at_key {
    int64_t m, n; /* m <= n */
    int batch;
    dm_ns_algo algo;
    dm_dtype dtype; /* the iteration dtype */
} at_key;

typedef struct at_result {
    int sym_blocks;    /* X X^T */
    int sym_blocks_mm; /* the m x m products */
    int sym_flat;      /* ns_config.sym_flat */
    int heuristic;
    char gemm_picks[NS_MAX_PICKS + 1]; /* per-GEMM heuristic picks (ns_config), "" = none */
    ns_kernel kernel;                  /* NS_KERNEL_LT: cuBLASLt products */
    double median_us, min_us, max_us;
    double gate_rel; /* relative difference to the reference variant (0 for the reference) */
    double flops_nominal, flops_executed;
    double mhz; /* the SM clock over its timing (ns_time_last_mhz); 0 when not timed in this run
                   (a cached result) */
} at_result;

typedef struct at_cache at_cache;

/* Open (or start) the cache at path for this device. A missing file is an empty cache; a line
 * that does not parse is an error naming path:line:col. *out owned by the caller. */
int at_cache_open(const char *path, const ns_device_info *dev, at_cache **out, dm_err *err);
/* 1 and *r filled when the key was tuned on this GPU and versions, else 0. */
int at_cache_lookup(const at_cache *c, const at_key *k, at_result *r);
int at_cache_store(at_cache *c, const at_key *k, const at_result *r, dm_err *err);
int at_cache_save(at_cache *c, dm_err *err); /* atomic rewrite */
void at_cache_close(at_cache *c);            /* NULL ok; does not save */

/* A plan configuration for (rows, cols, batch) with algorithm algo: the defaults of
 * ns_config_default, with the block counts and heuristic the cache holds for this GPU when it
 * has them. Returns 1 when tuned values were found, 2 when the batch was never tuned but a smaller
 * batch (> 1) of the same shape was (its block counts and heuristic, not its per-GEMM picks;
 * the largest such batch), 3 when neither, and the nearest tuned shape of the algorithm (log2
 * distance in m and n: the shape itself when tuned at batch 1; cuBLASLt entries, its batch
 * nearest in log2) lends its block counts and scheme (heuristic 0, no picks, kernel lt), 0 for
 * plain defaults (batch 1 of a shape tuned at other batches only, or nothing of the algorithm
 * tuned), 4 when this GPU has no entry of the algorithm and dtype and another GPU's do (the one
 * with the most): what these rules give that GPU, without its heuristic index and per-GEMM picks
 * (its block counts, scheme and kernel: the executor on an untuned card runs the plans the tuned
 * card's rows, projected, price). (The tuned times
 * were measured with the plan's input and output in cfg->work: bf16 direct, fp16 Gram.) A
 * committed cache for the H200: traces/kernels/autotune_h200.tsv. */
int at_config_for(const at_cache *c, int64_t rows, int64_t cols, int batch, dm_ns_algo algo,
                  ns_config *cfg);
/* The plan configuration a tuning result stands for (defaults of algo, then r's choices). */
void at_result_config(const at_result *r, dm_ns_algo algo, ns_config *cfg);

typedef struct at_options {
    int sym_blocks[8];
    int n_sym;
    int sym_schemes; /* which schemes block counts > 1 are tried in: 1 levels, 2 flat, 3 both */
    int heuristics[4];
    int n_heur;
    int warmup, reps;
    int use_graph;
    int64_t min_block; /* skip block counts whose blocks would be smaller than this (rows) */
    int64_t heur_max_elems; /* heuristic indices > 0 only when m*n*batch <= this (small
                               problems, where cuBLASLt's first choice often underfills) */
    int tune_gemms;         /* 1: the per-GEMM pick stage (ns_plan_tune_gemms) */
    ns_kernel kernels[NS_KERNEL_COUNT]; /* the kernels tried; without NS_KERNEL_LT the
                                           cuBLASLt search is skipped */
    int n_kernels;
    int64_t fused_max_elems; /* the fused kernels only when m*n*batch <= this */
    /* per algorithm, a cuBLASLt configuration to re-time instead of searching (e.g. the
       cached one): at most one per algorithm, n_lt_fixed of them */
    struct {
        dm_ns_algo algo;
        at_result r;
    } lt_fixed[2];
    int n_lt_fixed;
} at_options;

/* sym {1,2,4,8} in both schemes, heuristics {0}, 3 warm-up, 20 reps, min_block 256, heur_max_elems 16M,
 * tune_gemms 1, every kernel, fused_max_elems 64M */
void at_options_default(at_options *o);

/* Per-candidate report, for logs: called once per candidate timed (or rejected, with
 * rejected = 1 and a reason). May be NULL. */
typedef void (*at_report_fn)(void *ctx, const at_key *k, const at_result *r, int rejected,
                             const char *why);

/* Tune every algorithm in algos[0..n_algos-1] for one (m, n, batch): the input is drawn with
 * `seed`; results[i] receives the best of algos[i] (median_us < 0 when no candidate passed).
 * The reference output for the gate comes from a direct full-GEMM plan made first. */
int at_tune_shape(int64_t m, int64_t n, int batch, const dm_ns_algo *algos, int n_algos,
                  const at_options *o, uint64_t seed, ns_stream s, at_result *results,
                  at_report_fn report, void *report_ctx, dm_err *err);

#endif
