#!/usr/bin/env python3
"""Turns one run of loadtest/run.sh into results.json, table.md and PNG charts.

    loadtest/report.py loadtest/results/<stamp>

Reads results.csv (one row per server, scenario and round) and meta.txt (key=value:
date, machine, command, ...) from that folder. With several rounds the table takes,
for each server and scenario, the round with the median headline figure. Charts are
drawn by gnuplot (pngcairo) when it is installed. Standard library only.

The gRPC scenarios (grpc-*) get a table and a chart of their own: their servers are
goro's greeter (the "goro" peer there), grpc-go's and gRPC C++'s, and the ratios are
goro's over grpc-go's and over gRPC C++'s.
"""

import csv
import json
import os
import shutil
import subprocess
import sys

PEERS = ["goro", "base", "go", "nginx", "nginx-cache", "asio", "epoll", "grpc-go", "grpc-cpp"]
LABELS = {
    "goro": "goro-demo",
    "base": "goro-demo (BASE_DEMO)",
    "go": "Go net/http",
    "nginx": "nginx",
    "nginx-cache": "nginx + open_file_cache",
    "asio": "Asio+llhttp",
    "epoll": "bare epoll",
    "grpc-go": "grpc-go",
    "grpc-cpp": "gRPC C++",
}
# In the gRPC scenarios the "goro" peer is goro's greeter, not goro-demo.
GRPC_PEERS = ["goro", "grpc-go", "grpc-cpp"]
GRPC_LABELS = dict(LABELS, goro="goro::grpc")
# scenario -> (headline field, its name in the table, True when higher is better)
HEADLINE = {
    "plaintext-64": ("requests_per_s", "req/s", True),
    "plaintext-1k": ("requests_per_s", "req/s", True),
    "plaintext-10k": ("requests_per_s", "req/s", True),
    "pipeline16": ("requests_per_s", "req/s", True),
    "json": ("requests_per_s", "req/s", True),
    "echo4k": ("requests_per_s", "req/s", True),
    "gzip-text": ("requests_per_s", "req/s", True),
    "static4k": ("requests_per_s", "req/s", True),
    "static1m": ("requests_per_s", "req/s", True),
    "sleep": ("requests_per_s", "req/s", True),
    "handoff": ("requests_per_s", "plaintext req/s under /block", True),
    "preempt": ("p99_ms", "plaintext p99 ms under /cpu hogs", False),
    "https": ("requests_per_s", "req/s", True),
    "h2": ("requests_per_s", "req/s", True),
    "idle": ("bytes_per_conn", "server bytes per idle conn", False),
    "idle-ws": ("bytes_per_conn", "server bytes per idle WebSocket", False),
    "ws-echo": ("requests_per_s", "WebSocket messages/s", True),
    "scaling": ("requests_per_s", "req/s", True),
    "grpc-unary": ("requests_per_s", "unary calls/s", True),
    "grpc-stream": ("messages_per_s", "streamed messages/s", True),
    "grpc-idle": ("bytes_per_conn", "server bytes per idle gRPC conn", False),
}
ORDER = list(HEADLINE)
GRPC = [s for s in ORDER if s.startswith("grpc-")]
HTTP = [s for s in ORDER if s not in GRPC]
# More rows of the gRPC summary under each scenario's figure: (field, name, higher is
# better; None: a condition of the measurement, shown without a ratio). per_cpu_s is
# the figure over the server's CPU time (load() adds it): on a machine shared with other
# work a server gets a share of its core that moves from round to round, and this is the
# figure that share moves least. h2load's CPU shows whether the client set the pace.
GRPC_EXTRA = {
    "grpc-unary": [("per_cpu_s", "calls per server CPU-second", True),
                   ("p50_ms", "p50 ms per call", False), ("p99_ms", "p99 ms per call", False),
                   ("others_pct", "others % on the server's core", None),
                   ("client_cpu_pct", "h2load CPU % (of its one core)", None)],
    "grpc-stream": [("per_cpu_s", "messages per server CPU-second", True),
                    ("p50_ms", "p50 ms per call", False), ("p99_ms", "p99 ms per call", False),
                    ("others_pct", "others % on the server's core", None),
                    ("client_cpu_pct", "h2load CPU % (of its one core)", None)],
}
NUMERIC = {
    "procs", "round", "conns", "requests_per_s", "p50_ms", "p99_ms", "max_ms", "errors",
    "rss_kib", "cpu_pct", "others_pct", "baseline_rps", "retained_pct", "load_rps", "idle_conns",
    "rss_before_kib", "rss_after_kib", "bytes_per_conn", "step_s", "bytes_per_conn_1s",
    "messages_per_s", "client_cpu_pct", "streams", "bytes_per_conn_100ms",
}


def number(text):
    if text is None or text == "":
        return None
    v = float(text)
    return int(v) if v.is_integer() else v


def load(folder):
    meta = {}
    with open(os.path.join(folder, "meta.txt")) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            meta[key] = value
    rows = []
    with open(os.path.join(folder, "results.csv"), newline="") as f:
        for row in csv.DictReader(f):
            # Rows of a run made before a column was added have None there.
            r = {k: (number(v) if k in NUMERIC else v) for k, v in row.items() if k is not None}
            if r["scenario"] in GRPC_EXTRA and r.get("cpu_pct"):
                figure = r.get(HEADLINE[r["scenario"]][0])
                if figure is not None:
                    r["per_cpu_s"] = round(figure / (r["cpu_pct"] / 100))
            rows.append(r)
    return meta, rows


def pick_median(rows):
    """One row per (scenario, peer, procs): the round with the median headline figure."""
    groups = {}
    for r in rows:
        if r["status"] == "skipped":
            continue
        groups.setdefault((r["scenario"], r["peer"], r["procs"]), []).append(r)
    chosen = {}
    for key, group in groups.items():
        field = HEADLINE[key[0]][0]
        ok = [r for r in group if r["status"] == "ok" and r[field] is not None]
        if not ok:
            chosen[key] = group[0]
            continue
        ok.sort(key=lambda r: r[field])
        chosen[key] = ok[(len(ok) - 1) // 2]
        chosen[key] = dict(chosen[key], rounds=[r[field] for r in group])
    return chosen


def fmt(v, digits=None):
    if v is None:
        return "—"
    if digits is not None:
        return f"{v:.{digits}f}"
    if isinstance(v, int) or abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def ratio(goro, peer):
    if goro is None or peer is None or peer == 0:
        return None
    return goro / peer


def summary(out, rows, chosen, names, peer_order, labels):
    """The summary table of `names` (scenarios): one column per server."""
    peers = [p for p in peer_order
             if any(r["peer"] == p and r["scenario"] in names for r in rows)]
    measured = [s for s in names if any(k[0] == s for k in chosen)]
    if not measured:
        return
    out.append("| scenario | figure | " + " | ".join(labels[p] for p in peers) + " |")
    out.append("|---|---|" + "---:|" * len(peers))
    for s in measured:
        field, name, higher = HEADLINE[s]
        lines = [(field, name, higher)]
        lines += GRPC_EXTRA.get(s, [])
        for procs in sorted({k[2] for k in chosen if k[0] == s}):
            label = s if s != "scaling" else f"scaling, {procs} core{'s' if procs > 1 else ''}"
            for field, name, higher in lines:
                goro = chosen.get((s, "goro", procs), {}).get(field)
                cells = []
                for p in peers:
                    r = chosen.get((s, p, procs))
                    if r is None:
                        cells.append("n/a")
                        continue
                    v = r.get(field)
                    if r["status"] == "starved":
                        cells.append("starved")
                        continue
                    if r["status"] != "ok" or v is None:
                        cells.append("failed")
                        continue
                    # higher None: a condition of the measure, not a figure to compare.
                    q = ratio(goro, v) if higher is not None else None
                    cells.append(fmt(v) if p == "goro" or q is None else f"{fmt(v)} ({q:.2f}×)")
                arrow = {True: " ↑", False: " ↓", None: ""}[higher]
                out.append(f"| {label} | {name}{arrow} | " + " | ".join(cells) + " |")
    out.append("")


def table(meta, rows, chosen):
    scenarios = [s for s in ORDER if any(r["scenario"] == s for r in rows)]
    http = [s for s in scenarios if s in HTTP]
    grpc = [s for s in scenarios if s in GRPC]
    out = []
    quick = " (--quick: 1 s steps, for checking the kit, not for figures)" if meta.get(
        "quick") == "1" else ""
    what = "HTTP and gRPC" if http and grpc else ("gRPC" if grpc else "HTTP")
    out.append(f"### {what} load test, {meta.get('date_utc', '?')}{quick}\n")
    out.append(f"- machine: {meta.get('machine', '?')}")
    out.append(f"- command: `{meta.get('command', '?')}` (commit {meta.get('commit', '?')})")
    out.append(f"- each server alone with {meta.get('procs')} core(s) "
               f"({meta.get('pinning')}); {meta.get('warmup_s')} s warm-up, "
               f"{meta.get('duration_s')} s measured, {meta.get('rounds')} round(s); "
               f"whole run {int(meta.get('total_s', 0)) // 60} min "
               f"{int(meta.get('total_s', 0)) % 60} s")
    out.append(f"- {meta.get('wrk', 'wrk')}; {meta.get('go', '')}; nginx {meta.get('nginx', '')}; "
               f"{meta.get('compiler', '')}; {meta.get('openssl', '')}")
    if grpc:
        out.append(f"- gRPC: {meta.get('grpc_versions', '?')}; {meta.get('h2load', 'h2load')}")
    out.append("")
    out.append("Each cell: the scenario's figure, then goro's figure divided by that "
               "server's. For ↑ figures a ratio above 1 means goro is ahead; for ↓ figures "
               "(latency, memory) a ratio below 1 means goro is ahead.\n")
    summary(out, rows, chosen, http, [p for p in PEERS if not p.startswith("grpc-")], LABELS)
    if grpc:
        out.append("gRPC (h2c, helloworld.Greeter; goro::grpc is goro's greeter, "
                   "loadtest/grpc/goro_greeter.cpp; each cell's ratio is goro::grpc's figure "
                   "over that server's: goro/grpc-go and goro/gRPC C++):\n")
        summary(out, rows, chosen, grpc, GRPC_PEERS, GRPC_LABELS)

    out.append("<details><summary>All figures</summary>\n")
    out.append("CPU %: the server's CPU time over the measured seconds (100 = one core). "
               "others %: CPU time that anything else (other processes, interrupts, the "
               "hypervisor) took on the server's cores meanwhile: 0 on a quiet machine, and "
               "figures taken beside more than a few % are disturbed. starved: no plaintext "
               "request was answered while the load ran.\n")
    out.append("| scenario | server | conns | req/s | p50 ms | p99 ms | max ms | errors | "
               "RSS MiB | CPU % | others % | other |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for s in scenarios:
        for key in sorted((k for k in chosen if k[0] == s),
                          key=lambda k: (k[2] or 0, PEERS.index(k[1]))):
            r = chosen[key]
            other = []
            if r.get("retained_pct") is not None:
                other.append(f"unloaded {fmt(r['baseline_rps'])} req/s, kept "
                             f"{fmt(r['retained_pct'])}%, load {fmt(r['load_rps'])} req/s")
            if r.get("bytes_per_conn") is not None:
                at_1s = (f" ({fmt(r['bytes_per_conn_1s'])} at 1 s)"
                         if r.get("bytes_per_conn_1s") is not None else "")
                if r.get("bytes_per_conn_100ms") is not None:
                    at_1s += (f"; {fmt(r['bytes_per_conn_100ms'])} 100 ms after one more "
                              f"request on each")
                other.append(f"{fmt(r['idle_conns'])} idle: RSS {fmt(r['rss_before_kib'])} → "
                             f"{fmt(r['rss_after_kib'])} KiB, "
                             f"{fmt(r['bytes_per_conn'])} B/conn at 3 s{at_1s}")
            if r.get("messages_per_s") is not None and s == "grpc-stream":
                other.append(f"{fmt(r['messages_per_s'])} messages/s")
            if r.get("client_cpu_pct") is not None:
                other.append(f"h2load CPU {fmt(r['client_cpu_pct'])}%")
            if r.get("error_detail"):
                other.append(r["error_detail"])
            if r.get("note"):
                other.append(r["note"])
            if len(r.get("rounds", [])) > 1:
                other.append("rounds: " + ", ".join(fmt(v) for v in r["rounds"]))
            rss = r["rss_kib"] / 1024 if r.get("rss_kib") is not None else None
            labels = GRPC_LABELS if s in GRPC else LABELS
            server = labels[r["peer"]] + (f" ({r['procs']} core{'s' if r['procs'] > 1 else ''})"
                                          if s == "scaling" else "")
            out.append(f"| {s} | {server} | {fmt(r['conns'])} | {fmt(r['requests_per_s'])} | "
                       f"{fmt(r['p50_ms'])} | {fmt(r['p99_ms'])} | {fmt(r['max_ms'])} | "
                       f"{fmt(r['errors'])} | {fmt(rss, 1)} | {fmt(r['cpu_pct'])} | "
                       f"{fmt(r['others_pct'])} | "
                       f"{'; '.join(other)} |")
    out.append("\n</details>\n")

    skipped = [r for r in rows if r["status"] == "skipped"]
    if skipped:
        out.append("Not run:\n")
        for r in skipped:
            labels = GRPC_LABELS if r["scenario"] in GRPC else LABELS
            who = "" if r["peer"] == "all" else f"{labels.get(r['peer'], r['peer'])}, "
            out.append(f"- {who}{r['scenario']}: {r['note']}")
        out.append("")
    out.append("Scenarios:\n")
    for s in scenarios:
        out.append(f"- **{s}**: {meta.get('scenario.' + s, '')}")
    return "\n".join(out) + "\n"


def write_dat(path, header, lines):
    """A gnuplot table: quoted column heads, then rows of a label (a string, or a
    number for an x axis) and values, "?" where there is none."""
    with open(path, "w") as f:
        f.write(" ".join(f'"{h}"' for h in header) + "\n")
        for label, values in lines:
            head = f"{label:g}" if isinstance(label, (int, float)) else f'"{label}"'
            f.write(head + " " + " ".join("?" if v is None else f"{v:g}" for v in values) + "\n")


def charts(folder, meta, rows, chosen):
    if shutil.which("gnuplot") is None:
        print("report.py: gnuplot not installed, no charts", file=sys.stderr)
        return []
    peers = [p for p in PEERS if not p.startswith("grpc-") and
             any(r["peer"] == p and r["scenario"] in HTTP for r in rows)]
    procs = int(meta.get("procs", 1))
    title = f"{meta.get('date_utc', '')}, {meta.get('machine', '')}".replace('"', "'")
    header = ["scenario"] + [LABELS[p] for p in peers]
    made = []

    def value(s, p, field, scale=1.0, pr=procs):
        r = chosen.get((s, p, pr))
        if r is None or r["status"] != "ok" or r.get(field) is None:
            return None
        return r[field] * scale

    def present(field, names):
        return [s for s in names if any(value(s, p, field) is not None for p in peers)]

    plot_cols = ", ".join(
        f"'{{dat}}' using {i + 2}{':xtic(1)' if i == 0 else ''} title columnheader({i + 2})"
        for i in range(len(peers)))
    common = f"""set terminal pngcairo size 1400,{{h}} font 'sans,10'
set output '{{png}}'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set datafile missing '?'
set key top right
set grid ytics
set xtics noenhanced
set key noenhanced
"""

    def draw(name, height, body):
        gp = os.path.join(folder, name + ".gp")
        with open(gp, "w") as f:
            f.write(common.format(h=height, png=name + ".png") + body)
        res = subprocess.run(["gnuplot", name + ".gp"], cwd=folder, capture_output=True,
                             text=True)
        if res.returncode != 0 or not os.path.exists(os.path.join(folder, name + ".png")):
            print(f"report.py: gnuplot {name}.gp failed: {res.stderr.strip()}", file=sys.stderr)
            return
        made.append(name + ".png")

    # Throughput: every scenario measured in requests/s; pipelining, an order of
    # magnitude above the rest, on a scale of its own at the right.
    rate = present("requests_per_s", [s for s in HTTP if s not in ("idle", "idle-ws", "scaling")])
    if rate:
        groups = [[s for s in rate if s != "pipeline16"], [s for s in rate if s == "pipeline16"]]
        groups = [g for g in groups if g]
        body = f"""set multiplot title "Requests per second, {procs} core(s) per server\\n{title}" noenhanced
set ylabel 'thousand requests/s'
set yrange [0:*]
set bmargin 3
"""
        left = 0.0
        for i, g in enumerate(groups):
            dat = f"throughput{i}.dat"
            write_dat(os.path.join(folder, dat), header,
                      [(s, [value(s, p, "requests_per_s", 1e-3) for p in peers]) for s in g])
            width = 0.84 if len(groups) > 1 and i == 0 else (1.0 - left)
            body += (f"set origin {left},0\nset size {width},0.92\n"
                     f"{'unset key' if i else ''}\n"
                     f"plot {plot_cols.format(dat=dat)}\n"
                     "unset ylabel\n")
            left += width
        draw("throughput", 600, body + "unset multiplot\n")

    # Latency: p50, p99 and max per scenario, log scale.
    lat = present("p99_ms", [s for s in HTTP if s not in ("idle", "idle-ws", "scaling")])
    if lat:
        panels = []
        for field, label in (("p50_ms", "p50"), ("p99_ms", "p99"), ("max_ms", "max")):
            dat = f"latency_{label}.dat"
            write_dat(os.path.join(folder, dat), header,
                      [(s, [value(s, p, field) for p in peers]) for s in lat])
            panels.append(f"set title '{label} latency (ms, log scale)'\n"
                          f"plot {plot_cols.format(dat=dat)}\n")
        draw("latency", 1200, "set logscale y\nset multiplot layout 3,1\n" + "".join(panels) +
             "unset multiplot\n")

    # Memory: bytes per idle connection, and RSS at the end of each load scenario.
    idle = value("idle", "goro", "bytes_per_conn") is not None or any(
        value("idle", p, "bytes_per_conn") is not None for p in peers)
    mem = present("rss_kib", [s for s in HTTP if s not in ("idle", "idle-ws", "scaling")])
    if idle or mem:
        body = f"set multiplot layout {2 if idle and mem else 1},1\n"
        if idle:
            write_dat(os.path.join(folder, "rss_idle.dat"), header,
                      [(f"{meta.get('idle_conns', '')} idle connections",
                        [value("idle", p, "bytes_per_conn", 1 / 1024) for p in peers])])
            body += ("set title 'Server RSS per idle keep-alive connection (KiB)'\n"
                     "set yrange [0:*]\n"
                     f"plot {plot_cols.format(dat='rss_idle.dat')}\n")
        if mem:
            write_dat(os.path.join(folder, "rss_load.dat"), header,
                      [(s, [value(s, p, "rss_kib", 1 / 1024) for p in peers]) for s in mem])
            body += ("set title 'Server RSS at the end of each scenario (MiB, log scale)'\n"
                     "set logscale y\n"
                     f"plot {plot_cols.format(dat='rss_load.dat')}\n")
        draw("rss", 1000 if idle and mem else 500, body + "unset multiplot\n")

    # gRPC: the three scenarios' figures and the unary latencies, one panel each, with
    # the gRPC servers as the bars.
    gpeers = [p for p in GRPC_PEERS if any(r["peer"] == p and r["scenario"] in GRPC
                                           for r in rows)]
    panels = [(s, field, scale, label) for s, field, scale, label in (
        ("grpc-unary", "requests_per_s", 1e-3, "unary calls/s (thousands) ↑"),
        ("grpc-stream", "messages_per_s", 1e-3, "streamed messages/s (thousands) ↑"),
        ("grpc-unary", "p50_ms", 1, "unary p50 ms per call ↓"),
        ("grpc-unary", "p99_ms", 1, "unary p99 ms per call ↓"),
        ("grpc-idle", "bytes_per_conn", 1 / 1024, "server KiB per idle gRPC connection ↓"),
    ) if any(value(s, p, field) is not None for p in gpeers)]
    if gpeers and panels:
        # Each panel: one box per server, named under it, coloured by its place.
        body = (f"set multiplot layout 1,{len(panels)} title \"gRPC, h2c, {procs} core(s) per "
                f"server\\n{title}\" noenhanced\nset yrange [0:*]\nset xrange [-0.6:"
                f"{len(gpeers) - 0.4}]\nset boxwidth 0.7\nset key autotitle columnhead\nunset key\n"
                "set xtics scale 0\n")
        for i, (s, field, scale, label) in enumerate(panels):
            dat = f"grpc{i}.dat"
            write_dat(os.path.join(folder, dat), ["server", "value"],
                      [(GRPC_LABELS[p], [value(s, p, field, scale)]) for p in gpeers])
            body += (f"set title '{label}' noenhanced\n"
                     f"plot '{dat}' using 0:2:($0 + 1):xtic(1) with boxes lc variable\n")
        draw("grpc", 500, body + "unset multiplot\n")

    # Scaling: requests/s against cores.
    scale = sorted({r["procs"] for r in rows if r["scenario"] == "scaling" and r["status"] == "ok"})
    if len(scale) > 1:
        write_dat(os.path.join(folder, "scaling.dat"), ["cores"] + [LABELS[p] for p in peers],
                  [(n, [value("scaling", p, "requests_per_s", 1e-3, n) for p in peers])
                   for n in scale])
        lines = ", ".join(f"'scaling.dat' using 1:{i + 2} with linespoints lw 2 "
                          f"title columnheader({i + 2})" for i in range(len(peers)))
        draw("scaling", 600, f"""set style data linespoints
set key top left
set title "GET /plaintext, requests/s against server cores\\n{title}" noenhanced
set xlabel 'cores (server); the clients get as many'
set ylabel 'thousand requests/s'
set logscale x 2
set yrange [0:*]
plot {lines}
""")
    return made


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = sys.argv[1]
    meta, rows = load(folder)
    chosen = pick_median(rows)
    text = table(meta, rows, chosen)
    made = charts(folder, meta, rows, chosen)
    if made:
        text += "\nCharts: " + ", ".join(f"[{m}]({m})" for m in made) + "\n"
    with open(os.path.join(folder, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows,
                   "chosen": [dict(r, scenario=k[0], peer=k[1]) for k, r in chosen.items()]},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
