/* tools/power_along.c: the power model (core/power.h dm_power_along, the one `dmuon calibrate`
 * runs along a trace) along a sequence of compute ops read from stdin, for tools/clock_fit.py:
 * each line "t0_us dur_us flops bytes full_us" (full_us: the op's time at its own full clock,
 * whose rate sets its demand); prints each op's mean clock fraction s, one per line. The power
 * keys come from a cluster with a calibration applied; --tau, --tau-fall and --hold replace its
 * time constants and hold (ms), --gap sets the idle between passes (us), --passes how many times
 * round (default 2).
 *   tools/power_along CLUSTER CALIB [--tau MS] [--tau-fall MS] [--hold MS] [--gap US] [--passes N] < OPS
 * (built by `make tools/power_along`) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "cluster.h"
#include "power.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s CLUSTER CALIB [--tau MS] [--tau-fall MS] [--hold MS] [--gap US] [--passes N] < OPS\n", argv[0]);
        return 2;
    }
    dm_err err = {0};
    dm_cluster c;
    calib_info info;
    if (dm_cluster_load(argv[1], &c, &err) < 0 || calib_apply(argv[2], &c, &info, &err) < 0) {
        fprintf(stderr, "power_along: %s\n", err.msg);
        return 1;
    }
    double gap = 0;
    int passes = 2;
    for (int i = 3; i + 1 < argc; i += 2) {
        double v = atof(argv[i + 1]);
        if (!strcmp(argv[i], "--tau")) c.power.tau_ms = v;
        else if (!strcmp(argv[i], "--tau-fall")) c.power.tau_fall_ms = v;
        else if (!strcmp(argv[i], "--hold")) c.power.hold_ms = v;
        else if (!strcmp(argv[i], "--gap")) gap = v;
        else if (!strcmp(argv[i], "--passes")) passes = (int)v;
        else {
            fprintf(stderr, "power_along: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!dm_power_on(&c.power)) {
        fprintf(stderr, "power_along: %s holds no complete power model\n", argv[2]);
        return 1;
    }
    int n = 0, cap = 0;
    dm_power_op *ops = NULL;
    double t0, d, fl, by, full;
    while (scanf("%lf %lf %lf %lf %lf", &t0, &d, &fl, &by, &full) == 5) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            dm_power_op *m = realloc(ops, (size_t)cap * sizeof *m);
            if (!m) return fprintf(stderr, "power_along: out of memory\n"), 1;
            ops = m;
        }
        ops[n++] = (dm_power_op){t0, d, dm_power_demand(&c.power, fl, by, full), 1};
    }
    dm_power_along(&c.power, ops, n, gap, passes);
    for (int i = 0; i < n; i++) printf("%.6f\n", ops[i].s);
    free(ops);
    return 0;
}
