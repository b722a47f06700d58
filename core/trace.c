/* trace.c: writing and reading the shared trace format (trace.h). */
#define _GNU_SOURCE
#include "trace.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lines.h"
#include "outfile.h"

#define TRACE_FORMAT "dmuon-trace-1"
#define CSV_HEADER "rank,stream,op,kind,ts_us,dur_us,bytes,flops,layer,coll,wait_us"

int dm_trace_kind_from_name(const char *s)
{
    for (int k = 0; k < DM_OP__COUNT; k++)
        if (!strcmp(s, dm_op_kind_name((dm_op_kind)k))) return k;
    return -1;
}

int dm_trace_stream_from_name(const char *s)
{
    for (int k = 0; k < DM_STREAM__COUNT; k++)
        if (!strcmp(s, dm_stream_name((dm_stream)k))) return k;
    return -1;
}

dm_trace *dm_trace_new(const char *source, const dm_program *p, dm_err *err)
{
    dm_trace *t = dm_calloc(1, sizeof *t, err);
    if (!t) return NULL;
    snprintf(t->source, sizeof t->source, "%s", source ? source : "");
    if (p) {
        snprintf(t->model, sizeof t->model, "%s", p->model);
        snprintf(t->strategy, sizeof t->strategy, "%s", p->strategy);
        snprintf(t->cluster, sizeof t->cluster, "%s", p->cluster);
        t->nranks = p->nranks;
    }
    return t;
}

void dm_trace_free(dm_trace *t)
{
    if (!t) return;
    free(t->ev);
    free(t);
}

int dm_trace_add(dm_trace *t, const dm_trace_event *e, dm_err *err)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 1024;
        dm_trace_event *n = dm_realloc(t->ev, (size_t)cap * sizeof *n, err);
        if (!n) return -1;
        t->ev = n;
        t->cap = cap;
    }
    t->ev[t->n++] = *e;
    if (e->rank >= t->nranks) t->nranks = e->rank + 1;
    return 0;
}

/* A time as the writers print it (%.3f) and the readers get it back: the writers sort by
 * this, not by the exact time, so write -> read -> write keeps the order (1.0004 and 1.0001
 * both write as 1.000 and then sort by op). Exact for |x| < 1e9 us away from a rounding tie;
 * the printed text decides otherwise. */
static double written_us(double x)
{
    if (fabs(x) < 1e9) {
        double r = x * 1000.0, f = floor(r), d = r - f;
        if (fabs(d - 0.5) > 1e-3) return (d < 0.5 ? f : f + 1) / 1000.0; /* k / 1000 rounds as strtod does */
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.3f", x);
    return strtod(buf, NULL);
}

static int cmp_d(double x, double y) { return (x > y) - (x < y); }

/* (rank, stream, written ts, op), then every other written field, so equal rows are the only
 * ties and the order is one the written text keeps. */
static int cmp_ev(const void *a, const void *b)
{
    const dm_trace_event *x = a, *y = b;
    int c;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
    if ((c = cmp_d(written_us(x->ts_us), written_us(y->ts_us)))) return c;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if ((c = cmp_d(written_us(x->dur_us), written_us(y->dur_us)))) return c;
    if ((c = cmp_d(x->bytes, y->bytes)) || (c = cmp_d(x->flops, y->flops))) return c; /* %.17g: exact */
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    if (x->coll != y->coll) return x->coll < y->coll ? -1 : 1;
    return cmp_d(written_us(x->wait_us), written_us(y->wait_us));
}

void dm_trace_sort(dm_trace *t)
{
    if (t->n > 1) qsort(t->ev, (size_t)t->n, sizeof *t->ev, cmp_ev);
}

static const char *stream_label(int s)
{
    return s >= 0 && s < DM_STREAM__COUNT ? dm_stream_name((dm_stream)s) : "stream";
}

/* A metadata string as the reader keeps it (UTF-8, within the field's size), so a written and
 * re-read trace writes the same bytes: raw bytes from a CSV header that are not UTF-8 would
 * grow to U+FFFD and be cut on reading. */
static void meta_string(FILE *f, const char *key, const char *v, size_t field)
{
    char buf[256];
    json_utf8_clean(v, buf, field < sizeof buf ? field : sizeof buf);
    fprintf(f, ", \"%s\": ", key);
    json_write_string(f, buf);
}

int dm_trace_write_json(dm_trace *t, const char *path, dm_err *err)
{
    dm_trace_sort(t);
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    fprintf(f, "{\"traceEvents\": [\n");
    /* Metadata first for each rank and stream: name every rank and every stream it used. */
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        const char *sep = i ? ",\n" : "";
        if (i == 0 || e->rank != t->ev[i - 1].rank) {
            fprintf(f, "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}},\n"
                       "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"sort_index\": %d}}",
                    sep, e->rank, e->rank, e->rank, e->rank);
            sep = ",\n";
        }
        if (i == 0 || e->rank != t->ev[i - 1].rank || e->stream != t->ev[i - 1].stream) {
            fprintf(f, "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                    sep, e->rank, e->stream, stream_label(e->stream));
            sep = ",\n";
        }
        char name[48];
        if (e->layer >= 0) snprintf(name, sizeof name, "%s L%d", dm_op_kind_name(e->kind), e->layer);
        else snprintf(name, sizeof name, "%s", dm_op_kind_name(e->kind));
        fprintf(f, "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                   "\"args\": {\"op\": %d, \"kind\": \"%s\", \"bytes\": %.17g, \"flops\": %.17g, \"layer\": %d, \"coll\": %d, \"wait_us\": %.3f}}",
                sep, name, dm_op_kind_name(e->kind), e->rank, e->stream, e->ts_us, e->dur_us, e->op,
                dm_op_kind_name(e->kind), e->bytes, e->flops, e->layer, e->coll, e->wait_us);
    }
    fprintf(f, "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"format\": \"" TRACE_FORMAT "\"");
    meta_string(f, "source", t->source, sizeof t->source);
    meta_string(f, "model", t->model, sizeof t->model);
    meta_string(f, "strategy", t->strategy, sizeof t->strategy);
    meta_string(f, "cluster", t->cluster, sizeof t->cluster);
    fprintf(f, ", \"nranks\": %d}}\n", t->nranks);
    return dm_out_commit(o, err);
}

/* Metadata words in the CSV's first line must not contain blanks. */
static void put_word(FILE *f, const char *key, const char *v)
{
    fprintf(f, " %s=", key);
    for (const char *s = v; *s; s++) fputc(isspace((unsigned char)*s) ? '_' : *s, f);
}

int dm_trace_write_csv(dm_trace *t, const char *path, dm_err *err)
{
    dm_trace_sort(t);
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    fprintf(f, "# " TRACE_FORMAT);
    put_word(f, "source", t->source);
    put_word(f, "model", t->model);
    put_word(f, "strategy", t->strategy);
    put_word(f, "cluster", t->cluster);
    fprintf(f, " nranks=%d\n" CSV_HEADER "\n", t->nranks);
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        fprintf(f, "%d,%s,%d,%s,%.3f,%.3f,%.17g,%.17g,%d,%d,%.3f\n", e->rank, stream_label(e->stream), e->op,
                dm_op_kind_name(e->kind), e->ts_us, e->dur_us, e->bytes, e->flops, e->layer, e->coll, e->wait_us);
    }
    return dm_out_commit(o, err);
}

/* ---- reading ---- */

/* Where each event was read (line, column), for the checks after reading. */
typedef struct positions {
    int *at; /* 2 per event */
    int n, cap;
} positions;

static int pos_add(positions *p, int line, int col, dm_err *err)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 1024;
        int *a = dm_realloc(p->at, (size_t)cap * 2 * sizeof *a, err);
        if (!a) return -1;
        p->at = a;
        p->cap = cap;
    }
    p->at[2 * p->n] = line;
    p->at[2 * p->n + 1] = col;
    p->n++;
    return 0;
}

static int by_rank_op(const void *a, const void *b)
{
    const dm_trace_key *x = a, *y = b;
    if (x->rank != y->rank) return (x->rank > y->rank) - (x->rank < y->rank);
    if (x->op != y->op) return (x->op > y->op) - (x->op < y->op);
    return (x->i > y->i) - (x->i < y->i);
}

int dm_trace_index_build(const dm_trace *t, dm_trace_index *x, dm_err *err)
{
    x->n = t->n;
    if (!(x->k = dm_malloc(((size_t)t->n + 1) * sizeof *x->k, err))) return -1;
    for (int i = 0; i < t->n; i++) x->k[i] = (dm_trace_key){t->ev[i].rank, t->ev[i].op, i};
    if (t->n > 1) qsort(x->k, (size_t)t->n, sizeof *x->k, by_rank_op);
    return 0;
}

int dm_trace_index_find(const dm_trace_index *x, int rank, int op)
{
    int lo = 0, hi = x->n - 1;
    while (lo <= hi) { /* the first key of (rank, op) */
        int mid = lo + (hi - lo) / 2;
        const dm_trace_key *k = &x->k[mid];
        if (k->rank < rank || (k->rank == rank && k->op < op)) lo = mid + 1;
        else hi = mid - 1;
    }
    return lo < x->n && x->k[lo].rank == rank && x->k[lo].op == op ? x->k[lo].i : -1;
}

void dm_trace_index_free(dm_trace_index *x) { free(x->k); }

/* After reading: every event's rank below the nranks the trace declares (when it declares one),
 * and no (rank, op) twice (the compare matches ops by it: a second event would be shadowed). */
static int check_events(const char *path, dm_trace *t, int declared, const positions *p, dm_err *err)
{
    for (int i = 0; i < t->n; i++)
        if (declared > 0 && t->ev[i].rank >= declared)
            return dm_err_set(err, "%s:%d:%d: expected a rank below the trace's nranks %d, found %d", path, p->at[2 * i],
                              p->at[2 * i + 1], declared, t->ev[i].rank);
    dm_trace_index x;
    if (dm_trace_index_build(t, &x, err)) return -1;
    int dup = -1, first = -1;
    for (int i = 1; i < t->n; i++) {
        const dm_trace_key *a = &x.k[i - 1], *b = &x.k[i];
        if (a->rank == b->rank && a->op == b->op && (dup < 0 || b->i < dup)) dup = b->i, first = a->i;
    }
    dm_trace_index_free(&x);
    if (dup >= 0)
        return dm_err_set(err, "%s:%d:%d: duplicate event: rank %d op %d is already on line %d", path, p->at[2 * dup],
                          p->at[2 * dup + 1], t->ev[dup].rank, t->ev[dup].op, p->at[2 * first]);
    return 0;
}

static int read_json(const char *path, dm_trace *t, positions *pos, int *declared, dm_err *err)
{
    jv *doc = jv_parse_file(path, err);
    if (!doc) return -1;
    int rc = -1;
    const jv *evs, *other = jv_get(doc, "otherData");
    if (jv_req(doc, "traceEvents", JV_ARRAY, path, &evs, err)) goto out;
    if (other && other->type == JV_OBJECT) {
        const char *s = "";
        int64_t n;
        if (jv_opt_str(other, "source", path, &s, err)) goto out;
        snprintf(t->source, sizeof t->source, "%s", s);
        s = "";
        if (jv_opt_str(other, "model", path, &s, err)) goto out;
        snprintf(t->model, sizeof t->model, "%s", s);
        s = "";
        if (jv_opt_str(other, "strategy", path, &s, err)) goto out;
        snprintf(t->strategy, sizeof t->strategy, "%s", s);
        s = "";
        if (jv_opt_str(other, "cluster", path, &s, err)) goto out;
        snprintf(t->cluster, sizeof t->cluster, "%s", s);
        n = 0;
        if (jv_opt_int(other, "nranks", 0, 1 << 24, path, &n, err)) goto out;
        t->nranks = *declared = (int)n;
    }
    for (int i = 0; i < evs->n; i++) {
        const jv *e = evs->items[i], *args;
        const char *ph, *kind;
        if (e->type != JV_OBJECT) {
            dm_err_set(err, "%s:%d:%d: expected a trace event object", path, e->line, e->col);
            goto out;
        }
        if (jv_req_str(e, "ph", path, &ph, err)) goto out;
        if (strcmp(ph, "X")) continue; /* metadata and other phases */
        dm_trace_event x;
        memset(&x, 0, sizeof x);
        int64_t pid, tid, op, layer = -1, coll = -1;
        if (jv_req_int(e, "pid", 0, 1 << 24, path, &pid, err) || jv_req_int(e, "tid", 0, DM_STREAM__COUNT - 1, path, &tid, err) ||
            jv_req_num(e, "ts", -1e18, 1e18, path, &x.ts_us, err) ||
            jv_req_num(e, "dur", 0, 1e18, path, &x.dur_us, err) || jv_req(e, "args", JV_OBJECT, path, &args, err) ||
            jv_req_int(args, "op", 0, INT32_MAX, path, &op, err) || jv_req_str(args, "kind", path, &kind, err) ||
            jv_opt_num(args, "bytes", 0, 1e30, path, &x.bytes, err) ||
            jv_opt_num(args, "flops", 0, 1e30, path, &x.flops, err) ||
            jv_opt_int(args, "layer", -1, INT32_MAX, path, &layer, err) ||
            jv_opt_int(args, "coll", -1, INT32_MAX, path, &coll, err) ||
            jv_opt_num(args, "wait_us", 0, 1e18, path, &x.wait_us, err))
            goto out;
        int k = dm_trace_kind_from_name(kind);
        if (k < 0) {
            const jv *kv = jv_get(args, "kind");
            dm_err_set(err, "%s:%d:%d: expected an op kind (forward, backward, ns, ...), found \"%s\"", path, kv->line,
                       kv->col, kind);
            goto out;
        }
        x.rank = (int)pid;
        x.stream = (int)tid;
        x.op = (int)op;
        x.kind = (dm_op_kind)k;
        x.layer = (int)layer;
        x.coll = (int)coll;
        if (dm_trace_add(t, &x, err) || pos_add(pos, e->line, e->col, err)) goto out;
    }
    rc = 0;
out:
    jv_free(doc);
    return rc;
}

/* Next comma-separated field of *p (NUL-terminates it); column counted for messages. */
static char *field(char **p, int *col, int *start_col)
{
    char *s = *p;
    if (!s) return NULL;
    *start_col = *col;
    char *c = strchr(s, ',');
    if (c) {
        *c = 0;
        *p = c + 1;
        *col += (int)(c - s) + 1;
    } else {
        *p = NULL;
    }
    return s;
}

static int meta_word(const char *line, const char *key, char *out, size_t n)
{
    char pat[40];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *s = strstr(line, pat);
    if (!s) return 0;
    s += strlen(pat);
    size_t len = strcspn(s, " \n\r");
    if (len >= n) len = n - 1;
    memcpy(out, s, len);
    out[len] = 0;
    return 1;
}

static int read_csv(const char *path, dm_trace *t, positions *pos, int *declared, dm_err *err)
{
    dm_lines *in = dm_lines_open(path, 4096, DM_FILE_MAX, err);
    if (!in) return -1;
    char *line;
    int lineno = 0, rc = -1, have_header = 0, k;
    while ((k = dm_lines_next(in, &line, NULL, err)) != 0) {
        if (k < 0) goto out;
        lineno = dm_lines_number(in);
        if (line[0] == '#') {
            char nr[32];
            meta_word(line, "source", t->source, sizeof t->source);
            meta_word(line, "model", t->model, sizeof t->model);
            meta_word(line, "strategy", t->strategy, sizeof t->strategy);
            meta_word(line, "cluster", t->cluster, sizeof t->cluster);
            if (meta_word(line, "nranks", nr, sizeof nr)) {
                char *end;
                long n = strtol(nr, &end, 10);
                if (*end || n < 0 || n > (1 << 24)) {
                    dm_err_set(err, "%s:%d:1: expected nranks in [0, 16777216], found \"%s\"", path, lineno, nr);
                    goto out;
                }
                if (n > t->nranks) t->nranks = (int)n;
                if (n > *declared) *declared = (int)n;
            }
            continue;
        }
        if (!line[0]) continue;
        if (!have_header) {
            if (strcmp(line, CSV_HEADER)) {
                dm_err_set(err, "%s:%d:1: expected the header \"" CSV_HEADER "\"", path, lineno);
                goto out;
            }
            have_header = 1;
            continue;
        }
        static const char *names[] = {"rank", "stream", "op", "kind", "ts_us", "dur_us",
                                      "bytes", "flops", "layer", "coll", "wait_us"};
        double v[11];
        char *p = line, *s;
        int col = 1, sc = 1;
        dm_trace_event x;
        memset(&x, 0, sizeof x);
        for (int i = 0; i < 11; i++) {
            if (!(s = field(&p, &col, &sc))) {
                dm_err_set(err, "%s:%d:%d: expected 11 fields, found %d", path, lineno, col, i);
                goto out;
            }
            if (i == 1) {
                int st = dm_trace_stream_from_name(s);
                char *end;
                if (st < 0) st = (int)strtol(s, &end, 10), st = (*s && !*end && st >= 0 && st < DM_STREAM__COUNT) ? st : -1;
                if (st < 0) {
                    dm_err_set(err, "%s:%d:%d: expected a stream name (compute, comm-hi, comm-lo, compute-lo), found \"%s\"", path,
                               lineno, sc, s);
                    goto out;
                }
                x.stream = st;
                continue;
            }
            if (i == 3) {
                int k = dm_trace_kind_from_name(s);
                if (k < 0) {
                    dm_err_set(err, "%s:%d:%d: expected an op kind (forward, backward, ns, ...), found \"%s\"", path,
                               lineno, sc, s);
                    goto out;
                }
                x.kind = (dm_op_kind)k;
                continue;
            }
            char *end;
            errno = 0;
            v[i] = strtod(s, &end);
            if (errno || end == s || *end || !isfinite(v[i])) {
                dm_err_set(err, "%s:%d:%d: expected a number for %s, found \"%s\"", path, lineno, sc, names[i], s);
                goto out;
            }
            /* The JSON reader's ranges, so a trace reads the same in either format. */
            static const double lo[11] = {0, 0, 0, 0, -1e18, 0, 0, 0, -1, -1, 0};
            static const double hi[11] = {1 << 24, 0, INT32_MAX, 0, 1e18, 1e18, 1e30, 1e30, INT32_MAX, INT32_MAX, 1e18};
            static const int integral[11] = {1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0};
            if (v[i] < lo[i] || v[i] > hi[i] || (integral[i] && v[i] != floor(v[i]))) {
                dm_err_set(err, "%s:%d:%d: expected %s %s in [%.15g, %.15g], found \"%s\"", path, lineno, sc,
                           integral[i] ? "an integer" : "a number", names[i], lo[i], hi[i], s);
                goto out;
            }
        }
        if (p) {
            dm_err_set(err, "%s:%d:%d: expected 11 fields, found more", path, lineno, col);
            goto out;
        }
        x.rank = (int)v[0];
        x.op = (int)v[2];
        x.ts_us = v[4];
        x.dur_us = v[5];
        x.bytes = v[6];
        x.flops = v[7];
        x.layer = (int)v[8];
        x.coll = (int)v[9];
        x.wait_us = v[10];
        if (x.rank < 0 || x.op < 0) {
            dm_err_set(err, "%s:%d:1: expected non-negative rank and op", path, lineno);
            goto out;
        }
        if (dm_trace_add(t, &x, err) || pos_add(pos, lineno, 1, err)) goto out;
    }
    if (!have_header) {
        dm_err_set(err, "%s:%d:1: expected the header \"" CSV_HEADER "\"", path, lineno + 1);
        goto out;
    }
    rc = 0;
out:
    dm_lines_close(in);
    return rc;
}

int dm_trace_read(const char *path, dm_trace **out, dm_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return dm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    int c;
    while ((c = fgetc(f)) != EOF && isspace(c)) {}
    fclose(f);
    dm_trace *t = dm_trace_new("", NULL, err);
    if (!t) return -1;
    positions pos = {NULL, 0, 0};
    int declared = 0;
    int rc = c == '{' ? read_json(path, t, &pos, &declared, err) : read_csv(path, t, &pos, &declared, err);
    if (!rc) rc = check_events(path, t, declared, &pos, err);
    free(pos.at);
    if (rc) {
        dm_trace_free(t);
        return -1;
    }
    dm_trace_sort(t);
    *out = t;
    return 0;
}

int dm_trace_write(dm_trace *t, const char *path, dm_err *err)
{
    size_t L = strlen(path);
    return L > 4 && !strcmp(path + L - 4, ".csv") ? dm_trace_write_csv(t, path, err) : dm_trace_write_json(t, path, err);
}
