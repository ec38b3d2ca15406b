import Foundation
import RISCCore
import Testing

@Suite("A path's directory (PathText)")
struct PathTextTests {
    @Test("the directory of a path as NSString's deletingLastPathComponent gives it, and of a one-character name (on which that method traps)")
    func directory() {
        // Foundation's answer, where it has one without trapping.
        for path in ["/", "/tmp", "/tmp/", "/tmp/x.log", "a/b", "a//b", "a/b/", "./d", "../data", "dd", "data", "/d", "a/b/c", "ab/"] {
            #expect(PathText.directory(of: path) == (path as NSString).deletingLastPathComponent, "\(path)")
        }
        for path in ["", "d", "."] { #expect(PathText.directory(of: path) == "", "\(path)") }
        #expect(PathText.directory(of: "//") == "/")
        #expect(PathText.directory(of: "e/f") == "e")
    }
}
