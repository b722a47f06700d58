# kernels/local.mk: the kernels folder's sources and tests.
# --- CPU reference Muon math (ns_ref): keep these lines together at the top ------------------
libdmuon_a_SOURCES += kernels/ns_ref.c kernels/ns_ref.h
check_PROGRAMS += tests/test_ns_ref
TESTS += tests/test_ns_ref
tests_test_ns_ref_SOURCES = tests/test_ns_ref.c tests/tap.h
tests_test_ns_ref_LDADD = $(DM_LDADD)
# --- end of the CPU reference section -------------------------------------------------------
# --- GPU kernels (CUDA NS plans, elementwise kernels, autotuner), the kernel benchmark's -------
# command and the GPU test (which skips without CUDA or without a GPU). cli/cmd_bench.c is built
# in every configuration: without CUDA `dmuon bench kernels` says so; `bench comm` is the
# executor's hook.
dmuon_SOURCES += cli/cmd_bench.c
check_PROGRAMS += tests/test_ns_gpu
TESTS += tests/test_ns_gpu
tests_test_ns_gpu_SOURCES = tests/test_ns_gpu.c tests/tap.h
tests_test_ns_gpu_LDADD = $(DM_LDADD)
EXTRA_DIST += tools/torch_ns_bench.py traces/kernels/run_device.sh traces/kernels/NOTES.md \
	traces/kernels/goal_shapes.txt traces/kernels/extra_shapes.txt traces/kernels/big18_shapes.txt traces/kernels/expert_shapes.txt \
	tools/ns_bench_summary.py tools/ns_mma_emu.py
if HAVE_CUDA
libdmuon_cuda_a_SOURCES += kernels/ns_cuda.cu kernels/ns_elem.cu kernels/ns_kern.cuh \
	kernels/ns_cuda.h kernels/autotune.c kernels/autotune.h
# our tensor-core products (mma.sync): the symmetric-product kernel and the fused small NS
libdmuon_cuda_a_SOURCES += kernels/ns_syrk.cu kernels/ns_small.cu kernels/ns_mma.h kernels/ns_mma.cuh
# the .cu.o rule tracks no headers: the ones these objects are built from
kernels/ns_syrk.o kernels/ns_small.o: kernels/ns_mma.cuh kernels/ns_mma.h kernels/ns_kern.cuh kernels/ns_cuda.h
kernels/ns_cuda.o: kernels/ns_mma.h kernels/ns_kern.cuh kernels/ns_cuda.h
# libdmuon_cuda.a calls back into libdmuon.a (ns_ref coefficients, errors, output files): list
# libdmuon.a once more after it so that a static link resolves those references; cuBLASLt is
# not in CUDA_LIBS.
DM_LDADD += libdmuon.a -lcublasLt
endif
# --- end of the GPU section --------------------------------------------------------------------
