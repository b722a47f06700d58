/* test_real_mem.c: real_gpu_mem_estimate (real_work.h), the device bytes one rank of the GPU
 * backend needs, on the CPU: a two-matrix model under muon-ddp on 2 ranks against the sizes
 * counted by hand, what changes with dmuon's owners, Qwen2.5-72B on one rank (more than an H200
 * holds, the case `dmuon run --backend gpu` refuses before allocating), the validation models
 * on one H200, and the activations against the workload's kept bytes. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "costs.h"
#include "memory.h"
#include "model.h"
#include "program.h"
#include "real_work.h"
#include "sched.h"
#include "wk_plan.h"
#include "workload.h"
#include "tap.h"

static const char *MODEL_JSON =
    "{\"format\": \"dmuon-model-1\", \"name\": \"two\", \"source\": \"test_real_mem\",\n"
    " \"stacks\": [{\"name\": \"layers\", \"layers\": 1}],\n"
    " \"tensors\": [\n"
    "  {\"name\": \"layers.*.up.weight\", \"shape\": [64, 32], \"count\": 1, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.norm.weight\", \"shape\": [64], \"count\": 1, \"stack\": \"layers\", \"role\": \"adamw\"}\n"
    " ]}\n";

/* extra: NULL or key, value, ..., NULL (sched_opts_parse) */
static dm_program *plan_x(const dm_model *m, const char *strategy, int gpus, int64_t tokens, const char *const *extra,
                          dm_err *err);
static dm_program *plan(const dm_model *m, const char *strategy, int gpus, int64_t tokens, dm_err *err)
{
    return plan_x(m, strategy, gpus, tokens, NULL, err);
}

static dm_program *plan_x(const dm_model *m, const char *strategy, int gpus, int64_t tokens, const char *const *extra,
                          dm_err *err)
{
    dm_cluster cl;
    dm_costs *costs = NULL;
    dm_program *p = NULL;
    sched_opts so;
    char tok[32];
    snprintf(tok, sizeof tok, "%lld", (long long)tokens);
    sched_opts_default(&so);
    for (int i = 0; extra && extra[i] && extra[i + 1]; i += 2)
        if (sched_opts_parse(&so, extra[i], extra[i + 1], err) < 0) return NULL;
    if (dm_cluster_load("h200", &cl, err) < 0 || !(costs = dm_costs_roofline(cl.gpu, err)) ||
        sched_opts_parse(&so, "strategy", strategy, err) < 0 || sched_opts_parse(&so, "tokens", tok, err) < 0 ||
        sched_build(m, &cl, gpus, costs, &so, &p, NULL, err) < 0) {
        dm_costs_free(costs);
        return NULL;
    }
    dm_costs_free(costs);
    return p;
}

static int64_t msize(const dm_model *m, const dm_matrix *x)
{
    return x->rows * (m->tensors[x->tensor].ndim == 1 ? 1 : x->cols);
}

static const int64_t *g_off;
static int by_off(const void *a, const void *b)
{
    int64_t x = g_off[*(const int64_t *)a], y = g_off[*(const int64_t *)b];
    return (x > y) - (x < y);
}

/* The arenas' layout for program p of model mdl (dm_arena_layout): every group of one tensor
 * in one layer starts at a multiple of 8 with its matrices back to back, no two matrices
 * overlap, the gaps are alignment only; every reduce, broadcast and all-reduce that is not a
 * part runs in place, and on one rank every collective (dm_op.staged, core/arena.h). Returns
 * the parts staged across an alignment gap. */
static int check_layout(const char *what, const dm_model *mdl, const dm_program *p)
{
    dm_err err = {{0}};
    dm_matrix *mx = NULL;
    int64_t n = 0, *off = NULL, total = -1;
    if (dm_model_matrices(mdl, -1, &mx, &n, &err) < 0 || !(off = malloc((size_t)n * sizeof *off)) ||
        (total = dm_arena_layout(mdl, mx, n, p, off, &err)) < 0) {
        ok(0, "%s: layout (%s)", what, err.msg);
        free(mx), free(off);
        return 0;
    }
    int64_t *ord = malloc((size_t)n * sizeof *ord), sum = 0, groups = 0, bad = -1;
    for (int64_t i = 0; i < n; i++) {
        int first = i == 0 || mx[i].tensor != mx[i - 1].tensor || mx[i].layer != mx[i - 1].layer;
        sum += msize(mdl, &mx[i]), groups += first, ord[i] = i;
        if ((first && off[i] % 8) || (!first && off[i] != off[i - 1] + msize(mdl, &mx[i - 1])) || off[i] < 0 ||
            off[i] + msize(mdl, &mx[i]) > total)
            bad = i;
    }
    /* in offset order no matrix overlaps the next */
    g_off = off;
    qsort(ord, (size_t)n, sizeof *ord, by_off);
    for (int64_t j = 1; j < n; j++)
        if (off[ord[j]] < off[ord[j - 1]] + msize(mdl, &mx[ord[j - 1]])) bad = ord[j];
    free(ord);
    ok(bad < 0 && total >= sum && total - sum < 8 * groups,
       "%s: layout of %lld matrices in %lld groups, %lld elements (%lld in gaps)%s", what, (long long)n,
       (long long)groups, (long long)total, (long long)(total - sum), bad < 0 ? "" : ": a matrix out of place");
    /* the program's marks (dm_arena_mark) against the placement on this layout; what stays
     * staged: HSDP parts across a gap, reduce-scatters and all-gathers NCCL's in-place form does
     * not take (on several ranks) */
    int staged = 0, parts_staged = 0, colls = 0, rsag = 0, rsag_staged = 0, disagree = 0;
    for (int r = 0; r < p->nranks; r++)
        for (int k = 0; k < p->ranks[r].n_ops; k++) {
            const dm_op *op = &p->ranks[r].ops[k];
            if (!dm_op_is_collective(op->kind)) {
                disagree += op->staged != 0;
                continue;
            }
            disagree += op->staged != !dm_arena_in_place(mdl, mx, off, op, p->groups[op->group].n);
            if (op->kind == DM_OP_REDUCESCATTER || op->kind == DM_OP_ALLGATHER) {
                rsag++, rsag_staged += op->staged;
                continue;
            }
            colls++;
            if (!op->staged) continue;
            if (op->parts > 1) parts_staged++;
            else staged++;
        }
    ok(disagree == 0, "%s: every op's staged mark is the placement on the layout (%d differ)", what, disagree);
    ok(staged == 0, "%s: %d reduces, broadcasts and all-reduces, %d staged (%d parts across a gap)", what, colls,
       staged, parts_staged);
    if (p->nranks == 1)
        ok(rsag_staged == 0, "%s: one rank: %d reduce-scatters and all-gathers, %d staged", what, rsag, rsag_staged);
    else if (rsag)
        printf("# %s: %d reduce-scatters and all-gathers, %d staged\n", what, rsag, rsag_staged);
    free(off), free(mx);
    return parts_staged;
}

int main(void)
{
    dm_err err = {{0}};
    char path[] = "/tmp/test_real_mem-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    dm_model *m = NULL, *big = NULL;
    if (!f || fputs(MODEL_JSON, f) < 0 || fclose(f) != 0 || dm_model_load_file(path, &m, &err) < 0) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    remove(path);
    const int64_t T = 8;
    dm_program *p = plan(m, "muon-ddp", 2, T, &err);
    ok(p != NULL, "muon-ddp plan (%s)", p ? "ok" : err.msg);
    real_mem_est e;
    if (p && ok(real_gpu_mem_estimate(m, p, 1, T, &e, &err) == 0, "estimate for rank 1 (%s)", err.msg)) {
        /* 64 x 32 Muon matrix (2048 elements) and a 1-D norm of 64: 2112 elements */
        ok(e.total_elems == 2112 && e.max_size == 2048, "sizes: %lld elements, largest %lld", (long long)e.total_elems,
           (long long)e.max_size);
        ok(e.weights_grads == 2112 * 2 * 2, "bf16 weights and gradients: %.0f bytes", e.weights_grads);
        /* the layer's input activations in bf16, one per slot: the projection's 8 x 32 and the
         * norm's 8 x 64; the residuals kept for backward: 8 x 64 of each (the workload's kept) */
        ok(e.activations == 2.0 * (8 * 32 + 8 * 64) + 2.0 * (8 * 64 + 8 * 64), "activations: %.0f bytes", e.activations);
        /* the cost-only outputs: the largest of the input gradient (8 x 32) and the norm's dx
         * (8 x 64), bf16; the norm's reduction: one group of 16 rows, 64 fp32 partial sums */
        ok(e.scratch == 2.0 * 8 * 64 + 4.0 * 64, "scratch: %.0f bytes", e.scratch);
        /* every rank updates both: master + momentum (matrix), master + 2 moments (norm), and
         * the fp32 gradient scratch of the largest matrix, each a cudaMalloc of its own (what
         * one takes: dm_mem_alloc_bytes, 32 KiB at these sizes) */
        double A = dm_mem_alloc_bytes(4.0 * 2048);
        ok(A == dm_mem_alloc_bytes(4.0 * 64) && e.state == A * (2 + 3 + 1), "optimizer state: %.0f bytes", e.state);
        /* the second buffers of that state (no copy of the bf16 weights) */
        ok(e.state_next == A * (2 + 3), "second buffers of the state: %.0f bytes", e.state_next);
        /* the all-reduces run in place on the arenas (core/arena.h): the packing buffers
         * hold nothing but their one-element minimum */
        ok(e.max_coll == 1 && e.comm == 3.0 * 2, "collective buffers: 3 x %lld bf16", (long long)e.max_coll);
        /* one NS plan of 64 x 32 (kernels/ns_cuda.cu ns_plan_create): input, output and two
         * iterates of 64 x 32 in 2 bytes, and 32 x 32 buffers in 2 bytes, two for direct, six for
         * Gram, each a cudaMalloc (32 KiB at these sizes), and its 32 MiB cuBLASLt workspace */
        int algo = -1;
        for (int i = 0; i < p->ranks[0].n_ops; i++)
            if (p->ranks[0].ops[i].kind == DM_OP_NS) algo = p->ranks[0].ops[i].algo;
        ok(algo >= 0 && e.ns == 4 * dm_mem_alloc_bytes(2.0 * 2048) + (algo == DM_NS_GRAM ? 6 : 2) * dm_mem_alloc_bytes(2.0 * 32 * 32) + 33554432.0, "NS plans (%s): %.0f bytes",
           algo >= 0 ? dm_ns_algo_name((dm_ns_algo)algo) : "none", e.ns);
        ok(e.total == e.weights_grads + e.activations + e.scratch + e.state + e.state_next + e.comm + e.ns + e.runtime,
           "total is the sum of the parts (%.0f bytes)", e.total);
    }
    ok(p && real_gpu_mem_estimate(m, p, 2, T, &e, &err) < 0, "rank 2 of a 2-rank program is refused (%s)", err.msg);
    dm_program_free(p);
    /* dmuon: each matrix has one owner, so the ranks together hold one copy of the state (the
     * norm's AdamW state in two shards); no rank keeps a master of what it does not update */
    err.msg[0] = 0;
    p = plan(m, "dmuon", 2, T, &err);
    real_mem_est e0, e1;
    if (ok(p && real_gpu_mem_estimate(m, p, 0, T, &e0, &err) == 0 && real_gpu_mem_estimate(m, p, 1, T, &e1, &err) == 0,
           "dmuon estimates (%s)", p ? err.msg : "plan failed")) {
        /* less the two gradient scratches: the matrix's master and momentum, the norm's two
         * shards of master and two moments, an allocation each */
        double A = dm_mem_alloc_bytes(4.0 * 2048), st = e0.state + e1.state - 2 * A;
        ok(st == A * (2 + 2 * 3) && e0.state_next + e1.state_next == st,
           "dmuon: one copy of the state over the ranks, no master of what a rank does not update (%.0f bytes)", st);
    }
    dm_program_free(p);
    if (dm_model_load_file(DM_SRCDIR "/models/qwen2.5-72b.json", &big, &err) < 0) {
        ok(0, "qwen2.5-72b loads (%s)", err.msg);
    } else {
        err.msg[0] = 0;
        p = plan(big, "dmuon", 1, 4096, &err);
        if (ok(p && real_gpu_mem_estimate(big, p, 0, 4096, &e, &err) == 0, "qwen2.5-72b on 1 GPU: estimate (%s)",
               p ? err.msg : "plan failed"))
            ok(e.total > 141.0 * 1073741824.0 && e.weights_grads > 2.0 * 2 * 70e9,
               "qwen2.5-72b on 1 GPU needs more than an H200's 141 GiB: %.0f GiB", e.total / 1073741824.0);
        dm_program_free(p);
    }
    dm_model_free(big);
    big = NULL;
    /* what the validation runs on one H200 (141 GiB; about 139.5 free) must still fit */
    if (dm_model_load_file(DM_SRCDIR "/models/llama-3.2-3b.json", &big, &err) == 0) {
        const char *ss[] = {"dmuon", "muon-ddp", "adamw"};
        for (int k = 0; k < 3; k++) {
            err.msg[0] = 0;
            p = plan(big, ss[k], 1, 4096, &err);
            if (p && real_gpu_mem_estimate(big, p, 0, 4096, &e, &err) == 0)
                ok(e.total < 139.0 * 1073741824.0, "llama-3.2-3b, %s on 1 GPU at 4096 tokens fits: %.1f GiB "
                   "(weights+grads %.1f, activations %.1f, scratch %.1f, state %.1f, its second buffers %.1f, ns %.1f)",
                   ss[k], e.total / 1073741824.0, e.weights_grads / 1073741824.0, e.activations / 1073741824.0,
                   e.scratch / 1073741824.0,
                   e.state / 1073741824.0, e.state_next / 1073741824.0, e.ns / 1073741824.0);
            else
                ok(0, "llama-3.2-3b %s: %s", ss[k], err.msg);
            dm_program_free(p);
        }
    }
    dm_model_free(big);
    /* the activations the executor allocates are the workload's kept bytes (routed rows padded
     * to whole experts, buffers to 16 bytes); WALL-OSS fits one H200 under dmuon at 4096 tokens
     * (it needed 170 GiB when every matrix had its own token batch) */
    const char *names[] = {"llama-3.2-3b", "qwen2.5-1.5b", "qwen2.5-vl-3b", "wall-oss-flow", "moonlight-16b-a3b-6l"};
    for (int k = 0; k < 5; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/models/%s.json", DM_SRCDIR, names[k]);
        big = NULL;
        err.msg[0] = 0;
        dm_step_work sw;
        dm_workload_opts wo = {4096, 0, 2, 0, 0};
        if (dm_model_load_file(path, &big, &err) < 0 || !(p = plan(big, "dmuon", 1, 4096, &err)) ||
            real_gpu_mem_estimate(big, p, 0, 4096, &e, &err) < 0 || dm_step_work_sum(big, &wo, &sw, &err) < 0) {
            ok(0, "%s: %s", names[k], err.msg);
        } else {
            ok(fabs(e.activations - sw.kept_bytes) <= 1e-4 * sw.kept_bytes,
               "%s at 4096 tokens: activations %.3f GiB, the workload keeps %.3f GiB", names[k],
               e.activations / 1073741824.0, sw.kept_bytes / 1073741824.0);
            if (k == 3)
                ok(e.total < 139.0 * 1073741824.0, "wall-oss-flow, dmuon on 1 GPU at 4096 tokens fits: %.1f GiB", e.total /
                   1073741824.0);
        }
        dm_program_free(p);
        p = NULL;
        dm_model_free(big);
    }
    /* --attention causal: the estimate's attention scratch is the executor's buffers (the
     * first product's scores, a quarter of the whole block's; the operands whole), and smaller
     * than the whole products' */
    {
        char path[512];
        snprintf(path, sizeof path, "%s/models/llama-3.2-3b.json", DM_SRCDIR);
        static const char *const causal[] = {"attention", "causal", NULL};
        dm_program *pc = NULL, *pw = NULL;
        dm_mem_est ec, ew;
        dm_matrix *mx = NULL;
        int64_t n = 0;
        wk_plan wl;
        memset(&wl, 0, sizeof wl);
        big = NULL;
        if (dm_model_load_file(path, &big, &err) < 0 || !(pc = plan_x(big, "dmuon", 1, 4096, causal, &err)) ||
            !(pw = plan(big, "dmuon", 1, 4096, &err)) || dm_mem_estimate(big, pc, 0, NULL, &ec, &err) < 0 ||
            dm_mem_estimate(big, pw, 0, NULL, &ew, &err) < 0 || dm_model_matrices(big, -1, &mx, &n, &err) < 0) {
            ok(0, "llama-3.2-3b causal: %s", err.msg);
        } else {
            wk_plan_opts wo = {4096, 0, 0, 1, 0, 1, pc->causal_tile, 0};
            int rc = wk_plan_build(big, mx, n, &wo, &wl, &err);
            int64_t whole_q = 24LL * 4096 * 128; /* heads x L x head_dim */
            ok(rc == 0 && pc->causal_tile == DM_ATTN_CAUSAL_TILE && wl.attn_size[WK_AS] == ec.max_attn_scores &&
               ec.max_attn_scores * 4 == ew.max_attn_scores && wl.attn_size[WK_AQ] == whole_q &&
               ec.scratch < ew.scratch,
               "llama-3.2-3b causal at 4096: scores %lld (the executor's %lld, whole %lld), queries %lld, scratch %.2f "
               "GiB (whole %.2f)", (long long)ec.max_attn_scores, (long long)(rc ? 0 : wl.attn_size[WK_AS]),
               (long long)ew.max_attn_scores, (long long)(rc ? 0 : wl.attn_size[WK_AQ]), ec.scratch / 1073741824.0,
               ew.scratch / 1073741824.0);
        }
        wk_plan_free(&wl);
        free(mx);
        dm_program_free(pc);
        dm_program_free(pw);
        dm_model_free(big);
    }
    /* the estimate's attention buffers are the executor's, each at its own largest, whole or
     * causal, for one block or several (the VLM's tower and decoder); and a sliding window
     * (Gemma-3-1B: 512 tokens on 5 of 6 layers) under --attention causal: the estimate's scores
     * are the executor's largest product (a full layer's), its queries the window's; at 4096
     * tokens a windowed layer runs 5/12 of the triangle's scores (a 512-row square, then 7
     * rectangles of 512 x 1024: tiles of 512 rows) */
    static const char *const attn_cases[][2] = {
        {"extra/gemma-3-1b-pt", "causal"}, {"qwen2.5-vl-3b", "whole"}, {"wall-oss-flow", "whole"}, {"pi0", "causal"}};
    for (size_t ac = 0; ac < sizeof attn_cases / sizeof attn_cases[0]; ac++) {
        char path[512];
        snprintf(path, sizeof path, "%s/models/%s.json", DM_SRCDIR, attn_cases[ac][0]);
        const char *const att[] = {"attention", attn_cases[ac][1], NULL};
        dm_program *pc = NULL;
        dm_mem_est ec;
        dm_matrix *mx = NULL;
        int64_t n = 0;
        wk_plan wl;
        memset(&wl, 0, sizeof wl);
        big = NULL;
        if (dm_model_load_file(path, &big, &err) < 0 || !(pc = plan_x(big, "dmuon", 1, 4096, att, &err)) ||
            dm_mem_estimate(big, pc, 0, NULL, &ec, &err) < 0 || dm_model_matrices(big, -1, &mx, &n, &err) < 0) {
            ok(0, "%s %s: %s", attn_cases[ac][0], attn_cases[ac][1], err.msg);
        } else {
            wk_plan_opts wo = {4096, 0, 0, 1, 0, 1, pc->causal_tile, 0};
            int rc = wk_plan_build(big, mx, n, &wo, &wl, &err);
            int64_t all = 0; /* the executor's attention buffers, each at its own largest */
            for (int i = 0; i < WK_A__N; i++) all += rc ? 0 : wl.attn_size[i];
            ok(rc == 0 && 2 * ec.max_attn_scores + 2 * ec.max_attn_operands - all <= 1 &&
                   wl.attn_size[WK_AS] == ec.max_attn_scores,
               "%s %s at 4096: the estimate's attention buffers are the executor's (%lld against %lld elements)",
               attn_cases[ac][0], attn_cases[ac][1], (long long)(2 * ec.max_attn_scores + 2 * ec.max_attn_operands),
               (long long)all);
            if (ac == 0) {
                dm_workload_opts o = {4096, 4096, 2, pc->causal_tile, 0};
                dm_attn_geom g0[DM_ATTN_MAX_PRODS], g5[DM_ATTN_MAX_PRODS];
                const dm_stack *st = &big->stacks[1];
                int n0 = dm_attn_block_geoms(big, &o, &st->attn[0], 0, g0);
                int n5 = dm_attn_block_geoms(big, &o, &st->attn[0], 5, g5);
                double s0 = 0, s5 = 0;
                for (int j = 0; j < n0; j++) s0 += (double)g0[j].rects * g0[j].lq * g0[j].lk;
                for (int j = 0; j < n5; j++) s5 += (double)g5[j].rects * g5[j].lq * g5[j].lk;
                ok(rc == 0 && strcmp(st->name, "layers") == 0 && wl.attn_size[WK_AQ] == 4LL * 4096 * 256 && n0 == 2 &&
                       n5 == 4 && fabs(s0 / s5 - 5.0 / 12) < 1e-9,
                   "gemma-3-1b causal at 4096: queries %lld; a windowed layer %d products, %.4f of a full layer's %d",
                   (long long)(rc ? 0 : wl.attn_size[WK_AQ]), n0, s0 / s5, n5);
            }
        }
        wk_plan_free(&wl);
        free(mx);
        dm_program_free(pc);
        dm_model_free(big);
    }
    /* the layout for every strategy's program: the buckets in place */
    const char *lm[] = {"llama-3.2-3b", "qwen2.5-vl-3b", "pi0", "moonlight-16b-a3b-6l"};
    const char *ls[] = {"dmuon", "muon-ddp", "muon-rr", "muon-fsdp", "adamw"};
    const char *lpt[] = {"balance", "lpt", NULL};
    const char *hsdp[] = {"balance", "lpt", "hsdp", "yes", "gpus-per-node", "4", NULL};
    for (int k = 0; k < 4; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/models/%s.json", DM_SRCDIR, lm[k]);
        big = NULL;
        if (dm_model_load_file(path, &big, &err) < 0) {
            ok(0, "%s: %s", lm[k], err.msg);
            continue;
        }
        for (int s = 0; s < 5; s++)
            for (int g = 1; g <= 8; g *= 8) {
                char what[128];
                snprintf(what, sizeof what, "%s %s on %d", lm[k], ls[s], g);
                if (!(p = plan_x(big, ls[s], g, 256, lpt, &err)))
                    ok(0, "%s: %s", what, err.msg);
                else
                    check_layout(what, big, p);
                dm_program_free(p);
            }
        char what[128];
        snprintf(what, sizeof what, "%s dmuon --hsdp on 8 (2 x 4)", lm[k]);
        if (!(p = plan_x(big, "dmuon", 8, 256, hsdp, &err)))
            ok(0, "%s: %s", what, err.msg);
        else
            check_layout(what, big, p);
        dm_program_free(p);
        dm_model_free(big);
    }
    /* the embedding's backward: the workload zeroes an untied table (k its rows) and only adds
     * to a tied one (k 0), and the executor's plan accumulates exactly where k is 0 (the bench
     * times it the same way, kernels/wk_bench.c) */
    const char *em[] = {"llama-3.2-3b", "qwen2.5-0.5b", "qwen2.5-7b", "wall-oss-flow", "pi0", "moonlight-16b-a3b-6l"};
    for (int k = 0; k < 6; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/models/%s.json", DM_SRCDIR, em[k]);
        dm_matrix *mx = NULL;
        int64_t n = 0;
        wk_plan wl;
        memset(&wl, 0, sizeof wl);
        wk_plan_opts wo = {256, 0, 0, 1, 0, 1, 0, 0};
        big = NULL;
        if (dm_model_load_file(path, &big, &err) < 0 || dm_model_matrices(big, -1, &mx, &n, &err) < 0 ||
            wk_plan_build(big, mx, n, &wo, &wl, &err) < 0) {
            ok(0, "%s: %s", em[k], err.msg);
        } else {
            int seen = 0, tied = 0, bad = 0;
            for (int l = 0; l < wl.n_layers; l++)
                for (int i = 0; i < wl.L[l].n_bwd; i++) {
                    const wk_kb *b = &wl.L[l].bwd[i];
                    if (b->k.op != DM_KOP_EMBED_BWD) continue;
                    seen++, tied += b->k.k == 0;
                    bad += b->accumulate != (b->k.k == 0) || (b->k.k != 0 && b->k.k != b->table_rows);
                }
            ok(seen > 0 && bad == 0, "%s: %d embedding backward kernels, %d tied (accumulated, k 0), %d off the rule",
               em[k], seen, tied, bad);
        }
        wk_plan_free(&wl);
        free(mx);
        dm_model_free(big);
    }
    /* without a program: id order, as before the layout followed the collectives */
    {
        dm_matrix *mx = NULL;
        int64_t n = 0, off[2] = {-1, -1};
        int got = dm_model_matrices(m, -1, &mx, &n, &err) == 0 && n == 2 &&
                  dm_arena_layout(m, mx, n, NULL, off, &err) == 2112;
        ok(got && off[0] == 0 && off[1] == 2048,
           "no program: id order (%lld, %lld)", (long long)off[0], (long long)off[1]);
        free(mx);
    }
    dm_model_free(m);
    return tap_done();
}
