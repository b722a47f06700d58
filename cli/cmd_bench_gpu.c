/* cmd_bench_gpu.c: `dmuon bench kernels` and `dmuon bench work`, their command lines; in the GPU
 * plug-in (core/gpu_api.h: cli/cmd_bench.c calls them through it). The benchmarks are library
 * code (kernels/ns_bench.c: the NS kernel costs, the dmuon-costs-1 CSV; kernels/wk_bench.c: the
 * step's kernels, dmuon-costs-2 rows). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sched.h"
#include "dm_error.h"
#include "ns_bench.h"
#include "opts.h"
#include "wk_bench.h"

/* ---- bench kernels ------------------------------------------------------------------------- */

static void usage_kernels(FILE *f)
{
    fprintf(f,
            "Usage: dmuon bench kernels [OPTIONS]\n"
            "Measure on this GPU: the whole 5-iteration Polar Express NS per shape and batch (direct\n"
            "in bf16 and Gram in fp16, autotuned over symmetric-product block counts; the best\n"
            "correct variant of each), the products it is made of (S X; X X^T as a full cuBLAS\n"
            "GEMM and as lower blocks), and the Muon/AdamW elementwise kernels (the Muon update op,\n"
            "the gradient check and momentum of its NS op, an AdamW tensor). CUDA events after\n"
            "warm-up on graph replays; medians. Writes the dmuon-costs-1 CSV and a table, each\n"
            "row with the SM clock it held while timed (column mhz: the mean clock over its timed\n"
            "runs, from each SM's cycle counter against the GPU's timer right before and after).\n\n"
            "  --shapes FILE      lines 'ROWS COLS [B1,B2,..]' ('#' comments)\n"
            "  --model M          Muon shapes of a bundled model or model file; 'all' = every\n"
            "                     bundled model (repeatable; default: the issue's goal shapes)\n"
            "  --batches LIST     batch sizes for small shapes (default 1,2,4,8)\n"
            "  --batch-max-elems N  only shapes with m*n <= N get batches > 1 (default 16M)\n"
            "  --algos LIST       direct,gram (default both); none: no NS rows (the elementwise\n"
            "                     rows of the shapes' sizes alone, with --no-products)\n"
            "  --sym-blocks LIST  block counts tried for symmetric products (default 1,2,4,8)\n"
            "  --sym-schemes LIST levels,flat (default both): how blocks > 1 are run: the\n"
            "                     recursive levels (a GEMM per level) or flat (the lower\n"
            "                     blocks as one pointer-array GEMM)\n"
            "  --heuristics LIST  cuBLASLt heuristic indices tried (default 0)\n"
            "  --heuristics-max-elems N  indices > 0 only when m*n*batch <= N (default 16M)\n"
            "  --kernels LIST     kernels tried: lt (cuBLASLt), sym64, sym128, sym128s3 (our\n"
            "                     symmetric products), fused32, fused64, fused128 (the whole NS\n"
            "                     in one kernel, m*n*batch <= 64M; fused128 from 4M), block\n"
            "                     (direct NS only: one CTA, or on sm_90 a cluster of up to 16,\n"
            "                     per matrix, all in shared memory; min(m,n) <= 128), block16\n"
            "                     (the same while one CTA holds the matrix twice: the long side\n"
            "                     up to 288 at 128 rows; every product whole in 16 x 16 warp\n"
            "                     tiles); default all\n"
            "  --retime-cached    a shape the cache has a cuBLASLt entry for: re-time that\n"
            "                     configuration (no search) beside our kernels, and keep the\n"
            "                     faster (implies --retune for it)\n"
            "  --no-gemm-tune     skip the last stage: each GEMM of the winner timed over\n"
            "                     cuBLASLt's heuristic list (kept when the whole plan is faster)\n"
            "  --min-block N      smallest leaf (rows) of the symmetric scheme tried (default 256)\n"
            "  --out CSV          write the cost table here (atomically; default: none)\n"
            "  --json             the rows as one JSON document on stdout (dmuon-bench-1: the CSV's\n"
            "                     columns and header fields); the table goes to stderr\n"
            "  --cache FILE       autotune cache (default: none); --retune ignores cached results\n"
            "  --warmup N         untimed runs first (default 3)\n"
            "  --reps N           timed runs, median reported (default 20)\n"
            "  --rest-ms N        the GPU left idle for at least N ms before each row's timed runs\n"
            "                     (default 0: as long as the host takes to queue them): with\n"
            "                     --warmup 0 --reps 1, a row timed on a rested card, and its clock\n"
            "                     (column mhz) the clock such a card gives its work\n"
            "  --no-products      skip the single-product rows; --no-elementwise likewise\n"
            "  --as-stored        keep each shape's orientation: rows > cols is a tall matrix, its NS\n"
            "                     on the transpose as the executor runs it (a tall row, m > n; it\n"
            "                     takes the cached configuration of its m <= n shape); default:\n"
            "                     every shape as m <= n\n"
            "  --no-graph         launch kernels one by one instead of graph replays (the NS rows\n"
            "                     are then direct-eager, gram-eager: the PyTorch forms' cost; a\n"
            "                     cached configuration is re-timed, and the cache is not written)\n"
            "  --verbose          print every candidate the autotuner timed or rejected\n"
            "  --profile          time each step of the winning plans alone (batch 1 and the\n"
            "                     largest batch), as '#' lines\n"
            "  -h, --help         this text\n");
}

/* An int list option into n ints of out (at most max). */
static int int_list(const char *opt, const char *arg, long lo, long hi, int *out, int max, int *n)
{
    long tmp[16];
    if (opt_parse_int_list("bench kernels", opt, arg, lo, hi, tmp, max, n)) return -1;
    for (int i = 0; i < *n; i++) out[i] = (int)tmp[i];
    return 0;
}

int cmd_bench_kernels(int argc, char **argv)
{
    enum { O_SHAPES = 256, O_MODEL, O_BATCHES, O_BMAX, O_ALGOS, O_SYM, O_SCHEMES, O_HEUR, O_OUT, O_CACHE, O_RETUNE, O_WARMUP,
           O_REPS, O_NOPROD, O_NOELEM, O_NOGRAPH, O_VERBOSE, O_PROFILE, O_MINBLOCK, O_HEURMAX, O_NOGEMMTUNE,
           O_KERNELS, O_RETIME, O_JSON, O_ASSTORED, O_REST };
    static const struct option lo[] = {
        {"shapes", required_argument, 0, O_SHAPES}, {"model", required_argument, 0, O_MODEL},
        {"as-stored", no_argument, 0, O_ASSTORED},
        {"batches", required_argument, 0, O_BATCHES}, {"batch-max-elems", required_argument, 0, O_BMAX},
        {"algos", required_argument, 0, O_ALGOS}, {"sym-blocks", required_argument, 0, O_SYM},
        {"sym-schemes", required_argument, 0, O_SCHEMES},
        {"heuristics", required_argument, 0, O_HEUR}, {"out", required_argument, 0, O_OUT},
        {"cache", required_argument, 0, O_CACHE}, {"retune", no_argument, 0, O_RETUNE},
        {"warmup", required_argument, 0, O_WARMUP}, {"reps", required_argument, 0, O_REPS},
        {"rest-ms", required_argument, 0, O_REST},
        {"no-products", no_argument, 0, O_NOPROD}, {"no-elementwise", no_argument, 0, O_NOELEM},
        {"no-graph", no_argument, 0, O_NOGRAPH}, {"verbose", no_argument, 0, O_VERBOSE},
        {"profile", no_argument, 0, O_PROFILE}, {"min-block", required_argument, 0, O_MINBLOCK},
        {"heuristics-max-elems", required_argument, 0, O_HEURMAX},
        {"no-gemm-tune", no_argument, 0, O_NOGEMMTUNE}, {"kernels", required_argument, 0, O_KERNELS},
        {"retime-cached", no_argument, 0, O_RETIME},
        {"help", no_argument, 0, 'h'}, {"json", no_argument, 0, O_JSON}, {0, 0, 0, 0}};
    const char *cmd = "bench kernels";
    ns_bench_shapes shapes = {0};
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) /* before the shapes are read, wherever it stands */
        if (!strcmp(argv[i], "--as-stored")) shapes.as_stored = 1;
    ns_bench_opts o;
    ns_bench_opts_default(&o);
    dm_err err = {{0}};
    int c, rc = 1, json = 0;
    long v;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
        switch (c) {
        case O_SHAPES:
        case O_MODEL:
            if (c == O_SHAPES ? ns_bench_shapes_read(&shapes, optarg, &err) : ns_bench_shapes_model(&shapes, optarg, &err)) {
                fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
                goto done;
            }
            break;
        case O_BATCHES:
            if (opt_parse_int_list(cmd, "--batches", optarg, 1, 4096, o.batches, NS_BENCH_MAX_BATCHES, &o.n_batches))
                goto usage;
            break;
        case O_BMAX:
            if (opt_parse_size(cmd, "--batch-max-elems", optarg, 0, INT64_C(1) << 40, &o.batch_max_elems)) goto usage;
            break;
        case O_ALGOS:
            if (ns_bench_algos_parse(optarg, &o, &err)) {
                opt_usage_error(cmd, "--algos: %s", err.msg);
                goto usage;
            }
            break;
        case O_SYM:
            if (int_list("--sym-blocks", optarg, 1, 16, o.at.sym_blocks, 8, &o.at.n_sym)) goto usage;
            break;
        case O_SCHEMES: {
            o.at.sym_schemes = 0;
            char *dup = strdup(optarg), *save = NULL;
            int bad = !dup;
            for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t && !bad; t = strtok_r(NULL, ",", &save)) {
                if (!strcmp(t, "levels")) o.at.sym_schemes |= 1;
                else if (!strcmp(t, "flat")) o.at.sym_schemes |= 2;
                else {
                    opt_usage_error(cmd, "--sym-schemes: expected levels or flat, found '%s'", t);
                    bad = 1;
                }
            }
            free(dup);
            if (bad || !o.at.sym_schemes) return 2;
            break;
        }
        case O_HEUR:
            if (int_list("--heuristics", optarg, 0, 7, o.at.heuristics, 4, &o.at.n_heur)) goto usage;
            break;
        case O_OUT: o.out_csv = optarg; break;
        case O_CACHE: o.cache_path = optarg; break;
        case O_RETUNE: o.retune = 1; break;
        case O_RETIME: o.retime = 1; break;
        case O_JSON: json = 1; break;
        case O_WARMUP:
            if (opt_parse_long(cmd, "--warmup", optarg, 0, 1000, &v)) goto usage;
            o.warmup = o.at.warmup = (int)v;
            break;
        case O_REPS:
            if (opt_parse_long(cmd, "--reps", optarg, 1, 1000, &v)) goto usage;
            o.reps = o.at.reps = (int)v;
            break;
        case O_REST:
            if (opt_parse_long(cmd, "--rest-ms", optarg, 0, 10000, &v)) goto usage;
            ns_time_set_rest_us(1e3 * (double)v);
            break;
        case O_NOPROD: o.products = 0; break;
        case O_NOELEM: o.elementwise = 0; break;
        case O_NOGRAPH: o.at.use_graph = 0; break;
        case O_ASSTORED: break; /* seen above */
        case O_VERBOSE: o.verbose = 1; break;
        case O_PROFILE: o.profile = 1; break;
        case O_NOGEMMTUNE: o.at.tune_gemms = 0; break;
        case O_KERNELS: {
            o.at.n_kernels = 0;
            char *dup = strdup(optarg), *save = NULL;
            int bad = !dup;
            for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t && !bad; t = strtok_r(NULL, ",", &save)) {
                ns_kernel k;
                if (ns_kernel_parse(t, &k) || o.at.n_kernels == NS_KERNEL_COUNT) {
                    opt_usage_error(cmd, "--kernels: expected lt, sym64, sym128, sym128s3, fused32, fused64, fused128, block or block16, "
                                    "found '%s'", t);
                    bad = 1;
                } else {
                    o.at.kernels[o.at.n_kernels++] = k;
                }
            }
            free(dup);
            if (bad || !o.at.n_kernels) return 2;
            break;
        }
        case O_MINBLOCK:
            if (opt_parse_long(cmd, "--min-block", optarg, 8, 1 << 20, &v)) goto usage;
            o.at.min_block = v;
            break;
        case O_HEURMAX:
            if (opt_parse_size(cmd, "--heuristics-max-elems", optarg, 0, INT64_C(1) << 40, &o.at.heur_max_elems))
                goto usage;
            break;
        case 'h': usage_kernels(stdout); rc = 0; goto done;
        default:
            opt_usage_error(cmd, "unrecognized option '%s'", argv[optind - 1]);
            goto usage;
        }
    }
    if (opt_no_operands(cmd, argc, argv)) goto usage;
    char cmdline[2048];
    size_t cl = (size_t)snprintf(cmdline, sizeof cmdline, "dmuon bench");
    for (int i = 0; i < argc && cl < sizeof cmdline; i++)
        cl += (size_t)snprintf(cmdline + cl, sizeof cmdline - cl, " %s", argv[i]);
    o.cmdline = cmdline;
    opt_json js;
    if (json && opt_json_begin(&js, cmd, &o.out_csv) < 0) {
        opt_json_end(&js, cmd, "kernels", NULL, 0);
        rc = 1;
        goto done;
    }
    rc = ns_bench_kernels(&o, &shapes, &err) < 0 ? 1 : 0;
    if (rc) fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
    if (json && opt_json_end(&js, cmd, "kernels", o.out_csv, rc == 0) < 0) rc = 1;
    goto done;
usage: /* the option parsers printed the message */
    rc = 2;
done:
    ns_bench_shapes_free(&shapes);
    return rc;
}

/* ---- bench work ---------------------------------------------------------------------------- */

static void usage_work(FILE *f, const wk_bench_opts *d)
{
    fprintf(f,
            "Usage: dmuon bench work [OPTIONS]\n"
            "Measure on this GPU every kernel of the models' training steps (the GEMMs of every\n"
            "projection and pass, attention products at the sequence length, MoE expert GEMMs over\n"
            "their routed rows, norms, biases, lookups, routing: core/workload.h) through the launchers\n"
            "the executor runs them with, plus a grid of GEMM shapes for interpolation; a sustained\n"
            "load first, then per distinct kernel a warm-up and CUDA events around each call, medians.\n"
            "Writes dmuon-costs-2 rows (gemm, bgemm, elem) and a table; prints its time estimate first.\n\n"
            "  --models LIST      bundled model names or files, 'validation' (the models dmuon validate\n"
            "                     runs: llama-3.2-3b, qwen2.5-1.5b, qwen2.5-7b, wall-oss-flow, qwen2.5-vl-3b,\n"
            "                     moonlight-16b-a3b-6l) or 'all' (default validation)\n"
            "  --model FILE       one more model (a file not bundled; repeatable)\n"
            "  --tokens LIST      tokens per rank (default 1024,2048,4096,8192,16384)\n"
            "  --seq-len N        tokens per sequence (default: each token count one sequence)\n"
            "  --attention A      whole (default) or causal: the attention products as the plan\n"
            "                     option says (dmuon plan --help)\n"
            "  --no-grid          without the GEMM grid\n"
            "  --ops LIST         time only these op kinds (the names of the rows' second column:\n"
            "                     fwd, dgrad, wgrad, attn-score, ..., glu, rope, rope-bwd, resid, ...;\n"
            "                     the grid's GEMMs count as fwd, dgrad, wgrad; default every kind)\n"
            "  --grid-m LIST      its m values (default 256,512,...,16384)\n"
            "  --grid-nk LIST     its n and k values (default 256,512,...,32768)\n"
            "  --warmup-ms X      warm-up per kernel (default %.0f)\n"
            "  --min-ms X         timed calls last at least this long (default %.0f)\n"
            "  --reps N           and are at least this many (default %d)\n"
            "  --sustain S        seconds of GEMM load before the first kernel (default %.0f)\n"
            "  --cool             after each kernel the GPU idles as long as its timing ran, so the\n"
            "                     bench's own load never throttles it: rows at full clock (a long\n"
            "                     run otherwise times its later, larger GEMMs at the power limit)\n"
            "  --out CSV          the cost rows (atomically; default none)\n"
            "  --json             the rows as one JSON document on stdout (dmuon-bench-1), the\n"
            "                     table on stderr\n"
            "  --cache FILE       reuse and store timings (keyed by GPU, CUDA and cuBLAS versions)\n"
            "  --max-seconds S    stop timing after S seconds and write what was timed (default: none)\n"
            "  --dry-run          list and estimate only (no GPU needed); --list prints every kernel\n"
            "  -h, --help         this text\n",
            d->warmup_ms, d->min_ms, d->reps, d->sustain_s);
}

/* --ops LIST: one bit per op kind named (dm_kern_op_name); a name it does not know is refused
 * with the names it knows. 0, or 2 after the usage error. */
static int parse_ops(const char *cmd, const char *list, uint64_t *ops)
{
    _Static_assert(DM_KOP__COUNT <= 64, "op kinds fit a 64-bit mask");
    char buf[512];
    if (strlen(list) >= sizeof buf) {
        opt_usage_error(cmd, "--ops: a list of %zu characters (at most %zu)", strlen(list), sizeof buf - 1);
        return 2;
    }
    snprintf(buf, sizeof buf, "%s", list);
    *ops = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int op = dm_kern_op_from_name(t);
        if (op < 0) {
            char known[1024];
            size_t n = 0;
            for (int i = 0; i < DM_KOP__COUNT && n < sizeof known; i++)
                n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", dm_kern_op_name((dm_kern_op)i));
            opt_usage_error(cmd, "--ops: unknown op kind '%s' (known: %s)", t, known);
            return 2;
        }
        *ops |= (uint64_t)1 << op;
    }
    if (!*ops) {
        opt_usage_error(cmd, "--ops: expected a comma-separated list of op kinds, got '%s'", list);
        return 2;
    }
    return 0;
}

int cmd_bench_work(int argc, char **argv)
{
    enum { O_MODELS = 300, O_MODEL, O_TOKENS, O_SEQ, O_NOGRID, O_GRIDM, O_GRIDNK, O_WARM, O_MIN, O_REPS, O_SUST,
           O_OUT, O_CACHE, O_DRY, O_LIST, O_MAXS, O_JSON, O_COOL, O_ATTN, O_OPS };
    static const struct option lo[] = {
        {"models", required_argument, 0, O_MODELS}, {"model", required_argument, 0, O_MODEL},
        {"tokens", required_argument, 0, O_TOKENS}, {"seq-len", required_argument, 0, O_SEQ},
        {"no-grid", no_argument, 0, O_NOGRID},      {"grid-m", required_argument, 0, O_GRIDM},
        {"grid-nk", required_argument, 0, O_GRIDNK}, {"warmup-ms", required_argument, 0, O_WARM},
        {"min-ms", required_argument, 0, O_MIN},    {"reps", required_argument, 0, O_REPS},
        {"sustain", required_argument, 0, O_SUST},  {"out", required_argument, 0, O_OUT},
        {"cache", required_argument, 0, O_CACHE},   {"dry-run", no_argument, 0, O_DRY},
        {"list", no_argument, 0, O_LIST},           {"max-seconds", required_argument, 0, O_MAXS},
        {"help", no_argument, 0, 'h'},              {"json", no_argument, 0, O_JSON},
        {"cool", no_argument, 0, O_COOL},           {"attention", required_argument, 0, O_ATTN},
        {"ops", required_argument, 0, O_OPS},       {0, 0, 0, 0}};
    const char *cmd = "bench work";
    wk_bench_opts o, d;
    wk_bench_opts_default(&o);
    d = o;
    char *models_copy = NULL;
    int c, n_extra = 0, rc = 2, json = 0;
    const char *extra[WK_BENCH_MAX_LIST];
    long tmp[16];
    int n;
    long v;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
        switch (c) {
        case O_MODELS:
            free(models_copy);
            if (!(models_copy = strdup(optarg))) goto done;
            o.n_models = 0;
            for (char *save = NULL, *t = strtok_r(models_copy, ",", &save); t && o.n_models < WK_BENCH_MAX_LIST;
                 t = strtok_r(NULL, ",", &save))
                o.models[o.n_models++] = t;
            break;
        case O_MODEL:
            if (n_extra < WK_BENCH_MAX_LIST) extra[n_extra++] = optarg;
            break;
        case O_TOKENS:
            if (opt_parse_int_list(cmd, "--tokens", optarg, 1, 1 << 22, tmp, 16, &n)) goto done;
            for (int i = 0; i < n; i++) o.tokens[i] = tmp[i];
            o.n_tokens = n;
            break;
        case O_SEQ:
            if (opt_parse_long(cmd, "--seq-len", optarg, 1, 1 << 22, &v)) goto done;
            o.seq_len = v;
            break;
        case O_ATTN: {
            dm_err e;
            if (sched_parse_attention(optarg, &o.causal_tile, &e)) {
                opt_usage_error(cmd, e.msg);
                goto done;
            }
            break;
        }
        case O_OPS:
            if (parse_ops(cmd, optarg, &o.ops)) goto done;
            break;
        case O_NOGRID: o.grid = 0; break;
        case O_GRIDM:
        case O_GRIDNK: {
            int64_t *dst = c == O_GRIDM ? o.grid_m : o.grid_nk;
            if (opt_parse_int_list(cmd, c == O_GRIDM ? "--grid-m" : "--grid-nk", optarg, 1, 1 << 20, tmp, 16, &n)) goto done;
            for (int i = 0; i < n; i++) dst[i] = tmp[i];
            *(c == O_GRIDM ? &o.n_grid_m : &o.n_grid_nk) = n;
            break;
        }
        case O_WARM: if (opt_parse_double(cmd, "--warmup-ms", optarg, 0, 1e5, &o.warmup_ms)) goto done; break;
        case O_MIN: if (opt_parse_double(cmd, "--min-ms", optarg, 0, 1e5, &o.min_ms)) goto done; break;
        case O_REPS:
            if (opt_parse_long(cmd, "--reps", optarg, 1, 1000, &v)) goto done;
            o.reps = (int)v;
            break;
        case O_SUST: if (opt_parse_double(cmd, "--sustain", optarg, 0, 3600, &o.sustain_s)) goto done; break;
        case O_OUT: o.out_csv = optarg; break;
        case O_CACHE: o.cache_path = optarg; break;
        case O_DRY: o.dry_run = 1; break;
        case O_LIST: o.list = 1; break;
        case O_JSON: json = 1; break;
        case O_COOL: o.cool = 1; break;
        case O_MAXS: if (opt_parse_double(cmd, "--max-seconds", optarg, 0, 1e6, &o.max_s)) goto done; break;
        case 'h': usage_work(stdout, &d); rc = 0; goto done;
        default: rc = opt_getopt_error(cmd, c, argv); goto done;
        }
    }
    if (opt_no_operands(cmd, argc, argv)) goto done;
    if (!o.n_models && !n_extra) o.models[o.n_models++] = "validation";
    for (int i = 0; i < n_extra && o.n_models < WK_BENCH_MAX_LIST; i++) o.models[o.n_models++] = extra[i];
    char cmdline[2048];
    size_t cl = (size_t)snprintf(cmdline, sizeof cmdline, "dmuon bench");
    for (int i = 0; i < argc && cl < sizeof cmdline; i++)
        cl += (size_t)snprintf(cmdline + cl, sizeof cmdline - cl, " %s", argv[i]);
    o.cmdline = cmdline;
    dm_err err = {{0}};
    opt_json js;
    if (json && !o.list && opt_json_begin(&js, cmd, &o.out_csv) < 0) {
        opt_json_end(&js, cmd, "work", NULL, 0);
        rc = 1;
        goto done;
    }
    rc = wk_bench_work(&o, &err) < 0 ? 1 : 0;
    if (rc) fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
    if (json && !o.list && opt_json_end(&js, cmd, "work", o.out_csv, rc == 0) < 0) rc = 1;
done:
    free(models_copy);
    return rc;
}
