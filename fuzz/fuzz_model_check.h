/* fuzz_model_check.h: checks shared by the model-file and HuggingFace-import harnesses: an
 * accepted model satisfies the format's invariants, expands into exactly `count` matrices per
 * entry, and survives a write/reload round trip through the model-file loader unchanged. */
#ifndef DM_FUZZ_MODEL_CHECK_H
#define DM_FUZZ_MODEL_CHECK_H
#include "model.h"

void fuzz_check_model(const dm_model *m); /* aborts (through FUZZ_CHECK) on a violation */

#endif
