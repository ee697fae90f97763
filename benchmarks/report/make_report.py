#!/usr/bin/python3
"""Writes docs/benchmarks.md and the gnuplot data files from the raw outputs that
scripts/bench-report keeps in build/release/bench-report/. Python standard library only.

Inputs in --dir: timer_bench.json (Google Benchmark JSON, aggregates of repetitions),
purgatory_<rate>.txt (purgatory_bench --impl=both output), purgatory_null_<rate>.txt
(--impl=null, the harness alone), purgatory_parked.txt (--parked), commands.txt, elapsed.txt.
Outputs: --doc, and in --dir timer_addcancel.dat, timer_addatcancel.dat, timer_addexpire.dat,
purgatory.dat for plots.gp next to this file."""

import argparse
import json
import os
import platform
import re
import subprocess

IMPLS = ["Wheel", "AsioSteadyTimer", "StdMultimap", "HeapLazyCancel"]
WORKLOADS = ["AddCancel", "AddAtCancel", "AddExpire"]
MOVES = ["Readd", "Reschedule", "CancelAdd"]


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def load_timer(path):
    """{(impl, workload, pending): ns per task} from the median aggregates; errors are kept apart."""
    with open(path) as f:
        data = json.load(f)
    ns, errors = {}, []
    for b in data["benchmarks"]:
        m = re.match(r"BM_(\w+?)_(\w+)/(\d+)", b.get("run_name", b["name"]))
        if not m:
            continue
        key = (m.group(1), m.group(2), int(m.group(3)))
        if b.get("error_occurred"):
            errors.append(f"{b['name']}: {b.get('error_message', 'error')}")
            continue
        if b.get("aggregate_name") != "median":
            continue
        ips = b.get("items_per_second")
        if ips:
            ns[key] = 1e9 / ips
    return data.get("context", {}), ns, errors


def load_threads(path):
    """{(impl, threads): pairs per second} of the AddCancelThreads medians."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        m = re.match(r"BM_(\w+?)_AddCancelThreads/\d+/(?:min_time:[\d.]+/)?real_time/threads:(\d+)",
                     b.get("run_name", b["name"]))
        if m and b.get("aggregate_name") == "median" and b.get("items_per_second"):
            out[(m.group(1), int(m.group(2)))] = b["items_per_second"]
    return out


def load_pending_bytes(path):
    """{impl: counters} of the PendingBytes medians (bytes_per_task, library_bytes_per_task)."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        m = re.match(r"BM_(\w+?)_PendingBytes/", b.get("run_name", b["name"]))
        if m and b.get("aggregate_name") == "median" and "bytes_per_task" in b:
            out[m.group(1)] = b
    return out


def load_parked(path):
    """{impl: bytes per parked request} from purgatory_bench --parked's last line."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        text = f.read()
    m = re.search(r"^bytes per parked request: (.*)$", text, re.M)
    if not m:
        return {}
    return {name: float(v) for name, v in re.findall(r"(\w+) (-?[\d.]+)", m.group(1))}


# Per-entry sizes of other implementations, counted from their sources (not measured here). JVM
# objects at HotSpot's 64-bit layout with compressed references: 12-byte header, 4-byte
# references, 8-byte alignment.
COUNTED = [
    ("purgatory", "Kafka 4.x (server-common) `DelayedOperation`, one key, before its subclass's fields", 144,
     "the operation with its `TimerTask` fields 32, `ReentrantLock` 16 + `NonfairSync` 32, "
     "`TimerTaskEntry` 40, a `ConcurrentLinkedQueue` node per key 24"),
    ("timer", "Kafka `TimerTaskEntry` + the timer fields of its `TimerTask`", 64, "40 + 24"),
    ("timer", "Netty 4.1 `HashedWheelTimeout` (beside the user's `TimerTask`)", 56,
     "header 12, timer, task, deadline, state, remainingRounds, next, prev, bucket"),
    ("timer", "Linux kernel `struct timer_list`", 40,
     "hlist_node 16, expires 8, function 8, flags 4 (without lock debugging)"),
]


def write_memory(w, pending, parked):
    if not pending and not parked:
        return
    w("## Memory per waiting entry")
    w("")
    w("What one more waiting request or pending task costs. **Purgatory**: `purgatory_bench --parked")
    w("1000000 --impl=ours,lean,naive` parks a million requests that wait for their 60 s timeout, one")
    w("key each over 1,000 keys, the process holding a reference to each, and prints the RSS growth per")
    w("request; each implementation runs in a process of its own. Ours parks `make_operation()` lambdas")
    w("capturing two pointers. **Timer**: `timer_bench`'s `PendingBytes` counts the heap in use (malloc's")
    w("own overhead included) for 1,000,000 tasks pending 0..60 s out, the task objects included, and for")
    w("ours also what the library adds to a task (`sizeof(TimerTask)` plus the wheel's buckets per task).")
    w("The other projects' figures are counted from their sources, not measured (JVM objects at")
    w("HotSpot's 64-bit layout with compressed references; a garbage-collected heap needs room to spare")
    w("on top).")
    w("")
    w("| entry | bytes | how |")
    w("|---|---:|---|")
    labels = {"ours": "purgatory, ours (128-byte operation + 16 bytes of captures)",
              "lean": "purgatory, lean (lower bound, 160-byte request)",
              "naive": "purgatory, naive (`steady_timer` + `unordered_multimap`)"}
    for impl in ("ours", "lean", "naive"):
        if impl in parked:
            w(f"| {labels[impl]} | {parked[impl]:.1f} | measured, RSS growth per parked request |")
    for kind, what, size, how in COUNTED:
        if kind == "purgatory":
            w(f"| purgatory, {what} | {size} | counted: {how} |")
    wheel = pending.get("Wheel")
    if wheel and "library_bytes_per_task" in wheel:
        w(f"| timer, ours: `sizeof(TimerTask)` + buckets | {wheel['library_bytes_per_task']:.2f} | "
          "measured (`library_bytes_per_task`) |")
    for impl in IMPLS:
        if impl in pending:
            w(f"| timer, {impl}: a whole pending task, its object included | "
              f"{pending[impl]['bytes_per_task']:.1f} | measured (`bytes_per_task`) |")
    for kind, what, size, how in COUNTED:
        if kind == "timer":
            w(f"| timer, {what} | {size} | counted: {how} |")
    w("")


def load_bursts(directory):
    """[{impl: run}] from timer_burst_<k>.json, one entry per run of timer_burst."""
    runs = []
    k = 1
    while os.path.exists(os.path.join(directory, f"timer_burst_{k}.json")):
        with open(os.path.join(directory, f"timer_burst_{k}.json")) as f:
            data = json.load(f)
        runs.append({r["impl"]: dict(r, n=data["n"]) for r in data["runs"]})
        k += 1
    return runs


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if v else None


def parse_purgatory(text):
    """{label: {achieved, cpu, elapsed, rss}} from one purgatory_bench output."""
    runs, label = {}, None
    for line in text.splitlines():
        m = re.match(r"== (\w+):", line)
        if m:
            label = m.group(1)
            runs[label] = {}
            continue
        if label is None:
            continue
        r = runs[label]
        if m := re.search(r"achieved rate ([\d.]+)/s", line):
            r["achieved"] = float(m.group(1))
        if m := re.search(r"elapsed ([\d.]+) s, process CPU time ([\d.]+) s", line):
            r["elapsed"], r["cpu"] = float(m.group(1)), float(m.group(2))
        if m := re.search(r"peak RSS ([\d.]+) MiB", line):
            r["rss"] = float(m.group(1))
        if m := re.search(r"CPU per request ([\d.]+) us \(arriving threads ([\d.]+) us\), heap "
                          r"allocations per request ([\d.]+)", line):
            r["us"], r["arriving_us"], r["allocs"] = (float(m.group(i)) for i in (1, 2, 3))
        if m := re.search(r"completion lateness latency \(ms, \d+ samples\): .* p99 ([\d.]+) ", line):
            r["late_p99"] = float(m.group(1))
        if m := re.search(r"t=\s*([\d.]+)s purgatory size: watched (\d+) delayed (\d+)", line):
            r["last_t"], r["last_watched"], r["last_delayed"] = float(m.group(1)), int(m.group(2)), int(m.group(3))
        if "ERROR" in line:
            r.setdefault("errors", []).append(line.strip())
    return runs


def fmt_ns(v):
    if v is None:
        return "n/a"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def pending_label(p):
    return {1000: "1k", 100000: "100k", 1000000: "1M"}.get(p, str(p))


def compiler(build_dir):
    """(first line of the compiler's --version, release flags) from the build's CMakeCache.txt."""
    cache = {}
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if (m := re.match(r"(CMAKE_CXX_COMPILER|CMAKE_CXX_FLAGS_RELEASE):\w+=(.*)", line)):
                    cache[m.group(1)] = m.group(2).strip()
    except OSError:
        pass
    cxx = cache.get("CMAKE_CXX_COMPILER", "g++")
    version = sh(f"{cxx} --version")
    return (version.splitlines()[0] if version else cxx), cache.get("CMAKE_CXX_FLAGS_RELEASE", "?")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--rates", nargs="+", type=int, required=True)
    args = ap.parse_args()

    context, ns, errors = load_timer(os.path.join(args.dir, "timer_bench.json"))
    pendings = sorted({k[2] for k in ns})

    purg = []
    for rate in args.rates:
        path = os.path.join(args.dir, f"purgatory_{rate}.txt")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            runs = parse_purgatory(f.read())
        null_path = os.path.join(args.dir, f"purgatory_null_{rate}.txt")
        if os.path.exists(null_path):
            with open(null_path) as f:
                runs.update(parse_purgatory(f.read()))
        for label, r in runs.items():
            errors += [f"purgatory_bench {label} at {rate}/s: {e}" for e in r.get("errors", [])]
        purg.append((rate, runs))

    # Ours and the harness in one process (--impl=ours,null), several runs per rate; and the
    # arriving-thread runs (--threads 1 and 2) of ours alone.
    sub = {}  # rate -> [runs]
    arriving = {}  # (threads, rate) -> run
    for name in sorted(os.listdir(args.dir)) if os.path.isdir(args.dir) else []:
        if m := re.fullmatch(r"purgatory_sub_(\d+)_(\d+)\.txt", name):
            with open(os.path.join(args.dir, name)) as f:
                sub.setdefault(int(m.group(1)), []).append(parse_purgatory(f.read()))
        if m := re.fullmatch(r"purgatory_threads_(\d+)_(\d+)\.txt", name):
            with open(os.path.join(args.dir, name)) as f:
                arriving[(int(m.group(1)), int(m.group(2)))] = parse_purgatory(f.read()).get("ours", {})

    # gnuplot data: one row per pending count, one column per implementation (NaN when missing).
    for wl in WORKLOADS:
        with open(os.path.join(args.dir, f"timer_{wl.lower()}.dat"), "w") as f:
            f.write("pending " + " ".join(IMPLS) + "\n")  # gnuplot reads the titles (columnhead)
            for p in pendings:
                vals = [ns.get((i, wl, p)) for i in IMPLS]
                f.write(f"{p} " + " ".join(f"{v:.3f}" if v else "NaN" for v in vals) + "\n")
    with open(os.path.join(args.dir, "ranges.gp"), "w") as f:
        for wl in WORKLOADS:
            vals = [v for (i, w_, p), v in ns.items() if w_ == wl and i in IMPLS] or [1]
            f.write(f"lo_{wl.lower()} = {min(vals):.3f}; hi_{wl.lower()} = {max(vals):.3f}\n")
    with open(os.path.join(args.dir, "purgatory.dat"), "w") as f:
        f.write("# rate  cpu_s_per_1M_ours naive null\n")
        for rate, runs in purg:
            vals = []
            for label in ("ours", "naive", "null"):
                r = runs.get(label)
                vals.append(per_million(r, rate, args) if r else None)
            f.write(f"{rate} " + " ".join(f"{v:.4f}" if v is not None else "NaN" for v in vals) + "\n")

    # timer_burst: the lateness CDF of the run whose p99 is the median, for each implementation.
    bursts = load_bursts(args.dir)
    burst_impls = [i for i in ("ours", "asio") if all(i in b for b in bursts)] if bursts else []
    with open(os.path.join(args.dir, "timer_burst_cdf.dat"), "w") as f:
        f.write("quantile " + " ".join(burst_impls) + "\n")
        cdfs = []
        for impl in burst_impls:
            p99s = sorted(b[impl]["p99_ms"] for b in bursts)
            mid = next(b[impl] for b in bursts if b[impl]["p99_ms"] == p99s[len(p99s) // 2])
            cdfs.append(mid["cdf_ms"])
        for q in range(len(cdfs[0]) if cdfs else 0):
            # Lateness below 10 us is drawn at 10 us (log scale).
            f.write(f"{q / 1000:.3f} " + " ".join(f"{max(c[q], 0.01):.4f}" for c in cdfs) + "\n")

    # Runs stopped before they finished: a cross at the top of the plot, labelled.
    top = max([per_million(r, rate, args) or 0 for rate, runs in purg for r in runs.values()] + [1])
    with open(os.path.join(args.dir, "purgatory_unfinished.dat"), "w") as f:
        f.write("# rate y label\n")
        for rate, runs in purg:
            for label in ("ours", "naive"):
                if label in runs and "cpu" not in runs[label]:
                    f.write(f'{rate} {top * 1.05:.3f} "{label}: stopped"\n')

    with open(os.path.join(args.dir, "commands.txt")) as f:
        commands = f.read().strip()
    try:
        with open(os.path.join(args.dir, "elapsed.txt")) as f:
            elapsed = int(f.read().strip())
    except (OSError, ValueError):
        elapsed = None

    cpu_model = sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor()
    load = context.get("load_avg")
    md = []
    w = md.append
    w("# Benchmarks")
    w("")
    w("Generated by `bash scripts/bench-report` (do not edit by hand; rerun the script). It builds the")
    w("release preset, runs `timer_bench` and `purgatory_bench`, and writes this page and the plots in")
    w("`docs/img/`. Raw outputs stay in `build/release/bench-report/`.")
    w("")
    w("**Read the numbers as ratios.** The machine is a shared, noisy 2-vCPU VM with other jobs running;")
    w("absolute times move by tens of percent between runs. Each table compares implementations measured")
    w("side by side in one run of one program, timer figures are medians of the repetitions, and every")
    w("implementation does the same work with the same payload (see the header comments of")
    w("`benchmarks/timer_bench/main.cpp` and `benchmarks/purgatory_bench/main.cpp`).")
    w("")
    w("## Machine")
    w("")
    w(f"- Date: {context.get('date') or sh('date -u')}")
    w(f"- CPU: {cpu_model}, `nproc` = {sh('nproc')}")
    w(f"- Kernel: {platform.system()} {platform.release()}")
    cxx, flags = compiler("build/release")
    w(f"- Compiler: {cxx}, CMake preset `release` (`{flags}`)")
    w("- Google Benchmark: Debian's `libbenchmark-dev`, which prints \"Library was built as DEBUG\";")
    w("  that is the harness library's own build, the code measured is compiled as above.")
    if load:
        w(f"- Load average when timer_bench started: {', '.join(f'{x:.2f}' for x in load)}")
    if elapsed is not None:
        w(f"- Whole report: {elapsed // 60} min {elapsed % 60} s")
    w("")
    w("## Commands")
    w("")
    w("```sh")
    w(commands)
    w("```")
    w("")
    if errors:
        w("## Errors reported by the benchmarks")
        w("")
        for e in errors:
            w(f"- {e}")
        w("")

    w("## Timer: cost per task")
    w("")
    w("Nanoseconds of CPU time per task (Google Benchmark's `items_per_second`, inverted), median of the")
    w("repetitions. CPU time rather than wall time because other jobs preempt the benchmark on this")
    w("machine (the raw JSON has both). `Wheel` is ours (`purgatory::SystemTimer`). `Wheel/X` is the")
    w("wheel's cost over implementation X's: **below 1.00 the wheel is cheaper** (0.25 = four times")
    w("cheaper).")
    w("")
    desc = {
        "AddCancel": "Schedule one task 0..60 s out and cancel it, with `pending` tasks already "
                     "waiting: a request whose condition is met before its timeout.",
        "AddAtCancel": "AddCancel with absolute deadlines from a time read once per round of 32 "
                       "(Wheel `add_at`, Asio `expires_at`): the same work without the clock read "
                       "per add.",
        "AddExpire": "Schedule `pending` tasks 0..100 ms out, then expire and run them all: the "
                     "cost per task of the adds plus its share of the expiry (and of any cascade).",
    }
    others = IMPLS[1:]
    for wl in WORKLOADS:
        w(f"### {wl}")
        w("")
        w(desc[wl])
        w("")
        w("| pending | " + " | ".join(f"{i} ns" for i in IMPLS) + " | "
          + " | ".join(f"Wheel/{o}" for o in others) + " |")
        w("|---:|" + "---:|" * (len(IMPLS) + len(others)))
        for p in pendings:
            wheel = ns.get(("Wheel", wl, p))
            w(f"| {pending_label(p)} | "
              + " | ".join(fmt_ns(ns.get((i, wl, p))) for i in IMPLS) + " | "
              + " | ".join(ratio(wheel, ns.get((o, wl, p))) for o in others) + " |")
        w("")
        w(f"![{wl}: ns per task against pending tasks](img/timer_{wl.lower()}.png)")
        w("")

    w("### Moving a scheduled task: Reschedule against CancelAdd")
    w("")
    w("Wheel only. One of `pending` scheduled tasks gets a new deadline 0..60 s out, three ways:")
    w("`Readd` adds it again (Kafka's \"adding again moves it\"), `Reschedule` calls")
    w("`SystemTimer::reschedule()`, `CancelAdd` calls `cancel()` then `add()`, the cost `Reschedule` must")
    w("not exceed. Below 1.00 in the last column, `reschedule()` is the cheaper way.")
    w("")
    w("| pending | " + " | ".join(f"{m} ns" for m in MOVES) + " | Reschedule/CancelAdd |")
    w("|---:|" + "---:|" * (len(MOVES) + 1))
    for p in pendings:
        w(f"| {pending_label(p)} | " + " | ".join(fmt_ns(ns.get(("Wheel", m, p))) for m in MOVES)
          + f" | {ratio(ns.get(('Wheel', 'Reschedule', p)), ns.get(('Wheel', 'CancelAdd', p)))} |")
    w("")

    threads = load_threads(os.path.join(args.dir, "timer_bench.json"))
    thread_impls = sorted({k[0] for k in threads}, key=lambda i: (i != "Wheel", i))
    if threads:
        w("### Adds and cancels from two threads: AddCancelThreads")
        w("")
        w("One timer with 1,000,000 tasks pending (added by the setup thread); each benchmark thread adds")
        w("and cancels its own task, as a server's request threads do with their timeouts. Pairs per")
        w("second over all threads, on the real clock, median of the repetitions; the last column is the")
        w("2-thread figure over the 1-thread one (2.00 would be perfect scaling on 2 cores). Ours: each")
        w("thread adds to its own timer base. Asio: one io_context, run by a thread of its own.")
        w("")
        w("| impl | 1 thread, M pairs/s | 2 threads, M pairs/s | 2 threads / 1 thread |")
        w("|---|---:|---:|---:|")
        for impl in thread_impls:
            one, two = threads.get((impl, 1)), threads.get((impl, 2))
            cell = lambda v: f"{v / 1e6:.2f}" if v else "n/a"
            w(f"| {impl} | {cell(one)} | {cell(two)} | "
              f"{f'{two / one:.2f}' if one and two else 'n/a'} |")
        w("")

    if bursts and burst_impls:
        w("## Timer: a burst on the real clock")
        w("")
        w(f"`timer_burst`, run {len(bursts)} times: one thread adds {bursts[0][burst_impls[0]]['n']:,} "
          "tasks as fast as it can, delays uniform over the range, on the steady clock; each task records")
        w("how late it ran against (clock at its add + delay). Ours is the default `SystemTimer` (reaper")
        w("and executor threads); Asio is one io_context thread adding `steady_timer`s in chunks of 1024")
        w("handlers. CPU is the whole process's, from the first add until the last task ran, per task.")
        w("Each cell: the median of the runs (each run's figures are in `timer_burst_<k>.json`).")
        w("")
        cols = [("cpu_per_task_ns", "CPU ns/task", "{:.0f}"), ("p50_ms", "p50 ms", "{:.2f}"),
                ("p99_ms", "p99 ms", "{:.2f}"), ("p999_ms", "p99.9 ms", "{:.2f}"),
                ("max_ms", "max ms", "{:.2f}"), ("worst_window_max_ms", "worst 50 ms window, max ms", "{:.2f}"),
                ("early", "early", "{:.0f}")]
        w("| impl | " + " | ".join(c[1] for c in cols) + " |")
        w("|---|" + "---:|" * len(cols))
        for impl in burst_impls:
            w(f"| {impl} | " + " | ".join(c[2].format(median([b[impl][c[0]] for b in bursts]))
                                          for c in cols) + " |")
        if "ours" in burst_impls and "asio" in burst_impls:
            r = median([b["ours"]["cpu_per_task_ns"] / b["asio"]["cpu_per_task_ns"] for b in bursts])
            w("")
            w(f"CPU per task, ours over Asio's in the same run (median of the runs): {r:.2f}.")
        w("")
        w("![lateness CDF of the burst](img/timer_burst_cdf.png)")
        w("")

    w("## Purgatory: CPU time against request rate")
    w("")
    w("`purgatory_bench` is Kafka's TestPurgatoryPerformance: Poisson arrivals at the given rate, each")
    w("request watching 3 of 1000 keys, log-normal completion latency (median 20 ms, 75th percentile")
    w("50 ms), 100 ms timeout, so about one in eight requests expires and the rest are completed by a")
    w("completer thread. Both implementations get the same requests (same seed), one after the other")
    w("in one process, about 5 s of requests each. `naive` is one mutex, an")
    w("`unordered_multimap` of watchers and one `boost::asio::steady_timer` per request. CPU time is")
    w("the whole process's (user + system), so it includes the harness: the `harness` column is")
    w("`--impl=null`, which only generates and resolves the requests. At low rates it is most of")
    w("`ours`'s CPU time, so there the `naive/ours` ratio understates the purgatories' own difference;")
    w("it is itself noisy at a few tenths of a second, so it is shown rather than subtracted.")
    w("")
    w("| rate /s | achieved ours | achieved naive | CPU ours s | CPU naive s | naive/ours | "
      "harness s | CPU s per 1M ours | per 1M naive | peak RSS ours MiB | "
      "peak RSS naive MiB |")
    w("|---:|" + "---:|" * 10)
    unfinished = []
    for rate, runs in purg:
        o, n, z = runs.get("ours", {}), runs.get("naive", {}), runs.get("null", {})
        for label, r in (("ours", o), ("naive", n)):
            if "cpu" not in r:
                unfinished.append((rate, label, r))
        co, cn, cz = o.get("cpu"), n.get("cpu"), z.get("cpu")
        w(f"| {rate // 1000}k | {fmt_rate(o)} | {fmt_rate(n)} | "
          f"{fmt_cpu(co)} | {fmt_cpu(cn)} | {ratio(cn, co)} | {fmt_cpu(cz)} | "
          f"{fmt_cpu(per_million(o, rate, args))} | {fmt_cpu(per_million(n, rate, args))} | "
          f"{o.get('rss', 'n/a')} | {n.get('rss', 'n/a')} |")
    w("")
    w("![Purgatory CPU seconds per million requests against request rate](img/purgatory_cpu.png)")
    w("")
    for rate, label, r in unfinished:
        if "last_t" in r:
            w(f"**`{label}` did not finish at {rate // 1000}k/s:** at t={r['last_t']:.0f} s its purgatory "
              f"size was still `watched {r['last_watched']:,} delayed {r['last_delayed']:,}` "
              f"when the process was stopped after {limit_s(args)} (`timeout`), so it has no CPU time: "
              f"it was not keeping up with the arrivals. `n/a` in its columns.")
        else:
            w(f"**`{label}` did not run at {rate // 1000}k/s** (an earlier run was stopped).")
        w("")
    if unfinished:
        w("A run that does not finish is at or past that implementation's capacity on this machine:")
        w("once it falls behind, its backlog grows and each operation gets slower. Near the limit")
        w("whether it keeps up varies from one run to the next with the machine's other load.")
        w("")
    w("An achieved rate well below the target means the request generator could not keep up on this")
    w("machine; compare the two implementations at the same achieved rate.")
    w("")
    write_subtracted(w, sub)
    write_threads(w, arriving)
    write_memory(w, load_pending_bytes(os.path.join(args.dir, "timer_bench.json")),
                 load_parked(os.path.join(args.dir, "purgatory_parked.txt")))
    with open(args.doc, "w") as f:
        f.write("\n".join(md))


NUMS = {}

SUSTAINED = "achieved >= 98% of the target and completion lateness p99 <= 2 ms"


def sustained(r, rate):
    return "achieved" in r and r["achieved"] >= 0.98 * rate and r.get("late_p99", 1e9) <= 2.0


def write_subtracted(w, sub):
    if not sub:
        return
    w("## Purgatory: CPU per request, harness subtracted")
    w("")
    w("`purgatory_bench --impl=ours,lean,null` runs our purgatory, then `lean`, then the harness alone")
    w("(`null`: the same arrivals and completer, and the measurement work of the operations' callbacks")
    w("(a clock read, the latency records), but no purgatory), in one process, on the workload above.")
    w("Per request: process CPU time over requests; `ours - null` is what the purgatory itself costs;")
    w("the arriving thread's own CPU (RUSAGE_THREAD) bounds the rate one thread can issue. `lean` is")
    w("not a purgatory but a lower bound: the same work per request (a shard-locked intrusive list per")
    w("key, a one-lock wheel of 1 ms buckets on its own thread, one compare-and-swap to decide, the")
    w("unlinks at completion, operations from the same pool) without what a purgatory owes its users")
    w("(a lock around the completion check, metrics, error reporting, a shutdown that resolves what is")
    w("still pending); `lean - null` bounds what any design doing this work costs on this machine.")
    w("Medians of the runs per rate (their count in the last column). Heap allocations per request")
    w("count every `operator new` in the process (the pool's slabs are mapped, not allocated from the")
    w("heap).")
    w("")
    w("| rate /s | achieved | ours us/req | null us/req | **ours - null us/req** | lean - null us/req "
      "| arriving thread us/req | allocations/req | lateness p99 ms | runs |")
    w("|---:|" + "---:|" * 9)
    for rate in sorted(sub):
        runs = [r for r in sub[rate] if "us" in r.get("ours", {}) and "us" in r.get("null", {})]
        if not runs:
            continue
        med = lambda key, label="ours": median([r[label][key] for r in runs])
        diff = median([r["ours"]["us"] - r["null"]["us"] for r in runs])
        leans = [r["lean"]["us"] - r["null"]["us"] for r in runs if "us" in r.get("lean", {})]
        lean = f"{median(leans):.3f}" if leans else "n/a"
        w(f"| {rate // 1000}k | {med('achieved'):.0f} | {med('us'):.3f} | {med('us', 'null'):.3f} | "
          f"**{diff:.3f}** | {lean} | {med('arriving_us'):.3f} | {med('allocs'):.3f} | "
          f"{med('late_p99'):.2f} | {len(runs)} |")
    w("")
    w("External measurement, for scale (not rerun here): Kafka's own purgatory under its")
    w("TestPurgatoryPerformance (Kafka's DelayedOperation.scala and timer, unchanged, OpenJDK 17, a")
    w("machine of this kind, `--num 1000000 --rate 100000 --pct50 20 --pct75 50 --timeout 100 --keys 3")
    w("--key-space-size 1000`) used 6.39 s of process CPU against 2.63 s for its harness alone: about")
    w("3.8 us of purgatory CPU per request (measured the same way, under OpenJDK 17).")
    w("")


def write_threads(w, threads):
    if not threads:
        return
    counts = sorted({t for t, _ in threads})
    rates = sorted({r for _, r in threads})
    w("## Purgatory: arriving threads")
    w("")
    w("`purgatory_bench --impl=ours --threads N`: N threads issue requests (each --rate/N, with its")
    w("own completer thread) into one purgatory. Achieved rate and completion lateness p99 (ms);")
    w(f"bold where the rate is sustained ({SUSTAINED}).")
    w("")
    w("| rate /s | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}" for t in counts) + " |")
    w("|---:|" + "---:|" * len(counts))
    for rate in rates:
        cells = []
        for t in counts:
            r = threads.get((t, rate), {})
            if "achieved" not in r:
                cells.append("n/a")
                continue
            cell = f"{r['achieved']:.0f}, p99 {r.get('late_p99', float('nan')):.2f}"
            cells.append(f"**{cell}**" if sustained(r, rate) else cell)
        w(f"| {rate // 1000}k | " + " | ".join(cells) + " |")
    w("")
    for t in counts:
        best = max([r for (n, r) in threads if n == t and sustained(threads[(n, r)], r)], default=None)
        w(f"- highest sustained rate with {t} arriving thread{'s' if t > 1 else ''}: "
          f"{best // 1000 if best else 'none'}{'k/s' if best else ''}")
    w("")


def per_million(r, rate, args):
    """CPU seconds per million requests; the run's --num is read from commands.txt."""
    if not r or "cpu" not in r:
        return None
    num = request_count(rate, args)
    return r["cpu"] * 1e6 / num if num else None


def request_count(rate, args):
    if rate not in NUMS:
        with open(os.path.join(args.dir, "commands.txt")) as f:
            for line in f:
                if f"--rate {rate} " in line and (m := re.search(r"--num (\d+)", line)):
                    NUMS[rate] = int(m.group(1))
    return NUMS.get(rate)


def fmt_rate(r):
    return f"{r['achieved']:.0f}" if "achieved" in r else "n/a"


def limit_s(args):
    """The purgatory_bench time limit, read from the `timeout N` in commands.txt."""
    with open(os.path.join(args.dir, "commands.txt")) as f:
        m = re.search(r"timeout (\d+) ", f.read())
    return f"{m.group(1)} s" if m else "some time"


def fmt_cpu(v):
    return f"{v:.2f}" if v is not None else "n/a"


if __name__ == "__main__":
    main()
