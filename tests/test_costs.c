/* test_costs.c: the cost model: reading tables (and their positioned errors), exact lookups,
 * interpolation between measured shapes, the roofline fallback, projection to another GPU,
 * elementwise ops, the algorithm choice, and the shipped roofline table. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costs.h"
#include "tap.h"

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

/* A "measured" H200 table: NS rows at efficiency 2 (twice the roofline) on a grid, gram rows
 * `gram_factor` times their roofline; elementwise rows at efficiency 1.5. */
static const char *measured_table(const char *name, double gram_factor)
{
    const dm_gpu *h = dm_gpu_find("H200");
    static char buf[1 << 16];
    size_t n = 0;
    n += snprintf(buf + n, sizeof buf - n, "# dmuon-costs-1\n# source: measured\n# gpu: NVIDIA H200\n"
                                           "gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us\n");
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

int main(void)
{
    dm_err err = {{0}};
    const dm_gpu *h200 = dm_gpu_find("H200"), *a800 = dm_gpu_find("A800");
    if (!mkdtemp(dir)) return tap_skip_all("no temp dir");

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
    ok_near(proj, want * dm_roofline_ns_us(a800, 1024, 2048, 1, DM_NS_DIRECT) /
                      dm_roofline_ns_us(h200, 1024, 2048, 1, DM_NS_DIRECT), 1e-6, "projection by roofline ratio");
    ok(proj > want, "A800 slower than H200 (%.1f > %.1f us)", proj, want);
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
    expect_error("nofmt.csv", "gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us\n", "nofmt.csv:1:1: expected a '# dmuon-costs-1'");
    snprintf(t, sizeof t, "%sNVIDIA H200,fft,direct,1,2,1,bf16,1,1,1\n", head);
    expect_error("badop.csv", t, "badop.csv:5:13: expected op");
    snprintf(t, sizeof t, "%sNVIDIA H200,ns,direct,64,32,1,bf16,1,1,1\n", head);
    expect_error("nltm.csv", t, "nltm.csv:5:26: expected n, an integer >= m");
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
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) tap_diag("could not remove %s", dir);
    return tap_done();
}
