/* MatMul front end for gemm.cl: out[batch] = op(A[batch]) x op(B[batch]).
 * Batch dims are at most two (output [OB0, OB1, M, N]); a broadcast input has batch stride 0.
 * Needs: M N K, CHANNEL(batch, m, n), FUSED_* (conv_epilogue.cl is included), TRANSPOSE_A
 * TRANSPOSE_B, OB1, A_BS0 A_BS1 B_BS0 B_BS1 (batch strides, elements), A_STEP A_PICK.
 * matmul_gemm.cl puts it before gemm.cl; the M == 1 and row-softmax kernels include it alone.
 */
#include "conv_epilogue.cl"
#define A_K_FASTEST (!TRANSPOSE_A)
#define B_N_FASTEST (!TRANSPOSE_B)
#define GEMM_ARGS __global const float* restrict a, __global const float* restrict b, \
                  __global float* restrict out EPILOGUE_ARGS

#define A_BASE(batch) ((batch) / OB1 * A_BS0 + (batch) % OB1 * A_BS1)
#define B_BASE(batch) ((batch) / OB1 * B_BS0 + (batch) % OB1 * B_BS1)
/* A_STEP A_PICK: A is element A_PICK of every run of A_STEP values (a folded Gather of the
   last axis, passes/pick_folding.py); 1 and 0 read A as it is */
#if TRANSPOSE_A
#define A_AT(batch, m, k) a[(A_BASE(batch) + (k) * M + (m)) * A_STEP + A_PICK]
#else
#define A_AT(batch, m, k) a[(A_BASE(batch) + (m) * K + (k)) * A_STEP + A_PICK]
#endif
#if TRANSPOSE_B
#define B_AT(batch, k, n) b[B_BASE(batch) + (n) * K + (k)]
#else
#define B_AT(batch, k, n) b[B_BASE(batch) + (k) * N + (n)]
#endif
/* EPILOGUE and CHANNEL (the output's axis 1 as a GEMM index) come from conv_epilogue.cl and
   the op's defines */
#define OUT_AT(batch, m, n) (((batch) * M + (m)) * N + (n))
#define STORE(batch, m, n, v) out[OUT_AT(batch, m, n)] = \
    EPILOGUE(OUT_AT(batch, m, n), CHANNEL(batch, m, n), (v))
