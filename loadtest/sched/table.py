#!/usr/bin/env python3
"""Turns the raw RESULT lines written by run.sh into markdown tables of medians.

Input lines (one per figure per run):
  RESULT impl=goro rep=1 name=pingpong procs=1 unit=ns_per_roundtrip value=123.4 ...
  PEAK impl=go rep=1 name=skynet procs=2 value=305144        (peak RSS, KiB)
  FAILED impl=goro case=skynet procs=1 rep=3 rc=137
"""

import statistics
import sys

# Whether a bigger figure is better; anything not listed: smaller is better.
HIGHER_IS_BETTER = {"handoff_cpu", "handoff_cpu_share", "handoff_calls", "timer_sleeps"}


def parse(line):
    kind, _, rest = line.partition(" ")
    fields = dict(tok.split("=", 1) for tok in rest.split() if "=" in tok)
    return kind, fields


def fmt(v):
    if v is None:
        return "—"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def main(path):
    values = {}  # (name, procs, impl) -> [float]
    units = {}
    peaks = {}  # (case, procs, impl) -> [KiB]
    order = []  # (name, procs); printed grouped by name, in first-seen order
    failures = []
    with open(path) as f:
        for line in f:
            kind, fields = parse(line.strip())
            if kind == "RESULT":
                key = (fields["name"], int(fields["procs"]))
                if key not in order:
                    order.append(key)
                units[fields["name"]] = fields.get("unit", "")
                values.setdefault(key + (fields["impl"],), []).append(float(fields["value"]))
            elif kind == "PEAK":
                key = (fields["name"], int(fields["procs"]), fields["impl"])
                peaks.setdefault(key, []).append(float(fields["value"]) / 1024)
            elif kind == "FAILED":
                failures.append(fields)

    def median(table, key):
        v = table.get(key)
        return statistics.median(v) if v else None

    def spread(table, key):
        v = table.get(key)
        if not v or len(v) < 2:
            return ""
        return f" ({fmt(min(v))}–{fmt(max(v))})"

    names = []
    for name, _ in order:
        if name not in names:
            names.append(name)
    order = sorted(order, key=lambda k: (names.index(k[0]), k[1]))

    print("| case | procs | unit | better | goro | Go | goro/Go |")
    print("|---|---:|---|---|---:|---:|---:|")
    for name, procs in order:
        g = median(values, (name, procs, "goro"))
        o = median(values, (name, procs, "go"))
        ratio = f"{g / o:.2f}" if g is not None and o else "—"
        better = "higher" if name in HIGHER_IS_BETTER else "lower"
        print(f"| {name} | {procs} | {units[name]} | {better} | "
              f"{fmt(g)}{spread(values, (name, procs, 'goro'))} | "
              f"{fmt(o)}{spread(values, (name, procs, 'go'))} | {ratio} |")
    print()
    print("Median over the runs, (min–max) beside it.")
    print()
    print("Peak RSS of the whole process (GNU time %M), MiB, median:")
    print()
    print("| case | procs | goro | Go | goro/Go |")
    print("|---|---:|---:|---:|---:|")
    seen = []
    for case, procs, _ in peaks:
        if (case, procs) not in seen:
            seen.append((case, procs))
    for case, procs in seen:
        g = median(peaks, (case, procs, "goro"))
        o = median(peaks, (case, procs, "go"))
        ratio = f"{g / o:.2f}" if g is not None and o else "—"
        print(f"| {case} | {procs} | {fmt(g)} | {fmt(o)} | {ratio} |")
    if failures:
        print()
        print(f"{len(failures)} run(s) failed (exit status; stderr in the .stderr.txt beside {path}):")
        for f in failures:
            print(f"- {f['impl']} {f['case']} procs={f['procs']} rep={f['rep']}: exit {f['rc']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
