/* inputs.h: the one input resolver of the commands: model, cluster (DM_CLUSTER_DEFAULT when none
 * is given), calibration (a file, or a name in the calibrations folder of datadir.h; applied to
 * the cluster) and kernel cost table (the calibration's when none is given, else the default
 * table), loaded in that order, and the resolved-configuration lines every report prints for
 * them. */
#ifndef DM_INPUTS_H
#define DM_INPUTS_H
#include <stdio.h>

#include "calib.h"
#include "cluster.h"
#include "costs.h"
#include "model.h"

typedef struct input_args {
    const char *model;       /* NULL: no model */
    const char *cluster;     /* NULL: DM_CLUSTER_DEFAULT */
    const char *calibration; /* NULL: none; a bare NAME: NAME.calib in the calibrations folder */
    const char *costs;       /* NULL: the calibration's table, else dm_costs_load_default */
    int gpus_per_node;       /* > 0: overrides the cluster's */
    int no_costs;            /* 1: a command that prices nothing (calibrate): no table loaded */
} input_args;

typedef struct inputs {
    dm_model *model;         /* NULL when not asked for */
    dm_cluster cluster;
    calib_info calib;        /* describe "" when no calibration */
    dm_costs *costs;         /* NULL with no_costs */
} inputs;

/* Resolve; on failure prints "dmuon CMD: MESSAGE" and returns 1 (the exit status), else 0. in is
 * always safe to free (inputs_free). */
int inputs_resolve(const char *cmd, const input_args *a, inputs *in);
void inputs_free(inputs *in);

/* "  model ..." (when loaded), the cluster's description, "  costs ..." (when loaded),
 * "  calibration ..." */
void inputs_print(FILE *f, const inputs *in);

#endif
