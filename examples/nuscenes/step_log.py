"""Per-iteration records of a training run: the loss, the gradient norm and the statistics of the
batch's images, kept on the device during training (no sync in the loop) and read once at the
end. ``train.py --loss-file`` writes them as CSV, one row per iteration::

    step,warmup,loss,grad_norm,input_min,input_max,input_mean
    0,1,0.48664,3.1416,-2.1179,2.64,-0.3127

``warmup`` is 1 for the warm-up iterations (they train as well; laptime does not time them).
``train.py --no-step-stats`` keeps the loss only (the other columns are nan). The records say
where a run first turned non-finite: the loss, the gradient norm (after unscaling) or the inputs.
Finite inputs with a non-finite loss put the cause in the model's memory
or arithmetic, not in the batch; a gradient norm that grows for several iterations before points
to divergence, a jump out of small norms to something else (e.g. overwritten memory).
``losscurves.py`` reads the CSV with ``read``.
"""

import csv
import math

FIELDS = ["step", "warmup", "loss", "grad_norm", "input_min", "input_max", "input_mean"]


def input_stats(images):
    """[min, max, mean] of a batch's images as one float32 tensor where the images are; a NaN
    anywhere makes all three NaN. Queued on the device, not read: no sync."""
    import torch

    lo, hi = torch.aminmax(images.detach())
    return torch.stack([lo, hi, images.detach().mean()]).float()


class StepLog:
    """The records of one run as host tensors: loss [n], grad_norm [n] (None where no optimizer
    hook recorded it), inputs [n, 3] (min, max, mean; None where not recorded)."""

    def __init__(self, loss, grad_norm=None, inputs=None):
        import torch

        n = len(loss)
        self.loss = loss
        self.grad_norm = torch.full((n,), math.nan) if grad_norm is None else grad_norm
        self.inputs = torch.full((n, 3), math.nan) if inputs is None else inputs
        self._checked = (grad_norm is not None, inputs is not None)

    @classmethod
    def of(cls, runner):
        """From an ``IterBasedRunnerWithTime`` after ``run()`` (its losses, grad_norms and
        input_stats: lists of device tensors, one per iteration)."""
        import torch

        loss = torch.stack(runner.losses).float().cpu()
        grad = (torch.stack(runner.grad_norms).float().cpu()
                if len(runner.grad_norms) == len(loss) else None)
        inputs = (torch.stack(runner.input_stats).cpu()
                  if len(runner.input_stats) == len(loss) else None)
        return cls(loss, grad, inputs)

    def _finite(self, i):
        """(loss, gradient norm, inputs) of iteration i finite; an unrecorded figure counts as
        finite."""
        import torch

        return (bool(torch.isfinite(self.loss[i])),
                not self._checked[0] or bool(torch.isfinite(self.grad_norm[i])),
                not self._checked[1] or bool(torch.isfinite(self.inputs[i]).all()))

    def first_nonfinite(self):
        """The first iteration whose loss, gradient norm or inputs are not finite; None."""
        for i in range(len(self.loss)):
            if not all(self._finite(i)):
                return i
        return None

    def nonfinite_text(self, before=5):
        """One line for the log: none, or the first non-finite iteration, what was not finite
        there, its inputs and the loss and gradient norm of the iterations before it."""
        i = self.first_nonfinite()
        n = len(self.loss)
        if i is None:
            checked = ["loss"] + [name for name, on in zip(("gradient norm", "inputs"),
                                                            self._checked) if on]
            names = ", ".join(checked[:-1]) + " and " + checked[-1] if len(checked) > 1 \
                else checked[0]
            return f"non-finite: none ({names} finite in all {n} iterations)"
        loss_ok, grad_ok, inputs_ok = self._finite(i)
        what = [name for name, ok in (("loss", loss_ok), ("gradient norm", grad_ok),
                                      ("inputs", inputs_ok)) if not ok]
        lo, hi, mean = (float(x) for x in self.inputs[i])
        j = max(0, i - before)
        return (f"non-finite: first at iteration {i} of {n} ({', '.join(what)}): loss "
                f"{float(self.loss[i]):.4g}, gradient norm {float(self.grad_norm[i]):.4g}, inputs "
                f"min {lo:.4g} max {hi:.4g} mean {mean:.4g} "
                f"({'finite' if inputs_ok else 'NOT finite'}); iterations {j}..{i - 1}: loss "
                + " ".join(f"{float(x):.4g}" for x in self.loss[j:i]) + "; gradient norm "
                + " ".join(f"{float(x):.4g}" for x in self.grad_norm[j:i]))

    def write(self, path, warmup):
        with open(path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(FIELDS)
            for i in range(len(self.loss)):
                w.writerow([i, int(i < warmup), f"{float(self.loss[i]):.6g}",
                            f"{float(self.grad_norm[i]):.6g}",
                            *(f"{float(x):.6g}" for x in self.inputs[i])])


def read(path):
    """A loss file as {field: list} (floats; "nan" and "inf" as Python's), in step order."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    out = {k: [] for k in FIELDS}
    for r in rows:
        for k in FIELDS:
            out[k].append(int(r[k]) if k in ("step", "warmup") else float(r[k]))
    return out
