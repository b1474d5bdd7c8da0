#pragma once
// TRIDENT_SIMD_CLONES: compile a loop-heavy function for AVX-512, AVX2+FMA and baseline x86-64,
// the loader picking the widest this CPU runs (GCC/Clang target_clones, an ifunc). The
// library builds for baseline x86-64, so without it the vectorised loops and glibc's vector
// exp (libmvec) ran 4 lanes wide on CPUs with 16. One machine always picks the same clone, so
// runs on it compare bit for bit. Machines of different ISA levels may differ in the last bits
// (as OpenBLAS's per-CPU GEMM kernels already do) — AdamW's included, so data replicas on a
// cluster that mixes ISA levels would drift apart in the last bits; the distributed optimizer
// (one owner per slice, gathered to all) does not. Left out under AddressSanitizer (the sanitizer builds check
// correctness, not speed, and its runtime starts after the ifunc resolvers run), and with
// compilers that dispatch `arch=x86-64-vN` clones wrongly: GCC before 12 (GCC bug 101696),
// Clang before 18 (LLVM issue 55830).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRIDENT_NO_SIMD_CLONES
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TRIDENT_NO_SIMD_CLONES
#endif
#if defined(__clang__)
#if __clang_major__ < 18
#define TRIDENT_NO_SIMD_CLONES
#endif
#elif defined(__GNUC__) && __GNUC__ < 12
#define TRIDENT_NO_SIMD_CLONES
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) &&                            \
    !defined(TRIDENT_NO_SIMD_CLONES)
#define TRIDENT_SIMD_CLONES                                                                        \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TRIDENT_SIMD_CLONES
#endif
