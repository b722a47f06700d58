/* test_program.c: the step program's JSON round trip, its hash, and the validator: a missing
 * collective, a reordered one, a dependency cycle, a cross-rank deadlock, a non-member, bad
 * roots, payloads and NS iterations; positioned errors from the reader; counts in a file checked
 * against its data (n_colls, nranks, many groups); old files without payload and iters read as
 * those ops ran; programs built by the scheduler validate and state what the file implies. */
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
    FILE *f;
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
        dm_program_own_rank(q, 2, NULL); /* its list alone, not the ranks' shared one */
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

    /* ranks 1 and 2 follow rank 0's list (every op added equals rank 0's): the collective of
     * group {0, 1} on rank 2 too is refused there, by the check on the followers */
    p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    {
        int g01 = dm_program_group(p, two, 2, NULL);
        coll(p, DM_OP_ALLREDUCE, g01, -1, 100, all, 3);
        ok(p->ranks[2].share == 0, "rank 2 shares rank 0's list");
        expect_invalid(p, "rank 2 op 0 (all-reduce): collective 0 on rank 2, which is not in its group", "a follower outside the group");
    }

    /* a collective on compute-lo (the second compute stream runs compute ops only) */
    p = dm_program_new(2, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    {
        int two[2] = {0, 1}, g2 = dm_program_group(p, two, 2, NULL);
        dm_op b = dm_op_init(DM_OP_BROADCAST, DM_STREAM_COMPUTE_LO);
        b.coll = dm_program_new_coll(p), b.group = g2, b.root = 0, b.bytes = 64;
        dm_program_add_op(p, 0, &b, NULL, 0, NULL, 0, NULL);
        dm_program_add_op(p, 1, &b, NULL, 0, NULL, 0, NULL);
    }
    expect_invalid(p, "a collective on compute-lo", "a broadcast on compute-lo");

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

    /* a part (HSDP's flat parts): only on a broadcast or reduce, inside [0, parts), the same on
     * every member; a part survives a round trip */
    for (int c = 0; c < 3; c++) {
        p = dm_program_new(3, 2, "tiny", "dmuon", "h200", "", 128, NULL);
        w = dm_program_group(p, all, 3, NULL);
        dm_op a = dm_op_init(c == 1 ? DM_OP_ALLGATHER : DM_OP_BROADCAST, DM_STREAM_COMM_HI);
        a.coll = dm_program_new_coll(p);
        a.group = w;
        a.root = c == 1 ? -1 : 0;
        a.part = c == 0 ? 2 : 1, a.parts = 2;
        for (int r = 0; r < 3; r++) {
            if (c == 2) a.part = r == 2 ? 0 : 1; /* rank 2 disagrees */
            dm_program_add_op(p, r, &a, NULL, 0, NULL, 0, NULL);
        }
        expect_invalid(p, c == 0 ? "expected part in [0, parts)" : c == 1 ? "only a broadcast, a reduce or an all-reduce"
                                                                         : "part 0 of 2) but",
                       c == 0 ? "part out of range" : c == 1 ? "part of an all-gather" : "members disagree on the part");
    }
    {
        p = dm_program_new(2, 2, "tiny", "dmuon", "h200", "", 128, NULL);
        w = dm_program_group(p, two, 2, NULL);
        dm_op a = dm_op_init(DM_OP_REDUCE, DM_STREAM_COMM_LO);
        a.coll = dm_program_new_coll(p);
        a.group = w, a.root = 1, a.part = 1, a.parts = 3, a.bytes = 64;
        for (int r = 0; r < 2; r++) dm_program_add_op(p, r, &a, NULL, 0, NULL, 0, NULL);
        dm_program *b = NULL;
        ok(dm_program_validate(p, &err) == 0 && dm_program_save(p, path, &err) == 0 &&
               dm_program_load(path, &b, &err) == 0 && b->ranks[1].ops[0].part == 1 && b->ranks[1].ops[0].parts == 3 &&
               dm_program_hash(b) == dm_program_hash(p),
           "a reduce of part 1 of 3 validates and round-trips (%s)", err.msg);
        dm_program_free(b);
        dm_program_free(p);
    }

    /* a split NS (--ns-split): per rank the Gram stage, the gram all-reduce, the step; the stage
     * and the gram payload round-trip and change the hash; each rule of the validator refused */
    for (int c = 0; c < 7; c++) {
        p = dm_program_new(2, 2, "tiny", "dmuon", "h200", "", 128, NULL);
        w = dm_program_group(p, two, 2, NULL);
        int64_t q = 5;
        int ar_coll = dm_program_new_coll(p);
        for (int r = 0; r < 2; r++) {
            dm_op g = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
            g.m = 64, g.n = 64, g.part = r, g.parts = 2, g.stage = 0;
            if (c == 2) g.batch = 2;                 /* a split NS of one matrix */
            if (c == 3) g.stage = 10;                /* stages 0 .. 2 iters - 1 */
            if (c == 4) g.n = 128;                   /* wide and not tall: no row slices */
            int gid = dm_program_add_op(p, r, &g, NULL, 0, &q, 1, NULL);
            dm_op a = dm_op_init(c == 1 ? DM_OP_REDUCE : DM_OP_ALLREDUCE, DM_STREAM_COMM_HI);
            a.coll = ar_coll, a.group = w, a.bytes = 64.0 * 64 * 2, a.payload = DM_PAYLOAD_GRAM;
            if (c == 1) a.root = 0;                  /* a gram moves by all-reduce only */
            int aid = dm_program_add_op(p, r, &a, &gid, 1, &q, 1, NULL);
            g.stage = c == 5 ? 0 : 1;
            if (c == 6) g.kind = DM_OP_ADAMW, g.stage = 0, g.iters = 0; /* parts on an op that has none */
            dm_program_add_op(p, r, &g, &aid, 1, &q, 1, NULL);
        }
        if (c == 0) {
            dm_program *b = NULL;
            uint64_t h = dm_program_hash(p);
            ok(dm_program_validate(p, &err) == 0 && dm_program_save(p, path, &err) == 0 &&
                   dm_program_load(path, &b, &err) == 0 && b->ranks[1].ops[2].stage == 1 &&
                   b->ranks[1].ops[1].payload == DM_PAYLOAD_GRAM && dm_program_hash(b) == h,
               "a split NS (stages, gram all-reduce) validates and round-trips (%s)", err.msg);
            p->ranks[0].ops[2].stage = 3, p->ranks[1].ops[2].stage = 3;
            ok(dm_program_hash(p) != h, "the stage is in the hash");
            dm_program_free(b);
            dm_program_free(p);
            continue;
        }
        static const char *want[] = {"", "a gram is the all-reduce of one param", "a split ns is the direct NS",
                                     "a split ns is the direct NS", "a split ns is the direct NS", "",
                                     "only a broadcast, a reduce, an all-reduce, a split ns"};
        if (c == 5) { /* two stage-0 ops on a rank: valid as a program (the executors' order is theirs) */
            ok(dm_program_validate(p, &err) == 0, "a repeated stage is the program's business (%s)", err.msg);
            dm_program_free(p);
            continue;
        }
        expect_invalid(p, want[c], c == 1 ? "a gram on a reduce" : c == 2 ? "a split NS of a batch"
                                   : c == 3 ? "a stage past the iterations" : c == 4 ? "a split NS of a wide matrix"
                                                                            : "parts on an adamw op");
    }

    /* header strings with bytes the JSON writer escapes or replaces (a control character, a byte
     * that is not UTF-8): the file reads back as written, and the hash is of what is written */
    {
        p = dm_program_new(1, 1, "ti\x01ny", "dmuon", "h200", "a\xff\xfe b\x7f", 128, NULL);
        dm_op a = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
        a.layer = 0;
        dm_program_add_op(p, 0, &a, NULL, 0, NULL, 0, NULL);
        dm_program *b = NULL;
        ok(dm_program_save(p, path, &err) == 0 && dm_program_load(path, &b, &err) == 0 &&
               dm_program_hash(b) == dm_program_hash(p),
           "header strings the writer escapes: the program and its file hash alike (%s)", err.msg);
        dm_program_free(b);
        dm_program_free(p);
    }

    /* an eager NS op and the program's coefficient set round-trip (and change the hash); an
     * eager op that is not an NS is refused */
    {
        p = dm_program_new(1, 1, "tiny", "muon-ddp", "h200", "", 128, NULL);
        dm_op a = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
        a.m = 64, a.n = 128, a.eager = 1, a.batch = 3, a.tall = 2;
        dm_program_add_op(p, 0, &a, NULL, 0, NULL, 0, NULL);
        uint64_t h0 = dm_program_hash(p);
        p->ns_coeffs = strdup("jordan");
        dm_program *b = NULL;
        ok(dm_program_validate(p, &err) == 0 && dm_program_save(p, path, &err) == 0 &&
               dm_program_load(path, &b, &err) == 0 && b->ranks[0].ops[0].eager == 1 && b->ranks[0].ops[0].tall == 2 &&
               b->ns_coeffs &&
               !strcmp(b->ns_coeffs, "jordan") && dm_program_hash(b) == dm_program_hash(p) && dm_program_hash(p) != h0,
           "an eager NS op with 2 tall matrices and ns_coeffs round-trip, in the hash (%s)", err.msg);
        dm_program_free(b);
        p->ranks[0].ops[0].eager = 0;
        ok(dm_program_hash(p) != h0, "ns_coeffs alone changes the hash");
        dm_program_free(p);
        p = dm_program_new(1, 1, "tiny", "muon-ddp", "h200", "", 128, NULL);
        dm_op u = dm_op_init(DM_OP_MUON_UPDATE, DM_STREAM_COMPUTE);
        u.eager = 1;
        dm_program_add_op(p, 0, &u, NULL, 0, NULL, 0, NULL);
        expect_invalid(p, "launch eager (only ns ops", "an eager muon-update");
        p = dm_program_new(1, 1, "tiny", "dmuon", "h200", "", 128, NULL);
        dm_op t = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
        t.m = 8, t.n = 16, t.batch = 2, t.tall = 3;
        dm_program_add_op(p, 0, &t, NULL, 0, NULL, 0, NULL);
        expect_invalid(p, "3 tall matrices (0 to the batch)", "more tall matrices than the batch");
    }

    /* a fetch that publishes the step's new weights (--publish) round-trips and is in the hash;
     * publish on anything but a weight fetch is refused; unrolled, the next step's forward
     * waits on it (the last writer of the weights), not on the update before it */
    {
        p = dm_program_new(1, 1, "tiny", "dmuon", "h200", "", 128, NULL);
        int g0 = dm_program_group(p, (int[]){0}, 1, NULL);
        int64_t q = 0;
        dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE), u = dm_op_init(DM_OP_MUON_UPDATE, DM_STREAM_COMPUTE);
        dm_op br = dm_op_init(DM_OP_BROADCAST, DM_STREAM_COMM_HI);
        f.layer = 0;
        br.coll = dm_program_new_coll(p), br.group = g0, br.root = 0, br.bytes = 64, br.payload = DM_PAYLOAD_WEIGHTS;
        br.layer = 0;
        dm_program_add_op(p, 0, &f, NULL, 0, &q, 1, NULL);
        dm_program_add_op(p, 0, &u, (int[]){0}, 1, &q, 1, NULL);
        uint64_t h0;
        {
            dm_op plain = br;
            dm_program_add_op(p, 0, &plain, (int[]){1}, 1, &q, 1, NULL);
            h0 = dm_program_hash(p);
            p->ranks[0].ops[2].publish = 1;
        }
        dm_program *b = NULL, *k2 = NULL;
        ok(dm_program_validate(p, &err) == 0 && dm_program_save(p, path, &err) == 0 &&
               dm_program_load(path, &b, &err) == 0 && b->ranks[0].ops[2].publish == 1 &&
               dm_program_hash(b) == dm_program_hash(p) && dm_program_hash(p) != h0,
           "a publishing broadcast round-trips and is in the hash (%s)", err.msg);
        ok(dm_program_unroll(p, 2, &k2, &err) == 0 && k2->ranks[0].ops[3].kind == DM_OP_FORWARD &&
               k2->ranks[0].ops[3].n_deps == 1 && k2->ranks[0].ops[3].deps[0] == 2,
           "unrolled: step 2's forward waits on step 1's publishing fetch (%s)", err.msg);
        dm_program_free(k2);
        dm_program_free(b);
        dm_program_free(p);
        for (int c = 0; c < 2; c++) {
            p = dm_program_new(1, 1, "tiny", "dmuon", "h200", "", 128, NULL);
            g0 = dm_program_group(p, (int[]){0}, 1, NULL);
            dm_op x = c == 0 ? dm_op_init(DM_OP_REDUCE, DM_STREAM_COMM_LO) : dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
            if (c == 0) x.coll = dm_program_new_coll(p), x.group = g0, x.root = 0, x.bytes = 64, x.payload = DM_PAYLOAD_GRADS;
            else x.m = 8, x.n = 16;
            x.publish = 1;
            dm_program_add_op(p, 0, &x, NULL, 0, &q, 1, NULL);
            expect_invalid(p, "publish (only fetches of weights", c == 0 ? "a publishing reduce" : "a publishing NS");
        }
    }

    /* a collective's staged mark (core/arena.h) round-trips, is left out at its kind's default
     * (so older files read as the executor ran them) and is in the hash; on a compute op it is
     * refused */
    {
        p = dm_program_new(1, 1, "tiny", "adamw", "h200", "", 128, NULL);
        int g0 = dm_program_group(p, (int[]){0}, 1, NULL);
        dm_op rs = dm_op_init(DM_OP_REDUCESCATTER, DM_STREAM_COMM_LO), br = dm_op_init(DM_OP_BROADCAST, DM_STREAM_COMM_HI);
        rs.coll = dm_program_new_coll(p), rs.group = g0, rs.bytes = 64;
        br.coll = dm_program_new_coll(p), br.group = g0, br.root = 0, br.bytes = 64;
        ok(rs.staged == 1 && br.staged == 0, "defaults: a reduce-scatter staged, a broadcast in place");
        int64_t q = 0;
        dm_program_add_op(p, 0, &rs, NULL, 0, &q, 1, NULL);
        dm_program_add_op(p, 0, &br, NULL, 0, &q, 1, NULL);
        uint64_t h0 = dm_program_hash(p);
        char *js = NULL;
        size_t jn = 0;
        FILE *mf = open_memstream(&js, &jn);
        dm_program_write_json(p, mf, NULL);
        fclose(mf);
        ok(js && !strstr(js, "staged"), "at the defaults no op says staged");
        free(js);
        p->ranks[0].ops[0].staged = 0, p->ranks[0].ops[1].staged = 1;
        dm_program *b = NULL;
        ok(dm_program_validate(p, &err) == 0 && dm_program_save(p, path, &err) == 0 &&
               dm_program_load(path, &b, &err) == 0 && b->ranks[0].ops[0].staged == 0 && b->ranks[0].ops[1].staged == 1 &&
               dm_program_hash(b) == dm_program_hash(p) && dm_program_hash(p) != h0,
           "a reduce-scatter in place and a staged broadcast round-trip, in the hash (%s)", err.msg);
        dm_program_free(b);
        dm_program_free(p);
        p = dm_program_new(1, 1, "tiny", "dmuon", "h200", "", 128, NULL);
        dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
        f.staged = 1;
        dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, NULL);
        expect_invalid(p, "staged (only collectives are staged)", "a staged forward");
    }

    /* a dependency on a later op */
    p = small(NULL);
    dm_program_own_rank(p, 1, NULL);
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
    expect_invalid(p, "rank 2 op 0: collective 0 is all-reduce (group 0, root -1, 8 bytes, grads)", "mismatched sizes");

    /* payloads: members disagree; a compute op with one; a collective without; NS iterations */
    p = dm_program_new(2, 2, "tiny", "dmuon", "h200", "", 128, NULL);
    {
        w = dm_program_group(p, two, 2, NULL);
        dm_op o = dm_op_init(DM_OP_ALLGATHER, DM_STREAM_COMM_LO);
        o.coll = dm_program_new_coll(p);
        o.group = w;
        for (int r = 0; r < 2; r++) {
            o.payload = r ? DM_PAYLOAD_GRADS : DM_PAYLOAD_WEIGHTS;
            dm_program_add_op(p, r, &o, NULL, 0, NULL, 0, NULL);
        }
    }
    expect_invalid(p, "collective 0 is all-gather (group 0, root -1, 0 bytes, grads) but all-gather (group 0, root -1, "
                      "0 bytes, weights) on rank 0", "members disagree on the payload");
    p = small(NULL);
    dm_program_own_rank(p, 1, NULL);
    p->ranks[1].ops[1].payload = DM_PAYLOAD_WEIGHTS;
    expect_invalid(p, "rank 1 op 1 (forward): payload weights (only collectives carry a payload)", "a compute payload");
    p = small(NULL);
    for (int r = 0; r < 3; r++) p->ranks[r].ops[0].payload = DM_PAYLOAD_NONE;
    expect_invalid(p, "rank 0 op 0 (broadcast): payload none (a collective moves weights, grads or a gram)", "no payload");
    p = small(NULL);
    dm_program_own_rank(p, 0, NULL);
    p->ranks[0].ops[4].iters = 0;
    expect_invalid(p, "rank 0 op 4 (ns): 0 NS iterations (1 to 64)", "an ns of 0 iterations");
    p = small(NULL);
    dm_program_own_rank(p, 0, NULL);
    p->ranks[0].ops[1].iters = 3;
    expect_invalid(p, "rank 0 op 1 (forward): 3 NS iterations (only ns ops have iterations)", "iterations on a forward");

    /* iters and payload: written when not the default, read back; an old file without them reads
     * as the executor ran it (gradient all-gather after a reduce-scatter of its params, 5 NS
     * iterations); a stated weights all-gather there stays weights */
    p = dm_program_new(2, 2, "tiny", "muon-fsdp", "h200", "", 8, NULL);
    {
        int64_t par[2] = {4, 5};
        w = dm_program_group(p, two, 2, NULL);
        for (int r = 0; r < 2; r++) {
            dm_op b = dm_op_init(DM_OP_BACKWARD, DM_STREAM_COMPUTE);
            dm_program_add_op(p, r, &b, NULL, 0, par, 2, NULL);
        }
        dm_op rs = dm_op_init(DM_OP_REDUCESCATTER, DM_STREAM_COMM_LO), ag = dm_op_init(DM_OP_ALLGATHER, DM_STREAM_COMM_LO),
              ag2 = ag, ns = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
        rs.coll = dm_program_new_coll(p), ag.coll = dm_program_new_coll(p), ag2.coll = dm_program_new_coll(p);
        rs.group = ag.group = ag2.group = w;
        ag.payload = DM_PAYLOAD_GRADS;   /* implied by the reduce-scatter before it: not written */
        ag2.payload = DM_PAYLOAD_WEIGHTS; /* not implied: written */
        ns.iters = 7;
        for (int r = 0; r < 2; r++) {
            dm_program_add_op(p, r, &rs, NULL, 0, par, 2, NULL);
            dm_program_add_op(p, r, &ag, NULL, 0, par, 2, NULL);
            dm_program_add_op(p, r, &ag2, NULL, 0, par, 2, NULL);
            dm_program_add_op(p, r, &ns, NULL, 0, par, 1, NULL);
        }
    }
    {
        char *t = to_string(p);
        ok(dm_program_validate(p, &err) == 0 && !strstr(t, "\"payload\":\"grads\"") && strstr(t, "\"payload\":\"weights\"") &&
               strstr(t, "\"iters\":7") && !strstr(t, "\"iters\":5"),
           "payload written only where the list does not imply it, iters only when not 5 (%s)", err.msg);
        f = fopen(path, "w");
        fputs(t, f);
        fclose(f);
        q = NULL;
        ok(dm_program_load(path, &q, &err) == 0 && q->ranks[1].ops[2].payload == DM_PAYLOAD_GRADS &&
               q->ranks[1].ops[3].payload == DM_PAYLOAD_WEIGHTS && q->ranks[1].ops[4].iters == 7 &&
               q->ranks[0].ops[1].payload == DM_PAYLOAD_GRADS && dm_program_hash(p) == dm_program_hash(q),
           "payloads and iters read back (%s)", q ? "" : err.msg);
        dm_program_free(q);
        free(t);
    }
    dm_program_free(p);
    f = fopen(path, "w");
    fputs("{\"format\": \"dmuon-program-1\", \"nranks\": 1, \"gpus_per_node\": 1, \"n_colls\": 2,\n"
          " \"groups\": [[0]],\n \"ranks\": [{\"rank\": 0, \"ops\": [\n"
          "  {\"id\":0,\"kind\":\"reduce-scatter\",\"stream\":\"comm-lo\",\"coll\":0,\"group\":0,\"params\":[3]},\n"
          "  {\"id\":1,\"kind\":\"all-gather\",\"stream\":\"comm-hi\",\"coll\":1,\"group\":0,\"params\":[3]},\n"
          "  {\"id\":2,\"kind\":\"ns\",\"stream\":\"compute\",\"m\":4,\"n\":4,\"params\":[3]}]}]}\n", f);
    fclose(f);
    q = NULL;
    ok(dm_program_load(path, &q, &err) == 0 && q->ranks[0].ops[1].payload == DM_PAYLOAD_GRADS &&
           q->ranks[0].ops[0].payload == DM_PAYLOAD_GRADS && q->ranks[0].ops[2].iters == DM_NS_ITERS_DEFAULT &&
           q->ranks[0].ops[2].payload == DM_PAYLOAD_NONE && dm_program_validate(q, &err) == 0,
       "an old file: all-gather after a reduce-scatter of its params is a gradient all-gather, ns runs 5 (%s)",
       q ? err.msg : err.msg);
    dm_program_free(q);

    /* counts read from a file are checked against its data, before anything is sized by them */
    f = fopen(path, "w");
    fputs("{\"format\": \"dmuon-program-1\", \"nranks\": 1, \"gpus_per_node\": 1, \"n_colls\": 1000000000,\n"
          " \"groups\": [[0]],\n \"ranks\": [{\"rank\": 0, \"ops\": [\n"
          "  {\"id\":0,\"kind\":\"all-reduce\",\"stream\":\"comm-lo\",\"coll\":0,\"group\":0}]}]}\n", f);
    fclose(f);
    q = NULL;
    ok(dm_program_load(path, &q, &err) == -1 && strstr(err.msg, "p.json:1:75: expected n_colls at most 1, the "
                                                         "collective ops in the file (found 1000000000)"),
       "n_colls 1e9 with one collective op: refused (%s)", err.msg);
    f = fopen(path, "w");
    fputs("{\"format\": \"dmuon-program-1\", \"nranks\": 16777216, \"gpus_per_node\": 1, \"groups\": [],\n"
          " \"ranks\": [{\"rank\": 0, \"ops\": []}]}\n", f);
    fclose(f);
    ok(dm_program_load(path, &q, &err) == -1 && strstr(err.msg, "p.json:1:41: expected at most") &&
           strstr(err.msg, "nranks is 16777216"),
       "nranks 16M in a 130-byte file: refused before allocating (%s)", err.msg);
    /* ids no model has (fuzz finding: a 64 GB table sized by one parameter id) */
    f = fopen(path, "w");
    fputs("{\"format\": \"dmuon-program-1\", \"nranks\": 1, \"gpus_per_node\": 1, \"groups\": [[0]],\n"
          " \"ranks\": [{\"rank\": 0, \"ops\": [\n"
          "  {\"id\":0,\"kind\":\"backward\",\"stream\":\"compute\",\"params\":[68719476736]}]}]}\n", f);
    fclose(f);
    ok(dm_program_load(path, &q, &err) == -1 && strstr(err.msg, "p.json:3:") && strstr(err.msg, "parameter id"),
       "a parameter id beyond any model's matrices: refused (%s)", err.msg);
    ok(dm_program_load("/dev/zero", &q, &err) == -1 && strstr(err.msg, "/dev/zero:1:1: expected a program object"),
       "/dev/zero: refused at its first byte (%s)", err.msg);
    {
        /* 30000 groups, the last repeating the first: found by sorting (pairwise: 4.5e8 compares) */
        FILE *g = fopen(path, "w");
        fputs("{\"format\": \"dmuon-program-1\", \"nranks\": 300, \"gpus_per_node\": 1,\n \"groups\": [", g);
        int ng = 0;
        for (int a = 0; a < 300 && ng < 29999; a++)
            for (int b = a + 1; b < 300 && ng < 29999; b++, ng++) fprintf(g, "%s[%d,%d]", ng ? "," : "", a, b);
        fputs(",\n  [0,1]],\n \"ranks\": [", g);
        for (int r = 0; r < 300; r++) fprintf(g, "%s{\"rank\": %d, \"ops\": []}", r ? "," : "", r);
        fputs("]}\n", g);
        fclose(g);
        ok(dm_program_load(path, &q, &err) == -1 && strstr(err.msg, "p.json:3:3: expected distinct groups (this one "
                                                             "repeats group 0)"),
           "a repeated group among 30000 is found (%s)", err.msg);
    }

    /* reader: positioned errors */
    f = fopen(path, "w");
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
            /* the scheduler states every payload; its programs' files need none of them (and so
             * hash as before ops carried payloads) */
            int same = p != NULL, grad_ag = 0;
            for (int r = 0; p && r < p->nranks && same; r++)
                for (int i = 0; same && i < p->ranks[r].n_ops; i++) {
                    const dm_op *op = &p->ranks[r].ops[i];
                    same = op->implied == op->payload;
                    grad_ag += op->kind == DM_OP_ALLGATHER && op->implied == DM_PAYLOAD_GRADS;
                }
            ok(same && (s == SCHED_MUON_FSDP) == (grad_ag > 0), "%s: the payloads are the implied ones (%d gradient "
               "all-gathers)", sched_strategy_name(o.strategy), grad_ag);
            q = NULL;
            if (p && dm_program_save(p, path, &err) == 0 && dm_program_load(path, &q, &err) == 0) {
                ok(dm_program_hash(p) == dm_program_hash(q), "%s program round-trips with its hash",
                   sched_strategy_name(o.strategy));
                /* the works: two per layer, every forward/backward op names its own, and they read back equal */
                /* then the update ops' (one update kernel per tensor piece the rank updates), each
                 * distinct list once */
                int works_ok = p->n_works >= 2 * m->n_layers && q->n_works == p->n_works;
                for (int w = 0; works_ok && w < p->n_works; w++)
                    works_ok = p->works[w].n == q->works[w].n &&
                               !memcmp(p->works[w].k, q->works[w].k, (size_t)p->works[w].n * sizeof *p->works[w].k);
                for (int r = 0; works_ok && r < p->nranks; r++)
                    for (int i = 0; works_ok && i < p->ranks[r].n_ops; i++) {
                        const dm_op *op = &p->ranks[r].ops[i];
                        int compute = op->kind == DM_OP_FORWARD || op->kind == DM_OP_BACKWARD;
                        int upd = op->kind == DM_OP_ADAMW || op->kind == DM_OP_MUON_UPDATE;
                        dm_kern_op kop = op->kind == DM_OP_ADAMW ? DM_KOP_ADAMW : DM_KOP_MUON_UPDATE;
                        works_ok = compute ? op->work == 2 * op->layer + (op->kind == DM_OP_BACKWARD)
                                   : upd   ? op->work >= 2 * m->n_layers && op->work < p->n_works &&
                                               /* no kernel: a rank whose shard misses every tensor of the op */
                                               (p->works[op->work].n > 0 ? p->works[op->work].k[0].op == kop : op->bytes == 0)
                                           : op->work == -1;
                    }
                ok(works_ok, "%s: a work per layer and pass, named by its ops, an update work per update op, read back kernel for kernel",
                   sched_strategy_name(o.strategy));
            } else
                ok(0, "%s program round trip (%s)", sched_strategy_name(o.strategy), err.msg);
            dm_program_free(p);
            dm_program_free(q);
        }
    } else {
        tap_diag("bundled model not found: %s", err.msg);
    }
    dm_model_free(m);
    dm_costs_free(costs);

    /* ranks with equal lists share one; the first op that differs gives a rank its own copy,
     * and nothing a reader sees changes (the same ops, the same hash as unshared lists) */
    p = small(NULL);
    ok(dm_program_distinct_lists(p) == 1 && p->ranks[1].ops == p->ranks[0].ops && p->ranks[0].n_ops == 5 &&
           p->ranks[1].n_ops == 4 && p->ranks[1].ops[3].kind == DM_OP_REDUCE,
       "small(): ranks 1 and 2 read rank 0's list, their 4 ops a prefix of its 5 (%d lists)",
       dm_program_distinct_lists(p));
    q = small(NULL);
    int own_ok = 1;
    for (int r = 0; r < 3; r++) own_ok &= dm_program_own_rank(q, r, &err) == 0;
    ok(own_ok && dm_program_distinct_lists(q) == 3 && q->ranks[1].ops != q->ranks[2].ops &&
           q->ranks[1].ops[1].deps != p->ranks[1].ops[1].deps && dm_program_same_ops(p, q) &&
           dm_program_hash(p) == dm_program_hash(q) && dm_program_validate(q, &err) == 0,
       "lists of their own: the same ops and hash as the shared ones (%s)", err.msg);
    dm_op w8 = dm_op_init(DM_OP_WAIT, DM_STREAM_COMPUTE);
    dm_program_add_op(p, 2, &w8, NULL, 0, NULL, 0, NULL);
    ok(dm_program_distinct_lists(p) == 2 && p->ranks[2].n_ops == 5 && p->ranks[2].ops[4].kind == DM_OP_WAIT &&
           p->ranks[1].n_ops == 4 && p->ranks[0].ops[4].kind == DM_OP_NS && p->ranks[2].ops[3].implied == DM_PAYLOAD_GRADS,
       "an op rank 0 does not have: rank 2 takes its own copy, the others unchanged");
    dm_program_free(p);
    dm_program_free(q);

    /* an all-gather's implied payload: gradients only when one of its own ids was produced
     * before it on the rank (not when its ids merely lie within the produced ones' range), the
     * same on a rank that replays a shared prefix (unshare) and one that copies that replay */
    {
        dm_program *g = dm_program_new(3, 8, "m", "s", "c", "o", 1, &err);
        dm_op bw = dm_op_init(DM_OP_BACKWARD, DM_STREAM_COMPUTE), ag = dm_op_init(DM_OP_ALLGATHER, DM_STREAM_COMPUTE);
        const int64_t b3[] = {10, 11, 12}, b1[] = {2, 9}, in_gap[] = {6, 5}, below[] = {0, 1}, hit[] = {20, 9},
                      above[] = {30}, hit2[] = {11}, gap2[] = {7};
        int ag_ok = g != NULL;
        for (int r = 0; ag_ok && r < 3; r++) { /* the shared prefix: two backwards */
            bw.layer = 3;
            ag_ok &= dm_program_add_op(g, r, &bw, NULL, 0, b3, 3, &err) >= 0;
            bw.layer = 1;
            ag_ok &= dm_program_add_op(g, r, &bw, NULL, 0, b1, 2, &err) >= 0;
        }
        struct {
            int rank;
            const int64_t *ids;
            int n;
            dm_payload want;
        } asks[] = {{0, in_gap, 2, DM_PAYLOAD_WEIGHTS}, {0, below, 2, DM_PAYLOAD_WEIGHTS}, {0, hit, 2, DM_PAYLOAD_GRADS},
                    {0, above, 1, DM_PAYLOAD_WEIGHTS}, {1, hit2, 1, DM_PAYLOAD_GRADS}, {1, in_gap, 2, DM_PAYLOAD_WEIGHTS},
                    {2, gap2, 1, DM_PAYLOAD_WEIGHTS}, {2, b3, 3, DM_PAYLOAD_GRADS}};
        for (size_t k = 0; ag_ok && k < sizeof asks / sizeof asks[0]; k++) {
            ag.layer = 2 + (int)k; /* (no backward of these layers) */
            ag.payload = asks[k].want;
            int i = dm_program_add_op(g, asks[k].rank, &ag, NULL, 0, asks[k].ids, asks[k].n, &err);
            ag_ok &= i >= 0 && g->ranks[asks[k].rank].ops[i].implied == asks[k].want;
            if (!ag_ok) tap_diag("ask %zu (rank %d): implied %d, expected %d", k, asks[k].rank,
                                 i >= 0 ? (int)g->ranks[asks[k].rank].ops[i].implied : -1, (int)asks[k].want);
        }
        ok(ag_ok && dm_program_distinct_lists(g) == 3,
           "an all-gather implies gradients only for ids produced before it, on shared, replayed and copied lists");
        dm_program_free(g);
    }

    /* the op arrays and deps carved from the program's slab (reserved lists, copies of shared
     * ones, deps across the arenas' growing blocks, a list grown past what was reserved) hold the
     * same ops as lists grown op by op: 48 ranks, 6000 ops each (41 MB of ops: slab blocks from
     * 256 KiB to 32 MiB, huge-page advised from 4 MiB); built again after it was freed (the kept
     * 32 MiB block taken back, its old contents overwritten), the same again */
    {
        dm_program *a[3] = {NULL, NULL, NULL};
        int same_ok = 1, deps_ok = 1;
        uint64_t h1 = 0;
        err.msg[0] = 0;
        for (int v = 0; v < 3; v++) {
            int R = 48;
            dm_program *x = a[v] = dm_program_new(R, 8, "tiny", "dmuon", "h200", "slab", 128, NULL);
            for (int r = 0; v > 0 && r < R; r++) /* about half of what odd ranks will hold: they outgrow it */
                same_ok &= dm_program_reserve(x, r, r % 2 ? 3000 : 6100, &err) == 0;
            for (int i = 0; i < 6000; i++)
                for (int r = 0; r < R; r++) {
                    dm_op o = dm_op_init(i % 3 ? DM_OP_FORWARD : DM_OP_BACKWARD, DM_STREAM_COMPUTE);
                    o.layer = i % 7;
                    o.flops = i < 100 ? 1 : r + i; /* the ranks share their first 100 ops */
                    int deps[40], nd = i < 40 ? i : 40;
                    for (int k = 0; k < nd; k++) deps[k] = i - 1 - k;
                    int64_t prm[2] = {i % 5, r};
                    if (dm_program_add_op(x, r, &o, deps, nd, prm, 1 + (i % 2), &err) != i) same_ok = 0;
                }
            for (int r = 0; v > 0 && r < R; r++)
                for (int i = 0; i < x->ranks[r].n_ops; i++) {
                    const dm_op *o = &x->ranks[r].ops[i];
                    for (int k = 0; k < o->n_deps; k++) deps_ok &= o->deps[k] == i - 1 - k;
                }
            if (v == 1) {
                same_ok &= dm_program_same_ops(a[0], a[1]) && dm_program_validate(a[1], &err) == 0 &&
                           a[1]->ranks[1].n_ops == 6000 && a[1]->ranks[2].ops[5999].flops == 2 + 5999;
                h1 = dm_program_hash(a[1]);
                dm_program_free(a[1]);
                a[1] = NULL;
            }
        }
        ok(same_ok && deps_ok && h1 == dm_program_hash(a[0]) && dm_program_same_ops(a[0], a[2]) &&
               dm_program_hash(a[2]) == h1,
           "lists reserved in the slab (and outgrowing it), and built again in its kept blocks, hold the same ops "
           "as lists grown op by op (%s)", err.msg);
        dm_program_free(a[0]);
        dm_program_free(a[2]);
    }

    /* an op's numbers as fprintf's "%.17g" and "%lld" write them (the writer formats op lines
     * itself: the hash streams that text) */
    {
        static const double nums[] = {4096, 999999999999999, 1e15, 1e16, 9007199254740993.0, 0.1, -7, -1e15,
                                      1e300, 5e-324, 123456789.25, -0.5, 1.11111e25, -1e19};
        int same = 1;
        for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
            p = dm_program_new(1, 1, "tiny", "dmuon", "h200", "", 128, NULL);
            dm_op o = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
            o.flops = nums[i];
            o.m = INT64_MIN + 1;
            int64_t prm[2] = {INT64_MAX, -1};
            dm_program_add_op(p, 0, &o, NULL, 0, prm, 2, NULL);
            char *js = NULL, want[160];
            size_t jn = 0;
            FILE *mf = open_memstream(&js, &jn);
            dm_program_write_json(p, mf, NULL);
            fclose(mf);
            snprintf(want, sizeof want, "\"flops\":%.17g,\"m\":%lld,\"params\":[%lld,-1]", nums[i],
                     (long long)(INT64_MIN + 1), (long long)INT64_MAX);
            if (!js || !strstr(js, want)) {
                same = 0;
                tap_diag("want %s in %s", want, js ? js : "(nothing)");
            }
            free(js);
            dm_program_free(p);
        }
        ok(same, "op numbers written as %%.17g and %%lld write them");
    }
    unlink(path);
    rmdir(dir);
    return tap_done();
}
