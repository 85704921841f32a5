import Foundation

/// `zipcraft.py`: a python3 module that writes ZIP files byte by byte, so tests can
/// craft hostile archives (lying headers, overlaps, odd names) at test time.
enum ZipCraft {
    static func install(in directory: URL) throws {
        let file = directory.appendingPathComponent("zipcraft.py")
        if !FileManager.default.fileExists(atPath: file.path) {
            try source.write(to: file, atomically: true, encoding: .utf8)
        }
    }

    static let source = #"""
        import struct, zlib

        def deflate(data):
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            return c.compress(data) + c.flush()

        class Entry:
            """One entry. Every header field can be overridden to lie."""
            def __init__(self, name, data=b'', method=8, mode=0o100644, host=3, flags=0,
                         crc=None, usize=None, csize=None, payload=None,
                         local_name=None, local_crc=None, local_usize=None, local_csize=None, local_method=None,
                         descriptor=None, descriptor_crc=None, share_offset_with=None, zip64_local=False):
                self.name = name.encode('utf-8') if isinstance(name, str) else name
                if isinstance(name, str) and any(ord(c) > 127 for c in name):
                    flags |= 0x800
                self.data = data
                self.method = method
                self.mode = mode
                self.host = host
                self.flags = flags
                self.payload = payload  # compressed bytes override
                self.crc = crc
                self.usize = usize
                self.csize = csize
                self.local_name = local_name
                self.local_crc = local_crc
                self.local_usize = local_usize
                self.local_csize = local_csize
                self.local_method = local_method
                self.descriptor = descriptor  # None, 'sig' or 'nosig'
                self.descriptor_crc = descriptor_crc
                self.share_offset_with = share_offset_with
                self.zip64_local = zip64_local

        def build(path, entries, prefix=b'', trailing=b'', count=None):
            out = bytearray(prefix)
            base = len(prefix)
            central = bytearray()
            offsets = {}
            for i, e in enumerate(entries):
                payload = e.payload if e.payload is not None else (deflate(e.data) if e.method == 8 else e.data)
                crc = e.crc if e.crc is not None else zlib.crc32(e.data)
                usize = e.usize if e.usize is not None else len(e.data)
                csize = e.csize if e.csize is not None else len(payload)
                flags = e.flags | (0x08 if e.descriptor else 0)
                if e.share_offset_with is not None:
                    offset = offsets[e.share_offset_with]
                else:
                    offset = len(out) - base
                    lname = e.local_name if e.local_name is not None else e.name
                    lcrc = e.local_crc if e.local_crc is not None else crc
                    lus = e.local_usize if e.local_usize is not None else usize
                    lcs = e.local_csize if e.local_csize is not None else csize
                    lmethod = e.local_method if e.local_method is not None else e.method
                    extra = b''
                    if e.descriptor:
                        lcrc, lus, lcs = 0, 0, 0
                    if e.zip64_local:
                        extra = struct.pack('<HHQQ', 1, 16, lus, lcs)
                        lus, lcs = 0xFFFFFFFF, 0xFFFFFFFF
                    out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 45 if e.zip64_local else 20, flags, lmethod, 0, 0x21,
                                       lcrc, lcs, lus, len(lname), len(extra)) + lname + extra + payload
                    if e.descriptor == 'sig':
                        out += struct.pack('<IIII', 0x08074b50, e.descriptor_crc if e.descriptor_crc is not None else crc, csize, usize)
                    elif e.descriptor == 'nosig':
                        out += struct.pack('<III', e.descriptor_crc if e.descriptor_crc is not None else crc, csize, usize)
                offsets[i] = offset
                made = (e.host << 8) | 20
                attr = (e.mode << 16) if e.host == 3 else (0x10 if e.name.endswith(b'/') else 0)
                central += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, made, 20, flags, e.method, 0, 0x21, crc,
                                       csize, usize, len(e.name), 0, 0, 0, 0, attr, offset) + e.name
            cd_offset = len(out) - base
            out += central
            n = count if count is not None else len(entries)
            out += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n, len(central), cd_offset, 0)
            out += trailing
            with open(path, 'wb') as f:
                f.write(out)
        """#
}
