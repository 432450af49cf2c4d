// Transpose on a GPU (ops/tensor/transpose.py): copies of bits, exact for every element type.
// ELEM is the unsigned integer type of the element's size (uchar, ushort, uint, ulong: a half
// moves as its bits, without cl_khr_fp16), VEC (1, 2, 4, 8 or 16; VEC_T the vector type of
// VEC ELEMs: at most 16 bytes) the elements one transpose_runs item moves at once. Every size,
// stride and count is an argument: one program per ELEM and VEC serves every shape and
// permutation. Work-groups of 256 items (GROUP), 1-D ranges (an NVIDIA
// grid's dimensions 1 and 2 hold at most 65535 groups; dimension 0 holds 2^31).
#include "view_index.cl"
#define GROUP 256
#define TILE 32
#define TILE_ROWS (GROUP / TILE)

// The output's innermost axis is the input's unit-stride axis too (the permutation moves only
// outer axes): rows of `run` elements, contiguous in both tensors. Row r of the output starts
// at r * run; in the input at view_row(view, r) (view_index.cl). Each group takes
// 256 >> lanes_log2 rows side by side, 1 << lanes_log2 lanes a row (a short row: no idle
// lanes), and of those rows the piece `g % chunks` (`chunk` elements; chunks is 1 and chunk
// the run unless the rows are long: an identity's one row spreads over many groups). An item
// divides once per row (its start), then moves VEC elements per step. The run and so every
// row start are multiples of VEC (the input's outer strides are multiples of the run): the
// rows move as vectors where both tensors' addresses are aligned to one (buffers and
// sub-buffers start at CL_DEVICE_MEM_BASE_ADDR_ALIGN), else element by element (a numpy input
// that a CPU device reads where it lies is aligned to its element only: misaligned vector
// accesses crashed PoCL).
__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void transpose_runs(__global const ELEM* restrict in, __global ELEM* restrict out,
                    const uint run, const uint rows, const uint lanes_log2, const uint chunks,
                    const uint chunk, __constant const int* restrict view)
{
    const uint lid = get_local_id(0), g = get_group_id(0);
    const uint piece = chunks > 1 ? g % chunks : 0, block = chunks > 1 ? g / chunks : g;
    const uint row = block * (GROUP >> lanes_log2) + (lid >> lanes_log2);
    if (row >= rows)
        return;
    const uint lanes = 1u << lanes_log2, lane = lid & (lanes - 1);
    const uint end = min(run, (piece + 1) * chunk);
    const int from = view_row(view, row);
    const uint to = row * run;
#if VEC > 1
    // uniform: both tensors' addresses (and so every row start) aligned to the vector
    if ((((size_t)in | (size_t)out) & (sizeof(VEC_T) - 1)) == 0) {
        __global const VEC_T* src = (__global const VEC_T*)(in + from);
        __global VEC_T* dst = (__global VEC_T*)(out + to);
        for (uint k = piece * chunk + lane * VEC; k < end; k += lanes * VEC)
            dst[k / VEC] = src[k / VEC];
        return;
    }
#endif
    for (uint k = piece * chunk + lane * VEC; k < end; k += lanes * VEC) {
        #pragma unroll
        for (uint e = 0; e < VEC; ++e)
            out[to + k + e] = in[from + k + e];
    }
}

// The innermost output axis moves: 32x32 tiles through local memory. Axis x is the output's
// innermost (unit stride out, `x_step` in), axis p the input's unit-stride one (`p_step` out);
// every other axis is a batch, whose offsets `batch` holds as [rank, dims, input strides,
// output strides]. A group (256 items, 32 x 8, four tile rows each) reads its tile along p
// (coalesced in the input), and writes it along x (coalesced in the output); the tile's rows
// are 33 long so that a column of it lies in 32 banks. Group g is tile (g % tiles_x) of x,
// tile (g / tiles_x % tiles_p) of p, batch element g / (tiles_x * tiles_p).
__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void transpose_tiled(__global const ELEM* restrict in, __global ELEM* restrict out,
                     const uint nx, const uint np, const uint x_step, const uint p_step,
                     const uint tiles_x, const uint tiles_p,
                     __constant const int* restrict batch)
{
    __local ELEM tile[TILE][TILE + 1];
    uint g = get_group_id(0);
    const uint x0 = (g % tiles_x) * TILE;
    g /= tiles_x;
    const uint p0 = (g % tiles_p) * TILE;
    g /= tiles_p;
    int in_at = 0, out_at = 0;
    const int rank = batch[0];
    for (int k = rank - 1; k >= 0; --k) {
        const uint d = (uint)batch[1 + k];
        const int c = (int)(g % d);
        g /= d;
        in_at += c * batch[1 + rank + k];
        out_at += c * batch[1 + 2 * rank + k];
    }
    const uint lid = get_local_id(0), tx = lid % TILE, ty = lid / TILE;
    const uint p = p0 + tx;
    for (uint j = ty; j < TILE; j += TILE_ROWS) {
        const uint x = x0 + j;
        if (p < np && x < nx)
            tile[j][tx] = in[in_at + (int)(x * x_step + p)];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint x = x0 + tx;
    for (uint j = ty; j < TILE; j += TILE_ROWS) {
        const uint q = p0 + j;
        if (q < np && x < nx)
            out[out_at + (int)(q * p_step + x)] = tile[tx][j];
    }
}
