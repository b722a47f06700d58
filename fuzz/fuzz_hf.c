/* fuzz_hf.c: libFuzzer harness for the HuggingFace config.json import (core/hf_import.c).
 * A rejected config must come with a message; an imported model must be one the model-file
 * loader accepts back unchanged and must pass fuzz_check_model. */
#include "fuzz_model_check.h"
#include "fuzz_util.h"
#include "hf_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    const char *path = fuzz_tmp_path("config.json");
    fuzz_write_file(path, d, n);
    dm_model *m = NULL;
    dm_err err = {{0}};
    if (hf_import_config(path, &m, &err) != 0) {
        FUZZ_CHECK(err.msg[0]);
        return 0;
    }
    fuzz_check_model(m);
    dm_model_free(m);
    return 0;
}
