#!/usr/bin/env python3
"""Pairs a trine tensor dump (TRINE_DUMP_TENSORS=PREFIX) with a llama_ref_dump --dump-dir dump of
the same prompt by tensor name and prints, in trine's order, max |a - b| and max |b| per tensor.

usage: compare_dumps.py TRINE_PREFIX LLAMA_DIR

trine names follow llama.cpp's graph names; where llama.cpp reuses a name for successive views
(Qcur-L / Kcur-L: the matmul output, its reshape, the RoPE output) the first occurrence pairs with
trine's Qcur-L and the last with trine's Qcur_rope-L. llama.cpp's last layer runs only the output
rows after attention; trine's tensors are then compared on those rows (the last ones).
"""
import array
import sys


def read_index(path):
    rows = []
    with open(path) as f:
        for line in f:
            rows.append(line.split())
    return rows


def load(path):
    a = array.array('f')
    with open(path, 'rb') as f:
        a.frombytes(f.read())
    return a


def main():
    tprefix, ldir = sys.argv[1], sys.argv[2]
    lidx = read_index(ldir + '/index.txt')
    by_name = {}
    for seq, name, *ne in lidx:
        by_name.setdefault(name, []).append((seq, [int(x) for x in ne]))
    aliases = {'kqv_out': ['kqv_out', '__fattn__']}
    print('%-16s %6s %12s %12s %12s' % ('tensor', 'rows', 'max|d|', 'max|ref|', 'rel'))
    for seq, name, rows, row_len in read_index(tprefix + 'index.txt'):
        rows, row_len = int(rows), int(row_len)
        base, _, layer = name.rpartition('-') if '-' in name else (name, '', '')
        rope = base.endswith('_rope')
        lbase = base[:-5] if rope else base
        cands = []
        for b in aliases.get(lbase, [lbase]):
            cands = by_name.get(b + ('-' + layer if layer else ''), [])
            if cands:
                break
        if not cands:
            print('%-16s (no llama.cpp tensor)' % name)
            continue
        lseq, ne = cands[-1] if rope else cands[0]
        lname = [n for s, n, *_ in lidx if s == lseq][0]
        ref = load('%s/%s_%s.bin' % (ldir, lseq, lname))
        got = load('%s%s_%s.bin' % (tprefix, seq, name))
        lrows = len(ref) // row_len
        off = (rows - lrows) * row_len  # compare the last lrows rows
        if lrows > rows or len(ref) != lrows * row_len:
            print('%-16s shape mismatch trine %dx%d llama %s' % (name, rows, row_len, ne))
            continue
        md = mr = 0.0
        for i in range(lrows * row_len):
            d = abs(got[off + i] - ref[i])
            if d > md:
                md = d
            r = abs(ref[i])
            if r > mr:
                mr = r
        print('%-16s %6d %12.6g %12.6g %12.3g' % (name, lrows, md, mr, md / mr if mr else 0.0))


if __name__ == '__main__':
    main()
