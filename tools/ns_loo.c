/* tools/ns_loo.c: how well the cost table's NS interpolation prices a shape it never measured.
 * For every NS shape of a cost table (algorithm column, m x n as the file stores it) that is
 * compute-bound on the roofline, the table is re-read without that shape's rows and each of its
 * rows (batches) is priced from the rest (dm_costs_ns_launch_us, as the simulator asks it); the
 * error (priced - measured) / measured is printed per row, and a summary per class: shapes whose
 * sides are all multiples of 256, and the others.
 *   tools/ns_loo COSTS.csv [MIN_SIDE]     (MIN_SIDE: skip shapes whose smaller side is below it; 512)
 * With --price, the table's price of every (shape, batch) of a `bench kernels --shapes` list
 * ('ROWS COLS B1,B2,..' lines; ROWS > COLS a tall matrix, as --as-stored measures it), one line
 * each: the predictions to commit before the rows are measured.
 *   tools/ns_loo --price COSTS.csv SHAPES.txt ALGO     (ALGO direct or gram)
 * (built by `make tools/ns_loo`; not installed) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs.h"

#define MAXLINES 8192
#define MAXSH 1024

static char *lines[MAXLINES];
static int n_lines;

typedef struct {
    char algo[32];
    long long m, n;
} shape;

/* the fields of an ns row (gpu,op,algo,m,n,batch,dtype,median,...); 0 when the line is not one */
static int ns_row(const char *line, shape *s, int *batch, double *med)
{
    char buf[512], *f[10];
    int k = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *t = strtok(buf, ",\n"); t && k < 10; t = strtok(NULL, ",\n")) f[k++] = t;
    if (k < 8 || line[0] == '#' || strcmp(f[1], "ns")) return 0;
    snprintf(s->algo, sizeof s->algo, "%s", f[2]);
    s->m = atoll(f[3]), s->n = atoll(f[4]);
    *batch = atoi(f[5]);
    *med = atof(f[7]);
    return 1;
}

static int price_list(const char *costs, const char *shapes, const char *algo_name)
{
    dm_costs *c = NULL;
    dm_err err;
    if (dm_costs_load(costs, &c, &err)) {
        fprintf(stderr, "ns_loo: %s\n", err.msg);
        return 1;
    }
    FILE *f = fopen(shapes, "r");
    if (!f) {
        perror(shapes);
        dm_costs_free(c);
        return 1;
    }
    dm_ns_algo algo = !strcmp(algo_name, "gram") ? DM_NS_GRAM : DM_NS_DIRECT;
    char line[1024], bl[512];
    long long m, n;
    printf("# algo rows cols batch priced_us source (%s)\n", costs);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%lld %lld %511s", &m, &n, bl) != 3) continue;
        for (char *t = strtok(bl, ","); t; t = strtok(NULL, ",")) {
            dm_cost_source src;
            double us = dm_costs_ns_us(c, NULL, m, n, atoi(t), algo, &src);
            printf("%s %lld %lld %d %.1f %s\n", algo_name, m, n, atoi(t), us, dm_cost_source_name(src));
        }
    }
    fclose(f);
    dm_costs_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--price")) return price_list(argv[2], argv[3], argv[4]);
    if (argc < 2) {
        fprintf(stderr, "usage: tools/ns_loo COSTS.csv [MIN_SIDE] | --price COSTS.csv SHAPES.txt ALGO\n");
        return 2;
    }
    long long min_side = argc > 2 ? atoll(argv[2]) : 512;
    FILE *f = fopen(argv[1], "r");
    char line[4096];
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    while (n_lines < MAXLINES && fgets(line, sizeof line, f)) lines[n_lines++] = strdup(line);
    fclose(f);
    static shape sh[MAXSH];
    int n_sh = 0;
    for (int i = 0; i < n_lines; i++) {
        shape s;
        int b;
        double med;
        if (!ns_row(lines[i], &s, &b, &med)) continue;
        int seen = 0;
        for (int j = 0; j < n_sh && !seen; j++) seen = !strcmp(sh[j].algo, s.algo) && sh[j].m == s.m && sh[j].n == s.n;
        if (!seen && n_sh < MAXSH) sh[n_sh++] = s;
    }
    const char *tmp = "/tmp/ns_loo.csv";
    double sum[2] = {0, 0}, sq[2] = {0, 0};
    int cnt[2] = {0, 0};
    printf("# algo m n batch measured_us priced_us error%% source class\n");
    for (int j = 0; j < n_sh; j++) {
        long long lo = sh[j].m < sh[j].n ? sh[j].m : sh[j].n;
        if (lo < min_side) continue;
        dm_ns_algo algo = !strncmp(sh[j].algo, "gram", 4) ? DM_NS_GRAM : DM_NS_DIRECT;
        int eager = strstr(sh[j].algo, "eager") != NULL;
        FILE *o = fopen(tmp, "w");
        if (!o) return 1;
        for (int i = 0; i < n_lines; i++) {
            shape s;
            int b;
            double med;
            if (ns_row(lines[i], &s, &b, &med) && !strcmp(s.algo, sh[j].algo) && s.m == sh[j].m && s.n == sh[j].n) continue;
            fputs(lines[i], o);
        }
        fclose(o);
        dm_costs *c = NULL;
        dm_err err;
        if (dm_costs_load(tmp, &c, &err)) {
            fprintf(stderr, "ns_loo: cannot read the table without %s %lldx%lld\n", sh[j].algo, sh[j].m, sh[j].n);
            return 1;
        }
        int odd = sh[j].m % 256 || sh[j].n % 256;
        for (int i = 0; i < n_lines; i++) {
            shape s;
            int b;
            double med;
            if (!ns_row(lines[i], &s, &b, &med) || strcmp(s.algo, sh[j].algo) || s.m != sh[j].m || s.n != sh[j].n) continue;
            if (dm_ns_flops(s.m, s.n, algo) / dm_costs_gpu(c)->bf16_flops * 1e6 < (algo == DM_NS_DIRECT ? 17 : 24) * dm_costs_gpu(c)->launch_us)
                continue; /* launch-bound: priced by table_ns_rows, not the shape interpolation */
            dm_cost_source src;
            double us = dm_costs_ns_launch_us(c, NULL, s.m, s.n, b, algo, eager, &src);
            double e = 100 * (us - med) / med;
            printf("%-12s %6lld %6lld %3d %10.1f %10.1f %+7.1f %s %s\n", s.algo, s.m, s.n, b, med, us, e,
                   dm_cost_source_name(src), odd ? "odd" : "256");
            sum[odd] += fabs(e), sq[odd] += e * e, cnt[odd]++;
        }
        dm_costs_free(c);
    }
    for (int k = 0; k < 2; k++)
        if (cnt[k])
            printf("# %s shapes: %d rows, mean |error| %.2f%%, rms %.2f%%\n", k ? "odd" : "256-multiple", cnt[k],
                   sum[k] / cnt[k], sqrt(sq[k] / cnt[k]));
    remove(tmp);
    return 0;
}
