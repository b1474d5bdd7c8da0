#pragma once
// TRIDENT_SIMD_CLONES: compile a loop-heavy function for AVX-512, AVX2+FMA and baseline x86-64,
// the loader picking the widest this CPU runs (GCC/Clang target_clones, an ifunc). The
// library builds for baseline x86-64, so without it the vectorised loops and glibc's vector
// exp (libmvec) ran 4 lanes wide on CPUs with 16. One machine always picks the same clone, so
// runs on it compare bit for bit. Left out under AddressSanitizer, which checks correctness
// only and runs before ifunc resolvers may.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRIDENT_NO_SIMD_CLONES
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TRIDENT_NO_SIMD_CLONES
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) &&                            \
    !defined(TRIDENT_NO_SIMD_CLONES)
#define TRIDENT_SIMD_CLONES                                                                        \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TRIDENT_SIMD_CLONES
#endif
