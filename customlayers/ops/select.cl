// Select (ONNX Where): out[i] = cond[..] != 0 ? a[..] : b[..], the three inputs broadcast to the
// output with numpy rules. The geometry is a kernel argument, not baked into the program, so one
// program per pair of element types serves every shape.
//
// Baked by ops/logic/select.py: COND_TYPE, T (the values' and the output's type).
// geo: the output's RANK dims (outermost first), then the RANK element strides of cond, a and
// b in turn (0 on a broadcast axis); dims of 1 and contiguous runs are merged away beforehand.
__kernel void select_map(__global const COND_TYPE* restrict cond, __global const T* restrict a,
                         __global const T* restrict b, __global T* restrict out,
                         __global const int* restrict geo, const int rank, const uint count)
{
    const uint i = get_global_id(0);
    if (i >= count)
        return;
    uint rest = i;
    int ic = 0, ia = 0, ib = 0;
    for (int k = rank - 1; k >= 0; --k) {
        const uint d = (uint)geo[k];
        const int c = (int)(rest % d);
        rest /= d;
        ic += c * geo[rank + k];
        ia += c * geo[2 * rank + k];
        ib += c * geo[3 * rank + k];
    }
    out[i] = cond[ic] != 0 ? a[ia] : b[ib];
}
