/// A path's directory without Foundation's `NSString.deletingLastPathComponent`, which on Linux
/// traps ("Illegal instruction") on a one-character path without a slash: `d`, a data directory an
/// operator may well name.
public enum PathText {
    /// The directory part of `path`, as `deletingLastPathComponent` gives it: "" for a name alone,
    /// "/" for a name under the root, trailing slashes passed over.
    public static func directory(of path: String) -> String {
        var text = Substring(path)
        while text.count > 1, text.last == "/" { text.removeLast() }
        guard let slash = text.lastIndex(of: "/") else { return "" }
        var parent = text[..<slash]
        while parent.count > 1, parent.last == "/" { parent.removeLast() }
        return parent.isEmpty ? "/" : String(parent)
    }
}
