/* fuzz_costs.c: libFuzzer harness for kernel cost tables (core/costs.c, formats dmuon-costs-2
 * and -1). A rejected table must come with a message naming the file. An accepted table must
 * answer every query (NS of any shape and batch, both algorithms, on its own GPU and projected
 * to the others; elementwise updates; workload kernels of every kind and op) with a finite,
 * positive time and a known source. */
#include <math.h>
#include <string.h>

#include "costs.h"
#include "fuzz_util.h"

static void check_time(double us)
{
    FUZZ_CHECK(isfinite(us) && us > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    const char *path = fuzz_tmp_path("costs.csv");
    fuzz_write_file(path, d, n);
    dm_costs *c = NULL;
    dm_err err = {{0}};
    if (dm_costs_load(path, &c, &err) != 0) {
        FUZZ_CHECK(c == NULL && strstr(err.msg, path) != NULL);
        return 0;
    }
    FUZZ_CHECK(dm_costs_describe(c) && dm_costs_path(c) && dm_costs_gpu(c));
    static const int64_t shapes[][2] = {{1, 1}, {64, 64}, {128, 4096}, {1000, 3000}, {4096, 128},
                                        {8192, 28672}, {32768, 32768}, {65536, 131072}};
    static const int batches[] = {1, 3, 32, 1000};
    for (int g = -1; g < dm_gpu_count(); g++) {
        const dm_gpu *target = g < 0 ? NULL : dm_gpu_at(g);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
                for (int a = 0; a < 2; a++) {
                    dm_cost_source src = (dm_cost_source)-1;
                    check_time(dm_costs_ns_us(c, target, shapes[s][0], shapes[s][1], batches[b],
                                              (dm_ns_algo)a, &src));
                    FUZZ_CHECK(src >= DM_COST_MEASURED && src <= DM_COST_ROOFLINE);
                }
        double us = -1;
        dm_ns_algo best = dm_costs_best_algo(c, target, 1024, 4096, 4, &us);
        FUZZ_CHECK(best == DM_NS_DIRECT || best == DM_NS_GRAM);
        check_time(us);
        for (int kind = 0; kind < DM_KERN__COUNT; kind++)
            for (int op = 0; op < DM_KOP__COUNT; op++)
                for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
                    dm_kernel k;
                    memset(&k, 0, sizeof k);
                    k.kind = (dm_kern_kind)kind;
                    k.op = (dm_kern_op)op;
                    k.m = shapes[q][0], k.n = shapes[q][1], k.k = shapes[(q + 3) % 8][0];
                    k.batch = batches[q % 4];
                    k.count = 1 + (int64_t)(q % 3);
                    dm_cost_source src = (dm_cost_source)-1;
                    check_time(dm_costs_kernel_us(c, target, &k, &src));
                    FUZZ_CHECK(src >= DM_COST_MEASURED && src <= DM_COST_ROOFLINE);
                }
        static const int64_t elems[] = {1, 4096, (int64_t)1 << 30, (int64_t)1 << 40};
        for (size_t e = 0; e < sizeof elems / sizeof elems[0]; e++) {
            check_time(dm_costs_elementwise_us(c, target, "muon_update", elems[e], NULL));
            check_time(dm_costs_elementwise_us(c, target, "adamw", elems[e], NULL));
        }
    }
    dm_costs_free(c);
    return 0;
}
