"""The metric schema: every field a run, the runner or the summary writes, defined once.

One line per field: its name (the unit last: `_mib`, `_s`, `_ms`, `_per_s`, `_frac`, `_pct`), its
unit, who writes it, how the summary treats it, flags, and its meaning (a line that starts with
spaces goes on with the meaning above it). runs.csv's columns, the checks of a run's metrics, the
summary's medians, the baseline comparison, the tests of every script's metrics and docs/runs.md's
field table all come from this table: a new field is one line here (and the code that measures it).

    python -m bench.schema          # the field table of docs/runs.md, as markdown

Who writes it: `train` (every train*.py), `loader` (loader*.py --bench), `script` (both), `runner`
(the bench, per run), `machine` (the bench, per machine), `summary` (summary.csv, per variant), `derived`
(each summary row's derived fields, worked out once for the words and the renderers: in the summary they read, not
in summary.csv).
Summary: `median` over the ok runs, `first` (the same in every run), `-` not summarized.
Flags: `required` (a positive finite number in every ok run; `required=train`: in every ok training
run), `least=N` (where there, a number N or more: runs.csv is refused naming the row where it is not),
`workload` (part of "the same work" when a bench is compared with a saved baseline), `ratio`
(the summary adds <stem>_vs_baseline), `only=SCRIPT[+SCRIPT]` (written by those scripts alone), `json` (in the
run's metrics file alone, logs/<bench>/<run>.json: not a column of runs.csv), `kept` (a run's field the summary's
row keeps too, in memory: the last failed run's error).

SummaryRow: a summary row as a record, its fields (ROW_FIELDS) named here once: the statistics, the causes, the
verdicts and the headline read a row by attribute (row.speed_answer), so that a misspelt field fails where it is read,
never as a silent NaN.

VERSION counts changes of name or meaning. A file of an older version is read by renaming its
columns (RENAMED); runs.csv is upgraded in place, its old form kept beside it.
"""

import dataclasses
import re
from typing import NamedTuple

VERSION = 3

TABLE = """
schema_version          -     runner  -       -          version of this schema the row was written with
bench_id                -     runner  -       -          the bench: its UTC start time and a random suffix
time_utc                -     runner  -       -          when the run started (UTC)
run                     -     runner  -       -          the run's name in its bench: variant-repeat
variant                 -     script  -       workload   the technique: baseline, amp, ... (a name of the bench plan)
kind                    -     runner  -       workload   train (a training script) or loader (an input pipeline alone)
workload                -     runner  -       workload   small, imagenet (generated: bench/data.py), custom (--data DIR)
repeat                  -     runner  -       least=1    1, 2, ...: the repeats are interleaved
status                  -     runner  -       -          ok or failed
returncode              -     runner  -       -          the run's exit code
error                   -     runner  -       kept       why it failed: the script's error line, or `timed out ...`
wall_s                  s     runner  median  least=0    the whole process: start-up, warm-up and evaluation included
runner_cpu_s            s     runner  median  -          CPU the runner spent on the run (launching, sampling)
other_s                 s     runner  median  -          wall_s less setup, warm-up, window and evaluation: starting the
                                                           interpreter, imports, launching (torchrun), writing, exiting
start_s                 s     train   median  -          the process's start to the meter's: the interpreter, the
                                                           imports, the device's start (Linux: /proc)
exit_s                  s     runner  median  -          the record written to the process's end: the loading
                                                           processes and the device let go, the interpreter's exit
written_unix_s          -     train   -       json       when the record was written (Unix time): exit_s's start
warmup_step_ms          ms    train   -       json       each warm-up step's time, the first (first_step_s) included
warmup_steady_steps     -     runner  median  -          warm-up steps after which every later one (the last, which
                                                           counts the FLOPs, left out) took STEADY x the window's
                                                           median step or less: the warm-up a run of it needs
command                 -     runner  -       -          the command line, to run it again
script                  -     script  -       -          the script that ran
world_size              -     train   first   -          training processes
device                  -     script  first   workload   cuda or cpu
device_name             -     train   first   -          the GPU's name, or the CPU's
model                   -     train   first   workload   the model trained
dataset                 -     script  first   workload   generated, imagefolder, cifar10 or synthetic
image_size              px    script  first   workload   side of the square images the model sees
num_classes             -     script  first   -          classes in the data
batch_size              -     script  -       -          images per step in each process
global_batch_size       -     train   first   workload   images per step over all processes
loader                  -     script  first   -          torchvision (loader.py), dali (loader_dali.py) or synthetic
workers                 -     script  -       -          loader processes (DALI: threads) per training process
prefetch_factor         -     script  -       -          batches each loader process keeps ready (DALI: its queue's
                                                           depth); empty with --workers 0
pin_memory              -     script  -       -          the DataLoader pins its batches (page-locked, for a faster
                                                           copy to a GPU); empty with DALI
persistent_workers      -     script  -       -          the DataLoader keeps its processes from epoch to epoch;
                                                           empty with DALI
threads                 -     runner  first   -          torch's threads per process (OMP_NUM_THREADS, set by the bench
                                                           for every row: processes x threads = the cores it uses)
window_s                s     script  median  -          wall time of the timed window, less its pauses for evaluation
setup_s                 s     train   median  -          from the flags parsed to the first step: the data's check,
                                                           the loaders, the model (the interpreter and imports before)
warmup_s                s     train   median  -          the warm-up steps, compilation and cuDNN's autotuning included
first_step_s            s     train   median  -          the first step alone (a warm-up step): a compiled model
                                                           compiles in it, cuDNN autotunes (none with no warm-up)
eval_s                  s     train   median  -          evaluating the validation sample (outside the window)
samples_per_s           1/s   script  -       required   images trained (loaders: delivered) per second: images in the
                                                           window / its wall time
median_step_samples_per_s  1/s  runner  median  -       global_batch_size / the median step: the rate without the
                                                           stalls of a few slow steps (samples_per_s keeps them: it is
                                                           what training pays, and what the verdicts read)
compute_samples_per_s   1/s   train   median  required   the same with the starved time left out: the rate if the
                                                           device never waited for data
steps_timed             -     script  first   required=train,workload  steps (batches) inside the timed window
step_time_median_ms     ms    train   median  -          one step, from the end of the step before to its own end
step_time_p90_ms        ms    train   median  -          the 90th percentile of the step time
data_wait_frac          share script  median  -          share of the window the host was blocked in the loader's next()
starved_frac            share train   median  -          share of the window the device waited for its next batch, the
                                                           copy included (on a CPU, the host's wait)
epoch_starts_timed      -     script  median  -          epochs whose first batch fell inside the window
epoch_start_wait_s      s     script  median  -          the host's wait for those first batches: the loader's refill
                                                           at an epoch's start, apart from the steady wait
data_wait_steady_frac   share script  median  -          data_wait_frac of the steady steps: the window less the steps
                                                           that began an epoch (what the verdicts on data read)
starved_steady_frac     share train   median  -          starved_frac of the steady steps, alike (a GPU's verdicts on
                                                           data read it)
steady_samples_per_s    1/s   script  median  -          samples_per_s of the steady steps: the images of the steps
                                                           that did not begin an epoch / their time (read where the
                                                           window held more epoch starts than the real data set would:
                                                           bench/stages/epochs.py)
steps_per_epoch         -     script  first   -          steps an epoch of the training set takes at this batch
eval_pauses             -     train   -       -          evaluations that paused the window (epochs ended inside it)
epoch_time_s            s     train   -       -          training images / samples_per_s: an epoch at the measured rate
train_loss_first        -     train   median  -          mean training loss of the first 10 steps (warm-up included)
train_loss_final        -     train   median  -          mean training loss of the last 10 steps
diverged_step           -     train   -       -          the first step (from 1) whose loss was NaN or inf: the run
                                                           diverged; empty if it did not
host_syncs_per_step     -     train   first   -          times a training step waits for the device to read a value
                                                           back: 0, or 1 with fp16's GradScaler (step() reads found_inf)
amp_skipped_steps       -     train   median  -          steps whose update fp16's GradScaler skipped (inf or NaN in
                                                           the gradients), warm-up included; empty without a scaler
val_acc                 share train   median  -          validation accuracy after the last step
val_samples             -     train   first   -          validation images counted, each once over all processes
peak_mem_allocated_mib  MiB   train   median  ratio      torch.cuda.max_memory_allocated in the timed window (its
                                                           evaluations left out), max over processes (null on a CPU)
peak_mem_reserved_mib   MiB   train   median  ratio      torch.cuda.max_memory_reserved in the timed window (its
                                                           evaluations left out), max over processes (null on a CPU)
peak_mem_allocated_sum_mib  MiB  train  median  -        the allocated peaks summed over processes
amp_dtype               -     train   first   -          the autocast dtype (bf16, fp16); null in full precision
bf16_native             -     train   first   only=train_amp.py+train_all.py  the device computes bf16 natively (a GPU
                                                           from Ampere on; a CPU with AVX-512-BF16 or AMX): else bf16 is
                                                           emulated, often slower than full precision
memory_format           -     train   first   -          contiguous (NCHW), or channels_last (NHWC:
                                                           train_channels_last.py, train_all.py)
optimizer               -     train   first   -          sgd or adamw (--optimizer)
fused_step              -     train   first   only=train_fused.py  the optimizer's step is one fused kernel (fused=True)
matmul_precision        -     train   first   -          what fp32 matrix multiplies ran at inside: fp32, tf32
                                                           (NVIDIA Tensor Cores) or bf16 (oneDNN, a CPU): train_tf32.py
conv_precision          -     train   first   -          ... and fp32 convolutions: cuDNN runs them in tf32 by default
flop_per_step           FLOP  train   first   -          floating-point operations of one training step over every
                                                           process, counted in the last warm-up step (FlopCounterMode;
                                                           checkpointing's recompute included; a CPU's fused attention
                                                           by the GPU kernels' formulas; a compiled model's in eager
                                                           code, after the step that compiles); null without a warm-up,
                                                           or a compiled model's with one warm-up step only
achieved_tflop_per_s    TFLOP/s  train  median  -        flop_per_step x timed steps / the window's time
peak_tflop_per_s        TFLOP/s  train  first   -        the datasheet peak (dense) of every GPU the run used, for its
                                                           precisions, each operation at its own (meter.PEAK_TFLOPS);
                                                           null for a GPU not in that table (a MIG slice too)
mfu_pct                 %     train   median  -          achieved_tflop_per_s / peak_tflop_per_s (model FLOPs
                                                           utilization); null where the peak is not known: never guessed
fsdp_units              -     train   first   only=train_fsdp.py  modules fully_shard'ed: the blocks and the root (0:
                                                           one process without torchrun, unsharded)
cpu_model_cores         cores train   median  -          CPU seconds per second of the window of the training process
                                                           (rank 0), its loader's threads left out (Linux /proc)
cpu_loader_cores        cores train   median  -          ... and of its loader: its worker processes (DataLoader) and
                                                           threads (DALI's); on a CPU, cores taken from the model
dp_devices              -     train   first   only=train_dp.py   GPUs DataParallel splits each batch over
sync_bn                 -     train   -       only=train_ddp.py+train_all.py  SyncBatchNorm on
compile_mode            -     train   first   only=train_compile.py+train_all.py  torch.compile's mode
compile_s               s     train   median  only=train_compile.py+train_all.py  the first step, which compiles the
                                                           model, Inductor's start included: what a fresh start pays
                                                           before the first timed step (the call to torch.compile, a
                                                           wrapper, is in setup_s)
compile_cache_warm      -     train   -       only=train_compile.py+train_all.py  the compile cache held kernels at the
                                                           start (repeats after the first, in a bench): compile_s is the
                                                           warm cost
compiled_steps_timed    -     train   median  only=train_compile.py+train_all.py  timed steps whose loss came through
                                                           compiled code (a CompiledFunctionBackward in its autograd
                                                           graph): 0 says the window timed eager code
compile_graphs          -     train   median  only=train_compile.py+train_all.py  graphs torch.compile made by the
                                                           window's end (torch._dynamo's counters): more than one, the
                                                           model was split by graph breaks or recompiled
compile_graph_breaks    -     train   median  only=train_compile.py+train_all.py  graph breaks by the window's end
compile_recompiles_timed -    train   median  only=train_compile.py+train_all.py  graphs compiled inside the window
checkpoint_segments     -     train   first   only=train_checkpoint.py  stages run under activation checkpointing
seed                    -     script  -       -          the seed
argv                    -     script  -       json       the script's command line (runs.csv keeps `command` instead)
torch_version           -     script  -       -          torch
torchvision_version     -     train   -       -          torchvision
cuda_version            -     train   -       -          the CUDA torch was built with (GPU runs)
cudnn_version           -     train   -       -          cuDNN (GPU runs)
dali_version            -     script  -       -          NVIDIA DALI, when loader_dali.py read the data
profile_trace           -     train   -       -          --profile: the trace of the steps after the window (Perfetto,
                                                           chrome://tracing), or empty where it was not kept
profile_steps           -     train   -       -          --profile: the steps the trace recorded (after its warm-up)
profile_note            -     train   -       -          --profile: why the trace is short or was not kept
profile_ops             -     train   -       json       --profile: the operators (on: cpu) and GPU kernels (on: gpu)
                                                           with the most self time: name, ms_per_step, calls_per_step
profile_collective_ms   ms    train   -       json       --profile: the time per step during which a collective ran (on
                                                           a CPU gloo's all-reduce, broadcast...; on a GPU NCCL's
                                                           kernels), empty where none did
profile_exposed_ms      ms    train   -       json       --profile: ... of it, the time with no compute beside it (no
                                                           other operator, or on a GPU no other kernel, running)
timed_spans             -     train   -       json       [start, end] of each stretch of the timed window (Unix time,
                                                           evaluation pauses between): the bench's energy is read there
loss_curve              -     train   -       json       the training loss: [step, mean of the CURVE_STEPS (10) steps up
                                                           to it] for each 10 steps, and the last few (process 0's)
val_curve               -     train   -       json       one point per evaluation (each epoch's end): epoch, step,
                                                           val_acc, train_s (the training time to it, setup and
                                                           evaluations left out), wall_s (from the flags parsed)
nvml_peak_mib           MiB   runner  median  ratio      GPU memory of the run's process tree on its GPUs (NVML), its
                                                           highest in the timed window: the CUDA context, NCCL and
                                                           DALI included
nvml_method             -     runner  -       -          process tree, or device rise (NVML sees no processes); in the
                                                           window
peak_host_mem_mib       MiB   runner  median  ratio      host memory of the run's process tree (PSS, sampled)
memory_samples          -     runner  -       -          memory samples taken
sampler_cpu_s           s     runner  -       -          CPU the memory sampler spent
other_cpu_frac          share runner  median  -          share of all cores used by processes outside the run and the
                                                           runner
steal_frac              share runner  median  -          share of all cores taken by the hypervisor (steal time)
gpu_other_mib           MiB   runner  -       -          peak GPU memory of other processes on the run's GPUs
gpu_sharing             -     runner  -       -          alone, shared (other processes on the run's GPUs: busy), or
                                                           unknown (NVML's process IDs are not this container's, or
                                                           NVML refused the per-process query: its words follow)
gpu_util_pct            %     runner  -       -          median GPU utilisation in the timed window (NVML)
gpu_sm_clock_mhz        MHz   runner  median  -          median SM clock in the timed window (NVML)
gpu_throttle            -     runner  -       -          clock throttle reasons NVML reported while the run ran
energy_j                J     runner  median  -          energy over the timed window (its evaluation pauses left out),
                                                           from energy_source's counter; empty where none is readable
energy_per_1k_samples_j  J    runner  median  ratio      energy_j per 1,000 samples trained in the window
avg_power_w             W     runner  median  -          energy_j / the window's time
power_limit_w           W     runner  first   -          the GPUs' enforced power limit (NVML), or the packages' long
                                                           term limit (RAPL), where given
energy_source           -     runner  first   -          the counter read: NVML total energy of the run's GPUs, or RAPL
                                                           (the whole CPU package); `unavailable: why` where none
busy                    -     runner  -       -          something competed with the run: see busy_reason
busy_reason             -     runner  -       -          what competed: other processes' CPU, steal time, other GPU work
changed_since_start     -     runner  -       -          what changed since the bench started, for a run resumed
                                                           with --allow-changed: data, code (else empty)
machine_class           -     machine -       -          the hardware class: names the saved baseline to compare with
cpu_model               -     machine -       -          the CPU
cpu_cores               -     machine -       -          cores the bench may use
cpu_isa                 -     machine -       -          the CPU features that decide the results: avx2, avx512,
                                                           avx512_bf16, amx (x86); neon, sve, bf16 (Arm)
cpu_bf16_native         -     machine -       -          the CPU computes bf16 (AVX-512-BF16, AMX or Arm bf16): without,
                                                           bf16 autocast on the CPU is emulated, often slower than fp32
ram_gb                  GB    machine -       -          host memory
gpu_count               -     machine -       -          GPUs torch sees
gpu_name                -     machine -       -          the first GPU's name
gpu_capability          -     machine -       -          its CUDA compute capability (8.0 Ampere, 9.0 Hopper, ...)
gpu_bf16_native         -     machine -       -          it computes bf16 natively (compute capability 8.0 or more)
gpu_tf32                -     machine -       -          it has TF32 Tensor Cores (8.0 or more): fp32 convolutions run
                                                           in TF32 by default
driver_version          -     machine -       -          NVIDIA driver
python_version          -     machine -       -          Python
platform                -     machine -       -          operating system
git_commit              -     machine -       -          the commit measured
git_dirty               -     machine -       -          uncommitted changes in the tree
runs_ok                 -     summary -       -          runs that finished
runs_failed             -     summary -       -          runs that failed (the last error is in `error`)
runs_busy               -     summary -       -          ok runs during which the machine was busy
runs_diverged           -     summary -       -          ok runs whose loss diverged: their speed is of meaningless math
rate_median             1/s   summary -       -          median rate of the ok runs, each read as steady training has it
                                                           (rate_basis): samples_per_s, unless its window held more
                                                           epoch starts than the real data set would
rate_basis              -     summary -       -          how the runs' rates were read (stages/statistics/summarize.py's
                                                           rate_of): window (samples_per_s), steady steps
                                                           (steady_samples_per_s), median step (global batch / its
                                                           median step, in a record from before steady_samples_per_s
                                                           whose steps were steady), mixed, or unknown (none of
                                                           its runs' rates is known)
runs_unsteady           -     summary -       -          ok runs whose steady rate is not known (rate_basis): left
                                                           out of its rate and its speed-up
epoch_starts_over       x     summary -       -          how many times as often as training on the real data set
                                                           it stands for (stands_for) its windows held epoch starts
                                                           (median over its runs), where more often than that allows;
                                                           empty where not (bench/stages/epochs.py)
stands_for              -     summary -       -          the real data set its workload stands for: ImageNet-1k,
                                                           CIFAR-10, or its own data (a folder of the user's)
rate_floor              1/s   summary -       -          where a run's rate is unknown (rate_basis): its window's rate,
                                                           refill included: its steady rate is at least this
speedup_floor           x     summary -       -          rate_floor / the reference's rate_median: its speed-up is at
                                                           least this
rate_min                1/s   summary -       -          the slowest ok run
rate_max                1/s   summary -       -          the fastest ok run
spread_pct              %     summary -       -          (max - min) / median of the repeats
speedup                 x     summary -       -          the geometric mean over the rounds of rate / the reference's
                                                           rate in the same round (baseline; loaders: loader)
speedup_low             x     summary -       -          the 95% confidence interval of speedup starts here (Student's t
                                                           on the log ratios, their spread pooled with the machine's
                                                           noise measured on the baseline beside the rows where a round
                                                           ran it three times or more: stages/statistics/summarize.py)
speedup_high            x     summary -       -          ... and ends here
speedup_precision_pct   %     summary -       -          the interval's half-width, as a share of speedup
rounds_paired           -     summary -       -          rounds in which both this row and its reference ran ok
rounds_busy             -     summary -       -          rounds in which this row's run or a reference run beside it
                                                           was taken on a busy machine (other processes' CPU, steal)
quiet_answer            -     summary -       -          where rounds_busy: the speed answer read again without the
                                                           busy runs; where it differs, speed_answer is unsettled
busy_answer             -     summary -       -          where rounds_busy: the speed answer read with the busy runs
speedup_df              -     summary -       -          the degrees of freedom of the speed-up's interval: the rounds
                                                           less one, and half a degree for each baseline run read
                                                           against the baseline runs either side of it (the machine's
                                                           noise), where pooled
margin                  -     summary -       -          the margin the speed answer is read against (--margin: 0.1 is
                                                           +-10%, 1/1.1x to 1.1x)
speed_answer            -     summary -       -          same (within the margin: the 90% interval wholly inside
                                                           1/(1+margin) to 1+margin), else faster or slower (the 98%
                                                           interval wholly above or below 1), else unsettled (open)
loss_ratio              x     summary -       -          the geometric mean over the rounds of train_loss_final / the
                                                           baseline's in the same round (at the same seed)
loss_ratio_low          x     summary -       -          its 95% confidence interval starts here (over the rounds, each
                                                           at a seed of its own: what reruns show)
loss_ratio_high         x     summary -       -          ... and ends here
learning_answer         -     summary -       -          worse (the interval wholly above 1 + LEARN_BAND: it ends at a
                                                           higher loss than reruns explain), better (wholly below), or
                                                           empty: no difference beyond what reruns show, or no interval
ceiling                 -     summary -       -          the synthetic row of this row's precision
ceiling_pct             %     summary -       -          the geometric mean over the rounds of rate / its ceiling's rate
                                                           in the same round, as a share (above 100 is possible)
ceiling_low_pct         %     summary -       -          its 95% confidence interval starts here
ceiling_high_pct        %     summary -       -          ... and ends here; an interval wholly above 100 is a row faster
                                                           than its speed limit: flagged in the answer
compile_cold_s          s     summary -       -          median compile_s of the runs that started with an empty compile
                                                           cache (a first start); compile_s is then the median of all
compile_warm_s          s     summary -       -          median compile_s of the runs that started with the compile
                                                           cache their first run filled (its repeats)
payback_answer          -     summary -       -          a compiled row's compile against its faster steps: pays back
                                                           (speed-up interval above 1), never (below 1), not settled
payback_cold_steps      -     summary -       -          steps after which a cold compile's cost (its first step less
                                                           the baseline's) is repaid by the steps saved at its speed-up
payback_warm_steps      -     summary -       -          ... and a warm compile's (empty where no repeat ran warm)
parity_verdict          -     summary -       -          --parity in the same results folder (parity.csv): learns the
                                                           same, learns worse, learns better, not the same run (as
                                                           its twin at the same seed), diverged or failed
parity_from_step        -     summary -       -          ... the step from which it learns worse (or better)
largest_batch           -     summary -       -          --max-batch in the same results folder (max_batch.csv), with
                                                           its rounds: the largest global batch this row trains
largest_batch_vs_baseline  -  summary -       -          ... that batch against the baseline's largest
largest_speedup         -     summary -       -          ... its speed there against the baseline's at the baseline's
                                                           own largest batch: geometric mean of paired rounds
largest_speedup_low     -     summary -       -          ... the 95% interval's lower end
largest_speedup_high    -     summary -       -          ... and upper end
largest_answer          -     summary -       -          ... its answer: faster, slower, same or unsettled
memory_source           -     summary -       -          the memory column the verdict reads: nvml_peak_mib,
                                                           peak_mem_reserved_mib or peak_host_mem_mib: the first there
memory_mib              MiB   summary -       -          median of memory_source over the ok runs
memory_min_mib          MiB   summary -       -          its smallest run
memory_max_mib          MiB   summary -       -          its largest run
memory_vs_baseline      x     summary -       -          the geometric mean over the rounds of memory_source / the
                                                           baseline's in the same round (the same memory_source only)
memory_vs_baseline_low  x     summary -       -          its 95% confidence interval starts here
memory_vs_baseline_high x     summary -       -          ... and ends here
memory_answer           -     summary -       -          more, less, same or unsettled, as speed_answer
peer                    -     summary -       -          the row this one also answers against (fsdp: ddp, the same
                                                           processes and global batch); null for the others
speedup_vs_peer         x     summary -       -          the geometric mean over the rounds of rate / the peer's rate
speedup_vs_peer_low     x     summary -       -          its 95% confidence interval starts here
speedup_vs_peer_high    x     summary -       -          ... and ends here
memory_vs_peer          x     summary -       -          ... of memory_source / the peer's: at equal processes, the
                                                           ratio of the memory per process
memory_vs_peer_low      x     summary -       -          its 95% confidence interval starts here
memory_vs_peer_high     x     summary -       -          ... and ends here
convert_ms              ms    summary -       -          --profile: casts and memory-format conversions per step, the
                                                           self time of the operators (CPU) or kernels (GPU) that
                                                           convert (stages/statistics/causes.py's CONVERSIONS), round 1
collective_ms           ms    summary -       -          --profile: collectives per step (all-reduce, all-gather,
                                                           ...): the time one ran (profile_collective_ms), else their
                                                           operators' self time
exposed_collective_ms   ms    summary -       -          --profile: ... of it, the time with no compute beside it
                                                           (profile_exposed_ms)
kernels_ms              ms    summary -       -          --profile: convolutions, matrix multiplies and attention per
                                                           step (bench/stages/statistics/causes.py's KERNELS)
gpu_busy_ms             ms    summary -       -          --profile: every GPU kernel's self time per step, summed
between_ops_ms          ms    summary -       -          --profile: the time between operators per step (the
                                                           profiler's step less its operators: Python, the loop)
cause                   -     summary -       -          a row not faster (or faster but below its ceiling): the
                                                           likeliest cause, by the rules of stages/statistics/causes.py
                                                           (precision, compile, recompute, shared_cores, one_gpu,
                                                           collectives, data, loader_limit, conversions, kernels,
                                                           layout, host,
                                                           stalls), or none shown; empty for a row not asked
verdict                 -     summary -       -          one line: what the variant did and why, from the fields above
                                                           (bench/stages/statistics/summarize.py)
step_ms                 ms    derived -       -          ms a step at the measured rate (stages/statistics/rules.py
                                                           DERIVED: each row's derived fields, worked out once for the
                                                           words and the renderers; not in summary.csv, nor any below)
compute_ms              ms    derived -       -          the step less its data wait
wait_share              -     derived -       -          the share of the window waiting for data (a GPU's: the
                                                           device's own starved share)
stall_p90_ms            ms    derived -       -          where its steps stall: the p90 step ...
stall_median_ms         ms    derived -       -          ... and the median step
ceiling_standing        -     derived -       -          against its ceiling: below, at, above, or one (one round)
torch_blind             -     derived -       -          torch's memory counters do not see its batches (DALI on a GPU)
bf16_emulated           -     derived -       -          bf16 autocast on a device that only emulates bf16
peer_speed_answer       -     derived -       -          speedup_vs_peer's answer: faster, slower, same or unsettled
peer_memory_answer      -     derived -       -          memory_vs_peer's answer: more, less, same or unsettled
rounds_to_settle        -     derived -       -          paired rounds at this noise that would decide it (inf: none)
within_low              x     derived -       -          the speed-up's 90% interval, read against the margin, starts
                                                           here
within_high             x     derived -       -          ... and ends here
deciding_low            x     derived -       -          the interval that calls it faster or slower starts here
deciding_high           x     derived -       -          ... and ends here
self_check              -     derived -       -          the baseline against itself (catalogue.SELF): holds (within
                                                           the margin, or open) or fails (faster or slower)
causes_found            -     derived -       -          every cause rule that passed, with its numbers
                                                           (stages/statistics/causes.py); empty for a row not asked
causes_unshown          -     derived -       -          where none passed: the flags that would show a cause
"""


class Field(NamedTuple):
    name: str
    unit: str
    source: str
    summary: str
    flags: tuple
    meaning: str

    @property
    def only(self):
        return next((flag.split("=")[1] for flag in self.flags if flag.startswith("only=")), "")

    @property
    def least(self):
        """The least value the field may hold (its `least=N` flag), or None."""
        return next((float(flag.split("=")[1]) for flag in self.flags if flag.startswith("least=")), None)


def parse(table):
    fields = []
    for line in table.strip("\n").splitlines():
        if line.startswith(" "):  # the meaning goes on
            fields[-1] = fields[-1]._replace(meaning=fields[-1].meaning + " " + line.strip())
            continue
        name, unit, source, summary, flags, meaning = line.split(maxsplit=5)
        unit, summary = ("" if unit == "-" else unit), ("" if summary == "-" else summary)
        fields.append(Field(name, unit, source, summary, tuple(flags.split(",")) if flags != "-" else (), meaning))
    return fields


FIELDS = parse(TABLE)
BY_NAME = {f.name: f for f in FIELDS}
RUN_COLUMNS = [f.name for f in FIELDS if f.source not in ("summary", "derived") and "json" not in f.flags]
SUMMARY_COLUMNS = ["workload", "kind", "variant"] + [f.name for f in FIELDS if f.source == "summary" or f.summary]
JSON_ONLY = {f.name for f in FIELDS if "json" in f.flags}
WORKLOAD = [f.name for f in FIELDS if "workload" in f.flags]
MEDIANS = [f.name for f in FIELDS if f.summary == "median"]
FIRSTS = [f.name for f in FIELDS if f.summary == "first"]
RATIOS = {f.name: re.sub("_mib$", "", f.name) + "_vs_baseline" for f in FIELDS if "ratio" in f.flags}
# a summary row's fields: summary.csv's columns, the fields of a run it keeps, the ratios, each row's answers
ROW_FIELDS = (
    SUMMARY_COLUMNS
    + [f.name for f in FIELDS if "kept" in f.flags]
    + list(RATIOS.values())
    + [f.name for f in FIELDS if f.source == "derived"]
)


def _row_of(values):
    """The SummaryRow of a summary's row (a pandas Series, a dict or a SummaryRow; None stays None): None for a field
    it does not hold; a column that is no field of the schema (one a mode's Joins declares: bench/outputs/declared.py)
    is kept and read alike. A function that reads a row begins `row = SummaryRow.of(row)`, so that it may be handed
    any of them (a decorator would hide the function from make mutate: mutmut leaves decorated functions alone)."""
    if values is None or isinstance(values, SummaryRow):
        return values
    values = dict(values.items())
    extra = {name: values.pop(name) for name in set(values) - _ROW_SET}
    return SummaryRow(**values, _extra=extra)


def _read_extra(row, name):
    extra = object.__getattribute__(row, "_extra")
    if name in extra:
        return extra[name]
    raise AttributeError(f"{name!r} is no field of the summary's row (bench/schema.py ROW_FIELDS, or a mode's Joins)")


def num(value):
    """A row's field as a number, NaN where it has none (None, NaN, pandas' NA: NaN compares False and prints as nan,
    so a rule just does not fire and a cell is empty)."""
    import pandas as pd  # here: the schema's table is read where pandas is not installed (python -m bench.schema)

    return float("nan") if value is None or pd.isna(value) else float(value)


def rows_of(frame):
    """The summary frame's rows as Rows, in its order."""
    return [_row_of(row) for _, row in frame.iterrows()]


_ROW_SET = set(ROW_FIELDS)
SummaryRow = dataclasses.make_dataclass(
    "SummaryRow",
    [(name, object, dataclasses.field(default=None)) for name in ROW_FIELDS]
    + [("_extra", dict, dataclasses.field(default_factory=dict, repr=False))],
    frozen=True,
    slots=True,
    namespace={
        "of": staticmethod(_row_of),
        "__getattr__": _read_extra,
        "__doc__": "One summary row: SummaryRow.of(series), read by attribute.",
    },
)


def out_of_range(frame):
    """(row number, field, value, least) of the first value below its field's least (the `least=N` flag), the row
    numbered as a CSV file's lines are (its header the first); None where every value is in range or empty."""
    import pandas as pd  # here: the schema's table is read where pandas is not installed (python -m bench.schema)

    for f in FIELDS:
        if f.least is None or f.name not in frame:
            continue
        values = frame[f.name].reset_index(drop=True)
        numbers = pd.to_numeric(values, errors="coerce")  # text that is no number: another check's
        low = numbers[numbers < f.least]
        if not low.empty:
            return int(low.index[0]) + 2, f.name, values[low.index[0]], f.least
    return None


def required(kind):
    """The fields every ok run of this kind (train or loader) holds as positive finite numbers."""
    return [f.name for f in FIELDS if f.source in (kind, "script") and {"required", f"required={kind}"} & set(f.flags)]


def written_by(script):
    """The fields in the metrics JSON of a script: train*.py, or loader*.py --bench."""
    kind = "loader" if script.startswith("loader") else "train"
    return {f.name for f in FIELDS if f.source in (kind, "script") and (not f.only or script in f.only.split("+"))}


# the names of older versions, {version: {old name: new name}}; a file without schema_version is version 1
RENAMED = {
    1: {
        "images_per_s": "samples_per_s",  # the loaders' throughput, named as training's
        "step_time_ms_median": "step_time_median_ms",
        "step_time_ms_p90": "step_time_p90_ms",
        "peak_mem_allocated_mb": "peak_mem_allocated_mib",
        "peak_mem_reserved_mb": "peak_mem_reserved_mib",
        "peak_mem_allocated_mb_sum": "peak_mem_allocated_sum_mib",
        "nvml_peak_mb": "nvml_peak_mib",
        "peak_host_mem_mb": "peak_host_mem_mib",
        "allocated_vs_baseline": "peak_mem_allocated_vs_baseline",
        "reserved_vs_baseline": "peak_mem_reserved_vs_baseline",
        "nvml_vs_baseline": "nvml_peak_vs_baseline",
        "host_mem_vs_baseline": "peak_host_mem_vs_baseline",
    }
}


# the columns an older version wrote that this one no longer does, {version: (name, ...)}: dropped on reading
DROPPED = {2: ("tf32_matmul", "tf32_cudnn")}  # now matmul_precision and conv_precision, in every run


class VersionError(ValueError):
    """A file written by a newer version of this schema than the code knows."""


def version_of(frame):
    if "schema_version" not in frame or frame["schema_version"].isna().all():
        return 1
    return int(frame["schema_version"].max())


def check_version(frame):
    """The frame's schema version; a VersionError when it is newer than this code's."""
    version = version_of(frame)
    if version > VERSION:
        raise VersionError(f"written by schema version {version}, newer than this code's {VERSION}: update the code")
    return version


def upgrade(frame):
    """A table (pandas DataFrame) read from a file of any version, with this version's names."""
    version = check_version(frame)
    for old in range(version, VERSION):
        for before, after in RENAMED.get(old, {}).items():
            if before in frame:
                frame[after] = frame[after].combine_first(frame[before]) if after in frame else frame[before]
                frame = frame.drop(columns=before)
        frame = frame.drop(columns=[name for name in DROPPED.get(old, ()) if name in frame])
    return frame.copy().assign(schema_version=VERSION)  # copy: one block, not the columns a summary added one by one


def markdown():
    """docs/runs.md's table of the fields: runs.csv's columns, the metrics JSON's, summary.csv's."""
    who = {"script": "train, loader", "train": "train", "loader": "loader"}
    lines = ["| field | unit | written by | summary | meaning |", "|---|---|---|---|---|"]
    for f in FIELDS:
        writer = f.only or who.get(f.source, f.source)
        lines.append(f"| `{f.name}` | {f.unit} | {writer} | {f.summary} | {f.meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
