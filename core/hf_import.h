/* hf_import.h: turn a HuggingFace config.json into a dmuon model (see core/model.h). */
#ifndef DM_HF_IMPORT_H
#define DM_HF_IMPORT_H
#include "model.h"

/* Build a model in memory from a config.json (families: llama, mistral, mixtral, qwen2,
 * qwen2_5_vl, qwen3, qwen3_moe, phi3, gemma, gemma2, deepseek_v3, kimi_k2), its architecture
 * included (streams, attention, MoE routing, tied heads, tensor uses; models/README.md).
 * *out owned by the caller (dm_model_free). Errors are "FILE:LINE:COL: expected ..." naming
 * the key (a missing one, or one inconsistent with the others). */
int hf_import_config(const char *config_json_path, dm_model **out, dm_err *err);

#endif
