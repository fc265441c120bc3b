"""The measuring of every train*.py, kept out of the training story: the scripts talk to a Meter in a few lines.

    Meter.add_arguments(parser)       its flags: --warmup-steps --metrics-out --no-progress --target-accuracy
                                      --tensorboard --memory-snapshot
    meter = Meter(args, device, rank, world_size)   the run's clock starts; its flags and outputs are checked
    meter.record(amp_dtype="bf16")    a technique's own fields in the record (one marked line in its script)
    meter.start(info, batch_size, total_steps)      the checks are done: the warm-up steps, then the timed window
    epochs = meter.until_target(epochs)             the epochs, ending at the first to reach --target-accuracy
    meter.batch()                     the step's batch is on the device
    meter.step(loss)                  the step is done
    meter.pause()                     evaluation is not timed
    meter.evaluated(val_acc, images)  an epoch's end: its curves' points, and the timing goes on
    meter.finish()                    the record (--metrics-out, rank 0) and the printed summary

Delete every line that names the meter and a script still trains and evaluates (tests/test_meter.py does).

How it times (docs/runs.md, "How a run is timed"): the window is opened and closed by a synchronize, and nothing
inside it waits for the device. Each step leaves two marks on the compute stream, its batch ready and its update
done (CUDA events, read only once the window has closed; host clocks on a CPU). From the previous step's end to this
step's batch ready the device was starved for data (the copy included); from the previous end to this end is the
step's time. The host's time blocked waiting for the loader is counted apart: a host running ahead of the device can
wait without starving it. The loss stays on the device, read at each epoch's end (outside the window) or, with a
progress bar, every 50 steps: the one documented sync. Warm-up, compilation (the first step) and evaluation are
outside the window; each warm-up step ends with a synchronize, so that its time is known (warmup_step_ms)."""

import json
import os
import pickle
import platform
import re
import sys
import time
from typing import NamedTuple

import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode
from tqdm import tqdm

import checks
from checks import die

CURVE_STEPS = 10  # the training loss curve has a point per this many steps: their mean
SNAPSHOT_STEPS = 3  # --memory-snapshot records this many steps after the warm-up
PROFILE_WARMUP, PROFILE_ACTIVE = 1, 3  # --profile: after the window, the profiler's warm-up step, then those it records
NO_PROFILE = dict(  # a run without it
    profile_trace=None,
    profile_steps=None,
    profile_note=None,
    profile_ops=None,
    profile_collective_ms=None,
    profile_exposed_ms=None,
)
# the names of collectives, lower case: c10d's operators and gloo's work (on threads of its own) on a CPU, NCCL's
# kernels on a GPU (not a bare "broadcast": aten::broadcast_tensors is compute)
COLLECTIVE = ("c10d::", "gloo:", "nccl")
PROFILE_CAP_MIB = 256  # a trace larger than this (as written, compressed or not) is not kept: said once
# Peak dense TFLOP/s of the GPUs whose datasheets say them, by torch's name of the GPU and the precision the math ran
# in (NVIDIA's Tensor Core figures are given "with sparsity": halved here, as the datasheets' footnotes say). MFU is
# left empty for every other GPU and for CPUs: never guessed.
# The patterns match the whole name; a MIG slice ("... MIG 1g.10gb") has a fraction of the peak and gets none.
PEAK_TFLOPS = {
    # H100 SXM5 (torch: "NVIDIA H100 80GB HBM3"): nvidia.com/en-us/data-center/h100 datasheet
    r"NVIDIA H100 (80GB HBM3|SXM5?( 80GB)?)": dict(fp32=66.9, tf32=494.7, bf16=989.4, fp16=989.4),
    r"NVIDIA H100 PCIe": dict(fp32=51.2, tf32=378.0, bf16=756.0, fp16=756.0),  # the same datasheet, PCIe column
    r"NVIDIA H200": dict(fp32=66.9, tf32=494.7, bf16=989.4, fp16=989.4),  # H200 SXM: nvidia.com/en-us/data-center/h200
    # SXM and PCIe alike (A100 datasheet): torch's names of the 40 and 80 GB boards
    r"NVIDIA A100([- ](SXM4|PCIE)[- ](40|80)GB| 80GB PCIe)": dict(fp32=19.5, tf32=156.0, bf16=312.0, fp16=312.0),
    r"NVIDIA L4": dict(fp32=30.3, tf32=60.0, bf16=121.0, fp16=121.0),  # L4 datasheet
}


class Meter:
    """Everything a run measures and reports; see the module's docstring for how a script uses it."""

    @staticmethod
    def add_arguments(parser):
        """The flags that only the measuring needs, added to a script's parser."""
        parser.add_argument("--warmup-steps", type=int, default=5, help="first steps, left out of the timing")
        parser.add_argument("--metrics-out", default=None, help="write the run's metrics here as JSON")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument(
            "--target-accuracy", type=float, default=None, help="stop at the first evaluation this accurate (0 to 1)"
        )
        parser.add_argument("--tensorboard", default=None, help="also write the curves and the speed to this folder")
        parser.add_argument(
            "--memory-snapshot",
            default=None,
            help="CUDA: the allocator's history over 3 steps, for pytorch.org/memory_viz",
        )
        parser.add_argument(
            "--profile",
            default=None,
            help="torch.profiler over 4 steps after the timed window: a trace for ui.perfetto.dev (FILE.json.gz)",
        )

    def __init__(self, args, device, rank=0, world_size=1):
        self.started = time.perf_counter()  # the run's phases are timed too (setup_s, warmup_s, eval_s)
        self.start_s = process_age_s()  # before: the interpreter, the imports, the device's start
        self.args, self.device, self.rank, self.world_size = args, device, rank, world_size
        self.is_main = rank == 0
        checks.at_least(args, {"--warmup-steps": 0})
        if args.target_accuracy is not None and not 0 < args.target_accuracy <= 1:
            die(f"--target-accuracy {args.target_accuracy}: a share of the validation images, above 0 and at most 1")
        if args.target_accuracy is not None and getattr(args, "eval_samples", None) == 0:
            die("--target-accuracy is read at each evaluation: with --eval-samples 0 nothing is evaluated, so it could"
                " never be reached")  # fmt: skip
        if args.metrics_out and self.is_main:
            checks.writable(args.metrics_out)
        if args.memory_snapshot and self.is_main:
            checks.writable(args.memory_snapshot, "the memory snapshot")
        if args.memory_snapshot and device.type != "cuda":
            die(f"--memory-snapshot records the CUDA allocator's history: this run is on the {device.type}")
        if args.profile and self.is_main:
            checks.writable(args.profile, "the trace")
        outputs = [(flag, path) for flag, path in (("--metrics-out", args.metrics_out), ("--profile", args.profile),
                   ("--memory-snapshot", args.memory_snapshot)) if path]  # fmt: skip
        for i, (flag, path) in enumerate(outputs):
            for other, other_path in outputs[:i]:
                if os.path.realpath(path) == os.path.realpath(other_path):
                    die(f"{other} and {flag} name the same file, {path}: the one would overwrite the other")
        if args.profile and args.target_accuracy is not None:
            die("--profile records steps after the timed window, --target-accuracy ends training where it is reached:"
                " give one of them")  # fmt: skip
        self.profile = Profile(args.profile, device) if args.profile and self.is_main else None
        self.tail = PROFILE_WARMUP + PROFILE_ACTIVE if args.profile else 0  # steps after the window (every rank)
        self.curves = Curves(args.tensorboard if self.is_main else None)  # the loss and accuracy curves
        self.fields = {}  # a technique's own, from meter.record()
        self.optimizer_steps = None  # fp16: the optimizer steps taken, where count_skipped_steps counts them
        self.warmup = args.warmup_steps + (SNAPSHOT_STEPS if args.memory_snapshot else 0)

    def record(self, **fields):
        """A technique's own fields, in the record as given. compile_mode (not None) says that the first step
        compiles: it must be a warm-up step, and its time is compile_s."""
        self.fields.update(fields)
        if fields.get("compile_mode") and self.args.warmup_steps < 1:
            die("--warmup-steps 0: the first step compiles the model and must not be timed; give 1 or more")

    def count_skipped_steps(self, scaler, optimizer):
        """fp16: count the steps whose update the GradScaler skipped (it found inf or NaN in the gradients: its first
        steps, while it finds its scale, and after an overflow), amp_skipped_steps, by a hook on the optimizer's step,
        which the scaler does not call on such a step. No sync of our own: the scaler's step reads found_inf already.
        An optimizer that checks for inf in its own step (a fused one: the scaler always calls it) is not counted."""
        if not scaler.is_enabled() or getattr(optimizer, "_step_supports_amp_scaling", False):
            return
        self.optimizer_steps = 0

        def taken(*_):
            self.optimizer_steps += 1

        optimizer.register_step_post_hook(taken)

    def start(self, info, batch_size, total_steps):
        """Every check of the input is done: the setup's time ends, the warm-up begins."""
        self.info, self.batch_size, self.total_steps = info, batch_size, total_steps
        if self.warmup + self.tail >= total_steps:
            recorded = f" (+ {SNAPSHOT_STEPS} recorded by --memory-snapshot)" if self.args.memory_snapshot else ""
            recorded += f" (+ {self.tail} after the window for --profile)" if self.tail else ""
            die(f"--warmup-steps {self.args.warmup_steps}{recorded} leaves none of the {total_steps} steps to time")
        if "amp_dtype" in self.fields:  # bf16 that the device only emulates is slow: said once, after every check
            checks.warn_emulated_bf16(self.fields["amp_dtype"], self.device, self.is_main)
        self.window, self.losses, self.steps, self.diverged, self.train_loss_first = (
            Window(self.device),
            [],
            0,
            None,
            None,
        )
        self.first_step_s = self.first_started = self.timed = None  # the first step alone: a compiled model compiles
        self.warmup_ms, self.warm_mark = [], None  # each warm-up step's time, synchronized (outside the window)
        self.flop_counter = self.flops = self.stance = None  # (convolutions', the rest's) FLOPs in one step
        self.compiled_steps, self.peaks = 0, {}  # timed steps that ran compiled code; GPU memory peaks, by device
        self.graphs = dict(started=compile_counts() if self.compiling() else None)  # torch.compile's, at the start
        self.eval_s, self.epochs, self.reached, self.new_epoch = 0.0, 0, False, True
        self.progress = tqdm(total=total_steps, disable=not self.is_main or self.args.no_progress, desc="train")
        self.setup_s = time.perf_counter() - self.started  # the data's check, the loaders, the model
        self.at_step(0)
        self.waiting = time.perf_counter()

    def until_target(self, epochs):
        """The epochs, one by one; with --target-accuracy, none after the evaluation that reaches it."""
        self.epoch_count = len(epochs)
        for epoch in epochs:
            yield epoch
            if self.reached:
                return

    def at_step(self, step):
        """What happens after this many steps: the snapshot's recording starts and ends, the window opens."""
        snapshot = self.args.memory_snapshot and self.is_main
        if snapshot and step == self.args.warmup_steps:  # before the window: recording slows the steps
            torch.cuda.memory._record_memory_history(max_entries=100_000)
        if snapshot and step == self.warmup:  # open it at pytorch.org/memory_viz
            checks.write_whole(self.args.memory_snapshot, "the memory snapshot", pickle.dumps(take_snapshot()))
        if step == self.warmup - 1 and step > 0 and self.devices():  # the last warm-up step allocates anew what a
            torch.cuda.empty_cache()  # step needs: the blocks cuDNN's autotuning and the first steps left go back
        if step == self.warmup:  # the warm-up is over: the memory peaks and the clock start now
            for device in self.devices():
                torch.cuda.reset_peak_memory_stats(device)
            self.graphs["opened"] = compile_counts() if self.compiling() else None
            self.window.open()
        if self.tail and step == self.total_steps - self.tail:  # --profile: the window closes, the profiler starts
            self.timed = self.close_window()
            if self.profile is not None:
                self.profile.start()

    def batch(self):
        """The step's batch is on the device: the host's wait for it ends, and the device's starving (a mark on its
        stream, after the copy)."""
        self.waited = time.perf_counter() - self.waiting
        if self.steps == self.warmup - 1 and self.counts_flops():  # the last warm-up step's FLOPs are counted
            # a compiled model runs that step eagerly (the same operations): under the counter's dispatch mode
            # torch 2.11 skips the compiled frame for good (2.14.1 does not), and the rest of the run is eager
            self.stance = torch.compiler.set_stance("force_eager") if self.compiling() else None
            self.flop_counter = flop_counter()
            self.flop_counter.__enter__()
        if self.steps == 0 and self.warmup > 0:  # timed apart from its batch ready to its end, outside the window
            self.first_started = self.window.sync()
        self.ready = self.window.mark()

    def step(self, loss):
        """The step is done: its end marked, its loss kept (on the device)."""
        self.window.step(self.waited, self.ready, self.window.mark(), epoch_start=self.new_epoch)
        self.new_epoch = False
        if self.flop_counter is not None and self.flops is None:
            self.flop_counter.__exit__(None, None, None)
            self.flops = split_flops(self.flop_counter)
            if self.stance is not None:
                self.stance.__exit__(None, None, None)
        if self.compiling() and self.window.open_now():  # did this timed step run compiled code? (host only)
            self.compiled_steps += ran_compiled(loss)
        self.losses.append(loss.detach())
        if self.profile is not None:
            self.profile.step()
        self.steps += 1
        if self.steps <= self.warmup:  # a warm-up step: its time (a sync here is outside the window)
            now = self.window.sync()
            self.warmup_ms.append(1e3 * (now - (self.warm_mark if self.steps > 1 else self.first_started)))
            self.warm_mark = now
            if self.steps == 1:
                self.first_step_s = now - self.first_started
        self.at_step(self.steps)
        self.progress.update()
        if self.steps % 50 == 0 and not self.progress.disable:  # the one sync in the window, and only with a bar
            self.progress.set_postfix(loss=f"{self.losses[-1].item():.3f}", refresh=False)
        self.waiting = time.perf_counter()

    def pause(self):
        """Evaluation is not timed: the window pauses for it, or closes after the last step."""
        if self.profile is not None:  # its steps end here (an evaluation is not a training step)
            self.profile.stop()
        if self.steps == self.total_steps:
            self.timed = self.timed or self.close_window()
            self.progress.close()  # training is done: the bar says so, not evaluation's time as its own
        if self.window.open_now():  # the memory peaks are the window's: an evaluation's are left out
            self.keep_peaks()
        self.window.pause()
        self.evaluating = time.perf_counter()

    def close_window(self):
        """The timed window closes: (its seconds, each step's milliseconds, seconds starved); torch.compile's
        graphs counted as it closes."""
        self.graphs["closed"] = compile_counts() if self.compiling() else None
        self.keep_peaks()
        return self.window.close()

    def keep_peaks(self):
        """The GPU memory peaks since the window opened or resumed, kept (the highest of its stretches)."""
        for device in self.devices():
            now = peak_memory_mib(device)
            kept = self.peaks.get(device, now)
            self.peaks[device] = tuple(max(a, b) for a, b in zip(kept, now))

    def evaluated(self, val_acc, val_samples):
        """An epoch's end: the accuracy and the epoch's losses read (outside the window), the curves' points, the
        timing resumed; the window closes here if --target-accuracy is reached."""
        self.eval_s += time.perf_counter() - self.evaluating
        val_acc = val_acc if val_samples else None  # --eval-samples 0: no image evaluated, no accuracy
        self.val_acc, self.val_samples, self.epochs = val_acc, val_samples, self.epochs + 1
        seen = torch.stack(self.losses).float()  # the epoch's losses: the first that is not a finite number is kept
        if self.diverged is None and not seen.isfinite().all():
            self.diverged = self.steps - len(self.losses) + 1 + int((~seen.isfinite()).nonzero()[0])
        self.train_loss, self.losses = seen[-10:].mean().item(), []
        if self.train_loss_first is None:  # the first steps' loss: did it learn? (python -m bench --check)
            self.train_loss_first = seen[:10].mean().item()
        now = time.perf_counter()  # the curves' point: the training time to here, evaluations left out
        last = self.steps == self.total_steps
        train_s = now - self.started - self.setup_s - self.eval_s
        self.curves.add(seen.tolist(), self.epochs, self.steps, val_acc, train_s, now - self.started, last)
        self.window.resume()
        if self.window.open_now():  # training goes on: the peaks count again from here
            for device in self.devices():
                torch.cuda.reset_peak_memory_stats(device)
        self.waiting, self.new_epoch = time.perf_counter(), True
        if self.is_main:
            accuracy = f", val acc {val_acc:.3f}" if val_acc is not None else ""
            self.progress.write(f"epoch {self.epochs}/{self.epoch_count}: train loss {self.train_loss:.3f}{accuracy}")
        target = self.args.target_accuracy
        # reached: training ends here (python -m bench --to-accuracy); not before a step was timed, so a target
        # reached where the window opens (the warm-up an epoch long) is timed over the next epoch
        if target is not None and val_acc is not None and val_acc >= target and not last and self.window.steps:
            self.timed, self.reached = self.close_window(), True
            if self.is_main:
                self.progress.write(
                    f"val acc {val_acc:.3f} reached --target-accuracy {target}: stopped after {self.steps} steps"
                )

    def counts_flops(self):
        """The FLOPs are counted in the last warm-up step (none: not counted), by a mode that sees this thread's
        operations: DataParallel's replicas run in threads of their own. A compiled model's are counted eagerly
        (torch.compiler.set_stance) in a warm-up step after the one that compiles."""
        if self.compiling() and self.warmup < 2:
            return False
        return self.warmup > 0 and (self.fields.get("dp_devices") or 1) == 1

    def compiling(self):
        """Does the training run a torch.compile'd model? (train_compile.py, train_all.py with compile on)"""
        return self.fields.get("compile_mode") is not None

    def devices(self):
        """The GPUs whose memory this process measures: its own, or DataParallel's (dp_devices)."""
        if self.device.type != "cuda":
            return []
        return [torch.device("cuda", gpu) for gpu in range(self.fields.get("dp_devices") or 0)] or [self.device]

    def finish(self):
        """The record (--metrics-out, rank 0) and the printed summary: throughput = images in the window / its wall
        time; memory from every process."""
        self.progress.close()
        metrics = self.record_fields()
        if not self.is_main:
            return
        self.curves.close(metrics["samples_per_s"], self.steps)  # --tensorboard: the speed too
        args = self.args
        if args.metrics_out:
            metrics["written_unix_s"] = time.time()  # the runner times the process's exit from here (exit_s)
            checks.write_whole(args.metrics_out, "metrics", json.dumps(metrics, indent=1))
        self.say(metrics)

    def gather(self):
        """([(allocated, reserved) peak MiB of each GPU], [FLOPs per step]) of every process, on all of them."""
        memory = [self.peaks.get(d) or peak_memory_mib(d) for d in self.devices()] or [(None, None)]
        flops = [self.flops]
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            gathered = [None] * self.world_size
            torch.distributed.all_gather_object(gathered, (memory, self.flops))
            memory, flops = [m for rank in gathered for m in rank[0]], [rank[1] for rank in gathered]
        return memory, flops

    def identity(self):
        """What ran: the script, its row in the bench, the device, the model, the data and the batch."""
        args, info, device = self.args, self.info, self.device
        script = os.path.basename(sys.argv[0])
        variant = self.fields.pop("variant", None) or variant_of(script)
        if args.loader != "torchvision":
            variant = args.loader if variant == "baseline" else f"{variant}+{args.loader}"
        return dict(
            script=script,
            variant=variant,
            world_size=self.world_size,
            device=device.type,
            device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
            model=args.model,
            dataset=info.dataset,
            image_size=info.image_size,
            num_classes=info.num_classes,
            batch_size=self.batch_size,
            global_batch_size=self.batch_size * self.world_size,
            loader=info.loader,
            workers=args.workers,
            **checks.loading_fields(args, self.device, info.loader),
        )

    def timing(self):
        """The timed window: its steps, its time and where it went; its steady steps (those that did not begin an
        epoch: real training begins one in thousands) apart."""
        seconds, step_ms, starved_s = self.timed.seconds, self.timed.step_ms, self.timed.starved_s
        images_timed = len(step_ms) * self.batch_size * self.world_size
        times = torch.tensor(step_ms, dtype=torch.float64)
        median, p90 = times.quantile(times.new_tensor([0.5, 0.9])).tolist()
        steady_s = seconds - self.timed.start_s  # the window less its steps that began an epoch
        steady_images = (len(step_ms) - self.window.epoch_starts) * self.batch_size * self.world_size
        steady = steady_s > 0 and steady_images > 0
        return dict(
            steps_timed=len(step_ms),
            window_s=seconds,
            setup_s=self.setup_s,
            start_s=self.start_s,
            warmup_s=self.window.opened - self.started - self.setup_s,
            first_step_s=self.first_step_s,
            warmup_step_ms=self.warmup_ms,
            eval_s=self.eval_s,
            samples_per_s=images_timed / seconds,
            compute_samples_per_s=images_timed / max(seconds - starved_s, 1e-9),
            step_time_median_ms=median,
            step_time_p90_ms=p90,
            data_wait_frac=self.window.wait_s / seconds,
            starved_frac=min(starved_s / seconds, 1.0),
            epoch_starts_timed=self.window.epoch_starts,
            epoch_start_wait_s=self.timed.start_wait_s,
            data_wait_steady_frac=(self.window.wait_s - self.timed.start_wait_s) / steady_s if steady else None,
            starved_steady_frac=min((starved_s - self.timed.start_starved_s) / steady_s, 1.0) if steady else None,
            steady_samples_per_s=steady_images / steady_s if steady else None,
            steps_per_epoch=self.info.train_size // (self.batch_size * self.world_size),
            eval_pauses=self.window.pauses,
            epoch_time_s=self.info.train_size * seconds / images_timed,
        )

    def record_fields(self):
        """The run's record: every field of docs/runs.md's train fields (the technique's own among them)."""
        args, device = self.args, self.device
        memory, flops = self.gather()
        allocated = [m[0] for m in memory if m[0] is not None]
        reserved = [m[1] for m in memory if m[1] is not None]
        cuda, compiling = device.type == "cuda", self.fields.get("compile_mode") is not None
        matmul_precision, conv_precision = precisions(device)
        cpu_s, seconds = self.window.cpu_s, self.timed.seconds
        metrics = dict(
            **self.identity(),
            **self.timing(),
            train_loss_first=self.train_loss_first,
            train_loss_final=self.train_loss,
            diverged_step=self.diverged,
            host_syncs_per_step=0,  # the step reads nothing back from the device; fp16's GradScaler does (train_amp.py)
            amp_skipped_steps=None if self.optimizer_steps is None else self.steps - self.optimizer_steps,
            val_acc=self.val_acc,
            val_samples=self.val_samples,
            peak_mem_allocated_mib=max(allocated, default=None),
            peak_mem_reserved_mib=max(reserved, default=None),
            peak_mem_allocated_sum_mib=sum(allocated) if allocated else None,
            amp_dtype=None,
            memory_format="contiguous",
            optimizer=args.optimizer,
            matmul_precision=matmul_precision,
            conv_precision=conv_precision,
            cpu_model_cores=cpu_s[0] / seconds if cpu_s else None,
            cpu_loader_cores=cpu_s[1] / seconds if cpu_s else None,
        )
        metrics.update(self.fields)  # the technique's own (train_amp.py's amp_dtype, say)
        if "amp_dtype" in self.fields:
            metrics["bf16_native"] = checks.native_bf16(device)
        if "compile_mode" in self.fields:
            metrics["compile_s"] = self.first_step_s if compiling else None
            metrics.update(compile_fields(self.graphs, self.compiled_steps) if compiling else NOT_COMPILED)
        metrics.update(flop_rates(metrics, flops, metrics["steps_timed"] / seconds))
        metrics.update(self.profile.fields() if self.profile is not None else NO_PROFILE)
        metrics.update(
            seed=args.seed,
            argv=sys.argv,
            torch_version=torch.__version__,
            torchvision_version=torchvision.__version__,
            cuda_version=torch.version.cuda if cuda else None,
            cudnn_version=torch.backends.cudnn.version() if cuda else None,
            dali_version=self.info.dali_version,
            timed_spans=self.window.spans,
            loss_curve=self.curves.loss(),
            val_curve=self.curves.val,
        )
        return metrics

    def say(self, metrics):
        """The printed summary of the record."""
        args, info, cuda, script = self.args, self.info, self.device.type == "cuda", metrics["script"]
        first = f", first step {self.first_step_s:.2f} s" if self.first_step_s is not None else ""
        # on a CPU the host waits for its batch and the device starves alike: one figure; a GPU's two can differ
        starved = f", starved {metrics['starved_frac']:.1%}" if cuda else ""
        warmup = f"after {plural(self.warmup, 'warm-up step')}, " if self.warmup else ""
        print(
            f"{script}: {args.model} on {info.dataset} ({info.image_size} px), {self.device.type} x{self.world_size},"
            f" batch {metrics['global_batch_size']}\n  setup   {'; '.join(settings(metrics, info))}\n"
            f"  speed   {metrics['samples_per_s']:.1f} samples/s (compute {metrics['compute_samples_per_s']:.1f}),"
            f" step {metrics['step_time_median_ms']:.1f} ms median{first}\n"
            f"  timed   {plural(metrics['steps_timed'], 'step')} ({warmup}evaluation left out)\n"
            f"  data    wait {metrics['data_wait_frac']:.1%}{starved}, {epoch_words(metrics)}\n"
            f"  result  loss {self.train_loss:.3f}, {accuracy_words(self.val_acc, self.val_samples, info)}\n"
            f"  memory  {memory_words(metrics, cuda)}"
        )
        if metrics["cpu_model_cores"] is not None and not cuda:
            print(
                f"  cores   the model {metrics['cpu_model_cores']:.2f}, the loader {metrics['cpu_loader_cores']:.2f}"
                f" (CPU seconds per second in the window; {os.cpu_count()} here)"
            )
        if metrics["flop_per_step"]:
            print(f"  flops   {flop_words(metrics)}")
        if self.profile is not None:
            print(f"  profile {self.profile.words()}")
        if self.fields.get("compile_mode") is not None:
            warm = "warm" if self.fields.get("compile_cache_warm") else "cold"
            print(f"  compile {self.first_step_s:.1f} s, the first step ({warm} cache); {compile_words(metrics)}")
        if args.eval_samples is None and 0 < self.val_samples < info.val_size:
            print("  (a run of --steps evaluates a fixed sample: --eval-samples all for every image)")
        if self.diverged is not None:
            print(
                f"{script}: warning: the loss stopped being a finite number at step {self.diverged}: the run"
                " diverged (try a lower --lr), and its speed was measured on meaningless numbers",
                file=sys.stderr,
            )


NOT_COMPILED = dict(
    compiled_steps_timed=None, compile_graphs=None, compile_graph_breaks=None, compile_recompiles_timed=None
)  # fmt: skip  (train_all.py --no-compile)


def compile_counts():
    """torch.compile's counts so far in this process: (graphs compiled, graph breaks); a toy compile's too."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def compile_fields(graphs, compiled_steps):
    """What torch.compile did: the timed steps that ran compiled code, the graphs compiled and the graph breaks
    by the window's end, the graphs compiled inside the window (recompiles)."""
    started, opened = graphs["started"], graphs.get("opened") or graphs["started"]
    closed = graphs.get("closed") or compile_counts()
    return dict(
        compiled_steps_timed=compiled_steps,
        compile_graphs=closed[0] - started[0],
        compile_graph_breaks=closed[1] - started[1],
        compile_recompiles_timed=closed[0] - opened[0],
    )


def compile_words(metrics):
    """The summary's account of the compiled code: did it run in the window, in how many graphs."""
    steps, timed = metrics["compiled_steps_timed"], metrics["steps_timed"]
    said = f"compiled code ran in {steps} of {timed} timed steps" if steps else "compiled code did NOT run when timed"
    said += f"; {plural(metrics['compile_graphs'], 'graph')}, {plural(metrics['compile_graph_breaks'], 'graph break')}"
    recompiles = metrics["compile_recompiles_timed"]
    return said + (f", {plural(recompiles, 'recompile')} inside the window" if recompiles else "")


def ran_compiled(loss, limit=64):
    """Did the loss come through compiled code? AOTAutograd puts a CompiledFunctionBackward node into the autograd
    graph of what a compiled region returns; an eager forward leaves none. Looks at most limit nodes, from the loss
    back (a compiled model's output is a few nodes from it)."""
    todo, seen = [loss.grad_fn], 0
    while todo and seen < limit:
        node = todo.pop(0)
        if node is None:
            continue
        if type(node).__name__ == "CompiledFunctionBackward":
            return True
        seen += 1
        todo.extend(f for f, _ in node.next_functions)
    return False


def plural(count, word):
    return f"{count} {word}{'' if count == 1 else 's'}"


def epoch_words(metrics):
    """'no epoch start timed', or '2 epoch starts timed (waited 1.90 s for them; 0.4% between them)': the summary's
    word on the refills an epoch start costs, apart from the steady wait."""
    starts = metrics["epoch_starts_timed"]
    if not starts:
        return "no epoch start timed"
    steady = metrics["data_wait_steady_frac"]
    between = f"; {steady:.1%} between them" if steady is not None else ""
    return f"{plural(starts, 'epoch start')} timed (waited {metrics['epoch_start_wait_s']:.2f} s for them{between})"


def settings(metrics, info):
    """What the run's technique was set to, from its record: the summary's setup line."""
    said = [
        f"{info.loader} loader"
        + (f", {plural(metrics['workers'], 'worker')}" if metrics.get("workers") is not None else "")
    ]
    if info.dataset == "synthetic":
        said = ["no loader: one synthetic batch, already on the device"]
    fused = " (fused step)" if metrics.get("fused_step") else ""
    said.append({"sgd": "SGD", "adamw": "AdamW"}[metrics["optimizer"]] + fused)
    gpus = metrics.get("dp_devices")
    if gpus is not None:
        said.append(f"DataParallel over {gpus} GPUs" if gpus > 1 else "DataParallel with one device: a passthrough")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        way = f"FSDP over {plural(metrics['fsdp_units'], 'unit')}" if metrics.get("fsdp_units") else "DDP"
        said.append(f"{way}: {metrics['world_size']} processes over {torch.distributed.get_backend()}")
    if metrics.get("sync_bn"):
        said.append("SyncBatchNorm")
    dtype = metrics.get("amp_dtype")
    if dtype:
        native = "native" if metrics.get("bf16_native") else "emulated: slower than fp32"
        said.append(f"autocast {dtype}" + (f" ({native} here)" if dtype == "bf16" else " + GradScaler"))
    elif "amp_dtype" in metrics and "bf16_native" in metrics:
        said.append("no autocast (fp32)")
    if metrics.get("memory_format") == "channels_last":
        said.append("channels_last")
    if metrics.get("compile_mode"):
        said.append(f"torch.compile mode {metrics['compile_mode']}")
    matmul, conv, cpu = metrics["matmul_precision"], metrics["conv_precision"], metrics["device"] == "cpu"
    if not cpu or {matmul, conv} != {"fp32"}:  # a GPU's always: cuDNN runs fp32 convolutions in TF32 by default
        said.append(f"fp32 matmuls in {matmul}, convolutions in {conv}" + (" (oneDNN)" if cpu else ""))
    if metrics.get("checkpoint_segments"):
        said.append(f"activation checkpointing over {metrics['checkpoint_segments']} segments")
    return said


def precisions(device):
    """(matmuls, convolutions): the precision fp32 matrix multiplies and convolutions run at inside, as this run set
    it: fp32, tf32 (NVIDIA Tensor Cores; cuDNN's convolutions by default) or bf16 (oneDNN, on a CPU)."""
    backends = torch.backends  # each backend's own switch (torch >= 2.9; reading the old ones after it was set fails)
    if device.type == "cuda":
        switches = backends.cuda.matmul.fp32_precision, backends.cudnn.conv.fp32_precision
    else:
        switches = backends.mkldnn.matmul.fp32_precision, backends.mkldnn.conv.fp32_precision
    return tuple(p if p in ("bf16", "tf32") else "fp32" for p in switches)


def cpu_attention_flops():
    """FLOP formulas for the CPU's fused attention (scaled_dot_product_attention on a CPU), which torch's counter
    lacks: those of the GPU's attention kernels, whose arguments begin alike (the query, key and value; the backward's
    after the gradient). Without them a ViT's attention goes uncounted on a CPU."""
    from torch.utils import flop_counter

    aten, formulas = torch.ops.aten, {}
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        formulas[aten._scaled_dot_product_flash_attention_for_cpu] = lambda q, k, v, *args, out_shape=None, **kwargs: (
            flop_counter.sdpa_flop_count(q, k, v)
        )
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
        formulas[aten._scaled_dot_product_flash_attention_for_cpu_backward] = (
            lambda grad, q, k, v, *args, out_shape=None, **kwargs: flop_counter.sdpa_backward_flop_count(grad, q, k, v)
        )
    return formulas


MORE_FLOP_FORMULAS = cpu_attention_flops()


def flop_counter():
    """The mode that counts a step's FLOPs: torch's, with the formulas it lacks."""
    return FlopCounterMode(display=False, custom_mapping=MORE_FLOP_FORMULAS)


def split_flops(counter):
    """(convolutions', the rest's) FLOPs that a FlopCounterMode counted."""
    counts = counter.get_flop_counts().get("Global", {})
    conv = sum(n for op, n in counts.items() if "convolution" in str(op))
    return conv, counter.get_total_flops() - conv


def peak_tflops(device_name, precision):
    """The GPU's datasheet peak for this precision (TFLOP/s, dense), or None where its whole name is not in
    PEAK_TFLOPS (a MIG slice, an RTX A1000 beside the A100s: none)."""
    for pattern, peaks in PEAK_TFLOPS.items():
        if re.fullmatch(pattern, device_name or "", flags=re.IGNORECASE):
            return peaks.get(precision)
    return None


def flop_rates(metrics, flops, steps_per_s):
    """The FLOPs of one training step over every process, the achieved TFLOP/s, and where the GPU's peaks are known
    the MFU: the achieved rate against the rate at which each operation would run at the peak of its own precision
    (the autocast dtype; else TF32 or fp32 as the run set matmuls and convolutions)."""
    rates = dict(flop_per_step=None, achieved_tflop_per_s=None, peak_tflop_per_s=None, mfu_pct=None)
    if any(f is None for f in flops):
        return rates
    conv, rest = sum(f[0] for f in flops), sum(f[1] for f in flops)
    rates.update(flop_per_step=conv + rest, achieved_tflop_per_s=(conv + rest) * steps_per_s / 1e12)
    if metrics["device"] != "cuda" or not conv + rest:
        return rates
    amp = metrics.get("amp_dtype")
    peaks = [peak_tflops(metrics["device_name"], amp or metrics[f"{kind}_precision"]) for kind in ("conv", "matmul")]
    if None in peaks:
        return rates
    ideal_s = conv / peaks[0] + rest / peaks[1]  # seconds per 1e12 steps at one GPU's peaks
    peak = len(flops) * (conv + rest) / ideal_s  # every process its own GPU: the run's peak is theirs together
    return {**rates, "peak_tflop_per_s": peak, "mfu_pct": 100 * rates["achieved_tflop_per_s"] / peak}


def flop_words(metrics):
    """The FLOPs line: per step, the achieved rate, and the MFU where the GPU's peak is known."""
    said = f"{metrics['flop_per_step'] / 1e9:.1f} GFLOP per step, {metrics['achieved_tflop_per_s']:.3g} TFLOP/s"
    if metrics["mfu_pct"] is not None:
        gpus = "this GPU's" if metrics["world_size"] == 1 else f"its {metrics['world_size']} GPUs'"
        return f"{said}: MFU {metrics['mfu_pct']:.1f}% of {gpus} {metrics['peak_tflop_per_s']:.0f} TFLOP/s peak"
    return said + (" (MFU: no datasheet peak for this GPU)" if metrics["device"] == "cuda" else "")


def process_age_s():
    """Seconds since this process started (Linux's /proc: its start in clock ticks after boot), or None elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # the 22nd field, starttime
        with open("/proc/uptime") as f:
            return max(0.0, float(f.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def accuracy_words(val_acc, val_samples, info):
    """'val acc 0.412 on 1000 of 2000 validation images', or 'no evaluation (--eval-samples 0)'."""
    if not val_samples:
        return "no evaluation (--eval-samples 0)"
    return f"val acc {val_acc:.3f} on {val_samples} of {info.val_size} validation images"


def memory_words(metrics, cuda):
    """The memory line: torch's peak on a GPU; on a CPU the host's peak resident memory of this process."""
    if cuda:
        allocated = metrics.get("peak_mem_allocated_mib")
        return f"{allocated:.0f} MiB allocated (torch's peak)" if allocated is not None else "not measured"
    try:
        import resource  # Unix only

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10)
    except ImportError:
        return "host memory not measured here"
    return f"host peak {peak:.0f} MiB (this process's resident set; the bench measures the whole tree's PSS)"


def variant_of(script):
    """A script's row in the bench: train.py is the baseline, train_amp.py is amp."""
    stem = os.path.splitext(script)[0]
    return "baseline" if stem == "train" else stem[6:] if stem.startswith("train_") else stem


def cpu_name():
    """The CPU's model as /proc/cpuinfo names it (Linux), else what the platform module knows."""
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine()


LOADER_THREADS = ("DALI", "PrefetchWorker")  # DALI's threads are named so ("[DALI][TP0]Exec", its reader's prefetch)


def cpu_split():
    """(CPU seconds of this process less its loader's threads, of the loader: DALI's threads in this process and the
    child processes, the DataLoader's workers, live or ended) so far; None where /proc cannot say (not Linux)."""
    try:
        tick, threads, workers = os.sysconf("SC_CLK_TCK"), 0.0, 0.0
        tasks = [f"/proc/self/task/{t}" for t in os.listdir("/proc/self/task")]
        children = []
        for task in tasks:
            try:
                with open(f"{task}/comm") as comm, open(f"{task}/stat") as stat:
                    name, fields = comm.read(), stat.read().rsplit(")", 1)[1].split()
                if any(mark in name for mark in LOADER_THREADS):
                    threads += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
                with open(f"{task}/children") as pids:
                    children += pids.read().split()
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended meanwhile
        for pid in children:  # live workers: their time and their own ended children's
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                workers += sum(int(f) for f in fields[11:15]) / tick  # utime, stime, cutime, cstime
            except (OSError, IndexError, ValueError):
                continue
    except (OSError, ValueError, AttributeError):
        return None
    times = os.times()
    return times.user + times.system - threads, threads + workers + times.children_user + times.children_system


def peak_memory_mib(device):
    """(allocated, reserved) peak on a GPU since the last reset, in MiB."""
    return torch.cuda.max_memory_allocated(device) / 2**20, torch.cuda.max_memory_reserved(device) / 2**20


def take_snapshot():
    """The CUDA allocator's state and recorded history, for pytorch.org/memory_viz; the recording stops."""
    data = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    return data


class Curves:
    """The run's curves, read where the run reads its loss anyway (at each epoch's end, outside the window): the
    training loss as the mean of each CURVE_STEPS steps, and at each evaluation the validation accuracy with the
    training time to it (evaluations left out) and the wall time (from the flags parsed). With --tensorboard
    they are written there as they come, and the speed at the end: `tensorboard --logdir` draws them."""

    def __init__(self, folder):
        self.losses, self.val, self.logged, self.writer = [], [], 0, None
        if folder is None:
            return
        if os.path.exists(folder) and not os.path.isdir(folder):
            die(f"--tensorboard {folder}: not a folder")
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            die("--tensorboard needs the tensorboard package: pip install tensorboard")
        try:
            self.writer = SummaryWriter(folder)
        except OSError as e:
            die(f"--tensorboard {folder}: {e.strerror or e}")

    def loss(self, whole_only=False):
        """[[step, mean loss], ...]: a point per CURVE_STEPS steps at the last of them; a shorter last interval
        too, unless whole_only."""
        chunks = [
            (start, self.losses[start : start + CURVE_STEPS]) for start in range(0, len(self.losses), CURVE_STEPS)
        ]
        return [[start + len(c), sum(c) / len(c)] for start, c in chunks if len(c) == CURVE_STEPS or not whole_only]

    def add(self, losses, epoch, step, val_acc, train_s, wall_s, last):
        """An epoch's end: its steps' losses (floats) and the evaluation after it."""
        self.losses += losses
        self.val.append(dict(epoch=epoch, step=step, val_acc=val_acc, train_s=train_s, wall_s=wall_s))
        if self.writer is not None:
            points = self.loss(whole_only=not last)  # an interval that goes on into the next epoch waits for it
            for at, value in points[self.logged :]:
                self.writer.add_scalar("train/loss", value, at)
            self.logged = len(points)
            if val_acc is not None:  # --eval-samples 0 evaluates nothing
                self.writer.add_scalar("val/accuracy", val_acc, step)
            self.writer.flush()

    def close(self, samples_per_s, step):
        if self.writer is not None:
            self.writer.add_scalar("train/samples_per_s", samples_per_s, step)
            self.writer.close()


class Window:
    """The timed window: opened and closed by a synchronize, and nothing inside it waits for the device (see the
    module's docstring). Evaluation pauses the window; the time paused is left out."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.steps, self.wait_s, self.epoch_starts, self.paused_s, self.pauses = [], 0.0, 0, 0.0, 0
        self.opened = self.closed = self.paused = self.last = None
        self.spans = []  # [start, end] of each stretch of the window, by the wall clock: the bench's energy reads them
        self.cpu_s, self.cpu_from = [0.0, 0.0], None  # CPU seconds in the window: the model's, the loader's

    def count_cpu(self, going_on):
        """Add the CPU used since the window last opened or resumed; going_on: start counting again."""
        now = cpu_split()
        if now is None:
            self.cpu_s = None
        if self.cpu_from is not None and self.cpu_s is not None:
            self.cpu_s = [total + b - a for total, a, b in zip(self.cpu_s, self.cpu_from, now)]
        self.cpu_from = now if going_on else None

    def mark(self):
        """Now, on the compute stream."""
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def sync(self):
        """Wait for the device; return the host clock."""
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def open(self):
        self.opened, self.last = self.sync(), self.mark()
        self.spans.append([time.time(), None])
        self.count_cpu(going_on=True)

    def open_now(self):
        """Is the window open (a step booked now is timed)?"""
        return self.opened is not None and self.closed is None

    def step(self, waited, ready, done, epoch_start):
        """Book a step: the host's wait for its batch, its two marks, whether it began an epoch."""
        if self.open_now():
            self.steps.append((self.last, ready, done, waited, epoch_start))
            self.wait_s += waited
            self.epoch_starts += epoch_start
        self.last = done

    def pause(self):
        if self.opened is not None and self.closed is None:
            self.paused = self.sync()
            self.spans[-1][1] = time.time()
            self.count_cpu(going_on=False)

    def resume(self):
        if self.paused is not None and self.closed is None:
            self.paused_s, self.pauses = self.paused_s + self.sync() - self.paused, self.pauses + 1
            self.paused, self.last = None, self.mark()
            self.spans.append([time.time(), None])
            self.count_cpu(going_on=True)

    def close(self):
        """Close the window; return its Timed: its seconds less the pauses, each step's milliseconds, the seconds
        starved, and of the steps that began an epoch (a refill of the loader's pipeline) their seconds, their host
        wait and their seconds starved, apart."""
        self.closed = self.sync()
        if self.spans and self.spans[-1][1] is None:
            self.spans[-1][1] = time.time()
        self.count_cpu(going_on=False)
        ms = (lambda a, b: a.elapsed_time(b)) if self.cuda else (lambda a, b: (b - a) * 1e3)
        step_ms = [ms(last, done) for last, _, done, _, _ in self.steps]
        starved_ms = [ms(last, ready) for last, ready, _, _, _ in self.steps]
        starts = [start for *_, start in self.steps]
        return Timed(
            self.closed - self.opened - self.paused_s,
            step_ms,
            sum(starved_ms) / 1e3,
            sum(t for t, start in zip(step_ms, starts) if start) / 1e3,
            sum(waited for *_, waited, start in self.steps if start),
            sum(t for t, start in zip(starved_ms, starts) if start) / 1e3,
        )


class Timed(NamedTuple):
    """What a closed window measured; its steps that began an epoch apart (their refill is not steady training)."""

    seconds: float  # the window's wall time, its pauses left out
    step_ms: list  # each step's time
    starved_s: float  # the device waiting for its next batch (the host's wait on a CPU)
    start_s: float  # the steps that began an epoch: their time
    start_wait_s: float  # ... the host's wait for their batches
    start_starved_s: float  # ... the device's wait for them


class Profile:
    """--profile: torch.profiler over the steps after the timed window (PROFILE_WARMUP of its own warm-up, then
    PROFILE_ACTIVE recorded), CPU and CUDA activities; the trace written where --profile says (compressed when the
    name ends in .gz: ui.perfetto.dev and chrome://tracing open it), on a GPU each step an NVTX range for Nsight
    Systems too; the operators that took most of a step, self time per step, kept in the metrics (profile_ops). An
    evaluation among those steps ends the recording there: it is not a training step."""

    def __init__(self, path, device):
        self.path, self.cuda = path, device.type == "cuda"
        self.profiler, self.steps, self.recorded, self.ops, self.note, self.kept = None, 0, 0, [], None, False
        self.collective_ms = self.exposed_ms = None  # a collective's time per step, and its time with no compute

    def start(self):
        activities = [torch.profiler.ProfilerActivity.CPU]
        activities += [torch.profiler.ProfilerActivity.CUDA] if self.cuda else []
        self.profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=0, warmup=PROFILE_WARMUP, active=PROFILE_ACTIVE, repeat=1),
            on_trace_ready=self.ready,
        )
        self.profiler.start()
        self.nvtx_push()

    def nvtx_push(self):
        if self.cuda:
            torch.cuda.nvtx.range_push(f"step {self.steps + 1} after the window (--profile)")

    def step(self):
        """A training step ended: the profiler's schedule moves on (and the trace is written after the last)."""
        if self.profiler is None:
            return
        if self.cuda:
            torch.cuda.nvtx.range_pop()
        self.steps += 1
        self.profiler.step()
        if self.steps == PROFILE_WARMUP + PROFILE_ACTIVE:
            self.finish()
        else:
            self.nvtx_push()

    def stop(self):
        """Training stops for an evaluation (or has ended): what is recorded so far is the trace."""
        if self.profiler is not None:
            if self.cuda:
                torch.cuda.nvtx.range_pop()
            if self.steps <= PROFILE_WARMUP:
                self.note = "an evaluation came before any step was recorded: the last epoch is too short"
            self.finish()

    def finish(self):
        profiler, self.profiler = self.profiler, None
        profiler.stop()

    def ready(self, profiler):
        """The recorded steps are done: the top operators read, the trace written (unless over the cap)."""
        self.recorded = self.steps - PROFILE_WARMUP
        if self.recorded < 1:  # stopped by an evaluation in the profiler's warm-up step: stop() said so
            return
        self.ops = top_operators(profiler.key_averages(), self.recorded)
        self.collective_ms, self.exposed_ms = collective_time(profiler.events(), self.recorded)
        if self.recorded < PROFILE_ACTIVE:
            self.note = f"an evaluation came after {plural(self.recorded, 'recorded step')}: the trace ends there"
        tmp = os.path.join(os.path.dirname(self.path) or ".", ".tmp-" + os.path.basename(self.path))
        try:
            profiler.export_chrome_trace(tmp)
            size = os.path.getsize(tmp)
            if size > PROFILE_CAP_MIB * 2**20:
                os.remove(tmp)
                self.note = (
                    f"the trace was {size / 2**20:,.0f} MiB, over the cap of {PROFILE_CAP_MIB} MiB: not kept (its top"
                    " operators are in the metrics)"
                )
                print(f"warning: --profile: {self.note}", file=sys.stderr)
                return
            os.replace(tmp, self.path)
            self.kept = True
        except OSError as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            self.note = f"the trace could not be written to {self.path}: {e.strerror or e}"
            print(f"warning: --profile: {self.note}", file=sys.stderr)

    def fields(self):
        """The record's profile fields (NO_PROFILE without --profile)."""
        trace = self.path if self.kept else None
        return dict(profile_trace=trace, profile_steps=self.recorded, profile_note=self.note, profile_ops=self.ops,
                    profile_collective_ms=self.collective_ms, profile_exposed_ms=self.exposed_ms)  # fmt: skip

    def words(self):
        kept = f"trace {self.path}" if self.kept else "no trace kept"
        top = ", ".join(f"{op['name']} {op['ms_per_step']:.1f} ms" for op in self.ops[:3])
        note = f" ({self.note})" if self.note else ""
        said = f"{plural(self.recorded, 'step')} after the window, {kept}{note}; most self time: {top}"
        if self.collective_ms is not None:
            said += f"; collectives {self.collective_ms:.1f} ms a step, {self.exposed_ms:.1f} ms with no compute beside"
        return said


def collective_time(events, steps):
    """(ms per step during which a collective ran, ms of it with no compute beside it), or (None, None) where the
    recorded steps hold no collective. On a GPU NCCL's kernels against every other kernel; on a CPU gloo's work (on
    threads of its own) against every operator of the step (user annotations and the profiler's step ranges, which
    span the whole step, left out). Each side is the union of its spans: nested or parallel ones count once."""
    kernels = [e for e in events if str(e.device_type).endswith(("CUDA", "PrivateUse1"))]
    collectives, compute = [], []
    for event in kernels or events:
        span = (event.time_range.start, event.time_range.end)
        if any(name in event.name.lower() for name in COLLECTIVE):
            collectives.append(span)
        elif not getattr(event, "is_user_annotation", False) and not event.name.startswith("ProfilerStep"):
            compute.append(span)
    if not collectives:
        return None, None
    ran = union(collectives)
    busy = sum(end - start for start, end in ran)
    exposed = busy - overlap(ran, union(compute))
    return busy / 1e3 / max(steps, 1), exposed / 1e3 / max(steps, 1)


def union(spans):
    """The [start, end] spans as sorted spans that do not overlap."""
    merged = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def overlap(a, b):
    """The time two unions of spans (union's) share."""
    i = j = 0
    shared = 0
    while i < len(a) and j < len(b):
        shared += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return shared


def top_operators(averages, steps):
    """[{name, on, ms_per_step, calls_per_step}] of every operator's self time on the CPU (on: cpu) and every GPU
    kernel's (on: gpu) per recorded step, the most first. The profiler's ProfilerStep ranges are one entry: their self
    time is the time between operators (Python, the loop)."""
    cpu, gpu = {}, {}
    for event in averages:
        name = "(between operators)" if event.key.startswith("ProfilerStep") else event.key
        kernel = str(getattr(event, "device_type", "")).endswith(("CUDA", "PrivateUse1"))  # a kernel on the GPU
        us = getattr(event, "self_device_time_total", None)
        if us is None:  # torch before 2.4 names it cuda
            us = getattr(event, "self_cuda_time_total", 0)
        table, us = (gpu, us) if kernel else (cpu, event.self_cpu_time_total)
        if us > 0:
            total, calls = table.get(name, (0.0, 0))
            table[name] = (total + us, calls + event.count)
    steps = max(steps, 1)
    ops = []
    for on, table in ("cpu", cpu), ("gpu", gpu):
        for name, (us, calls) in sorted(table.items(), key=lambda item: -item[1][0]):
            ops.append(dict(name=name, on=on, ms_per_step=us / 1e3 / steps, calls_per_step=calls / steps))
    return ops
