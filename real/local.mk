# real/local.mk: the real executor (MPI; CPU backend always, GPU backend with CUDA and NCCL).
# Everything here needs MPI.
if HAVE_MPI
libdmuon_a_SOURCES += real/real.h real/real_priv.h real/real_work.c real/real_work.h \
	real/real_exec.c \
	real/real_cpu.c real/real_ckpt.c real/real_bench.c real/real_bench_gpu.h real/real_run.c
endif
EXTRA_DIST += real/README.md real/run_device.sh real/runs/h200x2-1/README.md real/runs/h200x2-2/README.md
# The GPU backend: its C part and its kernels (nvcc), and bench comm's NCCL part, in the GPU
# side's library (the plug-in).
if HAVE_CUDA
if HAVE_NCCL
if HAVE_MPI
libdmuon_gpu_a_SOURCES += real/real_gpu.c real/real_nccl.c real/real_nccl.h \
	real/real_bench_gpu.c
endif
endif
endif
