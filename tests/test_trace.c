/* test_trace.c: the trace writers' order (core/trace.c). Times are written as %.3f, so the
 * writers sort by the written time, not the exact one: events 0.4 ns apart that write as the
 * same time keep one order through write -> read -> write, in both formats (the trace
 * fuzzer's fixpoint check failed on such an input before); metadata that is not UTF-8 keeps its
 * bytes through the JSON round trip too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "trace.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    buf[n] = 0;
    fclose(f);
    return buf;
}

static dm_trace_event ev(int op, double ts)
{
    dm_trace_event e;
    memset(&e, 0, sizeof e);
    e.rank = 0;
    e.stream = DM_STREAM_COMPUTE;
    e.op = op;
    e.kind = DM_OP_FORWARD;
    e.ts_us = ts;
    e.dur_us = 1;
    e.layer = e.coll = -1;
    return e;
}

typedef int (*writer)(dm_trace *, const char *, dm_err *);

/* Write t to p1, read it back into *back, write that to p2: 1 when the two files are the same
 * bytes. The files are removed; *back (owned by the caller) is NULL when the read failed. */
static int round_trip(dm_trace *t, writer w, const char *p1, const char *p2, dm_trace **back, dm_err *err)
{
    *back = NULL;
    int rc = w(t, p1, err) || dm_trace_read(p1, back, err) || w(*back, p2, err);
    char *a = slurp(p1), *b = slurp(p2);
    int same = rc == 0 && a && b && strcmp(a, b) == 0;
    free(a);
    free(b);
    unlink(p1);
    unlink(p2);
    return same;
}

static void fixpoint(const char *what, writer w, const char *p1, const char *p2)
{
    dm_err err = {{0}};
    dm_trace *t = dm_trace_new("sim", NULL, &err), *r = NULL;
    /* op 3 a hair later than op 5, both written as 1.000; and a rounding tie (2.0005) */
    dm_trace_event es[] = {ev(3, 1.0004), ev(5, 1.0001), ev(7, 2.0005), ev(6, 2.0004999), ev(1, -0.0001), ev(2, 0)};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) dm_trace_add(t, &es[i], &err);
    int same = round_trip(t, w, p1, p2, &r, &err);
    ok(t->ev[0].op == 1 && t->ev[1].op == 2, "%s: -0.0001 and 0 both write as 0.000: by op", what);
    ok(t->ev[2].op == 3 && t->ev[3].op == 5, "%s: 1.0004 (op 3) and 1.0001 (op 5) both write as 1.000: by op", what);
    ok(r && r->n == t->n, "%s: read back%s%s", what, r ? "" : ": ", r ? "" : err.msg);
    ok(same, "%s: write -> read -> write gives the same bytes", what);
    for (int i = 0; r && i < r->n; i++)
        if (r->ev[i].op != t->ev[i].op) {
            ok(0, "%s: event %d is op %d after the round trip, op %d before", what, i, r->ev[i].op, t->ev[i].op);
            break;
        }
    dm_trace_free(t);
    dm_trace_free(r);
}

/* Metadata from a CSV header that is not UTF-8: the JSON writer writes it as the reader keeps
 * it (U+FFFD, cut to the field at a character boundary), so the round trip is a fixpoint. */
static void metadata(const char *p1, const char *p2)
{
    dm_err err = {{0}};
    dm_trace *t = dm_trace_new("sim", NULL, &err), *r = NULL;
    memset(t->model, 0xff, sizeof t->model - 1);
    memcpy(t->source, "s\x01\xc3\xa9\xc3", 6);
    dm_trace_event e = ev(0, 1);
    dm_trace_add(t, &e, &err);
    ok(round_trip(t, dm_trace_write_json, p1, p2, &r, &err),
       "JSON: metadata of 127 bytes that are not UTF-8: the same bytes after a round trip%s%s", r ? "" : ": ",
       r ? "" : err.msg);
    ok(r && strlen(r->model) == 126 && strncmp(r->model, "\xef\xbf\xbd", 3) == 0 &&
           strcmp(r->source, "s\x01\xc3\xa9\xef\xbf\xbd") == 0,
       "read back as U+FFFD, 42 of them in the 128-byte field; control bytes kept");
    dm_trace_free(t);
    dm_trace_free(r);
}

int main(void)
{
    char p1[256], p2[256];
    snprintf(p1, sizeof p1, "/tmp/dm_trace_a_%d.csv", (int)getpid());
    snprintf(p2, sizeof p2, "/tmp/dm_trace_b_%d.csv", (int)getpid());
    fixpoint("CSV", dm_trace_write_csv, p1, p2);
    snprintf(p1, sizeof p1, "/tmp/dm_trace_a_%d.json", (int)getpid());
    snprintf(p2, sizeof p2, "/tmp/dm_trace_b_%d.json", (int)getpid());
    fixpoint("JSON", dm_trace_write_json, p1, p2);
    metadata(p1, p2);
    return tap_done();
}
