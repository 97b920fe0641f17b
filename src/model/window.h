/* window.h: a model's buffers in its node-aware reducer's shared window (issue 25).
 *
 * From the first fit with a node-aware reducer on, the model's gradients (and, with the sharded
 * optimizer, its weights and the optimizer's slots, each once per node) live in the reducer's
 * shared window, and stay there between fits: a loop of train_on_batch or of fit(epochs=1) pays
 * the move once, not per call (147 MB of the MLP's weights and slots each way). Reading the
 * model while attached reads the window, which holds the newest values. A write to the weights
 * outside a fit (tnt__model_host_written: set, copy or load weights, a writable view, the
 * broadcast) takes the weights alone back into the rank's own buffer (a rank's write is its own);
 * the next fit puts them back. A custom training loop, compile or a new reducer take everything
 * back (detach). Both are local to a rank; attaching again is collective under the sharded
 * optimizer, and every rank of the node takes part whether or not it had left. */
#ifndef TNT_MODEL_WINDOW_H
#define TNT_MODEL_WINDOW_H

#include "model/model.h"

/* Moves the buffers into m->reducer's window; a no-op when attached or the reducer is flat
 * (sharded: collective over the node, every rank must call it). */
tnt_status tnt__model_attach_window(tnt_model *m);
/* Sharded: the weights (only) back into the rank's own buffer, with the window's values, before
 * the rank writes them; a no-op when they are not in the window. */
void tnt__model_own_weights(tnt_model *m);
/* Gives the model its own buffers back, with the window's values: the weights, the optimizer's
 * slots (in new buffers: a sharded fit freed the rank's own), and the last step's summed
 * gradients in m->grads, as after a flat fit. A no-op when not attached. TNT_ERR_NOMEM when the
 * slots cannot be given back (the optimizer then starts again from fresh slots). */
tnt_status tnt__model_detach_window(tnt_model *m);
/* When the model goes, after its layers: its own buffers back, to be freed, without the values
 * or the layers' views (the window goes with the reducer). */
void tnt__model_drop_window(tnt_model *m);

#endif
