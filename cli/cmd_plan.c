/* cmd_plan.c: `dmuon plan`: build the step program for a model on N GPUs and report the owner
 * assignment (per-rank NS load, imbalance, lower bound, gap, solver), the per-rank peak device
 * memory (core/memory.h) and whether it fits on the cluster's GPU, op counts by kind and the
 * program hash; optionally write the program (--out) or a roofline cost table. */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "csvjson.h"
#include "inputs.h"
#include "json.h"
#include "memory.h"
#include "opts.h"
#include "outfile.h"
#include "plan_best.h"
#include "program.h"
#include "sched.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: dmuon plan --model M --gpus N [options]\n"
            "       dmuon plan --write-roofline FILE [--gpu NAME]\n"
            "Build the step program of one training step: owners, NS batches, collectives.\n"
            "\n"
            "  -m, --model M          bundled model name, model file or HuggingFace config.json\n"
            "                         (required)\n"
            "  -g, --gpus N           ranks (required)\n"
            "  -c, --cluster C        cluster preset or file (default " DM_CLUSTER_DEFAULT ")\n"
            "      --costs FILE       kernel cost table (default: the calibration's, else\n"
            "                         traces/costs/h200.csv, else roofline.csv; $DMUON_COSTS overrides)\n"
            "      --calibration FILE apply a calibration file (dmuon calibrate) to the cluster\n"
            "  -o, --out FILE         write the program as JSON (atomically)\n"
            "      --json             print the report as JSON instead of the table\n"
            "      --csv FILE         per-owner NS load as CSV (owner,ns_load_us,ns_ops; '-' = stdout)\n"
            "      --verbose          MILP solver messages on stderr\n"
            "      --progress         a line on stderr of what the planning does now, even when\n"
            "                         stderr is not a terminal (default: only on a terminal; cleared\n"
            "                         there when done)\n"
            "      --no-progress      no progress line\n"
            "      --write-roofline FILE  write a roofline cost table (dmuon-costs-1) and exit\n"
            "      --gpu NAME         GPU for --write-roofline (default H200)\n"
            "  -h, --help             this help\n"
            "\n");
    sched_getopt_help(f);
}

/* Muon shapes of every bundled model, so the roofline table covers them exactly. */
static int model_shapes(int64_t (**out)[2], int *n)
{
    static const char *names[] = {"qwen2.5-0.5b", "qwen2.5-7b", "qwen2.5-72b", "llama-3.1-8b", "wall-oss-flow",
                                  "deepseek-v3", "kimi-k2", "moonlight-16b-a3b", "pi0", "wan2.1-t2v-14b"};
    int cap = 256, k = 0;
    int64_t(*s)[2] = malloc((size_t)cap * sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        dm_model *m;
        dm_matrix *mats;
        int64_t nm;
        dm_err err;
        if (dm_model_load(names[i], &m, &err)) continue;
        if (dm_model_matrices(m, DM_ROLE_MUON, &mats, &nm, &err) == 0) {
            for (int64_t j = 0; j < nm && k < cap; j++) {
                int dup = 0;
                for (int q = 0; q < k && !dup; q++)
                    dup = (s[q][0] == mats[j].rows && s[q][1] == mats[j].cols) ||
                          (s[q][1] == mats[j].rows && s[q][0] == mats[j].cols);
                if (!dup) {
                    s[k][0] = mats[j].rows;
                    s[k++][1] = mats[j].cols;
                }
            }
            free(mats);
        }
        dm_model_free(m);
    }
    *out = s;
    *n = k;
    return 0;
}

static void print_json_report(FILE *f, const dm_program *p, const sched_report *r, const plan_best_report *pb,
                              const dm_model *model, const dm_cluster *cl, const dm_mem_est *mem, const long *counts,
                              long n_ops, uint64_t hash)
{
    fputs("{\"model\": ", f);
    json_write_string(f, model->name);
    fputs(", \"cluster\": ", f);
    json_write_string(f, cl->name);
    fprintf(f, ", \"nranks\": %d, \"gpus_per_node\": %d, \"strategy\": ", p->nranks, p->gpus_per_node);
    json_write_string(f, p->strategy);
    fputs(", \"options\": ", f);
    json_write_string(f, p->options);
    fputs(", \"costs\": ", f);
    json_write_string(f, r->costs);
    fprintf(f, ", \"hash\": \"%016" PRIx64 "\", \"muon_matrices\": %lld, \"units\": %d,\n", hash, (long long)r->n_muon,
            r->n_units);
    fputs(" \"ns_load_us\": [", f);
    for (int o = 0; o < r->nowners; o++) fprintf(f, "%s%.3f", o ? ", " : "", r->ns_load_us[o]);
    fputs("],\n \"ns_ops\": [", f);
    for (int o = 0; o < r->nowners; o++) fprintf(f, "%s%d", o ? ", " : "", r->ns_ops[o]);
    fprintf(f, "],\n \"max_us\": %.3f, \"mean_us\": %.3f, \"imbalance\": %.6f, \"lower_bound_us\": %.3f, \"gap\": %.6f, \"shape_bound_us\": %.3f,"
               " \"lpt_max_us\": %.3f, \"lpt_gap\": %.6f,\n \"solver_status\": ",
            r->max_us, r->mean_us, r->imbalance, r->lower_bound_us, r->gap, r->shape_bound_us, r->lpt_max_us,
            r->lower_bound_us > 0 && r->lpt_max_us > 0 ? r->lpt_max_us / r->lower_bound_us - 1 : 0);
    json_write_string(f, r->solver_status);
    fputs(", \"method\": ", f);
    json_write_string(f, r->method);
    fprintf(f, ", \"objective_us\": %.3f, \"objective_bound_us\": %.3f, \"comm_us\": %.3f, \"pairs\": %d,", r->objective_us,
            r->objective_bound_us, r->comm_us, r->pairs);
    if (pb->n) { /* --balance auto: the candidates (times left out: they differ run to run) */
        fprintf(f, "\n \"auto\": {\"winner\": \"%s\", \"by_simulation\": %s, \"simulated_after\": %s, \"candidates\": [",
                pb->cand[pb->winner].name, pb->by_sim ? "true" : "false", pb->late_sim ? "true" : "false");
        for (int k = 0; k < pb->n; k++)
            fprintf(f, "%s{\"name\": \"%s\", \"step_us\": %.3f, \"stopped\": %s, \"objective_us\": %.3f, \"pairs\": %d}",
                    k ? ", " : "", pb->cand[k].name, pb->cand[k].simulated ? pb->cand[k].step_us : 0,
                    pb->cand[k].stopped ? "true" : "false", pb->cand[k].objective_us, pb->cand[k].pairs);
        fputs("]},", f);
    }
    long span = 0;
    double net = dm_program_internode_bytes(p, &span);
    fprintf(f, "\n \"solver_s\": %.4f, \"plan_s\": %.4f, \"ops\": %ld, \"collectives\": %d, \"groups\": %d,\n",
            r->solver_s, r->plan_s, n_ops, p->n_colls, p->n_groups);
    fprintf(f, " \"internode_bytes\": %.0f, \"internode_collectives\": %ld,\n", net, span);
    fprintf(f, " \"memory_peak_bytes\": %.0f, \"memory_rank\": %d, \"gpu_memory_bytes\": %.0f, \"memory_fits\": %s,\n",
            mem->total, mem->rank, cl->gpu->mem_bytes, dm_mem_fits(mem, cl->gpu) ? "true" : "false");
    fputs(" \"op_counts\": {", f);
    for (int k = 0; k < DM_OP__COUNT; k++) fprintf(f, "%s\"%s\": %ld", k ? ", " : "", dm_op_kind_name((dm_op_kind)k), counts[k]);
    fputs("}}\n", f);
}

int cmd_plan(int argc, char **argv)
{
    enum { O_COSTS = 1, O_JSON, O_VERBOSE, O_ROOF, O_GPU, O_CSV, O_CALIB, O_PROGRESS, O_NOPROGRESS };
    static const struct option lo[] = {
        {"model", required_argument, NULL, 'm'}, {"gpus", required_argument, NULL, 'g'},
        {"cluster", required_argument, NULL, 'c'}, {"costs", required_argument, NULL, O_COSTS},
        {"out", required_argument, NULL, 'o'}, {"json", no_argument, NULL, O_JSON},
        {"verbose", no_argument, NULL, O_VERBOSE}, {"write-roofline", required_argument, NULL, O_ROOF},
        {"gpu", required_argument, NULL, O_GPU}, {"csv", required_argument, NULL, O_CSV},
        {"calibration", required_argument, NULL, O_CALIB},
        {"progress", no_argument, NULL, O_PROGRESS}, {"no-progress", no_argument, NULL, O_NOPROGRESS},
        {"help", no_argument, NULL, 'h'},
        SCHED_GETOPT_LONG, {NULL, 0, NULL, 0}};
    input_args ia = {NULL, NULL, NULL, NULL, 0, 0};
    const char *out_path = NULL, *roof_path = NULL, *gpu_name = "H200", *csv_path = NULL;
    long nranks = 0;
    int json = 0, c, rc = 1, progress = isatty(2);
    sched_opts so;
    sched_opts_default(&so);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+m:g:c:o:h", lo, NULL)) != -1) {
        int h = sched_getopt_handle(&so, "plan", c, optarg);
        if (h < 0) return 2;
        if (h) continue;
        switch (c) {
        case 'm': ia.model = optarg; break;
        case 'g':
            if (opt_parse_long("plan", "--gpus", optarg, 1, 1 << 20, &nranks)) return 2;
            break;
        case 'c': ia.cluster = optarg; break;
        case 'o': out_path = optarg; break;
        case O_COSTS: ia.costs = optarg; break;
        case O_CALIB: ia.calibration = optarg; break;
        case O_JSON: json = 1; break;
        case O_VERBOSE: so.verbose = 1; break;
        case O_ROOF: roof_path = optarg; break;
        case O_GPU: gpu_name = optarg; break;
        case O_CSV: csv_path = optarg; break;
        case O_PROGRESS: progress = 1; break;
        case O_NOPROGRESS: progress = 0; break;
        case 'h': usage(stdout); return 0;
        default: return opt_getopt_error("plan", c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (opt_no_operands("plan", argc, argv)) return 2;
    dm_err err;
    if (roof_path) {
        const dm_gpu *gpu = dm_gpu_find(gpu_name);
        if (!gpu) {
            fprintf(stderr, "dmuon plan: --gpu: unknown GPU '%s' (A800, H100, H200)\n", gpu_name);
            return 2;
        }
        int64_t(*shapes)[2] = NULL;
        int ns = 0;
        model_shapes(&shapes, &ns);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "dmuon plan --write-roofline %s --gpu %s", roof_path, gpu_name);
        int w = dm_costs_write_roofline(roof_path, gpu, (const int64_t(*)[2])shapes, ns, cmd, &err);
        free(shapes);
        if (w) {
            fprintf(stderr, "dmuon plan: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    if (!ia.model || nranks < 1) {
        opt_usage_error("plan", "--model and --gpus are required");
        return 2;
    }
    if (json && csv_path && !strcmp(csv_path, "-")) { /* stdout holds the one JSON document */
        opt_usage_error("plan", "--csv - and --json both write to stdout: give --csv a file");
        return 2;
    }
    if ((out_path && strcmp(out_path, "-") && dm_out_check(out_path, &err)) || dm_out_check(csv_path, &err)) {
        fprintf(stderr, "dmuon plan: %s\n", err.msg);
        return 1;
    }
    inputs in;
    dm_program *prog = NULL;
    sched_report rep;
    memset(&rep, 0, sizeof rep);
    ia.gpus_per_node = so.gpus_per_node;
    if (inputs_resolve("plan", &ia, &in)) goto done;
    const dm_model *model = in.model;
    const dm_cluster cl = in.cluster;
    const dm_costs *costs = in.costs;
    plan_best_report pb; /* --balance auto simulates the candidates */
    plan_progress pp = {progress ? stderr : NULL, "plan", sched_wall_s(), 0};
    plan_best_opts bpo;
    plan_best_opts_default(&bpo);
    bpo.progress = &pp;
    int prc = plan_best_build(model, &cl, (int)nranks, costs, &so, NULL, &bpo, &prog, &rep, &pb, &err);
    plan_progress_end(&pp);
    if (prc || dm_program_validate(prog, &err)) {
        fprintf(stderr, "dmuon plan: %s\n", err.msg);
        goto done;
    }
    dm_mem_est mem; /* before anything is written: a failure leaves no file (the planning's own
                       estimate of the program where it made one) */
    if (sched_report_mem(&rep, model, prog, &mem, &err)) {
        fprintf(stderr, "dmuon plan: %s\n", err.msg);
        goto done;
    }
    if (out_path && dm_program_save(prog, out_path, &err)) {
        fprintf(stderr, "dmuon plan: %s\n", err.msg);
        goto done;
    }
    if (csv_path) {
        dm_out *o = dm_out_open(csv_path, &err);
        if (!o) {
            fprintf(stderr, "dmuon plan: %s\n", err.msg);
            goto done;
        }
        FILE *f = dm_out_file(o);
        dm_csv_case(f, "dmuon-plan-1", model->name, prog->cluster, prog->strategy, prog->nranks);
        fprintf(f, "\n# options: %s\n# costs: %s\n", prog->options, rep.costs);
        fprintf(f, "owner,ns_load_us,ns_ops\n");
        for (int w = 0; w < rep.nowners; w++) fprintf(f, "%d,%.3f,%d\n", w, rep.ns_load_us[w], rep.ns_ops[w]);
        if (dm_out_commit(o, &err)) {
            fprintf(stderr, "dmuon plan: %s\n", err.msg);
            goto done;
        }
    }
    long counts[DM_OP__COUNT] = {0}, last[DM_OP__COUNT] = {0}, n_ops = 0;
    for (int r = 0; r < prog->nranks; r++)
        if (dm_rank_same_list_as_prev(prog, r))
            for (int k = 0; k < DM_OP__COUNT; k++) counts[k] += last[k]; /* the same list as the rank before */
        else {
            memset(last, 0, sizeof last);
            for (int i = 0; i < prog->ranks[r].n_ops; i++) last[prog->ranks[r].ops[i].kind]++;
            for (int k = 0; k < DM_OP__COUNT; k++) counts[k] += last[k];
        }
    for (int k = 0; k < DM_OP__COUNT; k++) n_ops += counts[k];
    uint64_t hash = dm_program_hash(prog);
    if (json) {
        print_json_report(stdout, prog, &rep, &pb, model, &cl, &mem, counts, n_ops, hash);
    } else {
        int nodes = (prog->nranks + prog->gpus_per_node - 1) / prog->gpus_per_node;
        printf("model     %s: %lld Muon matrices, %lld parameters\n", model->name, (long long)rep.n_muon,
               (long long)dm_model_params(model));
        printf("cluster   %s: %s, %d rank%s (%d node%s x %d GPU%s)\n", cl.name, cl.gpu->short_name, prog->nranks,
               prog->nranks == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s", prog->gpus_per_node,
               prog->gpus_per_node == 1 ? "" : "s");
        printf("options   %s\n", prog->options);
        printf("costs     %s%s%s\n", rep.costs, dm_costs_gpu(costs) != cl.gpu ? "; projected to " : "",
               dm_costs_gpu(costs) != cl.gpu ? cl.gpu->short_name : "");
        if (in.calib.describe[0]) printf("calib     %s\n", in.calib.describe);
        printf("cost src  %d measured, %d interpolated, %d projected, %d roofline (NS shape x batch queries)\n",
               rep.cost_src_counts[0], rep.cost_src_counts[1], rep.cost_src_counts[2], rep.cost_src_counts[3]);
        /* milliseconds, as sim and scale report (the CSV and --json keep microseconds, named so) */
        printf("# %-6s %12s %7s\n", "owner", "ns_load_ms", "ns_ops");
        for (int o = 0; o < rep.nowners; o++) printf("  %-6d %12.3f %7d\n", o, rep.ns_load_us[o] / 1e3, rep.ns_ops[o]);
        printf("NS load   max %.3f ms, mean %.3f ms, imbalance %.2f%%\n", rep.max_us / 1e3, rep.mean_us / 1e3,
               100 * fmax(0, rep.imbalance));
        char mline[512];
        printf("memory    %s\n", dm_mem_describe(&mem, cl.gpu, mline, sizeof mline));
        printf("bound     lower bound %.3f ms (max(total/owners, largest unit)), gap %.2f%%", rep.lower_bound_us / 1e3,
               100 * rep.gap);
        if (rep.lpt_max_us > 0 && rep.lower_bound_us > 0)
            printf(", LPT gap %.2f%%", 100 * (rep.lpt_max_us / rep.lower_bound_us - 1));
        if (rep.shape_bound_us > rep.lower_bound_us * (1 + 1e-6))
            printf("\n          two-shape bound %.3f ms (exact optimum of the two costliest shapes alone), gap %.2f%%",
                   rep.shape_bound_us / 1e3, 100 * (rep.max_us / rep.shape_bound_us - 1));
        printf("\nsolver    %s, %d units, assignment %.3f s, plan %.3f s\n", rep.solver_status, rep.n_units, rep.solver_s,
               rep.plan_s);
        char ob[512];
        if (rep.method[0]) printf("objective %s\n", sched_report_objective(&rep, ob, sizeof ob) + 10);
        plan_best_print(stdout, &pb);
        if (pb.n) printf("balance   %s\n", plan_best_describe(&pb, ob, sizeof ob));
        printf("program   %ld ops, %d collectives, %d groups, hash %016" PRIx64 "%s%s\n", n_ops, prog->n_colls,
               prog->n_groups, hash, out_path ? ", written to " : "", out_path ? out_path : "");
        long span = 0;
        double net = dm_program_internode_bytes(prog, &span);
        if (prog->nranks > prog->gpus_per_node && prog->gpus_per_node > 0)
            printf("network   %.3f GB per step across node boundaries (NCCL rings), %ld collectives span nodes\n",
                   net / 1e9, span);
        if (so.hsdp && prog->nranks > (so.shard > 0 ? so.shard : prog->gpus_per_node))
            printf("hsdp      AdamW parameters of %d layer%s sharded over all ranks, the others' in the shard groups "
                   "(--hsdp-adamw %s)\n", rep.hsdp_adamw_world, rep.hsdp_adamw_world == 1 ? "" : "s",
                   sched_hsdp_adamw_name(so.hsdp_adamw));
        printf("# %-14s %9s\n", "op", "count");
        for (int k = 0; k < DM_OP__COUNT; k++)
            if (counts[k]) printf("  %-14s %9ld\n", dm_op_kind_name((dm_op_kind)k), counts[k]);
    }
    rc = 0;
done:
    sched_report_free(&rep);
    dm_program_free(prog);
    inputs_free(&in);
    return rc;
}
