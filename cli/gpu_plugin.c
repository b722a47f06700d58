/* gpu_plugin.c: the one symbol of the GPU plug-in dmuon-gpu.so (core/gpu_api.h): what the dmuon
 * program reaches of the GPU side. Built only with CUDA; the executor's backend and `bench
 * comm`'s GPU part only with NCCL and MPI as well. */
#include "config.h"

#include "commands.h"
#include "gpu_api.h"
#include "ns_cuda.h"
#if defined(DM_HAVE_NCCL) && defined(DM_HAVE_MPI)
#include "real_bench_gpu.h"
#include "real_priv.h"
#define PLUGIN_BACKEND &real_backend_gpu
#define PLUGIN_BENCH_COMM &real_bench_gpu_cuda
#else
#define PLUGIN_BACKEND NULL
#define PLUGIN_BENCH_COMM NULL
#endif

/* default visibility: the one symbol dlsym looks up */
__attribute__((visibility("default"))) const dm_gpu_api dm_gpu_plugin = {
    .abi = DM_GPU_API_ABI,
    .build_id = DM_BUILD_ID,
    .device_query = ns_device_query,
    .bench_kernels = cmd_bench_kernels,
    .bench_work = cmd_bench_work,
    .backend = PLUGIN_BACKEND,
    .bench_comm = PLUGIN_BENCH_COMM,
};
