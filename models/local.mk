# models/local.mk: the bundled model descriptions (installed under $(pkgdatadir)/models).
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
	models/moonlight-16b-a3b-6l.json \
	models/deepseek-v3.json \
	models/kimi-k2.json \
	models/deepseek-v4-flash.json \
	models/deepseek-v4-pro.json \
	models/wan2.2-ti2v-5b.json \
	models/wan2.1-t2v-14b.json
EXTRA_DIST += models/README.md
