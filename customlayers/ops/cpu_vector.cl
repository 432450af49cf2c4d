// The float vector of VW lanes the CPU kernels are written in (conv_cpu_blocked.cl,
// matmul_cpu.cl): VW is a define of the kernel's variant, the device's preferred float vector
// width (8 on AVX2, 16 on AVX-512; runtime/device/limits.py), 8 where not given.
#ifndef VW
#define VW 8
#endif
#if VW == 16
#define floatV float16
#define LOADV vload16
#define STOREV vstore16
#elif VW == 8
#define floatV float8
#define LOADV vload8
#define STOREV vstore8
#else
#error "VW (the CPU kernels' float vector width) must be 8 or 16"
#endif
