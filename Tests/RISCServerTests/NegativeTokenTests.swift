import Foundation
import Logging
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Synchronization
import Testing

@testable import RISCSQLite

@Suite("Negative tokens against the server", .serialized)
struct NegativeTokenTests {
    @Test("every --negative kind gets the answer it names")
    func allKinds() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        #expect(NegativeTokens.kinds.count == 10)
        for kind in NegativeTokens.kinds {
            let token = try #require(try NegativeTokens.make(kind.name, factory: harness.factory))
            let response = try await harness.post(token)
            let parts = kind.expected.split(separator: " ")
            #expect(response.status == Int(parts[0]), "\(kind.name)")
            if parts.count > 1 {
                #expect(try JSONParser.parseObject(response.body)["err"]?.stringValue == String(parts[1]), "\(kind.name)")
            }
        }
        #expect(try harness.receiver.storage.store.embedded!.events().count() == 0)
        #expect(try NegativeTokens.make("nonsense", factory: harness.factory) == nil)
        try await harness.stop()
        harness.issuer.stop()
    }
}
