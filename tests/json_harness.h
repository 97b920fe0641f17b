/* json_harness.h: Keras JSON round trips of models and layers, shared by the JSON tests
 * (test_json.c, test_json_layers.c). */
#ifndef TNT_JSON_HARNESS_H
#define TNT_JSON_HARNESS_H

#include "testutil.h"

/* tnt_model_summary as a string (caller frees). */
char *summary_of(const tnt_model *m);
/* tnt_model_to_json, asserted to succeed (caller frees). */
char *to_json(const tnt_model *m);
/* to_json -> from_json -> to_json gives the same string, summary and parameter count, and
 * tnt_clone_model the same JSON; frees m. Returns the JSON (caller frees). */
char *round_trip(tnt_model *m);
/* A Sequential model: InputLayer(in) then layer. */
tnt_model *seq1(tnt_shape in, tnt_layer *layer);
/* round_trip of seq1(in, layer); the JSON must name class cls and contain needle (if not NULL). */
void check_layer(tnt_shape in, tnt_layer *layer, const char *cls, const char *needle);
/* tnt_model_from_json(json) fails with an error containing every needle (NULL-terminated). */
void expect_error(const char *json, const char *const *needles);
/* A Sequential of an InputLayer (batch_input_shape as Keras writes it: "[null, 5]") and one layer
 * given as its Keras JSON {"class_name", "config"}; NULL with the reader's error. */
tnt_model *seq_from_layer_json(const char *batch_input_shape, const char *layer);

#endif
