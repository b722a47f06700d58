/* net.c: max-min fair sharing of link bandwidth among concurrent flows (net.h). */
#include "net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct flow {
    int tag;
    double rem;     /* bytes left */
    double rate;    /* bytes/s */
    int nl;
    int *links;
    double *w;
    int frozen;
} flow;

struct sim_net {
    int n_links;
    double *cap, *rem, *wsum;
    char *mark;
    int *touched;
    int n_flows, cap_flows;
    flow *f;
    double last_us;
    uint64_t version;
    int64_t recomputes;
};

sim_net *sim_net_new(int n_links, const double *cap_Bps, dm_err *err)
{
    sim_net *n = dm_calloc(1, sizeof *n, err);
    if (!n) return NULL;
    n->n_links = n_links;
    size_t L = (size_t)(n_links > 0 ? n_links : 1);
    if (!(n->cap = dm_malloc(L * sizeof *n->cap, err)) || !(n->rem = dm_calloc(L, sizeof *n->rem, err)) ||
        !(n->wsum = dm_calloc(L, sizeof *n->wsum, err)) || !(n->mark = dm_calloc(L, 1, err)) ||
        !(n->touched = dm_malloc(L * sizeof *n->touched, err)))
        goto fail;
    if (n_links > 0) memcpy(n->cap, cap_Bps, (size_t)n_links * sizeof *n->cap);
    return n;
fail:
    sim_net_free(n);
    return NULL;
}

void sim_net_free(sim_net *n)
{
    if (!n) return;
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

static void advance(sim_net *n, double now_us)
{
    double dt = (now_us - n->last_us) * 1e-6;
    if (dt > 0)
        for (int i = 0; i < n->n_flows; i++) {
            n->f[i].rem -= n->f[i].rate * dt;
            if (n->f[i].rem < 0) n->f[i].rem = 0;
        }
    n->last_us = now_us;
}

static int uses(const flow *f, int l)
{
    for (int i = 0; i < f->nl; i++)
        if (f->links[i] == l) return i;
    return -1;
}

/* Progressive filling. */
static void recompute(sim_net *n)
{
    n->version++;
    n->recomputes++;
    int nt = 0;
    for (int i = 0; i < n->n_flows; i++) {
        flow *f = &n->f[i];
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
            flow *f = &n->f[i];
            if (f->frozen || uses(f, bl) < 0) continue;
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
        n->wsum[bl] = 0; /* saturated: no flow left on it may rise */
    }
    for (int t = 0; t < nt; t++) n->mark[n->touched[t]] = 0;
}

int sim_net_add(sim_net *n, double now_us, double bytes, const int *links, const double *w, int nl, int tag,
                dm_err *err)
{
    if (nl < 1) return dm_err_set(err, "net: a flow needs at least one link");
    for (int i = 0; i < nl; i++)
        if (links[i] < 0 || links[i] >= n->n_links || !(w[i] > 0))
            return dm_err_set(err, "net: bad link %d (weight %g)", links[i], w[i]);
    advance(n, now_us);
    if (n->n_flows == n->cap_flows) {
        int cap = n->cap_flows ? 2 * n->cap_flows : 16;
        flow *nf = dm_realloc(n->f, (size_t)cap * sizeof *nf, err);
        if (!nf) return -1;
        n->f = nf;
        n->cap_flows = cap;
    }
    flow *f = &n->f[n->n_flows];
    memset(f, 0, sizeof *f);
    if (!(f->links = dm_malloc((size_t)nl * sizeof *f->links, err)) || !(f->w = dm_malloc((size_t)nl * sizeof *f->w, err))) {
        free(f->links);
        return -1;
    }
    memcpy(f->links, links, (size_t)nl * sizeof *links);
    memcpy(f->w, w, (size_t)nl * sizeof *w);
    f->nl = nl;
    f->tag = tag;
    f->rem = bytes;
    n->n_flows++;
    recompute(n);
    return 0;
}

static double finish_us(const sim_net *n, const flow *f)
{
    return f->rate > 0 ? n->last_us + f->rem / f->rate * 1e6 : INFINITY;
}

double sim_net_next_finish_us(const sim_net *n)
{
    double t = INFINITY;
    for (int i = 0; i < n->n_flows; i++) {
        double x = finish_us(n, &n->f[i]);
        if (x < t) t = x;
    }
    return t;
}

uint64_t sim_net_version(const sim_net *n) { return n->version; }

void sim_net_set_capacity(sim_net *n, double now_us, int link, double cap_Bps)
{
    if (link < 0 || link >= n->n_links || n->cap[link] == cap_Bps) return;
    advance(n, now_us);
    n->cap[link] = cap_Bps;
    recompute(n);
}
int sim_net_active(const sim_net *n) { return n->n_flows; }
int64_t sim_net_recomputes(const sim_net *n) { return n->recomputes; }

double sim_net_rate(const sim_net *n, int tag)
{
    for (int i = 0; i < n->n_flows; i++)
        if (n->f[i].tag == tag) return n->f[i].rate;
    return 0;
}

int sim_net_pop_finished(sim_net *n, double now_us, int *tags, int max)
{
    /* A flow whose predicted finish is now (to rounding) is done; advancing first would leave
     * rounding residue of a few bytes. */
    int k = 0, j = 0;
    double tol = 1e-9 * fmax(1.0, fabs(now_us));
    for (int i = 0; i < n->n_flows; i++) {
        flow *f = &n->f[i];
        if (k < max && finish_us(n, f) <= now_us + tol) {
            tags[k++] = f->tag;
            free(f->links);
            free(f->w);
        } else {
            n->f[j++] = *f;
        }
    }
    n->n_flows = j;
    advance(n, now_us);
    if (k) recompute(n);
    return k;
}
