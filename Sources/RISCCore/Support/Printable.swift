/// Text that came from outside (a token, a header, a peer), made safe to show a person.
///
/// Whatever is echoed in a 400 description, the event log's human rendering (`risc tail`) or the
/// server log goes through `Printable.safe`: control characters (C0, DEL, C1), the Unicode line
/// and paragraph separators and the bidirectional controls that reorder what a terminal shows
/// are written as visible escapes (`\x1b`, `\u{202e}`), so nothing received can clear a screen,
/// move the cursor or disguise a line; and the result is capped by UTF-8 bytes, cut on a
/// character boundary, with `…` marking a cut.
public enum Printable {
    /// `text` with every unsafe scalar escaped, at most `maxBytes` UTF-8 bytes long.
    public static func safe(_ text: some StringProtocol, maxBytes: Int = 256) -> String {
        if text.utf8.count <= maxBytes, isSafe(text) { return String(text) }
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isUnsafe(scalar) { escaped.append(contentsOf: escape(scalar).unicodeScalars) } else { escaped.append(scalar) }
        }
        let whole = String(escaped)
        guard whole.utf8.count > maxBytes else { return whole }
        let ellipsis = "…"
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in escaped {
            let length = UTF8.width(scalar)
            if bytes + length > max(0, maxBytes - ellipsis.utf8.count) { break }
            kept.append(scalar)
            bytes += length
        }
        return String(kept) + ellipsis
    }

    /// Whether `text` needs no escaping.
    public static func isSafe(_ text: some StringProtocol) -> Bool {
        !text.unicodeScalars.contains(where: isUnsafe)
    }

    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x2028, 0x2029: true  // line and paragraph separators
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true  // bidirectional controls
        default: false
        }
    }

    static func escape(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16)
        return scalar.value < 0x100 ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{\(hex)}"
    }
}
