/* inputs.c: model, cluster, calibration and costs for every command (inputs.h). */
#include "inputs.h"

#include <string.h>
#include <sys/stat.h>

#include "datadir.h"

/* A calibration named without a folder and not a file here: NAME.calib or NAME in the
 * calibrations folder (datadir.h) when there is one, else arg as given (its error names it). */
static const char *calib_path(const char *arg, char *buf, size_t size)
{
    struct stat st;
    char name[512];
    if (strchr(arg, '/') || stat(arg, &st) == 0 || snprintf(name, sizeof name, "%s.calib", arg) >= (int)sizeof name)
        return arg;
    const char *p = dm_data_file(DM_DATA_CALIB, name, buf, size);
    if (!p) p = dm_data_file(DM_DATA_CALIB, arg, buf, size);
    return p ? p : arg;
}

int inputs_resolve(const char *cmd, const input_args *a, inputs *in)
{
    dm_err err;
    memset(in, 0, sizeof *in);
    const char *costs = a->costs;
    if ((a->model && dm_model_load(a->model, &in->model, &err)) ||
        dm_cluster_load(a->cluster ? a->cluster : DM_CLUSTER_DEFAULT, &in->cluster, &err))
        goto fail;
    if (a->gpus_per_node > 0) in->cluster.gpus_per_node = a->gpus_per_node;
    char calib_buf[4096];
    if (a->calibration && calib_apply(calib_path(a->calibration, calib_buf, sizeof calib_buf), &in->cluster, &in->calib, &err))
        goto fail;
    if (!costs && in->calib.costs[0]) costs = in->calib.costs;
    if (!a->no_costs && (costs ? dm_costs_load(costs, &in->costs, &err) : dm_costs_load_default(&in->costs, &err)))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
    return 1;
}

void inputs_free(inputs *in)
{
    dm_model_free(in->model);
    dm_costs_free(in->costs);
    in->model = NULL;
    in->costs = NULL;
}

void inputs_print(FILE *f, const inputs *in)
{
    const dm_model *m = in->model;
    if (m)
        fprintf(f, "  model       %s (%s): %.3f B parameters, %lld Muon matrices (%.3f B), %lld AdamW tensors\n", m->name,
                m->path && *m->path ? m->path : "built in", dm_model_params(m) / 1e9,
                (long long)dm_model_count_role(m, DM_ROLE_MUON), dm_model_params_role(m, DM_ROLE_MUON) / 1e9,
                (long long)dm_model_count_role(m, DM_ROLE_ADAMW));
    dm_cluster_describe(&in->cluster, f);
    if (in->costs) fprintf(f, "  costs       %s\n", dm_costs_describe(in->costs));
    fprintf(f, "  calibration %s\n", in->calib.describe[0] ? in->calib.describe : "none (cluster preset or file as given)");
}
