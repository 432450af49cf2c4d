// One input, one output, one work-item per output element:
//     out[i] = STORE(FN(LOAD(in[SRC_INDEX(i)])))
// Used by the activations (SRC_INDEX(i) = i), Convert, and every op that is a linear view of
// its input (Transpose, Slice, Tile, Broadcast, ShuffleChannels, Pad).
//
// Baked by the binder (ops/_program.py): COUNT (output elements), IN_TYPE, OUT_TYPE,
// SRC_INDEX(i) (input element read for output element i), and optionally
//   LOAD(v)       value -> compute type (default: as is)
//   FN(x)         the elementwise function (default: identity)
//   STORE(v)      compute type -> OUT_TYPE (default: a C cast)
//   IN_BOUNDS(i)  0 where output element i lies outside the input (Pad), which then gets FILL
#ifndef LOAD
#define LOAD(v) (v)
#endif
#ifndef PER_ITEM
#define PER_ITEM 1
#endif
#ifndef FN
#define FN(x) (x)
#endif
#ifndef STORE
#define STORE(v) ((OUT_TYPE)(v))
#endif

// Pad's index maps: a coordinate j outside 0..n-1 mirrored back inside. Periodic, so pads
// wider than the tensor still land inside.
inline int reflect_index(int j, int n)      // mirror at the edge element: 2 1 | 0 1 2 | 1 0
{
    if (n == 1) return 0;
    const int period = 2 * (n - 1);
    j = abs(j) % period;
    return j < n ? j : period - j;
}

inline int symmetric_index(int j, int n)    // mirror between elements: 1 0 | 0 1 2 | 2 1
{
    const int period = 2 * n;
    if (j < 0) j = -j - 1;
    j %= period;
    return j < n ? j : period - 1 - j;
}

inline int wrap_index(int j, int n)         // periodic: 1 2 | 0 1 2 | 0 1
{
    j %= n;
    return j < 0 ? j + n : j;
}

inline void unary_one(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out,
                      const uint i)
{
#ifdef IN_BOUNDS
    if (!(IN_BOUNDS(i))) { out[i] = FILL; return; }
#endif
    const IN_TYPE v = in[SRC_INDEX(i)];
    out[i] = STORE(FN(LOAD(v)));
}

// PER_ITEM consecutive outputs per work item (CPU devices, ops/_program.py: items_per_work_item):
// a whole run is a loop of known length that LLVM unrolls and vectorizes, where one output per
// item left PoCL 4-7x slower than a float8 kernel on a ReLU
__kernel void unary_map(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out)
{
#if PER_ITEM == 1
    const uint i = get_global_id(0);
    if (i < COUNT)
        unary_one(in, out, i);
#else
    const uint first = get_global_id(0) * PER_ITEM;
    if (first + PER_ITEM <= COUNT) {
        #pragma unroll
        for (uint k = 0; k < PER_ITEM; ++k)
            unary_one(in, out, first + k);
    } else {
        for (uint i = first; i < COUNT; ++i)
            unary_one(in, out, i);
    }
#endif
}
