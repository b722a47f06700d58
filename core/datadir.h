/* datadir.h: where the data that commands read by default lives (models, kernel cost tables,
 * calibrations, regression baselines, gnuplot scripts), with one lookup order for all of them:
 *
 *   1. the kind's environment variable (DMUON_MODELS, DMUON_COSTS, DMUON_PLOTS) when it names a
 *      folder (a DMUON_COSTS that names a file is the cost model's business, costs.h);
 *   2. for a program run from its build tree (the executable is DM_BUILDDIR/dmuon or a program in
 *      DM_BUILDDIR/tests or DM_BUILDDIR/fuzz): the source tree's folder, so that a build never
 *      reads an older installation's data;
 *   3. the installed folder relative to the executable (BINDIR/../share/dmuon/KIND for the
 *      default layout), so that a staged (make install DESTDIR=...) or moved installation reads
 *      its own data;
 *   4. the configured installed folder, DM_PKGDATADIR/KIND;
 *   5. for an installed program, the source tree's folder last (a binary copied out of its
 *      build tree while the sources are still there).
 *
 * The folders of steps 2-5 are computed on a kind's first call, which is not thread-safe (the
 * commands make it before starting threads). */
#ifndef DM_DATADIR_H
#define DM_DATADIR_H
#include <limits.h>
#include <stddef.h>

typedef enum {
    DM_DATA_MODELS,    /* model files (NAME.json);    $DMUON_MODELS; installed models/, source models/ */
    DM_DATA_COSTS,     /* kernel cost tables (*.csv);  $DMUON_COSTS;  installed costs/, source traces/costs/ */
    DM_DATA_CALIB,     /* calibration files (*.calib); no variable;   installed calib/, source traces/calib/ */
    DM_DATA_BASELINES, /* regression baselines;        no variable;   installed baselines/, source traces/baselines/ */
    DM_DATA_PLOTS,     /* gnuplot scripts (*.gp);      $DMUON_PLOTS;  installed plots/, source plots/ */
    DM_DATA_KERNELS,   /* the kernels' autotune cache; no variable;   installed kernels/, source traces/kernels/ */
    DM_DATA__COUNT
} dm_data_kind;

#define DM_DATA_MAX_DIRS 4

/* The candidate folders of kind in lookup order into dirs (borrowed: the environment's string
 * or process-lifetime storage); returns how many (at most DM_DATA_MAX_DIRS). Each is listed
 * once; step 3's only when it exists, the others existing or not. The environment variable is
 * read on every call. */
int dm_data_dirs(dm_data_kind kind, const char **dirs);

/* The first candidate folder of kind that exists; NULL when none does (borrowed). */
const char *dm_data_dir(dm_data_kind kind);

/* The first DIR/name over the candidate folders that is a readable file, into buf (returned);
 * NULL when there is none or it does not fit. */
const char *dm_data_file(dm_data_kind kind, const char *name, char *buf, size_t size);

/* The kind's environment variable ("DMUON_MODELS", ...), NULL when it has none; its folder name
 * in an installation ("models", ...) and in the source tree ("traces/costs", ...). */
const char *dm_data_env(dm_data_kind kind);
const char *dm_data_installed_name(dm_data_kind kind);
const char *dm_data_source_name(dm_data_kind kind);

/* 1 when this program runs from its build tree (step 2 above applies), else 0. */
int dm_data_in_build_tree(void);

/* The GPU plug-in (gpu_api.h) by the same order: $DMUON_GPU alone when set (a file), else
 * DM_BUILDDIR/dmuon-gpu.so for a program run from its build tree, one in the executable's own
 * folder (a program copied out with its plug-in), the installed one relative to the executable
 * (BINDIR/../lib/dmuon/dmuon-gpu.so for the default layout), the configured
 * PKGLIBDIR/dmuon-gpu.so; each listed once (symbolic links resolved where the file exists),
 * existing or not. Fills paths[0..max) and returns how many. */
#define DM_GPU_PLUGIN_NAME "dmuon-gpu.so"
int dm_gpu_plugin_paths(char paths[][PATH_MAX], int max);

#endif
