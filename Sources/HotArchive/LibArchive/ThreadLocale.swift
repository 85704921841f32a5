#if LibArchive && canImport(CHotArchive)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs `body` with a UTF-8 `LC_CTYPE` on the calling thread only (`uselocale`).
///
/// libarchive converts entry names to the current locale's character set; in the
/// "C" locale a process starts with, every non-ASCII UTF-8 name fails to convert
/// and comes back as NULL. The unarchiver runs libarchive on a thread of its own,
/// so switching that thread's locale affects nothing else in the process.
func withUTF8ThreadLocale<T>(_ body: () throws -> T) rethrows -> T {
    var chosen: locale_t?
    for name in ["C.UTF-8", "C.utf8", "en_US.UTF-8", "UTF-8"] {
        if let locale = newlocale(LC_CTYPE_MASK, name, nil) {
            chosen = locale
            break
        }
    }
    guard let locale = chosen else { return try body() }
    let previous = uselocale(locale)
    defer {
        uselocale(previous)
        freelocale(locale)
    }
    return try body()
}
#endif
