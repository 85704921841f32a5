import Foundation
import HotCore
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A full disk or quota reads as ``HotUpdateError/Code/diskFull`` wherever `errno` or a
/// Foundation error becomes a ``HotUpdateError``; the real full disk is in the integration
/// tests (a mounted tmpfs).
@Suite("disk full")
struct DiskFullTests {
    @Test("ENOSPC and EDQUOT are diskFull and say so; other errno values keep their code")
    func errnoCodes() {
        for code in [ENOSPC, EDQUOT] {
            let error = HotUpdateError.system("cannot write /store/x", errno: code, subject: "/store/x")
            #expect(error.code == .diskFull)
            #expect(error.description.contains("disk full"))
            #expect(error.description.contains("/store/x"))
        }
        #expect(HotUpdateError.system("cannot write /store/x", errno: EACCES).code == .fileSystem)
        #expect(HotUpdateError.system("x", errno: EIO, otherwise: .corruptArchive).code == .corruptArchive)
    }

    @Test("Foundation and POSIX errors that mean a full disk wrap as diskFull")
    func wrappedErrors() {
        let posix = HotUpdateError.wrap(POSIXError(.ENOSPC), as: .fileSystem, "cannot write /store/list")
        #expect(posix.code == .diskFull)
        #expect(posix.description.contains("disk full"))
        let cocoa = HotUpdateError.wrap(CocoaError(.fileWriteOutOfSpace), as: .fileSystem, "cannot write /store/list")
        #expect(cocoa.code == .diskFull)
        let underlying = NSError(
            domain: NSCocoaErrorDomain,
            code: CocoaError.fileWriteUnknown.rawValue,
            userInfo: [NSUnderlyingErrorKey: NSError(domain: NSPOSIXErrorDomain, code: Int(EDQUOT))]
        )
        #expect(HotUpdateError.wrap(underlying, as: .fileSystem, "cannot write").code == .diskFull)
        #expect(HotUpdateError.wrap(POSIXError(.EACCES), as: .fileSystem, "cannot write").code == .fileSystem)
    }
}
