/* hf_import.h: turn a HuggingFace config.json into a dmuon model (see core/model.h). */
#ifndef DM_HF_IMPORT_H
#define DM_HF_IMPORT_H
#include "model.h"

/* Build a model in memory from a config.json (families: llama, qwen2, qwen2_5_vl, deepseek_v3,
 * kimi_k2, gemma, gemma2). *out owned by the caller (dm_model_free). Errors name file and key. */
int hf_import_config(const char *config_json_path, dm_model **out, dm_err *err);

#endif
