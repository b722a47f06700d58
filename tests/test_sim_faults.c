/* test_sim_faults.c: allocation fault injection over the simulator (SQLite style): for each
 * n = 1, 2, ... the n-th allocation through dm_malloc/dm_calloc/dm_realloc/dm_strdup fails (once,
 * then again with every later one failing), until a run completes without reaching n. Every
 * injected failure must make sim_run return -1 with "out of memory" and a NULL result, and free
 * what it allocated (leaks show under valgrind and the sanitizer build); a run that is not hit
 * must give the unfaulted step time. */
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "dm_error.h"
#include "program.h"
#include "sim.h"
#include "tap.h"

/* A small program: 16 ranks on two nodes, forward/NS/AdamW ops and collectives over the world
 * and over each node, on two streams, so every allocation path of setup, run and results runs. */
static dm_program *program(dm_err *err)
{
    dm_program *p = dm_program_new(16, 8, "faults", "t", "a800", "", 1, err);
    if (!p) return NULL;
    int world[16], node[2][8];
    for (int i = 0; i < 16; i++) world[i] = i, node[i / 8][i % 8] = i;
    int gw = dm_program_group(p, world, 16, err), gn[2] = {dm_program_group(p, node[0], 8, err),
                                                           dm_program_group(p, node[1], 8, err)};
    for (int layer = 0; layer < 4; layer++) {
        dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
        f.flops = 1e11;
        f.layer = layer;
        dm_op c = dm_op_init(layer % 2 ? DM_OP_ALLREDUCE : DM_OP_BROADCAST, DM_STREAM_COMM_HI);
        c.coll = dm_program_new_coll(p);
        c.group = gw;
        c.bytes = 1e7;
        c.root = layer % 2 ? -1 : 0;
        dm_op n0 = dm_op_init(DM_OP_ALLGATHER, DM_STREAM_COMM_LO), n1 = n0; /* one per node */
        n0.coll = dm_program_new_coll(p), n1.coll = dm_program_new_coll(p);
        n0.group = gn[0], n1.group = gn[1];
        n0.bytes = n1.bytes = 1e6;
        dm_op ns = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
        ns.m = 1024, ns.n = 4096, ns.batch = 2;
        dm_op a = dm_op_init(DM_OP_ADAMW, DM_STREAM_COMPUTE);
        a.bytes = 28e6;
        for (int r = 0; r < 16; r++) {
            int fid = dm_program_add_op(p, r, &f, NULL, 0, NULL, 0, err);
            int cid = dm_program_add_op(p, r, &c, &fid, 1, NULL, 0, err);
            dm_program_add_op(p, r, &ns, &cid, 1, NULL, 0, err);
            dm_program_add_op(p, r, &a, NULL, 0, NULL, 0, err);
            dm_program_add_op(p, r, r < 8 ? &n0 : &n1, NULL, 0, NULL, 0, err);
        }
    }
    return p;
}

int main(void)
{
    dm_err err = {{0}};
    dm_cluster c;
    dm_program *p = NULL;
    if (dm_cluster_load("a800", &c, &err) || !(p = program(&err)) || dm_program_validate(p, &err)) {
        printf("Bail out! %s\n", err.msg);
        return 1;
    }
    sim_opts o;
    sim_opts_default(&o);
    o.record_trace = 1;
    sim_result *r;
    if (sim_run(p, &c, &o, &r, &err)) {
        printf("Bail out! %s\n", err.msg);
        return 1;
    }
    double want = r->step_us;
    sim_result_free(r);
    for (int sticky = 0; sticky <= 1; sticky++) {
        int n, bad = 0, hit = 0;
        for (n = 1; n < 100000; n++) {
            dm_fault_alloc_arm(n, sticky);
            r = NULL;
            memset(&err, 0, sizeof err);
            int rc = sim_run(p, &c, &o, &r, &err);
            int fired = dm_fault_alloc_fired();
            dm_fault_alloc_arm(0, 0);
            if (!fired) {
                ok(rc == 0 && r && r->step_us == want, "%s: a run past the last allocation (n = %d) succeeds with the same step",
                   sticky ? "sticky" : "once", n);
                sim_result_free(r);
                break;
            }
            hit++;
            if (rc != -1 || r != NULL || !strstr(err.msg, "out of memory")) {
                if (!bad) printf("# n = %d: rc %d, result %p, message \"%s\"\n", n, rc, (void *)r, err.msg);
                bad++;
                sim_result_free(r);
            }
        }
        ok(bad == 0 && hit > 20, "%s: each of %d injected failures returns -1, no result, \"out of memory\"",
           sticky ? "sticky" : "once", hit);
    }
    dm_program_free(p);
    return tap_done();
}
