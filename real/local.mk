# real/local.mk: the real executor (MPI; CPU backend always, GPU backend with CUDA and NCCL),
# the `dmuon run` command and its tests. Everything here needs MPI.
if HAVE_MPI
libdmuon_a_SOURCES += real/real.h real/real_priv.h real/real_work.c real/real_work.h real/real_exec.c \
	real/real_cpu.c real/real_ckpt.c real/real_bench.c real/real_run.c
dmuon_SOURCES += cli/cmd_run.c
check_PROGRAMS += tests/test_real_cpu
tests_test_real_cpu_SOURCES = tests/test_real_cpu.c tests/tap.h
tests_test_real_cpu_LDADD = $(DM_LDADD)
check_PROGRAMS += tests/test_real_mem
tests_test_real_mem_SOURCES = tests/test_real_mem.c tests/tap.h
tests_test_real_mem_LDADD = $(DM_LDADD)
TESTS += tests/test_real_mem
check_PROGRAMS += tests/test_real_bench
tests_test_real_bench_SOURCES = tests/test_real_bench.c tests/tap.h
tests_test_real_bench_LDADD = $(DM_LDADD)
TESTS += tests/real_cpu.sh
endif
EXTRA_DIST += tests/real_cpu.sh tests/real_gpu.sh tests/data/tiny_gpu.json real/README.md real/run_device.sh real/runs/h200x2-1/README.md real/runs/h200x2-2/README.md
# The GPU backend: its C part in libdmuon.a, its kernels (nvcc) in libdmuon_cuda.a.
if HAVE_CUDA
if HAVE_NCCL
if HAVE_MPI
libdmuon_a_SOURCES += real/real_gpu.c real/real_kern.h real/real_nccl.c real/real_nccl.h
libdmuon_cuda_a_SOURCES += real/real_kern.cu
TESTS += tests/real_gpu.sh
endif
endif
endif
