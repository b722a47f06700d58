# tools/local.mk: helper scripts shipped with the sources (model generator, PyTorch NS reference
# benchmark, dependency installer).
EXTRA_DIST += tools/gen_models.py tools/torch_ns_bench.py tools/install-deps.sh
