/* gpu_api.c: loading the GPU plug-in (gpu_api.h) with dlopen, once. */
#include "config.h"

#include "gpu_api.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"

static const dm_gpu_api *loaded;
static char loaded_path[PATH_MAX];

const char *dm_gpu_side_path(void) { return loaded ? loaded_path : NULL; }

const dm_gpu_api *dm_gpu_side(dm_err *err)
{
    if (loaded) return loaded;
#ifndef DM_HAVE_CUDA
    dm_err_set(err, "the GPU side is not in this build (configure found no CUDA)");
    return NULL;
#else
    char paths[5][PATH_MAX], tried[900] = "";
    int n = dm_gpu_plugin_paths(paths, 5);
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        if (access(paths[i], F_OK) != 0) {
            if (len < sizeof tried - 1)
                len += (size_t)snprintf(tried + len, sizeof tried - len, "%s%.400s", len ? ", " : "", paths[i]);
            if (len >= sizeof tried) len = sizeof tried - 1;
            continue;
        }
        /* RTLD_NOW: a missing symbol or library fails here, not in the middle of a run */
        void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            dm_err_set(err, "cannot load the GPU side: %s", dlerror());
            return NULL;
        }
        const dm_gpu_api *api = dlsym(h, DM_GPU_API_SYMBOL);
        if (!api) {
            dm_err_set(err, "%.900s: not a dmuon GPU plug-in (no %s)", paths[i], DM_GPU_API_SYMBOL);
            dlclose(h);
            return NULL;
        }
        if (api->abi != DM_GPU_API_ABI || !api->build_id || strcmp(api->build_id, DM_BUILD_ID)) {
            dm_err_set(err, "%.800s: from another build (ABI %d, build %.40s; this program: ABI %d, build %s)", paths[i],
                       api->abi, api->build_id ? api->build_id : "?", DM_GPU_API_ABI, DM_BUILD_ID);
            dlclose(h);
            return NULL;
        }
        memcpy(loaded_path, paths[i], sizeof loaded_path); /* both PATH_MAX */
        return loaded = api; /* kept loaded for the process's life */
    }
    dm_err_set(err, "the GPU side (%s) is not installed: looked for %s%s", DM_GPU_PLUGIN_NAME, tried,
               getenv("DMUON_GPU") ? " ($DMUON_GPU)" : "");
    return NULL;
#endif
}
