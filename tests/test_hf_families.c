/* test_hf_families.c: the architecture `dmuon model import` fills (core/hf_import.c) and the
 * families beyond the bundled ones. (1) For the bundled models whose config.json is in
 * tests/data/hf, the imported streams, every stack's attention, routing and tied head, and every
 * tensor's use and stream equal the bundled file's. (2) mistral, mixtral, qwen3, qwen3_moe,
 * phi3, qwen2_moe, olmoe, qwen2_vl, paligemma, deepseek_v2, gpt_oss, gemma3_text, gemma3, olmo2, granite,
 * smollm3, starcoder2 and gpt_neox configs (written from memory of public models, each names its model in "_comment") import,
 * write, load back, total within 0.5% of the published parameter count, and carry the published
 * heads, kv heads, experts and top-k; glm4_moe (GLM-4.5, GLM-4.5-Air) against its model cards'
 * rounded totals (check_glm4_moe). (3) Inconsistent configs are refused with FILE:LINE:COL
 * and what was expected. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_import.h"
#include "model.h"
#include "tap.h"
#include "workload.h"

#define HF_DIR DM_SRCDIR "/tests/data/hf"
#define MODELS_DIR DM_SRCDIR "/models"

static int find_tensor(const dm_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return i;
    return -1;
}

static int find_stack(const dm_model *m, const char *name)
{
    for (int i = 0; i < m->n_stacks; i++)
        if (strcmp(m->stacks[i].name, name) == 0) return i;
    return -1;
}

static const char *stream_name(const dm_model *m, int s) { return m->streams[s].name; }

static const char *tied_name(const dm_model *m, const dm_stack *s)
{
    return s->tied_head < 0 ? "(none)" : m->tensors[s->tied_head].name;
}

/* Architecture of `a` against `b`: streams, each stack's stream, attention, moe and tied head,
 * each tensor's shape, count, layers, role, use and stream (tensors and stacks matched by name).
 * Returns the number of differences, the first few named. */
static int compare_arch(const dm_model *a, const dm_model *b, const char *what)
{
    int bad = 0;
#define DIFF(...) do { if (bad++ < 6) tap_diag(__VA_ARGS__); } while (0)
    if (a->n_streams != b->n_streams) DIFF("%s: %d streams, want %d", what, a->n_streams, b->n_streams);
    for (int i = 0; i < a->n_streams && i < b->n_streams; i++)
        if (strcmp(a->streams[i].name, b->streams[i].name) || a->streams[i].tokens != b->streams[i].tokens)
            DIFF("%s: stream %d is %s/%lld, want %s/%lld", what, i, a->streams[i].name, (long long)a->streams[i].tokens,
                 b->streams[i].name, (long long)b->streams[i].tokens);
    if (a->n_stacks != b->n_stacks) DIFF("%s: %d stacks, want %d", what, a->n_stacks, b->n_stacks);
    for (int i = 0; i < a->n_stacks; i++) {
        const dm_stack *s = &a->stacks[i];
        int j = find_stack(b, s->name);
        if (j < 0) {
            DIFF("%s: stack %s missing", what, s->name);
            continue;
        }
        const dm_stack *u = &b->stacks[j];
        if (s->layers != u->layers || strcmp(stream_name(a, s->stream), stream_name(b, u->stream)))
            DIFF("%s: stack %s: layers or stream differ", what, s->name);
        if (s->moe_experts != u->moe_experts || s->moe_top_k != u->moe_top_k)
            DIFF("%s: stack %s: moe %d/%d, want %d/%d", what, s->name, s->moe_experts, s->moe_top_k, u->moe_experts,
                 u->moe_top_k);
        if (strcmp(tied_name(a, s), tied_name(b, u)))
            DIFF("%s: stack %s: tied_head %s, want %s", what, s->name, tied_name(a, s), tied_name(b, u));
        if (s->n_attn != u->n_attn) {
            DIFF("%s: stack %s: %d attention blocks, want %d", what, s->name, s->n_attn, u->n_attn);
            continue;
        }
        for (int k = 0; k < s->n_attn; k++) {
            const dm_attention *x = &s->attn[k], *y = &u->attn[k];
            if (x->heads != y->heads || x->kv_heads != y->kv_heads || x->head_dim != y->head_dim ||
                x->v_head_dim != y->v_head_dim || x->causal != y->causal || x->length != y->length || x->rope != y->rope ||
                strcmp(stream_name(a, x->stream), stream_name(b, y->stream)) ||
                strcmp(stream_name(a, x->kv_stream), stream_name(b, y->kv_stream)) || x->window != y->window ||
                strcmp(x->window_layers ? x->window_layers : "", y->window_layers ? y->window_layers : ""))
                DIFF("%s: stack %s attention %d: %d heads (%d kv) x %d/%d causal %d, want %d (%d kv) x %d/%d causal %d",
                     what, s->name, k, x->heads, x->kv_heads, x->head_dim, x->v_head_dim, x->causal, y->heads,
                     y->kv_heads, y->head_dim, y->v_head_dim, y->causal);
        }
    }
    if (a->n_tensors != b->n_tensors) DIFF("%s: %d tensors, want %d", what, a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        const dm_tensor *t = &a->tensors[i];
        /* the same place first: names repeat where an entry is split into layer ranges */
        int j = i < b->n_tensors && strcmp(b->tensors[i].name, t->name) == 0 ? i : find_tensor(b, t->name);
        if (j < 0) {
            DIFF("%s: tensor %s missing", what, t->name);
            continue;
        }
        const dm_tensor *u = &b->tensors[j];
        if (t->rows != u->rows || t->cols != u->cols || t->ndim != u->ndim || t->count != u->count ||
            t->first_layer != u->first_layer || t->layer_span != u->layer_span || t->role != u->role ||
            strcmp(a->stacks[t->stack].name, b->stacks[u->stack].name))
            DIFF("%s: tensor %s: shape, count, stack, layers or role differ", what, t->name);
        if (t->use != u->use) DIFF("%s: tensor %s: use %s, want %s", what, t->name, dm_use_name(t->use), dm_use_name(u->use));
        if (strcmp(stream_name(a, t->stream), stream_name(b, u->stream)))
            DIFF("%s: tensor %s: stream %s, want %s", what, t->name, stream_name(a, t->stream), stream_name(b, u->stream));
    }
#undef DIFF
    return bad;
}

static dm_model *import(const char *config)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.json", HF_DIR, config);
    dm_model *m = NULL;
    dm_err err = {{0}};
    int rc = hf_import_config(path, &m, &err);
    ok(rc == 0, "%s imports%s%s", config, rc ? ": " : "", rc ? err.msg : "");
    return rc ? NULL : m;
}

/* (1) The imported architecture is the bundled file's. */
static void check_bundled(const char *config, const char *bundled)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.json", MODELS_DIR, bundled);
    dm_model *a = import(config), *b = NULL;
    dm_err err = {{0}};
    int rc = dm_model_load_file(path, &b, &err);
    if (a && ok(rc == 0, "%s loads%s%s", bundled, rc ? ": " : "", rc ? err.msg : "")) {
        ok(a->has_arch && compare_arch(a, b, config) == 0,
           "%s: streams, attention, moe, tied heads, uses and streams of the bundled %s.json", config, bundled);
    }
    dm_model_free(a);
    dm_model_free(b);
}

/* Write `a` with dm_model_write and read it back with the loader; returns the loaded model. */
static dm_model *roundtrip(const dm_model *a, const char *what)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "/tmp/dm_hf_families_%d.json", (int)getpid());
    dm_model *b = NULL;
    dm_err err = {{0}};
    int rc = dm_model_write(a, tmp, &err);
    if (rc == 0) rc = dm_model_load_file(tmp, &b, &err);
    unlink(tmp);
    if (!ok(rc == 0, "%s: written and loaded back%s%s", what, rc ? ": " : "", rc ? err.msg : "")) return NULL;
    ok(compare_arch(b, a, what) == 0 && dm_model_params(a) == dm_model_params(b),
       "%s: the file read back is the imported model, architecture included", what);
    return b;
}

typedef struct family_case {
    const char *config;       /* tests/data/hf/CONFIG.json */
    const char *model;        /* the public model it stands for */
    int64_t published;        /* published parameter count */
    int64_t muon;             /* Muon matrices */
    int heads, kv_heads, head_dim;
    int experts, top_k;       /* 0: dense */
    double active_b;          /* published active parameters (B), 0: not checked */
    int v_head_dim;           /* 0: head_dim (MLA: v_head_dim, head_dim nope + rope) */
    int tied;                 /* the head is the embedding (no lm_head) */
    double active_noemb_b;    /* published active parameters without the embedding (B), 0: not checked */
} family_case;

/* (2) A new family: import, write, load, published total, architecture, a step's work. */
static void check_family(const family_case *c)
{
    dm_model *a = import(c->config);
    if (!a) return;
    dm_model *b = roundtrip(a, c->config);
    int64_t p = dm_model_params(a);
    double rel = (double)(p - c->published) / (double)c->published;
    ok(rel <= 0.005 && rel >= -0.005, "%s: %lld parameters, %s publishes %lld (%+.4f%%)", c->config, (long long)p,
       c->model, (long long)c->published, 100 * rel);
    ok(dm_model_count_role(a, DM_ROLE_MUON) == c->muon, "%s: %lld Muon matrices (want %lld)", c->config,
       (long long)dm_model_count_role(a, DM_ROLE_MUON), (long long)c->muon);
    int st = find_stack(a, "layers");
    const dm_stack *s = st >= 0 ? &a->stacks[st] : NULL;
    int vd = c->v_head_dim ? c->v_head_dim : c->head_dim;
    ok(s && s->n_attn == 1 && s->attn[0].heads == c->heads && s->attn[0].kv_heads == c->kv_heads &&
       s->attn[0].head_dim == c->head_dim && s->attn[0].v_head_dim == vd && s->attn[0].causal,
       "%s: attention %d heads (%d kv) x %d (values %d), causal", c->config, c->heads, c->kv_heads, c->head_dim, vd);
    ok(s && s->moe_experts == c->experts && s->moe_top_k == c->top_k, "%s: moe %d experts, top %d (got %d, %d)",
       c->config, c->experts, c->top_k, s ? s->moe_experts : -1, s ? s->moe_top_k : -1);
    int e = find_tensor(a, "model.embed_tokens.weight"), h = find_tensor(a, "lm_head.weight"), hs = find_stack(a, "head");
    if (c->tied)
        ok(e >= 0 && a->tensors[e].use == DM_USE_EMBEDDING && a->tensors[e].role == DM_ROLE_ADAMW && h < 0 && hs >= 0 &&
           a->stacks[hs].tied_head == e, "%s: embedding looked up (adamw), the head tied to it", c->config);
    else
        ok(e >= 0 && a->tensors[e].use == DM_USE_EMBEDDING && a->tensors[e].role == DM_ROLE_ADAMW && h >= 0 &&
           a->tensors[h].role == DM_ROLE_ADAMW && a->stacks[a->tensors[h].stack].tied_head < 0,
           "%s: embedding looked up (adamw), untied lm_head (adamw)", c->config);
    int experts = 0, bad_use = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const dm_tensor *t = &a->tensors[i];
        if (t->use == DM_USE_EXPERT) experts++;
        if ((t->use == DM_USE_EXPERT) != (strstr(t->name, ".experts.") != NULL)) bad_use++;
        if (t->ndim == 1 && t->role != DM_ROLE_ADAMW) bad_use++;
        if (t->ndim == 1 && t->use != DM_USE_VECTOR && t->use != DM_USE_EXPERT) bad_use++;
    }
    ok(bad_use == 0 && (experts > 0) == (c->experts > 0),
       "%s: the routed experts (%d entries) and only they are expert; every 1-D tensor adamw", c->config, experts);
    if (b) {
        dm_workload_opts o = {4096, 4096, 2, 0, 0};
        dm_step_work w;
        dm_err err = {{0}};
        int rc = dm_step_work_sum(b, &o, &w, &err);
        if (ok(rc == 0 && w.attn_flops > 0, "%s: a step's work expands (attention %.3g FLOP)%s%s", c->config,
               rc ? 0 : w.attn_flops, rc ? ": " : "", rc ? err.msg : "") && c->active_b > 0) {
            double ab = w.active_params / 1e9;
            ok(ab > 0.98 * c->active_b && ab < 1.02 * c->active_b,
               "%s: %.3f B active parameters per token, %s publishes %.1f B (rounded)", c->config, ab, c->model,
               c->active_b);
        }
        if (rc == 0 && c->active_noemb_b > 0 && e >= 0) {
            double ab = (w.active_params - (double)a->tensors[e].rows * (double)a->tensors[e].cols) / 1e9;
            ok(ab > 0.995 * c->active_noemb_b && ab < 1.005 * c->active_noemb_b,
               "%s: %.3f B active parameters per token without the embedding, %s publishes %.2f B", c->config, ab,
               c->model, c->active_noemb_b);
        }
    }
    dm_model_free(a);
    dm_model_free(b);
}

/* Named tensors of the new families: the fused and per-head shapes and the expert names. */
static void check_shape(const char *config, const char *name, int64_t rows, int64_t cols, int64_t count, dm_role role)
{
    dm_model *a = import(config);
    if (!a) return;
    int i = find_tensor(a, name);
    const dm_tensor *t = i >= 0 ? &a->tensors[i] : NULL;
    char colstr[32];
    snprintf(colstr, sizeof colstr, ", %lld", (long long)cols);
    ok(t && t->rows == rows && (cols ? t->ndim == 2 && t->cols == cols : t->ndim == 1) && t->count == count &&
       t->role == role, "%s: %s is [%lld%s] x %lld, %s", config, name, (long long)rows, cols ? colstr : "",
       (long long)count, dm_role_name(role));
    dm_model_free(a);
}

static void check_absent(const char *config, const char *name)
{
    dm_model *a = import(config);
    if (!a) return;
    ok(find_tensor(a, name) < 0, "%s: no %s", config, name);
    dm_model_free(a);
}

/* The sliding window of the decoder stack "layers" as transformers applies it: `window` tokens
 * (0: none) on the layers `pattern` marks 's', cycled (NULL: every layer; model.h). */
static void check_window(const char *config, int64_t window, const char *pattern)
{
    dm_model *a = import(config);
    if (!a) return;
    const dm_attention *at = NULL;
    for (int s = 0; s < a->n_stacks; s++)
        if (strcmp(a->stacks[s].name, "layers") == 0 && a->stacks[s].n_attn) at = &a->stacks[s].attn[0];
    const char *got = at && at->window_layers ? at->window_layers : "(every layer)";
    ok(at && at->window == window && (window == 0 || strcmp(got, pattern ? pattern : "(every layer)") == 0),
       "%s: sliding window %lld on %s (%lld on %s)", config, (long long)window, pattern ? pattern : "every layer",
       at ? (long long)at->window : -1LL, got);
    dm_model_free(a);
}

/* The rotary embedding of stack `stack`'s first attention block: `rope` dims of each head. */
static void check_rope(const char *config, const char *stack, int rope, const char *why)
{
    dm_model *a = import(config);
    if (!a) return;
    int s = find_stack(a, stack), got = s >= 0 && a->stacks[s].n_attn ? a->stacks[s].attn[0].rope : -1;
    ok(got == rope, "%s: %s rotary over %d dims a head (%s; got %d)", config, stack, rope, why, got);
    dm_model_free(a);
}

static int write_doc(const char *what, const char *path, const char *doc) { return tap_write_file(what, path, doc); }

/* Import config text `doc` (written to a scratch file, removed after): hf_import_config's result,
 * -2 when the file could not be written (reported as a failed check). */
static int import_doc(const char *what, const char *doc, dm_model **out, dm_err *err)
{
    char path[256];
    snprintf(path, sizeof path, "/tmp/dm_hf_doc_%d.json", (int)getpid());
    *out = NULL;
    if (write_doc(what, path, doc)) return -2;
    int rc = hf_import_config(path, out, err);
    unlink(path);
    return rc;
}

/* Qwen2's sliding window with use_sliding_window true: from layer max_window_layers on (no
 * period: the pattern is the whole list), kept through a written file. */
static void check_qwen_window(void)
{
    const char *doc = "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
                      " \"num_hidden_layers\": 5, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
                      " \"vocab_size\": 1000, \"use_sliding_window\": true, \"sliding_window\": 64,\n"
                      " \"max_window_layers\": 2}\n";
    dm_model *a = NULL, *b = NULL;
    dm_err err = {{0}};
    int rc = import_doc("qwen2 sliding window", doc, &a, &err);
    if (rc == -2) return;
    const dm_attention *at = rc == 0 && a->n_stacks > 1 && a->stacks[1].n_attn ? &a->stacks[1].attn[0] : NULL;
    ok(at && at->window == 64 && at->window_layers && strcmp(at->window_layers, "ffsss") == 0,
       "qwen2, use_sliding_window, max_window_layers 2 of 5: window 64 on layers 2-4 (%s)",
       at && at->window_layers ? at->window_layers : rc ? err.msg : "none");
    if (a && (b = roundtrip(a, "qwen2 sliding window"))) {
        ok(dm_attn_window(&b->stacks[1].attn[0], 1) == 0 && dm_attn_window(&b->stacks[1].attn[0], 4) == 64,
           "qwen2 sliding window read back: layer 1 full, layer 4 windowed");
    }
    dm_model_free(a);
    dm_model_free(b);
}

/* qwen3_moe layer selection: decoder_sparse_step 2 and mlp_only_layers [3] over 6 layers give
 * routed experts on layers 1 and 5 only, dense MLPs on 0, 2, 3, 4, as transformers builds it. */
static void check_qwen3_moe_layers(void)
{
    const char *doc = "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
                      " \"num_hidden_layers\": 6, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
                      " \"head_dim\": 16, \"vocab_size\": 1000, \"num_experts\": 8, \"num_experts_per_tok\": 2,\n"
                      " \"moe_intermediate_size\": 32, \"decoder_sparse_step\": 2, \"mlp_only_layers\": [3]}\n";
    dm_model *a = NULL, *b = NULL;
    dm_err err = {{0}};
    int rc = import_doc("qwen3_moe sparse step", doc, &a, &err);
    if (rc == -2) return;
    if (!ok(rc == 0, "qwen3_moe, decoder_sparse_step 2, mlp_only_layers [3]: imports%s%s", rc ? ": " : "",
            rc ? err.msg : ""))
        return;
    int sparse[6] = {0}, dense[6] = {0}, bad = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const dm_tensor *t = &a->tensors[i];
        int *mark = strstr(t->name, "mlp.experts.{e}.down_proj") ? sparse
                    : strcmp(t->name, "layers.*.mlp.down_proj.weight") == 0 ? dense : NULL;
        if (!mark) continue;
        if (t->count != (mark == sparse ? 8 : 1) * t->layer_span) bad++;
        for (int l = t->first_layer; l < t->first_layer + t->layer_span; l++) mark[l]++;
    }
    static const int want[6] = {0, 1, 0, 0, 0, 1};
    for (int l = 0; l < 6; l++)
        if (sparse[l] != want[l] || dense[l] != !want[l]) bad++;
    ok(bad == 0, "qwen3_moe: experts on layers 1 and 5, dense MLPs on 0, 2, 3, 4");
    /* 6 x (attention 64x64 q + 2 x 32x64 k/v + 64x64 o, 2 x 16 q/k norms, 2 x 64 norms)
     * + 2 sparse x (router 8x64 + 8 x 3 x 32x64) + 4 dense x 3 x 256x64 + 2 x 1000x64 + 64 */
    int64_t want_p = 6 * (4096 + 2 * 2048 + 4096 + 32 + 128) + 2 * (512 + 8 * 3 * 2048) + 4 * 3 * 16384 +
                     2 * 64000 + 64;
    ok(dm_model_params(a) == want_p, "qwen3_moe: %lld parameters (want %lld)", (long long)dm_model_params(a),
       (long long)want_p);
    b = roundtrip(a, "qwen3_moe sparse step");
    dm_model_free(a);
    dm_model_free(b);
}

/* gpt-oss: fused gate/up experts with their biases (1-D expert tensors), the router's bias, the
 * sinks; each expert's bias a vector pass over its routed tokens in the layer's work. */
static void check_gpt_oss(void)
{
    const char *g = "gpt-oss-20b";
    check_shape(g, "layers.*.mlp.experts.{e}.gate_up_proj", 5760, 2880, 32 * 24, DM_ROLE_MUON);
    check_shape(g, "layers.*.mlp.experts.{e}.gate_up_proj_bias", 5760, 0, 32 * 24, DM_ROLE_ADAMW);
    check_shape(g, "layers.*.mlp.experts.{e}.down_proj_bias", 2880, 0, 32 * 24, DM_ROLE_ADAMW);
    check_shape(g, "layers.*.mlp.router.bias", 32, 0, 24, DM_ROLE_ADAMW);
    check_shape(g, "layers.*.self_attn.sinks", 64, 0, 24, DM_ROLE_ADAMW);
    check_shape(g, "layers.*.self_attn.o_proj.bias", 2880, 0, 24, DM_ROLE_ADAMW);
    dm_model *a = import(g);
    if (!a) return;
    int bi = find_tensor(a, "layers.*.mlp.experts.{e}.gate_up_proj_bias");
    ok(bi >= 0 && a->tensors[bi].use == DM_USE_EXPERT, "gpt-oss-20b: the experts' biases are expert tensors");
    /* layer 0 (stack layers follows embed): 4096 tokens x top 4 over 32 experts = 512 rows each */
    int64_t n = 0;
    dm_matrix *mats = NULL;
    dm_workload_opts o = {4096, 4096, 2, 0, 0};
    dm_layer_work w;
    dm_err err = {{0}};
    int found = 0, rc = dm_model_matrices(a, -1, &mats, &n, &err) == 0 ? dm_layer_work_build(a, mats, n, a->stacks[find_stack(a, "layers")].first_global, &o, &w,
                                                   &err)
                             : -1;
    for (int i = 0; rc == 0 && i < w.n_fwd; i++) {
        const dm_kernel *k = &w.fwd[i];
        if (k->op == DM_KOP_VECTOR && k->m == 512 && k->n == 5760 && k->count == 32 && k->slot >= 0 &&
            w.slots[k->slot].routed)
            found++;
    }
    ok(rc == 0 && found == 1, "gpt-oss-20b: the gate/up bias is one vector pass of 32 experts x 512 routed rows x 5760%s%s",
       rc ? ": " : "", rc ? err.msg : "");
    if (rc == 0) dm_layer_work_free(&w);
    free(mats);
    dm_model_free(a);
}

/* Gemma-3 4B: the text_config's absent keys from Gemma3TextConfig's defaults (said in the source),
 * the SigLIP tower on 4096 patches per image pooled to 256 tokens for the projection. */
static void check_gemma3(void)
{
    dm_model *a = import("gemma-3-4b-pt");
    if (!a) return;
    int vb = find_stack(a, "vision_tower.encoder.layers"), pj = find_stack(a, "multi_modal_projector");
    ok(strstr(a->source, "Gemma3TextConfig's defaults: num_attention_heads 8, vocab_size 262208, head_dim 256, "
                         "num_key_value_heads 4") != NULL,
       "gemma-3-4b-pt: the source names the defaults taken: %s", a->source);
    ok(vb >= 0 && pj >= 0 && a->streams[a->stacks[vb].stream].tokens == 4096 &&
       a->streams[a->stacks[pj].stream].tokens == 256 && !a->stacks[vb].attn[0].causal,
       "gemma-3-4b-pt: 4096 patches per image in the tower (bidirectional), 256 pooled tokens in the projector");
    dm_model_free(a);
    check_shape("gemma-3-4b-pt", "multi_modal_projector.mm_input_projection_weight", 2560, 1152, 1, DM_ROLE_MUON);
    check_shape("gemma-3-4b-pt", "multi_modal_projector.mm_soft_emb_norm.weight", 1152, 0, 1, DM_ROLE_ADAMW);
    check_shape("gemma-3-4b-pt", "layers.*.self_attn.k_norm.weight", 256, 0, 34, DM_ROLE_ADAMW);
}

/* (3) A config that must be refused: the message starts with the file, then `where`
 * (":LINE:COL: expected ...") and contains `want`. */
static void check_bad(const char *what, const char *doc, const char *where, const char *want)
{
    char path[256];
    snprintf(path, sizeof path, "/tmp/dm_bad_family_%d.json", (int)getpid());
    if (write_doc(what, path, doc)) return;
    dm_model *m = NULL;
    dm_err err = {{0}};
    int rc = hf_import_config(path, &m, &err);
    size_t n = strlen(path);
    ok(rc == -1 && m == NULL && strncmp(err.msg, path, n) == 0 && strncmp(err.msg + n, where, strlen(where)) == 0 &&
       strstr(err.msg, want) != NULL, "%s: refused at %s: %s", what, where, err.msg);
    dm_model_free(m);
    unlink(path);
}

#define LM "\"hidden_size\": 64, \"intermediate_size\": 256, \"num_hidden_layers\": 2, \"vocab_size\": 1000,\n"

/* glm4_moe: GLM-4.5 and GLM-4.5-Air. Their model cards give rounded totals (355 B and 106 B)
 * without the MTP layer, and active parameters (32 B and 12 B) without the embedding, the output
 * head and the MTP layer: the import's counts, the MTP stack left out, within 1% of the totals and
 * 3% of the active (the cards' rounding). Attention biases on q/k/v only, per-head q/k norms
 * under use_qk_norm, the DeepSeek-V3 MoE (router and its bias, experts, shared experts, the dense
 * first layers) and the MTP layer with its own decoder layer. */
static void check_glm4_moe(void)
{
    static const struct {
        const char *config;
        double total_b, active_b;
        int64_t hidden, experts, moe_inter, dense, layers;
        int qk_norm;
    } c[] = {{"glm-4.5", 355, 32, 5120, 160, 1536, 3, 92, 1}, {"glm-4.5-air", 106, 12, 4096, 128, 1408, 1, 46, 0}};
    for (int i = 0; i < 2; i++) {
        dm_model *a = import(c[i].config);
        if (!a) continue;
        dm_model *b = roundtrip(a, c[i].config);
        int mtp = find_stack(a, "mtp"), ly = find_stack(a, "layers"), e = find_tensor(a, "model.embed_tokens.weight"),
            h = find_tensor(a, "lm_head.weight");
        double main_p = 0;
        for (int t = 0; t < a->n_tensors; t++)
            if (a->tensors[t].stack != mtp)
                main_p += (double)a->tensors[t].rows * (double)a->tensors[t].cols * (double)a->tensors[t].count;
        ok(fabs(main_p / 1e9 / c[i].total_b - 1) < 0.01, "%s: %.3f B parameters without the MTP layer, the model card's "
           "%.0f B (rounded)", c[i].config, main_p / 1e9, c[i].total_b);
        if (b && e >= 0 && h >= 0 && mtp >= 0 && ly >= 0) {
            dm_workload_opts o = {4096, 4096, 2, 0, 0};
            dm_step_work w;
            dm_err err = {{0}};
            int rc = dm_step_work_sum(b, &o, &w, &err);
            /* the MTP layer's active: its eh_proj, attention and norms whole, its MoE at top_k */
            double mtp_act = 0, emb = (double)a->tensors[e].rows * (double)a->tensors[e].cols;
            for (int t = 0; t < a->n_tensors; t++) {
                const dm_tensor *x = &a->tensors[t];
                if (x->stack != mtp) continue;
                double p = (double)x->rows * (double)x->cols * (double)x->count;
                mtp_act += x->use == DM_USE_EXPERT ? p * a->stacks[mtp].moe_top_k / a->stacks[mtp].moe_experts : p;
            }
            double act = rc ? 0 : (w.active_params - 2 * emb - mtp_act) / 1e9;
            ok(rc == 0 && fabs(act / c[i].active_b - 1) < 0.03, "%s: %.3f B active per token without the embedding, the "
               "head and the MTP layer, the model card's %.0f B", c[i].config, act, c[i].active_b);
        }
        const dm_stack *s = ly >= 0 ? &a->stacks[ly] : NULL;
        ok(s && s->moe_experts == c[i].experts && s->moe_top_k == 8 && s->n_attn == 1 && s->attn[0].heads == 96 &&
           s->attn[0].kv_heads == 8 && s->attn[0].head_dim == 128 && mtp >= 0 && a->stacks[mtp].layers == 1 &&
           a->stacks[mtp].moe_experts == c[i].experts && a->stacks[mtp].n_attn == 1 && h >= 0 &&
           a->stacks[mtp].tied_head == h, "%s: %lld experts top 8, 96 heads (8 kv) x 128, one MTP layer on the output "
           "head", c[i].config, (long long)c[i].experts);
        dm_model_free(a);
        dm_model_free(b);
        int64_t L = c[i].layers, hd = c[i].hidden, moe = L - c[i].dense;
        check_shape(c[i].config, "layers.*.self_attn.q_proj.weight", 12288, hd, L, DM_ROLE_MUON);
        check_shape(c[i].config, "layers.*.self_attn.k_proj.bias", 1024, 0, L, DM_ROLE_ADAMW);
        check_absent(c[i].config, "layers.*.self_attn.o_proj.bias");
        if (c[i].qk_norm) check_shape(c[i].config, "layers.*.self_attn.q_norm.weight", 128, 0, L, DM_ROLE_ADAMW);
        else check_absent(c[i].config, "layers.*.self_attn.q_norm.weight");
        check_shape(c[i].config, "layers.*.mlp.gate_proj.weight", c[i].dense == 3 ? 12288 : 10944, hd, c[i].dense,
                    DM_ROLE_MUON);
        check_shape(c[i].config, "layers.*.mlp.gate.weight", c[i].experts, hd, moe, DM_ROLE_MUON);
        check_shape(c[i].config, "layers.*.mlp.gate.e_score_correction_bias", c[i].experts, 0, moe, DM_ROLE_ADAMW);
        check_shape(c[i].config, "layers.*.mlp.experts.{e}.down_proj.weight", hd, c[i].moe_inter, moe * c[i].experts,
                    DM_ROLE_MUON);
        check_shape(c[i].config, "layers.*.mlp.shared_experts.up_proj.weight", c[i].moe_inter, hd, moe, DM_ROLE_MUON);
        check_shape(c[i].config, "mtp.*.eh_proj.weight", hd, 2 * hd, 1, DM_ROLE_MUON);
        check_shape(c[i].config, "mtp.*.self_attn.v_proj.weight", 1024, hd, 1, DM_ROLE_MUON);
        check_shape(c[i].config, "mtp.*.mlp.experts.{e}.gate_proj.weight", c[i].moe_inter, hd, c[i].experts,
                    DM_ROLE_MUON);
    }
}

int main(void)
{
    /* (1) */
    check_bundled("qwen2.5-7b", "qwen2.5-7b");
    check_bundled("qwen2.5-3b", "qwen2.5-3b");
    check_bundled("llama-3.1-8b", "llama-3.1-8b");
    check_bundled("llama-3.2-3b", "llama-3.2-3b");
    check_bundled("qwen2.5-vl-3b", "qwen2.5-vl-3b");
    check_bundled("moonlight-16b-a3b", "moonlight-16b-a3b");
    check_bundled("deepseek-v3", "deepseek-v3");
    check_bundled("kimi-k2", "kimi-k2");
    dm_model *vl = import("qwen2.5-vl-3b");
    ok(vl && strstr(vl->source, "vision tokens per sample 1024") && strstr(vl->source, "256 after the 2x2 merger") &&
       strstr(vl->source, "an assumption"), "qwen2.5-vl-3b: the source states the assumed tower tokens: %s",
       vl ? vl->source : "(none)");
    dm_model_free(vl);

    /* (2) published totals: HuggingFace safetensors parameter counts of the models named;
     * active parameters as the model cards round them. */
    static const family_case cases[] = {
        {"mistral-7b-v0.1", "mistralai/Mistral-7B-v0.1", 7241732096LL, 32 * 7, 32, 8, 128, 0, 0, 0, 0, 0, 0},
        {"mixtral-8x7b-v0.1", "mistralai/Mixtral-8x7B-v0.1", 46702792704LL, 32 * (4 + 1 + 8 * 3), 32, 8, 128, 8, 2,
         12.9, 0, 0, 0},
        {"qwen3-8b", "Qwen/Qwen3-8B", 8190735360LL, 36 * 7, 32, 8, 128, 0, 0, 0, 0, 0, 0},
        {"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 30532122624LL, 48 * (4 + 1 + 128 * 3), 32, 4, 128, 128, 8, 3.3, 0, 0, 0},
        {"phi-3-mini-4k-instruct", "microsoft/Phi-3-mini-4k-instruct", 3821079552LL, 32 * 4, 32, 32, 96, 0, 0, 0, 0, 0, 0},
        /* the next three: the totals their model cards round to (14.3 B, 6.92 B, 15.7 B) */
        /* 2.7 B active; 4 attention + router + 60 x 3 experts + 3 shared + the shared expert's gate
         * per layer */
        {"qwen1.5-moe-a2.7b", "Qwen/Qwen1.5-MoE-A2.7B", 14300000000LL, 24 * (4 + 1 + 60 * 3 + 3 + 1), 16, 16, 128, 60,
         4, 2.7, 0, 0, 0},
        /* 1.3 B active (the OLMoE paper) */
        {"olmoe-1b-7b-0924", "allenai/OLMoE-1B-7B-0924", 6920000000LL, 16 * (4 + 1 + 64 * 3), 16, 16, 128, 64, 8, 1.3, 0, 0, 0},
        /* its model card's 2.4 B active leaves out the embedding: not checked;
         * q_proj (q_lora_rank null), kv_a, kv_b, o; one dense layer; 26 x (router + 64 x 3 + 3 shared) */
        /* 8.29 B (its model card); the language model's 7 per layer, the tower's 4 per block and the
         * merger's 2 */
        {"qwen2-vl-7b", "Qwen/Qwen2-VL-7B", 8290000000LL, 28 * 7 + 32 * 4 + 2, 28, 4, 128, 0, 0, 0, 0, 0, 0},
        /* the tied 2B (2.21 B on its model card) */
        {"qwen2-vl-2b", "Qwen/Qwen2-VL-2B", 2210000000LL, 28 * 7 + 32 * 4 + 2, 12, 2, 128, 0, 0, 0, 0, 1, 0},
        /* PaliGemma (pi0's base): Gemma-2B tied + SigLIP So400m/14 at 224 px + the projector, 2.92 B
         * on its model card */
        {"paligemma-3b-pt-224", "google/paligemma-3b-pt-224", 2920000000LL, 18 * 7 + 27 * 6 + 1, 8, 1, 256, 0, 0, 0, 0,
         1, 0},
        {"deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite", 15700000000LL, 27 * 4 + 3 + 26 * (1 + 64 * 3 + 3), 16, 16,
         192, 64, 6, 0, 128, 0, 0},
        /* gpt-oss: OpenAI's model card (20.91 B and 116.83 B; active 3.61 B and 5.13 B without the
         * embedding); 4 attention + router + experts x (fused gate/up, down) per layer */
        {"gpt-oss-20b", "openai/gpt-oss-20b", 20910000000LL, 24 * (4 + 1 + 32 * 2), 64, 8, 64, 32, 4, 0, 0, 0, 3.61},
        {"gpt-oss-120b", "openai/gpt-oss-120b", 116830000000LL, 36 * (4 + 1 + 128 * 2), 64, 8, 64, 128, 4, 0, 0, 0,
         5.13},
        /* HuggingFace safetensors counts; Gemma-3 4B: 34 x 7 + SigLIP 27 x 6 + the projection */
        {"gemma-3-1b-pt", "google/gemma-3-1b-pt", 999885952LL, 26 * 7, 4, 1, 256, 0, 0, 0, 0, 1, 0},
        {"gemma-3-4b-pt", "google/gemma-3-4b-pt", 4300079472LL, 34 * 7 + 27 * 6 + 1, 8, 4, 256, 0, 0, 0, 0, 1, 0},
        /* the totals their model cards round to (7.30 B, 8.17 B, 3.08 B) */
        {"olmo-2-1124-7b", "allenai/OLMo-2-1124-7B", 7300000000LL, 32 * 7, 32, 32, 128, 0, 0, 0, 0, 0, 0},
        {"granite-3.1-8b-base", "ibm-granite/granite-3.1-8b-base", 8170000000LL, 40 * 7, 32, 8, 128, 0, 0, 0, 0, 1, 0},
        {"smollm3-3b", "HuggingFaceTB/SmolLM3-3B", 3080000000LL, 36 * 7, 16, 4, 128, 0, 0, 0, 0, 1, 0},
        /* StarCoder2-3B's model card (3.03 B, tied); Pythia-1B's exact count; 4 + 2 (non-gated MLP)
         * and fused query_key_value + dense + 2 per layer */
        {"starcoder2-3b", "bigcode/starcoder2-3b", 3030000000LL, 30 * 6, 24, 2, 128, 0, 0, 0, 0, 1, 0},
        {"pythia-1b", "EleutherAI/pythia-1b", 1011781632LL, 16 * 4, 8, 8, 256, 0, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_family(&cases[i]);
    check_shape("mixtral-8x7b-v0.1", "layers.*.block_sparse_moe.gate.weight", 8, 4096, 32, DM_ROLE_MUON);
    check_shape("mixtral-8x7b-v0.1", "layers.*.block_sparse_moe.experts.{e}.w1.weight", 14336, 4096, 256, DM_ROLE_MUON);
    check_shape("mixtral-8x7b-v0.1", "layers.*.block_sparse_moe.experts.{e}.w2.weight", 4096, 14336, 256, DM_ROLE_MUON);
    check_shape("mixtral-8x7b-v0.1", "layers.*.block_sparse_moe.experts.{e}.w3.weight", 14336, 4096, 256, DM_ROLE_MUON);
    check_shape("qwen3-8b", "layers.*.self_attn.q_norm.weight", 128, 0, 36, DM_ROLE_ADAMW);
    check_shape("qwen3-8b", "layers.*.self_attn.k_norm.weight", 128, 0, 36, DM_ROLE_ADAMW);
    check_absent("qwen3-8b", "layers.*.self_attn.q_proj.bias");
    check_shape("qwen3-30b-a3b", "layers.*.mlp.gate.weight", 128, 2048, 48, DM_ROLE_MUON);
    check_shape("qwen3-30b-a3b", "layers.*.mlp.experts.{e}.up_proj.weight", 768, 2048, 128 * 48, DM_ROLE_MUON);
    check_absent("qwen3-30b-a3b", "layers.*.mlp.shared_experts.up_proj.weight");
    check_shape("phi-3-mini-4k-instruct", "layers.*.self_attn.qkv_proj.weight", 3 * 3072, 3072, 32, DM_ROLE_MUON);
    check_shape("phi-3-mini-4k-instruct", "layers.*.mlp.gate_up_proj.weight", 2 * 8192, 3072, 32, DM_ROLE_MUON);
    check_shape("mistral-7b-v0.1", "layers.*.self_attn.k_proj.weight", 1024, 4096, 32, DM_ROLE_MUON);
    check_window("mistral-7b-v0.1", 4096, NULL);
    check_window("phi-3-mini-4k-instruct", 2047, NULL);
    check_window("starcoder2-3b", 4096, NULL);
    check_window("gemma2-2b", 4096, "sf");         /* even layers (from 0) slide */
    check_window("gemma-3-1b-pt", 512, "sssssf");  /* all but every 6th */
    check_window("gemma-3-4b-pt", 1024, "sssssf"); /* sliding_window_pattern's default 6 */
    check_window("gpt-oss-20b", 128, "sf");        /* layer_types */
    check_rope("llama-3.2-3b", "layers", 128, "every dim");
    check_rope("pythia-1b", "layers", 64, "rotary_pct 0.25 of 256");
    check_rope("glm-4.5", "layers", 64, "partial_rotary_factor 0.5 of 128");
    check_rope("deepseek-v3", "layers", 64, "qk_rope_head_dim");
    check_rope("qwen2-vl-2b", "visual.blocks", 80, "the vision blocks' 2-D rotary");
    check_rope("paligemma-3b-pt-224", "vision_tower.encoder.layers", 0, "SigLIP: learned positions");
    check_window("mixtral-8x7b-v0.1", 0, NULL);    /* null */
    check_window("qwen2.5-7b", 0, NULL);           /* use_sliding_window false */
    check_window("qwen3-8b", 0, NULL);
    check_shape("qwen1.5-moe-a2.7b", "layers.*.mlp.shared_expert.up_proj.weight", 5632, 2048, 24, DM_ROLE_MUON);
    check_shape("qwen1.5-moe-a2.7b", "layers.*.mlp.shared_expert_gate.weight", 1, 2048, 24, DM_ROLE_MUON);
    check_shape("qwen1.5-moe-a2.7b", "layers.*.self_attn.k_proj.bias", 2048, 0, 24, DM_ROLE_ADAMW);
    check_shape("olmoe-1b-7b-0924", "layers.*.self_attn.q_norm.weight", 2048, 0, 16, DM_ROLE_ADAMW);
    check_shape("olmoe-1b-7b-0924", "layers.*.self_attn.k_norm.weight", 2048, 0, 16, DM_ROLE_ADAMW);
    check_shape("olmoe-1b-7b-0924", "layers.*.mlp.experts.{e}.down_proj.weight", 2048, 1024, 64 * 16, DM_ROLE_MUON);
    check_absent("olmoe-1b-7b-0924", "layers.*.mlp.down_proj.weight");
    check_shape("deepseek-v2-lite", "layers.*.self_attn.q_proj.weight", 16 * 192, 2048, 27, DM_ROLE_MUON);
    check_shape("deepseek-v2-lite", "layers.*.mlp.shared_experts.down_proj.weight", 2048, 2 * 1408, 26, DM_ROLE_MUON);
    check_absent("deepseek-v2-lite", "layers.*.mlp.gate.e_score_correction_bias");
    check_shape("qwen2-vl-7b", "visual.blocks.*.mlp.fc1.weight", 5120, 1280, 32, DM_ROLE_MUON);
    check_shape("qwen2-vl-7b", "visual.blocks.*.norm1.bias", 1280, 0, 32, DM_ROLE_ADAMW);
    check_shape("qwen2-vl-7b", "visual.merger.mlp.2.weight", 3584, 5120, 1, DM_ROLE_MUON);
    check_absent("qwen2-vl-7b", "visual.blocks.*.mlp.gate_proj.weight");
    {
        /* the tower's stated tokens */
        dm_model *v2 = import("qwen2-vl-2b");
        ok(v2 && strstr(v2->source, "vision tokens per sample 1024") && !strstr(v2->source, "window"),
           "qwen2-vl-2b: the source states the assumed tower tokens, no window attention: %s", v2 ? v2->source : "");
        dm_model_free(v2);
    }
    {
        /* PaliGemma: the tower on a vision stream of 256 tokens, bidirectional 16 x 72 */
        dm_model *pg = import("paligemma-3b-pt-224");
        int st = pg ? find_stack(pg, "vision_tower.encoder.layers") : -1;
        const dm_stack *vs = st >= 0 ? &pg->stacks[st] : NULL;
        ok(vs && vs->layers == 27 && pg->streams[vs->stream].tokens == 256 && vs->n_attn == 1 &&
           vs->attn[0].heads == 16 && vs->attn[0].head_dim == 72 && !vs->attn[0].causal &&
           strstr(pg->source, "vision tokens per sample 256"),
           "paligemma: 27 SigLIP blocks on a stream of 256 tokens, 16 heads x 72, bidirectional; the source says so");
        dm_model_free(pg);
    }
    check_shape("paligemma-3b-pt-224", "vision_tower.encoder.layers.*.mlp.fc1.weight", 4304, 1152, 27, DM_ROLE_MUON);
    check_shape("paligemma-3b-pt-224", "vision_tower.encoder.layers.*.self_attn.out_proj.bias", 1152, 0, 27,
                DM_ROLE_ADAMW);
    check_shape("paligemma-3b-pt-224", "multi_modal_projector.linear.weight", 2048, 1152, 1, DM_ROLE_MUON);
    check_shape("paligemma-3b-pt-224", "layers.*.self_attn.k_proj.weight", 256, 2048, 18, DM_ROLE_MUON);
    check_qwen3_moe_layers();
    check_qwen_window();
    check_glm4_moe();
    check_gpt_oss();
    check_gemma3();
    check_shape("olmo-2-1124-7b", "layers.*.self_attn.q_norm.weight", 4096, 0, 32, DM_ROLE_ADAMW);
    check_shape("olmo-2-1124-7b", "layers.*.self_attn.k_norm.weight", 4096, 0, 32, DM_ROLE_ADAMW);
    check_shape("olmo-2-1124-7b", "layers.*.post_feedforward_layernorm.weight", 4096, 0, 32, DM_ROLE_ADAMW);
    check_absent("olmo-2-1124-7b", "layers.*.input_layernorm.weight");
    check_shape("gemma-3-1b-pt", "layers.*.self_attn.q_norm.weight", 256, 0, 26, DM_ROLE_ADAMW);
    check_shape("gemma-3-1b-pt", "layers.*.pre_feedforward_layernorm.weight", 1152, 0, 26, DM_ROLE_ADAMW);
    check_absent("gemma-3-1b-pt", "layers.*.mlp.gate_proj.bias");
    check_shape("granite-3.1-8b-base", "layers.*.mlp.up_proj.weight", 12800, 4096, 40, DM_ROLE_MUON);
    check_shape("smollm3-3b", "layers.*.self_attn.k_proj.weight", 512, 2048, 36, DM_ROLE_MUON);
    check_shape("starcoder2-3b", "layers.*.mlp.c_fc.bias", 12288, 0, 30, DM_ROLE_ADAMW);
    check_shape("starcoder2-3b", "layers.*.self_attn.o_proj.bias", 3072, 0, 30, DM_ROLE_ADAMW);
    check_shape("starcoder2-3b", "layers.*.input_layernorm.bias", 3072, 0, 30, DM_ROLE_ADAMW);
    check_shape("starcoder2-3b", "model.norm.bias", 3072, 0, 1, DM_ROLE_ADAMW);
    check_absent("starcoder2-3b", "layers.*.mlp.gate_proj.weight");
    check_shape("pythia-1b", "layers.*.attention.query_key_value.weight", 3 * 2048, 2048, 16, DM_ROLE_MUON);
    check_shape("pythia-1b", "layers.*.attention.query_key_value.bias", 3 * 2048, 0, 16, DM_ROLE_ADAMW);
    check_shape("pythia-1b", "layers.*.mlp.dense_4h_to_h.weight", 2048, 8192, 16, DM_ROLE_MUON);
    check_shape("pythia-1b", "layers.*.post_attention_layernorm.bias", 2048, 0, 16, DM_ROLE_ADAMW);

    /* (3) */
    check_bad("mixtral top_k above the experts",
              "{\"model_type\": \"mixtral\", " LM " \"num_attention_heads\": 4, \"num_local_experts\": 8,\n"
              " \"num_experts_per_tok\": 9}\n",
              ":3:25: expected", "\"num_experts_per_tok\" (9) at most \"num_local_experts\" (8)");
    check_bad("qwen3_moe top_k above the experts",
              "{\"model_type\": \"qwen3_moe\", " LM " \"num_attention_heads\": 4, \"num_experts\": 4,\n"
              " \"num_experts_per_tok\": 5, \"moe_intermediate_size\": 32}\n",
              ":3:25: expected", "\"num_experts_per_tok\" (5) at most \"num_experts\" (4)");
    check_bad("deepseek_v3 top_k above the experts",
              "{\"model_type\": \"deepseek_v3\", " LM " \"num_attention_heads\": 4, \"q_lora_rank\": null,\n"
              " \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 16,\n"
              " \"n_routed_experts\": 4, \"num_experts_per_tok\": 6, \"moe_intermediate_size\": 32}\n",
              ":4:48: expected", "\"num_experts_per_tok\" (6) at most \"n_routed_experts\" (4)");
    check_bad("deepseek_v3 odd qk_rope_head_dim (found by fuzz_hf)",
              "{\"model_type\": \"deepseek_v3\", " LM " \"num_attention_heads\": 4, \"q_lora_rank\": null,\n"
              " \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 9, \"v_head_dim\": 16,\n"
              " \"n_routed_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32}\n",
              ":3:66: expected", "\"qk_rope_head_dim\" to be even (the rotary embedding turns pairs of dims)");
    check_bad("a negative sliding_window",
              "{\"model_type\": \"mistral\", " LM " \"num_attention_heads\": 4, \"sliding_window\": -3}\n",
              ":2:46: expected", "\"sliding_window\" to be null, 0 or a whole number of tokens");
    check_bad("mistral heads not a multiple of kv heads",
              "{\"model_type\": \"mistral\", " LM " \"num_attention_heads\": 4,\n \"num_key_value_heads\": 3}\n",
              ":3:25: expected", "\"num_key_value_heads\" (3) to divide \"num_attention_heads\" (4)");
    check_bad("qwen3 kv heads above heads",
              "{\"model_type\": \"qwen3\", " LM " \"num_attention_heads\": 4, \"num_key_value_heads\": 8}\n",
              ":2:51: expected", "\"num_key_value_heads\" (8) to divide");
    check_bad("phi3 heads not dividing hidden, no head_dim",
              "{\"model_type\": \"phi3\", " LM " \"num_attention_heads\": 6}\n",
              ":2:25: expected", "\"num_attention_heads\" (6) to divide \"hidden_size\" (64)");
    check_bad("mixtral without num_local_experts",
              "{\"model_type\": \"mixtral\", " LM " \"num_attention_heads\": 4, \"num_experts_per_tok\": 2}\n",
              ":1:1: expected", "field \"num_local_experts\"");
    check_bad("mixtral without num_experts_per_tok",
              "{\"model_type\": \"mixtral\", " LM " \"num_attention_heads\": 4, \"num_local_experts\": 8}\n",
              ":1:1: expected", "field \"num_experts_per_tok\"");
    check_bad("qwen3_moe without moe_intermediate_size",
              "{\"model_type\": \"qwen3_moe\", " LM " \"num_attention_heads\": 4, \"num_experts\": 8,\n"
              " \"num_experts_per_tok\": 2}\n",
              ":1:1: expected", "field \"moe_intermediate_size\"");
    check_bad("qwen3_moe decoder_sparse_step 0",
              "{\"model_type\": \"qwen3_moe\", " LM " \"num_attention_heads\": 4, \"num_experts\": 8,\n"
              " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, \"decoder_sparse_step\": 0}\n",
              ":3:80: expected", "\"decoder_sparse_step\" in [1,");
    check_bad("qwen3_moe mlp_only_layers past the last layer",
              "{\"model_type\": \"qwen3_moe\", " LM " \"num_attention_heads\": 4, \"num_experts\": 8,\n"
              " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, \"mlp_only_layers\": [0, 2]}\n",
              ":3:80: expected", "\"mlp_only_layers\" entry in [0, 1], found 2");
    check_bad("qwen3_moe mlp_only_layers not an array",
              "{\"model_type\": \"qwen3_moe\", " LM " \"num_attention_heads\": 4, \"num_experts\": 8,\n"
              " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, \"mlp_only_layers\": 1}\n",
              ":3:76: expected", "\"mlp_only_layers\" to be an array");
    check_bad("qwen2_moe without shared_expert_intermediate_size",
              "{\"model_type\": \"qwen2_moe\", " LM " \"num_attention_heads\": 4, \"num_experts\": 8,\n"
              " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32}\n",
              ":1:1: expected", "field \"shared_expert_intermediate_size\"");
    check_bad("olmoe top_k above the experts",
              "{\"model_type\": \"olmoe\", " LM " \"num_attention_heads\": 4, \"num_experts\": 4,\n"
              " \"num_experts_per_tok\": 5}\n",
              ":3:25: expected", "\"num_experts_per_tok\" (5) at most \"num_experts\" (4)");
    check_bad("qwen2_vl vision without embed_dim",
              "{\"model_type\": \"qwen2_vl\", " LM " \"num_attention_heads\": 4,\n"
              " \"vision_config\": {\"depth\": 2, \"hidden_size\": 64, \"num_heads\": 4}}\n",
              ":3:19: expected", "field \"embed_dim\"");
    check_bad("qwen2_vl vision heads not dividing embed_dim",
              "{\"model_type\": \"qwen2_vl\", " LM " \"num_attention_heads\": 4,\n"
              " \"vision_config\": {\"depth\": 2, \"embed_dim\": 80, \"num_heads\": 3}}\n",
              ":3:", "\"num_heads\" (3) to divide the vision \"embed_dim\" (80)");
    check_bad("paligemma image size not a multiple of the patch",
              "{\"model_type\": \"paligemma\", " LM " \"num_attention_heads\": 4,\n"
              " \"vision_config\": {\"num_hidden_layers\": 2, \"hidden_size\": 64, \"intermediate_size\": 128,\n"
              "  \"num_attention_heads\": 4, \"image_size\": 100}}\n",
              ":4:", "\"image_size\" (100) to be a multiple of \"patch_size\" (14)");
    check_bad("qwen3 missing vocab_size",
              "{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 2, \"num_attention_heads\": 4}\n",
              ":1:1: expected", "field \"vocab_size\"");
    check_bad("qwen2_5_vl vision heads not dividing the vision width",
              "{\"model_type\": \"qwen2_5_vl\", " LM " \"num_attention_heads\": 4,\n"
              " \"vision_config\": {\"depth\": 2, \"hidden_size\": 80, \"intermediate_size\": 128, \"num_heads\": 3}}\n",
              ":3:90: expected", "\"num_heads\" (3) to divide the vision \"hidden_size\" (80)");
    check_bad("qwen2_5_vl vision without num_heads",
              "{\"model_type\": \"qwen2_5_vl\", " LM " \"num_attention_heads\": 4,\n"
              " \"vision_config\": {\"depth\": 2, \"hidden_size\": 80, \"intermediate_size\": 128}}\n",
              ":3:19: expected", "field \"num_heads\"");
    check_bad("qwen2_5_vl merge size not dividing the assumed grid",
              "{\"model_type\": \"qwen2_5_vl\", " LM " \"num_attention_heads\": 4,\n"
              " \"vision_config\": {\"depth\": 2, \"hidden_size\": 80, \"intermediate_size\": 128, \"num_heads\": 4,\n"
              "  \"spatial_merge_size\": 3}}\n",
              ":4:25: expected", "\"spatial_merge_size\" (3) to divide 32");
    check_bad("gpt_oss top_k above the experts",
              "{\"model_type\": \"gpt_oss\", " LM " \"num_attention_heads\": 4, \"num_local_experts\": 4,\n"
              " \"num_experts_per_tok\": 5}\n",
              ":3:25: expected", "\"num_experts_per_tok\" (5) at most \"num_local_experts\" (4)");
    check_bad("gemma3 pooled tokens not dividing the patches",
              "{\"model_type\": \"gemma3\", \"mm_tokens_per_image\": 300,\n"
              " \"text_config\": {" LM " \"num_attention_heads\": 4},\n"
              " \"vision_config\": {\"num_hidden_layers\": 2, \"hidden_size\": 64, \"intermediate_size\": 128,\n"
              "  \"num_attention_heads\": 4, \"image_size\": 896}}\n",
              ":1:49: expected", "\"mm_tokens_per_image\" (300) to divide the tower's 4096 patches per image");
    check_bad("unknown model_type names the families",
              "{\"model_type\": \"mamba\", " LM " \"num_attention_heads\": 4}\n",
              ":1:16: expected", "mistral, mixtral, qwen2, qwen2_5_vl, qwen2_vl, qwen3, qwen3_moe, qwen2_moe, olmoe, phi3, "
              "olmo2, granite, smollm3, gpt_oss, starcoder2, gpt_neox, gemma, gemma2, gemma3_text, gemma3, paligemma");
    return tap_done();
}
