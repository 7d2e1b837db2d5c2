"""The quality evaluator: runs the configuration matrix through
`kvedge perplexity --json`, writes docs/quality/results.{json,csv}, plots with
gnuplot and regenerates docs/quality.md. See scripts/eval-quality.sh."""

import argparse
import concurrent.futures
import csv
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality_lib as q  # noqa: E402
import report  # noqa: E402

MODELS = {
    "stories": ("stories260K.bin", "tok512.bin", 512),
    "aidreams": ("aidreams260K.bin", "aidreams260K_tok512.bin", 128),
}
TEXT = "tinystories_valid_head.txt"
LONG = 8192


class Config:
    """One kvedge perplexity run: `args` are the KV flags."""

    def __init__(self, name, group, model, tokens, args, compare):
        self.name, self.group, self.model, self.tokens = name, group, model, tokens
        self.args, self.compare = args, compare  # compare: "full" or "oracle"

    def command(self, kvedge, shared):
        bin_, tok, _ = MODELS[self.model]
        cmd = [kvedge, "perplexity", "-m", os.path.join(shared, "models", bin_), "--tokenizer",
               os.path.join(shared, "models", tok), "-f", os.path.join(shared, "data", TEXT),
               "--max-tokens", str(self.tokens), "--json", "-t", "1"]
        cmd += ["--compare-full"] if self.compare == "full" else ["--oracle"]
        return cmd + self.args


FORMATS = [("f32", "f32"), ("f16", "f16"), ("int8", "int8"), ("int4", "int4"), ("int4", "int8"), ("int8", "int4")]


def kv(k, v):
    return ["--kv-keys", k, "--kv-values", v]


def matrix(quick):
    """The configurations. Inside the context: T−1 tokens (every prediction
    sees ≤ T tokens) against the f32 full cache. Long: LONG tokens against the
    recompute oracle."""
    c = []
    s_in = MODELS["stories"][2] - 1
    if quick:
        c.append(Config("int8/int8 full", "formats", "stories", 255, kv("int8", "int8") + ["--policy", "full", "-c", "512"], "full"))
        c.append(Config("int4/int4 sinks", "formats", "stories", 255, kv("int4", "int4") + ["--policy", "sinks", "-c", "516"], "full"))
        c.append(Config("int4 sinks c128", "long", "stories", 1536, kv("int4", "int4") + ["--policy", "sinks", "-c", "128"], "oracle"))
        c.append(Config("int4 h2o tova c128", "long", "stories", 1536,
                        kv("int4", "int4") + ["--policy", "h2o", "-c", "128", "--h2o-score", "tova"], "oracle"))
        c.append(Config("int4 window c64", "long", "aidreams", 512, kv("int4", "int4") + ["--policy", "window", "-c", "64"], "oracle"))
        return c
    for model in ("stories", "aidreams"):
        t = MODELS[model][2]
        for k, v in FORMATS:
            c.append(Config("%s/%s full" % (k, v), "formats", model, t - 1, kv(k, v) + ["--policy", "full", "-c", str(t)], "full"))
            c.append(Config("%s/%s sinks" % (k, v), "formats", model, t - 1,
                            kv(k, v) + ["--policy", "sinks", "-c", str(t + 4)], "full"))
    # Key ablations inside the context.
    variants = [("token-wise keys", ["--key-axis", "token"]), ("no hot tail", ["--no-hot-tail"]),
                ("post-RoPE keys", ["--key-rope", "post"]), ("pre-RoPE keys", ["--key-rope", "pre"]),
                ("token-wise, no hot tail", ["--key-axis", "token", "--no-hot-tail"])]
    for label, extra in variants:
        for pol, cap in (("full", 512), ("sinks", 516)):
            c.append(Config("int4/int4 %s %s" % (pol, label), "keys", "stories", s_in,
                            kv("int4", "int4") + ["--policy", pol, "-c", str(cap)] + extra, "full"))
        c.append(Config("int8/int8 sinks %s" % label, "keys", "stories", s_in,
                        kv("int8", "int8") + ["--policy", "sinks", "-c", "516"] + extra, "full"))
    for label, extra in (("int4/int8 pre-RoPE keys", ["--key-rope", "pre"]), ("int4/int8 token-wise keys", ["--key-axis", "token"])):
        c.append(Config(label + " sinks", "keys", "stories", s_in,
                        kv(*label.split()[0].split("/")) + ["--policy", "sinks", "-c", "516"] + extra, "full"))
    for label, extra in variants[:4]:
        c.append(Config("int4/int4 full %s" % label, "keys", "aidreams", 127,
                        kv("int4", "int4") + ["--policy", "full", "-c", "128"] + extra, "full"))
    # Policies at equal budgets, inside the context and on the long stream.
    for tokens, group, compare in ((s_in, "policies-in", "full"), (LONG, "long", "oracle")):
        for budget in (64, 128, 256):
            fams = [("window", ["--policy", "window"])]
            fams += [("sinks S=%d" % s, ["--policy", "sinks", "--sinks", str(s)]) for s in (1, 2, 4, 8)]
            if budget >= 128:
                h = budget - 4 - (64 if budget == 128 else 128)  # S=4, W=64 / 128
                fams += [("h2o H=%d" % h, ["--policy", "h2o", "--heavy", str(h)]),
                         ("h2o decay0.99 H=%d" % h, ["--policy", "h2o", "--heavy", str(h), "--h2o-score", "decay"]),
                         ("h2o tova H=%d" % h, ["--policy", "h2o", "--heavy", str(h), "--h2o-score", "tova"]),
                         ("h2o age H=%d" % h, ["--policy", "h2o", "--heavy", str(h), "--h2o-score", "age"]),
                         ("h2o lifetime1024 H=%d" % h, ["--policy", "h2o", "--heavy", str(h), "--h2o-lifetime", "1024"])]
                # Fewer heavy hitters, a longer recent window.
                small = 28 if budget == 128 else 60
                fams += [("h2o H=%d" % small, ["--policy", "h2o", "--heavy", str(small)]),
                         ("h2o tova H=%d" % small, ["--policy", "h2o", "--heavy", str(small), "--h2o-score", "tova"])]
                if budget == 256:
                    fams += [("h2o H=188", ["--policy", "h2o", "--heavy", "188"]),
                             ("h2o tova H=188", ["--policy", "h2o", "--heavy", "188", "--h2o-score", "tova"])]
                fams += [("h2o abs H=%d" % h, ["--policy", "h2o", "--heavy", str(h), "--positions", "absolute"])]
            fams += [("sinks S=4 abs", ["--policy", "sinks", "--positions", "absolute"])]
            for label, extra in fams:
                formats = [("int4", "int4")]
                if group == "long" and budget == 256 and label in ("window", "sinks S=4", "h2o H=124"):
                    formats.append(("f32", "f32"))
                if group == "long" and budget == 256 and label == "sinks S=4":
                    formats += [("int8", "int8"), ("int4", "int8")]
                for k, v in formats:
                    c.append(Config("%s/%s %s c%d" % (k, v, label, budget), group, "stories", tokens,
                                    kv(k, v) + ["-c", str(budget)] + extra, compare))
    # Pre-RoPE INT4 keys (the slow path) and a budget between 128 and 256.
    for budget in (128, 160, 192, 256):
        for s in (1, 2, 4):
            for label, extra in (("", []), (" pre-RoPE keys", ["--key-rope", "pre"])):
                if budget in (128, 256) and not extra:
                    continue  # in-block at 128/256 is above
                c.append(Config("int4/int4 sinks S=%d%s c%d" % (s, label, budget), "long", "stories", LONG,
                                kv("int4", "int4") + ["-c", str(budget), "--policy", "sinks", "--sinks", str(s)] + extra,
                                "oracle"))
    # Equal bytes: int8 at 144 tokens vs int4 at 256 (9 vs 5 bits per element).
    c.append(Config("int8/int8 sinks S=2 c144", "long", "stories", LONG,
                    kv("int8", "int8") + ["-c", "144", "--policy", "sinks", "--sinks", "2"], "oracle"))
    # Bounded lifetimes: on a stream of short stories, old heavy hitters belong to other stories.
    for tokens, group, compare in ((s_in, "policies-in", "full"), (LONG, "long", "oracle")):
        for budget, h in ((128, 28), (256, 60)):
            for score in ("tova", "cumulative"):
                c.append(Config("int4/int4 h2o %s lifetime256 H=%d c%d" % (score, h, budget), group, "stories", tokens,
                                kv("int4", "int4") + ["-c", str(budget), "--policy", "h2o", "--heavy", str(h),
                                                      "--h2o-score", score, "--h2o-lifetime", "256"], compare))
    c.append(Config("int4/int4 window pre-RoPE keys c128", "long", "stories", LONG,
                    kv("int4", "int4") + ["-c", "128", "--policy", "window", "--key-rope", "pre"], "oracle"))
    c.append(Config("f32/f32 full absolute c%d" % (LONG + 1), "long", "stories", LONG,
                    kv("f32", "f32") + ["--policy", "full", "-c", str(LONG + 1)], "oracle"))
    for budget, fams in ((64, [("window", ["--policy", "window"]), ("sinks S=4", ["--policy", "sinks"])]),
                         (96, [("h2o H=28", ["--policy", "h2o", "--heavy", "28"]),
                               ("h2o tova H=28", ["--policy", "h2o", "--heavy", "28", "--h2o-score", "tova"]),
                               ("sinks S=4", ["--policy", "sinks"])])):
        for label, extra in fams:
            c.append(Config("int4/int4 %s c%d" % (label, budget), "long", "aidreams", LONG,
                            kv("int4", "int4") + ["-c", str(budget)] + extra, "oracle"))
    return c


def run_one(cfg, kvedge, shared):
    t0 = time.time()
    p = subprocess.run(cfg.command(kvedge, shared), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s: kvedge failed: %s" % (cfg.name, p.stderr.strip()))
    r = q.parse_result(p.stdout)
    r["_seconds"] = time.time() - t0
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kvedge", required=True)
    ap.add_argument("--shared", required=True, help="folder holding models/ and data/")
    ap.add_argument("--out", required=True, help="docs/ folder to write quality.md and quality/ into")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--render-only", action="store_true", help="re-render from <out>/quality/results.json")
    a = ap.parse_args()
    cfgs = matrix(a.quick)
    t0 = time.time()
    results = {}
    if a.render_only:
        with open(os.path.join(a.out, "quality", "results.json")) as f:
            saved = json.load(f)
        cfgs = [Config(x["name"], x["group"], x["model"], x["result"]["tokens"], x["args"], "") for x in saved]
        results = {id(c): x["result"] for c, x in zip(cfgs, saved)}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        futs = {} if a.render_only else {ex.submit(run_one, c, a.kvedge, a.shared): c for c in cfgs}
        for i, f in enumerate(concurrent.futures.as_completed(futs)):
            c = futs[f]
            results[id(c)] = f.result()
            print("[%3d/%d %5.0fs] %-11s %-48s %s ppl %.4f" % (i + 1, len(cfgs), time.time() - t0, c.group, c.name,
                                                              c.model, results[id(c)]["ppl"]), flush=True)
    ordered = [(c, results[id(c)]) for c in cfgs]
    rows = []
    for c, r in ordered:
        ref = q.reference_of(r)
        ref_ppl = r.get("full_ppl") if ref and ref[0] == "full-f32" else (ref[1] if ref else None)
        rows.append(q.row(c.name, c.group, r, ref_ppl))
    qdir = os.path.join(a.out, "quality")
    os.makedirs(qdir, exist_ok=True)
    with open(os.path.join(qdir, "results.json"), "w") as f:
        json.dump([dict(name=c.name, group=c.group, model=c.model, args=c.args, result=r) for c, r in ordered], f,
                  indent=1)
    with open(os.path.join(qdir, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=q.CSV_FIELDS)
        w.writeheader()
        w.writerows(rows)
    run_path = os.path.join(qdir, "run.json")
    if a.render_only:
        with open(run_path) as f:
            seconds = json.load(f)["seconds"]
    else:
        seconds = time.time() - t0
        with open(run_path, "w") as f:
            json.dump(dict(seconds=seconds, runs=len(ordered), quick=a.quick), f)
    report.render(a.out, ordered, rows, quick=a.quick, seconds=seconds)
    print("wrote %s/quality.md and %s in %.0f s" % (a.out, qdir, time.time() - t0))


if __name__ == "__main__":
    main()
