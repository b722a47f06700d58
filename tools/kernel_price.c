/* tools/kernel_price.c: every forward/backward kernel of a one-rank step priced by a cost table
 * (dm_costs_kernel_us, the simulator's price of each kernel before clocks, gaps and launches of
 * the op around it), beside the same kernels as the executor timed them in a step
 * (DMUON_KERNEL_TIMES=FILE dmuon run ...: layer,pass,index,kind,op,m,n,k,batch,count,param,us and the
 * operands' addresses mod 4 KiB, not read here),
 * summed per pass and kernel op: where a step's compute and its rows part.
 *   tools/kernel_price MODEL STRATEGY TOKENS COSTS KERNEL_TIMES.csv [--layer L]
 * (built by `make tools/kernel_price`; with --layer, every kernel of layer L on its own line) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "costs.h"
#include "model.h"
#include "program.h"
#include "sched.h"
#include "workload.h"

#define MAXL 512
#define MAXK 1024
#define MAXN 64

static double meas[MAXL][2][MAXK]; /* us by layer, pass (0 fwd, 1 bwd), kernel index; summed over steps */
static int steps_seen[MAXL][2][MAXK];

static int read_times(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    if (!f || !fgets(line, sizeof line, f)) {
        fprintf(stderr, "kernel_price: %s: cannot read\n", path);
        if (f) fclose(f);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        char *fld[12];
        int n = 0;
        for (char *t = strtok(line, ",\n"); t && n < 12; t = strtok(NULL, ",\n")) fld[n++] = t;
        if (n < 12) continue;
        int l = atoi(fld[0]), b = fld[1][0] == 'b', i = atoi(fld[2]);
        if (l < 0 || l >= MAXL || i < 0 || i >= MAXK) continue;
        meas[l][b][i] += atof(fld[11]);
        steps_seen[l][b][i]++;
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: tools/kernel_price MODEL STRATEGY TOKENS COSTS KERNEL_TIMES.csv [--layer L]\n");
        return 2;
    }
    int show = argc >= 8 && !strcmp(argv[6], "--layer") ? atoi(argv[7]) : -1;
    dm_err err = {{0}};
    dm_model *m = NULL;
    dm_cluster cl;
    dm_costs *costs = NULL;
    dm_program *p = NULL;
    sched_opts so;
    sched_opts_default(&so);
    if (dm_model_load(argv[1], &m, &err) || dm_cluster_load("h200", &cl, &err) ||
        dm_costs_load(argv[4], &costs, &err) || sched_opts_parse(&so, "strategy", argv[2], &err) ||
        sched_opts_parse(&so, "tokens", argv[3], &err) || sched_opts_parse(&so, "balance", "lpt", &err) ||
        sched_build(m, &cl, 1, costs, &so, &p, NULL, &err) < 0) {
        fprintf(stderr, "kernel_price: %s\n", err.msg);
        return 1;
    }
    if (read_times(argv[5])) return 1;
    double sum[MAXN][2] = {{0}};
    int cnt[MAXN] = {0}, nn = 0;
    char names[MAXN][40];
    for (int k = 0; k < p->ranks[0].n_ops; k++) {
        const dm_op *op = &p->ranks[0].ops[k];
        if (op->work < 0 || (op->kind != DM_OP_FORWARD && op->kind != DM_OP_BACKWARD)) continue;
        const dm_work *w = &p->works[op->work];
        int b = op->kind == DM_OP_BACKWARD, l = op->layer;
        for (int i = 0; i < w->n; i++) {
            dm_cost_source src;
            double pr = dm_costs_kernel_us(costs, cl.gpu, &w->k[i], &src);
            int ok = l >= 0 && l < MAXL && i < MAXK && steps_seen[l][b][i] > 0;
            double ms = ok ? meas[l][b][i] / steps_seen[l][b][i] : 0;
            char nm[40];
            snprintf(nm, sizeof nm, "%s %s %s", b ? "bwd" : "fwd", dm_kern_kind_name(w->k[i].kind), dm_kern_op_name(w->k[i].op));
            int j = 0;
            while (j < nn && strcmp(names[j], nm)) j++;
            if (j == nn && nn < MAXN) snprintf(names[nn++], sizeof names[0], "%s", nm);
            if (j < MAXN) sum[j][0] += ms, sum[j][1] += pr, cnt[j]++;
            if (l == show)
                printf("layer %d %-24s m %6lld n %6lld k %6lld batch %4lld count %3lld: in step %9.2f us, priced %9.2f us\n", l, nm,
                       (long long)w->k[i].m, (long long)w->k[i].n, (long long)w->k[i].k, (long long)w->k[i].batch,
                       (long long)w->k[i].count, ms, pr);
        }
    }
    printf("# %s %s, %s tokens, one rank: kernels in the step (mean over the steps timed) against %s\n", argv[1], argv[2],
           argv[3], dm_costs_describe(costs));
    double tot[2][2] = {{0}};
    int tn[2] = {0};
    for (int j = 0; j < nn; j++) {
        printf("%-24s %5d kernels  in step %10.1f us  priced %10.1f us  priced / in step %.3f\n", names[j], cnt[j], sum[j][0],
               sum[j][1], sum[j][0] > 0 ? sum[j][1] / sum[j][0] : 0);
        int b = names[j][0] == 'b';
        tot[b][0] += sum[j][0], tot[b][1] += sum[j][1], tn[b] += cnt[j];
    }
    for (int b = 0; b < 2; b++)
        printf("%-24s %5d kernels  in step %10.1f us  priced %10.1f us  priced / in step %.3f\n", b ? "bwd all" : "fwd all",
               tn[b], tot[b][0], tot[b][1], tot[b][0] > 0 ? tot[b][1] / tot[b][0] : 0);
    dm_program_free(p);
    dm_costs_free(costs);
    dm_model_free(m);
    return 0;
}
