/* inputs.c: model, cluster, calibration and costs for every command (inputs.h). */
#include "inputs.h"

#include <string.h>

int inputs_resolve(const char *cmd, const input_args *a, inputs *in)
{
    dm_err err;
    memset(in, 0, sizeof *in);
    const char *costs = a->costs;
    if ((a->model && dm_model_load(a->model, &in->model, &err)) ||
        dm_cluster_load(a->cluster ? a->cluster : DM_CLUSTER_DEFAULT, &in->cluster, &err))
        goto fail;
    if (a->gpus_per_node > 0) in->cluster.gpus_per_node = a->gpus_per_node;
    if (a->calibration && calib_apply(a->calibration, &in->cluster, &in->calib, &err)) goto fail;
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
