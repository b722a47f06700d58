/* hf_import.h: turn a HuggingFace config.json into a dmuon model (see core/model.h). */
#ifndef DM_HF_IMPORT_H
#define DM_HF_IMPORT_H
#include "json.h"
#include "model.h"

/* Build a model in memory from a config.json (the families hf_import.c lists and
 * models/README.md "Importing a HuggingFace config"), its architecture included (streams,
 * attention, MoE routing, tied heads, tensor uses). dm_model_load_file calls hf_import_tree for a
 * file that is a config.json, so every command's --model takes one.
 * *out owned by the caller (dm_model_free). Errors are "FILE:LINE:COL: expected ..." naming
 * the key (a missing one, or one inconsistent with the others). */
int hf_import_config(const char *config_json_path, dm_model **out, dm_err *err);
/* The same from the config already parsed (`path` names it in messages). */
int hf_import_tree(const jv *root, const char *path, dm_model **out, dm_err *err);

#endif
