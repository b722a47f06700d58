/* test_phases.c: the step ruler (core/phases.h) on hand-made events with known answers. */
#include <string.h>

#include "phases.h"
#include "tap.h"

static dm_trace_event ev(int rank, int stream, dm_op_kind k, double ts, double dur)
{
    dm_trace_event e;
    memset(&e, 0, sizeof e);
    e.rank = rank;
    e.stream = stream;
    e.kind = k;
    e.ts_us = ts;
    e.dur_us = dur;
    e.layer = e.coll = -1;
    return e;
}

int main(void)
{
    dm_err err;
    double iv[] = {5, 7, 0, 2, 1, 3, 3, 4, 9, 9, 8, 6};
    ok_near(dm_iv_union(iv, 6), 6.0, 1e-12, "union of [0,2) [1,3) [3,4) [5,7) (and empty pairs) is 6");
    double iv2[] = {0, 1, 2, 3};
    ok(dm_iv_merge(iv2, 2) == 2, "disjoint intervals stay two");

    /* rank 0: fwd 0-10, bwd 10-30, reduce (comm-lo) 25-40, ns 40-50, update 50-52;
     * an all-gather of weights on comm-hi 0-5 (not a gradient collective) */
    dm_trace_event e[] = {
        ev(0, DM_STREAM_COMM_HI, DM_OP_ALLGATHER, 0, 5), ev(0, DM_STREAM_COMPUTE, DM_OP_FORWARD, 0, 10),
        ev(0, DM_STREAM_COMPUTE, DM_OP_BACKWARD, 10, 20), ev(0, DM_STREAM_COMM_LO, DM_OP_REDUCE, 25, 15),
        ev(0, DM_STREAM_COMPUTE, DM_OP_NS, 40, 10), ev(0, DM_STREAM_COMPUTE, DM_OP_MUON_UPDATE, 50, 2),
        ev(1, DM_STREAM_COMPUTE, DM_OP_FORWARD, 0, 60),
    };
    dm_phases ph;
    ok(dm_phases_rank(e, 7, 0, 0, &ph, &err) == 0, "rank phases");
    ok_near(ph.us[DM_PHASE_STEP], 52, 1e-12, "step = last end");
    ok_near(ph.us[DM_PHASE_FORWARD], 10, 1e-12, "forward");
    ok_near(ph.us[DM_PHASE_BACKWARD], 20, 1e-12, "backward");
    ok_near(ph.us[DM_PHASE_OPTIMIZER], 12, 1e-12, "optimizer = ns + update");
    ok_near(ph.us[DM_PHASE_NS], 10, 1e-12, "ns");
    ok_near(ph.us[DM_PHASE_EXPOSED_COMM], 10, 1e-12, "exposed = step - compute union (30-40 idle)");
    ok_near(ph.us[DM_PHASE_OPT_WINDOW], 12, 1e-12, "window = last update end - last gradient collective end");
    ok_near(ph.us[DM_PHASE_COMM_BUSY], 20, 1e-12, "comm busy = union of collectives");
    ok(dm_phases_rank(e, 7, 0, 100, &ph, &err) == 0 && ph.us[DM_PHASE_EXPOSED_COMM] == 58,
       "a measured step length counts its tail as exposed");

    /* overlapping compute on two streams: union, not sum */
    dm_trace_event o[] = {ev(0, DM_STREAM_COMPUTE, DM_OP_BACKWARD, 0, 10), ev(0, DM_STREAM_COMM_LO, DM_OP_NS, 5, 10)};
    ok(dm_phases_rank(o, 2, 0, 0, &ph, &err) == 0 && ph.us[DM_PHASE_EXPOSED_COMM] == 0 && ph.us[DM_PHASE_STEP] == 15,
       "overlapping compute ops: busy is their union (15 of 15)");
    ok(ph.us[DM_PHASE_OPT_WINDOW] == 10, "no gradient collective: the window is the optimizer sum");

    /* a split NS (--ns-split): reduce (comm-lo) 0-10, NS stage 10-12, gram all-reduce (comm-hi)
     * 12-14, NS stage 14-16, update 16-17; a weights all-gather on comm-lo 0-3 (dmuon's forward
     * fetch). With payloads (the interpreters' events) the window starts at the reduce's end;
     * without (a trace read from a file) the stream rule ends the gradients at the gram's */
    dm_trace_event sp[] = {
        ev(0, DM_STREAM_COMM_LO, DM_OP_ALLGATHER, 0, 3), ev(0, DM_STREAM_COMM_LO, DM_OP_REDUCE, 0, 10),
        ev(0, DM_STREAM_COMPUTE, DM_OP_NS, 10, 2),       ev(0, DM_STREAM_COMM_HI, DM_OP_ALLREDUCE, 12, 2),
        ev(0, DM_STREAM_COMPUTE, DM_OP_NS, 14, 2),       ev(0, DM_STREAM_COMPUTE, DM_OP_MUON_UPDATE, 16, 1),
    };
    ok(dm_phases_rank(sp, 6, 0, 0, &ph, &err) == 0 && ph.us[DM_PHASE_OPT_WINDOW] == 3,
       "no payloads (a file's trace): the gram all-reduce ends the gradients (window 3)");
    sp[0].payload = DM_PAYLOAD_WEIGHTS, sp[1].payload = DM_PAYLOAD_GRADS, sp[3].payload = DM_PAYLOAD_GRAM;
    ok(dm_phases_rank(sp, 6, 0, 0, &ph, &err) == 0 && ph.us[DM_PHASE_OPT_WINDOW] == 7,
       "with payloads: the window starts at the gradient reduce's end (7), the gram all-reduce inside it");
    ok(!dm_phase_is_grad_coll(DM_OP_ALLGATHER, DM_STREAM_COMM_LO, DM_PAYLOAD_WEIGHTS) &&
           dm_phase_is_grad_coll(DM_OP_ALLGATHER, DM_STREAM_COMM_LO, DM_PAYLOAD_NONE) &&
           dm_phase_is_grad_coll(DM_OP_ALLGATHER, DM_STREAM_COMM_HI, DM_PAYLOAD_GRADS) &&
           !dm_phase_is_grad_coll(DM_OP_NS, DM_STREAM_COMPUTE, DM_PAYLOAD_GRADS),
       "a gradient collective by payload where known, by kind and stream where not");

    dm_trace t;
    memset(&t, 0, sizeof t);
    t.n = 7;
    t.ev = e;
    ok(dm_phases_trace(&t, &ph, &err) == 0 && ph.rank == 1 && ph.us[DM_PHASE_STEP] == 60 &&
           ph.us[DM_PHASE_EXPOSED_COMM] == 0,
       "trace: the critical rank is the one that ends last");
    t.n = 0;
    ok(dm_phases_trace(&t, &ph, &err) < 0, "an empty trace is refused");
    ok(dm_phase_from_name("exposed-comm") == DM_PHASE_EXPOSED_COMM && !strcmp(dm_phase_name(DM_PHASE_OPT_WINDOW), "opt-window"),
       "names round-trip");
    return tap_done();
}
