/* test_program.c: the step program's JSON round trip, its hash, and the validator: a missing
 * collective, a reordered one, a dependency cycle, a cross-rank deadlock, a non-member, bad
 * roots; positioned errors from the reader; programs built by the scheduler validate. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "program.h"
#include "sched.h"
#include "tap.h"

static char dir[] = "/tmp/dmuon_test_program_XXXXXX";

/* Append a collective to the given ranks (all members of group g). */
static int coll(dm_program *p, dm_op_kind k, int g, int root, double bytes, const int *ranks, int n)
{
    dm_op o = dm_op_init(k, DM_STREAM_COMM_HI);
    o.coll = dm_program_new_coll(p);
    o.group = g;
    o.root = root;
    o.bytes = bytes;
    for (int i = 0; i < n; i++)
        if (dm_program_add_op(p, ranks[i], &o, NULL, 0, NULL, 0, NULL) < 0) return -1;
    return o.coll;
}

static int compute(dm_program *p, int r, dm_op_kind k, const int *deps, int nd)
{
    dm_op o = dm_op_init(k, DM_STREAM_COMPUTE);
    int64_t params[2] = {3, 7};
    o.flops = 1e9;
    o.layer = 0;
    return dm_program_add_op(p, r, &o, deps, nd, params, 2, NULL);
}

/* 3 ranks: broadcast (world, root 1), forward waiting on it, reduce (world, root 0), NS on 0. */
static dm_program *small(int *world_out)
{
    dm_program *p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "test", 128, NULL);
    int all[3] = {0, 1, 2};
    int w = dm_program_group(p, all, 3, NULL);
    coll(p, DM_OP_BROADCAST, w, 1, 4096, all, 3);
    for (int r = 0; r < 3; r++) {
        int d = 0;
        compute(p, r, DM_OP_FORWARD, &d, 1);
        compute(p, r, DM_OP_BACKWARD, NULL, 0);
    }
    coll(p, DM_OP_REDUCE, w, 0, 4096, all, 3);
    dm_op ns = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
    ns.m = 32;
    ns.n = 64;
    ns.batch = 2;
    ns.algo = DM_NS_GRAM;
    int d = 3;
    dm_program_add_op(p, 0, &ns, &d, 1, NULL, 0, NULL);
    if (world_out) *world_out = w;
    return p;
}

static char *to_string(const dm_program *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    dm_program_write_json(p, f, NULL);
    fclose(f);
    return buf;
}

static void expect_invalid(dm_program *p, const char *want, const char *what)
{
    dm_err err = {{0}};
    int rc = dm_program_validate(p, &err);
    ok(rc == -1 && strstr(err.msg, want), "%s rejected: \"%s\" (got: %s)", what, want, err.msg);
    dm_program_free(p);
}

int main(void)
{
    dm_err err = {{0}};
    if (!mkdtemp(dir)) return tap_skip_all("no temp dir");
    char path[600];
    snprintf(path, sizeof path, "%s/p.json", dir);

    dm_program *p = small(NULL);
    ok(dm_program_validate(p, &err) == 0, "small program validates (%s)", err.msg);
    ok(dm_program_save(p, path, &err) == 0, "save");
    dm_program *q = NULL;
    ok(dm_program_load(path, &q, &err) == 0, "load back (%s)", q ? "" : err.msg);
    if (q) {
        char *a = to_string(p), *b = to_string(q);
        ok(strcmp(a, b) == 0, "JSON round trip is byte-identical");
        ok(dm_program_hash(p) == dm_program_hash(q), "equal hashes");
        ok(q->ranks[0].ops[4].algo == DM_NS_GRAM && q->ranks[0].ops[4].batch == 2 && q->ranks[1].ops[1].n_params == 2,
           "fields survive (algo, batch, params)");
        free(a);
        free(b);
        q->ranks[2].ops[0].bytes = 4097;
        ok(dm_program_hash(p) != dm_program_hash(q), "hash changes with one op's bytes");
        dm_program_free(q);
    }
    dm_program_free(p);

    /* a collective missing on a member */
    p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    int all[3] = {0, 1, 2}, two[2] = {0, 1};
    int w = dm_program_group(p, all, 3, NULL);
    coll(p, DM_OP_ALLREDUCE, w, -1, 100, two, 2);
    expect_invalid(p, "is missing on member rank 2", "missing collective");

    /* reordered: rank 1 holds the two world collectives in the other order */
    p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    w = dm_program_group(p, all, 3, NULL);
    {
        dm_op a = dm_op_init(DM_OP_BROADCAST, DM_STREAM_COMM_HI), b = dm_op_init(DM_OP_BROADCAST, DM_STREAM_COMM_HI);
        a.coll = dm_program_new_coll(p);
        b.coll = dm_program_new_coll(p);
        a.group = b.group = w;
        a.root = 0;
        b.root = 1;
        for (int r = 0; r < 3; r++) {
            dm_program_add_op(p, r, r == 1 ? &b : &a, NULL, 0, NULL, 0, NULL);
            dm_program_add_op(p, r, r == 1 ? &a : &b, NULL, 0, NULL, 0, NULL);
        }
    }
    expect_invalid(p, "order the group's collectives differently", "reordered collective");

    /* a dependency on a later op */
    p = small(NULL);
    p->ranks[1].ops[1].deps[0] = 2;
    expect_invalid(p, "rank 1 op 1 (forward): dependency on op 2", "dependency cycle");

    /* cross-group deadlock: per-group orders agree, but rank 1 runs B before A on one stream */
    p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    {
        int g1 = dm_program_group(p, two, 2, NULL), g2 = dm_program_group(p, all, 3, NULL);
        dm_op a = dm_op_init(DM_OP_ALLREDUCE, DM_STREAM_COMM_LO), b = dm_op_init(DM_OP_ALLREDUCE, DM_STREAM_COMM_LO);
        a.coll = dm_program_new_coll(p);
        b.coll = dm_program_new_coll(p);
        a.group = g1;
        b.group = g2;
        dm_program_add_op(p, 0, &a, NULL, 0, NULL, 0, NULL);
        dm_program_add_op(p, 0, &b, NULL, 0, NULL, 0, NULL);
        dm_program_add_op(p, 1, &b, NULL, 0, NULL, 0, NULL);
        dm_program_add_op(p, 1, &a, NULL, 0, NULL, 0, NULL);
        dm_program_add_op(p, 2, &b, NULL, 0, NULL, 0, NULL);
    }
    expect_invalid(p, "form a cycle (deadlock)", "cross-rank deadlock");

    /* a collective on a rank outside its group, and a root outside the group */
    p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    {
        int g = dm_program_group(p, two, 2, NULL);
        coll(p, DM_OP_ALLGATHER, g, -1, 10, all, 3);
    }
    expect_invalid(p, "which is not in its group", "non-member");
    p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    {
        int g = dm_program_group(p, two, 2, NULL);
        coll(p, DM_OP_BROADCAST, g, 2, 10, two, 2);
    }
    expect_invalid(p, "root 2 is not a member", "root outside the group");
    p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    {
        w = dm_program_group(p, all, 3, NULL);
        dm_op o = dm_op_init(DM_OP_ALLREDUCE, DM_STREAM_COMM_LO);
        o.coll = dm_program_new_coll(p);
        o.group = w;
        for (int r = 0; r < 3; r++) {
            o.bytes = r == 2 ? 8 : 16;
            dm_program_add_op(p, r, &o, NULL, 0, NULL, 0, NULL);
        }
    }
    expect_invalid(p, "rank 2 op 0: collective 0 is all-reduce (group 0, root -1, 8 bytes)", "mismatched sizes");

    /* reader: positioned errors */
    FILE *f = fopen(path, "w");
    fputs("{\"format\": \"dmuon-program-1\", \"nranks\": 1, \"gpus_per_node\": 1, \"groups\": [],\n"
          " \"ranks\": [{\"rank\": 0, \"ops\": [{\"id\": 0, \"kind\": \"teleport\", \"stream\": \"compute\"}]}]}\n", f);
    fclose(f);
    q = NULL;
    ok(dm_program_load(path, &q, &err) == -1 && strstr(err.msg, "p.json:2:50: expected a known kind"),
       "unknown kind named with line and column (%s)", err.msg);
    f = fopen(path, "w");
    fputs("{\"format\": \"dmuon-program-1\", \"nranks\": 2, \"gpus_per_node\": 1, \"groups\": [],\n"
          " \"ranks\": [{\"rank\": 0, \"ops\": []}]}\n", f);
    fclose(f);
    ok(dm_program_load(path, &q, &err) == -1 && strstr(err.msg, "p.json:2:11: expected 2 rank entries"),
       "rank count checked (%s)", err.msg);

    f = fopen(path, "w");
    fputs("{\"nranks\": 1, \"gpus_per_node\": 1, \"groups\": []}\n", f);
    fclose(f);
    ok(dm_program_load(path, &q, &err) == -1 && strstr(err.msg, "p.json:1:45: expected \"format\""),
       "format required before groups (%s)", err.msg);

    f = fopen(path, "w");
    fputs("{\"format\": \"dmuon-program-1\", \"nranks\": 2, \"gpus_per_node\": 2,\n \"groups\": [[0, 1], [1, 1]],\n"
          " \"ranks\": [{\"rank\": 0, \"ops\": []}, {\"rank\": 1, \"ops\": []}]}\n", f);
    fclose(f);
    ok(dm_program_load(path, &q, &err) == -1 && strstr(err.msg, "p.json:2:21: expected distinct ranks in a group (rank 1"),
       "a group naming a rank twice is rejected (%s)", err.msg);

    /* every truncation of a valid program is rejected with a message, never a crash */
    p = small(NULL);
    char *text = to_string(p);
    size_t len = strlen(text);
    int all_rejected = 1;
    for (size_t cut = 0; cut + 2 < len; cut += 7) {
        f = fopen(path, "w");
        fwrite(text, 1, cut, f);
        fclose(f);
        q = NULL;
        err.msg[0] = 0;
        if (dm_program_load(path, &q, &err) != -1 || q || !strstr(err.msg, "p.json")) all_rejected = 0;
        dm_program_free(q);
    }
    ok(all_rejected, "every truncated program file is rejected with a positioned message");
    free(text);
    dm_program_free(p);

    /* programs from the scheduler validate and round-trip, for every strategy */
    dm_model *m = NULL;
    dm_cluster cl;
    dm_costs *costs = dm_costs_roofline(dm_gpu_find("H200"), &err);
    if (dm_model_load("qwen2.5-0.5b", &m, &err) == 0 && dm_cluster_load("h200", &cl, &err) == 0) {
        for (int s = SCHED_ADAMW; s <= SCHED_DMUON; s++) {
            sched_opts o;
            sched_opts_default(&o);
            o.strategy = (sched_strategy)s;
            o.zero = s == SCHED_ADAMW ? 3 : 2;
            p = NULL;
            int rc = sched_build(m, &cl, 4, costs, &o, &p, NULL, &err);
            ok(rc == 0 && dm_program_validate(p, &err) == 0, "%s program validates (%s)", sched_strategy_name(o.strategy),
               rc ? err.msg : "");
            q = NULL;
            if (p && dm_program_save(p, path, &err) == 0 && dm_program_load(path, &q, &err) == 0)
                ok(dm_program_hash(p) == dm_program_hash(q), "%s program round-trips with its hash",
                   sched_strategy_name(o.strategy));
            else
                ok(0, "%s program round trip (%s)", sched_strategy_name(o.strategy), err.msg);
            dm_program_free(p);
            dm_program_free(q);
        }
    } else {
        tap_diag("bundled model not found: %s", err.msg);
    }
    dm_model_free(m);
    dm_costs_free(costs);
    unlink(path);
    rmdir(dir);
    return tap_done();
}
