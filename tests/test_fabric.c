/* test_fabric.c: any GPU and any fabric. GPUs from the catalogue (A100, A800, H100, H200, B200),
 * presets, and GPUs described by their numbers in a cluster file (the simulator uses those
 * numbers); fabrics (rail-optimized, fat tree, a pod level) as link resources with known
 * answers: a cross-leaf all-reduce at 2:1 takes latency + bus bytes / (uplink / 1), two
 * all-reduces crossing one oversubscribed uplink take twice their bandwidth time (max-min), a
 * cross-rail pair goes through the spine, a same-rail pair does not; link ids, names and the
 * busiest-links report; the cluster-file errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "collcost.h"
#include "program.h"
#include "sim.h"
#include "tap.h"

static dm_err err;
static char path[256];

/* Load a cluster from file text; 0 on success (err set otherwise). */
static int load_text(const char *text, dm_cluster *c)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    fclose(f);
    return dm_cluster_load(path, c, &err);
}

static void add_coll(dm_program *p, int g, dm_op_kind kind, double bytes)
{
    dm_op o = dm_op_init(kind, DM_STREAM_COMM_HI);
    o.coll = dm_program_new_coll(p);
    o.group = g;
    o.bytes = bytes;
    o.root = kind <= DM_OP_REDUCE ? p->groups[g].ranks[0] : -1;
    for (int i = 0; i < p->groups[g].n; i++) dm_program_add_op(p, p->groups[g].ranks[i], &o, NULL, 0, NULL, 0, &err);
}

static sim_result *run(const dm_program *p, const dm_cluster *c)
{
    sim_opts o;
    sim_opts_default(&o);
    o.algo = COLL_ALGO_RING;
    sim_result *r;
    if (sim_run(p, c, &o, &r, &err)) {
        printf("# sim_run: %s\n", err.msg);
        return NULL;
    }
    return r;
}

/* Time of one ring all-reduce of `bytes` over `ranks` alone on c, by the formula. */
static double formula_us(const dm_cluster *c, const int *ranks, int n, double bytes, double *bus_Bps)
{
    coll_topo t;
    if (bus_Bps) *bus_Bps = -1;
    if (collcost_topo(c, ranks, n, &t, &err)) return -1;
    if (bus_Bps) *bus_Bps = t.bus_Bps;
    return collcost_time_us(DM_OP_ALLREDUCE, COLL_ALGO_RING, bytes, &t);
}

/* ---- GPUs ---------------------------------------------------------------------------------- */

static void test_gpus(void)
{
    static const char *names[] = {"A100", "A800", "H100", "H200", "B200"};
    static const double bf16[] = {312e12, 312e12, 989e12, 989e12, 2250e12};
    static const double hbm[] = {2.039e12, 2.039e12, 3.35e12, 4.8e12, 8e12};
    /* memory: what CUDA reports (81920, 81559, 143771 MiB); B200 the datasheet's 180 GB as GiB */
    static const double mem_mib[] = {81920, 81920, 81559, 143771, 180 * 1024};
    int good = 0;
    for (int i = 0; i < 5; i++) {
        const dm_gpu *g = dm_gpu_find(names[i]);
        good += g && g->bf16_flops == bf16[i] && g->fp16_flops == bf16[i] && g->hbm_Bps == hbm[i] &&
                g->mem_bytes == mem_mib[i] * 1048576.0 && dm_gpu_is_catalogued(g);
    }
    ok(good == 5 && dm_gpu_count() == 5, "catalogue: A100, A800, H100, H200, B200 with their datasheet numbers (%d of 5)",
       good);
    ok(dm_gpu_find("NVIDIA B200") == dm_gpu_find("B200-SXM") && dm_gpu_find("NVIDIA A100-SXM4-80GB") == dm_gpu_find("A100"),
       "CUDA names and short names find the same entry");
    ok(dm_gpu_find("A100") != dm_gpu_find("A800"), "A100 is not the A800");

    dm_cluster c;
    ok(dm_cluster_load("b200", &c, &err) == 0 && !strcmp(c.gpu->short_name, "B200-SXM") && c.nvlink_Bps == 900e9 &&
           c.nics_per_node == 8 && fabs(c.nic_Bps - 400 / 8.0 * 1e9 * 0.94) < 1,
       "preset b200: B200, NVLink 900 GB/s each way, 8 x 400 Gb/s NICs");
    ok(dm_cluster_load("a100", &c, &err) == 0 && !strcmp(c.gpu->short_name, "A100-SXM4-80GB") && c.nvlink_Bps == 300e9 &&
           c.nics_per_node == 8,
       "preset a100: A100, NVLink 300 GB/s each way, 8 HDR NICs");
    ok(load_text("gpu = B200\ngpus_per_node = 8\nnvlink_GBps = 900\n", &c) == 0 && c.gpu == dm_gpu_find("B200"),
       "gpu = B200 in a cluster file (%s)", err.msg);

    /* A GPU by its numbers. */
    const char *mi = "gpu_name = MI300X\ngpu_bf16_tflops = 1307\ngpu_hbm_GBps = 5300\ngpu_memory_GiB = 192\n"
                     "gpus_per_node = 8\nnvlink_GBps = 448\n";
    int rc = load_text(mi, &c);
    ok(rc == 0 && !strcmp(c.gpu->name, "MI300X") && c.gpu->bf16_flops == 1307e12 && c.gpu->fp16_flops == 1307e12 &&
           c.gpu->hbm_Bps == 5300e9 && c.gpu->mem_bytes == 192 * 1073741824.0 && c.gpu->launch_us == 4 &&
           !dm_gpu_is_catalogued(c.gpu),
       "a GPU described by its numbers: fp16 defaults to bf16, launch floor 4 us (%s)", err.msg);
    const dm_gpu *first = c.gpu;
    dm_cluster c2;
    ok(load_text(mi, &c2) == 0 && c2.gpu == first, "the same description twice: the same GPU");
    ok(dm_gpu_find("MI300X") == first, "a described GPU is found by its name");
    ok(load_text("gpu = H200\ngpu_hbm_GBps = 4000\ngpus_per_node = 8\nnvlink_GBps = 450\n", &c) == 0 &&
           c.gpu->bf16_flops == 989e12 && c.gpu->hbm_Bps == 4000e9 && c.gpu->mem_bytes == 143771 * 1048576.0 &&
           strstr(c.gpu->name, "H200-SXM (custom numbers)"),
       "gpu = H200 with gpu_hbm_GBps: H200's numbers but the HBM rate (%s)", c.gpu ? c.gpu->name : "-");
    ok(load_text("gpu = H200\ngpu_hbm_GBps = 4800\ngpu_name = NVIDIA H200\ngpus_per_node = 8\nnvlink_GBps = 450\n", &c) == 0 &&
           c.gpu == dm_gpu_find("H200"),
       "numbers equal to a catalogue GPU's, with its name: that GPU");
    ok(dm_gpu_sm_rate(first) == 0, "a described GPU without gpu_sms and gpu_sm_MHz: SMs not known");
    ok(load_text("gpu = B200\ngpu_sms = 148\ngpu_sm_MHz = 1965\ngpus_per_node = 8\nnvlink_GBps = 900\n", &c) == 0 &&
           c.gpu->sms == 148 && c.gpu->sm_mhz == 1965 && c.gpu->hbm_Bps == 8.0e12 && dm_gpu_sm_rate(c.gpu) == 148.0 * 1965,
       "gpu_sms and gpu_sm_MHz add a GPU's SMs and clock (the projection's SM ratio) (%s)", err.msg);
    ok(load_text("gpu = H200\ngpu_sms = 0\ngpus_per_node = 8\nnvlink_GBps = 450\n", &c) == -1 && strstr(err.msg, ":2:"),
       "gpu_sms below 1 refused with its line (%s)", err.msg);
    ok(load_text("gpu = H200\ngpu_sms = 132\ngpu_sm_MHz = 1980\ngpu_name = NVIDIA H200\ngpus_per_node = 8\nnvlink_GBps = 450\n", &c) == 0 &&
           c.gpu == dm_gpu_find("H200"),
       "the catalogue's own SMs and clock: the catalogue GPU");
    ok(load_text("gpu_bf16_tflops = 100\ngpus_per_node = 8\nnvlink_GBps = 450\n", &c) == -1 && strstr(err.msg, "gpu_hbm_GBps"),
       "a described GPU needs gpu_hbm_GBps (%s)", err.msg);
    ok(load_text("gpu = H200\ngpu_name = A100\ngpu_hbm_GBps = 1\ngpus_per_node = 8\nnvlink_GBps = 450\n", &c) == -1 &&
           strstr(err.msg, ":2:1:") && strstr(err.msg, "another name"),
       "a described GPU may not take a catalogue GPU's name (%s)", err.msg);
    ok(load_text("gpu = MI300X\ngpus_per_node = 8\nnvlink_GBps = 450\n", &c) == -1 && strstr(err.msg, ":1:7:") &&
           strstr(err.msg, "B200-SXM"),
       "gpu = names the catalogue only, listed in the message (%s)", err.msg);
    ok(load_text("gpu_bf16_tflops = fast\n", &c) == -1 && strstr(err.msg, ":1:19:"), "bad number named with line:col (%s)",
       err.msg);

    /* The simulator runs at the described GPU's numbers. */
    ok(load_text(mi, &c) == 0, "MI300X cluster");
    dm_program *p = dm_program_new(1, 8, "t", "t", "x", "", 1, &err);
    dm_op o = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
    o.flops = 1e12;
    dm_program_add_op(p, 0, &o, NULL, 0, NULL, 0, &err);
    sim_result *r = run(p, &c);
    ok(r && fabs(r->step_us - 1e12 / (0.45 * 1307e12) * 1e6) < 1e-6, "a forward of 1 TFLOP at 0.45 x 1307 TFLOP/s: %.3f us",
       r ? r->step_us : -1);
    sim_result_free(r);
    dm_program_free(p);
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    dm_cluster_describe(&c, mf);
    fclose(mf);
    ok(buf && strstr(buf, "MI300X, described by the cluster: bf16 1307, fp16 1307 TFLOP/s dense, HBM 5300 GB/s, 192 GiB"),
       "the description names the numbers");
    free(buf);
}

/* ---- fabrics ------------------------------------------------------------------------------- */

#define A800_NODE "gpu = A800\ngpus_per_node = 8\nnvlink_GBps = 200\nnvlink_bus_efficiency = 0.75\nnic_Gbps = 200\n"

static void test_fabric_file(void)
{
    dm_cluster c;
    ok(load_text(A800_NODE "nics_per_node = 4\nfabric = rail\nnodes_per_leaf = 16\noversubscription.leaf = 2\n", &c) == 0 &&
           c.fabric == DM_FABRIC_RAIL && c.nodes_per_leaf == 16 && c.oversub[0] == 2 && c.oversub[1] == 1,
       "rail fabric keys (%s)", err.msg);
    ok(load_text(A800_NODE "nics_per_gpu = 1\n", &c) == 0 && c.nics_per_node == 8, "nics_per_gpu 1: 8 NICs per node");
    ok(load_text(A800_NODE "nics_per_gpu = 1\nnics_per_node = 4\n", &c) == -1 && strstr(err.msg, "both given"),
       "nics_per_gpu and nics_per_node both refused (%s)", err.msg);
    ok(load_text(A800_NODE "nics_per_node = 4\nfabric = mesh\n", &c) == -1 && strstr(err.msg, ":7:10:") &&
           strstr(err.msg, "nonblocking|rail|fattree"),
       "an unknown fabric named with line:col and the choices (%s)", err.msg);
    ok(load_text(A800_NODE "nics_per_node = 4\nfabric = fattree\n", &c) == -1 && strstr(err.msg, "nodes_per_leaf"),
       "a fat tree needs nodes_per_leaf (%s)", err.msg);
    ok(load_text(A800_NODE "nics_per_node = 4\nnodes_per_leaf = 4\n", &c) == -1 && strstr(err.msg, ":7:1:") &&
           strstr(err.msg, "fabric = rail"),
       "nodes_per_leaf without a fabric refused (%s)", err.msg);
    ok(load_text(A800_NODE "nics_per_node = 4\nfabric = fattree\nnodes_per_leaf = 4\noversubscription.spine = 2\n", &c) == -1 &&
           strstr(err.msg, "leaves_per_pod"),
       "oversubscription.spine needs leaves_per_pod (%s)", err.msg);
    ok(load_text(A800_NODE "nics_per_node = 4\nfabric = fattree\nnodes_per_leaf = 4\noversubscription.leaf = 0.5\n", &c) == -1 &&
           strstr(err.msg, "[1, 1024]"),
       "an oversubscription below 1 refused (%s)", err.msg);
    ok(load_text(A800_NODE "fabric = rail\nnodes_per_leaf = 4\n", &c) == -1 && strstr(err.msg, "NICs"),
       "a fabric needs NICs (%s)", err.msg);
}

/* Link ids: every id maps back to its kind and index; non-blocking ids are the old ones. */
static void test_link_ids(void)
{
    dm_cluster c;
    ok(load_text(A800_NODE "nics_per_gpu = 1\nfabric = rail\nnodes_per_leaf = 2\nleaves_per_pod = 2\n", &c) == 0, "rail cluster");
    int R = 64; /* 8 nodes, 4 leaf groups x 8 rails, 2 pods */
    ok(collcost_leaf_switches(&c, R) == 32 && collcost_pods(&c, R) == 2, "8 nodes: 32 rail switches, 2 pods");
    ok(collcost_n_links(&c, R) == 2 * 64 + 2 * 64 + 2 * 32 + 2 * 2, "links: NVLink, NICs, rail switches, pods each way");
    int round = 0, n = collcost_n_links(&c, R);
    for (int id = 0; id < n; id++) {
        coll_link_kind k;
        int ix;
        round += collcost_link_of_id(&c, R, id, &k, &ix) == 0 && collcost_link_id(&c, R, k, ix) == id;
    }
    ok(round == n && collcost_link_of_id(&c, R, n, &(coll_link_kind){0}, &(int){0}) == -1,
       "every link id maps to its kind and index and back (%d of %d)", round, n);
    char name[64];
    ok(!strcmp(collcost_link_name(&c, COLL_LINK_LEAF_UP, 3 * 8 + 5, name, sizeof name), "rail 5 switch of leaf 3, up") &&
           !strcmp(collcost_link_name(&c, COLL_LINK_NIC_OUT, 2 * 8 + 1, name, sizeof name), "NIC 1 of node 2, out"),
       "link names");
    dm_cluster a = c;
    a.fabric = DM_FABRIC_NONBLOCKING;
    ok(collcost_n_links(&a, R) == 2 * 64 + 2 * 64 && collcost_link_id(&a, R, COLL_LINK_NIC_IN, 0) == 2 * 64 + 64,
       "non-blocking: the NVLink and NIC links alone, at their old ids");
    int ranks[64];
    for (int i = 0; i < 64; i++) ranks[i] = i;
    coll_link la[512], lb[512];
    int na = collcost_links(&a, ranks, 64, la, &err), nb = collcost_links(&c, ranks, 64, lb, &err);
    ok(na > 0 && nb > na && !memcmp(la, lb, (size_t)na * sizeof *la),
       "with a fabric, a group's NVLink and NIC links are the same, the fabric's follow (%d + %d)", na, nb - na);
    /* An aligned all-ranks ring: NIC k to NIC k; inside a leaf group it stays on the rail switches,
     * so only the 4 group boundaries x 8 rails cross uplinks, and 2 pod boundaries the pods. */
    int up = 0, down = 0, pod = 0;
    double wsum = 0;
    for (int i = na; i < nb; i++) {
        up += lb[i].kind == COLL_LINK_LEAF_UP;
        down += lb[i].kind == COLL_LINK_LEAF_DOWN;
        pod += lb[i].kind == COLL_LINK_POD_UP || lb[i].kind == COLL_LINK_POD_DOWN;
        if (lb[i].kind == COLL_LINK_LEAF_UP) wsum += lb[i].weight;
    }
    ok(up == 32 && down == 32 && pod == 4 && fabs(wsum - 4) < 1e-12,
       "all 64 ranks: each of the 4 leaf groups sends one ring edge up its 8 rail switches (1/8 each), 2 pods up and down");
}

/* Known answers: alone, in the formula and in the simulator, and two at once through one
 * oversubscribed uplink. */
static void test_known_answers(void)
{
    dm_cluster nb, ft;
    const double S = 4e8; /* bytes */
    int r16[16];
    for (int i = 0; i < 16; i++) r16[i] = i;
    /* Two nodes, one per leaf, 2:1: the ring's edge between them crosses each leaf's uplink,
     * 4 x 23.5 / 2 = 47 GB/s, below the nodes' 4 NICs (94 GB/s). */
    ok(load_text(A800_NODE "nics_per_node = 4\n", &nb) == 0 &&
           load_text(A800_NODE "nics_per_node = 4\nfabric = fattree\nnodes_per_leaf = 1\noversubscription.leaf = 2\n", &ft) == 0,
       "a800-like nodes, non-blocking and a 2:1 fat tree of one node per leaf");
    double nic = nb.nic_Bps, bw_nb, bw_ft;
    double t_nb = formula_us(&nb, r16, 16, S, &bw_nb), t_ft = formula_us(&ft, r16, 16, S, &bw_ft);
    double lat = 6.8 + (30 - 2) * 0.6 + 2 * 5.0, bus = 2 * 15 / 16.0 * S;
    ok_near(bw_nb, 4 * nic, 1e-12, "non-blocking: bus bandwidth = 4 NICs (%.1f GB/s)", bw_nb / 1e9);
    ok_near(bw_ft, 4 * nic / 2, 1e-12, "2:1 leaf uplink: bus bandwidth = 4 NICs / 2 (%.1f GB/s)", bw_ft / 1e9);
    ok_near(t_ft, lat + bus / (2 * nic) * 1e6, 1e-12, "cross-leaf all-reduce at 2:1: latency + bus bytes / (4 x 23.5 / 2) = %.3f us",
            t_ft);
    dm_program *p = dm_program_new(16, 8, "t", "t", "x", "", 1, &err);
    add_coll(p, dm_program_group(p, r16, 16, &err), DM_OP_ALLREDUCE, S);
    sim_result *r = run(p, &ft), *r0 = run(p, &nb);
    ok(r && fabs(r->step_us - t_ft) <= 1e-9 * t_ft, "... and the simulator takes it: %.3f us", r ? r->step_us : -1);
    ok(r0 && fabs(r0->step_us - t_nb) <= 1e-9 * t_nb && r0->links.shown == 0,
       "non-blocking: %.3f us, no link report", r0 ? r0->step_us : -1);
    ok(r && r->links.shown && r->links.n_sat > 0 && strstr(r->links.by_sat[0].name, "leaf") &&
           fabs(r->links.by_sat[0].saturated_us - (t_ft - lat)) < 1e-6 && fabs(r->links.by_bytes[0].bytes - bus) < 1,
       "busiest links: a leaf uplink, saturated for the bandwidth term and carrying the bus bytes (%s, %.3f us)",
       r ? r->links.by_sat[0].name : "-", r ? r->links.by_sat[0].saturated_us : -1);
    sim_result_free(r);
    sim_result_free(r0);
    dm_program_free(p);

    /* Four nodes, two per leaf: all-reduces A (nodes 0, 2) and B (nodes 1, 3) both leave leaf 0
     * for leaf 1 and back. Uplink 2 x 94 / ratio: at 2:1 it is 94 GB/s, each alone runs at its
     * NICs' 94 GB/s, together they share it: 47 each, twice the bandwidth time. At 1:1 (188)
     * they do not slow each other. */
    for (int ratio = 1; ratio <= 2; ratio++) {
        char text[512];
        snprintf(text, sizeof text, A800_NODE "nics_per_node = 4\nfabric = fattree\nnodes_per_leaf = 2\noversubscription.leaf = %d\n",
                 ratio);
        ok(load_text(text, &ft) == 0, "fat tree, 2 nodes per leaf, %d:1", ratio);
        int ga[16], gb[16];
        for (int i = 0; i < 8; i++) ga[i] = i, ga[8 + i] = 16 + i, gb[i] = 8 + i, gb[8 + i] = 24 + i;
        double bw, alone = formula_us(&ft, ga, 16, S, &bw);
        ok_near(bw, 4 * nic, 1e-12, "%d:1: one cross-leaf all-reduce alone runs at its NICs' 94 GB/s", ratio);
        p = dm_program_new(32, 8, "t", "t", "x", "", 1, &err);
        add_coll(p, dm_program_group(p, ga, 16, &err), DM_OP_ALLREDUCE, S);
        add_coll(p, dm_program_group(p, gb, 16, &err), DM_OP_ALLREDUCE, S);
        r = run(p, &ft);
        double want = ratio == 2 ? lat + 2 * bus / (4 * nic) * 1e6 : alone;
        ok(r && fabs(r->step_us - want) <= 1e-9 * want,
           "%d:1: two at once end at %.3f us = %s", ratio, r ? r->step_us : -1,
           ratio == 2 ? "latency + 2 x bus bytes / 94 GB/s (max-min share of the uplink)" : "each alone");
        sim_result_free(r);
        dm_program_free(p);
    }

    /* Rail-optimized, 8 NICs per node (one per GPU), 2 nodes in one leaf group, rail uplinks 4:1
     * (2 x 23.5 / 4 = 11.75 GB/s per rail switch): GPU 0 with node 1's GPU 0 stays on rail 0
     * (NIC-bound, 23.5 GB/s); GPU 0 with node 1's GPU 1 crosses rails through the spine. */
    dm_cluster rl;
    ok(load_text(A800_NODE "nics_per_gpu = 1\nfabric = rail\nnodes_per_leaf = 2\noversubscription.leaf = 4\n", &rl) == 0,
       "rail fabric, one NIC per GPU");
    int same[2] = {0, 8}, cross[2] = {0, 9};
    double bs, bc;
    formula_us(&rl, same, 2, S, &bs);
    double tc = formula_us(&rl, cross, 2, S, &bc);
    ok_near(bs, nic, 1e-12, "same rail: NIC-bound (%.2f GB/s)", bs / 1e9);
    ok_near(bc, 2 * nic / 4, 1e-12, "cross-rail: through rail switch uplinks at 4:1 (%.3f GB/s)", bc / 1e9);
    p = dm_program_new(16, 8, "t", "t", "x", "", 1, &err);
    add_coll(p, dm_program_group(p, cross, 2, &err), DM_OP_ALLREDUCE, S);
    r = run(p, &rl);
    ok(r && fabs(r->step_us - tc) <= 1e-9 * tc, "cross-rail all-reduce in the simulator: %.3f us = formula", r ? r->step_us : -1);
    sim_result_free(r);
    dm_program_free(p);

    /* A pod level: one node per leaf, one leaf per pod, pod uplinks 4:1 (94 / 4 = 23.5 GB/s). */
    ok(load_text(A800_NODE "nics_per_node = 4\nfabric = fattree\nnodes_per_leaf = 1\nleaves_per_pod = 1\n"
                 "oversubscription.spine = 4\n", &ft) == 0, "fat tree with pods");
    formula_us(&ft, r16, 16, S, &bw_ft);
    ok_near(bw_ft, 4 * nic / 4, 1e-12, "cross-pod all-reduce at 4:1 above non-blocking leaves: %.2f GB/s", bw_ft / 1e9);
}

/* The report prints the tables with a fabric. */
static void test_report(void)
{
    dm_cluster ft;
    ok(load_text(A800_NODE "nics_per_node = 4\nfabric = fattree\nnodes_per_leaf = 1\noversubscription.leaf = 2\n", &ft) == 0,
       "fat tree");
    int r16[16];
    for (int i = 0; i < 16; i++) r16[i] = i;
    dm_program *p = dm_program_new(16, 8, "t", "t", "x", "", 1, &err);
    add_coll(p, dm_program_group(p, r16, 16, &err), DM_OP_ALLREDUCE, 4e8);
    sim_result *r = run(p, &ft);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (r) sim_print_report(f, p, r);
    fclose(f);
    ok(buf && strstr(buf, "busiest links: ") && strstr(buf, "by time saturated") && strstr(buf, "  leaf 0, up"),
       "sim's report lists the busiest links");
    free(buf);
    sim_result_free(r);
    dm_program_free(p);
}

/* The process holds a bounded table of described GPUs (fuzz_cluster filled it): once full, a
 * new description is refused with the file named. Last: it leaves the table full. */
static void test_gpu_table_full(void)
{
    dm_cluster c;
    int refused = 0, i;
    char text[256];
    for (i = 0; i < 400 && !refused; i++) {
        snprintf(text, sizeof text, "gpu_bf16_tflops = %d\ngpu_hbm_GBps = 1000\ngpus_per_node = 8\nnvlink_GBps = 450\n", 100 + i);
        refused = load_text(text, &c) != 0;
    }
    ok(refused && strstr(err.msg, path) && strstr(err.msg, "GPU descriptions"),
       "a full table of described GPUs: refused after %d, the file named (%s)", i, err.msg);
}

int main(void)
{
    snprintf(path, sizeof path, "%s/test_fabric.%d.cluster", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    test_gpus();
    test_fabric_file();
    test_link_ids();
    test_known_answers();
    test_report();
    test_gpu_table_full();
    unlink(path);
    return tap_done();
}
