import Foundation

/// The two ways a fuzz target runs (scripts/fuzz): under libFuzzer (`-DFUZZING`), which calls
/// `LLVMFuzzerTestOneInput` with each input, or built normally, as a runner that feeds each file
/// named on its command line (the kept inputs `swift test` replays) through the same function.
public enum FuzzEntry {
    /// libFuzzer's call, passed on to `run`.
    public static func run(_ data: UnsafePointer<UInt8>, _ size: Int, _ run: ([UInt8]) -> Void) -> CInt {
        run(Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }

    /// Each readable file named on the command line through `run`.
    public static func replayFiles(_ run: ([UInt8]) -> Void) {
        for path in CommandLine.arguments.dropFirst() {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            run(Array(data))
        }
    }
}
