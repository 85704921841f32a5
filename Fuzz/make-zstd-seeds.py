#!/usr/bin/env python3
"""Seeds for ZstdFuzz: frames the zstd tool makes from generated data, and the golden files.

Usage: make-zstd-seeds.py SEEDS_DIR [GOLDEN_DIR]

Every seed fits in libFuzzer's -max_len (64 KiB). Seeds named `whole_*` are plain frames (the
harness's first mode); `prefix_*` and `dict_*` are laid out as the second mode reads them:
[flags: u8][dictionary length: u16 LE][dictionary][frames], flags 0 for raw content
(`zstd --patch-from`), 1 for `zstd -D` (a trained dictionary).
"""
import os
import random
import struct
import subprocess
import sys
import tempfile

MAX_LEN = 65536
WORDS = ("update bundle asset manifest package script resource version signature install patch "
         "delta window frame block literal sequence offset match the a of to and in is for with").split()


def text(rng, n):
    out = []
    size = 0
    while size < n:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out).encode()[:n]


def json_lines(rng, n):
    out = bytearray()
    while len(out) < n:
        i = rng.randrange(1_000_000)
        out += b'{"id":%d,"name":"%s","size":%d}\n' % (i, rng.choice(WORDS).encode(), rng.randrange(1 << 24))
    return bytes(out[:n])


def mixed(rng, n):
    out = bytearray()
    while len(out) < n:
        kind = rng.randrange(5)
        piece = rng.randrange(16, 4096)
        if kind == 0:
            out += text(rng, piece)
        elif kind == 1:
            out += json_lines(rng, piece)
        elif kind == 2:
            out += rng.randbytes(piece)
        elif kind == 3:
            out += bytes(piece)
        elif len(out) > 64:
            start = rng.randrange(len(out) - 32)
            out += out[start:start + piece]
    return bytes(out[:n])


def zstd(data, args, work):
    src = os.path.join(work, "in")
    dst = os.path.join(work, "out.zst")
    with open(src, "wb") as f:
        f.write(data)
    subprocess.run(["zstd", "-q", "-f", *args, src, "-o", dst], check=True)
    with open(dst, "rb") as f:
        return f.read()


def skippable(payload, variant=0):
    return struct.pack("<II", 0x184D2A50 | variant, len(payload)) + payload


def main():
    seeds = sys.argv[1]
    golden = sys.argv[2] if len(sys.argv) > 2 else None
    rng = random.Random(2024)
    count = 0

    def put(name, data):
        nonlocal count
        if len(data) <= MAX_LEN:
            with open(os.path.join(seeds, name), "wb") as f:
                f.write(data)
            count += 1

    def layout(flags, dictionary, frames):
        return bytes([flags]) + struct.pack("<H", len(dictionary)) + dictionary + frames

    with tempfile.TemporaryDirectory() as work:
        inputs = {
            "empty": b"", "one": b"A", "text": text(rng, 5000), "json": json_lines(rng, 8000),
            "random": rng.randbytes(3000), "zeros": bytes(20000), "mixed": mixed(rng, 30000),
            "bigzeros": bytes(300_000), "runs": b"ab" * 70_000,
        }
        flag_sets = {
            "l1": ["-1"], "l3": ["-3"], "l9": ["-9"], "l19": ["-19"], "fast": ["--fast=4"],
            "ultra": ["--ultra", "-22"], "nocheck": ["-3", "--no-check"], "nosize": ["-3", "--no-content-size"],
            "wlog10": ["-19", "--zstd=wlog=10"], "blocks": ["-3", "--target-compressed-block-size=512"],
            "rawlit": ["-3", "--no-compress-literals"], "long": ["-5", "--long=20"],
        }
        frames = {}
        for iname, data in inputs.items():
            for fname, args in flag_sets.items():
                frame = zstd(data, args, work)
                frames[(iname, fname)] = frame
                put(f"whole_{iname}_{fname}", frame)
        # Concatenated and skippable frames.
        put("whole_concat", frames[("text", "l3")] + frames[("one", "nocheck")] + frames[("json", "l19")])
        put("whole_skippable", skippable(b"meta") + frames[("mixed", "l3")] + skippable(b"", 15)
            + frames[("empty", "l1")])

        # Patch-from: a base and a changed copy.
        for n, (size, level) in enumerate([(1000, "-19"), (20000, "-3"), (30000, "-19"), (8000, "--fast=2")]):
            base = mixed(rng, size)
            target = bytearray(base)
            for _ in range(max(1, size // 500)):
                at = rng.randrange(len(target))
                target[at:at + 8] = rng.randbytes(8)
            target = bytes(target[: size // 3]) + b"inserted" + bytes(target[size // 3:])
            with open(os.path.join(work, "base"), "wb") as f:
                f.write(base)
            patch = zstd(target, [level, "--patch-from=" + os.path.join(work, "base")], work)
            put(f"prefix_{n}", layout(0, base, patch))

        # Trained dictionaries and frames made with them.
        samples = os.path.join(work, "samples")
        os.mkdir(samples)
        for i in range(200):
            with open(os.path.join(samples, str(i)), "wb") as f:
                f.write(json_lines(rng, 300) if i % 2 else text(rng, 300))
        dictionary = os.path.join(work, "dict")
        subprocess.run(["zstd", "-q", "-f", "--train", "--maxdict=4096", *[os.path.join(samples, str(i)) for i in range(200)],
                        "-o", dictionary], check=True)
        with open(dictionary, "rb") as f:
            trained = f.read()
        for n, args in enumerate([["-1"], ["-3"], ["-19"], ["-19", "--no-dictID"], ["-3", "--no-check"]]):
            record = json_lines(rng, 700) + text(rng, 300)
            put(f"dict_{n}", layout(1, trained, zstd(record, args + ["-D", dictionary], work)))
        # A raw-content dictionary given with -D.
        raw = mixed(rng, 4000)
        with open(os.path.join(work, "raw"), "wb") as f:
            f.write(raw)
        put("dict_raw", layout(1, raw, zstd(raw[100:3000] + b"tail", ["-3", "-D", os.path.join(work, "raw")], work)))

        # The golden files.
        if golden and os.path.isdir(golden):
            for folder in ("golden-decompression", "golden-decompression-errors"):
                path = os.path.join(golden, folder)
                for name in sorted(os.listdir(path)):
                    with open(os.path.join(path, name), "rb") as f:
                        put(f"golden_{folder}_{name}", f.read())
            path = os.path.join(golden, "golden-compression")
            for name in sorted(os.listdir(path)):
                with open(os.path.join(path, name), "rb") as f:
                    data = f.read()
                for level in ("-1", "-19"):
                    put(f"golden_compressed_{name}{level}", zstd(data, [level], work))
            golden_dict = os.path.join(golden, "golden-dictionaries", "http-dict-missing-symbols")
            if os.path.exists(golden_dict):
                with open(golden_dict, "rb") as f:
                    gd = f.read()
                with open(os.path.join(golden, "golden-compression", "http"), "rb") as f:
                    http = f.read()
                for level in ("-1", "-3", "-19"):
                    put(f"dict_golden{level}", layout(1, gd, zstd(http, [level, "-D", golden_dict], work)))
    print(f"make-zstd-seeds: {count} seeds", file=sys.stderr)


if __name__ == "__main__":
    main()
