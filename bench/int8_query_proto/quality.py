#!/usr/bin/env python3
"""int4 keys scored with int16 vs int8 query codes (prototype switch
KVEDGE_PROTO_QLEVELS in the scalar model) against the f32 full cache."""
import json, os, subprocess, sys, glob, math
kv = sys.argv[1]            # kvedge binary
shared = '/work/shared'
M = {'stories': ('stories260K.bin', 'tok512.bin', 511, 512), 'aidreams': ('aidreams260K.bin', 'aidreams260K_tok512.bin', 127, 128)}
variants = [('kernel (AVX2 int16)', None), ('exact f32 scores', '0'), ('int16 query model', '32767'), ('int8 query model', '127')]
fmts = [('int4', 'int4'), ('int4', 'f16')]
out = {}
for model in sys.argv[2].split(','):
    b, tok, ntok, cap = M[model]
    for kf, vf in fmts:
        for vname, lv in variants:
            env = dict(os.environ, KVEDGE_SIMD='AVX2')
            env.pop('KVEDGE_PROTO_QLEVELS', None)
            if lv is not None: env['KVEDGE_PROTO_QLEVELS'] = lv
            for text in sorted(glob.glob('/tmp/attn8q/chunks/*.txt')):
                cmd = [kv, 'perplexity', '-m', f'{shared}/models/{b}', '--tokenizer', f'{shared}/models/{tok}', '-f', text,
                       '--max-tokens', str(ntok), '--json', '-t', '1', '--compare-full', '--kv-keys', kf, '--kv-values', vf,
                       '--policy', 'full', '-c', str(cap)]
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if r.returncode: print(r.stderr); sys.exit(1)
                j = json.loads(r.stdout.strip().splitlines()[-1])
                out.setdefault(f'{model} {kf}/{vf} {vname}', []).append(
                    dict(text=os.path.basename(text), tokens=j['tokens'], nll=j['nll'], full_nll=math.log(j['full_ppl']),
                         kld=j['kld'], top1=j['top1_agree']))
            rows = out[f'{model} {kf}/{vf} {vname}']
            print(model, kf, vf, vname, len(rows), flush=True)
json.dump(out, open(sys.argv[3], 'w'), indent=1)
