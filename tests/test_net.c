/* test_net.c: the incremental max-min network (sim/net.h) against the full progressive filling it
 * replaced, kept here as the reference (ref_*: the former sim/net.c, which recomputed every
 * flow's rate on every change): on random instances (random links, capacities, weights, starts,
 * finishes and capacity changes, several at one instant) every rate, every next finish time and
 * every set of finished flows must be identical, bit for bit, and again with every flow wide
 * (sim_net_wide_min: a settle walks its shared links and best lone link). Then: a settle refills
 * only the flows connected to the change; link usage (bytes carried, time saturated) has known
 * answers. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "tap.h"

/* ---- the reference: full progressive filling on every change ------------------------------ */

typedef struct ref_flow {
    int tag;
    double rem, rate;
    int nl;
    int *links;
    double *w;
    int frozen;
} ref_flow;

typedef struct ref_net {
    int n_links;
    double *cap, *rem, *wsum;
    char *mark;
    int *touched;
    int n_flows;
    ref_flow *f;
    double last_us;
} ref_net;

static ref_net *ref_new(int L, const double *cap, int max_flows)
{
    ref_net *n = calloc(1, sizeof *n);
    n->n_links = L;
    n->cap = malloc((size_t)L * sizeof(double));
    memcpy(n->cap, cap, (size_t)L * sizeof(double));
    n->rem = calloc((size_t)L, sizeof(double));
    n->wsum = calloc((size_t)L, sizeof(double));
    n->mark = calloc((size_t)L, 1);
    n->touched = malloc((size_t)L * sizeof(int));
    n->f = calloc((size_t)max_flows, sizeof *n->f);
    return n;
}

static void ref_free(ref_net *n)
{
    for (int i = 0; i < n->n_flows; i++) {
        free(n->f[i].links);
        free(n->f[i].w);
    }
    free(n->f);
    free(n->cap);
    free(n->rem);
    free(n->wsum);
    free(n->mark);
    free(n->touched);
    free(n);
}

static void ref_advance(ref_net *n, double now_us)
{
    double dt = (now_us - n->last_us) * 1e-6;
    if (dt > 0)
        for (int i = 0; i < n->n_flows; i++) {
            n->f[i].rem -= n->f[i].rate * dt;
            if (n->f[i].rem < 0) n->f[i].rem = 0;
        }
    n->last_us = now_us;
}

static int ref_uses(const ref_flow *f, int l)
{
    for (int i = 0; i < f->nl; i++)
        if (f->links[i] == l) return i;
    return -1;
}

static void ref_recompute(ref_net *n)
{
    int nt = 0;
    for (int i = 0; i < n->n_flows; i++) {
        ref_flow *f = &n->f[i];
        f->frozen = 0;
        f->rate = 0;
        for (int k = 0; k < f->nl; k++) {
            int l = f->links[k];
            if (!n->mark[l]) {
                n->mark[l] = 1;
                n->touched[nt++] = l;
                n->rem[l] = n->cap[l];
                n->wsum[l] = 0;
            }
            n->wsum[l] += f->w[k];
        }
    }
    int unfrozen = n->n_flows;
    while (unfrozen > 0) {
        double best = INFINITY;
        int bl = -1;
        for (int t = 0; t < nt; t++) {
            int l = n->touched[t];
            if (n->wsum[l] <= 1e-12) continue;
            double s = n->rem[l] / n->wsum[l];
            if (s < best) best = s, bl = l;
        }
        if (bl < 0) break;
        if (best < 0) best = 0;
        for (int i = 0; i < n->n_flows; i++) {
            ref_flow *f = &n->f[i];
            if (f->frozen || ref_uses(f, bl) < 0) continue;
            f->rate = best;
            f->frozen = 1;
            unfrozen--;
            for (int k = 0; k < f->nl; k++) {
                int l = f->links[k];
                n->rem[l] -= best * f->w[k];
                n->wsum[l] -= f->w[k];
                if (n->rem[l] < 0) n->rem[l] = 0;
            }
        }
        n->wsum[bl] = 0;
    }
    for (int t = 0; t < nt; t++) n->mark[n->touched[t]] = 0;
}

static void ref_add(ref_net *n, double now_us, double bytes, const int *links, const double *w, int nl, int tag)
{
    ref_advance(n, now_us);
    ref_flow *f = &n->f[n->n_flows++];
    memset(f, 0, sizeof *f);
    f->links = malloc((size_t)nl * sizeof(int));
    f->w = malloc((size_t)nl * sizeof(double));
    memcpy(f->links, links, (size_t)nl * sizeof(int));
    memcpy(f->w, w, (size_t)nl * sizeof(double));
    f->nl = nl;
    f->tag = tag;
    f->rem = bytes;
    ref_recompute(n);
}

static double ref_finish(const ref_net *n, const ref_flow *f)
{
    return f->rate > 0 ? n->last_us + f->rem / f->rate * 1e6 : INFINITY;
}

static double ref_next(const ref_net *n)
{
    double t = INFINITY;
    for (int i = 0; i < n->n_flows; i++) {
        double x = ref_finish(n, &n->f[i]);
        if (x < t) t = x;
    }
    return t;
}

static void ref_set_capacity(ref_net *n, double now_us, int l, double cap)
{
    if (n->cap[l] == cap) return;
    ref_advance(n, now_us);
    n->cap[l] = cap;
    ref_recompute(n);
}

static int ref_pop(ref_net *n, double now_us, int *tags, int max)
{
    int k = 0, j = 0;
    double tol = 1e-9 * fmax(1.0, fabs(now_us));
    for (int i = 0; i < n->n_flows; i++) {
        ref_flow *f = &n->f[i];
        if (k < max && ref_finish(n, f) <= now_us + tol) {
            tags[k++] = f->tag;
            free(f->links);
            free(f->w);
        } else {
            n->f[j++] = *f;
        }
    }
    n->n_flows = j;
    ref_advance(n, now_us);
    if (k) ref_recompute(n);
    return k;
}

/* ---- random instances --------------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static int rnd(int n) { return (int)(next_u64() % (uint64_t)n); }
static double unif(void) { return (double)(next_u64() >> 11) / 9007199254740992.0; }

/* Rates, in start order, bit for bit. */
static int same_rates(sim_net *n, const ref_net *r)
{
    if (sim_net_active(n) != r->n_flows) return 0;
    for (int i = 0; i < r->n_flows; i++)
        if (sim_net_rate(n, r->f[i].tag) != r->f[i].rate) return 0;
    return 1;
}

/* One random instance: L links, up to F flows alive, `steps` operations; returns the number of
 * mismatches (rates, next finish, finished tags). Link structure: a few "clusters" of links so
 * that the flow-link graph has several connected parts, and a few shared "core" links that now
 * and then join them. */
static int wide_min = SIM_NET_WIDE_MIN; /* the nets' sim_net_wide_min */
static int64_t local_settles; /* sim_net_local_settles, summed over instances */

static int random_instance(int L, int F, int steps, int shared, int ring, int *checks)
{
    /* shared: flows start over a few fixed link sets through sim_net_add_shared, each with its
     * memo (as the simulator's groups do), a set crossing a link twice now and then */
    enum { NSETS = 6 };
    int set_links[NSETS][8], set_nl[NSETS], set_dup[NSETS];
    double set_w[NSETS][8];
    sim_net_memo memo[NSETS];
    memset(memo, 0, sizeof memo);
    double *cap = malloc((size_t)L * sizeof(double));
    int nice = rnd(2); /* 1: capacities and weights from a few values, so that shares tie */
    if (ring == 1) nice = 1;
    for (int l = 0; l < L; l++) cap[l] = nice ? (double)(1 + rnd(ring ? 2 : 4)) * 10 : 1 + 99 * unif();
    dm_err err;
    sim_net *n = sim_net_new(L, cap, &err);
    sim_net_wide_min(n, wide_min);
    ref_net *r = ref_new(L, cap, F + 1);
    int bad = 0, tag = 0, tags_a[256], tags_b[256];
    int groups = 1 + rnd(6), core = L / 10;
    double now = 0;
    for (int q = 0; q < NSETS; q++) {
        set_nl[q] = 1 + rnd(8);
        for (int k = 0; k < set_nl[q]; k++) {
            set_links[q][k] = rnd(L);
            set_w[q][k] = nice ? (double)(1 + rnd(4)) / 4 : 0.05 + unif();
        }
        if (sim_net_links_check(n, set_links[q], set_w[q], set_nl[q], &set_dup[q], &err)) return 1;
    }
    for (int s = 0; s < steps; s++) {
        int op = rnd(10);
        if (op < 5 && r->n_flows < F) {
            int nl = 1 + rnd(6), links[48];
            double w[48];
            int g = rnd(groups), span = (L - core) / groups > 0 ? (L - core) / groups : 1;
            for (int k = 0; k < nl; k++) {
                links[k] = rnd(8) == 0 && core > 0 ? L - 1 - rnd(core) : (g * span + rnd(span)) % L;
                w[k] = nice ? (double)(1 + rnd(4)) / 4 : 0.05 + unif();
            }
            if (ring == 1 || (ring == 2 && rnd(5) == 0)) { /* a run of consecutive links, one weight
                           (as a ring's hops): flows that overlap share runs of links crossed by the
                           same two flows; ring 2: now and then such a run among short flows */
                int a = rnd(L), wk = rnd(3);
                nl = 4 + rnd(44 < L ? 44 : L - 4);
                if (ring == 2) nl = 8 + rnd(40 < L - 8 ? 40 : L - 8);
                for (int k = 0; k < nl; k++) links[k] = (a + k) % L, w[k] = wk == 2 ? 0.5 : 1 + wk;
            }
            double bytes = nice ? (double)(1 + rnd(5)) * 100 : 10 + 1000 * unif();
            if (shared) {
                int q = rnd(NSETS);
                sim_net_add_shared(n, now, bytes, set_links[q], set_w[q], set_nl[q], set_dup[q], &memo[q], tag, &err);
                ref_add(r, now, bytes, set_links[q], set_w[q], set_nl[q], tag);
            } else {
                sim_net_add(n, now, bytes, links, w, nl, tag, &err);
                ref_add(r, now, bytes, links, w, nl, tag);
            }
            tag++;
        } else if (op < 7) {
            int l = rnd(L);
            double c = nice ? (double)(1 + rnd(ring ? 2 : 4)) * 10 : 1 + 99 * unif();
            if (rnd(4) == 0) c = cap[l]; /* back to where it was */
            sim_net_set_capacity(n, now, l, c);
            ref_set_capacity(r, now, l, c);
        } else {
            /* Time moves: to the next finish (both must agree) or part way there. */
            double ta = sim_net_next_finish_us(n), tb = ref_next(r);
            (*checks)++;
            if (ta != tb) {
                bad++;
                tap_diag("next finish %.17g vs reference %.17g at step %d", ta, tb, s);
            }
            if (isinf(tb)) continue;
            double t = rnd(3) == 0 ? now + (tb - now) * unif() : tb;
            int ka = sim_net_pop_finished(n, t, tags_a, 256), kb = ref_pop(r, t, tags_b, 256);
            (*checks)++;
            if (ka != kb || memcmp(tags_a, tags_b, (size_t)ka * sizeof(int))) {
                bad++;
                tap_diag("finished %d vs reference %d at step %d", ka, kb, s);
            }
            now = t;
        }
        (*checks)++;
        if (!same_rates(n, r)) {
            bad++;
            tap_diag("rates differ from the reference after step %d (op %d)", s, op);
        }
    }
    local_settles += sim_net_local_settles(n);
    sim_net_free(n);
    ref_free(r);
    free(cap);
    return bad;
}

static void test_random(void)
{
    int bad = 0, checks = 0, inst = 0;
    for (int i = 0; i < 300; i++, inst++) bad += random_instance(6 + rnd(60), 1 + rnd(40), 200, 0, 0, &checks);
    for (int i = 0; i < 10; i++, inst++) bad += random_instance(200 + rnd(400), 100 + rnd(200), 2000, 0, 0, &checks);
    ok(bad == 0, "incremental max-min equals the full progressive filling bit for bit: %d random instances, %d checks "
       "(rates, next finishes, finished flows), %d mismatches", inst, checks, bad);
    bad = checks = inst = 0;
    for (int i = 0; i < 200; i++, inst++) bad += random_instance(100 + rnd(300), 10 + rnd(60), 600, 0, 1, &checks);
    ok(bad == 0, "the same with flows over runs of consecutive links (rings' hops: links that the same two flows "
       "cross, links one flow crosses alone): %d random instances, %d checks, %d mismatches", inst, checks, bad);
    bad = checks = inst = 0;
    for (int i = 0; i < 300; i++, inst++) bad += random_instance(6 + rnd(60), 1 + rnd(6), 200, 1, 0, &checks);
    ok(bad == 0, "the same over shared link sets with their memos (flows started alone, capacity changes between): "
       "%d random instances, %d checks, %d mismatches", inst, checks, bad);
    /* every flow of 1-4 links or more wide (net.h: SIM_NET_WIDE_MIN, 256 in the simulator) */
    for (int pass = 0; pass < 3; pass++) {
        bad = checks = inst = 0;
        for (int i = 0; i < (pass == 1 ? 200 : 300); i++, inst++) {
            wide_min = 1 + rnd(4);
            bad += pass == 0   ? random_instance(6 + rnd(60), 1 + rnd(40), 200, 0, 0, &checks)
                   : pass == 1 ? random_instance(100 + rnd(300), 10 + rnd(60), 600, 0, 1, &checks)
                               : random_instance(6 + rnd(60), 1 + rnd(6), 200, 1, 0, &checks);
        }
        for (int i = 0; pass == 0 && i < 10; i++, inst++) {
            wide_min = 1 + rnd(4);
            bad += random_instance(200 + rnd(400), 100 + rnd(200), 2000, 0, 0, &checks);
        }
        ok(bad == 0, "wide flows (a settle walks their shared links and best lone link), %s: %d random instances, "
           "%d checks, %d mismatches", pass == 0 ? "random links" : pass == 1 ? "rings' runs of links" : "shared link sets",
           inst, checks, bad);
    }
    /* wide runs among narrow flows (wide from 8 links; the short flows have at most 6): the
     * settles that refill only the narrow flows around a change (net.c, settle_local) */
    bad = checks = inst = 0;
    local_settles = 0;
    for (int i = 0; i < 300; i++, inst++) {
        wide_min = 8;
        bad += random_instance(60 + rnd(200), 10 + rnd(50), 600, 0, 2, &checks);
    }
    ok(bad == 0 && local_settles > 1000, "wide runs among narrow flows: %d random instances, %d checks, %d mismatches; "
       "%lld settles kept the wide flows' rates and refilled only the narrow flows around the change", inst, checks,
       bad, (long long)local_settles);
    wide_min = SIM_NET_WIDE_MIN;
}

/* Disconnected parts: a change refills only the flows linked to it. */
static void test_incremental(void)
{
    enum { P = 50 };
    double cap[2 * P];
    for (int i = 0; i < 2 * P; i++) cap[i] = 100;
    dm_err err;
    sim_net *n = sim_net_new(2 * P, cap, &err);
    for (int p = 0; p < P; p++) /* part p: links 2p, 2p+1; three flows */
        for (int k = 0; k < 3; k++) {
            int l[2] = {2 * p, 2 * p + 1};
            double w[2] = {1, 0.5};
            sim_net_add(n, 0, 1000, l, w, k == 2 ? 1 : 2, p * 3 + k, &err);
        }
    sim_net_next_finish_us(n);
    int64_t r0 = sim_net_recomputes(n), f0 = sim_net_flows_refilled(n);
    ok(r0 == 1 && f0 == 3 * P, "the starts at one instant settle together: 1 fill of %lld flows", (long long)f0);
    sim_net_set_capacity(n, 1, 7, 50); /* part 3 */
    sim_net_set_capacity(n, 1, 6, 50);
    ok_near(sim_net_rate(n, 9), 50.0 / 3, 1e-12, "capacity change: part 3's flows re-rated");
    ok(sim_net_recomputes(n) - r0 == 1 && sim_net_flows_refilled(n) - f0 == 3,
       "two capacity changes at one instant: one settle that refills the 3 flows of their part (%lld)",
       (long long)(sim_net_flows_refilled(n) - f0));
    ok_near(sim_net_rate(n, 0), 100.0 / 3, 1e-12, "other parts keep their rates");
    sim_net_free(n);
}

/* Usage: bytes carried and time saturated. */
static void test_usage(void)
{
    double cap[3] = {10, 4, 100};
    dm_err err;
    sim_net *n = sim_net_new(3, cap, &err);
    sim_net_track_usage(n);
    int la[2] = {0, 2}, lb[1] = {1};
    double w1[2] = {1, 0.5}, w2[1] = {1};
    sim_net_add(n, 0, 100e-6 * 10, la, w1, 2, 1, &err); /* 10 B/s on link 0 for 100 us */
    sim_net_add(n, 0, 50e-6 * 4, lb, w2, 1, 2, &err);   /* 4 B/s on link 1 for 50 us */
    int tags[2];
    double t = sim_net_next_finish_us(n);
    ok_near(t, 50, 1e-9, "flow 2 ends at 50 us");
    sim_net_pop_finished(n, t, tags, 2);
    t = sim_net_next_finish_us(n);
    ok_near(t, 100, 1e-9, "flow 1 ends at 100 us");
    sim_net_pop_finished(n, t, tags, 2);
    double b[3], sat[3];
    for (int l = 0; l < 3; l++) sim_net_link_usage(n, 200, l, &b[l], &sat[l]);
    ok_near(b[0], 1e-3, 1e-9, "link 0 carried 10 B/s x 100 us");
    ok_near(b[2], 0.5e-3, 1e-9, "link 2 carried half of it (weight 0.5)");
    ok_near(b[1], 2e-4, 1e-9, "link 1 carried 4 B/s x 50 us");
    ok_near(sat[0], 100, 1e-9, "link 0 saturated for 100 us");
    ok_near(sat[1], 50, 1e-9, "link 1 saturated for 50 us");
    ok(sat[2] == 0, "link 2 (5 of 100 B/s) never saturated");
    sim_net_free(n);
}

int main(void)
{
    test_random();
    test_incremental();
    test_usage();
    return tap_done();
}
