/* test_costs.c: the cost model: reading tables (and their positioned errors), exact lookups,
 * interpolation between measured shapes, the roofline fallback, projection to another GPU,
 * elementwise ops, the algorithm choice, the shipped roofline table, and the workload kernels'
 * rows (dmuon-costs-2: gemm, bgemm, elem) with known answers for interpolation between and
 * beyond measured shapes. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costs.h"
#include "model.h"
#include "tap.h"
#include "workload.h"

static char dir[] = "/tmp/dmuon_test_costs_XXXXXX";

static const char *write_file(const char *name, const char *text)
{
    static char path[4][512];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return p;
}

/* The head of a measured H200 table in format 1 or 2 (its header without or with k). */
static size_t table_head(char *buf, size_t size, int version)
{
    return (size_t)snprintf(buf, size, "# dmuon-costs-%d\n# source: measured\n# gpu: NVIDIA H200\n%s\n", version,
                            version == 1 ? "gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us"
                                         : "gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us");
}

/* A "measured" H200 table: NS rows at efficiency 2 (twice the roofline) on a grid, gram rows
 * `gram_factor` times their roofline; elementwise rows at efficiency 1.5. */
static const char *measured_table(const char *name, double gram_factor)
{
    const dm_gpu *h = dm_gpu_find("H200");
    static char buf[1 << 16];
    size_t n = table_head(buf, sizeof buf, 1);
    static const int64_t dims[] = {512, 1024, 2048, 4096};
    static const int batches[] = {1, 4};
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 4; i++)
            for (int j = i; j < 4; j++)
                for (int b = 0; b < 2; b++) {
                    double us = dm_roofline_ns_us(h, dims[i], dims[j], batches[b], (dm_ns_algo)a) * (a ? gram_factor : 2.0);
                    n += snprintf(buf + n, sizeof buf - n, "NVIDIA H200,ns,%s,%lld,%lld,%d,bf16,%.6f,%.6f,%.6f\n",
                                  a ? "gram" : "direct", (long long)dims[i], (long long)dims[j], batches[b], us, us, us);
                }
    for (int e = 20; e <= 24; e += 4) {
        double us = dm_roofline_elementwise_us(h, "adamw", INT64_C(1) << e) * 1.5;
        n += snprintf(buf + n, sizeof buf - n, "NVIDIA H200,adamw,-,1,%lld,1,fp32,%.6f,%.6f,%.6f\n",
                      (long long)(INT64_C(1) << e), us, us, us);
    }
    return write_file(name, buf);
}

static void expect_error(const char *name, const char *text, const char *want)
{
    dm_costs *c = NULL;
    dm_err err = {{0}};
    const char *p = write_file(name, text);
    int rc = dm_costs_load(p, &c, &err);
    ok(rc == -1 && c == NULL && strstr(err.msg, want) != NULL, "bad table %s: \"%s\" (got: %s)", name, want, err.msg);
    dm_costs_free(c);
}

static dm_kernel kern(dm_kern_kind kind, dm_kern_op op, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    dm_kernel x;
    memset(&x, 0, sizeof x);
    x.kind = kind;
    x.op = op;
    x.m = m, x.n = n, x.k = k;
    x.batch = batch;
    x.count = 1;
    x.param = -1;
    x.slot = -1;
    return x;
}

/* A kernel row (gemm or elem, batch 1) of kernel op `op` at (m, nn, k) taking `ratio` times its
 * H200 roofline, appended to buf at n; returns the new length. */
static size_t kern_row(char *buf, size_t size, size_t n, dm_kern_kind kind, dm_kern_op op, int64_t m, int64_t nn,
                       int64_t k, double ratio)
{
    dm_kernel x = kern(kind, op, m, nn, k, 1);
    double us = dm_roofline_kernel_us(dm_gpu_find("H200"), &x) * ratio;
    return n + (size_t)snprintf(buf + n, size - n, "NVIDIA H200,%s,%s,%lld,%lld,%lld,1,bf16,%.9g,%.9g,%.9g\n",
                                dm_kern_kind_name(kind), dm_kern_op_name(op), (long long)m, (long long)nn, (long long)k,
                                us, us, us);
}

static size_t gemm_row(char *buf, size_t size, size_t n, dm_kern_op op, int64_t m, int64_t nn, int64_t k, double ratio)
{
    return kern_row(buf, size, n, DM_KERN_GEMM, op, m, nn, k, ratio);
}

/* gemm fwd rows on the grid m, n, k in {1024, 2048, 4096} at `ratio` times their roofline. */
static size_t fwd_grid(char *buf, size_t size, size_t n, double ratio)
{
    static const int64_t g[] = {1024, 2048, 4096};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int l = 0; l < 3; l++) n = gemm_row(buf, size, n, DM_KOP_FWD, g[i], g[j], g[l], ratio);
    return n;
}

/* A dmuon-costs-2 table: gemm fwd rows on a grid m, n, k in {1024, 2048, 4096} at `ratio` times
 * their roofline; two dgrad rows (m 1024 at 2x, m 4096 at 4x); a bgemm attention row, an elem
 * loss row, one NS row. */
static const char *kernel_table(const char *name, double ratio)
{
    static char buf[1 << 16];
    size_t n = fwd_grid(buf, sizeof buf, table_head(buf, sizeof buf, 2), ratio);
    for (int i = 0; i < 2; i++) n = gemm_row(buf, sizeof buf, n, DM_KOP_DGRAD, i ? 4096 : 1024, 2048, 2048, i ? 4 : 2);
    n += snprintf(buf + n, sizeof buf - n, "NVIDIA H200,bgemm,attn-score,4096,4096,128,32,bf16,900,890,910\n"
                                           "NVIDIA H200,elem,loss,4096,3072,0,1,bf16,12.5,12,13\n"
                                           "NVIDIA H200,ns,direct,1024,1024,0,1,bf16,100,99,101\n");
    return write_file(name, buf);
}

static void test_kernel_rows(void)
{
    dm_err err = {{0}};
    const dm_gpu *h200 = dm_gpu_find("H200"), *a800 = dm_gpu_find("A800");
    dm_costs *c = NULL;
    dm_cost_source s;
    ok(dm_costs_load(kernel_table("k.csv", 1.6), &c, &err) == 0, "dmuon-costs-2 table with kernel rows loads (%s)",
       c ? "ok" : err.msg);
    if (!c) return;
    ok(dm_costs_kernel_rows(c, DM_KERN_GEMM, DM_KOP_FWD) == 27 && dm_costs_kernel_rows(c, DM_KERN_GEMM, DM_KOP_DGRAD) == 2 &&
           dm_costs_kernel_rows(c, DM_KERN_GEMM, DM_KOP_WGRAD) == 0 &&
           dm_costs_kernel_rows(c, DM_KERN_BGEMM, DM_KOP_ATTN_SCORE) == 1 &&
           dm_costs_kernel_rows(c, DM_KERN_ELEM, DM_KOP_LOSS) == 1,
       "rows counted per kernel op (27 fwd, 2 dgrad, 0 wgrad, 1 attn-score, 1 loss)");
    dm_kernel x = kern(DM_KERN_GEMM, DM_KOP_FWD, 2048, 4096, 1024, 1);
    double roof = dm_roofline_kernel_us(h200, &x);
    ok_near(roof, fmax(2.0 * 2048 * 4096 * 1024 / h200->bf16_flops, (2048.0 * 1024 + 1024.0 * 4096 + 2048.0 * 4096) * 2 /
                                                                         h200->hbm_Bps) * 1e6 + h200->launch_us,
            1e-9, "GEMM roofline: 2 m n k at the bf16 peak or three bf16 operands at HBM, plus the launch floor");
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * roof, 1e-6, "exact gemm fwd row");
    ok(s == DM_COST_MEASURED, "  ... is measured");
    x.count = 3;
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 3 * 1.6 * roof, 1e-6, "count 3: three launches of the row");
    /* between measured shapes, at a constant efficiency: the known answer exactly */
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 3000, 1500, 2500, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * dm_roofline_kernel_us(h200, &x), 1e-6,
            "between measured shapes: the rows' constant efficiency times the roofline");
    ok(s == DM_COST_INTERPOLATED, "  ... is interpolated (%s)", dm_cost_source_name(s));
    /* beyond them (4x past the grid in m, within 3 log2 units): the same efficiency, not a cliff */
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 16384, 4096, 4096, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * dm_roofline_kernel_us(h200, &x), 1e-6,
            "beyond the measured shapes (m 4x past them): the neighbours' efficiency");
    ok(s == DM_COST_INTERPOLATED, "  ... is interpolated");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 64, 64, 64, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * dm_roofline_kernel_us(h200, &x), 1e-6,
            "far from every row (16x in each dimension): the nearest row's efficiency, not the tensor cores' peak");
    ok(s == DM_COST_ROOFLINE, "  ... is reported as the roofline (an extrapolation)");
    /* an expert batch (batched fwd) without expert rows: `batch` GEMMs of its shape, priced by the
     * GEMM rows' efficiency */
    x = kern(DM_KERN_BGEMM, DM_KOP_FWD, 2048, 4096, 1024, 8);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * dm_roofline_kernel_us(h200, &x), 1e-6,
            "an expert batch without expert rows: the GEMM row of its shape's efficiency");
    ok(s == DM_COST_INTERPOLATED, "  ... is interpolated (%s)", dm_cost_source_name(s));
    x = kern(DM_KERN_BGEMM, DM_KOP_ATTN_DKEY, 2048, 128, 2048, 8);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), dm_roofline_kernel_us(h200, &x), 1e-9,
            "an attention product without rows of its op: the roofline (GEMM rows are not its kind)");
    /* two rows of different efficiency (2x and 4x), the query equidistant in log space: the
     * geometric mean (inverse-distance weights in log-efficiency) */
    x = kern(DM_KERN_GEMM, DM_KOP_DGRAD, 2048, 2048, 2048, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), sqrt(8.0) * dm_roofline_kernel_us(h200, &x), 1e-6,
            "halfway between a 2x and a 4x row: sqrt(8) x the roofline");
    x = kern(DM_KERN_GEMM, DM_KOP_DGRAD, 1500, 2048, 2048, 1);
    double e = dm_costs_kernel_us(c, NULL, &x, &s) / dm_roofline_kernel_us(h200, &x);
    ok(e > 2 && e < sqrt(8.0), "nearer the 2x row: between 2 and sqrt(8) (%.4f)", e);
    x = kern(DM_KERN_GEMM, DM_KOP_DGRAD, 8192, 2048, 2048, 1);
    e = dm_costs_kernel_us(c, NULL, &x, &s) / dm_roofline_kernel_us(h200, &x);
    ok(e > sqrt(8.0) && e < 4, "past the 4x row: between sqrt(8) and 4, never beyond its neighbours (%.4f)", e);
    x = kern(DM_KERN_GEMM, DM_KOP_WGRAD, 2048, 2048, 2048, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), dm_roofline_kernel_us(h200, &x), 1e-9,
            "an op without rows (wgrad): the roofline");
    ok(s == DM_COST_ROOFLINE, "  ... is roofline");
    /* projection */
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 2048, 4096, 1024, 1);
    double sm800 = (132.0 * 1980) / (108.0 * 1410), tc800 = h200->bf16_flops / a800->bf16_flops, body = 1.6 * roof - 4;
    double pa = dm_costs_kernel_us(c, a800, &x, &s);
    ok(pa > 4 + body * sm800 && pa < 4 + body * tc800,
       "on an A800: the H200 row's time above the floor scaled between the SM and the tensor ratios (test_projection)");
    ok(s == DM_COST_PROJECTED, "  ... is projected");
    /* the other row kinds */
    x = kern(DM_KERN_BGEMM, DM_KOP_ATTN_SCORE, 4096, 4096, 128, 32);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 900, 1e-9, "bgemm attn-score row: one batched call");
    ok(s == DM_COST_MEASURED, "  ... measured");
    dm_kernel x32 = x;
    x = kern(DM_KERN_BGEMM, DM_KOP_ATTN_SCORE, 4096, 4096, 128, 64);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 900 / dm_roofline_kernel_us(h200, &x32) * dm_roofline_kernel_us(h200, &x),
            1e-6, "twice the batch: its one row's efficiency");
    x = kern(DM_KERN_ELEM, DM_KOP_LOSS, 4096, 3072, 0, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 12.5, 1e-9, "elem loss row");
    ok_near(dm_roofline_kernel_us(h200, &x), 2.0 * 4096 * 3072 * 2 / h200->hbm_Bps * 1e6 + h200->launch_us, 1e-9,
            "elem loss roofline: two bf16 passes over m x n at HBM, plus the launch floor");
    ok_near(dm_costs_ns_us(c, NULL, 1024, 1024, 1, DM_NS_DIRECT, &s), 100, 1e-9, "an ns row of a dmuon-costs-2 table");
    dm_costs_free(c);
    c = NULL;
    /* a roofline-source table answers every kernel by the roofline */
    ok(dm_costs_load(kernel_table("kr.csv", 1.6), &c, &err) == 0, "load again");
    dm_costs_free(c);
    c = dm_costs_roofline(a800, &err);
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 2048, 4096, 1024, 1);
    ok(c && dm_costs_kernel_us(c, NULL, &x, &s) == dm_roofline_kernel_us(a800, &x) && s == DM_COST_ROOFLINE &&
           dm_costs_kernel_rows(c, DM_KERN_GEMM, DM_KOP_FWD) == 0,
       "a table-less model: roofline answers, no rows");
    dm_costs_free(c);

    /* dmuon-costs-1 files still read (k = 0); kernel product rows need the k column */
    char h1[256], h2[256], t[1024];
    table_head(h1, sizeof h1, 1);
    table_head(h2, sizeof h2, 2);
    snprintf(t, sizeof t, "%sNVIDIA H200,elem,loss,4096,3072,1,bf16,12.5,12,13\n", h1);
    c = NULL;
    ok(dm_costs_load(write_file("v1.csv", t), &c, &err) == 0, "a dmuon-costs-1 elem row reads with k = 0 (%s)",
       c ? "ok" : err.msg);
    x = kern(DM_KERN_ELEM, DM_KOP_LOSS, 4096, 3072, 0, 1);
    ok(c && dm_costs_kernel_us(c, NULL, &x, &s) == 12.5 && s == DM_COST_MEASURED, "  ... and answers exactly");
    dm_costs_free(c);
    static const struct {
        int version;
        const char *name, *rows, *want;
    } bad_rows[] = {
        {1, "v1gemm.csv", "NVIDIA H200,gemm,fwd,4096,3072,1,bf16,1,1,1\n",
         "v1gemm.csv:5:13: expected a dmuon-costs-2 table for a gemm fwd row (it needs k)"},
        {2, "k0.csv", "NVIDIA H200,gemm,fwd,4096,3072,0,1,bf16,1,1,1\n", "k0.csv:5:32: expected k, a positive integer"},
        {2, "b2.csv", "NVIDIA H200,gemm,fwd,4096,3072,64,2,bf16,1,1,1\n", "b2.csv:5:35: expected batch, 1 for a gemm or elem row"},
        {2, "ga.csv", "NVIDIA H200,gemm,attn-score,4096,3072,64,1,bf16,1,1,1\n",
         "ga.csv:5:18: expected algo cublas, fwd, dgrad or wgrad for a gemm row, found 'attn-score'"},
        {2, "ef.csv", "NVIDIA H200,elem,fwd,4096,3072,0,1,bf16,1,1,1\n", "ef.csv:5:18: expected algo loss, vector,"},
        {2, "nsk.csv", "NVIDIA H200,ns,direct,64,128,5,1,bf16,1,1,1\n", "nsk.csv:5:30: expected k, 0 for this op"},
        {2, "dup2.csv", "NVIDIA H200,bgemm,fwd,64,128,5,8,bf16,1,1,1\nNVIDIA H200,bgemm,fwd,64,128,5,8,bf16,2,2,2\n",
         "dup2.csv:6:1: duplicate row: bgemm fwd 64 x 128 x 5 batch 8 is already on line 5"},
        {2, "short2.csv", "NVIDIA H200,ns,direct,64,128,1,bf16,1,1,1\n", "short2.csv:5:1: expected 11 comma-separated fields, found 10"},
    };
    for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
        snprintf(t, sizeof t, "%s%s", bad_rows[i].version == 1 ? h1 : h2, bad_rows[i].rows);
        expect_error(bad_rows[i].name, t, bad_rows[i].want);
    }

    /* joined tables: the NS table beside a work table, one GPU and source */
    snprintf(t, sizeof t, "%sNVIDIA H200,ns,direct,1024,1024,1,bf16,100,99,101\n", h1);
    const char *ns = write_file("ns_only.csv", t);
    char joined[1200];
    snprintf(joined, sizeof joined, "%s,%s/k.csv", ns, dir);
    c = NULL;
    ok(dm_costs_load(joined, &c, &err) == -1 && strstr(err.msg, "k.csv:") && strstr(err.msg, "duplicate row: ns direct 1024 x "
                                                                                              "1024 x 0 batch 1 is already on ")
           && strstr(err.msg, "ns_only.csv line 5"),
       "a row in two joined tables is refused, naming both (%s)", err.msg);
    snprintf(t, sizeof t, "%sNVIDIA H200,gemm,fwd,4096,3072,3072,1,bf16,95,94,97\n", h2);
    const char *work = write_file("h200-work.csv", t);
    snprintf(joined, sizeof joined, "%s,%s", ns, work);
    ok(dm_costs_load(joined, &c, &err) == 0 && dm_costs_kernel_rows(c, DM_KERN_GEMM, DM_KOP_FWD) == 1 &&
           dm_costs_ns_us(c, NULL, 1024, 1024, 1, DM_NS_DIRECT, NULL) == 100,
       "two tables joined: the NS row and the gemm row (%s)", c ? dm_costs_describe(c) : err.msg);
    dm_costs_free(c);
    c = NULL;
    const char *a8 = write_file("a800.csv", "# dmuon-costs-2\n# source: measured\n# gpu: NVIDIA A800-SXM4-80GB\n"
                                            "gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us\n");
    snprintf(joined, sizeof joined, "%s,%s", ns, a8);
    ok(dm_costs_load(joined, &c, &err) == -1 && strstr(err.msg, "a800.csv:1:1: expected a table of the first one's GPU and "
                                                                "source (NVIDIA H200, measured)"),
       "a table of another GPU does not join (%s)", err.msg);
    /* the default: h200.csv joined with h200-work.csv beside it */
    char ddir[600], sh[4096];
    snprintf(ddir, sizeof ddir, "%s/defaults", dir);
    snprintf(sh, sizeof sh, "mkdir -p %s && cp %s %s/h200.csv && cp %s %s/h200-work.csv", ddir, ns, ddir, work, ddir);
    ok(system(sh) == 0, "a costs folder with h200.csv and h200-work.csv");
    setenv("DMUON_COSTS", ddir, 1);
    c = NULL;
    ok(dm_costs_load_default(&c, &err) == 0 && dm_costs_kernel_rows(c, DM_KERN_GEMM, DM_KOP_FWD) == 1 &&
           strstr(dm_costs_describe(c), "h200-work.csv"),
       "the default table joins h200-work.csv (%s)", c ? dm_costs_describe(c) : err.msg);
    unsetenv("DMUON_COSTS");
    dm_costs_free(c);

    /* the roofline's elementwise bytes are the workload's: every elementwise kernel of a few
     * bundled models' layers, one launch (embed-bwd's zeroed table is in its bytes, not its k) */
    static const char *models[] = {"qwen2.5-0.5b", "llama-3.2-3b", "moonlight-16b-a3b", "wall-oss-flow"};
    int checked = 0, bad = 0;
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        dm_model *m = NULL;
        dm_matrix *mats = NULL;
        int64_t nm = 0;
        if (dm_model_load(models[mi], &m, &err) || dm_model_matrices(m, -1, &mats, &nm, &err)) {
            ok(0, "%s loads (%s)", models[mi], err.msg);
            dm_model_free(m);
            continue;
        }
        dm_workload_opts o = {4096, 0, 2, 0, 0};
        for (int l = 0; l < m->n_layers; l++) {
            dm_layer_work w;
            if (dm_layer_work_build(m, mats, nm, l, &o, &w, &err)) break;
            for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < (pass ? w.n_bwd : w.n_fwd); i++) {
                    const dm_kernel *k = pass ? &w.bwd[i] : &w.fwd[i];
                    if (k->kind != DM_KERN_ELEM || k->op == DM_KOP_EMBED_BWD) continue;
                    double want = k->bytes / (double)k->count, got = dm_elem_launch_bytes(k->op, k->m, k->n, k->k, 2);
                    checked++;
                    if (fabs(got - want) > 1e-9 * want) {
                        if (!bad) tap_diag("%s layer %d %s: %.0f bytes, the workload says %.0f", models[mi], l,
                                           dm_kern_op_name(k->op), got, want);
                        bad++;
                    }
                }
            dm_layer_work_free(&w);
        }
        free(mats);
        dm_model_free(m);
    }
    ok(checked > 100 && !bad, "elementwise roofline bytes equal the workload's on %d kernels (%d differ)", checked, bad);
}

/* NS rows of the PyTorch forms (direct-eager): looked up apart from the graph rows; without
 * them the graph's time with a launch floor per kernel; and the NS op's gradient check and
 * momentum (dm_ns_prep_us) by its formula. */
/* Alignment classes: the aligned fwd grid at 1.6x its roofline, plus odd fwd rows (a weight
 * dimension not a multiple of 8: 4095, 50257) at 8x and one with both weight dimensions odd at 4x.
 * An odd query near the odd rows is priced by them alone; an aligned query never by them; an odd
 * query with no odd row near (NEAR_LOG2) by the aligned rows, as before the classes were told
 * apart; a dimension aligned to 4 (not 8) is its own class, two odd dimensions another; the token
 * dimension does not count. */
static void test_alignment_classes(void)
{
    const dm_gpu *h = dm_gpu_find("H200");
    static char buf[1 << 16];
    size_t n = fwd_grid(buf, sizeof buf, table_head(buf, sizeof buf, 2), 1.6);
    static const int64_t odd[][3] = {{2048, 4095, 4096}, {4096, 50257, 4096}, {2048, 50257, 4096}};
    for (int i = 0; i < 3; i++) n = gemm_row(buf, sizeof buf, n, DM_KOP_FWD, odd[i][0], odd[i][1], odd[i][2], 8);
    n = gemm_row(buf, sizeof buf, n, DM_KOP_FWD, 4096, 50257, 4095, 4); /* two odd weight dimensions */
    dm_err err = {{0}};
    dm_costs *c = NULL;
    dm_cost_source s;
    ok(dm_costs_load(write_file("align.csv", buf), &c, &err) == 0, "a table with aligned and odd GEMM rows loads (%s)",
       c ? "ok" : err.msg);
    if (!c) return;
    dm_kernel x = kern(DM_KERN_GEMM, DM_KOP_FWD, 4096, 49155, 4096, 1); /* a vocabulary of 49155 */
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 8 * dm_roofline_kernel_us(h, &x), 1e-6,
            "an odd dimension (49155) near odd rows: their efficiency (8x), not the aligned rows' (1.6x)");
    ok(s == DM_COST_INTERPOLATED, "  ... interpolated (%s)", dm_cost_source_name(s));
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 4096, 4096, 2048, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * dm_roofline_kernel_us(h, &x), 1e-6,
            "an aligned query beside the odd rows: the aligned rows alone");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 512, 511, 512, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * dm_roofline_kernel_us(h, &x), 1e-6,
            "an odd query with no odd row within 3 log2 units (512 x 511 x 512): the aligned rows");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 4096, 50260, 4096, 1); /* aligned to 4 elements: no row of its class */
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * dm_roofline_kernel_us(h, &x), 1e-6,
            "a dimension aligned to 4 (50260) is not priced by the odd rows: no row of its class, the aligned ones");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 4096, 49155, 4095, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 4 * dm_roofline_kernel_us(h, &x), 1e-6,
            "two odd weight dimensions: the row with two (4x), not those with one (8x)");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 4095, 4096, 2048, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 1.6 * dm_roofline_kernel_us(h, &x), 1e-6,
            "an odd token count (fwd's m: no operand's leading dimension) is aligned");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 4096, 50257, 4096, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, &s), 8 * dm_roofline_kernel_us(h, &x), 1e-6, "an odd row's own shape: exact");
    ok(s == DM_COST_MEASURED, "  ... measured");
    dm_costs_free(c);
}

/* An unaligned GEMM with no row of its class near: the aligned price times the class's measured
 * ratio (set_class_ratios). Aligned fwd grid at 1.6x, one odd fwd row (4096 x 8191 x 4096) at
 * 8x: class 1's ratio 5. A compute-bound odd query far from it (1024 x 1021 x 4096) takes 8x its
 * roofline; a launch-bound one (32 x 1021 x 64) its aligned price; a class without rows of its own
 * (aligned to 4: 1024 x 1020 x 4096) nor of its group (2, 4, 18, 20) its aligned price. */
static void test_class_ratio(void)
{
    const dm_gpu *h = dm_gpu_find("H200");
    static char buf[1 << 16];
    size_t n = fwd_grid(buf, sizeof buf, table_head(buf, sizeof buf, 2), 1.6);
    n = gemm_row(buf, sizeof buf, n, DM_KOP_FWD, 4096, 8191, 4096, 8);
    dm_err err = {{0}};
    dm_costs *c = NULL;
    ok(dm_costs_load(write_file("ratio.csv", buf), &c, &err) == 0, "a table with one odd GEMM row loads (%s)",
       c ? "ok" : err.msg);
    if (!c) return;
    dm_kernel x = kern(DM_KERN_GEMM, DM_KOP_FWD, 1024, 1021, 4096, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, NULL), 8 * dm_roofline_kernel_us(h, &x), 1e-6,
            "an odd GEMM far from the odd row: the aligned price times class 1's measured ratio (5)");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 32, 1021, 64, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, NULL), 1.6 * dm_roofline_kernel_us(h, &x), 1e-6,
            "a launch-bound odd GEMM: the aligned price");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 1024, 1020, 4096, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, NULL), 1.6 * dm_roofline_kernel_us(h, &x), 1e-6,
            "a class with no rows of its own or its group (aligned to 4): the aligned price");
    x = kern(DM_KERN_GEMM, DM_KOP_DGRAD, 1024, 4096, 1021, 1);
    ok(dm_costs_kernel_us(c, NULL, &x, NULL) > 0, "a pass without unaligned rows (dgrad) is priced");
    dm_costs_free(c);
}

/* Elementwise alignment classes: aligned loss rows (m 1024..16384 x n 1024..8192) at 1.5x their
 * roofline, one 3420-wide row (the executor's scalar path) at 3x. An aligned query beside it takes
 * the aligned rows alone; an unaligned one near it its row; an unaligned one far from it the aligned
 * price times the measured ratio (2); a small unaligned pass (under 1 us of bytes) its aligned price. */
static void test_elem_alignment(void)
{
    const dm_gpu *h = dm_gpu_find("H200");
    static char buf[1 << 16];
    size_t n = table_head(buf, sizeof buf, 2);
    for (int64_t m = 1024; m <= 16384; m *= 2)
        for (int64_t w = 1024; w <= 8192; w *= 2) n = kern_row(buf, sizeof buf, n, DM_KERN_ELEM, DM_KOP_LOSS, m, w, 0, 1.5);
    n = kern_row(buf, sizeof buf, n, DM_KERN_ELEM, DM_KOP_LOSS, 1024, 3420, 0, 3);
    dm_kernel x;
    dm_err err = {{0}};
    dm_costs *c = NULL;
    ok(dm_costs_load(write_file("elem_align.csv", buf), &c, &err) == 0, "a table with aligned and 3420-wide loss rows loads (%s)",
       c ? "ok" : err.msg);
    if (!c) return;
    x = kern(DM_KERN_ELEM, DM_KOP_LOSS, 1024, 3584, 0, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, NULL), 1.5 * dm_roofline_kernel_us(h, &x), 1e-6,
            "an aligned pass beside the 3420-wide row (1024 x 3584): the aligned rows alone");
    x = kern(DM_KERN_ELEM, DM_KOP_LOSS, 2048, 3420, 0, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, NULL), 3 * dm_roofline_kernel_us(h, &x), 1e-6,
            "an unaligned pass near the 3420-wide row: that row's efficiency");
    x = kern(DM_KERN_ELEM, DM_KOP_LOSS, 16384, 100, 0, 1);
    dm_kernel y = kern(DM_KERN_ELEM, DM_KOP_LOSS, 16384, 104, 0, 1);
    ok_near(dm_costs_kernel_us(c, NULL, &x, NULL), 2 * dm_costs_kernel_us(c, NULL, &y, NULL) * 100 / 104, 0.05,
            "an unaligned pass far from it (16384 x 100): the aligned price times the measured ratio (2)");
    x = kern(DM_KERN_ELEM, DM_KOP_LOSS, 32, 100, 0, 1);
    y = kern(DM_KERN_ELEM, DM_KOP_LOSS, 32, 104, 0, 1);
    ok(dm_costs_kernel_us(c, NULL, &x, NULL) < 1.2 * dm_costs_kernel_us(c, NULL, &y, NULL),
       "a small unaligned pass (32 x 100, under 1 us of bytes): about its aligned price");
    dm_costs_free(c);
}

/* NS alignment classes: aligned direct rows (1024..4096 grid) at 2x their roofline and the odd
 * shape 1280 x 3420 (a side aligned to 4, not 8) at 6x. An aligned compute-bound query beside it
 * is priced from the aligned rows alone; a query of the odd shape's class from that shape. */
static void test_ns_alignment_classes(void)
{
    const dm_gpu *h = dm_gpu_find("H200");
    static char buf[1 << 16];
    size_t n = table_head(buf, sizeof buf, 1);
    static const int64_t dims[] = {1024, 2048, 4096};
    for (int i = 0; i < 3; i++)
        for (int j = i; j < 3; j++) {
            double us = 2 * dm_roofline_ns_us(h, dims[i], dims[j], 1, DM_NS_DIRECT);
            n += (size_t)snprintf(buf + n, sizeof buf - n, "NVIDIA H200,ns,direct,%lld,%lld,1,bf16,%.6f,%.6f,%.6f\n",
                                  (long long)dims[i], (long long)dims[j], us, us, us);
        }
    double odd_us = 6 * dm_roofline_ns_us(h, 1280, 3420, 1, DM_NS_DIRECT);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "NVIDIA H200,ns,direct,1280,3420,1,bf16,%.6f,%.6f,%.6f\n", odd_us,
                          odd_us, odd_us);
    dm_err err = {{0}};
    dm_costs *c = NULL;
    dm_cost_source s;
    ok(dm_costs_load(write_file("ns_align.csv", buf), &c, &err) == 0, "a table with aligned and odd NS rows loads (%s)",
       c ? "ok" : err.msg);
    if (!c) return;
    ok_near(dm_costs_ns_us(c, NULL, 1280, 3840, 1, DM_NS_DIRECT, &s), 2 * dm_roofline_ns_us(h, 1280, 3840, 1, DM_NS_DIRECT),
            1e-6, "NS of an aligned shape beside an odd one (1280 x 3840 by 1280 x 3420): the aligned rows alone");
    ok(s == DM_COST_INTERPOLATED, "  ... interpolated (%s)", dm_cost_source_name(s));
    ok_near(dm_costs_ns_us(c, NULL, 1280, 3412, 1, DM_NS_DIRECT, &s), 6 * dm_roofline_ns_us(h, 1280, 3412, 1, DM_NS_DIRECT),
            1e-6, "NS of a shape aligned to 4 (1280 x 3412): the row of its class (6x its roofline)");
    ok_near(dm_costs_ns_us(c, NULL, 1282, 3842, 1, DM_NS_DIRECT, &s), 2 * dm_roofline_ns_us(h, 1282, 3842, 1, DM_NS_DIRECT),
            1e-6, "NS of a shape aligned to 2 (no row of its class): the aligned rows");
    dm_costs_free(c);
}

static void test_eager_rows(void)
{
    const dm_gpu *h = dm_gpu_find("H200");
    static char buf[4096];
    size_t n = table_head(buf, sizeof buf, 2);
    n += snprintf(buf + n, sizeof buf - n, "NVIDIA H200,ns,direct,1024,1024,0,1,bf16,100,100,100\n"
                  "NVIDIA H200,ns,direct-eager,1024,1024,0,1,bf16,130,129,131\n"
                  "NVIDIA H200,ns,direct,64,64,0,1,bf16,10,10,10\n");
    dm_costs *c = NULL;
    dm_err err = {{0}};
    ok(dm_costs_load(write_file("eager.csv", buf), &c, &err) == 0, "a table with direct-eager rows reads (%s)",
       c ? "" : err.msg);
    if (!c) return;
    dm_cost_source s;
    ok_near(dm_costs_ns_launch_us(c, NULL, 1024, 1024, 1, DM_NS_DIRECT, 1, &s), 130, 1e-9, "eager: the direct-eager row");
    ok(s == DM_COST_MEASURED, "eager row measured (%s)", dm_cost_source_name(s));
    ok_near(dm_costs_ns_launch_us(c, NULL, 1024, 1024, 1, DM_NS_DIRECT, 0, NULL), 100, 1e-9, "graph: the direct row");
    ok_near(dm_costs_ns_us(c, NULL, 1024, 1024, 1, DM_NS_DIRECT, NULL), 100, 1e-9, "dm_costs_ns_us is the graph's");
    ok(dm_costs_op_rows(c, "ns", "direct-eager") == 1 && dm_costs_op_rows(c, "ns", "direct") == 2,
       "rows counted per algo (eager 1, graph 2)");
    /* a shape with a graph row and no eager row: its graph row times the eager-to-graph ratio of
     * the shapes with both (1024 x 1024: 130 / 100) */
    ok_near(dm_costs_ns_launch_us(c, NULL, 64, 64, 1, DM_NS_DIRECT, 1, &s), 13, 1e-9,
            "eager without its row: its graph row (10 us) x the ratio of the shapes with both (1.3)");
    ok(s == DM_COST_INTERPOLATED, "  ... interpolated (%s)", dm_cost_source_name(s));
    /* gram has no eager rows: the graph answer, at least 2 + 4 x 5 + 2 launch floors */
    double g = dm_costs_ns_launch_us(c, NULL, 64, 64, 1, DM_NS_GRAM, 0, NULL);
    double ge = dm_costs_ns_launch_us(c, NULL, 64, 64, 1, DM_NS_GRAM, 1, NULL);
    ok(ge >= g && ge >= 24 * h->launch_us - 1e-9, "eager without rows: graph %.2f us, eager %.2f >= 24 launches", g, ge);
    dm_costs_free(c);
    expect_error("eager_bad.csv", "# dmuon-costs-2\n# source: measured\n# gpu: NVIDIA H200\n"
                 "gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us\n"
                 "NVIDIA H200,ns,sym-eager,64,64,0,1,bf16,1,1,1\n", "direct, gram, direct-eager or gram-eager");
    /* tall rows (m > n in the file): matrices stored tall, looked up apart from the wide ones;
     * a table without them answers a tall query by the transpose */
    n = table_head(buf, sizeof buf, 2);
    n += snprintf(buf + n, sizeof buf - n, "NVIDIA H200,ns,direct,1280,3420,0,1,bf16,800,800,800\n"
                  "NVIDIA H200,ns,direct,3420,1280,0,1,bf16,300,300,300\n"
                  "NVIDIA H200,ns,direct,1280,3420,0,2,bf16,1500,1500,1500\n");
    ok(dm_costs_load(write_file("tall.csv", buf), &c, &err) == 0, "a tall row beside its wide one reads (%s)",
       c ? "" : err.msg);
    if (c) {
        ok_near(dm_costs_ns_us(c, NULL, 3420, 1280, 1, DM_NS_DIRECT, &s), 300, 1e-9, "tall query: the tall row");
        ok_near(dm_costs_ns_us(c, NULL, 1280, 3420, 1, DM_NS_DIRECT, NULL), 800, 1e-9, "wide query: the wide row");
        dm_op op = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
        op.m = 1280, op.n = 3420, op.batch = 3, op.tall = 2;
        /* one call for the wide matrix, one for the two tall ones (interpolated from the tall row) */
        double two_tall = dm_costs_ns_us(c, NULL, 3420, 1280, 2, DM_NS_DIRECT, NULL);
        ok_near(dm_costs_ns_op_kernels_us(c, NULL, &op, NULL), 800 + two_tall, 1e-9,
               "an NS op of 1 wide and 2 tall matrices: 800 + %.1f us", two_tall);
        op.tall = 0;
        ok_near(dm_costs_ns_op_kernels_us(c, NULL, &op, NULL), dm_costs_ns_us(c, NULL, 1280, 3420, 3, DM_NS_DIRECT, NULL),
               1e-9, "an NS op of 3 wide matrices: one call");
        dm_costs_free(c);
    }
    ok(dm_costs_load(write_file("wide_only.csv", "# dmuon-costs-2\n# source: measured\n# gpu: NVIDIA H200\n"
                                "gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us\n"
                                "NVIDIA H200,ns,direct,1280,3420,0,1,bf16,800,800,800\n"), &c, &err) == 0 && c &&
           fabs(dm_costs_ns_us(c, NULL, 3420, 1280, 1, DM_NS_DIRECT, NULL) - 800) < 1e-9,
       "no tall rows: a tall query is its transpose's");
    dm_costs_free(c);
    expect_error("tall_dup.csv", "# dmuon-costs-2\n# source: measured\n# gpu: NVIDIA H200\n"
                 "gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us\n"
                 "NVIDIA H200,ns,direct,3420,1280,0,1,bf16,1,1,1\nNVIDIA H200,ns,direct,3420,1280,0,1,bf16,2,2,2\n",
                 "duplicate row: ns direct 3420 x 1280");
    /* the NS op's prep: 20 bytes per element at the efficiency, 2 launches per matrix */
    double us = dm_ns_prep_us(h, 0.5, 3, 4, 1e8);
    ok_near(us, 1e8 * DM_NS_PREP_BYTES / (0.5 * h->hbm_Bps) * 1e6 + 4 * DM_NS_PREP_LAUNCHES * 3, 1e-9,
           "dm_ns_prep_us: bytes at the efficiency, launches per matrix (%.1f us)", us);
    ok_near(dm_ns_prep_us(h, 0, 0, 1, 0), DM_NS_PREP_LAUNCHES * h->launch_us, 1e-12, "defaults: HBM peak, launch floor");
}

/* The projection of a row to a GPU it was not measured on (project_us): of the time above the
 * launch floor, the share its limiting resource needs at the table's best rate for it scales by
 * that resource's datasheet ratio, the rest by the SMs x clock ratio; a memory-bound workload
 * kernel's two parts overlap (squares add), the others' add. Rates: the grad-check rows' fastest
 * streaming read (4.0e12 B/s here), the GEMM rows' fastest (800 TFLOP/s here). */
static void test_projection(void)
{
    const dm_gpu *h200 = dm_gpu_find("H200"), *h100 = dm_gpu_find("H100"), *a800 = dm_gpu_find("A800"),
                 *b200 = dm_gpu_find("B200");
    static char buf[1 << 14];
    const double stream = 4.0e12, tensor = 800e12, L = 4.0;
    double big = dm_elem_launch_bytes(DM_KOP_GRAD_CHECK, 1, 1 << 28, 0, 2);
    double loss_b = dm_elem_launch_bytes(DM_KOP_LOSS, 4096, 8192, 0, 2);
    double vec_b = dm_elem_launch_bytes(DM_KOP_VECTOR, 4096, 8192, 0, 2);
    double gf = 2.0 * 8192 * 8192 * 8192, sf = 2.0 * 2048 * 2048 * 2048;
    double ad_b = (double)(1 << 24) * dm_elementwise_bytes_per_param("adamw");
    double t_loss = L + loss_b / stream * 1e6, t_vec = L + 5 * vec_b / stream * 1e6, t_small = L + 2 * sf / tensor * 1e6;
    double t_ad = L + 5 * ad_b / stream * 1e6;
    size_t n = table_head(buf, sizeof buf, 2);
    n += snprintf(buf + n, sizeof buf - n,
                  "NVIDIA H200,elem,grad-check,1,%d,0,1,bf16,%.6f,%.6f,%.6f\n"
                  "NVIDIA H200,elem,grad-check,1,64,0,1,bf16,2,2,2\n"
                  "NVIDIA H200,gemm,fwd,8192,8192,8192,1,bf16,%.6f,%.6f,%.6f\n"
                  "NVIDIA H200,gemm,fwd,2048,2048,2048,1,bf16,%.6f,%.6f,%.6f\n"
                  "NVIDIA H200,elem,loss,4096,8192,0,1,bf16,%.6f,%.6f,%.6f\n"
                  "NVIDIA H200,elem,vector,4096,8192,0,1,bf16,%.6f,%.6f,%.6f\n"
                  "NVIDIA H200,adamw,-,1,%d,0,1,fp32,%.6f,%.6f,%.6f\n",
                  1 << 28, big / stream * 1e6, big / stream * 1e6, big / stream * 1e6, gf / tensor * 1e6,
                  gf / tensor * 1e6, gf / tensor * 1e6, t_small, t_small, t_small, t_loss, t_loss, t_loss, t_vec, t_vec,
                  t_vec, 1 << 24, t_ad, t_ad, t_ad);
    dm_costs *c = NULL;
    dm_err err = {{0}};
    ok(dm_costs_load(write_file("proj.csv", buf), &c, &err) == 0, "projection table loads (%s)", c ? "ok" : err.msg);
    if (!c) return;
    double hbm100 = h200->hbm_Bps / h100->hbm_Bps, hbm800 = h200->hbm_Bps / a800->hbm_Bps;
    double sm800 = (132.0 * 1980) / (108.0 * 1410), tc800 = h200->bf16_flops / a800->bf16_flops;
    ok_near(dm_gpu_sm_rate(h200), 132.0 * 1980, 1e-12, "H200: 132 SMs at 1980 MHz");
    ok_near(dm_gpu_sm_rate(a800), 108.0 * 1410, 1e-12, "A800: 108 SMs at 1410 MHz");
    ok(dm_gpu_sm_rate(b200) == 0, "B200: SMs not known here");
    dm_cost_source s;
    dm_kernel x = kern(DM_KERN_ELEM, DM_KOP_LOSS, 4096, 8192, 0, 1);
    ok_near(dm_costs_kernel_us(c, h100, &x, &s), L + (t_loss - L) * hbm100, 1e-9,
            "a kernel at the table's best streaming read: its time above the floor by the HBM ratio (H100)");
    ok(s == DM_COST_PROJECTED, "  ... is projected");
    ok_near(dm_costs_kernel_us(c, a800, &x, NULL), L + (t_loss - L) * hbm800, 1e-9, "  ... and on an A800");
    x = kern(DM_KERN_ELEM, DM_KOP_VECTOR, 4096, 8192, 0, 1);
    ok_near(dm_costs_kernel_us(c, h100, &x, NULL), L + (t_vec - L) * sqrt(0.04 * hbm100 * hbm100 + 0.96), 1e-9,
            "a workload kernel at a fifth of it: memory time (a fifth) by the HBM ratio, the rest by the SMs' (1 "
            "from the H200 to the H100), the two overlapped (squares add)");
    ok_near(dm_costs_kernel_us(c, a800, &x, NULL), L + (t_vec - L) * sqrt(0.04 * hbm800 * hbm800 + 0.96 * sm800 * sm800),
            1e-9, "  ... on an A800: the rest by 132 x 1980 / (108 x 1410)");
    ok_near(dm_costs_kernel_us(c, b200, &x, NULL), L + (t_vec - L) * h200->hbm_Bps / b200->hbm_Bps, 1e-9,
            "  ... on a GPU whose SMs are not known: the whole by the HBM ratio");
    ok_near(dm_costs_elementwise_us(c, a800, "adamw", INT64_C(1) << 24, &s), L + (t_ad - L) * (0.2 * hbm800 + 0.8 * sm800),
            1e-9, "the optimizer's update at a fifth of it: the two parts in series (a fifth by the HBM ratio)");
    ok(s == DM_COST_PROJECTED, "  ... is projected");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 8192, 8192, 8192, 1);
    double t = gf / tensor * 1e6;
    ok_near(dm_costs_kernel_us(c, a800, &x, NULL), L + (t - L) * tc800, 1e-9,
            "the fastest GEMM: its time above the floor by the tensor rate ratio (its FLOPs need all of it)");
    x = kern(DM_KERN_GEMM, DM_KOP_FWD, 2048, 2048, 2048, 1);
    ok_near(dm_costs_kernel_us(c, a800, &x, NULL), L + (t_small - L) * (0.5 * tc800 + 0.5 * sm800), 1e-9,
            "a GEMM at half the best rate: half by the tensor ratio, half by the SMs'");
    x = kern(DM_KERN_ELEM, DM_KOP_GRAD_CHECK, 1, 64, 0, 1);
    ok_near(dm_costs_kernel_us(c, a800, &x, NULL), 2.0, 1e-9, "a row under the launch floor: all launch, the same floor");
    dm_costs_free(c);
}

/* Column mhz: the clock each row was timed at. Under the power model, a table whose NS rows all
 * have it prices an NS op's kernels at full clock from them (each row's time by its clock over the
 * GPU's top clock); one where some lack it by the model's held clock; a bad clock is refused with
 * its place. */
static void test_ns_clock(void)
{
    dm_err err = {{0}};
    dm_costs *c = NULL;
    const dm_gpu *h200 = dm_gpu_find("H200");
    const char *head = "# dmuon-costs-1\n# source: measured\n# gpu: NVIDIA H200\n"
                       "gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us,mhz\n";
    char buf[2048];
    snprintf(buf, sizeof buf,
             "%sNVIDIA H200,ns,direct,1024,1024,1,bf16,100,99,101,1650\n"
             "NVIDIA H200,ns,direct,2048,2048,16,bf16,5000,4990,5010,1485\n"
             "NVIDIA H200,gemm,cublas,1024,1024,1,bf16,10,10,10,0\n", head);
    dm_power pw = {.limit_w = 700, .gemm_w = 1000, .copy_w = 480, .idle_w = 100, .slope = 5e-4, .tau_ms = 20,
                   .ref_flops = 780e12, .ref_Bps = 4.25e12, .activity_exp = 0.65};
    dm_op one = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE), bat = one;
    one.m = one.n = 1024, one.batch = 1, one.algo = DM_NS_DIRECT;
    one.flops = dm_ns_flops(1024, 1024, DM_NS_DIRECT), one.bytes = dm_ns_bytes(1024, 1024, DM_NS_DIRECT);
    bat.m = bat.n = 2048, bat.batch = 16, bat.algo = DM_NS_DIRECT;
    bat.flops = 16 * dm_ns_flops(2048, 2048, DM_NS_DIRECT), bat.bytes = 16 * dm_ns_bytes(2048, 2048, DM_NS_DIRECT);
    ok(dm_costs_load(write_file("clk.csv", buf), &c, &err) == 0, "a table with column mhz loads (%s)", c ? "ok" : err.msg);
    if (c) {
        ok_near(dm_costs_ns_us(c, h200, 1024, 1024, 1, DM_NS_DIRECT, NULL), 100, 1e-9, "its rows' time as timed");
        ok_near(dm_costs_ns_op_kernels_full_us(c, h200, &one, &pw, NULL), 100 * 1650 / h200->sm_mhz, 1e-9,
                "under the power model, an NS op whose row was timed at 1650 MHz at full clock: 100 us x 1650 / %.0f",
                h200->sm_mhz);
        ok_near(dm_costs_ns_op_kernels_full_us(c, h200, &bat, &pw, NULL), 5000 * 1485 / h200->sm_mhz, 1e-9,
                "and one whose row was timed at 1485 MHz by its own clock");
        ok_near(dm_costs_ns_op_kernels_full_us(c, h200, &one, NULL, NULL), 100, 1e-9, "without a power model: as timed");
        ok(dm_costs_full_clock(c, 1) == 1, "its NS rows' full-clock time is known");
        ok(dm_costs_ns_clocked(c) == 1, "dm_costs_ns_clocked: every NS row has its clock");
        dm_costs_free(c);
        c = NULL;
    }
    snprintf(buf, sizeof buf,
             "%sNVIDIA H200,ns,direct,1024,1024,1,bf16,100,99,101,1650\n"
             "NVIDIA H200,ns,direct,2048,2048,16,bf16,5000,4990,5010,\n", head);
    ok(dm_costs_load(write_file("clk_some.csv", buf), &c, &err) == 0, "a table where one NS row has no clock loads (%s)",
       c ? "ok" : err.msg);
    if (c) {
        ok_near(dm_costs_ns_op_kernels_full_us(c, h200, &one, &pw, NULL),
                dm_power_full_us_held(&pw, one.flops, one.bytes, 100), 1e-9,
                "... and takes its rows as timed back to back, brought to full clock by the power model's held clock");
        ok(dm_costs_full_clock(c, 1) == 0, "... its NS rows timed back to back");
        ok(dm_costs_ns_clocked(c) == 0, "... dm_costs_ns_clocked: not every NS row has its clock");
        dm_costs_free(c);
        c = NULL;
    }
    snprintf(buf, sizeof buf, "%sNVIDIA H200,ns,direct,1024,1024,1,bf16,100,99,101,fast\n", head);
    ok(dm_costs_load(write_file("clk_bad.csv", buf), &c, &err) != 0 && strstr(err.msg, "clk_bad.csv:5:") &&
           strstr(err.msg, "expected mhz"),
       "a clock that is not a number is refused at its line (%s)", err.msg);
    dm_costs_free(c);
    c = NULL;
    ok(dm_costs_load(write_file("clk_hdr.csv", "# dmuon-costs-1\n# source: measured\n# gpu: NVIDIA H200\n"
                                               "gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us,clock\n"),
                     &c, &err) != 0 &&
           strstr(err.msg, "expected the header"),
       "a header with another last column is refused (%s)", err.msg);
    dm_costs_free(c);
}

/* dm_costs_ns_launch_us keeps its answers per table: asked again (many shapes, batches, both
 * algorithms, eager, tall and wide, three targets, several hundred answers: the memo regrown), each
 * answer and its source are the first's, and a second table loaded fresh gives the same; a target
 * that is a caller's struct, its numbers changed between two questions, is priced anew. */
static void test_ns_memo(void)
{
    dm_costs *a = NULL, *b = NULL;
    dm_err err = {{0}};
    if (dm_costs_load_default(&a, &err) || dm_costs_load_default(&b, &err)) {
        ok(0, "default table loads (%s)", err.msg);
        dm_costs_free(a);
        return;
    }
    const dm_gpu *t[3] = {NULL, dm_gpu_find("H100"), dm_gpu_find("A800")};
    static const int64_t shapes[][2] = {{1024, 1024}, {1536, 8960}, {8960, 1536}, {3584, 3584}, {128, 4096}, {2048, 1408}};
    int same = 1, asked = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int g = 0; g < 3; g++)
            for (int s = 0; s < 6; s++)
                for (int batch = 1; batch <= 32; batch += 3)
                    for (int algo = 0; algo < 2; algo++)
                        for (int eager = 0; eager < 2; eager++) {
                            dm_cost_source sa, sb;
                            double ua = dm_costs_ns_launch_us(a, t[g], shapes[s][0], shapes[s][1], batch,
                                                              (dm_ns_algo)algo, eager, &sa);
                            double ub = pass ? dm_costs_ns_launch_us(b, t[g], shapes[s][0], shapes[s][1], batch,
                                                                     (dm_ns_algo)algo, eager, &sb)
                                             : ua;
                            if (pass) same &= ua == ub && sa == sb;
                            asked++;
                        }
    ok(same, "NS prices asked twice (%d questions): the memo's answers equal a fresh table's, sources too", asked);
    dm_gpu mine = *dm_gpu_find("H100");
    double u1 = dm_costs_ns_launch_us(a, &mine, 4096, 4096, 4, DM_NS_GRAM, 0, NULL);
    mine.bf16_flops *= 2, mine.hbm_Bps *= 2;
    double u2 = dm_costs_ns_launch_us(a, &mine, 4096, 4096, 4, DM_NS_GRAM, 0, NULL);
    double u3 = dm_costs_ns_launch_us(b, &mine, 4096, 4096, 4, DM_NS_GRAM, 0, NULL);
    ok(u2 < u1 && u2 == u3, "a caller's GPU struct changed between two questions: priced anew (%.1f -> %.1f us)", u1, u2);
    dm_costs_free(a);
    dm_costs_free(b);
}

int main(void)
{
    dm_err err = {{0}};
    const dm_gpu *h200 = dm_gpu_find("H200"), *a800 = dm_gpu_find("A800");
    if (!mkdtemp(dir)) return tap_skip_all("no temp dir");
    test_eager_rows();
    test_projection();
    test_alignment_classes();
    test_ns_alignment_classes();
    test_class_ratio();
    test_elem_alignment();
    test_ns_clock();
    test_ns_memo();

    /* the roofline table shipped in traces/costs */
    char path[1024];
    const char *src = getenv("DM_SRCDIR");
    snprintf(path, sizeof path, "%s/traces/costs/roofline.csv", src ? src : ".");
    dm_costs *r = NULL;
    ok(dm_costs_load(path, &r, &err) == 0, "load %s (%s)", path, r ? "" : err.msg);
    if (r) {
        dm_cost_source s;
        double us = dm_costs_ns_us(r, NULL, 4096, 1024, 2, DM_NS_GRAM, &s);
        ok(dm_costs_is_roofline(r) && s == DM_COST_ROOFLINE, "roofline table answers say roofline");
        ok_near(us, dm_roofline_ns_us(h200, 1024, 4096, 2, DM_NS_GRAM), 1e-12, "roofline value, shape canonicalized");
        ok(strstr(dm_costs_describe(r), "roofline") != NULL, "describe: %s", dm_costs_describe(r));
        double flops = dm_ns_flops(8192, 8192, DM_NS_DIRECT);
        ok(dm_costs_ns_us(r, NULL, 8192, 8192, 1, DM_NS_DIRECT, NULL) >= flops / h200->bf16_flops * 1e6,
           "roofline is at least FLOPs over peak");
        ok(dm_costs_ns_us(r, NULL, 64, 64, 1, DM_NS_DIRECT, NULL) >= 17 * h200->launch_us, "launch floor for tiny NS");
        dm_costs_free(r);
    }

    /* a measured table */
    dm_costs *c = NULL;
    ok(dm_costs_load(measured_table("m.csv", 3.0), &c, &err) == 0, "load measured table");
    if (!c) return tap_done();
    ok(!dm_costs_is_roofline(c) && dm_costs_gpu(c) == h200, "measured on H200");
    dm_cost_source s;
    double want = dm_roofline_ns_us(h200, 1024, 2048, 1, DM_NS_DIRECT) * 2;
    ok_near(dm_costs_ns_us(c, h200, 1024, 2048, 1, DM_NS_DIRECT, &s), want, 1e-6, "exact row");
    ok(s == DM_COST_MEASURED, "exact row is measured");
    ok_near(dm_costs_ns_us(c, h200, 2048, 1024, 1, DM_NS_DIRECT, &s), want, 1e-6, "m > n canonicalized");
    double mid = dm_costs_ns_us(c, NULL, 1500, 3000, 2, DM_NS_DIRECT, &s);
    ok(s == DM_COST_INTERPOLATED, "between measured shapes: interpolated (%s)", dm_cost_source_name(s));
    ok_near(mid, 2 * dm_roofline_ns_us(h200, 1500, 3000, 2, DM_NS_DIRECT), 1e-6, "constant efficiency interpolates exactly");
    double lo = dm_costs_ns_us(c, NULL, 1024, 2048, 1, DM_NS_DIRECT, NULL);
    double hi = dm_costs_ns_us(c, NULL, 2048, 4096, 4, DM_NS_DIRECT, NULL);
    ok(mid > lo && mid < hi, "interpolated value lies between its neighbours");
    double out = dm_costs_ns_us(c, NULL, 128, 128, 1, DM_NS_DIRECT, &s);
    ok(s == DM_COST_ROOFLINE, "outside the measured range: roofline");
    ok_near(out, 2 * dm_roofline_ns_us(h200, 128, 128, 1, DM_NS_DIRECT), 1e-6, "scaled by the nearest efficiency");
    double proj = dm_costs_ns_us(c, a800, 1024, 2048, 1, DM_NS_DIRECT, &s);
    ok(s == DM_COST_PROJECTED, "other GPU: projected");
    {
        double sm800 = (132.0 * 1980) / (108.0 * 1410), tc800 = h200->bf16_flops / a800->bf16_flops;
        double launch = (2 + 3 * 5) * h200->launch_us, body = want - launch; /* the direct NS's 17 launches */
        ok(proj > launch + body * sm800 && proj <= launch + body * tc800 + 1e-9,
           "projection: its time above the launch floors between the SM and the tensor ratios (%.1f us)", proj);
    }
    ok(proj > want, "A800 slower than H200 (%.1f > %.1f us)", proj, want);
    { /* an NS op at full clock (dm_ns_op_full_us): this table's rows were timed back to back */
        dm_cluster cl = {0};
        cl.gpu = h200;
        dm_op op = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
        op.m = 2048, op.n = 4096, op.batch = 4, op.algo = DM_NS_DIRECT;
        op.flops = 4 * dm_ns_flops(2048, 4096, DM_NS_DIRECT), op.bytes = 4 * dm_ns_bytes(2048, 4096, DM_NS_DIRECT);
        double held = dm_ns_op_us(c, &cl, &op, NULL);
        ok_near(dm_ns_op_full_us(c, &cl, &op, NULL), held, 0, "NS op without a power model: its rows' time");
        cl.power = (dm_power){.limit_w = 700, .gemm_w = 1000, .copy_w = 480, .idle_w = 100, .slope = 5e-4, .tau_ms = 20,
                              .ref_flops = 780e12, .ref_Bps = 4.25e12, .activity_exp = 0.65};
        double full = dm_ns_op_full_us(c, &cl, &op, NULL), kern = dm_costs_ns_op_kernels_us(c, h200, &op, NULL);
        double want = dm_power_full_us_held(&cl.power, op.flops, op.bytes, kern) + (held - kern);
        ok(full < held && fabs(full - want) < 1e-6 * held,
           "NS op from back-to-back rows over the power limit: its kernels at full clock (%.1f of %.1f us)", full, held);
        ok_near(dm_ns_op_us(c, &cl, &op, NULL), held, 0, "dm_ns_op_us (the scheduler's loads) keeps the rows' time");
    }
    double g = 0;
    ok(dm_costs_best_algo(c, NULL, 1024, 4096, 1, &g) == (dm_costs_ns_us(c, NULL, 1024, 4096, 1, DM_NS_GRAM, NULL) <
                                                                   dm_costs_ns_us(c, NULL, 1024, 4096, 1, DM_NS_DIRECT, NULL)
                                                               ? DM_NS_GRAM : DM_NS_DIRECT),
       "best algorithm is the cheaper one");
    dm_costs_free(c);
    /* gram 100x slower than its roofline: direct wins; 0.01x: gram wins */
    ok(dm_costs_load(measured_table("slowgram.csv", 100.0), &c, &err) == 0 &&
           dm_costs_best_algo(c, NULL, 1024, 4096, 1, NULL) == DM_NS_DIRECT, "slow gram table: direct chosen");
    dm_costs_free(c);
    ok(dm_costs_load(measured_table("fastgram.csv", 0.01), &c, &err) == 0 &&
           dm_costs_best_algo(c, NULL, 1024, 4096, 1, NULL) == DM_NS_GRAM, "fast gram table: gram chosen");
    /* elementwise */
    double e20 = dm_costs_elementwise_us(c, NULL, "adamw", INT64_C(1) << 20, &s);
    ok(s == DM_COST_MEASURED && fabs(e20 - 1.5 * dm_roofline_elementwise_us(h200, "adamw", INT64_C(1) << 20)) < 1e-5,
       "elementwise exact row");
    double e22 = dm_costs_elementwise_us(c, NULL, "adamw", INT64_C(1) << 22, &s);
    ok(s == DM_COST_INTERPOLATED, "elementwise between rows: interpolated");
    ok_near(e22, 1.5 * dm_roofline_elementwise_us(h200, "adamw", INT64_C(1) << 22), 1e-6, "elementwise value");
    dm_costs_elementwise_us(c, NULL, "muon_update", 1000, &s);
    ok(s == DM_COST_ROOFLINE, "no rows for muon_update: roofline");
    dm_costs_free(c);

    /* Muon's rows: apply (the update op) and prep (the NS op's check and momentum) each price
     * their own; the older "-" rows time both in the update op, and then the NS op adds none;
     * an adamw row with algo apply is refused */
    {
        const dm_gpu *h = dm_gpu_find("H200");
        char tb[2048];
        size_t n = table_head(tb, sizeof tb, 1);
        for (int e = 16; e <= 24; e += 8)
            n += snprintf(tb + n, sizeof tb - n,
                          "NVIDIA H200,muon_update,apply,1,%lld,1,fp32,%.6f,1,1\nNVIDIA H200,muon_update,prep,1,%lld,1,fp32,%.6f,1,1\n",
                          (long long)(INT64_C(1) << e), 2 * dm_roofline_elementwise_us(h, "muon_update", INT64_C(1) << e),
                          (long long)(INT64_C(1) << e), 3 * dm_roofline_elementwise_us(h, "muon_prep", INT64_C(1) << e));
        dm_costs *mc = NULL;
        dm_cluster cl0 = {0};
        cl0.gpu = h;
        int ld = dm_costs_load(write_file("muon.csv", tb), &mc, &err) == 0;
        double up = ld ? dm_costs_elementwise_us(mc, NULL, "muon_update", INT64_C(1) << 16, &s) : 0;
        double pr = ld ? dm_costs_elementwise_us(mc, NULL, "muon_prep", INT64_C(1) << 16, NULL) : 0;
        double np = ld ? dm_ns_op_prep_us(mc, &cl0, 4, 4.0 * (INT64_C(1) << 24)) : 0;
        ok(ld && s == DM_COST_MEASURED && fabs(up - 2 * dm_roofline_elementwise_us(h, "muon_update", INT64_C(1) << 16)) < 1e-6 &&
               fabs(pr - 3 * dm_roofline_elementwise_us(h, "muon_prep", INT64_C(1) << 16)) < 1e-6 &&
               fabs(np - 4 * 3 * dm_roofline_elementwise_us(h, "muon_prep", INT64_C(1) << 24)) < 1e-6,
           "muon_update apply rows price the update (%.3f us), prep rows the NS op's check and momentum per matrix (%.3f us, "
           "4 matrices %.3f us)", up, pr, np);
        dm_costs_free(mc);
        n = table_head(tb, sizeof tb, 1);
        snprintf(tb + n, sizeof tb - n, "NVIDIA H200,muon_update,-,1,65536,1,fp32,9,9,9\n");
        ld = dm_costs_load(write_file("muonold.csv", tb), &mc, &err) == 0;
        ok(ld && dm_costs_elementwise_us(mc, NULL, "muon_update", 65536, NULL) == 9 && dm_ns_op_prep_us(mc, &cl0, 4, 1e6) == 0,
           "the older muon_update '-' rows price momentum and apply in the update op, the NS op adds none");
        dm_costs_free(mc);
        n = table_head(tb, sizeof tb, 1);
        snprintf(tb + n, sizeof tb - n, "NVIDIA H200,adamw,apply,1,65536,1,fp32,9,9,9\n");
        expect_error("adamwapply.csv", tb, "adamwapply.csv:5:19: expected algo - for an adamw row, found 'apply'");
    }

    /* DMUON_COSTS names a file */
    setenv("DMUON_COSTS", measured_table("env.csv", 2.0), 1);
    ok(dm_costs_load_default(&c, &err) == 0 && !dm_costs_is_roofline(c) && strstr(dm_costs_path(c), "env.csv"),
       "DMUON_COSTS file is used");
    dm_costs_free(c);
    unsetenv("DMUON_COSTS");

    /* errors name file, line and column */
    static const char *head = "# dmuon-costs-1\n# source: measured\n# gpu: NVIDIA H200\n"
                              "gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us\n";
    char t[1024];
    expect_error("nofmt.csv", "gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us\n", "nofmt.csv:1:1: expected a '# dmuon-costs-2'");
    snprintf(t, sizeof t, "%sNVIDIA H200,fft,direct,1,2,1,bf16,1,1,1\n", head);
    expect_error("badop.csv", t, "badop.csv:5:13: expected op");
    snprintf(t, sizeof t, "%sNVIDIA H200,gemm,cublas,64,32,1,bf16,1,1,1\n", head); /* an ns row with m > n is a tall matrix */
    expect_error("nltm.csv", t, "nltm.csv:5:28: expected n, an integer >= m");
    snprintf(t, sizeof t, "%sNVIDIA H200,ns,direct,32,64,1,bf16,x,1,1\n", head);
    expect_error("badnum.csv", t, "badnum.csv:5:36: expected median_us");
    snprintf(t, sizeof t, "%sNVIDIA H200,ns,direct,32,64,1\n", head);
    expect_error("short.csv", t, "short.csv:5:1: expected 10 comma-separated fields");
    snprintf(t, sizeof t, "%sNVIDIA H200,ns,direct,4,16384,1,bf16,1e308,65.82,66.21\n", head);
    expect_error("huge.csv", t, "huge.csv:5:38: expected median_us between 0.001 and 1e11");
    expect_error("nosrc.csv", "# dmuon-costs-1\n# gpu: NVIDIA H200\ngpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us\n",
                 "expected a '# source: measured|roofline' line");
    expect_error("gpu.csv", "# dmuon-costs-1\n# source: measured\n# gpu: Voodoo 2\ngpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us\n",
                 "naming a catalogued GPU");

    /* the generator writes a table that reads back with identical answers */
    const char *gen = write_file("gen.csv", "");
    ok(dm_costs_write_roofline(gen, a800, NULL, 0, "test", &err) == 0 && dm_costs_load(gen, &c, &err) == 0,
       "generated roofline table reads back");
    if (c) {
        ok(dm_costs_gpu(c) == a800, "generated table is for the A800");
        ok_near(dm_costs_ns_us(c, NULL, 1024, 4096, 4, DM_NS_DIRECT, NULL),
                dm_roofline_ns_us(a800, 1024, 4096, 4, DM_NS_DIRECT), 1e-12, "same answer as the formula");
    }
    dm_costs_free(c);
    test_kernel_rows();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) tap_diag("could not remove %s", dir);
    return tap_done();
}
