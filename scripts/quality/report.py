"""Renders docs/quality.md and its plots (gnuplot) from evaluator results.
The discussion is scripts/quality/discussion.md, written by hand from the
measured tables; everything else here is generated."""

import glob
import math
import os
import subprocess

import quality_lib as q

HERE = os.path.dirname(os.path.abspath(__file__))


def fmt(x, spec):
    return "" if x == "" or x is None else spec % x


def table(rows, title):
    out = ["#### " + title, "",
           "| config | model | tokens | ppl | ref ppl | ΔPPL | KL | top-1 | compression end / avg / worst | tok/s |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append("| %s | %s | %s | %.4f | %s | %s | %s | %s | %.1fx / %.1fx / %.1fx | %.0f |" % (
            r["name"], r["model"].split("260K")[0], r["tokens"], r["ppl"], fmt(r["ref_ppl"], "%.4f"),
            fmt(r["dppl_pct"], "%+.2f%%"), fmt(r["kld"], "%.5f"), fmt(r["top1"] * 100 if r["top1"] != "" else "", "%.1f%%"),
            r["compression"], r["compression_avg"], r["compression_worst"], r["decode_tokens_per_s"]))
    return "\n".join(out) + "\n"


def find(rows, name, group, model="stories260K.bin"):
    for r in rows:
        if r["name"] == name and r["group"] == group and r["model"] == model:
            return r
    return None


def goals(rows):
    """Goal checks from the issue, each with the measured figure."""
    out = ["| goal | target | measured | status |", "|---|---|---|---|"]

    def add(goal, target, measured, ok):
        status = ok if isinstance(ok, str) else "met" if ok else "**missed**"
        out.append("| %s | %s | %s | %s |" % (goal, target, measured, status))

    for name in ("int8/int8 sinks", "int8/int8 full"):
        r = find(rows, name, "formats")
        if r:
            add("INT8 inside the context (%s)" % name, "ΔPPL ≤ 0.1%", "%+.3f%%" % r["dppl_pct"], abs(r["dppl_pct"]) <= 0.1)
    for name, group in (("int4/int4 sinks", "formats"), ("int4/int4 full", "formats"),
                        ("int4/int4 sinks pre-RoPE keys", "keys"), ("int4/int4 full pre-RoPE keys", "keys")):
        r = find(rows, name, group)
        if r:
            ok = r["dppl_pct"] <= 0.5 and r["kld"] <= 0.003 and r["top1"] >= 0.97
            add("INT4 channel-wise (%s)" % name, "ΔPPL ≤ 0.5%, KL ≤ 0.003, top-1 ≥ 97%",
                "%+.2f%%, %.4f, %.1f%%" % (r["dppl_pct"], r["kld"], 100 * r["top1"]), ok)
    for name in ("int4/int4 sinks token-wise keys", "int4/int4 full token-wise keys"):
        r = find(rows, name, "keys")
        if r:
            add("token-wise INT4 keys (%s)" % name, "expected far worse",
                "%+.2f%%, KL %.4f, top-1 %.1f%%" % (r["dppl_pct"], r["kld"], 100 * r["top1"]), "shown")
    r = find(rows, "int4/int4 full", "formats")
    if r:
        add("INT4 bytes vs f16 (head_dim 8)", "≥ 3.2x", "block formats %.2fx; arena (policy full, 511 tokens incl. f16 tail) %.2fx"
            % (q.block_ratio("int4", "int4", 8), r["compression"]), r["compression"] >= 3.2)
    for name, group in (("int4/int4 sinks", "formats"), ("int4/int4 full no hot tail", "keys")):
        r = find(rows, name, group)
        if r:
            add("INT4 arena, %s, 511 tokens" % name, "(report)", "%.2fx" % r["compression"], "—")
    long_best = None  # best perplexity among INT4 sinks/window at 128–256 tokens with ≥ 100x at the end
    for r in rows:
        if r["group"] == "long" and r["model"] == "stories260K.bin" and r["key_format"] == "int4" and \
                r["value_format"] == "int4" and r["policy"] in ("sinks", "window") and \
                r["capacity"] in range(128, 257) and r["compression"] >= 100:
            if long_best is None or r["ppl"] < long_best["ppl"]:
                long_best = r
    if long_best:
        add("long stream, best INT4 sinks/window at 128–256 with ≥ 100x (%s)" % long_best["name"],
            "ppl ≤ oracle", "ppl %.4f vs oracle %.4f (%+.2f%%), KL %.4f; %.0fx at the end, %.0fx averaged" % (
                long_best["ppl"], long_best["ref_ppl"], long_best["dppl_pct"], long_best["kld"],
                long_best["compression"], long_best["compression_avg"]), long_best["ppl"] <= long_best["ref_ppl"])
    for budget in (128, 256):
        w = find(rows, "int4/int4 window c%d" % budget, "long")
        hs = [r for r in rows if r["group"] == "long" and r["policy"] == "h2o" and r["capacity"] == budget
              and r["model"] == "stories260K.bin" and r["positions"] == "in-cache"]
        hin = [r for r in rows if r["group"] == "policies-in" and r["policy"] == "h2o" and r["capacity"] == budget
               and r["positions"] == "in-cache"]
        win_in = [find(rows, "int4/int4 window c%d" % budget, "policies-in")]
        if w and hs:
            best = min(hs, key=lambda r: r["ppl"])
            add("h2o ≥ window, long stream, c=%d (best: %s)" % (budget, best["name"]), "ppl ≤ window",
                "%.4f vs %.4f" % (best["ppl"], w["ppl"]), best["ppl"] <= w["ppl"])
            same = [r for r in hin if r["name"] == best["name"]]
            if same and win_in[0]:
                add("same h2o inside the context, c=%d" % budget, "ppl < window",
                    "%.4f vs %.4f" % (same[0]["ppl"], win_in[0]["ppl"]), same[0]["ppl"] < win_in[0]["ppl"])
    return "\n".join(out) + "\n"


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def plots(out_dir, ordered, rows):
    qdir = os.path.join(out_dir, "quality")
    for old in glob.glob(os.path.join(qdir, "plot*.dat")):  # series of an earlier matrix
        os.remove(old)
    # Plot 1: perplexity per bucket on the long stream (stories, c=256 or the quick configs).
    series = []
    oracle = None
    wanted = ["f32/f32 full absolute c8193", "int4/int4 window c256", "int4/int4 sinks S=4 c256",
              "int4/int4 h2o H=124 c256", "int4/int4 h2o tova H=60 c256", "int4/int4 h2o cumulative lifetime256 H=60 c256",
              "int4 sinks c128", "int4 h2o tova c128"]
    for c, r in ordered:
        if c.model == "stories" and c.group == "long" and c.name in wanted:
            series.append((c.name, r))
        if c.model == "stories" and oracle is None and "oracle_bucket_nll" in r and r["tokens_past_ctx"] > 0:
            oracle = r
    if oracle:
        series.append(("recompute oracle", dict(bucket=oracle["bucket"], bucket_nll=oracle["oracle_bucket_nll"])))
    lines = []
    for i, (name, r) in enumerate(series):
        path = os.path.join(qdir, "plot1_%d.dat" % i)
        with open(path, "w") as f:
            for b, nll in enumerate(r["bucket_nll"]):
                f.write("%d %.6f\n" % ((b + 1) * r["bucket"], math.exp(nll)))
        lines.append("'%s' using 1:2 with linespoints title '%s'" % (path, name.replace("_", " ")))
    if lines:
        gnuplot("""set terminal pngcairo size 1000,700
set output '%s'
set title 'stories260K, tinystories valid as one stream: perplexity per 1,024 tokens'
set xlabel 'tokens processed'
set ylabel 'perplexity of the bucket'
set yrange [3.3:5.5]
set xtics 1024
set label 1 'f32 full cache, absolute positions: off the scale past 2,048 tokens (63 to 1,000)' at graph 0.02, graph 0.95
set key below
set grid
plot %s
""" % (os.path.join(qdir, "plot1_ppl_vs_tokens.png"), ", ".join(lines)))
    # Plot 2: quality loss (KL to the reference) vs compression at the end of
    # the stream; a curve per family through its best config per budget.
    fams = {}
    for r in rows:
        if r["kld"] == "" or r["model"] != "stories260K.bin" or r["positions"] != "in-cache":
            continue
        kind = "%s %s/%s" % (r["policy"], r["key_format"], r["value_format"])
        if r["key_rope"] == "pre":
            kind += " pre-RoPE"
        if r["group"] == "long" and r["policy"] != "full":
            fam = "long stream: " + kind
        elif r["group"] == "policies-in":
            fam = "in context: " + kind
        elif r["group"] == "formats" and r["policy"] == "full":
            fam = "in context: formats, policy full"
        else:
            continue
        key = r["capacity"] if r["group"] != "formats" else r["name"]
        best = fams.setdefault(fam, {}).get(key)
        if best is None or r["kld"] < best[1]:
            fams[fam][key] = (r["compression"], max(r["kld"], 1e-6))
    lines = []
    for i, (fam, pts) in enumerate(sorted(fams.items())):
        if len(pts) < 2 and "formats" not in fam:
            continue
        path = os.path.join(qdir, "plot2_%d.dat" % i)
        with open(path, "w") as f:
            for x, y in sorted(pts.values()):
                f.write("%.4f %.8f\n" % (x, y))
        lines.append("'%s' using 1:2 with linespoints title '%s'" % (path, fam))
    if lines:
        gnuplot("""set terminal pngcairo size 1000,560
set output '%s'
set title 'stories260K: KL to the reference vs compression (best config per budget)'
set xlabel 'compression at the end of the stream: f16 full bytes / held bytes (log)'
set ylabel 'KL per token, nats (vs f32 full inside the context, oracle past it)'
set logscale xy
set format y '%%.0e'
set object 1 rect from 30, graph 0 to graph 1, graph 1 fc rgb '#e8f4e8' behind
set label 1 '≥30x' at 32, graph 0.95
set key outside right
set grid
plot %s
""" % (os.path.join(qdir, "plot2_loss_vs_compression.png"), ", ".join(lines)))


JSON_FIELDS = """## `kvedge perplexity --json` fields

- Stream: `tokens` scored (each predicts the next), `context_length` T, `tokens_in_ctx` (stream index < T:
  at most T tokens attended) and `tokens_past_ctx`; `nll`, `ppl`, `nll_in_ctx`, `nll_past_ctx`;
  `bucket_nll[]` per `bucket` tokens.
- Cache: `policy`, `key_format`, `value_format`, `key_axis` (channel|token), `key_rope` (in-block|post|pre),
  `hot_tail`, `positions`, `sinks`, `heavy`, `window`, `capacity`, `h2o_score`, `h2o_decay`, `h2o_lifetime`.
- Bytes: `kv_bytes` held at the end, `kv_tokens_held`, `kv_arena_bytes` reserved, `kv_bytes_f16_full` (an f16 cache
  of every token seen); `compression` = `kv_bytes_f16_full / kv_bytes` at the end, `compression_avg` over the
  32-token chunks, `compression_worst` the lowest once the cache is full; `decode_tokens_per_s` of the tested
  cache alone; `peak_rss_bytes`.
- `--compare-full` (an f32 cache holding everything, absolute positions): `kld`, `top1_agree`, each also
  `_in_ctx` / `_past_ctx`; `full_nll`, `full_ppl`, `full_bucket_nll[]`.
- `--oracle` (the recompute oracle; identical to the full cache inside the context): `oracle_kld`,
  `oracle_top1_agree` (+ `_in_ctx` / `_past_ctx`), `oracle_nll`, `oracle_ppl`, `oracle_nll_in_ctx`,
  `oracle_nll_past_ctx`, `oracle_bucket_nll[]`. KL is KL(reference ‖ tested) in nats per token.
"""


def render(out_dir, ordered, rows, quick, seconds):
    plots(out_dir, ordered, rows)
    groups = [("formats", "Formats inside the context (T−1 tokens, vs f32 full cache)"),
              ("keys", "Key ablations inside the context (vs f32 full cache)"),
              ("policies-in", "Policies at equal budgets inside the context (511 tokens, vs f32 full cache)"),
              ("long", "Long stream (vs the recompute oracle; ΔPPL = ppl / oracle ppl − 1)")]
    md = ["# KV-cache quality", "",
          "Generated by `scripts/eval-quality.sh%s` (%d runs, %.0f s on this machine). Do not edit by hand: "
          "the discussion comes from `scripts/quality/discussion.md`, everything else from "
          "`docs/quality/results.json`." % (" --quick" if quick else "", len(rows), seconds), "",
          "Text: `tinystories_valid_head.txt` as one stream after one BOS (held out for stories260K; out of domain "
          "for aidreams260K). Compression = bytes an f16 cache of every token seen needs ÷ bytes the arena holds "
          "(sinks, blocks, tail, h2o scores) at the end of the stream / averaged over its 32-token chunks / worst "
          "chunk once the cache is full (sampled at chunk ends). KL is KL(reference ‖ tested) per token in nats. Tokens/s: the tested cache alone, one thread, "
          "on a shared 2-core machine (noisy).", ""]
    if not quick:
        with open(os.path.join(HERE, "discussion.md")) as f:
            md += [f.read(), ""]
    md += [JSON_FIELDS, "## Goals", "", goals(rows), "## Plots", "",
           "![perplexity per bucket](quality/plot1_ppl_vs_tokens.png)", "",
           "![KL vs compression](quality/plot2_loss_vs_compression.png)", "", "## Tables", ""]
    for g, title in groups:
        rs = [r for r in rows if r["group"] == g]
        if rs:
            md.append(table(rs, title))
    with open(os.path.join(out_dir, "quality.md"), "w") as f:
        f.write("\n".join(md))
