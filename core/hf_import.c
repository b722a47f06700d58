/* hf_import.c: build a dmuon model (core/model.h) from a HuggingFace config.json.
 *
 * Families (by "model_type"): llama, mistral, mixtral (routed experts w1/w3/w2), qwen2, qwen3
 * (per-head q/k norms), qwen3_moe (routed experts on the layers decoder_sparse_step and
 * mlp_only_layers select), qwen2_moe (the same with q/k/v biases and a gated shared expert),
 * olmoe (routed experts on every layer, q/k norms over the whole projection), qwen2_5_vl and
 * qwen2_vl (language model + vision tower from "vision_config"), paligemma (Gemma + a SigLIP
 * tower and its projector), phi3 (fused qkv_proj and gate_up_proj), olmo2 (post-norms only,
 * full-width q/k norms), granite and smollm3 (llama's layout), starcoder2 and gpt_neox (LayerNorms
 * with biases, a non-gated MLP with biases; gpt_neox's fused query_key_value and its names),
 * gpt_oss (routed experts of a fused
 * gate/up projection with biases, the router's bias, attention sinks), gemma, gemma2,
 * gemma3_text (gemma2's norms plus per-head q/k norms), gemma3 (gemma3_text + a SigLIP tower
 * whose patches are pooled for the projector; absent text_config keys from Gemma3TextConfig's
 * defaults, named in the source), deepseek_v2, deepseek_v3 and kimi_k2 (MLA attention, routed +
 * shared experts, dense first layers, multi-token-prediction layers), glm4_moe (GLM-4.5: grouped-
 * query attention with DeepSeek-V3's MoE and MTP layers). Tensor names,
 * stacks and roles follow the bundled files in models/ (models/README.md): 2-D hidden weights and
 * routers are Muon, embeddings, output heads, norms, biases and conv patch embeddings AdamW. Tied
 * embeddings are counted once; an MTP layer's copies of the embedding and output head are shared,
 * so left out. The architecture (models/README.md "Architecture") is filled as the bundled files
 * have it: token streams, one attention block per decoder stack, MoE routing (top_k from
 * "num_experts_per_tok"), tied heads, tensor uses (embedding, expert) and streams. */
#include "hf_import.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

typedef struct builder {
    dm_model *m;
    int cap;
    int64_t params, count; /* totals so far, checked against the model format's limits */
    const char *file;
    dm_err *err;
} builder;

/* x * y, saturated at INT64_MAX (then refused by add_t's limits, never wrapped). */
static int64_t mul(int64_t x, int64_t y)
{
    int64_t z;
    return __builtin_mul_overflow(x, y, &z) ? INT64_MAX : z;
}

/* x for a message: "2^63 or more" when mul saturated */
static const char *num(int64_t x, char *buf, size_t n)
{
    if (x == INT64_MAX) snprintf(buf, n, "2^63 or more");
    else snprintf(buf, n, "%lld", (long long)x);
    return buf;
}

static int add_stack(builder *b, const char *name, int64_t layers)
{
    dm_model *m = b->m;
    if (layers > DM_MODEL_MAX_STACK_LAYERS || m->n_layers + layers > DM_MODEL_MAX_LAYERS)
        return dm_err_set(b->err, "%s: stack %s gets %lld layers; the model format takes at most %d per stack, %d in all",
                          b->file, name, (long long)layers, DM_MODEL_MAX_STACK_LAYERS, DM_MODEL_MAX_LAYERS);
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

/* A token stream with `tokens` per sample after the main one; returns its index. */
static int add_stream(builder *b, const char *name, int64_t tokens)
{
    dm_model *m = b->m;
    dm_token_stream *s = dm_realloc(m->streams, (size_t)(m->n_streams + 1) * sizeof *s, b->err);
    if (!s) return -1;
    m->streams = s;
    s = &m->streams[m->n_streams];
    s->tokens = tokens;
    if (!(s->name = dm_strdup(name, b->err))) return -1;
    return m->n_streams++;
}

/* One attention block in every layer of stack `st`, over the stack's stream; its rotary embedding
 * turns `rope` dims of each query and key head (0: none). */
static int add_attn(builder *b, int st, int64_t heads, int64_t kv_heads, int64_t head_dim,
                    int64_t v_head_dim, int causal, int64_t rope)
{
    dm_stack *s = &b->m->stacks[st];
    dm_attention *a = dm_realloc(s->attn, (size_t)(s->n_attn + 1) * sizeof *a, b->err);
    if (!a) return -1;
    s->attn = a;
    a = &s->attn[s->n_attn++];
    memset(a, 0, sizeof *a);
    a->stream = a->kv_stream = s->stream;
    a->heads = (int)heads;
    a->kv_heads = (int)kv_heads;
    a->head_dim = (int)head_dim;
    a->v_head_dim = (int)v_head_dim;
    a->causal = causal;
    a->rope = (int)rope;
    return 0;
}

/* Append "; text" to the model's source. */
static int add_source(builder *b, const char *text)
{
    size_t n = strlen(b->m->source) + strlen(text) + 3;
    char *s = dm_malloc(n, b->err);
    if (!s) return -1;
    snprintf(s, n, "%s; %s", b->m->source, text);
    free(b->m->source);
    b->m->source = s;
    return 0;
}

/* Add `per_layer` tensors of shape rows x cols (cols 0: 1-D) to each of the layers
 * [first, first + span) of `stack` (span < 0: to the end of the stack), on the stack's stream. */
static int add_t(builder *b, const char *name, int64_t rows, int64_t cols, int64_t per_layer,
                 int stack, int first, int span, dm_role role, const char *note)
{
    dm_model *m = b->m;
    if (span < 0) span = m->stacks[stack].layers - first;
    if (rows <= 0 || cols < 0 || per_layer <= 0 || span <= 0)
        return dm_err_set(b->err, "%s: tensor %s gets a non-positive size (%lld x %lld, %lld per layer)",
                          b->file, name, (long long)rows, (long long)cols, (long long)per_layer);
    /* the model format's limits (model.h), so the file written is one the loader reads back */
    int64_t count = mul(per_layer, span), elems = mul(rows, cols ? cols : 1);
    if (rows > DM_MODEL_MAX_DIM || cols > DM_MODEL_MAX_DIM || elems > DM_MODEL_MAX_ELEMS || count > DM_MODEL_MAX_COUNT) {
        char r[24], c[24], k[24];
        return dm_err_set(b->err, "%s: tensor %s would be %s x %s, %s of them; the model format takes at most "
                          "%lld per dimension, %lld elements per tensor and %lld tensors per entry",
                          b->file, name, num(rows, r, sizeof r), num(cols, c, sizeof c), num(count, k, sizeof k),
                          (long long)DM_MODEL_MAX_DIM, (long long)DM_MODEL_MAX_ELEMS, (long long)DM_MODEL_MAX_COUNT);
    }
    b->params = b->params > DM_MODEL_MAX_PARAMS ? b->params : b->params + mul(elems, count);
    b->count += count;
    if (b->params > DM_MODEL_MAX_PARAMS || b->count > DM_MODEL_MAX_COUNT)
        return dm_err_set(b->err, "%s: tensor %s brings the model past %lld parameters or %lld tensors in all",
                          b->file, name, (long long)DM_MODEL_MAX_PARAMS, (long long)DM_MODEL_MAX_COUNT);
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
    t->count = count;
    t->stack = stack;
    t->stream = m->stacks[stack].stream;
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

/* The tensor added last. */
static dm_tensor *last(builder *b) { return &b->m->tensors[b->m->n_tensors - 1]; }

#define MUON DM_ROLE_MUON
#define ADAMW DM_ROLE_ADAMW
#define ROUTER_NOTE "router: muon under Moonlight's ndim>=2 rule (many stacks keep routers on AdamW/fp32)"

/* Optional integer key in [lo, hi] (absent or null: *out keeps its default). */
static int opt_in(builder *b, const jv *cfg, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const jv *v = jv_get(cfg, key);
    if (!v || v->type == JV_NULL) return 0;
    return jv_req_int(cfg, key, lo, hi, b->file, out, b->err);
}

/* Required positive integer key (at most 2^24, the loader's largest dimension). */
static int req(builder *b, const jv *cfg, const char *key, int64_t *out)
{
    return jv_req_int(cfg, key, 1, (int64_t)1 << 24, b->file, out, b->err);
}

/* Optional integer key, at most 2^24. */
static int opt(builder *b, const jv *cfg, const char *key, int64_t lo, int64_t *out)
{
    return opt_in(b, cfg, key, lo, (int64_t)1 << 24, out);
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

/* "FILE:LINE:COL: expected \"key\" ..." at the key's value (the object's place when absent). */
static int bad_key(builder *b, const jv *cfg, const char *key, const char *expected)
{
    const jv *v = jv_get(cfg, key);
    if (!v) v = cfg;
    return dm_err_set(b->err, "%s:%d:%d: expected \"%s\" %s", b->file, v->line, v->col, key, expected);
}

/* Defaults a family's config class gives keys that its config.json may leave out (0: the key is
 * required). Gemma-3's multimodal configs give their text_config only the keys that differ. */
typedef struct lm_defaults {
    const char *cls; /* the transformers config class whose defaults these are */
    int64_t vocab, heads, kv_heads, head_dim;
} lm_defaults;

/* Gemma3TextConfig's defaults (transformers), the ones Gemma-3 4B's text_config relies on. */
static const lm_defaults GEMMA3_TEXT = {"Gemma3TextConfig", 262208, 8, 4, 256};

/* The common decoder hyper-parameters. */
typedef struct lm_hp {
    int64_t hidden, inter, layers, heads, kv_heads, head_dim, vocab;
    int64_t rope;        /* dims of each query and key head the rotary embedding turns */
    int tied;
    int embed, lm_head;  /* tensor indices of the token embedding and the output head (-1: tied) */
} lm_hp;

/* Key `key` in [lo, hi]; when absent and `dflt` > 0, *out = dflt and the key is listed in `used`. */
static int req_or(builder *b, const jv *cfg, const char *key, int64_t lo, int64_t hi, int64_t dflt, int64_t *out,
                  char *used, size_t cap)
{
    const jv *v = jv_get(cfg, key);
    if (dflt > 0 && (!v || v->type == JV_NULL)) {
        *out = dflt;
        snprintf(used + strlen(used), cap - strlen(used), "%s%s %lld", used[0] ? ", " : "", key, (long long)dflt);
        return 0;
    }
    return jv_req_int(cfg, key, lo, hi, b->file, out, b->err);
}

static int read_lm(builder *b, const jv *cfg, int tied_default, const lm_defaults *d, lm_hp *hp)
{
    static const lm_defaults none = {0};
    char why[160], used[256] = "";
    if (!d) d = &none;
    hp->head_dim = 0;
    if (req(b, cfg, "hidden_size", &hp->hidden) || req(b, cfg, "intermediate_size", &hp->inter) ||
        jv_req_int(cfg, "num_hidden_layers", 1, 100000, b->file, &hp->layers, b->err) ||
        req_or(b, cfg, "num_attention_heads", 1, 65536, d->heads, &hp->heads, used, sizeof used) ||
        req_or(b, cfg, "vocab_size", 1, (int64_t)1 << 24, d->vocab, &hp->vocab, used, sizeof used) ||
        (d->head_dim && req_or(b, cfg, "head_dim", 1, 65536, d->head_dim, &hp->head_dim, used, sizeof used)))
        return -1;
    hp->kv_heads = hp->heads;
    hp->tied = tied_default;
    hp->embed = hp->lm_head = -1;
    if ((d->kv_heads ? req_or(b, cfg, "num_key_value_heads", 1, (int64_t)1 << 24, d->kv_heads, &hp->kv_heads, used,
                              sizeof used)
                     : opt(b, cfg, "num_key_value_heads", 1, &hp->kv_heads)) ||
        (!d->head_dim && opt_in(b, cfg, "head_dim", 1, 65536, &hp->head_dim)) ||
        opt_bool(b, cfg, "tie_word_embeddings", &hp->tied))
        return -1;
    if (used[0]) {
        char text[400];
        snprintf(text, sizeof text, "absent keys given %s's defaults: %s", d->cls, used);
        if (add_source(b, text)) return -1;
    }
    if (hp->kv_heads > hp->heads || hp->heads % hp->kv_heads) {
        snprintf(why, sizeof why, "(%lld) to divide \"num_attention_heads\" (%lld)", (long long)hp->kv_heads,
                 (long long)hp->heads);
        return bad_key(b, cfg, "num_key_value_heads", why);
    }
    if (!hp->head_dim) {
        if (hp->hidden % hp->heads) {
            snprintf(why, sizeof why, "(%lld) to divide \"hidden_size\" (%lld), or a \"head_dim\" key",
                     (long long)hp->heads, (long long)hp->hidden);
            return bad_key(b, cfg, "num_attention_heads", why);
        }
        hp->head_dim = hp->hidden / hp->heads;
    }
    /* rotary embedding over every dim of a head, or the part "partial_rotary_factor" (phi3,
     * stablelm) or "rotary_pct" (gpt_neox) says, rounded down to whole pairs */
    double frac = 1;
    if (jv_opt_num(cfg, "partial_rotary_factor", 0, 1, b->file, &frac, b->err) ||
        jv_opt_num(cfg, "rotary_pct", 0, 1, b->file, &frac, b->err))
        return -1;
    hp->rope = (int64_t)(frac * (double)hp->head_dim) / 2 * 2;
    return 0;
}

/* Routed experts: `experts_key` experts, "num_experts_per_tok" of them per token. */
static int read_routing(builder *b, const jv *cfg, const char *experts_key, int64_t *experts, int64_t *top_k)
{
    if (jv_req_int(cfg, experts_key, 1, 1 << 20, b->file, experts, b->err) ||
        jv_req_int(cfg, "num_experts_per_tok", 1, 1 << 20, b->file, top_k, b->err))
        return -1;
    if (*top_k > *experts) {
        char why[160];
        snprintf(why, sizeof why, "(%lld) at most \"%s\" (%lld)", (long long)*top_k, experts_key,
                 (long long)*experts);
        return bad_key(b, cfg, "num_experts_per_tok", why);
    }
    return 0;
}

static void set_moe(builder *b, int st, int64_t experts, int64_t top_k)
{
    b->m->stacks[st].moe_experts = (int)experts;
    b->m->stacks[st].moe_top_k = (int)top_k;
}

/* The sliding window of the decoder's attention (the last block of stack `st`, `layers` layers),
 * as transformers applies it: the layers "layer_types" marks "sliding_attention" when the config
 * has that list; else Gemma-2 and gpt-oss every other layer from the first, Gemma-3 all but every
 * `sliding_window_pattern`-th (default 6), the Qwen families only with "use_sliding_window" true
 * and from layer "max_window_layers" on (default 28), the others every layer. No "sliding_window"
 * (null, 0, or "use_sliding_window" false): none. The pattern is stored by its shortest period
 * (model.h window_layers). */
static int read_sliding_window(builder *b, const jv *cfg, const char *type, int st)
{
    const jv *sw = jv_get(cfg, "sliding_window"), *use = jv_get(cfg, "use_sliding_window");
    if (!sw || sw->type == JV_NULL || (sw->type == JV_NUMBER && sw->num == 0) || (use && use->type == JV_BOOL && !use->b))
        return 0;
    if (sw->type != JV_NUMBER || sw->num < 1 || sw->num > DM_MODEL_MAX_DIM || sw->num != (double)(int64_t)sw->num)
        return dm_err_set(b->err, "%s:%d:%d: expected \"sliding_window\" to be null, 0 or a whole number of tokens from 1 "
                          "to %lld", b->file, sw->line, sw->col, (long long)DM_MODEL_MAX_DIM);
    dm_stack *s = &b->m->stacks[st];
    if (!s->n_attn) return 0;
    int n = s->layers;
    char *pat = dm_malloc((size_t)n + 1, b->err);
    if (!pat) return -1;
    const jv *lt = jv_get(cfg, "layer_types");
    int64_t pattern = 6, from = 28; /* transformers' defaults of sliding_window_pattern, max_window_layers */
    int gemma3 = strncmp(type, "gemma3", 6) == 0, qwen = strncmp(type, "qwen", 4) == 0;
    if ((gemma3 && jv_opt_int(cfg, "sliding_window_pattern", 1, 1000000, b->file, &pattern, b->err)) ||
        (qwen && jv_opt_int(cfg, "max_window_layers", 0, 1000000, b->file, &from, b->err))) {
        free(pat);
        return -1;
    }
    if (lt && (lt->type != JV_ARRAY || lt->n < n)) {
        free(pat);
        return dm_err_set(b->err, "%s:%d:%d: expected \"layer_types\" to be a list of at least %d (num_hidden_layers) "
                          "strings", b->file, lt->line, lt->col, n);
    }
    for (int i = 0; i < n; i++) {
        int slide;
        if (lt) {
            const jv *v = lt->items[i];
            if (v->type != JV_STRING) {
                free(pat);
                return dm_err_set(b->err, "%s:%d:%d: expected a layer type (a string)", b->file, v->line, v->col);
            }
            slide = strcmp(v->str, "sliding_attention") == 0;
        } else if (strcmp(type, "gemma2") == 0 || strcmp(type, "gpt_oss") == 0) {
            slide = i % 2 == 0;
        } else if (gemma3) {
            slide = (i + 1) % pattern != 0;
        } else if (qwen) {
            slide = use && use->type == JV_BOOL && use->b && i >= from;
        } else {
            slide = 1;
        }
        pat[i] = slide ? 's' : 'f';
    }
    pat[n] = 0;
    int p = 1; /* the shortest period */
    while (p < n) {
        int i = p;
        while (i < n && pat[i] == pat[i % p]) i++;
        if (i == n) break;
        p++;
    }
    pat[p] = 0;
    dm_attention *a = &s->attn[s->n_attn - 1];
    if (strchr(pat, 's')) {
        a->window = (int64_t)sw->num;
        if (strchr(pat, 'f')) a->window_layers = pat, pat = NULL;
    }
    free(pat);
    return 0;
}

static int add_embed(builder *b, lm_hp *hp, int embed)
{
    if (add_t(b, "model.embed_tokens.weight", hp->vocab, hp->hidden, 1, embed, 0, -1, ADAMW,
              hp->tied ? "tied with lm_head" : ""))
        return -1;
    last(b)->use = DM_USE_EMBEDDING;
    hp->embed = b->m->n_tensors - 1;
    return 0;
}

/* Final norm and output head; a tied head is the embedding applied again (the stack's tied_head). */
static int add_head(builder *b, lm_hp *hp, int head, int norm_bias)
{
    if (add_t(b, "model.norm.weight", hp->hidden, 0, 1, head, 0, -1, ADAMW, "") ||
        (norm_bias && add_t(b, "model.norm.bias", hp->hidden, 0, 1, head, 0, -1, ADAMW, "LayerNorm")))
        return -1;
    if (hp->tied) {
        b->m->stacks[head].tied_head = hp->embed;
        return 0;
    }
    if (add_t(b, "lm_head.weight", hp->vocab, hp->hidden, 1, head, 0, -1, ADAMW, "")) return -1;
    hp->lm_head = b->m->n_tensors - 1;
    return 0;
}

/* Grouped-query attention (llama, mistral, qwen2/3, gemma): q/k/v/o, optional biases, optional
 * q/k RMSNorms (qk_norm 1: per head, qwen3; 2: over the whole projection, olmoe); phi3's fused
 * qkv_proj. Adds the stack's attention block. */
static int add_gqa(builder *b, const char *p, const lm_hp *hp, int st, int qkv_bias, int o_bias, int qk_norm,
                   int fused, int neox)
{
    int64_t q = mul(hp->heads, hp->head_dim), kv = mul(hp->kv_heads, hp->head_dim), h = hp->hidden;
    static const char *names[3] = {"q", "k", "v"};
    char name[160], qkv[96], o[96];
    snprintf(qkv, sizeof qkv, "%s.*.%s", p, neox ? "attention.query_key_value" : "self_attn.qkv_proj");
    snprintf(o, sizeof o, "%s.*.%s", p, neox ? "attention.dense" : "self_attn.o_proj");
    if (fused || neox) {
        snprintf(name, sizeof name, "%s.weight", qkv);
        if (add_t(b, name, q + 2 * kv, h, 1, st, 0, -1, MUON, "fused q/k/v")) return -1;
        snprintf(name, sizeof name, "%s.bias", qkv);
        if (qkv_bias && add_t(b, name, q + 2 * kv, 0, 1, st, 0, -1, ADAMW, "")) return -1;
    } else {
        for (int i = 0; i < 3; i++) {
            int64_t out = i == 0 ? q : kv;
            snprintf(name, sizeof name, "%s.*.self_attn.%s_proj.weight", p, names[i]);
            if (add_t(b, name, out, h, 1, st, 0, -1, MUON, "")) return -1;
            snprintf(name, sizeof name, "%s.*.self_attn.%s_proj.bias", p, names[i]);
            if (qkv_bias && add_t(b, name, out, 0, 1, st, 0, -1, ADAMW, "")) return -1;
            snprintf(name, sizeof name, "%s.*.self_attn.%s_norm.weight", p, names[i]);
            if (qk_norm && i < 2 && add_t(b, name, qk_norm == 1 ? hp->head_dim : out, 0, 1, st, 0, -1, ADAMW,
                                          qk_norm == 1 ? "RMSNorm over each head" : "RMSNorm over the projection"))
                return -1;
        }
    }
    snprintf(name, sizeof name, "%s.weight", o);
    if (add_t(b, name, h, q, 1, st, 0, -1, MUON, "")) return -1;
    snprintf(name, sizeof name, "%s.bias", o);
    if (o_bias && add_t(b, name, h, 0, 1, st, 0, -1, ADAMW, "")) return -1;
    return add_attn(b, st, hp->heads, hp->kv_heads, hp->head_dim, hp->head_dim, 1, hp->rope);
}

/* An MLP of width `inter` over layers [first, first + span) of `st`: the n projections named
 * after `prefix` (n 3: gate, up, down; n 2: up, down, non-gated), each with a bias when `bias`;
 * `note` on those into the width. */
static int add_ffn(builder *b, const char *prefix, const char *const *names, int n, int64_t hidden, int64_t inter,
                   int64_t per_layer, int st, int first, int span, int bias, const char *note)
{
    char name[160];
    for (int i = 0; i < n; i++) {
        int into = i < n - 1;
        int64_t rows = into ? inter : hidden, cols = into ? hidden : inter;
        snprintf(name, sizeof name, "%s.%s.weight", prefix, names[i]);
        if (add_t(b, name, rows, cols, per_layer, st, first, span, MUON, into ? note : "")) return -1;
        snprintf(name, sizeof name, "%s.%s.bias", prefix, names[i]);
        if (bias && add_t(b, name, rows, 0, per_layer, st, first, span, ADAMW, "")) return -1;
    }
    return 0;
}

static const char *const GATE_UP_DOWN[3] = {"gate_proj", "up_proj", "down_proj"};
static const char *const FC1_FC2[2] = {"fc1", "fc2"};

/* Gated MLP (gate_proj, up_proj, down_proj after `prefix`). */
static int add_mlp(builder *b, const char *prefix, int64_t hidden, int64_t inter, int64_t per_layer,
                   int st, int first, int span, int bias, const char *note)
{
    return add_ffn(b, prefix, GATE_UP_DOWN, 3, hidden, inter, per_layer, st, first, span, bias, note);
}

/* Non-gated MLP with biases (up, down after `prefix`) on every layer of `st`. */
static int add_plain_mlp(builder *b, const char *prefix, const char *const names[2], int64_t hidden, int64_t inter,
                         int st, const char *note)
{
    return add_ffn(b, prefix, names, 2, hidden, inter, 1, st, 0, -1, 1, note);
}

/* A router of `experts` rows over layers [first, first + span). */
static int add_router(builder *b, const char *name, int64_t hidden, int64_t experts, int st, int first, int span)
{
    return add_t(b, name, experts, hidden, 1, st, first, span, MUON, ROUTER_NOTE);
}

/* `experts` routed gated MLPs per layer (use expert) over layers [first, first + span). */
static int add_experts(builder *b, const char *prefix, const char *const names[3], int64_t hidden, int64_t inter,
                       int64_t experts, int st, int first, int span)
{
    int from = b->m->n_tensors;
    if (add_ffn(b, prefix, names, 3, hidden, inter, experts, st, first, span, 0, "routed experts")) return -1;
    for (int i = from; i < b->m->n_tensors; i++) b->m->tensors[i].use = DM_USE_EXPERT;
    return 0;
}

/* How a decoder family's config maps onto tensors (import_decoder); MLA families: import_mla. */
/* FFN_PLAIN and FFN_NEOX: a non-gated MLP (up, down) with biases; NEOX also GPT-NeoX's names and
 * its fused query_key_value. */
typedef enum { FFN_DENSE, FFN_MIXTRAL, FFN_QWEN3_MOE, FFN_QWEN2_MOE, FFN_OLMOE, FFN_GPT_OSS, FFN_PLAIN, FFN_NEOX } ffn_kind;
/* QKV: q/k/v biases always; KEYS: "attention_bias" (q/k/v/o); USE: "use_bias" (q/k/v/o and the
 * MLP's, starcoder2) */
typedef enum { BIAS_NONE, BIAS_QKV, BIAS_KEYS, BIAS_USE } bias_kind;
typedef struct family {
    const char *type;  /* "model_type" */
    int mla;           /* deepseek_v2 / deepseek_v3 / kimi_k2 */
    int glm4_moe;      /* GQA + DeepSeek-V3's MoE and MTP (import_glm4_moe) */
    int tied;          /* tie_word_embeddings when the key is absent */
    bias_kind bias;
    int bias_default;  /* "attention_bias" when the key is absent (gpt_oss: true) */
    int mlp_bias_key;  /* "mlp_bias" (gate/up/down biases) */
    int qk_norm;       /* q_norm/k_norm: 1 per head, of head_dim (qwen3); 2 over the whole q and k
                          projections (olmoe) */
    int fused;         /* fused qkv_proj and gate_up_proj (phi3) */
    int ffw_norms;     /* pre/post feed-forward norms (gemma2) */
    int post_norms;    /* only post-attention and post-feed-forward norms, no input norm (olmo2) */
    int ln_bias;       /* LayerNorms with biases (starcoder2, gpt_neox) */
    int sinks;         /* a learned attention-sink logit per head (gpt_oss) */
    ffn_kind ffn;
    int vision;        /* a vision tower from "vision_config": 1 Qwen2.5-VL's, 2 Qwen2-VL's, 3 SigLIP
                          (paligemma, its language model Gemma's), 4 SigLIP with Gemma-3's pooling
                          projector */
    const lm_defaults *dflt; /* defaults of absent keys (NULL: none) */
} family;

static const family families[] = {
    {.type = "llama", .bias = BIAS_KEYS, .mlp_bias_key = 1},
    {.type = "mistral"},
    {.type = "mixtral", .ffn = FFN_MIXTRAL},
    {.type = "qwen2", .bias = BIAS_QKV},
    {.type = "qwen2_5_vl", .bias = BIAS_QKV, .vision = 1},
    {.type = "qwen2_vl", .bias = BIAS_QKV, .vision = 2},
    {.type = "qwen3", .bias = BIAS_KEYS, .qk_norm = 1},
    {.type = "qwen3_moe", .bias = BIAS_KEYS, .qk_norm = 1, .ffn = FFN_QWEN3_MOE},
    {.type = "qwen2_moe", .bias = BIAS_QKV, .ffn = FFN_QWEN2_MOE},
    {.type = "olmoe", .qk_norm = 2, .ffn = FFN_OLMOE},
    {.type = "phi3", .fused = 1},
    {.type = "olmo2", .bias = BIAS_KEYS, .qk_norm = 2, .post_norms = 1},
    {.type = "granite", .bias = BIAS_KEYS, .mlp_bias_key = 1},
    {.type = "smollm3", .tied = 1, .bias = BIAS_KEYS, .mlp_bias_key = 1},
    {.type = "gpt_oss", .bias = BIAS_KEYS, .bias_default = 1, .sinks = 1, .ffn = FFN_GPT_OSS},
    {.type = "starcoder2", .tied = 1, .bias = BIAS_USE, .bias_default = 1, .ln_bias = 1, .ffn = FFN_PLAIN},
    {.type = "gpt_neox", .bias = BIAS_KEYS, .bias_default = 1, .ln_bias = 1, .ffn = FFN_NEOX},
    {.type = "gemma", .tied = 1, .bias = BIAS_KEYS, .mlp_bias_key = 1},
    {.type = "gemma2", .tied = 1, .bias = BIAS_KEYS, .mlp_bias_key = 1, .ffw_norms = 1},
    {.type = "gemma3_text", .tied = 1, .bias = BIAS_KEYS, .qk_norm = 1, .ffw_norms = 1, .dflt = &GEMMA3_TEXT},
    {.type = "gemma3", .tied = 1, .bias = BIAS_KEYS, .qk_norm = 1, .ffw_norms = 1, .dflt = &GEMMA3_TEXT, .vision = 4},
    {.type = "paligemma", .tied = 1, .bias = BIAS_KEYS, .mlp_bias_key = 1, .vision = 3},
    {.type = "deepseek_v2", .mla = 1},
    {.type = "deepseek_v3", .mla = 1},
    {.type = "kimi_k2", .mla = 1},
    {.type = "glm4_moe", .glm4_moe = 1},
};

/* Tokens per sample of the vision tower: an assumption (a config does not say), the one the
 * bundled qwen2.5-vl-3b.json makes: one image of a 32 x 32 grid of patches (448x448 px at 14 px
 * patches), 1024 tokens, 1024 / merge^2 after the patch merger. */
#define VL_GRID 32

/* The Qwen-VL vision tower (stacks visual.blocks and visual.merger on streams vision and merged)
 * and its patch embedding in the embed stack. qwen2 0: Qwen2.5-VL's (width "hidden_size", gated
 * MLP of "intermediate_size", RMSNorms, merger output "out_hidden_size"); 1: Qwen2-VL's (width
 * "embed_dim", an fc1/fc2 MLP of "mlp_ratio" x the width, LayerNorms with biases, full attention,
 * merger output "hidden_size"). */
static int add_vision(builder *b, const jv *vision, int64_t lm_hidden, int embed, int blocks, int merger, int qwen2)
{
    int64_t h, inter = 0, ratio = 4, heads, in = 3, patch = 14, tpatch = 2, merge = 2, out = lm_hidden;
    char why[160], text[320];
    const char *wkey = qwen2 ? "embed_dim" : "hidden_size";
    if (req(b, vision, wkey, &h) || (!qwen2 && req(b, vision, "intermediate_size", &inter)) ||
        (qwen2 && opt(b, vision, "mlp_ratio", 1, &ratio)) ||
        jv_req_int(vision, "num_heads", 1, 65536, b->file, &heads, b->err) || opt(b, vision, "in_chans", 1, &in) ||
        (qwen2 && opt(b, vision, "in_channels", 1, &in)) || opt(b, vision, "patch_size", 1, &patch) ||
        opt(b, vision, "temporal_patch_size", 1, &tpatch) || opt(b, vision, "spatial_merge_size", 1, &merge) ||
        opt(b, vision, qwen2 ? "hidden_size" : "out_hidden_size", 1, &out))
        return -1;
    if (qwen2) inter = mul(h, ratio);
    if (h % heads) {
        snprintf(why, sizeof why, "(%lld) to divide the vision \"%s\" (%lld)", (long long)heads, wkey, (long long)h);
        return bad_key(b, vision, "num_heads", why);
    }
    if (VL_GRID % merge) {
        snprintf(why, sizeof why, "(%lld) to divide %d, the side of the assumed %d x %d patch grid", (long long)merge,
                 VL_GRID, VL_GRID, VL_GRID);
        return bad_key(b, vision, "spatial_merge_size", why);
    }
    int64_t tokens = VL_GRID * VL_GRID, merged = tokens / (merge * merge);
    int vs = add_stream(b, "vision", tokens), ms = vs < 0 ? -1 : add_stream(b, "merged", merged);
    if (ms < 0) return -1;
    snprintf(text, sizeof text, "vision tokens per sample %lld (one %lldx%lld image, %lld px patches; %lld after the "
             "%lldx%lld merger), an assumption%s", (long long)tokens, (long long)(VL_GRID * patch),
             (long long)(VL_GRID * patch), (long long)patch, (long long)merged, (long long)merge, (long long)merge,
             qwen2 ? "" : "; the vision blocks' window attention is modelled as full attention over the image");
    if (add_source(b, text)) return -1;
    b->m->stacks[blocks].stream = vs;
    b->m->stacks[merger].stream = ms;
    int64_t m = mul(mul(h, merge), merge);
    if (add_t(b, "visual.patch_embed.proj.weight", h, mul(mul(in, tpatch), mul(patch, patch)), 1, embed, 0, -1, ADAMW,
              "Conv3d patch embedding, flattened to 2-D: adamw by policy"))
        return -1;
    last(b)->stream = vs;
    for (int k = 1; k <= 2; k++) { /* RMSNorms (2.5), LayerNorms with biases (2) */
        char name[64];
        snprintf(name, sizeof name, "visual.blocks.*.norm%d.weight", k);
        if (add_t(b, name, h, 0, 1, blocks, 0, -1, ADAMW, "")) return -1;
        snprintf(name, sizeof name, "visual.blocks.*.norm%d.bias", k);
        if (qwen2 && add_t(b, name, h, 0, 1, blocks, 0, -1, ADAMW, "")) return -1;
    }
    if (add_t(b, "visual.blocks.*.attn.qkv.weight", mul(3, h), h, 1, blocks, 0, -1, MUON, "fused q/k/v") ||
        add_t(b, "visual.blocks.*.attn.qkv.bias", mul(3, h), 0, 1, blocks, 0, -1, ADAMW, "") ||
        add_t(b, "visual.blocks.*.attn.proj.weight", h, h, 1, blocks, 0, -1, MUON, "") ||
        add_t(b, "visual.blocks.*.attn.proj.bias", h, 0, 1, blocks, 0, -1, ADAMW, ""))
        return -1;
    if (qwen2 ? add_plain_mlp(b, "visual.blocks.*.mlp", FC1_FC2, h, inter, blocks, "")
              : add_mlp(b, "visual.blocks.*.mlp", h, inter, 1, blocks, 0, -1, 1, ""))
        return -1;
    /* Qwen-VL's vision blocks turn every dim of a head by the patch's 2-D position */
    if (add_attn(b, blocks, heads, heads, h / heads, h / heads, 0, h / heads / 2 * 2)) return -1;
    if (add_t(b, "visual.merger.ln_q.weight", h, 0, 1, merger, 0, -1, ADAMW, "")) return -1;
    last(b)->stream = vs; /* the norm runs on the patches before they are merged */
    if (qwen2) {
        if (add_t(b, "visual.merger.ln_q.bias", h, 0, 1, merger, 0, -1, ADAMW, "")) return -1;
        last(b)->stream = vs;
    }
    if (add_t(b, "visual.merger.mlp.0.weight", m, m, 1, merger, 0, -1, MUON, "patch merge") ||
        add_t(b, "visual.merger.mlp.0.bias", m, 0, 1, merger, 0, -1, ADAMW, "") ||
        add_t(b, "visual.merger.mlp.2.weight", out, m, 1, merger, 0, -1, MUON, "-> LM hidden") ||
        add_t(b, "visual.merger.mlp.2.bias", out, 0, 1, merger, 0, -1, ADAMW, ""))
        return -1;
    return 0;
}

/* PaliGemma's SigLIP tower (stack vision_tower.encoder.layers on stream vision, "num_hidden_layers"
 * blocks of LayerNorms with biases, q/k/v/o with biases, bidirectional attention, an fc1/fc2 MLP)
 * with its patch and position embeddings and post-LayerNorm, and the multi-modal projector to the
 * language model's width (stack multi_modal_projector). Tokens per image: (image_size /
 * patch_size)^2 from the config (224 px when it gives none, or its num_image_tokens); one image
 * per sample, an assumption the source states. */
static int add_siglip(builder *b, const jv *vision, int64_t lm_hidden, int embed, int blocks, int proj,
                      const jv *root, int pool)
{
    int64_t h, inter, heads, in = 3, patch = 14, image = 0, ntok = 0, out = lm_hidden, pooled = 256;
    char why[160], text[320];
    if (req(b, vision, "hidden_size", &h) || req(b, vision, "intermediate_size", &inter) ||
        jv_req_int(vision, "num_attention_heads", 1, 65536, b->file, &heads, b->err) ||
        opt(b, vision, "num_channels", 1, &in) || opt(b, vision, "patch_size", 1, &patch) ||
        opt(b, vision, "image_size", 1, &image) || opt(b, vision, "num_image_tokens", 1, &ntok) ||
        opt(b, vision, "projection_dim", 1, &out))
        return -1;
    if (h % heads) {
        snprintf(why, sizeof why, "(%lld) to divide the vision \"hidden_size\" (%lld)", (long long)heads, (long long)h);
        return bad_key(b, vision, "num_attention_heads", why);
    }
    if (image && image % patch) {
        snprintf(why, sizeof why, "(%lld) to be a multiple of \"patch_size\" (%lld)", (long long)image, (long long)patch);
        return bad_key(b, vision, "image_size", why);
    }
    int64_t tokens = image ? (image / patch) * (image / patch) : ntok ? ntok : (224 / patch) * (224 / patch);
    if (pool && opt(b, root, "mm_tokens_per_image", 1, &pooled)) return -1;
    if (pool && tokens % pooled) {
        snprintf(why, sizeof why, "(%lld) to divide the tower's %lld patches per image", (long long)pooled,
                 (long long)tokens);
        return bad_key(b, root, "mm_tokens_per_image", why);
    }
    int vs = add_stream(b, "vision", tokens), ms = pool && vs >= 0 ? add_stream(b, "merged", pooled) : vs;
    if (vs < 0 || ms < 0) return -1;
    snprintf(text, sizeof text, "vision tokens per sample %lld (one image per sample, an assumption; %lld per image "
             "from the config)", (long long)tokens, (long long)tokens);
    if (pool)
        snprintf(text + strlen(text), sizeof text - strlen(text), "; %lld after the projector's pooling",
                 (long long)pooled);
    if (add_source(b, text)) return -1;
    b->m->stacks[blocks].stream = vs;
    b->m->stacks[proj].stream = ms;
    const char *P = "vision_tower.encoder.layers.*.";
    char n[160];
#define VN(x) (snprintf(n, sizeof n, "%s%s", P, x), n)
    /* in the embed stack, on the vision stream */
    if (add_t(b, "vision_tower.embeddings.patch_embedding.weight", h, mul(in, mul(patch, patch)), 1, embed, 0, -1,
              ADAMW, "Conv2d patch embedding, flattened to 2-D: adamw by policy"))
        return -1;
    last(b)->stream = vs;
    if (add_t(b, "vision_tower.embeddings.patch_embedding.bias", h, 0, 1, embed, 0, -1, ADAMW, "")) return -1;
    last(b)->stream = vs;
    if (add_t(b, "vision_tower.embeddings.position_embedding.weight", tokens, h, 1, embed, 0, -1, ADAMW,
              "learned positions, looked up and added"))
        return -1;
    last(b)->stream = vs;
    last(b)->use = DM_USE_EMBEDDING;
    static const char *const qkvo[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    for (int k = 0; k < 4; k++) {
        char w[64];
        snprintf(w, sizeof w, "self_attn.%s.weight", qkvo[k]);
        if (add_t(b, VN(w), h, h, 1, blocks, 0, -1, MUON, "")) return -1;
        snprintf(w, sizeof w, "self_attn.%s.bias", qkvo[k]);
        if (add_t(b, VN(w), h, 0, 1, blocks, 0, -1, ADAMW, "")) return -1;
    }
    if (add_t(b, VN("layer_norm1.weight"), h, 0, 1, blocks, 0, -1, ADAMW, "") ||
        add_t(b, VN("layer_norm1.bias"), h, 0, 1, blocks, 0, -1, ADAMW, "") ||
        add_t(b, VN("layer_norm2.weight"), h, 0, 1, blocks, 0, -1, ADAMW, "") ||
        add_t(b, VN("layer_norm2.bias"), h, 0, 1, blocks, 0, -1, ADAMW, "") ||
        add_plain_mlp(b, VN("mlp"), FC1_FC2, h, inter, blocks, "") ||
        add_attn(b, blocks, heads, heads, h / heads, h / heads, 0, 0))
        return -1;
#undef VN
    if (pool) { /* Gemma-3: post-LayerNorm on the patches, average pooling, an RMSNorm, a projection */
        if (add_t(b, "vision_tower.post_layernorm.weight", h, 0, 1, proj, 0, -1, ADAMW, "on the patches")) return -1;
        last(b)->stream = vs;
        if (add_t(b, "vision_tower.post_layernorm.bias", h, 0, 1, proj, 0, -1, ADAMW, "")) return -1;
        last(b)->stream = vs;
        return add_t(b, "multi_modal_projector.mm_soft_emb_norm.weight", h, 0, 1, proj, 0, -1, ADAMW,
                     "after the pooling") ||
               add_t(b, "multi_modal_projector.mm_input_projection_weight", out, h, 1, proj, 0, -1, MUON,
                     "-> LM hidden (stored in x out)");
    }
    if (add_t(b, "multi_modal_projector.post_layernorm.weight", h, 0, 1, proj, 0, -1, ADAMW,
              "the tower's post-LayerNorm") ||
        add_t(b, "multi_modal_projector.post_layernorm.bias", h, 0, 1, proj, 0, -1, ADAMW, "") ||
        add_t(b, "multi_modal_projector.linear.weight", out, h, 1, proj, 0, -1, MUON, "-> LM hidden") ||
        add_t(b, "multi_modal_projector.linear.bias", out, 0, 1, proj, 0, -1, ADAMW, ""))
        return -1;
    return 0;
}

/* Qwen3-MoE: layer i has routed experts unless mlp_only_layers lists it, and when
 * (i + 1) % decoder_sparse_step == 0 (transformers' Qwen3MoeDecoderLayer). */
static int qwen3_sparse(const jv *only, int64_t step, int64_t i)
{
    if ((i + 1) % step) return 0;
    for (int k = 0; only && k < only->n; k++)
        if ((int64_t)only->items[k]->num == i) return 0;
    return 1;
}

/* Qwen3-MoE's and Qwen2-MoE's MLPs: runs of consecutive sparse (router + experts) or dense
 * layers; Qwen2-MoE's sparse layers add a shared expert of "shared_expert_intermediate_size" on
 * every token and its gate (one output: the sigmoid that scales the shared expert's output). */
static int add_qwen_moe(builder *b, const jv *cfg, const lm_hp *hp, int st, int shared)
{
    int64_t experts, top_k, inter, step = 1, x, shared_inter = 0;
    const jv *only = jv_get(cfg, "mlp_only_layers");
    if (read_routing(b, cfg, "num_experts", &experts, &top_k) || req(b, cfg, "moe_intermediate_size", &inter) ||
        opt(b, cfg, "decoder_sparse_step", 1, &step) ||
        (shared && req(b, cfg, "shared_expert_intermediate_size", &shared_inter)))
        return -1;
    if (only && only->type == JV_NULL) only = NULL;
    if (only && only->type != JV_ARRAY) return bad_key(b, cfg, "mlp_only_layers", "to be an array of layer indices");
    for (int k = 0; only && k < only->n; k++)
        if (jv_as_int(only->items[k], 0, hp->layers - 1, b->file, "an \"mlp_only_layers\" entry", &x, b->err))
            return -1;
    int any = 0;
    for (int first = 0; first < hp->layers;) {
        int sparse = qwen3_sparse(only, step, first), span = 1;
        while (first + span < hp->layers && qwen3_sparse(only, step, first + span) == sparse) span++;
        if (sparse) {
            any = 1;
            if (add_router(b, "layers.*.mlp.gate.weight", hp->hidden, experts, st, first, span) ||
                add_experts(b, "layers.*.mlp.experts.{e}", GATE_UP_DOWN, hp->hidden, inter, experts, st, first, span))
                return -1;
            if (shared && (add_mlp(b, "layers.*.mlp.shared_expert", hp->hidden, shared_inter, 1, st, first, span, 0,
                                   "shared expert") ||
                           add_t(b, "layers.*.mlp.shared_expert_gate.weight", 1, hp->hidden, 1, st, first, span, MUON,
                                 "shared-expert gate (one row): muon under the ndim>=2 rule, as the router")))
                return -1;
        } else if (add_mlp(b, "layers.*.mlp", hp->hidden, hp->inter, 1, st, first, span, 0, "dense FFN layers")) {
            return -1;
        }
        first += span;
    }
    if (any) set_moe(b, st, experts, top_k);
    return 0;
}

/* Routed experts of `intermediate_size` on every layer of `st` (mixtral, olmoe): the router
 * `PREFIX.gate.weight` and the experts `PREFIX.experts.{e}.NAME` (gate, up, down). */
static int add_routed(builder *b, const char *prefix, const char *const names[3], const lm_hp *hp, int64_t experts,
                      int64_t top_k, int st)
{
    char router[160], pre[160];
    snprintf(router, sizeof router, "%s.gate.weight", prefix);
    snprintf(pre, sizeof pre, "%s.experts.{e}", prefix);
    if (add_router(b, router, hp->hidden, experts, st, 0, -1) ||
        add_experts(b, pre, names, hp->hidden, hp->inter, experts, st, 0, -1))
        return -1;
    set_moe(b, st, experts, top_k);
    return 0;
}

/* gpt-oss's MoE: a router with a bias, "num_local_experts" experts of a fused gate/up projection
 * (2 x "intermediate_size" rows) and a down projection, each with its bias (1-D expert tensors:
 * applied over the expert's routed tokens). HF stores each as one 3-D tensor over the experts. */
static int add_gpt_oss_moe(builder *b, const jv *cfg, const lm_hp *hp, int st)
{
    int64_t experts, top_k, h = hp->hidden, inter2 = mul(2, hp->inter);
    if (read_routing(b, cfg, "num_local_experts", &experts, &top_k) ||
        add_router(b, "layers.*.mlp.router.weight", h, experts, st, 0, -1) ||
        add_t(b, "layers.*.mlp.router.bias", experts, 0, 1, st, 0, -1, ADAMW, ""))
        return -1;
    int from = b->m->n_tensors;
    if (add_t(b, "layers.*.mlp.experts.{e}.gate_up_proj", inter2, h, experts, st, 0, -1, MUON,
              "routed experts, fused gate/up") ||
        add_t(b, "layers.*.mlp.experts.{e}.gate_up_proj_bias", inter2, 0, experts, st, 0, -1, ADAMW, "") ||
        add_t(b, "layers.*.mlp.experts.{e}.down_proj", h, hp->inter, experts, st, 0, -1, MUON, "") ||
        add_t(b, "layers.*.mlp.experts.{e}.down_proj_bias", h, 0, experts, st, 0, -1, ADAMW, ""))
        return -1;
    for (int i = from; i < b->m->n_tensors; i++) b->m->tensors[i].use = DM_USE_EXPERT;
    set_moe(b, st, experts, top_k);
    return 0;
}

/* llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, qwen2_moe, olmoe, olmo2, granite, smollm3,
 * gpt_oss, starcoder2, gpt_neox, phi3, gemma, gemma2, gemma3_text, and qwen2_5_vl / qwen2_vl / paligemma / gemma3 (the
 * language model from `cfg`, the tower from `vision`, the multimodal keys in `root`). */
static int import_decoder(builder *b, const jv *cfg, const family *f, const jv *vision, const jv *root)
{
    lm_hp hp;
    if (read_lm(b, cfg, f->tied, f->dflt, &hp)) return -1;
    int attn_bias = f->bias == BIAS_QKV || f->bias_default, o_bias = 0, mlp_bias = 0;
    if (f->bias == BIAS_KEYS) {
        if (opt_bool(b, cfg, "attention_bias", &attn_bias) ||
            (f->mlp_bias_key && opt_bool(b, cfg, "mlp_bias", &mlp_bias)))
            return -1;
        o_bias = attn_bias;
    }
    if (f->bias == BIAS_USE) {
        if (opt_bool(b, cfg, "use_bias", &attn_bias)) return -1;
        o_bias = mlp_bias = attn_bias;
    }
    if (f->ffn == FFN_NEOX) mlp_bias = 1; /* GPT-NeoX's MLP always has biases */
    int64_t experts = 0, top_k = 0;
    if (f->ffn == FFN_MIXTRAL && read_routing(b, cfg, "num_local_experts", &experts, &top_k)) return -1;
    if (f->ffn == FFN_OLMOE && read_routing(b, cfg, "num_experts", &experts, &top_k)) return -1;
    int64_t depth = 0;
    int siglip = f->vision >= 3;
    if (vision && jv_req_int(vision, siglip ? "num_hidden_layers" : "depth", 1, 100000, b->file, &depth, b->err))
        return -1;
    int embed = add_stack(b, "embed", 1), blocks = -1, merger = -1;
    if (embed < 0) return -1;
    if (vision && ((blocks = add_stack(b, siglip ? "vision_tower.encoder.layers" : "visual.blocks", depth)) < 0 ||
                   (merger = add_stack(b, siglip ? "multi_modal_projector" : "visual.merger", 1)) < 0))
        return -1;
    int layers = add_stack(b, "layers", hp.layers), head = add_stack(b, "head", 1);
    if (layers < 0 || head < 0) return -1;

    if (add_embed(b, &hp, embed)) return -1;
    if (vision && (siglip ? add_siglip(b, vision, hp.hidden, embed, blocks, merger, root, f->vision == 4)
                          : add_vision(b, vision, hp.hidden, embed, blocks, merger, f->vision == 2)))
        return -1;
    if (add_gqa(b, "layers", &hp, layers, attn_bias, o_bias, f->qk_norm, f->fused, f->ffn == FFN_NEOX) ||
        read_sliding_window(b, cfg, f->type, layers))
        return -1;
    if (f->sinks && add_t(b, "layers.*.self_attn.sinks", hp.heads, 0, 1, layers, 0, -1, ADAMW,
                          "a learned attention-sink logit per head"))
        return -1;
    switch (f->ffn) {
    case FFN_DENSE:
        if (f->fused) {
            if (add_t(b, "layers.*.mlp.gate_up_proj.weight", mul(2, hp.inter), hp.hidden, 1, layers, 0, -1, MUON,
                      "fused gate/up") ||
                add_t(b, "layers.*.mlp.down_proj.weight", hp.hidden, hp.inter, 1, layers, 0, -1, MUON, ""))
                return -1;
        } else if (add_mlp(b, "layers.*.mlp", hp.hidden, hp.inter, 1, layers, 0, -1, mlp_bias, "")) {
            return -1;
        }
        break;
    case FFN_MIXTRAL: {
        static const char *const w[3] = {"w1", "w3", "w2"}; /* gate, up, down */
        if (add_routed(b, "layers.*.block_sparse_moe", w, &hp, experts, top_k, layers)) return -1;
        break;
    }
    case FFN_QWEN3_MOE:
    case FFN_QWEN2_MOE:
        if (add_qwen_moe(b, cfg, &hp, layers, f->ffn == FFN_QWEN2_MOE)) return -1;
        break;
    case FFN_OLMOE: /* every layer routed, each expert of intermediate_size */
        if (add_routed(b, "layers.*.mlp", GATE_UP_DOWN, &hp, experts, top_k, layers)) return -1;
        break;
    case FFN_GPT_OSS:
        if (add_gpt_oss_moe(b, cfg, &hp, layers)) return -1;
        break;
    case FFN_PLAIN:
    case FFN_NEOX: { /* up, down (GELU between) */
        static const char *const c_fc[2] = {"c_fc", "c_proj"}, *const neox[2] = {"dense_h_to_4h", "dense_4h_to_h"};
        if (add_ffn(b, "layers.*.mlp", f->ffn == FFN_NEOX ? neox : c_fc, 2, hp.hidden, hp.inter, 1, layers, 0, -1,
                    mlp_bias, "non-gated MLP"))
            return -1;
        break;
    }
    }
    if ((!f->post_norms && add_t(b, "layers.*.input_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "")) ||
        (f->ln_bias && add_t(b, "layers.*.input_layernorm.bias", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "LayerNorm")) ||
        add_t(b, "layers.*.post_attention_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "") ||
        (f->ln_bias &&
         add_t(b, "layers.*.post_attention_layernorm.bias", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "LayerNorm")) ||
        (f->post_norms &&
         add_t(b, "layers.*.post_feedforward_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "")))
        return -1;
    if (f->ffw_norms &&
        (add_t(b, "layers.*.pre_feedforward_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "") ||
         add_t(b, "layers.*.post_feedforward_layernorm.weight", hp.hidden, 0, 1, layers, 0, -1, ADAMW, "")))
        return -1;
    return add_head(b, &hp, head, f->ln_bias);
}

/* DeepSeek-V3 style MLA attention and norms of one layer group (prefix "layers" or "mtp"). */
typedef struct mla_hp {
    int64_t q_lora, kv_lora, nope, rope, v, experts, top_k, shared, moe_inter, dense, nextn;
    int score_bias;
} mla_hp;

static int add_mla_attn(builder *b, const char *p, const lm_hp *hp, const mla_hp *a, int st)
{
    char n[160];
    int64_t h = hp->hidden, qk = mul(hp->heads, a->nope + a->rope);
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
        add_t(b, NAME("self_attn.kv_b_proj.weight"), mul(hp->heads, a->nope + a->v), a->kv_lora, 1, st,
              0, -1, MUON, "KV up-proj") ||
        add_t(b, NAME("self_attn.o_proj.weight"), h, mul(hp->heads, a->v), 1, st, 0, -1, MUON, "") ||
        add_t(b, NAME("input_layernorm.weight"), h, 0, 1, st, 0, -1, ADAMW, "") ||
        add_t(b, NAME("post_attention_layernorm.weight"), h, 0, 1, st, 0, -1, ADAMW, ""))
        return -1;
    /* Queries and keys are nope + rope wide per head, values v_head_dim; no shared kv heads; the
     * rotary embedding turns the rope part of each. */
    return add_attn(b, st, hp->heads, hp->heads, a->nope + a->rope, a->v, 1, a->rope);
}

/* Router, routed experts, shared experts over layers [first, first + span) of `st`. */
static int add_moe(builder *b, const char *p, const lm_hp *hp, const mla_hp *a, int st, int first,
                   int span)
{
    char n[160], pre[128];
    int64_t h = hp->hidden;
    if (add_router(b, NAME("mlp.gate.weight"), h, a->experts, st, first, span)) return -1;
    if (a->score_bias && add_t(b, NAME("mlp.gate.e_score_correction_bias"), a->experts, 0, 1, st,
                               first, span, ADAMW, "aux-loss-free bias (not gradient-trained)"))
        return -1;
    snprintf(pre, sizeof pre, "%s.*.mlp.experts.{e}", p);
    if (add_experts(b, pre, GATE_UP_DOWN, h, a->moe_inter, a->experts, st, first, span)) return -1;
    snprintf(pre, sizeof pre, "%s.*.mlp.shared_experts", p);
    if (a->shared && add_mlp(b, pre, h, mul(a->moe_inter, a->shared), 1, st, first, span, 0, ""))
        return -1;
    set_moe(b, st, a->experts, a->top_k);
    return 0;
#undef NAME
}

/* DeepSeek-V3's MoE keys (also GLM-4.5's): routed experts and top-k, their width, shared
 * experts, the first dense layers, the MTP layers. */
static int read_ds_moe(builder *b, const jv *cfg, const lm_hp *hp, mla_hp *a)
{
    if (read_routing(b, cfg, "n_routed_experts", &a->experts, &a->top_k) ||
        req(b, cfg, "moe_intermediate_size", &a->moe_inter) || opt(b, cfg, "n_shared_experts", 0, &a->shared) ||
        opt(b, cfg, "first_k_dense_replace", 0, &a->dense) ||
        opt(b, cfg, "num_nextn_predict_layers", 0, &a->nextn))
        return -1;
    if (a->dense > hp->layers) {
        char why[96];
        snprintf(why, sizeof why, "at most \"num_hidden_layers\" (%lld)", (long long)hp->layers);
        return bad_key(b, cfg, "first_k_dense_replace", why);
    }
    return 0;
}

/* The FFNs of stack `layers`: dense MLPs of intermediate_size on the first a->dense layers, the
 * MoE (add_moe) on the rest. */
static int add_ds_ffn(builder *b, const lm_hp *hp, const mla_hp *a, int layers)
{
    int dense = (int)a->dense, nmoe = (int)(hp->layers - a->dense);
    if (dense && add_mlp(b, "layers.*.mlp", hp->hidden, hp->inter, 1, layers, 0, dense, 0, "dense FFN layers"))
        return -1;
    return nmoe ? add_moe(b, "layers", hp, a, layers, dense, nmoe) : 0;
}

/* An MTP layer's own tensors (stack mtp): eh_proj over [embedding; hidden] and three norms; the
 * caller adds its decoder layer (attention, MoE). Its embed_tokens and shared_head.head are the
 * main model's (shared): not repeated; it applies the main output head (or the tied embedding). */
static int add_mtp(builder *b, const lm_hp *hp, int mtp)
{
    if (add_t(b, "mtp.*.eh_proj.weight", hp->hidden, mul(2, hp->hidden), 1, mtp, 0, -1, MUON,
              "[embedding; hidden] -> hidden") ||
        add_t(b, "mtp.*.enorm.weight", hp->hidden, 0, 1, mtp, 0, -1, ADAMW, "") ||
        add_t(b, "mtp.*.hnorm.weight", hp->hidden, 0, 1, mtp, 0, -1, ADAMW, "") ||
        add_t(b, "mtp.*.shared_head.norm.weight", hp->hidden, 0, 1, mtp, 0, -1, ADAMW, ""))
        return -1;
    b->m->stacks[mtp].tied_head = hp->tied ? hp->embed : hp->lm_head;
    return 0;
}

static int import_mla(builder *b, const jv *cfg)
{
    lm_hp hp;
    mla_hp a = {0};
    if (read_lm(b, cfg, 0, NULL, &hp)) return -1;
    const jv *ql = jv_get(cfg, "q_lora_rank");
    if (!ql) return jv_req(cfg, "q_lora_rank", JV_NUMBER, b->file, &ql, b->err);
    if (opt(b, cfg, "q_lora_rank", 1, &a.q_lora) || req(b, cfg, "kv_lora_rank", &a.kv_lora) ||
        req(b, cfg, "qk_nope_head_dim", &a.nope) || req(b, cfg, "qk_rope_head_dim", &a.rope) ||
        req(b, cfg, "v_head_dim", &a.v) || read_ds_moe(b, cfg, &hp, &a))
        return -1;
    if (a.rope % 2) /* a rotary embedding turns pairs of dims */
        return bad_key(b, cfg, "qk_rope_head_dim", "to be even (the rotary embedding turns pairs of dims)");
    const jv *tm = jv_get(cfg, "topk_method");
    a.score_bias = tm && tm->type == JV_STRING && strcmp(tm->str, "noaux_tc") == 0;
    int embed = add_stack(b, "embed", 1), layers = add_stack(b, "layers", hp.layers),
        head = add_stack(b, "head", 1), mtp = -1;
    if (embed < 0 || layers < 0 || head < 0) return -1;
    if (a.nextn && (mtp = add_stack(b, "mtp", a.nextn)) < 0) return -1;
    if (add_embed(b, &hp, embed) || add_mla_attn(b, "layers", &hp, &a, layers) || add_ds_ffn(b, &hp, &a, layers) ||
        add_head(b, &hp, head, 0))
        return -1;
    if (mtp >= 0 && (add_mtp(b, &hp, mtp) || add_mla_attn(b, "mtp", &hp, &a, mtp) || add_moe(b, "mtp", &hp, &a, mtp, 0, -1)))
        return -1;
    return 0;
}

/* GLM-4.5 (glm4_moe): grouped-query attention (q/k/v biases under "attention_bias", none on o;
 * per-head q/k RMSNorms under "use_qk_norm"), DeepSeek-V3's MoE (a router with its aux-loss-free
 * bias, routed and shared experts, the first first_k_dense_replace layers dense) and its MTP
 * layers (model.layers.N.. in its checkpoints; mtp.* here, as DeepSeek-V3's). Absent MoE keys
 * take Glm4MoeConfig's defaults, named in the source. */
static int import_glm4_moe(builder *b, const jv *cfg)
{
    lm_hp hp;
    mla_hp a = {.shared = 1, .dense = 1, .score_bias = 1};
    int qkv_bias = 0, qk_norm = 0;
    char used[160] = "";
    if (read_lm(b, cfg, 0, NULL, &hp) ||
        opt_bool(b, cfg, "attention_bias", &qkv_bias) || opt_bool(b, cfg, "use_qk_norm", &qk_norm))
        return -1;
    if (!jv_get(cfg, "n_shared_experts")) snprintf(used + strlen(used), sizeof used - strlen(used), "n_shared_experts 1");
    if (!jv_get(cfg, "first_k_dense_replace"))
        snprintf(used + strlen(used), sizeof used - strlen(used), "%sfirst_k_dense_replace 1", used[0] ? ", " : "");
    if (read_ds_moe(b, cfg, &hp, &a)) return -1;
    if (used[0]) {
        char text[240];
        snprintf(text, sizeof text, "absent keys given Glm4MoeConfig's defaults: %s", used);
        if (add_source(b, text)) return -1;
    }
    int embed = add_stack(b, "embed", 1), layers = add_stack(b, "layers", hp.layers),
        head = add_stack(b, "head", 1), mtp = -1;
    if (embed < 0 || layers < 0 || head < 0) return -1;
    if (a.nextn && (mtp = add_stack(b, "mtp", a.nextn)) < 0) return -1;
    for (int k = 0; k < (mtp >= 0 ? 2 : 1); k++) {
        const char *p = k ? "mtp" : "layers";
        int st = k ? mtp : layers;
        char n[96];
        if (k ? add_mtp(b, &hp, mtp) : add_embed(b, &hp, embed)) return -1;
        if (add_gqa(b, p, &hp, st, qkv_bias, 0, qk_norm, 0, 0) || (!k && read_sliding_window(b, cfg, "glm4_moe", st)) ||
            (k ? add_moe(b, p, &hp, &a, st, 0, -1) : add_ds_ffn(b, &hp, &a, st)))
            return -1;
        snprintf(n, sizeof n, "%s.*.input_layernorm.weight", p);
        if (add_t(b, n, hp.hidden, 0, 1, st, 0, -1, ADAMW, "")) return -1;
        snprintf(n, sizeof n, "%s.*.post_attention_layernorm.weight", p);
        if (add_t(b, n, hp.hidden, 0, 1, st, 0, -1, ADAMW, "") || (!k && add_head(b, &hp, head, 0))) return -1;
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

int hf_import_tree(const jv *root, const char *path, dm_model **out, dm_err *err)
{
    dm_model *m = NULL;
    builder b = {0};
    const char *type;
    char src[1024];
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
    m->has_arch = 1;
    const family *f = NULL;
    for (size_t i = 0; i < sizeof families / sizeof families[0] && !f; i++)
        if (strcmp(type, families[i].type) == 0) f = &families[i];
    int rc;
    if (!f) {
        const jv *v = jv_get(root, "model_type");
        char list[512] = "";
        for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", families[i].type);
        dm_err_set(err, "%s:%d:%d: expected \"model_type\" to be one of %s; found \"%s\"", path, v->line, v->col,
                   list, type);
        goto fail;
    } else if (f->mla) {
        rc = import_mla(&b, root);
    } else if (f->glm4_moe) {
        rc = import_glm4_moe(&b, root);
    } else if (f->vision) {
        const jv *vision, *lm = jv_get(root, "text_config");
        if (jv_req(root, "vision_config", JV_OBJECT, path, &vision, err)) goto fail;
        /* Newer transformers nest the language model's keys in "text_config". */
        rc = import_decoder(&b, lm && lm->type == JV_OBJECT ? lm : root, f, vision, root);
    } else {
        rc = import_decoder(&b, root, f, NULL, root);
    }
    if (rc) goto fail;
    *out = m;
    return 0;
fail:
    dm_model_free(m);
    return -1;
}

int hf_import_config(const char *path, dm_model **out, dm_err *err)
{
    jv *root = jv_parse_file(path, err);
    if (!root) return -1;
    int rc = hf_import_tree(root, path, out, err);
    jv_free(root);
    return rc;
}
