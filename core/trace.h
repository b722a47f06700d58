/* trace.h: the trace format shared by the simulator (predicted) and the real executor
 * (measured), so the two compare op by op (`dmuon compare`).
 *
 * One event per executed op of the step program: rank, stream, op id (its index in the rank's
 * program), kind, start and duration in microseconds from the step's start, and the payload
 * (bytes, flops, layer, collective id; -1 where none). wait_us: for a collective, how long the
 * op held its stream before every member had arrived (the traced start is the collective's
 * start, the same on every member); 0 otherwise.
 *
 * Two files, the same rows:
 *  - Chrome trace JSON (Perfetto and chrome://tracing open it): {"traceEvents": [...],
 *    "displayTimeUnit": "ms", "otherData": {"format": "dmuon-trace-1", "source", "model",
 *    "strategy", "cluster", "nranks"}}; one process per rank (pid = rank, named "rank R"), one
 *    thread per stream (tid = dm_stream, named by dm_stream_name), complete events ("ph": "X")
 *    named "KIND" or "KIND L<layer>" (category: the kind), with "ts"/"dur" in microseconds and
 *    "args": {"op", "kind", "bytes", "flops", "layer", "coll", "wait_us"}.
 *  - CSV: a first line "# dmuon-trace-1 source=S model=M strategy=S cluster=C nranks=N", then
 *    the header "rank,stream,op,kind,ts_us,dur_us,bytes,flops,layer,coll,wait_us" and one row
 *    per event (stream and kind by name).
 * Both are written in (rank, stream, ts as written, op) order with fixed number formats (times
 * %.3f, bytes and flops %.17g), so equal traces are equal bytes and write -> read -> write is a
 * fixpoint; writes are atomic (outfile.h). */
#ifndef DM_TRACE_H
#define DM_TRACE_H
#include "dm_error.h"
#include "program.h"

typedef struct dm_trace_event {
    int rank;
    int stream;      /* dm_stream */
    int op;          /* op id in the rank's program */
    dm_op_kind kind;
    double ts_us, dur_us;
    double bytes, flops;
    int layer, coll; /* -1 when none */
    double wait_us;
    int payload;     /* collectives: the op's dm_payload, as the interpreters know it; not written
                        to a file (DM_PAYLOAD_NONE in a trace read from one: the phases then tell
                        a gradient collective by its kind and stream, phases.h) */
} dm_trace_event;

typedef struct dm_trace {
    char source[32];   /* "sim", "real-gpu", "real-cpu" (the executor's backend); "real" in older traces */
    char model[128], strategy[64], cluster[128];
    int nranks;
    int n, cap;
    dm_trace_event *ev;
} dm_trace;

/* A new empty trace; metadata copied from p when given (else empty, nranks 0).
 * Owned by the caller (dm_trace_free, which accepts NULL). */
dm_trace *dm_trace_new(const char *source, const dm_program *p, dm_err *err);
void dm_trace_free(dm_trace *t);
int dm_trace_add(dm_trace *t, const dm_trace_event *e, dm_err *err);
/* Order by (rank, stream, ts_us as written (%.3f), op), ties by the other written fields: the
 * writers' order, which a written and re-read trace keeps. */
void dm_trace_sort(dm_trace *t);

/* Write (sorted first) atomically; path "-" is stdout. */
int dm_trace_write_json(dm_trace *t, const char *path, dm_err *err);
int dm_trace_write_csv(dm_trace *t, const char *path, dm_err *err);
/* The one meaning of every command's --trace FILE: CSV (dmuon-trace-1) when FILE ends in
 * ".csv", else Chrome JSON. */
int dm_trace_write(dm_trace *t, const char *path, dm_err *err);

/* Read either format (told apart by the first non-blank character: '{' is JSON). Errors name
 * FILE:LINE:COL. Refused besides malformed rows: a CSV line over 4096 bytes or a file over 1 GiB,
 * an event whose rank is not below the nranks the trace declares, and a (rank, op) given twice.
 * *out owned by the caller. */
int dm_trace_read(const char *path, dm_trace **out, dm_err *err);

/* The events of a trace by (rank, op): sorted keys, looked up by halving (memory grows with the
 * events, not with the rank and op numbers). Owned by the caller (dm_trace_index_free). */
typedef struct dm_trace_key {
    int rank, op, i; /* i: the event's index in t->ev */
} dm_trace_key;
typedef struct dm_trace_index {
    dm_trace_key *k;
    int n;
} dm_trace_index;
int dm_trace_index_build(const dm_trace *t, dm_trace_index *x, dm_err *err);
int dm_trace_index_find(const dm_trace_index *x, int rank, int op); /* the event's index, or -1 */
void dm_trace_index_free(dm_trace_index *x);

/* Reverse of dm_op_kind_name / dm_stream_name; -1 when unknown. */
int dm_trace_kind_from_name(const char *s);
int dm_trace_stream_from_name(const char *s);

#endif
