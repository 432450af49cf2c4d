// The buffer index a linear view reads for linear output index i (ops/_program.py: LinearView,
// view_table): `v` is the view as a small constant buffer, [rank, offset, dims[rank],
// strides[rank]] (axes merged where they walk contiguously, size-1 axes dropped), an argument
// so that one program serves every shape, permutation and broadcast.
inline int view_index(__constant const int* v, uint i)
{
    const int rank = v[0];
    int at = v[1];
    for (int k = rank - 1; k > 0; --k) {
        const uint d = (uint)v[2 + k];
        at += (int)(i % d) * v[2 + rank + k];
        i /= d;
    }
    return rank > 0 ? at + (int)i * v[2 + rank] : at;
}
