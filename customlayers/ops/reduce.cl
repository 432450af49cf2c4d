/* ReduceMean / ReduceSum / ReduceMax / ReduceMin / ReduceProd over any set of axes of a 4-D
 * (B,F,Y,X) view. One work item per output element; it walks the reduced sub-box, whose extent
 * is Rn along dim n (the input's size for a reduced dim, 1 otherwise). NDRange: (number of
 * outputs). The sizes are the argument `geo`: D0..D3 (input), R0..R3, COUNT (outputs), so one
 * program serves every shape and set of axes. Defines: REDUCE_MAX, REDUCE_MIN, REDUCE_MEAN or
 * REDUCE_PROD (else sum); optionally DATA_T, the element type of input and output (default
 * float): an integer sum accumulates in it and wraps, as ONNX Runtime's does.
 */
#ifndef DATA_T
#define DATA_T float
#define DATA_IS_FLOAT 1
#endif
#if DATA_IS_FLOAT
#define MAX_OF(a, b) fmax(a, b)
#define MIN_OF(a, b) fmin(a, b)
#else
#define MAX_OF(a, b) max(a, b)
#define MIN_OF(a, b) min(a, b)
#endif
#define O0 (D0 / R0)
#define O1 (D1 / R1)
#define O2 (D2 / R2)
#define O3 (D3 / R3)

/* the sizes as private constants, read once at the top of each kernel (a name that read the
 * buffer at each use would be loaded again after every store to the output) */
#define REDUCE_GEOMETRY(g) const int \
    D0 = g[0], D1 = g[1], D2 = g[2], D3 = g[3], R0 = g[4], R1 = g[5], \
    R2 = g[6], R3 = g[7], COUNT = g[8]
__kernel void reduce(__global const DATA_T* restrict input, __global DATA_T* restrict output,
                     __constant const int* restrict geo)
{
    REDUCE_GEOMETRY(geo);
    const int id = get_global_id(0);
    if (id >= COUNT)
        return;
    /* the output index in the kept dims; a reduced dim's coordinate starts at 0 */
    const int o3 = id % O3, o2 = id / O3 % O2, o1 = id / (O3 * O2) % O1, o0 = id / (O3 * O2 * O1);
#if REDUCE_MAX || REDUCE_MIN
    /* the first element starts the running max or min (an integer has no infinity) */
    DATA_T acc = input[((o0 * D1 + o1) * D2 + o2) * D3 + o3];
#elif REDUCE_PROD
    DATA_T acc = (DATA_T)1;
#else
    DATA_T acc = (DATA_T)0;
#endif
    for (int a = 0; a < R0; ++a)
        for (int b = 0; b < R1; ++b)
            for (int c = 0; c < R2; ++c)
                for (int d = 0; d < R3; ++d) {
                    const DATA_T v = input[(((o0 + a) * D1 + (o1 + b)) * D2 + (o2 + c)) * D3
                                           + (o3 + d)];
#if REDUCE_MAX
                    acc = MAX_OF(acc, v);
#elif REDUCE_MIN
                    acc = MIN_OF(acc, v);
#elif REDUCE_PROD
                    acc *= v;
#else
                    acc += v;
#endif
                }
#if REDUCE_MEAN
    acc /= (float)(R0 * R1 * R2 * R3);
#endif
    output[id] = acc;
}
