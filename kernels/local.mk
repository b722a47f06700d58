# kernels/local.mk: the kernels folder's sources: the CPU reference Muon math (every build) and,
# with CUDA, the NS plans, elementwise kernels and autotuner, compiled by nvcc into the GPU
# side's library (libdmuon_gpu.a, linked into the plug-in dmuon-gpu.so: Makefile.am).
libdmuon_a_SOURCES += kernels/ns_ref.c kernels/ns_ref.h kernels/clock_window.c kernels/clock_window.h kernels/wk_ref.c kernels/wk_ref.h kernels/wk_hash.h kernels/wk_plan.c kernels/wk_plan.h
if HAVE_CUDA
libdmuon_gpu_a_SOURCES += kernels/ns_cuda.cu kernels/ns_elem.cu kernels/ns_kern.cuh kernels/block_reduce.cuh \
	kernels/ns_cuda.h kernels/autotune.c kernels/autotune.h kernels/ns_bench.c kernels/ns_bench.h
# our tensor-core products (mma.sync): the symmetric-product kernel, the fused small NS and the
# one-CTA-per-matrix NS
libdmuon_gpu_a_SOURCES += kernels/ns_syrk.cu kernels/ns_small.cu kernels/ns_block.cu kernels/ns_mma.h kernels/ns_mma.cuh
# the step's work kernels (products, elementwise passes, reductions) and their benchmark
libdmuon_gpu_a_SOURCES += kernels/wk_cuda.cu kernels/wk_cuda.h kernels/wk_bench.c kernels/wk_bench.h
# the step's small kernels beside the workload: gradient checks, fault injection
libdmuon_gpu_a_SOURCES += kernels/step_kern.cu kernels/step_kern.h
# a diagnostic: the SM clock along a run, read on the GPU (DMUON_CLOCK_TRACE)
libdmuon_gpu_a_SOURCES += kernels/clock_probe.cu kernels/clock_probe.h
kernels/wk_cuda.o: kernels/block_reduce.cuh kernels/wk_cuda.h kernels/wk_ref.h kernels/wk_hash.h kernels/wk_plan.h
# the .cu.o rule tracks no headers: the ones these objects are built from
kernels/ns_syrk.o kernels/ns_small.o kernels/ns_block.o: kernels/block_reduce.cuh kernels/ns_mma.cuh kernels/ns_mma.h kernels/ns_kern.cuh kernels/ns_cuda.h
kernels/ns_elem.o: kernels/block_reduce.cuh kernels/ns_kern.cuh
kernels/ns_cuda.o: kernels/ns_mma.h kernels/ns_kern.cuh kernels/ns_cuda.h
endif
