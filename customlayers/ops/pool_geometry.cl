/* The geometry of a pooling window, from the kernel argument `geo` (__constant int[22],
 * ops/nn/pooling.py: pool_args), so that one program serves every shape: input, output,
 * window, strides, dilations, pads_begin and where an AvgPool that counts padding stops
 * counting, each (z, y, x); then RB, pool_cpu.cl's output rows per work item.
 * POOL_GEOMETRY(geo) at the top of a kernel reads them into private constants once (names
 * that read the buffer at each use would be loaded again after every store to the output). */
#define POOL_GEOMETRY(g) const int \
    ID = g[0], IH = g[1], IW = g[2], OD = g[3], OH = g[4], OW = g[5], \
    KD = g[6], KH = g[7], KW = g[8], SZ = g[9], SY = g[10], SX = g[11], \
    DZ = g[12], DY = g[13], DX = g[14], PZ = g[15], PY = g[16], PX = g[17], \
    EZ = g[18], EY = g[19], EX = g[20], RB = g[21]
