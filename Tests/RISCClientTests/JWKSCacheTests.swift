import Foundation
import RISCCore
import RISCTestKit
import Synchronization
import Testing

@testable import RISCClient

@Suite("JWKS cache against a loopback issuer")
struct JWKSCacheTests {
    let rsKid = Fixture.keys.entry(for: .rs256)!.keyID

    @Test("fetches discovery then the key set, and serves keys by kid")
    func fetches() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger)
        let resolved = try await cache.key(for: rsKid)
        #expect(resolved.issuer == issuer.baseURL)
        #expect(resolved.key.keyID == rsKid)
        _ = try await cache.key(for: Fixture.keys.entry(for: .es256)!.keyID)
        #expect(issuer.requests(to: "/jwks") == 1)
        #expect(issuer.requests(to: "/.well-known/risc-configuration") == 1)
        #expect(await cache.counters.fetched == 1)
    }

    @Test("a key fetch runs on the receiver's own threads (BlockingPool.receiver), never on the pool that clients in the same process hold while they wait on the receiver")
    func keyFetchHasThreadsOfItsOwn() async throws {
        // Saturating the process-wide client pool to show it would stall every other test's
        // clients (it did: a CI run held them 46 s), so the property is checked where it is made.
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger)
        #expect(cache.pool === BlockingPool.receiver && BlockingPool.receiver !== BlockingPool.shared)
        _ = try await cache.key(for: rsKid)  // and it fetches through it
    }

    @Test("max-age is honoured: no fetch before expiry, a conditional one after, 304 revalidates")
    func maxAgeAndETag() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        issuer.update {
            $0.maxAge = 600; $0.etag = "\"v1\""
        }
        let clock = TestClock()
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger, now: clock.function)
        _ = try await cache.key(for: rsKid)
        clock.advance(590)
        _ = try await cache.key(for: rsKid)
        #expect(issuer.requests(to: "/jwks") == 1)
        clock.advance(20)
        _ = try await cache.key(for: rsKid)
        #expect(issuer.requests(to: "/jwks") == 2)
        let counters = await cache.counters
        #expect(counters.fetched == 1 && counters.revalidated == 1)
        // The 304 renewed the lifetime.
        clock.advance(590)
        _ = try await cache.key(for: rsKid)
        #expect(issuer.requests(to: "/jwks") == 2)
    }

    @Test("max-age is clamped to the configured bounds")
    func clamped() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        issuer.update { $0.maxAge = 1 }
        let clock = TestClock()
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger, now: clock.function)
        _ = try await cache.key(for: rsKid)
        clock.advance(30)  // max-age 1 s, minimum TTL 60 s
        _ = try await cache.key(for: rsKid)
        #expect(issuer.requests(to: "/jwks") == 1)
        let status = await cache.status()
        #expect((status.expiresIn ?? 0) > 29 && (status.expiresIn ?? 0) <= 30)
    }

    /// Found: a lifetime bound too large for an `Int` (set in code, or once by `jwks.min_ttl`)
    /// crashed the process in the fetch's log line.
    @Test("a lifetime of any size fetches and logs, never traps")
    func hugeLifetime() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        var configuration = Fixture.configuration(issuer)
        (configuration.minimumTTL, configuration.maximumTTL) = (1e300, 1e300)
        let log = CapturedLog()
        let cache = JWKSCache(configuration: configuration, logger: log.logger)
        _ = try await cache.key(for: rsKid)
        #expect(await cache.counters.fetched == 1)
        #expect(log.lines.withLock { $0 }.contains { $0.contains("key set fetched") && $0.contains("risc.jwks.ttl=1e+300") })
    }

    @Test("1,000 concurrent lookups of unknown kids cost one forced refetch")
    func unknownKidFlood() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger)
        _ = try await cache.key(for: rsKid)
        issuer.update { $0.jwksDelay = 0.2 }
        let outcomes = await withTaskGroup(of: String.self) { group in
            for index in 0..<1_000 {
                group.addTask {
                    do {
                        _ = try await cache.key(for: "junk-\(index)")
                        return "served"
                    } catch let error as SETError {
                        return error.code.rawValue
                    } catch {
                        return "other"
                    }
                }
            }
            var all: [String] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.allSatisfy { $0 == "invalid_key" })
        #expect(issuer.requests(to: "/jwks") == 2)
        let counters = await cache.counters
        #expect(counters.forcedRefetches == 1)
        #expect(counters.coalesced + counters.cooldownHits == 999)
        // Known kids are still served without another fetch.
        _ = try await cache.key(for: rsKid)
        #expect(issuer.requests(to: "/jwks") == 2)
    }

    @Test("the cooldown ends: a later unknown kid may force one more refetch, and a rotation is picked up")
    func rotation() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let clock = TestClock()
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger, now: clock.function)
        _ = try await cache.key(for: rsKid)
        await #expect(throws: SETError.self) { _ = try await cache.key(for: "rotated-key") }
        #expect(issuer.requests(to: "/jwks") == 2)
        let (rotated, entry) = try Fixture.rotatedKeySet(kid: "rotated-key")
        issuer.update { $0.jwks = rotated }
        clock.advance(30)
        await #expect(throws: SETError.self) { _ = try await cache.key(for: "rotated-key") }
        #expect(issuer.requests(to: "/jwks") == 2)  // within the 60 s cooldown
        #expect(await cache.counters.cooldownHits == 1)
        clock.advance(31)
        let resolved = try await cache.key(for: "rotated-key")
        #expect(resolved.key.keyID == entry.keyID)
        #expect(issuer.requests(to: "/jwks") == 3)
    }

    @Test("stale-if-error: an expired set is served while the issuer fails, up to the maximum staleness, then 503-kind errors")
    func staleIfError() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        issuer.update { $0.maxAge = 300 }
        let clock = TestClock()
        var configuration = Fixture.configuration(issuer)
        configuration.maximumStaleness = 3_600
        let cache = JWKSCache(configuration: configuration, logger: Fixture.logger, now: clock.function)
        _ = try await cache.key(for: rsKid)
        issuer.update { $0.failWith = 503 }
        clock.advance(1_000)
        _ = try await cache.key(for: rsKid)
        var counters = await cache.counters
        #expect(counters.staleServed == 1 && counters.fetchFailed >= 1)
        // An unknown kid while the issuer is down is temporary, not a rejection.
        await #expect(throws: KeyUnavailableError.self) { _ = try await cache.key(for: "new-kid") }
        clock.advance(3_000)  // 300 s lifetime + 3,600 s staleness passed
        await #expect(throws: KeyUnavailableError.self) { _ = try await cache.key(for: rsKid) }
        issuer.update { $0.failWith = nil }
        _ = try await cache.key(for: rsKid)
        counters = await cache.counters
        #expect(counters.fetched == 2)
    }

    /// A cache on a test clock with a 60 s unknown-`kid` cooldown and a 10 s failure backoff, its
    /// key set fetched.
    static func cooling(_ issuer: LocalIssuer) async throws -> (TestClock, JWKSCache) {
        let clock = TestClock()
        var configuration = Fixture.configuration(issuer)
        configuration.failureRetryInterval = 10
        configuration.unknownKeyCooldown = 60
        let cache = JWKSCache(configuration: configuration, logger: Fixture.logger, now: clock.function)
        _ = try await cache.key(for: Fixture.keys.entry(for: .rs256)!.keyID)
        return (clock, cache)
    }

    @Test("issue 24 #1: a flood of unknown kids while the issuer fails costs no more fetches than the cooldown allows")
    func outageFloodRespectsCooldown() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let (clock, cache) = try await Self.cooling(issuer)
        issuer.update { $0.failWith = 503 }
        let before = issuer.requests(to: "/jwks")
        // Two minutes of made-up kids, one every half second.
        for index in 0..<240 {
            await #expect(throws: KeyUnavailableError.self) { _ = try await cache.key(for: "made-up-\(index)") }
            clock.advance(0.5)
        }
        // One forced refetch at the start and one per 60 s cooldown after it: three at most
        // (one every 10 s before the fix: twelve).
        let fetches = issuer.requests(to: "/jwks") - before
        #expect(fetches >= 1 && fetches <= 3, "\(fetches) key-set fetches for a flood of unknown kids")
        // Known keys are still served from the held set all along.
        _ = try await cache.key(for: rsKid)
    }

    @Test("the wall clock set back an hour after a forced refetch: a key rotated in meanwhile is fetched for the first SET signed with it, not refused for the hour")
    func rotationAfterTheClockSteppedBack() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let (clock, cache) = try await Self.cooling(issuer)
        clock.advance(1)
        await #expect(throws: (any Error).self) { _ = try await cache.key(for: "made-up") }  // a forced refetch: the cooldown starts
        issuer.update { $0.jwks = Fixture.jwks.replacingOccurrences(of: self.rsKid, with: "rotated") }
        clock.advance(-3_600)
        #expect(try await cache.key(for: "rotated").key.keyID == "rotated")
    }

    @Test("an empty or invalid key set never replaces a good one", arguments: [#"{"keys":[]}"#, "not json", #"{"keys":[{"kty":"oct","k":"AA"}]}"#])
    func neverReplaceGood(bad: String) async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let clock = TestClock()
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger, now: clock.function)
        _ = try await cache.key(for: rsKid)
        issuer.update { $0.jwks = bad }
        clock.advance(400)
        _ = try await cache.key(for: rsKid)
        #expect(await cache.counters.fetchFailed == 1)
        #expect(await cache.status().keyIDs.contains(rsKid))
    }

    /// Found: the key set kept in the data directory was taken at a start as long as it came from
    /// the same discovery URL, though the configuration now pinned another issuer (or no longer
    /// allowed its `jwks_uri`'s host): while the issuer could not be reached, SETs of the issuer the
    /// operator had just stopped trusting were verified with it. It passes the checks a fetched
    /// document passes now, or is left unused.
    @Test(
        "cold start from the persisted copy while the issuer is down, then recovery; not when the configuration now pins another issuer or jwks_uri host"
    )
    func coldStartPersisted() async throws {
        let directory = Fixture.temporaryDirectory()
        let path = directory.appendingPathComponent("jwks-cache.json").path
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let first = JWKSCache(configuration: Fixture.configuration(issuer, persistence: path), logger: Fixture.logger)
        _ = try await first.key(for: rsKid)
        #expect(FileManager.default.fileExists(atPath: path))
        let persisted = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!persisted.contains("PRIVATE"))

        issuer.update { $0.failWith = 500 }
        let second = JWKSCache(configuration: Fixture.configuration(issuer, persistence: path), logger: Fixture.logger)
        #expect(await second.counters.loadedFromDisk == 1)
        let resolved = try await second.key(for: rsKid)
        #expect(resolved.issuer == issuer.baseURL)
        #expect(await second.status().source == .persisted)
        #expect(issuer.requests(to: "/jwks") == 1)  // fresh persisted copy: served without a fetch
        var pinned = Fixture.configuration(issuer, persistence: path)
        pinned.expectedIssuer = "https://another.example/"
        var hosts = Fixture.configuration(issuer, persistence: path)
        hosts.jwksHosts = ["keys.example"]
        for configuration in [pinned, hosts] {
            let cache = JWKSCache(configuration: configuration, logger: Fixture.logger)
            #expect(await cache.counters.loadedFromDisk == 0)
            await #expect(throws: KeyUnavailableError.self) { try await cache.key(for: rsKid) }
        }
    }

    @Test("cold start with no persisted copy and the issuer down is temporary, and recovers")
    func coldStartNothing() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        issuer.update { $0.failWith = 503 }
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger)
        await #expect(throws: KeyUnavailableError.self) { _ = try await cache.key(for: rsKid) }
        #expect(await cache.status().usable == false)
        issuer.update { $0.failWith = nil }
        _ = try await cache.key(for: rsKid)
        #expect(await cache.status().usable)
    }

    /// Found: with the issuer unreachable, every attempt (each `jwks.failure_retry`, 10 s) logged
    /// `issuer key set fetch failed` at warning: 360 lines an hour of one outage, where the serving
    /// page promises its first failure and its recovery once each. The attempts after the first
    /// are debug lines (`/readyz` and `risc_jwks_fetches_total` say the outage goes on).
    @Test("an outage of the issuer logs its first failed fetch and its recovery once each at warning and notice, not every attempt")
    func outageLoggedOnce() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        issuer.update { $0.failWith = 503 }
        let log = CapturedLog()
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: log.logger)
        for _ in 0..<5 { await #expect(throws: KeyUnavailableError.self) { _ = try await cache.key(for: rsKid) } }
        #expect(await cache.counters.fetchFailed == 5)
        func warnings() -> [String] { log.lines.withLock { $0 }.filter { $0.hasPrefix("warning issuer key set fetch failed") } }
        #expect(warnings().count == 1, "\(warnings())")
        #expect(log.lines.withLock { $0 }.filter { $0.hasPrefix("debug issuer key set fetch failed") }.count == 4)
        issuer.update { $0.failWith = nil }
        _ = try await cache.key(for: rsKid)
        #expect(log.lines.withLock { $0 }.filter { $0.hasPrefix("notice issuer key set fetch recovered") }.count == 1)
        issuer.update { $0.failWith = 503 }  // a new outage after the recovery: its first failure is a warning again
        await cache.refreshNow()
        #expect(warnings().count == 2, "\(warnings())")
    }

    @Test("a discovery document naming another issuer, or keys on a foreign host, is not used")
    func discoveryPinning() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks, issuer: "https://evil.example")
        defer { issuer.stop() }
        var configuration = Fixture.configuration(issuer)
        configuration.expectedIssuer = "https://accounts.google.com"
        let cache = JWKSCache(configuration: configuration, logger: Fixture.logger)
        await #expect(throws: KeyUnavailableError.self) { _ = try await cache.key(for: rsKid) }
        #expect(issuer.requests(to: "/jwks") == 0)

        let second = try LocalIssuer(jwks: Fixture.jwks)
        defer { second.stop() }
        second.update { $0.jwksURI = "http://example.com/jwks" }
        let cache2 = JWKSCache(configuration: Fixture.configuration(second), logger: Fixture.logger)
        await #expect(throws: KeyUnavailableError.self) { _ = try await cache2.key(for: rsKid) }
        var pinned = Fixture.configuration(second)
        pinned.jwksHosts = ["www.googleapis.com"]
        second.update { $0.jwksURI = nil }
        let cache3 = JWKSCache(configuration: pinned, logger: Fixture.logger)
        await #expect(throws: KeyUnavailableError.self) { _ = try await cache3.key(for: rsKid) }
        #expect(second.requests(to: "/jwks") == 0)
    }

    @Test("the background refresher renews the set ahead of expiry, when the cache's clock says so")
    func refreshAhead() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        issuer.update { $0.maxAge = 7_200 }
        var configuration = Fixture.configuration(issuer)
        configuration.refreshAheadFraction = 0.5
        let clock = TestClock()
        let cache = JWKSCache(configuration: configuration, logger: Fixture.logger, now: clock.function)
        await cache.refreshNow()
        let task = Task { await cache.run() }
        defer { task.cancel() }
        // Before half its lifetime nothing is fetched, however long it runs.
        clock.advance(3_500)
        try await Task.sleep(for: .milliseconds(300))
        #expect(issuer.requests(to: "/jwks") == 1)
        // Each half lifetime on the clock, one refresh (it slept an hour of real time before).
        for fetches in 2...4 {
            clock.advance(3_600)
            let done = await waitWhile { issuer.requests(to: "/jwks") < fetches }
            let status = await cache.status()
            #expect(done, "refresh \(fetches): \(status.counters), last error \(status.lastError ?? "none"), age \(status.age ?? -1) s")
        }
        #expect(issuer.requests(to: "/jwks") == 4)
        #expect(await cache.status().usable)
    }

    @Test("an end-to-end verification through the cache")
    func verifyThroughCache() async throws {
        let issuer = try LocalIssuer(jwks: Fixture.jwks)
        defer { issuer.stop() }
        let cache = JWKSCache(configuration: Fixture.configuration(issuer), logger: Fixture.logger)
        let factory = SETFactory(issuer: issuer.baseURL + "/", signer: Fixture.keys.entry(for: .rs256)!.signer)
        let verifier = SETVerifier(policy: SETPolicy(audiences: [SETFactory.defaultAudience]), keys: cache)
        let token = try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("9"))
        let validated = try await verifier.verify(Array(token.utf8), now: Date().timeIntervalSince1970)
        #expect(validated.events.first?.type == .sessionsRevoked)
    }
}
