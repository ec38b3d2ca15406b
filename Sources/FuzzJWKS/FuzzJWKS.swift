// libFuzzer target for key material from the network: JWK Sets, single JWKs (OpenSSL import),
// and discovery documents. Built as FuzzSET is (see scripts/fuzz).
import Foundation
import FuzzSupport
import RISCClient
import RISCCore

enum Target {
    /// The first byte picks what the rest is: a JWK Set, a discovery document, or one JWK.
    static func run(_ bytes: [UInt8]) {
        guard let mode = bytes.first else { return }
        let input = Array(bytes.dropFirst())
        switch mode % 3 {
        case 0:
            guard let set = try? JWKSet(json: input) else { return }
            for key in set.keys { _ = key.key.fits(.rs256) }
        case 1:
            _ = try? DiscoveryDocument(json: input)
        default:
            guard let object = try? JSONParser.parseObject(input) else { return }
            _ = try? JWK(json: object)
        }
    }
}

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput") public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { FuzzEntry.run(data, size, Target.run) }
#else
@main enum Runner { static func main() { FuzzEntry.replayFiles(Target.run) } }
#endif
