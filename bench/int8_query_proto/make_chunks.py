# Writes the text chunks quality.py reads to /tmp/attn8q/chunks.
import os
os.makedirs('/tmp/attn8q/chunks', exist_ok=True)
os.chdir('/tmp/attn8q/chunks')
t = open('/work/shared/data/tinystories_valid_head.txt', encoding='utf-8').read()
step = len(t) // 12
for i in range(12):
    start = 0 if i == 0 else t.find('\n\n', i * step) + 2
    open('ts%02d.txt' % i, 'w', encoding='utf-8').write(t[start:t.find('\n\n', start + 3200)])
p = open('/work/shared/data/pride_and_prejudice_pg1342.txt', encoding='utf-8').read()
step = len(p) // 6
for i in range(6):
    start = p.find('\n\n', 50000 + i * step) + 2
    open('pp%02d.txt' % i, 'w', encoding='utf-8').write(p[start:p.find('\n\n', start + 3200)])
