/* test_real_bench.c: the collective benchmark (real_bench.c) on the CPU backend under MPI (run
 * by tests/real_cpu.sh with mpirun): every size of every collective of the table is checked
 * element by element (#wrong 0), the CSV has one row per (collective, size) with positive times,
 * and its bus bandwidth is the table's factor times the algorithm bandwidth. */
#include "config.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "real.h"
#include "tap.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char csv[128];
    snprintf(csv, sizeof csv, "/tmp/dmuon-test-bench-%d.csv", (int)getppid());
    real_bench_opts o;
    real_bench_opts_default(&o);
    o.gpu = 0;
    o.min_bytes = 1024;
    o.max_bytes = 256 * 1024;
    o.step_factor = 4;
    o.iters = 2;
    o.warmup = 1;
    o.timeout_s = 60;
    o.csv_path = csv;
    dm_err err = {{0}};
    FILE *null = fopen("/dev/null", "w"); /* the table would break the TAP stream */
    int rc = real_bench_comm(&o, null ? null : stdout, &err);
    if (null) fclose(null);
    MPI_Finalize();
    if (rank != 0) return rc == 0 ? 0 : 1;
    FILE *f = fopen(csv, "r");
    int rows = 0, bad_rows = 0, wrong = 0, bus_ok = 1;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || !strncmp(line, "coll,", 5)) continue;
        char name[32];
        double bytes, t, alg, bus;
        long count, w;
        int nr;
        if (sscanf(line, "%31[^,],%lf,%ld,%d,%lf,%lf,%lf,%ld", name, &bytes, &count, &nr, &t, &alg, &bus, &w) != 8 ||
            !(t > 0)) {
            bad_rows++;
        } else {
            wrong += w != 0;
            const dm_coll *c = NULL;
            for (int k = 0; k < DM_OP__COUNT && !c; k++)
                if (!strcmp(name, dm_op_kind_name((dm_op_kind)k))) c = dm_coll_of((dm_op_kind)k);
            if (!c || fabs(bus - alg * dm_coll_busbw_factor(c, nr)) > 1e-3 * (alg + 1e-9) + 1e-4) bus_ok = 0;
        }
        rows++;
    }
    if (f) fclose(f);
    remove(csv);
    ok(rc == 0, "bench comm exits 0 (every element of every collective right) (%s)", rc ? err.msg : "");
    ok(rows == 5 * 5, "CSV: 5 collectives x 5 sizes (got %d rows)", rows);
    ok(bad_rows == 0 && wrong == 0, "CSV rows parse, positive times, #wrong 0");
    ok(bus_ok, "busbw = algbw x the table's bus factor on %d ranks", n);
    return tap_done();
}
