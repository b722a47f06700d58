/* fuzz_trace.c: libFuzzer harness for trace files, Chrome JSON and CSV (core/trace.c).
 * A rejected file must come with a message; an accepted trace must hold events with a known
 * kind, non-negative rank and op, and times that are numbers, and writing it is a fixpoint:
 * write, read back, write again gives the same bytes, in both formats (trace.h promises that
 * equal traces are equal bytes). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "trace.h"

typedef int (*writer)(dm_trace *, const char *, dm_err *);

static void check_fixpoint(dm_trace *t, writer w, const char *tag1, const char *tag2)
{
    const char *p1 = fuzz_tmp_path(tag1), *p2 = fuzz_tmp_path(tag2);
    dm_err err = {{0}};
    dm_trace *r = NULL;
    FUZZ_CHECK(w(t, p1, &err) == 0);
    if (dm_trace_read(p1, &r, &err) != 0) fprintf(stderr, "re-read failed: %s\n", err.msg);
    FUZZ_CHECK(r != NULL);
    FUZZ_CHECK(r->n == t->n);
    FUZZ_CHECK(w(r, p2, &err) == 0);
    FUZZ_CHECK(fuzz_files_equal(p1, p2));
    dm_trace_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    const char *path = fuzz_tmp_path("trace.in");
    fuzz_write_file(path, d, n);
    dm_trace *t = NULL;
    dm_err err = {{0}};
    if (dm_trace_read(path, &t, &err) != 0) {
        FUZZ_CHECK(t == NULL && err.msg[0]);
        return 0;
    }
    FUZZ_CHECK(t->nranks >= 0 && t->n >= 0);
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        FUZZ_CHECK(e->rank >= 0 && e->rank < t->nranks && e->op >= 0 && e->stream >= 0);
        FUZZ_CHECK((int)e->kind >= 0 && e->kind < DM_OP__COUNT);
        FUZZ_CHECK(!isnan(e->ts_us) && !isnan(e->dur_us) && !isnan(e->wait_us));
        FUZZ_CHECK(!isnan(e->bytes) && !isnan(e->flops));
    }
    check_fixpoint(t, dm_trace_write_csv, "w1.csv", "w2.csv");
    check_fixpoint(t, dm_trace_write_json, "w1.json", "w2.json");
    dm_trace_free(t);
    return 0;
}
