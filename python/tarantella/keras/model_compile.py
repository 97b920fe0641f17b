"""Keras's Model.compile and what it sets (keras/engine/training.py): the optimizer, the losses
and metrics per output, loss_weights, metrics_names. Mixed into tnt.keras.Model; the library model
is compiled once it exists (_apply_compile, from Model._set_handle)."""
from tarantella.keras import _sharing


def _metric_order(metrics):
    """The log names of a flat compile metrics list, in its order (None for other forms): a string
    as written, a function by its name, a metric object by its name."""
    if metrics is None or isinstance(metrics, dict):
        return None
    items = list(metrics) if isinstance(metrics, (list, tuple)) else [metrics]
    if any(isinstance(m, (list, tuple, dict)) for m in items):
        return None
    names = []
    for m in items:
        name = str(m) if isinstance(m, str) else getattr(m, "name", None) if not isinstance(m, type) else \
            getattr(m, "_name", None)
        name = name or getattr(m, "__name__", None)
        if isinstance(name, str):
            names.append(name)
    return names if len(set(names)) == len(names) else None


class CompileAPI:
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None, weighted_metrics=None,
                run_eagerly=None, steps_per_execution=None, jit_compile=None, seed=None, **kwargs):
        from tarantella.keras import losses, metrics as M, optimizers
        from tarantella.keras.engine import _ignored_keras2_arguments
        _ignored_keras2_arguments("compile", kwargs, ("experimental_run_tf_function", "distribute",
                                                      "target_tensors", "sample_weight_mode", "pss_evaluation_shards",
                                                      "auto_scale_loss"))
        opt = optimizers.get(optimizer)
        if not isinstance(loss, (list, tuple, dict)):
            losses.spec(loss)  # a bad loss fails here, before the model is built
        lspec = loss
        from tarantella.keras import _custom_objectives
        order = _metric_order(metrics)
        metrics, metric_fns = _custom_objectives.split_metrics(metrics)
        mnames = M.names(metrics)
        # Keras 2.4+: sample and class weights weigh the loss and the weighted_metrics only
        weighted, weighted_fns = _custom_objectives.split_metrics(weighted_metrics)
        self._compiled = {"optimizer": opt, "loss": lspec, "metrics": mnames, "seed": seed,
                          "loss_weights": loss_weights, "metrics_given": metrics, "metric_functions": metric_fns,
                          "plain_functions": metric_fns, "weighted_given": weighted, "weighted_functions": weighted_fns,
                          "metric_order": order}
        self._optimizer = opt
        self._touched = True
        self._loss = loss
        self._metrics = mnames if mnames is not None else metrics
        if self._h is not None:
            self._apply_compile()

    def _apply_compile(self):
        c = self._compiled
        from tarantella.keras import losses, metrics as M
        from tarantella.keras import _custom_objectives
        from tarantella.keras import _custom_fit  # a train_step of the user's needs the optimizer only
        if c["loss"] is None and _custom_fit.python_loop(self):
            return _custom_fit.bind_optimizer(self, c["optimizer"])
        if getattr(self, "_loss_override", False) and (c["loss"] is None or getattr(c["loss"], "stand_in", None)):
            if self._loss_labels is None:
                return  # built for predict: compiled when fit or evaluate builds it again with the labels
            from tarantella.keras import _compute_loss  # the loss is compute_loss's, added in the graph
            c["loss"] = _compute_loss.ZeroLoss(sparse=self._loss_labels_flat)
        elif _custom_objectives.only_added_losses(self, c):  # compile(loss=None) with layers' add_loss
            c["loss"] = _custom_objectives.NoLabelsLoss()
        c["loss"] = _custom_objectives.fill_missing_losses(c["loss"], self.output_names)
        (kind, from_logits, smoothing, ignore, delta), kinds = losses.per_output(c["loss"], self.output_names)
        weights = c.get("loss_weights")
        if isinstance(weights, dict):  # by output name, as Keras
            names = self.output_names
            unknown = sorted(set(weights) - set(names))
            if unknown:
                raise ValueError(f"compile: loss_weights names {unknown}, which are not outputs of the model "
                                 f"{names}")
            weights = [float(weights.get(n, 1.0)) for n in names]
        elif weights is not None:
            weights = [float(w) for w in (weights if isinstance(weights, (list, tuple)) else [weights])]
        if c["metrics"] is None:  # per output
            c["metrics"] = M.names(c["metrics_given"], self.output_names)
        specs, c["metric_functions"] = M.with_weighted(c["metrics"], M.names(c["weighted_given"], self.output_names),
                                                       c["plain_functions"], c["weighted_functions"],
                                                       self.output_names)
        _sharing.apply_trainable(self)
        self._h.compile(c["optimizer"]._spec(), kind, from_logits=from_logits, metrics=",".join(specs) or None,
                        seed=int(c["seed"] or 0), label_smoothing=smoothing, ignore_class=ignore, huber_delta=delta,
                        loss_weights=weights, output_losses=kinds)
        from tarantella.keras import _custom_objectives
        _custom_objectives.bind(self)
        c["optimizer"]._bind(self)

    @property
    def optimizer(self):
        return self._optimizer

    @property
    def loss(self):
        return self._loss

    @property
    def metrics_names(self):
        info = self._h.compile_info() if self._h is not None else None
        if info is None:
            return []
        if self._last_logs:  # Keras's order: loss, the outputs' losses, the metrics (per output)
            return [k for k in self._last_logs if not k.startswith("val_")]
        return ["loss"] + [m.lstrip("~") for m in info["metrics"].split(",") if m]
