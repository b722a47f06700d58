/* cmd_model.c: `dmuon models` (list the bundled models) and `dmuon model show|import`. */
#include "config.h"

#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "hf_import.h"
#include "json.h"
#include "sched.h"
#include "workload.h"
#include "model.h"
#include "opts.h"

enum { FMT_TABLE, FMT_CSV, FMT_JSON };

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cmd_models(int argc, char **argv)
{
    static const struct option lo[] = {
        {"csv", no_argument, 0, 'c'}, {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int fmt = FMT_TABLE, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
        switch (c) {
        case 'c': fmt = FMT_CSV; break;
        case 'j': fmt = FMT_JSON; break;
        case 'h':
            printf("Usage: dmuon models [--csv|--json]\n"
                   "List the bundled models with total, Muon and AdamW parameter counts and the\n"
                   "number of Muon matrices. The models folder is the first that exists of\n"
                   "$DMUON_MODELS, the installed " DM_PKGDATADIR "/models and the source tree's\n"
                   "models/ (for a dmuon run from its build tree: the source tree's before the\n"
                   "installed); a model NAME given to any command is looked up there.\n\n"
                   "  --csv              the list as CSV\n"
                   "  --json             the list as a JSON array\n"
                   "  -h, --help         this text\n");
            return 0;
        default: return opt_getopt_error("models", c, argv);
        }
    }
    if (opt_no_operands("models", argc, argv)) return 2;
    const char *dir = dm_model_dir();
    if (!dir) {
        fprintf(stderr, "dmuon models: no models folder found (set DMUON_MODELS)\n");
        return 1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "dmuon models: cannot open %s\n", dir);
        return 1;
    }
    char *names[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 512) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);
    int rc = 0;
    if (fmt == FMT_TABLE)
        printf("# %-22s %-22s %14s %14s %12s %9s\n", "file", "name", "params", "muon_params", "adamw_params", "muon_mats");
    else if (fmt == FMT_CSV)
        printf("file,name,params,muon_params,adamw_params,muon_matrices\n");
    else
        printf("[");
    for (int i = 0; i < n; i++) {
        char path[4096];
        dm_model *m;
        dm_err err;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        names[i][strlen(names[i]) - 5] = 0;
        if (dm_model_load_file(path, &m, &err)) {
            fprintf(stderr, "dmuon models: %s\n", err.msg);
            rc = 1;
            free(names[i]);
            continue;
        }
        int64_t tot = dm_model_params(m), mu = dm_model_params_role(m, DM_ROLE_MUON);
        int64_t ad = dm_model_params_role(m, DM_ROLE_ADAMW), nm = dm_model_count_role(m, DM_ROLE_MUON);
        if (fmt == FMT_TABLE)
            printf("  %-22s %-22s %12.3f B %12.3f B %10.3f B %9" PRId64 "\n", names[i], m->name,
                   tot / 1e9, mu / 1e9, ad / 1e9, nm);
        else if (fmt == FMT_CSV)
            printf("%s,%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "\n", names[i], m->name, tot, mu, ad, nm);
        else {
            printf("%s\n  {\"file\": ", i ? "," : "");
            json_write_string(stdout, names[i]);
            printf(", \"name\": ");
            json_write_string(stdout, m->name);
            printf(", \"params\": %" PRId64 ", \"muon_params\": %" PRId64 ", \"adamw_params\": %" PRId64
                   ", \"muon_matrices\": %" PRId64 "}", tot, mu, ad, nm);
        }
        dm_model_free(m);
        free(names[i]);
    }
    if (fmt == FMT_JSON) printf("\n]\n");
    return rc;
}

static void show_usage(void)
{
    printf("Usage: dmuon model show NAME|FILE [--csv|--json] [--role GLOB=muon|adamw]...\n"
           "                  [--tokens T] [--seq-len S] [--attention A]\n"
           "Print every tensor of a model: name, shape (out x in), count, stack and layers,\n"
           "role (muon or adamw), use and token stream, then totals, the architecture (token\n"
           "streams, attention, routing) and the work of one training step per rank. NAME is a\n"
           "bundled model, looked up in the models folder ('dmuon models --help' gives its order).\n"
           "  --role GLOB=ROLE  override the role of tensors whose name matches GLOB (fnmatch)\n"
           "  --tokens T        tokens of the main stream per rank (default 4096)\n"
           "  --seq-len S       tokens per sample of the main stream (default: --tokens)\n"
           "  --attention A     whole (default) or causal: the attention products as the plan\n"
           "                    option says (dmuon plan --help)\n"
           "  --csv, --json     machine-readable output\n"
           "\nUsage: dmuon model import CONFIG.json [--out FILE] [--name NAME]\n"
           "Turn a HuggingFace config.json (llama, mistral, mixtral, qwen2, qwen2_5_vl, qwen2_vl,\n"
           "qwen3, qwen3_moe, qwen2_moe, olmoe, phi3, olmo2, granite, smollm3, gpt_oss,\n"
           "starcoder2, gpt_neox, gemma, gemma2, gemma3_text, gemma3, paligemma, deepseek_v2,\n"
           "deepseek_v3, kimi_k2, glm4_moe) into the dmuon model format, architecture included;\n"
           "writes FILE (default: stdout).\n");
}

static int parse_role_arg(const char *s, char *glob, size_t cap, dm_role *r)
{
    const char *eq = strrchr(s, '=');
    if (!eq || eq == s || (size_t)(eq - s) >= cap) return -1;
    memcpy(glob, s, (size_t)(eq - s));
    glob[eq - s] = 0;
    if (strcmp(eq + 1, "muon") == 0) *r = DM_ROLE_MUON;
    else if (strcmp(eq + 1, "adamw") == 0) *r = DM_ROLE_ADAMW;
    else return -1;
    return 0;
}

/* The architecture and the work of one step, after the totals. */
static void print_arch(const dm_model *m, const dm_workload_opts *o, const dm_step_work *sw)
{
    int64_t seq = o->seq_len ? o->seq_len : o->tokens;
    printf("streams:");
    for (int i = 0; i < m->n_streams; i++) {
        if (i) printf(",");
        if (i == 0) printf(" %s (main: --seq-len, %" PRId64 " per sample)", m->streams[i].name, seq);
        else printf(" %s (%" PRId64 " per sample)", m->streams[i].name, m->streams[i].tokens);
    }
    printf("\n");
    for (int i = 0; i < m->n_stacks; i++) {
        const dm_stack *s = &m->stacks[i];
        for (int k = 0; k < s->n_attn; k++) {
            const dm_attention *a = &s->attn[k];
            printf("attention %s: %d heads (%d kv) x %d (values %d), %s, queries %s", s->name, a->heads, a->kv_heads,
                   a->head_dim, a->v_head_dim, a->causal ? "causal" : "bidirectional", m->streams[a->stream].name);
            if (a->kv_stream != a->stream) printf(", keys %s", m->streams[a->kv_stream].name);
            if (a->rope) printf(", rotary embedding over %d dims a head", a->rope);
            if (a->length) printf(", windows of %" PRId64, a->length);
            if (a->window) {
                printf(", sliding window %" PRId64, a->window);
                if (a->window_layers) printf(" on layers %s (cycled)", a->window_layers);
                printf(" (run as its band under --attention causal)");
            }
            printf("\n");
        }
        if (s->moe_experts) printf("moe %s: %d experts, top %d (balanced routing)\n", s->name, s->moe_experts, s->moe_top_k);
    }
    if (!m->has_arch) printf("architecture: not described (every 2-D tensor a projection over the tokens, no attention)\n");
    printf("step per rank (%" PRId64 " tokens, %" PRId64 " per sample): forward %.3f TFLOP (attention %.1f%%), backward %.3f "
           "TFLOP; active parameters per token %.3f B; activations kept %.2f GiB\n",
           o->tokens, seq, sw->fwd_flops / 1e12,
           sw->fwd_flops + sw->bwd_flops > 0 ? 100 * sw->attn_flops / (sw->fwd_flops + sw->bwd_flops) : 0,
           sw->bwd_flops / 1e12, sw->active_params / 1e9, sw->kept_bytes / (1024.0 * 1024 * 1024));
}

static int model_show(int argc, char **argv)
{
    static const struct option lo[] = {{"csv", no_argument, 0, 'c'}, {"json", no_argument, 0, 'j'},
                                       {"role", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
                                       {"tokens", required_argument, 0, 't'}, {"seq-len", required_argument, 0, 's'},
                                       {"attention", required_argument, 0, 'a'}, {0, 0, 0, 0}};
    int fmt = FMT_TABLE, c, n_roles = 0;
    dm_workload_opts wo = {4096, 0, 2, 0, 0};
    const char *roles[64];
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'c': fmt = FMT_CSV; break;
        case 'j': fmt = FMT_JSON; break;
        case 'r':
            if (n_roles == 64) { opt_usage_error("model show", "--role: at most 64 overrides"); return 2; }
            roles[n_roles++] = optarg;
            break;
        case 't':
        case 's': {
            int64_t v;
            if (opt_parse_size("model show", c == 't' ? "--tokens" : "--seq-len", optarg, 1, (int64_t)1 << 40, &v)) return 2;
            if (c == 't') wo.tokens = v;
            else wo.seq_len = v;
            break;
        }
        case 'a': {
            dm_err e;
            if (sched_parse_attention(optarg, &wo.causal_tile, &e)) {
                opt_usage_error("model show", e.msg);
                return 2;
            }
            break;
        }
        case 'h': show_usage(); return 0;
        default: return opt_getopt_error("model show", c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (optind != argc - 1) {
        opt_usage_error("model show", "expected one model NAME or FILE");
        return 2;
    }
    dm_model *m;
    dm_err err;
    if (dm_model_load(argv[optind], &m, &err)) {
        fprintf(stderr, "dmuon model show: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < n_roles; i++) {
        char glob[512];
        dm_role r;
        if (parse_role_arg(roles[i], glob, sizeof glob, &r)) {
            opt_usage_error("model show", "--role: expected GLOB=muon or GLOB=adamw, found '%s'", roles[i]);
            dm_model_free(m);
            return 2;
        }
        if (dm_model_override_role(m, glob, r, &err)) {
            fprintf(stderr, "dmuon model show: --role: %s\n", err.msg);
            dm_model_free(m);
            return 1;
        }
    }
    int64_t tot = dm_model_params(m);
    if (fmt == FMT_TABLE) {
        printf("model %s (%s)\nsource: %s\n", m->name, m->path, m->source);
        printf("# %-58s %13s %7s %-22s %-5s %12s  %s\n", "tensor", "rows x cols", "count", "stack[layers]", "role", "params",
               "use/stream");
    } else if (fmt == FMT_CSV) {
        printf("tensor,rows,cols,ndim,count,stack,first_layer,layer_span,role,params,use,stream\n");
    } else {
        printf("{\"name\": ");
        json_write_string(stdout, m->name);
        printf(", \"tensors\": [");
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        const dm_stack *s = &m->stacks[t->stack];
        int64_t p = t->rows * t->cols * t->count;
        if (fmt == FMT_TABLE) {
            char shape[64], where[96];
            if (t->ndim == 1) snprintf(shape, sizeof shape, "%" PRId64, t->rows);
            else snprintf(shape, sizeof shape, "%" PRId64 "x%" PRId64, t->rows, t->cols);
            snprintf(where, sizeof where, "%s[%d..%d]", s->name, t->first_layer, t->first_layer + t->layer_span - 1);
            printf("  %-58s %13s %7" PRId64 " %-22s %-5s %12" PRId64 "  %s/%s\n", t->name, shape, t->count, where,
                   dm_role_name(t->role), p, dm_use_name(t->use), m->streams[t->stream].name);
        } else if (fmt == FMT_CSV) {
            printf("\"%s\",%" PRId64 ",%" PRId64 ",%d,%" PRId64 ",%s,%d,%d,%s,%" PRId64 ",%s,%s\n", t->name, t->rows,
                   t->cols, t->ndim, t->count, s->name, t->first_layer, t->layer_span, dm_role_name(t->role), p,
                   dm_use_name(t->use), m->streams[t->stream].name);
        } else {
            printf("%s\n  {\"name\": ", i ? "," : "");
            json_write_string(stdout, t->name);
            printf(", \"rows\": %" PRId64 ", \"cols\": %" PRId64 ", \"count\": %" PRId64 ", \"stack\": ",
                   t->rows, t->cols, t->count);
            json_write_string(stdout, s->name);
            printf(", \"first_layer\": %d, \"layer_span\": %d, \"role\": \"%s\", \"params\": %" PRId64
                   ", \"use\": \"%s\", \"stream\": ",
                   t->first_layer, t->layer_span, dm_role_name(t->role), p, dm_use_name(t->use));
            json_write_string(stdout, m->streams[t->stream].name);
            printf("}");
        }
    }
    int64_t mu = dm_model_params_role(m, DM_ROLE_MUON), ad = dm_model_params_role(m, DM_ROLE_ADAMW);
    int64_t nm = dm_model_count_role(m, DM_ROLE_MUON), na = dm_model_count_role(m, DM_ROLE_ADAMW);
    dm_step_work sw;
    if (dm_step_work_sum(m, &wo, &sw, &err)) {
        fprintf(stderr, "dmuon model show: %s\n", err.msg);
        dm_model_free(m);
        return 1;
    }
    if (fmt == FMT_TABLE) {
        printf("total: %" PRId64 " parameters (%.2f B) in %" PRId64 " tensors, %d layers\n", tot, tot / 1e9,
               nm + na, m->n_layers);
        printf("muon:  %" PRId64 " matrices, %" PRId64 " parameters (%.2f B)\n", nm, mu, mu / 1e9);
        printf("adamw: %" PRId64 " tensors, %" PRId64 " parameters (%.2f B)\n", na, ad, ad / 1e9);
        if (m->published_params)
            printf("published: %" PRId64 " (%.2f B), computed/published = %.4f\n", m->published_params,
                   m->published_params / 1e9, (double)tot / (double)m->published_params);
        print_arch(m, &wo, &sw);
    } else if (fmt == FMT_JSON) {
        printf("\n], \"params\": %" PRId64 ", \"muon_matrices\": %" PRId64 ", \"muon_params\": %" PRId64
               ", \"adamw_tensors\": %" PRId64 ", \"adamw_params\": %" PRId64 ", \"layers\": %d"
               ", \"tokens\": %" PRId64 ", \"seq_len\": %" PRId64 ", \"active_params\": %.0f, \"forward_flops\": %.6g"
               ", \"backward_flops\": %.6g, \"attention_flops\": %.6g, \"activations_bytes\": %.6g}\n",
               tot, nm, mu, na, ad, m->n_layers, wo.tokens, wo.seq_len ? wo.seq_len : wo.tokens, sw.active_params,
               sw.fwd_flops, sw.bwd_flops, sw.attn_flops, sw.kept_bytes);
    }
    dm_model_free(m);
    return 0;
}

static int model_import(int argc, char **argv)
{
    static const struct option lo[] = {{"out", required_argument, 0, 'o'}, {"name", required_argument, 0, 'n'},
                                       {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *out = "-", *name = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", lo, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'n': name = optarg; break;
        case 'h': show_usage(); return 0;
        default: return opt_getopt_error("model import", c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (optind != argc - 1) {
        opt_usage_error("model import", "expected one CONFIG.json");
        return 2;
    }
    dm_model *m;
    dm_err err;
    if (hf_import_config(argv[optind], &m, &err)) {
        fprintf(stderr, "dmuon model import: %s\n", err.msg);
        return 1;
    }
    if (name) {
        char *nn = strdup(name);
        if (!nn) { dm_model_free(m); return 1; }
        free(m->name);
        m->name = nn;
    }
    int rc = dm_model_write(m, out, &err);
    if (rc) fprintf(stderr, "dmuon model import: %s\n", err.msg);
    else if (strcmp(out, "-") != 0)
        fprintf(stderr, "wrote %s: %s, %.3f B parameters, %" PRId64 " Muon matrices\n", out, m->name,
                dm_model_params(m) / 1e9, dm_model_count_role(m, DM_ROLE_MUON));
    dm_model_free(m);
    return rc ? 1 : 0;
}

int cmd_model(int argc, char **argv)
{
    if (argc < 2) {
        opt_usage_error("model", "expected 'show' or 'import'");
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        show_usage();
        return 0;
    }
    if (strcmp(argv[1], "show") == 0) return model_show(argc - 1, argv + 1);
    if (strcmp(argv[1], "import") == 0) return model_import(argc - 1, argv + 1);
    opt_usage_error("model", "unknown subcommand '%s' (expected show or import)", argv[1]);
    return 2;
}

