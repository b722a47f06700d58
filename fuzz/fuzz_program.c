/* fuzz_program.c: libFuzzer harness for step-program files (core/program_io.c, the plan JSON
 * that `dmuon plan -o` writes and `dmuon sim --program` / `dmuon run` read).
 * A rejected file must come with a message. An accepted program must save and reload to the
 * same hash and the same bytes; when it also passes dm_program_validate (what the consumers
 * call before running it) and is small, the simulator must run it on an 8-GPU preset with
 * finite, non-negative op times. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "fuzz_util.h"
#include "program.h"
#include "sim.h"

#define MAX_SIM_OPS 4096

static void simulate(const dm_program *p)
{
    long ops = 0;
    for (int r = 0; r < p->nranks; r++) ops += p->ranks[r].n_ops;
    if (ops > MAX_SIM_OPS || p->nranks > 64) return;
    dm_cluster c;
    dm_err err = {{0}};
    FUZZ_CHECK(dm_cluster_load("h200", &c, &err) == 0);
    sim_opts o;
    sim_opts_default(&o);
    sim_result *res = NULL;
    if (sim_run(p, &c, &o, &res, &err) != 0) {
        FUZZ_CHECK(err.msg[0]); /* a program the simulator cannot run is refused, with a reason */
        return;
    }
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
            double s = sim_op_start(res, r, i), e = sim_op_end(res, r, i);
            FUZZ_CHECK(isfinite(s) && isfinite(e) && s >= 0 && e >= s);
        }
    sim_result_free(res);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    const char *path = fuzz_tmp_path("program.json");
    const char *p1 = fuzz_tmp_path("saved1.json"), *p2 = fuzz_tmp_path("saved2.json");
    fuzz_write_file(path, d, n);
    dm_program *p = NULL, *q = NULL;
    dm_err err = {{0}};
    if (dm_program_load(path, &p, &err) != 0) {
        FUZZ_CHECK(p == NULL && err.msg[0]);
        return 0;
    }
    FUZZ_CHECK(p->nranks >= 1 && p->ranks != NULL);
    FUZZ_CHECK(dm_program_save(p, p1, &err) == 0);
    if (dm_program_load(p1, &q, &err) != 0) fprintf(stderr, "reload failed: %s\n", err.msg);
    FUZZ_CHECK(q != NULL);
    FUZZ_CHECK(dm_program_hash(p) == dm_program_hash(q));
    FUZZ_CHECK(dm_program_save(q, p2, &err) == 0);
    FUZZ_CHECK(fuzz_files_equal(p1, p2));
    dm_program_free(q);
    err.msg[0] = 0;
    if (dm_program_validate(p, &err) == 0) simulate(p);
    else FUZZ_CHECK(err.msg[0]);
    dm_program_free(p);
    return 0;
}
