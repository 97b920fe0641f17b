/* dnn.c: the cuDNN handle on the compute stream, made when the device opens. Without cuDNN (not
 * installed, too old, or lacking the legacy API) or on the emulated device there is none: the
 * layers that need it then have no GPU path, and dispatch names them. */
#include "gpu/api.h"

tnt_status tnt__gpu_dnn_open(void) {
    tnt_status status = TNT_OK;
    if (tnt__gpu.emulated) return TNT_OK;
    if (!tnt__cuda.has_cudnn) {
        tnt_log(TNT_LOG_INFO, "GPU %d: no cuDNN (%s): layers that need it stay on the CPU", tnt__gpu.ordinal,
                tnt__cuda.cudnn_why);
        return TNT_OK;
    }
    TNT_GPU_CHECK(cudnn, cudnnCreate(&tnt__gpu.cudnn));
    TNT_GPU_CHECK(cudnn, cudnnSetStream(tnt__gpu.cudnn, tnt__gpu.streams[TNT__GPU_COMPUTE]));
out:
    if (status != TNT_OK) {
        /* the GPU stays usable without cuDNN (its layers then have no GPU path); say so loudly */
        tnt_log(TNT_LOG_WARNING, "GPU %d: cuDNN did not start, layers that need it stay on the CPU: %s",
                tnt__gpu.ordinal, tnt_last_error());
        tnt__gpu_dnn_close();
    }
    return TNT_OK;
}

void tnt__gpu_dnn_close(void) {
    if (tnt__gpu.cudnn) tnt__cuda.cudnnDestroy(tnt__gpu.cudnn);
    tnt__gpu.cudnn = NULL;
}

void *tnt__gpu_cudnn(void) { return tnt__gpu.open ? (void *)tnt__gpu.cudnn : NULL; }

/* Before the device opens (a model's device check comes first), the loader's word stands in. */
bool tnt__gpu_cudnn_usable(void) {
    if (tnt__gpu.open) return tnt__gpu.cudnn != NULL;
    return !tnt__gpu_emulated() && tnt__cuda.has_cudnn;
}
