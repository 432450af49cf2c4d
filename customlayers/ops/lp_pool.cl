/* LpPool (ONNX): each output is the p-norm of its window, (sum |x|^P)^(1/P), over 1-D, 2-D or
 * 3-D windows (lower ranks as 3-D with trivial leading axes), with strides, dilations and pads:
 * cells in the padding count as zeros, so only the cells inside the input are summed.
 * One work item per output element. Baked: T (float or double); p (1 or more) is an argument,
 * so one program serves every p: the models' p of 1 and 2 are branches of it (the same for
 * every item, so no divergence) that add |x| and x*x and end in the sum and sqrt, as the
 * general pown/rootn would only approximate. The geometry is the constant buffer g:
 * ID IH IW OD OH OW KD KH KW SD SH SW DD DH DW PD PH PW.
 */
inline T lp_term(const T v, const int p)
{
    return p == 1 ? fabs(v) : p == 2 ? v * v : pown(fabs(v), p);
}

__kernel void lp_pool(__global const T* restrict input, __global T* restrict output,
                      __constant const int* restrict g, const int count, const int p)
{
    const int id = get_global_id(0);
    if (id >= count)
        return;
    const int ID = g[0], IH = g[1], IW = g[2], OD = g[3], OH = g[4], OW = g[5];
    const int ox = id % OW, oy = id / OW % OH, oz = id / (OW * OH) % OD;
    const int plane = id / (OW * OH * OD);
    __global const T* in = input + (long)plane * ID * IH * IW;
    T sum = (T)0;
    for (int kz = 0; kz < g[6]; ++kz) {
        const int z = oz * g[9] + kz * g[12] - g[15];
        if (z < 0 || z >= ID)
            continue;
        for (int ky = 0; ky < g[7]; ++ky) {
            const int y = oy * g[10] + ky * g[13] - g[16];
            if (y < 0 || y >= IH)
                continue;
            for (int kx = 0; kx < g[8]; ++kx) {
                const int x = ox * g[11] + kx * g[14] - g[17];
                if (x >= 0 && x < IW)
                    sum += lp_term(in[(z * IH + y) * IW + x], p);
            }
        }
    }
    output[id] = p == 1 ? sum : p == 2 ? sqrt(sum) : rootn(sum, p);
}
