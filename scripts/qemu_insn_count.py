#!/usr/bin/env python3
"""Counts the guest instructions a qemu-user run executed, from its log on stdin.

The log must come from `-d in_asm,exec,nochain`: each translated block is listed once
("IN:" then one line per instruction "0xADDR:  ..."), and each execution of a block is one
"Trace N: HOSTPTR [FLAGS/PC/...]" line (nochain: no block runs without its line). Prints the
sum over executions of the executing block's instruction count. A block translated again
(same PC) replaces the earlier count.
"""
import sys


def main() -> int:
    sizes: dict[int, int] = {}
    total = 0
    block_pc = None
    block_len = 0
    for line in sys.stdin.buffer:
        if line.startswith(b"Trace "):
            # Trace 0: 0x7f77ac000100 [0000000000001001/0000005502a81c40/00000001/00000200]
            start = line.index(b"[")
            pc = int(line[start + 1:].split(b"/")[1], 16)
            size = sizes.get(pc)
            if size is None:
                print(f"qemu_insn_count: executed block at {pc:#x} was never listed (-d in_asm missing?)",
                      file=sys.stderr)
                return 1
            total += size
        elif line.startswith(b"IN:"):
            block_pc, block_len = None, 0
        elif line.startswith(b"0x") and b":  " in line:
            if block_pc is None:
                block_pc = int(line.split(b":", 1)[0], 16)
            block_len += 1
            sizes[block_pc] = block_len
    print(total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
