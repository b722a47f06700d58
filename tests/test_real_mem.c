/* test_real_mem.c: real_gpu_mem_estimate (real_work.h), the device bytes one rank of the GPU
 * backend needs, on the CPU: a two-matrix model under muon-ddp on 2 ranks against the sizes
 * counted by hand, what changes with dmuon's owners, Qwen2.5-72B on one rank (more than an H200
 * holds, the case `dmuon run --backend gpu` refuses before allocating), the validation models
 * on one H200, and the activations against the workload's kept bytes. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cluster.h"
#include "costs.h"
#include "model.h"
#include "program.h"
#include "real_work.h"
#include "sched.h"
#include "workload.h"
#include "tap.h"

static const char *MODEL_JSON =
    "{\"format\": \"dmuon-model-1\", \"name\": \"two\", \"source\": \"test_real_mem\",\n"
    " \"stacks\": [{\"name\": \"layers\", \"layers\": 1}],\n"
    " \"tensors\": [\n"
    "  {\"name\": \"layers.*.up.weight\", \"shape\": [64, 32], \"count\": 1, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.norm.weight\", \"shape\": [64], \"count\": 1, \"stack\": \"layers\", \"role\": \"adamw\"}\n"
    " ]}\n";

static dm_program *plan(const dm_model *m, const char *strategy, int gpus, int64_t tokens, dm_err *err)
{
    dm_cluster cl;
    dm_costs *costs = NULL;
    dm_program *p = NULL;
    sched_opts so;
    char tok[32];
    snprintf(tok, sizeof tok, "%lld", (long long)tokens);
    sched_opts_default(&so);
    if (dm_cluster_load("h200", &cl, err) < 0 || !(costs = dm_costs_roofline(cl.gpu, err)) ||
        sched_opts_parse(&so, "strategy", strategy, err) < 0 || sched_opts_parse(&so, "tokens", tok, err) < 0 ||
        sched_build(m, &cl, gpus, costs, &so, &p, NULL, err) < 0) {
        dm_costs_free(costs);
        return NULL;
    }
    dm_costs_free(costs);
    return p;
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
         * the fp32 gradient scratch of the largest matrix */
        ok(e.state == 4.0 * 2048 * 2 + 4.0 * 64 * 3 + 4.0 * 2048, "optimizer state: %.0f bytes", e.state);
        /* the second buffers of that state (no copy of the bf16 weights) */
        ok(e.state_next == 4.0 * 2048 * 2 + 4.0 * 64 * 3, "second buffers of the state: %.0f bytes", e.state_next);
        /* one all-reduce carries at most both params (2112, even: no padding) */
        ok(e.max_coll >= 2048 && e.max_coll <= 2112 && e.comm == 3.0 * 2 * (double)e.max_coll,
           "collective buffers: 3 x %lld bf16", (long long)e.max_coll);
        /* one NS plan of 64 x 32: input and output in 2 bytes, work 4 x (64 x 32 + 2 x 32 x 32) */
        ok(e.ns == 2.0 * 2 * 2048 + 4.0 * (2048 + 2.0 * 32 * 32), "NS plans: %.0f bytes", e.ns);
        ok(e.total == e.weights_grads + e.activations + e.scratch + e.state + e.state_next + e.comm + e.ns + e.runtime,
           "total is the sum of the parts (%.0f bytes)", e.total);
    }
    ok(p && real_gpu_mem_estimate(m, p, 2, T, &e, &err) < 0, "rank 2 of a 2-rank program is refused (%s)", err.msg);
    dm_program_free(p);
    /* dmuon: each matrix has one owner, so the ranks together hold one copy of the state, and
     * rank 0 keeps an fp32 copy of every matrix (the reference before any step) */
    err.msg[0] = 0;
    p = plan(m, "dmuon", 2, T, &err);
    real_mem_est e0, e1;
    if (ok(p && real_gpu_mem_estimate(m, p, 0, T, &e0, &err) == 0 && real_gpu_mem_estimate(m, p, 1, T, &e1, &err) == 0,
           "dmuon estimates (%s)", p ? err.msg : "plan failed")) {
        double st = e0.state + e1.state - 2 * 4.0 * 2048; /* less the two gradient scratches */
        ok(e0.state >= 4.0 * 2112 + 4.0 * 2048, "dmuon rank 0 holds an fp32 copy of every matrix (%.0f bytes)", e0.state);
        ok(st <= 4.0 * 2048 * 3 + 4.0 * 64 * 4 && st >= 4.0 * 2048 * 2 + 4.0 * 64 * 3,
           "dmuon: one owner's state per matrix over the ranks (%.0f bytes)", st);
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
        dm_workload_opts wo = {4096, 0, 2};
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
    dm_model_free(m);
    return tap_done();
}
