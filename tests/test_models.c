/* test_models.c: the bundled model files (models/ *.json) load, match their published parameter
 * counts, reproduce themselves through dm_model_write, and bad model files are rejected with a
 * message naming the file and the line; a causal attention block's products (--attention
 * causal, workload.h) cover its lower triangle once. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "model.h"
#include "tap.h"
#include "wk_ref.h"
#include "workload.h"

#define MODELS_DIR DM_SRCDIR "/models"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (len) *len = n;
    return buf;
}

/* Load + write reproduces the file byte for byte (the generator writes the loader's layout). */
static void check_roundtrip(const dm_model *m, const char *path, const char *stem)
{
    char tmp[512];
    dm_err err = {{0}};
    snprintf(tmp, sizeof tmp, "/tmp/dm_test_models_%d_%s", (int)getpid(), stem);
    int rc = dm_model_write(m, tmp, &err);
    size_t la = 0, lb = 0;
    char *a = slurp(path, &la), *b = rc == 0 ? slurp(tmp, &lb) : NULL;
    int same = a && b && la == lb && memcmp(a, b, la) == 0;
    ok(same, "%s: dm_model_write reproduces the file (%s)", stem, rc ? err.msg : "written");
    if (!same && a && b) {
        size_t i = 0, line = 1;
        while (i < la && i < lb && a[i] == b[i]) line += a[i++] == '\n';
        tap_diag("first difference at line %zu", line);
    }
    free(a);
    free(b);
    unlink(tmp);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_bundled(void)
{
    DIR *d = opendir(MODELS_DIR);
    ok(d != NULL, "models folder %s opens", MODELS_DIR);
    if (!d) return;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    ok(n >= 20, "at least 20 bundled models (found %d)", n);
    for (int i = 0; i < n; i++) {
        char path[1024], stem[256];
        snprintf(path, sizeof path, "%s/%s", MODELS_DIR, names[i]);
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(names[i]) - 5), names[i]);
        dm_model *m = NULL;
        dm_err err = {{0}};
        int rc = dm_model_load_file(path, &m, &err);
        ok(rc == 0, "%s loads%s%s", stem, rc ? ": " : "", rc ? err.msg : "");
        if (rc) {
            free(names[i]);
            continue;
        }
        int64_t p = dm_model_params(m), pub = m->published_params;
        ok(pub > 0 && (double)llabs(p - pub) <= 0.005 * (double)pub,
           "%s: %lld parameters within 0.5%% of published %lld (%+.3f%%)", stem, (long long)p,
           (long long)pub, pub ? 100.0 * (double)(p - pub) / (double)pub : 0.0);
        int64_t pm = dm_model_params_role(m, DM_ROLE_MUON), pa = dm_model_params_role(m, DM_ROLE_ADAMW);
        ok(pm > 0 && pm + pa == p, "%s: muon %lld + adamw %lld parameters add up", stem,
           (long long)pm, (long long)pa);
        check_roundtrip(m, path, stem);
        dm_model_free(m);
        free(names[i]);
    }
}

/* Published Muon matrix counts (reference README table) for the dense models. */
static void check_counts(void)
{
    static const struct { const char *name; int64_t muon; double params_b; } want[] = {
        {"Qwen2.5-0.5B", 168, 0.494}, {"Qwen2.5-1.5B", 196, 1.544}, {"Qwen2.5-3B", 252, 3.086},
        {"Qwen2.5-7B", 196, 7.616},   {"Qwen2.5-14B", 336, 14.77},  {"Qwen2.5-32B", 448, 32.76},
        {"Qwen2.5-72B", 560, 72.71},  {"Llama-3.2-3B", 196, 3.213}, {"Llama-3.1-8B", 224, 8.030},
        {"Qwen2.5-VL-3B", 414, 3.755}, {"Wan2.2-TI2V-5B", 305, 5.0}, {"Wan2.1-T2V-14B", 405, 14.29},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        dm_model *m = NULL;
        dm_err err = {{0}};
        if (!ok(dm_model_load(want[i].name, &m, &err) == 0, "dm_model_load(\"%s\")%s%s",
                want[i].name, m ? "" : ": ", m ? "" : err.msg))
            continue;
        int64_t c = dm_model_count_role(m, DM_ROLE_MUON);
        ok(c == want[i].muon, "%s: %lld Muon matrices (want %lld)", want[i].name, (long long)c,
           (long long)want[i].muon);
        ok_near(dm_model_params(m) / 1e9, want[i].params_b, 0.002, "%s: %.3f B parameters",
                want[i].name, dm_model_params(m) / 1e9);
        dm_model_free(m);
    }
    dm_model *m = NULL;
    dm_err err = {{0}};
    if (ok(dm_model_load("Qwen2.5-7B", &m, &err) == 0, "Qwen2.5-7B by name")) {
        ok(dm_model_count_role(m, DM_ROLE_MUON) == 196, "Qwen2.5-7B has 196 Muon matrices");
        ok_near(dm_model_params(m) / 1e9, 7.6, 0.01, "Qwen2.5-7B has 7.6 B parameters (%.4f B)",
                dm_model_params(m) / 1e9);
        dm_model_free(m);
    }
    /* WALL-OSS: file stem wall-oss-flow, model name WALL-OSS; both resolve. */
    const char *aliases[] = {"WALL-OSS", "wall-oss-flow"};
    for (int i = 0; i < 2; i++) {
        m = NULL;
        int rc = dm_model_load(aliases[i], &m, &err);
        ok(rc == 0 && strstr(m->path, "wall-oss-flow.json") != NULL, "\"%s\" resolves to %s",
           aliases[i], rc ? err.msg : m->path);
        if (rc == 0) ok(dm_model_count_role(m, DM_ROLE_MUON) == 527,
                        "WALL-OSS: 527 Muon matrices (as the reference and the DMuon paper count)");
        dm_model_free(m);
    }
}

/* Layer placement: DeepSeek-V3's dense first layers, MoE layers and the MTP stack. */
static void check_layers(void)
{
    dm_model *m = NULL;
    dm_err err = {{0}};
    if (!ok(dm_model_load("deepseek-v3", &m, &err) == 0, "deepseek-v3 loads")) return;
    dm_matrix *mx = NULL;
    int64_t n = 0;
    int rc = dm_model_matrices(m, DM_ROLE_MUON, &mx, &n, &err);
    ok(rc == 0 && n == dm_model_count_role(m, DM_ROLE_MUON), "matrices expand (%lld)", (long long)n);
    ok(m->n_layers == 64, "64 global layers: embed, 61 layers, head, mtp (%d)", m->n_layers);
    int64_t per[64] = {0};
    for (int64_t i = 0; rc == 0 && i < n; i++)
        if (mx[i].layer >= 0 && mx[i].layer < 64) per[mx[i].layer]++;
    /* global 1 = layers.0 (dense): q_a, q_b, kv_a, kv_b, o + gate, up, down */
    ok(per[1] == 8 && per[3] == 8, "dense layers hold 8 Muon matrices (%lld, %lld)",
       (long long)per[1], (long long)per[3]);
    /* MoE layer: 5 attention + router + 256 x 3 experts + 3 shared */
    ok(per[4] == 777 && per[61] == 777, "MoE layers hold 777 Muon matrices (%lld, %lld)",
       (long long)per[4], (long long)per[61]);
    ok(per[0] == 0 && per[62] == 0, "embed and head stacks hold no Muon matrix");
    ok(per[63] == 778, "MTP layer: a MoE layer plus eh_proj (%lld)", (long long)per[63]);
    free(mx);
    dm_model_free(m);
}

/* ---- bad files ------------------------------------------------------------------------------ */
static const char *tmpl_head =
    "{\n"                                                       /* 1 */
    "  \"format\": \"dmuon-model-1\",\n"                        /* 2 */
    "  \"name\": \"bad\",\n"                                    /* 3 */
    "  \"stacks\": [{\"name\": \"layers\", \"layers\": 4}],\n"  /* 4 */
    "  \"tensors\": [\n"                                        /* 5 */
    "    {\"name\": \"layers.*.norm\", \"shape\": [64], \"count\": 4, \"stack\": \"layers\", "
    "\"role\": \"adamw\"},\n";                                  /* 6 */
static const char *tmpl_tail = "  ]\n}\n";                      /* 8, 9 */

static void check_bad(const char *what, const char *line7, int want_line)
{
    char path[256], doc[2048], needle[300];
    snprintf(path, sizeof path, "/tmp/dm_bad_model_%d.json", (int)getpid());
    snprintf(doc, sizeof doc, "%s    %s\n%s", tmpl_head, line7, tmpl_tail);
    if (tap_write_file(what, path, doc)) return;
    dm_model *m = NULL;
    dm_err err = {{0}};
    int rc = dm_model_load_file(path, &m, &err);
    snprintf(needle, sizeof needle, "%s:%d:", path, want_line);
    if (want_line == 0) {
        ok(rc == 0, "%s: accepted%s%s", what, rc ? ": " : "", rc ? err.msg : "");
    } else {
        ok(rc == -1 && m == NULL, "%s: rejected", what);
        ok(strstr(err.msg, needle) != NULL, "%s: message names file and line %d: %s", what,
           want_line, err.msg);
    }
    dm_model_free(m);
    unlink(path);
}

static void check_bad_files(void)
{
    const char *good = "{\"name\": \"layers.*.w\", \"shape\": [64, 32], \"count\": 4, "
                       "\"stack\": \"layers\", \"role\": \"muon\"}";
    check_bad("the template itself", good, 0);
    check_bad("broken JSON", "{\"name\": \"layers.*.w\", \"shape\": [64, 32] \"count\": 4, "
              "\"stack\": \"layers\", \"role\": \"muon\"}", 7);
    check_bad("negative dimension", "{\"name\": \"layers.*.w\", \"shape\": [-64, 32], \"count\": 4, "
              "\"stack\": \"layers\", \"role\": \"muon\"}", 7);
    check_bad("zero dimension", "{\"name\": \"layers.*.w\", \"shape\": [64, 0], \"count\": 4, "
              "\"stack\": \"layers\", \"role\": \"muon\"}", 7);
    check_bad("missing field", "{\"name\": \"layers.*.w\", \"shape\": [64, 32], "
              "\"stack\": \"layers\", \"role\": \"muon\"}", 7);
    check_bad("absurd size", "{\"name\": \"layers.*.w\", \"shape\": [10000000000000, 10000000000000], "
              "\"count\": 4, \"stack\": \"layers\", \"role\": \"muon\"}", 7);
    check_bad("too many elements", "{\"name\": \"layers.*.w\", \"shape\": [16777216, 16777216], "
              "\"count\": 4, \"stack\": \"layers\", \"role\": \"muon\"}", 7);
    check_bad("count not a multiple of layer_span", "{\"name\": \"layers.*.w\", \"shape\": [64, 32], "
              "\"count\": 3, \"stack\": \"layers\", \"role\": \"muon\"}", 7);
    check_bad("layer range past the stack", "{\"name\": \"layers.*.w\", \"shape\": [64, 32], "
              "\"count\": 3, \"stack\": \"layers\", \"first_layer\": 2, \"layer_span\": 3, "
              "\"role\": \"muon\"}", 7);
    check_bad("unknown stack", "{\"name\": \"layers.*.w\", \"shape\": [64, 32], \"count\": 4, "
              "\"stack\": \"blocks\", \"role\": \"muon\"}", 7);
    check_bad("unknown role", "{\"name\": \"layers.*.w\", \"shape\": [64, 32], \"count\": 4, "
              "\"stack\": \"layers\", \"role\": \"sgd\"}", 7);
    check_bad("three dimensions", "{\"name\": \"layers.*.w\", \"shape\": [64, 32, 3], \"count\": 4, "
              "\"stack\": \"layers\", \"role\": \"muon\"}", 7);
}

/* ---- hostile sizes ------------------------------------------------------------------------- */

static char *grow(char *buf, size_t *cap, size_t need)
{
    if (need < *cap) return buf;
    *cap = 2 * need;
    return realloc(buf, *cap);
}

/* A model text with n_stacks stacks of `layers` layers each (names s0, s1, ...; name `dup_at`
 * repeats the name of stack 0 when >= 0) and the tensors given. */
static char *stacks_doc(int n_stacks, int layers, int dup_at, const char *tensors)
{
    size_t cap = 1 << 16, k = 0;
    char *d = malloc(cap);
    if (!d) return NULL;
    k += (size_t)sprintf(d, "{\"format\": \"dmuon-model-1\", \"name\": \"big\",\n\"stacks\": [");
    for (int i = 0; i < n_stacks; i++) {
        if (!(d = grow(d, &cap, k + 128))) return NULL;
        if (i == dup_at) k += (size_t)sprintf(d + k, "%s\n{\"name\": \"s0\", \"layers\": %d}", i ? "," : "", layers);
        else k += (size_t)sprintf(d + k, "%s\n{\"name\": \"s%d\", \"layers\": %d}", i ? "," : "", i, layers);
    }
    if (!(d = grow(d, &cap, k + strlen(tensors) + 64))) return NULL;
    k += (size_t)sprintf(d + k, "],\n\"tensors\": [%s]}\n", tensors);
    return d;
}

static double now_s(void) { return dm_clock_us() * 1e-6; }

static int load_doc(const char *doc, dm_model **m, dm_err *err)
{
    return dm_model_load_text(doc, strlen(doc), "h.json", m, err);
}

static void check_hostile_sizes(void)
{
    dm_model *m = NULL;
    dm_err err = {{0}};
    /* 100000 stacks, unique names: the name check and the tensors' look-ups are not quadratic */
    char tensors[256];
    snprintf(tensors, sizeof tensors, "{\"name\": \"w\", \"shape\": [8, 8], \"count\": 1, \"stack\": \"s99999\", "
             "\"role\": \"muon\"}");
    char *doc = stacks_doc(100000, 1, -1, tensors);
    double t0 = now_s();
    int rc = doc ? load_doc(doc, &m, &err) : -1;
    double dt = now_s() - t0;
    ok(rc == 0 && m->n_stacks == 100000 && m->tensors[0].stack == 99999, "100000 stacks load: %s", rc ? err.msg : "");
    ok(dt < 10, "in %.3f s (under 10 s; a scan per stack was quadratic)", dt);
    dm_matrix *mx = NULL;
    int64_t n = 0;
    t0 = now_s();
    ok(rc == 0 && dm_model_matrices(m, -1, &mx, &n, &err) == 0 && n == 1 && mx[0].layer == 99999,
       "the one matrix expands onto the last of 100000 layers");
    ok(now_s() - t0 < 10, "without a pass over every (layer, entry) pair");
    free(mx);
    dm_model_free(m);
    m = NULL;
    free(doc);
    /* a repeated name among them: the first repeat in file order, with its position */
    doc = stacks_doc(100000, 1, 70000, tensors);
    rc = doc ? load_doc(doc, &m, &err) : 0;
    ok(rc == -1 && strcmp(err.msg, "h.json:70003:1: expected unique stack names, \"s0\" repeats") == 0,
       "a repeated stack name: %s", err.msg);
    free(doc);

    /* layers past the int range: 30000 stacks of 100000 (3e9 layers; the sum overflowed to
     * -2147467290 layers before) */
    doc = stacks_doc(30000, 100000, -1, "{\"name\": \"w\", \"shape\": [8, 8], \"count\": 1, \"stack\": \"s0\", "
                                       "\"role\": \"muon\"}");
    rc = doc ? load_doc(doc, &m, &err) : 0;
    ok(rc == -1 && strstr(err.msg, "h.json:13:1: expected at most 1000000 layers in all stacks, this one brings them to 1100000"),
       "too many layers in all: %s", err.msg);
    free(doc);

    /* parameter totals past int64: 16 entries of 2^60 each (printed as -8070450532246885120 before);
     * the first already passes the cap */
    char big[8192];
    size_t k = 0;
    for (int i = 0; i < 16; i++)
        k += (size_t)snprintf(big + k, sizeof big - k, "%s{\"name\": \"w%d\", \"shape\": [16777216, 4096], "
                              "\"count\": 16777216, \"stack\": \"s0\", \"role\": \"muon\"}", i ? ",\n" : "", i);
    doc = stacks_doc(1, 1, -1, big);
    rc = doc ? load_doc(doc, &m, &err) : 0;
    ok(rc == -1 && strstr(err.msg, "h.json:4:13: expected at most 1125899906842624 parameters and 16777216 tensors"),
       "parameter totals past the cap are refused at the entry that crosses it: %s", err.msg);
    free(doc);
    /* tensors in all past 2^24, each entry within its own cap */
    k = 0;
    for (int i = 0; i < 3; i++)
        k += (size_t)snprintf(big + k, sizeof big - k, "%s{\"name\": \"w%d\", \"shape\": [8], \"count\": 8388608, "
                              "\"stack\": \"s0\", \"role\": \"adamw\"}", i ? ",\n" : "", i);
    doc = stacks_doc(1, 1, -1, big);
    rc = doc ? load_doc(doc, &m, &err) : 0;
    ok(rc == -1 && strstr(err.msg, "brings them to 201326592 and 25165824"), "tensors in all past 2^24: %s", err.msg);
    free(doc);

    /* role_overrides: each is matched against every tensor, so their number is capped */
    size_t cap = 1 << 20;
    char *ov = malloc(cap);
    k = (size_t)sprintf(ov, "{\"format\": \"dmuon-model-1\", \"name\": \"o\", \"stacks\": [{\"name\": \"l\", \"layers\": 1}],"
                        "\"tensors\": [{\"name\": \"w\", \"shape\": [8, 8], \"count\": 1, \"stack\": \"l\", "
                        "\"role\": \"muon\"}], \"role_overrides\": [");
    for (int i = 0; i <= DM_MODEL_MAX_OVERRIDES; i++)
        k += (size_t)sprintf(ov + k, "%s{\"match\": \"w\", \"role\": \"adamw\"}", i ? "," : "");
    sprintf(ov + k, "]}");
    rc = load_doc(ov, &m, &err);
    ok(rc == -1 && strstr(err.msg, "expected at most 4096 role_overrides, found 4097"), "4097 role_overrides: %s", err.msg);
    free(ov);

    /* dm_model_write reads its text back first: a model built in memory past a limit is not written */
    char path[256];
    snprintf(path, sizeof path, "/tmp/dm_write_check_%d.json", (int)getpid());
    rc = dm_model_load(DM_SRCDIR "/models/qwen2.5-0.5b.json", &m, &err);
    if (ok(rc == 0, "qwen2.5-0.5b loads")) {
        m->tensors[1].rows = DM_MODEL_MAX_DIM + 1;
        unlink(path);
        err.msg[0] = 0;
        ok(dm_model_write(m, path, &err) == -1 && strstr(err.msg, "the model would not load back, nothing written") &&
               strstr(err.msg, "expected a dimension"),
           "an in-memory model the loader refuses is not written: %s", err.msg);
        ok(access(path, F_OK) != 0, "no file");
        m->tensors[1].rows = 64;
        ok(dm_model_write(m, path, &err) == 0 && access(path, F_OK) == 0, "the same model within the limits is written");
        unlink(path);
        dm_model_free(m);
    }
}

/* ---- architecture fields ------------------------------------------------------------------ */
/* A document with the architecture fields; the line of each placeholder is fixed:
 * 1 {  2 format  3 name  4 streams  5 stacks  6 layers stack  7 ]  8 tensors  9 q  10 o
 * 11 norm  12 experts  13 ]  14 }. */
static void arch_doc(char *doc, size_t n, const char *streams, const char *stack_extra, const char *q, const char *expert)
{
    snprintf(doc, n,
             "{\n  \"format\": \"dmuon-model-1\",\n  \"name\": \"arch\",\n"
             "  %s\n"
             "  \"stacks\": [\n"
             "    {\"name\": \"layers\", \"layers\": 2%s}\n"
             "  ],\n  \"tensors\": [\n"
             "    %s,\n"
             "    {\"name\": \"o\", \"shape\": [64, 64], \"count\": 2, \"stack\": \"layers\", \"role\": \"muon\"},\n"
             "    {\"name\": \"n\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"},\n"
             "    %s\n"
             "  ]\n}\n",
             streams, stack_extra, q, expert);
}

static const char *Q_OK = "{\"name\": \"q\", \"shape\": [64, 64], \"count\": 2, \"stack\": \"layers\", \"role\": \"muon\"}";
static const char *E_OK = "{\"name\": \"e\", \"shape\": [32, 64], \"count\": 8, \"stack\": \"layers\", \"role\": "
                          "\"muon\", \"use\": \"expert\"}";
static const char *ST_OK = "\"streams\": [{\"name\": \"text\"}, {\"name\": \"img\", \"tokens\": 16}],";
static const char *SX_OK = ", \"attention\": [{\"heads\": 4, \"kv_heads\": 2, \"head_dim\": 16}], "
                           "\"moe\": {\"experts\": 4, \"top_k\": 2}";

static void check_arch_one(const char *what, const char *streams, const char *sx, const char *q, const char *e,
                           int want_line, const char *want_text)
{
    char path[256], doc[4096], needle[300];
    snprintf(path, sizeof path, "/tmp/dm_arch_model_%d.json", (int)getpid());
    arch_doc(doc, sizeof doc, streams, sx, q, e);
    if (tap_write_file(what, path, doc)) return;
    dm_model *m = NULL;
    dm_err err = {{0}};
    int rc = dm_model_load_file(path, &m, &err);
    if (want_line == 0) {
        ok(rc == 0, "%s: accepted%s%s", what, rc ? ": " : "", rc ? err.msg : "");
    } else {
        snprintf(needle, sizeof needle, "%s:%d:", path, want_line);
        ok(rc == -1 && m == NULL && strstr(err.msg, needle) && strstr(err.msg, want_text),
           "%s: refused at line %d with \"%s\": %s", what, want_line, want_text, err.msg);
    }
    dm_model_free(m);
    unlink(path);
}

static void check_arch(void)
{
    check_arch_one("architecture template", ST_OK, SX_OK, Q_OK, E_OK, 0, "");
    check_arch_one("heads x head_dim against the projections", ST_OK,
                   ", \"attention\": [{\"heads\": 8, \"head_dim\": 16}]", Q_OK,
                   "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}", 6,
                   "query projection");
    check_arch_one("top_k above the experts", ST_OK,
                   ", \"moe\": {\"experts\": 4, \"top_k\": 5}", Q_OK, E_OK, 6, "at most \"experts\"");
    check_arch_one("kv_heads not dividing heads", ST_OK,
                   ", \"attention\": [{\"heads\": 4, \"kv_heads\": 3, \"head_dim\": 16}]", Q_OK,
                   "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}", 6,
                   "divide");
    check_arch_one("a tower stream with no tokens", "\"streams\": [{\"name\": \"text\"}, {\"name\": \"img\"}],", SX_OK,
                   Q_OK, E_OK, 4, "tokens");
    check_arch_one("tokens on the main stream", "\"streams\": [{\"name\": \"text\", \"tokens\": 5}],", SX_OK, Q_OK, E_OK,
                   4, "main");
    check_arch_one("an unknown stream", ST_OK, SX_OK,
                   "{\"name\": \"q\", \"shape\": [64, 64], \"count\": 2, \"stack\": \"layers\", \"role\": \"muon\", "
                   "\"stream\": \"audio\"}", E_OK, 9, "streams");
    check_arch_one("experts without moe", ST_OK, ", \"attention\": [{\"heads\": 4, \"kv_heads\": 2, \"head_dim\": 16}]",
                   Q_OK, E_OK, 12, "moe");
    check_arch_one("experts not a multiple of the routing", ST_OK, SX_OK, Q_OK,
                   "{\"name\": \"e\", \"shape\": [32, 64], \"count\": 6, \"stack\": \"layers\", \"role\": \"muon\", "
                   "\"use\": \"expert\"}", 12, "multiple");
    check_arch_one("a vector use on a 2-D tensor", ST_OK, SX_OK,
                   "{\"name\": \"q\", \"shape\": [64, 64], \"count\": 2, \"stack\": \"layers\", \"role\": \"muon\", "
                   "\"use\": \"vector\"}", E_OK, 9, "use");
    check_arch_one("an expert's bias (a 1-D expert tensor)", ST_OK, SX_OK, Q_OK,
                   "{\"name\": \"e.bias\", \"shape\": [32], \"count\": 8, \"stack\": \"layers\", \"role\": "
                   "\"adamw\", \"use\": \"expert\"}", 0, "");
    check_arch_one("a linear use on a 1-D tensor", ST_OK, SX_OK, Q_OK,
                   "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\", "
                   "\"use\": \"linear\"}", 12, "1-D tensors are vectors or experts' biases");
    check_arch_one("an expert's bias without moe", ST_OK,
                   ", \"attention\": [{\"heads\": 4, \"kv_heads\": 2, \"head_dim\": 16}]", Q_OK,
                   "{\"name\": \"e.bias\", \"shape\": [32], \"count\": 8, \"stack\": \"layers\", \"role\": "
                   "\"adamw\", \"use\": \"expert\"}", 12, "moe");
    check_arch_one("an unknown use", ST_OK, SX_OK,
                   "{\"name\": \"q\", \"shape\": [64, 64], \"count\": 2, \"stack\": \"layers\", \"role\": \"muon\", "
                   "\"use\": \"conv\"}", E_OK, 9, "use");
    check_arch_one("a window not dividing its stream", ST_OK,
                   ", \"attention\": [{\"heads\": 4, \"head_dim\": 16, \"stream\": \"img\", \"length\": 5}]",
                   "{\"name\": \"q\", \"shape\": [64, 64], \"count\": 2, \"stack\": \"layers\", \"role\": \"muon\", "
                   "\"stream\": \"img\"}",
                   "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}", 6,
                   "divide");
    check_arch_one("a sliding window every other layer", ST_OK,
                   ", \"attention\": [{\"heads\": 4, \"kv_heads\": 2, \"head_dim\": 16, \"window\": 8, "
                   "\"window_layers\": \"sf\"}], \"moe\": {\"experts\": 4, \"top_k\": 2}", Q_OK, E_OK, 0, "");
    check_arch_one("a sliding window on a bidirectional block", ST_OK,
                   ", \"attention\": [{\"heads\": 4, \"head_dim\": 16, \"causal\": false, \"window\": 8}]", Q_OK,
                   "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}", 6,
                   "causal self-attention");
    check_arch_one("window_layers of another letter", ST_OK,
                   ", \"attention\": [{\"heads\": 4, \"head_dim\": 16, \"window\": 8, \"window_layers\": \"sx\"}]",
                   Q_OK, "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}",
                   6, "'s' (a sliding-window layer) or 'f'");
    check_arch_one("window_layers longer than the stack", ST_OK,
                   ", \"attention\": [{\"heads\": 4, \"head_dim\": 16, \"window\": 8, \"window_layers\": \"sfs\"}]",
                   Q_OK, "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}",
                   6, "1 to 2");
    check_arch_one("window_layers without a window", ST_OK,
                   ", \"attention\": [{\"heads\": 4, \"head_dim\": 16, \"window_layers\": \"sf\"}]", Q_OK,
                   "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}", 6,
                   "beside a \"window\"");
    check_arch_one("a zero window", ST_OK, ", \"attention\": [{\"heads\": 4, \"head_dim\": 16, \"window\": 0}]", Q_OK,
                   "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}", 6,
                   "window");
    check_arch_one("tied_head naming a vector", ST_OK, ", \"tied_head\": \"n\"", Q_OK,
                   "{\"name\": \"x\", \"shape\": [64], \"count\": 2, \"stack\": \"layers\", \"role\": \"adamw\"}", 6,
                   "tied_head");

    /* the workload of the template: known kernels and FLOPs */
    char path[256], doc[4096];
    snprintf(path, sizeof path, "/tmp/dm_arch_model_%d.json", (int)getpid());
    arch_doc(doc, sizeof doc, ST_OK, SX_OK, Q_OK, E_OK);
    if (tap_write_file("workload model", path, doc)) return;
    dm_model *m = NULL;
    dm_err err;
    if (!ok(dm_model_load_file(path, &m, &err) == 0, "workload model loads")) return;
    unlink(path);
    dm_matrix *mx;
    int64_t n;
    dm_workload_opts o = {256, 64, 2, 0, 0}; /* 4 samples of 64 tokens */
    dm_layer_work w;
    ok(dm_model_matrices(m, -1, &mx, &n, &err) == 0 && dm_layer_work_build(m, mx, n, 1, &o, &w, &err) == 0,
       "layer 1 expands");
    /* forward: q gemm + loss, attention score + softmax + value, o gemm + loss, norm vector, route, experts
     * bgemm + loss, the attention's residual add (one expert tensor: no MLP activation) */
    int ng = 0, nb = 0, ne = 0, nsm = 0, nres = 0;
    double sm_elems = 0;
    double attn = 0, gemm = 0, expert = 0;
    for (int i = 0; i < w.n_fwd; i++) {
        const dm_kernel *k = &w.fwd[i];
        if (k->kind == DM_KERN_GEMM) ng++, gemm += k->flops;
        if (k->kind == DM_KERN_BGEMM) nb++;
        if (k->kind == DM_KERN_ELEM) ne++;
        if (k->op == DM_KOP_SOFTMAX) nsm++, sm_elems += k->elems;
        if (k->op == DM_KOP_RESID) nres++, ok(k->m == 256 && k->n == 64, "the residual add: 256 tokens x the width 64");
        if (k->op == DM_KOP_ATTN_SCORE || k->op == DM_KOP_ATTN_VALUE) attn += k->flops;
        if (k->kind == DM_KERN_BGEMM && k->op == DM_KOP_FWD) {
            expert += k->flops;
            ok(k->m == 128 && k->batch == 4, "experts: 256 tokens x top 2 / 4 experts = 128 routed rows each, 4 in one batch");
        }
    }
    ok(ng == 2 && nb == 3 && ne == 7 && nres == 1,
       "forward kernels: 2 projections, 3 batched (score, value, experts), 7 elementwise (one residual add)");
    ok(nsm == 1 && sm_elems == 4.0 * 4 * 64 * 64, "one softmax over the scores: 4 windows x 4 heads x 64 x 64 (%g)", sm_elems);
    int bsm = 0, bsmb = 0;
    for (int i = 0; i < w.n_bwd; i++) {
        const dm_kernel *k = &w.bwd[i];
        if (k->op == DM_KOP_SOFTMAX) bsm++;
        if (k->op == DM_KOP_SOFTMAX_BWD) {
            bsmb++;
            ok(i >= 1 && w.bwd[i - 1].op == DM_KOP_ATTN_DSCORE && i + 1 < w.n_bwd && w.bwd[i + 1].op == DM_KOP_ATTN_DQUERY,
               "softmax-bwd runs between dP = dO V^T and dQ");
        }
    }
    ok(bsm == 1 && bsmb == 1, "backward recomputes the softmax once and runs its backward once");
    ok_near(gemm, 2.0 * 2 * 256 * 64 * 64, 1e-12, "projection FLOPs: 2 x 2 T 64 x 64");
    ok_near(attn, 2.0 * 2 * 64 * 64 * 16 * 4 * 4, 1e-12, "attention FLOPs: 2 products x 2 L^2 d x 4 heads x 4 windows");
    ok_near(expert, 2.0 * 128 * 32 * 64 * 4, 1e-12, "expert FLOPs: 2 x 128 x 32 x 64 x 4");
    ok_near(w.bwd_flops, 2 * gemm + 2 * expert + 2.5 * attn, 1e-12, "backward: 2x the products, 5/2 x attention");
    ok(w.n_slots == 2, "input slots: one X (256 x 64) shared by q, o, the norm and the dispatch, and the routed rows (%d)",
       w.n_slots);
    dm_layer_work_free(&w);
    o.seq_len = 48;
    ok(dm_workload_check(m, &o, &err) < 0 && strstr(err.msg, "--seq-len"), "tokens not a multiple of seq-len: refused (%s)",
       err.msg);
    free(mx);
    dm_model_free(m);
}

/* The products of one attention block over two windows of L rows under tiles of at least T
 * (core/workload.h dm_attn_block_geoms; a one-stream model of its own); *n their count. */
static int block_geoms(const dm_attention *a, int64_t L, int64_t T, dm_attn_geom *g)
{
    dm_token_stream text = {.name = "text"};
    dm_model m = {.name = "t", .streams = &text, .n_streams = 1};
    dm_workload_opts o = {2 * L, L, 2, T, 0};
    return dm_attn_block_geoms(&m, &o, a, 0, g);
}

/* --attention causal: for windows of L rows and tiles of at least T, the products laid out by
 * wk_attn_entry cover every (query, key) with key <= query once and, above the diagonal, only
 * the diagonal tiles' masked halves; with a sliding window W, every (query, key) with
 * query - W < key <= query once and nothing twice, in fewer scores than the triangle
 * (grouped-query heads and two windows: each entry's operands and outputs inside the buffers
 * wk_attn_sizes gives); a step's attention FLOPs fall to L^2/2 (1 - 2^-K) + L B of L^2. */
static void check_causal(void)
{
    static const int64_t cases[][3] = {{8, 2, 0},    {64, 8, 0},   {96, 8, 0},    {4096, 256, 0}, {256, 256, 0},
                                       {1000, 64, 0}, {64, 8, 16}, {64, 8, 17},   {64, 8, 9},     {96, 8, 24},
                                       {96, 8, 1},   {120, 16, 30}, {64, 8, 56}, {60, 8, 13},    {256, 8, 40}};
    dm_attention a = {.causal = 1, .heads = 4, .kv_heads = 2, .head_dim = 4, .v_head_dim = 2};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t L = cases[c][0], T = cases[c][1], W = cases[c][2];
        a.window = W;
        dm_attn_geom g[DM_ATTN_MAX_PRODS], tri[DM_ATTN_MAX_PRODS];
        int n = block_geoms(&a, L, T, g);
        a.window = 0;
        int nt = block_geoms(&a, L, T, tri);
        a.window = W;
        int K = nt - 1;
        int64_t B = tri[K].lq;
        if (!W)
            ok(n == nt && L % ((int64_t)1 << K) == 0 && B == L >> K && B >= T &&
                   !(B % 2 == 0 && B / 2 >= T),
               "L %lld, tile %lld: %d halvings, tiles of %lld rows", (long long)L, (long long)T, K, (long long)B);
        if (L > 256) continue; /* the coverage below is L^2 */
        unsigned char *cov = calloc((size_t)(L * L), 1);
        int bad = 0, out = 0;
        double scores = 0, tri_scores = 0;
        for (int j = 0; j < nt; j++) tri_scores += (double)tri[j].rects * tri[j].lq * tri[j].lk;
        for (int j = 0; j < n && cov; j++) {
            int64_t sz[WK_A__N];
            wk_attn_sizes(&g[j], sz);
            scores += (double)g[j].rects * g[j].lq * g[j].lk;
            /* no two entries of one batched product write the same output element (a batched
             * GEMM's outputs must not alias: the GPU's band once wrote dK and dV over each other) */
            unsigned char *mark = calloc((size_t)sz[WK_AOUT] * 3, 1);
            for (int op = DM_KOP_ATTN_SCORE; op <= DM_KOP_ATTN_DKEY && mark; op++) {
                int64_t m = op == DM_KOP_ATTN_DVALUE || op == DM_KOP_ATTN_DKEY ? g[j].lk : g[j].lq;
                int64_t w = op == DM_KOP_ATTN_VALUE || op == DM_KOP_ATTN_DVALUE ? g[j].vd
                            : op == DM_KOP_ATTN_SCORE || op == DM_KOP_ATTN_DSCORE ? g[j].lk : g[j].hd;
                if (op == DM_KOP_ATTN_SCORE || op == DM_KOP_ATTN_DSCORE) continue; /* scores: x lq lk apart */
                memset(mark, 0, (size_t)sz[WK_AOUT]);
                for (int64_t x = 0; x < wk_attn_entries(&g[j]); x++) {
                    int which[3];
                    int64_t off[3];
                    wk_attn_entry(&g[j], (dm_kern_op)op, x, which, off);
                    for (int64_t i = off[2]; i < off[2] + m * w && i < sz[WK_AOUT]; i++) bad += mark[i]++ > 0;
                }
            }
            free(mark);
            for (int op = DM_KOP_ATTN_SCORE; op <= DM_KOP_ATTN_DKEY; op++)
                for (int64_t x = 0; x < wk_attn_entries(&g[j]); x++) {
                    int which[3];
                    int64_t off[3];
                    wk_attn_entry(&g[j], (dm_kern_op)op, x, which, off);
                    for (int i = 0; i < 3; i++) out += off[i] < 0 || off[i] >= sz[which[i]];
                    /* window 0, head 0: its rectangle's queries and keys from the score's operands */
                    if (op != DM_KOP_ATTN_SCORE || x >= (g[j].rects > 1 ? g[j].rects : 1)) continue;
                    int64_t q0 = off[0] / a.head_dim, k0 = off[1] / a.head_dim;
                    for (int64_t q = q0; q < q0 + g[j].lq; q++)
                        for (int64_t k = k0; k < k0 + g[j].lk; k++) cov[q * L + k]++;
                }
        }
        for (int64_t q = 0; cov && q < L; q++)
            for (int64_t k = 0; k < L; k++)
                if (!W) bad += cov[q * L + k] != (k <= q || q / B == k / B ? 1 : 0);
                else bad += cov[q * L + k] > 1 || (k <= q && q - k < W && cov[q * L + k] != 1);
        if (!W)
            ok(cov && bad == 0 && out == 0, "L %lld, tile %lld: the %d products cover the lower triangle once, the "
               "diagonal tiles whole (%d pairs wrong, %d operands outside their buffers)", (long long)L, (long long)T,
               K + 1, bad, out);
        else
            ok(cov && bad == 0 && out == 0 && scores <= tri_scores,
               "L %lld, tile %lld, window %lld: %d products cover the band once, nothing twice, %.0f scores (the "
               "triangle %.0f; %d pairs wrong or output elements written twice, %d operands outside their "
               "buffers)", (long long)L, (long long)T, (long long)W, n, scores, tri_scores, bad, out);
        free(cov);
    }
    /* a window well inside the sequence takes the band: 256 rows, tiles of 8, window 40: each
     * query against at most 48 keys, its first 5 tiles a triangle of 40 rows (two halvings: a
     * 20-row rectangle, two of 10, four diagonal tiles of 10), then 27 rectangles of 8 x 48 */
    a.window = 40;
    dm_attn_geom g[DM_ATTN_MAX_PRODS];
    int n = block_geoms(&a, 256, 8, g);
    ok(n == 4 && g[0].lq == 20 && g[0].qoff == 20 && g[0].rows == 256 && g[2].lq == 10 && g[2].rects == 4 &&
           g[3].lq == 8 && g[3].lk == 48 && g[3].rects == 27 && g[3].step == 8 && g[3].qoff == 40 &&
           g[3].rows == 256 && !wk_attn_strided(&g[3]),
       "window 40 over 256 rows, tiles of 8: the first 40 rows' triangle in 3 products, then 27 rectangles of 8 x 48 "
       "(pointer arrays)");
    a.window = 0;
    a.causal = 0;
    ok(block_geoms(&a, 4096, 256, g) == 1 && g[0].lq == 4096 && g[0].rects == 1, "a bidirectional block runs whole");
    a.causal = 1, a.window = 0;

    dm_model *m = NULL;
    dm_err err;
    if (!ok(dm_model_load_file(MODELS_DIR "/llama-3.2-3b.json", &m, &err) == 0, "llama-3.2-3b loads")) return;
    dm_workload_opts whole = {4096, 4096, 2, 0, 0}, causal = {4096, 4096, 2, DM_ATTN_CAUSAL_TILE, 0};
    dm_step_work w0, w1;
    if (ok(dm_step_work_sum(m, &whole, &w0, &err) == 0 && dm_step_work_sum(m, &causal, &w1, &err) == 0,
           "llama-3.2-3b: a step's work, whole and causal")) {
        double want = 0.5 * (1 - 1.0 / 8) + 512.0 / 4096; /* K 3, tiles of 512 */
        double got = w1.attn_flops / w0.attn_flops;
        ok(fabs(got - want) < 1e-12 &&
               fabs((w0.fwd_flops + w0.bwd_flops - w1.fwd_flops - w1.bwd_flops) - (w0.attn_flops - w1.attn_flops)) < 1e3,
           "llama-3.2-3b at 4096: causal attention FLOPs %.6f of whole (want %.6f), the rest unchanged", got, want);
    }
    dm_model_free(m);
}

/* The layer passes of bundled models (core/workload.h), by hand: Llama-3.2-3B's layer at 4096
 * tokens has the rotary embedding of its 24 + 8 heads x 128 dims before the scores, one glu over
 * gate and up (8192 wide) after both, two residual adds at the width 3072, and their backward
 * mirror (glu-bwd after the down projection's, 5 passes); Pythia-1B a plain activation (fc1 4 x
 * 2048 behind its bias) and rope over a quarter of each head; Phi-3's fused gate/up a glu of half
 * its rows; gpt-oss's fused expert gate/up a glu over the routed rows. */
static const dm_kernel *find_op(const dm_kernel *k, int n, dm_kern_op op, int nth)
{
    for (int i = 0; i < n; i++)
        if (k[i].op == op && nth-- == 0) return &k[i];
    return NULL;
}

static int count_op(const dm_kernel *k, int n, dm_kern_op op)
{
    int c = 0;
    for (int i = 0; i < n; i++) c += k[i].op == op;
    return c;
}

static int layer_of(const char *file, int layer, int64_t tokens, dm_model **m, dm_layer_work *w)
{
    dm_err err = {{0}};
    dm_matrix *mx = NULL;
    int64_t n;
    dm_workload_opts o = {tokens, 0, 2, 0, 0};
    int rc = dm_model_load(file, m, &err) || dm_model_matrices(*m, -1, &mx, &n, &err) ||
             dm_layer_work_build(*m, mx, n, layer, &o, w, &err);
    free(mx);
    if (rc) printf("# %s: %s\n", file, err.msg);
    return rc;
}

static void check_passes(void)
{
    dm_model *m = NULL;
    dm_layer_work w;
    if (ok(layer_of(MODELS_DIR "/llama-3.2-3b.json", 1, 4096, &m, &w) == 0, "Llama-3.2-3B layer 1 expands")) {
        const dm_kernel *r = find_op(w.fwd, w.n_fwd, DM_KOP_ROPE, 0), *g = find_op(w.fwd, w.n_fwd, DM_KOP_GLU, 0);
        ok(r && r->m == 4096 && r->n == 32 * 128 && r->k == 128 && r->bytes == 2.0 * 4096 * 4096 * 2 &&
               r + 1 == find_op(w.fwd, w.n_fwd, DM_KOP_ATTN_SCORE, 0),
           "rope: 4096 tokens x (24 + 8) x 128, read and written, before the scores");
        ok(g && g->m == 4096 && g->n == 8192 && g->bytes == 3.0 * 4096 * 8192 * 2 && g[-1].op == DM_KOP_LOSS &&
               g[-2].op == DM_KOP_FWD && g[-2].n == 8192 && g[-4].op == DM_KOP_FWD && g[-4].n == 8192 &&
               g[1].op == DM_KOP_FWD && g[1].k == 8192,
           "glu: after gate and up (and their losses), before down; 3 passes of 4096 x 8192");
        ok(count_op(w.fwd, w.n_fwd, DM_KOP_RESID) == 2 && find_op(w.fwd, w.n_fwd, DM_KOP_RESID, 1)->n == 3072 &&
               find_op(w.fwd, w.n_fwd, DM_KOP_RESID, 1)->bytes == 3.0 * 4096 * 3072 * 2,
           "two residual adds of 4096 x 3072, 3 passes each");
        const dm_kernel *gb = find_op(w.bwd, w.n_bwd, DM_KOP_GLU_BWD, 0);
        ok(gb && gb->bytes == 5.0 * 4096 * 8192 * 2 && gb[-1].op == DM_KOP_WGRAD && gb[-1].m == 3072 &&
               count_op(w.bwd, w.n_bwd, DM_KOP_RESID_BWD) == 2 && count_op(w.bwd, w.n_bwd, DM_KOP_ROPE_BWD) == 1 &&
               find_op(w.bwd, w.n_bwd, DM_KOP_ROPE_BWD, 0)[-1].op == DM_KOP_ATTN_DKEY,
           "backward: glu-bwd (5 passes) after the down projection's, rope-bwd after dK, two resid-bwd");
        ok(dm_pass_scratch(gb) == 2 * 4096 * 8192, "pass scratch: glu-bwd writes dgate and dup");
        dm_layer_work_free(&w);
    }
    dm_model_free(m), m = NULL;
    if (ok(layer_of(MODELS_DIR "/extra/pythia-1b.json", 1, 1024, &m, &w) == 0, "Pythia-1B layer 1 expands")) {
        const dm_kernel *a = find_op(w.fwd, w.n_fwd, DM_KOP_ACT, 0), *r = find_op(w.fwd, w.n_fwd, DM_KOP_ROPE, 0);
        ok(a && a->n == 8192 && a->bytes == 2.0 * 1024 * 8192 * 2 && !find_op(w.fwd, w.n_fwd, DM_KOP_GLU, 0) &&
               a[-1].op == DM_KOP_VECTOR && a[-2].op == DM_KOP_LOSS && a[-3].op == DM_KOP_FWD,
           "act after fc1, its loss and its bias (2 passes)");
        ok(r && r->k == 64 && r->n == 16 * 64, "rope over 64 of each head's 256 dims (rotary_pct 0.25)");
        dm_layer_work_free(&w);
    }
    dm_model_free(m), m = NULL;
    if (ok(layer_of(MODELS_DIR "/extra/phi-3-mini-4k-instruct.json", 1, 1024, &m, &w) == 0, "Phi-3 layer 1 expands")) {
        const dm_kernel *g = find_op(w.fwd, w.n_fwd, DM_KOP_GLU, 0);
        ok(g && g->n == 8192 && g[-2].op == DM_KOP_FWD && g[-2].n == 16384, "glu over the fused gate_up: half its 16384 rows");
        dm_layer_work_free(&w);
    }
    dm_model_free(m), m = NULL;
    if (ok(layer_of(MODELS_DIR "/extra/gpt-oss-20b-2l.json", 1, 1024, &m, &w) == 0, "gpt-oss layer 1 expands")) {
        const dm_kernel *g = find_op(w.fwd, w.n_fwd, DM_KOP_GLU, 0);
        ok(g && g->n == 2880 && g->m == 1024 * 4 && count_op(w.fwd, w.n_fwd, DM_KOP_GLU) == 1,
           "glu over the experts' fused gate_up: 1024 tokens x top 4 routed rows of 2880");
        dm_layer_work_free(&w);
    }
    dm_model_free(m);
}

int main(void)
{
    check_arch();
    check_causal();
    check_bundled();
    check_counts();
    check_layers();
    check_passes();
    check_bad_files();
    check_hostile_sizes();
    return tap_done();
}
