/* test_real_bench.c: the collective benchmark (real_bench.c) on the CPU backend under MPI (run
 * by tests/real_cpu.sh with mpirun): every size of every collective is checked element by
 * element (#wrong 0), and the CSV has one row per (collective, size) with positive times. */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "real.h"
#include "tap.h"

int main(int argc, char **argv)
{
    (void)argc;
    char csv[128];
    snprintf(csv, sizeof csv, "/tmp/dmuon-test-bench-%d.csv", (int)getppid());
    char *args[] = {"comm", "--backend", "cpu", "--min-bytes", "1K", "--max-bytes", "256K", "--step-factor", "4",
                    "--iters", "2", "--warmup", "1", "--csv", csv, NULL};
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* the benchmark's table would break the TAP stream: send it to /dev/null, keep fd 1 */
    fflush(stdout);
    int saved = dup(1), null = open("/dev/null", O_WRONLY);
    if (saved < 0 || null < 0 || dup2(null, 1) < 0) return 1;
    int rc = real_bench_comm(15, args); /* finalizes MPI; rank 0 checks its outputs after */
    fflush(stdout);
    dup2(saved, 1);
    close(null);
    if (rank != 0) return rc;
    FILE *f = fopen(csv, "r");
    int rows = 0, bad_rows = 0, wrong = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || !strncmp(line, "coll,", 5)) continue;
        char name[32];
        double bytes, t, alg, bus;
        long count, w;
        int n;
        if (sscanf(line, "%31[^,],%lf,%ld,%d,%lf,%lf,%lf,%ld", name, &bytes, &count, &n, &t, &alg, &bus, &w) != 8 ||
            !(t > 0))
            bad_rows++;
        else
            wrong += w != 0;
        rows++;
    }
    if (f) fclose(f);
    remove(csv);
    ok(rc == 0, "bench comm exits 0 (every element of every collective right)");
    ok(rows == 5 * 5, "CSV: 5 collectives x 5 sizes (got %d rows)", rows);
    ok(bad_rows == 0 && wrong == 0, "CSV rows parse, positive times, #wrong 0");
    return tap_done();
}
