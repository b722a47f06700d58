/* phases.h: the one ruler for the parts of a step. The simulator, compare, calibrate, validate
 * and both executor backends measure a step with these functions and nothing else, so a
 * predicted and a measured step are cut into the same parts by the same rule.
 *
 * Input: the events of a step (trace.h's dm_trace_event: rank, stream, kind, ts_us, dur_us,
 * wait_us), times in microseconds from the step's start.
 *
 * Per rank:
 *   step          the rank's last event end (or the step length the caller measured, when it
 *                 gives one: the executor's wall time includes its end-of-step agreement)
 *   forward       summed durations of forward ops
 *   backward      summed durations of backward ops
 *   optimizer     summed durations of ns, muon-update and adamw ops
 *   ns            summed durations of ns ops
 *   exposed-comm  step - busy, busy = the length of the union of the compute ops' intervals
 *                 (dm_op_is_compute); on a GPU that runs one kernel at a time the union is
 *                 the sum, where two compute streams overlap it is not
 *   opt-window    from the end of the last gradient collective to the end of the last
 *                 optimizer op (dm_phase_is_grad_coll); the optimizer sum when the rank has
 *                 no gradient collective before it; 0 when it has no optimizer op
 *   comm-busy     the length of the union of the collectives' intervals [ts, ts + dur)
 * Per trace: the critical rank is the rank whose last event ends last (the lowest on ties);
 * the trace's phases are that rank's. */
#ifndef DM_PHASES_H
#define DM_PHASES_H
#include "dm_error.h"
#include "program.h"
#include "trace.h"

typedef enum {
    DM_PHASE_STEP,
    DM_PHASE_FORWARD,
    DM_PHASE_BACKWARD,
    DM_PHASE_OPTIMIZER,
    DM_PHASE_EXPOSED_COMM,
    DM_PHASE_NS,
    DM_PHASE_OPT_WINDOW,
    DM_PHASE_COMM_BUSY,
    DM_PHASE__COUNT
} dm_phase;

/* The first DM_PHASE__COMPARED phases are the ones compare/validate tabulate and judge. */
#define DM_PHASE__COMPARED 5

/* "step", "forward", "backward", "optimizer", "exposed-comm", "ns", "opt-window", "comm-busy" */
const char *dm_phase_name(dm_phase p);
/* Reverse of dm_phase_name; -1 when unknown. */
int dm_phase_from_name(const char *s);

typedef struct dm_phases {
    double us[DM_PHASE__COUNT];
    int rank;      /* the rank measured (the critical rank for a trace) */
} dm_phases;

/* A gradient collective: one whose payload is gradients (program.h), where the event carries its
 * payload (the interpreters' own traces). A trace read from a file does not (dm_trace_event):
 * then a reduce, all-reduce, reduce-scatter, or an all-gather on the low-priority comm stream
 * (the scheduler's gradient stream), which also counts a split NS's gram all-reduces
 * (--ns-split) and dmuon's forward weight all-gathers (comm-lo beside the broadcasts): only the
 * former can end after the gradients, so a file's opt-window of a split plan ends its gradients
 * at its last gram all-reduce. */
int dm_phase_is_grad_coll(dm_op_kind kind, int stream, int payload);

/* One op's part of a rank's step and NS time as dm_phases_rank counts them: its end (start +
 * duration) raises *last, an NS op's duration adds to *ns. The simulator sums every rank's by it
 * without building the events (sim.c results), so both give the same doubles. */
static inline void dm_phases_add_op(int kind, double start, double dur, double *last, double *ns)
{
    double end = start + dur;
    if (end > *last) *last = end;
    if (kind == DM_OP_NS) *ns += dur;
}

/* The phases of `rank` from n events (events of other ranks are skipped; rank < 0 takes every
 * event as the rank's). step_us > 0: the step's length as the caller measured it; else the
 * last event's end. Fails only on allocation. */
int dm_phases_rank(const dm_trace_event *ev, int n, int rank, double step_us, dm_phases *out, dm_err *err);

/* The phases of a trace: its critical rank's. Fails on an empty trace or a negative rank. */
int dm_phases_trace(const dm_trace *t, dm_phases *out, dm_err *err);

/* The critical rank from each rank's last event end (nranks entries): the one that ends last,
 * the lowest on ties. For a caller that holds its events per rank (the simulator). */
int dm_phases_critical_rank(const double *last_us, int nranks);

/* Intervals: n pairs iv[2i] = start, iv[2i+1] = end. dm_iv_merge sorts them in place by start
 * and merges overlapping or touching ones into disjoint pairs at the front; returns their
 * count. dm_iv_union does that and returns their total length. Pairs with end <= start count
 * for nothing. */
int dm_iv_merge(double *iv, int n);
double dm_iv_union(double *iv, int n);

#endif
