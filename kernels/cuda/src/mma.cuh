#pragma once
// Tensor-core building blocks for sm_80+ (used here on sm_90): asynchronous 16-byte copies
// into shared memory, ldmatrix fragment loads and the bf16 m16n8k16 matrix multiply-add, in
// inline PTX (PTX ISA, "Warp-level matrix instructions"). Fragment layouts, with
// g = lane / 4 and t = lane % 4:
//   A 16×16: a0 (row g, cols 2t..2t+1), a1 (row g+8, same cols), a2 (row g, cols 2t+8..),
//            a3 (row g+8, cols 2t+8..)
//   B 16×8:  b0 (rows 2t..2t+1, col g), b1 (rows 2t+8.., col g)
//   C 16×8:  c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8, same cols)
#include <cstdint>
#include <cuda_bf16.h>

namespace trident::kernels::cuda::detail {

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(smem)),
                 "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(smem)));
}

// c += a · b, bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one bf16x2 register, `lo` in the low half (the lower column).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
}

// A fragment of a 16×16 tile stored row-major (m rows, k contiguous) at `tile`, row stride
// `ld` elements.
__device__ __forceinline__ void load_a(unsigned (&a)[4], const __nv_bfloat16* tile, int ld,
                                       int lane) {
    ldmatrix_x4(a, tile + (lane & 15) * ld + (lane >> 4) * 8);
}
// A fragment of a 16×16 tile stored transposed (k rows, m contiguous).
__device__ __forceinline__ void load_a_trans(unsigned (&a)[4], const __nv_bfloat16* tile, int ld,
                                             int lane) {
    const int q = lane >> 3;
    ldmatrix_x4_trans(a, tile + ((lane & 7) + (q >> 1) * 8) * ld + (q & 1) * 8);
}
// B fragments of two adjacent n-tiles (16 n × 16 k) stored n-major (n rows, k contiguous):
// b[0], b[1] for n-tile 0 and b[2], b[3] for n-tile 1.
__device__ __forceinline__ void load_b_nk(unsigned (&b)[4], const __nv_bfloat16* tile, int ld,
                                          int lane) {
    const int q = lane >> 3;
    ldmatrix_x4(b, tile + ((lane & 7) + (q >> 1) * 8) * ld + (q & 1) * 8);
}
// B fragments of two adjacent n-tiles stored k-major (16 k rows, n contiguous).
__device__ __forceinline__ void load_b_kn(unsigned (&b)[4], const __nv_bfloat16* tile, int ld,
                                          int lane) {
    const int q = lane >> 3;
    ldmatrix_x4_trans(b, tile + ((lane & 7) + (q & 1) * 8) * ld + (q >> 1) * 8);
}

} // namespace trident::kernels::cuda::detail
