/* clock_probe.cu: the SM clock along a run, read on the GPU itself (a diagnostic: issue 14's
 * question of what clock a step's forward runs at after the NS phase). nvidia-smi and NVML
 * report the clock at ~100 ms granularity, coarser than a forward; here one thread of a kernel
 * on a stream of its own reads the global timer (%globaltimer, ns) and its multiprocessor's cycle
 * counter (clock64) every `period` ns for the whole run, so that the clock over any interval of
 * the step is cycles over nanoseconds. It sleeps between reads (__nanosleep) so that its warp
 * takes next to no issue slots from the kernels sharing its multiprocessor; one thread, no shared
 * memory. A marker kernel on the executor's compute stream writes the global timer where each
 * step starts, so that the ops' times (from the step's start event) can be placed on the same
 * timeline. The sampler ends when told to (the stop flag, in mapped host memory), when its buffer
 * is full or after max_s seconds, so it never holds a device synchronization for longer. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "clock_probe.h"

#define CP_MARKS 4096

typedef struct cp_state {
    cudaStream_t st;
    unsigned long long *d_buf; /* pairs (globaltimer ns, clock64) */
    unsigned long long *d_marks;
    volatile int *h_stop; /* mapped: [0] the stop flag, [1] the sampler's count (-1 once started) */
    volatile int *d_stop;
    long cap;
    unsigned long long max_ns;
    int n_marks, running;
    double host_s0;           /* CLOCK_REALTIME when the sampler's first read was seen */
    unsigned long long gt_s0; /* the globaltimer of that moment */
} cp_state;
static cp_state cp;

__device__ __forceinline__ unsigned long long gtimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void k_clock_sampler(unsigned long long *buf, long cap, volatile int *stop, volatile int *count,
                                unsigned long long period_ns, unsigned long long max_ns)
{
    unsigned long long t0 = gtimer(), last = 0;
    long n = 0;
    for (;;) {
        unsigned long long t = gtimer();
        if (n == 0 || t - last >= period_ns) {
            long long c = clock64();
            buf[2 * n] = t, buf[2 * n + 1] = (unsigned long long)c;
            n++, last = t;
            if (n == 1) __threadfence_system(), *count = -1; /* started */
            if (n >= cap || *stop || t - t0 > max_ns) break;
        }
        __nanosleep(1000);
    }
    *count = (int)n;
}

__global__ void k_clock_mark(unsigned long long *marks, int i)
{
    marks[i] = gtimer();
}

static double realtime_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CPU(call)                                                                                    \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) return dm_err_set(err, "clock probe: %s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

extern "C" int cp_start(double period_us, double max_s, dm_err *err)
{
    if (cp.running) return 0;
    cp.cap = (long)(max_s * 1e6 / (period_us > 1 ? period_us : 1)) + 16;
    cp.max_ns = (unsigned long long)(max_s * 1e9);
    CPU(cudaStreamCreateWithPriority(&cp.st, cudaStreamNonBlocking, 0));
    CPU(cudaMalloc((void **)&cp.d_buf, (size_t)cp.cap * 2 * sizeof(unsigned long long)));
    CPU(cudaMalloc((void **)&cp.d_marks, CP_MARKS * sizeof(unsigned long long)));
    CPU(cudaHostAlloc((void **)&cp.h_stop, 2 * sizeof(int), cudaHostAllocMapped));
    cp.h_stop[0] = 0, cp.h_stop[1] = 0;
    CPU(cudaHostGetDevicePointer((void **)&cp.d_stop, (void *)cp.h_stop, 0));
    volatile int *count = cp.d_stop + 1; /* the sampler's count lives beside the flag, host-visible */
    k_clock_sampler<<<1, 1, 0, cp.st>>>(cp.d_buf, cp.cap, cp.d_stop, count, (unsigned long long)(period_us * 1e3),
                                        cp.max_ns);
    CPU(cudaGetLastError());
    /* wait until it runs, then take the host's clock beside the GPU's (for the kernel-time files,
     * which place kernels by CLOCK_REALTIME) */
    double t_wait = realtime_s();
    while (cp.h_stop[1] != -1 && realtime_s() - t_wait < 5) {
    }
    if (cp.h_stop[1] != -1) { /* tell it to end at once should it start later */
        cp.h_stop[0] = 1;
        return dm_err_set(err, "clock probe: the sampler kernel did not start within 5 s");
    }
    cp.host_s0 = realtime_s();
    unsigned long long first;
    CPU(cudaMemcpy(&first, cp.d_buf, sizeof first, cudaMemcpyDeviceToHost));
    cp.gt_s0 = first;
    cp.n_marks = 0;
    cp.running = 1;
    return 0;
}

extern "C" int cp_mark(void *stream, dm_err *err)
{
    if (!cp.running || cp.n_marks >= CP_MARKS) return 0;
    k_clock_mark<<<1, 1, 0, (cudaStream_t)stream>>>(cp.d_marks, cp.n_marks++);
    CPU(cudaGetLastError());
    return 0;
}

extern "C" int cp_stop_write(const char *path, dm_err *err)
{
    if (!cp.running) return 0;
    cp.running = 0;
    cp.h_stop[0] = 1;
    CPU(cudaStreamSynchronize(cp.st));
    long n = cp.h_stop[1];
    if (n < 0) n = 0;
    unsigned long long *buf = (unsigned long long *)malloc((size_t)(n + 1) * 2 * sizeof *buf);
    unsigned long long marks[CP_MARKS];
    if (!buf) return dm_err_set(err, "clock probe: out of memory");
    CPU(cudaMemcpy(buf, cp.d_buf, (size_t)n * 2 * sizeof *buf, cudaMemcpyDeviceToHost));
    CPU(cudaMemcpy(marks, cp.d_marks, (size_t)cp.n_marks * sizeof *marks, cudaMemcpyDeviceToHost));
    FILE *f = fopen(path, "w");
    if (!f) {
        free(buf);
        return dm_err_set(err, "clock probe: cannot write %s", path);
    }
    /* header: how to place the samples; then the step marks; then the samples */
    fprintf(f, "# dmuon clock probe: globaltimer ns %llu = CLOCK_REALTIME %.6f s\n", cp.gt_s0, cp.host_s0);
    fprintf(f, "# step marks (globaltimer ns at each step's start, in step order):");
    for (int i = 0; i < cp.n_marks; i++) fprintf(f, " %llu", marks[i]);
    const char *why = n >= cp.cap ? "its buffer full" : n > 0 && buf[2 * n - 2] - buf[0] > cp.max_ns ? "its time limit"
                                                                                             : "the run's end";
    fprintf(f, "\n# %ld reads, ended by %s\nt_ns,cycles,mhz\n", n, why);
    for (long i = 0; i < n; i++) {
        double mhz = 0;
        if (i > 0 && buf[2 * i] > buf[2 * i - 2])
            mhz = (double)(buf[2 * i + 1] - buf[2 * i - 1]) * 1e3 / (double)(buf[2 * i] - buf[2 * i - 2]);
        fprintf(f, "%llu,%llu,%.1f\n", buf[2 * i], buf[2 * i + 1], mhz);
    }
    int bad = fclose(f) != 0;
    free(buf);
    cudaFree(cp.d_buf), cudaFree(cp.d_marks), cudaFreeHost((void *)cp.h_stop), cudaStreamDestroy(cp.st);
    if (bad) return dm_err_set(err, "clock probe: cannot write %s", path);
    return 0;
}
