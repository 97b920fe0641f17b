/* host_unpack.h: K_UNPACK(T0, T1, ...) expands to the arguments of a kernel call read from
 * cuLaunchKernel-style `void **args` (args[i] points at argument i of type Ti): the host
 * trampolines of host_kernels.c and of the tests' threaded emulation. Up to 20 arguments. */
#ifndef TNT_GPU_HOST_UNPACK_H
#define TNT_GPU_HOST_UNPACK_H

/* args[i] points at argument i of type T */
#define K_ARG(i, T) (*(T *)args[i])
#define K_UNPACK1(T0) K_ARG(0, T0)
#define K_UNPACK2(T0, T1) K_UNPACK1(T0), K_ARG(1, T1)
#define K_UNPACK3(T0, T1, T2) K_UNPACK2(T0, T1), K_ARG(2, T2)
#define K_UNPACK4(T0, T1, T2, T3) K_UNPACK3(T0, T1, T2), K_ARG(3, T3)
#define K_UNPACK5(T0, T1, T2, T3, T4) K_UNPACK4(T0, T1, T2, T3), K_ARG(4, T4)
#define K_UNPACK6(T0, T1, T2, T3, T4, T5) K_UNPACK5(T0, T1, T2, T3, T4), K_ARG(5, T5)
#define K_UNPACK7(T0, T1, T2, T3, T4, T5, T6) K_UNPACK6(T0, T1, T2, T3, T4, T5), K_ARG(6, T6)
#define K_UNPACK8(T0, T1, T2, T3, T4, T5, T6, T7) K_UNPACK7(T0, T1, T2, T3, T4, T5, T6), K_ARG(7, T7)
#define K_UNPACK9(T0, T1, T2, T3, T4, T5, T6, T7, T8) K_UNPACK8(T0, T1, T2, T3, T4, T5, T6, T7), K_ARG(8, T8)
#define K_UNPACK10(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9)                                                       \
    K_UNPACK9(T0, T1, T2, T3, T4, T5, T6, T7, T8), K_ARG(9, T9)
#define K_UNPACK11(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10)                                                  \
    K_UNPACK10(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9), K_ARG(10, T10)
#define K_UNPACK12(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11)                                             \
    K_UNPACK11(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10), K_ARG(11, T11)
#define K_UNPACK13(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12)                                        \
    K_UNPACK12(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11), K_ARG(12, T12)
#define K_UNPACK14(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13)                                   \
    K_UNPACK13(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12), K_ARG(13, T13)
#define K_UNPACK15(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14)                              \
    K_UNPACK14(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13), K_ARG(14, T14)
#define K_UNPACK16(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15)                         \
    K_UNPACK15(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14), K_ARG(15, T15)
#define K_UNPACK17(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16) \
    K_UNPACK16(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15), K_ARG(16, T16)
#define K_UNPACK18(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17) \
    K_UNPACK17(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16), K_ARG(17, T17)
#define K_UNPACK19(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18) \
    K_UNPACK18(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17), K_ARG(18, T18)
#define K_UNPACK20(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18, T19) \
    K_UNPACK19(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18), K_ARG(19, T19)
#define K_COUNT(...) K_COUNT_(__VA_ARGS__, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define K_COUNT_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, n, ...) n
#define K_CAT(a, b) K_CAT_(a, b)
#define K_CAT_(a, b) a##b
#define K_UNPACK(...) K_CAT(K_UNPACK, K_COUNT(__VA_ARGS__))(__VA_ARGS__)

#endif
