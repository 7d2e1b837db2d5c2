"""Aggregation for scripts/eval-quality.sh: parsing `kvedge perplexity --json`
lines, quality deltas and compression ratios, CSV rows. Stdlib only."""

import json
import math

# Bytes of one 32-token block of one lane for head_dim d (simd/kv_format.h):
# codes plus f16 scale and min per channel (keys) or per 32 elements (values).
G = 32


def key_block_bytes(fmt, d):
    bits = {"f32": 32, "f16": 16, "int8": 8, "int4": 4}[fmt]
    codes = G * d * bits // 8
    return codes if fmt in ("f32", "f16") else codes + 4 * d


def value_block_bytes(fmt, d):
    bits = {"f32": 32, "f16": 16, "int8": 8, "int4": 4}[fmt]
    codes = G * d * bits // 8
    return codes if fmt in ("f32", "f16") else codes + 4 * (G * d // 32)


def block_ratio(key_fmt, value_fmt, d):
    """f16 bytes of a sealed block pair ÷ bytes in the given formats: the
    compression quantization alone gives, before sinks and the hot tail."""
    f16 = key_block_bytes("f16", d) + value_block_bytes("f16", d)
    return f16 / (key_block_bytes(key_fmt, d) + value_block_bytes(value_fmt, d))


REQUIRED = ("tokens", "nll", "ppl", "kv_bytes", "kv_bytes_f16_full", "compression",
            "compression_avg", "compression_worst", "decode_tokens_per_s", "bucket_nll")


def parse_result(text):
    """The last JSON object line of kvedge's stdout, checked: required fields
    present and every number finite (the --quick smoke test's only check)."""
    lines = [l for l in text.strip().splitlines() if l.startswith("{")]
    if not lines:
        raise ValueError("no JSON object in kvedge output")
    r = json.loads(lines[-1])
    missing = [k for k in REQUIRED if k not in r]
    if missing:
        raise ValueError("kvedge JSON lacks " + ", ".join(missing))
    for k, v in r.items():
        for x in (v if isinstance(v, list) else [v]):
            if isinstance(x, float) and not math.isfinite(x):
                raise ValueError("non-finite %s in kvedge JSON" % k)
    if r["kv_bytes"] > 0 and abs(r["compression"] - r["kv_bytes_f16_full"] / r["kv_bytes"]) > 1e-6 * r["compression"]:
        raise ValueError("compression != kv_bytes_f16_full / kv_bytes")
    return r


def delta_ppl_pct(ppl, ref_ppl):
    """Relative perplexity change in percent (positive: worse)."""
    return 100.0 * (ppl / ref_ppl - 1.0)


def reference_of(r):
    """The reference a result is judged against: the f32 full cache while the
    stream stays inside the trained context, the recompute oracle past it.
    Returns (name, ppl, kld, top1) or None when no twin ran."""
    inside = r.get("tokens_past_ctx", 0) == 0
    if inside and "kld" in r:
        return ("full-f32", None, r["kld"], r["top1_agree"])
    if "oracle_kld" in r:
        return ("oracle", r["oracle_ppl"], r["oracle_kld"], r["oracle_top1_agree"])
    return None


def bucket_ppl(bucket_nll):
    return [math.exp(x) for x in bucket_nll]


CSV_FIELDS = ("name", "group", "model", "tokens", "policy", "key_format", "value_format", "key_axis",
              "key_rope", "hot_tail", "positions", "sinks", "heavy", "window", "capacity", "h2o_score",
              "h2o_decay", "h2o_lifetime", "ppl", "ref", "ref_ppl", "dppl_pct", "kld", "top1",
              "compression_avg", "compression_worst", "compression", "kv_bytes", "kv_bytes_f16_full",
              "decode_tokens_per_s")


def row(name, group, r, ref_ppl):
    """One CSV/table row. ref_ppl: perplexity of the reference on the same
    tokens (full f32 run, or the oracle's)."""
    ref = reference_of(r)
    out = {k: r.get(k, "") for k in CSV_FIELDS}
    out.update(name=name, group=group, model=r["model"].rsplit("/", 1)[-1])
    out["ref"] = ref[0] if ref else ""
    out["ref_ppl"] = ref_ppl if ref_ppl else ""
    out["dppl_pct"] = delta_ppl_pct(r["ppl"], ref_ppl) if ref_ppl else ""
    out["kld"] = ref[2] if ref else ""
    out["top1"] = ref[3] if ref else ""
    return out
