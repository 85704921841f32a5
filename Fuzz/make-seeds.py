#!/usr/bin/env python3
"""Writes the fuzzer's seed archives into the directory given as argument.

Real archives from real tools (Info-ZIP's zip, bsdtar, python's zipfile, and for WinZip AES
7-Zip and pyzipper where they are installed) and a
few written byte by byte for the features the tools do not produce on demand
(descriptors without signature, Unicode Path fields, MS-DOS attributes, code
page 437 names, a `./` entry, a self-extractor prefix). Every seed is small: the
fuzzer runs with -max_len=65536.
"""
import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib

PASSWORD = "12345678"  # the harness's password (Fuzz/Sources/ZipFuzz/main.swift)


def run(args, cwd, stdin=None):
    subprocess.run(args, cwd=cwd, input=stdin, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_tree(root):
    """A small tree: text, a compressible file, an empty file, nested and empty directories, a symlink."""
    os.makedirs(os.path.join(root, "dir/sub"))
    os.makedirs(os.path.join(root, "empty"))
    with open(os.path.join(root, "hello.txt"), "w") as f:
        f.write("hello, world\n")
    with open(os.path.join(root, "dir/repeat.txt"), "w") as f:
        f.write("abcdefgh" * 500)
    with open(os.path.join(root, "dir/sub/random.bin"), "wb") as f:
        f.write(os.urandom(700))
    open(os.path.join(root, "dir/sub/empty.txt"), "w").close()
    with open(os.path.join(root, "dir/exec.sh"), "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(os.path.join(root, "dir/exec.sh"), 0o755)
    os.symlink("dir/repeat.txt", os.path.join(root, "link"))
    os.symlink("../hello.txt", os.path.join(root, "dir/uplink"))


def tool_seeds(out, work):
    tree = os.path.join(work, "tree")
    make_tree(tree)
    zip_runs = {
        "zip-deflate.zip": ["-r", "-9"],
        "zip-stored.zip": ["-r", "-0"],
        "zip-symlinks.zip": ["-r", "-y"],
        "zip-encrypted.zip": ["-r", "-P", PASSWORD],
        "zip-encrypted-stored.zip": ["-r", "-0", "-P", PASSWORD],
        "zip-no-dirs.zip": ["-r", "-D"],
        "zip-zip64.zip": ["-r", "-fz"],
        "zip-extra-stripped.zip": ["-r", "-X"],
    }
    for name, flags in zip_runs.items():
        target = os.path.join(out, name)
        run(["zip", "-q"] + flags + [target, "."], cwd=tree)
    # Streamed from stdin: a data descriptor, zip64 by default.
    with open(os.path.join(out, "zip-stdin.zip"), "wb") as f:
        f.write(subprocess.run(["zip", "-q", "-", "-"], input=b"streamed " * 100, stdout=subprocess.PIPE,
                               check=True).stdout)
    # A comment, then a self-extractor prefix with offsets adjusted (zip -A) and not.
    commented = os.path.join(out, "zip-comment.zip")
    run(["zip", "-q", "-r", "-z", commented, "hello.txt", "dir"], cwd=tree, stdin=b"an archive comment\n")
    with open(commented, "rb") as f:
        body = f.read()
    with open(os.path.join(out, "zip-prefix-unadjusted.zip"), "wb") as f:
        f.write(b"#!/bin/sh\necho a self-extractor stub\nexit 0\n" + body)
    adjusted = os.path.join(out, "zip-prefix-adjusted.zip")
    shutil.copy(os.path.join(out, "zip-prefix-unadjusted.zip"), adjusted)
    run(["zip", "-q", "-A", adjusted], cwd=tree)
    if shutil.which("bsdtar"):
        run(["bsdtar", "--format", "zip", "-cf", os.path.join(out, "bsdtar.zip"), "."], cwd=tree)
        run(["bsdtar", "--format", "zip", "--options", "zip:compression=store", "-cf",
             os.path.join(out, "bsdtar-stored.zip"), "hello.txt", "dir"], cwd=tree)


def aes_seeds(out, work):
    """WinZip AES archives with the harness's password: 7-Zip's (AE-2, AES-256 and AES-128,
    stored and deflated) and pyzipper's (AE-1 and AE-2), where those tools are installed."""
    tree = os.path.join(work, "aes-tree")
    os.makedirs(os.path.join(tree, "dir"))
    with open(os.path.join(tree, "hello.txt"), "w") as f:
        f.write("hello, world\n")
    with open(os.path.join(tree, "dir/repeat.txt"), "w") as f:
        f.write("abcdefgh" * 300)
    sevenzip = shutil.which("7z") or shutil.which("7zz")
    if sevenzip:
        for name, flags in {
            "7z-aes256.zip": ["-mem=AES256"],
            "7z-aes256-stored.zip": ["-mem=AES256", "-mx=0"],
            "7z-aes128.zip": ["-mem=AES128"],
        }.items():
            run([sevenzip, "a", "-tzip", "-p" + PASSWORD] + flags + [os.path.join(out, name), "."], cwd=tree)
    try:
        import pyzipper
    except ImportError:
        return
    for version, bits, method in ((1, 256, pyzipper.ZIP_DEFLATED), (2, 192, pyzipper.ZIP_STORED)):
        name = os.path.join(out, "pyzipper-ae%d-aes%d.zip" % (version, bits))
        kwargs = {"nbits": bits, "force_wz_aes_version": version}
        with pyzipper.AESZipFile(name, "w", compression=method, encryption=pyzipper.WZ_AES,
                                 encryption_kwargs=kwargs) as z:
            z.setpassword(PASSWORD.encode())
            z.writestr("a.txt", "alpha " * 50)
            z.writestr("b/c.txt", "charlie")


def python_seeds(out):
    with zipfile.ZipFile(os.path.join(out, "py-deflate.zip"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", "alpha " * 50)
        z.writestr("b/c.txt", "charlie")
        z.writestr("b/", "")
        z.writestr(zipfile.ZipInfo("d/"), "")
        z.comment = b"python comment"
    with zipfile.ZipFile(os.path.join(out, "py-stored.zip"), "w", zipfile.ZIP_STORED) as z:
        z.writestr("stored.txt", "stored data\n")
        z.writestr("x/y/z.txt", "deep\n")
    with zipfile.ZipFile(os.path.join(out, "py-unicode.zip"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("héllo/wörld.txt", "unicode names")
        z.writestr("日本語.txt", "japanese")
    with zipfile.ZipFile(os.path.join(out, "py-many.zip"), "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(60):
            z.writestr(f"many/{i % 7}/file{i}.txt", f"entry {i}\n" * (i % 5))
    with zipfile.ZipFile(os.path.join(out, "py-zip64.zip"), "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("forced.txt", "w", force_zip64=True) as f:
            f.write(b"zip64 extra fields " * 20)
    # Written to a stream that cannot seek: data descriptors with signature.
    class Unseekable(io.RawIOBase):
        def __init__(self):
            self.data = bytearray()

        def writable(self):
            return True

        def write(self, b):
            self.data += b
            return len(b)

    stream = Unseekable()
    with zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("streamed.txt", "descriptor " * 40)
        z.writestr("stored-streamed.txt", "stored with descriptor", compress_type=zipfile.ZIP_STORED)
    with open(os.path.join(out, "py-descriptors.zip"), "wb") as f:
        f.write(bytes(stream.data))
    # Unix modes: a symlink inside, a read-only file, a setuid bit the reader must drop.
    with zipfile.ZipFile(os.path.join(out, "py-modes.zip"), "w", zipfile.ZIP_STORED) as z:
        for name, mode, data in [("target.txt", 0o100644, b"t"), ("link", 0o120777, b"target.txt"),
                                 ("ro.txt", 0o100444, b"r"), ("suid", 0o104755, b"s"),
                                 ("sub/", 0o040755, b"")]:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = mode << 16
            z.writestr(info, data)


def deflate(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def crafted(path, entries, prefix=b"", comment=b""):
    """entries: (name bytes, data, method, host, attrs, flags, descriptor, central extra, local extra)."""
    out = bytearray(prefix)
    central = bytearray()
    for name, data, method, host, attrs, flags, descriptor, cextra, lextra in entries:
        payload = deflate(data) if method == 8 else data
        crc = zlib.crc32(data)
        offset = len(out)
        if descriptor:
            flags |= 0x08
        lcrc, lcs, lus = (0, 0, 0) if descriptor else (crc, len(payload), len(data))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, flags, method, 0, 0x21, lcrc, lcs, lus, len(name),
                           len(lextra)) + name + lextra + payload
        if descriptor == "sig":
            out += struct.pack("<IIII", 0x08074B50, crc, len(payload), len(data))
        elif descriptor == "nosig":
            out += struct.pack("<III", crc, len(payload), len(data))
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, (host << 8) | 20, 20, flags, method, 0, 0x21, crc,
                               len(payload), len(data), len(name), len(cextra), 0, 0, 0, attrs, offset)
        central += name + cextra
    cd_offset = len(out) - len(prefix)
    out += central
    n = len(entries)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central), cd_offset, len(comment)) + comment
    with open(path, "wb") as f:
        f.write(out)


def unicode_path(raw, utf8):
    field = struct.pack("<BI", 1, zlib.crc32(raw)) + utf8
    return struct.pack("<HH", 0x7075, len(field)) + field


def crafted_seeds(out):
    unix_file = 0o100644 << 16
    crafted(os.path.join(out, "craft-descriptor-nosig.zip"), [
        (b"nosig.txt", b"no signature " * 30, 8, 3, unix_file, 0, "nosig", b"", b""),
        (b"sig.txt", b"with signature", 0, 3, unix_file, 0, "sig", b"", b""),
    ])
    cp437 = "caf\u00e9.txt".encode("cp437")
    crafted(os.path.join(out, "craft-names.zip"), [
        (cp437, b"cp437 name", 8, 0, 0x20, 0, None, b"", b""),
        (b"dos-dir/", b"", 0, 0, 0x10, 0, None, b"", b""),
        (b"legacy.txt", b"unicode path field", 8, 0, 0x20, 0,
         None, unicode_path(b"legacy.txt", "l\u00e9gacy.txt".encode()), b""),
        (b"back\\slash.txt", b"backslash separator", 0, 0, 0x20, 0, None, b"", b""),
        (b"./", b"", 0, 3, 0o040755 << 16, 0, None, b"", b""),
        ("utf8-\u00fc.txt".encode(), b"flagged utf-8", 8, 3, unix_file, 0x800, None, b"", b""),
    ])
    crafted(os.path.join(out, "craft-symlinks.zip"), [
        (b"a/", b"", 0, 3, 0o040755 << 16, 0, None, b"", b""),
        (b"a/file.txt", b"linked to", 8, 3, unix_file, 0, None, b"", b""),
        (b"a/l1", b"file.txt", 0, 3, 0o120777 << 16, 0, None, b"", b""),
        (b"l2", b"a/../a/file.txt", 0, 3, 0o120777 << 16, 0, None, b"", b""),
    ])
    zip64_extra = struct.pack("<HHQQ", 1, 16, 11, 11)
    crafted(os.path.join(out, "craft-prefix-zip64-extra.zip"), [
        (b"x.txt", b"zip64 extra", 0, 3, unix_file, 0, None, b"", zip64_extra),
    ], prefix=b"MZ stub bytes before the archive", comment=b"trailing comment")
    # Empty archive: just an end record.
    crafted(os.path.join(out, "craft-empty.zip"), [])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        tool_seeds(out, work)
        aes_seeds(out, work)
    python_seeds(out)
    crafted_seeds(out)


if __name__ == "__main__":
    main()
