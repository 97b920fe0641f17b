/* kernel_list.h: every kernel of kernels.cu with its argument types, in order: the list the host
 * trampolines (host_kernels.c) are made from and the PTX test checks the .entry names against.
 * TNT_K(name, type of argument 0, type of argument 1, ...). Keep it in step with the .cu files
 * (the host build fails on a wrong count or type of arguments). */
/* elementwise.cu */
TNT_K(tnt_k_fill, float *, i64, float)
TNT_K(tnt_k_copy, const float *, float *, i64)
TNT_K(tnt_k_scale, const float *, float *, i64, float)
TNT_K(tnt_k_add, const float *, const float *, float *, i64)
TNT_K(tnt_k_axpy, const float *, float *, i64, float)
TNT_K(tnt_k_axpby, const float *, float *, i64, float, float)
TNT_K(tnt_k_mul, const float *, const float *, float *, i64)
TNT_K(tnt_k_bias_add, float *, const float *, i64, i64)
TNT_K(tnt_k_bias_set, float *, const float *, i64, i64)
TNT_K(tnt_k_col_sums, const float *, float *, i64, i64)
TNT_K(tnt_k_col_sums_partial, const float *, float *, i64, i64, i64)
TNT_K(tnt_k_clip, const float *, float *, i64, float)
TNT_K(tnt_k_sum_squares_partial, const float *, float *, i64)
TNT_K(tnt_k_l1l2_grad, const float *, float *, i64, float, float)
TNT_K(tnt_k_l1l2_sums_partial, const float *, double *, i64)
TNT_K(tnt_k_f32_to_bf16, const float *, unsigned short *, i64)
TNT_K(tnt_k_bf16_to_f32, const unsigned short *, float *, i64)
/* activations.cu */
TNT_K(tnt_k_act_fwd, int, float, const float *, float *, i64)
TNT_K(tnt_k_bias_act_fwd, float *, const float *, float *, int, float, i64, i64)
TNT_K(tnt_k_act_bwd, int, float, const float *, const float *, const float *, float *, i64)
TNT_K(tnt_k_softmax_fwd, const float *, float *, i64, i64)
TNT_K(tnt_k_softmax_bwd, const float *, const float *, float *, i64, i64)
TNT_K(tnt_k_log_softmax_fwd, const float *, float *, i64, i64)
TNT_K(tnt_k_log_softmax_bwd, const float *, const float *, float *, i64, i64)
TNT_K(tnt_k_sparsemax_fwd, const float *, float *, i64, i64)
TNT_K(tnt_k_sparsemax_bwd, const float *, const float *, float *, i64, i64)
/* optim.cu */
TNT_K(tnt_k_sgd, float *, const float *, i64, float, float)
TNT_K(tnt_k_sgd_momentum, float *, const float *, float *, i64, float, float, int, float)
TNT_K(tnt_k_adam, float *, const float *, float *, float *, float *, i64, float, float, float, float, float)
TNT_K(tnt_k_rmsprop, float *, const float *, float *, float *, float *, i64, float, float, float, float, float)
TNT_K(tnt_k_adagrad, float *, const float *, float *, i64, float, float, float)
TNT_K(tnt_k_adadelta, float *, const float *, float *, float *, i64, float, float, float, float)
TNT_K(tnt_k_adamax, float *, const float *, float *, float *, i64, float, float, float, float, float)
TNT_K(tnt_k_nadam, float *, const float *, float *, float *, i64, float, float, float, float, float, float, float, float)
/* pooling.cu */
TNT_K(tnt_k_max_pool_fwd, tnt_k_pool, const float *, float *, unsigned short *)
TNT_K(tnt_k_max_pool_bwd, tnt_k_pool, const float *, const unsigned short *, float *)
TNT_K(tnt_k_avg_pool_fwd, tnt_k_pool, const float *, float *)
TNT_K(tnt_k_avg_pool_bwd, tnt_k_pool, const float *, float *)
TNT_K(tnt_k_global_pool_fwd, const float *, float *, i64, i64, i64, int)
TNT_K(tnt_k_global_avg_pool_bwd, const float *, float *, i64, i64, i64)
TNT_K(tnt_k_global_max_pool_bwd, const float *, const float *, float *, i64, i64, i64)
/* normalization.cu */
TNT_K(tnt_k_bn_stat_sums, const float *, double *, i64, i64, i64, i64)
TNT_K(tnt_k_bn_stats, const float *, const double *, i64, i64, i64, float *, float *, float *, float *, double, double,
      double)
TNT_K(tnt_k_bn_moving_stats, const float *, const float *, float *, float *, i64, double)
TNT_K(tnt_k_bn_apply, const float *, float *, const float *, const float *, const float *, const float *, i64, i64,
      i64, int)
TNT_K(tnt_k_bn_grad_sums, const float *, const float *, const float *, const float *, const float *, double *, i64,
      i64, i64, i64, int)
TNT_K(tnt_k_bn_grad_finish, const double *, i64, i64, float *, float *, float *, float *, double, int)
TNT_K(tnt_k_bn_dx, const float *, const float *, const float *, const float *, const float *, const float *,
      const float *, const float *, float *, i64, i64, i64, int)
TNT_K(tnt_k_ln_fwd, const float *, float *, const float *, const float *, double *, i64, i64, double)
TNT_K(tnt_k_ln_param_sums, const float *, const double *, const float *, double *, i64, i64, i64)
TNT_K(tnt_k_ln_bwd_dx, const float *, const float *, const float *, const double *, float *, i64, i64)
/* misc.cu */
TNT_K(tnt_k_dropout, const float *, float *, i64, unsigned long long, unsigned long long, float, float)
TNT_K(tnt_k_embedding_bad_ids, const float *, i64, int, long long *)
TNT_K(tnt_k_embedding_fwd, const float *, const float *, float *, i64, i64)
TNT_K(tnt_k_embedding_bwd, const float *, const float *, float *, i64, i64, i64)
TNT_K(tnt_k_box_copy, tnt_k_box, const float *, float *, float)
TNT_K(tnt_k_copy_cols, const float *, float *, i64, i64, i64, i64, i64, i64, int)
TNT_K(tnt_k_transpose, const float *, float *, i64, i64)
TNT_K(tnt_k_permute, tnt_k_perm, const float *, float *)
TNT_K(tnt_k_minmax_step, const float *, float *, i64, int)
TNT_K(tnt_k_select_step, const float *, float *, unsigned char *, i64, int, int)
TNT_K(tnt_k_select_grad, const float *, const unsigned char *, float *, i64, int, int)
/* attention.cu */
TNT_K(tnt_k_mha_softmax, float *, const float *, const float *, const float *, i64, i64, i64, i64, int)
TNT_K(tnt_k_mha_softmax_bwd, const float *, const float *, float *, i64, i64, float)
