/* fuzz_cluster.c: libFuzzer harness for cluster description files (core/cluster.c).
 * A rejected file must come with a message naming the file; an accepted one must hold values
 * inside the documented ranges, and the placement helpers and the description printer must
 * work on it for any rank count. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "fuzz_util.h"

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    const char *path = fuzz_tmp_path("cluster.txt");
    fuzz_write_file(path, d, n);
    dm_cluster c;
    dm_err err = {{0}};
    if (dm_cluster_load(path, &c, &err) != 0) {
        FUZZ_CHECK(strstr(err.msg, path) != NULL);
        return 0;
    }
    FUZZ_CHECK(c.gpu != NULL);
    FUZZ_CHECK(c.gpus_per_node >= 1 && c.gpus_per_node <= 1024);
    FUZZ_CHECK(c.nics_per_node >= 0 && c.nics_per_node <= 64);
    FUZZ_CHECK(isfinite(c.nvlink_Bps) && c.nvlink_Bps > 0);
    FUZZ_CHECK(isfinite(c.nic_Bps) && c.nic_Bps >= 0);
    FUZZ_CHECK(c.fwd_efficiency > 0 && c.fwd_efficiency <= 1);
    FUZZ_CHECK(c.nvlink_bus_efficiency > 0 && c.nvlink_bus_efficiency <= 1);
    FUZZ_CHECK(c.nvlink_latency_us >= 0 && c.net_latency_us >= 0 && c.base_latency_us >= 0);
    FUZZ_CHECK(memchr(c.name, 0, sizeof c.name) && memchr(c.source, 0, sizeof c.source));
    static const int ranks[] = {1, 2, 7, 8, 255, 256, 65536};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        int r = ranks[i] - 1;
        FUZZ_CHECK(dm_cluster_node_of(&c, r) >= 0);
        int nic = dm_cluster_nic_of(&c, r);
        FUZZ_CHECK(c.nics_per_node < 1 ? nic == -1 : nic >= 0 && nic < c.nics_per_node);
        FUZZ_CHECK(dm_cluster_nodes(&c, ranks[i]) >= 1);
    }
    if (!devnull) devnull = fopen("/dev/null", "w");
    dm_cluster_describe(&c, devnull);
    return 0;
}
