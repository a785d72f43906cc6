"""Stops the integrations cannot foresee: a stop requested after laptime's batch-end hook (an
EarlyStopping at a mid-epoch validation), the data of an IterableDataset running out, Lightning's
manual optimisation. One "training loop" per optimisation step whatever ends the loop
(docs/integrations.md): the fetch begun for a step that never came is not counted."""

import time

import pytest

torch = pytest.importorskip("torch")

import laptime
from integ_helpers import counts, fresh_laptime  # noqa: F401

LOOP_NAMES = ("training loop", "data fetch")


def _loader(n=64, batch=8):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)


def _lightning():
    try:
        import lightning.pytorch as pl
    except ImportError:
        pl = pytest.importorskip("pytorch_lightning")
    return pl


def _trainer(pl, callbacks, **kwargs):
    return pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False,
                      callbacks=callbacks, **kwargs)


def _regression(pl):
    """A LightningModule fitting a linear layer: the class each Lightning test extends."""

    class Regression(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def loss(self, batch):
            return torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])

        def training_step(self, batch, i):
            return self.loss(batch)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Regression


class _Tiny(torch.nn.Module):
    """A model as transformers' Trainer takes one: a dict with the loss; ``fail`` raises in
    forward (a step that runs out of memory)."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 1)
        self.fail = False

    def forward(self, x, labels=None):
        if self.fail:
            raise RuntimeError("out of memory (simulated)")
        out = self.l(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


def _hf_args(transformers, tmp_path, max_steps):
    return transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=max_steps, per_device_train_batch_size=8,
        use_cpu=True, report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True)


def test_lightning_early_stop_at_a_mid_epoch_validation_leaves_no_extra_loop():
    pl = _lightning()
    from lightning.pytorch.callbacks import EarlyStopping

    from laptime.integrations.lightning import LaptimeCallback

    class Net(_regression(pl)):
        steps = 0

        def training_step(self, batch, i):
            self.steps += 1
            return self.loss(batch)

        def validation_step(self, batch, i):
            self.log("val_loss", self.loss(batch))

    net = Net()
    stop = EarlyStopping("val_loss", patience=0, min_delta=100.0)  # stops at the 2nd validation
    _trainer(pl, [LaptimeCallback(num_warmup_iters=0, track_cpu=False), stop], max_epochs=10,
             val_check_interval=3, limit_val_batches=1, num_sanity_val_steps=0).fit(
                 net, _loader(), _loader())
    r = laptime.Stopwatch().results()
    assert net.steps == 6 and r["iterations_finished"] == 6
    assert {n: counts(r)[n] for n in LOOP_NAMES} == {n: 6 for n in LOOP_NAMES}
    assert not any(m["running"] for m in r["measurements"])


def test_lightning_manual_optimisation_one_iteration_per_batch_that_stepped():
    pl = _lightning()
    from laptime.integrations.lightning import LaptimeCallback

    class Gan(pl.LightningModule):  # two optimizers stepped by hand, the second every 3rd batch
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False
            self.d, self.g = torch.nn.Linear(8, 1), torch.nn.Linear(8, 1)

        def training_step(self, batch, i):
            opt_d, opt_g = self.optimizers()
            for net, opt, sleep in ((self.d, opt_d, 0.002), (self.g, opt_g, 0.004)):
                if net is self.g and i % 3 != 2:
                    continue
                time.sleep(sleep)
                loss = torch.nn.functional.mse_loss(net(batch[0]), batch[1])
                opt.zero_grad()
                self.manual_backward(loss)
                opt.step()

        def configure_optimizers(self):
            return (torch.optim.SGD(self.d.parameters(), lr=0.01),
                    torch.optim.SGD(self.g.parameters(), lr=0.01))

    _trainer(pl, [LaptimeCallback(num_warmup_iters=0, track_cpu=False)], max_epochs=2).fit(
        Gan(), _loader())
    r = laptime.Stopwatch().results()
    c = counts(r)
    assert r["iterations_finished"] == 16  # 8 batches an epoch, each stepped
    assert (c["training loop"], c["data fetch"], c["Training step"]) == (16, 16, 16)
    assert "Optimizer step" not in c  # optimizer.step() runs inside training_step


def test_transformers_iterable_dataset_running_out_leaves_no_extra_loop(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from laptime.integrations.transformers import LaptimeCallback

    class Samples(torch.utils.data.IterableDataset):  # 8 batches, no __len__: re-iterated
        def __iter__(self):
            g = torch.Generator().manual_seed(0)
            for _ in range(64):
                x = torch.randn(8, generator=g)
                yield {"x": x, "labels": x.sum(0, keepdim=True)}

    args = _hf_args(transformers, tmp_path, 20)
    transformers.Trainer(model=_Tiny(), args=args, train_dataset=Samples(),
                         callbacks=[LaptimeCallback(num_warmup_iters=0, track_cpu=False)]).train()
    r = laptime.Stopwatch().results()
    assert r["iterations_finished"] == 20
    assert {n: counts(r)[n] for n in LOOP_NAMES} == {n: 20 for n in LOOP_NAMES}


def test_transformers_trains_again_after_a_run_that_raised(tmp_path):
    """A train() that raised (an out-of-memory step, which ``auto_find_batch_size`` retries with a
    smaller batch) calls no end hook: the next train() of the process starts clean, with the
    failed step's intervals dropped, not raising that they already run."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from laptime.integrations.transformers import LaptimeCallback

    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    samples = [{"x": r, "labels": r.sum(0, keepdim=True)} for r in x]
    model = _Tiny()
    model.fail = True
    trainer = transformers.Trainer(model=model, args=_hf_args(transformers, tmp_path, 6),
                                   train_dataset=samples,
                                   callbacks=[LaptimeCallback(num_warmup_iters=0, nvtx=True,
                                                              track_cpu=False)])
    with pytest.raises(RuntimeError, match="simulated"):
        trainer.train()
    model.fail = False
    trainer.train()
    r = laptime.Stopwatch().results()
    assert r["iterations_finished"] == 6
    assert {n: counts(r)[n] for n in LOOP_NAMES} == {n: 6 for n in LOOP_NAMES}
    assert counts(r)["Training step"] == 6
    assert not [m["name"] for m in r["measurements"] if m["running"]]


def test_lightning_step_that_raised_is_not_counted_and_fit_runs_again():
    pl = _lightning()
    from laptime.integrations.lightning import LaptimeCallback

    class Net(_regression(pl)):
        fail_at = 2

        def training_step(self, batch, i):
            if i == self.fail_at:
                raise RuntimeError("a failing step")
            return self.loss(batch)

    net = Net()
    callback = LaptimeCallback(num_warmup_iters=0, nvtx=True, track_cpu=False)
    with pytest.raises(RuntimeError, match="a failing step"):
        _trainer(pl, [callback], max_epochs=1).fit(net, _loader())
    r = laptime.Stopwatch().results()
    assert r["iterations_finished"] == 2
    assert counts(r)["Training step"] == 2  # the third step raised: it never completed
    assert not [m["name"] for m in r["measurements"] if m["running"]]
    net.fail_at = -1
    _trainer(pl, [callback], max_epochs=1).fit(net, _loader())
    r = laptime.Stopwatch().results()
    assert r["iterations_finished"] == 8
    assert {n: counts(r)[n] for n in LOOP_NAMES + ("Training step",)} == {
        n: 8 for n in LOOP_NAMES + ("Training step",)}
