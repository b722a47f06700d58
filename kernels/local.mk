# kernels/local.mk: the kernels folder's sources: the CPU reference Muon math (every build) and,
# with CUDA, the NS plans, elementwise kernels and autotuner, compiled by nvcc into the same
# library (one archive, so the link line names it once).
libdmuon_a_SOURCES += kernels/ns_ref.c kernels/ns_ref.h
if HAVE_CUDA
libdmuon_a_SOURCES += kernels/ns_cuda.cu kernels/ns_elem.cu kernels/ns_kern.cuh \
	kernels/ns_cuda.h kernels/autotune.c kernels/autotune.h kernels/ns_bench.c kernels/ns_bench.h
endif
