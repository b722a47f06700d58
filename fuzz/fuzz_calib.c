/* fuzz_calib.c: libFuzzer harness for the calibration inputs (core/calib.c): the calibration
 * file (dmuon-calib-1, calib_read/calib_apply) and collective timings (dmuon-comm-1 CSV,
 * calib_fit_comm). The first byte picks which; the rest is the file.
 * Calibration file: a rejected file comes with a message; an accepted one writes and reads back
 * to the same entries, and applying it to a preset either fails with a message or leaves a
 * cluster whose values are finite and positive where they must be.
 * Comm CSV: a rejected file comes with a message; fitted entries hold finite numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "fuzz_util.h"

static void check_calib_file(const char *path)
{
    static calib c, r; /* large: keep them off the stack */
    dm_err err = {{0}};
    if (calib_read(path, &c, &err) != 0) {
        FUZZ_CHECK(err.msg[0]);
        return;
    }
    FUZZ_CHECK(c.n >= 0 && c.n <= CALIB_MAX_ENTRIES);
    const char *p2 = fuzz_tmp_path("written.calib");
    FUZZ_CHECK(calib_write(&c, p2, &err) == 0);
    int rc = calib_read(p2, &r, &err);
    if (rc != 0) fprintf(stderr, "re-read failed: %s\n", err.msg);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(r.n == c.n);
    for (int i = 0; i < c.n; i++) {
        FUZZ_CHECK(strcmp(r.e[i].key, c.e[i].key) == 0);
        FUZZ_CHECK(strcmp(r.e[i].value, c.e[i].value) == 0);
    }
    dm_cluster cl;
    FUZZ_CHECK(dm_cluster_load("h200", &cl, &err) == 0);
    calib_info info;
    err.msg[0] = 0;
    if (calib_apply(path, &cl, &info, &err) != 0) {
        FUZZ_CHECK(err.msg[0]);
        return;
    }
    FUZZ_CHECK(cl.gpu != NULL && cl.gpus_per_node >= 1);
    FUZZ_CHECK(isfinite(cl.nvlink_Bps) && cl.nvlink_Bps > 0 && isfinite(cl.nic_Bps) && cl.nic_Bps >= 0);
    FUZZ_CHECK(cl.fwd_efficiency > 0 && cl.fwd_efficiency <= 1);
    FUZZ_CHECK(cl.nvlink_bus_efficiency > 0 && cl.nvlink_bus_efficiency <= 1);
    FUZZ_CHECK(isfinite(cl.base_latency_us) && cl.base_latency_us >= 0);
    FUZZ_CHECK(isfinite(cl.nvlink_latency_us) && cl.nvlink_latency_us >= 0);
    FUZZ_CHECK(isfinite(cl.net_latency_us) && cl.net_latency_us >= 0);
}

static void check_comm_csv(const char *path)
{
    static calib c;
    memset(&c, 0, sizeof c);
    dm_cluster base;
    dm_err err = {{0}};
    FUZZ_CHECK(dm_cluster_load("h200x2", &base, &err) == 0);
    if (calib_fit_comm(&c, path, &base, CALIB_MIN_BYTES, NULL, &err) != 0) {
        FUZZ_CHECK(err.msg[0]);
        return;
    }
    FUZZ_CHECK(c.n >= 0 && c.n <= CALIB_MAX_ENTRIES);
    for (int i = 0; i < c.n; i++) {
        if (strcmp(c.e[i].key, "costs") == 0) continue;
        char *end;
        double v = strtod(c.e[i].value, &end);
        FUZZ_CHECK(end != c.e[i].value && isfinite(v));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 1) return 0;
    const char *path = fuzz_tmp_path("calib.in");
    fuzz_write_file(path, d + 1, n - 1);
    if (d[0] & 1) check_comm_csv(path);
    else check_calib_file(path);
    return 0;
}
