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

__kernel void unary_map(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out)
{
    const uint i = get_global_id(0);
    if (i >= COUNT) return;
#ifdef IN_BOUNDS
    if (!(IN_BOUNDS(i))) { out[i] = FILL; return; }
#endif
    const IN_TYPE v = in[SRC_INDEX(i)];
    out[i] = STORE(FN(LOAD(v)));
}
