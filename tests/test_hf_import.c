/* test_hf_import.c: HuggingFace config.json import (core/hf_import.c). Sample configs written
 * from the published hyper-parameters (tests/data/hf) must give the bundled files' parameter
 * totals (within 0.1%) and Muon matrix counts, tensor for tensor where the names agree; Gemma
 * configs give the published totals; bad configs are rejected naming the file and the key, and
 * configs whose tensors pass the model format's limits naming the tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_import.h"
#include "model.h"
#include "tap.h"

#define HF_DIR DM_SRCDIR "/tests/data/hf"
#define MODELS_DIR DM_SRCDIR "/models"

static const dm_tensor *find(const dm_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* Every imported tensor has a twin in the bundled file with the same shape, count, stack, layer
 * range and role; returns the number of mismatches (and names the first few). */
static int compare_tensors(const dm_model *a, const dm_model *b, const char *what)
{
    int bad = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const dm_tensor *t = &a->tensors[i], *u = find(b, t->name);
        const char *why = NULL;
        if (!u) why = "missing in the bundled file";
        else if (t->rows != u->rows || t->cols != u->cols || t->ndim != u->ndim) why = "shape differs";
        else if (t->count != u->count) why = "count differs";
        else if (strcmp(a->stacks[t->stack].name, b->stacks[u->stack].name) != 0) why = "stack differs";
        else if (t->first_layer != u->first_layer || t->layer_span != u->layer_span) why = "layers differ";
        else if (t->role != u->role) why = "role differs";
        if (why && bad++ < 5) tap_diag("%s: %s: %s", what, t->name, why);
    }
    return bad;
}

static void check_pair(const char *config, const char *bundled, int exact_names)
{
    char cpath[1024], mpath[1024];
    snprintf(cpath, sizeof cpath, "%s/%s.json", HF_DIR, config);
    snprintf(mpath, sizeof mpath, "%s/%s.json", MODELS_DIR, bundled);
    dm_model *a = NULL, *b = NULL;
    dm_err err = {{0}};
    int rc = hf_import_config(cpath, &a, &err);
    if (!ok(rc == 0, "%s imports%s%s", config, rc ? ": " : "", rc ? err.msg : "")) return;
    rc = dm_model_load_file(mpath, &b, &err);
    if (ok(rc == 0, "%s loads", bundled)) {
        int64_t pa = dm_model_params(a), pb = dm_model_params(b);
        ok((double)llabs(pa - pb) <= 0.001 * (double)pb,
           "%s: imported %lld parameters, bundled %lld (%+.4f%%)", config, (long long)pa,
           (long long)pb, 100.0 * (double)(pa - pb) / (double)pb);
        int64_t ca = dm_model_count_role(a, DM_ROLE_MUON), cb = dm_model_count_role(b, DM_ROLE_MUON);
        ok(ca == cb, "%s: %lld Muon matrices, bundled %lld", config, (long long)ca, (long long)cb);
        ok(dm_model_params_role(a, DM_ROLE_MUON) == dm_model_params_role(b, DM_ROLE_MUON),
           "%s: Muon parameters agree", config);
        ok(a->n_layers == b->n_layers, "%s: %d global layers, bundled %d", config, a->n_layers,
           b->n_layers);
        if (exact_names)
            ok(compare_tensors(a, b, config) == 0 && a->n_tensors == b->n_tensors,
               "%s: same %d tensor entries as the bundled file", config, a->n_tensors);
    }
    dm_model_free(a);
    dm_model_free(b);
}

static void check_total(const char *config, int64_t want, int64_t muon, const char *why)
{
    char cpath[1024];
    snprintf(cpath, sizeof cpath, "%s/%s.json", HF_DIR, config);
    dm_model *a = NULL;
    dm_err err = {{0}};
    int rc = hf_import_config(cpath, &a, &err);
    if (!ok(rc == 0, "%s imports%s%s", config, rc ? ": " : "", rc ? err.msg : "")) return;
    ok(dm_model_params(a) == want, "%s: %lld parameters (%s: %lld)", config,
       (long long)dm_model_params(a), why, (long long)want);
    ok(dm_model_count_role(a, DM_ROLE_MUON) == muon, "%s: %lld Muon matrices (want %lld)", config,
       (long long)dm_model_count_role(a, DM_ROLE_MUON), (long long)muon);
    dm_model_free(a);
}

/* Import, write with dm_model_write, read back: the same model. */
static void check_write_roundtrip(void)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "/tmp/dm_hf_import_%d.json", (int)getpid());
    dm_model *a = NULL, *b = NULL;
    dm_err err = {{0}};
    int rc = hf_import_config(HF_DIR "/deepseek-v3.json", &a, &err);
    if (rc == 0) rc = dm_model_write(a, tmp, &err);
    if (rc == 0) rc = dm_model_load_file(tmp, &b, &err);
    if (ok(rc == 0, "deepseek-v3 import -> write -> load%s%s", rc ? ": " : "", rc ? err.msg : "")) {
        ok(dm_model_params(a) == dm_model_params(b) &&
           dm_model_count_role(a, DM_ROLE_MUON) == dm_model_count_role(b, DM_ROLE_MUON) &&
           a->n_tensors == b->n_tensors && compare_tensors(a, b, "roundtrip") == 0,
           "the file read back is the imported model");
        ok(strcmp(a->name, "deepseek-v3") == 0, "name from the file stem: %s", a->name);
    }
    dm_model_free(a);
    dm_model_free(b);
    unlink(tmp);
}

/* A config that must be rejected with a message containing the file name and `key`. */
static void check_bad(const char *what, const char *doc, const char *key)
{
    char path[256];
    snprintf(path, sizeof path, "/tmp/dm_bad_config_%d.json", (int)getpid());
    if (tap_write_file(what, path, doc)) return;
    dm_model *m = NULL;
    dm_err err = {{0}};
    int rc = hf_import_config(path, &m, &err);
    ok(rc == -1 && m == NULL, "%s: rejected", what);
    ok(strstr(err.msg, path) != NULL && strstr(err.msg, key) != NULL,
       "%s: message names the file and \"%s\": %s", what, key, err.msg);
    dm_model_free(m);
    unlink(path);
}

int main(void)
{
    check_pair("qwen2.5-7b", "qwen2.5-7b", 1);
    check_pair("qwen2.5-3b", "qwen2.5-3b", 1);
    check_pair("llama-3.1-8b", "llama-3.1-8b", 1);
    check_pair("llama-3.2-3b", "llama-3.2-3b", 1);
    check_pair("qwen2.5-vl-3b", "qwen2.5-vl-3b", 1);
    check_pair("moonlight-16b-a3b", "moonlight-16b-a3b", 1);
    check_pair("deepseek-v3", "deepseek-v3", 1);
    check_pair("kimi-k2", "kimi-k2", 1);
    /* Gemma 2B (tied, 1 kv head) and Gemma-2 2B (4 norms per layer): the published totals. */
    check_total("gemma-2b", 2506172416LL, 7 * 18, "HuggingFace google/gemma-2b");
    check_total("gemma2-2b", 2614341888LL, 7 * 26, "HuggingFace google/gemma-2-2b");
    check_write_roundtrip();

    check_bad("unknown model_type", "{\"model_type\": \"mamba\", \"hidden_size\": 64}\n", "model_type");
    check_bad("no model_type", "{\"hidden_size\": 64}\n", "model_type");
    check_bad("missing hidden_size",
              "{\"model_type\": \"llama\", \"intermediate_size\": 256, \"num_hidden_layers\": 2,\n"
              " \"num_attention_heads\": 4, \"vocab_size\": 1000}\n", "hidden_size");
    check_bad("negative layers",
              "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": -2, \"num_attention_heads\": 4, \"vocab_size\": 1000}\n",
              "num_hidden_layers");
    check_bad("missing kv_lora_rank",
              "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 1000,\n"
              " \"q_lora_rank\": null, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8,\n"
              " \"v_head_dim\": 16, \"n_routed_experts\": 4, \"moe_intermediate_size\": 32}\n",
              "kv_lora_rank");
    check_bad("missing q_lora_rank",
              "{\"model_type\": \"kimi_k2\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 1000,\n"
              " \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8,\n"
              " \"v_head_dim\": 16, \"n_routed_experts\": 4, \"moe_intermediate_size\": 32}\n",
              "q_lora_rank");
    check_bad("missing vision_config",
              "{\"model_type\": \"qwen2_5_vl\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 1000}\n",
              "vision_config");
    check_bad("tie_word_embeddings not a boolean",
              "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 1000,\n"
              " \"tie_word_embeddings\": \"yes\"}\n", "tie_word_embeddings");
    check_bad("broken JSON", "{\"model_type\": \"llama\",\n \"hidden_size\" 64}\n", ":2:");
    /* Sizes past the model format's limits: refused here, naming the tensor, so `model import`
     * never writes a file its own loader refuses (and no product overflows on the way). */
    check_bad("a q projection wider than 2^24 (heads x head_dim)",
              "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 2, \"num_attention_heads\": 4096, \"head_dim\": 8192, \"vocab_size\": 1000}\n",
              "tensor layers.*.self_attn.q_proj.weight would be 33554432 x 64");
    check_bad("a vision tower of 2^24 blocks",
              "{\"model_type\": \"qwen2_5_vl\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 1000,\n"
              " \"vision_config\": {\"hidden_size\": 32, \"intermediate_size\": 64, \"num_heads\": 2, \"depth\": 16777216}}\n",
              "expected \"depth\" in [1, 100000], found 16777216");
    check_bad("a patch merge of 2^72 elements (the product overflowed int64)",
              "{\"model_type\": \"qwen2_5_vl\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 1000,\n"
              " \"vision_config\": {\"hidden_size\": 16777216, \"intermediate_size\": 64, \"depth\": 1, \"num_heads\": 1,\n"
              "  \"patch_size\": 16777216, \"temporal_patch_size\": 16777216, \"spatial_merge_size\": 1}}\n",
              "visual.patch_embed.proj.weight would be 16777216 x 2^63 or more");
    check_bad("experts x layers past 2^24 tensors in one entry",
              "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"intermediate_size\": 256,\n"
              " \"num_hidden_layers\": 100, \"num_attention_heads\": 4, \"vocab_size\": 1000,\n"
              " \"q_lora_rank\": null, \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8,\n"
              " \"v_head_dim\": 16, \"n_routed_experts\": 1048576, \"num_experts_per_tok\": 1, \"moe_intermediate_size\": 32}\n",
              "104857600 of them");
    dm_model *m = NULL;
    dm_err err = {{0}};
    ok(hf_import_config("/nonexistent/config.json", &m, &err) == -1 &&
       strstr(err.msg, "/nonexistent/config.json") != NULL, "missing file: %s", err.msg);
    return tap_done();
}
