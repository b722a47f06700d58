# tests/local.mk: every test: unit tests as small TAP programs (tests/tap.h; a program's source
# is tests/NAME.c, linked with LDADD), command-level tests as TAP shell scripts (tests/tap.sh)
# with their golden outputs and data. GPU and MPI tests skip when there is no GPU or no mpirun.
TESTS += tests/cli_basic.sh tests/man.sh tests/install.sh tests/plots.sh
EXTRA_DIST += tests/cli_basic.sh tests/tap.sh tests/tap.h tests/man.sh tests/install.sh tests/plots.sh \
	tests/golden/help.txt

# core
check_PROGRAMS += tests/test_json tests/test_phases tests/test_faults tests/test_outfile tests/test_plumbing \
	tests/test_datadir tests/test_models tests/test_hf_import tests/test_hf_families tests/test_costs tests/test_program tests/test_trace \
	tests/test_memory
TESTS += tests/test_memory tests/test_json tests/test_phases tests/test_faults tests/test_outfile tests/faults.sh tests/interrupt.sh \
	tests/test_datadir tests/test_plumbing tests/test_models tests/test_hf_import tests/test_hf_families tests/gen_models.sh tests/test_costs \
	tests/test_program tests/test_trace tests/hostile.sh tests/hostile_readers.sh
EXTRA_DIST += tests/faults.sh tests/interrupt.sh tests/gen_models.sh tests/hostile.sh tests/hostile_readers.sh \
	docs/RELIABILITY.md tests/data/hostile/ctrl-name.json tests/data/hostile/evil-name.cluster \
	tests/data/hostile/hf-vision-depth.json tests/data/hostile/layers-overflow.json \
	tests/data/hostile/params-overflow.json tests/data/hostile/utf8-name.json \
	tests/data/hf/mistral-7b-v0.1.json tests/data/hf/mixtral-8x7b-v0.1.json tests/data/hf/qwen3-8b.json \
	tests/data/hf/qwen3-30b-a3b.json tests/data/hf/phi-3-mini-4k-instruct.json tests/data/hf/glm-4.5.json tests/data/hf/glm-4.5-air.json \
	tests/data/hf/qwen1.5-moe-a2.7b.json tests/data/hf/olmoe-1b-7b-0924.json tests/data/hf/deepseek-v2-lite.json \
	tests/data/hf/qwen2-vl-2b.json tests/data/hf/qwen2-vl-7b.json tests/data/hf/paligemma-3b-pt-224.json \
	tests/data/hf/qwen2.5-7b.json \
	tests/data/hf/qwen2.5-3b.json \
	tests/data/hf/llama-3.1-8b.json \
	tests/data/hf/llama-3.2-3b.json \
	tests/data/hf/qwen2.5-vl-3b.json \
	tests/data/hf/deepseek-v3.json \
	tests/data/hf/kimi-k2.json \
	tests/data/hf/moonlight-16b-a3b.json \
	tests/data/hf/gemma-2b.json \
	tests/data/hf/gemma2-2b.json \
	tests/data/hf/gpt-oss-20b.json tests/data/hf/gpt-oss-120b.json tests/data/hf/gemma-3-1b-pt.json \
	tests/data/hf/gemma-3-4b-pt.json tests/data/hf/olmo-2-1124-7b.json tests/data/hf/granite-3.1-8b-base.json \
	tests/data/hf/smollm3-3b.json tests/data/hf/starcoder2-3b.json tests/data/hf/pythia-1b.json

# kernels
check_PROGRAMS += tests/test_ns_ref tests/test_wk_ref tests/test_ns_gpu tests/test_wk_gpu
if HAVE_CUDA
tests_test_ns_gpu_LDADD = $(GPU_LDADD)
tests_test_wk_gpu_LDADD = $(GPU_LDADD)
endif
TESTS += tests/test_ns_ref tests/test_wk_ref tests/test_ns_gpu tests/test_wk_gpu tests/bench_work.sh
EXTRA_DIST += tests/bench_work.sh

# sched
check_PROGRAMS += tests/test_sched
TESTS += tests/test_sched tests/plan_golden.sh
EXTRA_DIST += tests/plan_golden.sh tests/golden/plan_qwen2.5-0.5b.txt tests/golden/plan_qwen2.5-0.5b_milp.txt

# sim
check_PROGRAMS += tests/test_sim tests/test_sim_faults tests/test_sim_rates tests/test_sim_mem tests/test_net tests/test_fabric
TESTS += tests/test_sim tests/test_net tests/test_fabric tests/test_sim_faults tests/test_sim_rates tests/test_sim_mem tests/sim_golden.sh tests/scale_golden.sh
EXTRA_DIST += tests/sim_golden.sh tests/scale_golden.sh tests/data/sim_costs.csv \
	tests/golden/sim_qwen2.5-0.5b_a800_16.txt tests/golden/scale_qwen2.5-0.5b_h200.txt \
	tests/golden/scale_qwen2.5-0.5b_h200.csv

# real
if HAVE_MPI
check_PROGRAMS += tests/test_real_cpu tests/test_real_mem tests/test_real_bench
TESTS += tests/test_real_mem tests/real_cpu.sh
tests_test_real_bench_SOURCES = tests/test_real_bench.c real/real_bench.c cli/opts.c cli/opts.h
endif
if HAVE_CUDA
if HAVE_NCCL
if HAVE_MPI
TESTS += tests/real_gpu.sh
endif
endif
endif
# the program without CUDA, the GPU side as a plug-in
TESTS += tests/gpu_plugin.sh
EXTRA_DIST += tests/gpu_plugin.sh tests/data/tiny_cpu.json
# every command's help text against its golden
TESTS += tests/help_golden.sh
EXTRA_DIST += tests/help_golden.sh tests/golden/help/bench-comm.txt tests/golden/help/bench-kernels.txt tests/golden/help/bench-work.txt tests/golden/help/bench.txt tests/golden/help/calibrate.txt tests/golden/help/compare.txt tests/golden/help/model.txt tests/golden/help/models.txt tests/golden/help/plan.txt tests/golden/help/regress.txt tests/golden/help/run.txt tests/golden/help/scale.txt tests/golden/help/sim.txt tests/golden/help/validate.txt
EXTRA_DIST += tests/real_cpu.sh tests/real_gpu.sh tests/data/tiny_gpu.json tests/data/arch_cpu.json tests/data/arch_tied_cpu.json

# valid
check_PROGRAMS += tests/test_calib tests/test_power tests/test_clock_window
TESTS += tests/test_calib tests/test_power tests/test_clock_window tests/regress.sh tests/compare.sh tests/compare_validate.sh tests/validate_replay.sh \
	tests/plan_ns_shapes.sh tests/hsdp_muon.sh tests/hf_sim.sh tests/clock_tools.sh
EXTRA_DIST += tests/regress.sh tests/compare.sh tests/compare_validate.sh tests/validate_replay.sh tests/plan_ns_shapes.sh tests/hsdp_muon.sh \
	tests/hf_sim.sh tests/clock_tools.sh \
	tests/data/comm_h200x2.csv

# scripting (issue 18): --json of compare, calibrate and regress; under MPI, run --json and a
# usage error of run and bench comm printed once
TESTS += tests/json_cli.sh
if HAVE_MPI
TESTS += tests/mpi_cli.sh
endif
EXTRA_DIST += tests/json_cli.sh tests/mpi_cli.sh
