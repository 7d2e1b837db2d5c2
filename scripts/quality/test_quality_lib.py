"""Tests of the evaluator's parsing and ratio arithmetic (run by ctest)."""

import json
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality_lib as q  # noqa: E402


def result(**kw):
    r = dict(model="/m/stories260K.bin", tokens=511, nll=1.0, ppl=math.e, kv_bytes=1000, kv_bytes_f16_full=5000,
             compression=5.0, compression_avg=6.0, compression_worst=4.0, decode_tokens_per_s=100.0,
             bucket=1024, bucket_nll=[1.0], tokens_past_ctx=0)
    r.update(kw)
    return r


class BlockBytes(unittest.TestCase):
    def test_int4_is_exactly_3_2x_at_head_dim_8(self):
        # 128 code bytes + 16 f16 scale/min pairs (keys: per channel; values: per 32 elements).
        self.assertEqual(q.key_block_bytes("int4", 8), 160)
        self.assertEqual(q.value_block_bytes("int4", 8), 160)
        self.assertAlmostEqual(q.block_ratio("int4", "int4", 8), 3.2)

    def test_other_formats(self):
        self.assertAlmostEqual(q.block_ratio("f16", "f16", 8), 1.0)
        self.assertAlmostEqual(q.block_ratio("f32", "f32", 8), 0.5)
        self.assertAlmostEqual(q.block_ratio("int8", "int8", 8), 512 / 288)
        # Scale+min cost 1 bit per element for keys and values alike: 5 bits.
        self.assertAlmostEqual(q.block_ratio("int4", "int4", 128), 3.2)


class Parse(unittest.TestCase):
    def test_takes_the_json_line(self):
        r = q.parse_result("warming up\n" + json.dumps(result()) + "\n")
        self.assertEqual(r["compression"], 5.0)

    def test_rejects_missing_and_non_finite(self):
        with self.assertRaises(ValueError):
            q.parse_result("no json here")
        bad = result()
        del bad["ppl"]
        with self.assertRaises(ValueError):
            q.parse_result(json.dumps(bad))
        with self.assertRaises(ValueError):  # json.dumps writes NaN, which Python parses back
            q.parse_result(json.dumps(result(bucket_nll=[1.0, float("nan")])))

    def test_rejects_inconsistent_compression(self):
        with self.assertRaises(ValueError):
            q.parse_result(json.dumps(result(compression=4.0)))


class Reference(unittest.TestCase):
    def test_full_inside_oracle_past(self):
        inside = result(kld=0.01, top1_agree=0.9, oracle_kld=0.02, oracle_top1_agree=0.8, oracle_ppl=3.0)
        self.assertEqual(q.reference_of(inside)[0], "full-f32")
        past = dict(inside, tokens_past_ctx=100)
        self.assertEqual(q.reference_of(past), ("oracle", 3.0, 0.02, 0.8))
        self.assertIsNone(q.reference_of(result()))

    def test_delta_and_row(self):
        self.assertAlmostEqual(q.delta_ppl_pct(3.7259, 3.7107), 0.4096, places=3)
        r = q.row("x", "formats", result(kld=0.5, top1_agree=0.75), ref_ppl=math.e / 1.01)
        self.assertAlmostEqual(r["dppl_pct"], 1.0)
        self.assertEqual((r["model"], r["ref"], r["kld"], r["top1"]), ("stories260K.bin", "full-f32", 0.5, 0.75))
        self.assertEqual(q.bucket_ppl([0.0, math.log(2)]), [1.0, 2.0])


if __name__ == "__main__":
    unittest.main()
