import Foundation
import RISCCore
import Testing

@Suite("JSON parser")
struct JSONParserTests {
    @Test("parses values and keeps member order")
    func parses() throws {
        let value = try JSONParser.parse(#" {"b": [1, -2.5, 3e2, true, false, null], "a": "x\u00e9\ud83d\ude00\n", "c": {}} "#)
        let object = try #require(value.objectValue)
        #expect(object.keys == ["b", "a", "c"])
        #expect(object["b"] == [1, -2.5, 300, true, false, nil])
        #expect(object["a"] == .string("xé😀\n"))
        #expect(object["c"] == .object(JSONObject()))
    }

    @Test(
        "refuses malformed documents",
        arguments: [
            #"{"a":1,"a":2}"#, #"{"a":1,}"#, "[1,]", "01", "1.", "-", "+1", "1e", #"{"a" 1}"#, "tru", "nul",
            #""\ud800""#, #""\udc00x""#, "\"a\u{01}\"", #""\x""#, "[1] 2", "", "{", #"{"a":1"#, "1e999",
            String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
        ])
    func refuses(_ text: String) {
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(text) }
    }

    @Test("refuses invalid UTF-8")
    func invalidUTF8() {
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }
    }

    @Test("large objects stay unique and ordered")
    func largeObject() throws {
        let members = (0..<500).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let object = try JSONParser.parseObject(Array("{\(members)}".utf8))
        #expect(object.count == 500)
        #expect(object["k499"] == 499)
        #expect(object.keys.first == "k0")
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse("{\(members),\"k250\":1}") }
    }

    @Test("serializes and re-parses to the same value")
    func roundTrip() throws {
        let value: JSONValue = ["s": "quote\" back\\ ctl\u{01} é", "n": 1_508_184_845, "f": 0.5, "a": [true, nil]]
        #expect(try JSONParser.parse(value.serialized) == value)
        #expect(try JSONParser.parse(value.prettyPrinted) == value)
        #expect(JSONValue.number(1_508_184_845).serialized == "1508184845")
    }

    /// Found: `risc sign --iat nan` printed a SET whose payload held `"iat":nan`, and any number
    /// that is not finite (a rate over no time, say) would have made an event-log line that is not
    /// JSON. Such a number is written as `null`, as JSON.stringify writes it.
    @Test("a number that is not finite is written as null: the text is always JSON")
    func nonFiniteNumbers() throws {
        for number in [Double.nan, .infinity, -.infinity] {
            let text = JSONValue.object(["n": .number(number), "a": [.number(number)]]).serialized
            #expect(text == #"{"n":null,"a":[null]}"#)
            #expect(try JSONParser.parse(text) == ["n": nil, "a": [nil]])
        }
        #expect(JSONValue.number(1e300).serialized == "1e+300")
    }

    @Test("escapes exactly what must be escaped, byte runs copied as they are")
    func escaping() throws {
        let text = "a\"b\\c\nd\re\tf\u{01}g\u{7F}h\u{2028}i\u{2029}j€k\u{1F600}"
        #expect(JSONValue.string(text).serialized == #""a\"b\\c\nd\re\tf\u0001g\u007fh\u2028i\u2029j€k😀""#)
        #expect(JSONValue.object(["k\"": "v"]).prettyPrinted == "{\n  \"k\\\"\": \"v\"\n}")
        // C1 and bidirectional controls too (they reach terminals through `risc tail --pretty`);
        // their neighbours in UTF-8 (é, U+2030, U+202F, U+2070) are copied.
        let controls = "\u{9B}2J\u{85}\u{202E}x\u{200F}\u{2066}\u{2069}\u{061C}é\u{2030}\u{202F}\u{2070}\u{A0}"
        #expect(JSONValue.string(controls).serialized == #""\u009b2J\u0085\u202ex\u200f\u2066\u2069\u061cé‰\#u{202F}⁰\#u{A0}""#)
        #expect(try JSONParser.parse(Array(JSONValue.string(controls).serialized.utf8)) == .string(controls))
        var bytes: [UInt8] = []
        EventLogRecord(step: .log, outcome: .dropped, time: 0).write(to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"v":1,"ts":"1970-01-01T00:00:00.000000Z","step":"log","outcome":"dropped"}"# + "\n")
    }
}

@Suite("Timestamps")
struct TimestampTests {
    @Test("RFC 3339 UTC with microseconds, as Foundation formats the same instant")
    func matchesFoundation() {
        for seconds in [0.0, 1_508_184_845.25, 1_800_000_000.999999, 951_782_400.5, 4_102_444_799.000001] {
            let text = Timestamp.iso8601(seconds)
            #expect(text.count == 27)
            var components = Calendar(identifier: .gregorian).dateComponents(
                in: TimeZone(identifier: "UTC")!, from: Date(timeIntervalSince1970: seconds.rounded(.down)))
            components.nanosecond = nil
            let expected = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d", components.year!, components.month!, components.day!,
                components.hour!, components.minute!, components.second!)
            #expect(text.hasPrefix(expected), "\(text) vs \(expected)")
            #expect(text.hasSuffix("Z"))
        }
        #expect(Timestamp.iso8601(1_508_184_845.25) == "2017-10-16T20:14:05.250000Z")
    }
}
