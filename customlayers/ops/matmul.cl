/* MatMul front end for gemm.cl: out[batch] = op(A[batch]) x op(B[batch]).
 * Batch dims are at most two (output [OB0, OB1, M, N]); a broadcast input has batch stride 0.
 * Needs as #defines: TRANSPOSE_A TRANSPOSE_B A_PICKED, CHANNEL(batch, m, n) (a form in CH_DIV
 * and CH_MOD), FUSED_* (conv_epilogue.cl is included), MATMUL_SIZES (the parameter list of
 * ops/nn/_sizes.py); as kernel arguments after the buffers: M N K, OB1, A_BS0 A_BS1 B_BS0 B_BS1
 * (batch strides, elements), A_STEP_ARG A_PICK_ARG, CH_DIV CH_MOD, LDA LDB (the stride between
 * rows of the matrix as stored: K or M for A, N or K for B when the operand is dense), A_OFF
 * B_OFF (where the operand starts), A_R0 A_RS1 (A_SPLIT_ROWS), O_BS0 O_BS1 LDO O_R0 O_RS1 (where
 * the output goes: OUT_AT). An operand read through a folded view
 * (passes/view_folding.py) has its own strides and offset; MATMUL_ALPHA, where defined, scales
 * the product before the epilogue (scalar Multiplys of an operand folded in).
 * matmul_gemm.cl puts it before gemm.cl; the M == 1 and row-softmax kernels include it alone.
 */
#include "conv_epilogue.cl"
#define A_K_FASTEST (!TRANSPOSE_A)
#define B_N_FASTEST (!TRANSPOSE_B)
#define GEMM_ARGS __global const float* restrict a, __global const float* restrict b, \
                  __global float* restrict out EPILOGUE_ARGS MATMUL_SIZES

#define A_BASE(batch) ((batch) / OB1 * A_BS0 + (batch) % OB1 * A_BS1)
#define B_BASE(batch) ((batch) / OB1 * B_BS0 + (batch) % OB1 * B_BS1)
/* A_STEP A_PICK: A is element A_PICK of every run of A_STEP values (a folded Gather of the
   last axis, passes/pick_folding.py: A_PICKED, the values are arguments); else 1 and 0 read A
   as it is */
#if A_PICKED
#define A_STEP A_STEP_ARG
#define A_PICK A_PICK_ARG
#else
#define A_STEP 1
#define A_PICK 0
#endif
/* A's row m: with A_SPLIT_ROWS the rows of a folded view lie in two levels (torch's
   [S, B, D] read from a [B, S, D] tensor: A_R0 rows LDA apart, then the next A_R0 at A_RS1) */
#if A_SPLIT_ROWS
#define A_ROW_OF(m) ((m) / A_R0 * A_RS1 + (m) % A_R0 * LDA)
#else
#define A_ROW_OF(m) ((m) * LDA)
#endif
#if TRANSPOSE_A
#define A_AT(batch, m, k) a[A_OFF + (A_BASE(batch) + (k) * LDA + (m)) * A_STEP + A_PICK]
#else
#define A_AT(batch, m, k) a[A_OFF + (A_BASE(batch) + A_ROW_OF(m) + (k)) * A_STEP + A_PICK]
#endif
#if TRANSPOSE_B
#define B_AT(batch, k, n) b[B_OFF + B_BASE(batch) + (n) * LDB + (k)]
#else
#define B_AT(batch, k, n) b[B_OFF + B_BASE(batch) + (k) * LDB + (n)]
#endif
/* the stride between A's values along k (the M == 1 kernels walk one row of A with it) */
#if TRANSPOSE_A
#define A_K_STRIDE (LDA * A_STEP)
#else
#define A_K_STRIDE A_STEP
#endif
#ifdef MATMUL_ALPHA
#define SCALED(v) ((v) * MATMUL_ALPHA)
#else
#define SCALED(v) (v)
#endif
/* EPILOGUE and CHANNEL (the output's axis 1 as a GEMM index) come from conv_epilogue.cl and
   the op's defines */
/* where output (batch, m, n) goes: batch strides O_BS0 O_BS1, rows LDO apart (in two levels
   with O_SPLIT_ROWS, as A's), n contiguous; a dense output has M * N, N. A folded Transpose
   after the MatMul (passes/view_folding.py) gives its own. */
#define OUT_BASE(batch) ((batch) / OB1 * O_BS0 + (batch) % OB1 * O_BS1)
#if O_SPLIT_ROWS
#define OUT_ROW_OF(m) ((m) / O_R0 * O_RS1 + (m) % O_R0 * LDO)
#else
#define OUT_ROW_OF(m) ((m) * LDO)
#endif
#define OUT_AT(batch, m, n) (OUT_BASE(batch) + OUT_ROW_OF(m) + (n))
/* the fused residual's element for output (batch, m, n): the output's own, or with
   RES_BROADCAST a tensor that broadcasts to it, read with its strides (0 along a broadcast
   axis): batch axes R_BS0 R_BS1; rows in up to three levels (A's batches folded into M: rows
   of R_MI, then R_B1 of those) R_M R_RS1 R_RS0; columns R_N */
#if RES_BROADCAST
#define RES_AT(batch, m, n) ((batch) / OB1 * R_BS0 + (batch) % OB1 * R_BS1 + \
    (m) % R_MI * R_M + (m) / R_MI % R_B1 * R_RS1 + (m) / R_MI / R_B1 * R_RS0 + (n) * R_N)
#else
#define RES_AT(batch, m, n) OUT_AT(batch, m, n)
#endif
#define STORE(batch, m, n, v) out[OUT_AT(batch, m, n)] = \
    EPILOGUE(RES_AT(batch, m, n), CHANNEL(batch, m, n), SCALED(v))
