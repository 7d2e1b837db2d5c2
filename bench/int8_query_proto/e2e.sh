#!/bin/bash
# before/after interleaved per (depth, kv), rounds
for r in 1 2 3; do for d in 16384 4096; do for kv in int4 f16; do for b in before after; do
  v=$(KVEDGE_SIMD=AVX2 ./$b/kvedge bench -m /tmp/attn19/tl_q4_0.gguf --fill keys -d $d -n 8 --kv $kv --policy full -t 1 --json 2>/dev/null | python3 -c "
import sys,json
for l in sys.stdin:
  l=l.strip()
  if l.startswith('{'): j=json.loads(l); print(round(j['decode_cpu_ms_per_token'],1))")
  echo "$r $d $kv $b $v $(cut -d' ' -f1 /proc/loadavg)"
done; done; done; done
