/// What a tool's output is checked against once per corpus: the same file list and
/// sizes, or that and every byte.
enum OutputCheck: Sendable {
    case listAndSizes
    case bytes
}

/// An extractor under test: how to run it as a child process.
struct ExtractionTool: Sendable {
    /// The name `--tools` uses.
    let id: String
    /// The name the tables print.
    let label: String
    /// The program that must exist for the tool to run.
    let program: String
    /// How its output is checked.
    let check: OutputCheck
    /// Whether it prints the nanoseconds its extraction took in-process (without start-up) on stdout.
    var reportsWork = false
    /// The command line that unpacks `archive` into the existing, empty directory `destination`;
    /// `corpus` is the unpacked tree (only the copy floor reads it).
    let command: @Sendable (_ archive: String, _ destination: String, _ corpus: String) -> [String]

    /// Every tool the benchmark knows, in table order.
    ///
    /// - Parameters:
    ///   - bench: This executable's path (for the in-process backends).
    ///   - python: The Python interpreter's real path (a version manager's shim would
    ///     add its own start-up to every run).
    ///   - zipFoundation: The `hot-bench-zipfoundation` executable's path.
    static func all(bench: String, python: String, zipFoundation: String) -> [ExtractionTool] {
        [
            ExtractionTool(
                id: "zip",
                label: "HotArchive ZipUnarchiver",
                program: bench,
                check: .bytes,
                reportsWork: true
            ) {
                a,
                d,
                _ in
                [bench, "extract", "--backend", "zip", a, d]
            },
            ExtractionTool(
                id: "libarchive",
                label: "HotArchive LibArchiveUnarchiver",
                program: bench,
                check: .bytes,
                reportsWork: true
            ) { a, d, _ in
                [bench, "extract", "--backend", "libarchive", a, d]
            },
            ExtractionTool(id: "bsdtar", label: "bsdtar -xf", program: "bsdtar", check: .listAndSizes) { a, d, _ in
                ["bsdtar", "-xf", a, "-C", d]
            },
            ExtractionTool(id: "unzip", label: "unzip -q", program: "unzip", check: .listAndSizes) { a, d, _ in
                ["unzip", "-q", a, "-d", d]
            },
            ExtractionTool(id: "python", label: "python3 zipfile", program: python, check: .listAndSizes) { a, d, _ in
                [python, "-c", "import zipfile,sys; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])", a, d]
            },
            ExtractionTool(
                id: "zipfoundation",
                label: "ZIPFoundation unzipItem",
                program: zipFoundation,
                check: .listAndSizes,
                reportsWork: true
            ) { a, d, _ in
                [zipFoundation, a, d]
            },
            ExtractionTool(id: "cp", label: "cp -r (floor)", program: "cp", check: .listAndSizes) { _, d, c in
                ["cp", "-r", c + "/.", d]
            },
        ]
    }

    static let ids = ["zip", "libarchive", "bsdtar", "unzip", "python", "zipfoundation", "cp"]
}

/// A packer under test.
struct PackingTool: Sendable {
    let id: String
    let label: String
    let program: String
    /// The working directory the command needs (`zip -r` packs `.`), or nil.
    let directory: @Sendable (_ tree: String) -> String?
    /// The command line that packs `tree` into the new file `archive`.
    let command: @Sendable (_ tree: String, _ archive: String) -> [String]

    static func all(bench: String) -> [PackingTool] {
        [
            PackingTool(
                id: "zipwriter",
                label: "HotArchive ZipWriter",
                program: bench,
                directory: { _ in nil },
                command: { tree, archive in [bench, "pack", tree, archive] }
            ),
            PackingTool(
                id: "zip",
                label: "zip -r -q",
                program: "zip",
                directory: { $0 },
                command: { _, archive in ["zip", "-r", "-q", archive, "."] }
            ),
            PackingTool(
                id: "bsdtar",
                label: "bsdtar -a -cf",
                program: "bsdtar",
                directory: { _ in nil },
                command: { tree, archive in ["bsdtar", "-a", "-cf", archive, "-C", tree, "."] }
            ),
        ]
    }
}
