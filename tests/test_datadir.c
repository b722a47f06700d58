/* test_datadir.c: the data folders' lookup order (core/datadir.h) for a program run from its
 * build tree, as this test is: the environment variable when it names a folder (read on every
 * call), then the source tree's folder, then the installed ones; files found in the first
 * folder that has them. (The installed program's order: tests/install.sh.) */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datadir.h"
#include "tap.h"

int main(void)
{
    const char *dirs[DM_DATA_MAX_DIRS];
    char buf[4096], tmp[] = "/tmp/dmuon-datadir.XXXXXX";
    ok(dm_data_in_build_tree() == 1, "a test program runs from the build tree");
    unsetenv("DMUON_MODELS");
    int n = dm_data_dirs(DM_DATA_MODELS, dirs);
    ok(n >= 2 && !strcmp(dirs[0], DM_SRCDIR "/models"), "models: the source tree's first (%s)", n ? dirs[0] : "none");
    ok(n >= 2 && !strcmp(dirs[n - 1], DM_PKGDATADIR "/models"), "models: the configured installed folder last (%s)",
       n ? dirs[n - 1] : "none");
    int dup = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) dup |= !strcmp(dirs[i], dirs[j]);
    ok(!dup, "each folder listed once");
    ok(dm_data_dir(DM_DATA_MODELS) && !strcmp(dm_data_dir(DM_DATA_MODELS), DM_SRCDIR "/models"),
       "the models folder is the source tree's");
    ok(dm_data_file(DM_DATA_COSTS, "roofline.csv", buf, sizeof buf) && !strcmp(buf, DM_SRCDIR "/traces/costs/roofline.csv"),
       "costs: roofline.csv in traces/costs (%s)", buf);
    ok(dm_data_file(DM_DATA_CALIB, "h200x2.calib", buf, sizeof buf) && !strcmp(buf, DM_SRCDIR "/traces/calib/h200x2.calib"),
       "calibrations: traces/calib");
    ok(dm_data_file(DM_DATA_BASELINES, "cpu-2core/quick.tsv", buf, sizeof buf) != NULL, "baselines: traces/baselines");
    ok(dm_data_file(DM_DATA_PLOTS, "styles.gp", buf, sizeof buf) != NULL, "plots: plots/");
    ok(dm_data_file(DM_DATA_KERNELS, "autotune_h200.tsv", buf, sizeof buf) != NULL, "kernels: traces/kernels");
    ok(dm_data_file(DM_DATA_MODELS, "no-such-model.json", buf, sizeof buf) == NULL, "a missing file: NULL");
    ok(dm_data_file(DM_DATA_MODELS, "qwen2.5-7b.json", buf, 8) == NULL, "a path that does not fit: NULL");

    /* the environment variable: first when it is a folder, read on every call */
    if (!mkdtemp(tmp)) return 1;
    setenv("DMUON_MODELS", tmp, 1);
    n = dm_data_dirs(DM_DATA_MODELS, dirs);
    ok(n >= 3 && !strcmp(dirs[0], tmp) && !strcmp(dirs[1], DM_SRCDIR "/models"), "DMUON_MODELS set later comes first");
    ok(dm_data_dir(DM_DATA_MODELS) && !strcmp(dm_data_dir(DM_DATA_MODELS), tmp), "and is the models folder");
    ok(dm_data_file(DM_DATA_MODELS, "qwen2.5-7b.json", buf, sizeof buf) && !strcmp(buf, DM_SRCDIR "/models/qwen2.5-7b.json"),
       "a file it lacks comes from the next folder");
    setenv("DMUON_MODELS", "/no/such/folder", 1);
    n = dm_data_dirs(DM_DATA_MODELS, dirs);
    ok(n >= 1 && !strcmp(dirs[0], DM_SRCDIR "/models"), "a DMUON_MODELS that is no folder is passed over");
    setenv("DMUON_MODELS", "", 1);
    ok(dm_data_dirs(DM_DATA_MODELS, dirs) == n, "an empty DMUON_MODELS too");
    unsetenv("DMUON_MODELS");
    rmdir(tmp);

    ok(dm_data_env(DM_DATA_COSTS) && !strcmp(dm_data_env(DM_DATA_COSTS), "DMUON_COSTS"), "costs' variable: DMUON_COSTS");
    ok(dm_data_env(DM_DATA_PLOTS) && !strcmp(dm_data_env(DM_DATA_PLOTS), "DMUON_PLOTS"), "plots' variable: DMUON_PLOTS");
    ok(dm_data_env(DM_DATA_BASELINES) == NULL, "baselines have no variable");
    ok(!strcmp(dm_data_installed_name(DM_DATA_COSTS), "costs") && !strcmp(dm_data_source_name(DM_DATA_COSTS), "traces/costs"),
       "costs: installed costs/, source traces/costs/");
    ok(dm_data_dirs(DM_DATA__COUNT, dirs) == 0 && dm_data_env(DM_DATA__COUNT) == NULL, "an out-of-range kind: nothing");
    return tap_done();
}
