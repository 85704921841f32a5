#!/usr/bin/env python3
"""Writes a deterministic resource tree: about half incompressible images, half
compressible JS/JSON, in nested folders.

    scripts/make-corpus.py DEST --megabytes 200 --files 3000
"""
import argparse
import json
import os
import random


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dest")
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=20261123)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    total = args.megabytes * 1024 * 1024
    per_file = total // args.files
    words = ["function", "return", "const", "let", "module", "export", "import", "async", "await",
             "value", "resource", "image", "render", "update", "package", "version", "config"]
    for index in range(args.files):
        depth = rng.randint(0, 3)
        folders = [f"dir{rng.randint(0, 9)}" for _ in range(depth)]
        folder = os.path.join(args.dest, *folders)
        os.makedirs(folder, exist_ok=True)
        size = max(1, int(per_file * rng.uniform(0.2, 1.8)))
        if index % 2 == 0:
            name = f"img{index}@{rng.choice([1, 2, 3])}x.png"
            data = rng.randbytes(size)
        elif index % 4 == 1:
            name = f"script{index}.js"
            text = []
            length = 0
            while length < size:
                line = f"{rng.choice(words)} {rng.choice(words)}_{rng.randint(0, 999)} = {rng.randint(0, 99999)};\n"
                text.append(line)
                length += len(line)
            data = "".join(text).encode()[:size]
        else:
            name = f"data{index}.json"
            items = []
            length = 2
            while length < size:
                item = {"id": rng.randint(0, 10**6), "name": rng.choice(words), "tags": rng.sample(words, 3)}
                items.append(item)
                length += 60
            data = json.dumps(items).encode()
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(data)


if __name__ == "__main__":
    main()
