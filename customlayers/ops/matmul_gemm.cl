/* MatMul as a tiled GEMM: matmul.cl's front end (the epilogue included), then gemm.cl's core.
 * Needs the defines of matmul.cl and the tile geometry of gemm.cl.
 */
#include "matmul.cl"
#include "gemm.cl"
