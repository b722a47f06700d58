/* gpu_api.h: the GPU side as a plug-in. CUDA, cuBLAS and NCCL are linked into dmuon-gpu.so
 * only (built with CUDA: the NS and work kernels, their benchmarks, the executor's GPU backend
 * and `bench comm`'s NCCL part); the dmuon program needs none of them and loads the plug-in on
 * the first use of the GPU side: `run --backend gpu` (and `run`'s default backend, which asks
 * it for a device), `bench kernels`, `bench work`, `bench comm --backend gpu`. So the planner,
 * the simulator and the CPU executor start from the same build on a machine without CUDA (no
 * libcudart, no driver), and a start does not pay for loading the CUDA libraries.
 *
 * The plug-in exports one symbol, DM_GPU_API_SYMBOL, a dm_gpu_api. Its code calls the
 * program's own functions (the program is linked with its whole library and exports its
 * symbols), so it holds no second copy of any state. It is found by datadir.h's
 * dm_gpu_plugin_paths ($DMUON_GPU, the build tree, the installation). */
#ifndef DM_GPU_API_H
#define DM_GPU_API_H
#include "dm_error.h"

#define DM_GPU_API_ABI 1 /* bumped whenever dm_gpu_api or a struct it points to changes */
#define DM_GPU_API_SYMBOL "dm_gpu_plugin"

struct ns_device_info;      /* ns_cuda.h */
struct real_backend_ops;    /* real_priv.h */
struct real_bench_gpu_ops;  /* real_bench_gpu.h */

typedef struct dm_gpu_api {
    int abi;                /* DM_GPU_API_ABI of the plug-in's build */
    const char *build_id;   /* the configure run both were built by (DM_BUILD_ID): they must agree */
    /* 0 and info filled when a CUDA device is usable; -1 with the reason (ns_cuda.h). */
    int (*device_query)(struct ns_device_info *info, dm_err *err);
    /* `dmuon bench kernels` and `dmuon bench work`: their whole command lines (exit status). */
    int (*bench_kernels)(int argc, char **argv);
    int (*bench_work)(int argc, char **argv);
    /* The executor's GPU backend and `bench comm`'s GPU part; NULL when the plug-in was built
     * without NCCL or MPI. */
    const struct real_backend_ops *backend;
    const struct real_bench_gpu_ops *bench_comm;
} dm_gpu_api;

/* The plug-in, loaded on the first call (later calls return the same): NULL with the reason
 * when it cannot be (not built, not found: every path tried; the dynamic loader's message, e.g.
 * a missing libcudart; another build's plug-in). Not thread-safe on the first call. */
const dm_gpu_api *dm_gpu_side(dm_err *err);

/* The loaded plug-in's path; NULL before a successful dm_gpu. */
const char *dm_gpu_side_path(void);

#endif
