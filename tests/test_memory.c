/* test_memory.c: the per-rank device memory estimate (core/memory.h), on the CPU: a two-matrix
 * model under muon-ddp and dmuon against sizes counted by hand, an attention layer's kept
 * activations and scratch counted by hand, the all-gather buffers against the executor's own
 * reading of the program (real_work.h's facts) for every strategy, the rank that needs the
 * most, the state rule (core/holds.h: adamw's 1/N shards, dmuon's one owner per matrix) and the
 * estimate's state falling with the ranks under adamw, and the verdicts on bundled models: Qwen2.5-72B on one H200 and DeepSeek-V3 on 8
 * A800s do not fit; Llama-3.2-3B (every strategy) and WALL-OSS (dmuon) fit on one H200 at
 * 4096 tokens. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "costs.h"
#include "holds.h"
#include "memory.h"
#include "model.h"
#include "program.h"
#include "real_work.h"
#include "sched.h"
#include "tap.h"

#define GIB 1073741824.0

static const char *TWO_JSON =
    "{\"format\": \"dmuon-model-1\", \"name\": \"two\", \"source\": \"test_memory\",\n"
    " \"stacks\": [{\"name\": \"layers\", \"layers\": 1}],\n"
    " \"tensors\": [\n"
    "  {\"name\": \"layers.*.up.weight\", \"shape\": [64, 32], \"count\": 1, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.norm.weight\", \"shape\": [64], \"count\": 1, \"stack\": \"layers\", \"role\": \"adamw\"}\n"
    " ]}\n";

/* one attention block of 2 heads x 16 over 8-token sequences, q/k/v/o 32 x 32 */
static const char *ATTN_JSON =
    "{\"format\": \"dmuon-model-1\", \"name\": \"attn\", \"source\": \"test_memory\",\n"
    " \"streams\": [{\"name\": \"text\"}],\n"
    " \"stacks\": [{\"name\": \"layers\", \"layers\": 1, \"attention\": [{\"heads\": 2, \"head_dim\": 16}]}],\n"
    " \"tensors\": [\n"
    "  {\"name\": \"layers.*.q.weight\", \"shape\": [32, 32], \"count\": 1, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.k.weight\", \"shape\": [32, 32], \"count\": 1, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.v.weight\", \"shape\": [32, 32], \"count\": 1, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.o.weight\", \"shape\": [32, 32], \"count\": 1, \"stack\": \"layers\", \"role\": \"muon\"}\n"
    " ]}\n";

static dm_model *load_text(const char *text, const char *name)
{
    dm_err err = {{0}};
    dm_model *m = NULL;
    if (dm_model_load_text(text, strlen(text), name, &m, &err) < 0) {
        printf("Bail out! %s: %s\n", name, err.msg);
        exit(1);
    }
    return m;
}

static int plan_hsdp; /* plan(): dmuon under --hsdp, shard groups of 4 (test_allgather_slots) */

static dm_program *plan(const dm_model *m, const char *cluster, const char *strategy, int gpus, const char *tokens,
                        const char *seq_len, dm_err *err)
{
    dm_cluster cl;
    dm_costs *costs = NULL;
    dm_program *p = NULL;
    sched_opts so;
    sched_opts_default(&so);
    if (plan_hsdp) so.hsdp = 1, so.gpus_per_node = 4;
    if (dm_cluster_load(cluster, &cl, err) < 0 || !(costs = dm_costs_roofline(cl.gpu, err)) ||
        sched_opts_parse(&so, "strategy", strategy, err) < 0 || sched_opts_parse(&so, "tokens", tokens, err) < 0 ||
        (seq_len && sched_opts_parse(&so, "seq-len", seq_len, err) < 0) ||
        sched_build(m, &cl, gpus, costs, &so, &p, NULL, err) < 0) {
        dm_costs_free(costs);
        return NULL;
    }
    dm_costs_free(costs);
    return p;
}

static void test_two(void)
{
    dm_err err = {{0}};
    dm_model *m = load_text(TWO_JSON, "two.json");
    dm_program *p = plan(m, "h200", "muon-ddp", 2, "8", NULL, &err);
    dm_mem_est e;
    if (ok(p && dm_mem_estimate(m, p, 1, NULL, &e, &err) == 0, "muon-ddp, rank 1 (%s)", p ? err.msg : "plan failed")) {
        /* a 64 x 32 Muon matrix (2048 elements) and a 1-D norm of 64: 2112 elements */
        ok(e.rank == 1 && e.total_elems == 2112 && e.max_size == 2048, "sizes: %lld elements, largest %lld",
           (long long)e.total_elems, (long long)e.max_size);
        ok(e.weights_grads == 2112 * 2 * 2, "bf16 weights and gradients of every matrix: %.0f bytes", e.weights_grads);
        /* kept for backward at 8 tokens, bf16: the projection's input (8 x 32) and residual
         * (8 x 64), the norm's input (8 x 64) and output (8 x 64) */
        ok(e.activations == 2.0 * (8 * 32 + 8 * 64 + 8 * 64 + 8 * 64), "activations kept: %.0f bytes", e.activations);
        /* the input gradient of the projection, 8 x 32; no attention */
        ok(e.max_dx == 8 * 32 && e.max_attn_scores == 0 && e.scratch == 2.0 * 8 * 32, "scratch: dX %lld elements, %.0f bytes",
           (long long)e.max_dx, e.scratch);
        /* every rank updates both: master + momentum (matrix), master + 2 moments (norm), and the
         * fp32 gradient scratch of the largest matrix; the second buffers of that state; each
         * array a cudaMalloc of its own, counted as what one takes (dm_mem_alloc_bytes: 32 KiB
         * at least) */
        double A8k = dm_mem_alloc_bytes(4.0 * 2048), A256 = dm_mem_alloc_bytes(4.0 * 64);
        ok(A8k == 32768 && A256 == 32768 && e.state == A8k * 2 + A256 * 3 + A8k, "optimizer state: %.0f bytes", e.state);
        ok(e.state_next == A8k * 2 + A256 * 3, "second buffers of the state: %.0f bytes", e.state_next);
        /* muon-ddp's all-reduces run in place on the arenas (core/arena.h): nothing staged, the
         * buffers at their one-element minimum */
        ok(e.max_coll == 1 && e.comm == 3.0 * 2, "collective buffers: 3 streams x %lld bf16 elements",
           (long long)e.max_coll);
        /* one NS plan of 64 x 32 (kernels/ns_cuda.cu ns_plan_create): input, output and two
         * iterates of 64 x 32 in 2 bytes, and 32 x 32 buffers in 2 bytes, two for direct, six for
         * Gram, each a cudaMalloc (32 KiB at these sizes), and its 32 MiB cuBLASLt workspace */
        int algo = -1;
        for (int i = 0; i < p->ranks[1].n_ops; i++)
            if (p->ranks[1].ops[i].kind == DM_OP_NS) algo = p->ranks[1].ops[i].algo;
        ok(algo >= 0 && e.ns == 4 * dm_mem_alloc_bytes(2.0 * 2048) + (algo == DM_NS_GRAM ? 6 : 2) * dm_mem_alloc_bytes(2.0 * 32 * 32) + 33554432.0, "NS plans (%s): %.0f bytes",
           algo >= 0 ? dm_ns_algo_name((dm_ns_algo)algo) : "none", e.ns);
        ok(e.runtime == 2.0 * GIB, "runtime 2 GiB");
        ok(e.total == e.weights_grads + e.activations + e.scratch + e.state + e.state_next + e.comm + e.ns + e.runtime,
           "total is the sum of the parts (%.0f bytes)", e.total);
    }
    ok(p && dm_mem_estimate(m, p, 2, NULL, &e, &err) < 0 && strstr(err.msg, "rank 2 is not in the program's 2 ranks"),
       "rank 2 of a 2-rank program is refused (%s)", err.msg);
    dm_program_free(p);
    /* dmuon: one owner per matrix, so the ranks together hold one copy of the state; no rank
     * keeps a master of what it does not update */
    err.msg[0] = 0;
    p = plan(m, "h200", "dmuon", 2, "8", NULL, &err);
    dm_mem_est e0, e1, pk;
    if (ok(p && dm_mem_estimate(m, p, 0, NULL, &e0, &err) == 0 && dm_mem_estimate(m, p, 1, NULL, &e1, &err) == 0 &&
               dm_mem_peak(m, p, NULL, &pk, &err) == 0,
           "dmuon estimates (%s)", p ? err.msg : "plan failed")) {
        /* less the two gradient scratches: the matrix's master and momentum on its owner, the
         * norm's AdamW state in two shards of 32 (master and two moments each), an allocation
         * per array of every range (32 KiB each at these sizes) */
        double A = dm_mem_alloc_bytes(4.0 * 2048), st = e0.state + e1.state - 2 * A;
        ok(st == A * (2 + 2 * 3) && (e0.state == A * (1 + 2 + 3) || e1.state == A * (1 + 2 + 3)),
           "dmuon: the ranks' state is one copy, no rank holds a master of what it does not update (%.0f, %.0f bytes)",
           e0.state, e1.state);
        ok(e0.state_next + e1.state_next == st, "dmuon: second buffers of that one copy (%.0f bytes)", st);
        ok(e0.activations == e1.activations && e0.weights_grads == e1.weights_grads, "activations and weights: the same "
           "on every rank");
        int want = e1.total > e0.total ? 1 : 0;
        ok(pk.rank == want && pk.total == (want ? e1.total : e0.total), "the peak is rank %d's (%.0f bytes)", pk.rank,
           pk.total);
    }
    dm_program_free(p);
    dm_model_free(m);
}

static void test_attention(void)
{
    dm_err err = {{0}};
    dm_model *m = load_text(ATTN_JSON, "attn.json");
    dm_program *p = plan(m, "h200", "dmuon", 1, "16", "8", &err);
    dm_mem_est e;
    if (ok(p && dm_mem_estimate(m, p, 0, NULL, &e, &err) == 0, "attention model at 16 tokens, seq-len 8 (%s)",
           p ? err.msg : "plan failed")) {
        /* 2 sequences x 2 heads: scores 4 x 8 x 8; the executor's buffers Q, K, V, dO and the
         * output, 4 x (8 x 16) each: operands half of 5 of them */
        ok(e.max_attn_scores == 4 * 8 * 8 && e.max_attn_operands == 5 * 4 * 8 * 16 / 2,
           "attention working set: %lld score and %lld operand elements", (long long)e.max_attn_scores,
           (long long)e.max_attn_operands);
        ok(e.max_dx == 16 * 32, "input gradient: 16 tokens x 32");
        /* the residual add after the attention reads a second 16 x 32 operand from the pass scratch */
        ok(e.max_ew == 2 * 16 * 32, "pass scratch: the residual add's output and operand (%lld)", (long long)e.max_ew);
        ok(e.scratch == 2.0 * (16 * 32 + 2 * 16 * 32 + 2 * 256 + 5 * 512),
           "scratch: dX, the passes', S and dS, Q, K, V, dO and the outputs (%.0f bytes)", e.scratch);
        /* one input slot (16 x 32: q, k, v and o read the same tokens at the same width) and the
         * four projections' residuals (16 x 32 each) */
        ok(e.activations == 2.0 * (16 * 32 + 4 * 16 * 32), "activations: one shared input slot, four residuals (%.0f bytes)",
           e.activations);
        /* the same program as one written before the layer passes (no "layer_passes"): no pass
         * scratch, the rest the same */
        dm_mem_est o;
        p->layer_passes = 0;
        ok(dm_mem_estimate(m, p, 0, NULL, &o, &err) == 0 && o.max_ew == 0 && o.scratch == e.scratch - 2.0 * e.max_ew &&
               o.activations == e.activations,
           "a program without layer passes: no pass scratch (%.0f bytes of scratch)", o.scratch);
    }
    dm_program_free(p);
    dm_model_free(m);
}

/* The strategies the plan-wide checks below run. */
static const char *strats[] = {"adamw", "muon-ddp", "muon-fsdp", "muon-rr", "dmuon"};

/* Qwen2.5-0.5B, the bundled model of the plan-wide checks; NULL (a failed check) when it does not load. */
static dm_model *load_small(void)
{
    dm_err err = {{0}};
    dm_model *m = NULL;
    if (dm_model_load("qwen2.5-0.5b", &m, &err)) ok(0, "qwen2.5-0.5b loads (%s)", err.msg);
    return m;
}

/* All-gather buffers: the estimate's own reading equals the executor's facts. */
static void test_allgather_slots(void)
{
    dm_err err = {{0}};
    dm_model *m = load_small();
    if (!m) return;
    static const int gpus[] = {2, 4, 8, 16};
    dm_matrix *mx = NULL;
    int64_t n = 0;
    dm_model_matrices(m, -1, &mx, &n, &err);
    int cases = 0, same = 0;
    for (int s = 0; s < 6; s++) /* the five strategies, then dmuon --hsdp (shard groups of 4) */
        for (int g = 0; g < 4; g++) {
            if (s == 5 ? gpus[g] < 8 : gpus[g] > 8) continue;
            plan_hsdp = s == 5;
            dm_program *p = plan(m, "a800", s == 5 ? "dmuon" : strats[s], gpus[g], "1024", NULL, &err);
            plan_hsdp = 0;
            real_facts f;
            dm_mem_est a, b;
            if (!p || real_facts_build(p, mx, n, &f, &err)) {
                ok(0, "%s on %d: %s", strats[s], gpus[g], err.msg);
                dm_program_free(p);
                continue;
            }
            cases++;
            if (dm_mem_estimate(m, p, 0, NULL, &a, &err) == 0 && dm_mem_estimate(m, p, 0, &(dm_mem_exact){f.ag_slot, NULL, 0, 0, 0}, &b, &err) == 0 &&
                a.max_coll == b.max_coll)
                same++;
            else
                tap_diag("%s on %d GPUs: largest collective %lld elements, the executor's facts %lld",
                         s == 5 ? "dmuon --hsdp" : strats[s], gpus[g], (long long)a.max_coll, (long long)b.max_coll);
            real_facts_free(&f);
            dm_program_free(p);
        }
    ok(cases == 17 && same == cases, "largest collective buffer equals the executor's reading in %d of %d plans "
       "(5 strategies x 2, 4, 8 GPUs, dmuon --hsdp on 8 and 16)", same, cases);
    free(mx);
    dm_model_free(m);
}

/* The state rule (core/holds.h) over every rank of a plan: per param the ranges' total length and
 * how many ranks hold some of it; rank_max: the most elements one rank holds. 0 when the ranges
 * of each param are disjoint. */
static int state_cover(const dm_program *p, const int64_t *sz, int64_t n, int64_t *len, int *holders, unsigned char *muon,
                       int64_t *rank_max, double *bytes_max, dm_err *err)
{
    dm_range *st = calloc((size_t)n, sizeof *st), *all = calloc((size_t)n * (size_t)p->nranks, sizeof *all);
    unsigned char *need = calloc((size_t)n, 1);
    int rc = st && all && need ? 0 : -1;
    memset(len, 0, (size_t)n * sizeof *len);
    memset(holders, 0, (size_t)n * sizeof *holders);
    memset(muon, 0, (size_t)n);
    *rank_max = 0, *bytes_max = 0;
    for (int r = 0; r < p->nranks && rc == 0; r++) {
        if ((rc = dm_state_ranges(p, sz, n, r, st, need, err))) break;
        int64_t mine = 0;
        double bytes = 0; /* each state array an allocation of its own: master, momentum, two moments */
        for (int64_t q = 0; q < n; q++) {
            all[(size_t)q * p->nranks + r] = st[q];
            if (st[q].hi <= st[q].lo) continue;
            mine += st[q].hi - st[q].lo;
            bytes += (1 + (need[q] & 1) + ((need[q] & 2) ? 2 : 0)) * dm_mem_alloc_bytes(4.0 * (double)(st[q].hi - st[q].lo));
            len[q] += st[q].hi - st[q].lo;
            holders[q]++;
            if (need[q] & 1) muon[q]++;
            for (int j = 0; j < r; j++) { /* disjoint from every earlier rank's */
                dm_range o = all[(size_t)q * p->nranks + j];
                if (o.hi > o.lo && o.lo < st[q].hi && st[q].lo < o.hi) rc = 1;
            }
        }
        if (mine > *rank_max) *rank_max = mine;
        if (bytes > *bytes_max) *bytes_max = bytes;
    }
    free(st), free(all), free(need);
    return rc;
}

static void test_state_rule(void)
{
    dm_err err = {{0}};
    dm_model *m = load_small();
    if (!m) return;
    dm_matrix *mx = NULL;
    int64_t n = 0, total = 0;
    dm_model_matrices(m, -1, &mx, &n, &err);
    int64_t *sz = calloc((size_t)n, sizeof *sz), *len = calloc((size_t)n, sizeof *len), rank_max = 0;
    int *holders = calloc((size_t)n, sizeof *holders);
    unsigned char *muon = calloc((size_t)n, 1);
    for (int64_t q = 0; q < n; q++) total += sz[q] = dm_matrix_elems(m, &mx[q]);
    double prev = 0;
    for (int g = 1; g <= 8; g *= 2) {
        /* adamw: every param's state cut into disjoint shards that cover it, 1/N per rank */
        dm_program *p = plan(m, "a800", "adamw", g, "1024", NULL, &err);
        int64_t covered = 0, bound = 0;
        double bytes_max = 0;
        if (p && state_cover(p, sz, n, len, holders, muon, &rank_max, &bytes_max, &err) == 0) {
            for (int64_t q = 0; q < n; q++) covered += len[q] == sz[q];
            for (int i = 0; i < p->ranks[0].n_ops; i++) { /* rank 0's shard of each flat buffer, the largest */
                const dm_op *op = &p->ranks[0].ops[i];
                int64_t t = 0;
                for (int a = 0; op->kind == DM_OP_REDUCESCATTER && a < op->n_params; a++) t += sz[op->params[a]];
                bound += (t + g - 1) / g;
            }
        }
        ok(p && covered == n && rank_max <= bound && rank_max >= total / g - g,
           "adamw at %d ranks: each of %lld params' state in disjoint shards covering it (%lld do); a rank holds at most "
           "%lld elements of %lld (1/%d: %lld)", g, (long long)n, (long long)covered, (long long)rank_max,
           (long long)total, g, (long long)(total / g));
        /* the estimate follows: state and second buffers (less the gradient scratch) are the
         * busiest rank's ranges, each array an allocation of what one takes (dm_mem_alloc_bytes:
         * over 1/N of the bytes, the more so as the shards get small: +30% at 8 ranks here) */
        dm_mem_est e;
        if (p && dm_mem_peak(m, p, NULL, &e, &err) == 0) {
            double st = e.state - dm_mem_alloc_bytes(4.0 * (double)e.max_size) + e.state_next, raw = 2.0 * 4.0 * 3.0 * (double)total / g;
            ok(fabs(st - 2 * bytes_max) < 1 && st >= raw && (g > 1 || st <= raw * 1.1) && (g == 1 || st < prev),
               "adamw at %d ranks: estimated state and second buffers %.1f MiB (master and two moments, twice, of the "
               "busiest rank's ranges, an allocation each: %.1f MiB; %.1f MiB of bytes)", g, st / 1048576.0,
               2 * bytes_max / 1048576.0, raw / 1048576.0);
            prev = st;
        } else {
            ok(0, "adamw at %d ranks: %s", g, err.msg);
        }
        dm_program_free(p);
    }
    /* the peak skips a rank whose list is the rank before it's: never above the peak so far */
    int same = 0;
    for (int k = 0; k < 5; k++) {
        dm_program *pp = plan(m, "a800", strats[k], 8, "1024", NULL, &err);
        dm_mem_est pk, e, best = {0};
        for (int r = 0; pp && r < pp->nranks; r++)
            if (dm_mem_estimate(m, pp, r, NULL, &e, &err) == 0 && (r == 0 || e.total > best.total)) best = e;
        if (pp && dm_mem_peak(m, pp, NULL, &pk, &err) == 0 && pk.total == best.total && pk.rank == best.rank) same++;
        else tap_diag("%s: peak rank %d %.0f bytes, every rank's largest: rank %d %.0f", strats[k], pk.rank, pk.total,
                      best.rank, best.total);
        dm_program_free(pp);
    }
    ok(same == 5, "the peak is the largest of every rank's estimate under %d of 5 strategies at 8 ranks", same);
    /* dmuon: each Muon matrix's state whole on its one owner */
    dm_program *p = plan(m, "a800", "dmuon", 4, "1024", NULL, &err);
    int64_t owned = 0, n_muon = 0, bad = -1;
    double bytes_max = 0;
    if (p && state_cover(p, sz, n, len, holders, muon, &rank_max, &bytes_max, &err) == 0)
        for (int64_t q = 0; q < n; q++) {
            if (mx[q].role != DM_ROLE_MUON || m->tensors[mx[q].tensor].ndim != 2) continue;
            n_muon++;
            if (holders[q] == 1 && muon[q] == 1 && len[q] == sz[q]) owned++;
            else if (bad < 0) bad = q;
        }
    ok(p && n_muon > 0 && owned == n_muon, "dmuon at 4 ranks: %lld of %lld Muon matrices' state whole on one owner "
       "(first other: %lld)", (long long)owned, (long long)n_muon, (long long)bad);
    dm_program_free(p);
    free(sz), free(len), free(holders), free(muon), free(mx);
    dm_model_free(m);
}

static void verdict(const char *model, const char *cluster, const char *strategy, int gpus, int want_fit)
{
    dm_err err = {{0}};
    dm_model *m = NULL;
    dm_cluster cl;
    if (dm_model_load(model, &m, &err) || dm_cluster_load(cluster, &cl, &err)) {
        ok(0, "%s, %s load (%s)", model, cluster, err.msg);
        dm_model_free(m);
        return;
    }
    dm_program *p = plan(m, cluster, strategy, gpus, "4096", NULL, &err);
    dm_mem_est e;
    char line[512];
    if (p && dm_mem_peak(m, p, NULL, &e, &err) == 0)
        ok(dm_mem_fits(&e, cl.gpu) == want_fit, "%s, %s on %d x %s: %s", model, strategy, gpus, cl.gpu->short_name,
           dm_mem_describe(&e, cl.gpu, line, sizeof line));
    else
        ok(0, "%s %s: %s", model, strategy, err.msg);
    dm_program_free(p);
    dm_model_free(m);
}

/* What one cudaMalloc takes (dm_mem_alloc_bytes), as tools/alloc_probe.py measured it on the
 * H200 (traces/device/allocprobe-2026-12-04/logs/alloc_probe.txt): requested -> taken. */
static void test_alloc_rule(void)
{
    static const double probe[][2] = {{4096, 32768},       {65536, 65536},       {262144, 262144},
                                      {786432, 1048576},   {1048576, 1048576},   {1049088, 2097152},
                                      {2097152, 2097152},  {2101248, 4194304},   {4194816, 6291456},
                                      {11534336, 12582912}, {37748736, 37748736}, {37752832, 39845888}};
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++)
        ok_near(dm_mem_alloc_bytes(probe[i][0]), probe[i][1], 0, "a cudaMalloc of %.0f bytes takes %.0f", probe[i][0],
                probe[i][1]);
}

int main(void)
{
    test_alloc_rule();
    test_two();
    test_attention();
    test_allgather_slots();
    test_state_rule();
    const dm_gpu *h200 = dm_gpu_find("H200"), *a800 = dm_gpu_find("A800"), *h100 = dm_gpu_find("H100");
    ok(h200->mem_bytes == 143771.0 * 1048576 && a800->mem_bytes == 80 * GIB && h100->mem_bytes == 81559.0 * 1048576,
       "GPU memory per catalogue entry: H200 %.1f, A800 %.1f, H100 %.1f GiB", h200->mem_bytes / GIB, a800->mem_bytes / GIB,
       h100->mem_bytes / GIB);
    dm_mem_est e = {0};
    char line[512];
    e.total = 100 * GIB;
    ok(strstr(dm_mem_describe(&e, a800, line, sizeof line), ": does not fit on GPU A800-SXM4-80GB: needs 100.0 GiB of 80.0"),
       "the verdict line: %s", line);
    e.total = 10 * GIB;
    ok(strstr(dm_mem_describe(&e, a800, line, sizeof line), ": fits on A800-SXM4-80GB (80.0 GiB)") && !strstr(line, "tight"),
       "  ... and when it fits");
    e.total = 79 * GIB; /* within DM_MEM_EST_MARGIN (2%) of the 80 GiB */
    ok(strstr(dm_mem_describe(&e, a800, line, sizeof line), ": fits on A800-SXM4-80GB (80.0 GiB), tight: the estimate has "
              "come out up to 2% under the measured peak"), "  ... and when it fits by less than the estimate's error: %s",
       strstr(line, ": fits") ? strstr(line, ": fits") : line);
    verdict("qwen2.5-72b", "h200", "dmuon", 1, 0);
    verdict("deepseek-v3", "a800", "dmuon", 8, 0);
    verdict("llama-3.2-3b", "h200", "dmuon", 1, 1);
    verdict("llama-3.2-3b", "h200", "muon-ddp", 1, 1);
    verdict("llama-3.2-3b", "h200", "adamw", 1, 1);
    verdict("wall-oss-flow", "h200", "dmuon", 1, 1);
    return tap_done();
}
