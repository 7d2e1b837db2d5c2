import json, sys, math
out = json.load(open(sys.argv[1]))
for grp in ('ts', 'pp'):
    print(f'== text {grp}')
    for k, rows in out.items():
        rs = [r for r in rows if r['text'].startswith(grp)]
        n = sum(r['tokens'] for r in rs)
        nll = sum(r['nll'] * r['tokens'] for r in rs) / n
        fnll = sum(r['full_nll'] * r['tokens'] for r in rs) / n
        kl = sum(r['kld'] * r['tokens'] for r in rs) / n
        t1 = sum(r['top1'] * r['tokens'] for r in rs) / n
        print(f'{k:45s} tokens {n:5d} ppl {math.exp(nll):9.4f} f32 {math.exp(fnll):9.4f} dPPL {100*(math.exp(nll-fnll)-1):+.4f}% KL {kl:.6f} top1 {100*t1:.2f}%')
