#!/usr/bin/env python3
"""Cuts one loop iteration out of a qemu-aarch64 execution log, as assembly for llvm-mca.

  trace_loop.py LOG OBJDUMP MNEMONIC COUNT[x] [OCCURRENCE]

LOG is `qemu-aarch64 -d in_asm,exec,nochain` output (in_asm: the guest instructions of each
translation block; exec with nochain: every block each time it runs), OBJDUMP the
`objdump -d --no-show-raw-insn` listing of the same static binary. The dynamic instruction stream
is rebuilt from the two; the anchor is the first-executed instruction whose mnemonic is MNEMONIC
(e.g. sdot) and that ran exactly COUNT times (the loop's trip count: blocks, or blocks * tokens).
The iteration printed is everything executed between the anchor's OCCURRENCE-th run and the next
one (default 2: past the first iteration), callees and inner loops included, in execution order:
a rotated copy of the loop body along the path actually taken. COUNTx (e.g. 8x) takes the first
MNEMONIC that ran a multiple m of COUNT times (an instruction of a loop inside the iteration) and
cuts m consecutive runs of it: one iteration of the loop around. Branch and literal targets become
the label .Lmca so that llvm-mca can parse them. Summary on stderr.
"""
import collections
import re
import sys


def main():
    log, dump, mnem = sys.argv[1], sys.argv[2], sys.argv[3]
    multiple = sys.argv[4].endswith("x")
    count = int(sys.argv[4].rstrip("x"))
    occ = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    text = {}
    insn_re = re.compile(r"^\s*([0-9a-f]+):\t(\S+)(?:\t(.*))?$")
    with open(dump) as f:
        for line in f:
            m = insn_re.match(line)
            if m:
                ops = (m.group(3) or "").split("//")[0].strip()
                ops = re.sub(r"\b[0-9a-f]+ <[^>]*>", ".Lmca", ops)
                text[int(m.group(1), 16)] = (m.group(2), ops)
    blocks, stream = {}, []
    cur = None
    addr_re = re.compile(r"^0x([0-9a-f]+):\s")
    exec_re = re.compile(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
    with open(log) as f:
        for line in f:
            if line.startswith("IN:"):
                cur = []
                continue
            m = addr_re.match(line)
            if m and cur is not None:
                if not cur:
                    blocks[int(m.group(1), 16)] = cur
                cur.append(int(m.group(1), 16))
                continue
            if line.strip() == "" or line.startswith("---"):
                cur = None
            m = exec_re.match(line)
            if m:
                cur = None
                stream.extend(blocks[int(m.group(1), 16)])
    counts = collections.Counter(stream)
    fits = (lambda n: n % count == 0) if multiple else (lambda n: n == count)
    anchor = next((a for a in stream if fits(counts[a]) and a in text and text[a][0] == mnem), None)
    if anchor is None:
        sys.exit(f"trace_loop: no {mnem} executed {'a multiple of ' if multiple else 'exactly '}{count} times")
    m = counts[anchor] // count
    pos = [i for i, a in enumerate(stream) if a == anchor]
    seg = stream[pos[(occ - 1) * m]:pos[occ * m]]
    sys.stderr.write(f"anchor {anchor:#x} ({m} run(s) per iteration): iteration of {len(seg)} instructions\n")
    print(".Lmca:")
    for a in seg:
        mn, ops = text[a]
        print(f"\t{mn}\t{ops}" if ops else f"\t{mn}")


if __name__ == "__main__":
    main()
