/* Subnormal floats (below 1.2e-38) read and written as zero on the calling thread and its OpenMP team.
 *
 * Real activations produce them (SiLU of a large negative input, softmax tails), and an x86 operation
 * that meets one takes a microcode assist: an fp32 SmolLM2 prefill was about 8 % faster without them
 * (docs/engine.md). FTZ (bit 15 of MXCSR) and DAZ (bit 6) are per thread; the
 * threads a team adds later are created by its first thread and start with its MXCSR.
 */
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

enum { MXCSR_FTZ = 1 << 15, MXCSR_DAZ = 1 << 6 };

void kvtool_flush_denormals(int32_t num_threads) {
    #pragma omp parallel num_threads(num_threads)
    _mm_setcsr(_mm_getcsr() | MXCSR_FTZ | MXCSR_DAZ);
}

#else

void kvtool_flush_denormals(int32_t num_threads) { (void)num_threads; }

#endif
