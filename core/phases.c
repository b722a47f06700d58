/* phases.c: the step ruler (phases.h): step, forward, backward, optimizer, exposed
 * communication, optimizer window from a step's events, and the interval union it rests on. */
#include "phases.h"

#include <stdlib.h>
#include <string.h>

static const char *const names[DM_PHASE__COUNT] = {"step",         "forward", "backward",   "optimizer",
                                                   "exposed-comm", "ns",      "opt-window", "comm-busy"};

const char *dm_phase_name(dm_phase p) { return p >= 0 && p < DM_PHASE__COUNT ? names[p] : "?"; }

int dm_phase_from_name(const char *s)
{
    for (int p = 0; p < DM_PHASE__COUNT; p++)
        if (!strcmp(s, names[p])) return p;
    return -1;
}

int dm_phase_is_grad_coll(dm_op_kind kind, int stream, int payload)
{
    if (payload != DM_PAYLOAD_NONE) return payload == DM_PAYLOAD_GRADS && dm_op_is_collective(kind);
    return kind == DM_OP_REDUCE || kind == DM_OP_ALLREDUCE || kind == DM_OP_REDUCESCATTER ||
           (kind == DM_OP_ALLGATHER && stream == DM_STREAM_COMM_LO);
}

static int cmp_start(const void *a, const void *b)
{
    const double *x = a, *y = b;
    if (x[0] != y[0]) return (x[0] > y[0]) - (x[0] < y[0]);
    return (x[1] > y[1]) - (x[1] < y[1]);
}

int dm_iv_merge(double *iv, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) /* drop empty pairs first */
        if (iv[2 * i + 1] > iv[2 * i]) {
            iv[2 * k] = iv[2 * i];
            iv[2 * k + 1] = iv[2 * i + 1];
            k++;
        }
    if (k > 1) qsort(iv, (size_t)k, 2 * sizeof *iv, cmp_start);
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (m && iv[2 * i] <= iv[2 * m - 1]) {
            if (iv[2 * i + 1] > iv[2 * m - 1]) iv[2 * m - 1] = iv[2 * i + 1];
        } else {
            iv[2 * m] = iv[2 * i];
            iv[2 * m + 1] = iv[2 * i + 1];
            m++;
        }
    }
    return m;
}

double dm_iv_union(double *iv, int n)
{
    int m = dm_iv_merge(iv, n);
    double s = 0;
    for (int i = 0; i < m; i++) s += iv[2 * i + 1] - iv[2 * i];
    return s;
}

int dm_phases_rank(const dm_trace_event *ev, int n, int rank, double step_us, dm_phases *out, dm_err *err)
{
    memset(out, 0, sizeof *out);
    out->rank = rank;
    int nc = 0, nk = 0;
    for (int i = 0; i < n; i++) {
        const dm_trace_event *e = &ev[i];
        if (rank >= 0 && e->rank != rank) continue;
        if (dm_op_is_compute(e->kind)) nc++;
        else if (dm_op_is_collective(e->kind)) nk++;
    }
    double *civ = dm_malloc((size_t)(nc + nk + 1) * 2 * sizeof *civ, err);
    if (!civ) return -1;
    double *kiv = civ + 2 * nc;
    double last = 0, last_grad = -1, last_opt = -1;
    int ic = 0, ik = 0;
    for (int i = 0; i < n; i++) {
        const dm_trace_event *e = &ev[i];
        if (rank >= 0 && e->rank != rank) continue;
        double end = e->ts_us + e->dur_us;
        dm_phases_add_op(e->kind, e->ts_us, e->dur_us, &last, &out->us[DM_PHASE_NS]);
        switch (e->kind) {
        case DM_OP_FORWARD: out->us[DM_PHASE_FORWARD] += e->dur_us; break;
        case DM_OP_BACKWARD: out->us[DM_PHASE_BACKWARD] += e->dur_us; break;
        case DM_OP_NS:
        case DM_OP_MUON_UPDATE:
        case DM_OP_ADAMW:
            out->us[DM_PHASE_OPTIMIZER] += e->dur_us;
            if (end > last_opt) last_opt = end;
            break;
        default: break;
        }
        if (dm_op_is_compute(e->kind)) {
            civ[2 * ic] = e->ts_us;
            civ[2 * ic + 1] = end;
            ic++;
        } else if (dm_op_is_collective(e->kind)) {
            kiv[2 * ik] = e->ts_us;
            kiv[2 * ik + 1] = end;
            ik++;
            if (dm_phase_is_grad_coll(e->kind, e->stream, e->payload) && end > last_grad) last_grad = end;
        }
    }
    double step = step_us > 0 ? step_us : last;
    double busy = dm_iv_union(civ, ic);
    out->us[DM_PHASE_STEP] = step;
    out->us[DM_PHASE_EXPOSED_COMM] = step > busy ? step - busy : 0;
    out->us[DM_PHASE_COMM_BUSY] = dm_iv_union(kiv, ik);
    if (last_opt >= 0)
        out->us[DM_PHASE_OPT_WINDOW] =
            last_grad >= 0 && last_opt > last_grad ? last_opt - last_grad : out->us[DM_PHASE_OPTIMIZER];
    free(civ);
    return 0;
}

static int by_rank(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

int dm_phases_trace(const dm_trace *t, dm_phases *out, dm_err *err)
{
    memset(out, 0, sizeof *out);
    if (t->n == 0) return dm_err_set(err, "trace has no events");
    for (int i = 0; i < t->n; i++)
        if (t->ev[i].rank < 0) return dm_err_set(err, "trace event with rank %d", t->ev[i].rank);
    /* (rank, end) pairs sorted by rank, folded into each present rank's last end (last[k] of
     * rank[k]): memory grows with the events, not with the rank numbers a file may hold */
    double *re = dm_malloc((size_t)t->n * 3 * sizeof *re, err);
    if (!re) return -1;
    double *last = re + 2 * t->n;
    for (int i = 0; i < t->n; i++) re[2 * i] = t->ev[i].rank, re[2 * i + 1] = t->ev[i].ts_us + t->ev[i].dur_us;
    if (t->n > 1) qsort(re, (size_t)t->n, 2 * sizeof *re, by_rank);
    int k = 0;
    for (int i = 0; i < t->n; i++) {
        if (!k || re[2 * i] != re[2 * (k - 1)]) re[2 * k] = re[2 * i], last[k++] = 0;
        if (re[2 * i + 1] > last[k - 1]) last[k - 1] = re[2 * i + 1];
    }
    int cr = (int)re[2 * dm_phases_critical_rank(last, k)];
    free(re);
    return dm_phases_rank(t->ev, t->n, cr, 0, out, err);
}

int dm_phases_critical_rank(const double *last_us, int nranks)
{
    int cr = 0;
    for (int r = 1; r < nranks; r++)
        if (last_us[r] > last_us[cr]) cr = r;
    return cr;
}
