# models/local.mk: the bundled model descriptions (installed under $(pkgdatadir)/models), their
# generator, the HuggingFace config.json importer, and the tests of both.
# Regenerate the JSON files with: tools/gen_models.py /work/shared/reference/model-shapes.json
nobase_dist_pkgdata_DATA += \
	models/qwen2.5-0.5b.json \
	models/qwen2.5-1.5b.json \
	models/qwen2.5-3b.json \
	models/qwen2.5-7b.json \
	models/qwen2.5-14b.json \
	models/qwen2.5-32b.json \
	models/qwen2.5-72b.json \
	models/llama-3.2-3b.json \
	models/llama-3.1-8b.json \
	models/qwen2.5-vl-3b.json \
	models/wall-oss-flow.json \
	models/pi0.json \
	models/pi0.5.json \
	models/moonlight-16b-a3b.json \
	models/deepseek-v3.json \
	models/kimi-k2.json \
	models/deepseek-v4-flash.json \
	models/deepseek-v4-pro.json \
	models/wan2.2-ti2v-5b.json \
	models/wan2.1-t2v-14b.json
EXTRA_DIST += models/README.md tools/gen_models.py

libdmuon_a_SOURCES += core/hf_import.c core/hf_import.h

check_PROGRAMS += tests/test_models tests/test_hf_import
TESTS += tests/test_models tests/test_hf_import tests/gen_models.sh
tests_test_models_SOURCES = tests/test_models.c tests/tap.h
tests_test_models_LDADD = $(DM_LDADD)
tests_test_hf_import_SOURCES = tests/test_hf_import.c tests/tap.h
tests_test_hf_import_LDADD = $(DM_LDADD)
EXTRA_DIST += tests/gen_models.sh \
	tests/data/hf/qwen2.5-7b.json \
	tests/data/hf/qwen2.5-3b.json \
	tests/data/hf/llama-3.1-8b.json \
	tests/data/hf/llama-3.2-3b.json \
	tests/data/hf/qwen2.5-vl-3b.json \
	tests/data/hf/deepseek-v3.json \
	tests/data/hf/kimi-k2.json \
	tests/data/hf/moonlight-16b-a3b.json \
	tests/data/hf/gemma-2b.json \
	tests/data/hf/gemma2-2b.json
