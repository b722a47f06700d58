/* sched_opts.c: scheduler options: defaults, parsing from strings (shared by dmuon plan, sim
 * and run through the getopt fragment in sched.h), and the one-line summary. */
#include "sched.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

void sched_opts_default(sched_opts *o)
{
    memset(o, 0, sizeof *o);
    o->strategy = SCHED_DMUON;
    o->balance = SCHED_BAL_AUTO;
    o->overlap = SCHED_OVERLAP_INTERLEAVE;
    o->prefetch_depth = 1;
    o->zero = 2;
    o->hierarchical = 0;
    o->gpus_per_node = 0;
    o->batch_threshold = 5 * 1024 * 1024;
    o->max_batch = 32;
    o->milp_time_s = 1.0;
    o->comm_weight = 1.0;
    o->tokens = 4096;
    o->ns_algo = -1;
    o->dtype = DM_DT_BF16;
    o->layer_passes = 1;
}

static const char *strategy_names[] = {"adamw", "muon-ddp", "muon-fsdp", "muon-rr", "dmuon"};
static const char *balance_names[] = {"round-robin", "lpt", "milp", "auto"};
static const char *overlap_names[] = {"none", "prefetch", "interleave"};
static const char *hsdp_scheme_names[] = {"auto", "replicas", "world"}; /* --hsdp-adamw and --hsdp-muon */

const char *sched_strategy_name(sched_strategy s) { return (unsigned)s <= SCHED_DMUON ? strategy_names[s] : "?"; }
const char *sched_balance_name(sched_balance b) { return (unsigned)b <= SCHED_BAL_AUTO ? balance_names[b] : "?"; }
const char *sched_overlap_name(sched_overlap v) { return (unsigned)v <= SCHED_OVERLAP_INTERLEAVE ? overlap_names[v] : "?"; }
const char *sched_hsdp_adamw_name(sched_hsdp_adamw m) { return (unsigned)m <= SCHED_HSDP_ADAMW_WORLD ? hsdp_scheme_names[m] : "?"; }
const char *sched_hsdp_muon_name(sched_hsdp_muon m) { return (unsigned)m <= SCHED_HSDP_MUON_WORLD ? hsdp_scheme_names[m] : "?"; }

int sched_opts_pytorch_form(const sched_opts *o)
{
    return (o->strategy == SCHED_MUON_DDP || o->strategy == SCHED_MUON_FSDP) && !o->naive_tuned;
}

void sched_opts_effective(const sched_opts *o, sched_opts *out)
{
    *out = *o;
    if (sched_opts_pytorch_form(o)) out->max_batch = 1, out->ns_algo = DM_NS_DIRECT;
}

const char *sched_opts_strategy_label(const sched_opts *o)
{
    if (o->naive_tuned && o->strategy == SCHED_MUON_DDP) return "muon-ddp-tuned";
    if (o->naive_tuned && o->strategy == SCHED_MUON_FSDP) return "muon-fsdp-tuned";
    return sched_strategy_name(o->strategy);
}

static int pick(const char *val, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcasecmp(val, names[i])) return i;
    return -1;
}

/* Integer with an optional K/M/G suffix (powers of 1024, as opts.h sizes). */
static int parse_count(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s) return -1;
    if (*end == 'k' || *end == 'K') v *= 1024, end++;
    else if (*end == 'm' || *end == 'M') v *= 1024.0 * 1024, end++;
    else if (*end == 'g' || *end == 'G') v *= 1024.0 * 1024 * 1024, end++;
    if (*end || !isfinite(v) || v != floor(v) || v < (double)lo || v > (double)hi) return -1;
    *out = (int64_t)v;
    return 0;
}

int sched_opts_parse(sched_opts *o, const char *key, const char *val, dm_err *err)
{
    int64_t v;
    int i;
    if (!strcmp(key, "strategy")) {
        size_t L = strlen(val);
        int tuned = L > 6 && !strcasecmp(val + L - 6, "-tuned");
        char base[32];
        snprintf(base, sizeof base, "%.*s", tuned ? (int)(L - 6) : (int)L, val);
        if ((i = pick(base, strategy_names, 5)) < 0 || (tuned && i != SCHED_MUON_DDP && i != SCHED_MUON_FSDP))
            return dm_err_set(err, "--strategy: expected adamw, muon-ddp, muon-fsdp, muon-rr, dmuon, muon-ddp-tuned or "
                              "muon-fsdp-tuned, found '%s'", val);
        o->strategy = (sched_strategy)i;
        o->naive_tuned = tuned;
    } else if (!strcmp(key, "balance")) {
        if (!strcasecmp(val, "rr")) val = "round-robin";
        if ((i = pick(val, balance_names, 4)) < 0)
            return dm_err_set(err, "--balance: expected auto, lpt, milp or round-robin, found '%s'", val);
        o->balance = (sched_balance)i;
    } else if (!strcmp(key, "overlap")) {
        const char *colon = strchr(val, ':');
        char head[32];
        size_t hl = colon ? (size_t)(colon - val) : strlen(val);
        if (hl >= sizeof head) hl = sizeof head - 1;
        memcpy(head, val, hl);
        head[hl] = 0;
        if ((i = pick(head, overlap_names, 3)) < 0 || (colon && i != SCHED_OVERLAP_PREFETCH))
            return dm_err_set(err, "--overlap: expected none, prefetch, prefetch:K or interleave, found '%s'", val);
        if (colon) {
            if (parse_count(colon + 1, 1, 1024, &v))
                return dm_err_set(err, "--overlap: expected prefetch:K with K in [1, 1024], found '%s'", val);
            o->prefetch_depth = (int)v;
        }
        o->overlap = (sched_overlap)i;
    } else if (!strcmp(key, "prefetch") || !strcmp(key, "prefetch-depth")) {
        if (parse_count(val, 1, 1024, &v)) return dm_err_set(err, "--prefetch: expected an integer in [1, 1024], found '%s'", val);
        o->prefetch_depth = (int)v;
    } else if (!strcmp(key, "zero")) {
        if (strcmp(val, "2") && strcmp(val, "3")) return dm_err_set(err, "--zero: expected 2 or 3, found '%s'", val);
        o->zero = val[0] - '0';
    } else if (!strcmp(key, "hierarchical")) {
        if (!strcmp(val, "1") || !strcasecmp(val, "yes") || !strcasecmp(val, "on")) o->hierarchical = 1;
        else if (!strcmp(val, "0") || !strcasecmp(val, "no") || !strcasecmp(val, "off")) o->hierarchical = 0;
        else return dm_err_set(err, "--hierarchical: expected yes or no, found '%s'", val);
    } else if (!strcmp(key, "hsdp")) {
        if (!strcmp(val, "1") || !strcasecmp(val, "yes") || !strcasecmp(val, "on")) o->hsdp = 1;
        else if (!strcmp(val, "0") || !strcasecmp(val, "no") || !strcasecmp(val, "off")) o->hsdp = 0, o->shard = 0;
        else return dm_err_set(err, "--hsdp: expected yes or no, found '%s'", val);
    } else if (!strcmp(key, "shard")) {
        if (parse_count(val, 1, 1 << 16, &v)) return dm_err_set(err, "--shard: expected ranks per shard group, an integer in [1, 65536], found '%s'", val);
        o->shard = (int)v;
        o->hsdp = 1;
    } else if (!strcmp(key, "hsdp-adamw")) {
        if ((i = pick(val, hsdp_scheme_names, 3)) < 0)
            return dm_err_set(err, "--hsdp-adamw: expected auto, replicas or world, found '%s'", val);
        o->hsdp_adamw = (sched_hsdp_adamw)i;
    } else if (!strcmp(key, "hsdp-muon")) {
        if ((i = pick(val, hsdp_scheme_names, 3)) < 0)
            return dm_err_set(err, "--hsdp-muon: expected auto, replicas or world, found '%s'", val);
        o->hsdp_muon = (sched_hsdp_muon)i;
    } else if (!strcmp(key, "gpus-per-node")) {
        if (parse_count(val, 1, 1 << 16, &v)) return dm_err_set(err, "--gpus-per-node: expected an integer in [1, 65536], found '%s'", val);
        o->gpus_per_node = (int)v;
    } else if (!strcmp(key, "batch-threshold")) {
        if (parse_count(val, 0, INT64_C(1) << 40, &v))
            return dm_err_set(err, "--batch-threshold: expected elements (suffixes K, M, G), found '%s'", val);
        o->batch_threshold = v;
    } else if (!strcmp(key, "max-batch")) {
        if (parse_count(val, 1, 1024, &v)) return dm_err_set(err, "--max-batch: expected an integer in [1, 1024], found '%s'", val);
        o->max_batch = (int)v;
    } else if (!strcmp(key, "milp-time")) {
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (errno || end == val || *end || !(d > 0) || d > 3600)
            return dm_err_set(err, "--milp-time: expected seconds in (0, 3600], found '%s'", val);
        o->milp_time_s = d;
    } else if (!strcmp(key, "ns-under-backward")) {
        if (!strcasecmp(val, "off")) o->ns_early = 0, o->ns_stream = 0;
        else if (!strcasecmp(val, "stream")) o->ns_early = 0, o->ns_stream = 1;
        else if (parse_count(val, 1, 1 << 20, &v))
            return dm_err_set(err, "--ns-under-backward: expected layers (a positive integer), stream or off, found '%s'",
                              val);
        else o->ns_early = (int)v, o->ns_stream = 0;
    } else if (!strcmp(key, "ns-split")) {
        if (!strcasecmp(val, "off") || !strcmp(val, "0")) o->ns_split = 0;
        else if (!strcasecmp(val, "auto")) o->ns_split = SCHED_NS_SPLIT_AUTO;
        else if (parse_count(val, 2, 1024, &v))
            return dm_err_set(err, "--ns-split: expected ranks per split matrix (an integer in [2, 1024]), auto or off, found '%s'",
                              val);
        else o->ns_split = (int)v;
    } else if (!strcmp(key, "publish")) {
        if (!strcasecmp(val, "off")) o->publish = 0;
        else if (!strcasecmp(val, "auto")) o->publish = SCHED_PUBLISH_AUTO;
        else if (parse_count(val, 0, 1024, &v))
            return dm_err_set(err, "--publish: expected how many first layers' fetch runs at the step's end (an integer "
                              "in [0, 1024]), auto or off, found '%s'", val);
        else o->publish = (int)v;
    } else if (!strcmp(key, "comm-weight")) {
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (errno || end == val || *end || !(d >= 0) || d > 1000)
            return dm_err_set(err, "--comm-weight: expected a number in [0, 1000], found '%s'", val);
        o->comm_weight = d;
    } else if (!strcmp(key, "tokens")) {
        if (parse_count(val, 1, INT64_C(1) << 40, &v)) return dm_err_set(err, "--tokens: expected a positive integer, found '%s'", val);
        o->tokens = v;
    } else if (!strcmp(key, "ns-algo")) {
        if (!strcasecmp(val, "auto")) o->ns_algo = -1;
        else if (!strcasecmp(val, "direct")) o->ns_algo = DM_NS_DIRECT;
        else if (!strcasecmp(val, "gram")) o->ns_algo = DM_NS_GRAM;
        else return dm_err_set(err, "--ns-algo: expected auto, direct or gram, found '%s'", val);
    } else if (!strcmp(key, "seq-len")) {
        if (parse_count(val, 1, INT64_C(1) << 40, &v))
            return dm_err_set(err, "--seq-len: expected a positive integer, found '%s'", val);
        o->seq_len = v;
    } else if (!strcmp(key, "dtype")) {
        if (!strcasecmp(val, "bf16")) o->dtype = DM_DT_BF16;
        else if (!strcasecmp(val, "fp16")) o->dtype = DM_DT_FP16;
        else if (!strcasecmp(val, "fp32")) o->dtype = DM_DT_FP32;
        else return dm_err_set(err, "--dtype: expected bf16, fp16 or fp32, found '%s'", val);
    } else if (!strcmp(key, "attention")) {
        return sched_parse_attention(val, &o->causal_tile, err);
    } else if (!strcmp(key, "layer-passes")) {
        return sched_parse_layer_passes(val, &o->layer_passes, err);
    } else {
        return dm_err_set(err, "--%s: not a scheduler option", key);
    }
    return 0;
}

int sched_parse_attention(const char *val, int64_t *causal_tile, dm_err *err)
{
    int64_t v;
    if (!strcmp(val, "whole")) *causal_tile = 0;
    else if (!strcmp(val, "causal")) *causal_tile = DM_ATTN_CAUSAL_TILE;
    else if (!strncmp(val, "causal:", 7) && !parse_count(val + 7, 1, 1 << 24, &v)) *causal_tile = v;
    else return dm_err_set(err, "--attention: expected whole, causal or causal:T (tile rows), found '%s'", val);
    return 0;
}

int sched_parse_layer_passes(const char *val, int *on, dm_err *err)
{
    if (!strcmp(val, "on")) *on = 1;
    else if (!strcmp(val, "off")) *on = 0;
    else return dm_err_set(err, "--layer-passes: expected on or off, found '%s'", val);
    return 0;
}

static const char *getopt_keys[] = {"strategy", "balance", "overlap", "prefetch", "zero", "hierarchical",
                                    "gpus-per-node", "batch-threshold", "max-batch", "milp-time", "tokens",
                                    "ns-algo", "dtype", "seq-len", "comm-weight", "ns-under-backward", "hsdp",
                                    "shard", "hsdp-adamw", "hsdp-muon", "attention", "ns-split", "publish",
                                    "layer-passes"};
#define N_GETOPT (int)(sizeof getopt_keys / sizeof getopt_keys[0])

int sched_getopt_handle(sched_opts *o, const char *cmd, int c, const char *optarg_)
{
    if (c < SCHED_OPT_BASE || c >= SCHED_OPT_BASE + N_GETOPT) return 0;
    const char *key = getopt_keys[c - SCHED_OPT_BASE];
    dm_err err;
    if (sched_opts_parse(o, key, optarg_ ? optarg_ : "yes", &err)) {
        if (cmd) fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
        return -1;
    }
    return 1;
}

void sched_getopt_help(FILE *f)
{
    sched_opts d;
    sched_opts_default(&d);
    fprintf(f,
            "Plan options:\n"
            "  --strategy S          adamw, muon-ddp, muon-fsdp, muon-rr, dmuon (default %s);\n"
            "                        muon-ddp and muon-fsdp as PyTorch code runs them (one matrix\n"
            "                        per NS, direct, kernels launched one by one, the classic\n"
            "                        coefficients; DDP's loop starts after the last gradient\n"
            "                        all-reduce; FSDP gathers each gradient in the optimizer\n"
            "                        step, in series with its NS); muon-ddp-tuned, muon-fsdp-tuned:\n"
            "                        batched, algorithm per shape, graphs, gathers in the backward,\n"
            "                        each NS as soon as its gradients are in\n"
            "  --balance B           owner assignment: auto (simulate lpt and milp, keep the faster;\n"
            "                        a plan of 1 M ops or more stops simulating once past the best\n"
            "                        step so far, reported \"over\" it), lpt, milp, round-robin\n"
            "                        (default %s)\n"
            "  --overlap V           none, prefetch[:K], interleave (default %s; cumulative)\n"
            "  --prefetch K          layers fetched ahead of the forward (default %d)\n"
            "  --zero Z              2 keep full weights after forward, 3 free and re-fetch (default %d)\n"
            "  --hierarchical        dmuon, node-replicated (the other strategies ignore it): owners\n"
            "                        inside each node, every node runs every NS, gradients\n"
            "                        all-reduced across nodes\n"
            "  --hsdp                DMuon's HSDP (dmuon; the other strategies ignore it): shard groups\n"
            "                        (a node) x replicas; gradients reduce-scattered in the shard groups,\n"
            "                        each part reduced over its column, gathered to one global owner; NS\n"
            "                        once per matrix; the new weights back the same way before the next\n"
            "                        forward; AdamW parameters as --hsdp-adamw says\n"
            "  --shard N             HSDP with shard groups of N ranks (default: GPUs per node)\n"
            "  --hsdp-adamw M        HSDP's AdamW parameters, per layer: replicas (sharded in the\n"
            "                        shard group, all-reduced over the replicas), world (sharded over\n"
            "                        all ranks, as the flat plan) or auto: the cheaper of the two by\n"
            "                        the collective cost model (default auto)\n"
            "  --hsdp-muon M         HSDP's Muon matrices: replicas (the stages above), world (each\n"
            "                        (layer, owner) pair reduced and broadcast over all ranks, as the\n"
            "                        flat plan) or auto: under --balance auto both simulated (the\n"
            "                        stages' plan after the world's, when its candidates were weighed\n"
            "                        by the objective, and then only when its simulation would take\n"
            "                        under 10 s by the estimate: else the world's is kept), the\n"
            "                        faster kept (default auto; replicas otherwise)\n"
            "  --gpus-per-node G     override the cluster's GPUs per node\n"
            "  --batch-threshold E   pack/batch Muon matrices under E elements (default 5M = %lld)\n"
            "  --max-batch B         largest NS batch (default %d); halved until the plan fits the\n"
            "                        GPU's memory when its NS batches are what makes it too large\n"
            "  --milp-time S         MILP time limit, heuristics included (default %g): seconds of\n"
            "                        counted work (about seconds on a 2-core build machine), so a\n"
            "                        cut search gives the same plan on every run; the wall clock\n"
            "                        caps it at 2 S + 0.5 s\n"
            "  --comm-weight W       weight of the collectives' latency and link terms beside the NS\n"
            "                        load in the owner objective; 0: NS load alone (default %g)\n"
            "  --tokens T            tokens per rank per step: sequences x seq-len (default %lld)\n"
            "  --seq-len S           tokens per sample of the model's main stream (default: --tokens,\n"
            "                        one sequence per rank); other streams have their own per sample\n"
            "  --ns-algo A           auto (cheaper per shape from the cost table), direct, gram (default auto)\n"
            "  --dtype D             weights, gradients and collectives: bf16, fp16, fp32 (default bf16)\n"
            "  --ns-under-backward D dmuon: each owner's NS runs in the compute stream during the\n"
            "                        backward, D layers after the last gradients it needs (interleave\n"
            "                        overlap); stream: every optimizer op of an owner on a second,\n"
            "                        lowest-priority compute stream (compute-lo), each as soon as its\n"
            "                        gradients arrive, beside the backward on the same GPU; off: after\n"
            "                        the backward (default off)\n"
            "  --ns-split P          dmuon, flat plan: the NS of each Muon matrix stored tall or\n"
            "                        square whose NS alone outlasts an owner's mean NS load, split\n"
            "                        by rows over P ranks of one node (rows divisible by P), its Gram\n"
            "                        all-reduced among them each iteration; under --balance auto the\n"
            "                        plan without splits is simulated beside it, the faster kept;\n"
            "                        auto: each P of 2, 4, ... up to a node's GPUs tried so (with\n"
            "                        another balance: no split); the simulator and the CPU executor\n"
            "                        run it, the GPU executor refuses it (default off)\n"
            "  --publish N           the first N layers' forward fetch (N at most the prefetch\n"
            "                        depth + 1: the layers fetched before any forward compute) at the\n"
            "                        end of the step, each after its params' updates, carrying the\n"
            "                        new weights to the next step's forward, which then starts\n"
            "                        without waiting on them; it runs beside the optimizer's tail\n"
            "                        (not with --zero 3); both executors run it, the GPU executor\n"
            "                        on one GPU so far; auto: 1 on more than one GPU with --zero 2\n"
            "                        and overlap prefetch or interleave, else 0 (default 0: none)\n"
            "  --attention A         whole: every attention block's score and value products over\n"
            "                        its whole windows (default; the executor's step as measured so\n"
            "                        far); causal: a causal self-attention block's over its lower\n"
            "                        triangle, rectangles that halve down to tiles of %d rows or\n"
            "                        more (causal:T: T rows), the diagonal tiles whole, as a\n"
            "                        FlashAttention-style kernel skips the masked half; a layer with a\n"
            "                        sliding window (the model's \"window\") over its band in tiles of\n"
            "                        T rows or more; the executor runs the same products (timed on\n"
            "                        one H200 on 2026-12-05, the sliding-window bands too)\n"
            "  --layer-passes P      on: every layer's passes between its projections (rotary\n"
            "                        embeddings, MLP activations, residual adds; models/README.md),\n"
            "                        priced and run as kernels of their own (default); off: none (the\n"
            "                        workload of programs written before 2026-12-06)\n",
            sched_strategy_name(d.strategy), sched_balance_name(d.balance), sched_overlap_name(d.overlap),
            d.prefetch_depth, d.zero, (long long)d.batch_threshold, d.max_batch, d.milp_time_s, d.comm_weight,
            (long long)d.tokens, DM_ATTN_CAUSAL_TILE);
}

char *sched_opts_describe(const sched_opts *o, char *buf, size_t size)
{
    snprintf(buf, size, "strategy=%s balance=%s overlap=%s prefetch=%d zero=%d hierarchical=%s "
             "batch-threshold=%lld max-batch=%d tokens=%lld ns-algo=%s dtype=%s",
             sched_opts_strategy_label(o), sched_balance_name(o->balance), sched_overlap_name(o->overlap),
             o->prefetch_depth, o->zero, o->hierarchical ? "yes" : "no", (long long)o->batch_threshold,
             o->max_batch, (long long)o->tokens, o->ns_algo < 0 ? "auto" : dm_ns_algo_name((dm_ns_algo)o->ns_algo),
             dm_dtype_name(o->dtype));
    if (o->seq_len) {
        size_t n = strlen(buf);
        if (n < size) snprintf(buf + n, size - n, " seq-len=%lld", (long long)o->seq_len);
    }
    if (o->causal_tile) {
        size_t n = strlen(buf);
        if (n < size && o->causal_tile == DM_ATTN_CAUSAL_TILE) snprintf(buf + n, size - n, " attention=causal");
        else if (n < size) snprintf(buf + n, size - n, " attention=causal:%lld", (long long)o->causal_tile);
    }
    if (!o->layer_passes) {
        size_t n = strlen(buf);
        if (n < size) snprintf(buf + n, size - n, " layer-passes=off");
    }
    if (o->hsdp) {
        size_t n = strlen(buf);
        if (n < size && o->shard > 0) snprintf(buf + n, size - n, " hsdp=%d", o->shard);
        else if (n < size) snprintf(buf + n, size - n, " hsdp=node");
        n = strlen(buf);
        if (n < size && o->hsdp_adamw) snprintf(buf + n, size - n, " hsdp-adamw=%s", sched_hsdp_adamw_name(o->hsdp_adamw));
        n = strlen(buf);
        if (n < size && o->hsdp_muon) snprintf(buf + n, size - n, " hsdp-muon=%s", sched_hsdp_muon_name(o->hsdp_muon));
    }
    if (o->ns_early > 0 || o->ns_stream) {
        size_t n = strlen(buf);
        if (n < size && o->ns_stream) snprintf(buf + n, size - n, " ns-under-backward=stream");
        else if (n < size) snprintf(buf + n, size - n, " ns-under-backward=%d", o->ns_early);
    }
    if (o->ns_split) {
        size_t n = strlen(buf);
        if (n < size && o->ns_split > 0) snprintf(buf + n, size - n, " ns-split=%d", o->ns_split);
        else if (n < size) snprintf(buf + n, size - n, " ns-split=auto");
    }
    if (o->publish) {
        size_t n = strlen(buf);
        if (n < size && o->publish > 0) snprintf(buf + n, size - n, " publish=%d", o->publish);
        else if (n < size) snprintf(buf + n, size - n, " publish=auto");
    }
    if (sched_opts_pytorch_form(o)) {
        size_t n = strlen(buf);
        if (n < size) snprintf(buf + n, size - n, " launch=eager ns-coeffs=%s", SCHED_PYTORCH_NS_COEFFS);
    }
    if (o->comm_weight != 1.0) { /* shown only when changed: the default plans' options stay as they were */
        size_t n = strlen(buf);
        if (n < size) snprintf(buf + n, size - n, " comm-weight=%g", o->comm_weight);
    }
    return buf;
}

double sched_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
