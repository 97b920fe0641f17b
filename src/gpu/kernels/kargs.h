/* kargs.h: the structures some kernels take by value (cuLaunchKernel copies a struct argument as
 * it copies a float), shared by the kernels and the host code that launches them. Only long long
 * and int fields, in an order without padding surprises: the layout is the same for nvptx64 and
 * x86-64 (static asserts in host_kernels.c). */
#ifndef TNT_GPU_KARGS_H
#define TNT_GPU_KARGS_H

/* A 2-D or 3-D pooling over channels-last images (layers/pooling/pooling.c's geometry): n images of
 * (in[0], in[1], in[2], c) cells (d, h, w; 2-D: d = 1) to (out[0], out[1], out[2], c); window k,
 * strides s, padding before pad per axis (TensorFlow's "same": the extra cell after). */
typedef struct tnt_k_pool {
    long long n, c;
    int in[3], out[3], k[3], s[3], pad[3];
    int unused; /* keeps the size a multiple of 8 on every compiler */
} tnt_k_pool;

/* A box copy between channels-last images (ZeroPadding and Cropping, forward and backward):
 * y (n, out[0], out[1], out[2], c) cell o takes x (n, in..., c) cell o - off when that is inside x,
 * else a constant. Padding: off = the padding before; cropping: off = -(the cropping before). */
typedef struct tnt_k_box {
    long long n, c;
    int in[3], out[3], off[3];
    int unused;
} tnt_k_box;

/* A permutation of the axes of each sample (Permute; attention's head reshapes): the destination,
 * (n, dim[0], ..., dim[ndim - 1]) with numel values per sample, walked in order; its axis i steps
 * the source by src_stride[i] within the sample. */
typedef struct tnt_k_perm {
    long long n, numel;
    long long dim[8], src_stride[8];
    int ndim;
    int unused;
} tnt_k_perm;

/* A 2-D convolution (Conv2D, Conv1D as height 1, DepthwiseConv2D as groups = c) over channels-last
 * images with Keras's kernel (kh, kw, c / groups, k): n images (ih, iw, c) to (oh, ow, k); strides
 * sh, sw, dilation dh, dw, the padding before pt, pl; output channel f reads the input channels of
 * group f / (k / groups). */
typedef struct tnt_k_conv {
    long long n, ih, iw, c, oh, ow, k;
    int kh, kw, sh, sw, dh, dw, pt, pl, groups;
    int unused;
} tnt_k_conv;

/* A weight's norms over some of its axes (the norm constraints of layers/regularizer.c): the
 * weight's shape dim[0 .. ndim), reduced[d] 1 for an axis the norm runs over; one norm per index
 * over the other axes (groups of them, each of per = the product of the reduced axes' sizes). */
typedef struct tnt_k_axes_norm {
    long long groups, per;
    long long dim[8];
    int reduced[8];
    int ndim;
    int unused;
} tnt_k_axes_norm;

/* One time step of a recurrent layer (rnn.cu; layers/recurrent/rnn_gpu.c): B rows of T steps of U
 * units; step t, the step before it in processing order tprev and the one after tnext (-1: none);
 * ld_y the row stride of the output or its gradient; cell, activations and reset_after as
 * layers/recurrent/rnn_common.h numbers them (K_RNN_*, checked there). */
typedef struct tnt_k_rnn {
    long long B, T, U, t, tprev, tnext, ld_y;
    int cell, act, rec_act, reset_after;
    int has_init; /* the state before the first step is the initial-state inputs (else zeros) */
    int zero_output; /* a masked step outputs zeros (else the state it keeps) */
} tnt_k_rnn;
enum { K_RNN_SIMPLE, K_RNN_LSTM, K_RNN_GRU };
enum { K_RNN_TANH, K_RNN_SIGMOID, K_RNN_HARD_SIGMOID, K_RNN_HARD_SIGMOID_V3, K_RNN_RELU, K_RNN_LINEAR };

#endif
