# tools/local.mk: helper scripts shipped with the sources (model generator, PyTorch references,
# dependency installer, the device stages and the probes they run, replay and table helpers).
EXTRA_DIST += tools/gen_models.py tools/torch_ns_bench.py tools/install-deps.sh tools/build-device.sh \
	tools/torch_step_bench.py tools/trace_layers.py tools/ns_bench_summary.py tools/ns_mma_emu.py \
	tools/device-run.sh tools/device-stages.sh tools/validate_ab.py tools/costs_merge.py tools/replay_all.sh \
	tools/clock_by_kernel.py tools/plan_ns_shapes.py tools/power_probe.py tools/alloc_probe.py tools/ns_ops.py \
	tools/per_model.py tools/scale_goals.sh tools/host_times.py tools/kernel_context.py tools/copy_interference.py \
	tools/staging_rates.py tools/fsdp_serial_check.py tools/clock_trace.py tools/milp_clock.sh tools/milp_clock.py

# tools/kernel_price: a step's kernels priced by a cost table beside the executor's in-step times
# (not installed; `make tools/kernel_price`)
# tools/ns_loo: the NS interpolation's error on each compute-bound shape of a table left out of it
# (not installed; `make tools/ns_loo`)
# tools/power_along: the power model along ops read from stdin (tools/clock_fit.py; not installed;
# built by make check for tests/clock_tools.sh, or `make tools/power_along`)
EXTRA_PROGRAMS = tools/kernel_price tools/ns_loo
check_PROGRAMS += tools/power_along
tools_kernel_price_SOURCES = tools/kernel_price.c
tools_kernel_price_LDADD = $(DM_LDADD)
tools_ns_loo_SOURCES = tools/ns_loo.c
tools_ns_loo_LDADD = $(DM_LDADD)
tools_power_along_SOURCES = tools/power_along.c
tools_power_along_LDADD = $(DM_LDADD)
CLEANFILES += tools/kernel_price tools/ns_loo tools/power_along
