import HotCore
import Testing

@testable import HotAssets

@Suite("Asset name rules")
struct AssetNameTests {
    @Test("Normalisation strips leading / and ./ and refuses ..")
    func normalise() {
        let cases: [(String, String?)] = [
            ("a/b.png", "a/b.png"), ("/a/b.png", "a/b.png"), ("./a/b.png", "a/b.png"), ("a//b", "a/b"),
            ("a/./b", "a/b"), ("a/b/", "a/b"), (".", nil), ("", nil), ("/", nil), ("..", nil), ("a/..", nil),
            ("../a", nil), ("a/../b", nil), ("...", "..."), ("..a/b", "..a/b"), (".a", ".a"), ("a/.b/c", "a/.b/c"),
        ]
        for (name, expected) in cases {
            #expect(AssetName.normalise(name) == expected, "\(name)")
        }
    }

    @Test("File names split into stem, scale and extension")
    func parts() {
        func parts(_ name: String) -> (String, Int?, String?) {
            let parts = AssetName.parts(of: name[...])
            return (String(parts.stem), parts.scale, parts.pathExtension.map(String.init))
        }
        #expect(parts("icon@2x.png") == ("icon", 2, "png"))
        #expect(parts("icon@3x") == ("icon", 3, nil))
        #expect(parts("icon@12x.png") == ("icon", 12, "png"))
        #expect(parts("icon.png") == ("icon", nil, "png"))
        #expect(parts("archive.tar.gz") == ("archive.tar", nil, "gz"))
        #expect(parts(".hidden") == (".hidden", nil, nil))
        #expect(parts("trailing.") == ("trailing.", nil, nil))
        #expect(parts("@2x.png") == ("@2x", nil, "png"))
        #expect(parts("icon@0x.png") == ("icon@0x", nil, "png"))
        #expect(parts("icon@x.png") == ("icon@x", nil, "png"))
        #expect(parts("icon@2y.png") == ("icon@2y", nil, "png"))
        #expect(parts("a@b@2x.png") == ("a@b", 2, "png"))
    }
}
