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
 *   tools/ns_loo --price COSTS.csv SHAPES.txt ALGO     (ALGO direct, gram, direct-eager or gram-eager)
 * With --gemm, the same for the workload GEMMs of a bench work table: every weight shape (the
 * pair of weight dimensions: fwd's n and k, dgrad's k and n, wgrad's m and n) left out with all
 * its rows (every op and token count: an unseen model's projection), each row priced from the rest
 * (dm_costs_kernel_us, NS_TABLE joined first as the simulator reads them).
 *   tools/ns_loo --gemm NS_TABLE.csv WORK_TABLE.csv
 * With --rows KIND (bgemm or elem), every row of that kind left out alone and priced from the rest.
 *   tools/ns_loo --rows KIND NS_TABLE.csv WORK_TABLE.csv
 * (built by `make tools/ns_loo`; not installed) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costs.h"
#include "workload.h"

#define MAXLINES 8192
#define MAXSH 1024

static char *lines[MAXLINES];
static int n_lines;

/* The lines of a table into lines[] (n_lines); 1 when it cannot be read. */
static int read_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    if (!f) {
        perror(path);
        return 1;
    }
    n_lines = 0;
    while (n_lines < MAXLINES && fgets(line, sizeof line, f)) lines[n_lines++] = strdup(line);
    fclose(f);
    return 0;
}

static char skip[MAXLINES]; /* the lines load_without leaves out */
static char tmp[64];        /* the table without them: /tmp/ns_loo.PID.csv */

/* The table `tmp` written as lines[] without the lines marked in skip[], then `path` (tmp, or a list
 * naming it) loaded; NULL, said on stderr, when it cannot be. */
static dm_costs *load_without(const char *path)
{
    FILE *o = fopen(tmp, "w");
    dm_costs *c = NULL;
    dm_err err;
    if (!o) {
        perror(tmp);
        return NULL;
    }
    for (int i = 0; i < n_lines; i++)
        if (!skip[i]) fputs(lines[i], o);
    if (fclose(o)) {
        perror(tmp);
        return NULL;
    }
    if (dm_costs_load(path, &c, &err)) {
        fprintf(stderr, "ns_loo: %s\n", err.msg);
        return NULL;
    }
    return c;
}

/* The comma-separated fields of a table line (a copy in buf), at most max of them, into f. */
static int fields(const char *line, char *buf, size_t size, char **f, int max)
{
    int k = 0;
    snprintf(buf, size, "%s", line);
    for (char *t = strtok(buf, ",\n"); t && k < max; t = strtok(NULL, ",\n")) f[k++] = t;
    return k;
}

typedef struct {
    char algo[32];
    long long m, n;
} shape;

/* the fields of an ns row (gpu,op,algo,m,n,batch,dtype,median,...); 0 when the line is not one */
static int ns_row(const char *line, shape *s, int *batch, double *med)
{
    char buf[512], *f[10];
    int k = fields(line, buf, sizeof buf, f, 10);
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
    dm_ns_algo algo = !strncmp(algo_name, "gram", 4) ? DM_NS_GRAM : DM_NS_DIRECT;
    int eager = strstr(algo_name, "eager") != NULL;
    char line[1024], bl[512];
    long long m, n;
    printf("# algo rows cols batch priced_us source (%s)\n", costs);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%lld %lld %511s", &m, &n, bl) != 3) continue;
        for (char *t = strtok(bl, ","); t; t = strtok(NULL, ",")) {
            dm_cost_source src;
            double us = dm_costs_ns_launch_us(c, NULL, m, n, atoi(t), algo, eager, &src);
            printf("%s %lld %lld %d %.1f %s\n", algo_name, m, n, atoi(t), us, dm_cost_source_name(src));
        }
    }
    fclose(f);
    dm_costs_free(c);
    return 0;
}

/* A gemm row of a -2 table: gpu,op,algo,m,n,k,batch,dtype,median_us,...; its op, shape, weight pair. */
static int gemm_row(const char *line, dm_kern_op *op, long long *d, double *med, long long *w)
{
    char buf[512], *f[12];
    int k = fields(line, buf, sizeof buf, f, 12);
    if (k < 9 || line[0] == '#' || strcmp(f[1], "gemm")) return 0;
    int o = dm_kern_op_from_name(f[2]);
    if (o != DM_KOP_FWD && o != DM_KOP_DGRAD && o != DM_KOP_WGRAD) return 0;
    *op = (dm_kern_op)o;
    d[0] = atoll(f[3]), d[1] = atoll(f[4]), d[2] = atoll(f[5]);
    *med = atof(f[8]);
    long long a = o == DM_KOP_WGRAD ? d[0] : d[1], b = o == DM_KOP_WGRAD ? d[1] : d[2];
    w[0] = a < b ? a : b, w[1] = a < b ? b : a;
    return 1;
}

static int gemm_loo(const char *ns_table, const char *work)
{
    if (read_lines(work)) return 1;
    static long long ws[MAXSH][2];
    int n_ws = 0;
    for (int i = 0; i < n_lines; i++) {
        dm_kern_op op;
        long long d[3], w[2];
        double med;
        if (!gemm_row(lines[i], &op, d, &med, w)) continue;
        int seen = 0;
        for (int j = 0; j < n_ws && !seen; j++) seen = ws[j][0] == w[0] && ws[j][1] == w[1];
        if (!seen && n_ws < MAXSH) ws[n_ws][0] = w[0], ws[n_ws][1] = w[1], n_ws++;
    }
    char both[2048];
    snprintf(both, sizeof both, "%s,%s", ns_table, tmp);
    double sum = 0, sq = 0, bias = 0;
    int cnt = 0;
    printf("# op m n k measured_us priced_us error%% source (weight shape left out)\n");
    for (int j = 0; j < n_ws; j++) {
        for (int i = 0; i < n_lines; i++) {
            dm_kern_op op;
            long long d[3], w[2];
            double med;
            skip[i] = gemm_row(lines[i], &op, d, &med, w) && w[0] == ws[j][0] && w[1] == ws[j][1];
        }
        dm_costs *c = load_without(both);
        if (!c) return 1;
        for (int i = 0; i < n_lines; i++) {
            dm_kern_op op;
            long long d[3], w[2];
            double med;
            if (!gemm_row(lines[i], &op, d, &med, w) || w[0] != ws[j][0] || w[1] != ws[j][1]) continue;
            dm_kernel k;
            memset(&k, 0, sizeof k);
            k.kind = DM_KERN_GEMM, k.op = op, k.m = d[0], k.n = d[1], k.k = d[2], k.batch = 1, k.count = 1, k.param = -1;
            k.slot = -1;
            dm_cost_source src;
            double us = dm_costs_kernel_us(c, NULL, &k, &src);
            double e = 100 * (us - med) / med;
            printf("%-6s %6lld %6lld %6lld %9.1f %9.1f %+7.1f %s\n", dm_kern_op_name(op), d[0], d[1], d[2], med, us, e,
                   dm_cost_source_name(src));
            sum += fabs(e), sq += e * e, bias += e, cnt++;
        }
        dm_costs_free(c);
    }
    if (cnt)
        printf("# %d rows of %d weight shapes: mean |error| %.2f%%, rms %.2f%%, mean error %+.2f%%\n", cnt, n_ws, sum / cnt,
               sqrt(sq / cnt), bias / cnt);
    remove(tmp);
    return 0;
}

/* A bgemm or elem row of a -2 table: its kernel; 0 when the line is not one of `kind`. */
static int kernel_row_of(const char *line, const char *kind, dm_kernel *x, double *med)
{
    char buf[512], *f[12];
    int k = fields(line, buf, sizeof buf, f, 12);
    if (k < 9 || line[0] == '#' || strcmp(f[1], kind)) return 0;
    int o = dm_kern_op_from_name(f[2]);
    if (o < 0 || o == DM_KOP_GRAD_CHECK) return 0;
    memset(x, 0, sizeof *x);
    x->kind = !strcmp(kind, "bgemm") ? DM_KERN_BGEMM : DM_KERN_ELEM, x->op = (dm_kern_op)o;
    x->m = atoll(f[3]), x->n = atoll(f[4]), x->k = atoll(f[5]), x->batch = atoll(f[6]), x->count = 1;
    x->param = -1, x->slot = -1;
    *med = atof(f[8]);
    return 1;
}

static int rows_loo(const char *kind, const char *ns_table, const char *work)
{
    char both[2048];
    if (read_lines(work)) return 1;
    snprintf(both, sizeof both, "%s,%s", ns_table, tmp);
    double sum = 0, sq = 0, bias = 0;
    int cnt = 0;
    printf("# op m n k batch measured_us priced_us error%% source (the row left out)\n");
    for (int j = 0; j < n_lines; j++) {
        dm_kernel x;
        double med;
        if (!kernel_row_of(lines[j], kind, &x, &med)) continue;
        for (int i = 0; i < n_lines; i++) skip[i] = i == j;
        dm_costs *c = load_without(both);
        if (!c) return 1;
        dm_cost_source src;
        double us = dm_costs_kernel_us(c, NULL, &x, &src), e = 100 * (us - med) / med;
        printf("%-12s %6lld %6lld %6lld %5lld %9.1f %9.1f %+7.1f %s\n", dm_kern_op_name(x.op), (long long)x.m,
               (long long)x.n, (long long)x.k, (long long)x.batch, med, us, e, dm_cost_source_name(src));
        sum += fabs(e), sq += e * e, bias += e, cnt++;
        dm_costs_free(c);
    }
    if (cnt)
        printf("# %d %s rows: mean |error| %.2f%%, rms %.2f%%, mean error %+.2f%%\n", cnt, kind, sum / cnt, sqrt(sq / cnt),
               bias / cnt);
    remove(tmp);
    return 0;
}

int main(int argc, char **argv)
{
    snprintf(tmp, sizeof tmp, "/tmp/ns_loo.%ld.csv", (long)getpid());
    if (argc == 5 && !strcmp(argv[1], "--rows")) return rows_loo(argv[2], argv[3], argv[4]);
    if (argc == 4 && !strcmp(argv[1], "--gemm")) return gemm_loo(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "--price")) return price_list(argv[2], argv[3], argv[4]);
    if (argc < 2) {
        fprintf(stderr, "usage: tools/ns_loo COSTS.csv [MIN_SIDE] | --price COSTS.csv SHAPES.txt ALGO\n");
        return 2;
    }
    long long min_side = argc > 2 ? atoll(argv[2]) : 512;
    if (read_lines(argv[1])) return 1;
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
    double sum[2] = {0, 0}, sq[2] = {0, 0};
    int cnt[2] = {0, 0};
    printf("# algo m n batch measured_us priced_us error%% source class\n");
    for (int j = 0; j < n_sh; j++) {
        long long lo = sh[j].m < sh[j].n ? sh[j].m : sh[j].n;
        if (lo < min_side) continue;
        dm_ns_algo algo = !strncmp(sh[j].algo, "gram", 4) ? DM_NS_GRAM : DM_NS_DIRECT;
        int eager = strstr(sh[j].algo, "eager") != NULL;
        for (int i = 0; i < n_lines; i++) {
            shape s;
            int b;
            double med;
            skip[i] = ns_row(lines[i], &s, &b, &med) && !strcmp(s.algo, sh[j].algo) && s.m == sh[j].m && s.n == sh[j].n;
        }
        dm_costs *c = load_without(tmp);
        if (!c) return 1;
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
