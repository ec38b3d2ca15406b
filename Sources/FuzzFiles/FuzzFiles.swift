// libFuzzer target for what risc reads back from disk, where a crash would keep a receiver from
// starting: the journal's segments after a crash (records, then each record's fields and token),
// event-log lines through the chain verifier, `events.resume`, checkpoint notes and segment
// digests, and the configuration file (TOML or JSON, as `ConfigFile` reads it). Built as FuzzSET is
// (see scripts/fuzz).
import Foundation
import FuzzSupport
import RISCConfig
import RISCCore
import RISCLocal
import RISCSQLite

enum Target {
    /// The first byte picks what the rest is.
    static func run(_ bytes: [UInt8]) {
        guard let mode = bytes.first else { return }
        let input = Array(bytes.dropFirst())
        switch mode % 5 {
        case 0:
            // A segment as found after a crash; then the input as one record's payload, which a
            // CRC would otherwise keep the fuzzer from reaching.
            for record in SETJournal.records(in: input).records { _ = try? SETJournal.decode(record.payload) }
            _ = try? SETJournal.decode(input[...])
        case 1:
            _ = try? EventLogVerifier.verify(files: ["events.log"], keepTree: true, held: ["events.log": input])
        case 2:
            let text = String(decoding: input, as: UTF8.self)
            _ = EventLogResume(text: text)
            _ = try? EventLogCheckpoint.parse(note: text)
            _ = try? EventLogSegmentDigest.parse(text)
        case 3:
            // Lines of a log that verified as a chain, re-read: each is JSON the tools parse.
            for line in input.split(separator: 0x0A) { _ = try? JSONParser.parseObject(Array(line)) }
        default:
            // TOMLKit 0.6.0 never frees a parsed document (TOMLTable has no deinit) nor its error
            // buffer: every parse leaks it, which LeakSanitizer reports for any input. risc parses
            // its configuration once at the start and at each SIGHUP, so only this call's
            // allocations are left out of the leak check.
            leakCheck(false)
            defer { leakCheck(true) }
            _ = try? ConfigFile.parse(path: mode & 0x80 == 0 ? "risc.toml" : "risc.json", bytes: input)
        }
    }
}

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput") public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { FuzzEntry.run(data, size, Target.run) }
@_silgen_name("__lsan_disable") private func lsanDisable()
@_silgen_name("__lsan_enable") private func lsanEnable()
private func leakCheck(_ on: Bool) { on ? lsanEnable() : lsanDisable() }
#else
@main enum Runner { static func main() { FuzzEntry.replayFiles(Target.run) } }
private func leakCheck(_ on: Bool) {}
#endif
