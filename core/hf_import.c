/* hf_import.c: build a dmuon model (core/model.h) from a HuggingFace config.json.
 *
 * Families (by "model_type"): llama, qwen2, qwen2_5_vl (language model + vision tower from
 * "vision_config"), deepseek_v3 and kimi_k2 (MLA attention, routed + shared experts, dense first
 * layers, multi-token-prediction layers), gemma and gemma2. Tensor names, stacks and roles follow
 * the bundled files in models/ (models/README.md): 2-D hidden weights and routers are Muon,
 * embeddings, output heads, norms, biases and conv patch embeddings AdamW. Tied embeddings are
 * counted once; an MTP layer's copies of the embedding and output head are shared, so left out. */
#include "hf_import.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

typedef struct builder {
    dm_model *m;
    int cap;
    const char *file;
    dm_err *err;
} builder;

static int add_stack(builder *b, const char *name, int64_t layers)
{
    dm_model *m = b->m;
    dm_stack *s = dm_realloc(m->stacks, (size_t)(m->n_stacks + 1) * sizeof *s, b->err);
    if (!s) return -1;
    m->stacks = s;
    s = &m->stacks[m->n_stacks];
    memset(s, 0, sizeof *s);
    s->tied_head = -1;
    if (!(s->name = dm_strdup(name, b->err))) return -1;
    s->layers = (int)layers;
    s->first_global = m->n_layers;
    m->n_layers += (int)layers;
    return m->n_stacks++;
}

/* Add `per_layer` tensors of shape rows x cols (cols 0: 1-D) to each of the layers
 * [first, first + span) of `stack` (span < 0: to the end of the stack). */
static int add_t(builder *b, const char *name, int64_t rows, int64_t cols, int64_t per_layer,
                 int stack, int first, int span, dm_role role, const char *note)
{
    dm_model *m = b->m;
    if (span < 0) span = m->stacks[stack].layers - first;
    if (rows <= 0 || cols < 0 || per_layer <= 0 || span <= 0)
        return dm_err_set(b->err, "%s: tensor %s gets a non-positive size (%lld x %lld, %lld per layer)",
                          b->file, name, (long long)rows, (long long)cols, (long long)per_layer);
    if (m->n_tensors == b->cap) {
        int cap = b->cap ? 2 * b->cap : 32;
        dm_tensor *t = dm_realloc(m->tensors, (size_t)cap * sizeof *t, b->err);
        if (!t) return -1;
        m->tensors = t;
        b->cap = cap;
    }
    dm_tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    t->ndim = cols ? 2 : 1;
    t->use = cols ? DM_USE_LINEAR : DM_USE_VECTOR;
    t->rows = rows;
    t->cols = cols ? cols : 1;
    t->count = per_layer * span;
    t->stack = stack;
    t->first_layer = first;
    t->layer_span = span;
    t->role = role;
    if (!(t->name = dm_strdup(name, b->err))) return -1;
    if (!(t->note = dm_strdup(note ? note : "", b->err))) {
        free(t->name);
        return -1;
    }
    m->n_tensors++;
    return 0;
}

#define MUON DM_ROLE_MUON
#define ADAMW DM_ROLE_ADAMW
#define ROUTER_NOTE "router: muon under Moonlight's ndim>=2 rule (many stacks keep routers on AdamW/fp32)"

/* Required positive integer key (at most 2^24, the loader's largest dimension). */
static int req(builder *b, const jv *cfg, const char *key, int64_t *out)
{
    return jv_req_int(cfg, key, 1, (int64_t)1 << 24, b->file, out, b->err);
}

/* Optional integer key (absent or null: *out keeps its default). */
static int opt(builder *b, const jv *cfg, const char *key, int64_t lo, int64_t *out)
{
    const jv *v = jv_get(cfg, key);
    if (!v || v->type == JV_NULL) return 0;
    return jv_req_int(cfg, key, lo, (int64_t)1 << 24, b->file, out, b->err);
}

static int opt_bool(builder *b, const jv *cfg, const char *key, int *out)
{
    const jv *v = jv_get(cfg, key);
    if (!v || v->type == JV_NULL) return 0;
    if (v->type != JV_BOOL)
        return dm_err_set(b->err, "%s:%d:%d: expected \"%s\" to be a boolean, found %s", b->file,
                          v->line, v->col, key, jv_type_name(v->type));
    *out = v->b;
    return 0;
}

/* The common decoder hyper-parameters. */
typedef struct lm_hp {
    int64_t hidden, inter, layers, heads, kv_heads, head_dim, vocab;
    int tied;
} lm_hp;

static int read_lm(builder *b, const jv *cfg, int tied_default, lm_hp *hp)
{
    if (req(b, cfg, "hidden_size", &hp->hidden) || req(b, cfg, "intermediate_size", &hp->inter) ||
        req(b, cfg, "num_hidden_layers", &hp->layers) ||
        req(b, cfg, "num_attention_heads", &hp->heads) || req(b, cfg, "vocab_size", &hp->vocab))
        return -1;
    hp->kv_heads = hp->heads;
    hp->head_dim = hp->hidden / hp->heads;
    hp->tied = tied_default;
    if (opt(b, cfg, "num_key_value_heads", 1, &hp->kv_heads) ||
        opt(b, cfg, "head_dim", 1, &hp->head_dim) ||
        opt_bool(b, cfg, "tie_word_embeddings", &hp->tied))
        return -1;
    if (hp->layers > 100000)
        return dm_err_set(b->err, "%s: expected \"num_hidden_layers\" at most 100000", b->file);
    return 0;
}

static int add_embed(builder *b, const lm_hp *hp, int embed)
{
    return add_t(b, "model.embed_tokens.weight", hp->vocab, hp->hidden, 1, embed, 0, -1, ADAMW,
                 hp->tied ? "tied with lm_head" : "");
}

static int add_head(builder *b, const lm_hp *hp, int head)
{
    if (add_t(b, "model.norm.weight", hp->hidden, 0, 1, head, 0, -1, ADAMW, "")) return -1;
    if (!hp->tied &&
        add_t(b, "lm_head.weight", hp->vocab, hp->hidden, 1, head, 0, -1, ADAMW, ""))
        return -1;
    return 0;
}

/* Grouped-query attention (llama, qwen2, gemma): q/k/v/o, optional biases. */
static int add_gqa(builder *b, const lm_hp *hp, int st, int qkv_bias, int o_bias)
{
    int64_t q = hp->heads * hp->head_dim, kv = hp->kv_heads * hp->head_dim, h = hp->hidden;
    static const char *names[3] = {"q", "k", "v"};
    char name[128];
    for (int i = 0; i < 3; i++) {
        int64_t out = i == 0 ? q : kv;
        snprintf(name, sizeof name, "layers.*.self_attn.%s_proj.weight", names[i]);
        if (add_t(b, name, out, h, 1, st, 0, -1, MUON, "")) return -1;
        snprintf(name, sizeof name, "layers.*.self_attn.%s_proj.bias", names[i]);
        if (qkv_bias && add_t(b, name, out, 0, 1, st, 0, -1, ADAMW, "")) return -1;
    }
    if (add_t(b, "layers.*.self_attn.o_proj.weight", h, q, 1, st, 0, -1, MUON, "")) return -1;
    if (o_bias && add_t(b, "layers.*.self_attn.o_proj.bias", h, 0, 1, st, 0, -1, ADAMW, ""))
        return -1;
    return 0;
}

/* Gated MLP (gate/up/down) of width `inter` over layers [first, first + span) of `st`. */
static int add_mlp(builder *b, const char *prefix, int64_t hidden, int64_t inter, int64_t per_layer,
                   int st, int first, int span, int bias, const char *note)
{
    char name[160];
    snprintf(name, sizeof name, "%s.gate_proj.weight", prefix);
    if (add_t(b, name, inter, hidden, per_layer, st, first, span, MUON, note)) return -1;
    if (bias) {
        snprintf(name, sizeof name, "%s.gate_proj.bias", prefix);
        if (add_t(b, name, inter, 0, per_layer, st, first, span, ADAMW, "")) return -1;
    }
    snprintf(name, sizeof name, "%s.up_proj.weight", prefix);
    if (add_t(b, name, inter, hidden, per_layer, st, first, span, MUON, note)) return -1;
    if (bias) {
        snprintf(name, sizeof name, "%s.up_proj.bias", prefix);
        if (add_t(b, name, inter, 0, per_layer, st, first, span, ADAMW, "")) return -1;
    }
    snprintf(name, sizeof name, "%s.down_proj.weight", prefix);
    if (add_t(b, name, hidden, inter, per_layer, st, first, span, MUON, "")) return -1;
    if (bias) {
        snprintf(name, sizeof name, "%s.down_proj.bias", prefix);
        if (add_t(b, name, hidden, 0, per_layer, st, first, span, ADAMW, "")) return -1;
    }
    return 0;
}

/* llama, qwen2, gemma, gemma2 (and the language model of qwen2_5_vl). */
static int import_dense(builder *b, const jv *cfg, const char *type, const jv *vision)
{
    int gemma = strncmp(type, "gemma", 5) == 0, gemma2 = strcmp(type, "gemma2") == 0;
    int qwen = strncmp(type, "qwen2", 5) == 0;
    lm_hp hp;
    /* Gemma always ties the output to the embedding; Llama and Qwen2 default to untied. */
    if (read_lm(b, cfg, gemma, &hp)) return -1;
    int attn_bias = qwen, o_bias = 0, mlp_bias = 0;
    if (!qwen) {
        if (opt_bool(b, cfg, "attention_bias", &attn_bias) || opt_bool(b, cfg, "mlp_bias", &mlp_bias))
            return -1;
        o_bias = attn_bias;
    }
    int embed = add_stack(b, "embed", 1), blocks = -1, merger = -1;
    if (embed < 0) return -1;
    int64_t v_hidden = 0, v_inter = 0, v_depth = 0, v_out = 0, v_in = 3, v_patch = 14, v_tpatch = 2,
            v_merge = 2;
    if (vision) {
        if (req(b, vision, "hidden_size", &v_hidden) || req(b, vision, "intermediate_size", &v_inter) ||
            req(b, vision, "depth", &v_depth) || opt(b, vision, "in_chans", 1, &v_in) ||
            opt(b, vision, "patch_size", 1, &v_patch) ||
            opt(b, vision, "temporal_patch_size", 1, &v_tpatch) ||
            opt(b, vision, "spatial_merge_size", 1, &v_merge))
            return -1;
        v_out = hp.hidden;
        if (opt(b, vision, "out_hidden_size", 1, &v_out)) return -1;
        if ((blocks = add_stack(b, "visual.blocks", v_depth)) < 0 ||
            (merger = add_stack(b, "visual.merger", 1)) < 0)
            return -1;
    }
    int layers = add_stack(b, "layers", hp.layers), head = add_stack(b, "head", 1);
    if (layers < 0 || head < 0) return -1;

    if (add_embed(b, &hp, embed)) return -1;
    if (vision) {
        int64_t h = v_hidden, m = v_hidden * v_merge * v_merge;
        if (add_t(b, "visual.patch_embed.proj.weight", h, v_in * v_tpatch * v_patch * v_patch, 1,
                  embed, 0, -1, ADAMW, "Conv3d patch embedding, flattened to 2-D: adamw by policy") ||
            add_t(b, "visual.blocks.*.norm1.weight", h, 0, 1, blocks, 0, -1, ADAMW, "") ||
            add_t(b, "visual.blocks.*.norm2.weight", h, 0, 1, blocks, 0, -1, ADAMW, "") ||
            add_t(b, "visual.blocks.*.attn.qkv.weight", 3 * h, h, 1, blocks, 0, -1, MUON, "fused q/k/v") ||
            add_t(b, "visual.blocks.*.attn.qkv.bias", 3 * h, 0, 1, blocks, 0, -1, ADAMW, "") ||
            add_t(b, "visual.blocks.*.attn.proj.weight", h, h, 1, blocks, 0, -1, MUON, "") ||
            add_t(b, "visual.blocks.*.attn.proj.bias", h, 0, 1, blocks, 0, -1, ADAMW, "") ||
            add_mlp(b, "visual.blocks.*.mlp", h, v_inter, 1, blocks, 0, -1, 1, "") ||
            add_t(b, "visual.merger.ln_q.weight", h, 0, 1, merger, 0, -1, ADAMW, "") ||
            add_t(b, "visual.merger.mlp.0.weight", m, m, 1, merger, 0, -1, MUON, "patch merge") ||
            add_t(b, "visual.merger.mlp.0.bias", m, 0, 1, merger, 0, -1, ADAMW, "") ||
            add_t(b, "visual.merger.mlp.2.weight", v_out, m, 1, merger, 0, -1, MUON, "-> LM hidden") ||
            add_t(b, "visual.merger.mlp.2.bias", v_out, 0, 1, merger, 0, -1, ADAMW, ""))
            return -1;
    }
    if (add_gqa(b, &hp, layers, attn_bias, o_bias) ||
        add_mlp(b, "layers.*.mlp", hp.hidden, hp.inter, 1, layers, 0, -1, mlp_bias, "") ||
        add_t(b, "layers.*.input_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "") ||
        add_t(b, "layers.*.post_attention_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, ""))
        return -1;
    if (gemma2 &&
        (add_t(b, "layers.*.pre_feedforward_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "") ||
         add_t(b, "layers.*.post_feedforward_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "")))
        return -1;
    return add_head(b, &hp, head);
}

/* DeepSeek-V3 style MLA attention and norms of one layer group (prefix "layers" or "mtp"). */
typedef struct mla_hp {
    int64_t q_lora, kv_lora, nope, rope, v, experts, shared, moe_inter, dense, nextn;
    int score_bias;
} mla_hp;

static int add_mla_attn(builder *b, const char *p, const lm_hp *hp, const mla_hp *a, int st)
{
    char n[160];
    int64_t h = hp->hidden, qk = hp->heads * (a->nope + a->rope);
#define NAME(x) (snprintf(n, sizeof n, "%s.*.%s", p, x), n)
    if (a->q_lora) {
        if (add_t(b, NAME("self_attn.q_a_proj.weight"), a->q_lora, h, 1, st, 0, -1, MUON, "Q down-proj") ||
            add_t(b, NAME("self_attn.q_a_layernorm.weight"), a->q_lora, 0, 1, st, 0, -1, ADAMW, "") ||
            add_t(b, NAME("self_attn.q_b_proj.weight"), qk, a->q_lora, 1, st, 0, -1, MUON, "Q up-proj"))
            return -1;
    } else if (add_t(b, NAME("self_attn.q_proj.weight"), qk, h, 1, st, 0, -1, MUON, "q_lora_rank null")) {
        return -1;
    }
    if (add_t(b, NAME("self_attn.kv_a_proj_with_mqa.weight"), a->kv_lora + a->rope, h, 1, st, 0, -1,
              MUON, "KV down-proj (kv_lora_rank + rope)") ||
        add_t(b, NAME("self_attn.kv_a_layernorm.weight"), a->kv_lora, 0, 1, st, 0, -1, ADAMW, "") ||
        add_t(b, NAME("self_attn.kv_b_proj.weight"), hp->heads * (a->nope + a->v), a->kv_lora, 1, st,
              0, -1, MUON, "KV up-proj") ||
        add_t(b, NAME("self_attn.o_proj.weight"), h, hp->heads * a->v, 1, st, 0, -1, MUON, "") ||
        add_t(b, NAME("input_layernorm.weight"), h, 0, 1, st, 0, -1, ADAMW, "") ||
        add_t(b, NAME("post_attention_layernorm.weight"), h, 0, 1, st, 0, -1, ADAMW, ""))
        return -1;
    return 0;
}

/* Router, routed experts, shared experts over layers [first, first + span) of `st`. */
static int add_moe(builder *b, const char *p, const lm_hp *hp, const mla_hp *a, int st, int first,
                   int span)
{
    char n[160], pre[128];
    int64_t h = hp->hidden;
    if (add_t(b, NAME("mlp.gate.weight"), a->experts, h, 1, st, first, span, MUON, ROUTER_NOTE))
        return -1;
    if (a->score_bias && add_t(b, NAME("mlp.gate.e_score_correction_bias"), a->experts, 0, 1, st,
                               first, span, ADAMW, "aux-loss-free bias (not gradient-trained)"))
        return -1;
    snprintf(pre, sizeof pre, "%s.*.mlp.experts.{e}", p);
    if (add_mlp(b, pre, h, a->moe_inter, a->experts, st, first, span, 0, "routed experts"))
        return -1;
    snprintf(pre, sizeof pre, "%s.*.mlp.shared_experts", p);
    if (a->shared && add_mlp(b, pre, h, a->moe_inter * a->shared, 1, st, first, span, 0, ""))
        return -1;
    return 0;
#undef NAME
}

static int import_mla(builder *b, const jv *cfg)
{
    lm_hp hp;
    mla_hp a = {0};
    if (read_lm(b, cfg, 0, &hp)) return -1;
    const jv *ql = jv_get(cfg, "q_lora_rank");
    if (!ql) return jv_req(cfg, "q_lora_rank", JV_NUMBER, b->file, &ql, b->err);
    if (opt(b, cfg, "q_lora_rank", 1, &a.q_lora) || req(b, cfg, "kv_lora_rank", &a.kv_lora) ||
        req(b, cfg, "qk_nope_head_dim", &a.nope) || req(b, cfg, "qk_rope_head_dim", &a.rope) ||
        req(b, cfg, "v_head_dim", &a.v) || req(b, cfg, "n_routed_experts", &a.experts) ||
        req(b, cfg, "moe_intermediate_size", &a.moe_inter) ||
        opt(b, cfg, "n_shared_experts", 0, &a.shared) ||
        opt(b, cfg, "first_k_dense_replace", 0, &a.dense) ||
        opt(b, cfg, "num_nextn_predict_layers", 0, &a.nextn))
        return -1;
    if (a.dense > hp.layers) {
        const jv *v = jv_get(cfg, "first_k_dense_replace");
        return dm_err_set(b->err, "%s:%d:%d: expected \"first_k_dense_replace\" at most "
                          "num_hidden_layers (%lld)", b->file, v->line, v->col, (long long)hp.layers);
    }
    const jv *tm = jv_get(cfg, "topk_method");
    a.score_bias = tm && tm->type == JV_STRING && strcmp(tm->str, "noaux_tc") == 0;
    int embed = add_stack(b, "embed", 1), layers = add_stack(b, "layers", hp.layers),
        head = add_stack(b, "head", 1), mtp = -1;
    if (embed < 0 || layers < 0 || head < 0) return -1;
    if (a.nextn && (mtp = add_stack(b, "mtp", a.nextn)) < 0) return -1;
    int dense = (int)a.dense, nmoe = (int)(hp.layers - a.dense);
    if (add_embed(b, &hp, embed) || add_mla_attn(b, "layers", &hp, &a, layers)) return -1;
    if (dense && add_mlp(b, "layers.*.mlp", hp.hidden, hp.inter, 1, layers, 0, dense, 0,
                         "dense FFN layers"))
        return -1;
    if (nmoe && add_moe(b, "layers", &hp, &a, layers, dense, nmoe)) return -1;
    if (add_head(b, &hp, head)) return -1;
    if (mtp >= 0) {
        /* Each MTP layer: eh_proj over [embedding; hidden], three norms, one MoE decoder layer.
         * Its embed_tokens and shared_head.head are the main model's (shared): not repeated. */
        if (add_t(b, "mtp.*.eh_proj.weight", hp.hidden, 2 * hp.hidden, 1, mtp, 0, -1, MUON,
                  "[embedding; hidden] -> hidden") ||
            add_t(b, "mtp.*.enorm.weight", hp.hidden, 0, 1, mtp, 0, -1, ADAMW, "") ||
            add_t(b, "mtp.*.hnorm.weight", hp.hidden, 0, 1, mtp, 0, -1, ADAMW, "") ||
            add_t(b, "mtp.*.shared_head.norm.weight", hp.hidden, 0, 1, mtp, 0, -1, ADAMW, "") ||
            add_mla_attn(b, "mtp", &hp, &a, mtp) || add_moe(b, "mtp", &hp, &a, mtp, 0, -1))
            return -1;
    }
    return 0;
}

/* "NAME" for the model: _name_or_path, else the folder holding config.json, else the file stem. */
static char *model_name(const jv *root, const char *path, dm_err *err)
{
    const jv *v = jv_get(root, "_name_or_path");
    if (v && v->type == JV_STRING && v->str[0]) {
        const char *s = strrchr(v->str, '/');
        return dm_strdup(s && s[1] ? s + 1 : v->str, err);
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char buf[512];
    if (strcmp(base, "config.json") == 0 && base > path + 1) {
        const char *end = base - 1, *start = end;
        while (start > path && start[-1] != '/') start--;
        snprintf(buf, sizeof buf, "%.*s", (int)(end - start), start);
    } else {
        snprintf(buf, sizeof buf, "%s", base);
        char *dot = strrchr(buf, '.');
        if (dot && strcmp(dot, ".json") == 0) *dot = '\0';
    }
    return dm_strdup(buf, err);
}

int hf_import_config(const char *path, dm_model **out, dm_err *err)
{
    jv *root = jv_parse_file(path, err);
    dm_model *m = NULL;
    builder b = {0};
    const char *type;
    char src[1024];
    if (!root) return -1;
    if (root->type != JV_OBJECT) {
        dm_err_set(err, "%s:%d:%d: expected a config.json object", path, root->line, root->col);
        goto fail;
    }
    if (jv_req_str(root, "model_type", path, &type, err)) goto fail;
    if (!(m = dm_calloc(1, sizeof *m, err))) goto fail;
    b.m = m;
    b.file = path;
    b.err = err;
    snprintf(src, sizeof src, "HuggingFace config.json %s (model_type %s), imported by dmuon", path, type);
    if (!(m->name = model_name(root, path, err)) || !(m->source = dm_strdup(src, err)) ||
        !(m->path = dm_strdup("", err)) || !(m->streams = dm_calloc(1, sizeof *m->streams, err)) ||
        !(m->streams[0].name = dm_strdup("text", err)))
        goto fail;
    m->n_streams = 1;
    int rc;
    if (strcmp(type, "llama") == 0 || strcmp(type, "qwen2") == 0 || strcmp(type, "gemma") == 0 ||
        strcmp(type, "gemma2") == 0) {
        rc = import_dense(&b, root, type, NULL);
    } else if (strcmp(type, "qwen2_5_vl") == 0) {
        const jv *vision, *lm = jv_get(root, "text_config");
        if (jv_req(root, "vision_config", JV_OBJECT, path, &vision, err)) goto fail;
        /* Newer transformers nest the language model's keys in "text_config". */
        rc = import_dense(&b, lm && lm->type == JV_OBJECT ? lm : root, type, vision);
    } else if (strcmp(type, "deepseek_v3") == 0 || strcmp(type, "kimi_k2") == 0) {
        rc = import_mla(&b, root);
    } else {
        const jv *v = jv_get(root, "model_type");
        dm_err_set(err, "%s:%d:%d: expected \"model_type\" to be one of llama, qwen2, qwen2_5_vl, "
                   "deepseek_v3, kimi_k2, gemma, gemma2; found \"%s\"", path, v->line, v->col, type);
        goto fail;
    }
    if (rc) goto fail;
    jv_free(root);
    *out = m;
    return 0;
fail:
    jv_free(root);
    dm_model_free(m);
    return -1;
}
