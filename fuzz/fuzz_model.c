/* fuzz_model.c: libFuzzer harness for model files (core/model.c, format dmuon-model-1).
 * The input is written to a scratch file and loaded. A rejected file must come with a message;
 * an accepted one must pass fuzz_check_model (invariants, expansion, write/reload round trip). */
#include "fuzz_util.h"
#include "fuzz_model_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    const char *path = fuzz_tmp_path("model.json");
    fuzz_write_file(path, d, n);
    dm_model *m = NULL;
    dm_err err = {{0}};
    if (dm_model_load_file(path, &m, &err) != 0) {
        FUZZ_CHECK(m == NULL && err.msg[0]);
        return 0;
    }
    fuzz_check_model(m);
    dm_model_free(m);
    return 0;
}
