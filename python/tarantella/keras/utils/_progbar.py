"""keras.utils.Progbar: a progress bar with running averages of the values it is given (Keras's
rule: a value is averaged over the steps it covers, a stateful metric is shown as given)."""
import sys
import time

import numpy as np


class Progbar:
    def __init__(self, target, width=30, verbose=1, interval=0.05, stateful_metrics=None, unit_name="step"):
        self.target = target
        self.width = width
        self.verbose = verbose
        self.interval = interval
        self.unit_name = unit_name
        self.stateful_metrics = set(stateful_metrics) if stateful_metrics else set()
        self._dynamic_display = (hasattr(sys.stdout, "isatty") and sys.stdout.isatty())
        self._total_width = 0
        self._seen_so_far = 0
        self._values = {}  # name -> [weighted sum, steps] or the stateful value
        self._values_order = []
        self._start = time.time()
        self._last_update = 0

    def update(self, current, values=None, finalize=None):
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        for k, v in values or []:
            if k not in self._values_order:
                self._values_order.append(k)
            if k not in self.stateful_metrics:
                steps = max(current - self._seen_so_far, 1)
                if k not in self._values:
                    self._values[k] = [v * steps, steps]
                else:
                    self._values[k][0] += v * steps
                    self._values[k][1] += steps
            else:
                self._values[k] = [v, 1]
        self._seen_so_far = current
        now = time.time()
        if self.verbose == 0:
            return
        if now - self._last_update < self.interval and not finalize:
            return
        self._last_update = now
        info = f" - {now - self._start:.0f}s"
        for k in self._values_order:
            s, n = self._values[k]
            avg = np.mean(s / max(1, n))
            info += f" - {k}: {avg:.4f}" if abs(avg) > 1e-3 else f" - {k}: {avg:.4e}"
        if self.verbose == 1:
            if self.target is not None:
                digits = int(np.log10(self.target)) + 1 if self.target > 0 else 1
                done = int(self.width * current / self.target) if self.target else self.width
                bar = f"{current:{digits}d}/{self.target} [" + "=" * max(done - 1, 0)
                bar += (">" if current < self.target else "=") if done > 0 else ""
                bar += "." * (self.width - done) + "]"
            else:
                bar = f"{current:7d}/Unknown"
            line = bar + info
            if self._dynamic_display:  # a terminal: the same line, rewritten
                sys.stdout.write("\r" + line + ("\n" if finalize else ""))
            elif finalize:  # a log file: one line at the end
                sys.stdout.write(line + "\n")
            self._total_width = len(line)
        elif finalize:
            sys.stdout.write(info.lstrip(" -") + "\n")
        sys.stdout.flush()

    def add(self, n, values=None):
        self.update(self._seen_so_far + n, values)
